"""`tfidf` in shards: each shard's count matrix (kept on its worker), document frequencies summed,
each shard weighted with the corpus's idf.

The map and merge functions `nlpkit.distributed.stages` runs on a cluster; they know shards
(`nlpkit.shards`), not Dask. The counting and weighting are `nlpkit.stats.tfidf`'s, as on the local path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from nlpkit.shards import CountingStage, Shard
from nlpkit.stats.documents import DocNames
from nlpkit.stats.tfidf import (CountMatrix, TfidfMatrix, Weighting, count_matrix, matrix_market_entries, rank_rows,
                                top_terms, weigh)
from nlpkit.text import WordTokenizer


@dataclass
class ShardCounts:
    """One shard's count matrix (kept on its worker) and the numbers the driver needs."""

    counts: CountMatrix
    units: int          # lines or paragraphs read: numbering of the next shard of the file


@dataclass(frozen=True)
class CountSettings:
    """How `count_shard` reads and counts documents (`iter_documents`' and `count_matrix`'s options);
    `name_files`: names start ``path:``, as with several input files."""

    mode: str
    tokenizer: WordTokenizer
    ngram_range: tuple[int, int] = (1, 1)
    field: str = "text"
    id_field: str | None = None
    errors: str = "strict"
    fields: str = "T,W"
    name_files: bool = False


def count_shard(shards: Sequence[Shard | str], settings: CountSettings) -> ShardCounts:
    """`count_matrix` of one shard's documents (read by `iter_documents`, named from 1). A task is
    one shard: documents are named by their place in the shard, renumbered by the driver."""
    from nlpkit.stats.documents import doc_break, iter_documents

    if len(shards) != 1:
        raise ValueError(f"tfidf counts one shard a task, got {len(shards)}")
    s, shard = settings, shards[0]
    names = DocNames()
    prefix = f"{getattr(shard, 'path', shard)}:" if s.name_files else ""
    batches = iter_documents([shard], s.mode, names, s.field, s.id_field, s.errors, fields=s.fields, prefix=prefix)
    counts = count_matrix(batches, s.tokenizer, s.ngram_range, doc_break(s.mode), names)
    return ShardCounts(counts, names.units)


def shard_summary(part: ShardCounts) -> tuple[list[str], np.ndarray, int, int]:
    """(terms, df, n_docs, units) of a shard: what the driver reduces."""
    c = part.counts
    return c.terms, c.document_frequency(), c.n_docs, part.units


def merge_df(parts: list[tuple[list[str], np.ndarray, int, int]]) -> tuple[list[str], np.ndarray, int, int]:
    """Sum document frequencies over sorted term lists (the union stays sorted)."""
    terms = sorted(set().union(*(p[0] for p in parts)))
    index = {t: i for i, t in enumerate(terms)}
    df = np.zeros(len(terms), dtype=np.int64)
    for p in parts:
        df[np.fromiter(map(index.__getitem__, p[0]), dtype=np.int64, count=len(p[0]))] += p[1]
    return terms, df, sum(p[2] for p in parts), sum(p[3] for p in parts)


def weigh_shard(part: ShardCounts, terms: list[str], df: np.ndarray, idf: np.ndarray,
                weighting: Weighting, name_offset: int) -> TfidfMatrix:
    """A shard's rows weighted with the corpus's kept `terms` (sorted), df and idf."""
    c = part.counts
    index = {t: i for i, t in enumerate(terms)}
    col = np.fromiter((index.get(t, -1) for t in c.terms), dtype=np.int64, count=len(c.terms))
    new = col[c.indices]
    entry = new >= 0
    row = c.rows()[entry]
    indptr = np.zeros(c.n_docs + 1, dtype=np.int64)
    np.cumsum(np.bincount(row, minlength=c.n_docs), out=indptr[1:])
    names = c.names.shifted(name_offset) if name_offset else c.names
    pruned = CountMatrix(indptr, new[entry].astype(np.int32), c.counts[entry], terms, names)
    return weigh(pruned, weighting, df, idf)


COUNTING = CountingStage(count_shard)   # the parts stay on the workers: `shard_summary`, `merge_df`


def shard_info(part: ShardCounts) -> tuple[int, int]:
    """(documents, units) of a shard."""
    return part.counts.n_docs, part.units


def weigh_task(item: tuple[ShardCounts, int], terms: list[str], df: np.ndarray, idf: np.ndarray,
               weighting: Weighting) -> TfidfMatrix:
    """`weigh_shard` for a Dask map: ``item`` = (a shard's counts, its name offset)."""
    return weigh_shard(item[0], terms, df, idf, weighting, item[1])


def matrix_info(m: TfidfMatrix) -> tuple[int, int]:
    """(documents, stored entries) of a weighted shard."""
    return m.n_docs, len(m.data)


def doc_names(m: TfidfMatrix) -> list[str]:
    return [m.names[i] for i in range(m.n_docs)]


def entries_task(item: tuple[TfidfMatrix, int]) -> str:
    """A weighted shard's MatrixMarket entries, its rows numbered after ``item[1]``."""
    return "".join(matrix_market_entries(*item))


def query_task(item: tuple[TfidfMatrix, int], q: np.ndarray, k: int) -> list[tuple[int, str, float]]:
    """A shard's best k rows for the unit query q: (corpus row, name, cosine)."""
    m, offset = item
    return [(offset + i, m.names[i], c) for i, c in rank_rows(m, q, k)]


def top_term_records(m: TfidfMatrix, k: int) -> list[tuple[str, int, str, float]]:
    """(doc name, rank, term, weight) rows of `top_terms`, for a shard's part of the output."""
    return [(m.names[i], r, term, weight) for i, terms in top_terms(m, k)
            for r, (term, weight) in enumerate(terms, 1)]
