"""Every token of many prompts scored at once, with prompts that begin alike sharing their beginning: what a server's
`echo` returns (`score_prompts`; `nlpkit.serve.engine` calls it).

lm-evaluation-harness sends each (context, choice) of a multiple-choice item as one prompt, context + choice: the
four prompts of an item repeat its context, and the server cannot see where the context ends. Scoring each prompt
whole runs the context four times through the layers and the output projection.

Here a prompt of F fed tokens (its tokens but the last; all of them when the row after it is read too) is cut after
its first `prompt_cut(F)` tokens, a multiple of SHARE_STEP at least SHARE_MARGIN tokens before its end (or after its
first token when it is too short to cut): the prefix, then the rest as a branch (`packing.tree`, a branch sees the
prefix and itself only). Prompts with the same prefix among those scored together share one segment: the prefix runs
once, its rows (and their logits) serve every prompt that begins with it. The cut is a function of the prompt alone
-- never of what else is queued -- and a prefix is computed the same way whichever prompts share it (the same
tokens, positions, product slots and attention units), a branch the same way whichever branches sit beside it
(`attention_ops.packed_attention`), so a prompt's numbers are the same bits whatever else is scored with it, in one
request or several (tests/serve/test_serve_api.py, tests/lm/test_prompt_scoring.py).

A `PrefixStore` keeps the prefixes of one call for the next (a server's scoring blocks: lm-evaluation-harness sorts
its requests by length, so an item's choices arrive in different requests): a kept prefix's keys and values are put
in its rows of each layer's attention, its rows' numbers read back, and only its prompts' branches are computed, the
same bits as computing it again.

The numbers: the rows after the cut are `PackedScorer.score_pairs`'s for the item (the prompt's first `cut` tokens,
the rest), bit for bit; the rows before it are the prefix's own (within float32 rounding, about 1e-7 per token, of
the prompt scored from its first token). Log-probabilities are float64 log-softmax of the float32 logits, as
`packed_scoring` computes them.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import ClassVar, Sequence

import numpy as np

from nlpkit.lm.continuations import ContinuationScore
from nlpkit.lm.transformer.packed_scoring import (BRANCH_TOKENS, FLOOR_ROWS, FLOOR_TOKENS, PackedScorer, Segment,
                                                  balanced_groups, top_tokens)
from nlpkit.lm.transformer.packing import Packing, pack, segment_residues, tree
from nlpkit.lm.transformer.products import residue_slots
from nlpkit.lm.transformer.window_forward import row_log_normalizers

SHARE_STEP = 16   # tokens: a prefix is a multiple of this (prompts of one item cut at the same place)
SHARE_MARGIN = 4  # tokens at least after the cut (a choice's tokens mostly stay out of its context's prefix)
STORE_BYTES = 256 << 20  # a `PrefixStore`'s default bound: ~270 prefixes of 16 tokens of SmolLM2-135M


def prompt_cut(fed: int) -> int:
    """The length of the prefix of a prompt of `fed` fed tokens: the largest multiple of SHARE_STEP at most
    fed - SHARE_MARGIN, or 1 (its first token) when that is none.

    >>> [prompt_cut(n) for n in (1, 19, 20, 35, 36)]
    [1, 1, 16, 16, 32]
    """
    cut = SHARE_STEP * ((fed - SHARE_MARGIN) // SHARE_STEP)
    return cut if cut >= SHARE_STEP else 1


def score_prompts(scorer: PackedScorer, prompts: Sequence[tuple[Sequence[int], bool]], top: int = 0,
                  store: "PrefixStore | None" = None) -> list[ContinuationScore]:
    """Each (token ids, next) prompt's scores: `token_logprobs` of its tokens after the first, then with `next` one
    more (the row after the prompt, scored against token 0: read its `top` instead), and each of those rows' `top`
    best tokens when `top` > 0. A prompt needs two tokens, or one with `next`. With a `store`, prefixes computed
    by earlier calls are not computed again (`PrefixStore`), and this call's are kept. See the module docstring."""
    if store is not None and not store.usable(scorer.model):
        store = None
    out: list[ContinuationScore | None] = [None] * len(prompts)
    first: dict[tuple, int] = {}
    copies: list[tuple[int, int]] = []
    groups: dict[tuple, list[tuple[int, list[int], list[int]]]] = {}  # prefix -> [(prompt, branch, targets)]
    for k, (ids, nxt) in enumerate(prompts):
        ids = [int(i) for i in ids]
        key = (tuple(ids), bool(nxt))
        if key in first:
            copies.append((k, first[key]))
            continue
        first[key] = k
        fed = ids if nxt else ids[:-1]
        if not fed:
            raise ValueError("a prompt needs two tokens to score, or one and the row after it")
        cut = prompt_cut(len(fed))
        groups.setdefault(tuple(fed[:cut]), []).append((k, fed[cut:], ids[1:] + ([0] if nxt else [])))
    segments = []
    for prefix, members in groups.items():
        run: list = []
        size = 0
        for member in members:  # the branches of a prefix in runs of about BRANCH_TOKENS tokens
            if run and size + len(member[1]) > max(BRANCH_TOKENS, len(prefix)):
                segments.append(_segment(list(prefix), run))
                run, size = [], 0
            run.append(member)
            size += len(member[1])
        segments.append(_segment(list(prefix), run))
    limit = scorer.rope_limit()
    long = [s for s in segments if int(s.positions.max()) + 1 > limit]
    packed = [s for s in segments if int(s.positions.max()) + 1 <= limit]
    scored: list[list] = [[None] for _ in prompts]
    for s in long:  # RoPE tables that depend on a sequence's length: such a sequence has its forward alone
        scorer.run_forward([s], scored, top)
    if store is None:
        for group in balanced_groups(packed, scorer.pack_tokens):
            scorer.run_forward([packed[i] for i in group], scored, top)
    else:
        _run_stored(scorer, packed, scored, top, store)
    for k in first.values():
        out[k] = scored[k][0]
    for k, k0 in copies:
        out[k] = replace(out[k0], ids=list(out[k0].ids))
    return out  # type: ignore[return-value]


