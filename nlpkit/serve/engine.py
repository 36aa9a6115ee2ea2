"""The worker that owns the model: one thread runs every request, so the model's forwards never overlap and each
one is as wide as the waiting work allows.

- Scoring (`ScoreJob`: a prompt's token log-probabilities, what ``echo`` returns): the waiting prompts are scored
  together (`prompt_scoring.score_prompts`, on the packing `nlpkit score` uses: many prompts per forward, prompts
  that begin alike -- lm-evaluation-harness's choices of one item -- sharing their beginning's rows, each one's
  numbers the bits it gets alone), a block of at most `SCORE_TOKENS` tokens at a time so that generation keeps
  moving. With `next_token`, the row after the prompt is read too (its most likely token: a greedy one-token
  completion costs no decoding).
- Generation (`GenJob`): continuous batching on the model's decoding batch (`LanguageModel.decoding_batch`, one
  forward per step for every live sequence): between two steps finished sequences leave, cancelled ones (a client
  that went away) leave and free their cache, and waiting ones join (prefilled together, at most
  `batch_generation.PREFILL_TOKENS` tokens per packed forward) while the batch has room: `batch_size` sequences and
  the batch's KV memory budget (`can_take`). Each sequence samples with its own generator, as `generate --seed`.

Results go back through each job's callback (called on the worker thread; the web layer hands them to its event
loop). `stop(grace)` stops taking jobs, lets the running ones finish for `grace` seconds, then fails the rest.
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

SCORE_TOKENS = 4096   # prompt tokens scored per engine turn (several packed forwards), then a decoding step
MAX_QUEUED = 4096     # jobs waiting at most: more is 503 (memory stays bounded whatever the clients send)


class EngineClosed(Exception):
    """The engine takes no more work (shutting down, or its queue is full)."""


@dataclass
class ScoreResult:
    """A scored prompt: the log-probability of each token after the first (`logprobs`), each position's `top`
    (ids, log-probabilities) when asked, and with `next_token` the most likely next token, its log-probability and
    its position's top."""

    logprobs: list[float]
    top: list[tuple[tuple[int, ...], tuple[float, ...]]]
    next_id: int | None = None
    next_logprob: float | None = None
    next_top: tuple | None = None


@dataclass
class ScoreJob:
    ids: list[int]
    top: int
    next_token: bool
    reply: Callable[[object], None]   # a ScoreResult or an Exception
    cancelled: bool = False


@dataclass
class GenStep:
    """One generated token: its id, log-probability under the model (None when not asked for), top (ids,
    log-probabilities), and the text it releases (held back while it could be the start of a stop string; '' for an
    end token)."""

    token: int
    logprob: float | None
    top: tuple | None
    text: str
    end: bool = False


@dataclass
class GenEnd:
    """A finished sequence: why (stop: an end token or a stop string; length: max_tokens or the context), the text
    released at the end, and the generated ids (an end token left out)."""

    finish: str
    text: str
    ids: list[int]


@dataclass
class GenJob:
    ids: list[int]
    max_tokens: int
    sampling: object            # nlpkit.lm.generation.sampling.SamplingConfig
    rng: np.random.Generator
    stop: tuple[str, ...]
    end_ids: frozenset
    top: int
    emit: Callable[[object], None]   # GenStep, then GenEnd; or an Exception
    cancelled: bool = False
    key: int = 0
    logprobs: bool = True   # False: each token's log-probability is not computed (None)
    stream: bool = True     # False: the steps are handed over with the end, in one call (no per-token wake-up)
    held: list = field(default_factory=list)


