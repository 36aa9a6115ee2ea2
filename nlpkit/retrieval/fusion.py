"""Reciprocal rank fusion (Cormack, Clarke & Büttcher, SIGIR 2009), weighted.

    score(d) = Σ_r  w_r / (k + rank_r(d))

rank_r(d) is d's 1-based position in run r after `trec_order` (score descending, ties by
docid descending unless another tie rule is chosen); a document absent from run r (or below
its `depth`) gets nothing from r. Runs are fused query by query over the union of their
queries. With unit weights this equals ranx ``fuse(runs, method="rrf", norm=None)``.

>>> rrf([{"q": [("a", 3.0), ("b", 2.0)]}, {"q": [("b", 9.0)]}], k=0)
{'q': [('b', 1.5), ('a', 1.0)]}
"""

from __future__ import annotations

from typing import Sequence

from nlpkit.errors import UsageError
from nlpkit.retrieval.runs import Run, trec_order

TIE_BREAKS = ("docid-desc", "docid-asc", "input")


def query_set_difference(runs: Sequence[Run]) -> list[tuple[int, list[str]]]:
    """For each run that lacks some query of the union: (run position, missing qids)."""
    union: dict[str, None] = {}
    for run in runs:
        union.update(dict.fromkeys(run))
    out = []
    for i, run in enumerate(runs):
        missing = [q for q in union if q not in run]
        if missing:
            out.append((i, missing))
    return out


def rrf(runs: Sequence[Run], k: float = 60, weights: Sequence[float] | None = None,
        depth: int | None = None, top: int | None = None,
        tie_break: str = "docid-desc") -> Run:
    """Fuse runs; returns {qid: [(docid, score), ...]} best first, queries in first-seen order."""
    if not runs:
        raise UsageError("rrf needs at least one run")
    if weights is None:
        weights = [1.0] * len(runs)
    if len(weights) != len(runs):
        raise UsageError(f"{len(weights)} weights for {len(runs)} runs; give one weight per run")
    if k < 0:
        raise UsageError(f"`k` must be >= 0, got {k}")
    if depth is not None and depth < 1:
        raise UsageError(f"`depth` must be >= 1, got {depth}")
    if tie_break not in TIE_BREAKS:
        raise UsageError(f"unknown `tie_break` {tie_break!r} (choose from {', '.join(TIE_BREAKS)})")
    qids: dict[str, None] = {}
    for run in runs:
        qids.update(dict.fromkeys(run))
    fused: Run = {}
    for qid in qids:
        scores: dict[str, float] = {}
        for run, w in zip(runs, weights):
            ranked = trec_order(run.get(qid, []), tie_break)
            if depth is not None:
                ranked = ranked[:depth]
            for rank, (docid, _) in enumerate(ranked, 1):
                scores[docid] = scores.get(docid, 0.0) + w / (k + rank)
        ranked_out = trec_order(scores.items(), tie_break)
        fused[qid] = ranked_out if top is None else ranked_out[:top]
    return fused
