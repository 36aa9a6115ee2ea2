"""A call's requests scored in parts (`score --tasks --dask`: each worker some of them) with the prefixes of the
whole call (`prefix_summary` of each part, `merge_prefix_summaries`) give the whole call's bits: every context runs
as the same shared prefix and branch. Each part left to find its own prefixes would not (a context alone in its part
runs whole; a part's contexts may share a longer prefix)."""

from __future__ import annotations

from nlpkit.lm.load import load_language_model
from nlpkit.lm.transformer.prefix_scoring import merge_prefix_summaries, prefix_summary, score_shared

SHOTS = ("The following are questions about colours and animals.\n\n"
         "Q: What colour is the sky?\nA: blue\n\nQ: Which animal barks?\nA: dog\n\n"
         "Q: What colour is grass?\nA: green\n\nQ: Which animal says moo?\nA: cow\n\n")
QUESTIONS = ["Q: What colour is snow?\nA:", "Q: Which animal purrs?\nA:", "Q: What colour is coal?\nA:",
             "Q: Which bird hoots?\nA:"]
CHOICES = [" A", " B", " white", " a small black cat", " owl"]


def _bits(scores) -> list:
    return [[(s.logprob, s.is_greedy) for s in r] for r in scores]


def test_parts_scored_with_the_whole_calls_prefixes_give_its_bits():
    lm = load_language_model(None)  # the shipped model: its bits show where a context's prefix was cut
    scorer = lm.continuation_scorer(None)
    requests = [(SHOTS + q, CHOICES) for q in QUESTIONS] + [(SHOTS.rstrip(), [" Q"]), ("Short.", [" yes", " no"])]
    whole = score_shared(scorer, requests)
    parts = [requests[:1], requests[1:3], requests[3:]]
    prefixes = merge_prefix_summaries([prefix_summary(scorer, p) for p in parts])
    assert list(prefixes.values()) and prefixes == merge_prefix_summaries([prefix_summary(scorer, requests)])
    split = [r for p in parts for r in score_shared(scorer, p, prefixes)]
    assert _bits(split) == _bits(whole)
    alone = [r for p in parts for r in score_shared(scorer, p)]
    assert _bits(alone) != _bits(whole)   # what the merged prefixes are for


def test_a_prefix_needs_two_distinct_contexts():
    lm = load_language_model(None)
    scorer = lm.continuation_scorer(None)
    one = [(SHOTS + QUESTIONS[0], CHOICES)]
    assert merge_prefix_summaries([prefix_summary(scorer, one), prefix_summary(scorer, one)]) == {}
