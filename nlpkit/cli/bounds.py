"""Absolute gates on a command's numbers: `--fail-if-below METRIC=VALUE` and `--fail-if-above METRIC=VALUE`
(repeatable), for `score` (each model's summary metrics: exact_match, acc, bleu, logprob, ...) and `perplexity` (each
file's and the total's figures: token_ppl, bits_per_byte, ...; lower is better there, so `--fail-if-above`). The
core is `nlpkit.evaluation.gate.threshold_verdicts`; the verdicts are written and enforced by `cli/gate.py`, exit 3."""

from __future__ import annotations

import math
from typing import Sequence

import click

BELOW_HELP = ("Gate: exit 3 when METRIC is below VALUE ({what}); a verdict record per {per} and bound. "
              "Repeatable.")
ABOVE_HELP = ("Gate: exit 3 when METRIC is above VALUE ({what}; for lower-is-better figures); a verdict record per "
              "{per} and bound. Repeatable.")


def parse_bounds(ctx, param, values) -> tuple[tuple[str, float], ...]:
    """The click callback of a METRIC=VALUE option: ((metric, value), ...), VALUE a finite number."""
    out = []
    for v in values:
        metric, sep, number = v.partition("=")
        metric = metric.strip()
        if not sep or not metric or not number.strip():
            raise click.BadParameter(f"{v!r}: give METRIC=VALUE (e.g. acc=0.6)", ctx=ctx, param=param)
        try:
            bound = float(number)
        except ValueError:
            raise click.BadParameter(f"{v!r}: {number!r} is not a number", ctx=ctx, param=param) from None
        if not math.isfinite(bound):
            raise click.BadParameter(f"{v!r}: {number!r} is not a finite number", ctx=ctx, param=param)
        out.append((metric, bound))
    return tuple(out)


def bound_thresholds(below: Sequence[tuple[str, float]], above: Sequence[tuple[str, float]],
                     available: Sequence[str], what: str) -> list:
    """The `Threshold`s of --fail-if-below/--fail-if-above, each metric one of `available` (else a usage error
    naming the option and what there is: `what` says whose metrics they are)."""
    from nlpkit.evaluation.gate import Threshold

    out = []
    for flag, pairs, fails_if in (("--fail-if-below", below, "below"), ("--fail-if-above", above, "above")):
        for metric, bound in pairs:
            if metric not in available:
                raise click.BadParameter(f"{what} have no metric {metric!r} (they have {', '.join(available)})",
                                         param_hint=flag)
            out.append(Threshold(metric, bound, fails_if))
    return out


def score_bounds(task: str, options, reference, below, above) -> list:
    """`score`'s --fail-if-below/--fail-if-above as `Threshold`s on the summary metrics its task prints (the
    generate task: --metric's, corpus BLEU and chrF included)."""
    if not below and not above:
        return []
    from nlpkit.evaluation.tasks import metric_names

    available = (tuple(dict.fromkeys(options.generation.metrics)) if task == "generate"
                 else metric_names(task, options, reference is not None))
    return bound_thresholds(below, above, available, f"{task} items")
