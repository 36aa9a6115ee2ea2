"""The matrix products of a forward, shaped so that a row's bits do not depend on the BLAS kernel's row blocking.

Why: numpy's OpenBLAS gives a row of `x @ w` bits that depend on where the row sits in the product, and on the
product's shape, in ways that differ by kernel (`OPENBLAS_CORETYPE`; measured on OpenBLAS 0.3.31, one BLAS thread):
- Haswell and Zen multiply the rows in groups of 12 (the first 6 and the last 6 of a group sum in other orders) and
  a tail of fewer than 12 rows with other kernels again;
- SkylakeX runs a product of at most ~1e6 multiply-adds (M*N*K) with its small-matrix kernels, which sum otherwise;
- every kernel runs a one-row product as a matrix-vector product (gemv);
- Haswell and Zen give an output column other bits when the product has another number of columns.
What holds on every one of them (Haswell, Zen, SkylakeX, SandyBridge; tests/lm/test_determinism.py): in a product
whose row count is a multiple of ROW_ALIGN and whose M*N*K is over SMALL_PRODUCT, a row's bits depend only on its
content and on its index modulo ROW_ALIGN — not on the other rows, on the row count, or on the layout of `w` (C order
or a transposed view: native weights). So every scoring product here:
- has its rows padded (zeros) to such a count (`padded_rows`), and its row ranges cut at multiples of ROW_ALIGN
  when they are split over threads (`aligned_split`);
- keeps each row at an index whose residue modulo ROW_ALIGN is fixed by the row's place in its own sequence: a
  forward's rows in order; a packed forward's rows at slots by residue (`packing.Packing.slots`), the attention
  gathering each segment's rows; the output projection's rows at slots of their residue (`slot_rows`);
- multiplies the output projection in tiles of HEAD_TILE columns whether the weights are float32 or native
  (`head_tiles`), so both give the same column blocking.
A one-row product (a decode step) stays a matrix-vector product: its documented exception (`model`).
"""

from __future__ import annotations

import numpy as np

ROW_ALIGN = 12  # rows: a sequence starts, and a thread's share of rows starts, at a multiple of this
SMALL_PRODUCT = 1_000_000  # multiply-adds (M*N*K): at most this, OpenBLAS (SkylakeX) takes its small-matrix kernels
HEAD_TILE = 2048  # output-projection columns (vocabulary entries) per product
STEP_TILE = 2048  # rows of a [V, d] output projection per product of a batched decode step (`rows_times`)
SMALL_HEAD = 1 << 20  # weights: an output projection this small is one tile (`stored_weights.SMALL_MATRIX`)


