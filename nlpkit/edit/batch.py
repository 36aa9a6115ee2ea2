"""Edit distances of many pairs at once: numpy bit-parallel kernels across the batch.

The pairs are the batch axis. For the unit-cost metrics (Levenshtein, OSA,
Indel, LCS) each pair's shorter sequence is the bit pattern and the text is
consumed one column at a time, ~15-30 numpy operations per column over all pairs
together (`nlpkit.edit.bitparallel`). Pairs are grouped by pattern width (a power of
two from 8 bits) and run longest text first, so the pairs still running at column
j are a prefix of the batch. Long Levenshtein/OSA pairs first try a one-word
diagonal band (exact up to 31 edits); the rest run the multi-word kernels. The band
and multi-word LCS hold the whole batch in one Python integer per state vector
(`band_levenshtein`, `bigint_lcs`): CPython's add carries across words. Small
groups, where numpy's per-call cost would dominate, run the same algorithms on
Python integers pair by pair.
Weighted Levenshtein and unrestricted Damerau-Levenshtein run the DP row by row
across the batch, the insertion chain of a row being one ``minimum.accumulate``.
Numbers equal `nlpkit.edit.distance` (and so rapidfuzz) pair for pair.

>>> pairwise_distances(["kitten", "flaw"], ["sitting", "lawn"]).tolist()
[3, 2]
"""

from __future__ import annotations

from typing import Hashable, Sequence

import numpy as np

from nlpkit.edit import distance as scalar
from nlpkit.edit.bitparallel import (BAND, MAX_WORDS, band_levenshtein, bigint_lcs, bit_lcs,
                                bit_levenshtein, column_masks, lane_dtype, match_table, width_class)

PAD_A, PAD_B = -1, -2
NUMPY_MIN_GROUP = 256  # groups with fewer pairs x 64-bit words run the Python-int kernels
BIGINT_MIN_GROUP = 8   # multi-word LCS groups from this many pairs run `bigint_lcs` batched


# ---------------------------------------------------------------------------- encoding

