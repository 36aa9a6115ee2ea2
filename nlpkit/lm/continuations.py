"""What scoring a continuation gives, whatever the model: `ContinuationScore`, `score_grouped`, which scores
(context ids, continuation ids) pairs the continuations of one context together, and `score_requests`, many
(context, continuations) requests at once. The backends' scorers (`nlpkit.lm.transformer.continuations`,
`nlpkit.lm.ngram.continuations`) return these; `nlpkit score` reads them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence


@dataclass
class ContinuationScore:
    """One continuation: its log-probability (nats, summed over its tokens), its token ids, whether every token is
    the argmax, and whether its context was cut to fit the window."""

    logprob: float
    ids: list[int]
    is_greedy: bool
    truncated: bool = False
    context_ids: tuple[int, ...] = ()

    @property
    def tokens(self) -> int:
        return len(self.ids)


def score_grouped(scorer, pairs: list[tuple[list[int], list[int]]]) -> list[ContinuationScore]:
    """Score (context ids, continuation ids) pairs, the continuations of one context together (an empty
    context's encoding can differ between continuations: see `encode_pair`)."""
    groups: dict[tuple[int, ...], list[int]] = {}
    for j, (ctx, _) in enumerate(pairs):
        groups.setdefault(tuple(ctx), []).append(j)
    out: list[ContinuationScore | None] = [None] * len(pairs)
    for ctx, js in groups.items():
        for j, s in zip(js, scorer.score_ids(list(ctx), [pairs[j][1] for j in js])):
            s.context_ids = ctx
            out[j] = s
    return out  # type: ignore[return-value]


def score_requests(scorer, requests: Sequence[tuple[str, Sequence[str]]]) -> list[list[ContinuationScore]]:
    """Each (context, continuations) request's scores: in one batch when the scorer packs many requests into a
    forward (`score_batch`: the transformer engine), else one request at a time (`score`)."""
    batch = getattr(scorer, "score_batch", None)
    if batch is not None:
        return batch(requests)
    return [scorer.score(context, conts) for context, conts in requests]
