"""`score --tasks` records on stdout: a summary per model, task, filter and metric (plain numbers in every format),
with several -m the comparisons per task and the --fail-if-worse verdicts; options of item files refused."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("datasets")
pytest.importorskip("yaml")

SUITE = "tests/fixtures/tasks/suite"
GPT2 = "tests/fixtures/score/models/gpt2-bpe"
LLAMA = "tests/fixtures/score/models/llama-spm"


def test_two_models_are_compared_and_gated_per_task(cli):
    res = cli("score", "-m", GPT2, "-m", LLAMA, "--tasks", "suite_mc,suite_gen", "--include-path", SUITE, "--limit",
              "4", "--fail-if-worse", "0.05", "--format", "jsonl")
    assert res.returncode in (0, 3), res.stderr.decode()
    recs = [json.loads(line) for line in res.stdout.decode().splitlines()]
    kinds = {r["record"] for r in recs}
    assert kinds == {"summary", "comparison", "verdict"}
    assert {r["model"] for r in recs if r["record"] == "summary"} == {"gpt2-bpe", "llama-spm"}
    verdicts = [r for r in recs if r["record"] == "verdict"]
    assert {(v["task"], v["metric"]) for v in verdicts} == {("suite_mc", "acc"), ("suite_gen", "exact_match")}
    assert all(isinstance(r["value"], float) for r in recs if r["record"] == "summary")


def test_tsv_summary_holds_plain_numbers(cli):
    res = cli("score", "-m", GPT2, "--tasks", "suite_gen", "--include-path", SUITE, "--limit", "2", "--format", "tsv")
    assert res.returncode == 0, res.stderr.decode()
    rows = [line.split("\t") for line in res.stdout.decode().splitlines()]
    assert rows[0][:7] == ["model", "task", "filter", "metric", "value", "stderr", "n"]
    assert all(float(r[4]) >= 0 for r in rows[1:])


def test_rolling_task_with_an_ngram_model_is_refused(cli):
    res = cli("score", "-m", "tests/fixtures/ngram/kenlm-3.arpa.gz", "--tasks", "suite_rolling", "--include-path",
              SUITE)
    assert res.returncode == 1
    assert "loglikelihood_rolling" in res.stderr.decode() and "Traceback" not in res.stderr.decode()


@pytest.mark.parametrize("args, says", [
    (["--tasks", "suite_mc", "--include-path", SUITE, "--mutual-info"], "--mutual-info applies to item files"),
    (["--include-path", SUITE], "--include-path applies to --tasks runs only"),
    (["--tasks", "suite_mc", "--include-path", SUITE, "--log-samples"], "--log-samples needs --output-path"),
    (["--tasks", "suite_mc", "--include-path", SUITE, "--fewshot-as-multiturn"], "needs --chat"),
])
def test_options_that_do_not_apply_are_usage_errors(cli, tmp_path, args, says):
    items = tmp_path / "i.jsonl"
    items.write_text('{"context": "a", "continuation": " b"}\n')
    extra = [] if "--tasks" in args else [str(items)]
    res = cli("score", "-m", GPT2, *args, *extra)
    assert res.returncode == 2, res.stderr.decode()
    assert says in res.stderr.decode()