class DecodedText:
    """A sequence's text as it grows: the generated ids decoded whole (special tokens left out, as the final text
    is), released piece by piece, never a part of a stop string nor a trailing U+FFFD (maybe half a character);
    `stopped` once a stop string appears (the text ends before it). The pieces join to the final text."""

    def __init__(self, decode: Callable[[list[int]], str], stop: tuple[str, ...]):
        self.decode = decode
        self.stop = [s for s in stop if s]
        self.ids: list[int] = []
        self.shown = 0
        self.stopped = False

    def push(self, token_id: int) -> str:
        self.ids.append(int(token_id))
        text = self.decode(self.ids)
        hits = [i for i in (text.find(s) for s in self.stop) if i >= 0]
        if hits:
            self.stopped = True
            return self._release(text, min(hits))
        safe = len(text)
        for s in self.stop:   # the longest tail that may be the start of a stop string stays held
            for k in range(min(len(s) - 1, len(text)), 0, -1):
                if text.endswith(s[:k]):
                    safe = min(safe, len(text) - k)
                    break
        while safe > self.shown and text[safe - 1] == "\ufffd":
            safe -= 1
        return self._release(text, safe)

    def finish(self) -> str:
        """The held-back rest (at the end of the sequence)."""
        if self.stopped:
            return ""
        return self._release(self.decode(self.ids), None)

    def _release(self, text: str, end: int | None) -> str:
        end = len(text) if end is None else end
        out = text[self.shown:end] if end > self.shown else ""
        self.shown = max(self.shown, end)
        return out


@dataclass
class _Live:
    job: GenJob
    logits: np.ndarray  # [V] the next token's
    stream: DecodedText
    ids: list[int] = field(default_factory=list)


@dataclass
class EngineStats:
    """Totals since the start (for benchmarks and `/health`)."""

    scored_prompts: int = 0
    scored_tokens: int = 0
    generated_tokens: int = 0
    steps: int = 0
    most_live: int = 0