def round_up(n: int, step: int = ROW_ALIGN) -> int:
    return -(-n // step) * step


def padded_rows(m: int, n: int, k: int) -> int:
    """The rows a product of `m` rows by a [k, n] matrix runs with: m for one row (gemv, a decode step), else m
    rounded up to a multiple of ROW_ALIGN and to over SMALL_PRODUCT multiply-adds."""
    if m <= 1:
        return m
    return max(round_up(m), round_up(SMALL_PRODUCT // max(1, n * k) + 1))


def matmul_rows(x: np.ndarray, w: np.ndarray, out: np.ndarray | None = None, pad: bool = True) -> np.ndarray:
    """x @ w with x's rows padded to `padded_rows` (a row's bits: its content and index mod ROW_ALIGN only). With
    `pad` False, on the rows as they are: a batched decode step's (`batch_decoding.DecodingBatch.step`), whose rows
    are sequences, not a scoring forward's positions; a decode step's bits are documented as those of its own
    product (a one-row step is a matrix-vector product, `model`), and padding 16 rows to 24 to fix a row's bits
    bought nothing there and cost an eighth of the step (SmolLM2-135M, 2 CPUs).

    # [m, k] @ [k, n] -> [m, n]  (into `out` when given)"""
    m, k = x.shape
    p = padded_rows(m, w.shape[1], k) if pad else m
    if p == m:
        return np.matmul(x, w, out=out) if out is not None else x @ w
    xp = np.empty((p, k), np.float32)
    xp[:m] = x
    xp[m:] = 0  # the padding rows: zeros (written once, not the whole buffer twice)
    y = xp @ w
    if out is None:
        return y[:m]
    out[...] = y[:m]
    return out


def rows_times(x: np.ndarray, e: np.ndarray, out: np.ndarray | None = None,
               tile: int = STEP_TILE) -> np.ndarray:  # [m, k], [n, k] -> [m, n]
    """x @ e.T for a batched decode step's output projection, `e` C-order [n, k] (vocabulary rows, the embedding's
    layout): in tiles of `tile` rows of e, each tile's product `e_tile @ x.T` ([t, m]) copied transposed into its
    columns of `out` while still in cache. Why: at 2 to 16 rows OpenBLAS's SkylakeX kernels run the product in
    this orientation ~1.4x faster than `x @ w` over the [k, n] layout (SmolLM2-135M's [576, 49152]: 11-12 ms
    against 16-17 ms at 16 rows, 2 threads; its Haswell/Zen kernels: ~11 against ~8, `batch_decoding.rows_kernel`),
    and as fast as or faster than `x @ e.T` on every kernel; a one-row step's matrix-vector product wants [k, n]
    (its `e @ x` takes twice the time of `x @ w`). A step's bits are those of its own products (`matmul_rows`
    with pad False); a tile's do not depend on the other tiles.

    # [m, k] @ [n, k].T -> [m, n]  (into `out` when given)"""
    m, k = x.shape
    n = e.shape[0]
    if out is None:
        out = np.empty((m, n), np.float32)
    xt = x.T  # [k, m]
    buf = np.empty((min(tile, n), m), np.float32)
    for r0 in range(0, n, tile):
        r1 = min(r0 + tile, n)
        y = np.matmul(e[r0:r1], xt, out=buf[:r1 - r0])  # [t, m]
        out[:, r0:r1] = y.T
    return out


def aligned_split(n_rows: int, parts: int, least: int = 1) -> list[tuple[int, int]]:
    """At most `parts` contiguous [start, end) ranges covering n_rows, every start a multiple of ROW_ALIGN, none
    under `least` rows (fewer ranges when that would be)."""
    units = -(-n_rows // ROW_ALIGN)
    parts = max(1, min(parts, n_rows // max(1, least), units))
    bounds = [min(n_rows, units * i // parts * ROW_ALIGN) for i in range(parts + 1)]
    return [(s, e) for s, e in zip(bounds, bounds[1:]) if e > s]


def head_tiles(v: int, d: int) -> list[tuple[int, int]]:
    """The output projection's column tiles [c0, c1) of a [d, v] matrix: one when it is small, else HEAD_TILE
    columns each (float32 and native weights alike: the same products, the same bits)."""
    if v * d <= SMALL_HEAD:
        return [(0, v)]
    return [(c, min(c + HEAD_TILE, v)) for c in range(0, v, HEAD_TILE)]


def residue_slots(residue: np.ndarray) -> np.ndarray:  # [r] -> [r]
    """A slot for each row with this residue modulo ROW_ALIGN: rows of one residue at residue, residue + ROW_ALIGN,
    ... in order (the slots run to a multiple of ROW_ALIGN past the most frequent residue's count)."""
    residue = np.asarray(residue, np.int64)
    order = np.argsort(residue, kind="stable")
    counts = np.bincount(residue, minlength=ROW_ALIGN)
    first = np.cumsum(counts) - counts  # where each residue's rows start in `order`
    rank = np.empty(len(residue), np.int64)
    rank[order] = np.arange(len(residue)) - np.repeat(first, counts)
    return rank * ROW_ALIGN + residue


def slot_rows(x: np.ndarray, index: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | slice]:
    """Rows x (at forward rows `index`, sorted or not; None: 0, 1, ...) laid out for a product: each at a slot
    with the residue its forward row has modulo ROW_ALIGN, slots padded to a multiple of ROW_ALIGN. Contiguous
    rows keep their order (a leading gap of index[0] % ROW_ALIGN rows); other rows go to the next free slot of
    their residue. -> (padded rows [p, d], where each row of x went: a slice or an index array)

    # [r, d], [r] -> [p, d], slice | [r]"""
    r, d = x.shape
    if index is None or r == 0:
        lead = 0
    else:
        index = np.asarray(index, dtype=np.int64)
        lead = int(index[0]) % ROW_ALIGN
        if not (r == 1 or np.all(np.diff(index) == 1)):
            slots = residue_slots(index % ROW_ALIGN)
            xs = np.zeros((round_up(int(slots.max()) + 1), d), np.float32)
            xs[slots] = x
            return xs, slots
    p = round_up(lead + r)
    if lead == 0 and p == r:
        return np.ascontiguousarray(x), slice(0, r)
    xs = np.zeros((p, d), np.float32)
    xs[lead:lead + r] = x
    return xs, slice(lead, lead + r)
