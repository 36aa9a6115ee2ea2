"""Statistics of `nlpkit score`: lm-evaluation-harness's stderr, sacrebleu's paired bootstrap, McNemar's exact test."""

from __future__ import annotations

import math

import numpy as np
import pytest

from nlpkit.evaluation.significance import (Z95, binomial_two_sided, mcnemar, paired_bootstrap, resample_indices,
                                            summarize)


def lm_eval_mean_stderr(arr):
    """lm_eval.api.metrics.mean_stderr, as written there (sample_stddev / sqrt(len))."""
    mu = sum(arr) / len(arr)
    return math.sqrt(sum((x - mu) ** 2 for x in arr) / (len(arr) - 1)) / math.sqrt(len(arr))


def sacrebleu_paired_bs(bl: np.ndarray, sys: np.ndarray, n_samples: int, seed: int):
    """sacrebleu.significance._paired_bs_test with a mean metric, step by step (its float32 stats aside)."""
    rng = np.random.default_rng(seed)
    idxs = rng.choice(len(sys), size=(n_samples, len(sys)), replace=True)
    diff = abs(bl.mean() - sys.mean())
    scores_bl = np.array([bl[i].sum(0) / len(i) for i in idxs])
    scores_sys = np.array([sys[i].sum(0) / len(i) for i in idxs])
    sample_diffs = np.abs(scores_sys - scores_bl)
    stats = sample_diffs - sample_diffs.mean()
    p = (np.sum(stats > diff).item() + 1) / (len(stats) + 1)
    d = np.sort(scores_sys - scores_bl)
    lower_idx = len(d) // 40  # sacrebleu's estimate_ci positions
    return p, d[lower_idx], d[len(d) - lower_idx - 1]


def test_stderr_equals_lm_eval_mean_stderr():
    x = [1, 0, 0, 1, 1, 1, 0, 1, 0, 1, 1]
    s = summarize(x)
    assert s.value == pytest.approx(7 / 11, abs=1e-15)
    assert s.stderr == pytest.approx(lm_eval_mean_stderr(x), rel=1e-12)
    assert (s.low, s.high) == pytest.approx((s.value - Z95 * s.stderr, s.value + Z95 * s.stderr))
    assert s.n == 11


def test_stderr_of_one_item_is_nan():
    assert math.isnan(summarize([0.5]).stderr)


@pytest.mark.parametrize("seed", [12345, 7])
def test_paired_bootstrap_equals_sacrebleu_procedure_on_per_item_scores(seed):
    rng = np.random.default_rng(3)
    base = (rng.random(200) < 0.6).astype(float)
    other = np.where(rng.random(200) < 0.15, 1 - base, base)
    got = paired_bootstrap(base, other, n_samples=1000, seed=seed)
    p, lo, hi = sacrebleu_paired_bs(base, other, 1000, seed)
    assert got.p_value == p
    assert (got.low, got.high) == pytest.approx((lo, hi), abs=1e-12)
    assert got.difference == pytest.approx(other.mean() - base.mean())


def test_paired_bootstrap_on_real_valued_scores_equals_sacrebleu_procedure():
    rng = np.random.default_rng(11)
    base = rng.normal(-20, 5, 300)
    other = base + rng.normal(-0.3, 1.0, 300)
    got = paired_bootstrap(base, other, n_samples=500, seed=12345)
    p, lo, hi = sacrebleu_paired_bs(base, other, 500, 12345)
    assert got.p_value == p and got.p_value < 0.01
    assert (got.low, got.high) == pytest.approx((lo, hi), abs=1e-9)


def test_shared_indices_give_the_same_result_as_the_seed():
    base, other = np.arange(30) % 2, np.arange(30) % 3 == 0
    idx = resample_indices(30, 100, 5)
    assert paired_bootstrap(base, other, indices=idx) == paired_bootstrap(base, other, n_samples=100, seed=5)


def test_identical_models_are_not_significantly_different():
    # sacrebleu's count alone would say p = 1/1001 here: a zero difference is not evidence of one
    x = np.arange(50) % 2
    assert paired_bootstrap(x, x).p_value == 1.0
    assert mcnemar(x, x).p_value == 1.0


@pytest.mark.parametrize("b, c", [(0, 0), (0, 3), (5, 1), (12, 30), (100, 130), (700, 650)])
def test_mcnemar_exact_equals_statsmodels(b, c):
    statsmodels = pytest.importorskip("statsmodels.stats.contingency_tables")
    base = [1] * b + [0] * c + [1] * 7 + [0] * 4
    other = [0] * b + [1] * c + [1] * 7 + [0] * 4
    got = mcnemar(base, other)
    ref = statsmodels.mcnemar([[7, b], [c, 4]], exact=True)
    assert (got.b, got.c) == (b, c)
    assert got.p_value == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-300)


def test_binomial_tail_equals_scipy():
    stats = pytest.importorskip("scipy.stats")
    for k, n in [(3, 20), (40, 100), (0, 1), (480, 1000)]:
        assert binomial_two_sided(k, n) == pytest.approx(min(1.0, 2 * stats.binom.cdf(k, n, 0.5)), rel=1e-9)


@pytest.mark.parametrize("k,n", [(19, 20), (20, 20), (0, 20), (3, 7), (1, 1), (57, 100), (999, 1000)])
def test_accuracy_interval_is_statsmodels_wilson_and_stays_in_0_1(k, n):
    """acc 0.95 on 20 items: the normal interval's high was 1.048; Wilson's stays in [0, 1], as statsmodels'."""
    proportion = pytest.importorskip("statsmodels.stats.proportion")
    s = summarize([1.0] * k + [0.0] * (n - k), proportion=True)
    assert (s.low, s.high) == pytest.approx(proportion.proportion_confint(k, n, alpha=0.05, method="wilson"),
                                            rel=0, abs=2e-16)
    assert 0.0 <= s.low <= s.value <= s.high <= 1.0
    if n > 1:
        assert s.stderr == pytest.approx(lm_eval_mean_stderr([1.0] * k + [0.0] * (n - k)), rel=1e-12)


def test_huge_scores_summarize_without_overflow_or_warning():
    """DPO rewards with a huge beta: the mean, stderr and interval are finite, equal to the scaled-down ones
    times the scale (a power of two: exact), with no numpy warning."""
    import warnings

    x = np.array([3.0, -1.0, 2.5, 0.25])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        big = summarize(x * 2.0 ** 1000)
    small = summarize(x)
    assert (big.value, big.stderr, big.low, big.high) == (small.value * 2.0 ** 1000, small.stderr * 2.0 ** 1000,
                                                         small.low * 2.0 ** 1000, small.high * 2.0 ** 1000)