def _segment(prefix: list[int], members: list[tuple[int, list[int], list[int]]]) -> Segment:
    """A prefix and its prompts' branches (`packing.tree`); each prompt reads the prefix's rows, then its own."""
    branches = [m for m in members if m[1]]
    positions, mask = tree(len(prefix), [len(b) for _, b, _ in branches])
    tokens, scored, start = list(prefix), [], len(prefix)
    starts = {}
    for k, branch, _ in branches:
        starts[k] = start
        tokens += branch
        start += len(branch)
    for k, branch, targets in members:
        rows = list(range(len(prefix))) + list(range(starts.get(k, 0), starts.get(k, 0) + len(branch)))
        scored.append(((k, 0), rows, targets, tuple(prefix), False))
    return Segment(tokens, positions, mask, scored, len(prefix))


# ---------------------------------------------------------------- prefixes kept from one call to the next

@dataclass
class _Stored:
    """A prefix computed once: each layer's keys and values of its rows ([layers, kv, P, hd] x2), and what its rows
    give: the log-probabilities of its own tokens after the first (rows 0..P-2, float64) and whether each is its
    row's maximum, each row's top (when asked), and the last row's logits (its target is the prompt's next token)
    with their max and log-sum."""

    keys: np.ndarray
    values: np.ndarray
    lps: np.ndarray  # [P - 1] float64
    at_max: np.ndarray  # [P - 1] bool
    tops: tuple
    last: np.ndarray  # [V] float32
    last_m: np.float32
    last_logsum: np.float64

    @property
    def nbytes(self) -> int:
        return int(self.keys.nbytes + self.values.nbytes + self.last.nbytes + self.lps.nbytes) + 64 * len(self.tops)


class PrefixStore:
    """Prefixes (`prompt_cut`'s, of SHARE_STEP tokens or more) computed by earlier `score_prompts` calls, by (tokens,
    top), the least recently used dropped past `max_bytes`: lm-evaluation-harness sorts its requests by length, so
    the choices of one item arrive in different requests, and a server keeps the item's prefix from the first to
    the last. A prefix's rows are computed the same way whoever shares it (see the module docstring), so a kept
    prefix gives a prompt the bits computing it again would: the numbers never depend on what was scored before.
    Models with sliding-window layers keep none (their packed layout is windowed per layer)."""

    def __init__(self, max_bytes: int = STORE_BYTES):
        self.max_bytes = max_bytes
        self.entries: OrderedDict[tuple, _Stored] = OrderedDict()
        self.bytes = 0
        self.hits = 0
        self.misses = 0

    @staticmethod
    def usable(model) -> bool:
        c = model.config
        return not c.sliding_window and not (c.layer_types and "sliding" in c.layer_types)

    def get(self, key: tuple) -> _Stored | None:
        entry = self.entries.get(key)
        if entry is not None:
            self.entries.move_to_end(key)
        return entry

    def put(self, key: tuple, entry: _Stored) -> None:
        if key in self.entries or entry.nbytes > self.max_bytes:
            return
        self.entries[key] = entry
        self.bytes += entry.nbytes
        while self.bytes > self.max_bytes:
            _, old = self.entries.popitem(last=False)
            self.bytes -= old.nbytes