def encode(seqs: Sequence[Sequence[Hashable]], pad: int, vocab: dict | None = None,
           lens: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Sequences -> (codes [N, L] int32 padded with `pad`, lengths [N]).

    Without `vocab`, strings become code points (one vectorized UTF-32 decode). With a `vocab`
    (shared between both sides so equal elements get equal ids) every sequence, str or token
    list, becomes ids from it: a str's elements are its characters, equal to one-character
    tokens, as `nlpkit.edit.distance` (and rapidfuzz) compare them.
    `lens` may be passed when the caller already has the lengths.
    """
    if lens is None:
        lens = np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs))
    width = int(lens.max()) if len(seqs) else 0
    codes = np.full((len(seqs), max(width, 1)), pad, dtype=np.int32)
    if not seqs or (vocab is None and isinstance(seqs[0], str)):
        flat = np.frombuffer("".join(seqs).encode("utf-32-le", "surrogatepass"), dtype="<u4")
    else:
        vocab = {} if vocab is None else vocab
        flat = np.fromiter((vocab.setdefault(t, len(vocab)) for s in seqs for t in s),
                           dtype=np.int32, count=int(lens.sum()))
    codes[np.arange(codes.shape[1])[None, :] < lens[:, None]] = flat
    return codes, lens


# -------------------------------------------------------------------------- DP by rows

def rowwise_dp(A: np.ndarray, la: np.ndarray, B: np.ndarray, lb: np.ndarray,
               weights: tuple[int, int, int] = (1, 1, 1), damerau: bool = False) -> np.ndarray:
    """Weighted Levenshtein, or unrestricted Damerau-Levenshtein, row by row across the batch.

    A: [N, m] rows side, B: [N, n] columns side (padded with different values).
    Damerau keeps the whole matrix [N, m+1, n+1] (callers chunk the batch).
    """
    ins, dele, sub = weights
    N, n = B.shape
    m = int(la.max()) if N else 0
    jcost = np.arange(n + 1, dtype=np.int64) * ins                   # [n+1]
    prev = np.broadcast_to(jcost, (N, n + 1)).copy()                 # D(0, j) = j * ins
    res = np.empty(N, np.int64)
    res[la == 0] = lb[la == 0] * ins
    cols1 = np.arange(1, n + 1, dtype=np.int64)                      # [n] 1-based columns
    if damerau:
        full = np.empty((N, m + 1, n + 1), np.int64)
        full[:, 0] = prev
        last_row = np.zeros((N, n), np.int64)                        # last row r < i with a[r] == b[j]
        rows = np.arange(N)[:, None]
    for i in range(1, m + 1):
        eq = B == A[:, i - 1, None]                                  # [N, n]
        t = np.empty((N, n + 1), np.int64)
        t[:, 0] = i * dele
        t[:, 1:] = np.minimum(prev[:, :-1] + np.where(eq, 0, sub), prev[:, 1:] + dele)
        if damerau:
            seen = np.maximum.accumulate(np.where(eq, cols1, 0), axis=1)
            last_col = np.zeros((N, n), np.int64)                    # last column l < j with b[l] == a[i]
            last_col[:, 1:] = seen[:, :-1]
            k, l_ = last_row, last_col
            ok = (k > 0) & (l_ > 0)
            swap = full[rows, np.maximum(k - 1, 0), np.maximum(l_ - 1, 0)] + (i - k) + (cols1 - l_ - 1)
            t[:, 1:] = np.where(ok, np.minimum(t[:, 1:], swap), t[:, 1:])
            last_row = np.where(eq, i, last_row)
        cur = np.minimum.accumulate(t - jcost, axis=1) + jcost       # insertion chain along the row
        if damerau:
            full[:, i] = cur
        done = np.flatnonzero(la == i)
        res[done] = cur[done, lb[done]]
        prev = cur
    return res


# --------------------------------------------------------------------------- drivers

def widen(x: np.ndarray, width: int, pad: int) -> np.ndarray:  # [N, L] -> [N, >= width]
    """`x` right-padded with `pad` to at least `width` columns (unchanged when already that wide)."""
    if x.shape[1] >= width:
        return x
    return np.concatenate([x, np.full((x.shape[0], width - x.shape[1]), pad, x.dtype)], axis=1)


def _chunks(n: int, cost: np.ndarray, budget: int):
    """Consecutive slices of range(n) whose rows x largest cost stay within budget (cost ascending)."""
    start = 0
    while start < n:
        stop = min(n, start + max(1, budget // max(1, int(cost[min(n - 1, start + 255)]))))
        while stop - start > 1 and (stop - start) * int(cost[stop - 1]) > budget:
            stop = start + max(1, (stop - start) // 2)
        yield slice(start, stop)
        start = stop


def _unit_metric(pat, txt, lp, lt, metric: str, vocab: dict | None, budget: int) -> np.ndarray:
    """levenshtein/osa distances or lcs lengths of (pattern, text) pairs, pattern the shorter side.

    Pairs are grouped by pattern width (8, 16, 32, 64, 128, ... bits). Big groups run the numpy
    kernels in budget-sized chunks, texts longest first; groups too small to amortize
    numpy's per-call cost (or too wide) run the Python-int kernels pair by pair.
    """
    out = lt.copy() if metric != "lcs" else np.zeros_like(lt)  # empty patterns
    widths = width_class(lp)
    one = {"levenshtein": scalar.levenshtein, "osa": scalar.osa, "lcs": scalar.lcs_length}[metric]
    for width in np.unique(widths[lp > 0]).tolist():
        sel = np.flatnonzero((widths == width) & (lp > 0))
        words = max(1, width // 64)
        bigint = metric == "lcs" and words > 1 and len(sel) >= min(BIGINT_MIN_GROUP, NUMPY_MIN_GROUP)
        if words > MAX_WORDS or (len(sel) * words < NUMPY_MIN_GROUP and not bigint):
            out[sel] = [one(pat[i], txt[i]) for i in sel]
            continue
        sel = sel[np.argsort(lt[sel], kind="stable")]
        for part in _chunks(len(sel), lt[sel] + width, budget):
            rows = sel[part][::-1]                               # texts longest first
            P, _ = encode(pat[rows].tolist(), PAD_A, vocab, lp[rows])
            T, _ = encode(txt[rows].tolist(), PAD_B, vocab, lt[rows])
            P = widen(P, width, PAD_A)[:, :width]
            if bigint:  # multi-word LCS: the batch as one Python integer (carries for free)
                got = bigint_lcs(P, T, lp[rows])
                if got is not None:
                    out[rows] = got
                    continue
            if metric != "lcs" and width >= 128:  # few edits in long lines: one-word band
                # (a banded LCS costs as much per column as the multi-word one: not used)
                rows, P, T = _banded(P, T, rows, lp, lt, width, out, metric)
                if len(rows) * words < NUMPY_MIN_GROUP:   # a few left over: not worth the columns
                    out[rows] = [one(pat[i], txt[i]) for i in rows]
                    continue
            pm_of = column_masks(P, T, width)
            if metric == "lcs":
                out[rows] = bit_lcs(pm_of, lt[rows], words, lane_dtype(width))
            else:
                out[rows] = bit_levenshtein(pm_of, lp[rows], lt[rows], words, metric == "osa",
                                            lane_dtype(width))
    return out


def _banded(P, T, rows, lp, lt, width, out, metric):
    """Run the diagonal band (`band_levenshtein`) on a chunk; store the pairs it
    settles (distance <= BAND) in `out` and return the rest (rows, P, T) for the full kernel."""
    table = match_table(P, T, width)
    if table is None:
        return rows, P, T
    m, n = lp[rows], lt[rows]
    dist = band_levenshtein(*table, m, n, metric == "osa")
    good = (n - m <= BAND) & (dist <= BAND)
    out[rows[good]] = dist[good]
    return rows[~good], P[~good], T[~good]


def _dp_metric(a, b, la, lb, metric: str, weights, vocab: dict | None, budget: int) -> np.ndarray:
    """hamming, damerau and weighted levenshtein, in chunks of pairs of similar length."""
    longest = np.maximum(la, lb)
    order = np.argsort(longest, kind="stable")
    cost = (longest[order] + 1) ** (1 if metric == "hamming" else 2)
    out = np.empty(len(a), np.int64)
    for part in _chunks(len(a), cost, budget):
        idx = order[part]
        A, ca = encode([a[i] for i in idx], PAD_A, vocab)
        B, cb = encode([b[i] for i in idx], PAD_B, vocab)
        if metric == "hamming":
            L = max(A.shape[1], B.shape[1])
            A, B = widen(A, L, PAD_A), widen(B, L, PAD_B)
            both = np.arange(L)[None, :] < np.minimum(ca, cb)[:, None]
            out[idx] = ((A != B) & both).sum(axis=1) + np.abs(ca - cb)
        else:
            out[idx] = rowwise_dp(A, ca, B, cb, weights, damerau=metric == "damerau")
    return out


def maximum(metric: str, la: np.ndarray, lb: np.ndarray, weights=scalar.UNIT) -> np.ndarray:
    """Vectorized `nlpkit.edit.distance.maximum` (the normalization denominator)."""
    if metric == "levenshtein":
        ins, dele, sub = weights
        alt = np.where(la >= lb, lb * sub + (la - lb) * dele, la * sub + (lb - la) * ins)
        return np.minimum(la * dele + lb * ins, alt)
    if metric == "indel":
        return la + lb
    return np.maximum(la, lb)


def pairwise_distances(a: Sequence[Sequence[Hashable]], b: Sequence[Sequence[Hashable]],
                       metric: str = "levenshtein", weights: Sequence[int] | None = None,
                       normalize: bool = False, budget: int = 1 << 21) -> np.ndarray:
    """distance(a[i], b[i]) for every i: [N] int64, or float64 with ``normalize``.

    `budget` bounds the cells (pairs x length) held at once, so one very long line
    does not pad every other pair.
    """
    w = scalar.check_metric(metric, weights)
    if len(a) != len(b):
        raise ValueError(f"{len(a)} left sequences but {len(b)} right ones")
    N = len(a)
    la = np.fromiter(map(len, a), np.int64, N)
    lb = np.fromiter(map(len, b), np.int64, N)
    # one id space for both sides: code points when every sequence is a str, else a shared vocabulary
    # (a str against a token list compares characters with tokens, at every batch size)
    chars = all(isinstance(s, str) for s in a) and all(isinstance(s, str) for s in b)
    vocab: dict | None = None if chars else {}
    ins, dele, sub = w
    unit = w == scalar.UNIT or (ins == dele == sub)
    if metric in ("hamming", "damerau") or (metric == "levenshtein" and not unit
                                             and not (ins == dele and sub >= ins + dele)):
        out = _dp_metric(a, b, la, lb, metric, w, vocab, budget)
    else:
        swap = la > lb
        A, B = np.fromiter(a, object, N), np.fromiter(b, object, N)    # [N] the sequences
        pat, txt = np.where(swap, B, A), np.where(swap, A, B)            # shorter, longer side
        lp, lt = np.minimum(la, lb), np.maximum(la, lb)
        if metric in ("levenshtein", "osa") and unit:
            out = ins * _unit_metric(pat, txt, lp, lt, metric, vocab, budget)
        else:  # indel, lcs, and levenshtein whose substitution never beats delete + insert
            lcs = _unit_metric(pat, txt, lp, lt, "lcs", vocab, budget)
            out = np.maximum(la, lb) - lcs if metric == "lcs" else (la + lb - 2 * lcs) * ins
    return normalize_distances(out, a, b, metric, w) if normalize else out


def normalize_distances(dist: np.ndarray, a: Sequence, b: Sequence, metric: str = "levenshtein",
                        weights: Sequence[int] | None = None) -> np.ndarray:
    """dist / maximum per pair (0.0 where the maximum is 0), as rapidfuzz normalizes: [N] float64."""
    la = np.fromiter(map(len, a), np.int64, len(a))
    lb = np.fromiter(map(len, b), np.int64, len(b))
    most = maximum(metric, la, lb, scalar.check_weights(weights))
    return np.where(most > 0, dist / np.maximum(most, 1), 0.0)
