"""Many BM25 queries at once: `BM25Index.search`'s results (scores, ranks, tie order), found faster.

Both ways sum a query's postings with `bincount` in the order `search` does (its terms in query
order, each term's postings in document order), so every score is the same float to the last bit.

An index of at most `DENSE_DOCS` documents scores a block of queries in one [queries, docs] array
(`_dense_block`): one gather of all their postings by position, one `bincount`, a threshold per
row from the maxima of groups of documents, and one `lexsort` of the few candidates of every row.
A larger index is searched query by query: there a row of [docs] costs more than the numpy calls a
block saves (0.6x at 50,000 documents).

Query by query, what `search` redoes for every query is done once: the terms'
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

Why no more than this (Gutenberg paragraphs, 103,584 documents, queries of 10 terms and 23,000
postings on average): summing a query's postings into a [docs] array costs about 100 µs whether by
one `bincount` of the gathered postings or by `np.add.at` term by term into a reused array, about
what bm25s's numba backend takes for its whole query; finding the documents above θ adds a pass
over the [docs] array. MaxScore's pruning does not help an exact sum: even with the true k-th
score as θ, the essential terms still hold a third of the postings, and about 3,900 documents a
query would need every other term's score looked up to be summed in `search`'s order. Taking the
candidates from the essential terms' postings, a θ from several rare terms, or the group-maximum
threshold of `_dense_block` were each measured no faster here.

>>> from nlpkit.retrieval.bm25 import build_index
>>> idx = build_index([["cat", "sat"], ["dog", "sat"], ["cat", "cat"]], ["a", "b", "c"])
>>> [[idx.doc_ids[d] for d in docs] for docs, _ in search_many(idx, [["cat"], ["sat", "cat"]], 2)]
[['c', 'a'], ['a', 'c']]
"""

from __future__ import annotations

import math
from itertools import accumulate, chain
from typing import Callable, Iterator, Sequence

import numpy as np

from nlpkit.retrieval.bm25 import NONOCC_VARIANTS, BM25Index

DENSE_DOCS = 12_000              # at most this many documents: a block of queries is one [queries, docs] array
                                # (the crossover measured on Gutenberg paragraphs: 2x faster at 4,000, 0.6x at 50,000)
BLOCK_CELLS = 1 << 16           # that array's cells (float64: 512 kB, cached and reused from block to block;
                                # 2 MB blocks ran Cranfield 1.6x slower, paging fresh memory in)
