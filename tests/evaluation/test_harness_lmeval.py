"""`score --tasks` against lm-evaluation-harness 0.4.13's own files on the task-file suite
(tests/fixtures/tasks/suite, written and run through lm-eval by tools/make_task_fixtures.py): per sample the
arguments identical, the responses within 1e-4 per token (log-likelihoods) or identical (generations), the filtered
responses and every metric value identical; the results (every task's and group's metrics and standard errors),
versions, n-shot, n-samples, higher_is_better and group_subtasks identical."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

pytest.importorskip("datasets")
pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures" / "tasks"
MODEL = "tests/fixtures/score/models/gpt2-bpe"
RUNS = {"suite": ([], "suite_group,suite_ll,suite_ll_ppl,suite_rolling,suite_gen,suite_gen_prefix,suite_wino,suite_proc"),
        "limit": (["--limit", "3", "--num-fewshot", "1"], "suite_tag,suite_gen"),
        # lm-eval's own task files (read from its installation) around our documents (real_task_data.py)
        "real": ([], "arc_easy,hellaswag,winogrande,mmlu_mini,lambada_openai,wikitext,truthfulqa_mc2,piqa"),
        "real2": (["--num-fewshot", "1"], "glue_mini,cb,commonsense_qa,social_iqa,anli_r1,wsc273,mathqa,race,webqs"),
        "real3": ([], "REAL3_RUN"),  # real_task_data.REAL3_RUN: a sweep of other popular files
        "real4": (["--num-fewshot", "1", "--limit", "2"], "REAL4_RUN"),
        "real5": (["--num-fewshot", "1", "--limit", "1"], "mmlu"),  # lm-eval's nested mmlu group, 57 subtasks
        "real_llama": ([], "LLAMA_RUN")}  # the llama-spm model (its tokenizer adds BOS)
RUN_MODEL = {"real_llama": "tests/fixtures/score/models/llama-spm"}


def _files(folder: Path) -> tuple[dict, dict]:
    results = json.loads(next(folder.glob("results_*.json")).read_text(encoding="utf-8"))
    samples = {}
    for f in folder.glob("samples_*.jsonl"):
        task = f.name[len("samples_"):f.name.rindex("_20")]
        samples[task] = [json.loads(line) for line in f.read_text(encoding="utf-8").splitlines()]
    return results, samples


@pytest.fixture(scope="module", params=list(RUNS))
def both(request, tmp_path_factory):
    from click.testing import CliRunner

    from nlpkit.cli.score import command

    extra, tasks = RUNS[request.param]
    out = tmp_path_factory.mktemp(request.param)
    include = "tests/fixtures/tasks/suite"
    if request.param.startswith("real"):
        lm_eval = pytest.importorskip("lm_eval")
        import sys
        sys.path.insert(0, str(Path(__file__).parent))
        from real_task_data import GEN_TOKS, LLAMA_RUN, REAL3_RUN, REAL4_RUN, write_wrappers

        tasks = {"REAL3_RUN": REAL3_RUN, "REAL4_RUN": REAL4_RUN, "LLAMA_RUN": LLAMA_RUN}.get(tasks, tasks)
        include = str(write_wrappers(tmp_path_factory.mktemp("wrappers"), Path(lm_eval.__file__).parent / "tasks",
                                     max_gen_toks=GEN_TOKS))
    import os
    cwd = os.getcwd()
    os.chdir(ROOT)   # the task files name their data relative to the repository root, as lm-eval read them
    try:
        res = CliRunner().invoke(command, ["-m", RUN_MODEL.get(request.param, MODEL), "--tasks", tasks, "--include-path", include,
                                           "--output-path", str(out), "--log-samples", "--format", "jsonl", "--quiet",
                                           *extra], catch_exceptions=False)
    finally:
        os.chdir(cwd)
    assert res.exit_code == 0, res.output
    folder = RUN_MODEL.get(request.param, MODEL).replace("/", "__")
    return _files(FIX / "lmeval" / request.param / folder), _files(out / folder), res.output


def _close(a, b, tol=1e-4) -> bool:
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y, tol) for x, y in zip(a, b))
    try:
        fa, fb = float(a), float(b)
    except (TypeError, ValueError):
        return a == b
    if isinstance(a, str) and a in ("True", "False"):
        return a == b
    return math.isclose(fa, fb, rel_tol=tol, abs_tol=tol) or fa == fb


def test_every_sample_has_lmevals_arguments_responses_and_metrics(both):
    (_, ref), (_, got), _ = both
    assert sorted(ref) == sorted(got)
    for task in ref:
        r_rows = sorted(ref[task], key=lambda s: (s["filter"], s["doc_id"]))
        g_rows = sorted(got[task], key=lambda s: (s["filter"], s["doc_id"]))
        assert len(r_rows) == len(g_rows), task
        for r, g in zip(r_rows, g_rows):
            where = f"{task} doc {r['doc_id']} filter {r['filter']}"
            assert g["doc"] == r["doc"], where
            assert g["arguments"] == r["arguments"], where
            for key in ("target", "filter", "metrics", "doc_hash", "prompt_hash", "target_hash"):
                assert g[key] == r[key], (where, key)
            assert _close(g["resps"], r["resps"]), (where, g["resps"], r["resps"])
            assert _close(g["filtered_resps"], r["filtered_resps"]), (where, g["filtered_resps"], r["filtered_resps"])
            for m in r["metrics"]:
                assert _close(g[m], r[m]), (where, m, g[m], r[m])


def test_results_equal_lmevals(both):
    (ref, _), (got, _), _ = both
    for key in ("versions", "n-shot", "n-samples", "higher_is_better", "group_subtasks"):
        assert got[key] == ref[key], key
    assert got.get("groups", {}).keys() == ref.get("groups", {}).keys()
    assert got["results"].keys() == ref["results"].keys()
    for name, r in ref["results"].items():
        g = got["results"][name]
        assert g.keys() == r.keys(), name
        for k, v in r.items():
            assert _close(g[k], v, 1e-4), (name, k, g[k], v)  # perplexities: exp of log-likelihoods within 1e-4
    assert got["task_hashes"] == ref["task_hashes"]
    assert sorted(got["configs"]) == sorted(ref["configs"])


def test_stdout_summary_names_every_task_filter_and_metric(both):
    (ref, _), _, output = both
    recs = [json.loads(line) for line in output.splitlines()]
    seen = {(r["task"], r["filter"], r["metric"]) for r in recs if r["record"] == "summary"}
    for name, res in ref["results"].items():
        for key in res:
            if "," in key and "_stderr," not in key:
                m, f = key.split(",", 1)
                assert (name, f, m) in seen


@pytest.mark.parametrize("task, metric, agg", [("suite_ll_ppl", "perplexity", "perplexity"),
                                               ("suite_proc", "best_ll", "median"),
                                               ("suite_proc", "spread", "mean")])
def test_stderr_on_lmevals_own_values_is_lmevals_exactly(task, metric, agg):
    """Where lm-eval bootstraps (perplexity, median: 100,000 resamples drawn by random.Random(i) per chunk), nlpkit
    draws the same resamples: on lm-eval's per-document values its standard error is lm-eval's, to the bit."""
    from nlpkit.evaluation.harness.metrics import aggregate, stderr

    results, samples = _files(FIX / "lmeval" / "suite" / "tests__fixtures__score__models__gpt2-bpe")
    values = [s[metric] for s in sorted(samples[task], key=lambda s: s["doc_id"])]
    assert aggregate(agg, values) == results["results"][task][f"{metric},none"]
    assert stderr(agg, metric, values) == results["results"][task][f"{metric}_stderr,none"]
