"""A completions or chat request -> engine jobs -> the response (a JSON body, or server-sent events).

`Run` carries one request's jobs: results come back from the engine thread through one queue on the event loop,
with the request's deadline (504 past it) and its client (a client gone cancels the jobs). `Completion` and `Chat`
build each choice from the results: the echoed prompt and its scores, the generated tokens, the text, why it ended.
"""

from __future__ import annotations

import asyncio
import time
from typing import AsyncIterator

import numpy as np
from fastapi import Request
from fastapi.responses import JSONResponse, StreamingResponse

from nlpkit.errors import NlpkitError
from nlpkit.serve.engine import EngineClosed, GenEnd, GenJob, GenStep, ScoreJob, ScoreResult
from nlpkit.serve.responses import (Choice, TokenLogprob, chat_body, chat_choice, chat_chunk, chat_logprobs,
                                    completion_body, completion_choice, completion_chunk, completion_logprobs,
                                    new_id, sse, usage, usage_chunk)
from nlpkit.serve.schemas import ApiError

POLL = 0.5  # seconds between checks that a waiting client is still connected


class Disconnected(Exception):
    """The client went away: its jobs are cancelled, nothing is sent."""


def engine_error(e: Exception) -> ApiError:
    """An engine job's failure as the client sees it: the model's own refusal (a prompt it cannot take) is 400,
    a closed engine 503, anything else 500 with a one-line message."""
    if isinstance(e, ApiError):
        return e
    if isinstance(e, EngineClosed):
        return ApiError(503, str(e), None, "unavailable")
    if isinstance(e, NlpkitError):
        return ApiError(400, str(e), None, "invalid_value")
    return ApiError(500, f"internal error: {type(e).__name__}: {e}", None, "internal_error")


def checked(fn, *args):
    """`fn(*args)`, the model's refusal (`NlpkitError`) as a 400."""
    try:
        return fn(*args)
    except NlpkitError as e:
        raise ApiError(400, str(e), None, "invalid_value") from None


class Run:
    """One request's jobs on the engine, their results handed to the event loop, the deadline and the client."""

    def __init__(self, engine, request: Request, timeout: float):
        self.engine = engine
        self.request = request
        self.loop = asyncio.get_running_loop()
        self.queue: asyncio.Queue = asyncio.Queue()
        self.jobs: list = []
        self.open = 0
        self.deadline = time.monotonic() + timeout

    def callback(self, tag):
        """What the engine calls with a result, an event, or a list of events (one wake-up for all)."""
        def put(item, q=self.queue):
            for one in item if isinstance(item, list) else [item]:
                q.put_nowait((tag, one))

        def deliver(item, loop=self.loop):
            loop.call_soon_threadsafe(put, item)
        return deliver

    def submit(self, job) -> None:
        try:
            self.engine.submit(job)
        except EngineClosed as e:
            self.cancel()
            raise ApiError(503, str(e), None, "unavailable") from None
        self.jobs.append(job)
        self.open += 1

    def cancel(self) -> None:
        for job in self.jobs:
            job.cancelled = True

    async def events(self, watch: bool = True) -> AsyncIterator[tuple]:
        """(tag, result) of every job until each has finished; a failed job raises its `ApiError`; past the
        deadline 504; with `watch`, a client gone raises `Disconnected` (the jobs cancelled either way)."""
        checked_at = time.monotonic()
        try:
            while self.open:
                now = time.monotonic()
                left = self.deadline - now
                if left <= 0:
                    raise ApiError(504, "the request took longer than the server's timeout", None, "timeout")
                if watch and now - checked_at >= POLL:
                    checked_at = now
                    if await self.request.is_disconnected():
                        raise Disconnected()
                try:
                    tag, item = await asyncio.wait_for(self.queue.get(), min(POLL, left))
                except asyncio.TimeoutError:
                    continue
                if isinstance(item, Exception):
                    raise engine_error(item)
                if isinstance(item, (ScoreResult, GenEnd)):
                    self.open -= 1
                yield tag, item
        except BaseException:
            self.cancel()
            raise


def rng(seed: int | None, choice: int) -> np.random.Generator:
    """A choice's generator: `seed` itself for the first (as `generate --seed`), (seed, k) for choice k."""
    if seed is None:
        return np.random.default_rng()
    return np.random.default_rng(seed if choice == 0 else [seed, choice])


def sampling_config(s):
    try:
        return s.config()
    except NlpkitError as e:
        raise ApiError(400, str(e), None, "invalid_value") from None


def final_text(served, c: Choice, stop) -> str:
    """A finished choice's text: its tokens decoded (special tokens left out), cut before the first stop string
    (lm-evaluation-harness's cut, `stop_strings.cut_at_stops`)."""
    from nlpkit.lm.transformer.stop_strings import cut_at_stops

    return cut_at_stops(served.decode(c.gen_ids), stop)


def on_generated(c: Choice, item) -> str:
    """A generation event into its choice; the text it releases."""
    if isinstance(item, GenStep):
        c.tokens.append(TokenLogprob(item.token, item.logprob, item.top))
        if not item.end:
            c.gen_ids.append(item.token)
        return item.text
    c.finish = item.finish
    return item.text


