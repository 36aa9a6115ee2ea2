"""`ngram-train`'s counting in shards: n-gram counts per shard (lines are sentences: shards are
independent), merged in input order.

The map and merge functions `nlpkit.distributed.stages` runs on a cluster; they know shards
(`nlpkit.shards`), not Dask. The counting is `nlpkit.lm.ngram.ngram_counts.count_ngrams`, as on the local path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from nlpkit.lm.ngram.ngram_counts import (SPECIALS, EmptyCorpus, NgramCounts, count_ngrams, narrow, ngram_keys,
                                          row_dtype, sorted_unique)
from nlpkit.shards import CountingStage, Shard


@dataclass(frozen=True)
class CountSettings:
    """`count_ngrams`' options, for `count_shard`."""

    order: int
    lowercase: bool = False
    transform: Callable[[str], str] | None = None
    errors: str = "strict"


def count_shard(shards: Sequence[Shard | str], settings: CountSettings) -> NgramCounts:
    """`count_ngrams` of shards (`nlpkit.distributed`) in order; lines never cross shards."""
    s = settings
    try:
        return count_ngrams(list(shards), s.order, lowercase=s.lowercase, transform=s.transform, errors=s.errors,
                            jobs=1)
    except EmptyCorpus:                  # an empty file among others: nothing to add (the driver decides)
        return NgramCounts(order=s.order, vocab=list(SPECIALS))


def merge_counts(parts: list[NgramCounts]) -> NgramCounts:
    """Sum shards' counts; ids stay in first-appearance order over the parts in order.

    Order by order, each part's keys are rewritten over the merged order below (`maps`: a part's
    row -> the merged row) and all of them sorted once (`sorted_unique`), which maps the part's
    rows of this order for the next."""
    parts = [p for p in parts if p.sentences] or parts[:1]      # empty shards hold no tables
    if not parts[0].sentences:
        return parts[0]
    vocab: dict[str, int] = {}
    luts = [np.fromiter((vocab.setdefault(w, len(vocab)) for w in p.vocab), dtype=np.int64, count=len(p.vocab))
            for p in parts]
    order, V = parts[0].order, len(vocab)
    out = NgramCounts(order=order, vocab=list(vocab), sentences=sum(p.sentences for p in parts),
                      tokens=sum(p.tokens for p in parts),
                      skipped_symbols=sum(p.skipped_symbols for p in parts))
    unigrams = np.zeros(V, dtype=np.int64)
    for p, lut in zip(parts, luts):
        unigrams[lut] += p.counts[0]                      # a part's order-1 rows are its word ids
    out.keys, out.counts, out.suffix = [np.arange(V, dtype=np.int64)], [unigrams], [np.zeros(0, dtype=np.int32)]
    maps = luts
    for k in range(2, order + 1):
        keys = np.concatenate([ngram_keys(m[p.keys[k - 1] // len(p.vocab)], lut[p.keys[k - 1] % len(p.vocab)], V)
                               for p, m, lut in zip(parts, maps, luts)])
        table, counts, at = sorted_unique(keys, np.concatenate([p.counts[k - 1] for p in parts]))
        del keys
        ends = np.cumsum([len(p.keys[k - 1]) for p in parts])
        new_maps = np.split(at, ends[:-1])
        suffix = np.empty(len(table), dtype=row_dtype(len(out.keys[-1])))
        for p, m, new_m in zip(parts, maps, new_maps):
            suffix[new_m] = m[p.suffix[k - 1]]
        out.keys.append(table)
        out.counts.append(narrow(counts))
        out.suffix.append(suffix)
        maps = new_maps
    return out


COUNTING = CountingStage(count_shard, merge_counts)
