"""Log-likelihoods of continuations given a context under an n-gram model: KenLM's `full_scores` on the same words.

The context and each continuation are split into words as `perplexity` splits a line (`query_words`, after the
model's recorded lowercasing / tokenizer); the sentence `<s> context-words continuation-words` is scored as KenLM's
`full_scores(sentence, bos=True, eos=False)` scores it, and a continuation's log-likelihood is the sum of its own
words' scores, in nats (log10 x ln 10). No `</s>`: a continuation is not the end of a sentence. A continuation is
greedy when each of its words is the most likely word after its history, `<s>` left out (it is never a prediction:
KenLM's query never predicts it, and `sample`/`generate` never draw it). Nothing is truncated: an n-gram model
sees only its last order - 1 words anyway.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from nlpkit.errors import NlpkitError
from nlpkit.lm.continuations import ContinuationScore
from nlpkit.lm.ngram.ngram_model import NgramModel, log10_to_nats
from nlpkit.lm.ngram.line_scoring import query_words


def words_of(text: str, transform: Callable[[str], str] | None) -> list[str]:
    """The words the model scores for `text`.

    >>> words_of(" the cat\\n", None)
    ['the', 'cat']
    """
    return query_words(transform(text) if transform else text)


class NgramContinuationScorer:
    """Scores continuations of contexts on one n-gram model (words, `<s>` first): a
    `nlpkit.lm.continuations.ContinuationScorer`."""

    def __init__(self, model: NgramModel, transform: Callable[[str], str] | None = None):
        self.model = model
        self.transform = transform

    batched = False   # requests are scored one by one: nothing to pack
    window = None     # an n-gram model reads its last n-1 words: no window cuts a context

    def check(self, context: str, continuations: Sequence[str]) -> list[tuple[list[int], list[int]]]:
        """The (context ids, continuation ids) this request is scored on (`<s>` first), or the NlpkitError scoring
        it would raise (a continuation without words), without scoring it: an evaluation checks every item before
        it scores any."""
        ctx_ids, _ = self.model.lookup(words_of(context, self.transform))
        ctx = [self.model.bos_id] + ctx_ids.tolist()
        pairs = [(ctx, self.model.lookup(words_of(c, self.transform))[0].tolist()) for c in continuations]
        if any(not cont for _, cont in pairs):
            raise NlpkitError("the continuation has no words: nothing to score")
        return pairs

    def render(self, context: str) -> str:
        """The context as given (an n-gram model has no chat template)."""
        return context

    def score_requests(self, requests: Sequence[tuple[str, Sequence[str]]]) -> list[list[ContinuationScore]]:
        """Each (context, continuations) request's scores: word ids (OOV -> <unk>) of `<s>` + the context's words,
        and of each continuation's words."""
        out = []
        for context, continuations in requests:
            ctx_ids, _ = self.model.lookup(words_of(context, self.transform))
            ctx = [self.model.bos_id] + ctx_ids.tolist()
            scores = self._score_ids(ctx, [self.model.lookup(words_of(c, self.transform))[0].tolist()
                                           for c in continuations])
            for s in scores:
                s.context_ids = tuple(ctx)
            out.append(scores)
        return out

    def _score_ids(self, ctx: list[int], conts: list[list[int]]) -> list[ContinuationScore]:
        """Each continuation's log-likelihood after the context (see the module docstring)."""
        out = []
        for cont in conts:
            if not cont:
                raise NlpkitError("the continuation has no words: nothing to score")
            seq = np.asarray(ctx + cont, dtype=np.int64)  # [T]  <s> first
            log10, _ = self.model.score_sequence(seq, np.arange(len(seq)))  # [T - 1]
            own = log10[len(ctx) - 1:]  # [m]
            greedy = all(self._most_likely(ctx + cont[:i]) == w for i, w in enumerate(cont))
            out.append(ContinuationScore(float(log10_to_nats(own.astype(np.float64)).sum()), list(cont), greedy))
        return out

    def _most_likely(self, history: list[int]) -> int:
        """The most likely next word after `history`, `<s>` excluded (ties: the lowest id, as argmax)."""
        dist = self.model.next_log10(history)  # [V]
        if self.model.bos_id >= 0:
            dist[self.model.bos_id] = -np.inf
        return int(np.argmax(dist))
