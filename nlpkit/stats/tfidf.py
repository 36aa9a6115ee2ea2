"""TF-IDF weighting with the textbook TF/IDF/norm variants, scikit-learn's and gensim's SMART.

    weight(t, d) = tf(t, d) * idf(t), then each document vector normalized (l2, l1 or none)

tf:  raw = count; relative = count / (count of all terms of d); log = 1 + log(count);
     boolean = 1; augmented = 0.5 + 0.5 count / max count in d;
     (SMART only) double-log = 1 + log(1 + log count); log-average = (1 + log count) / (1 + log mean count)
idf: standard = log(N/df); smooth = ln((1+N)/(1+df)) + 1 (scikit-learn's default);
     probabilistic = max(0, log((N-df)/df)); none = 1; (SMART t) zero-corrected = log((N+1)/df)
     plus `idf_offset` (scikit-learn's smooth_idf=False is ``standard`` + offset 1, natural log).

Worked example: a 100-word document with "cat" 3 times has relative tf 0.03; with
N = 10,000,000 and df = 1,000, standard idf in base 10 is 4 and tf-idf 0.12.

SMART strings (gensim ``TfidfModel(smartirs=XYZ)``): X in b n t a l d L, Y in n x f t p,
Z in n x c; logs are base 2 as in gensim. Pivoted norms (u, b) are refused.

The corpus becomes a CSR matrix of our own (indptr/indices/data numpy arrays), rows =
documents, columns = terms sorted alphabetically (scikit-learn's column order).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

import numpy as np

from nlpkit.errors import NlpkitError, UsageError
from nlpkit.shards import moved_names
from nlpkit.stats.codes import TRIGRAM_VOCAB, pack_ngrams, run_lengths, run_starts, unpack_ngrams
from nlpkit.stats.counting import BREAK_DOC, BlockEncoder
from nlpkit.stats.documents import DocNames, batch_texts
from nlpkit.text import WordTokenizer

TF_SCHEMES = ("raw", "relative", "log", "boolean", "augmented", "double-log", "log-average")
IDF_SCHEMES = ("standard", "smooth", "probabilistic", "none", "zero-corrected")
NORMS = ("l2", "l1", "none")
LOGS = {"2": np.log2, "e": np.log, "10": np.log10}
SMART_TF = {"b": "boolean", "n": "raw", "t": "raw", "a": "augmented", "l": "log",
            "d": "double-log", "L": "log-average"}
SMART_IDF = {"n": "none", "x": "none", "f": "standard", "t": "zero-corrected", "p": "probabilistic"}
SMART_NORM = {"n": "none", "x": "none", "c": "l2"}


@dataclass
class Weighting:
    """The settings that determine tf-idf numbers (the signature's content)."""

    tf: str = "raw"
    idf: str = "smooth"
    norm: str = "l2"
    log_base: str = "e"
    idf_offset: float = 0.0
    smart: str | None = field(default=None)

    def __post_init__(self) -> None:
        for value, allowed, name in ((self.tf, TF_SCHEMES, "`tf`"), (self.idf, IDF_SCHEMES, "`idf`"),
                                     (self.norm, NORMS, "`norm`"), (self.log_base, tuple(LOGS), "`log_base`")):
            if value not in allowed:
                raise UsageError(f"{name} must be one of {', '.join(allowed)}; got {value!r}")


def smart_weighting(smart: str) -> Weighting:
    """gensim SMART letters -> Weighting (log base 2). ``smart_weighting("ltc")``."""
    code = smart
    if len(code) != 3:
        raise UsageError(f"`smart` expects three letters (tf, idf, norm) such as ntc; got {code!r}")
    t, d, n = code
    if t not in SMART_TF:
        raise UsageError(f"`smart` {code}: unknown tf letter {t!r} (one of {''.join(SMART_TF)})")
    if d not in SMART_IDF:
        raise UsageError(f"`smart` {code}: unknown idf letter {d!r} (one of {''.join(SMART_IDF)})")
    if n in "ub":
        raise UsageError(f"`smart` {code}: pivoted normalization {n!r} is not supported (use n or c)")
    if n not in SMART_NORM:
        raise UsageError(f"`smart` {code}: unknown norm letter {n!r} (one of {''.join(SMART_NORM)})")
    return Weighting(SMART_TF[t], SMART_IDF[d], SMART_NORM[n], "2", 0.0, code)


# ----------------------------------------------------------------------- the formulas

def tf_weights(counts: np.ndarray, row: np.ndarray, n_rows: int, scheme: str,
               log_base: str = "e") -> np.ndarray:  # [nnz], [nnz] -> [nnz]
    """Term-frequency weights of the nonzero counts; `row` gives each entry's document.

    >>> tf_weights(np.array([3.0, 97.0]), np.array([0, 0]), 1, "relative").tolist()
    [0.03, 0.97]
    """
    log = LOGS[log_base]
    c = counts.astype(np.float64)
    if scheme == "raw":
        return c
    if scheme == "boolean":
        return np.ones_like(c)
    if scheme == "log":                   # in place, as scikit-learn's sublinear_tf
        log(c, out=c)
        c += 1.0
        return c
    if scheme == "double-log":
        return 1 + log(1 + log(c))
    if scheme == "relative":
        return c / np.bincount(row, weights=c, minlength=n_rows)[row]
    if scheme == "augmented":
        mx = np.zeros(n_rows)
        np.maximum.at(mx, row, c)
        return 0.5 + (0.5 * c / mx[row])
    if scheme == "log-average":
        mean = np.bincount(row, weights=c, minlength=n_rows) / np.maximum(np.bincount(row, minlength=n_rows), 1)
        return (1 + log(c)) / (1 + log(mean[row]))
    raise UsageError(f"unknown tf scheme {scheme!r}")


def idf_weights(df: np.ndarray, n_docs: int, scheme: str, log_base: str = "e",
                offset: float = 0.0) -> np.ndarray:  # [V] -> [V]
    """Inverse document frequencies of document frequencies `df` among `n_docs` documents.

    >>> idf_weights(np.array([1000]), 10_000_000, "standard", "10").tolist()
    [4.0]
    """
    log = LOGS[log_base]
    d = df.astype(np.float64)
    with np.errstate(divide="ignore"):
        if scheme == "none":
            idf = np.ones_like(d)
        elif scheme == "standard":
            idf = log(n_docs / d)
        elif scheme == "smooth":                       # scikit-learn: ln((1+N)/(1+df)) + 1
            idf = np.full_like(d, n_docs + 1.0)
            idf /= d + 1.0
            idf = log(idf) + 1.0
        elif scheme == "zero-corrected":
            idf = log((n_docs + 1.0) / d)
        elif scheme == "probabilistic":
            idf = np.maximum(0.0, log((1.0 * n_docs - d) / d))
        else:
            raise UsageError(f"unknown idf scheme {scheme!r}")
    return idf + offset if offset else idf


def normalize_rows(data: np.ndarray, row: np.ndarray, n_rows: int, norm: str) -> np.ndarray:
    """Divide each document's weights by its l2 or l1 norm, in place (zero rows stay zero)."""
    if norm == "none":
        return data
    total = np.zeros(n_rows)
    for sl in _row_slices(row):
        part = data[sl] * data[sl] if norm == "l2" else np.abs(data[sl])
        total += np.bincount(row[sl], weights=part, minlength=n_rows)
    length = np.sqrt(total) if norm == "l2" else total
    length[length == 0.0] = 1.0
    for sl in _slices(len(data)):
        data[sl] /= length[row[sl]]
    return data


# ------------------------------------------------------------------------ the matrix

@dataclass
class CountMatrix:
    """Documents x terms raw counts in CSR form; terms sorted (scikit-learn's order)."""

    indptr: np.ndarray      # [n_docs + 1] int64
    indices: np.ndarray     # [nnz] int32, sorted within each row
    counts: np.ndarray      # [nnz] int64
    terms: list[str]        # [V]
    names: DocNames         # [n_docs]

    @property
    def n_docs(self) -> int:
        return len(self.indptr) - 1

    def rows(self) -> np.ndarray:  # -> [nnz] document index of each entry
        return np.repeat(np.arange(self.n_docs, dtype=np.int32), np.diff(self.indptr))

    def document_frequency(self) -> np.ndarray:  # -> [V], computed once
        if getattr(self, "_df", None) is None:
            self._df = np.bincount(self.indices, minlength=len(self.terms))
        return self._df


@dataclass
class TfidfMatrix:
    """The weighted matrix plus what produced it."""

    indptr: np.ndarray      # [n_docs + 1]
    indices: np.ndarray     # [nnz]
    data: np.ndarray        # [nnz] float64
    terms: list[str]
    names: DocNames
    df: np.ndarray          # [V]
    idf: np.ndarray         # [V]
    weighting: Weighting

    @property
    def n_docs(self) -> int:
        return len(self.indptr) - 1

    def row(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        s, e = self.indptr[i], self.indptr[i + 1]
        return self.indices[s:e], self.data[s:e]


def _ngram_codes(ids: np.ndarray, doc: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Packed codes of the n-grams inside each document: [t] -> [m], and their documents."""
    if n == 1:
        return ids.astype(np.int64), doc
    m = len(ids) - n + 1
    if m <= 0:
        return np.zeros(0, np.int64), np.zeros(0, doc.dtype)
    same = doc[:m] == doc[n - 1:]
    code = pack_ngrams(*(ids[j:j + m] for j in range(n)))
    return code[same], doc[:m][same]


def _batch_counts(ids: np.ndarray, doc: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct (document, n-gram code) of one batch with counts, sorted by document then code."""
    code, d = _ngram_codes(ids, doc, n)
    if n == 1:                                           # one int64 key: (document, word id)
        key = np.sort((d << 31) | code)
        starts = run_starts(key)
        cnt = run_lengths(starts, len(key))
        code, d = (key[starts] & 0x7FFFFFFF).astype(np.int32), key[starts] >> 31
    else:
        order = np.lexsort((code, d))                    # by document, then n-gram code
        code, d = code[order], d[order]
        starts = run_starts(code, d)
        cnt = run_lengths(starts, len(code))
        code, d = code[starts], d[starts]
    cnt = cnt.astype(np.int32)
    return d.astype(np.int32), code, cnt


def count_matrix(batches: Iterable[tuple[int, str]], tokenizer: WordTokenizer | None = None,
                 ngram_range: tuple[int, int] = (1, 1), doc_break: str = BREAK_DOC,
                 names: DocNames | None = None, jobs: int = 1,
                 progress: Callable[..., None] | None = None) -> CountMatrix:
    """Count the terms of documents given as batches ``(n_docs, text)`` (see `corpus.iter_documents`).

    Each batch is tokenized at once; its n-gram codes are sorted by (document, code)
    and run-length counted, so no Python loop touches a token. Memory: ~12 bytes per
    distinct (document, term) while counting, then the CSR arrays (8 bytes per entry).
    """
    lo, hi = ngram_range
    if not 1 <= lo <= hi <= 3:
        raise UsageError(f"`ngram_range` must satisfy 1 <= MIN <= MAX <= 3; got {lo},{hi}")
    enc = BlockEncoder(tokenizer or WordTokenizer(), doc_break)
    ns = range(lo, hi + 1)
    batches_out: list[tuple[int, list]] = []             # (n_docs, [(doc, code, cnt) per n])
    for n_batch, ids, doc, n_seg in enc.encode_many(batches, jobs):
        if n_seg != n_batch + 1:      # every document ends with a break; a pattern swallowed one
            raise NlpkitError("the token pattern matches the document separator (a newline with "
                              "`mode` lines, NUL otherwise); choose one that does not")
        if hi == 3 and len(enc) >= TRIGRAM_VOCAB:
            raise NlpkitError(f"`ngram_range` with trigrams supports at most {TRIGRAM_VOCAB:,} distinct words")
        batches_out.append((n_batch, [_batch_counts(ids, doc, n) for n in ns]))
        if progress is not None:
            progress(sum(b[0] for b in batches_out))
    # Columns: every n-gram that occurred, strings sorted alphabetically (scikit-learn's order).
    words = enc.words
    terms: list[str] = []
    col_of: list[tuple[np.ndarray, np.ndarray]] = []      # per n: (sorted codes, column)
    for k, n in enumerate(ns):
        if n == 1:                                        # word ids index a table directly
            present = np.zeros(len(enc), dtype=bool)
            for _, parts in batches_out:
                present[parts[k][1]] = True
            uniq = np.flatnonzero(present)
        else:
            uniq = np.unique(np.concatenate([parts[k][1] for _, parts in batches_out]
                                            or [np.zeros(0, np.int64)]))
        col_of.append((uniq, np.arange(len(terms), len(terms) + len(uniq))))
        terms.extend(_term_strings(uniq, n, words))
    order = sorted(range(len(terms)), key=terms.__getitem__)
    rank = np.empty(len(terms), dtype=np.int32)
    rank[order] = np.arange(len(terms), dtype=np.int32)
    terms = [terms[i] for i in order]
    lut1 = None
    if lo == 1:
        lut1 = np.zeros(len(enc), dtype=np.int32)
        lut1[col_of[0][0]] = rank[col_of[0][1]]
    # Assemble the CSR arrays batch by batch, columns sorted within each row.
    n_docs = sum(b[0] for b in batches_out)
    nnz = sum(len(parts[k][0]) for _, parts in batches_out for k in range(len(ns)))
    indptr = np.zeros(n_docs + 1, dtype=np.int64)
    indices = np.empty(nnz, dtype=np.int32)
    counts = np.empty(nnz, dtype=np.int32)
    first_doc, pos = 0, 0
    while batches_out:
        n_batch, parts = batches_out.pop(0)
        d = np.concatenate([p[0] for p in parts])
        c = np.concatenate([p[2] for p in parts])
        cols = []
        for k, n in enumerate(ns):
            code = parts[k][1]
            if n == 1:
                cols.append(lut1[code])
            else:
                uniq, col = col_of[k]
                cols.append(rank[col[np.searchsorted(uniq, code)]])
        col = np.concatenate(cols)
        del parts, cols
        perm = np.argsort((d.astype(np.int64) << 32) | col, kind="stable")
        m = len(perm)
        indices[pos:pos + m] = col[perm]
        counts[pos:pos + m] = c[perm]
        indptr[first_doc + 1:first_doc + n_batch + 1] = pos + np.cumsum(np.bincount(d, minlength=n_batch))
        first_doc += n_batch
        pos += m
    if names is None:
        names = DocNames()
        names.add_range("", 1, n_docs)
    return CountMatrix(indptr, indices, counts, terms, names)


def _term_strings(codes: np.ndarray, n: int, words: list[str]) -> list[str]:
    if n == 1:
        return [words[i] for i in codes.tolist()]
    ids = unpack_ngrams(codes, n).tolist()
    if n == 2:
        return [f"{words[a]} {words[b]}" for a, b in ids]
    return [f"{words[a]} {words[b]} {words[c]}" for a, b, c in ids]


def check_corpus(n_docs: int, n_terms: int, tokenizer: WordTokenizer | None = None) -> None:
    """Refuse a corpus with no documents, or none with a term (naming stopwords when they took all)."""
    if n_docs == 0:
        raise NlpkitError("empty corpus: no documents")
    if not n_terms:
        raise NlpkitError("empty vocabulary: the documents have no words"
                          + (" other than stopwords" if tokenizer and tokenizer.stopwords else ""))


def df_mask(df: np.ndarray, n_docs: int, min_df: float = 1, max_df: float = 1.0) -> np.ndarray:  # [V] -> [V] bool
    """The terms in at least min_df and at most max_df of `n_docs` documents (scikit-learn's rule: an
    int is a count of documents, a float a share of them). Bounds no count meets, or bounds that
    leave no term, are errors."""
    max_docs = max_df if isinstance(max_df, int) else max_df * n_docs
    min_docs = min_df if isinstance(min_df, int) else min_df * n_docs
    if max_docs < min_docs:
        raise UsageError(f"`min_df` {min_df} asks for terms in {min_docs:g} or more of {n_docs} documents, but "
                         f"`max_df` {max_df} allows at most {max_docs:g}: lower `min_df` or raise `max_df`")
    keep = (df >= min_docs) & (df <= max_docs)
    if len(keep) and not keep.any():
        raise NlpkitError("after `min_df`/`max_df` no terms remain; lower `min_df` or raise `max_df`")
    return keep


def prune(counts: CountMatrix, min_df: float = 1, max_df: float = 1.0) -> CountMatrix:
    """Drop terms in fewer than min_df or more than max_df documents (`df_mask`)."""
    n = counts.n_docs
    keep = df_mask(counts.document_frequency(), n, min_df, max_df)
    if keep.all():
        return counts
    new_col = np.cumsum(keep) - 1
    entry = keep[counts.indices]
    row = counts.rows()[entry]
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(row, minlength=n), out=indptr[1:])
    terms = [t for t, k in zip(counts.terms, keep.tolist()) if k]
    return CountMatrix(indptr, new_col[counts.indices[entry]].astype(np.int32), counts.counts[entry],
                       terms, counts.names)


def _slices(n: int, step: int = 1 << 20) -> Iterable[slice]:
    """Chunks of the nonzeros, so per-entry temporaries stay small."""
    return (slice(s, min(n, s + step)) for s in range(0, n, step))


def _row_slices(row: np.ndarray, step: int = 1 << 20) -> list[slice]:
    """Chunks of about `step` entries that never split a document (`row` is sorted), so a
    document's norm is one sum in entry order whatever the chunking or sharding."""
    cuts = [0]
    while cuts[-1] + step < len(row):
        cuts.append(int(np.searchsorted(row, row[cuts[-1] + step], side="left")))
        if cuts[-1] == cuts[-2]:                          # one document longer than a chunk
            cuts[-1] = int(np.searchsorted(row, row[cuts[-2]], side="right"))
    cuts.append(len(row))
    return [slice(a, b) for a, b in zip(cuts, cuts[1:]) if b > a]


def weigh(counts: CountMatrix, weighting: Weighting, df: np.ndarray | None = None,
          idf: np.ndarray | None = None) -> TfidfMatrix:
    """Apply tf, idf and normalization to a count matrix (exact zeros are dropped).

    `df` and `idf` default to this matrix's own; a shard of a corpus passes the corpus's.
    """
    w = weighting
    row = counts.rows()
    if df is None:
        df = counts.document_frequency()
    if idf is None:
        idf = idf_weights(df, counts.n_docs, w.idf, w.log_base, w.idf_offset)
    data = tf_weights(counts.counts, row, counts.n_docs, w.tf, w.log_base)
    for sl in _slices(len(data)):
        data[sl] *= idf[counts.indices[sl]]
    normalize_rows(data, row, counts.n_docs, w.norm)
    indices, indptr = counts.indices, counts.indptr
    nz = data != 0.0
    if not nz.all():
        indices, data, row = indices[nz], data[nz], row[nz]
        indptr = np.zeros(counts.n_docs + 1, dtype=np.int64)
        np.cumsum(np.bincount(row, minlength=counts.n_docs), out=indptr[1:])
    return TfidfMatrix(indptr, indices, data, counts.terms, counts.names, df, idf, w)


def tfidf(docs: Iterable[str] | None = None, tokenizer: WordTokenizer | None = None,
          weighting: Weighting | None = None, ngram_range: tuple[int, int] = (1, 1),
          min_df: float = 1, max_df: float = 1.0, batches: Iterable[tuple[int, str]] | None = None,
          doc_break: str = BREAK_DOC, names: DocNames | None = None, jobs: int = 1,
          progress: Callable[..., None] | None = None) -> TfidfMatrix:
    """Count, prune and weigh in one call: `docs` (strings) or `batches` from `iter_documents`.

    >>> m = tfidf(["the cat sat", "the dog sat"], weighting=Weighting(norm="none"))
    >>> m.terms, [round(x, 4) for x in m.data.tolist()]
    (['cat', 'dog', 'sat', 'the'], [1.4055, 1.0, 1.0, 1.4055, 1.0, 1.0])
    """
    if batches is None:
        names = names if names is not None else DocNames()
        batches = batch_texts(docs or [], names)
    counts = count_matrix(batches, tokenizer, ngram_range, doc_break, names, jobs, progress)
    check_corpus(counts.n_docs, len(counts.terms), tokenizer)
    return weigh(prune(counts, min_df, max_df), weighting or Weighting())


# --------------------------------------------------------------------- using the matrix

def top_terms(m: TfidfMatrix, k: int = 10) -> Iterable[tuple[int, list[tuple[str, float]]]]:
    """For each document, its k highest-weighted terms (ties: alphabetical)."""
    for i in range(m.n_docs):
        cols, vals = m.row(i)
        order = np.lexsort((cols, -vals))[:k] if k else np.lexsort((cols, -vals))
        yield i, [(m.terms[c], float(v)) for c, v in zip(cols[order].tolist(), vals[order].tolist())]


def query_vector(m: TfidfMatrix, tokens: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Weighted vector of a query: the same tf and idf as the documents; unknown terms dropped."""
    index = {t: i for i, t in enumerate(m.terms)}
    known = [index[t] for t in tokens if t in index]
    if not known:
        return np.zeros(0, np.int64), np.zeros(0)
    cols, cnt = np.unique(np.array(known), return_counts=True)
    tf = tf_weights(cnt, np.zeros(len(cnt), np.int64), 1, m.weighting.tf, m.weighting.log_base)
    return cols, tf * m.idf[cols]


def rank_by_cosine(m: TfidfMatrix, tokens: list[str], k: int = 10) -> list[tuple[int, float]]:
    """Documents by cosine similarity to the query (positive scores only), best first."""
    q = unit_query(m, tokens)
    return [] if q is None else rank_rows(m, q, k)


def unit_query(m: TfidfMatrix, tokens: list[str]) -> np.ndarray | None:  # -> [V], or None: no known term
    """The query's weighted vector over the matrix's terms, scaled to length 1."""
    qcols, qvals = query_vector(m, tokens)
    qnorm = math.sqrt(float(qvals @ qvals)) if len(qvals) else 0.0
    if qnorm == 0.0:
        return None
    q = np.zeros(len(m.terms))
    q[qcols] = qvals / qnorm
    return q


def rank_rows(m: TfidfMatrix, q: np.ndarray, k: int = 10) -> list[tuple[int, float]]:
    """(row, cosine with the unit vector q) of the rows with a positive cosine, best first (ties:
    the earlier row), the first k (0: all). Each row's sums run in its own entries' order, so a
    shard's rows score exactly as in the whole matrix."""
    row = np.repeat(np.arange(m.n_docs), np.diff(m.indptr))
    dot = np.bincount(row, weights=m.data * q[m.indices], minlength=m.n_docs)
    dnorm = np.sqrt(np.bincount(row, weights=m.data * m.data, minlength=m.n_docs))
    with np.errstate(divide="ignore", invalid="ignore"):
        cos = np.where(dnorm > 0, dot / dnorm, 0.0)
    hits = np.flatnonzero(cos > 0)
    order = hits[np.lexsort((hits, -cos[hits]))]
    if k:
        order = order[:k]
    return [(int(i), float(cos[i])) for i in order]


def write_matrix_market(m: TfidfMatrix, stream, signature: str | None = None,
                        vocab_in_header: bool = True) -> None:
    """MatrixMarket coordinate format: rows = documents, columns = terms, 1-based.

    With `vocab_in_header`, comment lines ``%term<TAB>j<TAB>TERM`` and ``%doc<TAB>i<TAB>NAME``
    name the columns and rows (scipy.io.mmread skips comments).
    """
    w = stream.write
    w(matrix_market_banner(signature))
    if vocab_in_header:
        w(matrix_market_names("term", m.terms))
        w(matrix_market_names("doc", m.names))
    w(f"{m.n_docs} {len(m.terms)} {len(m.data)}\n")
    for text in matrix_market_entries(m):
        w(text)


def matrix_market_banner(signature: str | None = None) -> str:
    """The first lines of `write_matrix_market`'s output."""
    return ("%%MatrixMarket matrix coordinate real general\n"
            "% nlpkit tfidf: rows are documents, columns are terms\n"
            + (f"% signature: {signature}\n" if signature else ""))


def matrix_market_names(kind: str, names, first: int = 1) -> str:
    """``%kind<TAB>i<TAB>NAME`` comment lines numbering `names` from `first`."""
    return "".join(f"%{kind}\t{i}\t{escape_term(t)}\n" for i, t in enumerate(names, first))


def matrix_market_entries(m: TfidfMatrix, row_offset: int = 0, chunk: int = 1 << 16) -> Iterator[str]:
    """``row col value`` lines (1-based; rows numbered after `row_offset`), `chunk` entries a string."""
    row = np.repeat(np.arange(row_offset + 1, row_offset + m.n_docs + 1), np.diff(m.indptr))
    col = m.indices + 1
    for s in range(0, len(m.data), chunk):
        yield "".join(f"{r} {c} {v!r}\n" for r, c, v in zip(row[s:s + chunk].tolist(), col[s:s + chunk].tolist(),
                                                            m.data[s:s + chunk].tolist()))


def escape_term(s: str) -> str:
    """A term on one line of a vocabulary file: backslash, tab, newline and carriage return escaped as in a TSV
    cell (`nlpkit.io.escape_tsv`)."""
    from nlpkit.io import escape_tsv

    return escape_tsv(s)


# Moved to `nlpkit.stats.tfidf_shards` in 0.4 (issue 34): still importable from here, with a DeprecationWarning.
__getattr__ = moved_names(__name__, "nlpkit.stats.tfidf_shards", (
    'ShardCounts', 'CountSettings', 'count_shard', 'shard_summary', 'merge_df', 'weigh_shard', 'COUNTING',
    'shard_info', 'weigh_task', 'matrix_info', 'doc_names', 'entries_task', 'query_task', 'top_term_records'))
