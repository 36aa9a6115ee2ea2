"""`score --tasks` on bad input: one line `nlpkit: error: ...` naming the file (and line) or the task and what is
wrong, exit 1 (2 for an unknown task name or a usage error), no traceback, and no output file written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("datasets")
pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[2]
MODEL = str(ROOT / "tests" / "fixtures" / "score" / "models" / "gpt2-bpe")
GOOD = """task: t_ok
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{q}}}}"
doc_to_choice: choices
doc_to_target: label
"""
UTILS = '''
def boom(dataset):
    raise ValueError("no documents today")


def bad_results(doc, results):
    raise KeyError("gold")
'''


@pytest.fixture
def tasks(tmp_path) -> Path:
    d = tmp_path / "tasks"
    d.mkdir()
    data = d / "data.jsonl"
    data.write_text("".join(json.dumps({"q": f"Question {i}?", "choices": ["yes", "no"], "label": i % 2}) + "\n"
                            for i in range(4)))
    (d / "utils.py").write_text(UTILS)
    (d / "ok.yaml").write_text(GOOD.format(data=data))
    return d


def _variant(d: Path, name: str, text: str) -> None:
    (d / f"{name}.yaml").write_text(text)


def _run(cli, d: Path, task: str, *extra: str):
    res = cli("score", "-m", MODEL, "--tasks", task, "--include-path", str(d), *extra)
    err = res.stderr.decode()
    assert "Traceback" not in err
    return res.returncode, [line for line in err.splitlines() if line.startswith("nlpkit: error")]


def test_unknown_task_is_a_usage_error_naming_the_closest(cli, tasks):
    code, lines = _run(cli, tasks, "t_okk")
    assert code == 2 and len(lines) == 1
    assert "unknown task 't_okk'" in lines[0] and "did you mean t_ok" in lines[0]


def test_missing_include_names_the_file_and_the_include(cli, tasks):
    _variant(tasks, "inc", "include: nowhere.yaml\ntask: t_inc\n")
    code, lines = _run(cli, tasks, "t_inc")
    assert code == 1 and len(lines) == 1
    assert "inc.yaml" in lines[0] and "include 'nowhere.yaml'" in lines[0]


def test_yaml_error_names_the_file_and_line(cli, tasks):
    _variant(tasks, "broken", "task: t_broken\ndataset_path: json\n  bad: [1, 2\n")
    code, lines = _run(cli, tasks, "t_broken")
    assert code == 1 and len(lines) == 1
    assert "broken.yaml:3: YAML error" in lines[0]


def test_missing_data_file_and_missing_split(cli, tasks):
    _variant(tasks, "nofile", GOOD.format(data=tasks / "missing.jsonl").replace("t_ok", "t_nofile"))
    code, lines = _run(cli, tasks, "t_nofile")
    assert code == 1 and len(lines) == 1 and "task t_nofile: data file not found" in lines[0]
    _variant(tasks, "nosplit", GOOD.format(data=tasks / "data.jsonl").replace("t_ok", "t_nosplit")
             .replace("test_split: test", "test_split: validation"))
    code, lines = _run(cli, tasks, "t_nosplit")
    assert code == 1 and len(lines) == 1 and "split 'validation' is not in its dataset (splits: test)" in lines[0]


def test_hook_that_raises_names_task_and_hook(cli, tasks):
    _variant(tasks, "hook", GOOD.format(data=tasks / "data.jsonl").replace("t_ok", "t_hook")
             + "process_docs: !function utils.boom\n")
    code, lines = _run(cli, tasks, "t_hook")
    assert code == 1 and len(lines) == 1
    assert "task t_hook: process_docs hook utils.boom raised ValueError: no documents today" in lines[0]


def test_hooks_needing_a_missing_package_name_the_task_and_the_package(cli, tasks):
    """minerva_math's and ifeval's hooks import sympy/math_verify and langdetect: without them, one line naming the
    task, the hook file and the package (backquotes in the hook's message are not read as nlpkit options)."""
    (tasks / "needs.py").write_text("raise ModuleNotFoundError('`sympy` and `math_verify` are required')\n"
                                    "def text(doc):\n    return doc['q']\n")
    _variant(tasks, "needs", GOOD.format(data=tasks / "data.jsonl").replace("t_ok", "t_needs")
             .replace('doc_to_text: "{{q}}"', "doc_to_text: !function needs.text"))
    code, lines = _run(cli, tasks, "t_needs")
    assert code == 1 and len(lines) == 1
    assert lines[0].startswith("nlpkit: error: task t_needs: ") and "needs.py: importing it raised " \
        "ModuleNotFoundError: 'sympy' and 'math_verify' are required (the task's hooks need a package" in lines[0]


def test_unsafe_code_task_is_refused_before_its_hooks_import(cli, tasks):
    """mbpp/humaneval (`unsafe_code: true`) run the model's code: refused by name, their hooks never imported."""
    (tasks / "danger.py").write_text("raise SystemExit('imported!')\ndef text(doc):\n    return doc['q']\n")
    _variant(tasks, "unsafe", GOOD.format(data=tasks / "data.jsonl").replace("t_ok", "t_unsafe")
             .replace('doc_to_text: "{{q}}"', "doc_to_text: !function danger.text") + "unsafe_code: true\n")
    code, lines = _run(cli, tasks, "t_unsafe")
    assert code == 1 and len(lines) == 1
    assert "task t_unsafe executes the model's generated code (unsafe_code: true" in lines[0]


def test_filter_class_that_raises_names_task_and_hook(cli, tasks):
    (tasks / "filt.py").write_text("class Picky:\n    def __init__(self, strict=True):\n        pass\n\n"
                                   "    def apply(self, resps, docs):\n        raise ValueError('no `luck`')\n")
    _variant(tasks, "filt", GOOD.format(data=tasks / "data.jsonl").replace("t_ok", "t_filt")
             .replace("output_type: multiple_choice", "output_type: generate_until")
             + "generation_kwargs:\n  max_gen_toks: 2\nfilter_list:\n  - name: x\n    filter:\n"
             "      - function: !function filt.Picky\n        strict: false\n")
    code, lines = _run(cli, tasks, "t_filt")
    assert code == 1 and len(lines) == 1
    assert "task t_filt: filter hook filt.Picky raised ValueError: no 'luck'" in lines[0]


@pytest.mark.parametrize("extra, says", [
    ("filter_list:\n  - name: x\n    filter:\n      - function: custom_thing\n", "filter 'custom_thing' is not supported"),
    ("metric_list:\n  - metric: brier_score\n", "metric 'brier_score' is not supported"),
    ("metric_list:\n  - metric: rouge\n", "metric 'rouge' is not supported"),
])
def test_unsupported_filter_or_metric_is_named(cli, tasks, extra, says):
    _variant(tasks, "unsup", GOOD.format(data=tasks / "data.jsonl").replace("t_ok", "t_unsup") + extra)
    code, lines = _run(cli, tasks, "t_unsup")
    assert code == 1 and len(lines) == 1 and says in lines[0]


def test_unsupported_output_type_is_named(cli, tasks):
    _variant(tasks, "otype", GOOD.format(data=tasks / "data.jsonl").replace("t_ok", "t_otype")
             .replace("output_type: multiple_choice", "output_type: ranking"))
    code, lines = _run(cli, tasks, "t_otype")
    assert code == 1 and len(lines) == 1 and "output_type 'ranking' is not supported" in lines[0]


def test_hub_dataset_not_cached_says_how_to_use_local_files(cli, tasks):
    _variant(tasks, "hub", "task: t_hub\ndataset_path: nobody-here/no-such-dataset-x1\ntest_split: test\n"
             "output_type: multiple_choice\ndoc_to_text: q\ndoc_to_choice: choices\ndoc_to_target: label\n")
    code, lines = _run(cli, tasks, "t_hub")
    assert code == 1 and len(lines) == 1
    assert "nobody-here/no-such-dataset-x1 is not in the local datasets cache" in lines[0]
    assert "data_files" in lines[0]


def test_a_failure_after_scoring_writes_no_output_file(cli, tasks, tmp_path):
    _variant(tasks, "late", GOOD.format(data=tasks / "data.jsonl").replace("t_ok", "t_late")
             + "process_results: !function utils.bad_results\nmetric_list:\n  - metric: x\n    aggregation: mean\n")
    out = tmp_path / "out"
    code, lines = _run(cli, tasks, "t_ok,t_late", "--output-path", str(out), "--log-samples")
    assert code == 1 and len(lines) == 1 and "process_results hook utils.bad_results raised KeyError" in lines[0]
    assert not out.exists() or not any(p.is_file() for p in out.rglob("*"))


def test_output_files_are_lmevals_names(cli, tasks, tmp_path):
    out = tmp_path / "out"
    code, lines = _run(cli, tasks, "t_ok", "--output-path", str(out), "--log-samples", "--limit", "2")
    assert code == 0, lines
    files = sorted(p.name for p in out.rglob("*") if p.is_file())
    assert len(files) == 2 and files[0].startswith("results_") and files[1].startswith("samples_t_ok_")
    assert not any(p.name.endswith(".part") for p in out.rglob("*"))
    doc = json.loads(next(out.rglob("results_*.json")).read_text())
    assert doc["n-samples"]["t_ok"] == {"original": 4, "effective": 2}
