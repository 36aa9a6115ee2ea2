"""Co-occurrence counting and pointwise mutual information (PMI, NPMI, PPMI).

Counting follows NLTK's ``BigramCollocationFinder.from_words(words, window_size=w)``
(and ``TrigramCollocationFinder``), so the numbers equal NLTK's:

- every token is counted once in the unigram counts ``f(x)``; ``N`` = number of tokens;
- a pair (x, y) is counted for every y 1..w-1 tokens after an x (forward only);
  w = 2 gives adjacent pairs: "a b c" -> (a,b), (b,c); w = 3 adds (a,c);
- a triple (x, y, z) for every y, z with x < y < z inside a window of w tokens.

Scores (Church & Hanks; Manning & Schütze 5.4), with the pair count scaled by
1/(w-1) as NLTK does, and the trigram counts as NLTK's TrigramCollocationFinder:

    pmi(x,y)   = log( c(x,y)/(w-1) * N / (f(x) f(y)) )
    pmi(x,y,z) = log( c(x,y,z) * M^2 / (g(x) g(y) g(z)) ),  g = k f, M = k N, k = C(w-1, 2)
    npmi       = pmi / -log p(x,y),  p(x,y) = c(x,y)/(w-1)/N   (gensim's npmi_scorer, in [-1, 1])
    npmi(x,y,z)= pmi / -2 log p(x,y,z),  p = c(x,y,z)/k/N          (bounded by 1 as well)
    ppmi       = max(pmi, 0)

Unlike NLTK, segments are not crossed by default: pairs stop at sentence ends
(``.``, ``!``, ``?``) and line ends; ``cross_lines`` / ``cross_sentences`` lift that.
Counting streams the input in blocks (`nlpkit.stats.counting`); pair codes
``x << 32 | y`` are reduced with ``np.unique`` so memory grows with the vocabulary
and the pair table, not with the corpus.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Callable, Iterable

import numpy as np

from nlpkit.errors import NlpkitError, UsageError
from nlpkit.stats.codes import TRIGRAM_VOCAB, count_runs, pack_ngram, pack_ngrams, sum_by_key, unpack_ngrams
from nlpkit.stats.counting import (BLOCK_BYTES, BREAK_LINE, BREAK_SENTENCE, BREAK_SENTENCE_LINE,
                                   BlockEncoder, iter_blocks)
from nlpkit.text import WordTokenizer

MEASURES = ("pmi", "npmi", "ppmi")
LOG_BASES = {"2": np.log2, "e": np.log, "10": np.log10}
_REDUCE_AT = 1 << 23               # pending codes before a reduction (~64 MB of int64)


@dataclass
class Cooccurrence:
    """Counts from one pass over a corpus.

    ``keys`` are packed n-gram codes (sorted, unique), ``counts`` their raw counts;
    ``unigram[i]`` counts word ``words[i]``; ``n_tokens`` is N.
    """

    words: list[str]
    unigram: np.ndarray        # [V] int64
    keys: np.ndarray           # [P] int64
    counts: np.ndarray         # [P] int64
    n_tokens: int
    window: int
    ngram: int

    def ngram_ids(self, keys: np.ndarray | None = None) -> np.ndarray:  # [P] -> [P, ngram]
        """Unpack codes into id columns."""
        return unpack_ngrams(self.keys if keys is None else keys, self.ngram)

    def code(self, ids: Iterable[int]) -> int:
        return pack_ngram(list(ids))

    def count_of(self, ids: Iterable[int]) -> int:
        """Raw count of one n-gram given by ids (0 when unseen)."""
        c = self.code(ids)
        i = int(np.searchsorted(self.keys, c))
        return int(self.counts[i]) if i < len(self.keys) and self.keys[i] == c else 0


class CooccurrenceCounter:
    """Streaming counter: feed encoded blocks with `add`, then `result`."""

    def __init__(self, window: int = 2, ngram: int = 2) -> None:
        check_settings(window, ngram)
        self.window, self.ngram = window, ngram
        self.unigram = np.zeros(0, dtype=np.int64)
        self.n_tokens = 0
        self._keys = np.zeros(0, dtype=np.int64)
        self._counts = np.zeros(0, dtype=np.int64)
        self._pending: list[np.ndarray] = []
        self._pending_n = 0

    def add(self, ids: np.ndarray, seg: np.ndarray, n_old: int = 0) -> None:
        """Count a block: ids [n], seg [n] (non-decreasing segment index).

        The first `n_old` tokens were already counted (a tail carried over from
        the previous block); only n-grams ending at a new token are added.
        """
        new = ids[n_old:]
        if len(new):
            self.n_tokens += len(new)
            bc = np.bincount(new, minlength=len(self.unigram))
            bc[:len(self.unigram)] += self.unigram
            self.unigram = bc
        n, w = len(ids), self.window
        one_seg = n == 0 or seg[0] == seg[-1]              # seg is non-decreasing: no break inside
        # offsets reach at most n - 1 tokens: a window longer than the block costs nothing more
        if self.ngram == 2:
            for d in range(1, min(w, n)):
                lo = max(0, n_old - d)                     # later token must be new
                if n - d <= lo:
                    continue
                a, b = ids[lo:n - d], ids[lo + d:]
                if not one_seg:
                    same = seg[lo:n - d] == seg[lo + d:]
                    a, b = a[same], b[same]
                self._push(pack_ngrams(a, b))
        else:
            for d1 in range(1, min(w - 1, n)):
                for d2 in range(d1 + 1, min(w, n)):
                    lo = max(0, n_old - d2)
                    if n - d2 <= lo:
                        continue
                    a, b, c = ids[lo:n - d2], ids[lo + d1:n - d2 + d1], ids[lo + d2:]
                    same = seg[lo:n - d2] == seg[lo + d2:]
                    self._push(pack_ngrams(a[same], b[same], c[same]))

    def _push(self, codes: np.ndarray) -> None:
        self._pending.append(codes)
        self._pending_n += len(codes)
        if self._pending_n >= _REDUCE_AT:
            self._reduce()

    def _reduce(self) -> None:
        """Merge pending codes into the sorted (keys, counts) table."""
        if not self._pending:
            return
        codes = np.concatenate(self._pending) if len(self._pending) > 1 else self._pending[0].copy()
        self._pending, self._pending_n = [], 0
        codes.sort()                                  # in place: np.unique would copy first
        keys, counts = count_runs(codes)
        del codes
        if len(self._keys):
            keys, counts = sum_by_key(np.concatenate([self._keys, keys]), np.concatenate([self._counts, counts]))
        self._keys, self._counts = keys, counts.astype(np.int64)

    def result(self, words: list[str]) -> Cooccurrence:
        self._reduce()
        unigram = np.zeros(len(words), dtype=np.int64)
        unigram[:len(self.unigram)] = self.unigram
        return Cooccurrence(words, unigram, self._keys, self._counts, self.n_tokens,
                            self.window, self.ngram)


def check_settings(window: int, ngram: int) -> None:
    """Refuse windows NLTK refuses: window >= 2 for pairs, >= 3 for triples."""
    if ngram not in (2, 3):
        raise UsageError(f"`ngram` must be 2 or 3, got {ngram}")
    if window < ngram:
        raise UsageError(f"`window` must be at least {ngram} for `ngram` {ngram} "
                         f"(window {ngram} = adjacent words), got {window}")


def break_pattern(cross_lines: bool, cross_sentences: bool) -> str | None:
    """Which segment ends stop n-grams: sentence ends and/or line ends, or none."""
    if cross_lines and cross_sentences:
        return None
    if cross_lines:
        return BREAK_SENTENCE
    if cross_sentences:
        return BREAK_LINE
    return BREAK_SENTENCE_LINE


def count_cooccurrences(paths: Iterable[str], tokenizer: WordTokenizer | None = None,
                        window: int = 2, ngram: int = 2, cross_lines: bool = False,
                        cross_sentences: bool = False, errors: str = "strict",
                        progress: Callable[..., None] | None = None,
                        texts: Iterable[str] | None = None, jobs: int = 1) -> Cooccurrence:
    """Count words and n-grams of files (or of `texts`, each a separate stream).

    Files (and texts) are never crossed. `jobs` > 1 tokenizes blocks in worker processes.

    >>> co = count_cooccurrences([], texts=["The cat sat on the mat."])
    >>> co.count_of([co.words.index("the"), co.words.index("mat")])
    1
    """
    tokenizer = tokenizer or WordTokenizer()
    check_settings(window, ngram)
    paths = list(paths)
    enc = BlockEncoder(tokenizer, break_pattern(cross_lines, cross_sentences))
    counter = CooccurrenceCounter(window, ngram)
    if texts is None:
        items = ((k, block) for k, p in enumerate(paths) for block in iter_blocks(p, errors))
        total = sum(os.path.getsize(p) for p in paths
                    if isinstance(p, str) and p != "-" and os.path.isfile(p))
    else:
        items = ((k, t) for k, t in enumerate(texts))
        total = 0
    count_items(enc.encode_many(items, jobs), enc, counter, progress, total)
    return counter.result(enc.words)


@dataclass
class Edge:
    """A stream's first and last tokens, for n-grams across a shard boundary (`pmi_shards.add_boundaries`).

    `head`: tokens before the stream's first segment break (at most window-1); `tail`: the
    last window-1 tokens of its last segment; `closed`: the stream holds a break (so head
    and tail are different segments). `stream` names the file: files are never crossed.
    """

    stream: int
    head: list[str]
    tail: list[str]
    closed: bool


def count_items(encoded, enc: BlockEncoder, counter: CooccurrenceCounter,
                 progress: Callable[..., None] | None = None, total: int = 0) -> Edge:
    """Count encoded ``(stream, ids, seg, n_seg)`` blocks; return the last stream's `Edge`."""
    window, ngram = counter.window, counter.ngram
    done, stream = 0, -1
    tail_ids = np.zeros(0, np.int32)                    # open segment carried across blocks
    head: list[int] = []
    head_open, closed = True, False
    for k, ids, seg, n_seg in encoded:
        if k != stream:                                 # a new file: nothing carries over
            stream, tail_ids = k, np.zeros(0, np.int32)
            head, head_open, closed = [], True, False
        if head_open:
            head.extend(ids[seg == 0][:window - 1 - len(head)].tolist())
            head_open = n_seg == 1 and len(head) < window - 1
        closed = closed or n_seg > 1
        if len(tail_ids):
            ids = np.concatenate([tail_ids, ids])
            seg = np.concatenate([np.zeros(len(tail_ids), seg.dtype), seg])
        counter.add(ids, seg, n_old=len(tail_ids))
        if ngram == 3 and len(enc) >= TRIGRAM_VOCAB:
            raise NlpkitError(f"`ngram` 3 supports at most {TRIGRAM_VOCAB:,} distinct words")
        last = seg == n_seg - 1                         # tokens of the still-open segment
        tail_ids = ids[last][-(window - 1):] if last.any() else np.zeros(0, np.int32)
        if progress is not None and total:
            done = min(total, done + BLOCK_BYTES)
            progress(done, total)
    words = enc.words
    return Edge(stream, [words[i] for i in head], [words[i] for i in tail_ids.tolist()], closed)


