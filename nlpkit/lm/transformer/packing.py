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
"""

from __future__ import annotations

from dataclasses import dataclass, field

from typing import ClassVar

import numpy as np

from nlpkit.lm.transformer.products import ROW_ALIGN, residue_slots, round_up


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
    # what `attention_ops.packed_attention` works out from the segments, once for all the layers of a forward
    memo: dict = field(default_factory=dict, repr=False, compare=False)
    # True: the packing runs its own attention, `attend(q, k, v, pool, softcap)` (prompt_scoring's kept prefixes)
    attends_itself: ClassVar[bool] = False

    @property
    def length(self) -> int:
        return len(self.positions)

    def slots(self, tokens: np.ndarray) -> np.ndarray:  # [t] -> [t]
        """The row each token takes in the forward's matrix products (`products`: a row's bits there may depend on
        its index modulo ROW_ALIGN): the residue (position + the segment's offset) % ROW_ALIGN, whatever else is
        packed, so a token gets the bits it gets alone; rows of a residue side by side (`products.residue_slots`).
        The offset, a function of the segment's prefix tokens (its tokens when it has no branches), spreads the
        residues of many short segments evenly (every one starting at 0 would leave most rows padding)."""
        tokens = np.asarray(tokens, np.int64)
        residue = np.empty(self.length, np.int64)
        for (s, e, _), prefix in zip(self.segments, self.prefixes or [0] * len(self.segments)):
            residue[s:e] = segment_residues(tokens[s:e], self.positions[s:e], prefix)
        return residue_slots(residue)

    def windowed(self, window: int) -> "Packing":
        """The same segments for a sliding-window layer: keys `window` or more positions back hidden as well."""
        segs = []
        for s, e, mask in self.segments:
            pos = self.positions[s:e]
            far = pos[:, None] - pos[None, :] >= window  # [n, n]
            segs.append((s, e, np.where(far, np.float32(-np.inf), mask).astype(np.float32)))
        return Packing(self.positions, segs, self.prefixes)


def tree(prefix: int, branches: list[int]) -> tuple[np.ndarray, np.ndarray]:  # -> [n], [n, n]
    """Positions and mask of one segment: `prefix` tokens, causal, then each branch's tokens (lengths `branches`)
    at positions prefix, prefix + 1, ..., seeing the prefix and their own branch's earlier tokens only.

    >>> tree(2, [1, 2])[0].tolist()
    [0, 1, 2, 2, 3]
    """
    owner = np.concatenate([np.full(prefix, -1), np.repeat(np.arange(len(branches)), branches)]).astype(np.int64)
    positions = np.concatenate([np.arange(prefix)] + [prefix + np.arange(b) for b in branches]).astype(np.int64)
    idx = np.arange(len(owner))
    visible = (idx[None, :] <= idx[:, None]) & ((owner[None, :] == -1) | (owner[None, :] == owner[:, None]))
    return positions, np.where(visible, np.float32(0.0), np.float32(-np.inf)).astype(np.float32)


def pack(segments: list[tuple]) -> Packing:
    """One `Packing` of (positions [n], mask [n, n]) segments, or (positions, mask, `tree`'s prefix), end to end."""
    out, start = [], 0
    for pos, mask, *_ in segments:
        out.append((start, start + len(pos), mask))
        start += len(pos)
    prefixes = [int(seg[2]) if len(seg) > 2 else 0 for seg in segments]
    return Packing(np.concatenate([seg[0] for seg in segments]).astype(np.int64), out, prefixes)


def segment_residues(tokens: np.ndarray, positions: np.ndarray, prefix: int = 0) -> np.ndarray:  # [n], [n] -> [n]
    """Each token's residue modulo ROW_ALIGN in a packed forward's products (`Packing.slots`): a function of its
    own segment only (its tokens, positions and `tree`'s prefix), wherever the segment is packed."""
    tokens = np.asarray(tokens, np.int64)
    n = len(tokens)
    residue = positions + _offset(tokens[:prefix or n])
    if prefix:  # each branch its own offset too (by its tokens): the branches of a context spread out
        starts = list(np.flatnonzero(positions[prefix:] == prefix) + prefix) + [n]
        for a, b in zip(starts, starts[1:]):
            residue[a:b] += _offset(tokens[a:b])
    return residue % ROW_ALIGN


def _offset(tokens: np.ndarray) -> int:
    """A residue from tokens alone (`Packing.slots`)."""
    return (int(tokens.sum()) * 7 + len(tokens)) % ROW_ALIGN


def packed_starts(lengths: list[int]) -> list[int]:
    """Sequences of these lengths end to end, each starting at a multiple of ROW_ALIGN (a packed prefill of prompts
    with a KV cache each: `batch_decoding`); padding rows between."""
    starts, at = [], 0
    for n in lengths:
        a = round_up(at)
        starts.append(a)
        at = a + n
    return starts
