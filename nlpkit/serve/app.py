"""The HTTP API (FastAPI): OpenAI's legacy completions and chat completions, the model list, health, and the
tokenizer endpoints lm-evaluation-harness's remote tokenizer uses (`/tokenize`, `/detokenize`, `/tokenizer_info`).

Every failure is an OpenAI-shaped error body, {"error": {"message", "type", "param", "code"}}: 400 a value the server
cannot honour, 401 a missing or wrong API key, 404 an unknown route or model, 413 a body over the limit, 422 a body
that is not the right JSON, 503 shutting down or too busy, 504 past the request timeout, 500 anything else (a
one-line message, never a traceback). The server keeps serving after each.

A request's prompts and choices become engine jobs (`nlpkit.serve.engine`); their results come back on the event
loop through one queue per request. A client that disconnects (a closed stream, or a dropped connection while a
non-streamed request waits) cancels its jobs: their sequences leave the batch at the next step.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import time
from contextlib import asynccontextmanager
from typing import AsyncIterator

import numpy as np
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from nlpkit.errors import NlpkitError
from nlpkit.serve.engine import EngineClosed, GenEnd, GenJob, GenStep, ScoreJob, ScoreResult
from nlpkit.serve.responses import (Choice, TokenLogprob, chat_body, chat_choice, chat_chunk, chat_logprobs,
                                    completion_body, completion_choice, completion_chunk, completion_logprobs,
                                    new_id, sse, usage, usage_chunk)
from nlpkit.serve.schemas import ApiError, chat_params, completion_params

MAX_BODY = 32 * 1024 * 1024   # bytes of a request body (lm-eval's batches of token ids stay far below)
TIMEOUT = 600.0               # seconds a request may take, queueing included
POLL = 0.5                    # seconds between checks that a waiting client is still connected
OPEN_PATHS = ("/health",)     # served without the API key (load balancers' probes)


class Disconnected(Exception):
    """The client went away: its jobs are cancelled, nothing is sent."""


def error_response(e: ApiError) -> JSONResponse:
    return JSONResponse(e.body(), status_code=e.status)


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
        def deliver(item, loop=self.loop, q=self.queue):
            loop.call_soon_threadsafe(q.put_nowait, (tag, item))
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
        checked = time.monotonic()
        try:
            while self.open:
                now = time.monotonic()
                left = self.deadline - now
                if left <= 0:
                    raise ApiError(504, "the request took longer than the server's timeout", None, "timeout")
                if watch and now - checked >= POLL:
                    checked = now
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


class Guard:
    """The API key on every route but /health, and the last resort: any failure a one-line 500, no traceback. A
    plain ASGI middleware: the route still sees its client disconnect (`Request.is_disconnected`)."""

    def __init__(self, app, api_key: str | None = None):
        self.app, self.api_key = app, api_key

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if self.api_key is not None and scope["path"] not in OPEN_PATHS:
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
            given = headers.get("authorization", "")
            token = given[7:].strip() if given[:7].lower() == "bearer " else headers.get("x-api-key", "")
            if not hmac.compare_digest(token.encode(), self.api_key.encode()):
                e = ApiError(401, "a valid API key is required (Authorization: Bearer KEY)", None, "invalid_api_key")
                return await error_response(e)(scope, receive, send)
        started = False

        async def tracked(message):
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except Exception as e:  # noqa: BLE001 - a one-line error, the server goes on
            if not started:
                await error_response(engine_error(e))(scope, receive, send)


async def read_json(request: Request, limit: int):
    """The body as JSON: 413 past `limit` bytes, 400 when it is not JSON."""
    size = request.headers.get("content-length")
    if size is not None and size.isdigit() and int(size) > limit:
        raise ApiError(413, f"the request body is {size} bytes, over the limit of {limit}", None, "too_large")
    chunks, total = [], 0
    async for chunk in request.stream():
        total += len(chunk)
        if total > limit:
            raise ApiError(413, f"the request body is over the limit of {limit} bytes", None, "too_large")
        chunks.append(chunk)
    try:
        return json.loads(b"".join(chunks))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ApiError(400, f"the request body is not valid JSON ({e})", None, "invalid_json") from None


def create_app(served, engine, *, api_key: str | None = None, max_body: int = MAX_BODY,
               timeout: float = TIMEOUT, grace: float = 30.0) -> FastAPI:
    """The API over `served` (a `ServedModel`) and `engine` (started on startup if it is not yet; stopped on
    shutdown, giving running requests `grace` seconds)."""

    @asynccontextmanager
    async def lifespan(app):
        if not engine.thread.is_alive() and engine.accepting:
            engine.start()
        yield
        await asyncio.get_running_loop().run_in_executor(None, engine.stop, grace)

    app = FastAPI(title="nlpkit serve", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)

    @app.exception_handler(ApiError)
    async def api_error(request, e: ApiError):
        return error_response(e)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request, e):
        message = "no such route: " + request.url.path if e.status_code == 404 else str(e.detail)
        return error_response(ApiError(e.status_code, message, None, "not_found" if e.status_code == 404 else None))

    app.add_middleware(Guard, api_key=api_key)

    def model_entry() -> dict:
        return {"id": served.name, "object": "model", "created": 0, "owned_by": "nlpkit",
                "max_model_len": served.context}

    @app.get("/health")
    async def health():
        if not engine.accepting:
            raise ApiError(503, "the server is shutting down", None, "unavailable")
        return {"status": "ok", "model": served.name, **engine.load}

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [model_entry()]}

    @app.get("/v1/models/{name:path}")
    async def model(name: str):
        if name != served.name:
            raise ApiError(404, f"no model {name!r} (this server serves {served.name!r})", "model",
                           "model_not_found")
        return model_entry()

    @app.get("/tokenizer_info")
    async def tokenizer_info():
        return served.tokenizer_info()

    @app.post("/tokenize")
    async def tokenize(request: Request):
        body = await read_json(request, max_body)
        if not isinstance(body, dict):
            raise ApiError(422, "the request body must be a JSON object", None, "invalid_type")
        add = body.get("add_special_tokens", True)
        if not isinstance(add, bool):
            raise ApiError(422, "`add_special_tokens` must be a boolean", "add_special_tokens", "invalid_type")
        if "messages" in body:
            params = chat_params({"messages": body["messages"]})
            inp, _ = _checked(served.chat_input, params.messages)
            ids = inp.ids
        else:
            text = body.get("prompt")
            if not isinstance(text, str):
                raise ApiError(422, "`prompt` must be a string", "prompt", "invalid_type")
            ids = _checked(served.tokenize, text, add)
        return {"tokens": ids, "count": len(ids), "max_model_len": served.context}

    @app.post("/detokenize")
    async def detokenize(request: Request):
        body = await read_json(request, max_body)
        ids = body.get("tokens") if isinstance(body, dict) else None
        if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            raise ApiError(422, "`tokens` must be an array of token ids", "tokens", "invalid_type")
        _checked(served.check_ids, ids)
        return {"prompt": served.decode(ids, skip_special=False)}

    @app.post("/v1/completions")
    async def completions(request: Request):
        p = completion_params(await read_json(request, max_body))
        return await _completion(served, engine, request, p, timeout)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        p = chat_params(await read_json(request, max_body))
        return await _chat(served, engine, request, p, timeout)

    return app


def _checked(fn, *args):
    """`fn(*args)`, the model's refusal (`NlpkitError`) as a 400."""
    try:
        return fn(*args)
    except NlpkitError as e:
        raise ApiError(400, str(e), None, "invalid_value") from None