@dataclass
class _StoredPrefixPacking(Packing):
    """The packing of a forward whose kept prefixes are left out: `positions` those of the rows it computes (`own`,
    rows of `full`, the layout with every prefix in), their product slots as in `full` (`own_residues`), and its
    attention run on `full` (`attention_ops.attention` calls `attend`), the kept prefixes' keys and values put in
    their rows, those of the prefixes to keep copied out, one layer after the other."""

    full: Packing | None = None
    own: np.ndarray | None = None  # [t] rows of `full`
    own_residues: np.ndarray | None = None  # [t]
    kept: list = field(default_factory=list)  # (start in full, P, _Stored)
    keep: list = field(default_factory=list)  # (start in full, P, [keys, values] filled per layer)
    n_layers: int = 0
    calls: int = 0
    attends_itself: ClassVar[bool] = True

    def slots(self, tokens: np.ndarray) -> np.ndarray:  # [t] -> [t]
        return residue_slots(self.own_residues)

    def windowed(self, window: int) -> "Packing":
        raise NotImplementedError("a PrefixStore is not used with sliding-window layers")

    def attend(self, q, k, v, pool, softcap):  # [1, kv, g, t, hd], [1, kv, t, hd] x2 -> [1, kv, g, t, hd]
        from nlpkit.lm.transformer.attention_ops import packed_attention

        li = self.calls % self.n_layers
        self.calls += 1
        n = self.full.length
        qf = np.zeros(q.shape[:3] + (n, q.shape[4]), np.float32)
        kf = np.zeros(k.shape[:2] + (n, k.shape[3]), np.float32)
        vf = np.zeros_like(kf)
        qf[:, :, :, self.own] = q
        kf[:, :, self.own] = k
        vf[:, :, self.own] = v
        for s, p, entry in self.kept:
            kf[0, :, s:s + p] = entry.keys[li]
            vf[0, :, s:s + p] = entry.values[li]
        for s, p, kv in self.keep:
            if not kv:
                kv += [np.empty((self.n_layers,) + k.shape[1:2] + (p, k.shape[3]), np.float32) for _ in range(2)]
            kv[0][li] = kf[0, :, s:s + p]
            kv[1][li] = vf[0, :, s:s + p]
        return packed_attention(qf, kf, vf, self.full, pool, softcap)[:, :, :, self.own]


def _run_stored(scorer: PackedScorer, segments: list[Segment], out: list[list], top: int, store: PrefixStore) -> None:
    """`score_prompts`'s forwards with a `PrefixStore`: segments whose prefix is kept compute their branches only
    (a prefix computed by one forward of the call is kept for its next ones too)."""
    def key(seg: Segment) -> tuple | None:
        return (tuple(seg.tokens[:seg.prefix]), top) if seg.prefix >= SHARE_STEP else None

    sizes = [len(seg.tokens) - (seg.prefix if key(seg) in store.entries else 0) for seg in segments]
    groups: list[list[int]] = []
    acc = 0
    for i in sorted(range(len(segments)), key=lambda i: -sizes[i]):  # forwards of about pack_tokens computed tokens
        if not groups or (groups[-1] and acc + sizes[i] > scorer.pack_tokens):
            groups.append([])
            acc = 0
        groups[-1].append(i)
        acc += sizes[i]
    for group in groups:
        items, planned = [], set()
        for i in sorted(group):
            seg = segments[i]
            k = key(seg)
            entry = store.get(k) if k is not None else None
            keep = k is not None and entry is None and k not in planned  # computed here, kept once
            if k is not None:
                store.hits += entry is not None
                store.misses += entry is None
                planned.add(k)
            items.append((seg, k, entry, keep))
        _forward_stored(scorer, items, out, top, store)


