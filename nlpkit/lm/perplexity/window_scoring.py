"""Window scoring: each window's token log-probabilities under a model, gathered into a `Scored`.

A window's logits come a chunk of rows at a time through a KV cache, their targets' log-softmax in float64 (the
engine's window forward: `nlpkit.lm.transformer.window_forward`); `local_windows` runs a plan's windows on this machine (a bare engine
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
    # A LanguageModel and a bare engine `Model` declare it (`parallel_windows`: not native weights with a large
    # layer scratch, one a model; not Python-loop scoring, where threads would only queue).
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