# ------------------------------------------------------------------------------ scoring

def _log(base: str) -> Callable[[np.ndarray], np.ndarray]:
    if base not in LOG_BASES:
        raise UsageError(f"`log_base` must be one of 2, e, 10; got {base!r}")
    return LOG_BASES[base]


_MATH_LOGS = {"2": math.log2, "e": math.log, "10": math.log10}


def _libm_log(base: str) -> Callable[[np.ndarray], np.ndarray]:
    """The log NLTK takes (Python's math.log2, libm's), once per distinct value: np.log2 can differ
    from it in the last bit (np.log2(60000.0) - np.log2(109 * 73) is 1 ulp off math.log2's)."""
    fn = _MATH_LOGS[base]

    def log(x: np.ndarray) -> np.ndarray:  # [P] float64 -> [P]
        u, inv = np.unique(x, return_inverse=True)
        return np.fromiter(map(fn, u.tolist()), np.float64, len(u))[inv.reshape(x.shape)]
    return log


def score(co: Cooccurrence, ids: np.ndarray, counts: np.ndarray, measure: str = "pmi",
          log_base: str = "2", exact: bool = True) -> np.ndarray:  # [P, n], [P] -> [P]
    """Scores of n-grams with raw counts `counts`, in NLTK's order of float operations.

    Bigram pmi is ``log2(c/(w-1) * N) - log2(f(x) f(y))`` exactly as NLTK computes it, math.log2
    of the same two products, so the scores (and the order of ties) are bit-identical to
    BigramAssocMeasures.pmi. `exact=False` uses numpy's log (last-bit differences; for
    preselecting candidates).
    """
    if measure not in MEASURES:
        raise UsageError(f"`measure` must be one of {', '.join(MEASURES)}; got {measure!r}")
    log = _log(log_base)
    if exact and measure != "npmi":
        log = _libm_log(log_base)
    f = co.unigram
    N = co.n_tokens
    if co.ngram == 2:
        n_ii = counts / (co.window - 1.0)
        if measure == "npmi":  # gensim npmi_scorer, natural log (base cancels)
            n = float(N)
            pa, pb, pab = f[ids[:, 0]] / n, f[ids[:, 1]] / n, n_ii / n
            with np.errstate(divide="ignore", invalid="ignore"):
                out = np.log(pab / (pa * pb)) / -np.log(pab)
            return np.where(pab >= 1.0, 1.0, out)
        pmi = log(n_ii * N) - log((f[ids[:, 0]] * f[ids[:, 1]]).astype(np.float64))
    else:
        k = math.comb(co.window - 1, 2)
        M = np.longdouble(k * N)
        g = [(k * f[ids[:, j]]).astype(np.longdouble) for j in range(3)]
        if measure == "npmi":
            pxyz = counts / k / float(N)
            ratio = (counts.astype(np.longdouble) * M * M / (g[0] * g[1] * g[2])).astype(np.float64)
            with np.errstate(divide="ignore", invalid="ignore"):
                out = np.log(ratio) / (-2.0 * np.log(pxyz))
            return np.where(pxyz >= 1.0, 1.0, out)
        num = (counts.astype(np.longdouble) * (M * M)).astype(np.float64)
        den = (g[0] * g[1] * g[2]).astype(np.float64)
        pmi = log(num) - log(den)
    return np.maximum(pmi, 0.0) if measure == "ppmi" else pmi


