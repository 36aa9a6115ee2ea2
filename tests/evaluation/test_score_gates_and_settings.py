"""What a new user found in `score`'s statistics, gates and generate-task settings (issue 44 items 1-8, 15, 16; issue
43 item 3), each pinned through the command: intervals inside the metric's range, one meaning of `p_value`, warnings
for literal backslash sequences and for ignored sampling options, truncated contexts named, patterns that make every
result the same refused, absolute gates, gates on BLEU/chrF, and a signature that changes with every setting that
changes a number."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import FIXTURES, REPO

FIX = FIXTURES / "score"
GPT2 = str(FIX / "models" / "gpt2-bpe")
LLAMA = str(FIX / "models" / "llama-spm")
GEN = [("Q: What is two plus two?\nA:", "4"), ("The capital of France is", "Paris"), ("The sky is", "blue"),
       ("One, two,", "three"), ("Hello", "world"), ("The cat sat on the", ["mat", "rug"])]


def gen_items(tmp_path, items=GEN, name="gen.jsonl") -> str:
    p = tmp_path / name
    p.write_text("".join(json.dumps({"context": c, "target": t}) + "\n" for c, t in items), encoding="utf-8")
    return str(p)


def jsonl(r, kind: str | None = None) -> list[dict]:
    recs = [json.loads(line) for line in r.stdout.decode().splitlines() if line.strip()]
    return recs if kind is None else [x for x in recs if x.get("record") == kind]


def ok(r):
    assert r.returncode == 0, r.stderr.decode()
    return r


def score(cli, *args):
    return cli("score", *args, "--format", "jsonl")


# ------------------------------------------------------------------ 1: BLEU/chrF intervals, sacrebleu's bootstrap

def test_chrf_and_bleu_intervals_are_sacrebleus_bootstrap_percentiles_inside_0_100(cli, tmp_path):
    from nlpkit.evaluation.generation_task import corpus_metrics

    r = ok(score(cli, "-m", GPT2, gen_items(tmp_path), "--max-gen-toks", "4", "--metric", "exact_match,bleu,chrf"))
    answers = [x["answer"] for x in jsonl(r, "item")]
    targets = [[t] if isinstance(t, str) else t for _, t in GEN]
    want = corpus_metrics(answers, targets, ("bleu", "chrf"))  # pinned against sacrebleu in test_corpus_stats.py
    for s in jsonl(r, "summary"):
        if s["metric"] in ("bleu", "chrf"):
            assert (s["low"], s["high"]) == (want[s["metric"]]["low"], want[s["metric"]]["high"])
            assert 0.0 <= s["low"] <= s["high"] <= 100.0


# ------------------------------------------------------------------ 2: one meaning of p_value

def test_every_comparison_record_has_the_gates_p_value_with_bootstrap_p_and_mcnemar_p_beside_it(cli):
    r = ok(score(cli, "-m", GPT2, "-m", LLAMA, str(FIX / "ll.jsonl"), "--summary-only", "--bootstrap", "200"))
    comps = {c["metric"]: c for c in jsonl(r, "comparison")}
    assert (comps["logprob"]["test"], comps["logprob"]["mcnemar_p"]) == ("bootstrap", None)
    assert comps["logprob"]["p_value"] == comps["logprob"]["bootstrap_p"]
    assert comps["is_greedy"]["test"] == "mcnemar"
    assert comps["is_greedy"]["p_value"] == comps["is_greedy"]["mcnemar_p"]
    assert "bootstrap_p" in comps["is_greedy"]


def test_the_comparison_tables_headline_p_value_is_the_gates_test(cli, tmp_path):
    """The user's case: 3 items the baseline gets right and the candidate wrong. The table shows McNemar's 0.25 (the
    bootstrap's 1/1001 is not valid on 3 items) and names the test."""
    line = (FIX / "mc.jsonl").read_text(encoding="utf-8").splitlines()[4]
    path = tmp_path / "three.jsonl"
    path.write_text((line + "\n") * 3, encoding="utf-8")
    r = ok(cli("score", "-m", GPT2, "-m", LLAMA, str(path), "--summary-only", "--format", "table"))
    rows = [line.split() for line in r.stdout.decode().splitlines()]
    acc = next(k for k, row in enumerate(rows) if row == ["metric", "acc"] and k > 0 and
               any(x[:1] == ["baseline"] for x in rows[k - 3:k]))
    block = {row[0]: row[1:] for row in rows[acc:acc + 8] if row}
    assert block["test"] == ["mcnemar"] and float(block["p_value"][0]) == 0.25
    assert "mcnemar_p" not in block and "bootstrap_p" not in block


# ------------------------------------------------------------------ 3: literal backslash sequences

def test_the_docs_until_newline_example_is_a_real_newline():
    text = (REPO / "docs" / "generation.md").read_text(encoding="utf-8")
    assert '--until "\\n"' not in text and "--until $'\\n'" in text


@pytest.mark.parametrize("args, shown", [
    (["--until", "\\n"], "--until '\\n' holds \\n as plain characters"),
    (["--until", "Q:\\t"], "not a tab"),
    (["--until", "a\\\\b"], "one backslash"),
    (["--extract", "(\\\\d+)"], "--extract '(\\\\d+)' holds \\\\"),
    (["--ignore-regex", ",\\n"], "--ignore-regex ',\\n' holds \\n"),
])
def test_a_literal_backslash_sequence_in_a_stop_string_or_pattern_warns(cli, tmp_path, args, shown):
    r = ok(cli("score", "-m", GPT2, gen_items(tmp_path, GEN[:1]), "--max-gen-toks", "2", *args))
    assert shown in r.stderr.decode()


@pytest.mark.parametrize("pattern", [".*", "(\\d*)[.]", "x?(\\w+)?"])
def test_an_extract_pattern_that_can_match_empty_but_takes_text_is_accepted(pattern):
    from nlpkit.evaluation.answer_filters import pattern_problem

    assert pattern_problem(pattern, "extract") is None


def test_a_real_newline_stop_string_and_plain_patterns_do_not_warn(cli, tmp_path):
    r = ok(cli("score", "-m", GPT2, gen_items(tmp_path, GEN[:1]), "--max-gen-toks", "2", "--until", "\n",
               "--extract", "(\\d+)", "--ignore-regex", ","))
    assert "warning" not in r.stderr.decode()


# ------------------------------------------------------------------ 4: a too-long context

def test_a_truncated_context_warns_naming_the_item_and_the_record_says_truncated(cli, tmp_path):
    long = " ".join(["word"] * 200)
    path = gen_items(tmp_path, [("short", "x"), (long, "y")])
    r = ok(score(cli, "-m", GPT2, path, "--max-gen-toks", "4"))
    items = jsonl(r, "item")
    assert [x["truncated"] for x in items] == [False, True]
    err = r.stderr.decode()
    assert "gen.jsonl, line 2" in err and "window (64 tokens)" in err and "line 1" not in err


@pytest.mark.parametrize("args, ctx", [([], "ctx:64"), (["--context", "32"], "ctx:32")])
def test_the_signature_names_the_window_in_force(cli, tmp_path, args, ctx):
    r = ok(score(cli, "-m", GPT2, gen_items(tmp_path, GEN[:1]), "--max-gen-toks", "2", *args))
    sig = jsonl(r, "summary")[0]["signature"]
    assert f"|{ctx}|" in sig and "model-max-1024" not in sig


# ------------------------------------------------------------------ 5: patterns that make every result the same

@pytest.mark.parametrize("args, message", [
    (["--extract", ""], "matches the empty string"),
    (["--extract", "(\\d*)"], "matches the empty string"),
    (["--extract", "(\\d+)|", "--extract-group", "-1"], "matches the empty string"),
    (["--ignore-regex", ".*"], "removes every character"),
    (["--ignore-regex", "[\\s\\S]+"], "removes every character"),
    (["--ignore-regex", ""], "removes nothing"),
])
def test_a_pattern_that_makes_every_result_the_same_is_refused_with_a_reason(cli, tmp_path, args, message):
    r = cli("score", "-m", GPT2, gen_items(tmp_path, GEN[:1]), *args)
    assert r.returncode == 2, r.stderr.decode()
    assert message in r.stderr.decode() and args[0] in r.stderr.decode()


# ------------------------------------------------------------------ 6: sampling options under greedy decoding

@pytest.mark.parametrize("args, warned", [
    (["--top-k", "5"], True), (["--top-p", "0.5", "--temperature", "0"], True), (["--min-p", "0.1"], True),
    (["--top-k", "5", "--temperature", "1"], False), (["--repetition-penalty", "1.3"], False),
    (["--top-k", "0"], False),
])
def test_sampling_filters_under_greedy_decoding_warn_and_are_in_the_signature(cli, tmp_path, args, warned):
    r = ok(score(cli, "-m", GPT2, gen_items(tmp_path, GEN[:1]), "--max-gen-toks", "2", *args))
    assert ("no effect: decoding is greedy" in r.stderr.decode()) == warned
    sig = jsonl(r, "summary")[0]["signature"]
    flag, value = args[0].lstrip("-"), args[1]
    key = {"repetition-penalty": "rep"}.get(flag, flag)
    assert f"|{key}:{float(value) if '.' in value else value}|" in sig


# ------------------------------------------------------------------ 7: absolute gates

def test_fail_if_below_exits_3_with_a_verdict_per_model(cli):
    r = score(cli, "-m", GPT2, "-m", LLAMA, str(FIX / "mc.jsonl"), "--summary-only", "--fail-if-below", "acc=0.99",
              "--fail-if-below", "acc_norm=0")
    assert r.returncode == 3, r.stderr.decode()
    acc = {s["model"]: s["value"] for s in jsonl(r, "summary") if s["metric"] == "acc"}
    verdicts = jsonl(r, "verdict")
    assert [(v["model"], v["metric"], v["fails_if"], v["threshold"], v["pass"]) for v in verdicts] == [
        ("gpt2-bpe", "acc", "below", 0.99, False), ("gpt2-bpe", "acc_norm", "below", 0.0, True),
        ("llama-spm", "acc", "below", 0.99, False), ("llama-spm", "acc_norm", "below", 0.0, True)]
    assert [v["value"] for v in verdicts if v["metric"] == "acc"] == [acc["gpt2-bpe"], acc["llama-spm"]]
    assert "gate failed: gpt2-bpe: acc" in r.stderr.decode() and "is below 0.99" in r.stderr.decode()


def test_fail_if_above_gates_a_lower_is_better_figure_and_passes_under_the_bound(cli, tmp_path):
    r = ok(score(cli, "-m", GPT2, str(FIX / "ll.jsonl"), "--summary-only", "--fail-if-above", "logprob=0"))
    (v,) = jsonl(r, "verdict")
    assert (v["metric"], v["fails_if"], v["pass"]) == ("logprob", "above", True)
    text = tmp_path / "t.txt"
    text.write_text("The cat sat on the mat.\n", encoding="utf-8")
    r = cli("perplexity", str(text), "--format", "jsonl", "--fail-if-above", "token_ppl=1.5",
            "--fail-if-below", "bits_per_byte=0")
    assert r.returncode == 3, r.stderr.decode()
    verdicts = [x for x in jsonl(r) if x.get("record") == "verdict"]
    assert [(v["metric"], v["pass"]) for v in verdicts] == [("bits_per_byte", True), ("token_ppl", False)]
    assert "token_ppl" in r.stderr.decode() and "is above 1.5" in r.stderr.decode()


def test_fail_if_below_on_bleu_of_the_generate_task(cli, tmp_path):
    r = score(cli, "-m", GPT2, gen_items(tmp_path), "--max-gen-toks", "4", "--metric", "chrf",
              "--fail-if-below", "chrf=99.5", "--summary-only")
    assert r.returncode == 3 and [v["metric"] for v in jsonl(r, "verdict")] == ["chrf"]


@pytest.mark.parametrize("args, message", [
    (["--fail-if-below", "acc"], "METRIC=VALUE"),
    (["--fail-if-below", "acc=x"], "not a number"),
    (["--fail-if-above", "acc=nan"], "not a finite number"),
    (["--fail-if-below", "bleu=10"], "no metric 'bleu'"),
])
def test_a_malformed_or_unknown_bound_is_a_usage_error(cli, args, message):
    r = cli("score", "-m", GPT2, str(FIX / "mc.jsonl"), *args)
    assert r.returncode == 2 and message in r.stderr.decode(), r.stderr.decode()


def test_fail_if_worse_help_says_a_significance_level_not_a_margin(cli):
    text = " ".join(ok(cli("score", "--help")).stdout.decode().split())
    assert "a significance level (0.05), not a margin" in text
    assert "--fail-if-below" in text and "--fail-if-above" in text


def test_perplexity_bound_on_an_unknown_figure_or_per_line_is_a_usage_error(cli, tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("The cat sat on the mat.\n", encoding="utf-8")
    r = cli("perplexity", str(text), "--fail-if-above", "ppl=3")
    assert r.returncode == 2 and "no metric 'ppl'" in r.stderr.decode()
    r = cli("perplexity", str(text), "--per-line", "--fail-if-above", "token_ppl=3")
    assert r.returncode == 2 and "--per-line" in r.stderr.decode()


# ------------------------------------------------------------------ 8: gates on BLEU / chrF

def test_gate_metric_bleu_with_metric_bleu_compares_with_sacrebleus_paired_bootstrap(cli, tmp_path):
    from nlpkit.mt.bleu import EvalOptions, paired_test

    # targets the first model's own answers on four of six items: it wins BLEU and chrF, by sacrebleu's p-values
    first = jsonl(ok(score(cli, "-m", GPT2, gen_items(tmp_path, name="probe.jsonl"), "--max-gen-toks", "4")), "item")
    items = [(c, first[k]["answer"] if k < 4 else t) for k, (c, t) in enumerate(GEN)]
    path = gen_items(tmp_path, items)
    r = score(cli, "-m", GPT2, "-m", LLAMA, path, "--max-gen-toks", "4", "--metric", "exact_match,bleu,chrf",
              "--gate-metric", "bleu", "--gate-metric", "chrf", "--fail-if-worse", "0.05", "--seed", "7")
    assert r.returncode in (0, 3), r.stderr.decode()
    got = jsonl(r, "item")
    answers = {m: [x["answer"] for x in got if x["model"] == m] for m in ("gpt2-bpe", "llama-spm")}
    targets = [[t] if isinstance(t, str) else t for _, t in items]
    refs = [[t[j] if j < len(t) else t[0] for t in targets] for j in range(2)]
    want = {x["metric"]: x for x in paired_test([("a", answers["gpt2-bpe"]), ("b", answers["llama-spm"])], refs,
                                                EvalOptions(metrics=("bleu", "chrf")), n_samples=1000, seed=7)
            if x["system"] == "b"}
    comps = {c["metric"]: c for c in jsonl(r, "comparison")}
    assert list(comps) == ["exact_match", "bleu", "chrf"]
    for name, key in (("bleu", "BLEU"), ("chrf", "chrF2")):
        w = want.get(key, want.get(name))
        assert comps[name]["value"] == pytest.approx(w["score"], abs=1e-12)
        assert comps[name]["difference"] < 0 and comps[name]["p_value"] == w["p_value"]
        assert (comps[name]["test"], comps[name]["mcnemar_p"]) == ("bootstrap", None)
    verdicts = {v["metric"]: v for v in jsonl(r, "verdict")}
    assert list(verdicts) == ["bleu", "chrf"]
    assert r.returncode == (3 if any(not v["pass"] for v in verdicts.values()) else 0)
    assert all(v["pass"] == (v["p_value"] >= 0.05) for v in verdicts.values())


def test_metric_chrf_alone_is_compared_and_gated_on_chrf(cli, tmp_path):
    r = score(cli, "-m", GPT2, "-m", LLAMA, gen_items(tmp_path), "--max-gen-toks", "4", "--metric", "chrf",
              "--fail-if-worse", "0.05", "--summary-only")
    assert r.returncode in (0, 3), r.stderr.decode()
    assert [c["metric"] for c in jsonl(r, "comparison")] == ["chrf"]
    assert [v["metric"] for v in jsonl(r, "verdict")] == ["chrf"]
    assert {s["metric"] for s in jsonl(r, "summary")} == {"chrf"}


def test_a_gate_metric_not_in_metric_is_a_usage_error_saying_so(cli, tmp_path):
    r = cli("score", "-m", GPT2, "-m", GPT2, gen_items(tmp_path), "--fail-if-worse", "0.05", "--gate-metric", "bleu")
    assert r.returncode == 2 and "--metric names the metrics" in r.stderr.decode()


# ------------------------------------------------------------------ 15, 16

def test_sample_dist_signature_has_no_random_seed(cli):
    sigs = {jsonl(ok(cli("sample", "The cat", "--dist", "--format", "jsonl")))[0]["signature"] for _ in range(2)}
    assert len(sigs) == 1 and "|seed:none|" in sigs.pop()


def test_metric_given_twice_is_summarised_once(cli, tmp_path):
    r = ok(score(cli, "-m", GPT2, gen_items(tmp_path, GEN[:2]), "--max-gen-toks", "2", "--metric", "bleu,bleu",
                 "--summary-only"))
    assert [s["metric"] for s in jsonl(r, "summary")] == ["bleu"]


def test_shell_completion_offers_the_metric_names_for_metric():
    from click.shell_completion import BashComplete

    from nlpkit.cli.main import cli

    comp = BashComplete(cli, {}, "nlpkit", "_NLPKIT_COMPLETE")

    def values(words, incomplete):
        return [i.value for i in comp.get_completions(words, incomplete)]

    assert values(["score", "--metric"], "") == ["exact_match", "bleu", "chrf"]
    assert values(["score", "--metric"], "exact_match,") == ["exact_match,bleu", "exact_match,chrf"]
    assert values(["score", "--gate-metric"], "ch") == ["chrf"]
    assert values(["score", "--fail-if-below"], "acc_n") == ["acc_norm="]


# ------------------------------------------------------------------ 43.3: every setting in the signature

@pytest.mark.parametrize("one, two", [
    (["--until", "X"], ["--until", "Y"]),
    (["--until", "X", "--until", "Y"], ["--until", "XY"]),
    (["--extract", "(\\d+)"], ["--extract", "(\\w+)"]),
    (["--extract", "(\\d+)"], ["--extract", "(\\d+)", "--extract-group", "-1"]),
    (["--ignore-regex", ","], ["--ignore-regex", "\\."]),
    (["--metric", "exact_match"], ["--metric", "exact_match,bleu"]),
    (["--top-k", "5", "--temperature", "1"], ["--top-k", "10", "--temperature", "1"]),
    (["--top-p", "0.5", "--temperature", "1"], ["--top-p", "0.9", "--temperature", "1"]),
    (["--min-p", "0.1", "--temperature", "1"], ["--min-p", "0.2", "--temperature", "1"]),
    (["--repetition-penalty", "1.1"], ["--repetition-penalty", "1.2"]),
    (["--temperature", "0.5"], ["--temperature", "1"]),
    (["--max-gen-toks", "2"], ["--max-gen-toks", "3"]),
    (["--ignore-case"], ["--ignore-punctuation"]),
])
def test_two_values_of_a_generate_setting_sign_differently(cli, tmp_path, one, two):
    path = gen_items(tmp_path, GEN[:1])
    sigs = []
    for args in (one, two):
        budget = [] if "--max-gen-toks" in args else ["--max-gen-toks", "2"]
        r = ok(score(cli, "-m", GPT2, path, "--summary-only", *budget, *args))
        sigs.append(jsonl(r, "summary")[0]["signature"])
    assert sigs[0] != sigs[1]


def test_stop_strings_and_patterns_are_hashed_as_system_is(cli, tmp_path):
    from nlpkit.signature import text_hash

    r = ok(score(cli, "-m", GPT2, gen_items(tmp_path, GEN[:1]), "--max-gen-toks", "2", "--until", "\n",
                 "--extract", "(\\d+)", "--ignore-regex", ",", "--summary-only"))
    sig = jsonl(r, "summary")[0]["signature"]
    until, extract = text_hash(["\n"]), text_hash("(\\d+)")
    assert f"|until:{until}|" in sig and f"|extract:{extract}|" in sig
    assert f"|ignore-regex:{text_hash([','])}|" in sig and "|metric:exact_match|" in sig
    assert np.all([len(part) < 80 for part in sig.split("|")])


@pytest.mark.parametrize("command", ["generate", "sample"])
def test_generate_and_sample_warn_on_a_literal_backslash_stop_and_filters_under_temperature_0(cli, command):
    r = ok(cli(command, "The cat", "--max-new-tokens", "2", "--stop", "\\n", "--temperature", "0", "--top-k", "3"))
    err = r.stderr.decode()
    assert "--stop '\\n' holds \\n as plain characters" in err and "--top-k has no effect" in err
    r = ok(cli(command, "The cat", "--max-new-tokens", "2", "--stop", "\n", "--top-k", "3", "--quiet"))
    assert r.stderr.decode() == ""


def test_generate_stop_strings_sign_differently(cli):
    sigs = [json.loads(ok(cli("generate", "The cat", "--max-new-tokens", "2", "--seed", "1", "--stop", stop,
                              "--format", "jsonl")).stdout.decode().splitlines()[-1])["signature"]
            for stop in ("X", "Y")]
    assert sigs[0] != sigs[1] and "|stop:sha256-" in sigs[0]
