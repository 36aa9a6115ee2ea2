"""Each subcommand's counting stage as a map over shards plus a tree reduction.

The map functions are the local path's own (`nlpkit.stats.pmi.count_shard`, ...); this
module only plans shards, submits them and finishes on the driver. Every function takes a
connected `distributed.Client` (`nlpkit.distributed.cluster.connect`).
"""

from __future__ import annotations

from typing import Callable

from nlpkit.distributed.cluster import map_reduce
from nlpkit.distributed.shards import SHARD_BYTES, plan_shards


def pmi_counts(client, paths: list[str], tokenizer, window: int = 2, ngram: int = 2,
               cross_lines: bool = False, cross_sentences: bool = False, errors: str = "strict",
               shard_bytes: int = SHARD_BYTES, progress: Callable[..., None] | None = None):
    """`nlpkit.stats.pmi.count_cooccurrences` over a cluster: the same `Cooccurrence` numbers."""
    from nlpkit.stats import pmi

    shards = plan_shards(paths, shard_bytes, "line")
    part = map_reduce(client, pmi.count_shard, shards, pmi.merge_cooccurrences, progress,
                      args=(tokenizer, window, ngram, cross_lines, cross_sentences, errors))
    return pmi.add_boundaries(part)


def bpe_counts(client, paths: list[str], pretok, errors: str = "strict", shard_bytes: int = SHARD_BYTES,
               progress: Callable[..., None] | None = None):
    """`nlpkit.bpe.trainer.count_pieces` over a cluster: the same counts in the same key order."""
    from nlpkit.bpe import trainer

    shards = plan_shards(paths, shard_bytes, "line")
    return map_reduce(client, trainer.count_shard, shards, trainer.merge_counts, progress,
                      args=(pretok, errors))
