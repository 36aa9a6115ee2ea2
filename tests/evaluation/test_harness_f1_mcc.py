"""lm-eval's `f1` and `mcc` metrics of multiple-choice tasks (glue's mrpc and cola, super_glue's cb): each document's
(gold, prediction) pair, aggregated as sklearn's binary f1 and Matthews correlation, computed from the confusion
counts; the values and the bootstrap standard errors are lm-eval's own, to the bit."""

from __future__ import annotations

import random

import pytest

from nlpkit.evaluation.harness.metrics import aggregate, bootstrap_stderr, stderr


def _pairs(seed: int, n: int, k: int) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    return [(rng.randrange(k), rng.randrange(k)) for _ in range(n)]


def test_f1_and_mcc_from_confusion_counts():
    items = [(1, 1), (1, 0), (0, 1), (0, 0), (1, 1)]  # tp 2, fn 1, fp 1, tn 1
    assert aggregate("f1", items) == 2 * 2 / (3 + 3)
    assert aggregate("matthews_corrcoef", items) == (3 * 5 - (3 * 3 + 2 * 2)) / ((25 - 13) * (25 - 13)) ** 0.5
    assert aggregate("f1", [(0, 0), (0, 0)]) == 0.0  # sklearn's zero division
    assert aggregate("matthews_corrcoef", [(0, 0), (0, 0)]) == 0.0


def test_f1_refuses_labels_sklearns_binary_f1_refuses():
    with pytest.raises(ValueError, match="binary f1"):
        aggregate("f1", [(0, 1), (2, 1)])


def test_bootstrap_stderr_is_drawn_like_lmevals():
    assert stderr("f1", "f1", [(1, 1), (0, 1)], bootstrap_iters=0) == "N/A"
    assert isinstance(stderr("matthews_corrcoef", "mcc", _pairs(1, 9, 3), bootstrap_iters=2000), float)


@pytest.mark.parametrize("seed, n, k", [(1, 5, 2), (2, 23, 2), (3, 12, 3), (4, 30, 4), (5, 7, 1)])
def test_values_and_bootstrap_equal_lmevals_own_functions(seed, n, k, monkeypatch):
    pytest.importorskip("sklearn")
    metrics = pytest.importorskip("lm_eval.api.metrics")
    monkeypatch.setenv("DISABLE_MULTIPROC", "1")
    items = _pairs(seed, n, k)
    pairs = [("matthews_corrcoef", metrics.matthews_corrcoef)] + ([("f1", metrics.f1_score)] if k <= 2 else [])
    for name, ref in pairs:
        assert aggregate(name, items) == float(ref(items)), name
        assert bootstrap_stderr(name, items, 2000) == metrics.bootstrap_stderr(ref, items, iters=2000), name
