"""Continuations of many contexts that share a long token prefix (few-shot examples drawn `first_n`, a description),
with the prefix computed once per packed segment: `score_shared(scorer, requests)`.

`PackedScorer` shares a context among its own continuations; contexts that differ anywhere each run whole. Here the
contexts of a call are grouped by their first `MIN_SHARED` tokens; a group's longest common token prefix P is the
segment's prefix (`packing.tree`), and each context's rest (its tokens after P) is a branch, followed by a
continuation's tokens but its last (one branch per multi-token continuation; single-token continuations -- MMLU's
" A".." D" -- are all read at the rest's last row, with no branch of their own). A branch sees P and itself only, as a
KV cache holding P would, so each continuation is computed as after its whole context, within float rounding of
scoring it alone (not bit-identical: the rest runs as a branch instead of inside the prefix). Tokens are
lm-evaluation-harness's (`encode_pair`: the split is made on token ids, never on text); a pair whose context and
continuation exceed the window, or a context without a rest, goes the usual way (`PackedScorer.score_pairs`).

Opt-in (the harness asks for it): `nlpkit score` on item files keeps its per-item bits whatever else is in a block.

A document's own contexts (winogrande's `multiple_input`: the sentence up to the blank with each option, one shared
continuation) share their common token prefix too, whatever else is in the call: `document_split` is the length of
that prefix from the document's contexts alone (given with each request, `splits`), so a context runs as the same
prefix and branch, the same bits, scored with its siblings, alone or in any batch (`PackedScorer.score_pairs`'s
`splits`). A context in a few-shot cluster goes the cluster's way.

Which contexts share which prefix depends on every context of the call. A call split into parts (`score --tasks
--dask`: each worker scores some of the requests) plans the prefixes of the whole first: each part's
`prefix_summary`, merged by `merge_prefix_summaries` into the `prefixes` every part's `score_shared` is given, so
that each context runs as the same prefix and branch, the same bits, wherever it is scored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from nlpkit.lm.continuations import ContinuationScore
from nlpkit.lm.transformer.packed_scoring import PackedScorer, Segment, encode_pair, forward_groups
from nlpkit.lm.transformer.packing import tree

MIN_SHARED = 48  # tokens: a shorter common prefix is not worth a segment of its own
MIN_SPLIT = 4  # tokens: a document's contexts sharing fewer run whole (`document_split`)
SEGMENT_TOKENS = 4096  # a prefix and as many branches as fit (a prefix longer than a quarter of it: 4 x prefix)


def _lcp(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


@dataclass
class Cluster:
    """Contexts (token tuples longer than `MIN_SHARED`) that begin with the same `MIN_SHARED` tokens: one of them
    (`first`), the length of their common prefix (`lcp`), the shortest's length, and the hashes of up to two
    distinct ones (a prefix is shared by two contexts or more)."""

    first: tuple
    lcp: int
    shortest: int
    distinct: frozenset


def _contexts(scorer, requests: Sequence[tuple[str, Sequence[str]]]):
    """(each request's encoded pairs, context tokens -> [(request, continuation)] in first-seen order)."""
    pairs = [[encode_pair(scorer.model, ctx, c) for c in conts] for ctx, conts in requests]
    by_ctx: dict[tuple, list[tuple[int, int]]] = {}
    for r, ps in enumerate(pairs):
        for j, (ctx, cont) in enumerate(ps):
            scorer._check_pair(ctx, cont)
            by_ctx.setdefault(tuple(ctx), []).append((r, j))
    return pairs, by_ctx


def _summary(contexts) -> dict[tuple, Cluster]:
    out: dict[tuple, Cluster] = {}
    for ctx in contexts:
        if len(ctx) <= MIN_SHARED:
            continue
        key = ctx[:MIN_SHARED]
        c = out.get(key)
        if c is None:
            out[key] = Cluster(ctx, len(ctx), len(ctx), frozenset([hash(ctx)]))
            continue
        distinct = c.distinct if len(c.distinct) > 1 else c.distinct | {hash(ctx)}
        out[key] = Cluster(c.first, min(c.lcp, _lcp(c.first, ctx)), min(c.shortest, len(ctx)), distinct)
    return out


def prefix_summary(scorer, requests: Sequence[tuple[str, Sequence[str]]]) -> dict[tuple, Cluster]:
    """The prefix clusters of one part of a call's requests (what `merge_prefix_summaries` needs of it); {} for a
    scorer that shares no prefix."""
    if not isinstance(scorer, PackedScorer):
        return {}
    return _summary(_contexts(scorer, requests)[1])


def merge_prefix_summaries(parts: Sequence[dict[tuple, Cluster]]) -> dict[tuple, int]:
    """The shared prefixes of the parts' requests together: first `MIN_SHARED` tokens -> the prefix's length, for
    every cluster of two contexts or more whose common prefix (leaving each context at least one token of its own)
    is at least `MIN_SHARED` tokens."""
    merged: dict[tuple, Cluster] = {}
    for part in parts:
        for key, c in part.items():
            m = merged.get(key)
            if m is None:
                merged[key] = c
                continue
            distinct = m.distinct if len(m.distinct) > 1 else (m.distinct | c.distinct)
            merged[key] = Cluster(m.first, min(m.lcp, c.lcp, _lcp(m.first, c.first)), min(m.shortest, c.shortest),
                                  distinct)
    out = {}
    for key, c in merged.items():
        lcp = min(c.lcp, c.shortest - 1)  # every context keeps a rest of at least one token
        if len(c.distinct) > 1 and lcp >= MIN_SHARED:
            out[key] = lcp
    return out


def document_split(scorer, context: str, siblings: Sequence[str]) -> int:
    """The token prefix a document's contexts (`siblings`, `context` among them) share, as a length: their longest
    common prefix of token ids (`encode_pair`'s context tokens), each keeping at least one token of its own; 0 when
    it is under MIN_SPLIT tokens, when the document has no other context, or for a scorer that shares nothing. A
    function of the document alone."""
    if not isinstance(scorer, PackedScorer) or not context:
        return 0
    others = [o for o in dict.fromkeys(siblings) if o and o != context]
    if not others:
        return 0
    ctx = encode_pair(scorer.model, context, " x")[0]  # the context's tokens do not depend on the continuation
    lcp = len(ctx) - 1
    for other in others:
        ids = encode_pair(scorer.model, other, " x")[0]
        lcp = min(lcp, _lcp(ctx, ids), len(ids) - 1)
    return lcp if lcp >= MIN_SPLIT else 0


def score_shared(scorer, requests: Sequence[tuple[str, Sequence[str]]],
                 prefixes: dict[tuple, int] | None = None,
                 splits: Sequence[int] | None = None) -> list[list[ContinuationScore]]:
    """`scorer.score_requests(requests)`, with contexts that share a long token prefix computing it once (a
    `PackedScorer`; any other scorer scores as it does). `prefixes`: the shared prefixes of a whole call this is a
    part of (`merge_prefix_summaries`); None: the prefixes these requests share. `splits`: per request, the
    prefix its document's contexts share (`document_split`; 0: none), run once for the contexts that have it."""
    if not isinstance(scorer, PackedScorer):
        return scorer.score_requests(list(requests))
    pairs, by_ctx = _contexts(scorer, requests)
    out: list[list] = [[None] * len(p) for p in pairs]
    if prefixes is None:
        prefixes = merge_prefix_summaries([_summary(by_ctx)])
    clusters: dict[tuple, list[tuple]] = {}
    for ctx in by_ctx:
        if len(ctx) > MIN_SHARED and ctx[:MIN_SHARED] in prefixes:
            clusters.setdefault(ctx[:MIN_SHARED], []).append(ctx)
    in_cluster = {ctx for ctxs in clusters.values() for ctx in ctxs}
    shared: set = set()
    segments: list[Segment] = []
    for key, ctxs in clusters.items():
        lcp = prefixes[key]
        branches = []  # (tokens, [(where, rows in the branch, cont, ctx)])
        for ctx in ctxs:
            rest = list(ctx[lcp:])
            members = [(w, pairs[w[0]][w[1]][1]) for w in by_ctx[ctx]
                       if len(ctx) + len(pairs[w[0]][w[1]][1]) <= scorer.window + 1]
            if not members:
                continue
            base: list = [rest, []]
            branches.append(base)
            for w, cont in members:
                shared.add(w)
                if len(cont) == 1:
                    base[1].append((w, [len(rest) - 1], cont, ctx))
                else:
                    branches.append([rest + list(cont[:-1]),
                                     [(w, [len(rest) - 1 + i for i in range(len(cont))], cont, ctx)]])
        branches = [b for b in branches if b[1]]
        segments += _segments(list(ctxs[0][:lcp]), branches)
    for group in forward_groups([len(s.tokens) for s in segments], scorer.pack_tokens):
        scorer.run_forward([segments[i] for i in group], out)
    rest_requests = [[pairs[r][j] for j in range(len(pairs[r])) if (r, j) not in shared] for r in range(len(pairs))]
    rest_splits = [0 if not splits or any(tuple(c) in in_cluster for c, _ in pairs[r]) else splits[r]
                   for r in range(len(pairs))]
    if any(rest_requests):
        scored = scorer.score_pairs(rest_requests, splits=rest_splits)
        for r in range(len(pairs)):
            k = 0
            for j in range(len(pairs[r])):
                if (r, j) not in shared:
                    out[r][j] = scored[r][k]
                    k += 1
    return out


def _segments(prefix: list[int], branches: list) -> list[Segment]:
    """The prefix and its branches in segments of about `SEGMENT_TOKENS` tokens (the prefix repeated in each)."""
    budget = max(SEGMENT_TOKENS, 4 * len(prefix))
    out, run, size = [], [], len(prefix)
    for b in branches:
        if run and size + len(b[0]) > budget:
            out.append(_segment(prefix, run))
            run, size = [], len(prefix)
        run.append(b)
        size += len(b[0])
    if run:
        out.append(_segment(prefix, run))
    return out


def _segment(prefix: list[int], branches: list) -> Segment:
    positions, mask = tree(len(prefix), [len(toks) for toks, _ in branches])
    tokens, scored, start = list(prefix), [], len(prefix)
    for toks, members in branches:
        for w, rows, cont, ctx in members:
            scored.append((w, [start + r for r in rows], list(cont), tuple(ctx), False))
        tokens += toks
        start += len(toks)
    return Segment(tokens, positions, mask, scored, len(prefix))
