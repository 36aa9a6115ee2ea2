"""KL divergence, Δp, top agreement and llama.cpp's summary statistics (nlpkit.lm.perplexity.divergence, nlpkit.lm.uncertainty),
against tools/make_compare_fixtures.py's numpy transcription of llama.cpp's kl_divergence on transformers' logits."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from nlpkit.lm.perplexity.divergence import TokenComparison, compare_logits, summarize
from nlpkit.lm.uncertainty import (covariance, mean_and_uncertainty, percentile, perplexity_uncertainty,
                                   standard_error)

TINY = Path(__file__).resolve().parents[1] / "fixtures" / "lm" / "compare" / "tiny"
REF = json.loads((TINY / "reference.json").read_text())


def reference_tokens(case: dict) -> TokenComparison:
    t = case["tokens"]
    return TokenComparison(np.array(t["nll"]), np.array(t["nll_base"]), np.array(t["kld"]),
                           np.array(t["top"]), np.array(t["top_base"]))


def assert_summary(got, want: dict, rel: float, pct_abs: float) -> None:
    for key, value in want.items():
        if isinstance(value, dict):
            for q, v in value.items():
                assert getattr(got, key)[float(q)] == pytest.approx(v, rel=0, abs=pct_abs), (key, q)
        elif key == "ppl_diff":  # a difference of two perplexities: each is exact to `rel`
            assert got.ppl_diff == pytest.approx(value, rel=0, abs=rel * want["ppl"]), key
        else:
            assert getattr(got, key) == pytest.approx(value, rel=rel, abs=1e-12), key


def test_standard_error_is_llama_cpp_final_estimate():
    # llama-perplexity: nll2/n - (nll/n)^2, over n - 1, square root; PPL +/- = ppl * that
    assert standard_error(6.0, 14.0, 3) == pytest.approx(math.sqrt((14 / 3 - 4) / 2), rel=1e-15)
    assert standard_error(3.0, 3.0, 3) == 0.0  # equal values: no spread
    assert math.isnan(standard_error(2.0, 4.0, 1))  # one token: undefined (llama.cpp divides by zero)
    se, ppl_unc = perplexity_uncertainty(6.0, 14.0, 3)
    assert ppl_unc == pytest.approx(math.exp(2.0) * se, rel=1e-15)


def test_mean_and_uncertainty_zero_for_ten_values_or_fewer_as_llama_cpp():
    values = np.arange(1.0, 11.0)
    assert mean_and_uncertainty(values.sum(), (values ** 2).sum(), 10) == (5.5, 0.0)
    values = np.arange(1.0, 12.0)
    mean, unc = mean_and_uncertainty(values.sum(), (values ** 2).sum(), 11)
    assert (mean, unc) == (6.0, pytest.approx(math.sqrt(10.0 / 10), rel=1e-15))  # population var 10, n - 1 = 10
    assert covariance(1.0, 1.0, 1.0, 9) == 0.0


def test_percentile_interpolates_linearly_between_neighbours():
    v = np.array([0.0, 1.0, 2.0, 10.0])
    assert percentile(v, 0.5) == 1.5
    assert percentile(v, 0.9) == pytest.approx(0.3 * 2.0 + 0.7 * 10.0)  # position 2.7
    assert (percentile(v, 0.0), percentile(v, 1.0)) == (0.0, 10.0)


def test_per_token_kld_dp_top_match_reference_on_transformers_logits():
    z = np.load(TINY / "logits.npz")
    got = compare_logits(z["logits"], z["base_logits"], z["targets"])
    want = REF["cases"]["second_half_c16"]["tokens"]
    n = len(z["targets"])
    np.testing.assert_allclose(got.kld, want["kld"][:n], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(got.p_diff, want["p_diff"][:n], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(got.nll, want["nll"][:n], rtol=1e-12)
    np.testing.assert_allclose(got.nll_base, want["nll_base"][:n], rtol=1e-12)
    assert got.top.tolist() == want["top"][:n] and got.top_base.tolist() == want["top_base"][:n]


@pytest.mark.parametrize("case", sorted(REF["cases"]))
def test_summary_equals_llama_cpp_report_from_the_same_tokens(case):
    assert_summary(summarize(reference_tokens(REF["cases"][case])), REF["cases"][case]["summary"],
                   rel=1e-12, pct_abs=1e-12)


def test_corpus_total_pools_the_tokens_of_every_file():
    first = reference_tokens(REF["cases"]["sliding_c24_s8"])
    t = REF["corpus_sliding_c24_s8"]
    assert summarize(first).tokens + t["second_file"]["tokens"] == t["total"]["tokens"]


def test_model_compared_with_itself_is_exactly_zero_divergence():
    z = np.load(TINY / "logits.npz")
    rows = np.concatenate([z["logits"]] * 3)  # 21 tokens: uncertainties are defined (more than 10)
    tc = compare_logits(rows, rows.copy(), np.concatenate([z["targets"]] * 3))
    s = summarize(tc)
    assert (s.kld, s.kld_max, s.kld_min, s.kld_unc) == (0.0, 0.0, 0.0, 0.0)
    assert (s.dp, s.dp_unc, s.rms_dp, s.rms_dp_unc, s.dp_max, s.dp_min) == (0.0,) * 6
    assert (s.same_top, s.same_top_unc) == (1.0, 0.0)
    assert (s.ppl_ratio, s.ln_ppl_ratio, s.ppl_diff) == (1.0, 0.0, 0.0)
    assert s.ppl == s.base_ppl


def test_logits_of_different_shapes_refused():
    with pytest.raises(ValueError, match="shapes differ"):
        compare_logits(np.zeros((2, 3), np.float32), np.zeros((2, 4), np.float32), np.array([0, 1]))
