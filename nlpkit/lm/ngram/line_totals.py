"""Totals of scored lines: what ``perplexity`` prints for an n-gram model, per file and per line.

KenLM ``query``'s totals (tokens count </s>):

    perplexity including OOVs = 10 ** (-sum log10 p / tokens)
    perplexity excluding OOVs = 10 ** (-(sum - sum over OOVs) / (tokens - OOVs))

and nlpkit's: mean NLL in nats per token, its uncertainty, and bits per byte = -sum log2 p / bytes.
`NgramPerplexity` is a running total, `LineSums` each line's sums over a scored batch (numpy arrays,
what a Dask worker sends back) and `LineTotals` one line's, read-only (a tuple, made in C by the
thousand: `collector_paused`).
"""

from __future__ import annotations

import gc
import math
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import repeat
from operator import itemgetter

import numpy as np

from nlpkit.lm.uncertainty import standard_error

class _Figures:
    """The figures made from totals (`tokens`, `log10_total`, ...): what a running total and one line's
    totals both print."""

    __slots__ = ()

    @property
    def perplexity(self) -> float:
        return 10.0 ** (-self.log10_total / self.tokens) if self.tokens else math.nan

    @property
    def perplexity_no_oov(self) -> float:
        n = self.tokens - self.oov
        return 10.0 ** (-self.log10_known / n) if n else math.nan

    @property
    def nll_nats(self) -> float:
        return -self.log10_total * math.log(10.0)

    @property
    def mean_nll(self) -> float:
        return self.nll_nats / self.tokens if self.tokens else math.nan

    @property
    def bits_per_byte(self) -> float:
        return -self.log10_total * math.log2(10.0) / self.bytes if self.bytes else math.nan

    @property
    def mean_nll_se(self) -> float:
        """σ of the mean NLL (nats) over all tokens, llama.cpp's `PPL = X +/- Y` estimate
        (`nlpkit.lm.uncertainty.standard_error`); NaN for one token."""
        return standard_error(-self.log10_total, self.log10_sq, self.tokens) * math.log(10.0)

    @property
    def perplexity_unc(self) -> float:
        """The ± of `perplexity` (OOVs included): ppl × σ(mean NLL in nats), as llama.cpp."""
        return self.perplexity * self.mean_nll_se


@dataclass(slots=True)
class NgramPerplexity(_Figures):
    """Totals over some lines (see the module docstring)."""

    sentences: int = 0
    tokens: int = 0
    oov: int = 0
    zero_prob: int = 0
    log10_total: float = 0.0
    log10_oov: float = 0.0
    bytes: int = 0
    words: int = 0
    log10_known: float = 0.0       # over the tokens that are not OOV (kept apart: an MLE model's OOVs are -inf)
    log10_sq: float = 0.0          # sum of the squared token log10 p: the uncertainty (`mean_nll_se`)

    def add(self, s: "LineScore") -> None:
        self.sentences += 1
        self.tokens += len(s.log10)
        self.oov += int(s.oov.sum())
        self.zero_prob += int(np.isneginf(s.log10).sum())
        self.log10_total += float(np.sum(s.log10, dtype=np.float64))
        self.log10_oov += float(np.sum(s.log10[s.oov], dtype=np.float64))
        self.log10_known += float(np.sum(s.log10[~s.oov], dtype=np.float64))
        self.log10_sq += float(np.sum(s.log10 * s.log10, dtype=np.float64))
        self.bytes += s.bytes
        self.words += len(s.log10) - 1

    def add_batch(self, b: "ScoredBatch") -> None:
        """Add a batch of lines at once (`add_sums` of its `line_sums`)."""
        self.add_sums(b.line_sums())

    def add_sums(self, s: "LineSums") -> None:
        """Add scored lines' figures. The log10 sums run over the lines' own totals one after another,
        so a file's totals do not depend on how its lines were batched or sharded (a Dask run prints
        the same digits as a local one)."""
        self.sentences += len(s.tokens)
        self.tokens += int(s.tokens.sum())
        self.oov += int(s.oov.sum())
        self.zero_prob += int(s.zero_prob.sum())
        self.log10_total = _running_sum(self.log10_total, s.log10)
        self.log10_oov = _running_sum(self.log10_oov, s.log10_oov)
        self.log10_known = _running_sum(self.log10_known, s.log10_known)
        self.log10_sq = _running_sum(self.log10_sq, s.log10_sq)
        self.bytes += s.bytes
        self.words += int(s.tokens.sum()) - len(s.tokens)

    def merge(self, other: "NgramPerplexity") -> None:
        """Add another set of totals (a corpus total over files)."""
        for name in ("sentences", "tokens", "oov", "zero_prob", "log10_total", "log10_oov", "bytes", "words",
                     "log10_known", "log10_sq"):
            setattr(self, name, getattr(self, name) + getattr(other, name))


class LineTotals(tuple, _Figures):
    """One line's totals, read-only: the fields and figures of an `NgramPerplexity` that `add`ed the
    line's `LineScore` (`sentences` 1, `words` its tokens less </s>). A tuple underneath, so that
    `LineSums.lines` makes thousands of them in C."""

    __slots__ = ()
    sentences = 1
    tokens = property(itemgetter(0))
    oov = property(itemgetter(1))
    zero_prob = property(itemgetter(2))
    log10_total = property(itemgetter(3))
    log10_oov = property(itemgetter(4))
    bytes = property(itemgetter(5))
    log10_known = property(itemgetter(6))
    log10_sq = property(itemgetter(7))

    @property
    def words(self) -> int:
        return self[0] - 1

    def __repr__(self) -> str:
        return (f"LineTotals(tokens={self[0]}, oov={self[1]}, zero_prob={self[2]}, log10_total={self[3]!r}, "
                f"bytes={self[5]})")


def _running_sum(start: float, values: np.ndarray) -> float:
    """start + values[0] + values[1] + ..., added left to right (np.cumsum adds in order).

    ``_running_sum(1.0, np.array([2.0, 3.0])) -> 6.0``
    """
    if len(values) == 0:
        return start
    acc = np.empty(len(values) + 1, dtype=np.float64)
    acc[0] = start
    acc[1:] = values
    return float(np.cumsum(acc)[-1])


@dataclass
class LineSums:
    """Each scored line's figures, one entry a line in order — what file totals and ``--per-line``
    records are made of, and all a Dask worker sends back for them. `line_bytes` (each line's UTF-8
    bytes with its newline) only when asked for; `bytes` is their sum."""

    tokens: np.ndarray                 # int64 [L], </s> included
    oov: np.ndarray
    zero_prob: np.ndarray
    log10: np.ndarray                  # float64 [L]
    log10_oov: np.ndarray
    log10_known: np.ndarray
    bytes: int
    line_bytes: list[int] | None = None
    log10_sq: np.ndarray | None = None  # float64 [L]: each line's sum of squared token log10 p

    def lines(self) -> list[LineTotals]:
        """Each line's totals (needs `line_bytes`)."""
        with collector_paused():
            return list(map(tuple.__new__, repeat(LineTotals),
                            zip(self.tokens.tolist(), self.oov.tolist(), self.zero_prob.tolist(), self.log10.tolist(),
                                self.log10_oov.tolist(), self.line_bytes, self.log10_known.tolist(),
                                self.log10_sq.tolist())))


@contextmanager
def collector_paused():
    """No garbage collection while thousands of per-line tuples are made: none can be part of a cycle,
    and a young-generation pass every 700 of them cost as much as making them."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


__all__ = ["NgramPerplexity", "LineSums", "LineTotals", "collector_paused"]
