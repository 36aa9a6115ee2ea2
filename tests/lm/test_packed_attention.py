"""A packed forward's attention (`attention_ops.packed_attention`) runs the short units of one padded shape stacked:
each unit (a segment, a context, a branch after it) gets the bits it gets packed alone, whatever shares its stack,
in any order, on any thread count; within float rounding of its attention computed on its own."""

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


def _units(packing):
    """(query rows, key rows, mask) of every unit of a packing: a plain segment; a tree segment's prefix, and each
    branch against the prefix's keys and its own."""
    for (s, e, mask), prefix in zip(packing.segments, packing.prefixes):
        n = prefix or e - s
        yield np.arange(s, s + n), np.arange(s, s + n), mask[:n, :n]
        pos = packing.positions[s:e]
        starts = [i for i in range(prefix, e - s) if pos[i] == prefix] + [e - s] if prefix else []
        for a, b in zip(starts, starts[1:]):
            yield (np.arange(s + a, s + b), np.r_[s:s + prefix, s + a:s + b],
                   np.concatenate([mask[a:b, :prefix], mask[a:b, a:b]], axis=1))


def test_stacked_units_are_each_units_attention_within_float_rounding():
    # two contexts of 4 tokens with branches of 2, 3 and 2 tokens (two shapes shared), a plain segment of 5 tokens
    # (the shape of another's) and one of 4, a context of 19 with branches of 1 and 6: units of one padded shape
    # (`_unit_shape`) hold several segments' units of different shapes
    layout = [tree(4, [2, 3]), tree(4, [2, 2]), tree(5, []), tree(4, [3]), tree(19, [1, 6])]
    packing = pack(layout)
    rng = np.random.default_rng(0)
    q, k, v = _qkv(rng, packing.length)
    got = packed_attention(q, k, v, packing, SERIAL)
    assert np.array_equal(packed_attention(q, k, v, pack(layout), RowPool(2)), got)
    seen = 0
    for qrows, krows, mask in _units(packing):
        alone = _attend(q[:, :, :, qrows], k[:, :, krows], v[:, :, krows], mask)  # unpadded, np.sum's order
        np.testing.assert_allclose(got[:, :, :, qrows], alone, rtol=1e-5, atol=1e-6)
        seen += len(qrows)
    assert seen == packing.length


def test_a_unit_gets_the_same_bits_whatever_else_is_packed_and_in_any_order():
    """A segment's attention is a function of the segment alone: packed with others (of nearby shapes, stacked with
    it), in another order, or alone, on 1 or 2 threads."""
    rng = np.random.default_rng(1)
    layouts = [tree(7, [2, 3, 1]), tree(9, [4, 4]), tree(12, []), tree(30, [2, 2, 5]), tree(6, [1])]
    qkvs = [_qkv(rng, len(pos)) for pos, _ in layouts]

    def run(order, pool):
        packing = pack([layouts[i] for i in order])
        q, k, v = (np.concatenate([qkvs[i][j] for i in order], axis=-2 if j else 3) for j in range(3))
        got = packed_attention(q, k, v, packing, pool)
        out, start = {}, 0
        for i in order:
            n = len(layouts[i][0])
            out[i] = got[:, :, :, start:start + n]
            start += n
        return out

    whole = run(range(5), SERIAL)
    for order, pool in [([4, 2, 0, 3, 1], RowPool(2)), ([3, 1], SERIAL)]:
        for i, o in run(order, pool).items():
            assert np.array_equal(o, whole[i])
    for i in range(5):
        assert np.array_equal(run([i], SERIAL)[i], whole[i])


def test_packed_attention_reads_and_writes_rows_at_their_slots():
    """`slots`: the packing's token i at row slots[i] of q, k, v (a forward's rows at their slots): the same bits as
    the rows gathered in packing order, and zeros at the rows no token has."""
    layout = [tree(4, [2, 3]), tree(70, [2]), tree(66, []), tree(5, [1, 1])]
    packing = pack(layout)
    rng = np.random.default_rng(2)
    q, k, v = _qkv(rng, packing.length)
    want = packed_attention(q, k, v, packing, SERIAL)
    t = packing.length + 9
    slots = rng.permutation(t)[:packing.length]
    qs, ks, vs = (np.zeros(a.shape[:-2] + (t, a.shape[-1]), np.float32) for a in (q, k, v))
    qs[:, :, :, slots], ks[:, :, slots], vs[:, :, slots] = q, k, v
    for pool in (SERIAL, RowPool(2)):
        got = packed_attention(qs, ks, vs, pack(layout), pool, slots=slots)
        assert np.array_equal(got[:, :, :, slots], want)
        assert not np.delete(got, slots, axis=3).any()


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
