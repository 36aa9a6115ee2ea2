"""Perplexity procedures against the same procedures run with transformers (stored by tools/make_lm_fixtures.py),
and the `nlpkit perplexity` command end to end."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from nlpkit.errors import NlpkitError, UsageError
from nlpkit.lm.transformer.loaders import load_model
from nlpkit.lm.perplexity import count_words, perplexity, score_ids, window_logprobs

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
    # the reference procedures: the guide and llama.cpp with BOS as the tokenizer adds it, the harness
    # always with its prefix token
    add_bos = True if mode == "disjoint" else ref["add_bos"]
    got = score_ids(model, ref["ppl_ids"], mode=mode, context=context, stride=stride, add_bos=add_bos)
    # sliding: the guide's own figure weights each window's mean by trg_len - 1; nlpkit prints the exact mean
    assert (got.guide_mean_nll if mode == "sliding" else got.mean_nll) == pytest.approx(ref["ppl"][case], rel=1e-6)
    assert got.mean_nll == pytest.approx(-np.mean(got.logprobs), rel=1e-12)


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


@pytest.mark.parametrize("name", ["gpt2", "llama-gqa"])
def test_windows_scored_on_several_threads_at_once_give_the_same_bits(monkeypatch, name):
    """Windows run two at a time, each forward serial on its thread (and a last odd window row-parallel),
    give exactly the log-probabilities of one window at a time on one thread; BLAS's count comes back."""
    import nlpkit.lm.transformer.model as model_mod
    from nlpkit.lm import threads
    model, ref = fixture(name)
    monkeypatch.setattr(model_mod, "PARALLEL_MIN_TOKENS", 2)
    monkeypatch.setenv("NLPKIT_LM_THREADS", "1")
    ids = ref["ppl_ids"][:100]  # 11 windows: five rounds of two, then one alone
    one = score_ids(model, ids, mode="sliding", context=24, stride=8, add_bos=True)
    before = threads.blas_threads()
    monkeypatch.setenv("NLPKIT_LM_THREADS", "2")
    two = score_ids(model, ids, mode="sliding", context=24, stride=8, add_bos=True)
    assert threads.blas_threads() == before
    assert two.positions == one.positions and len(one.positions) > 24
    assert two.logprobs == one.logprobs


def test_long_window_is_chunked_through_the_cache(monkeypatch):
    import nlpkit.lm.transformer.window_forward as scoring
    model, ref = fixture("llama-gqa")
    seq = [1] + ref["ppl_ids"][:60]
    whole = window_logprobs(model, seq, 1)
    monkeypatch.setattr(scoring, "CHUNK", 7)
    np.testing.assert_allclose(scoring.window_logprobs(model, seq, 1), whole, atol=1e-6)
    np.testing.assert_allclose(scoring.window_logprobs(model, seq, 30), whole[29:], atol=1e-6)


def test_bad_windows_and_texts():
    model, ref = fixture("gpt2")
    with pytest.raises(UsageError, match="`stride` 20 must be between 1 and `context` 10"):
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
    model, _ = fixture("llama-gqa")
    core = score_ids(model, ref["ppl_ids"], mode="sliding", context=24, stride=8, add_bos=True)
    assert core.guide_mean_nll == pytest.approx(ref["ppl"]["sliding_c24_s8"], rel=1e-6)
    assert rec["mean_nll"] == pytest.approx(-np.mean(core.logprobs), rel=1e-9)
    assert rec["token_ppl"] == pytest.approx(math.exp(rec["mean_nll"]), rel=1e-9)
    assert rec["words"] == ref["words"] and rec["bytes"] == ref["bytes"]  # BOS: every token scored
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
    assert [x["position"] for x in recs] == list(range(len(recs)))  # the first token from the prefix (EOS) token
    r = cli(*args, "--per-token", "--format", "jsonl", "--no-signature", "--no-add-bos", input="It is a truth.")
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
    assert r.returncode == 1 and b"no input (no FILE given, and stdin is empty)" in r.stderr
    r = cli("perplexity", "--model", model, "-", input="")
    assert r.returncode == 1 and b"empty text" in r.stderr
    r = cli("perplexity", "--model", str(tmp_path / "missing"), input="hello there")
    assert r.returncode == 1 and b"does not exist" in r.stderr
    r = cli("perplexity", "--model", str(tmp_path), input="hello there")
    assert r.returncode == 1 and b"no config.json" in r.stderr
    r = cli("perplexity", "--model", model, "--rope-scaling", "yarn", "--rope-factor", "2", input="hello there")
    assert r.returncode == 2 and b"RoPE" in r.stderr