def prompt_inputs(served, prompts: list) -> list:
    """Each prompt as the model reads it, checked against the vocabulary and the context (400 naming it)."""
    out = []
    for k, prompt in enumerate(prompts):
        if isinstance(prompt, str):
            inp = checked(served.read_text, prompt)
        else:
            checked(served.check_ids, prompt)
            inp = checked(served.read_ids, prompt)
        if len(inp.ids) > served.context:
            where = f"prompt {k}" if len(prompts) > 1 else "the prompt"
            raise ApiError(400, f"{where} is {len(inp.ids)} tokens, over the model's context of {served.context} "
                           "tokens", "prompt", "context_length_exceeded")
        out.append(inp)
    return out


def echo_tokens(inp, scored: ScoreResult) -> list[TokenLogprob]:
    """The prompt's own tokens with their scores: the first has none unless the server put a BOS before it."""
    shown = inp.shown
    lps = [None] * (1 - inp.added) + list(scored.logprobs)
    tops = [None] * (1 - inp.added) + list(scored.top) if scored.top else [None] * len(shown)
    lps, tops = lps[len(lps) - len(shown):], tops[len(tops) - len(shown):]
    return [TokenLogprob(i, lp, top) for i, lp, top in zip(shown, lps, tops)]


class Completion:
    """`POST /v1/completions`: per prompt a scoring job when the prompt's log-probabilities are echoed, and `n`
    generation jobs (none when a greedy one-token completion can be read off the scoring: lm-evaluation-harness's
    loglikelihood requests)."""

    def __init__(self, served, engine, request: Request, p, timeout: float):
        self.served, self.p, self.s = served, p, p.sampling
        self.cfg = sampling_config(self.s)
        self.inputs = prompt_inputs(served, p.prompts)
        self.rid = new_id("cmpl")
        n = self.s.n
        self.choices = [Choice(i * n + j) for i in range(len(self.inputs)) for j in range(n)]
        for i, (prompt, inp) in enumerate(zip(p.prompts, self.inputs)):
            text = prompt if isinstance(prompt, str) else served.decode(inp.shown, skip_special=False)
            for c in self.choices[i * n:(i + 1) * n]:
                c.echo_text = text
        self.scoring = p.echo and p.logprobs is not None
        self.quick = self.scoring and self.s.max_tokens == 1 and self.cfg.greedy and not self.s.stop
        self.end_ids = served.end_ids()
        self.run = Run(engine, request, timeout)
        self.prompt_tokens = sum(len(inp.ids) for inp in self.inputs)

    def submit_scores(self) -> None:
        for i, inp in enumerate(self.inputs):
            self.run.submit(ScoreJob(inp.ids, self.p.logprobs or 0, self.quick, self.run.callback(("score", i))))

    def submit_generation(self) -> None:
        s = self.s
        for i, inp in enumerate(self.inputs):
            for j in range(s.n):
                c = self.choices[i * s.n + j]
                if self.quick:
                    continue
                if s.max_tokens == 0:
                    c.finish = "length"
                    continue
                self.run.submit(GenJob(inp.ids, s.max_tokens, self.cfg, rng(s.seed, j), s.stop, self.end_ids,
                                       self.p.logprobs or 0, self.run.callback(("gen", c.index)),
                                       logprobs=self.p.logprobs is not None, stream=self.p.stream))

    def on_score(self, i: int, result: ScoreResult) -> list[Choice]:
        n = self.s.n
        touched = self.choices[i * n:(i + 1) * n]
        for c in touched:
            c.echo_tokens = echo_tokens(self.inputs[i], result)
            if self.quick:
                tid = result.next_id
                c.tokens = [TokenLogprob(tid, result.next_logprob, result.next_top)]
                if tid in self.end_ids:
                    c.finish = "stop"
                else:
                    c.gen_ids, c.text, c.finish = [tid], self.served.decode([tid]), "length"
        return touched

    async def respond(self):
        if self.p.stream:
            return StreamingResponse(self.stream(), media_type="text/event-stream")
        if self.scoring:
            self.submit_scores()
        self.submit_generation()
        try:
            async for (kind, k), item in self.run.events():
                if kind == "score":
                    self.on_score(k, item)
                else:
                    on_generated(self.choices[k], item)
        except Disconnected:
            return JSONResponse({}, status_code=499)
        if not self.quick and self.s.max_tokens > 0:
            for c in self.choices:
                c.text = final_text(self.served, c, self.s.stop)
        body = completion_body(self.rid, self.served.name,
                               [completion_choice(self.served, c, self.p.logprobs is not None, self.p.echo)
                                for c in self.choices], usage(self.prompt_tokens, self.completion_tokens()))
        return JSONResponse(body)

    def completion_tokens(self) -> int:
        return sum(len(c.tokens) for c in self.choices)

    def chunk(self, c: Choice, text: str, tokens: list[TokenLogprob], finish, offset: int = 0) -> bytes:
        lp = completion_logprobs(self.served, tokens, offset) if self.p.logprobs is not None else None
        return sse(completion_chunk(self.rid, self.served.name, c.index, text, lp, finish))

    async def stream(self):
        """Echo chunks first (after the scores when they are asked for), then each choice's text as it grows."""
        try:
            async for chunk in self.stream_echo():
                yield chunk
            self.submit_generation()
            for c in self.choices:
                if c.finish == "length" and not self.quick and self.s.max_tokens == 0:
                    yield self.chunk(c, "", [], "length")
            shown = {c.index: len(c.echo_text) if self.p.echo else 0 for c in self.choices}
            async for (_, k), item in self.run.events(watch=False):
                c = self.choices[k]
                text = on_generated(c, item)
                tokens = [c.tokens[-1]] if isinstance(item, GenStep) else []
                if text or isinstance(item, GenEnd) or (tokens and self.p.logprobs is not None):
                    yield self.chunk(c, text, tokens, c.finish if isinstance(item, GenEnd) else None, shown[k])
                shown[k] += len(text)
            if self.p.include_usage:
                yield sse(usage_chunk(self.rid, self.served.name, "text_completion",
                                      usage(self.prompt_tokens, self.completion_tokens())))
            yield sse("[DONE]")
        except ApiError as e:
            yield sse(e.body())
            yield sse("[DONE]")
        finally:
            self.run.cancel()

    async def stream_echo(self):
        if self.scoring:
            self.submit_scores()
            async for (_, i), result in self.run.events(watch=False):
                for c in self.on_score(i, result):
                    yield self.chunk(c, c.echo_text, c.echo_tokens, None)
                    if self.quick:
                        yield self.chunk(c, c.text, c.tokens, c.finish, len(c.echo_text))
        elif self.p.echo:
            for c in self.choices:
                yield self.chunk(c, c.echo_text, [], None)


