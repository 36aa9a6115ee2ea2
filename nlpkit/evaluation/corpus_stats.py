"""Corpus BLEU and chrF of the generate task's answers: each model's score with sacrebleu's bootstrap interval, and
each later model against the first with sacrebleu's paired bootstrap test, so that `score --metric bleu,chrf` prints
the numbers `sacrebleu --confidence` and `sacrebleu --paired-bs` print for the same answers.

A corpus metric has no per-item value (BLEU's n-gram counts are summed over the items before the ratios are taken),
so its uncertainty comes from resampling the items' sufficient statistics, as sacrebleu does:

- `corpus_summary`: the score, and over `n_samples` resamples of the items (`default_rng(seed).choice(n, (s, n))`,
  the statistics as float32 and summed per resample, as `sacrebleu.significance._bootstrap_resample`): the 95%
  interval read at `estimate_ci`'s positions of the sorted resampled scores (index s // 40 from each end: the 2.5 and
  97.5 percentiles), so it lies inside the metric's range [0, 100] (value +- 1.96 stderr left it: chrF 74.32 got a high
  of 128.78 on 6 items; sacrebleu's BLEU of a perfect corpus, 100.00000000000004, is held at 100); `stderr` is the
  resampled scores' standard deviation (lm-evaluation-harness's bootstrap stderr).
- `corpus_paired`: sacrebleu's `_paired_bs_test`: the same resampled indices for both models, the p-value of the
  observed absolute difference against the centred resampled absolute differences ((count + 1) / (s + 1)), and the
  95% interval of the resampled differences at the same positions. Identical answers (or equal scores on every
  resample, BLEU 0 against 0) are no evidence of a difference: p = 1 (as `significance.paired_bootstrap`; sacrebleu's
  count would give 1 / (s + 1), its smallest p).

Each item's targets are its references (a shorter list repeats its first target: a reference twice changes neither
metric); the metrics are sacrebleu's defaults, built as `nlpkit bleu` builds them (`nlpkit.mt.bleu`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from sacrebleu.utils import sum_of_lists

from nlpkit.mt.bleu import score_of_totals, segment_statistics

CORPUS_METRICS = ("bleu", "chrf")  # one number over all items (no per-item value)


@dataclass
class CorpusScorer:
    """One corpus metric over fixed targets: per-item statistics of answers, scores of summed statistics."""

    metric: object  # a sacrebleu Metric with the references cached

    def stats(self, answers: Sequence[str]) -> list[list]:
        """Per-item sufficient statistics (`mt.bleu.segment_statistics`).  # -> [n][k]"""
        return segment_statistics(self.metric, list(answers))

    def score(self, stats: list[list]) -> float:
        """The corpus score of per-item statistics (sacrebleu's `_aggregate_and_compute`: exact sums), in [0, 100]."""
        return _in_range(float(score_of_totals(self.metric, sum_of_lists(stats)).score))

    def resampled(self, stats: list[list], idx: np.ndarray) -> np.ndarray:
        """The score of every resample `idx` [s, n]: float32 statistics summed per resample, as sacrebleu.  # -> [s]"""
        s32 = np.array(stats, dtype="float32")  # [n, k]
        scores = np.array([score_of_totals(self.metric, s.sum(0)).score for s in s32[idx]], dtype=np.float64)
        return np.clip(scores, 0.0, 100.0)


def _in_range(score: float) -> float:
    """A score held in [0, 100]: sacrebleu's BLEU of a perfect corpus is 100.00000000000004 (the exponential of a sum
    of logarithms, rounded); every other score is sacrebleu's to the bit."""
    return min(max(score, 0.0), 100.0)


def corpus_scorers(targets: Sequence[Sequence[str]], metrics: Sequence[str]) -> dict[str, CorpusScorer]:
    """name -> `CorpusScorer` of the corpus metrics among `metrics`, references from each item's targets."""
    from nlpkit.mt.bleu import EvalOptions, build_metrics, quiet_sacrebleu

    names = tuple(dict.fromkeys(m for m in metrics if m in CORPUS_METRICS))
    if not names or not targets:
        return {}
    quiet_sacrebleu()
    width = max(len(t) for t in targets)
    refs = [[t[j] if j < len(t) else t[0] for t in targets] for j in range(width)]  # [width][items]
    built = build_metrics(EvalOptions(metrics=names), refs)
    return {name: CorpusScorer(built[name]) for name in names}


def ci_positions(n_samples: int) -> tuple[int, int]:
    """sacrebleu's `estimate_ci` positions in the sorted resamples: s // 40 from each end (2.5% and 97.5%)."""
    lo = n_samples // 40
    return lo, n_samples - lo - 1


def corpus_summary(scorer: CorpusScorer, answers: Sequence[str], idx: np.ndarray | None) -> dict:
    """{value, stderr, low, high, n} of one model's answers; `idx` [s, n] the resampled items (None: one item, no
    interval)."""
    stats = scorer.stats(answers)  # [n][k]
    value = scorer.score(stats)
    n = len(answers)
    if idx is None or n < 2:
        return {"value": value, "stderr": math.nan, "low": math.nan, "high": math.nan, "n": n}
    boot = np.sort(scorer.resampled(stats, idx))  # [s]
    lo, hi = ci_positions(len(boot))
    return {"value": value, "stderr": float(np.std(boot, ddof=1)), "low": float(boot[lo]), "high": float(boot[hi]),
            "n": n}


@dataclass(frozen=True)
class CorpusPaired:
    """sacrebleu's paired bootstrap of a corpus metric: both scores, other - base, p-value, the difference's 95%
    interval, and the other model's resampled mean and interval half-width (sacrebleu's `mean`, `ci`)."""

    base: float
    other: float
    difference: float
    p_value: float
    low: float
    high: float
    mean: float
    ci: float


def corpus_paired(scorer: CorpusScorer, base_answers: Sequence[str], other_answers: Sequence[str],
                  idx: np.ndarray) -> CorpusPaired:
    """`other_answers` against `base_answers` on the same items and resamples `idx` [s, n]
    (`significance.resample_indices`: sacrebleu's `rng.choice(n, (s, n))`)."""
    sa, sb = scorer.stats(base_answers), scorer.stats(other_answers)  # [n][k] each
    a, b = scorer.score(sa), scorer.score(sb)
    scores_a, scores_b = scorer.resampled(sa, idx), scorer.resampled(sb, idx)  # [s] each
    ordered = np.sort(scores_b)
    lo, hi = ci_positions(len(ordered))
    mean, ci = float(ordered.mean()), 0.5 * float(ordered[hi] - ordered[lo])
    diffs = np.sort(scores_b - scores_a)  # [s]
    sample = np.abs(scores_b - scores_a)  # [s]
    if list(base_answers) == list(other_answers) or (a == b and not np.any(sample)):
        return CorpusPaired(a, b, 0.0, 1.0, 0.0, 0.0, mean, ci)
    centred = sample - sample.mean()
    p = (int(np.sum(centred > abs(a - b))) + 1) / (len(centred) + 1)
    return CorpusPaired(a, b, b - a, p, float(diffs[lo]), float(diffs[hi]), mean, ci)
