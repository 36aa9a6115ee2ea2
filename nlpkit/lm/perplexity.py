"""Perplexity: token log-probabilities under a model, over windows chosen the way three references do.

The prefix token. As lm-evaluation-harness does, the text's first token is predicted from the model's
prefix token (BOS when the model defines one, else EOS/EOT), so that every token can be scored
(`add_bos=True`, the default whenever the model has such a token). `add_bos=False` (`--no-add-bos`)
leaves the prefix out: the first token is then context only, never scored.

- `sliding` — the transformers perplexity guide: windows of `context` tokens starting every `stride`
  tokens; each window scores only its last `trg_len` tokens (the labels -100 trick), so every token
  (after the prefix) is scored once, with up to `context - stride` tokens of left context — except
  when stride = context: then a window's first token has no prediction and, as in the guide, is not
  scored (the CLI warns).
- `disjoint` — lm-evaluation-harness `loglikelihood_rolling`: disjoint windows of `context` tokens,
  each conditioned on just the previous token (the first on the prefix token); every token is scored.
- `second-half` — llama.cpp `llama-perplexity`: chunks of `context` tokens (the prefix token swapped in
  first, as llama.cpp swaps BOS), scoring only the second half of each chunk; needs 2 x context tokens.

Every figure is over the scored tokens: the mean NLL is the plain mean of their log-probabilities in
every mode (for sliding the guide's own figure, each window's mean weighted by `trg_len - 1`, is kept
as `Scored.guide_mean_nll`), and the byte and word normalizations use the bytes and words those tokens
cover (`covered`): a token covers its own UTF-8 bytes; words are lm-evaluation-harness's pieces of
re.split(r"\\s+", text), and a word belongs to the span in which its first byte lies (the empty piece
after trailing whitespace to the span of the text's last byte). When every token is scored this is
exactly lm-evaluation-harness: words = len(re.split(r"\\s+", text)), bytes = the text's UTF-8 bytes.
Word perplexity exp(NLL / words), byte perplexity exp(NLL / bytes), bits per byte NLL / bytes / ln 2.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Callable, Iterator, Sequence

import numpy as np

from nlpkit.errors import NlpkitError, UsageError
from nlpkit.lm.interface import PerplexityRun
from nlpkit.lm.threads import (RowPool, blas_threads, engine_threads, held_blas_threads, match_blas_threads,
                               serial_here)
from nlpkit.lm.uncertainty import standard_error

MODES = ("sliding", "disjoint", "second-half")


class TooShort(NlpkitError):
    """The text has no token that the chosen procedure can score."""
CHUNK = 512  # tokens per forward call inside a window (bounds the [t, vocab] logits buffer)


@dataclass
class Scored:
    """Log-probabilities of the scored tokens: `positions` index the id list that was scored."""

    positions: list[int] = field(default_factory=list)
    ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    mean_nll: float = float("nan")  # mean over the scored tokens, -mean(logprobs)
    guide_mean_nll: float = float("nan")  # sliding only: the transformers guide's trg_len - 1 weighting


@dataclass
class Perplexity:
    tokens: int
    nll: float  # total negative log-likelihood, nats
    mean_nll: float  # nats per token
    words: int
    bytes: int
    nll_sq: float = math.nan  # sum of the squared token NLLs: the uncertainty (`mean_nll_se`)

    @property
    def token_perplexity(self) -> float:
        return math.exp(self.mean_nll)

    @property
    def mean_nll_se(self) -> float:
        """σ of the mean NLL as llama.cpp's `PPL = X +/- Y` takes it (tokens as independent draws; they are not:
        see `nlpkit.lm.uncertainty`). NaN for a single token."""
        return standard_error(self.nll, self.nll_sq, self.tokens)

    @property
    def token_perplexity_unc(self) -> float:
        """The ± of the token perplexity, llama.cpp's ppl × σ(mean NLL)."""
        return self.token_perplexity * self.mean_nll_se

    @property
    def word_perplexity(self) -> float:
        return math.exp(self.nll / self.words) if self.words else float("nan")

    @property
    def byte_perplexity(self) -> float:
        return math.exp(self.nll / self.bytes) if self.bytes else float("nan")

    @property
    def bits_per_byte(self) -> float:
        return self.nll / self.bytes / math.log(2) if self.bytes else float("nan")


