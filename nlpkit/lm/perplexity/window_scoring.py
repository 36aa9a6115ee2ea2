"""Window scoring: each window's token log-probabilities under a model, gathered into a `Scored`.

A window's logits come a chunk of rows at a time through a KV cache (`window_logits`), their targets'
log-softmax in float64 (`log_softmax_at`); `local_windows` runs a plan's windows on this machine (a bare engine
`Model` several at a time on threads), `score_windows` gathers them, and `score_windows_task` is the same on a
Dask worker's cached model (`nlpkit.lm.spec.cached_model`). The plans themselves are `nlpkit.lm.perplexity.windows`'.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterator

import numpy as np

from nlpkit.lm.perplexity.windows import Window
from nlpkit.lm.spec import cached_model
from nlpkit.lm.threads import RowPool, engine_threads, held_blas_threads, match_blas_threads, serial_here

CHUNK = 512  # tokens per forward call inside a window (bounds the [t, vocab] logits buffer)


@dataclass
class Scored:
    """Log-probabilities of the scored tokens: `positions` index the id list that was scored."""

    positions: list[int] = field(default_factory=list)
    ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    mean_nll: float = float("nan")  # mean over the scored tokens, -mean(logprobs)
    guide_mean_nll: float = float("nan")  # sliding only: the transformers guide's trg_len - 1 weighting



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
    """`LanguageModel.logprobs` (ids, first) -> log-probabilities of ids[first:]; for a bare transformer `Model`
    (`score_ids(model, ...)`, the engine's own API), `window_logprobs` on it."""
    from nlpkit.lm.transformer.model import Model

    if isinstance(model, Model):
        return lambda ids, first: window_logprobs(model, ids, first)
    return model.logprobs


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
    """A Dask task: `LanguageModel.logprobs` of each (window tokens, first scored) on this worker's cached
    model (`model_key`: a `worker_key`), with the driver's BLAS thread count (see `score_lines_shard`)."""
    match_blas_threads(blas_threads)
    lm = cached_model(*model_key)
    return [lm.logprobs(ids, first) for ids, first in chunks]
