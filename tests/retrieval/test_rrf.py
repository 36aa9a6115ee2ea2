"""Reciprocal rank fusion (nlpkit/retrieval/fusion.py): equal to ranx, weights, depth, ties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nlpkit.errors import UsageError
from nlpkit.stats.documents import read_records
from nlpkit.retrieval.fusion import query_set_difference, rrf
from nlpkit.retrieval.runs import trec_order
from nlpkit.retrieval.search import index_texts, search_texts


@pytest.fixture(scope="module")
def cranfield_runs(shared_data):
    d = shared_data / "cranfield"
    docs = read_records(str(d / "cran.all.1400"), "smart")
    qs = read_records(str(d / "cran.qry"), "smart", fields="W", kind="queries", query_ids="position")
    return [search_texts(index_texts(docs, variant=v, k1=k1, b=b), qs, 100)
            for v, k1, b in (("lucene", 1.2, 0.75), ("bm25+", 1.5, 0.75), ("robertson", 0.9, 0.4))]


def test_rrf_equals_ranx_fuse_on_three_cranfield_runs(cranfield_runs):
    ranx = pytest.importorskip("ranx")
    fused = rrf(cranfield_runs, k=60)
    # ranx ranks by score with ties in arbitrary order: hand it each run in trec_eval order,
    # as strictly decreasing scores (RRF only sees ranks).
    ranx_runs = [ranx.Run({q: {d: float(len(p) - i) for i, (d, _) in enumerate(trec_order(p))}
                           for q, p in run.items() if p}) for run in cranfield_runs]
    ref = ranx.fuse(runs=ranx_runs, method="rrf", norm=None, params={"k": 60}).to_dict()
    assert set(ref) == {q for q, p in fused.items() if p}
    for qid, ours in fused.items():
        if not ours:
            continue
        theirs = trec_order(ref[qid].items())
        assert [d for d, _ in ours] == [d for d, _ in theirs]
        for (_, a), (_, b) in zip(ours, theirs):
            assert a == pytest.approx(b, abs=1e-12)


def test_weighted_rrf_by_hand():
    r1 = {"q": [("a", 9.0), ("b", 8.0), ("c", 7.0)]}
    r2 = {"q": [("c", 0.9), ("a", 0.1)]}
    fused = rrf([r1, r2], k=10, weights=[2.0, 0.5])
    expected = {"a": 2 / 11 + 0.5 / 12, "b": 2 / 12, "c": 2 / 13 + 0.5 / 11}
    assert [d for d, _ in fused["q"]] == ["a", "c", "b"]
    for d, s in fused["q"]:
        assert s == pytest.approx(expected[d], abs=1e-15)


def test_depth_counts_only_the_first_n_of_each_run_and_top_cuts():
    r1 = {"q": [("a", 3.0), ("b", 2.0), ("c", 1.0)]}
    r2 = {"q": [("c", 3.0), ("b", 2.0), ("a", 1.0)]}
    fused = dict(rrf([r1, r2], k=0, depth=1)["q"])
    assert fused == {"a": 1.0, "c": 1.0}
    assert rrf([r1, r2], k=0, depth=1, top=1)["q"] == [("c", 1.0)]   # tie: docid descending


def test_tie_break_rules_in_inputs_and_output():
    run = {"q": [("a", 1.0), ("c", 1.0), ("b", 1.0)]}
    assert [d for d, _ in rrf([run], tie_break="docid-desc")["q"]] == ["c", "b", "a"]
    assert [d for d, _ in rrf([run], tie_break="docid-asc")["q"]] == ["a", "b", "c"]
    assert [d for d, _ in rrf([run], tie_break="input")["q"]] == ["a", "c", "b"]


def test_runs_with_different_queries_fuse_over_the_union():
    r1 = {"1": [("a", 1.0)], "2": [("b", 1.0)]}
    r2 = {"2": [("b", 1.0)], "3": [("c", 1.0)]}
    fused = rrf([r1, r2], k=60)
    assert list(fused) == ["1", "2", "3"]
    assert fused["2"] == [("b", 2 / 61)]
    assert query_set_difference([r1, r2]) == [(0, ["3"]), (1, ["1"])]


def test_bad_arguments_are_usage_errors():
    with pytest.raises(UsageError, match="2 weights for 1 runs"):
        rrf([{"q": []}], weights=[1, 2])
    with pytest.raises(UsageError, match="`k` must be >= 0"):
        rrf([{"q": []}], k=-1)


docs = st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=8, unique=True)


@given(st.lists(docs, min_size=1, max_size=4), st.sampled_from("abcdefgh"))
def test_rrf_is_monotone_adding_a_run_that_ranks_d_first_never_lowers_d(lists, d):
    runs = [{"q": [(x, float(len(ids) - i)) for i, x in enumerate(ids)]} for ids in lists]
    before = dict(rrf(runs)["q"]).get(d, 0.0)
    after = dict(rrf(runs + [{"q": [(d, 1.0)]}])["q"])[d]
    assert after > before
