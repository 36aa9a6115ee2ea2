"""What scoring a continuation gives, whatever the model: `ContinuationScore`, and the `ContinuationScorer` protocol
that `LanguageModel.continuation_scorer` returns. The backends' scorers (`nlpkit.lm.transformer.packed_scoring`,
`nlpkit.lm.ngram.ngram_continuations`) implement it; `nlpkit score` (`nlpkit.evaluation`) is written on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence, runtime_checkable


@dataclass
class ContinuationScore:
    """One continuation: its log-probability (nats, summed over its tokens), its token ids, whether every token is
    the argmax, and whether its context was cut to fit the window. A scorer that keeps them also gives each
    token's log-probability (`token_logprobs`, whose sum is `logprob`) and, when asked, each position's most
    likely tokens (`top`: (ids, log-probabilities) per token, best first): what `nlpkit serve` echoes."""

    logprob: float
    ids: list[int]
    is_greedy: bool
    truncated: bool = False
    context_ids: tuple[int, ...] = ()
    token_logprobs: tuple[float, ...] = ()
    top: tuple[tuple[tuple[int, ...], tuple[float, ...]], ...] = ()

    @property
    def tokens(self) -> int:
        return len(self.ids)


Request = tuple[str, Sequence[str]]   # (context, its continuations)


@runtime_checkable
class ContinuationScorer(Protocol):
    """Scores continuations of contexts on one model: one scoring method, `score_requests`.

    - `score_requests(requests)`: for each (context, continuations) request, one `ContinuationScore` per
      continuation, in order (lm-evaluation-harness's encoding and left truncation for a transformer; words after
      `<s>`, as KenLM's full_scores, for an n-gram model).
    - `batched` (declared by the scorer, never probed): True when one call packs many requests into few forwards
      (the transformer engine), so callers gain by handing whole blocks of requests; False when requests are
      scored one by one (blocks then only bound memory). Either way the numbers do not depend on the grouping.
    - `render(context)`: the context as the model sees it (a chat template's user turn with ``--chat``; the
      context itself otherwise), as records that show the model's input print it.
    - `check(context, continuations)`: the (context ids, continuation ids) pairs a request is scored on, or the
      `NlpkitError` scoring it would raise, without scoring: an evaluation checks every item before it scores any.
    """

    batched: bool
    window: int | None   # the context window a request is cut to (None: no window, an n-gram model's context)

    def render(self, context: str) -> str: ...

    def score_requests(self, requests: Sequence[Request]) -> list[list[ContinuationScore]]: ...

    def check(self, context: str, continuations: Sequence[str]) -> list[tuple[list[int], list[int]]]: ...


def score_requests(scorer: ContinuationScorer, requests: Sequence[Request]) -> list[list[ContinuationScore]]:
    """Each (context, continuations) request's scores (`scorer.score_requests`; a whole block at once whatever the
    scorer: a `batched` one packs it, another scores it request by request)."""
    return scorer.score_requests(list(requests))