def row_log_normalizers(logits: np.ndarray, block: int = 16) -> tuple[np.ndarray, np.ndarray]:  # [R, V] -> [R], [R]
    """Each row's max (float32) and the log of the sum of exp(row - max) (float64 sums of float32 exponentials),
    so that log softmax(row)[t] = (row[t] - max) - log-sum for every target a row predicts. A block of rows at a
    time, in place in one [block, V] buffer per thread: 16 rows of a 49k vocabulary (3 MB) stay in a core's cache
    from the subtraction to the sum, 2.3x faster than 128 rows; each row's numbers do not depend on the block.
    Blocks run on the engine's threads (numpy releases the GIL in these loops)."""
    m = np.empty(len(logits), np.float32)
    logsum = np.empty(len(logits), np.float64)

    def rows(share: list[int]) -> None:
        buf = np.empty((block, logits.shape[1]), np.float32)
        for r0 in share:
            x = logits[r0:r0 + block]
            e = buf[:len(x)]
            mx = x.max(axis=-1, keepdims=True)  # [n, 1]
            m[r0:r0 + block] = mx[:, 0]
            np.subtract(x, mx, out=e)
            np.exp(e, out=e)
            logsum[r0:r0 + block] = np.log(e.sum(axis=-1, dtype=np.float64))

    starts = list(range(0, len(logits), block))
    n = engine_threads() if len(starts) > 1 else 1
    if n > 1:
        RowPool(n).map(rows, [starts[i::n] for i in range(n)])
    else:
        rows(starts)
    return m, logsum


def log_softmax_at(logits: np.ndarray, targets: np.ndarray, block: int = 16) -> np.ndarray:  # [t, V], [t] -> [t]
    """log softmax(logits)[i, targets[i]] in float64 (`row_log_normalizers`' arithmetic, `block` rows at a time)."""
    m, logsum = row_log_normalizers(logits, block)
    return (logits[np.arange(len(targets)), targets].astype(np.float64) - m) - logsum


def window_logits(model, ids: list[int], first: int) -> Iterator[np.ndarray]:  # [t] -> chunks of [n, V]
    """The logits rows predicting ids[first:] (row j predicts ids[j + 1]), a chunk of at most CHUNK rows at a
    time: one causal pass over ids[:-1] through a KV cache, so a window's [t, V] logits are never all held."""
    first = max(first, 1)
    t = len(ids) - 1  # inputs ids[:-1], targets ids[1:]
    arr = np.asarray(ids, dtype=np.int64)[None, :]
    cache = model.new_cache(1, max_len=t) if t > CHUNK else None
    for s in range(0, t, CHUNK):
        e = min(s + CHUNK, t)
        if e < first:  # rows s..e-1 predict nothing we score, but the cache needs their keys
            if cache is not None:
                model.forward(arr[:, s:e], cache, last_only=True)
            continue
        r0 = max(first - 1, s)  # the first row scored; rows before it only fill the cache
        yield model.forward(arr[:, s:e], cache, logits_from=r0 - s)[0]  # [e - r0, V]


def window_logprobs(model, ids: list[int], first: int) -> np.ndarray:
    """log p(ids[j] | ids[:j]) for j = first..len-1 (`window_logits`, each chunk's targets' log-softmax).

    # [t] -> [t - first]
    """
    targets = np.asarray(ids[max(first, 1):], dtype=np.int64)
    out, done = [], 0
    for logits in window_logits(model, ids, first):  # [n, V]
        out.append(log_softmax_at(logits, targets[done:done + len(logits)]))
        done += len(logits)
    return np.concatenate(out) if out else np.zeros(0)


