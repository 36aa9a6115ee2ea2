"""Text generation: prefill once, decode token by token with the KV cache, stop, detokenize incrementally.

Three layers, each usable alone:

- `decode_steps(model, prompt_ids, ...)` - the loop. Prefills the prompt once (batch 1), broadcasts
  the cache to `n` rows, then yields one `Step` (a token per row with its log-probabilities) per
  forward pass. Without a cache (`use_cache=False`) every step recomputes the whole sequence, which
  is what the cache saves (quadratic against linear work).
- `TextStream` - turns token ids into text pieces that never split a UTF-8 sequence and never show
  any part of a stop string.
- `generate(...)` (one streamed continuation) and `sample_batch(...)` (N continuations in one batch,
  with their total log-probabilities) - the two things the CLI offers.

>>> stats = GenerationStats()
>>> for piece in generate(model, model.tokenizer.encode("Once upon"), max_new_tokens=20, stats=stats):
...     print(piece, end="", flush=True)
"""

from __future__ import annotations

import codecs
import time
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Sequence

import numpy as np

from nlpkit.errors import NlpkitError, UsageError
from nlpkit.lm.sampling import SamplingConfig, draw, probabilities, process_logits, token_logprobs

FINISH_REASONS = ("eos", "stop", "length", "context")


@dataclass
class GenerationStats:
    """Timings and counts of one generation (or one batch): what `--stats` prints."""

    prompt_tokens: int = 0
    new_tokens: int = 0  # decode steps (per row)
    batch: int = 1
    prefill_seconds: float = 0.0
    decode_seconds: float = 0.0
    finish: str = ""  # one of FINISH_REASONS (for a batch: the first row's)
    context_dropped: int = 0  # positions forgotten by --sliding

    @property
    def prefill_tps(self) -> float:
        return self.prompt_tokens / self.prefill_seconds if self.prefill_seconds > 0 else float("inf")

    @property
    def decode_tps(self) -> float:
        """Generated tokens per second, counting every row of a batch."""
        return self.new_tokens * self.batch / self.decode_seconds if self.decode_seconds > 0 else float("inf")


@dataclass
class Step:
    """One decode step for every row: the chosen ids and their log-probabilities."""

    ids: np.ndarray  # [b] int
    logprob: np.ndarray  # [b] under the model's own (unfiltered) distribution
    logprob_filtered: np.ndarray  # [b] under the distribution actually sampled from


# ------------------------------------------------------------------------- prompt handling

def prepare_prompt(model, prompt_ids: Sequence[int], *, max_new_tokens: int, truncate: bool = False,
                   context: int | None = None) -> list[int]:
    """Check the prompt against the context: an empty prompt becomes [BOS]; a prompt longer than the
    context is an error naming both lengths, unless `truncate` keeps its end (leaving room for
    `max_new_tokens` when it can)."""
    ids = [int(i) for i in prompt_ids]
    ctx = context or model.config.positions
    if not ids:
        start = model.config.bos_id if model.config.bos_id is not None else model.config.eos_id
        if start is None:
            raise NlpkitError("the prompt is empty and the model has no BOS (or EOS) token to start from")
        ids = [int(start)]
    if truncate:
        keep = max(1, min(len(ids), ctx - max_new_tokens))
        ids = ids[len(ids) - keep:]
    elif len(ids) > ctx:
        raise NlpkitError(f"the prompt is {len(ids)} tokens but the model's context is {ctx} tokens "
                          "(use --truncate-prompt to keep the end of the prompt)")
    return ids


def encode_prompt(model, text: str) -> list[int]:
    """Tokenize a prompt the way the model's own tokenizer does (BOS first when the model adds one)."""
    tok = model.require_tokenizer()
    ids = list(tok.encode(text)) if text else []
    bos = model.config.bos_id
    if ids and model.config.add_bos and bos is not None and ids[0] != bos:
        ids = [bos] + ids
    return ids


# ------------------------------------------------------------------------------ the loop

