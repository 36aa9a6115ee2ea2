"""A packed forward's attention (`attention_ops.packed_attention`) runs the short units of one shape stacked: each
unit (a segment, a context, a branch after it) gets the bits it gets on its own, whatever shares its stack."""

from __future__ import annotations

import numpy as np

from nlpkit.lm.threads import SERIAL, RowPool
from nlpkit.lm.transformer.attention_ops import _attend, packed_attention
from nlpkit.lm.transformer.packing import pack, tree


def _qkv(rng, t: int, kv: int = 3, g: int = 3, hd: int = 16):
    q = rng.standard_normal((1, kv, g, t, hd), dtype=np.float32)
    k = rng.standard_normal((1, kv, t, hd), dtype=np.float32)
    v = rng.standard_normal((1, kv, t, hd), dtype=np.float32)
    return q, k, v


def test_stacked_units_get_the_bits_of_each_unit_alone():
    # two contexts of 4 tokens with branches of 2, 3 and 2 tokens (two shapes shared), a plain segment of 5 tokens
    # (the shape of another's) and one of 4: every shape holds units of several segments
    layout = [tree(4, [2, 3]), tree(4, [2, 2]), tree(5, []), tree(4, [3])]
    packing = pack(layout)
    rng = np.random.default_rng(0)
    q, k, v = _qkv(rng, packing.length)
    got = packed_attention(q, k, v, packing, SERIAL)
    assert np.array_equal(packed_attention(q, k, v, packing, RowPool(2)), got)
    start = 0
    for (s, e, mask), prefix in zip(packing.segments, packing.prefixes):
        n = prefix or e - s
        alone = _attend(q[:, :, :, s:s + n], k[:, :, s:s + n], v[:, :, s:s + n], mask[:n, :n])
        assert np.array_equal(got[:, :, :, s:s + n], alone)
        pos = packing.positions[s:e]
        starts = [i for i in range(prefix, e - s) if pos[i] == prefix] + [e - s] if prefix else []
        for a, b in zip(starts, starts[1:]):
            keys = np.r_[s:s + prefix, s + a:s + b]
            alone = _attend(q[:, :, :, s + a:s + b], k[:, :, keys], v[:, :, keys],
                            np.concatenate([mask[a:b, :prefix], mask[a:b, a:b]], axis=1))
            assert np.array_equal(got[:, :, :, s + a:s + b], alone)
        start = e
    assert start == packing.length


def test_packed_forwards_have_few_padding_slots_and_every_segment_once():
    """`_balanced_groups`: short segments go to forwards whose residues (`Packing.slots`) are even, so their
    products run few padding rows; every segment once, no forward over the budget."""
    from nlpkit.lm.transformer.packed_scoring import _balanced_groups, _forward_groups, _shared_segment
    from nlpkit.lm.transformer.products import ROW_ALIGN

    rng = np.random.default_rng(5)
    segments = [_shared_segment(list(rng.integers(5, 900, rng.integers(3, 9))),
                                [list(rng.integers(5, 900, rng.integers(2, 8))) for _ in range(4)],
                                [(i, j) for j in range(4)]) for i in range(120)]
    def slots_and_tokens(groups):
        tokens = slots = 0
        for g in groups:
            layout = [(segments[i].positions, segments[i].mask, segments[i].prefix) for i in g]
            ids = np.concatenate([segments[i].tokens for i in g])
            assert len(ids) <= 1024
            tokens += len(ids)
            slots += -(-(int(pack(layout).slots(ids).max()) + 1) // ROW_ALIGN) * ROW_ALIGN
        return slots, tokens

    groups = _balanced_groups(segments, 1024)
    assert sorted(i for g in groups for i in g) == list(range(len(segments)))
    slots, tokens = slots_and_tokens(groups)
    in_order, _ = slots_and_tokens(_forward_groups([len(s.tokens) for s in segments], 1024))
    assert len(groups) == 3 and slots < in_order and slots <= 1.12 * tokens  # (2688 against 2856, 2416 tokens)