GROUPS = 16                     # documents per group in `_dense_block`'s threshold
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
    """`search_many` one query at a time; the postings of a block of queries are checked together.
    An index of at most `DENSE_DOCS` documents scores a block of queries in one [queries, docs]
    array (`_dense_block`); a larger one query by query (`_search_block`)."""
    get = index.term_id.get
    lengths = np.diff(np.asarray(index.indptr))                             # [V] postings per term
    dense = index.n_docs <= DENSE_DOCS
    rows = max(1, BLOCK_CELLS // _padded(index.n_docs)) if dense else len(queries) + 1
    buffers, decoded = _Buffers(), _Decoded(index)
    block: list[list[int]] = []
    size = 0
    for tokens in queries:
        terms = [t for t in map(get, tokens) if t is not None]
        block.append(terms)
        size += int(lengths[terms].sum()) if terms else 0
        if size >= block_postings or len(block) >= rows:
            yield from _dense_block(index, block, k) if dense else _search_block(index, block, k, buffers, decoded)
            block, size = [], 0
    if block:
        yield from _dense_block(index, block, k) if dense else _search_block(index, block, k, buffers, decoded)


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
        low, high = index.score_range(list(new)).T                          # (`check_terms` noted them)
        clean = ((low > 0) & (high < np.inf) & np.array([z > a for a, z in zip(firsts, ends)])).tolist()
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


def _padded(n_docs: int) -> int:
    """Documents rounded up to a multiple of `GROUPS` (a row of `_dense_block`'s array)."""
    return -(-n_docs // GROUPS) * GROUPS


def _positions(starts: np.ndarray, lens: np.ndarray) -> np.ndarray:  # [T], [T] -> [sum(lens)] int64
    """The postings positions of runs `starts[i]:starts[i] + lens[i]`, one run after another."""
    ends = np.cumsum(lens)
    pos = np.arange(int(ends[-1]) if len(ends) else 0, dtype=np.int64)
    pos += np.repeat(starts - (ends - lens), lens)
    return pos


def _dense_block(index: BM25Index, block: list[list[int]], k: int) -> list[Hits]:
    """The top k of a block of queries (term ids), scored together in one [B, N] array.

    Row q of `dense` is `bincount` of query q's postings in `search`'s order (its terms in query
    order, each term's postings in document order): every score is `search`'s to the last bit. The
    postings of all the queries are gathered by position in a few numpy passes (no loop over terms).
    Threshold θ of a row: its documents fall in N/16 groups of 16 (document j in group j mod N/16);
    the k-th largest group maximum is a lower bound of the k-th best score (k groups, each holding a
    document scoring at least θ), so only the members of groups whose maximum reaches θ are
    candidates, and every document tied with the k-th score is among them. Candidates of all rows are
    ordered by one `lexsort` (row, score descending, document id descending: `search`'s order) and
    each row keeps its first k. A query with a term whose scores are not all finite (or, without a
    non-occurrence score, not all above 0) takes `search`'s own path. A block's array is kept small
    (`BLOCK_CELLS`): it is then reused from block to block instead of paged in afresh."""
    if k <= 0:
        return [(np.empty(0, np.int64), np.empty(0, np.float64)) for _ in block]
    n, b_rows = index.n_docs, len(block)
    k = min(k, n)                      # (k may be any size: `--top 9223372036854775808`)
    npad = _padded(n)
    width = npad // GROUPS
    nonocc = index.variant in NONOCC_VARIANTS
    counts = [len(terms) for terms in block]
    occ = np.fromiter(chain.from_iterable(block), dtype=np.int64, count=sum(counts))   # [T] term occurrences
    row_of = np.repeat(np.arange(b_rows, dtype=np.int64), counts)              # [T]
    own = np.array([c == 0 for c in counts])                                   # [B] rows not ranked here
    low, high = index.score_range(occ).T                                       # [T], [T]
    good = (low > -np.inf if nonocc else low > 0) & (high < np.inf)
    if not good.all():
        own[row_of[~good]] = True
    indptr = np.asarray(index.indptr)
    starts = indptr[occ]
    lens = indptr[occ + 1] - starts                                            # [T]
    pos = _positions(starts, lens)                                             # [P] query after query
    key = np.repeat(row_of * npad, lens)
    docs = index.postings[pos]
    if index.doc_mask is not None:
        np.bitwise_and(docs, index.doc_mask, out=docs)
    key += docs                                                                # [P] row * npad + document
    weights = index.scores[pos].astype(np.float64)                             # (bincount's own cast: 5x slower)
    dense = np.bincount(key, weights=weights, minlength=b_rows * npad)         # (int64 when empty)
    dense = dense.astype(np.float64, copy=False).reshape(b_rows, npad)         # [B, npad]
    if nonocc:                         # every document's non-occurrence score, as `score_query` adds it
        floors = np.zeros(b_rows)
        for q, terms in enumerate(block):
            if terms and not own[q]:
                floors[q] = float(index.nonocc[terms].astype(np.float64).sum())
        own |= ~np.isfinite(floors)
        floors[own] = 0.0
        dense += floors[:, None]
    dense[:, n:] = -np.inf                                                     # padding: never a candidate
    if k <= width:
        group_max = dense.reshape(b_rows, GROUPS, width).max(axis=1)           # [B, width]
        theta = np.partition(group_max, width - k, axis=1)[:, width - k]       # [B]
    else:
        theta = np.full(b_rows, -np.inf)
    if not nonocc:                     # a document matches when its sum is above 0
        np.maximum(theta, np.nextafter(0.0, 1.0), out=theta)
    theta[own] = np.nan                # compares False: no candidates
    if k <= width:
        rows, j = np.divmod(np.flatnonzero(group_max >= theta[:, None]), width)   # [G] candidate groups
        cand = (j[:, None] + np.arange(0, npad, width)).ravel()                 # [G*16] their members
        rows = np.repeat(rows, GROUPS)
        values = dense[rows, cand]
        hit = values >= theta[rows]
        rows, cand, values = rows[hit], cand[hit], values[hit]
    else:
        rows, cand = np.divmod(np.flatnonzero(dense[:, :n] >= theta[:, None]), n)
        values = dense[rows, cand]
    order = np.lexsort((-index.id_rank()[cand], -values, rows))
    per_row = np.bincount(rows, minlength=b_rows)                              # [B] candidates
    first = np.cumsum(per_row) - per_row
    order = order[np.arange(len(order)) - first[rows[order]] < k]
    cand, values = cand[order], values[order]
    ends = np.cumsum(np.minimum(per_row, k)).tolist()
    out: list[Hits] = []
    for q, (a, z) in enumerate(zip([0] + ends[:-1], ends)):
        if own[q] and block[q]:
            out.append(index.search([index.vocab[t] for t in block[q]], k))   # `search`'s own path
        else:
            out.append((cand[a:z], values[a:z]))
    return out


def top_k(index: BM25Index, terms: list[int], docs: np.ndarray, scores: np.ndarray, bounds: Sequence[int],
          k: int, clean: bool | None = None) -> Hits:
    """`index.search` of a query given its term ids and their postings (`docs` [P] int64 and `scores`
    [P] float, the terms' postings one after another, term j's ending at `bounds[j]`). `clean`: every
    score is finite and above 0 (computed from `scores` when None)."""
    if not terms or k <= 0:
        return np.empty(0, np.int64), np.empty(0, np.float64)
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
