"""Every perplexity record carries llama.cpp's uncertainty: σ of the mean NLL (`PPL = X +/- Y`'s
sqrt((mean(nll²) - mean(nll)²) / (n - 1))) and the ± of the token perplexity, ppl × σ. References: the
per-token NLLs transformers gives the tiny compare fixture's model (tools/make_compare_fixtures.py) and
the per-token log10 p KenLM's query gives the n-gram fixtures (tools/make_ngram_fixtures.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from conftest import run_cli

FIX = Path(__file__).resolve().parents[1] / "fixtures"
TINY = FIX / "lm" / "compare" / "tiny"
REF = json.loads((TINY / "reference.json").read_text())
QUERY = json.loads((FIX / "ngram" / "query.json").read_text())
MODES = {"sliding_c24_s8": ["--context", "24", "--stride", "8"], "disjoint_c16": ["--mode", "disjoint", "--context", "16"],
         "second_half_c16": ["--mode", "second-half", "--context", "16"]}


def llama_cpp_uncertainty(nll) -> tuple[float, float]:
    """llama-perplexity's Final estimate: (σ of the mean NLL, ± of exp(mean NLL))."""
    nll = np.asarray(nll, dtype=np.float64)
    n, mean = len(nll), nll.mean()
    se = math.sqrt(((nll * nll).sum() / n - mean * mean) / (n - 1))
    return se, math.exp(mean) * se


def records(tmp_path, texts: list[str], *args) -> list[dict]:
    paths = []
    for k, t in enumerate(texts):
        (tmp_path / f"t{k}.txt").write_text(t, encoding="utf-8")
        paths.append(str(tmp_path / f"t{k}.txt"))
    r = run_cli("perplexity", *paths, *args, "--format", "jsonl")
    assert r.returncode == 0, r.stderr.decode()
    return [json.loads(line) for line in r.stdout.decode().splitlines()]


@pytest.mark.parametrize("case", sorted(MODES))
def test_token_perplexity_uncertainty_is_llama_cpp_estimate_in_every_mode(tmp_path, case):
    (rec,) = records(tmp_path, [REF["text"]], "-m", str(TINY / "model"), *MODES[case])
    se, unc = llama_cpp_uncertainty(REF["cases"][case]["tokens"]["nll"])
    assert rec["mean_nll_se"] == pytest.approx(se, rel=1e-5)
    assert rec["token_ppl_unc"] == pytest.approx(unc, rel=1e-5)


def test_corpus_total_uncertainty_pools_the_tokens_of_every_file(tmp_path):
    recs = records(tmp_path, [REF["text"], REF["second_text"]], "-m", str(TINY / "model"), *MODES["sliding_c24_s8"])
    first = REF["cases"]["sliding_c24_s8"]["tokens"]["nll"]
    total = REF["corpus_sliding_c24_s8"]["total"]
    assert recs[2]["tokens"] == total["tokens"] and recs[2]["file"] == "(total)"
    # σ of the pooled mean from the two files' own sums: n, Σnll, Σnll² add up
    sums = [(r["tokens"], r["tokens"] * r["mean_nll"], (r["tokens"] - 1) * r["tokens"] * r["mean_nll_se"] ** 2
             + r["tokens"] * r["mean_nll"] ** 2) for r in recs[:2]]
    n = sum(s[0] for s in sums)
    s1, s2 = sum(s[1] for s in sums), sum(s[2] for s in sums)
    se = math.sqrt((s2 / n - (s1 / n) ** 2) / (n - 1))
    assert recs[2]["mean_nll_se"] == pytest.approx(se, rel=1e-9)
    assert recs[0]["mean_nll_se"] == pytest.approx(llama_cpp_uncertainty(first)[0], rel=1e-5)


def test_per_line_records_carry_their_own_uncertainty(tmp_path):
    (tmp_path / "l.txt").write_text("It is a truth universally acknowledged.\nA\n", encoding="utf-8")
    r = run_cli("perplexity", "--per-line", str(tmp_path / "l.txt"), "-m", str(TINY / "model"), "--format", "jsonl")
    lines = [json.loads(x) for x in r.stdout.decode().splitlines()]
    r = run_cli("perplexity", "--per-line", "--per-token", str(tmp_path / "l.txt"), "-m", str(TINY / "model"),
                "--format", "jsonl")
    toks = [json.loads(x) for x in r.stdout.decode().splitlines()]
    nll = [-t["logprob"] for t in toks if t["line"] == 1]
    se, unc = llama_cpp_uncertainty(nll)
    assert lines[0]["mean_nll_se"] == pytest.approx(se, rel=1e-12)
    assert lines[0]["token_ppl_unc"] == pytest.approx(unc, rel=1e-12)
    assert lines[1]["tokens"] == 1 and lines[1]["mean_nll_se"] is None  # one token: no spread to measure (NaN)


def test_table_shows_token_perplexity_plus_minus_its_uncertainty(tmp_path):
    (tmp_path / "t.txt").write_text(REF["text"], encoding="utf-8")
    r = run_cli("perplexity", str(tmp_path / "t.txt"), "-m", str(TINY / "model"), *MODES["sliding_c24_s8"],
                "--format", "table", env={"COLUMNS": "200"})
    (rec,) = records(tmp_path, [REF["text"]], "-m", str(TINY / "model"), *MODES["sliding_c24_s8"])
    out = r.stdout.decode()
    assert f"{rec['token_ppl']:.0f} ± {rec['token_ppl_unc']:.0f}" in out  # σ of 32.4: 2 significant digits
    assert "token_ppl_unc" not in out and "mean_nll_se" not in out


def test_ngram_perplexity_uncertainty_from_kenlm_token_probabilities():
    r = run_cli("perplexity", str(FIX / "ngram" / "heldout.txt"), "--model", str(FIX / "ngram" / "kenlm-3.arpa.gz"),
                "--format", "json")
    rec = json.loads(r.stdout)["results"][0]
    ref = QUERY["kenlm-3"]
    se, _ = llama_cpp_uncertainty(-np.array(ref["log10"]) * math.log(10))
    assert rec["mean_nll_se"] == pytest.approx(se, rel=1e-5)
    assert rec["ppl_unc"] == pytest.approx(ref["ppl"] * se, rel=1e-5)  # KenLM's own ppl × σ
