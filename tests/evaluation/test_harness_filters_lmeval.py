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


RESPS = ["The answer is (B).", " plausible, yes.", "So the answer is False.", "apple fig pear oven", "eight", "-1",
         "Answer: A", "#### 42", " Paris, France.", "not plausible", "I would say twenty one", "(a) is it",
         "", "Let's think. The answer is (A).", "no", "alpha beta mu zeta zeta"]
FILTERED_TASKS = ["bbh_zeroshot_snarks", "bbh_cot_zeroshot_snarks", "bbh_zeroshot_word_sorting",
                  "bbh_zeroshot_sports_understanding", "bbh_zeroshot_multistep_arithmetic_two",
                  "bbh_fewshot_boolean_expressions", "bbh_cot_fewshot_boolean_expressions",
                  "mmlu_flan_n_shot_generative_anatomy", "mmlu_anatomy_generative", "mmlu_pro_biology", "triviaqa",
                  "nq_open", "gsm8k"]


@pytest.fixture(scope="module")
def task_dir(tmp_path_factory):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from real_task_data import write_wrappers

    return write_wrappers(tmp_path_factory.mktemp("real_tasks"), Path(lm_eval.__file__).parent / "tasks")


@pytest.mark.parametrize("name", FILTERED_TASKS)
def test_real_task_filter_lists_filter_as_lmevals(task_dir, name):
    """A real task file's filter_list (built-in filters, its `!function` filter classes such as bbh's
    MultiChoiceRegexFilter, MapRegexFilter, NumberParseRegexFilter, WordSortFilter) gives lm-eval's filtered
    responses on the same responses."""
    from lm_eval.tasks import TaskManager

    from nlpkit.evaluation.harness.filters import apply_filters
    from nlpkit.evaluation.harness.run import RunOptions, build_instances, prepare
    from nlpkit.evaluation.harness.selection import select
    from nlpkit.evaluation.harness.task_files import TaskRegistry

    ref_task = TaskManager(include_path=str(task_dir), include_defaults=False).load([name])["tasks"][name]
    if ref_task.get_config("num_fewshot") is None:
        ref_task.set_config(key="num_fewshot", value=0)
    ref_task.set_fewshot_seed(seed=1234)
    ref_task.build_all_requests()
    options = RunOptions()
    p = prepare(select([name], TaskRegistry([task_dir])), options)[name]
    got = [i for insts in build_instances(p, options, None) for i in insts]
    assert len(got) == len(ref_task.instances)
    for shift in range(len(RESPS)):
        for insts in (ref_task.instances, got):
            for inst in insts:
                inst.resps = [RESPS[(inst.doc_id + shift) % len(RESPS)]]
                inst.filtered_resps = {}
        ref_task.apply_filters()
        apply_filters(p.filters, got)
        ref = {(i.doc_id, i.idx): i.filtered_resps for i in ref_task.instances}
        assert {(i.doc_id, i.idx): i.filtered_resps for i in got} == ref, shift
