"""BM25 in five variants, as an index of precomputed per-(term, document) scores.

The index is a term-major (CSC-like) postings table in flat numpy arrays:

    indptr    [V+1]  int64    postings of term t are positions indptr[t]:indptr[t+1]
    postings  [P]    uint32   document number (ascending within a term), with the raw term
                              frequency packed above its low `doc_bits` bits (kept so `add`
                              can recompute every score; a separate `tf_extra` array holds it
                              instead when it does not fit, and `doc_bits` is then 32)
    scores    [P]    float32  the term's BM25 contribution to that document
    nonocc    [V]    float32  bm25l / bm25+ only (see below), else [0]

Document lengths are derived (the sum of a document's term frequencies), not stored.
A query is a gather of its terms' postings, one `bincount` into a dense [N] score
array and a `partition` of the matching documents' scores for the top k. The formulas are those of bm25s
(Kamphuis et al., ECIR 2020), with N documents, df document frequency, tf term
frequency, dl document length and avgdl the mean length, norm = 1 - b + b·dl/avgdl:

    variant    idf                              tf component
    lucene     log(1 + (N - df + .5)/(df + .5))  tf / (k1·norm + tf)
    robertson  log(max(1, (N-df+.5)/(df+.5)))    tf / (k1·norm + tf)
    atire      log(N / df)                       tf·(k1+1) / (tf + k1·norm)
    bm25l      log((N + 1)/(df + .5))            (k1+1)(c+δ) / (k1+c+δ), c = tf/norm
    bm25+      log((N + 1)/df)                   (k1+1)·tf / (k1·norm + tf) + δ

For bm25l and bm25+ a document without the term still scores idf·tfc(0); as in
bm25s the postings store idf·(tfc(tf) - tfc(0)) and a query adds Σ idf·tfc(0)
(the `nonocc` array) to every document, matching or not, so a query with a known
term ranks every document (bm25s fills all k places the same way). Query terms
count with their multiplicity (a repeated word adds its postings twice), also as
bm25s does. Tied scores are ordered by document id descending, trec_eval's rule.

>>> idx = build_index([["cat", "sat"], ["dog", "sat"], ["cat", "cat"]], ["a", "b", "c"])
>>> [(doc, round(score, 4)) for doc, score in idx.search_ids(["cat"], 2)]
[('c', 0.2686), ('a', 0.188)]
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import chain
from typing import Callable, Sequence

import numpy as np

from nlpkit.errors import NlpkitError, UsageError
from nlpkit.stats.codes import count_runs

VARIANTS = ("lucene", "robertson", "atire", "bm25l", "bm25+")
DEFAULTS = {"k1": 1.5, "b": 0.75, "delta": 0.5}  # bm25s' defaults
NONOCC_VARIANTS = ("bm25l", "bm25+")


def check_params(variant: str, k1: float, b: float, delta: float) -> None:
    """Refuse values the formulas are not defined for (a UsageError: exit status 2 in the CLI)."""
    if variant not in VARIANTS:
        raise UsageError(f"unknown BM25 variant {variant!r} (choose from {', '.join(VARIANTS)})")
    if not 0 <= k1 < float("inf"):
        raise UsageError(f"`k1` must be a finite number >= 0, got {k1}")
    if not 0 <= b <= 1:
        raise UsageError(f"`b` must be between 0 and 1, got {b}")
    if not 0 <= delta < float("inf"):
        raise UsageError(f"`delta` must be a finite number >= 0, got {delta}")
    if variant == "bm25+" and k1 == 0:  # tfc(0) = (k1+1)·0 / (k1·norm + 0): 0/0
        raise UsageError("`k1` 0 is undefined for bm25+ (its non-occurrence term is 0/0): use `k1` > 0")
    if variant == "bm25l" and k1 == 0 and delta == 0:  # tfc(0) = (k1+1)·δ / (k1+δ): 0/0
        raise UsageError("`k1` 0 with `delta` 0 is undefined for bm25l (0/0): make one of them > 0")


def idf(variant: str, df: np.ndarray, n_docs: int) -> np.ndarray:  # [V] -> [V] float64
    """Inverse document frequency of each term; df must be >= 1."""
    df = df.astype(np.float64)
    n = float(n_docs)
    if variant == "lucene":
        return np.log1p((n - df + 0.5) / (df + 0.5))
    if variant == "robertson":
        return np.log(np.maximum(1.0, (n - df + 0.5) / (df + 0.5)))
    if variant == "atire":
        return np.log(n / df)
    if variant == "bm25l":
        return np.log((n + 1) / (df + 0.5))
    return np.log((n + 1) / df)  # bm25+


def tf_component(variant: str, tf: np.ndarray, dl: np.ndarray, avgdl: float,
                 k1: float, b: float, delta: float) -> np.ndarray:  # [P], [P] -> [P] float64
    """The term-frequency factor of each posting (tf may be 0 for the non-occurrence score)."""
    tf = np.asarray(tf, dtype=np.float64)
    norm = 1.0 - b + b * np.asarray(dl, dtype=np.float64) / avgdl
    if variant in ("lucene", "robertson"):
        return tf / (k1 * norm + tf)
    if variant == "atire":
        return tf * (k1 + 1) / (tf + k1 * norm)
    if variant == "bm25l":
        c = tf / norm
        return (k1 + 1) * (c + delta) / (k1 + c + delta)
    return (k1 + 1) * tf / (k1 * norm + tf) + delta  # bm25+


def nonocc_scores(variant: str, term_idf: np.ndarray, k1: float, b: float,
                  delta: float) -> np.ndarray | None:  # [V] -> [V] float64, or None
    """What a document without the term scores, idf·tfc(0), for bm25l and bm25+ (None for the
    other variants, where it is 0): postings store the score above it, a query adds it to all."""
    if variant not in NONOCC_VARIANTS:
        return None
    tfc0 = float(tf_component(variant, np.zeros(1), np.ones(1), 1.0, k1, b, delta)[0])
    return term_idf * tfc0


def posting_scores(variant: str, term: np.ndarray, tf: np.ndarray, dl: np.ndarray, avgdl: float,
                   term_idf: np.ndarray, nonocc: np.ndarray | None, k1: float, b: float,
                   delta: float) -> np.ndarray:  # [P] x 3 -> [P] float64
    """The score each posting stores: idf·tfc(tf), less the term's `nonocc_scores` when there is one."""
    scores = term_idf[term] * tf_component(variant, tf, dl, avgdl, k1, b, delta)
    if nonocc is not None:
        scores -= nonocc[term]
    return scores


