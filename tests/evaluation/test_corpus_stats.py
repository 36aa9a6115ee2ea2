"""Corpus BLEU / chrF of the generate task (issue 44, items 1 and 8): the interval is sacrebleu's bootstrap (the
2.5/97.5 percentiles of the resampled corpus scores, inside [0, 100]), and two models are compared by sacrebleu's
paired bootstrap: every number equals the one sacrebleu's own functions compute on the same answers."""

from __future__ import annotations

import numpy as np
import pytest

from nlpkit.evaluation.corpus_stats import corpus_paired, corpus_scorers, corpus_summary
from nlpkit.evaluation.generation_task import corpus_metrics
from nlpkit.evaluation.significance import resample_indices

sacrebleu = pytest.importorskip("sacrebleu")

# the issue's case: 6 items, a chrF whose value +- 1.96 stderr left [0, 100]
ANSWERS = ["Paris", "42", "the cat sat", "blue", "no idea at all", "Berlin"]
OTHER = ["Paris", "41", "a cat sat", "blue sky", "no idea", "Rome"]
TARGETS = [["Paris"], ["42"], ["the cat sat on the mat"], ["blue"], ["yes"], ["Berlin", "Berlin, Germany"]]


def refs_of(targets):
    width = max(len(t) for t in targets)
    return [[t[j] if j < len(t) else t[0] for t in targets] for j in range(width)]


def sacrebleu_resamples(name: str, answers, monkeypatch, n: int = 1000) -> np.ndarray:
    """sacrebleu's own bootstrap resampled scores (its `_bootstrap_resample`, SACREBLEU_SEED 12345), sorted."""
    from sacrebleu.significance import _bootstrap_resample

    monkeypatch.setenv("SACREBLEU_SEED", "12345")
    metric = {"bleu": sacrebleu.BLEU, "chrf": sacrebleu.CHRF}[name](references=refs_of(TARGETS))
    stats = metric._extract_corpus_statistics(answers, None)
    _, scores = _bootstrap_resample(stats, metric, n)
    return np.sort(np.array([s.score for s in scores], dtype=np.float64))


@pytest.mark.parametrize("name", ["bleu", "chrf"])
def test_corpus_interval_is_sacrebleus_bootstrap_percentiles_inside_0_100(name, monkeypatch):
    got = corpus_metrics(ANSWERS, TARGETS, (name,))[name]
    boot = sacrebleu_resamples(name, ANSWERS, monkeypatch)
    assert (got["low"], got["high"]) == (boot[25], boot[974])  # estimate_ci's positions: 1000 // 40 from each end
    assert 0.0 <= got["low"] <= got["high"] <= 100.0
    assert got["stderr"] == pytest.approx(np.std(boot, ddof=1), rel=1e-12)
    # and sacrebleu's public bootstrap (`corpus_score(n_bootstrap=1000)`): its half-width is (high - low) / 2
    metric = {"bleu": sacrebleu.BLEU, "chrf": sacrebleu.CHRF}[name]()
    score = metric.corpus_score(ANSWERS, refs_of(TARGETS), n_bootstrap=1000)
    assert got["value"] == pytest.approx(score.score, abs=1e-12)
    assert (got["high"] - got["low"]) / 2 == pytest.approx(score._ci, abs=1e-12)


def test_the_issues_chrf_on_6_items_stays_below_100():
    got = corpus_metrics(ANSWERS, TARGETS, ("chrf", "bleu"))
    for s in got.values():
        assert 0.0 <= s["low"] <= s["high"] <= 100.0


def test_one_item_has_no_interval():
    got = corpus_metrics(["Paris"], [["Paris"]], ("chrf",))["chrf"]
    assert got["n"] == 1 and np.isnan(got["low"]) and np.isnan(got["high"])


@pytest.mark.parametrize("seed", [12345, 7])
def test_corpus_paired_equals_sacrebleus_paired_bootstrap(seed):
    from nlpkit.mt.bleu import EvalOptions, paired_test

    recs = paired_test([("a", ANSWERS), ("b", OTHER)], refs_of(TARGETS), EvalOptions(metrics=("bleu", "chrf")),
                       test="bs", n_samples=1000, seed=seed)
    want = {r["metric"]: r for r in recs if r["system"] == "b"}
    scorers = corpus_scorers(TARGETS, ("exact_match", "bleu", "chrf"))
    idx = resample_indices(len(ANSWERS), 1000, seed)
    for name, key in (("bleu", "BLEU"), ("chrf", "chrF2")):
        got = corpus_paired(scorers[name], ANSWERS, OTHER, idx)
        w = want[key if key in want else name]
        assert got.other == pytest.approx(w["score"], abs=1e-12)
        assert got.p_value == w["p_value"]
        # sacrebleu averages its chrF resamples in float32: the same resamples, its mean rounded to float32
        assert (got.mean, got.ci) == (pytest.approx(w["mean"], rel=1e-6), pytest.approx(w["ci95"], rel=1e-6))
        assert got.low <= got.difference <= got.high or got.low <= got.high


def test_identical_answers_are_no_evidence_of_a_difference():
    scorers = corpus_scorers(TARGETS, ("bleu",))
    got = corpus_paired(scorers["bleu"], ANSWERS, ANSWERS, resample_indices(len(ANSWERS), 200, 1))
    assert (got.difference, got.p_value, got.low, got.high) == (0.0, 1.0, 0.0, 0.0)


def test_corpus_summary_without_resamples_is_the_value_alone():
    scorers = corpus_scorers(TARGETS, ("bleu",))
    got = corpus_summary(scorers["bleu"], ANSWERS, None)
    assert got["value"] == pytest.approx(sacrebleu.corpus_bleu(ANSWERS, refs_of(TARGETS)).score, abs=1e-12)


def test_a_perfect_corpus_is_held_at_100():
    """sacrebleu's BLEU of a perfect match is 100.00000000000004; the summary stays inside [0, 100]."""
    answers = ["the cat sat on the mat", "a dog ran in the park today"]
    got = corpus_metrics(answers, [[a] for a in answers], ("bleu", "chrf"))
    assert sacrebleu.corpus_bleu(answers, [answers]).score > 100.0
    for s in got.values():
        assert (s["value"], s["low"], s["high"]) == (100.0, 100.0, 100.0)
