"""TF-IDF (nlpkit/tfidf.py) against scikit-learn TfidfVectorizer and gensim TfidfModel(smartirs)."""

import io
import re

import numpy as np
import pytest

import nlpkit.stats.counting as corpus
from nlpkit.stats.documents import DocNames, batch_texts, iter_documents, split_paragraphs
from nlpkit.errors import NlpkitError, UsageError
from nlpkit.text import WordTokenizer, load_stopwords, tokenize
from nlpkit.stats.tfidf import (Weighting, idf_weights, smart_weighting, rank_by_cosine, tf_weights, tfidf,
                          write_matrix_market)


# ------------------------------------------------------------------------- worked example

def test_worked_example_relative_tf_idf_base_10():
    tf = tf_weights(np.array([3, 97]), np.array([0, 0]), 1, "relative")       # "cat" 3 of 100 words
    idf = idf_weights(np.array([1000]), 10_000_000, "standard", "10")
    assert tf[0] == pytest.approx(0.03, abs=1e-15)
    assert idf[0] == 4.0
    assert tf[0] * idf[0] == pytest.approx(0.12, abs=1e-15)


def test_tf_schemes_on_one_document():
    c, row = np.array([1, 2, 4]), np.zeros(3, dtype=np.int64)
    assert tf_weights(c, row, 1, "raw").tolist() == [1, 2, 4]
    assert tf_weights(c, row, 1, "boolean").tolist() == [1, 1, 1]
    assert tf_weights(c, row, 1, "log", "2").tolist() == [1, 2, 3]
    assert tf_weights(c, row, 1, "augmented").tolist() == [0.625, 0.75, 1.0]
    assert tf_weights(c, row, 1, "relative").tolist() == pytest.approx([1 / 7, 2 / 7, 4 / 7])


def test_idf_schemes():
    df = np.array([1, 5, 10])
    assert idf_weights(df, 10, "standard", "10").tolist() == pytest.approx([1.0, np.log10(2), 0.0])
    assert idf_weights(df, 10, "smooth").tolist() == pytest.approx(np.log(11 / (df + 1)) + 1)
    assert idf_weights(df, 10, "probabilistic", "2").tolist() == pytest.approx([np.log2(9), 0.0, 0.0])
    assert idf_weights(df, 10, "none").tolist() == [1, 1, 1]


# ------------------------------------------------------------------------- scikit-learn

@pytest.fixture(scope="module")
def cranfield(shared_data):
    """The .W text of each of the 1,400 Cranfield records (empty when a record has none)."""
    raw = (shared_data / "cranfield" / "cran.all.1400").read_text()
    records = re.split(r"^\.I \d+\n", raw, flags=re.M)[1:]
    return [r.split("\n.W\n", 1)[1] if "\n.W\n" in r else "" for r in records]


@pytest.fixture(scope="module")
def shakespeare_lines(shared_data):
    return (shared_data / "tinyshakespeare" / "input.txt").read_text().split("\n")[:-1]


SKLEARN_CASES = [
    ({}, {}),                                                           # raw tf, smooth idf, l2
    ({"tf": "log"}, {"sublinear_tf": True}),
    ({"idf": "standard", "idf_offset": 1.0}, {"smooth_idf": False}),
    ({"norm": "l1"}, {"norm": "l1"}),
    ({"norm": "none"}, {"norm": None}),
    ({"idf": "none"}, {"use_idf": False}),
]


def assert_equals_sklearn(m, X, vectorizer):
    X = X.tocsr()
    X.sort_indices()
    assert m.terms == list(vectorizer.get_feature_names_out())
    assert np.array_equal(m.indptr, X.indptr)
    assert np.array_equal(m.indices, X.indices)
    assert np.abs(m.data - X.data).max() <= 1e-9


@pytest.mark.parametrize("ours,theirs", SKLEARN_CASES)
def test_tfidf_equals_sklearn_on_cranfield(cranfield, ours, theirs):
    from sklearn.feature_extraction.text import TfidfVectorizer

    vec = TfidfVectorizer(**theirs)
    assert_equals_sklearn(tfidf(cranfield, weighting=Weighting(**ours)), vec.fit_transform(cranfield), vec)


@pytest.mark.parametrize("ours,theirs", SKLEARN_CASES)
def test_tfidf_equals_sklearn_on_shakespeare_lines(shakespeare_lines, ours, theirs):
    from sklearn.feature_extraction.text import TfidfVectorizer

    vec = TfidfVectorizer(**theirs)
    assert_equals_sklearn(tfidf(shakespeare_lines, weighting=Weighting(**ours)),
                          vec.fit_transform(shakespeare_lines), vec)


def test_ngram_range_stopwords_and_df_limits_equal_sklearn(cranfield):
    from sklearn.feature_extraction.text import TfidfVectorizer

    stop = sorted(load_stopwords("english"))
    vec = TfidfVectorizer(ngram_range=(1, 3), min_df=2, max_df=0.5, stop_words=stop, sublinear_tf=True)
    docs = cranfield[:700]
    m = tfidf(docs, tokenizer=WordTokenizer(stopwords="english"), weighting=Weighting(tf="log"),
              ngram_range=(1, 3), min_df=2, max_df=0.5)
    assert_equals_sklearn(m, vec.fit_transform(docs), vec)


def test_query_ranking_equals_sklearn_cosine(cranfield):
    from sklearn.feature_extraction.text import TfidfVectorizer

    vec = TfidfVectorizer()
    X = vec.fit_transform(cranfield)
    query = "what similarity laws must be obeyed when constructing aeroelastic models of heated high speed aircraft"
    scores = (X @ vec.transform([query]).T).toarray().ravel()
    ref = sorted(((-s, i) for i, s in enumerate(scores) if s > 0))[:10]
    ours = rank_by_cosine(tfidf(cranfield), tokenize(query), 10)
    assert [i for i, _ in ours] == [i for _, i in ref]
    assert np.allclose([s for _, s in ours], [-s for s, _ in ref], atol=1e-12)


