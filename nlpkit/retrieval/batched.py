"""Many BM25 queries at once: `BM25Index.search`'s results (scores, ranks, tie order), found faster.

A block of queries has its postings gathered in one fancy index (every (query, term) span of the
postings arrays at once, a few tens of MB at most), so the Python work per query is a handful of
numpy calls. Each query then sums its postings into a dense [N] array with one `bincount`, in the
same order as `search` does (its terms in query order, each term's postings in document order), so
every score is the same float to the last bit.

The top k does not need every matching document: when the query's postings all score above 0 (or,
for bm25l and bm25+, every document is a candidate), the k-th best score is at least the k-th best
among the documents of any one query term with k or more postings (they are candidates too). So the
rarest such term gives a threshold θ, only the documents scoring θ or more are ranked (a few dozen
instead of tens of thousands), and the k-th score, the ties kept with it and the final order
(score descending, then document id descending: trec_eval's) are `search`'s. Any other case (a single
term, zero or non-finite scores) takes `search`'s own path.

>>> from nlpkit.retrieval.bm25 import build_index
>>> idx = build_index([["cat", "sat"], ["dog", "sat"], ["cat", "cat"]], ["a", "b", "c"])
>>> [[idx.doc_ids[d] for d in docs] for docs, _ in search_many(idx, [["cat"], ["sat", "cat"]], 2)]
[['c', 'a'], ['a', 'c']]
"""

from __future__ import annotations

import math
from typing import Callable, Iterator, Sequence

import numpy as np

from nlpkit.retrieval.bm25 import NONOCC_VARIANTS, BM25Index

BLOCK_POSTINGS = 1 << 21        # postings gathered at a time (~2M: doc and score arrays, ~30 MB with positions)

Hits = tuple[np.ndarray, np.ndarray]   # ([k] int64 document numbers, [k] float64 scores), best first


def search_many(index: BM25Index, queries: Sequence[Sequence[str]], k: int = 10,
                progress: Callable[..., None] | None = None, block_postings: int = BLOCK_POSTINGS) -> list[Hits]:
    """`index.search(tokens, k)` of each query, in order (the same documents, scores and order)."""
    out: list[Hits] = []
    for hits in iter_search(index, queries, k, block_postings):
        out.append(hits)
        if progress and len(out) % 256 == 0:
            progress(len(out), len(queries))
    return out


def iter_search(index: BM25Index, queries: Sequence[Sequence[str]], k: int = 10,
                block_postings: int = BLOCK_POSTINGS) -> Iterator[Hits]:
    """`search_many` one query at a time, as blocks of postings are gathered."""
    tid = index.term_id
    lengths = np.diff(np.asarray(index.indptr))                             # [V] postings per term
    buffers = _Buffers()
    block: list[list[int]] = []
    size = 0
    for tokens in queries:
        terms = [tid[t] for t in tokens if t in tid]
        block.append(terms)
        size += int(lengths[terms].sum()) if terms else 0
        if size >= block_postings:
            yield from _search_block(index, block, k, lengths, buffers)
            block, size = [], 0
    if block:
        yield from _search_block(index, block, k, lengths, buffers)


class _Buffers:
    """The gathered postings of a block, reused from block to block (fresh arrays of tens of MB
    would be paged in again every time): document numbers int64 and scores float64, the dtypes
    `bincount` works in (no conversion per query)."""

    def __init__(self) -> None:
        self.docs = np.empty(0, np.int64)
        self.scores = np.empty(0, np.float64)

    def take(self, n: int) -> tuple[np.ndarray, np.ndarray]:  # -> [n] int64, [n] float64
        if n > len(self.docs):
            self.docs, self.scores = np.empty(n, np.int64), np.empty(n, np.float64)
        return self.docs[:n], self.scores[:n]


def _gather(index: BM25Index, spans: list[tuple[int, int]], total: int, buffers: _Buffers
            ) -> tuple[np.ndarray, np.ndarray]:  # [S] spans -> [P] int64, [P] float64
    """The postings of spans (start, end) of the postings arrays, concatenated in order:
    (document numbers, scores). Contiguous copies: faster than one fancy index."""
    docs, scores = buffers.take(total)
    if not spans:
        return docs, scores
    post, sc = index.postings, index.scores
    np.concatenate([post[s:e] for s, e in spans], out=docs, casting="safe")
    if index.doc_mask is not None:
        np.bitwise_and(docs, int(index.doc_mask), out=docs)
    np.concatenate([sc[s:e] for s, e in spans], out=scores, casting="safe")
    return docs, scores


