"""How sure a score is: mean with standard error and 95% interval, and paired comparisons of two models.

- `summarize`: the mean of per-item scores, lm-evaluation-harness's standard error (sample standard deviation
  / sqrt(n), `mean_stderr`), and a 95% interval: for a proportion (right/wrong per item: acc, is_greedy, accuracy)
  the Wilson score interval, which stays in [0, 1] (the normal one gave acc 0.95 a high of 1.048); for a real-valued
  score (logprob, margin) the normal interval mean +- 1.96 stderr. Huge scores (DPO rewards with a large beta) are
  summed scaled by a power of two, exact, so no intermediate overflows.
- `paired_bootstrap`: sacrebleu's paired bootstrap resampling (`_paired_bs_test`, after Moses'
  bootstrap-hypothesis-difference-significance.pl) applied to per-item scores: one set of resampled item indices
  (`default_rng(seed).choice(n, (n_samples, n))`), each resample's mean for both models, the p-value of the observed
  absolute difference against the centred resampled absolute differences ((count + 1) / (n_samples + 1)), and the
  95% interval of the resampled differences read at sacrebleu's `estimate_ci` positions (n_samples // 40 from each end).
  Identical per-item scores are no evidence of a difference: p = 1 (sacrebleu's count would give 1 / (s + 1)).
- `mcnemar`: McNemar's exact test on paired right/wrong outcomes: a two-sided binomial test of the discordant pairs
  (as statsmodels' `mcnemar(exact=True)`).

Pure numpy (no scipy): the binomial tail is summed in log space.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

Z95 = 1.959963984540054  # the standard normal's 97.5% quantile
Z95_SCIPY = 1.9599639845400545  # the same as scipy's norm.isf(0.025) rounds it (statsmodels' Wilson interval uses it)
SEED = 12345  # sacrebleu's default SACREBLEU_SEED
BOOTSTRAP_SAMPLES = 1000  # sacrebleu's default number of paired-bootstrap resamples


@dataclass(frozen=True)
class Summary:
    """A metric over n items: its value (mean), standard error and normal 95% interval."""

    value: float
    stderr: float
    low: float
    high: float
    n: int


def summarize(scores, proportion: bool = False) -> Summary:
    """Mean, sample standard deviation / sqrt(n) (nan for n < 2, as lm-evaluation-harness divides by n - 1),
    and the 95% interval: Wilson's for a `proportion` (scores 0/1), else mean +- 1.96 stderr (nan for n < 2).

    >>> summarize([1, 0, 1, 1]).value, round(summarize([1, 0, 1, 1]).stderr, 4)
    (0.75, 0.25)
    >>> s = summarize([1] * 19 + [0], proportion=True)
    >>> round(s.low, 4), round(s.high, 4)
    (0.7639, 0.9911)
    """
    x = np.asarray(scores, dtype=np.float64)  # [n]
    n = len(x)
    if n == 0:
        return Summary(math.nan, math.nan, math.nan, math.nan, 0)
    with np.errstate(all="ignore"):            # a -inf log-likelihood (an MLE n-gram model) gives nan, silently
        top = float(np.max(np.abs(x)))
        scale = 2.0 ** (math.frexp(top)[1] - 1) if math.isfinite(top) and top > 2.0 ** 500 else 1.0
        xs = x / scale                         # a power of two: exact, the sums as unscaled but without overflow
        m = float(xs.mean())
        mean = m * scale
        se = float(math.sqrt(((xs - m) ** 2).sum() / (n - 1)) / math.sqrt(n)) * scale if n > 1 else math.nan
    if proportion:
        low, high = wilson(mean, n)
        return Summary(mean, se, low, high, n)
    return Summary(mean, se, mean - Z95 * se, mean + Z95 * se, n)


def wilson(p: float, n: int, z: float = Z95_SCIPY) -> tuple[float, float]:
    """The Wilson score interval of a proportion `p` of `n` trials (Wilson 1927), statsmodels'
    `proportion_confint(method="wilson")`'s arithmetic: inside [0, 1], holding p, not empty at p = 0 or 1.

    >>> wilson(1.0, 10)[1], round(wilson(1.0, 10)[0], 4)
    (1.0, 0.7225)
    """
    if n == 0 or not math.isfinite(p):
        return math.nan, math.nan
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1.0 - p) / n + z2 / (4.0 * n ** 2)) / denom
    # it always holds p (statsmodels' rounding can leave the high end of p = 1 at 1 - 2**-53)
    return max(0.0, min(centre - half, p)), min(1.0, max(centre + half, p))


@dataclass(frozen=True)
class Paired:
    """A paired comparison of a metric: other - base, the bootstrap p-value, the 95% interval of the difference."""

    base: float
    other: float
    difference: float
    p_value: float
    low: float
    high: float


def resample_indices(n: int, n_samples: int = BOOTSTRAP_SAMPLES, seed: int | None = SEED) -> np.ndarray:
    """sacrebleu's resampled item indices: `default_rng(seed).choice(n, size=(n_samples, n), replace=True)`.

    # -> [n_samples, n]
    """
    return np.random.default_rng(seed).choice(n, size=(n_samples, n), replace=True)


def paired_bootstrap(base, other, n_samples: int = BOOTSTRAP_SAMPLES, seed: int | None = SEED,
                     indices: np.ndarray | None = None) -> Paired:
    """sacrebleu's paired bootstrap test of `other` against `base` on per-item scores (same items, same order).

    `indices` ([n_samples, n], from `resample_indices`) lets several metrics share one set of resamples, as
    sacrebleu's metrics share theirs.
    """
    a = np.asarray(base, dtype=np.float64)  # [n]
    b = np.asarray(other, dtype=np.float64)  # [n]
    if a.shape != b.shape or a.ndim != 1 or len(a) == 0:
        raise ValueError(f"paired scores need two equal, non-empty lists (got {a.shape} and {b.shape})")
    idx = resample_indices(len(a), n_samples, seed) if indices is None else indices  # [s, n]
    scores_a = a[idx].mean(axis=1)  # [s]
    scores_b = b[idx].mean(axis=1)  # [s]
    if np.array_equal(a, b):  # nothing to test (sacrebleu's count would give the smallest p, 1 / (s + 1))
        m = float(a.mean())
        return Paired(m, m, 0.0, 1.0, 0.0, 0.0)
    real = abs(float(a.mean()) - float(b.mean()))
    diffs = np.abs(scores_b - scores_a)  # [s]
    centred = diffs - diffs.mean()
    p = (int(np.sum(centred > real)) + 1) / (len(centred) + 1)
    ordered = np.sort(scores_b - scores_a)  # [s]
    lo = len(ordered) // 40
    return Paired(float(a.mean()), float(b.mean()), float(b.mean() - a.mean()), p,
                  float(ordered[lo]), float(ordered[len(ordered) - lo - 1]))


@dataclass(frozen=True)
class McNemar:
    """McNemar's exact test: b items right only under the base model, c right only under the other."""

    b: int
    c: int
    p_value: float


def binomial_two_sided(k: int, n: int) -> float:
    """min(1, 2 P(X <= k)) for X ~ Binomial(n, 1/2), k <= n/2: the exact McNemar p-value.

    >>> round(binomial_two_sided(0, 3), 12)
    0.25
    """
    if n == 0:
        return 1.0
    ks = np.arange(k + 1)
    log_terms = (math.lgamma(n + 1) - np.array([math.lgamma(i + 1) + math.lgamma(n - i + 1) for i in ks])
                 - n * math.log(2.0))
    m = log_terms.max()
    tail = math.exp(m) * float(np.exp(log_terms - m).sum())
    return min(1.0, 2.0 * tail)


def mcnemar(base_correct, other_correct) -> McNemar:
    """McNemar's exact test on two models' right (1) / wrong (0) outcomes on the same items."""
    a = np.asarray(base_correct, dtype=bool)  # [n]
    o = np.asarray(other_correct, dtype=bool)  # [n]
    if a.shape != o.shape:
        raise ValueError(f"paired outcomes need equal lengths (got {a.shape} and {o.shape})")
    b, c = int(np.sum(a & ~o)), int(np.sum(~a & o))
    return McNemar(b, c, binomial_two_sided(min(b, c), b + c))