def window_primitive(model) -> Callable[[list[int], int], np.ndarray]:
    """`LanguageModel.logprobs` (ids, first) -> log-probabilities of ids[first:], for a language model of
    either kind; for a bare transformer `Model`, `window_logprobs` on it."""
    if hasattr(model, "logprobs"):
        return model.logprobs
    return lambda ids, first: window_logprobs(model, ids, first)


def logits_primitive(model) -> Callable[[list[int], int], Iterator[np.ndarray]]:
    """`LanguageModel.window_logits` (ids, first) -> chunks of logits rows for ids[first:]; for a bare
    transformer `Model` (a Dask worker's cached model), `window_logits` on it."""
    if hasattr(model, "window_logits"):
        return model.window_logits
    return lambda ids, first: window_logits(model, ids, first)


@dataclass(frozen=True)
class Window:
    """One forward pass of a scoring plan: seq[start:end] is the input (with `swap`, when set, in
    its first place), tokens first..end-start-1 of it are scored; `weight` is the transformers
    guide's `trg_len - 1` for sliding windows."""

    start: int
    end: int
    first: int
    swap: int | None = None
    weight: int = 0

    def tokens(self, seq: list[int]) -> list[int]:
        chunk = list(seq[self.start:self.end])
        if self.swap is not None:
            chunk[0] = self.swap
        return chunk

    @property
    def positions(self) -> range:
        return range(self.start + max(self.first, 1), self.end)


def sliding_windows(n: int, context: int, stride: int) -> list[Window]:
    """The transformers guide loop (see module docstring) over a sequence of n tokens."""
    out, prev_end = [], 0
    for begin in range(0, n, stride):
        end = min(begin + context, n)
        trg_len = end - prev_end
        first = max(end - trg_len, begin + 1)  # the window's first token has no prediction
        out.append(Window(begin, end, first - begin, weight=trg_len - 1))
        prev_end = end
        if end == n:
            break
    return out


def disjoint_windows(n: int, context: int, prefixed: bool) -> list[Window]:
    """lm-evaluation-harness get_rolling_token_windows(context_len=1) + make_disjoint_window over a
    sequence of n tokens (`prefixed`: its first is the prefix token).

    Windows predict `context` tokens each, conditioned on the token before them (the first window on the
    prefix token); the last, shorter window is rolled back to a full `context` tokens of input, as there.
    """
    offset = 1 if prefixed else 0  # without a prefix token the first token stays unscored
    bounds = [(1, min(context + 1 - (1 - offset), n))]  # seq[a:b] is predicted
    while bounds[-1][1] < n:
        a = bounds[-1][1]
        bounds.append((a, min(a + context, n)))
    out = []
    for a, b in bounds:
        if b > a:
            start = max(b - context - 1, 0)
            out.append(Window(start, b, a - start))
    return out


