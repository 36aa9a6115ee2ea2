"""llama.cpp's estimators of uncertainty, for perplexity and for the comparison of two models.

llama.cpp (tools/perplexity/perplexity.cpp) accumulates, per quantity x, the sums Σx and Σx² over the
scored tokens, and derives every "± " it prints from them, treating the tokens as independent draws:

- `standard_error` — the `PPL = X +/- Y` of plain `llama-perplexity`: σ(mean x) = sqrt((Σx²/n - mean²)/(n-1));
  the perplexity's ± is ppl × σ(mean NLL) (d exp(x)/dx = exp(x)).
- `mean_and_uncertainty` — the same, as `--kl-divergence` computes it: zero below 11 values.
- `covariance` — of two means (the ln PPL of the model and of its base): zero below 10 values.
- `percentile` — linear interpolation between the sorted values.

Tokens of one text are not independent (a hard passage makes many tokens hard), so these are the
figures llama.cpp prints, not confidence intervals. Where llama.cpp divides by zero (fewer than 2
tokens) the figures here are NaN; a negative variance from rounding counts as 0.
"""

from __future__ import annotations

import math

import numpy as np


def standard_error(total: float, total_sq: float, count: int) -> float:
    """σ of the mean of `count` values with sum `total` and sum of squares `total_sq` (llama.cpp's
    perplexity "Final estimate"). NaN for fewer than 2 values.

    >>> standard_error(6.0, 14.0, 3)   # values 1, 2, 3: sqrt((14/3 - 4) / 2)
    0.5773502691896258
    """
    if count < 2:
        return float("nan")
    mean = total / count
    var = total_sq / count - mean * mean
    return math.sqrt(var / (count - 1)) if var > 0 else 0.0


def perplexity_uncertainty(nll: float, nll_sq: float, count: int) -> tuple[float, float]:
    """(σ of the mean NLL, ± of the token perplexity exp(mean NLL)) from the summed NLL and NLL² of
    `count` tokens, as llama.cpp: ppl_unc = ppl × σ(mean NLL)."""
    se = standard_error(nll, nll_sq, count)
    return se, math.exp(nll / count) * se if count else float("nan")


def mean_and_uncertainty(total: float, total_sq: float, count: int) -> tuple[float, float]:
    """(mean, σ of the mean) as llama.cpp's `--kl-divergence` computes them: σ is 0 for 10 values or fewer.

    >>> mean_and_uncertainty(6.0, 14.0, 3)
    (2.0, 0.0)
    """
    if count < 1:
        return 0.0, 0.0
    f = total / count
    df = total_sq / count - f * f
    return f, (math.sqrt(df / (count - 1)) if df > 0 and count > 10 else 0.0)


def covariance(total_a: float, total_b: float, total_ab: float, count: int) -> float:
    """Covariance of the means of two paired series (llama.cpp's `covariance`): 0 below 10 pairs."""
    if count < 10:
        return 0.0
    return (total_ab / count - (total_a / count) * (total_b / count)) / (count - 1)


def percentile(sorted_values: np.ndarray, fraction: float) -> float:
    """Linear interpolation at `fraction` (0..1) of ascending values, llama.cpp's `percentile`:
    position fraction × (n - 1), between its two neighbours.

    >>> percentile(np.array([0.0, 1.0, 2.0, 10.0]), 0.5)
    1.5
    """
    n = len(sorted_values)
    if n == 0:
        return float("nan")
    if fraction <= 0:
        return float(sorted_values[0])
    if fraction >= 1:
        return float(sorted_values[-1])
    p = fraction * (n - 1)
    ip = int(p)
    p -= ip
    return float((1 - p) * sorted_values[ip] + p * sorted_values[min(ip + 1, n - 1)])