def _inputs(served, prompts: list) -> list:
    """Each prompt as the model reads it, checked against the vocabulary and the context (400 naming it)."""
    out = []
    for k, prompt in enumerate(prompts):
        if isinstance(prompt, str):
            inp = _checked(served.read_text, prompt)
        else:
            _checked(served.check_ids, prompt)
            inp = _checked(served.read_ids, prompt)
        if len(inp.ids) > served.context:
            where = f"prompt {k}" if len(prompts) > 1 else "the prompt"
            raise ApiError(400, f"{where} is {len(inp.ids)} tokens, over the model's context of {served.context} "
                           "tokens", "prompt", "context_length_exceeded")
        out.append(inp)
    return out


def _rng(seed: int | None, choice: int) -> np.random.Generator:
    """A choice's generator: `seed` itself for the first (as `generate --seed`), (seed, k) for choice k."""
    if seed is None:
        return np.random.default_rng()
    return np.random.default_rng(seed if choice == 0 else [seed, choice])


def _sampling(s):
    try:
        return s.config()
    except NlpkitError as e:
        raise ApiError(400, str(e), None, "invalid_value") from None


def _echo_tokens(inp, scored: ScoreResult) -> list[TokenLogprob]:
    """The prompt's own tokens with their scores: the first has none unless the server put a BOS before it."""
    shown = inp.shown
    lps = [None] * (1 - inp.added) + list(scored.logprobs)
    tops = [None] * (1 - inp.added) + list(scored.top) if scored.top else [None] * len(shown)
    lps, tops = lps[len(lps) - len(shown):], tops[len(tops) - len(shown):]
    return [TokenLogprob(i, lp, top) for i, lp, top in zip(shown, lps, tops)]


