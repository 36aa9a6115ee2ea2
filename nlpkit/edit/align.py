"""Edit operations between two sequences, and a two-line aligned view.

`alignment(a, b)` lists one operation per aligned column: ``match``, ``substitute``,
``insert`` (a unit of b that a lacks) or ``delete`` (a unit of a that b lacks).
Applying them to a yields b (`apply`). The non-match operations are the same, in the
same order and positions, as rapidfuzz's ``Levenshtein.editops`` / ``Indel.editops``
(``replace`` there is ``substitute`` here): the common prefix and suffix are set aside,
then the DP matrix is walked back from the end preferring a deletion, then an
insertion, then the diagonal, exactly as rapidfuzz's bit-matrix backtrace does.

>>> [op.tag for op in alignment("kitten", "sitting") if op.tag != "match"]
['substitute', 'substitute', 'insert']
>>> print("\\n".join(aligned_view(alignment("kitten", "sitting"))))
kitten-
sitting
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Hashable, Sequence

from nlpkit.edit.distance import check_weights
from nlpkit.errors import UsageError

ALIGN_METRICS = ("levenshtein", "indel", "lcs", "hamming")
GAP = "-"


@dataclass(frozen=True)
class Op:
    """One aligned column: `a_index`/`b_index` are positions in a and b (before the op applies)."""

    tag: str                 # match | substitute | insert | delete
    a_index: int
    b_index: int
    a: Hashable | None       # the unit of a (None for insert)
    b: Hashable | None       # the unit of b (None for delete)


def _affix(a: Sequence, b: Sequence) -> tuple[int, int]:
    """Lengths of the common prefix and (of the rest) the common suffix."""
    p = 0
    while p < len(a) and p < len(b) and a[p] == b[p]:
        p += 1
    s = 0
    while s < len(a) - p and s < len(b) - p and a[-1 - s] == b[-1 - s]:
        s += 1
    return p, s


def _matrix(a: Sequence, b: Sequence, ins: float, dele: float, sub: float) -> list[list[float]]:
    """Full DP matrix D[i][j] = distance(a[:i], b[:j])."""
    d = [[j * ins for j in range(len(b) + 1)]]
    for i, ca in enumerate(a, 1):
        prev, row = d[-1], [i * dele]
        for j, cb in enumerate(b, 1):
            row.append(min(prev[j - 1] + (0 if ca == cb else sub), prev[j] + dele, row[j - 1] + ins))
        d.append(row)
    return d


def _backtrace(a: Sequence, b: Sequence, ins: float, dele: float, sub: float) -> list[Op]:
    p, s = _affix(a, b)
    ma, mb = a[p:len(a) - s], b[p:len(b) - s]
    d = _matrix(ma, mb, ins, dele, sub)
    i, j = len(ma), len(mb)
    ops: list[Op] = []
    while i and j:
        here = d[i][j]
        same = ma[i - 1] == mb[j - 1]
        diag = d[i - 1][j - 1] + (0 if same else sub)
        if d[i - 1][j] + dele == here:
            i -= 1
            ops.append(Op("delete", p + i, p + j, ma[i], None))
        elif d[i][j - 1] + ins == here and (same or diag != here):
            j -= 1
            ops.append(Op("insert", p + i, p + j, None, mb[j]))
        else:
            i, j = i - 1, j - 1
            ops.append(Op("match" if same else "substitute", p + i, p + j, ma[i], mb[j]))
    while i:
        i -= 1
        ops.append(Op("delete", p + i, p + j, ma[i], None))
    while j:
        j -= 1
        ops.append(Op("insert", p + i, p + j, None, mb[j]))
    head = [Op("match", k, k, a[k], b[k]) for k in range(p)]
    tail = [Op("match", len(a) - s + k, len(b) - s + k, a[len(a) - s + k], b[len(b) - s + k])
            for k in range(s)]
    return head + ops[::-1] + tail


def alignment(a: Sequence[Hashable], b: Sequence[Hashable], metric: str = "levenshtein",
              weights: Sequence[int] | None = None) -> list[Op]:
    """Operations turning a into b, one per aligned column (matches included)."""
    if metric not in ALIGN_METRICS:
        raise UsageError(f"alignment is available for {', '.join(ALIGN_METRICS)}, not {metric}")
    ins, dele, sub = check_weights(weights)
    if metric != "levenshtein" and (ins, dele, sub) != (1, 1, 1):
        raise UsageError(f"weights apply to levenshtein only, not {metric}")
    if metric == "hamming":
        n = min(len(a), len(b))
        ops = [Op("match" if a[k] == b[k] else "substitute", k, k, a[k], b[k]) for k in range(n)]
        ops += [Op("delete", k, n, a[k], None) for k in range(n, len(a))]
        ops += [Op("insert", len(a), k, None, b[k]) for k in range(n, len(b))]
        return ops
    if metric in ("indel", "lcs"):
        return _backtrace(a, b, 1, 1, float("inf"))
    return _backtrace(a, b, ins, dele, sub)


def editops(a: Sequence[Hashable], b: Sequence[Hashable], metric: str = "levenshtein",
            weights: Sequence[int] | None = None) -> list[tuple[str, int, int]]:
    """The non-match operations as (tag, a_index, b_index), like rapidfuzz's editops."""
    return [(op.tag, op.a_index, op.b_index) for op in alignment(a, b, metric, weights)
            if op.tag != "match"]


def cost(ops: Sequence[Op], weights: Sequence[int] | None = None) -> int:
    """Total weight of the operations: equals the distance for an optimal alignment."""
    ins, dele, sub = check_weights(weights)
    price = {"match": 0, "insert": ins, "delete": dele, "substitute": sub}
    return sum(price[op.tag] for op in ops)


def apply(a: Sequence[Hashable], ops: Sequence[Op]) -> list:
    """Replay the operations on a: ``apply(a, alignment(a, b)) == list(b)``."""
    out: list = []
    i = 0
    for op in ops:
        if op.tag in ("match", "substitute", "delete"):
            if op.a_index != i or a[i] != op.a:
                raise ValueError(f"operation {op} does not fit position {i} of the source")
            i += 1
        if op.tag in ("match", "substitute", "insert"):
            out.append(op.b)
    if i != len(a):
        raise ValueError(f"operations consume {i} of {len(a)} source units")
    return out


def _width(text: str) -> int:
    """Terminal columns a string takes (East Asian wide/full-width characters take two)."""
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1
               for c in text)


def aligned_view(ops: Sequence[Op], separator: str = "") -> tuple[str, str]:
    """Two lines, a over b, each column padded to the same width; gaps shown as '-'.

    Use ``separator=" "`` for word-level alignments.
    """
    top, bottom = [], []
    for op in ops:
        x = GAP if op.a is None else str(op.a)
        y = GAP if op.b is None else str(op.b)
        if op.a is None:
            x = GAP * max(1, _width(y))
        if op.b is None:
            y = GAP * max(1, _width(x))
        w = max(_width(x), _width(y))
        top.append(x + " " * (w - _width(x)))
        bottom.append(y + " " * (w - _width(y)))
    return separator.join(top), separator.join(bottom)
