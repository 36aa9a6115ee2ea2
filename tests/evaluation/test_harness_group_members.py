"""A group that names one task twice (plainly and as a dict with overrides, as a wrapper around mmlu_pro may) lists
it once, as lm-eval does: its group_subtasks, sample_len and sample_count count the task once, the later entry's
overrides (the alias) win."""

from __future__ import annotations

import pytest

pytest.importorskip("yaml")


def test_task_named_twice_in_a_group_is_one_member(tmp_path):
    from nlpkit.evaluation.harness.selection import select
    from nlpkit.evaluation.harness.task_files import TaskRegistry

    (tmp_path / "t.yaml").write_text("task: t_one\ndataset_path: json\noutput_type: multiple_choice\n"
                                     "doc_to_text: q\ndoc_to_choice: choices\ndoc_to_target: label\n", encoding="utf-8")
    (tmp_path / "g.yaml").write_text("group: g_twice\ntask:\n  - t_one\n  - task: t_one\n    task_alias: again\n"
                                     "aggregate_metric_list:\n  - metric: acc\n", encoding="utf-8")
    sel = select(["g_twice"], TaskRegistry([tmp_path]))
    assert sel.groups["g_twice"].child_names == ["t_one"]
    assert sel.groups["g_twice"].leaf_tasks() == ["t_one"]
    assert list(sel.tasks) == ["t_one"]