def _final_text(served, c: Choice, stop) -> str:
    """A finished choice's text: its tokens decoded (special tokens left out), cut before the first stop string
    (lm-evaluation-harness's cut, `stop_strings.cut_at_stops`)."""
    from nlpkit.lm.transformer.stop_strings import cut_at_stops

    return cut_at_stops(served.decode(c.gen_ids), stop)


async def _completion(served, engine, request: Request, p, timeout: float):
    s = p.sampling
    cfg = _sampling(s)
    inputs = _inputs(served, p.prompts)
    n = s.n
    rid = new_id("cmpl")
    choices = [Choice(i * n + j) for i in range(len(inputs)) for j in range(n)]
    for i, (prompt, inp) in enumerate(zip(p.prompts, inputs)):
        text = prompt if isinstance(prompt, str) else served.decode(inp.shown, skip_special=False)
        for j in range(n):
            choices[i * n + j].echo_text = text
    scoring = p.echo and p.logprobs is not None
    quick = scoring and s.max_tokens == 1 and cfg.greedy and not s.stop   # the next token read off the scoring
    end_ids = served.end_ids()
    run = Run(engine, request, timeout)
    prompt_tokens = sum(len(inp.ids) for inp in inputs)

    def submit_scores():
        for i, inp in enumerate(inputs):
            run.submit(ScoreJob(inp.ids, p.logprobs or 0, quick, run.callback(("score", i))))

    def submit_generation():
        for i, inp in enumerate(inputs):
            for j in range(n):
                c = choices[i * n + j]
                if quick:
                    continue
                if s.max_tokens == 0:
                    c.finish = "length"
                    continue
                run.submit(GenJob(inp.ids, s.max_tokens, cfg, _rng(s.seed, j), s.stop, end_ids,
                                  p.logprobs or 0, run.callback(("gen", c.index))))

    def on_score(i: int, result: ScoreResult) -> list[Choice]:
        touched = choices[i * n:(i + 1) * n]
        for c in touched:
            c.echo_tokens = _echo_tokens(inputs[i], result)
            if quick:
                tid = result.next_id
                c.tokens = [TokenLogprob(tid, result.next_logprob, result.next_top)]
                if tid in end_ids:
                    c.finish = "stop"
                else:
                    c.gen_ids = [tid]
                    c.text = served.decode([tid])
                    c.finish = "length"
        return touched

    def on_gen(c: Choice, item) -> str:
        if isinstance(item, GenStep):
            c.tokens.append(TokenLogprob(item.token, item.logprob, item.top))
            if not item.end:
                c.gen_ids.append(item.token)
            return item.text
        c.finish = item.finish
        return item.text

    if not p.stream:
        if scoring:
            submit_scores()
        submit_generation()
        try:
            async for (kind, k), item in run.events():
                if kind == "score":
                    on_score(k, item)
                else:
                    on_gen(choices[k], item)
        except Disconnected:
            return JSONResponse({}, status_code=499)
        for c in choices:
            if not quick and s.max_tokens > 0:
                c.text = _final_text(served, c, s.stop)
        completion_tokens = sum(len(c.tokens) for c in choices)
        body = completion_body(rid, served.name, [completion_choice(served, c, p.logprobs is not None, p.echo)
                                                  for c in choices], usage(prompt_tokens, completion_tokens))
        return JSONResponse(body)

    async def stream():
        def chunk(c: Choice, text: str, tokens: list[TokenLogprob], finish, offset: int = 0) -> bytes:
            lp = completion_logprobs(served, tokens, offset) if p.logprobs is not None else None
            return sse(completion_chunk(rid, served.name, c.index, text, lp, finish))

        try:
            if scoring:
                submit_scores()
                async for (_, i), result in run.events():
                    for c in on_score(i, result):
                        yield chunk(c, c.echo_text, c.echo_tokens, None)
                        if quick:
                            yield chunk(c, c.text, c.tokens, c.finish, len(c.echo_text))
            elif p.echo:
                for c in choices:
                    yield chunk(c, c.echo_text, [], None)
            submit_generation()
            for c in choices:
                if c.finish == "length" and not quick and s.max_tokens == 0:
                    yield chunk(c, "", [], "length")
            shown = {c.index: len(c.echo_text) if p.echo else 0 for c in choices}
            async for (_, k), item in run.events(watch=False):
                c = choices[k]
                text = on_gen(c, item)
                tokens = [c.tokens[-1]] if isinstance(item, GenStep) else []
                if text or tokens or isinstance(item, GenEnd):
                    yield chunk(c, text, tokens, c.finish if isinstance(item, GenEnd) else None, shown[k])
                    shown[k] += len(text)
            if p.include_usage:
                yield sse(usage_chunk(rid, served.name, "text_completion",
                                      usage(prompt_tokens, sum(len(c.tokens) for c in choices))))
            yield sse("[DONE]")
        except ApiError as e:
            yield sse(e.body())
            yield sse("[DONE]")
        finally:
            run.cancel()

    return StreamingResponse(stream(), media_type="text/event-stream")


