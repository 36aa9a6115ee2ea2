"""Numpy bit-vector kernels: Hyyrö's edit-distance algorithms over many patterns at once.

Each pattern is a column of lanes: one uint8/16/32 lane for up to 8/16/32 units, or
``W`` uint64 words (least significant first, word-major ``[W, N]`` so shifts across
words touch whole contiguous rows). A kernel consumes the text one column at a time;
``pm_of(j, k)`` supplies the match masks of column j for the first k patterns (texts
are sorted longest first, so the pairs still running are a prefix). Bits above a
pattern's length hold harmless garbage: carries and shifts only move information up.

- `bit_levenshtein`: Levenshtein (Myers/Hyyrö), or OSA with transpositions (Hyyrö 2003).
- `bit_lcs`: LCS length (Hyyrö 2004), for Indel and LCSseq.
- `bigint_lcs`: the same recurrence for multi-word patterns, the whole batch in one Python
  integer (the add-with-carry across words for free).
- `band_levenshtein`: Levenshtein or OSA in a diagonal band of one uint64 (exact up to
  `BAND` edits; rapidfuzz uses the same idea for long strings with few edits), the batch
  as Python integers like `bigint_lcs`.
- `column_masks` / `match_table`: the match masks, by comparison or by a symbol table.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

ALL = np.uint64(0xFFFFFFFFFFFFFFFF)
PACK8 = np.uint64(0x0102040810204080)  # (8 bytes of 0/1 * PACK8) >> 56: those 8 bits
MAX_WORDS = 32  # patterns up to 2048 units run bit-parallel; longer pairs use the scalar path
BAND = 31       # band_levenshtein is exact when the distance is at most this


def width_class(lp: np.ndarray) -> np.ndarray:
    """Bits reserved for a pattern: the next power of two from 8 (so groups stay few and large)."""
    return np.maximum(8, 2 ** np.ceil(np.log2(np.maximum(lp, 1))).astype(np.int64))


def lane_dtype(width: int) -> type:
    """The unsigned dtype of one lane for a pattern width class (8, 16, 32, then 64-bit words)."""
    return {8: np.uint8, 16: np.uint16, 32: np.uint32}.get(width, np.uint64)


def _shl1(x: np.ndarray, fill: int) -> np.ndarray:  # [W, k] -> [W, k], shifted left by one bit
    r = x << x.dtype.type(1)
    if x.shape[0] > 1:
        r[1:] |= x[:-1] >> x.dtype.type(63)
    if fill:
        r[0] |= x.dtype.type(1)
    return r


def _add(x: np.ndarray, y: np.ndarray) -> np.ndarray:  # [W, k] + [W, k]
    """Multi-word addition: word w wraps (generates a carry) or sums to all ones (passes
    an incoming carry on); the carry then ripples up one contiguous row at a time."""
    s = x + y
    if x.shape[0] == 1:
        return s
    gen = s < x                                            # [W, k] bool
    prop = s == ALL
    carry = gen[0]
    for w in range(1, x.shape[0]):
        s[w] += carry
        carry = gen[w] | (prop[w] & carry)
    return s


def low_bits(m: np.ndarray, words: int, dtype: type) -> np.ndarray:  # [N] -> [W, N]: the m low bits
    bits = np.iinfo(dtype).bits
    fill = np.clip(m[None, :] - bits * np.arange(words)[:, None], 0, bits).astype(np.uint64)
    ones = np.where(fill >= 64, np.uint64(0), np.uint64(1) << np.minimum(fill, 63)) - np.uint64(1)
    return ones.astype(dtype)


def _active(n: np.ndarray) -> np.ndarray:
    """For texts sorted by length descending: how many are still running at column j."""
    return np.searchsorted(-n, -np.arange(int(n.max()) if len(n) else 0), side="left")


def bit_levenshtein(pm_of: Callable[[int, int], np.ndarray], m: np.ndarray, n: np.ndarray,
                    words: int, transpositions: bool = False, dtype: type = np.uint64,
                    low: np.ndarray | None = None) -> np.ndarray:
    """Unit-cost Levenshtein (Myers/Hyyrö), or OSA (Hyyrö 2003), of N patterns against N texts.

    pm_of(j, k) -> [words, k] `dtype`: match masks of column j for the first k pairs
    (word-major, so a shift across words touches whole contiguous rows).
    m: [N] pattern lengths (>= 1); n: [N] text lengths, sorted descending.
    The distance is read at the end from the last column's vertical deltas:
    D[m, n] = n + popcount(VP & low_m) - popcount(VN & low_m). Returns [N] int64.
    `low` ([W, N], the m low bits) may be passed in when the caller keeps it.
    """
    N = len(m)
    vp = np.full((words, N), np.iinfo(dtype).max, dtype)
    vn = np.zeros((words, N), dtype)
    if transpositions:
        d0 = np.zeros((words, N), dtype)
        pm_prev = np.zeros((words, N), dtype)
    for j, k in enumerate(_active(n)):
        pm = pm_of(j, k)                                   # [W, k]
        VP, VN = vp[:, :k], vn[:, :k]
        x = pm | VN
        if transpositions:
            x |= _shl1(~d0[:, :k] & pm, 0) & pm_prev[:, :k]
            pm_prev[:, :k] = pm
        D0 = _add(pm & VP, VP)
        D0 ^= VP
        D0 |= x
        hp = D0 | VP
        np.invert(hp, out=hp)
        hp |= VN
        hn = _shl1(D0 & VP, 0)
        hp = _shl1(hp, 1)
        t = D0 | hp
        np.invert(t, out=t)
        np.bitwise_or(t, hn, out=VP)
        np.bitwise_and(hp, D0, out=VN)
        if transpositions:
            d0[:, :k] = D0
    low = low_bits(m, words, dtype) if low is None else low
    up = np.bitwise_count(vp & low).sum(axis=0, dtype=np.int64)
    down = np.bitwise_count(vn & low).sum(axis=0, dtype=np.int64)
    return n + up - down


def bit_lcs(pm_of: Callable[[int, int], np.ndarray], n: np.ndarray, words: int,
            dtype: type = np.uint64) -> np.ndarray:
    """LCS lengths (Hyyrö: V' = (V + (V & M)) | (V & ~M)); n sorted descending; -> [N] int64."""
    N = len(n)
    v = np.full((words, N), np.iinfo(dtype).max, dtype)
    for j, k in enumerate(_active(n)):
        pm = pm_of(j, k)                                   # [W, k]
        V = v[:, :k]
        t = _add(V, V & pm)
        t |= V & ~pm
        V[...] = t
    return np.iinfo(dtype).bits * words - np.bitwise_count(v).sum(axis=0, dtype=np.int64)


def bigint_lcs(P: np.ndarray, T: np.ndarray, m: np.ndarray,
               block_bytes: int = 1 << 18) -> np.ndarray | None:
    """LCS lengths of N (pattern, text) pairs with every pattern in one Python integer.

    Pair p owns bits [p*S, p*S + m[p]) of the integer (S = 8 * nbytes, nbytes chosen so every
    pattern leaves G >= 1 guard bits free), and one column of Hyyrö's recurrence
    V' = (V + U) | (V ^ U), U = V & M, is four big-integer operations for the whole batch:
    the add-with-carry across words is CPython's own. A carry out of a pattern lands in its
    guard bits, which hold 2**c - 1 after c carries (M is 0 there), so they overflow into the
    next pair only after G + 1 carries: ``& full`` every G columns clears them in time. A pair
    whose text has ended sees M = 0, which leaves V unchanged, so no bookkeeping of active
    pairs is needed. P: [N, >= max m] codes, T: [N, n]; -> [N] int64, or None when the
    match table would be too big (callers fall back to `bit_lcs`).
    """
    N = len(m)
    nbytes = int(m.max()) // 8 + 1                                         # >= 1 guard bit
    table = pair_major_table(P, T, nbytes)
    if table is None:
        return None
    peq, gather = table
    guard = int((8 * nbytes - m).min())                                    # G: columns between masks
    low = np.ascontiguousarray(low_bits(m, nbytes, np.uint8).T)            # [N, B]
    full = int.from_bytes(low.tobytes(), "little")
    v = full
    from_bytes = int.from_bytes
    step = max(1, block_bytes // (N * nbytes))
    for j0 in range(0, gather.shape[0], step):
        for j, pm in enumerate(np.take(peq, gather[j0:j0 + step], axis=0), j0):  # [N, B]
            u = v & from_bytes(pm, "little")
            v = (v + u) | (v ^ u)
            if j % guard == guard - 1:
                v &= full
    V = np.frombuffer((v & full).to_bytes(N * nbytes, "little"), np.uint8)  # [N * B]
    return m - np.bitwise_count(V).reshape(N, nbytes).sum(axis=1, dtype=np.int64)


# -------------------------------------------------------------------- match masks

def pack_lanes(eq: np.ndarray, dtype) -> np.ndarray:  # [k, width] bool -> [W, k] lanes
    """Bit i of lane row p set where eq[p, i]; width a multiple of 8. Eight 0/1 bytes read as
    one uint64, times PACK8, shifted right by 56, are eight bits: 20x faster than np.packbits."""
    eq = np.ascontiguousarray(eq).view("<u8")                              # [k, width/8]
    packed = ((eq * PACK8) >> np.uint64(56)).astype(np.uint8)              # [k, width/8] bytes
    return np.ascontiguousarray(packed.view(dtype).T)



def _pad_columns(x: np.ndarray, width: int, pad: int) -> np.ndarray:  # [N, L] -> [N, width]
    if x.shape[1] < width:
        x = np.concatenate([x, np.full((x.shape[0], width - x.shape[1]), pad, x.dtype)], axis=1)
    return x[:, :width]


def _symbol_lut(P: np.ndarray, T: np.ndarray) -> tuple[np.ndarray, int]:
    """(lut, K): dense symbol ids 0..K-2 for the codes present (a lookup over the code range,
    no sort); padding (codes -1, -2) gets the last id, K-1. Read with
    ``np.take(lut, codes, mode="wrap")``: the negative pads wrap to the last two slots."""
    size = int(max(P.max(), T.max(), 0)) + 3
    if size <= 1 << 16:                                                    # code c counted at c + 2
        seen = np.bincount(P.ravel() + 2, minlength=size) | np.bincount(T.ravel() + 2, minlength=size)
        seen = seen[2:] > 0
    else:  # wide code points: mark them in place (bincount would fill arrays over the whole range)
        seen = np.zeros(size, bool)
        np.put(seen, P, True, mode="wrap")
        np.put(seen, T, True, mode="wrap")
        seen = seen[:-2]
    lut = np.empty(size, np.int32)
    np.cumsum(seen, out=lut[:-2])
    K = int(lut[-3]) + 1 if size > 2 else 1
    lut -= 1
    lut[-2:] = K - 1
    return lut, K


def match_table(P: np.ndarray, T: np.ndarray, width: int,
                table_bytes: int = 1 << 26) -> tuple[np.ndarray, np.ndarray] | None:
    """(peq [W, K*N], gather [n, N]) with peq[:, gather[j, p]] the masks of T[p, j] in P[p],
    or None when the table would exceed `table_bytes`.

    Symbols get dense ids (`_symbol_lut`); the last id is padding, whose masks stay zero.
    One scatter-add fills the table: each (pair, word) has one symbol per bit position,
    so the bits summed per (symbol, pair) never carry.
    """
    dtype = np.dtype(lane_dtype(width)).newbyteorder("<")
    words, N = max(1, width // 64), P.shape[0]
    bits = min(64, width)                                                  # units per lane
    lut, K = _symbol_lut(P, T)
    if K * words * N * dtype.itemsize > table_bytes:
        return None
    lut *= N                                                               # symbol -> its first row
    key = np.take(lut, _pad_columns(P, words * bits, -1), mode="wrap")     # [N, W*bits] (flat row)
    key += (np.arange(words * bits, dtype=np.int32) // bits) * np.int32(K * N)  # word w -> block w
    key += np.arange(N, dtype=np.int32)[:, None]
    bit = np.ones(1, dtype) << np.arange(bits, dtype=dtype)                # [bits]: 1 << r
    peq = np.zeros(words * K * N, dtype)                                   # [(W, K, N)] flat
    np.add.at(peq, key.reshape(-1), np.tile(bit, N * words))              # flat operands: fast path
    peq = peq.reshape(words * K, N)
    peq[np.arange(words) * K + K - 1] = 0                                  # padding never matches
    gather = np.take(lut, T.T, mode="wrap")                                # [n, N]
    gather += np.arange(N, dtype=np.int32)
    return peq.reshape(words, K * N), gather


def pair_major_table(P: np.ndarray, T: np.ndarray, nbytes: int,
                     table_bytes: int = 1 << 26) -> tuple[np.ndarray, np.ndarray] | None:
    """(peq [K*N, nbytes] uint8, gather [n, N]): row gather[j, p] holds the masks of T[p, j]
    in P[p], so ``peq[gather[j]]`` is column j's masks of all pairs, pair-major ([N, nbytes],
    the byte layout of one little-endian big integer). None when over `table_bytes`.

    One `add.at` fills it (each (symbol, pair, byte) sums distinct bits, so add is or),
    straight from the codes (few temporaries: on a shared machine the page faults of big
    scratch arrays cost as much as the arithmetic).
    """
    N = P.shape[0]
    lut, K = _symbol_lut(P, T)
    if K * N * nbytes > table_bytes:
        return None
    lut *= N * nbytes                                                      # symbol -> first row byte
    P = _pad_columns(P, nbytes * 8, -1)                                    # [N, 8B] codes
    key = np.take(lut, P, mode="wrap")                                     # [N, 8B] table byte
    key += (np.arange(N, dtype=np.int32) * nbytes)[:, None]
    key += np.arange(nbytes * 8, dtype=np.int32) // 8
    bit = np.uint8(1) << (np.arange(nbytes * 8) % 8).astype(np.uint8)     # [8B]
    peq = np.zeros((K * N, nbytes), np.uint8)
    # flat, contiguous operands: numpy 2.4's fast add.at path (5x faster than with 2-D or
    # broadcast ones, which it also misreads when the broadcast is left implicit)
    np.add.at(peq.reshape(-1), key.reshape(-1), np.tile(bit, N))
    peq[(K - 1) * N:] = 0                                                  # padding never matches
    gather = np.take(lut, T.T, mode="wrap")                                # [n, N]
    gather //= nbytes
    gather += np.arange(N, dtype=np.int32)
    return peq, gather


def column_masks(P: np.ndarray, T: np.ndarray, width: int,
                 table_bytes: int = 1 << 26) -> Callable[[int, int], np.ndarray]:
    """pm_of(j, k): bit i of pair p set where P[p, i] == T[p, j]; [max(1, width // 64), k] lanes.

    Wide patterns use `match_table` (one gather per column); narrow ones (whose table, K x N
    lanes, costs as much to fill as the comparisons save), or tables that would be too big,
    compare T[:, j] with the whole pattern and pack the bits.
    """
    table = match_table(P, T, width, table_bytes) if width >= 64 else None
    if table is not None:
        peq, gather = table

        def pm_of(j: int, k: int) -> np.ndarray:
            return peq[:, gather[j, :k]]                                   # [W, k]

        return pm_of
    dtype = np.dtype(lane_dtype(width)).newbyteorder("<")

    def pm_of(j: int, k: int) -> np.ndarray:
        return pack_lanes(P[:k] == T[:k, j, None], dtype)                  # [W, k]

    return pm_of


def _windows(padded: np.ndarray, gather: np.ndarray, j0: int, j1: int) -> np.ndarray:
    """The band's match masks of columns j0..j1-1, [j1-j0, N]: pattern mask bits start ..
    start+63 of each text symbol, start = j + BAND - 63 (bits below row 1 read as 0).
    padded: [W+2, K*N] `match_table`'s masks with a zero word either side."""
    W = padded.shape[0] - 2
    start = np.arange(j0, j1) + BAND - 63                                  # [b]
    q, r = start // 64, (start % 64).astype(np.uint64)
    g = gather[j0:j1]                                                      # [b, N]
    lo = padded[np.clip(q + 1, 0, W + 1)[:, None], g]
    hi = padded[np.clip(q + 2, 0, W + 1)[:, None], g]
    # hi << (64 - r) as two shifts: r == 0 must give 0, and numpy's << 64 does not
    return (lo >> r[:, None]) | ((hi << (np.uint64(63) - r)[:, None]) << np.uint64(1))


def band_levenshtein(peq: np.ndarray, gather: np.ndarray, m: np.ndarray, n: np.ndarray,
                     transpositions: bool = False, block_bytes: int = 1 << 18) -> np.ndarray:
    """Levenshtein (or OSA) in a diagonal band of 64 bits: exact for pairs with distance <= BAND,
    some value > BAND otherwise (callers recompute those). Needs m <= n <= m + BAND, n sorted
    descending; (peq, gather) from `match_table`. -> [N] int64

    The band's bit t holds row j + t + BAND - 63 of column j, so rows stay put as the band
    slides down one row per column (D0 shifts right instead of HP/HN shifting left), and
    each column's match mask is a 64-bit window of the pattern's masks. The answer is read
    along the diagonal of the last cell: D[m][n] = n - (number of columns in which that
    diagonal did not grow), at the fixed bit t_p = m - n - BAND + 63. For OSA the
    transposition term aligns the previous column's masks by shifting right instead of left.

    The batch lives in Python integers: pair p owns bits [128p, 128p + 64), its band word,
    then a zero guard word that takes the add's carry and the left shifts, cleared by
    ``& full`` before it can reach pair p + 1. A column is ~18 big-integer operations for
    all pairs (a numpy version needed ~20 numpy calls plus the window gathers per column).
    Bit t_p of D0 is added at bit t_p of an accumulator whose guard word holds the carries;
    finished pairs are cut off the top.
    """
    N = len(m)
    sect = np.zeros((N, 2), "<u8")

    def big(words: np.ndarray) -> int:                                     # [N] -> sections
        sect[:, 0] = words
        return int.from_bytes(sect.tobytes(), "little")

    t = np.clip(m - n - BAND + 63, 0, 63).astype(np.uint64)               # [N] bit of D[m][n]'s diagonal
    full = big(np.full(N, ALL))
    tm = big(np.uint64(1) << t)
    vp = big(np.full(N, ALL << np.uint64(63 - BAND)))
    vn, acc, d0_prev, x_prev = 0, 0, 0, 0
    active = _active(n)
    k_prev = N
    step = max(1, block_bytes // (N * 16))
    padded = np.zeros((peq.shape[0] + 2, peq.shape[1]), np.uint64)        # [W+2, K*N]
    padded[1:-1] = peq
    from_bytes = int.from_bytes
    for j0 in range(0, len(active), step):
        xs = np.zeros((min(step, len(active) - j0), N, 2), "<u8")
        xs[:, :, 0] = _windows(padded, gather, j0, j0 + len(xs))
        for j in range(j0, j0 + len(xs)):
            k = int(active[j])
            if k != k_prev:                                                # pairs k.. have ended
                cut = (1 << (128 * k)) - 1
                full, tm, vp, vn, d0_prev, x_prev = (full & cut, tm & cut, vp & cut, vn & cut,
                                                     d0_prev & cut, x_prev & cut)
                k_prev = k
            x = from_bytes(xs[j - j0, :k], "little")
            d0 = ((((x & vp) + vp) & full) ^ vp) | x | vn
            if transpositions:
                d0 |= ~d0_prev & (x << 1) & (x_prev >> 1)
                d0_prev, x_prev = d0, x
            hp = ((d0 | vp) ^ full) | vn
            hn = d0 & vp
            acc += d0 & tm
            d0 = (d0 >> 1) & full
            vp = ((d0 | hp) ^ full) | hn
            vn = d0 & hp
    words = np.frombuffer(acc.to_bytes(N * 16 + 16, "little"), "<u8")[:2 * N].reshape(N, 2)
    kept = (words[:, 0] >> t) | ((words[:, 1] << (np.uint64(63) - t)) << np.uint64(1))
    return n - (kept & np.uint64(0xFFFF)).astype(np.int64)