def second_half_windows(n: int, context: int, bos_id: int | None) -> list[Window]:
    """llama.cpp perplexity: n_chunk = n // context chunks, each scoring tokens context/2+1 .. context-1
    (`bos_id`, when given, replaces each chunk's first token)."""
    if n < 2 * context:
        raise NlpkitError(f"`mode` second-half needs at least 2 x context = {2 * context} tokens, the text has "
                          f"{n} (lower `context` or use `mode` sliding)")
    return [Window(c * context, (c + 1) * context, context // 2 + 1, swap=bos_id) for c in range(n // context)]


def local_windows(model, seq: list[int], windows: list[Window]) -> Iterator[np.ndarray]:
    """Each window's log-probabilities, in order, on this machine. A bare transformer `Model` runs its windows
    n at a time on n threads (`engine_threads()`, asked again each round), each window's forward on its thread
    alone with BLAS held to one: a whole window per thread keeps every matrix product at the window's full
    rows and needs no hand-off inside the forward (a row-parallel forward hands off three times a layer). A
    last round of fewer windows than threads runs them one after another, row-parallel. Same bits either way:
    the row-parallel forward equals the serial one (tests/lm/test_lm_model.py)."""
    logprobs = window_primitive(model)
    # A LanguageModel and a bare engine `Model` declare it (`parallel_windows`: not native weights, whose forwards
    # share one scratch; not Python-loop scoring, where threads would only queue).
    parallel = model.parallel_windows
    r = 0
    while r < len(windows):
        n = engine_threads() if parallel else 1
        batch = windows[r:r + n]
        r += len(batch)
        if n == 1 or len(batch) < n:
            yield from (logprobs(w.tokens(seq), w.first) for w in batch)
            continue

        def one(w: Window) -> np.ndarray:
            with serial_here():
                return logprobs(w.tokens(seq), w.first)

        with held_blas_threads(1):
            done = RowPool(n).map(one, batch)
        yield from done


def score_windows(model, seq: list[int], windows: list[Window], progress=None,
                  map_windows: Callable | None = None) -> Scored:
    """Run a plan: each window's log-probabilities (`window_logprobs`, or `map_windows(seq, windows)`
    yielding them in order, e.g. on a Dask cluster), gathered into one `Scored`."""
    if map_windows is None:
        results = local_windows(model, seq, windows)
    else:
        results = map_windows(seq, windows)
    res = Scored()
    weighted, weights = 0.0, 0
    for k, (w, lp) in enumerate(zip(windows, results)):
        res.positions += w.positions
        res.ids += seq[w.positions.start:w.end]  # a swapped-in first token is never scored
        res.logprobs += lp.tolist()
        if len(lp) and w.weight:
            weighted += float(-lp.mean()) * w.weight
            weights += w.weight
        if progress:
            progress(k + 1, len(windows))
    res.guide_mean_nll = weighted / weights if weights else float("nan")
    res.mean_nll = -float(np.mean(res.logprobs)) if res.logprobs else float("nan")
    return res


def score_windows_task(chunks: list[tuple[list[int], int]], model_key: tuple,
                       blas_threads: int | None = None) -> list[np.ndarray]:
    """A Dask task: `window_logprobs` of each (window tokens, first scored) on this worker's cached
    model, with the driver's BLAS thread count (see `score_lines_shard`)."""
    match_blas_threads(blas_threads)
    model = cached_model(*model_key)
    return [window_logprobs(model, ids, first) for ids, first in chunks]


def count_words(text: str) -> int:
    """lm-evaluation-harness word count: len(re.split(r"\\s+", text))."""
    return len(re.split(r"\s+", text))


def check_window(mode: str, context: int, stride: int | None) -> None:
    if mode not in MODES:
        raise UsageError(f"`mode` must be one of {', '.join(MODES)}, not {mode!r}")
    if context < 2:
        raise UsageError(f"`context` must be at least 2 tokens, got {context}")
    if stride is not None and not 1 <= stride <= context:
        raise UsageError(f"`stride` {stride} must be between 1 and `context` {context}")


def prefix_token(config) -> int | None:
    """The token a text's first token is predicted from: BOS when the model defines one, else EOS/EOT
    (lm-evaluation-harness `prefix_token_id`); None when the model has neither."""
    return config.bos_id if config.bos_id is not None else config.eos_id


def window_plan(ids: list[int], prefix: int | None, *, mode: str, context: int,
                stride: int | None) -> tuple[list[int], list[Window]]:
    """The sequence (prefix token first, when given) and the windows `mode` scores it in: the one plan
    that perplexity (`score_ids`) and the model comparison (`nlpkit.lm.comparison`) both run."""
    seq = ([prefix] if prefix is not None else []) + list(ids)
    if mode in ("sliding", "disjoint") and len(seq) < 2:
        raise TooShort("text too short: at least 2 tokens (or 1 after the prefix token) are needed to score one")
    if mode == "sliding":
        windows = sliding_windows(len(seq), context, stride or context)
    elif mode == "disjoint":
        windows = disjoint_windows(len(seq), context, prefix is not None)
    else:
        windows = second_half_windows(len(seq), context, prefix)
    return seq, windows


def score_ids(model, ids: list[int], *, mode: str = "sliding", context: int, stride: int | None = None,
              add_bos: bool = False, progress: Callable | None = None,
              map_windows: Callable | None = None) -> Scored:
    """Score a token-id list (without prefix token; `add_bos` puts the model's prefix token before it:
    prepended in every mode, and swapped into each chunk's first place in second-half).
    `positions` index `ids`. `map_windows` runs the windows elsewhere (see `score_windows`)."""
    check_window(mode, context, stride)
    return _score_planned(model, ids, prefix_token(model.config) if add_bos else None, add_bos, mode, context, stride,
                          progress, map_windows)


def _score_planned(scorer, ids, prefix, add_bos, mode, context, stride, progress, map_windows) -> Scored:
    """`ids` scored in the windows of `mode` (`prefix` before them when `add_bos`; positions index `ids`), by any
    scorer `score_windows` takes: the engine's model or a `LanguageModel`."""
    if add_bos and prefix is None:
        raise NlpkitError("`add_bos`: this model defines no BOS or EOS token to predict the first token from")
    seq, windows = window_plan(ids, prefix, mode=mode, context=context, stride=stride)
    res = score_windows(scorer, seq, windows, progress, map_windows)
    if prefix is not None:
        res.positions = [p - 1 for p in res.positions]
    return res


def covered(text: str, token_bytes: list[int], scored: list[int]) -> tuple[int, int]:
    """(bytes, words) of `text` that the tokens at positions `scored` cover (see the module docstring).

    token_bytes[i] is token i's UTF-8 length; if they do not add up to the text's (a tokenizer that adds
    a prefix space or normalizes), the first token absorbs the difference.
    """
    raw_len = len(text.encode("utf-8"))
    lens = np.asarray(token_bytes, dtype=np.int64)
    if len(lens) and lens.sum() != raw_len:
        lens = lens.copy()
        lens[0] = max(lens[0] + raw_len - lens.sum(), 0)
    mask = np.zeros(len(lens), dtype=bool)
    mask[np.asarray(scored, dtype=np.int64)] = True
    nbytes = int(lens[mask].sum())
    if mask.all():
        return raw_len, count_words(text)
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]])  # token i covers bytes starts[i] .. starts[i]+lens[i]-1
    word_chars = np.array([0] + [m.end() for m in re.finditer(r"\s+", text)], dtype=np.int64)
    if raw_len == len(text):  # ASCII: characters are bytes
        word_bytes = word_chars
    else:
        cps = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
        clen = 1 + (cps >= 0x80) + (cps >= 0x800) + (cps >= 0x10000)
        word_bytes = np.concatenate([[0], np.cumsum(clen)])[word_chars]
    word_bytes = np.minimum(word_bytes, max(raw_len - 1, 0))  # the empty piece after trailing whitespace
    tok = np.searchsorted(starts, word_bytes, side="right") - 1
    words = int(mask[np.clip(tok, 0, len(mask) - 1)].sum()) if len(mask) else 0
    return nbytes, words