async def _chat(served, engine, request: Request, p, timeout: float):
    s = p.sampling
    cfg = _sampling(s)
    inp, end = _checked(served.chat_input, p.messages)
    if len(inp.ids) > served.context:
        raise ApiError(400, f"the conversation is {len(inp.ids)} tokens, over the model's context of "
                       f"{served.context} tokens", "messages", "context_length_exceeded")
    max_tokens = s.max_tokens if s.max_tokens is not None else served.context - len(inp.ids)
    end_ids = served.end_ids(end)
    top = p.top_logprobs if p.logprobs else 0
    rid = new_id("chatcmpl")
    choices = [Choice(j) for j in range(s.n)]
    run = Run(engine, request, timeout)

    def submit():
        for c in choices:
            if max_tokens == 0:
                c.finish = "length"
                continue
            run.submit(GenJob(inp.ids, max_tokens, cfg, _rng(s.seed, c.index), s.stop, end_ids, top,
                              run.callback(("gen", c.index))))

    def on_gen(c: Choice, item) -> str:
        if isinstance(item, GenStep):
            c.tokens.append(TokenLogprob(item.token, item.logprob, item.top))
            if not item.end:
                c.gen_ids.append(item.token)
            return item.text
        c.finish = item.finish
        return item.text

    if not p.stream:
        submit()
        try:
            async for (_, k), item in run.events():
                on_gen(choices[k], item)
        except Disconnected:
            return JSONResponse({}, status_code=499)
        for c in choices:
            c.text = _final_text(served, c, s.stop)
        body = chat_body(rid, served.name, [chat_choice(served, c, p.logprobs) for c in choices],
                         usage(len(inp.ids), sum(len(c.tokens) for c in choices)))
        return JSONResponse(body)

    async def stream():
        try:
            submit()
            for c in choices:
                yield sse(chat_chunk(rid, served.name, c.index, {"role": "assistant", "content": ""}, None, None))
                if c.finish:
                    yield sse(chat_chunk(rid, served.name, c.index, {}, None, c.finish))
            async for (_, k), item in run.events(watch=False):
                c = choices[k]
                text = on_gen(c, item)
                lp = chat_logprobs(served, [c.tokens[-1]]) if p.logprobs and isinstance(item, GenStep) else None
                if isinstance(item, GenEnd):
                    if text:
                        yield sse(chat_chunk(rid, served.name, k, {"content": text}, None, None))
                    yield sse(chat_chunk(rid, served.name, k, {}, None, c.finish))
                elif text or lp:
                    yield sse(chat_chunk(rid, served.name, k, {"content": text}, lp, None))
            if p.include_usage:
                yield sse(usage_chunk(rid, served.name, "chat.completion.chunk",
                                      usage(len(inp.ids), sum(len(c.tokens) for c in choices))))
            yield sse("[DONE]")
        except ApiError as e:
            yield sse(e.body())
            yield sse("[DONE]")
        finally:
            run.cancel()

    return StreamingResponse(stream(), media_type="text/event-stream")
