"""A gate a script can trust (issue 37, items 4-7 and 9): every -m is a column, a failed gate exits 3 with verdict
records, accuracies are gated on McNemar's exact test, `perplexity --compare` has thresholds, and `default` names
the shipped model. Each test runs the user's command through the entry point and pins the exit status, the
verdict records and their numbers."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import FIXTURES, REPO

from nlpkit.errors import GATE_FAILED
from nlpkit.evaluation import evaluate
from nlpkit.evaluation.gate import Threshold, gate_metrics, primary_metric, threshold_verdicts, worse_verdicts

FIX = FIXTURES / "score"
GPT2 = str(FIX / "models" / "gpt2-bpe")
GPT2_REF = str(FIX / "models" / "gpt2-bpe-ref")
LLAMA = str(FIX / "models" / "llama-spm")
TINY = FIXTURES / "lm" / "compare" / "tiny"
TINY_REF = json.loads((TINY / "reference.json").read_text())
MC_LINES = (FIX / "mc.jsonl").read_text(encoding="utf-8").splitlines()


def jsonl(r, kind: str | None = None) -> list[dict]:
    recs = [json.loads(line) for line in r.stdout.decode().splitlines()]
    return recs if kind is None else [x for x in recs if x.get("record") == kind]


def ok(r):
    assert r.returncode == 0, r.stderr.decode()
    return r


def items_file(tmp_path, lines: list[int], times: int = 1):
    p = tmp_path / "items.jsonl"
    p.write_text("\n".join(MC_LINES[k] for k in lines for _ in range(times)) + "\n", encoding="utf-8")
    return str(p)


def test_gate_failed_is_exit_status_3():
    assert GATE_FAILED == 3


# ------------------------------------------------------------------------ 4: every -m is a column

def test_the_same_model_twice_is_two_columns_compared_with_difference_0_and_p_1(cli):
    r = ok(cli("score", "-m", GPT2, "-m", GPT2, str(FIX / "mc.jsonl"), "--fail-if-worse", "0.05", "--format", "jsonl",
               "--quiet"))
    summaries = jsonl(r, "summary")
    assert {s["model"] for s in summaries} == {"gpt2-bpe#1", "gpt2-bpe#2"}
    items = jsonl(r, "item")
    one = [{k: v for k, v in x.items() if k != "model"} for x in items if x["model"] == "gpt2-bpe#1"]
    two = [{k: v for k, v in x.items() if k != "model"} for x in items if x["model"] == "gpt2-bpe#2"]
    assert one == two and len(one) == len(MC_LINES)
    comps = jsonl(r, "comparison")
    assert len(comps) == 4 and all(c["model"] == "gpt2-bpe#2" and c["baseline"] == "gpt2-bpe#1" for c in comps)
    assert all(c["difference"] == 0 and c["p_value"] == 1 and c["mcnemar_p"] == 1 for c in comps)
    (verdict,) = jsonl(r, "verdict")
    assert (verdict["metric"], verdict["difference"], verdict["p_value"], verdict["pass"]) == ("acc", 0, 1, True)


def test_a_model_given_again_after_another_is_kept_as_the_third_column(cli):
    r = ok(cli("score", "-m", GPT2, "-m", LLAMA, "-m", GPT2, str(FIX / "mc.jsonl"), "--summary-only", "--format",
               "jsonl", "--quiet"))
    assert [s["model"] for s in jsonl(r, "summary")][::4] == ["gpt2-bpe#1", "llama-spm", "gpt2-bpe#3"]
    third = [c for c in jsonl(r, "comparison") if c["model"] == "gpt2-bpe#3"]
    assert len(third) == 4 and all(c["difference"] == 0 and c["p_value"] == 1 for c in third)
    assert "models:gpt2-bpe#1,llama-spm,gpt2-bpe#3" in jsonl(r)[0]["signature"]


def test_a_model_given_twice_is_scored_once(monkeypatch):
    calls = []

    def fake_score_items(scorer, task, items, options, reference=None):
        calls.append(scorer)
        return [({"index": k}, {"logprob": -1.0}) for k in range(len(items))]

    monkeypatch.setattr(evaluate, "score_items", fake_score_items)
    same, other = object(), object()
    block = [("loglikelihood", None), ("loglikelihood", None)]
    out = list(evaluate.score_block({"A#1": same, "B": other, "A#3": same}, block, None))
    assert calls == [same, other]
    assert [[name for name, _, _ in results] for _, results in out] == [["A#1", "B", "A#3"]] * 2


# ------------------------------------------------------------------ 5: exit 3 and verdict records

def test_a_failed_gate_exits_3_with_a_verdict_record_and_a_reason(cli):
    # llama-spm's log-likelihoods of these items are lower than gpt2-bpe's (paired bootstrap p = 0.02897)
    r = cli("score", "-m", GPT2, "-m", LLAMA, str(FIX / "ll.jsonl"), "--summary-only", "--fail-if-worse", "0.05",
            "--format", "jsonl", "--quiet")
    assert r.returncode == GATE_FAILED == 3
    err = r.stderr.decode()
    assert err.startswith("nlpkit: gate failed: llama-spm is worse than gpt2-bpe on logprob") and "error" not in err
    (v,) = jsonl(r, "verdict")
    assert {k: v[k] for k in ("model", "baseline", "metric", "test", "threshold", "pass")} == {
        "model": "llama-spm", "baseline": "gpt2-bpe", "metric": "logprob", "test": "bootstrap", "threshold": 0.05,
        "pass": False}
    assert v["p_value"] == v["bootstrap_p"] == pytest.approx(29 / 1001) and v["mcnemar_p"] is None
    assert v["difference"] == pytest.approx(-9.3124808, abs=1e-4)
    passed = ok(cli("score", "-m", GPT2, "-m", LLAMA, str(FIX / "ll.jsonl"), "--summary-only", "--fail-if-worse",
                    "0.01", "--format", "jsonl"))
    assert [x["pass"] for x in jsonl(passed, "verdict")] == [True]


@pytest.mark.parametrize("fmt", ["json", "tsv"])
def test_the_verdict_is_in_every_machine_format(cli, fmt):
    r = cli("score", "-m", GPT2, "-m", LLAMA, str(FIX / "ll.jsonl"), "--summary-only", "--fail-if-worse", "0.05",
            "--format", fmt)
    assert r.returncode == 3
    out = r.stdout.decode()
    if fmt == "json":
        (v,) = json.loads(out)["verdicts"]
        assert (v["metric"], v["pass"], v["threshold"]) == ("logprob", False, 0.05)
    else:
        block = out.split("\n\n")[-1].splitlines()
        assert block[0].split("\t")[:8] == ["model", "baseline", "metric", "difference", "test", "p_value",
                                            "threshold", "pass"]
        assert block[1].split("\t")[7] == "false"


def test_a_crash_stays_exit_1_and_the_help_names_exit_3(cli, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(MC_LINES[0] + "\nnot json\n", encoding="utf-8")
    r = cli("score", "-m", GPT2, "-m", LLAMA, str(bad), "--fail-if-worse", "0.05")
    assert r.returncode == 1 and r.stderr.decode().startswith("nlpkit: error:")
    assert "exit 3" in " ".join(ok(cli("score", "--help")).stdout.decode().split())
    assert "3 a gate failed" in " ".join(ok(cli("--help")).stdout.decode().split())


# ---------------------------------------------------- 6: the gate metric, McNemar for right/wrong metrics

def test_three_items_bootstrap_p_0_000999_but_mcnemar_0_25_the_gate_passes(cli, tmp_path):
    """The user's case: the first model right and the second wrong on all 3 items. Every resample gives the same
    difference, so the bootstrap's p is its smallest, 1/1001; McNemar's exact p is 2 / 2^3 = 0.25: no evidence."""
    r = ok(cli("score", "-m", GPT2, "-m", LLAMA, items_file(tmp_path, [4], times=3), "--fail-if-worse", "0.05",
               "--summary-only", "--format", "jsonl", "--quiet"))
    acc = next(c for c in jsonl(r, "comparison") if c["metric"] == "acc")
    assert (acc["difference"], acc["only_baseline"], acc["only_model"]) == (-1, 3, 0)
    assert acc["bootstrap_p"] == pytest.approx(1 / 1001) and acc["mcnemar_p"] == pytest.approx(0.25)
    assert (acc["test"], acc["p_value"]) == ("mcnemar", pytest.approx(0.25))  # one meaning, the gate's
    (v,) = jsonl(r, "verdict")
    assert (v["metric"], v["test"], v["p_value"], v["bootstrap_p"], v["pass"]) == (
        "acc", "mcnemar", pytest.approx(0.25), pytest.approx(1 / 1001), True)


def test_gate_metric_picks_the_metric_and_mcnemar_fails_a_real_regression(cli, tmp_path):
    # items 3, 7, 8, 13 twice: gpt2-bpe right by acc_tokens on all 8, llama-spm on none: McNemar p = 2 / 2^8
    path = items_file(tmp_path, [3, 7, 8, 13], times=2)
    r = cli("score", "-m", GPT2, "-m", LLAMA, path, "--fail-if-worse", "0.05", "--gate-metric", "acc_tokens",
            "--gate-metric", "acc", "--summary-only", "--format", "jsonl", "--quiet")
    assert r.returncode == 3, r.stderr.decode()
    verdicts = {v["metric"]: v for v in jsonl(r, "verdict")}
    assert list(verdicts) == ["acc", "acc_tokens"]  # in the comparisons' order
    assert verdicts["acc_tokens"]["p_value"] == pytest.approx(2 / 256) and not verdicts["acc_tokens"]["pass"]
    assert verdicts["acc"]["pass"]
    assert "on acc_tokens" in r.stderr.decode() and "McNemar's exact p = 0.007813 < 0.05" in r.stderr.decode()


@pytest.mark.parametrize("args,message", [
    (["--fail-if-worse", "0.05", "--gate-metric", "bleu"], "no metric 'bleu'"),
    (["--gate-metric", "acc"], "--gate-metric"),
])
def test_a_gate_metric_the_task_lacks_or_without_the_gate_is_a_usage_error(cli, args, message):
    r = cli("score", "-m", GPT2, "-m", GPT2, str(FIX / "mc.jsonl"), *args)
    assert r.returncode == 2 and message in r.stderr.decode()


def test_the_default_gate_metric_is_the_tasks_primary_one():
    assert [primary_metric(t) for t in ("multiple-choice", "loglikelihood", "preference")] == [
        "acc", "logprob", "accuracy"]
    assert primary_metric("preference", reference=True) == "reward_accuracy"
    assert gate_metrics("multiple-choice", ("acc", "acc_norm"), ["acc_norm", "acc_norm"]) == ("acc_norm",)


def test_preference_with_a_reference_is_gated_on_reward_accuracy(cli):
    r = ok(cli("score", "-m", GPT2, "-m", GPT2, "--reference", GPT2_REF, str(FIX / "preference.jsonl"),
               "--fail-if-worse", "0.05", "--summary-only", "--format", "jsonl"))
    (v,) = jsonl(r, "verdict")
    assert (v["metric"], v["test"], v["p_value"], v["pass"]) == ("reward_accuracy", "mcnemar", 1, True)


def test_worse_verdicts_fail_only_a_lower_score():
    base = {"model": "B", "baseline": "A", "baseline_value": 0.5, "mcnemar_p": 0.01, "bootstrap_p": 0.001,
            "test": "mcnemar", "p_value": 0.01}
    better = worse_verdicts([{**base, "metric": "acc", "value": 0.9, "difference": 0.4}], 0.05, ["acc"])
    worse = worse_verdicts([{**base, "metric": "acc", "value": 0.1, "difference": -0.4}], 0.05, ["acc"])
    assert better[0].passed and not worse[0].passed and worse[0].record["p_value"] == 0.01


# ------------------------------------------------------------------ 7: perplexity --compare gates

def compare_cli(cli, tmp_path, *args, texts=(TINY_REF["text"],)):
    paths = []
    for k, t in enumerate(texts):
        p = tmp_path / f"text{k}.txt"
        p.write_text(t, encoding="utf-8")
        paths.append(str(p))
    return cli("perplexity", *paths, "-m", str(TINY / "model"), "--compare", str(TINY / "base"), "--context", "24",
               "--stride", "8", "--format", "jsonl", "--quiet", *args)


def test_perplexity_compare_fails_a_kld_above_the_bound_with_exit_3_and_a_verdict(cli, tmp_path):
    want = TINY_REF["cases"]["sliding_c24_s8"]["summary"]
    r = compare_cli(cli, tmp_path, "--fail-if-kld-above", "0.1", "--fail-if-ppl-ratio-above", "1.5",
                    "--fail-if-same-top-below", "0.5")
    assert r.returncode == 3
    (rec,) = [x for x in jsonl(r) if "record" not in x]
    verdicts = {v["metric"]: v for v in jsonl(r, "verdict")}
    assert verdicts["kld"]["value"] == rec["kld"] == pytest.approx(want["kld"], rel=1e-5)
    assert (verdicts["kld"]["threshold"], verdicts["kld"]["fails_if"], verdicts["kld"]["pass"]) == (0.1, "above", False)
    assert verdicts["ppl_ratio"]["value"] == pytest.approx(want["ppl_ratio"], rel=1e-5)
    assert verdicts["ppl_ratio"]["pass"]
    assert verdicts["same_top"]["value"] == pytest.approx(want["same_top"], rel=1e-5)
    assert (verdicts["same_top"]["fails_if"], verdicts["same_top"]["pass"]) == ("below", False)
    err = r.stderr.decode()
    assert err.startswith("nlpkit: gate failed: ") and "mean KLD" in err and "(and 1 more)" in err
    passed = compare_cli(cli, tmp_path, "--fail-if-kld-above", "0.5")
    assert passed.returncode == 0 and [v["pass"] for v in jsonl(passed, "verdict")] == [True]


def test_perplexity_compare_gates_every_file_and_the_total(cli, tmp_path):
    r = compare_cli(cli, tmp_path, "--fail-if-kld-above", "0.5", "--format", "json",
                    texts=(TINY_REF["text"], TINY_REF["second_text"]))
    doc = json.loads(ok(r).stdout)
    assert [v["file"] for v in doc["verdicts"]] == [x["file"] for x in doc["results"]]
    assert doc["verdicts"][-1]["file"] == "(total)" and all(v["pass"] for v in doc["verdicts"])


@pytest.mark.parametrize("args,message", [
    (["--fail-if-kld-above", "0.1"], "give --compare BASE"),
    (["--fail-if-same-top-below", "0.9", "--compare", str(TINY / "base"), "--per-token"], "--per-token"),
])
def test_a_perplexity_gate_needs_the_comparison_summary(cli, tmp_path, args, message):
    p = tmp_path / "t.txt"
    p.write_text(TINY_REF["text"], encoding="utf-8")
    r = cli("perplexity", str(p), "-m", str(TINY / "model"), *args)
    assert r.returncode == 2 and message in r.stderr.decode()


def test_threshold_verdicts_never_pass_on_nan():
    (v,) = threshold_verdicts([{"file": "a", "kld": float("nan")}], [Threshold("kld", 1.0, "above")])
    assert not v.passed


# ------------------------------------------------------------------ 9: -m default is the shipped model

def test_dash_m_default_is_the_shipped_model_whatever_nlpkit_model_says(cli, tmp_path):
    p = tmp_path / "t.txt"
    p.write_text("The cat sat on the mat.\n", encoding="utf-8")
    shipped = ok(cli("perplexity", str(p), "--format", "jsonl", env={"NLPKIT_MODEL": ""}))
    named = ok(cli("perplexity", str(p), "-m", "default", "--format", "jsonl",
                   env={"NLPKIT_MODEL": str(TINY / "model")}))
    assert jsonl(named) == jsonl(shipped) and "model:default" in jsonl(named)[0]["signature"]


def test_default_names_the_shipped_model_in_compare_and_reference(cli, tmp_path):
    p = tmp_path / "t.txt"
    p.write_text("The cat sat on the mat.\n", encoding="utf-8")
    r = ok(cli("perplexity", str(p), "-m", "default", "--compare", "default", "--fail-if-kld-above", "0",
               "--format", "jsonl"))
    (rec,) = [x for x in jsonl(r) if "record" not in x]
    assert rec["kld"] == 0 and "base:default" in rec["signature"]
    item = '{"prompt": "The sky is", "chosen": " blue", "rejected": " green"}\n'
    r = ok(cli("score", "-m", "default", "--reference", "default", "--format", "jsonl", "--quiet", input=item))
    (it,) = jsonl(r, "item")
    assert it["reward_margin"] == 0 and "reference:default" in it["signature"]


@pytest.mark.parametrize("command", [["generate", "The cat", "--max-new-tokens", "3", "--seed", "1"],
                                     ["sample", "The cat", "-n", "2", "--max-new-tokens", "3", "--seed", "1"]])
def test_generate_and_sample_take_dash_m_default(cli, command):
    shipped = ok(cli(*command, "--quiet", env={"NLPKIT_MODEL": ""}))
    named = ok(cli(*command, "-m", "default", "--quiet", env={"NLPKIT_MODEL": str(TINY / "model")}))
    assert named.stdout == shipped.stdout


def test_the_name_default_wins_over_a_directory_named_default_in_the_cwd(tmp_path):
    (tmp_path / "default").mkdir()  # not a model: read as one, it would be an error
    item = '{"context": "The sky is", "continuation": " blue"}\n'
    env = {k: v for k, v in os.environ.items() if k not in ("NLPKIT_DEBUG", "NLPKIT_MODEL")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    run = [sys.executable, "-m", "nlpkit", "score", "--format", "jsonl"]
    r = subprocess.run([*run, "-m", "default"], input=item.encode(), capture_output=True, cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr.decode()
    assert "nlpkit: warning: --model default is the shipped model, not the 'default' in the current directory " \
           "(write ./default for that one)" in r.stderr.decode()
    local = subprocess.run([*run, "-m", "./default"], input=item.encode(), capture_output=True, cwd=tmp_path, env=env)
    assert local.returncode == 1 and local.stderr.decode().startswith("nlpkit: error:")
