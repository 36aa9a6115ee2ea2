"""`pmi` in shards: co-occurrences counted per shard, summed, and the n-grams across shard boundaries
added once.

The map and merge functions `nlpkit.distributed.stages` runs on a cluster (`COUNTING`, then
`add_boundaries` on the driver); they know shards (`nlpkit.shards`), not Dask. The counting is
`nlpkit.stats.pmi`'s, as on the local path.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain
from typing import Sequence

import numpy as np

from nlpkit.errors import NlpkitError
from nlpkit.shards import CountingStage, Shard
from nlpkit.stats.codes import TRIGRAM_VOCAB, pack_ngrams, sum_by_key
from nlpkit.stats.counting import BlockEncoder, iter_blocks
from nlpkit.stats.pmi import Cooccurrence, CooccurrenceCounter, Edge, break_pattern, count_items
from nlpkit.text import WordTokenizer


@dataclass
class PartialCooccurrence:
    """Counts of some shards plus each shard's `Edge`, in shard order."""

    co: Cooccurrence
    edges: list[Edge]


@dataclass(frozen=True)
class CountSettings:
    """`count_cooccurrences`' options, for `count_shard`."""

    tokenizer: WordTokenizer
    window: int = 2
    ngram: int = 2
    cross_lines: bool = False
    cross_sentences: bool = False
    errors: str = "strict"


def count_shard(shards: Sequence[Shard | str], settings: CountSettings) -> PartialCooccurrence:
    """Count shards (or paths) in input order as `count_cooccurrences` counts files, keeping each
    shard's edges so n-grams across shard boundaries can be added once (`add_boundaries`)."""
    s = settings
    enc = BlockEncoder(s.tokenizer, break_pattern(s.cross_lines, s.cross_sentences), shared=True)
    counter = CooccurrenceCounter(s.window, s.ngram)
    edges = []
    for sh in shards:
        stream = getattr(sh, "file_index", 0)
        edge = count_items(enc.encode_many((stream, b) for b in iter_blocks(sh, s.errors)), enc, counter)
        edge.stream = stream
        edges.append(edge)
    return PartialCooccurrence(counter.result(enc.words), edges)


def merge_cooccurrences(parts: list[PartialCooccurrence]) -> PartialCooccurrence:
    """Sum partial counts (any order of vocabularies); edges stay in the given order."""
    first = parts[0].co
    words = list(dict.fromkeys(chain.from_iterable(p.co.words for p in parts)))   # the union
    vocab = {w: i for i, w in enumerate(words)}
    luts = [np.fromiter(map(vocab.__getitem__, p.co.words), dtype=np.int64, count=len(p.co.words))
            for p in parts]
    if first.ngram == 3 and len(vocab) >= TRIGRAM_VOCAB:
        raise NlpkitError(f"`ngram` 3 supports at most {TRIGRAM_VOCAB:,} distinct words")
    unigram = np.zeros(len(vocab), dtype=np.int64)
    codes = []
    for p, lut in zip(parts, luts):
        unigram[lut] += p.co.unigram[:len(lut)]
        ids = lut[p.co.ngram_ids()]
        codes.append(pack_ngrams(*ids.T))
    keys = np.concatenate(codes)
    counts = np.concatenate([p.co.counts for p in parts])
    keys, counts = sum_by_key(keys, counts)
    co = Cooccurrence(words, unigram, keys, counts, sum(p.co.n_tokens for p in parts),
                      first.window, first.ngram)
    return PartialCooccurrence(co, [e for p in parts for e in p.edges])


def add_boundaries(part: PartialCooccurrence) -> Cooccurrence:
    """The n-grams that span a shard boundary (first word in one shard, last in a later one
    of the same file), counted once, added to the merged counts."""
    co = part.co
    w = co.window
    vocab = {x: i for i, x in enumerate(co.words)}
    found: list[tuple[int, ...]] = []
    carry: list[int] = []
    stream = None
    for e in part.edges:
        if e.stream != stream:
            stream, carry = e.stream, []
        head = [vocab[x] for x in e.head]
        seq, n_old = carry + head, len(carry)
        for j in range(n_old, len(seq)):              # last word in the new shard
            for i in range(max(0, j - (w - 1)), n_old):   # first word in the carry
                if co.ngram == 2:
                    found.append((seq[i], seq[j]))
                else:
                    found.extend((seq[i], seq[m], seq[j]) for m in range(i + 1, j))
        tail = [vocab[x] for x in e.tail]
        carry = tail if e.closed else (carry + tail)[-(w - 1):]
    if not found:
        return co
    codes = pack_ngrams(*np.array(found, dtype=np.int64).reshape(len(found), co.ngram).T)
    keys, counts = sum_by_key(np.concatenate([co.keys, codes]), np.concatenate([co.counts, np.ones(len(codes), np.int64)]))
    return Cooccurrence(co.words, co.unigram, keys, counts, co.n_tokens, co.window, co.ngram)


COUNTING = CountingStage(count_shard, merge_cooccurrences)   # then `add_boundaries` on the driver
