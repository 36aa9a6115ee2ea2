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

The numbers: the rows after the cut are `PackedScorer.score_pairs`'s for the item (the prompt's first `cut` tokens,
the rest), bit for bit; the rows before it are the prefix's own (within float32 rounding, about 1e-7 per token, of
the prompt scored from its first token). Log-probabilities are float64 log-softmax of the float32 logits, as
`packed_scoring` computes them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import numpy as np

from nlpkit.lm.continuations import ContinuationScore
from nlpkit.lm.transformer.packed_scoring import BRANCH_TOKENS, PackedScorer, Segment, _balanced_groups
from nlpkit.lm.transformer.packing import tree

SHARE_STEP = 16   # tokens: a prefix is a multiple of this (prompts of one item cut at the same place)
SHARE_MARGIN = 4  # tokens at least after the cut (a choice's tokens mostly stay out of its context's prefix)


def prompt_cut(fed: int) -> int:
    """The length of the prefix of a prompt of `fed` fed tokens: the largest multiple of SHARE_STEP at most
    fed - SHARE_MARGIN, or 1 (its first token) when that is none.

    >>> [prompt_cut(n) for n in (1, 19, 20, 35, 36)]
    [1, 1, 16, 16, 32]
    """
    cut = SHARE_STEP * ((fed - SHARE_MARGIN) // SHARE_STEP)
    return cut if cut >= SHARE_STEP else 1


def score_prompts(scorer: PackedScorer, prompts: Sequence[tuple[Sequence[int], bool]],
                  top: int = 0) -> list[ContinuationScore]:
    """Each (token ids, next) prompt's scores: `token_logprobs` of its tokens after the first, then with `next` one
    more (the row after the prompt, scored against token 0: read its `top` instead), and each of those rows' `top`
    best tokens when `top` > 0. A prompt needs two tokens, or one with `next`. See the module docstring."""
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
    limit = scorer._rope_limit()
    long = [s for s in segments if int(s.positions.max()) + 1 > limit]
    packed = [s for s in segments if int(s.positions.max()) + 1 <= limit]
    scored: list[list] = [[None] for _ in prompts]
    for s in long:  # RoPE tables that depend on a sequence's length: such a sequence has its forward alone
        scorer._run([s], scored, top)
    for group in _balanced_groups(packed, scorer.pack_tokens):
        scorer._run([packed[i] for i in group], scored, top)
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
