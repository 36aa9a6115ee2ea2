"""Searching many queries at once (`nlpkit.retrieval.batched`) gives `BM25Index.search`'s results query by
query: the same documents, the same scores to the bit, the same order of ties."""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest

from nlpkit.retrieval import batched
from nlpkit.retrieval.batched import search_many
from nlpkit.errors import NlpkitError
from nlpkit.retrieval.bm25 import VARIANTS, build_index
from nlpkit.stats.documents import read_records
from nlpkit.text import WordTokenizer


@pytest.fixture(params=["dense blocks", "dense blocks of a few queries", "query by query"])
def scoring(request, monkeypatch):
    """The two ways `search_many` scores: a block of queries in one [queries, docs] array (small
    indexes; with the default block size and with blocks of a few rows), or query by query."""
    if request.param == "query by query":
        monkeypatch.setattr(batched, "DENSE_DOCS", 0)
    else:
        monkeypatch.setattr(batched, "DENSE_DOCS", 10**9)
        if request.param == "dense blocks of a few queries":
            monkeypatch.setattr(batched, "BLOCK_CELLS", 2000)
    return request.param


def _same(index, queries, k, **kw):
    got = search_many(index, queries, k, **kw)
    want = [index.search(q, k) for q in queries]
    assert len(got) == len(want)
    for q, (gd, gs), (wd, ws) in zip(queries, got, want):
        assert gd.tolist() == wd.tolist(), q
        assert gs.tobytes() == ws.tobytes(), q          # bit for bit


@pytest.fixture(scope="module")
def cranfield(shared_data):
    tok = WordTokenizer(stopwords="english")
    docs = read_records(str(shared_data / "cranfield" / "cran.all.1400"), "smart")
    queries = read_records(str(shared_data / "cranfield" / "cran.qry"), "smart", fields="W", kind="queries")
    return [tok.tokenize(t) for _, t in docs], [rid for rid, _ in docs], [tok.tokenize(t) for _, t in queries]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("k", [1, 10, 100, 1400])
def test_batched_search_equals_one_query_at_a_time_on_cranfield(cranfield, variant, k, scoring):
    docs, ids, queries = cranfield
    index = build_index(docs, ids, variant=variant, k1=1.2, b=0.75, delta=1.0)
    _same(index, queries, k, block_postings=50_000)          # several blocks


def _tie_corpus(seed: int = 7) -> tuple[list[list[str]], list[str], list[list[str]]]:
    """Few words, many identical documents, ids not in numeric order: ties everywhere."""
    rng = random.Random(seed)
    words = ["a", "b", "c", "d", "e"]
    shapes = [["a"], ["a", "b"], ["b", "a"], ["a", "a", "b"], ["c"], ["c", "d", "e"], ["e"], ["d", "d"]]
    docs = [list(rng.choice(shapes)) for _ in range(300)]
    ids = [f"d{rng.randrange(10**6):06d}-{i}" for i in range(len(docs))]
    queries = [[rng.choice(words) for _ in range(rng.randint(1, 4))] for _ in range(60)]
    queries += [[], ["zzz"], ["a", "zzz"], ["a", "a"], ["e", "e", "e", "d"]]
    return docs, ids, queries


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("k", [1, 2, 3, 7, 50, 1000, 2**63])
def test_batched_search_keeps_the_order_of_ties(variant, k, scoring):
    docs, ids, queries = _tie_corpus()
    index = build_index(docs, ids, variant=variant, k1=1.2, b=0.75, delta=0.5)
    _same(index, queries, k, block_postings=200)


def test_batched_search_of_zero_places_and_of_no_queries_is_empty(scoring):
    docs, ids, queries = _tie_corpus()
    index = build_index(docs, ids)
    assert all(len(d) == 0 for d, _ in search_many(index, queries, 0))
    assert search_many(index, [], 10) == []


def test_batched_search_with_zero_idf_terms(scoring):
    """robertson/atire store 0 for a term in every document: such queries take `search`'s own path."""
    docs, ids, queries = _tie_corpus(3)
    every = [d + ["z"] for d in docs]
    for variant in ("robertson", "atire"):
        index = build_index(every, ids, variant=variant)
        _same(index, [q + ["z"] for q in queries] + [["z"]], 5, block_postings=500)
    np.testing.assert_equal(len(search_many(build_index(every, ids), [["z"]], 3)[0][0]), 3)


@pytest.mark.parametrize("budget", [0, 40, 10**9])
def test_batched_search_is_the_same_whatever_the_decoded_postings_cache_holds(monkeypatch, budget):
    """Nothing cached, some terms cached (the budget runs out part way), everything cached (the cache
    serves the query-by-query path)."""
    docs, ids, queries = _tie_corpus(11)
    monkeypatch.setattr(batched, "CACHE_POSTINGS", budget)
    monkeypatch.setattr(batched, "DENSE_DOCS", 0)
    for variant in VARIANTS:
        _same(build_index(docs, ids, variant=variant, k1=1.2, b=0.75, delta=0.5), queries, 3, block_postings=300)


def test_batched_search_of_an_index_with_unpacked_term_frequencies(scoring):
    """doc_bits 32 (a tf too large to pack: plain document numbers, frequencies in `tf_extra`)."""
    docs, ids, queries = _tie_corpus(5)
    index = build_index(docs, ids)
    plain = dataclasses.replace(index, postings=index.docs.astype(np.uint32), tf_extra=index.tf.astype(np.uint32),
                                doc_bits=32, _term_id=None, _id_rank=None, _checked=None, _score_range=None)
    assert plain.doc_mask is None
    _same(plain, queries, 4, block_postings=100)
    for q in queries:
        np.testing.assert_array_equal(plain.search(q, 4)[0], index.search(q, 4)[0])


@pytest.mark.parametrize("variant", ["lucene", "bm25+"])
def test_batched_search_of_negative_scores_is_search_and_of_nan_scores_is_its_error(variant, scoring):
    """An index whose scores were edited (negative, zero, NaN): the affected queries take `search`'s own
    path, so they give its results, or its error."""
    docs, ids, queries = _tie_corpus(13)
    index = build_index(docs, ids, variant=variant, k1=1.2, b=0.75, delta=0.5)
    a, z = index.indptr[index.term_id["a"]], index.indptr[index.term_id["a"] + 1]
    scores = index.scores.copy()
    scores[a:z:2] *= -1
    scores[a + 1] = 0
    _same(dataclasses.replace(index, scores=scores, _checked=None, _score_range=None), queries, 5)
    scores[a + 3] = np.nan
    broken = dataclasses.replace(index, scores=scores, _checked=None, _score_range=None)
    with pytest.raises(NlpkitError, match="BM25 scores are NaN for"):
        broken.search(["b", "a"], 5)
    with pytest.raises(NlpkitError, match="BM25 scores are NaN for"):
        search_many(broken, [["b"], ["b", "a"]], 5)
