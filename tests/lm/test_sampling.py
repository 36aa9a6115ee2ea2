"""nlpkit.lm.generation.sampling against transformers' logits processors (stored fixtures, no torch needed)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from nlpkit.errors import UsageError
from nlpkit.lm.generation import sampling as S

from conftest import FIXTURES

FIX = FIXTURES / "sampling" / "processors.npz"


@pytest.fixture(scope="module")
def fx():
    data = np.load(FIX)
    return {k: data[k] for k in data.files}, json.loads(bytes(data["meta"]).decode())


def _same(ours: np.ndarray, theirs: np.ndarray, logits: np.ndarray | None = None) -> None:
    """Equal to 1e-6, and the same tokens removed -- except that among tokens with equal logits at a
    top-p boundary torch's unstable sort picks arbitrarily, so there only the removed values must agree."""
    assert ours.shape == theirs.shape
    diff = np.isneginf(ours) != np.isneginf(theirs)
    for r in np.flatnonzero(diff.any(axis=-1)):
        assert logits is not None, "different tokens removed"
        cols = np.flatnonzero(diff[r])
        ours_removed = sorted(logits[r, cols[np.isneginf(ours[r, cols])]])
        theirs_removed = sorted(logits[r, cols[np.isneginf(theirs[r, cols])]])
        assert ours_removed == theirs_removed, f"row {r}: different tokens removed"
        ours, theirs = ours.copy(), theirs.copy()
        ours[r, cols] = theirs[r, cols] = -np.inf
    finite = np.isfinite(theirs)
    np.testing.assert_allclose(ours[finite], theirs[finite], rtol=0, atol=1e-6)


ALONE = {
    "rep": lambda x, h, v: S.repetition_penalty(x, S.seen_mask(h, x.shape[-1]), v),
    "temp": lambda x, h, v: S.temperature(x, v),
    "topk": lambda x, h, v: S.top_k(x, int(v)),
    "topp": lambda x, h, v: S.top_p(x, v),
    "minp": lambda x, h, v: S.min_p(x, v),
}


def test_each_processor_alone_matches_transformers(fx):
    arrays, meta = fx
    assert len(meta["alone"]) >= 15
    for key, m in meta["alone"].items():
        ours = ALONE[m["kind"]](arrays["logits"], arrays["history"], m["value"])
        _same(ours, arrays[key], arrays["logits"])


def test_repetition_penalty_from_id_history_equals_mask(fx):
    arrays, _ = fx
    ours = S.repetition_penalty(arrays["logits"], arrays["history"], 1.2)
    _same(ours, arrays["rep_1.2"])


def test_chained_processors_match_transformers_order(fx):
    arrays, meta = fx
    for name, m in meta["chains"].items():
        st = dict(m["settings"])
        greedy = st.pop("do_sample", True) is False
        cfg = S.SamplingConfig(temperature=0.0 if greedy else st.get("temperature", 1.0),
                               top_k=st.get("top_k", 0), top_p=st.get("top_p", 1.0),
                               min_p=st.get("min_p", 0.0),
                               repetition_penalty=st.get("repetition_penalty", 1.0)).validate()
        seen = S.seen_mask(arrays["history"], arrays["logits"].shape[-1])
        _same(S.process_logits(arrays["logits"], seen, cfg), arrays[name], arrays["logits"])


def test_top_k_keeps_all_ties_at_the_boundary():
    x = np.array([[1.0, 3.0, 2.0, 2.0, 0.5]], np.float32)
    out = S.top_k(x, 2)
    assert np.isfinite(out).tolist() == [[False, True, True, True, False]]


def test_top_p_keeps_the_token_that_crosses_the_threshold():
    p = np.array([[0.5, 0.3, 0.15, 0.05]])
    out = S.top_p(np.log(p).astype(np.float32), 0.6)
    assert np.isfinite(out).tolist() == [[True, True, False, False]]
    # a tiny top_p still keeps the most likely token
    assert np.isfinite(S.top_p(np.log(p).astype(np.float32), 1e-9)).sum() == 1


def test_min_p_scales_with_the_top_probability():
    p = np.array([[0.6, 0.2, 0.12, 0.08]])
    out = S.min_p(np.log(p).astype(np.float32), 0.25)  # threshold 0.15
    assert np.isfinite(out).tolist() == [[True, True, False, False]]


def test_processors_leave_their_input_unchanged(fx):
    arrays, _ = fx
    x = arrays["logits"].copy()
    S.process_logits(x, arrays["history"], S.SamplingConfig(0.7, 20, 0.9, 0.05, 1.3))
    assert np.array_equal(x, arrays["logits"])


def test_greedy_selects_argmax_of_penalized_logits(fx):
    arrays, _ = fx
    cfg = S.SamplingConfig(temperature=0, repetition_penalty=1.5)
    filt = S.process_logits(arrays["logits"], arrays["history"], cfg)
    ids = S.select_tokens(filt, cfg, np.random.default_rng(0))
    assert ids.tolist() == np.argmax(arrays["chain_greedy_rep"], axis=-1).tolist()


def test_draws_reproducible_with_the_same_seed(fx):
    arrays, _ = fx
    cfg = S.SamplingConfig(temperature=0.9, top_k=30)
    filt = S.process_logits(arrays["logits"], None, cfg)
    a = [S.select_tokens(filt, cfg, np.random.default_rng(7)).tolist() for _ in range(2)]
    assert a[0] == a[1]


def test_empirical_frequencies_match_filtered_distribution_chi_square(fx):
    scipy_stats = pytest.importorskip("scipy.stats")
    arrays, _ = fx
    cfg = S.SamplingConfig(temperature=0.8, top_k=12, top_p=0.95, repetition_penalty=1.1)
    row = arrays["logits"][:1]
    filt = S.process_logits(np.repeat(row, 20_000, axis=0), arrays["history"][:1].repeat(20_000, 0), cfg)
    draws = S.select_tokens(filt, cfg, np.random.default_rng(12345))
    probs = S.probabilities(filt[:1], cfg)[0]
    support = np.flatnonzero(probs > 0)
    assert set(np.unique(draws)) <= set(support.tolist()), "drew a filtered-out token"
    observed = np.bincount(draws, minlength=probs.size)[support]
    expected = probs[support] * draws.size
    stat, pvalue = scipy_stats.chisquare(observed, expected)
    assert pvalue > 0.01, (stat, pvalue)


@pytest.mark.parametrize("kwargs, option", [
    (dict(top_p=0.0), "--top-p"), (dict(top_p=1.5), "--top-p"), (dict(temperature=-0.1), "--temperature"),
    (dict(top_k=-1), "--top-k"), (dict(min_p=1.2), "--min-p"), (dict(repetition_penalty=0.0), "--repetition-penalty"),
])
def test_bad_settings_rejected_naming_the_option(kwargs, option):
    with pytest.raises(UsageError, match=option):
        S.SamplingConfig(**kwargs).validate()


def test_top_k_zero_means_disabled(fx):
    arrays, _ = fx
    out = S.process_logits(arrays["logits"], None, S.SamplingConfig(top_k=0))
    assert np.array_equal(out, arrays["logits"])
