"""Gates a CI job can trust: a verdict per compared model (or file) and metric, pass or fail, with the numbers it
was decided on, as records a script reads without parsing messages.

Two gates share the verdict records (`"record": "verdict"` in the machine formats) and the exit status of a failure
(`nlpkit.errors.GATE_FAILED`, raised by the CLI as `GateFailed` after every record is written):

- `worse_verdicts` (`score --fail-if-worse ALPHA`): each later model against the first on the gate metrics (by
  default the task's primary metric, `PRIMARY_METRICS`). A model fails when it is lower (every score metric is
  higher-is-better) with a two-sided p-value below ALPHA. The p-value is McNemar's exact test for right/wrong
  metrics (acc, accuracy, is_greedy, ...): exact at any number of items, where the paired bootstrap is not (on 3
  items its p-value is 1/1001 while McNemar's is 0.25). Real-valued metrics (logprob, margin) use the paired
  bootstrap (sacrebleu's on corpus BLEU / chrF). A comparison record's `p_value` is already that test's (`test`
  names it; `bootstrap_p` and `mcnemar_p` stand beside it), so a verdict's `p_value` is its comparison's. A model
  compared with itself has difference 0 and p = 1: it passes.
- `threshold_verdicts` (`perplexity --compare` with `--fail-if-*`; `score` and `perplexity` with
  `--fail-if-below/--fail-if-above METRIC=VALUE`): a statistic of each record (a file's comparison or figures, the
  corpus total's, a model's summary) against a bound: mean KLD above X, PPL ratio above R, same-top fraction below
  F, acc below 0.6, token_ppl above 30 fail.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

from nlpkit.errors import UsageError

# The metric a task is gated on unless `gate_metrics` names others: one entry per task (a new task adds its own).
PRIMARY_METRICS = {
    "loglikelihood": "logprob",
    "multiple-choice": "acc",
    "preference": "accuracy",
    "generate": "exact_match",
}
PRIMARY_WITH_REFERENCE = {"preference": "reward_accuracy"}  # with --reference: the DPO reward's accuracy

WORSE_COLUMNS = ["model", "baseline", "metric", "difference", "test", "p_value", "threshold", "pass"]
THRESHOLD_COLUMNS = ["file", "metric", "value", "fails_if", "threshold", "pass"]


@dataclass(frozen=True)
class Verdict:
    """One judged comparison: `record` (what was judged, the numbers, the threshold, `pass`) and, when it failed,
    the one-line `reason`."""

    record: dict
    reason: str | None = None

    @property
    def passed(self) -> bool:
        return self.reason is None


def primary_metric(task: str, reference: bool = False) -> str:
    """The metric a task is gated on by default: acc (multiple-choice), logprob (loglikelihood), accuracy
    (preference; reward_accuracy with a reference model)."""
    if reference and task in PRIMARY_WITH_REFERENCE:
        return PRIMARY_WITH_REFERENCE[task]
    if task not in PRIMARY_METRICS:
        raise UsageError(f"`task` {task!r} has no primary metric to gate on")
    return PRIMARY_METRICS[task]


def gate_metrics(task: str, available: Sequence[str], requested: Sequence[str] = (),
                 reference: bool = False) -> tuple[str, ...]:
    """The metrics to gate on: `requested` (each one of the task's `available` metrics, duplicates dropped), else
    the task's primary metric."""
    if not requested:
        return (primary_metric(task, reference),)
    unknown = [m for m in requested if m not in available]
    if unknown:
        raise UsageError(f"`gate_metrics`: {task} items have no metric {unknown[0]!r} (they have "
                         f"{', '.join(available)})")
    return tuple(dict.fromkeys(requested))


def worse_verdicts(comparisons: Iterable[dict], alpha: float, metrics: Sequence[str]) -> list[Verdict]:
    """A verdict per comparison (a later model against the first, one metric) on `metrics`: fail when the model is
    lower with p < `alpha` (McNemar's exact p for right/wrong metrics, else the paired bootstrap's)."""
    if not 0 < alpha < 1:
        raise UsageError(f"`alpha` must be between 0 and 1, got {alpha}")
    out = []
    for c in comparisons:
        if c["metric"] not in metrics:
            continue
        test, p = c["test"], c["p_value"]  # the comparison's headline: the test the gate uses
        failed = c["difference"] < 0 and p < alpha
        rec = {"model": c["model"], "baseline": c["baseline"], "metric": c["metric"], "value": c["value"],
               "baseline_value": c["baseline_value"], "difference": c["difference"], "test": test, "p_value": p,
               "bootstrap_p": c["bootstrap_p"], "mcnemar_p": c.get("mcnemar_p"), "threshold": alpha,
               "pass": not failed}
        reason = None
        if failed:
            name = "McNemar's exact" if test == "mcnemar" else "paired bootstrap"
            reason = (f"{c['model']} is worse than {c['baseline']} on {c['metric']}: {c['value']:.4g} vs "
                      f"{c['baseline_value']:.4g} (difference {c['difference']:.4g}, {name} p = {p:.4g} < {alpha})")
        out.append(Verdict(rec, reason))
    return out


@dataclass(frozen=True)
class Threshold:
    """A bound on a statistic: fail when the value is `fails_if` ("above" or "below") `bound`."""

    metric: str
    bound: float
    fails_if: str
    label: str = ""  # how a reason names the statistic ("mean KLD"); the metric name when empty

    def fails(self, value: float) -> bool:
        if not math.isfinite(value):  # no number to trust: a gate never passes on nan
            return True
        return value > self.bound if self.fails_if == "above" else value < self.bound


def threshold_verdicts(records: Iterable[dict], thresholds: Sequence[Threshold], where: str = "file") -> list[Verdict]:
    """A verdict per record (each file's comparison, the corpus total) and threshold."""
    for t in thresholds:
        if t.fails_if not in ("above", "below"):
            raise UsageError(f"`thresholds`: fails_if must be 'above' or 'below', got {t.fails_if!r}")
    out = []
    for rec in records:
        for t in thresholds:
            value = float(rec[t.metric])
            failed = t.fails(value)
            verdict = {where: rec[where], "metric": t.metric, "value": value, "fails_if": t.fails_if,
                       "threshold": t.bound, "pass": not failed}
            reason = (f"{rec[where]}: {t.label or t.metric} {value:.6g} is {t.fails_if} {t.bound:g}"
                      if failed else None)
            out.append(Verdict(verdict, reason))
    return out


def failure_message(verdicts: Sequence[Verdict]) -> str | None:
    """The first failed verdict's reason (and how many more failed), or None when every verdict passed."""
    reasons = [v.reason for v in verdicts if not v.passed]
    if not reasons:
        return None
    return reasons[0] + (f" (and {len(reasons) - 1} more)" if len(reasons) > 1 else "")