class Engine:
    """The worker thread and its queues (see the module docstring)."""

    def __init__(self, served, batch_size: int = 32, max_queued: int = MAX_QUEUED):
        from nlpkit.lm.generation.batch_generation import PREFILL_TOKENS

        self.served = served
        self.batch_size = batch_size
        self.max_queued = max_queued
        self.prefill_tokens = PREFILL_TOKENS
        self.inbox: queue.Queue = queue.Queue()
        self.scores: deque[ScoreJob] = deque()
        self.waiting: deque[GenJob] = deque()
        self.live: dict[int, _Live] = {}
        self.stats = EngineStats()
        self.accepting = True
        self._stopping = False
        self._abort = False
        self._keys = itertools.count()
        self.batch = None
        self.prefixes = None  # prompt_scoring.PrefixStore: echoed prompts' beginnings kept from one block to the next
        self.thread = threading.Thread(target=self._loop, name="nlpkit-serve-engine", daemon=True)

    # ------------------------------------------------------------------ the web layer's side
    def start(self) -> None:
        self.batch = self.served.lm.decoding_batch(self.served.context)
        self.thread.start()

    def submit(self, job: ScoreJob | GenJob) -> None:
        """Queue a job; `EngineClosed` when shutting down or when too many wait."""
        if not self.accepting:
            raise EngineClosed("the server is shutting down")
        if self.inbox.qsize() + len(self.scores) + len(self.waiting) >= self.max_queued:
            raise EngineClosed(f"the server is busy ({self.max_queued} requests waiting); retry later")
        if isinstance(job, GenJob):
            job.key = next(self._keys)
        self.inbox.put(job)

    def stop(self, grace: float) -> None:
        """Take no more jobs; let the queued and running ones finish within `grace` seconds, then fail the rest
        (`EngineClosed`)."""
        self.accepting = False
        self._stopping = True
        if self.thread.is_alive():
            self.thread.join(max(0.0, grace))
        if self.thread.is_alive():
            self._abort = True
            self.thread.join(10.0)

    @property
    def load(self) -> dict:
        return {"queued": self.inbox.qsize() + len(self.scores) + len(self.waiting), "live": len(self.live)}

    # ------------------------------------------------------------------ the worker
    def _loop(self) -> None:
        while True:
            idle = not (self.live or self.waiting or self.scores)
            if idle and self._stopping and self.inbox.empty():
                return
            self._take(block=idle)
            if self._abort:
                self._fail_all(EngineClosed("the server shut down before this request finished"))
                return
            self._drop_cancelled()
            if self.scores:
                self._score_block()
            if self._admit() and len(self.live) < self.batch_size:
                # requests that arrived during that prefill join before the next step: one packed prefill now
                # rather than a step of the few live rows first (a burst of clients lands during the first one's)
                self._take(block=False)
                self._drop_cancelled()
                self._admit()
            if self.live:
                self._step()

    def _take(self, block: bool) -> None:
        try:
            job = self.inbox.get(timeout=0.1) if block else self.inbox.get_nowait()
        except queue.Empty:
            return
        while True:
            (self.scores if isinstance(job, ScoreJob) else self.waiting).append(job)
            try:
                job = self.inbox.get_nowait()
            except queue.Empty:
                return

    def _fail_all(self, error: Exception) -> None:
        self._take(block=False)
        for job in [*self.scores, *self.waiting, *(s.job for s in self.live.values())]:
            _send(job.reply if isinstance(job, ScoreJob) else job.emit, error)
        self.scores.clear()
        self.waiting.clear()
        self.live.clear()

    def _drop_cancelled(self) -> None:
        for key in [k for k, s in self.live.items() if s.job.cancelled]:
            self._leave(key)
        if any(j.cancelled for j in self.waiting):
            self.waiting = deque(j for j in self.waiting if not j.cancelled)
        if any(j.cancelled for j in self.scores):
            self.scores = deque(j for j in self.scores if not j.cancelled)

    # ------------------------------------------------------------------ scoring
    def _score_block(self) -> None:
        block: list[ScoreJob] = []
        tokens = 0
        while self.scores and (not block or tokens + len(self.scores[0].ids) <= SCORE_TOKENS):
            job = self.scores.popleft()
            tokens += len(job.ids)
            if len(job.ids) < 2 and not job.next_token:   # one token: nothing to score
                _send(job.reply, ScoreResult([], []))
            else:
                block.append(job)
        if not block:
            return
        try:
            results = self._score(block)
        except Exception as e:  # noqa: BLE001 - one bad job must not fail its block: each alone, its own error
            if len(block) == 1:
                _send(block[0].reply, e)
                return
            for job in block:
                try:
                    results = self._score([job])
                    _send(job.reply, results[0])
                except Exception as e1:  # noqa: BLE001
                    _send(job.reply, e1)
            return
        for job, result in zip(block, results):
            _send(job.reply, result)

    def _score(self, block: list[ScoreJob]) -> list[ScoreResult]:
        from nlpkit.lm.transformer.prompt_scoring import PrefixStore, score_prompts

        if self.prefixes is None:
            self.prefixes = PrefixStore()
        top = max(max(j.top for j in block), 1 if any(j.next_token for j in block) else 0)
        scored = score_prompts(self.served.scorer, [(j.ids, j.next_token) for j in block], top=top,
                               store=self.prefixes)
        out = []
        for job, s in zip(block, scored):
            lps, tops = list(s.token_logprobs), [(ids[:job.top], lp[:job.top]) for ids, lp in s.top]
            result = ScoreResult(lps, tops if job.top else [])
            if job.next_token:
                ids, lp = s.top[-1]
                result = ScoreResult(lps[:-1], result.top[:-1], ids[0], lp[0], tops[-1] if job.top else None)
            out.append(result)
            self.stats.scored_prompts += 1
            self.stats.scored_tokens += len(job.ids)
        return out

    # ------------------------------------------------------------------ generation
    def _admit(self) -> bool:
        """Waiting jobs join the batch while it has room (prefilled in packed groups); whether any joined."""
        joining: list[GenJob] = []
        ctx = self.served.context
        while self.waiting and len(self.live) + len(joining) < self.batch_size:
            job = self.waiting[0]
            want = [min(ctx, len(j.ids) + j.max_tokens) for j in [*joining, job]]
            if (self.live or joining) and not self.batch.can_take(want):
                break
            self.waiting.popleft()
            if job.max_tokens == 0:
                _send(job.emit, GenEnd("length", "", []))
                continue
            joining.append(job)
        group: list[GenJob] = []
        size = 0
        for job in joining:
            if group and size + len(job.ids) > self.prefill_tokens:
                self._join(group)
                group, size = [], 0
            group.append(job)
            size += len(job.ids)
        if group:
            self._join(group)
        return bool(joining)

    def _join(self, group: list[GenJob]) -> None:
        try:
            rows = self.batch.join_many([(j.key, j.ids, j.max_tokens) for j in group])
        except Exception as e:  # noqa: BLE001 - a prompt the batch refuses: its request fails, the rest go on
            for j in group:
                self.batch.leave(j.key)
            if len(group) > 1:
                for j in group:
                    self._join([j])
            else:
                _send(group[0].emit, e)
            return
        for job, logits in zip(group, rows):
            self.live[job.key] = _Live(job, logits, DecodedText(self.served.decode, job.stop))
        self.stats.most_live = max(self.stats.most_live, len(self.live))

    def _leave(self, key: int) -> None:
        self.live.pop(key, None)
        self.batch.leave(key)

    def _step(self) -> None:
        try:
            self._decode_step()
        except Exception as e:  # noqa: BLE001 - the batch is in an unknown state: its requests fail, a new one starts
            for s in self.live.values():
                _send(s.job.emit, e)
            self.live.clear()
            self.batch = self.served.lm.decoding_batch(self.served.context)

    def _decode_step(self) -> None:
        feed: list[int] = []
        for key in self.batch.keys:
            s = self.live[key]
            job = s.job
            tid, lp, top = _choose(s)
            finish = ""
            if tid in job.end_ids:
                _deliver(job, GenStep(tid, lp, top, "", end=True))
                finish = "stop"
            else:
                s.ids.append(tid)
                self.stats.generated_tokens += 1
                piece = s.stream.push(tid)
                _deliver(job, GenStep(tid, lp, top, piece))
                if s.stream.stopped:
                    finish = "stop"
                elif len(s.ids) >= job.max_tokens or self.batch.room(key) <= 0:
                    finish = "length"
            if finish:
                rest = "" if s.stream.stopped else s.stream.finish()
                _deliver(job, GenEnd(finish, rest, list(s.ids)))
                self._leave(key)
            else:
                feed.append(tid)
        if feed:
            logits = self.batch.step(feed)  # [n, V]
            full = set(getattr(self.batch, "full", ()))
            for key, row in zip(self.batch.keys, logits):
                s = self.live[key]
                if key in full:   # a state whose context is full
                    _deliver(s.job, GenEnd("length", s.stream.finish(), list(s.ids)))
                    self._leave(key)
                else:
                    s.logits = row
            self.stats.steps += 1