def doc_bits_for(n_docs: int, max_tf: int) -> int:
    """How many low bits of a posting hold its document number: the fewest that number `n_docs`
    documents, when the largest tf fits in the bits above them; else 32 (postings hold plain
    document numbers, and `tf_extra` the frequencies)."""
    bits = max(1, (n_docs - 1).bit_length())
    return bits if bits < 32 and max_tf < (1 << (32 - bits)) else 32


def pack_postings(doc: np.ndarray, tf: np.ndarray, doc_bits: int
                  ) -> tuple[np.ndarray, np.ndarray | None]:  # [P], [P] -> [P] uint32, [P] uint32 | None
    """(postings, tf_extra) for `doc_bits` (`doc_bits_for`): doc | tf << doc_bits, or plain
    document numbers with the frequencies apart when doc_bits is 32."""
    if doc_bits < 32:
        return (doc | (tf << doc_bits)).astype(np.uint32), None
    return doc.astype(np.uint32), tf.astype(np.uint32)


@dataclass
class BM25Index:
    """A BM25 index: parameters, vocabulary, document ids and the postings arrays."""

    variant: str
    k1: float
    b: float
    delta: float
    vocab: list[str]
    doc_ids: list[str]
    indptr: np.ndarray     # [V+1] int64
    postings: np.ndarray   # [P] uint32: doc | tf << doc_bits
    scores: np.ndarray     # [P] float32
    nonocc: np.ndarray     # [V] float32 for bm25l / bm25+, else [0]
    doc_bits: int = 32     # 32: postings hold plain doc numbers and tf_extra the frequencies
    tf_extra: np.ndarray | None = None  # [P] uint32 when tf is not packed
    tokenizer: dict = field(default_factory=dict)
    _term_id: dict | None = field(default=None, repr=False)
    _id_rank: np.ndarray | None = field(default=None, repr=False)
    source: str = field(default="", repr=False)   # the directory it was loaded from (for messages)
    _checked: np.ndarray | None = field(default=None, repr=False)   # [V] bool: terms whose postings passed
    _score_range: np.ndarray | None = field(default=None, repr=False)   # [V, 2]: (min, max) of a checked term

    @property
    def doc_mask(self) -> np.uint32 | None:
        """The low `doc_bits` of a posting (its document number); None when postings hold plain numbers."""
        return np.uint32((1 << self.doc_bits) - 1) if self.doc_bits < 32 else None

    def check_terms(self, terms: Sequence[int]) -> None:
        """`check_docs` for the postings of these terms, each term once per index object (a query
        pays only for the terms no earlier query had); notes each term's smallest and largest
        posting score on the way (`score_range`)."""
        if self._checked is None:
            self._checked = np.zeros(len(self.vocab), dtype=bool)
            self._score_range = np.empty((len(self.vocab), 2))
        terms = np.asarray(terms, dtype=np.int64)
        if self._checked[terms].all():
            return
        new = np.unique(terms[~self._checked[terms]]).tolist()
        spans = [(int(self.indptr[t]), int(self.indptr[t + 1])) for t in new]
        docs = np.concatenate([self.postings[s:e] for s, e in spans])
        if self.doc_mask is not None:
            docs = docs & self.doc_mask
        lengths = [e - s for s, e in spans]
        self.check_docs(docs, lengths)
        scores = np.concatenate([self.scores[s:e] for s, e in spans]).astype(np.float64)
        ranges = np.tile([np.inf, -np.inf], (len(new), 1))       # a term without postings: no score
        some = [i for i, m in enumerate(lengths) if m]
        if some:
            firsts = (np.cumsum(lengths) - lengths)[some]
            ranges[some, 0] = np.minimum.reduceat(scores, firsts)   # NaN if one is NaN
            ranges[some, 1] = np.maximum.reduceat(scores, firsts)
        self._score_range[new] = ranges
        self._checked[new] = True

    def score_range(self, terms: Sequence[int]) -> np.ndarray:  # [T] -> [T, 2] float64
        """The smallest and largest posting score of each term ((inf, -inf) when it has none; NaN
        when one is NaN): every score is finite when min > -inf and max < inf, positive when min > 0."""
        self.check_terms(terms)
        return self._score_range[np.asarray(terms, dtype=np.int64)]

    def check_docs(self, docs: np.ndarray, lengths: Sequence[int] | None = None) -> None:
        """Document numbers read from the postings must be below n_docs and, within each term's run of
        `lengths` postings, ascending: a corrupt postings array (or a header whose n_docs disagrees)
        would otherwise score documents that do not exist, or one document many times."""
        where = f"{self.source}: " if self.source else ""
        if len(docs) and int(docs.max()) >= self.n_docs:
            raise NlpkitError(f"{where}corrupt index: the postings name document {int(docs.max())} but the "
                              f"header has {self.n_docs} documents; rebuild the index with `nlpkit bm25 index`")
        if lengths is not None and len(docs) > 1:
            step = np.diff(docs.astype(np.int64))
            if len(lengths) > 1:                          # a term's first posting may be below the last's
                step[np.cumsum(lengths)[:-1] - 1] = 1
            if (step <= 0).any():
                raise NlpkitError(f"{where}corrupt index: a term's postings are not in document order; rebuild "
                                  "the index with `nlpkit bm25 index`")

    @property
    def n_docs(self) -> int:
        return len(self.doc_ids)

    @property
    def docs(self) -> np.ndarray:  # [P] int64 document numbers
        if self.doc_mask is None:
            return np.asarray(self.postings, dtype=np.int64)
        return np.asarray(self.postings & self.doc_mask, dtype=np.int64)

    @property
    def tf(self) -> np.ndarray:  # [P] int64 term frequencies
        if self.doc_bits >= 32:
            return np.asarray(self.tf_extra, dtype=np.int64)
        return np.asarray(self.postings >> np.uint32(self.doc_bits), dtype=np.int64)

    @property
    def doclen(self) -> np.ndarray:  # [N] int64 document lengths, derived from the postings
        return np.bincount(self.docs, weights=self.tf, minlength=self.n_docs).astype(np.int64)

    @property
    def avgdl(self) -> float:
        return float(self.doclen.mean()) if self.n_docs else 0.0

    @property
    def term_id(self) -> dict[str, int]:
        if self._term_id is None:
            self._term_id = {t: i for i, t in enumerate(self.vocab)}
        return self._term_id

    def id_rank(self) -> np.ndarray:  # [N] int64: position of each doc id in sorted string order
        if self._id_rank is None:
            order = sorted(range(self.n_docs), key=self.doc_ids.__getitem__)
            rank = np.empty(self.n_docs, dtype=np.int64)
            rank[order] = np.arange(self.n_docs)
            self._id_rank = rank
        return self._id_rank

    def score_query(self, tokens: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Candidate documents and their scores, unsorted: those holding a query term, or for bm25l and
        bm25+ every document (each scores the non-occurrence term).

        Returns ([M] int64 doc numbers, [M] float64 scores); empty for an empty or unknown query.
        """
        tid = self.term_id
        terms = [tid[t] for t in tokens if t in tid]
        if not terms:
            return np.empty(0, np.int64), np.empty(0, np.float64)
        self.check_terms(terms)
        indptr, post = self.indptr, self.postings
        mask = self.doc_mask
        if self.variant in NONOCC_VARIANTS:
            spans = [(indptr[t], indptr[t + 1]) for t in terms]
            all_docs = np.concatenate([post[s:e] for s, e in spans])           # [P_q] uint32
            if mask is not None:
                all_docs = all_docs & mask
            all_scores = np.concatenate([self.scores[s:e] for s, e in spans])  # [P_q]
            dense = np.bincount(all_docs, weights=all_scores, minlength=self.n_docs)  # [N]
            dense += float(self.nonocc[terms].astype(np.float64).sum())
            return np.arange(self.n_docs, dtype=np.int64), dense
        if len(terms) == 1:
            s, e = indptr[terms[0]], indptr[terms[0] + 1]
            docs = post[s:e] if mask is None else post[s:e] & mask
            docs = docs.astype(np.int64)
            scores = self.scores[s:e].astype(np.float64)
        else:
            spans = [(indptr[t], indptr[t + 1]) for t in terms]
            all_docs = np.concatenate([post[s:e] for s, e in spans])           # [P_q] uint32
            if mask is not None:
                np.bitwise_and(all_docs, mask, out=all_docs)
            all_scores = np.concatenate([self.scores[s:e] for s, e in spans])  # [P_q]
            dense = np.bincount(all_docs, weights=all_scores, minlength=self.n_docs)  # [N]
            if all_scores.min() > 0:  # a document matches exactly when its sum is > 0
                docs = np.flatnonzero(dense > 0)
            else:  # robertson and atire store 0 where idf is 0: mark matching documents
                hit = np.zeros(self.n_docs, dtype=bool)
                hit[all_docs] = True
                docs = np.flatnonzero(hit)
            scores = dense[docs]
        return docs, scores

    def search(self, tokens: Sequence[str], k: int = 10) -> tuple[np.ndarray, np.ndarray]:
        """Top-k (doc numbers, scores), best first; ties by document id descending (trec_eval order).

        Only documents holding at least one query term are returned (for bm25l and bm25+, every
        document: each scores the non-occurrence term), so an empty query, or one of unknown
        words only, gives an empty result.
        """
        docs, scores = self.score_query(tokens)
        if np.isnan(scores).any():
            raise NlpkitError(f"BM25 scores are NaN for {int(np.isnan(scores).sum())} documents "
                              f"(k1 {self.k1}, b {self.b}, delta {self.delta}): the index is corrupt or "
                              "was built with bad parameters; rebuild it")
        if k <= 0 or len(docs) == 0:
            return docs[:0], scores[:0]
        if len(docs) > k:
            # keep every document tied with the k-th score, then order and cut
            kth = np.partition(scores, len(scores) - k)[len(scores) - k]
            keep = scores >= kth
            docs, scores = docs[keep], scores[keep]
        order = np.lexsort((-self.id_rank()[docs], -scores))[:k]
        return docs[order], scores[order]

    def search_ids(self, tokens: Sequence[str], k: int = 10) -> list[tuple[str, float]]:
        """Top-k as (document id, score) pairs."""
        docs, scores = self.search(tokens, k)
        ids = self.doc_ids
        return [(ids[d], s) for d, s in zip(docs.tolist(), scores.tolist())]


def count_postings(docs_tokens: Sequence[Sequence[str]], vocab: dict[str, int], offset: int
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Token lists -> (term [P] int64, doc [P] int64, tf [P] int64), term-major.

    New words are appended to `vocab` (first-occurrence order); doc numbers start at `offset`.
    """
    lengths = np.fromiter(map(len, docs_tokens), dtype=np.int64, count=len(docs_tokens))  # [n]
    flat = list(chain.from_iterable(docs_tokens))
    for t in dict.fromkeys(flat):
        if t not in vocab:
            vocab[t] = len(vocab)
    term = np.fromiter(map(vocab.__getitem__, flat), dtype=np.int64, count=len(flat))  # [T]
    doc = np.repeat(np.arange(len(docs_tokens), dtype=np.int64), lengths)             # [T]
    n = max(len(docs_tokens), 1)
    key = term * n + doc
    key.sort()
    key, tf = count_runs(key)
    return key // n, key % n + offset, tf


def _assemble(variant: str, k1: float, b: float, delta: float, vocab: list[str], doc_ids: list[str],
              term: np.ndarray, doc: np.ndarray, tf: np.ndarray, tokenizer: dict) -> BM25Index:
    """Postings (term-major, doc-ascending within a term) -> an index with every score computed."""
    n_docs, n_terms = len(doc_ids), len(vocab)
    counts = np.bincount(term, minlength=n_terms)                      # [V] = df
    indptr = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    doclen = np.bincount(doc, weights=tf, minlength=n_docs)            # [N]
    avgdl = float(doclen.mean()) if doclen.sum() > 0 else 1.0
    term_idf = idf(variant, np.maximum(counts, 1), n_docs)            # [V]
    nonocc64 = nonocc_scores(variant, term_idf, k1, b, delta)         # [V] or None
    scores = posting_scores(variant, term, tf, doclen[doc], avgdl, term_idf, nonocc64, k1, b, delta)  # [P]
    doc_bits = doc_bits_for(n_docs, int(tf.max()) if len(tf) else 0)
    postings, tf_extra = pack_postings(doc, tf, doc_bits)
    return BM25Index(variant=variant, k1=k1, b=b, delta=delta, vocab=vocab, doc_ids=doc_ids,
                     indptr=indptr, postings=postings, scores=scores.astype(np.float32),
                     nonocc=stored_nonocc(nonocc64), doc_bits=doc_bits, tf_extra=tf_extra,
                     tokenizer=dict(tokenizer))


def stored_nonocc(nonocc: np.ndarray | None) -> np.ndarray:  # [V] float64 | None -> [V] or [0] float32
    """The index's `nonocc` array: the terms' non-occurrence scores, or empty for the other variants."""
    return np.zeros(0, dtype=np.float32) if nonocc is None else nonocc.astype(np.float32)


def build_index(docs_tokens: Sequence[Sequence[str]], doc_ids: Sequence[str] | None = None,
                variant: str = "lucene", k1: float = DEFAULTS["k1"], b: float = DEFAULTS["b"],
                delta: float = DEFAULTS["delta"], tokenizer: dict | None = None,
                progress: Callable[..., None] | None = None) -> BM25Index:
    """Index token lists; `doc_ids` default to "1".."N". An empty corpus is an error."""
    check_params(variant, k1, b, delta)
    if doc_ids is None:
        doc_ids = [str(i) for i in range(1, len(docs_tokens) + 1)]
    doc_ids = list(doc_ids)
    if len(doc_ids) != len(docs_tokens):
        raise NlpkitError(f"{len(doc_ids)} document ids for {len(docs_tokens)} documents")
    if not docs_tokens:
        raise NlpkitError("empty corpus: there are no documents to index")
    if len(set(doc_ids)) != len(doc_ids):
        from nlpkit.stats.documents import check_unique_ids
        check_unique_ids(doc_ids, "corpus")
    vocab: dict[str, int] = {}
    term, doc, tf = count_postings(docs_tokens, vocab, 0)
    if progress:
        progress(len(doc_ids), len(doc_ids))
    return _assemble(variant, k1, b, delta, list(vocab), doc_ids, term, doc, tf, tokenizer or {})


def add_documents(index: BM25Index, docs_tokens: Sequence[Sequence[str]],
                  doc_ids: Sequence[str] | None = None) -> BM25Index:
    """A new index holding the old documents and these; every score is recomputed from raw tf.

    N, df and avgdl change, so does every idf and length norm: the result equals a fresh
    `build_index` over all documents (ids default to continuing the numbering).
    """
    n_old = index.n_docs
    if doc_ids is None:
        doc_ids = [str(i) for i in range(n_old + 1, n_old + len(docs_tokens) + 1)]
    doc_ids = list(doc_ids)
    if len(doc_ids) != len(docs_tokens):
        raise NlpkitError(f"{len(doc_ids)} document ids for {len(docs_tokens)} documents")
    all_ids = list(index.doc_ids) + doc_ids
    if len(set(all_ids)) != len(all_ids):
        from nlpkit.stats.documents import check_unique_ids
        check_unique_ids(all_ids, "index + new documents")
    vocab = dict(index.term_id)
    new_term, new_doc, new_tf = count_postings(docs_tokens, vocab, n_old)
    return _append_postings(index, vocab, all_ids, new_term, new_doc, new_tf)


def add_shards(index: BM25Index, parts: Sequence["ShardPostings"], doc_ids: Sequence[str]) -> BM25Index:
    """`add_documents` of documents counted in shards (`bm25_shards.count_shard`, in corpus order): the same
    index.

    Each shard's words join the vocabulary in its first-occurrence order, shard after shard, as one
    `count_postings` over all the documents adds them; documents are numbered on from the index's."""
    doc_ids = list(doc_ids)
    all_ids = list(index.doc_ids) + doc_ids
    if len(set(all_ids)) != len(all_ids):
        from nlpkit.stats.documents import check_unique_ids
        check_unique_ids(all_ids, "index + new documents")
    vocab = dict(index.term_id)
    terms, docs, tfs, offset = [], [], [], index.n_docs
    for p in parts:
        lut = np.fromiter((vocab.setdefault(w, len(vocab)) for w in p.vocab), dtype=np.int64, count=len(p.vocab))
        terms.append(lut[p.term])
        docs.append(p.doc + offset)
        tfs.append(p.tf)
        offset += p.n_docs
    if offset - index.n_docs != len(doc_ids):
        raise NlpkitError(f"{len(doc_ids)} document ids for {offset - index.n_docs} documents")
    term, doc = np.concatenate(terms or [np.zeros(0, np.int64)]), np.concatenate(docs or [np.zeros(0, np.int64)])
    tf = np.concatenate(tfs or [np.zeros(0, np.int64)])
    order = np.lexsort((doc, term))                       # term-major, documents ascending
    return _append_postings(index, vocab, all_ids, term[order], doc[order], tf[order])


def _append_postings(index: BM25Index, vocab: dict[str, int], all_ids: list[str], new_term: np.ndarray,
                     new_doc: np.ndarray, new_tf: np.ndarray) -> BM25Index:
    """The index with new postings (term-major, numbered after the old documents) merged in, rescored."""
    index.check_docs(index.docs, np.diff(np.asarray(index.indptr)).tolist())
    old_counts = np.diff(np.asarray(index.indptr))
    old_term = np.repeat(np.arange(len(index.vocab), dtype=np.int64), old_counts)  # [P_old]
    term = np.concatenate([old_term, new_term])
    doc = np.concatenate([index.docs, new_doc])
    tf = np.concatenate([index.tf, new_tf])
    order = np.argsort(term, kind="stable")  # old postings of a term precede the new (higher) docs
    return _assemble(index.variant, index.k1, index.b, index.delta, list(vocab), all_ids,
                     term[order], doc[order], tf[order], index.tokenizer)


@contextmanager
def gc_paused():
    """No cyclic garbage collection inside: tokenizing a corpus builds millions of token lists
    (no reference cycles), and every full collection walks all of them again (about a quarter
    of `bm25 index` on 33 MB; more in a Dask worker, which holds more objects)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


# Moved to `nlpkit.retrieval.bm25_shards` in 0.4 (issue 34): still importable from here, with a DeprecationWarning.