def _forward_stored(scorer: PackedScorer, items: list, out: list[list], top: int, store: PrefixStore) -> None:
    """One packed forward of (segment, key, kept prefix or None, keep it) items (see `_StoredPrefixPacking`)."""
    layout, own, tokens, starts, at = [], [], [], [], 0
    for seg, _, entry, _ in items:
        layout.append((seg.positions, seg.mask, seg.prefix))
        own.append(np.arange(at + (seg.prefix if entry is not None else 0), at + len(seg.tokens)))
        tokens += list(seg.tokens)
        starts.append(at)
        at += len(seg.tokens)
    own_rows = np.concatenate(own)
    if len(own_rows) < FLOOR_TOKENS:  # a filler segment (packed_scoring.FLOOR_TOKENS); its rows are never read
        n = FLOOR_TOKENS - len(own_rows)
        layout.append(tree(n, []))
        own_rows = np.concatenate([own_rows, np.arange(at, at + n)])
        tokens += [tokens[0]] * n
    full = pack(layout)
    tokens_full = np.asarray(tokens, np.int64)
    residue = np.empty(full.length, np.int64)
    for (s, e, _), prefix in zip(full.segments, full.prefixes):
        residue[s:e] = segment_residues(tokens_full[s:e], full.positions[s:e], prefix)
    packing = _StoredPrefixPacking(full.positions[own_rows], [], None, full=full, own=own_rows,
                                   own_residues=residue[own_rows], n_layers=len(scorer.model.weights.layers))
    for (seg, key, entry, keep), s in zip(items, starts):
        if entry is not None:
            packing.kept.append((s, seg.prefix, entry))
        elif keep:
            packing.keep.append((s, seg.prefix, []))
    index = np.full(full.length, -1, np.int64)
    index[own_rows] = np.arange(len(own_rows))  # a row of full -> its row in this forward
    read = []  # (segment start, scored entry) with its rows in full
    for (seg, _, entry, _), s in zip(items, starts):
        for sc in seg.scored:
            rows = np.asarray(sc[1], np.int64) + s
            read.append(rows[seg.prefix:] if entry is not None else rows)
    rows = np.unique(index[np.concatenate(read)])  # [R] rows of this forward, sorted
    if len(rows) < FLOOR_ROWS:
        rows = np.union1d(rows, np.setdiff1d(np.arange(len(own_rows)), rows)[:FLOOR_ROWS - len(rows)])
    logits = scorer.model.forward(tokens_full[own_rows][None, :], None, packing=packing, rows=rows)[0]  # [R, V]
    scorer.tokens += len(own_rows)
    m, logsum = row_log_normalizers(logits)

    def numbers(frows: np.ndarray, targets: np.ndarray):  # rows of full, their targets -> lps, at max, tops
        i = np.searchsorted(rows, index[frows])
        x = logits[i, targets]
        lp = (x.astype(np.float64) - m[i]) - logsum[i]
        return lp, x == m[i], (top_tokens(logits[i], m[i], logsum[i], top) if top > 0 else ())

    keep_done = {}
    for (seg, key, entry, keep), s, kv in zip(items, starts, _keep_buffers(packing, items)):
        p = seg.prefix
        if keep:  # this prefix's rows, as a later call reads them
            frows = s + np.arange(p)
            lp, at_max, tops = numbers(frows[:-1], np.asarray(seg.tokens[1:p], np.int64))
            last_i = np.searchsorted(rows, index[s + p - 1])
            *_, last_top = numbers(frows[-1:], np.zeros(1, np.int64))
            keep_done[key] = _Stored(kv[0], kv[1], lp, at_max, tuple(tops) + tuple(last_top),
                                     logits[last_i].copy(), m[last_i], logsum[last_i])
        for where, srow, targets, ctx, truncated in seg.scored:
            frows = np.asarray(srow, np.int64) + s
            targets = np.asarray(targets, np.int64)
            if entry is None:
                lp, at_max, tops = numbers(frows, targets)
            else:
                blp, bmax, btops = numbers(frows[p:], targets[p:])
                x = entry.last[targets[p - 1]]
                llp = (np.float64(x) - entry.last_m) - entry.last_logsum
                lp = np.concatenate([entry.lps, [llp], blp])
                at_max = np.concatenate([entry.at_max, [x == entry.last_m], bmax])
                tops = (tuple(entry.tops) + tuple(btops)) if top > 0 else ()
            out[where[0]][where[1]] = ContinuationScore(float(lp.sum()), [int(t) for t in targets],
                                                        bool(np.all(at_max)), truncated, ctx, tuple(lp.tolist()),
                                                        tuple(tops))
    for key, entry in keep_done.items():
        store.put(key, entry)


def _keep_buffers(packing: _StoredPrefixPacking, items: list) -> list:
    """Per item, the [keys, values] its prefix's rows filled during the forward (None when it is not kept)."""
    kept = iter(kv for _, _, kv in packing.keep)
    return [next(kept) if keep else None for *_, keep in items]
