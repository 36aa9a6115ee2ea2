"""IR effectiveness metrics with trec_eval semantics: nDCG@k, MAP@k, Recall@k, P@k, MRR@k.

Conventions (those of trec_eval, which ranx and pytrec_eval reproduce):
- each query's documents are ranked by `trec_order`: score descending, ties by docid descending;
- a document is relevant when its qrels gain is > 0; the gain itself weighs nDCG (linear gain,
  discount log2(rank + 1)); the ideal ranking sorts all judged gains, descending;
- MAP@k divides by all relevant documents of the query (not min(R, k)), like map_cut_k;
- the mean is over the queries of the qrels that have at least one relevant document; such a
  query absent from the run scores 0 (trec_eval -c). Queries without relevant documents are skipped.
- numeric ids match without leading zeros (CACM's qrels write query 1 as ``01``).

>>> evaluate({"1": [("a", 2.0), ("b", 1.0)]}, {"1": {"b": 1}}, ["recall@1", "map@10"])[0]
{'recall@1': 0.0, 'map@10': 0.5}
"""

from __future__ import annotations

import math
import re
from typing import Sequence

from nlpkit.errors import UsageError
from nlpkit.retrieval.runs import Qrels, Run, trec_order

METRIC_NAMES = ("ndcg", "map", "recall", "p", "mrr")
DEFAULT_METRICS = ("ndcg@10", "map@100", "recall@100")
_METRIC = re.compile(r"^(ndcg|map|recall|p|precision|mrr)(?:@(\d+))?$")


def parse_metrics(spec: str | Sequence[str]) -> list[str]:
    """'ndcg@10,map@100' -> ['ndcg@10', 'map@100']; unknown names are a usage error."""
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    out = []
    for item in items:
        m = _METRIC.match(item.strip().lower())
        if not m or (m.group(2) is not None and int(m.group(2)) < 1):
            raise UsageError(f"unknown metric {item!r} (use ndcg, map, recall, p or mrr, "
                             "optionally with @k, e.g. ndcg@10)")
        name = "p" if m.group(1) == "precision" else m.group(1)
        out.append(name + (f"@{m.group(2)}" if m.group(2) else ""))
    return out


def norm_id(x: str) -> str:
    """'007' -> '7' for numeric ids, other ids unchanged."""
    return (x.lstrip("0") or "0") if x.isdigit() else x


def _query_metric(name: str, k: int | None, ranked: list[str], gains: dict[str, int]) -> float:
    n_rel = sum(1 for g in gains.values() if g > 0)
    top = ranked if k is None else ranked[:k]
    if name == "ndcg":
        dcg = sum(max(gains.get(d, 0), 0) / math.log2(i + 2) for i, d in enumerate(top))
        ideal = sorted((g for g in gains.values() if g > 0), reverse=True)
        ideal = ideal if k is None else ideal[:k]
        idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
        return dcg / idcg if idcg > 0 else 0.0
    hits = [gains.get(d, 0) > 0 for d in top]
    if name == "map":
        total, found = 0.0, 0
        for i, h in enumerate(hits):
            if h:
                found += 1
                total += found / (i + 1)
        return total / n_rel
    if name == "recall":
        return sum(hits) / n_rel
    if name == "p":
        depth = k if k is not None else len(top)
        return sum(hits) / depth if depth else 0.0
    for i, h in enumerate(hits):  # mrr
        if h:
            return 1.0 / (i + 1)
    return 0.0


def evaluate(run: Run, qrels: Qrels, metrics: Sequence[str] = DEFAULT_METRICS
             ) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """(mean of each metric, per-query values) of `run` against `qrels` (see module docstring)."""
    metrics = parse_metrics(metrics)
    parsed = []
    for m in metrics:
        name, _, k = m.partition("@")
        parsed.append((m, name, int(k) if k else None))
    by_q = {norm_id(q): pairs for q, pairs in run.items()}
    per_query: dict[str, dict[str, float]] = {}
    for qid, judged in qrels.items():
        gains = {norm_id(d): g for d, g in judged.items()}
        if not any(g > 0 for g in gains.values()):
            continue
        ranked = [norm_id(d) for d, _ in trec_order(by_q.get(norm_id(qid), []))]
        per_query[qid] = {m: _query_metric(name, k, ranked, gains) for m, name, k in parsed}
    n = len(per_query)
    means = {m: (math.fsum(v[m] for v in per_query.values()) / n if n else 0.0) for m in metrics}
    return means, per_query