def _last_logits(model, tokens: np.ndarray, cache) -> np.ndarray:  # [b, t] -> [b, V]
    return model.forward(tokens, cache, last_only=True)[:, -1]


def decode_steps(model, prompt_ids: Sequence[int], *, n: int = 1, sampling: SamplingConfig | None = None,
                 seed: int | None = None, use_cache: bool = True, sliding: bool = False,
                 context: int | None = None, stats: GenerationStats | None = None) -> Iterator[Step]:
    """Yield one `Step` per generated position for `n` rows sharing one prompt, until the consumer
    stops or the context is full (then `stats.finish = "context"`).

    The prompt is prefilled once with batch 1 and its cache broadcast to `n` rows. With `sliding`, a
    full context forgets its oldest quarter instead of stopping (the prompt included).
    """
    cfg = (sampling or SamplingConfig()).validate()
    stats = stats if stats is not None else GenerationStats()
    rng = np.random.default_rng(seed)
    ctx = context or model.config.positions
    V = model.config.vocab_size
    prompt = np.asarray(prompt_ids, dtype=np.int64)[None, :]  # [1, P]
    if prompt.shape[1] == 0:
        raise NlpkitError("decode needs at least one prompt token")
    if prompt.shape[1] > ctx:
        raise NlpkitError(f"the prompt is {prompt.shape[1]} tokens but the context is {ctx} tokens")
    stats.prompt_tokens, stats.batch = prompt.shape[1], n

    t0 = time.perf_counter()
    cache = model.new_cache(1, ctx) if use_cache else None
    logits = _last_logits(model, prompt, cache)  # [1, V]
    logits = np.repeat(logits, n, axis=0)  # [n, V]
    if cache is not None:
        cache = cache.broadcast(n) if n > 1 else cache
    tokens = np.repeat(prompt, n, axis=0)  # [n, T]  everything so far (the no-cache path and --sliding use it)
    seen = np.zeros((n, V), dtype=bool)  # [n, V] tokens in each row (repetition penalty)
    seen[:, prompt[0][prompt[0] < V]] = True
    stats.prefill_seconds += time.perf_counter() - t0

    rows = np.arange(n)
    while True:
        t0 = time.perf_counter()
        filtered = process_logits(logits, seen, cfg)  # [n, V]
        if cfg.greedy:
            ids, lpf = np.argmax(filtered, axis=-1), np.zeros(n)  # the one-hot distribution: log 1
        else:
            probs = probabilities(filtered, cfg)  # [n, V]
            ids = draw(probs, rng)  # [n]
            lpf = np.log(probs[rows, ids])
        lp = token_logprobs(logits, ids)  # [n]
        seen[rows, ids] = True
        tokens = np.concatenate([tokens, ids[:, None]], axis=1)
        stats.new_tokens += 1
        stats.decode_seconds += time.perf_counter() - t0
        yield Step(ids, lp, lpf)

        t0 = time.perf_counter()
        filled = cache.length if cache is not None else tokens.shape[1] - 1
        if filled >= ctx:  # no room for the token just chosen
            if not sliding:
                stats.finish = "context"
                return
            if cache is None:
                stats.context_dropped += 1  # the recomputed window below starts one token later
            else:
                drop = max(1, ctx // 4)
                stats.context_dropped += drop
                if model.config.uses_rope:
                    cache.drop_oldest(drop)  # kept keys keep their RoPE angles; new positions continue
                else:  # learned positions cannot continue past their table: re-prefill the kept window
                    cache.reset()
                    model.forward(tokens[:, -(ctx - drop):-1], cache, last_only=True)
        if cache is not None:
            logits = _last_logits(model, ids[:, None], cache)  # [n, V]
        else:
            logits = _last_logits(model, tokens[:, -ctx:], None)  # [n, V], full recompute
        stats.decode_seconds += time.perf_counter() - t0


# ------------------------------------------------------------------------ detokenization

class TextStream:
    """Token ids in, text pieces out: complete UTF-8 characters only, and never any part of a stop string.

    Text that could still be the start of a stop string is held back until it cannot; when a stop
    string appears, the text before it is released and `stopped` becomes True.
    """

    def __init__(self, tokenizer, stop: Sequence[str] = ()):
        self.tokenizer = tokenizer
        self.stop = [s for s in stop if s]
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.pending = ""
        self.stopped = False

    def _held(self) -> int:
        """Length of the longest suffix of `pending` that is a proper prefix of some stop string."""
        best = 0
        for s in self.stop:
            for k in range(min(len(s) - 1, len(self.pending)), best, -1):
                if self.pending.endswith(s[:k]):
                    best = k
                    break
        return best

    def push(self, token_id: int) -> str:
        """Add one token; return the text that is now safe to show ('' while held back)."""
        if self.stopped:
            return ""
        self.pending += self.decoder.decode(self._bytes(int(token_id)))
        hits = [i for i in (self.pending.find(s) for s in self.stop) if i >= 0]
        if hits:
            out, self.pending, self.stopped = self.pending[:min(hits)], "", True
            return out
        cut = len(self.pending) - self._held()
        out, self.pending = self.pending[:cut], self.pending[cut:]
        return out

    def _bytes(self, token_id: int) -> bytes:
        """The token's bytes; none for an id the model has but its tokenizer does not (models pad their
        embedding past the tokenizer, e.g. Qwen2: HF's decode skips such ids too)."""
        try:
            return self.tokenizer.decode_bytes([token_id])
        except NlpkitError:
            return b""

    def finish(self) -> str:
        """The held-back rest (no stop string followed); an unfinished UTF-8 sequence becomes U+FFFD."""
        if self.stopped:
            return ""
        out = self.pending + self.decoder.decode(b"", final=True)
        self.pending = ""
        return out


# ------------------------------------------------------------------------- the two front ends

def _eos(model, ignore_eos: bool, eos_ids: Iterable[int] = ()) -> frozenset[int]:
    """The ids that end a continuation: the model's EOS (every id of a list), plus `eos_ids`
    (a chat template's end-of-turn tokens); none with `ignore_eos`."""
    if ignore_eos:
        return frozenset()
    eos = model.config.eos_id
    if eos is None and model.tokenizer is not None:
        eos = getattr(model.tokenizer, "eos_id", None)
    ids = {*getattr(model.config, "eos_ids", ()), *eos_ids}
    if eos is not None:
        ids.add(eos)
    return frozenset(ids)


def generate_ids(model, prompt_ids: Sequence[int], *, max_new_tokens: int = 128,
                 sampling: SamplingConfig | None = None, seed: int | None = None, use_cache: bool = True,
                 sliding: bool = False, ignore_eos: bool = False, context: int | None = None,
                 stats: GenerationStats | None = None, eos_ids: Iterable[int] = ()) -> Iterator[int]:
    """New token ids of one continuation (EOS -- or any of `eos_ids` -- and length stop it; EOS itself
    is not yielded)."""
    stats = stats if stats is not None else GenerationStats()
    if max_new_tokens < 0:
        raise UsageError(f"--max-new-tokens must be >= 0, got {max_new_tokens}")
    if max_new_tokens == 0:
        stats.finish = "length"
        return
    eos = _eos(model, ignore_eos, eos_ids)
    for step in decode_steps(model, prompt_ids, n=1, sampling=sampling, seed=seed, use_cache=use_cache,
                             sliding=sliding, context=context, stats=stats):
        tid = int(step.ids[0])
        if tid in eos:
            stats.finish = "eos"
            return
        yield tid
        if stats.new_tokens >= max_new_tokens:
            stats.finish = "length"
            return
    # decode_steps returned: context full (stats.finish already says so)


def generate(model, prompt_ids: Sequence[int], *, stop: Sequence[str] = (), stats: GenerationStats | None = None,
             **kwargs) -> Iterator[str]:
    """Text pieces of one continuation, streamed as produced (see `generate_ids` for the options)."""
    stats = stats if stats is not None else GenerationStats()
    stream = TextStream(model.tokenizer, stop)
    for tid in generate_ids(model, prompt_ids, stats=stats, **kwargs):
        piece = stream.push(tid)
        if piece:
            yield piece
        if stream.stopped:
            stats.finish = "stop"
            return
    rest = stream.finish()
    if rest:
        yield rest


@dataclass
class Sample:
    """One continuation of `sample_batch`."""

    index: int
    ids: list[int] = field(default_factory=list)
    text: str = ""
    logprob: float = 0.0  # sum over its tokens, model's own distribution
    logprob_filtered: float = 0.0  # sum over its tokens, the filtered distribution it was drawn from
    finish: str = ""


def sample_batch(model, prompt_ids: Sequence[int], n: int, *, max_new_tokens: int = 128,
                 sampling: SamplingConfig | None = None, seed: int | None = None, stop: Sequence[str] = (),
                 use_cache: bool = True, sliding: bool = False, ignore_eos: bool = False,
                 context: int | None = None, stats: GenerationStats | None = None,
                 eos_ids: Iterable[int] = ()) -> list[Sample]:
    """N continuations decoded together in one batch (prompt prefilled once, cache broadcast).

    Each row stops on its own (EOS, stop string, length); a stopped row's later tokens are ignored.
    Log-probabilities count the tokens of the returned ids (EOS included when it ended the row,
    a token that completed a stop string included).
    """
    if n < 1:
        raise UsageError(f"-n must be at least 1, got {n}")
    if max_new_tokens < 0:
        raise UsageError(f"--max-new-tokens must be at least 0, got {max_new_tokens}")
    stats = stats if stats is not None else GenerationStats()
    eos = _eos(model, ignore_eos, eos_ids)
    samples = [Sample(i) for i in range(n)]
    if max_new_tokens == 0:                     # as generate: empty texts, nothing decoded
        for s in samples:
            s.finish = "length"
        stats.finish = "length"
        return samples
    streams = [TextStream(model.tokenizer, stop) if model.tokenizer is not None else None for _ in range(n)]
    pieces: list[list[str]] = [[] for _ in range(n)]
    active = np.ones(n, dtype=bool)
    for step in decode_steps(model, prompt_ids, n=n, sampling=sampling, seed=seed, use_cache=use_cache,
                             sliding=sliding, context=context, stats=stats):
        for i in np.flatnonzero(active):
            s, tid = samples[i], int(step.ids[i])
            s.logprob += float(step.logprob[i])
            s.logprob_filtered += float(step.logprob_filtered[i])
            s.ids.append(tid)
            if tid in eos:
                s.finish, active[i] = "eos", False
                continue
            if streams[i] is not None:
                pieces[i].append(streams[i].push(tid))
                if streams[i].stopped:
                    s.finish, active[i] = "stop", False
                    continue
            if len(s.ids) >= max_new_tokens:
                s.finish, active[i] = "length", False
        if not active.any():
            break
    for i, s in enumerate(samples):
        if not s.finish:
            s.finish = stats.finish or "context"
        if streams[i] is not None:
            s.text = "".join(pieces[i]) + streams[i].finish()
    stats.finish = samples[0].finish
    return samples


def next_token_distribution(model, prompt_ids: Sequence[int], sampling: SamplingConfig | None = None,
                            context: int | None = None) -> list[tuple[int, float]]:
    """(id, probability) of every token left after the filters, most likely first (greedy: one token, 1.0)."""
    cfg = (sampling or SamplingConfig()).validate()
    ctx = context or model.config.positions
    prompt = np.asarray(prompt_ids, dtype=np.int64)[None, :]
    cache = model.new_cache(1, max(ctx, prompt.shape[1]))
    logits = _last_logits(model, prompt, cache)  # [1, V]
    seen = np.zeros(logits.shape, dtype=bool)
    seen[0, prompt[0]] = True
    probs = probabilities(process_logits(logits, seen, cfg), cfg)[0]  # [V]
    order = np.argsort(-probs, kind="stable")
    order = order[probs[order] > 0]
    return [(int(i), float(probs[i])) for i in order]