# ------------------------------------------- every figure over the scored tokens (issue 14)

SAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "text" / "held_out_sample.txt"
DEFAULT = Path(__file__).resolve().parents[2] / "nlpkit" / "lm" / "default"


@pytest.fixture(scope="module")
def default_model():
    if not (DEFAULT / "model.safetensors").is_file():
        pytest.skip("nlpkit/lm/default/ is not built")
    return load_model(str(DEFAULT))


def assert_second_half_close_to_disjoint(model, text: str, context: int) -> None:
    """second-half scores only half of each chunk: its bits/byte must still be a per-byte figure."""
    dj, _ = perplexity(model, text, mode="disjoint", context=context)
    sh, _ = perplexity(model, text, mode="second-half", context=context)
    assert sh.bytes < 0.6 * dj.bytes and sh.words < 0.6 * dj.words  # the bytes and words it scored
    assert sh.bits_per_byte == pytest.approx(dj.bits_per_byte, rel=0.05)
    assert sh.word_perplexity == pytest.approx(dj.word_perplexity, rel=0.25)


def test_second_half_bits_per_byte_near_disjoint_on_committed_text(default_model):
    assert_second_half_close_to_disjoint(default_model, SAMPLE.read_text(encoding="utf-8"), 128)


def test_second_half_bits_per_byte_near_disjoint_on_held_out_persuasion(default_model, shared_data):
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
    import gutenberg
    raw = gutenberg.held_out_text(shared_data).encode("utf-8")[:20_000]
    assert_second_half_close_to_disjoint(default_model, raw[: raw.rindex(b"\n")].decode("utf-8"), 512)


def test_covered_bytes_and_words_follow_the_first_byte_rule():
    from nlpkit.lm.perplexity import covered
    text = "It was  a café\n"  # pieces of re.split: It / was / a / café / '' (the empty tail)
    lens = [2, 4, 3, 6, 1]  # "It", " was", "  a", " café", "\n"
    assert covered(text, lens, range(5)) == (16, 5)
    assert covered(text, lens, [1, 2, 3, 4]) == (14, 4)  # "It" left out
    assert covered(text, lens, [0]) == (2, 1)
    assert covered(text, lens, [2]) == (3, 1)  # "  a": the word a starts in it
    assert covered(text, lens, [3]) == (6, 1)
    assert covered(text, lens, [4]) == (1, 1)  # the empty tail belongs to the last byte's token
    assert covered("ab", [1, 1], [1]) == (1, 0)  # a word split across tokens belongs to its first byte's


def test_first_token_is_predicted_from_the_prefix_token(default_model):
    p, scored = perplexity(default_model, "It was")
    assert scored.positions == [0, 1] and (p.tokens, p.bytes, p.words) == (2, 6, 2)
    p, scored = perplexity(default_model, "It was", add_bos=False)
    assert scored.positions == [1] and (p.tokens, p.bytes, p.words) == (1, 4, 1)  # " was"
    p, _ = perplexity(default_model, "It")  # one token: scored
    assert p.tokens == 1 and p.bits_per_byte > 0


@pytest.mark.parametrize("mode, bos", [("sliding", "--add-bos"), ("sliding", "--no-add-bos"),
                                       ("disjoint", "--add-bos")])
def test_cli_per_line_records_are_consistent(cli, mode, bos):
    text = "".join(SAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)[:6]) + "It\n"
    r = cli("perplexity", "-", "--model", str(DEFAULT), "--per-line", "--mode", mode, "--context", "64",
            bos, "--format", "jsonl", "--no-signature", input=text)
    assert r.returncode == 0, r.stderr
    recs = [json.loads(x) for x in r.stdout.decode().splitlines()]
    assert len(recs) == len(text.splitlines())
    for rec in recs:
        if rec["tokens"] == 0:
            assert rec["bytes"] == 0 and rec["words"] == 0
            continue
        lhs, rhs = rec["bits_per_byte"] * rec["bytes"] * math.log(2), rec["tokens"] * rec["mean_nll"]
        assert lhs == pytest.approx(rhs, rel=1e-9)
        assert rec["word_ppl"] == pytest.approx(math.exp(rhs / rec["words"]), rel=1e-9)
    last = recs[-1]  # the one-token line "It"
    if bos == "--add-bos":
        assert last["tokens"] == 1 and last["bytes"] == 2 and last["words"] == 1 and last["bits_per_byte"] > 0
    else:
        assert last["tokens"] == 0


