"""Several independent sequences in one forward pass: the packed layout `Model.forward(..., packing=)` runs.

Why: scoring many short items one forward each runs 30 layers of gemms with a few dozen rows, which stream every
weight from memory per item (SmolLM2-135M: 0.43 GB of float32 weights for ~20 rows). Packing a block of items
into one batch-1 sequence of ~1000 tokens makes each weight product one large gemm.

A `Packing` cuts the packed tokens into segments that never see each other; inside a segment each token has its own
position (RoPE angle or learned position) and an additive attention mask. `tree(prefix, branches)` lays out one
segment as a shared prefix followed by branches that each see the whole prefix and their own earlier tokens (a
context and its continuations: every branch is computed as if it directly followed the prefix, as a KV cache
shared by a batch would). Every token sees only keys at or before its own index in the segment, so attention may
skip the keys after a block of queries (`model.attention`).

Every segment, and every branch of a `tree`, starts at a multiple of `products.ROW_ALIGN` of the packed rows, with
padding rows between (position 0, in no segment: attention leaves them zero, nothing reads them): a row's bits in a
matrix product depend on its index modulo ROW_ALIGN on some BLAS kernels (`products`), so a token gets the index it
has when its sequence or branch is scored alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nlpkit.lm.transformer.products import round_up


@dataclass
class Packing:
    """Segments [start, end) of a packed sequence, each with its additive mask (0 visible, -inf hidden;
    `[n, n]` for n = end - start), and every token's position within its segment."""

    positions: np.ndarray  # [t] int64
    segments: list[tuple[int, int, np.ndarray]]  # (start, end, mask [n, n] float32)
    # per segment, `tree`'s prefix: the tokens every branch sees (0: a segment without branches). Attention runs the
    # prefix alone and each branch against the prefix's keys and its own only (`model.packed_attention`), so that a
    # branch gets the same bits whatever other branches share its segment.
    prefixes: list[int] | None = None

    @property
    def length(self) -> int:
        return len(self.positions)

    def token_rows(self) -> np.ndarray:  # -> [n] rows of the packed sequence, in order
        """The rows that hold tokens (the padding rows aside): each segment's first row and its rows at a position
        above 0 (a padding row is at position 0)."""
        rows = [np.flatnonzero((self.positions[s:e] > 0) | (np.arange(e - s) == 0)) + s for s, e, _ in self.segments]
        return np.concatenate(rows) if rows else np.zeros(0, np.int64)

    def spread(self, tokens) -> np.ndarray:  # [n] -> [length]
        """Tokens end to end (each segment's prefix, then its branches in order) laid out on `token_rows`; token 0 on
        the padding rows."""
        out = np.zeros(self.length, np.int64)
        out[self.token_rows()] = np.asarray(tokens, np.int64)
        return out

    def windowed(self, window: int) -> "Packing":
        """The same segments for a sliding-window layer: keys `window` or more positions back hidden as well."""
        segs = []
        for s, e, mask in self.segments:
            pos = self.positions[s:e]
            far = pos[:, None] - pos[None, :] >= window  # [n, n]
            segs.append((s, e, np.where(far, np.float32(-np.inf), mask).astype(np.float32)))
        return Packing(self.positions, segs, self.prefixes)


def tree_starts(prefix: int, branches: list[int]) -> list[int]:
    """Where each branch of `tree(prefix, branches)` starts in its segment: after the prefix, each at a multiple of
    ROW_ALIGN (an empty branch takes no rows).

    >>> tree_starts(13, [3, 0, 2])
    [24, 36, 36]
    """
    starts, at = [], round_up(prefix)
    for b in branches:
        starts.append(at)
        at = round_up(at + b)
    return starts


def tree(prefix: int, branches: list[int]) -> tuple[np.ndarray, np.ndarray]:  # -> [n], [n, n]
    """Positions and mask of one segment: `prefix` tokens, causal, then each branch's tokens (lengths `branches`,
    starting at `tree_starts`) at positions prefix, prefix + 1, ..., seeing the prefix and their own branch's earlier
    tokens only. Padding rows between (position 0) see themselves only; no token sees them.

    >>> tree(2, [1, 2])[0].tolist()[:2], tree(2, [1, 2])[0].tolist()[12:15], tree(2, [1, 2])[0].tolist()[24:]
    ([0, 1], [2, 0, 0], [2, 3])
    """
    starts = tree_starts(prefix, branches)
    n = max([prefix] + [s + b for s, b in zip(starts, branches)])
    owner = np.full(n, -2, np.int64)  # -2: padding, -1: the prefix, i: branch i
    owner[:prefix] = -1
    positions = np.zeros(n, np.int64)
    positions[:prefix] = np.arange(prefix)
    for i, (s, b) in enumerate(zip(starts, branches)):
        owner[s:s + b] = i
        positions[s:s + b] = prefix + np.arange(b)
    idx = np.arange(n)
    real = owner > -2
    visible = (idx[None, :] <= idx[:, None]) & real[None, :] & real[:, None] \
        & ((owner[None, :] == -1) | (owner[None, :] == owner[:, None]))
    visible |= np.eye(n, dtype=bool)  # a padding row sees itself (a softmax over no keys would be NaN)
    return positions, np.where(visible, np.float32(0.0), np.float32(-np.inf)).astype(np.float32)


def pack(segments: list[tuple]) -> Packing:
    """One `Packing` of (positions [n], mask [n, n]) segments, or (positions, mask, `tree`'s prefix), each starting
    at a multiple of ROW_ALIGN (padding rows between: position 0, in no segment)."""
    out, start = [], 0
    positions = []
    for pos, mask, *_ in segments:
        a = round_up(start)
        if a > start:
            positions.append(np.zeros(a - start, np.int64))
        out.append((a, a + len(pos), mask))
        positions.append(np.asarray(pos, np.int64))
        start = a + len(pos)
    prefixes = [int(seg[2]) if len(seg) > 2 else 0 for seg in segments]
    return Packing(np.concatenate(positions).astype(np.int64), out, prefixes)


def packed_starts(lengths: list[int]) -> list[int]:
    """Where `pack` puts segments of these lengths."""
    starts, at = [], 0
    for n in lengths:
        a = round_up(at)
        starts.append(a)
        at = a + n
    return starts
