"""`nlpkit perplexity --compare BASE` end to end, against tools/make_compare_fixtures.py (transformers' logits of
the same windows, llama.cpp's statistics in numpy): a tiny random base and its 4-bit-rounded copy, and
SmolLM2-135M float32 vs its Q8_0 GGUF (skipped when benchmarks/out/ does not hold them)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO, run_cli

FIX = Path(__file__).resolve().parents[1] / "fixtures"
TINY = FIX / "lm" / "compare" / "tiny"
REF = json.loads((TINY / "reference.json").read_text())
CASES = {"sliding_c24_s8": ["--context", "24", "--stride", "8"],
         "sliding_c16_s16": ["--context", "16", "--stride", "16"],
         "disjoint_c16": ["--mode", "disjoint", "--context", "16"],
         "second_half_c16": ["--mode", "second-half", "--context", "16"]}


def compare_json(tmp_path, *args, text: str | None = None, texts: list[str] | None = None) -> list[dict]:
    paths = []
    for k, t in enumerate(texts or [text or REF["text"]]):
        p = tmp_path / f"text{k}.txt"
        p.write_text(t, encoding="utf-8")
        paths.append(str(p))
    r = run_cli("perplexity", *paths, "-m", str(TINY / "model"), "--compare", str(TINY / "base"), *args,
                "--format", "jsonl", "--quiet")
    assert r.returncode == 0, r.stderr.decode()
    return [json.loads(line) for line in r.stdout.decode().splitlines()]


def assert_matches_reference(rec: dict, want: dict, unc_rel: float = 1e-5) -> None:
    """Statistics to 1e-5 relative, percentiles to 1e-4 absolute; a single token's value (maximum, minimum) to 1e-5
    absolute as per token; differences of two figures (of PPL, of ln PPL) to 1e-5 of the figures, and mean and RMS Δp
    (differences of probabilities) to 1e-5 absolute; uncertainties to `unc_rel`."""
    scale = {"ppl_diff": want["ppl"], "ln_ppl_ratio": np.log(want["ppl"]), "dp": 1.0, "rms_dp": 1.0}
    for key, value in want.items():
        if isinstance(value, dict):
            prefix = key.split("_")[0]
            for q, v in value.items():
                assert rec[f"{prefix}_p{float(q):g}"] == pytest.approx(v, rel=0, abs=1e-4), (key, q)
        elif key in scale:
            assert rec[key] == pytest.approx(value, rel=0, abs=1e-5 * scale[key]), key
        elif key.endswith(("_max", "_min")):
            assert rec[key] == pytest.approx(value, rel=0, abs=1e-5), key
        elif key.endswith("_unc"):
            assert rec[key] == pytest.approx(value, rel=unc_rel, abs=1e-12), key
        else:
            assert rec[key] == pytest.approx(value, rel=1e-5, abs=1e-9), key


@pytest.mark.parametrize("case", sorted(CASES))
def test_compare_statistics_equal_llama_cpp_formulas_on_transformers_logits(tmp_path, case):
    (rec,) = compare_json(tmp_path, *CASES[case])
    assert rec["tokens"] == REF["cases"][case]["summary"]["tokens"]
    assert_matches_reference(rec, REF["cases"][case]["summary"])
    assert "base:base" in rec["signature"] and "model:model" in rec["signature"]


@pytest.mark.parametrize("case", ["sliding_c24_s8", "second_half_c16"])
def test_compare_per_token_kld_dp_and_top_tokens_equal_reference(tmp_path, case):
    rows = compare_json(tmp_path, "--per-token", *CASES[case])
    want = REF["cases"][case]["tokens"]
    assert [r["id"] for r in rows] == want["id"]
    np.testing.assert_allclose([r["kld"] for r in rows], want["kld"], rtol=0, atol=1e-5)
    np.testing.assert_allclose([r["dp"] for r in rows], want["p_diff"], rtol=0, atol=1e-5)
    np.testing.assert_allclose([r["logprob"] for r in rows], -np.array(want["nll"]), rtol=1e-5)
    np.testing.assert_allclose([r["base_logprob"] for r in rows], -np.array(want["nll_base"]), rtol=1e-5)
    assert [r["top_id"] for r in rows] == want["top"] and [r["base_top_id"] for r in rows] == want["top_base"]


def test_compare_several_files_ends_with_the_corpus_total(tmp_path):
    recs = compare_json(tmp_path, *CASES["sliding_c24_s8"], texts=[REF["text"], REF["second_text"]])
    assert [r["total"] for r in recs] == [False, False, True] and recs[2]["file"] == "(total)"
    assert_matches_reference(recs[1], REF["corpus_sliding_c24_s8"]["second_file"])
    assert_matches_reference(recs[2], REF["corpus_sliding_c24_s8"]["total"])


def test_model_compared_with_itself_gives_zero_divergence_exactly(tmp_path):
    p = tmp_path / "t.txt"
    p.write_text(REF["text"], encoding="utf-8")
    r = run_cli("perplexity", str(p), "-m", str(TINY / "base"), "--compare", str(TINY / "base"), "--context", "24",
                "--format", "jsonl")
    rec = json.loads(r.stdout)
    assert (rec["kld"], rec["kld_max"], rec["kld_unc"], rec["dp"], rec["rms_dp"], rec["dp_max"]) == (0.0,) * 6
    assert (rec["same_top"], rec["same_top_unc"], rec["ppl_ratio"], rec["ln_ppl_ratio"], rec["ppl_diff"]) == \
        (1.0, 0.0, 1.0, 0.0, 0.0)
    assert rec["ppl"] == rec["base_ppl"]


def test_compare_table_reads_at_80_columns(tmp_path):
    p = tmp_path / "t.txt"
    p.write_text(REF["text"], encoding="utf-8")
    r = run_cli("perplexity", str(p), "-m", str(TINY / "model"), "--compare", str(TINY / "base"), "--context", "24",
                "--stride", "8", "--format", "table", env={"COLUMNS": "80"})
    lines = r.stdout.decode().splitlines()
    assert all(len(line) <= 80 for line in lines[:-1])  # the signature footer stays one line
    s = REF["cases"]["sliding_c24_s8"]["summary"]
    cells = {line.split("│")[0].strip(): line.split("│")[1].strip() for line in lines if "│" in line}
    ppl, ppl_unc = (float(x) for x in cells["PPL"].split(" ± "))
    assert (ppl, ppl_unc) == (pytest.approx(s["ppl"], abs=2e-4), pytest.approx(s["ppl_unc"], abs=2e-4))
    assert cells["Same top p"] == f"{100 * s['same_top']:.3f} ± {100 * s['same_top_unc']:.3f} %"


def test_compare_refuses_tokenizers_that_differ_naming_the_first_differing_id(tmp_path):
    p = tmp_path / "t.txt"
    p.write_text("It is a truth.", encoding="utf-8")
    r = run_cli("perplexity", str(p), "-m", str(TINY / "model"), "--compare", str(FIX / "lm" / "gpt2"))
    err = r.stderr.decode()
    assert r.returncode == 1 and err.startswith("nlpkit: error: the two models' tokenizers differ: token 0 is id ")
    assert "Traceback" not in err


def test_compare_base_that_cannot_be_loaded_is_an_error(tmp_path):
    p = tmp_path / "t.txt"
    p.write_text("It is a truth.", encoding="utf-8")
    r = run_cli("perplexity", str(p), "-m", str(TINY / "model"), "--compare", str(tmp_path / "missing"))
    err = r.stderr.decode()
    assert r.returncode == 1 and err.startswith(f"nlpkit: error: --compare {tmp_path / 'missing'}: ")


@pytest.mark.parametrize("which", ["model", "base"])
def test_compare_with_an_ngram_model_is_refused_with_the_reason(tmp_path, which):
    p = tmp_path / "t.txt"
    p.write_text("It is a truth.", encoding="utf-8")
    arpa, neural = str(FIX / "ngram" / "tiny-3.arpa"), str(TINY / "base")
    model, base = (arpa, neural) if which == "model" else (neural, arpa)
    r = run_cli("perplexity", str(p), "-m", model, "--compare", base)
    err = r.stderr.decode()
    assert r.returncode == 2 and "--compare does not apply to an n-gram model (neural models only" in err
    assert "Traceback" not in err


def test_compare_refuses_per_line(tmp_path):
    p = tmp_path / "t.txt"
    p.write_text("It is a truth.\n", encoding="utf-8")
    r = run_cli("perplexity", str(p), "-m", str(TINY / "model"), "--compare", str(TINY / "base"), "--per-line")
    assert r.returncode == 2 and "--per-line" in r.stderr.decode()


# ------------------------------------------------------------------ SmolLM2-135M: float32 vs Q8_0 GGUF

SMOL = REPO / "benchmarks" / "out"
SMOL_REF = FIX / "lm" / "compare" / "smollm2.json"
SMOL_MODELS = (SMOL / "smollm2-135m-instruct-f32" / "model.safetensors", SMOL / "smollm2-135m-instruct-q8_0.gguf")
needs_smollm2 = pytest.mark.skipif(not all(p.is_file() for p in SMOL_MODELS) or not SMOL_REF.is_file(),
                                   reason="SmolLM2 float32 directory / Q8_0 GGUF not in benchmarks/out/ "
                                          "(tools/make_compare_fixtures.py makes them)")


def smol(tmp_path, text: str, *args) -> list[dict]:
    p = tmp_path / "t.txt"
    p.write_text(text, encoding="utf-8")
    r = run_cli("perplexity", str(p), "-m", str(SMOL_MODELS[1]), "--compare", str(SMOL_MODELS[0].parent), *args,
                "--format", "jsonl", "--quiet")
    assert r.returncode == 0, r.stderr.decode()
    return [json.loads(line) for line in r.stdout.decode().splitlines()]


@needs_smollm2
def test_smollm2_q8_0_against_float32_equals_reference_second_half(tmp_path):
    ref = json.loads(SMOL_REF.read_text())
    (rec,) = smol(tmp_path, ref["text"], "--mode", "second-half", "--context", "128", "--no-add-bos")
    # The engine's float32 logits differ from transformers' by ~1e-5 after 30 layers: a flat distribution's KLD
    # moves by up to 2.3e-6 of 0.026 (within the per-token 1e-5), and σ(KLD), σ(Δp²), which the largest values
    # dominate, by up to 5.2e-5 relative (measured after the thread-independent prefill); every other figure is
    # within 1e-5. The per-token tolerance itself allows more: 1e-5 per token moves σ/√(n-1) by up to
    # 1e-5/√692 = 3.8e-7, 0.6% of σ(KLD); 1e-4 relative is the stricter bound.
    assert_matches_reference(rec, ref["cases"]["second_half_c128_nobos"]["summary"], unc_rel=1e-4)


@needs_smollm2
def test_smollm2_q8_0_per_token_equals_reference(tmp_path):
    ref = json.loads(SMOL_REF.read_text())
    rows = smol(tmp_path, ref["short_text"], "--context", "16", "--stride", "8", "--per-token")
    want = ref["cases"]["short_sliding_c16_s8"]["tokens"]
    np.testing.assert_allclose([r["kld"] for r in rows], want["kld"], rtol=0, atol=1e-5)
    np.testing.assert_allclose([r["dp"] for r in rows], want["p_diff"], rtol=0, atol=1e-5)


def test_compare_says_the_tokenizers_differ_before_any_context_check(tmp_path):
    """gpt2 (64 positions) against llama-dynamic (32 with its scaling): the default context 64 does not fit the base,
    but what makes the comparison impossible is the tokenizers: that is said first, whatever --context."""
    text = tmp_path / "t.txt"
    text.write_text("hello world, this is text\n")
    for extra in ([], ["--context", "64"], ["--context", "100000"]):
        r = run_cli("perplexity", str(text), "-m", str(FIX / "lm" / "gpt2"), "--compare",
                    str(FIX / "lm" / "llama-dynamic"), *extra)
        err = r.stderr.decode()
        assert r.returncode == 1 and "tokenizers differ" in err and "--context" not in err, err
        assert err.startswith("nlpkit: error: the two models' tokenizers differ: ") and len(err.splitlines()) == 1
