"""`score --tasks` filters against lm-evaluation-harness 0.4.13's own filter classes, in-process on the same
responses and documents (skipped without lm-eval): the same filtered responses, fallbacks included."""

from __future__ import annotations

import pytest

lm_eval = pytest.importorskip("lm_eval")

from nlpkit.evaluation.harness.filters import FILTERS  # noqa: E402

DOCS = [{"choices": ["Paris", "Paris, France", "Rome", "the city of light"]},
        {"choices": ["yes", "no", "maybe"]},
        {"choices": ["1/2", "0.5", "a half!", "Half"]}]
RESPONSES = [
    ["The answer is (B).", "I think Paris, France is right", "paris", "Answer: C", "nothing here", "", "(Z) or (A)"],
    ["NO!", "Maybe.", "answer:  B", "yes and no", ":A", "perhaps (C)", "Y E S"],
    ["a half", "A HALF!!", "half", "0.5 or 1/2", ": D", "(d)", "\u00bfhalf?"],
]


def _lmeval(name: str, kwargs: dict):
    import lm_eval.filters  # noqa: F401 (registers lm-eval's filters)
    from lm_eval.api.registry import get_filter

    return get_filter(name)(**kwargs)


@pytest.mark.parametrize("kwargs", [
    {"regex_pattern": r"(\([A-Z]\))", "group_select": 0, "ignore_case": True, "ignore_punctuation": True},
    {"regex_pattern": r"(\([A-Z]\))", "group_select": -1},
    {"regex_pattern": r"answer is (\(?[A-D]\)?)|(nothing)", "regexes_to_ignore": [r"\bthe\b", ","],
     "ignore_case": True, "fallback": "?"},
])
def test_multi_choice_regex_picks_what_lmevals_picks(kwargs):
    """The pattern first; else a choice's text (after the ignore options, the longest choice first) as its letter;
    else a ': X' letter; else the fallback."""
    ref = list(_lmeval("multi_choice_regex", kwargs).apply([list(r) for r in RESPONSES], DOCS))
    got = list(FILTERS["multi_choice_regex"](**kwargs)([list(r) for r in RESPONSES], DOCS))
    assert got == ref