class Chat:
    """`POST /v1/chat/completions`: the conversation rendered by the model's chat template, `n` generation jobs
    that end at the template's end of turn."""

    def __init__(self, served, engine, request: Request, p, timeout: float):
        self.served, self.p, self.s = served, p, p.sampling
        self.cfg = sampling_config(self.s)
        self.inp, end = checked(served.chat_input, p.messages)
        if len(self.inp.ids) > served.context:
            raise ApiError(400, f"the conversation is {len(self.inp.ids)} tokens, over the model's context of "
                           f"{served.context} tokens", "messages", "context_length_exceeded")
        s = self.s
        self.max_tokens = s.max_tokens if s.max_tokens is not None else served.context - len(self.inp.ids)
        self.end_ids = served.end_ids(end)
        self.top = p.top_logprobs if p.logprobs else 0
        self.rid = new_id("chatcmpl")
        self.choices = [Choice(j) for j in range(s.n)]
        self.run = Run(engine, request, timeout)

    def submit(self) -> None:
        for c in self.choices:
            if self.max_tokens == 0:
                c.finish = "length"
                continue
            self.run.submit(GenJob(self.inp.ids, self.max_tokens, self.cfg, rng(self.s.seed, c.index), self.s.stop,
                                   self.end_ids, self.top, self.run.callback(("gen", c.index)),
                                   logprobs=self.p.logprobs, stream=self.p.stream))

    def usage(self) -> dict:
        return usage(len(self.inp.ids), sum(len(c.tokens) for c in self.choices))

    async def respond(self):
        if self.p.stream:
            return StreamingResponse(self.stream(), media_type="text/event-stream")
        self.submit()
        try:
            async for (_, k), item in self.run.events():
                on_generated(self.choices[k], item)
        except Disconnected:
            return JSONResponse({}, status_code=499)
        for c in self.choices:
            c.text = final_text(self.served, c, self.s.stop)
        return JSONResponse(chat_body(self.rid, self.served.name,
                                      [chat_choice(self.served, c, self.p.logprobs) for c in self.choices],
                                      self.usage()))

    def chunk(self, index: int, delta: dict, logprobs, finish) -> bytes:
        return sse(chat_chunk(self.rid, self.served.name, index, delta, logprobs, finish))

    async def stream(self):
        try:
            self.submit()
            for c in self.choices:
                yield self.chunk(c.index, {"role": "assistant", "content": ""}, None, None)
                if c.finish:
                    yield self.chunk(c.index, {}, None, c.finish)
            async for (_, k), item in self.run.events(watch=False):
                c = self.choices[k]
                text = on_generated(c, item)
                if isinstance(item, GenEnd):
                    if text:
                        yield self.chunk(k, {"content": text}, None, None)
                    yield self.chunk(k, {}, None, c.finish)
                else:
                    lp = chat_logprobs(self.served, [c.tokens[-1]]) if self.p.logprobs else None
                    if text or lp:
                        yield self.chunk(k, {"content": text}, lp, None)
            if self.p.include_usage:
                yield sse(usage_chunk(self.rid, self.served.name, "chat.completion.chunk", self.usage()))
            yield sse("[DONE]")
        except ApiError as e:
            yield sse(e.body())
            yield sse("[DONE]")
        finally:
            self.run.cancel()
