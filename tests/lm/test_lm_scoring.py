"""Perplexity procedures against the same procedures run with transformers (stored by tools/make_lm_fixtures.py),
and the `nlpkit perplexity` command end to end."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from nlpkit.errors import NlpkitError, UsageError
from nlpkit.lm.loaders import load_model
from nlpkit.lm.scoring import count_words, perplexity, score_ids, window_logprobs

LM = Path(__file__).resolve().parents[1] / "fixtures" / "lm"
CASES = {  # reference key -> (mode, context, stride)
    "sliding_c24_s8": ("sliding", 24, 8),
    "sliding_c16_s16": ("sliding", 16, 16),
    "disjoint_c16": ("disjoint", 16, None),
    "second_half_c16": ("second-half", 16, None),
}
_models: dict = {}


def fixture(name: str):
    if name not in _models:
        _models[name] = (load_model(LM / name), json.loads((LM / name / "reference.json").read_text()))
    return _models[name]


@pytest.mark.parametrize("name", ["gpt2", "llama-gqa", "llama-yarn"])
@pytest.mark.parametrize("case", list(CASES))
def test_perplexity_modes_equal_transformers_procedures(name, case):
    model, ref = fixture(name)
    mode, context, stride = CASES[case]
    got = score_ids(model, ref["ppl_ids"], mode=mode, context=context, stride=stride, add_bos=ref["add_bos"])
    assert got.mean_nll == pytest.approx(ref["ppl"][case], rel=1e-6)


@pytest.mark.parametrize("name", ["gpt2", "llama-gqa"])
def test_one_pass_mean_nll_equals_transformers(name):
    model, ref = fixture(name)
    seq = ([1] if ref["add_bos"] else []) + ref["ppl_ids"]
    assert -window_logprobs(model, seq[:64], 1).mean() == pytest.approx(ref["ppl"]["full_nll_mean"], rel=1e-6)


def test_tokenizer_matches_the_reference_ids():
    model, ref = fixture("llama-gqa")
    assert model.tokenizer.encode(ref["ppl_text"]) == ref["ppl_ids"]


def test_text_normalizations_follow_lm_eval():
    model, ref = fixture("gpt2")
    p, scored = perplexity(model, ref["ppl_text"], mode="disjoint", context=16)
    assert (p.words, p.bytes) == (ref["words"], ref["bytes"])
    assert p.tokens == len(ref["ppl_ids"])  # disjoint scores every token
    assert p.mean_nll == pytest.approx(ref["ppl"]["disjoint_c16"], rel=1e-6)
    assert p.word_perplexity == pytest.approx(math.exp(p.nll / p.words))
    assert p.byte_perplexity == pytest.approx(math.exp(p.nll / p.bytes))
    assert p.bits_per_byte == pytest.approx(p.nll / p.bytes / math.log(2))
    assert p.token_perplexity == pytest.approx(math.exp(p.mean_nll))
    assert count_words("a b\n") == 3  # re.split(r"\s+") counts the empty tail, as lm-eval does


def test_sliding_scores_every_token_after_the_first_once():
    model, ref = fixture("llama-gqa")
    res = score_ids(model, ref["ppl_ids"], mode="sliding", context=24, stride=8, add_bos=True)
    assert res.positions == list(range(len(ref["ppl_ids"])))  # with BOS, token 0 is scored too


def test_long_window_is_chunked_through_the_cache(monkeypatch):
    import nlpkit.lm.scoring as scoring
    model, ref = fixture("llama-gqa")
    seq = [1] + ref["ppl_ids"][:60]
    whole = window_logprobs(model, seq, 1)
    monkeypatch.setattr(scoring, "CHUNK", 7)
    np.testing.assert_allclose(scoring.window_logprobs(model, seq, 1), whole, atol=1e-6)
    np.testing.assert_allclose(scoring.window_logprobs(model, seq, 30), whole[29:], atol=1e-6)


def test_bad_windows_and_texts():
    model, ref = fixture("gpt2")
    with pytest.raises(UsageError, match="--stride 20 must be between 1 and --context 10"):
        score_ids(model, ref["ppl_ids"], context=10, stride=20)
    with pytest.raises(NlpkitError, match="empty text"):
        perplexity(model, "", context=16)
    with pytest.raises(NlpkitError, match="at least 2 x context"):
        score_ids(model, ref["ppl_ids"][:20], mode="second-half", context=16)


# ---------------------------------------------------------------- the CLI

def test_cli_prints_summary_tsv(cli, tmp_path):
    _, ref = fixture("llama-gqa")
    text = tmp_path / "t.txt"
    text.write_text(ref["ppl_text"], encoding="utf-8")
    r = cli("perplexity", str(text), "--model", str(LM / "llama-gqa"), "--context", "24", "--stride", "8",
            "--format", "jsonl")
    assert r.returncode == 0, r.stderr
    rec = json.loads(r.stdout.decode().splitlines()[0])
    assert rec["mean_nll"] == pytest.approx(ref["ppl"]["sliding_c24_s8"], rel=1e-6)
    assert rec["token_ppl"] == pytest.approx(math.exp(ref["ppl"]["sliding_c24_s8"]), rel=1e-6)
    assert rec["words"] == ref["words"] and rec["bytes"] == ref["bytes"]
    assert rec["signature"].startswith("perplexity|model:llama-gqa|mode:sliding|ctx:24|stride:8|bos:yes")


def test_cli_per_line_and_per_token_from_stdin(cli):
    args = ("perplexity", "--model", str(LM / "gpt2"), "--context", "16")
    r = cli(*args, "--per-line", "--format", "tsv", input="It is a truth.\n\nThe single man\n")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.decode().splitlines()
    assert lines[0].split("\t")[:4] == ["file", "line", "tokens", "mean_nll"]
    assert [ln.split("\t")[1] for ln in lines[1:]] == ["1", "2", "3"]
    assert lines[2].split("\t")[2] == "0"  # the empty line has nothing to score
    r = cli(*args, "--per-token", "--format", "jsonl", "--no-signature", input="It is a truth.")
    recs = [json.loads(x) for x in r.stdout.decode().splitlines()]
    assert [x["position"] for x in recs] == list(range(1, len(recs) + 1))
    assert all(x["logprob"] < 0 for x in recs) and "signature" not in recs[0]


def test_cli_modes_agree_with_core(cli):
    model, ref = fixture("llama-gqa")
    for mode, key in (("disjoint", "disjoint_c16"), ("second-half", "second_half_c16")):
        r = cli("perplexity", "-", "--model", str(LM / "llama-gqa"), "--mode", mode, "--context", "16",
                "--format", "json", input=ref["ppl_text"])
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        recs = doc if isinstance(doc, list) else doc.get("records", doc.get("results"))
        assert recs[0]["mean_nll"] == pytest.approx(ref["ppl"][key], rel=1e-6)


def test_cli_bad_input(cli, tmp_path):
    model = str(LM / "gpt2")
    r = cli("perplexity", "--model", model, "--context", "8", "--stride", "16", input="hello")
    assert r.returncode == 2 and b"--stride" in r.stderr
    r = cli("perplexity", "--model", model, input="")
    assert r.returncode == 1 and b"empty text" in r.stderr
    r = cli("perplexity", "--model", str(tmp_path / "missing"), input="hello there")
    assert r.returncode == 1 and b"does not exist" in r.stderr
    r = cli("perplexity", "--model", str(tmp_path), input="hello there")
    assert r.returncode == 1 and b"no config.json" in r.stderr
    r = cli("perplexity", "--model", model, "--rope-scaling", "yarn", "--rope-factor", "2", input="hello there")
    assert r.returncode == 2 and b"RoPE" in r.stderr
