"""`bpe-train`'s counting in shards: pre-token counts per shard, summed in input order.

The map and merge functions `nlpkit.distributed.stages` runs on a cluster; they know shards
(`nlpkit.shards`), not Dask. The counting is `nlpkit.bpe.trainer.count_pieces`, as on the local path.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Sequence

from nlpkit.bpe.pretokenize import PreTokenizer
from nlpkit.bpe.trainer import count_pieces
from nlpkit.shards import CountingStage, Shard


@dataclass(frozen=True)
class CountSettings:
    """`count_pieces`' options, for `count_shard`."""

    pretok: PreTokenizer
    errors: str = "strict"


def count_shard(shards: Sequence[Shard | str], settings: CountSettings) -> Counter:
    """Pre-token counts of shards (`nlpkit.distributed`) in order: `count_pieces` in one process."""
    return count_pieces(list(shards), settings.pretok, 1, settings.errors)


def merge_counts(parts: list[Counter]) -> Counter:
    """Sum counters in order; keys keep their first-occurrence order (as one pass would see them)."""
    total: Counter = Counter()
    for p in parts:
        total.update(p)
    return total


COUNTING = CountingStage(count_shard, merge_counts)
