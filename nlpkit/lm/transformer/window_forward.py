"""The engine's window forward: a window's logits a chunk of rows at a time through a KV cache, and their targets'
log-softmax in float64. Perplexity's windows (`nlpkit.lm.perplexity.window_scoring`), `TransformerLM.logprobs` and packed
scoring's log-softmax (`packed_scoring`) run it.
"""

from __future__ import annotations

import threading
import weakref
from contextlib import contextmanager
from typing import Iterator

import numpy as np

from nlpkit.lm.threads import RowPool, engine_threads, workers

CHUNK = 512  # tokens per forward call inside a window (bounds the [t, vocab] logits buffer)


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


_idle_caches: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> its idle window KV caches
_caches_lock = threading.Lock()


@contextmanager
def window_cache(model, t: int) -> Iterator:
    """A KV cache of t positions for one window's forwards: an idle one of this model's when there is one (emptied:
    a window reads only the keys it wrote, so the same numbers), else a new one; idle again after, at most
    `workers()` kept per model. Why: a new cache's memory is given a page at a time as it fills (`cache.lazy_zeros`),
    11.5k page faults per SmolLM2 window of 1024 tokens, 35-40 ms of its ~4 s on one thread."""
    try:
        with _caches_lock:
            idle = _idle_caches.setdefault(model, [])
    except TypeError:  # a model that takes no weak reference: a new cache each window
        yield model.new_cache(1, max_len=t)
        return
    with _caches_lock:
        cache = next((c for c in idle if c.max_len == t and len(c.k) == model.config.n_layers), None)
        idle[:] = [c for c in idle if c is not cache]
    if cache is None:
        cache = model.new_cache(1, max_len=t)
    cache.reset()
    try:
        yield cache
    finally:
        with _caches_lock:
            idle.append(cache)
            del idle[:-max(1, workers())]


def window_logits(model, ids: list[int], first: int) -> Iterator[np.ndarray]:  # [t] -> chunks of [n, V]
    """The logits rows predicting ids[first:] (row j predicts ids[j + 1]), a chunk of at most CHUNK rows at a
    time: one causal pass over ids[:-1] through a KV cache (`window_cache`), so a window's [t, V] logits are never
    all held."""
    first = max(first, 1)
    t = len(ids) - 1  # inputs ids[:-1], targets ids[1:]
    if t <= CHUNK:
        yield from _window_chunks(model, ids, first, None)
        return
    with window_cache(model, t) as cache:
        yield from _window_chunks(model, ids, first, cache)


def _window_chunks(model, ids: list[int], first: int, cache) -> Iterator[np.ndarray]:  # [t] -> chunks of [n, V]
    t = len(ids) - 1
    arr = np.asarray(ids, dtype=np.int64)[None, :]
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
        del logits  # the next chunk's forward may lend its memory again (`recycled`)
    return np.concatenate(out) if out else np.zeros(0)
