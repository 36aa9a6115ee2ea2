"""BM25 core (nlpkit/retrieval/bm25.py, store.py, corpus.py): bm25s equality, add, save/load."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from nlpkit.errors import NlpkitError, UsageError
from nlpkit.retrieval.bm25 import VARIANTS, _assemble, add_documents, build_index
from nlpkit.stats.documents import read_records
from nlpkit.retrieval.search import add_texts, index_texts, search_texts
from nlpkit.retrieval.store import load_index, save_index
from nlpkit.text import WordTokenizer


@pytest.fixture(scope="module")
def cranfield(shared_data):
    d = shared_data / "cranfield"
    docs = read_records(str(d / "cran.all.1400"), "smart")
    queries = read_records(str(d / "cran.qry"), "smart", fields="W", kind="queries",
                           query_ids="position")
    tok = WordTokenizer()
    return ([i for i, _ in docs], [tok(t) for _, t in docs],
            [q for q, _ in queries], [tok(t) for _, t in queries])


@pytest.mark.parametrize("variant", VARIANTS)
def test_bm25_matches_bm25s_top100_on_cranfield(cranfield, variant):
    bm25s = pytest.importorskip("bm25s")
    doc_ids, doc_tokens, _, query_tokens = cranfield
    k1, b, delta = 1.2, 0.75, 0.5
    idx = build_index(doc_tokens, doc_ids, variant=variant, k1=k1, b=b, delta=delta)
    ref = bm25s.BM25(method=variant, k1=k1, b=b, delta=delta)
    ref.index(doc_tokens, show_progress=False)
    ref_docs, ref_scores = ref.retrieve(query_tokens, k=100, show_progress=False)
    for qi, q in enumerate(query_tokens):
        full = ref.get_scores(q)                          # [N] every document's bm25s score
        docs, scores = idx.search(q, 100)
        assert len(docs) == min(100, len(idx.score_query(q)[0]))
        # our top-100 scores equal bm25s's own scores of those documents ...
        np.testing.assert_allclose(scores, full[docs], rtol=1e-5)
        # ... and bm25s's top-100 scores rank by rank (the rankings agree up to ties)
        np.testing.assert_allclose(scores, ref_scores[qi][: len(docs)], rtol=1e-5)
        differ = docs != ref_docs[qi][: len(docs)]
        np.testing.assert_allclose(full[docs[differ]], full[ref_docs[qi][: len(docs)][differ]], rtol=1e-5)


def test_bm25_all_documents_scores_match_bm25s_bm25plus_nonoccurrence(cranfield):
    bm25s = pytest.importorskip("bm25s")
    doc_ids, doc_tokens, _, query_tokens = cranfield
    idx = build_index(doc_tokens, doc_ids, variant="bm25+", k1=1.5, b=0.75, delta=1.0)
    ref = bm25s.BM25(method="bm25+", k1=1.5, b=0.75, delta=1.0)
    ref.index(doc_tokens, show_progress=False)
    q = query_tokens[0]
    docs, scores = idx.score_query(q)   # every document: each scores the non-occurrence term
    assert docs.tolist() == list(range(len(doc_ids)))
    np.testing.assert_allclose(scores, ref.get_scores(q), rtol=1e-5)


@pytest.mark.parametrize("variant", ["bm25l", "bm25+"])
def test_bm25l_and_bm25plus_fill_k_places_like_bm25s(variant):
    bm25s = pytest.importorskip("bm25s")
    corpus = [["foo"], ["dog"], ["baz"], ["quick", "god"], ["quick", "fox"]]
    ids = ["d0", "d1", "d2", "d3", "d4"]
    idx = build_index(corpus, ids, variant=variant)
    ref = bm25s.BM25(method=variant)
    ref.index(corpus, show_progress=False)
    ref_docs, ref_scores = ref.retrieve([["quick"]], k=5, show_progress=False)
    got = idx.search_ids(["quick"], 5)
    assert len(got) == 5  # bm25s returns five documents; the three without "quick" tie
    assert sorted((ids[d], round(float(s), 5)) for d, s in zip(ref_docs[0], ref_scores[0])) == \
        sorted((d, round(s, 5)) for d, s in got)
    # ties by document id descending (trec_eval): d3/d4 tie too (same length, same tf)
    assert [d for d, _ in got] == ["d4", "d3", "d2", "d1", "d0"]
    assert got[2][1] == got[3][1] == got[4][1] > 0
    assert idx.search_ids(["unknown"], 5) == []


def test_bm25_parameters_with_undefined_scores_are_refused():
    with pytest.raises(UsageError, match="`k1` 0 is undefined for bm25\\+"):
        build_index([["a"]], variant="bm25+", k1=0)
    with pytest.raises(UsageError, match="bm25l"):
        build_index([["a"]], variant="bm25l", k1=0, delta=0)
    build_index([["a"]], variant="bm25l", k1=0, delta=0.5)
    build_index([["a"]], variant="lucene", k1=0)


def test_idf_and_scores_by_hand_lucene():
    # N=3, "cat" in 2 docs: idf = ln(1 + (3-2+.5)/(2+.5)) = ln 1.6; doc c: tf 2, dl 2 = avgdl
    idx = build_index([["cat", "sat"], ["dog", "sat"], ["cat", "cat"]], ["a", "b", "c"],
                      k1=1.5, b=0.75)
    hits = dict(idx.search_ids(["cat"], 10))
    assert hits["c"] == pytest.approx(np.log(1.6) * 2 / (1.5 + 2), rel=1e-6)
    assert hits["a"] == pytest.approx(np.log(1.6) * 1 / (1.5 + 1), rel=1e-6)
    assert set(hits) == {"a", "c"}


def test_ties_are_ordered_by_docid_descending():
    idx = build_index([["x", "y"], ["x", "y"], ["x", "y"], ["z"]], ["b", "c", "a", "d"])
    assert [d for d, _ in idx.search_ids(["x"], 10)] == ["c", "b", "a"]
    assert [d for d, _ in idx.search_ids(["x"], 2)] == ["c", "b"]


def test_documents_matching_only_a_zero_idf_term_are_still_results():
    # robertson: "a" is in every document, idf = ln(max(1, 0.5/3.5)) = 0
    idx = build_index([["a", "b"], ["a"], ["a"]], ["x", "y", "z"], variant="robertson")
    hits = idx.search_ids(["a", "b"], 10)
    assert [d for d, _ in hits] == ["x", "z", "y"] and hits[1][1] == hits[2][1] == 0.0


def test_repeated_query_word_counts_twice_like_bm25s():
    idx = build_index([["cat", "sat"], ["dog", "sat"], ["cat", "cat"]])
    once = dict(idx.search_ids(["cat"], 5))
    twice = dict(idx.search_ids(["cat", "cat"], 5))
    assert twice["3"] == pytest.approx(2 * once["3"])


def test_empty_and_unknown_queries_give_empty_results():
    idx = build_index([["cat", "sat"], ["dog"]])
    assert idx.search_ids([], 10) == []
    assert idx.search_ids(["unicorn"], 10) == []


def test_stopword_only_query_gives_empty_result():
    idx = index_texts([("1", "the cat sat"), ("2", "a dog")], stopwords="english")
    assert search_texts(idx, [("q", "the and of")], k=5) == {"q": []}


def test_empty_corpus_is_an_error():
    with pytest.raises(NlpkitError, match="empty corpus"):
        build_index([], [])


def test_term_frequencies_pack_into_postings_or_go_to_a_separate_array():
    packed = build_index([["a"] * 3, ["a", "b"]], ["x", "y"])
    assert packed.doc_bits == 1 and packed.tf_extra is None
    assert packed.tf.tolist() == [3, 1, 1] and packed.docs.tolist() == [0, 1, 1]
    assert packed.doclen.tolist() == [3, 2]
    big = build_index([["a"] * 70000, ["a"]], ["x", "y"])
    assert big.doc_bits == 1 and big.tf.tolist() == [70000, 1]
    # a term frequency that does not fit above the document bits goes to tf_extra
    huge = _assemble("lucene", 1.2, 0.75, 0.5, ["a"], ["x", "y"], np.array([0, 0]), np.array([0, 1]),
                     np.array([2**31, 1]), {})
    assert huge.doc_bits == 32 and huge.tf.tolist() == [2**31, 1] and huge.docs.tolist() == [0, 1]
    assert [d for d, _ in huge.search_ids(["a"], 2)] == ["x", "y"]


def test_unpacked_term_frequencies_survive_save_and_load(tmp_path):
    huge = _assemble("bm25l", 1.2, 0.75, 0.5, ["a", "b"], ["x", "y"], np.array([0, 0, 1]),
                     np.array([0, 1, 1]), np.array([2**31, 1, 2]), {})
    save_index(huge, str(tmp_path / "i"))
    back = load_index(str(tmp_path / "i"))
    assert back.doc_bits == 32 and back.tf.tolist() == [2**31, 1, 2]
    assert back.search_ids(["a", "b"], 2) == huge.search_ids(["a", "b"], 2)


def test_duplicate_document_ids_are_an_error():
    with pytest.raises(NlpkitError, match="duplicate document id 'a'"):
        build_index([["x"], ["y"]], ["a", "a"])


@pytest.mark.parametrize("k1,b,delta", [(-1, 0.75, 0.5), (1.2, 1.5, 0.5), (1.2, 0.75, -0.1)])
def test_invalid_parameters_are_usage_errors(k1, b, delta):
    with pytest.raises(UsageError):
        build_index([["x"]], k1=k1, b=b, delta=delta)


@pytest.mark.parametrize("variant", ["lucene", "bm25l"])
def test_add_equals_fresh_build_over_union(cranfield, tmp_path, variant):
    doc_ids, doc_tokens, _, query_tokens = cranfield
    fresh = build_index(doc_tokens, doc_ids, variant=variant, k1=1.2, b=0.75)
    part = build_index(doc_tokens[:1000], doc_ids[:1000], variant=variant, k1=1.2, b=0.75)
    save_index(part, str(tmp_path / "idx"))
    grown = add_documents(load_index(str(tmp_path / "idx")), doc_tokens[1000:], doc_ids[1000:])
    save_index(grown, str(tmp_path / "idx"))
    grown = load_index(str(tmp_path / "idx"))
    assert grown.doc_ids == fresh.doc_ids and grown.vocab == fresh.vocab
    for name in ("indptr", "postings", "docs", "tf", "doclen"):
        np.testing.assert_array_equal(getattr(grown, name), getattr(fresh, name))
    np.testing.assert_array_equal(grown.scores, fresh.scores)
    for q in query_tokens[:50]:
        assert grown.search_ids(q, 100) == fresh.search_ids(q, 100)


def test_add_texts_rejects_an_id_already_in_the_index():
    idx = index_texts([("a", "cat"), ("b", "dog")])
    with pytest.raises(NlpkitError, match="duplicate document id 'a'"):
        add_texts(idx, [("a", "bird")])


def test_saved_index_is_memory_mapped_and_searches_the_same(tmp_path):
    idx = index_texts([("d1", "the cat sat on the mat"), ("d2", "a dog sat"), ("d3", "cats and dogs")],
                      variant="bm25+", k1=1.2, b=0.5, delta=1.0, stopwords="english")
    save_index(idx, str(tmp_path / "i"))
    loaded = load_index(str(tmp_path / "i"))
    assert isinstance(loaded.scores.base, np.memmap)   # a view of the memory map, not a copy
    assert loaded.tokenizer["stopwords"] == "english"
    assert (loaded.variant, loaded.k1, loaded.b, loaded.delta) == ("bm25+", 1.2, 0.5, 1.0)
    q = [("q", "the dog sat")]
    assert search_texts(loaded, q, 3) == search_texts(idx, q, 3)


@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "idx"
    save_index(index_texts([("a", "cat sat"), ("b", "dog sat"), ("c", "cat cat")]), str(path))
    return path


def test_saving_into_a_foreign_nonempty_directory_is_refused(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(NlpkitError, match="exists and is not an nlpkit BM25 index"):
        save_index(index_texts([("a", "cat")]), str(tmp_path))


def test_truncated_array_is_rejected(saved):
    data = (saved / "scores.npy").read_bytes()
    (saved / "scores.npy").write_bytes(data[:-3])
    with pytest.raises(NlpkitError, match=r"scores\.npy: corrupt or truncated"):
        load_index(str(saved))


def test_corrupt_header_is_rejected(saved):
    (saved / "header.json").write_text('{"format": "nlpkit-bm25", "format_ver')
    with pytest.raises(NlpkitError, match=r"header\.json: corrupt header"):
        load_index(str(saved))


def test_foreign_directory_is_rejected(saved):
    (saved / "header.json").write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(NlpkitError, match="not an nlpkit BM25 index"):
        load_index(str(saved))


def test_future_format_version_is_rejected(saved):
    h = json.loads((saved / "header.json").read_text())
    h["format_version"] = 99
    (saved / "header.json").write_text(json.dumps(h))
    with pytest.raises(NlpkitError, match="format version 99 is not supported"):
        load_index(str(saved))


def test_header_with_wrong_types_is_rejected(saved):
    h = json.loads((saved / "header.json").read_text())
    h["n_docs"], h["arrays"] = "three", []
    (saved / "header.json").write_text(json.dumps(h))
    with pytest.raises(NlpkitError, match="corrupt index header .missing or bad: n_docs, arrays"):
        load_index(str(saved))


def test_array_of_wrong_dtype_is_rejected(saved):
    np.save(saved / "postings.npy", np.load(saved / "postings.npy").astype(np.int64))
    with pytest.raises(NlpkitError, match=r"postings\.npy: holds <i8"):
        load_index(str(saved))


def test_missing_array_and_plain_file_are_rejected(saved, tmp_path):
    os.remove(saved / "indptr.npy")
    with pytest.raises(NlpkitError, match=r"indptr\.npy: missing"):
        load_index(str(saved))
    (tmp_path / "f.txt").write_text("hello")
    with pytest.raises(NlpkitError, match="not an nlpkit BM25 index"):
        load_index(str(tmp_path / "f.txt"))


def test_smart_readers_handle_the_three_collections(shared_data):
    cisi = read_records(str(shared_data / "cisi" / "CISI.ALL"))
    cacm_q = read_records(str(shared_data / "cacm" / "query.text"), kind="queries", fields="W")
    cran_q = read_records(str(shared_data / "cranfield" / "cran.qry"), kind="queries", fields="W",
                          query_ids="position")
    assert len(cisi) == 1460 and cisi[0][0] == "1"
    assert len(cacm_q) == 64 and cacm_q[-1][0] == "64"   # the bodiless `.I 0` sentinel is dropped
    assert len(cran_q) == 225 and cran_q[2][0] == "3"     # .I 004 is query 3 of the qrels
    assert cran_q[0][1].startswith("what similarity laws")


def test_jsonl_corpus_errors_name_line_and_fields_like_tfidf(tmp_path):
    p = tmp_path / "c.jsonl"
    p.write_text('{"id": "a", "text": "x"}\n\n{"id": "b", "body": "y"}\n', encoding="utf-8")
    with pytest.raises(NlpkitError, match=r"c\.jsonl, line 3: no field 'text' \(fields: id, body; choose one with `field`\)"):
        read_records(str(p), "jsonl")
    p.write_text('{"id": "a", "text": "x"}\n[1]\n', encoding="utf-8")
    with pytest.raises(NlpkitError, match=r"line 2: expected a JSON object, got list"):
        read_records(str(p), "jsonl")
    p.write_text('{"text": "x"}\n', encoding="utf-8")
    with pytest.raises(NlpkitError, match=r"line 1: no id field 'id' \(fields: text; choose one with `id_field`\)"):
        read_records(str(p), "jsonl")
    assert read_records(str(p), "jsonl", id_field=None) == [("1", "x")]


def test_postings_out_of_document_order_are_a_corrupt_index(saved):
    """Postings rewritten to one document number (in range) would score that document many times."""
    p = np.load(saved / "postings.npy")
    p[:] = p[0]
    np.save(saved / "postings.npy", p)
    idx = load_index(str(saved))
    with pytest.raises(NlpkitError, match="postings are not in document order"):
        idx.search(["sat"], 3)
    with pytest.raises(NlpkitError, match="postings are not in document order"):
        add_documents(idx, [["cat"]])


def test_header_document_count_that_disagrees_with_the_postings_is_a_corrupt_index(saved):
    h = json.loads((saved / "header.json").read_text())
    h["n_docs"] = 1
    h["doc_ids"] = ["a"]
    (saved / "header.json").write_text(json.dumps(h))
    with pytest.raises(NlpkitError, match="postings name document 1 but the header has 1 documents"):
        load_index(str(saved)).search(["sat"], 3)