def ranked(co: Cooccurrence, measure: str = "pmi", log_base: str = "2", min_count: int = 1,
           top: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The n-grams with count >= min_count, best first: (ids [K, n], counts [K], scores [K]).

    Order: score descending, then the words ascending (NLTK's ``score_ngrams`` order).
    `top` 0 keeps all.
    """
    check_ranking(min_count, top)
    sel = co.counts >= min_count
    keys, counts = co.keys[sel], co.counts[sel]
    ids = co.ngram_ids(keys)
    if top and top < len(counts):  # candidates by numpy's log (cheap), then exact scores for them only
        fast = score(co, ids, counts, measure, log_base, exact=False)
        kth = np.partition(-fast, top - 1)[top - 1]
        cand = np.flatnonzero(-fast <= kth + 1e-9 * (1.0 + abs(kth)))  # a margin far above the last-bit
        ids, counts = ids[cand], counts[cand]                            # differences
    scores = score(co, ids, counts, measure, log_base)
    if top and top < len(scores):                  # candidates: everything tied with the k-th
        kth = np.partition(-scores, top - 1)[top - 1]
        cand = np.flatnonzero(-scores <= kth)
        ids, counts, scores = ids[cand], counts[cand], scores[cand]
    rank = word_ranks(co.words)
    order = np.lexsort(tuple(rank[ids[:, j]] for j in reversed(range(co.ngram))) + (-scores,))
    if top:
        order = order[:top]
    return ids[order], counts[order], scores[order]


def check_ranking(min_count: int, top: int) -> None:
    """Refuse a `ranked` selection that means nothing (checked before counting by the CLI)."""
    if min_count < 1:
        raise UsageError(f"`min_count` must be at least 1, got {min_count}")
    if top < 0:
        raise UsageError(f"`top` must be >= 0 (0 = all), got {top}")


def word_ranks(words: list[str]) -> np.ndarray:  # [V] -> [V]
    """Position of each word in code-point order (for NLTK's tie-break on the n-gram)."""
    order = sorted(range(len(words)), key=words.__getitem__)
    rank = np.empty(len(words), dtype=np.int64)
    rank[order] = np.arange(len(words))
    return rank


def top_words(co: Cooccurrence, k: int) -> np.ndarray:  # -> [k] ids
    """The k most frequent words (ties: alphabetical) among those counted."""
    ids = np.flatnonzero(co.unigram > 0)
    rank = word_ranks(co.words)
    order = np.lexsort((rank[ids], -co.unigram[ids]))
    return ids[order][:k] if k else ids[order]


def count_matrix(co: Cooccurrence, word_ids: np.ndarray) -> np.ndarray:  # [k] -> [k, k]
    """Forward pair counts among the given words: M[i, j] = c(word_i, word_j)."""
    if co.ngram != 2:
        raise UsageError(f"a count matrix needs pair counts (ngram 2), not ngram {co.ngram}")
    pos = np.full(len(co.words), -1, dtype=np.int64)
    pos[word_ids] = np.arange(len(word_ids))
    pairs = co.ngram_ids()
    r, c = pos[pairs[:, 0]], pos[pairs[:, 1]]
    sel = (r >= 0) & (c >= 0)
    m = np.zeros((len(word_ids), len(word_ids)), dtype=np.int64)
    m[r[sel], c[sel]] = co.counts[sel]
    return m


# Moved to `nlpkit.stats.pmi_shards` in 0.4 (issue 34): still importable from here, with a DeprecationWarning.
