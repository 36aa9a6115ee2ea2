"""Attention of the forward pass: the queries of a layer against their keys and values, in float32.

`attention` runs a causal prefill in blocks of ATTN_BLOCK query rows (each block skips the keys it cannot see)
split over a `RowPool`'s threads; `packed_attention` runs the segments of a packed forward (`packing.Packing`:
score's contexts with their choices as branches) each against its own keys only. Both end in `_attend`, the
softmax normalised after the product with v. Moved out of `model.py`, which calls them per layer; a test that
shrinks ATTN_BLOCK patches it here (`Model` reads it from this module too).
"""

from __future__ import annotations

import numpy as np

from nlpkit.lm.threads import SERIAL, RowPool
from nlpkit.lm.transformer.layer_ops import softcap_
from nlpkit.lm.transformer.packing import Packing

ATTN_BLOCK = 64  # query rows per block in causal prefill: blocks skip the keys they cannot see
SCORES_IN_CACHE = 1 << 16  # scores: more than this, a block's kv heads run one at a time (numpy's batched product
# multiplies each [g t, hd] x [hd, L] pair apart anyway, so the same products; each head's scores then stay in a
# core's cache from the product through the softmax's passes to the product with v)


def _masked_columns(mask: np.ndarray) -> tuple[int, int]:  # [t, L] -> (lo, hi)
    """The columns lo:hi outside which every entry of `mask` is 0 (a causal block's diagonal square): only
    they need adding."""
    cols = np.flatnonzero(mask.any(axis=0))
    return (int(cols[0]), int(cols[-1]) + 1) if cols.size else (0, 0)


def _attend(q, k, v, mask, softcap=None, cols=None):
    """# [b, kv, g, t, hd], [b, kv, L, hd] x2, [t, L] | None -> [b, kv, g, t, hd]  (cols: `_masked_columns(mask)`)"""
    b, kv, g, t, hd = q.shape
    L = k.shape[2]
    if mask is not None and cols is None:
        cols = _masked_columns(mask)  # once for every head
    if b * kv > 1 and g * t * L > SCORES_IN_CACHE:  # each kv head's scores apart, while they are in cache
        out = np.empty((b, kv, g, t, hd), np.float32)
        for bi in range(b):
            for h in range(kv):
                out[bi, h] = _attend(q[bi:bi + 1, h:h + 1], k[bi:bi + 1, h:h + 1], v[bi:bi + 1, h:h + 1], mask,
                                     softcap, cols)[0, 0]
        return out
    scores = q.reshape(b, kv, g * t, hd) @ k.transpose(0, 1, 3, 2)  # [b, kv, g t, L]
    if softcap is not None:
        softcap_(scores, softcap)
    if mask is not None:
        lo, hi = cols
        if hi > lo:  # adding the zeros elsewhere would change nothing
            s5 = scores.reshape(b, kv, g, t, L)
            s5[..., lo:hi] += mask[:, lo:hi]  # [t, hi - lo] broadcasts over batch, kv heads and group
    # softmax, normalised after the product with v: dividing [.., hd] outputs instead of [.., L] weights
    np.subtract(scores, scores.max(axis=-1, keepdims=True), out=scores)
    np.exp(scores, out=scores)
    out = scores @ v
    out /= scores.sum(axis=-1, keepdims=True)
    return out.reshape(b, kv, g, t, hd)