def _search_block(index: BM25Index, block: list[list[int]], k: int, lengths: np.ndarray,
                  buffers: _Buffers) -> Iterator[Hits]:
    flat_terms = [t for terms in block for t in terms]
    index.check_terms(flat_terms)
    indptr = np.asarray(index.indptr)
    flat = np.array(flat_terms, dtype=np.int64)
    spans = list(zip(indptr[flat].tolist(), indptr[flat + 1].tolist()))
    ends = np.cumsum(lengths[flat])                                            # end of each span
    docs, scores = _gather(index, spans, int(ends[-1]) if len(ends) else 0, buffers)
    clean = _clean_terms(index, flat_terms)
    first = 0                                                                  # first span of the query
    for terms in block:
        last = first + len(terms)
        lo = int(ends[first - 1]) if first else 0
        hi = int(ends[last - 1]) if terms else lo
        bounds = ends[first:last] - lo                                         # each term's end in the query's
        yield top_k(index, terms, docs[lo:hi], scores[lo:hi], bounds, k, all(clean[t] for t in terms))
        first = last


def _clean_terms(index: BM25Index, terms: list[int]) -> dict[int, bool]:
    """{term: every posting score finite and above 0} (cached on the index: each term read once)."""
    cache = index.__dict__.setdefault("_positive_terms", {})
    sc, indptr = index.scores, index.indptr
    for t in set(terms) - cache.keys():
        s = sc[int(indptr[t]):int(indptr[t + 1])]
        cache[t] = bool(len(s)) and bool(np.isfinite(s).all()) and float(s.min()) > 0
    return cache


def top_k(index: BM25Index, terms: list[int], docs: np.ndarray, scores: np.ndarray, bounds: np.ndarray,
          k: int, clean: bool | None = None) -> Hits:
    """`index.search` of a query given its term ids and their postings (`docs` [P] int64 and `scores`
    [P] float, the terms' postings one after another, term j's ending at `bounds[j]`). `clean`: every
    score is finite and above 0 (computed from `scores` when None)."""
    empty = (np.empty(0, np.int64), np.empty(0, np.float64))
    if not terms or k <= 0:
        return empty
    nonocc = index.variant in NONOCC_VARIANTS
    if clean is None:
        clean = bool(len(scores)) and bool(np.isfinite(scores).all()) and float(scores.min()) > 0
    if len(terms) == 1 and not nonocc or not clean and not (nonocc and _finite(scores)):
        return index.search([index.vocab[t] for t in terms], k)                # `search`'s own path
    n = index.n_docs
    dense = np.bincount(docs, weights=scores, minlength=n)                     # [N], as `score_query`
    if nonocc:
        floor = float(index.nonocc[terms].astype(np.float64).sum())         # every document's, as `score_query`
        if not math.isfinite(floor):
            return index.search([index.vocab[t] for t in terms], k)
        dense += floor
    b = bounds.tolist()
    lens = [e - s for s, e in zip([0] + b[:-1], b)]
    deep = [j for j, m in enumerate(lens) if m >= k]
    if deep:                           # θ: the k-th best of the rarest term with k postings or more
        j = min(deep, key=lens.__getitem__)
        sub = dense[docs[b[j] - lens[j]:b[j]]]
        theta = np.partition(sub, len(sub) - k)[len(sub) - k]
        cand = np.flatnonzero(dense >= theta)
    else:
        cand = np.arange(n, dtype=np.int64) if nonocc else np.flatnonzero(dense > 0)
    values = dense[cand]
    if len(cand) > k:                  # every document tied with the k-th score, then order and cut
        kth = np.partition(values, len(values) - k)[len(values) - k]
        keep = values >= kth
        cand, values = cand[keep], values[keep]
    order = np.lexsort((-index.id_rank()[cand], -values))[:k]
    return cand[order], values[order]


def _finite(scores: np.ndarray) -> bool:
    return bool(np.isfinite(scores).all())