@pytest.mark.parametrize("mode", ["sliding", "disjoint", "second-half"])
def test_cli_tokens_mean_nll_bits_per_byte_and_per_token_agree(cli, mode):
    args = ("perplexity", str(SAMPLE), "--model", str(DEFAULT), "--mode", mode, "--context", "128",
            "--format", "jsonl", "--no-signature")
    if mode == "sliding":
        args += ("--stride", "48")  # uneven windows: the guide's trg_len - 1 weighting would differ
    summary = json.loads(cli(*args).stdout)
    tokens = [json.loads(x) for x in cli(*args, "--per-token").stdout.decode().splitlines()]
    logprobs = [t["logprob"] for t in tokens]
    assert summary["tokens"] == len(logprobs)
    assert summary["mean_nll"] == pytest.approx(-math.fsum(logprobs) / len(logprobs), rel=1e-9)
    lhs = summary["bits_per_byte"] * summary["bytes"] * math.log(2)
    assert lhs == pytest.approx(summary["tokens"] * summary["mean_nll"], rel=1e-9)


def test_context_past_the_trained_positions_is_refused(cli, default_model):
    from nlpkit.lm.perplexity import check_context
    r = cli("perplexity", "--model", str(DEFAULT), "--context", "1000000000", input="hello there")
    assert r.returncode == 2 and b"512" in r.stderr and b"--context" in r.stderr
    check_context(default_model, 512)
    with pytest.raises(UsageError, match="512 positions"):
        check_context(default_model, 513)
    yarn, _ = fixture("llama-yarn")  # its config: 16 original positions x yarn factor 2 = its 32 positions
    check_context(yarn, 32)
    with pytest.raises(UsageError, match="exceeds the 32 positions"):
        check_context(yarn, 33)
    default_model.set_rope("linear", 2.0)      # an override: trained positions x factor
    try:
        check_context(default_model, 1024)
        with pytest.raises(UsageError, match="1024 positions"):
            check_context(default_model, 1025)
    finally:
        default_model.set_rope("none", None)
    r = cli("perplexity", "--model", str(LM / "gpt2"), "--context", "65", input="hello there")
    assert r.returncode == 2 and b"64 positions" in r.stderr


def test_cli_several_files_end_with_a_marked_corpus_total(cli, tmp_path):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("It is a truth universally acknowledged.\n", encoding="utf-8")
    b.write_text("However little known the feelings of such a man may be.\n", encoding="utf-8")
    args = ("perplexity", str(a), str(b), "--model", str(LM / "gpt2"), "--context", "16")
    recs = [json.loads(x) for x in cli(*args, "--format", "jsonl").stdout.decode().splitlines()]
    assert [r["total"] for r in recs] == [False, False, True] and recs[2]["file"] == "(total)"
    files, total = recs[:2], recs[2]
    for k in ("tokens", "words", "bytes"):
        assert total[k] == sum(r[k] for r in files)
    nll = sum(r["tokens"] * r["mean_nll"] for r in files)
    assert total["mean_nll"] == pytest.approx(nll / total["tokens"], rel=1e-9)
    assert total["bits_per_byte"] == pytest.approx(nll / total["bytes"] / math.log(2), rel=1e-9)
    doc = json.loads(cli(*args, "--format", "json").stdout)
    assert [r["total"] for r in doc["results"]] == [False, False, True]
    tsv = cli(*args, "--format", "tsv").stdout.decode().splitlines()
    assert [ln.split("\t")[0] for ln in tsv] == ["file", str(a), str(b), "(total)"]
    one = json.loads(cli("perplexity", str(a), "--model", str(LM / "gpt2"), "--format", "jsonl").stdout)
    assert "total" not in one


def test_stride_equal_to_context_warns_that_window_starts_go_unscored(cli, tmp_path):
    """The transformers guide loop with stride = context never predicts a window's first token; nlpkit
    scores what the guide scores and says so on stderr (a smaller stride scores every token)."""
    _, ref = fixture("llama-gqa")
    text = tmp_path / "t.txt"
    text.write_text(ref["ppl_text"], encoding="utf-8")
    n = len(ref["ppl_ids"])
    r = cli("perplexity", str(text), "--model", str(LM / "llama-gqa"), "--context", "8", "--stride", "8",
            "--format", "jsonl")
    assert r.returncode == 0 and b"first token of each window after the first is not scored" in r.stderr
    assert json.loads(r.stdout)["tokens"] == n - (n - 1) // 8
    r = cli("perplexity", str(text), "--model", str(LM / "llama-gqa"), "--context", "8", "--stride", "7",
            "--format", "jsonl")
    assert r.stderr == b"" and json.loads(r.stdout)["tokens"] == n