def attention(q, k, v, mask, pool: RowPool, softcap=None, q0: int = 0):
    """Scaled dot-product attention (q already scaled), query heads grouped under their kv head (GQA
    without copying k/v). With a causal mask, queries go in blocks of ATTN_BLOCK rows and each block
    scores only the keys up to its last row, which halves the work of a long prefill; the blocks are
    spread over pool's threads, longest first, each to the least-loaded thread. `q` may be the rows q0: of
    the mask's: their blocks are cut where the whole rows' are, so each row scores the same keys (same bits).
    A `Packing` mask: each segment on its own (`packed_attention`; q0 = 0).

    # [b, kv, g, t - q0, hd], [b, kv, L, hd] x2, [t, L] | Packing | None -> [b, kv, g, t - q0, hd]
    """
    if isinstance(mask, Packing):
        if mask.attends_itself:  # prompt_scoring's kept prefixes
            return mask.attend(q, k, v, pool, softcap)
        return packed_attention(q, k, v, mask, pool, softcap)
    t, L = q0 + q.shape[3], k.shape[2]
    if mask is None or t <= ATTN_BLOCK:
        return _attend(q, k, v, None if mask is None else mask[q0:], softcap)
    blocks = [(max(s, q0), min(s + ATTN_BLOCK, t)) for s in range(q0 - q0 % ATTN_BLOCK, t, ATTN_BLOCK)]
    load = [0] * pool.n
    shares: list[list[tuple[int, int]]] = [[] for _ in range(pool.n)]
    for s, e in sorted(blocks, key=lambda se: -se[1]):
        i = load.index(min(load))
        shares[i].append((s, e))
        load[i] += (e - s) * (L - t + e)
    out = np.empty_like(q)

    def run(share):
        for s, e in share:
            visible = L - t + e  # keys seen by the block's last query
            out[:, :, :, s - q0:e - q0] = _attend(q[:, :, :, s - q0:e - q0], k[:, :, :visible], v[:, :, :visible],
                                                  mask[s:e, :visible], softcap)

    pool.map(run, [sh for sh in shares if sh])
    return out


def packed_attention(q, k, v, packing: Packing, pool: RowPool, softcap=None,
                     slots: np.ndarray | None = None):  # [1, kv, g, t, hd], [1, kv, t, hd] x2 -> [1, kv, g, t, hd]
    """Attention inside each segment of a packed forward (`packing.Packing`): a segment's queries against its own
    keys under its own mask, never another segment's, so the work grows with the segments' sizes and not with the
    packed length; the segments (a tree segment's prefix and each of its branches apart) are spread over pool's
    threads, largest first, each to the least-loaded thread.
    A segment with a prefix (`packing.tree`: a context and its continuations) runs the prefix alone, then each branch
    against the prefix's keys and its own only (as a KV cache holding the prefix would): a softmax over other
    branches' masked keys would sum in another order, and a branch's bits would depend on its neighbours.
    Units of at most ATTN_BLOCK queries run together by padded shape, stacked (`_unit_shape`, `_attend_stacked`:
    numpy multiplies a stack matrix by matrix, each one the product it is alone, so a unit gets the same bits in any
    stack): a packed forward of short items has a hundred units of a few rows each, whose numpy calls, one unit at a
    time, cost more than their arithmetic.
    `slots`: token i of the packing is row slots[i] of q, k, v and the output (a forward's rows at their slots,
    `Packing.slots`; other rows of the output zero), read and written there without gathering the rows first."""
    t = q.shape[3]
    size = q.size + q.shape[4]  # q's, and one more row: where the stacks' padding queries write (`_flat_rows`)
    spare = np.zeros(size, np.float32) if slots is not None else np.empty(size, np.float32)
    out = spare[:q.size].reshape(q.shape)  # [1, kv, g, t, hd]
    key = ("shares", pool.n, ATTN_BLOCK, t, slots is not None)
    if key not in packing.memo:  # the same for every layer of the forward
        packing.memo[key] = _packed_shares(packing, pool.n, q.shape, slots)
    shares = packing.memo[key]
    flat = (q.reshape(-1, q.shape[4]), k.reshape(-1, k.shape[3]), v.reshape(-1, v.shape[3]),
            spare.reshape(-1, q.shape[4]))  # [kv g t, hd], [kv t, hd] x2, [kv g t + 1, hd]: views

    def rows(s, e):
        return slice(s, e) if slots is None else slots[s:e]

    def run(share):
        for unit in share:
            with np.errstate(over="ignore"):
                if len(unit) == 2:
                    _attend_stacked(flat, unit[1], softcap)
                    continue
                _, s, e, mask, prefix, branch = unit
                if not prefix:
                    r = rows(s, e)
                    out[:, :, :, r] = attention(q[:, :, :, r], k[:, :, r], v[:, :, r], mask, SERIAL, softcap)
                    continue
                p = s + prefix
                if branch is None:
                    r = rows(s, p)
                    out[:, :, :, r] = attention(q[:, :, :, r], k[:, :, r], v[:, :, r], mask[:prefix, :prefix],
                                                SERIAL, softcap)
                    continue
                a, b = branch
                rp, rb = rows(s, p), rows(s + a, s + b)
                kb = np.concatenate([k[:, :, rp], k[:, :, rb]], axis=2)  # [1, kv, prefix + b - a, hd]
                vb = np.concatenate([v[:, :, rp], v[:, :, rb]], axis=2)
                mb = np.concatenate([mask[a:b, :prefix], mask[a:b, a:b]], axis=1)  # [b - a, prefix + b - a]
                out[:, :, :, rb] = attention(q[:, :, :, rb], kb, vb, mb, SERIAL, softcap)

    pool.map(run, [sh for sh in shares if sh])
    return out