def check_context(model, context: int) -> None:
    """A usage error when `context` exceeds the model's positions (`ModelConfig.positions`: trained
    positions, or original positions times a RoPE scaling's factor)."""
    c = model.config
    if context > c.positions:
        if c.positions > c.max_seq_len:
            raise UsageError(f"`context` {context} exceeds the {c.positions} positions of this model with its RoPE "
                             f"scaling ({c.rope_scaling.get('rope_type')} x{c.rope_scaling.get('factor')}): use "
                             f"`context` {c.positions} or less, or a larger `rope_factor`")
        hint = " or set a RoPE scaling (`rope_scaling`, `rope_factor`)" if c.uses_rope and not c.rope_scaling \
            else ""
        raise UsageError(f"`context` {context} exceeds the {c.max_seq_len} positions this model was trained on: "
                         f"use `context` {c.max_seq_len} or less{hint}")


def perplexity(model, text: str, *, mode: str = "sliding", context: int | None = None, stride: int | None = None,
               add_bos: bool | None = None, progress: Callable | None = None,
               map_windows: Callable | None = None) -> tuple[Perplexity, Scored]:
    """Tokenize `text` with the model's tokenizer and score it; `add_bos` None: the prefix token whenever
    the model has one. Raises TooShort when no token can be scored.

    >>> perplexity(load_model(), "The cat sat.", context=512)[0].token_perplexity   # doctest: +SKIP
    """
    model.require_tokenizer()
    if not text:
        raise TooShort("empty text: nothing to score")
    context = context or default_context(model)
    check_context(model, context)
    if add_bos is None:
        add_bos = prefix_token(model.config) is not None
    if mode == "sliding" and stride is None:
        stride = default_stride(context)
    check_window(mode, context, stride)
    tok = model.tokenizer
    ids = tok.encode(text)
    res = score_ids(model, ids, mode=mode, context=context, stride=stride, add_bos=add_bos, progress=progress,
                    map_windows=map_windows)
    return summarize_scored(text, [len(tok.decode_bytes([i])) for i in ids], res), res


