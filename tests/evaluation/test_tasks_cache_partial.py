"""`score --tasks --results-cache`, partly cached: the misses are computed with the few-shot prefixes the whole run
shares (`prefix_plan` of every request, hits too), so each missed document's log-likelihoods are the bits a run
without the cache gives it, not those of scoring the misses as a call of their own."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("datasets")
pytest.importorskip("yaml")

SUITE = "tests/fixtures/tasks/suite"


def _samples(cli, out, limit: int, env=None) -> dict:
    res = cli("score", "-m", "default", "--tasks", "suite_mc_first_n", "--include-path", SUITE, "--limit", str(limit),
              "--output-path", str(out), "--log-samples", env=env)
    assert res.returncode == 0, res.stderr.decode()
    (path,) = out.rglob("samples_suite_mc_first_n_*.jsonl")
    return {s["doc_id"]: s["resps"] for s in map(json.loads, path.read_text().splitlines())}


def test_the_misses_of_a_partly_cached_run_are_the_uncached_runs_bits(cli, tmp_path):
    env = {"NLPKIT_RESULTS_CACHE": str(tmp_path / "rc")}
    _samples(cli, tmp_path / "first", 7, env)                  # documents 0-6 cached
    partly = _samples(cli, tmp_path / "partly", 8, env)        # 7 missed: alone, it would share no prefix
    fresh = _samples(cli, tmp_path / "fresh", 8)
    assert partly[7] == fresh[7]


def test_a_partly_cached_multiple_input_run_scores_its_misses_as_the_uncached_run(cli, tmp_path):
    """winogrande-shaped documents (two contexts that share their start, `prefix_scoring.document_split`): the split
    is the document's own, so a missed document gets the uncached run's bits, and a hit is the same result."""
    def samples(out, limit, env=None):
        res = cli("score", "-m", "default", "--tasks", "suite_wino", "--include-path", SUITE, "--limit", str(limit),
                  "--output-path", str(out), "--log-samples", env=env)
        assert res.returncode == 0, res.stderr.decode()
        (path,) = out.rglob("samples_suite_wino_*.jsonl")
        return {s["doc_id"]: s["resps"] for s in map(json.loads, path.read_text().splitlines())}

    env = {"NLPKIT_RESULTS_CACHE": str(tmp_path / "rc")}
    samples(tmp_path / "first", 3, env)                  # documents 0-2 cached
    partly = samples(tmp_path / "partly", 5, env)        # 3 and 4 missed
    assert partly == samples(tmp_path / "fresh", 5)
