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

All of it is computed on the counts' keys: an n-gram's context is its key's prefix row (the
rows of one context are consecutive), its suffix row comes from counting, and the n-grams that
start with ``<s>`` are one run of rows per order. Orders are estimated in turn and handed out
as soon as their backoffs are known (`kneser_ney_orders`), so a writer can write each one and
let it go.
"""

from __future__ import annotations

from typing import Callable, Iterator

import numpy as np

from nlpkit.lm.ngram.ngram_counts import BOS, EOS, UNK, NgramCounts
from nlpkit.lm.ngram.heap import trim_heap

FALLBACK_DISCOUNTS = (0.5, 1.0, 1.5)
F32 = np.float32
CHUNK = 1 << 18                 # rows (or contexts) computed at a time: small temporaries, which the heap reuses


# ------------------------------------------------------------------------- the estimate

def bos_rows(counts: NgramCounts, k: int) -> slice:
    """The rows of order k whose first word is <s>: one run, since the keys sort lexicographically
    (the k-grams whose prefix row is in the (k-1)-grams' run)."""
    lo, hi = BOS, BOS + 1
    V = len(counts.vocab)
    for j in range(2, k + 1):
        keys = counts.keys[j - 1]
        lo, hi = (int(x) for x in np.searchsorted(keys, [lo * V, hi * V]))
    return slice(lo, hi)


def adjusted_counts(counts: NgramCounts, k: int) -> np.ndarray:
    """lmplz's adjusted counts of order k (step 1 of the module docstring).  # [n_k]"""
    raw = counts.counts[k - 1]
    if k == counts.order:
        return raw
    a = np.bincount(counts.suffix[k], minlength=len(raw)).astype(raw.dtype)   # distinct left neighbours
    bos = bos_rows(counts, k)
    a[bos] = raw[bos]
    if k == 1:
        a[UNK] = 0
        a[BOS] = 0
    return a


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


def estimate_discounts(counts: NgramCounts, warn: Callable[[str], None] | None = None
                       ) -> tuple[list[tuple[float, float, float]], list[int]]:
    """The discounts of every order (step 2), and the orders that fell back (a warning each)."""
    discounts, fallback = [], []
    for k in range(1, counts.order + 1):
        trim_heap()                                 # (the arrays of the order below: `trim_heap`)
        n = count_of_counts(adjusted_counts(counts, k))
        d = discounts_from(n)
        if d is None:
            d = FALLBACK_DISCOUNTS
            fallback.append(k)
            if warn is not None:
                warn(f"{k}-gram counts of counts {n[1:]} do not give modified Kneser-Ney discounts (small or "
                     f"artificial data?); using the fallback D1={d[0]} D2={d[1]} D3+={d[2]} "
                     "(`lmplz --discount_fallback`)")
        discounts.append(d)
    return discounts, fallback


def _context_starts(keys: np.ndarray, V: int) -> tuple[np.ndarray, np.ndarray]:
    """Sorted keys of one order -> (whether each row starts its context's run [n] bool, the first row of
    each run [G])."""
    new = np.empty(len(keys), dtype=bool)
    new[:1] = True
    starts = []
    small = len(keys) < 2**31                                       # (starts as int32: half the memory)
    for i in range(0, len(keys), CHUNK):                            # the context rows a chunk at a time (memory)
        ctx = keys[i:i + CHUNK + 1] // V                            # [<= CHUNK + 1] the context's row in the order below
        np.not_equal(ctx[1:], ctx[:-1], out=new[i + 1:i + 1 + len(ctx) - 1])
        here = np.flatnonzero(new[i:i + CHUNK])
        here += i
        starts.append(here.astype(np.int32) if small else here)
    return new, np.concatenate(starts) if starts else np.zeros(0, dtype=np.int32)


def _interpolation(a: np.ndarray, d: tuple[float, float, float], new: np.ndarray, starts: np.ndarray,
                   lower: Callable[[slice], np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Steps 3 and 4 for one order: (p(w|c) = u(w|c) + gamma(c) p(w|c') per row [n], gamma(c) per context
    [G]), float32; `lower(rows)` gives p(w|c') of a slice of rows. The rows are computed CHUNK at a time
    (memory: no [n] temporaries), each context's run of rows found from `new`."""
    dvec = np.array([0.0, *d], dtype=F32)
    capped = np.minimum(a, 3).astype(np.int8)                       # [n] which discount applies
    classes = np.array([0, 1, 1 << 21, 1 << 42], dtype=np.int64)    # N1, N2, N3+ as 21-bit fields of one sum
    G = len(starts)
    denom = np.empty(G, dtype=F32)                                  # [G] sum_w a(cw)
    gamma = np.empty(G, dtype=F32)
    for c in range(0, G, CHUNK):                                    # CHUNK contexts at a time (memory)
        first = starts[c:c + CHUNK]
        rows = slice(int(first[0]), int(starts[c + CHUNK]) if c + CHUNK < G else len(a))
        first = first - first[0]                                    # (their rows from the chunk's first)
        total = np.add.reduceat(a[rows], first, dtype=np.int64).astype(F32)
        if rows.stop - rows.start < 1 << 21:                        # (no field can carry into the next)
            packed = np.add.reduceat(classes[capped[rows]], first)
            n = [(packed >> (21 * (j - 1))) & ((1 << 21) - 1) for j in (1, 2, 3)]
        else:
            n = [np.add.reduceat(capped[rows] == j, first, dtype=np.int64) for j in (1, 2, 3)]
        g = np.zeros(len(first), dtype=F32)
        for j in (1, 2, 3):                                         # D1 N1(c) + D2 N2(c) + D3 N3+(c)
            g = g + dvec[j] * n[j - 1].astype(F32)
        denom[c:c + CHUNK] = total
        gamma[c:c + CHUNK] = g / total
    trim_heap()                                                     # (the chunks' arrays)
    p = np.empty(len(a), dtype=F32)
    before = -1                                                     # the context of the row before the chunk
    for i in range(0, len(a), CHUNK):
        rows = slice(i, i + CHUNK)
        group = np.cumsum(new[rows], dtype=np.int32)                # [chunk] each row's context
        group += before
        before = int(group[-1])
        u = a[rows].astype(F32)                                     # (a - D) / denom
        u -= dvec[capped[rows]]
        u /= denom[group]
        g = gamma[group]
        g *= lower(rows)
        u += g
        p[rows] = u
    return p, gamma


class Log10:
    """log10 p capped at 0 (as lmplz writes it), made a slice at a time from the probabilities (the writer
    asks for blocks of rows: no second [n] array).  ``Log10(p)[a:b] -> [b - a] float32``"""

    def __init__(self, p: np.ndarray) -> None:
        self.p = p

    def __len__(self) -> int:
        return len(self.p)

    def __getitem__(self, rows: slice) -> np.ndarray:
        with np.errstate(divide="ignore"):
            lp = np.log10(self.p[rows])
        np.minimum(F32(0.0), lp, out=lp)
        return lp


def _set_backoffs(backoff: np.ndarray, counts: NgramCounts, k: int, starts: np.ndarray, gamma: np.ndarray) -> None:
    """Step 5: log10 gamma into the backoffs of order k-1 [n_{k-1}] at the contexts of order k (their
    runs start at `starts`), but not for contexts that end in <unk> or </s>."""
    V = len(counts.vocab)
    for c in range(0, len(starts), CHUNK):                  # CHUNK contexts at a time (memory)
        ctx = counts.keys[k - 1][starts[c:c + CHUNK]] // V   # [chunk] rows of order k-1
        last = counts.keys[k - 2][ctx] % V
        ok = (last != UNK) & (last != EOS)
        backoff[ctx[ok]] = np.log10(gamma[c:c + CHUNK][ok])


def kneser_ney_orders(counts: NgramCounts, discounts: list[tuple[float, float, float]], release: bool = False
                      ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(log10 p [n_k] (a `Log10`: arrays a slice at a time), log10 backoff [n_k]) float32 of each order
    k = 1..N in turn (steps 3-5).

    Order k is handed out once order k+1's contexts have given its backoffs; then only its
    probabilities stay, for order k+1's interpolation. With `release`, each order's raw counts
    and suffix rows are dropped from `counts` once used (memory: `counts` keeps only its keys)."""
    order, V = counts.order, len(counts.vocab)
    uniform = F32(1.0 / F32(V - 1))                # order 1 interpolates with 1/|V|: <unk> in, <s> out
    lower = None                                   # p of the order below, per row
    done = None                                    # (log10 p, backoff) of the order below
    for k in range(1, order + 1):
        trim_heap()                                # (the order below's temporaries, and its lines written)
        a = adjusted_counts(counts, k)
        if release:
            counts.counts[k - 1] = None
        new, starts = _context_starts(counts.keys[k - 1], V)
        trim_heap()
        if k == 1:
            p, gamma = _interpolation(a, discounts[0], new, starts, lambda rows: uniform)
            p[UNK] = gamma[0] * uniform            # one context: every unigram's
            p[BOS] = 1.0
        else:
            suffix = counts.suffix[k - 1]
            if release:
                counts.suffix[k - 1] = None
            p, gamma = _interpolation(a, discounts[k - 1], new, starts, lambda rows: lower[suffix[rows]])
            del suffix
        del a, new
        trim_heap()
        if done is not None:
            _set_backoffs(done[1], counts, k, starts, gamma)
        del starts, gamma
        trim_heap()
        if done is not None:
            yield done
            done = None
        done = (Log10(p), np.zeros(len(p), dtype=F32))
        lower = p
    yield done


__all__ = ["estimate_discounts", "kneser_ney_orders", "adjusted_counts", "count_of_counts", "discounts_from",
           "FALLBACK_DISCOUNTS"]
