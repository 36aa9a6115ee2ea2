"""Window scoring: each window's token log-probabilities under a model, gathered into a `Scored`.

A window's logits come a chunk of rows at a time through a KV cache, their targets' log-softmax in float64 (the
engine's window forward: `nlpkit.lm.transformer.window_forward`); `local_windows` runs a plan's windows on this machine (a bare engine
`Model` several at a time on threads), `score_windows` gathers them, and `score_windows_task` is the same on a
Dask worker's cached model (`cached_model`). The plans themselves are `nlpkit.lm.perplexity_windows`'.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterator

import numpy as np

from nlpkit.lm.perplexity_windows import Window
from nlpkit.lm.threads import RowPool, engine_threads, held_blas_threads, match_blas_threads, serial_here
from nlpkit.lm.transformer.window_forward import (CHUNK, log_softmax_at, row_log_normalizers,  # noqa: F401
                                                 window_logits, window_logprobs)



@dataclass
class Scored:
    """Log-probabilities of the scored tokens: `positions` index the id list that was scored."""

    positions: list[int] = field(default_factory=list)
    ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    mean_nll: float = float("nan")  # mean over the scored tokens, -mean(logprobs)
    guide_mean_nll: float = float("nan")  # sliding only: the transformers guide's trg_len - 1 weighting



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
