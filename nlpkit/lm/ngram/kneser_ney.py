"""Interpolated modified Kneser-Ney, as KenLM's ``lmplz`` estimates it with its defaults.

From raw counts (`NgramCounts`) to an ARPA table (log10 probabilities and backoffs), following
lmplz's steps (Heafield et al. 2013, "Scalable modified Kneser-Ney language model estimation"):

1. Adjusted counts a(.): the raw count for the highest order and for n-grams that start with
   ``<s>``; otherwise the number of distinct words seen to the left (continuation count).
2. Discounts per order from the counts of adjusted counts n1..n4 (Chen & Goodman eq. 26):
   Y = n1 / (n1 + 2 n2),  D_j = j - (j + 1) Y n_{j+1} / n_j  for j = 1, 2, 3+.
   When some n_j is 0 or a D_j falls outside [0, j], lmplz stops unless ``--discount_fallback``;
   nlpkit warns and uses the fallback D = 0.5, 1, 1.5 for that order.
3. Per context c: u(w|c) = (a(cw) - D(a(cw))) / sum_w a(cw); gamma(c) = (D1 N1(c) + D2 N2(c)
   + D3 N3+(c)) / sum_w a(cw).
4. Interpolation: p(w|c) = u(w|c) + gamma(c) p(w|c'), c' = c without its first word; unigrams
   interpolate with the uniform 1/|V| (|V| counts <unk>, not <s>). ``<s>`` gets probability 1
   (log10 0, as lmplz writes it) and <unk> only the interpolated mass.
5. Backoff of an n-gram that is a context (and does not end in <unk> or </s>): gamma; else 1.

The arithmetic is in float32, as lmplz does it, so probabilities agree to a few 1e-7.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from nlpkit.errors import NlpkitError
from nlpkit.lm.ngram.counting import BOS, EOS, UNK, NgramCounts

FALLBACK_DISCOUNTS = (0.5, 1.0, 1.5)
F32 = np.float32


@dataclass
class NgramTable:
    """An n-gram model in backoff form: what an ARPA file holds.

    ``ngrams[k-1]`` int32 [n_k, k] (sorted lexicographically), ``logprob[k-1]`` float32 [n_k]
    log10 p, ``backoff[k-1]`` float32 [n_k] log10 backoff (zeros for the highest order).
    """

    vocab: list[str]
    ngrams: list[np.ndarray]
    logprob: list[np.ndarray]
    backoff: list[np.ndarray]
    discounts: list[tuple[float, float, float]] = field(default_factory=list)
    fallback_orders: list[int] = field(default_factory=list)

    @property
    def order(self) -> int:
        return len(self.ngrams)


# ------------------------------------------------------------------------- indexing

def ngram_keys(prefix_index: np.ndarray, last: np.ndarray, vocab_size: int) -> np.ndarray:
    """One int64 key per n-gram: (index of its first k-1 words in the (k-1)-gram table) * V + last word.

    With both tables sorted lexicographically the keys are sorted too: ``(2, 7), V=10 -> 27``.
    """
    return prefix_index.astype(np.int64) * vocab_size + last.astype(np.int64)


def index_of(tables_keys: list[np.ndarray], grams: np.ndarray, vocab_size: int) -> np.ndarray:
    """Row index of each n-gram of `grams` [m, j] in its order's table, -1 where absent.

    `tables_keys[k-1]` are the sorted keys of order k (unigram rows are word ids).
    """
    m, j = grams.shape
    idx = grams[:, 0].astype(np.int64)
    ok = np.ones(m, dtype=bool)
    for col in range(1, j):
        keys = tables_keys[col]
        want = ngram_keys(np.where(ok, idx, 0), grams[:, col], vocab_size)
        pos = np.searchsorted(keys, want)
        pos = np.minimum(pos, len(keys) - 1) if len(keys) else pos
        found = ok & (len(keys) > 0) & (keys[pos] == want) if len(keys) else np.zeros(m, dtype=bool)
        idx = np.where(found, pos, -1)
        ok = found
    return np.where(ok, idx, -1)


class RowFinder:
    """Row of n-grams in their order's table (`ngrams`, sorted, every prefix present): a hash join
    per order, each hit checked word by word, with `index_of`'s binary searches for the rest.

    ``find(grams [m, j]) -> [m]`` rows in order j, -1 where absent; ``keys`` as `table_keys` gives.
    """

    def __init__(self, ngrams: list[np.ndarray], vocab_size: int) -> None:
        self.ngrams, self.V = ngrams, vocab_size
        self.index: dict[int, object] = {}
        self._keys: list[np.ndarray] | None = None

    @property
    def keys(self) -> list[np.ndarray]:
        """Sorted keys of every order (only the binary-search fallback needs them: made on demand)."""
        if self._keys is None:
            keys = [self.ngrams[0][:, 0].astype(np.int64)]
            for k in range(2, len(self.ngrams) + 1):
                prefix = index_of(keys, self.ngrams[k - 1][:, :-1], self.V)
                if (prefix < 0).any():
                    raise AssertionError("an n-gram without its prefix")
                keys.append(ngram_keys(prefix, self.ngrams[k - 1][:, -1], self.V))
            self._keys = keys
        return self._keys

    def forget(self, j: int) -> None:
        """Drop the hash index of order j (memory)."""
        self.index.pop(j, None)

    def find(self, grams: np.ndarray) -> np.ndarray:
        from nlpkit.lm.ngram.hashing import HashIndex, all_distinct, hash_rows

        j = grams.shape[1]
        if j == 1:
            return grams[:, 0].astype(np.int64)
        table = self.ngrams[j - 1]
        if j not in self.index:
            th = hash_rows(table)
            self.index[j] = HashIndex(th) if all_distinct(th) else None
        hi = self.index[j]
        if hi is None:                                  # two n-grams with one hash: binary search
            return index_of(self.keys, grams, self.V)
        idx = hi.find(hash_rows(grams))
        ok = idx >= 0
        ok[ok] = (table[idx[ok]] == grams[ok]).all(axis=1)
        if not ok.all():
            bad = np.flatnonzero(~ok)
            idx[bad] = index_of(self.keys, grams[bad], self.V)
        return idx


def table_keys(ngrams: list[np.ndarray], vocab_size: int) -> list[np.ndarray]:
    """Sorted keys of every order (unigrams: word ids)."""
    return RowFinder(ngrams, vocab_size).keys


def _group_starts(grams: np.ndarray) -> np.ndarray:
    """Start rows of the runs of equal contexts (all but the last word) in a sorted [n, k] array."""
    n, k = grams.shape
    if k == 1:
        return np.zeros(1 if n else 0, dtype=np.int64)
    new = np.ones(n, dtype=bool)
    new[1:] = (grams[1:, :-1] != grams[:-1, :-1]).any(axis=1)
    return np.flatnonzero(new)


# ------------------------------------------------------------------------- the estimate

def adjusted_counts(counts: NgramCounts, keys=None, suffixes: list[np.ndarray] | None = None) -> list[np.ndarray]:
    """lmplz's adjusted counts per order (step 1 of the module docstring).

    `suffixes[k-1]`: row of each k-gram's last k-1 words in order k-1 (computed when not given)."""
    order, V = counts.order, len(counts.vocab)
    if suffixes is None:
        suffixes = suffix_rows(counts.ngrams, RowFinder(counts.ngrams, V))
    out = []
    for k in range(1, order + 1):
        raw = counts.counts[k - 1]
        if k == order:
            out.append(raw.copy())
            continue
        suffix = suffixes[k]                                        # every suffix exists
        cont = np.bincount(suffix, minlength=len(raw)).astype(np.int64)
        a = np.where(counts.ngrams[k - 1][:, 0] == BOS, raw, cont)
        if k == 1:
            a[UNK] = 0
            a[BOS] = 0
        out.append(a)
    return out