def _choose(s: _Live) -> tuple[int, float | None, tuple | None]:
    """The next token of one sequence (greedy: the argmax; else a draw from the filtered distribution with the
    sequence's own generator, as `generate` draws), its log-probability under the model, and its row's top."""
    from nlpkit.lm.generation.sampling import draw, log_softmax, probabilities, process_logits, token_logprobs

    row = s.logits
    cfg = s.job.sampling
    if cfg.greedy:
        tid = int(np.argmax(row))
    else:
        filtered = process_logits(row[None, :], None, cfg)
        tid = int(draw(probabilities(filtered, cfg), s.job.rng)[0])
    lp = float(token_logprobs(row[None, :], np.array([tid]))[0]) if s.job.logprobs else None
    top = None
    if s.job.top:
        k = min(s.job.top, len(row))
        lsm = log_softmax(row)
        ids = np.argpartition(-row, k - 1)[:k]
        ids = ids[np.lexsort((ids, -row[ids]))]
        top = (tuple(int(i) for i in ids), tuple(float(lsm[i]) for i in ids))
    return tid, lp, top


def _deliver(job: GenJob, item: GenStep | GenEnd) -> None:
    """A generation event to its job: at once when it streams, else held until the end and handed over with it (a
    list: one wake-up of the web layer per request instead of one per token)."""
    if job.stream:
        _send(job.emit, item)
    elif isinstance(item, GenEnd):
        _send(job.emit, [*job.held, item])
        job.held.clear()
    else:
        job.held.append(item)


def _send(callback: Callable[[object], None], item: object) -> None:
    """Hand a result to the web layer; a callback that fails (its client is gone) never stops the engine."""
    try:
        callback(item)
    except Exception:  # noqa: BLE001
        pass

