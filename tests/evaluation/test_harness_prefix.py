"""Contexts that share a long token prefix (few-shot examples) computed once (`prefix_scoring.score_shared`): every
continuation's log-probability within 1e-5 of scoring it after its whole context, the same tokens and is_greedy,
fewer tokens through the model; pairs too long for the window and contexts without a rest go the usual way."""

from __future__ import annotations

import math

from nlpkit.lm.load import load_language_model
from nlpkit.lm.transformer.prefix_scoring import score_shared

SHOTS = ("The following are questions about colours and animals.\n\n"
         "Q: What colour is the sky?\nA: blue\n\nQ: Which animal barks?\nA: dog\n\n"
         "Q: What colour is grass?\nA: green\n\nQ: Which animal says moo?\nA: cow\n\n")
QUESTIONS = ["Q: What colour is snow?\nA:", "Q: Which animal purrs?\nA:", "Q: What colour is coal?\nA:",
             "Q: Which bird hoots?\nA:"]
CHOICES = [" A", " B", " white", " a small black cat", " owl"]


def _requests():
    return [(SHOTS + q, CHOICES) for q in QUESTIONS] + [(SHOTS.rstrip(), [" Q"]), ("Short.", [" yes", " no"])]


def test_shared_prefix_scores_equal_whole_context_scores():
    lm = load_language_model(None)  # the shipped model
    scorer = lm.continuation_scorer(None)
    ref = scorer.score_requests(_requests())
    before = scorer.tokens
    got = score_shared(scorer, _requests())
    shared_tokens = scorer.tokens - before
    assert [[s.ids for s in r] for r in got] == [[s.ids for s in r] for r in ref]
    assert [[s.is_greedy for s in r] for r in got] == [[s.is_greedy for s in r] for r in ref]
    for r, g in zip(ref, got):
        for a, b in zip(r, g):
            assert math.isclose(a.logprob, b.logprob, rel_tol=1e-5, abs_tol=1e-5), (a.logprob, b.logprob)
    scorer.tokens = 0
    scorer.score_requests(_requests())
    assert shared_tokens < scorer.tokens