# ------------------------------------------------------------------------- gensim SMART

@pytest.fixture(scope="module")
def gensim_cranfield(cranfield):
    from gensim.corpora import Dictionary

    tokens = [tokenize(d) for d in cranfield]
    dictionary = Dictionary(tokens)
    return dictionary, [dictionary.doc2bow(t) for t in tokens]


@pytest.mark.parametrize("smart", ["nfc", "ntc", "ltc", "lnc", "bnn", "apc"])
def test_smart_equals_gensim(cranfield, gensim_cranfield, smart):
    from gensim.models import TfidfModel

    dictionary, bows = gensim_cranfield
    model = TfidfModel(bows, smartirs=smart)
    m = tfidf(cranfield, weighting=smart_weighting(smart))
    col = {t: j for j, t in enumerate(m.terms)}
    for i, bow in enumerate(bows):
        ref = dict(model[bow]) if bow else {}            # gensim fails on empty docs with 'a'
        cols, vals = m.row(i)
        assert sorted(cols.tolist()) == sorted(col[dictionary[t]] for t in ref)
        expect = np.array([ref[dictionary.token2id[m.terms[c]]] for c in cols.tolist()])
        assert np.abs(vals - expect).max(initial=0.0) <= 1e-9


def test_smart_letters_are_checked():
    with pytest.raises(UsageError, match="unknown tf letter 'q'"):
        smart_weighting("qtc")
    with pytest.raises(UsageError, match="unknown idf letter"):
        smart_weighting("nzc")
    with pytest.raises(UsageError, match="pivoted normalization"):
        smart_weighting("ntu")
    with pytest.raises(UsageError, match="three letters"):
        smart_weighting("nt")


# ------------------------------------------------------------------------- documents, output

def test_paragraphs_do_not_depend_on_block_size(shared_data, monkeypatch):
    path = str(shared_data / "gutenberg" / "pg42.txt")
    text = "".join(corpus.iter_blocks(path))
    whole = tfidf(split_paragraphs(text))
    monkeypatch.setattr(corpus, "BLOCK_BYTES", 4099)
    names = DocNames()
    blocked = tfidf(batches=iter_documents([path], "paragraphs", names), names=names)
    assert len(names) == whole.n_docs
    assert np.array_equal(whole.indptr, blocked.indptr) and np.array_equal(whole.data, blocked.data)


def test_two_worker_processes_give_the_same_matrix(shakespeare_lines):
    one = tfidf(shakespeare_lines[:4000])
    two = tfidf(batches=batch_texts(shakespeare_lines[:4000], batch_chars=5000), jobs=2)
    assert one.terms == two.terms
    assert np.array_equal(one.indices, two.indices) and np.array_equal(one.data, two.data)


def test_empty_lines_are_empty_documents(tmp_path):
    p = tmp_path / "docs.txt"
    p.write_text("the cat\n\nthe dog\n")
    names = DocNames()
    m = tfidf(batches=iter_documents([str(p)], "lines", names), names=names, doc_break=corpus.BREAK_LINE)
    assert m.n_docs == 3 and list(names) == ["1", "2", "3"]
    assert np.diff(m.indptr).tolist() == [2, 0, 2]


def test_jsonl_documents_and_missing_field(tmp_path):
    p = tmp_path / "docs.jsonl"
    p.write_text('{"id": "a", "text": "cats purr"}\n\n{"id": "b", "body": "dogs"}\n')
    names = DocNames()
    with pytest.raises(NlpkitError, match=r"docs\.jsonl, line 3: no field 'text'"):
        tfidf(batches=iter_documents([str(p)], "jsonl", names, id_field="id"), names=names)


def test_matrix_market_round_trips_through_scipy(cranfield):
    from scipy.io import mmread

    m = tfidf(cranfield[:50])
    buf = io.StringIO()
    write_matrix_market(m, buf, signature="tfidf|test")
    X = mmread(io.StringIO(buf.getvalue())).tocsr()
    X.sort_indices()
    assert X.shape == (50, len(m.terms))
    assert np.array_equal(X.indices, m.indices) and np.array_equal(X.data, m.data)
    assert f"%term\t1\t{m.terms[0]}\n" in buf.getvalue()


def test_empty_and_all_stopword_corpora_are_clear_errors():
    with pytest.raises(NlpkitError, match="empty corpus"):
        tfidf([])
    with pytest.raises(NlpkitError, match="other than stopwords"):
        tfidf(["the a of", "and the"], tokenizer=WordTokenizer(stopwords="english"))
    with pytest.raises(NlpkitError, match="no terms remain"):
        tfidf(["cat", "dog", "cat dog"], max_df=1)
    with pytest.raises(UsageError, match="`min_df` 3 asks for terms in 3 or more of 3 documents, but `max_df` 2 allows at most 2"):
        tfidf(["cat", "dog", "cat dog"], min_df=3, max_df=2)


def test_sklearn_stopwords_equal_tfidfvectorizer_stop_words_english():
    from sklearn.feature_extraction.text import TfidfVectorizer

    docs = ["The cat sat on the mat, and then it slept.", "Would the dog have found the cat anyway?",
            "Nobody else could see whatever the dog saw."]
    vec = TfidfVectorizer(stop_words="english")  # scikit-learn's own list, not NLTK's
    m = tfidf(docs, tokenizer=WordTokenizer(stopwords="sklearn"))
    assert_equals_sklearn(m, vec.fit_transform(docs), vec)
