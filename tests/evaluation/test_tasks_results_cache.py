"""`score --tasks --results-cache`: a rerun answers every lm-eval request from the cache and writes the same bytes
(stdout, the samples files, the results file but its timestamps); a changed setting misses."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("datasets")
pytest.importorskip("yaml")

SUITE = "tests/fixtures/tasks/suite"
GPT2 = "tests/fixtures/score/models/gpt2-bpe"
TIMES = ("date", "total_evaluation_time_seconds", "start_time", "end_time")


def _run(cli, cache, out, *more):
    return cli("score", "-m", GPT2, "--tasks", "suite_mc,suite_gen,suite_rolling", "--include-path", SUITE,
               "--limit", "3", "--output-path", str(out), "--log-samples", *more,
               env={"NLPKIT_RESULTS_CACHE": str(cache)})


def _files(out):
    return {f.name.rsplit("_", 1)[0]: f for f in out.rglob("*.json*")}


def _without_times(path):
    doc = json.loads(path.read_text())
    return {k: v for k, v in doc.items() if k not in TIMES}


def test_a_tasks_rerun_computes_nothing_and_writes_the_same_bytes(cli, tmp_path):
    first = _run(cli, tmp_path / "rc", tmp_path / "out1")
    assert first.returncode == 0, first.stderr.decode()
    assert "0 of 18 results from the cache, 18 computed" in first.stderr.decode()
    again = _run(cli, tmp_path / "rc", tmp_path / "out2")
    assert again.returncode == 0, again.stderr.decode()
    assert "18 of 18 results from the cache, 0 computed" in again.stderr.decode()
    assert again.stdout == first.stdout
    one, two = _files(tmp_path / "out1"), _files(tmp_path / "out2")
    assert set(one) == set(two) == {"results", "samples_suite_mc", "samples_suite_gen", "samples_suite_rolling"}
    for name in one:
        if name == "results":
            assert _without_times(one[name]) == _without_times(two[name])
        else:
            assert one[name].read_bytes() == two[name].read_bytes()


def test_a_changed_num_fewshot_misses(cli, tmp_path):
    first = _run(cli, tmp_path / "rc", tmp_path / "out1")
    assert first.returncode == 0, first.stderr.decode()
    other = _run(cli, tmp_path / "rc", tmp_path / "out2", "--num-fewshot", "0")
    assert other.returncode == 0, other.stderr.decode()
    line = next(x for x in other.stderr.decode().splitlines() if "results cache" in x)
    assert not line.endswith(", 0 computed"), line


def test_a_fully_cached_tasks_rerun_loads_no_model(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from nlpkit.cli.main import cli
    from nlpkit.evaluation.harness import cached_model

    loads = []
    real = cached_model.HarnessModel

    class Counting(real):
        def __init__(self, spec, *args, **kwargs):
            loads.append(spec.path)
            super().__init__(spec, *args, **kwargs)

    monkeypatch.setattr(cached_model, "HarnessModel", Counting)
    args = ["score", "-m", GPT2, "--tasks", "suite_mc,suite_rolling", "--include-path", SUITE, "--limit", "2",
            "--results-cache", str(tmp_path / "rc")]
    first = CliRunner().invoke(cli, args)
    assert first.exit_code == 0, first.output
    assert loads == [GPT2]
    again = CliRunner().invoke(cli, args)
    assert again.exit_code == 0, again.output
    assert loads == [GPT2]   # no second load
    assert again.stdout == first.stdout
