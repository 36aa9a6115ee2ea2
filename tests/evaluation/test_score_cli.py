"""`nlpkit score` through the entry point: preference pairs and DPO rewards against transformers, paired
comparisons, n-gram models against KenLM's query, output forms, and each bad input's message and exit code."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from conftest import FIXTURES

FIX = FIXTURES / "score"
GPT2 = str(FIX / "models" / "gpt2-bpe")
GPT2_REF = str(FIX / "models" / "gpt2-bpe-ref")
LLAMA = str(FIX / "models" / "llama-spm")
PREF = json.loads((FIX / "preference.json").read_text())
TOL = 1e-4  # per token


def ok(r) -> str:
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout.decode()


def records(text: str, kind: str) -> list[dict]:
    return [r for r in map(json.loads, text.splitlines()) if r["record"] == kind]


# ----------------------------------------------------------------------------------------- preference (DPO)

def test_preference_logprobs_equal_transformers_on_the_same_token_ids(cli):
    items = records(ok(cli("score", "-m", GPT2, str(FIX / "preference.jsonl"), "--format", "jsonl")), "item")
    assert len(items) == len(PREF["gpt2-bpe"])
    for it, ref in zip(items, PREF["gpt2-bpe"]):
        assert abs(it["logprob_chosen"] - ref["chosen"]) <= TOL * len(ref["chosen_ids"])
        assert abs(it["logprob_rejected"] - ref["rejected"]) <= TOL * len(ref["rejected_ids"])
        assert (it["tokens_chosen"], it["tokens_rejected"]) == (len(ref["chosen_ids"]), len(ref["rejected_ids"]))
        assert it["margin"] == pytest.approx(it["logprob_chosen"] - it["logprob_rejected"], abs=1e-12)
        assert it["accuracy"] == float(ref["chosen"] > ref["rejected"])


def test_dpo_rewards_follow_beta_times_policy_minus_reference_logprob(cli):
    beta = 0.25
    out = ok(cli("score", "-m", GPT2, "--reference", GPT2_REF, "--beta", str(beta), str(FIX / "preference.jsonl"),
                 "--format", "jsonl"))
    items = records(out, "item")
    right = []
    for it, pol, ref in zip(items, PREF["gpt2-bpe"], PREF["gpt2-bpe-ref"]):
        r_c = beta * (pol["chosen"] - ref["chosen"])
        r_r = beta * (pol["rejected"] - ref["rejected"])
        n = len(pol["chosen_ids"]) + len(pol["rejected_ids"])
        assert it["reward_chosen"] == pytest.approx(r_c, abs=beta * TOL * n)
        assert it["reward_rejected"] == pytest.approx(r_r, abs=beta * TOL * n)
        assert it["reward_margin"] == pytest.approx(r_c - r_r, abs=2 * beta * TOL * n)
        assert it["reward_accuracy"] == float(r_c > r_r)
        right.append(float(r_c > r_r))
    summary = {r["metric"]: r for r in records(out, "summary")}
    assert summary["reward_accuracy"]["value"] == pytest.approx(np.mean(right))
    assert set(summary) == {"margin", "accuracy", "reward_margin", "reward_accuracy"}
    assert "beta:0.25" in summary["margin"]["signature"] and "reference:gpt2-bpe-ref" in summary["margin"]["signature"]


def test_reference_model_with_another_tokenizer_is_an_error_naming_the_item(cli):
    r = cli("score", "-m", GPT2, "--reference", LLAMA, str(FIX / "preference.jsonl"))
    assert r.returncode == 1
    assert "preference.jsonl, line 1: the reference model tokenizes this item differently" in r.stderr.decode()


@pytest.mark.parametrize("beta", ["0", "-0.1", "nan", "inf"])
def test_beta_not_positive_or_not_finite_is_a_usage_error(cli, beta):
    r = cli("score", "-m", GPT2, "--reference", GPT2_REF, "--beta", beta, str(FIX / "preference.jsonl"))
    assert r.returncode == 2
    assert "--beta" in r.stderr.decode()


def test_beta_without_reference_is_a_usage_error(cli):
    r = cli("score", "-m", GPT2, "--beta", "0.1", str(FIX / "preference.jsonl"))
    assert r.returncode == 2 and "--beta needs --reference" in r.stderr.decode()


# ------------------------------------------------------------------------------------ several models

def test_two_models_summaries_and_comparison_equal_the_statistics_of_their_items(cli):
    from nlpkit.evaluation.significance import mcnemar, paired_bootstrap

    out = ok(cli("score", "-m", GPT2, "-m", LLAMA, str(FIX / "mc.jsonl"), "--format", "jsonl", "--bootstrap",
                 "500", "--seed", "7"))
    items = records(out, "item")
    assert [(r["model"], r["index"]) for r in items[:4]] == [("gpt2-bpe", 0), ("llama-spm", 0), ("gpt2-bpe", 1),
                                                             ("llama-spm", 1)]
    acc = {m: [r["acc"] for r in items if r["model"] == m] for m in ("gpt2-bpe", "llama-spm")}
    comp = {r["metric"]: r for r in records(out, "comparison")}["acc"]
    want = paired_bootstrap(acc["gpt2-bpe"], acc["llama-spm"], n_samples=500, seed=7)
    assert (comp["p_value"], comp["low"], comp["high"]) == (want.p_value, want.low, want.high)
    assert comp["difference"] == pytest.approx(np.mean(acc["llama-spm"]) - np.mean(acc["gpt2-bpe"]))
    assert comp["mcnemar_p"] == mcnemar(acc["gpt2-bpe"], acc["llama-spm"]).p_value
    assert (comp["model"], comp["baseline"]) == ("llama-spm", "gpt2-bpe")


def test_fail_if_worse_exits_1_with_a_reason_when_a_later_model_is_significantly_worse(cli):
    # llama-spm's log-likelihoods of these items are lower than gpt2-bpe's (p = 0.029 with 1000 resamples)
    r = cli("score", "-m", GPT2, "-m", LLAMA, str(FIX / "ll.jsonl"), "--summary-only", "--fail-if-worse", "0.05")
    assert r.returncode == 1
    err = r.stderr.decode()
    assert "nlpkit: error: llama-spm is worse than gpt2-bpe on logprob" in err and "p = 0.02897" in err
    assert "comparison" not in err and r.stdout  # the results are printed before the verdict
    assert cli("score", "-m", GPT2, "-m", LLAMA, str(FIX / "ll.jsonl"), "--summary-only", "--fail-if-worse",
               "0.01").returncode == 0


@pytest.mark.parametrize("option", [["--fail-if-worse", "0.05"], ["--bootstrap", "100"], ["--seed", "1"]])
def test_a_paired_option_with_one_model_is_a_usage_error(cli, option):
    r = cli("score", "-m", GPT2, str(FIX / "mc.jsonl"), *option)
    assert r.returncode == 2
    assert "give -m at least twice" in r.stderr.decode()


# ------------------------------------------------------------------------------------ n-gram models

def test_ngram_continuation_logprobs_equal_kenlm_query_scores_of_the_same_words(cli, tmp_path):
    """KenLM's query scored each held-out line (<s> words </s>); a continuation's words after its context get the
    same scores as in the whole line (full_scores with bos, without eos), so their sum is the reference."""
    ngram = FIXTURES / "ngram"
    query = json.loads((ngram / "query.json").read_text())["kenlm-3"]
    lines = (ngram / "heldout.txt").read_text(encoding="utf-8").split("\n")[:-1]
    items, want, pos = [], [], 0
    for line in lines:
        words = line.split()
        n = len(words)
        if n >= 3 and len(items) < 25:
            k = n // 2
            items.append({"context": " ".join(words[:k]) + " ", "continuation": " ".join(words[k:])})
            want.append(sum(query["log10"][pos + k:pos + n]) * math.log(10))
        pos += n + 1  # the words and </s>
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps(i) + "\n" for i in items), encoding="utf-8")
    got = records(ok(cli("score", "-m", str(ngram / "kenlm-3.arpa.gz"), str(path), "--format", "jsonl")), "item")
    assert len(got) == len(items)
    for g, w, it in zip(got, want, items):
        assert g["logprob"] == pytest.approx(w, abs=1e-4)
        assert g["tokens"] == len(it["continuation"].split())


def test_ngram_and_neural_model_compared_on_the_same_items(cli):
    out = ok(cli("score", "-m", str(FIXTURES / "ngram" / "tiny-3.arpa"), "-m", GPT2, str(FIX / "mc.jsonl"),
                 "--summary-only", "--format", "jsonl"))
    comps = records(out, "comparison")
    assert [c["metric"] for c in comps] == ["acc", "acc_norm", "acc_bytes", "acc_tokens"]
    assert comps[0]["baseline"] == "tiny-3.arpa"


# ------------------------------------------------------------------------------------ output forms

def test_summary_only_prints_summaries_and_the_signature_names_task_delimiter_norms_models(cli):
    out = ok(cli("score", "-m", GPT2, str(FIX / "mc.jsonl"), "--summary-only", "--format", "tsv"))
    lines = out.splitlines()
    assert lines[0].split("\t") == ["metric", "value", "stderr", "low", "high", "n", "signature"]
    assert [line.split("\t")[0] for line in lines[1:]] == ["acc", "acc_norm", "acc_bytes", "acc_tokens"]
    sig = lines[1].split("\t")[-1]
    assert sig.startswith("score|task:multiple-choice|delimiter:' '|norm:chars,bytes,tokens|models:gpt2-bpe")


def test_items_read_from_stdin_with_renamed_fields_and_a_string_gold(cli):
    item = {"ctx": "The sky is", "endings": ["blue", "green"], "label": "green"}
    out = ok(cli("score", "-m", GPT2, "--field", "context=ctx", "--field", "choices=endings", "--field",
                 "gold=label", "--format", "jsonl", input=json.dumps(item) + "\n"))
    rec = records(out, "item")[0]
    assert rec["gold"] == [1] and rec["index"] == 0


def test_a_list_of_gold_indices_is_right_when_the_prediction_is_any_of_them(cli):
    item = {"context": "The sky is", "choices": ["blue", "green", "red"], "gold": [0, 1, 2]}
    rec = records(ok(cli("score", "-m", GPT2, "--format", "jsonl", input=json.dumps(item) + "\n")), "item")[0]
    assert rec["acc"] == rec["acc_norm"] == 1.0


# ------------------------------------------------------------------------------------ bad input

@pytest.mark.parametrize("line, message", [
    ('{"context": "a", "choices": ["x", "y"]}', "items.jsonl, line 2: no field 'gold'"),
    ('{"context": "a", "choices": ["x", "y"], "gold": 2}', "items.jsonl, line 2: gold 2 is out of range for 2 "
                                                           "choices (indices 0..1)"),
    ('{"context": "a", "choices": ["x", "y"], "gold": -1}', "items.jsonl, line 2: gold -1 is out of range"),
    ('{"context": "a", "choices": ["x", "y"], "gold": "z"}', "items.jsonl, line 2: gold 'z' is not one of the "
                                                             "choices"),
    ('{"context": "a", "choices": [], "gold": 0}', "items.jsonl, line 2: field 'choices' is empty"),
    ('{"context": "a", "choices": ["x", 3], "gold": 0}', "items.jsonl, line 2: choice 1 of 'choices' is a number"),
    ('{"context": "a", "choices": ["x"], "gold": true}', "items.jsonl, line 2: field 'gold' holds a boolean"),
    ('{"context": "a", "choices": "x", "gold": 0}', "items.jsonl, line 2: field 'choices' is a string"),
    ('{"context": "a", "choices": ["x"]', "items.jsonl, line 2: not valid JSON"),
    ('["a", "b"]', "items.jsonl, line 2: expected a JSON object, got a list"),
])
def test_each_bad_record_is_an_error_naming_file_and_line(cli, tmp_path, line, message):
    path = tmp_path / "items.jsonl"
    path.write_text('{"context": "a", "choices": ["x", "y"], "gold": 0}\n' + line + "\n", encoding="utf-8")
    r = cli("score", "-m", GPT2, str(path))
    assert r.returncode == 1, r.stderr.decode()
    assert r.stderr.decode().startswith("nlpkit: error: " + message.replace("items.jsonl", str(path), 1)), \
        r.stderr.decode()
    assert "Traceback" not in r.stderr.decode()


def test_a_record_missing_its_continuation_names_the_field(cli):
    r = cli("score", "-m", GPT2, "--task", "loglikelihood", input=b'{"context": "a", "text": "b"}\n')
    assert r.returncode == 1
    assert "<stdin>, line 1: no field 'continuation'" in r.stderr.decode() or \
        "line 1: no field 'continuation'" in r.stderr.decode()


def test_fields_that_name_no_task_are_an_error_listing_them(cli):
    r = cli("score", "-m", GPT2, input=b'{"question": "a", "answer": "b"}\n')
    assert r.returncode == 1
    assert "line 1: cannot tell the task from the fields (question, answer)" in r.stderr.decode()


def test_an_empty_continuation_is_an_error(cli):
    r = cli("score", "-m", GPT2, input=b'{"context": "a", "continuation": ""}\n')
    assert r.returncode == 1 and "field 'continuation' is empty" in r.stderr.decode()


def test_a_malformed_field_mapping_is_a_usage_error(cli):
    r = cli("score", "-m", GPT2, "--field", "answer", input=b'{"context": "a", "continuation": "b"}\n')
    assert r.returncode == 2 and "ROLE=NAME" in r.stderr.decode()
