"""Many BM25 queries at once: `BM25Index.search`'s results (scores, ranks, tie order), found faster.

Each query sums its postings into a dense [N] array with one `bincount`, in the same order as
`search` does (its terms in query order, each term's postings in document order), so every score is
the same float to the last bit. What `search` redoes for every query is done once: the terms'
postings are decoded (document numbers unpacked to int64, scores widened to float64: what
`bincount` works in) and kept for the next queries while they fit in `CACHE_POSTINGS` (common words
recur in query after query); a query's postings are copied into one reused buffer just before they
are summed (still in cache); the checks of the postings (`check_terms`, finite and positive scores)
are made once per term.

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
from itertools import accumulate
from typing import Callable, Iterator, Sequence

import numpy as np

from nlpkit.retrieval.bm25 import NONOCC_VARIANTS, BM25Index

BLOCK_POSTINGS = 1 << 21        # the postings of the queries whose terms are checked and decoded together
CACHE_POSTINGS = 1 << 22        # decoded postings kept between queries (int64 + float64: 64 MB at most)

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
    """`search_many` one query at a time; the postings of a block of queries are checked together."""
    tid = index.term_id
    lengths = np.diff(np.asarray(index.indptr))                             # [V] postings per term
    buffers, decoded = _Buffers(), _Decoded(index)
    block: list[list[int]] = []
    size = 0
    for tokens in queries:
        terms = [tid[t] for t in tokens if t in tid]
        block.append(terms)
        size += int(lengths[terms].sum()) if terms else 0
        if size >= block_postings:
            yield from _search_block(index, block, k, buffers, decoded)
            block, size = [], 0
    if block:
        yield from _search_block(index, block, k, buffers, decoded)


class _Buffers:
    """One query's gathered postings, reused from query to query (a fresh array would be paged in
    again every time): document numbers int64 and scores float64, the dtypes `bincount` works in
    (no conversion inside it). Gathered just before they are summed, they are still in cache."""

    def __init__(self) -> None:
        self.docs = np.empty(0, np.int64)
        self.scores = np.empty(0, np.float64)

    def take(self, n: int) -> tuple[np.ndarray, np.ndarray]:  # -> [n] int64, [n] float64
        if n > len(self.docs):
            self.docs, self.scores = np.empty(2 * n, np.int64), np.empty(2 * n, np.float64)
        return self.docs[:n], self.scores[:n]


Decoded = tuple[np.ndarray, np.ndarray, bool]   # ([L] int64 documents, [L] float64 scores, all finite and > 0)


class _Decoded:
    """Terms' postings decoded for `bincount` (document numbers int64, scores float64) with whether
    every score is finite and above 0, kept for the next queries while they fit in `CACHE_POSTINGS`:
    common words recur in query after query."""

    def __init__(self, index: BM25Index, budget: int | None = None) -> None:
        self.index, self.budget = index, CACHE_POSTINGS if budget is None else budget
        self.terms: dict[int, Decoded] = {}

    def block(self, terms: list[int], starts: list[int], stops: list[int]) -> dict[int, Decoded]:
        """{term: its `Decoded` postings} for the terms of a block (their postings spans `starts`,
        `stops`): the cached ones, and the others decoded together (a few numpy passes for all of them,
        not a few calls a term) and kept while the budget lasts."""
        index, cached = self.index, self.terms
        out: dict[int, Decoded] = {}
        new: dict[int, tuple[int, int]] = {}
        for t, s, e in zip(terms, starts, stops):
            if t in out or t in new:
                continue
            entry = cached.get(t)
            if entry is None:
                new[t] = s, e
            else:
                out[t] = entry
        if not new:
            return out
        spans = list(new.values())
        docs = np.concatenate([index.postings[s:e] for s, e in spans]).astype(np.int64)   # [P] of the new terms
        if index.doc_mask is not None:
            np.bitwise_and(docs, int(index.doc_mask), out=docs)
        scores = np.concatenate([index.scores[s:e] for s, e in spans]).astype(np.float64)
        ends = list(accumulate(e - s for s, e in spans))
        firsts = [0] + ends[:-1]
        good = np.isfinite(scores) & (scores > 0)                           # [P]
        nonempty = [i for i, (a, z) in enumerate(zip(firsts, ends)) if z > a]
        clean = [False] * len(spans)
        if nonempty:
            for i, ok in zip(nonempty, np.logical_and.reduceat(good, [firsts[i] for i in nonempty]).tolist()):
                clean[i] = ok
        keep = len(docs) <= self.budget
        if keep:
            self.budget -= len(docs)
        for t, a, z, ok in zip(new, firsts, ends, clean):
            out[t] = docs[a:z], scores[a:z], ok
            if keep:
                cached[t] = out[t]
        return out


def _search_block(index: BM25Index, block: list[list[int]], k: int, buffers: _Buffers,
                  decoded: _Decoded) -> Iterator[Hits]:
    flat_terms = [t for terms in block for t in terms]
    index.check_terms(flat_terms)
    indptr = np.asarray(index.indptr)
    flat = np.array(flat_terms, dtype=np.int64)
    postings = decoded.block(flat_terms, indptr[flat].tolist(), indptr[flat + 1].tolist())
    for terms in block:
        entries = [postings[t] for t in terms]
        bounds = list(accumulate(len(e[0]) for e in entries))                 # each term's end in the query's
        docs, scores = buffers.take(bounds[-1] if bounds else 0)
        if entries:                                                            # the query's postings, in order
            np.concatenate([e[0] for e in entries], out=docs)
            np.concatenate([e[1] for e in entries], out=scores)
        yield top_k(index, terms, docs, scores, bounds, k, all(e[2] for e in entries))


def top_k(index: BM25Index, terms: list[int], docs: np.ndarray, scores: np.ndarray, bounds: Sequence[int],
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
    b = list(bounds)
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
    if len(cand) > 4 * k + 64:         # every document tied with the k-th score, then order and cut
        kth = np.partition(values, len(values) - k)[len(values) - k]
        keep = values >= kth
        cand, values = cand[keep], values[keep]
    order = np.lexsort((-index.id_rank()[cand], -values))[:k]
    return cand[order], values[order]


def _finite(scores: np.ndarray) -> bool:
    return bool(np.isfinite(scores).all())