def summarize_scored(text: str, token_bytes: list[int], res: Scored) -> Perplexity:
    """The `Perplexity` of a scored text: its scored tokens' NLL, and the bytes and words they cover (`covered`;
    `token_bytes[i]` is token i's UTF-8 length)."""
    nbytes, words = covered(text, token_bytes, res.positions)
    lp = np.asarray(res.logprobs, dtype=np.float64)
    nll = -float(np.sum(lp))
    return Perplexity(tokens=len(lp), nll=nll, mean_nll=res.mean_nll, words=words, bytes=nbytes,
                      nll_sq=float(np.sum(lp * lp)))


def text_perplexity(lm, text: str, *, mode: str, context: int, stride: int | None, add_bos: bool,
                    progress: Callable | None = None, map_windows: Callable | None = None) -> tuple[Perplexity, Scored]:
    """`perplexity` written over a `LanguageModel` (its `encode`, `prefix_id`, `logprobs` and `token_bytes`), the
    window settings already resolved (`perplexity_run`): the same windows, the same numbers."""
    if not text:
        raise TooShort("empty text: nothing to score")
    check_window(mode, context, stride)
    ids = lm.encode(text)
    res = _score_planned(lm, ids, lm.prefix_id if add_bos else None, add_bos, mode, context, stride, progress,
                         map_windows)
    return summarize_scored(text, [len(lm.token_bytes(i)) for i in ids], res), res


def default_context(model) -> int:
    """The model's context length, capped at 1024 tokens to bound memory and time."""
    return min(model.config.max_seq_len, 1024)