def _packed_shares(packing: Packing, n_threads: int, shape: tuple, slots: np.ndarray | None) -> list[list]:
    """`packed_attention`'s units of work spread over `n_threads`, largest first, each to the least-loaded thread:
    (cost, segment start, segment end, mask, prefix, branch (a, b) or None) for a unit of more than ATTN_BLOCK
    queries; (cost, `_flat_rows`) for the units of at most ATTN_BLOCK queries of one padded shape (`_unit_shape`,
    `_attend_stacked`). q is of `shape`; `slots` as `packed_attention`'s."""
    # the units of work: a segment without a prefix whole; else its prefix, and each branch on its own (a branch
    # needs only the prefix's keys, already computed), so one tree segment (a 5-shot prompt's documents) spreads
    # over the threads too; each unit computes the same whichever thread runs it
    units = []
    small: dict[tuple[int, int], list] = {}  # (queries, keys) padded (`_unit_shape`) -> [(query rows, key rows, mask)]
    prefixes = packing.prefixes or [0] * len(packing.segments)
    for (s, e, mask), prefix in zip(packing.segments, prefixes):
        if not prefix:
            if e - s <= ATTN_BLOCK:
                small.setdefault(_unit_shape(e - s, e - s), []).append((np.arange(s, e), np.arange(s, e), mask))
            else:
                units.append(((e - s) ** 2, s, e, mask, 0, None))
            continue
        p = s + prefix
        if prefix <= ATTN_BLOCK:
            small.setdefault(_unit_shape(prefix, prefix), []).append(
                (np.arange(s, p), np.arange(s, p), mask[:prefix, :prefix]))
        else:
            units.append((prefix * prefix // 2, s, e, mask, prefix, None))
        for a, b in _branches(packing.positions[s:e], prefix):
            if b - a <= ATTN_BLOCK:
                small.setdefault(_unit_shape(b - a, prefix + b - a), []).append(
                    (np.arange(s + a, s + b), np.concatenate([np.arange(s, p), np.arange(s + a, s + b)]),
                     np.concatenate([mask[a:b, :prefix], mask[a:b, a:b]], axis=1)))
            else:
                units.append(((b - a) * (prefix + b - a), s, e, mask, prefix, (a, b)))
    where = slots if slots is not None else np.arange(packing.length)  # a token's row in q, k, v
    units += [(len(group) * n * keys, _flat_rows(_padded_stack(group, n, keys), where, shape))
              for (n, keys), group in small.items()]
    load = [0] * n_threads
    shares: list[list] = [[] for _ in range(n_threads)]
    for unit in sorted(units, key=lambda u: -u[0]):
        i = load.index(min(load))
        shares[i].append(unit)
        load[i] += unit[0]
    return shares


UNIT_KEYS = 16  # a short unit's keys padded to a multiple of this (`_unit_shape`)


def _unit_shape(n: int, keys: int) -> tuple[int, int]:
    """The (queries, keys) a short unit of attention runs as, padded: a function of its own shape only, so it gets
    the same bits whatever else is packed, while units of nearby shapes run stacked (a packed forward of short items
    has a hundred (queries, keys) shapes a layer, and a numpy call per unit and operation cost more than their
    arithmetic). Queries to 1, 2, 4, then a multiple of 8; keys to a multiple of UNIT_KEYS."""
    q = n if n <= 2 else 4 if n <= 4 else -(-n // 8) * 8
    return q, -(-keys // UNIT_KEYS) * UNIT_KEYS


def _padded_stack(group: list, n: int, keys: int) -> tuple:
    """Units (query rows [n_i], key rows [L_i], mask [n_i, L_i]) padded to (n, keys) and stacked: (query rows [m, n],
    key rows [m, keys], masks [m, n, keys], which queries are real [m, n]).
    A padding key repeats the unit's first key under -inf (its weight is 0); a padding query repeats the first
    query with its mask row, and its output is dropped."""
    m = len(group)
    qi = np.empty((m, n), np.int64)
    ki = np.empty((m, keys), np.int64)
    masks = np.full((m, n, keys), -np.inf, np.float32)
    real = np.zeros((m, n), bool)
    for u, (q, k, mask) in enumerate(group):
        nq, nk = len(q), len(k)
        qi[u, :nq], qi[u, nq:] = q, q[0]
        ki[u, :nk], ki[u, nk:] = k, k[0]
        masks[u, :nq, :nk] = mask
        masks[u, nq:, :nk] = mask[0]
        real[u, :nq] = True
    return qi, ki, masks, real


def _flat_rows(stack: tuple, where: np.ndarray, shape: tuple) -> tuple:
    """A padded stack's rows in the flat [kv g t, hd] queries and [kv t, hd] keys and values (`packed_attention`'s
    views, q of `shape` [1, kv, g, t, hd]; packing token i at row where[i]): (query rows [m kv g n], key rows
    [m, kv, L], masks [m, n, L], where the real queries' outputs go [r] and where they are in the stack's [m kv g n]
    outputs [r])."""
    qi, ki, masks, real = stack  # [m, n], [m, L], [m, n, L], [m, n] bool
    _, kv, g, t, _ = shape
    heads = np.arange(kv * g).reshape(1, kv, g, 1) * t  # [1, kv, g, 1]: head (h, j) at rows (h g + j) t ...
    qrows = (heads + where[qi][:, None, None, :]).reshape(-1)  # [m kv g n]
    krows = np.arange(kv).reshape(1, kv, 1) * t + where[ki][:, None, :]  # [m, kv, L]
    keep = np.broadcast_to(real[:, None, None, :], (len(qi), kv, g, qi.shape[1])).reshape(-1)  # [m kv g n]
    return qrows, krows, masks, np.where(keep, qrows, kv * g * t)  # a padding query's output: the spare row


def _attend_stacked(flat: tuple, group: tuple, softcap) -> None:
    """`_attend` of m units of one (padded) shape at once (`_padded_stack`, `_flat_rows`), each unit's queries against
    its keys, the real queries' outputs written into the flat output. Every operation is `_attend`'s on a stack of
    the units (a matrix product per unit and head, row-wise max, exp and sums over the same L, the mask added where
    it is 0 too: x + 0 is x), so each unit gets the bits `_attend` gives it alone at its padded shape.

    # flat: [kv g t, hd], [kv t, hd] x2, out [kv g t, hd]"""
    fq, fk, fv, fout = flat
    qrows, krows, masks, dst = group  # [m kv g n], [m, kv, L], [m, n, L], [m kv g n]
    m, kv, L = krows.shape
    n = masks.shape[1]
    hd = fq.shape[1]
    qs = fq.take(qrows, axis=0).reshape(m, kv, -1, hd)  # [m, kv, g n, hd]
    ks = fk.take(krows, axis=0)  # [m, kv, L, hd]
    vs = fv.take(krows, axis=0)
    scores = qs @ ks.transpose(0, 1, 3, 2)  # [m, kv, g n, L]
    if softcap is not None:
        softcap_(scores, softcap)
    scores.reshape(m, kv, -1, n, L)[...] += masks[:, None, None]
    np.subtract(scores, scores.max(axis=-1, keepdims=True), out=scores)
    np.exp(scores, out=scores)
    o = scores @ vs  # [m, kv, g n, hd]
    o /= np.einsum("...l->...", scores)[..., None]  # each row's sum over its L (einsum: a short row's sum, fast)
    fout[dst] = o.reshape(-1, hd)


def _branches(positions: np.ndarray, prefix: int) -> list[tuple[int, int]]:  # [n] -> [(start, end)] in the segment
    """The branches of a `packing.tree` segment: each starts at position `prefix` again."""
    starts = [int(i) for i in np.flatnonzero(positions[prefix:] == prefix) + prefix]
    return list(zip(starts, starts[1:] + [len(positions)]))



# ---------------------------------------------------------------- the model
