"""`score --tasks` seeds Python's and numpy's global generators as lm-evaluation-harness's simple_evaluate does
(random 0, numpy 1234) before any task hook runs: a process_docs hook that shuffles (leaderboard_gpqa's
`random.shuffle` of the choices) builds lm-eval's documents, whatever drew from those generators before."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("datasets")
pytest.importorskip("yaml")

HOOKS = '''import random

import numpy as np


def shuffle(dataset):
    def one(doc):
        choices = list(doc["choices"])
        random.shuffle(choices)
        return {**doc, "choices": choices, "noise": float(np.random.rand())}
    return dataset.map(one)
'''


def _expected(rows: list[dict]) -> list[dict]:
    random.seed(0)
    np.random.seed(1234)
    out = []
    for r in rows:
        c = list(r["choices"])
        random.shuffle(c)
        out.append({**r, "choices": c, "noise": float(np.random.rand())})
    return out


def test_process_docs_hooks_draw_lmevals_random_numbers(tmp_path: Path):
    from nlpkit.evaluation.harness.run import RunOptions, prepare
    from nlpkit.evaluation.harness.selection import select
    from nlpkit.evaluation.harness.task_files import TaskRegistry

    rows = [{"q": f"Question {i}?", "choices": ["a", "b", "c", "d"], "label": 0} for i in range(6)]
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "hooks.py").write_text(HOOKS)
    (tmp_path / "t.yaml").write_text(
        f"task: t_shuffle\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {tmp_path / 'data.jsonl'}\n"
        "test_split: test\noutput_type: multiple_choice\nprocess_docs: !function hooks.shuffle\n"
        "doc_to_text: q\ndoc_to_choice: choices\ndoc_to_target: label\n")
    random.seed(99)  # whatever ran before
    np.random.seed(99)
    docs = [d for _, d in prepare(select(["t_shuffle"], TaskRegistry([tmp_path], lmeval_dir=None)),
                                  RunOptions())["t_shuffle"].docs]
    assert docs == _expected(rows)