def suffix_rows(ngrams: list[np.ndarray], rows: RowFinder) -> list[np.ndarray]:
    """Per order k >= 2: the row of each k-gram's suffix (its last k-1 words) in order k-1."""
    return [np.zeros(0, dtype=np.int64)] + [rows.find(ngrams[k - 1][:, 1:]) for k in range(2, len(ngrams) + 1)]


def count_of_counts(adjusted: np.ndarray) -> list[int]:
    """[n0, n1, n2, n3, n4]: how many n-grams have adjusted count 0..4."""
    c = np.bincount(np.minimum(adjusted, 5), minlength=6)
    return [int(x) for x in c[:5]]


def discounts_from(n: list[int]) -> tuple[float, float, float] | None:
    """D1, D2, D3+ from counts of counts (float32, as lmplz); None when lmplz would refuse them."""
    if any(n[j] == 0 for j in (1, 2, 3)):
        return None
    y = F32(F32(n[1]) / F32(n[1] + 2.0 * n[2]))
    ds = []
    for j in (1, 2, 3):
        d = F32(j) - F32(j + 1) * y * F32(n[j + 1]) / F32(n[j])
        if d < 0 or d > j:
            return None
        ds.append(float(d))
    return ds[0], ds[1], ds[2]


def estimate_kneser_ney(counts: NgramCounts, *, warn=None) -> NgramTable:
    """Interpolated modified Kneser-Ney (the module docstring) from raw counts."""
    order, V = counts.order, len(counts.vocab)
    rows = RowFinder(counts.ngrams, V)
    suffixes = suffix_rows(counts.ngrams, rows)
    group_starts = [_group_starts(g) for g in counts.ngrams]
    # contexts[k-1]: row in order k of each context (all but the last word) of order k+1
    contexts = [rows.find(counts.ngrams[k][group_starts[k], :-1]) for k in range(1, order)]
    rows.index.clear()                                      # memory: the hash indexes are done with
    adj = adjusted_counts(counts, suffixes=suffixes)
    discounts, fallback = [], []
    for k in range(1, order + 1):
        n = count_of_counts(adj[k - 1])
        d = discounts_from(n)
        if d is None:
            d = FALLBACK_DISCOUNTS
            fallback.append(k)
            if warn is not None:
                warn(f"{k}-gram counts of counts {n[1:]} do not give modified Kneser-Ney discounts (small or "
                     f"artificial data?); using the fallback D1={d[0]} D2={d[1]} D3+={d[2]} "
                     "(lmplz --discount_fallback)")
        discounts.append(d)

    uninterp, gamma_ctx = [], []          # per order: u(w|c) per row; gamma per row's context
    for k in range(1, order + 1):
        grams, a = counts.ngrams[k - 1], adj[k - 1]
        dvec = np.array([0.0, *discounts[k - 1]], dtype=F32)
        disc = dvec[np.minimum(a, 3)]
        starts = group_starts[k - 1]
        denom = np.add.reduceat(a, starts).astype(F32) if len(a) else np.zeros(0, F32)
        nz = a > 0
        gamma = np.zeros(len(starts), dtype=F32)
        for j in (1, 2, 3):
            hit = (np.minimum(a, 3) == j) & nz
            gamma = gamma + dvec[j] * np.add.reduceat(hit.astype(np.int64), starts).astype(F32)
        gamma = gamma / denom
        group = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(a))))
        u = (a.astype(F32) - disc) / denom[group]
        g = gamma[group]
        if k == 1:
            u[UNK] = 0.0
            u[BOS], g[BOS] = 1.0, 0.0
        uninterp.append(u.astype(F32, copy=False))
        gamma_ctx.append((g.astype(F32, copy=False), starts, gamma))
        adj[k - 1] = None                                   # memory: each step frees what is done with

    probs = []
    uniform = F32(1.0 / F32(V - 1))          # includes <unk>, excludes <s>
    for k in range(1, order + 1):
        u, (g, _, _) = uninterp[k - 1], gamma_ctx[k - 1]
        if k == 1:
            lower = np.full(len(u), uniform, dtype=F32)
        else:
            lower = probs[k - 2][suffixes[k - 1]]
        probs.append((u + g * lower).astype(F32, copy=False))
        uninterp[k - 1], suffixes[k - 1] = None, None
        gamma_ctx[k - 1] = (None, *gamma_ctx[k - 1][1:])

    logprob, backoff = [], []
    for k in range(1, order + 1):
        grams = counts.ngrams[k - 1]
        with np.errstate(divide="ignore"):
            lp = np.minimum(F32(0.0), np.log10(probs[k - 1])).astype(F32, copy=False)
        probs[k - 1] = None
        bo = np.zeros(len(grams), dtype=F32)
        if k < order:
            gamma = gamma_ctx[k][2]
            ctx = contexts[k - 1]                                     # the contexts of order k+1
            last = grams[ctx, -1]
            ok = (last != UNK) & (last != EOS)
            bo[ctx[ok]] = np.log10(gamma[ok]).astype(F32)
        logprob.append(lp)
        backoff.append(bo)
    return NgramTable(vocab=counts.vocab, ngrams=counts.ngrams, logprob=logprob, backoff=backoff,
                      discounts=discounts, fallback_orders=fallback)


def check_estimable(counts: NgramCounts) -> None:
    if counts.tokens == 0:
        raise NlpkitError("the corpus has no words (only empty lines): nothing to estimate")


__all__ = ["NgramTable", "RowFinder", "estimate_kneser_ney", "adjusted_counts", "count_of_counts", "discounts_from",
           "ngram_keys", "index_of", "table_keys", "FALLBACK_DISCOUNTS"]