def default_stride(context: int) -> int:
    """Half the context: every token after the first window sees at least context/2 tokens of history."""
    return max(context // 2, 1)


# ------------------------------------------------------------------- worker tasks (run by the mappers the CLI builds)

_MODEL_CACHE: dict[tuple, object] = {}


def cached_model(load: Callable, *args):
    """`load(*args)`, once per process (a Dask worker scores many shards): a `LanguageModel.worker_key` is such a
    (loader, arguments) tuple, the loader a module-level function (it travels by name). The last two stay
    loaded (perplexity --compare runs a model and its base in every task)."""
    key = (load, *args)
    model = _MODEL_CACHE.get(key)
    if model is None:
        while len(_MODEL_CACHE) >= 2:  # a model and its base (perplexity --compare) stay loaded
            _MODEL_CACHE.pop(next(iter(_MODEL_CACHE)))
        model = _MODEL_CACHE[key] = load(*args)
    return model


def score_lines_shard(shard, model_key: tuple, mode: str, context: int, stride: int | None,
                      add_bos: bool, errors: str = "strict", blas_threads: int | None = None,
                      per_token: bool = False) -> tuple[int, list]:
    """Score each line of a shard on its own, as ``perplexity --per-line`` does: (lines, one
    `Perplexity` per line — a (`Perplexity`, `Scored`) pair with `per_token` — None where the
    line is too short to score). `blas_threads`: see `nlpkit.lm.threads.match_blas_threads`.
    """
    from nlpkit.io import iter_lines

    match_blas_threads(blas_threads)
    model = cached_model(*model_key)
    out: list = []
    for line in iter_lines(shard, errors=errors, strip_bom=getattr(shard, "first", True)):
        try:
            p, scored = perplexity(model, line, mode=mode, context=context, stride=stride, add_bos=add_bos)
        except TooShort:
            p = scored = None
        out.append((p, scored) if per_token and p is not None else p)
    return len(out), out


# ------------------------------------------------------------------- what `nlpkit perplexity` prints

PERPLEXITY_SUMMARY = ["file", "tokens", "mean_nll", "mean_nll_se", "token_ppl", "token_ppl_unc", "word_ppl",
                      "byte_ppl", "bits_per_byte", "words", "bytes"]
PERPLEXITY_PER_LINE = ["file", "line", *PERPLEXITY_SUMMARY[1:]]
PERPLEXITY_PER_TOKEN = ["file", "line", "position", "id", "token", "logprob"]
TOTAL = "(total)"  # the file cell of the corpus total row (JSON records also carry "total": true)


def perplexity_run(lm, paths: Sequence[str], *, mode: str = "sliding", context: int | None = None,
                   stride: int | None = None, add_bos: bool | None = None, per_line: bool = False,
                   per_token: bool = False, errors: str = "strict") -> PerplexityRun:
    """What `nlpkit perplexity` prints for a `LanguageModel`: each text scored in windows (`mode`), a record per
    file (then a corpus total), per line (`per_line`) or per scored token (`per_token`). A model without windows
    (`window_context` None: an n-gram model) scores each line as one sentence, its own way
    (`lm.sentence_perplexity`: KenLM query's figures, the columns it has always printed).

    `records(progress, map_windows, map_lines)` runs locally, or with the mappers the caller built
    (`nlpkit.distributed.stages.perplexity_windows` / `perplexity_lines`: on a Dask cluster, each worker loading
    the model once from `lm.worker_key`)."""
    ctx = lm.window_context(context)
    if ctx is None:
        return lm.sentence_perplexity(paths, per_line=per_line, per_token=per_token, errors=errors)
    strd = (stride or default_stride(ctx)) if mode == "sliding" else None
    bos = lm.prefix_id is not None if add_bos is None else add_bos
    columns = PERPLEXITY_PER_LINE if per_line else PERPLEXITY_SUMMARY
    if per_token:
        columns = PERPLEXITY_PER_TOKEN if per_line else [c for c in PERPLEXITY_PER_TOKEN if c != "line"]
    sig = lm.signature("perplexity", {"mode": mode, "ctx": ctx, "stride": strd, "bos": bos})
    settings = _Settings(mode, ctx, strd, bos, errors, per_token)

    def records(progress=None, map_windows: Callable | None = None,
                map_lines: Callable | None = None) -> Iterator[dict]:
        if per_line:
            return _line_records(lm, paths, settings, progress, map_lines)
        return _text_records(lm, paths, settings, progress, map_windows)

    return PerplexityRun(columns, sig, records, context=ctx, stride=strd)


@dataclass(frozen=True)
class _Settings:
    mode: str
    context: int
    stride: int | None
    add_bos: bool
    errors: str
    per_token: bool


def _stats(p: Perplexity) -> dict:
    return {"tokens": p.tokens, "mean_nll": p.mean_nll, "mean_nll_se": p.mean_nll_se,
            "token_ppl": p.token_perplexity, "token_ppl_unc": p.token_perplexity_unc,
            "word_ppl": p.word_perplexity, "byte_ppl": p.byte_perplexity, "bits_per_byte": p.bits_per_byte,
            "words": p.words, "bytes": p.bytes}


def _token_rows(lm, name: str, line: int | None, scored: Scored) -> list[dict]:
    where = {"file": name} if line is None else {"file": name, "line": line}
    return [{**where, "position": pos, "id": i, "token": lm.token_bytes(i).decode("utf-8", errors="replace"),
             "logprob": lp}
            for pos, i, lp in zip(scored.positions, scored.ids, scored.logprobs)]


def _line_records(lm, paths, s: _Settings, progress, map_lines) -> Iterator[dict]:
    """``--per-line``: each line scored on its own, here or on the workers (`score_lines_shard`)."""
    if map_lines is not None:
        results = map_lines(list(paths), score_lines_shard,
                            (lm.worker_key, s.mode, s.context, s.stride, s.add_bos, s.errors, blas_threads(),
                             s.per_token))
        lines = _numbered(results)
    else:
        lines = _local_lines(lm, paths, s)
    for name, lineno, p in lines:
        if p is None:
            if not s.per_token:
                yield {"file": name, "line": lineno, "tokens": 0, "words": 0, "bytes": 0}
        elif s.per_token:
            yield from _token_rows(lm, name, lineno, p[1])
        else:
            yield {"file": name, "line": lineno, **_stats(p)}


def _numbered(results) -> Iterator[tuple[str, int, object]]:
    """(file, line number, result) from `map_lines`' (file index, path, (lines, results)) per shard."""
    line, current = 0, None
    for index, path, (_, scored) in results:
        if index != current:
            current, line = index, 0
        for p in scored:
            line += 1
            yield path, line, p


def _local_lines(lm, paths, s: _Settings) -> Iterator[tuple[str, int, object]]:
    """(file, line number, Perplexity — with `per_token` a (Perplexity, Scored) pair — or None when the line is
    too short), as `_numbered` yields them from the workers."""
    from nlpkit.io import display_name, iter_lines

    for path in paths:
        name = display_name(path)
        for lineno, line in enumerate(iter_lines(path, errors=s.errors), 1):
            try:
                p, scored = text_perplexity(lm, line, mode=s.mode, context=s.context, stride=s.stride,
                                            add_bos=s.add_bos)
            except TooShort:
                yield name, lineno, None
                continue
            yield name, lineno, ((p, scored) if s.per_token else p)


def _text_records(lm, paths, s: _Settings, progress, map_windows) -> Iterator[dict]:
    """Each file scored whole in windows, here or on the workers (`score_windows_task`)."""
    from nlpkit.io import display_name, read_text

    windows_elsewhere = None
    if map_windows is not None:
        key = lm.worker_key

        def windows_elsewhere(seq: list[int], windows: list[Window]) -> Iterator[np.ndarray]:
            return map_windows(score_windows_task, [(w.tokens(seq), w.first) for w in windows],
                               (key, blas_threads()))

    several = len(paths) > 1 and not s.per_token
    totals: list = []
    for path in paths:
        name = display_name(path)
        text = read_text(path, errors=s.errors)
        if not text.strip():
            what = "empty text" if not text else "only whitespace (no text)"
            raise NlpkitError(f"{name}: {what}, nothing to score")
        p, scored = text_perplexity(lm, text, mode=s.mode, context=s.context, stride=s.stride, add_bos=s.add_bos,
                                    progress=None if map_windows is not None else progress,
                                    map_windows=windows_elsewhere)
        if s.per_token:
            yield from _token_rows(lm, name, None, scored)
        else:
            yield {"file": name, **_stats(p), **({"total": False} if several else {})}
            totals.append(p)
    if several and totals:
        nll = sum(p.nll for p in totals)
        n = sum(p.tokens for p in totals)
        p = Perplexity(tokens=n, nll=nll, mean_nll=nll / n, words=sum(p.words for p in totals),
                       bytes=sum(p.bytes for p in totals), nll_sq=sum(p.nll_sq for p in totals))
        yield {"file": TOTAL, **_stats(p), "total": True}
