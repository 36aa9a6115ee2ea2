"""PMI counting and scoring (nlpkit/cooccur.py) against NLTK and gensim."""

import itertools
import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nlpkit.stats.counting as corpus
from nlpkit.stats.pmi import count_cooccurrences, count_matrix, ranked, score, top_words
from nlpkit.errors import UsageError
from nlpkit.text import WordTokenizer, tokenize

TEXTBOOK = "The cat sat on the mat. The dog sat on the mat."


def pair_table(co):
    """{(x, y, ...): raw count} of a Cooccurrence."""
    return {tuple(co.words[i] for i in row): c
            for row, c in zip(co.ngram_ids().tolist(), co.counts.tolist())}


def top(co, **kw):
    ids, counts, scores = ranked(co, **kw)
    return [(tuple(co.words[i] for i in row), s) for row, s in zip(ids.tolist(), scores.tolist())]


# ------------------------------------------------------------------------------ counting

def test_textbook_forward_counts_do_not_cross_sentences():
    co = count_cooccurrences([], texts=[TEXTBOOK])
    assert pair_table(co) == {("the", "mat"): 2, ("sat", "on"): 2, ("on", "the"): 2, ("the", "cat"): 1,
                              ("the", "dog"): 1, ("cat", "sat"): 1, ("dog", "sat"): 1}
    assert co.n_tokens == 12


def test_crossing_sentences_adds_the_pair_across_the_full_stop():
    co = count_cooccurrences([], texts=[TEXTBOOK], cross_sentences=True, cross_lines=True)
    assert pair_table(co)[("mat", "the")] == 1


def test_lines_are_not_crossed_unless_cross_lines():
    assert ("cat", "sat") not in pair_table(count_cooccurrences([], texts=["the cat\nsat down"]))
    assert pair_table(count_cooccurrences([], texts=["the cat\nsat down"], cross_lines=True))[("cat", "sat")] == 1


def test_count_matrix_of_textbook_example():
    co = count_cooccurrences([], texts=[TEXTBOOK])
    ids = top_words(co, 0)
    assert [co.words[i] for i in ids] == ["the", "mat", "on", "sat", "cat", "dog"]
    assert count_matrix(co, ids).tolist() == [[0, 2, 0, 0, 1, 1], [0] * 6, [2, 0, 0, 0, 0, 0],
                                              [0, 0, 2, 0, 0, 0], [0, 0, 0, 1, 0, 0], [0, 0, 0, 1, 0, 0]]


def test_stopwords_are_removed_before_pairs_are_formed():
    co = count_cooccurrences([], texts=[TEXTBOOK], tokenizer=WordTokenizer(stopwords=["the", "on"]))
    assert pair_table(co) == {("cat", "sat"): 1, ("dog", "sat"): 1, ("sat", "mat"): 2}


@pytest.mark.parametrize("cross_lines,cross_sentences", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("ngram,window", [(2, 2), (2, 4), (3, 4)])
def test_segmented_counts_equal_nltk_on_padded_segments(shared_data, ngram, window, cross_lines, cross_sentences):
    """Not crossing a boundary = NLTK from_words on segments separated by window-1 None pads."""
    from nltk.collocations import BigramCollocationFinder, TrigramCollocationFinder

    text = "\n".join((shared_data / "tinyshakespeare" / "input.txt").read_text().split("\n")[:1500])
    co = count_cooccurrences([], texts=[text], window=window, ngram=ngram,
                             cross_lines=cross_lines, cross_sentences=cross_sentences)
    brk = {(False, False): r"[.!?\n]+", (True, False): r"[.!?]+", (False, True): r"\n", (True, True): None}
    pattern = brk[(cross_lines, cross_sentences)]
    segments = re.split(pattern, text.lower()) if pattern else [text.lower()]
    stream = list(itertools.chain.from_iterable(tokenize(s) + [None] * (window - 1) for s in segments))
    finder = (BigramCollocationFinder if ngram == 2 else TrigramCollocationFinder).from_words(stream, window)
    assert pair_table(co) == dict(finder.ngram_fd)
    assert co.n_tokens == sum(1 for w in stream if w is not None)


@pytest.mark.parametrize("cross_lines", [False, True])
def test_counts_do_not_depend_on_block_size(shared_data, monkeypatch, cross_lines):
    path = str(shared_data / "tinyshakespeare" / "input.txt")
    kw = dict(window=5, ngram=2, cross_lines=cross_lines)
    whole = count_cooccurrences([path], **kw)
    monkeypatch.setattr(corpus, "BLOCK_BYTES", 20011)
    small = count_cooccurrences([path], **kw)
    assert whole.words == small.words                 # same ids, so the packed codes compare directly
    assert np.array_equal(whole.keys, small.keys) and np.array_equal(whole.counts, small.counts)
    assert np.array_equal(whole.unigram, small.unigram)


# -------------------------------------------------------------------------- NLTK equality

@pytest.fixture(scope="module")
def shakespeare_words(shared_data):
    path = shared_data / "tinyshakespeare" / "input.txt"
    return str(path), tokenize(path.read_text())


def _nltk_top(words, ngram, window, k=100):
    from nltk.collocations import BigramCollocationFinder, TrigramCollocationFinder
    from nltk.metrics import BigramAssocMeasures, TrigramAssocMeasures

    if ngram == 2:
        finder, measure = BigramCollocationFinder.from_words(words, window_size=window), BigramAssocMeasures.pmi
    else:
        finder, measure = TrigramCollocationFinder.from_words(words, window_size=window), TrigramAssocMeasures.pmi
    finder.apply_freq_filter(5)
    return finder.score_ngrams(measure)[:k]


def _assert_same_ranking(ours, ref):
    assert [g for g, _ in ours] == [g for g, _ in ref]           # same n-grams, same order
    assert [s for _, s in ours] == [s for _, s in ref]           # bit-identical scores


@pytest.mark.parametrize("window", [2, 5])
def test_pmi_matches_nltk_bigrams_top_100(shakespeare_words, window):
    path, words = shakespeare_words
    co = count_cooccurrences([path], window=window, cross_lines=True, cross_sentences=True)
    _assert_same_ranking(top(co, measure="pmi", log_base="2", min_count=5, top=100),
                         _nltk_top(words, 2, window))


@pytest.mark.parametrize("window", [3])
def test_pmi_matches_nltk_trigrams_top_100(shakespeare_words, window):
    path, words = shakespeare_words
    co = count_cooccurrences([path], window=window, ngram=3, cross_lines=True, cross_sentences=True)
    _assert_same_ranking(top(co, measure="pmi", log_base="2", min_count=5, top=100),
                         _nltk_top(words, 3, window))


def test_pmi_full_ranking_is_bit_identical_to_nltk(shakespeare_words):
    """Every pair, not just the top: math.log2 of NLTK's two products, where np.log2 differs in the last bit."""
    from nltk.collocations import BigramCollocationFinder
    from nltk.metrics import BigramAssocMeasures

    path, words = shakespeare_words
    co = count_cooccurrences([path], window=2, cross_lines=True, cross_sentences=True)
    ours = top(co, measure="pmi", log_base="2", min_count=3, top=0)
    finder = BigramCollocationFinder.from_words(words, window_size=2)
    finder.apply_freq_filter(3)
    ref = finder.score_ngrams(BigramAssocMeasures.pmi)
    assert dict(ours) == dict(ref)
    _assert_same_ranking(ours, ref)


def test_pmi_takes_math_log2_of_the_products():
    from nltk.metrics import BigramAssocMeasures
    from nlpkit.stats.pmi import _libm_log

    log = _libm_log("2")
    got = float(log(np.array([1 * 60000.0]))[0] - log(np.array([109.0 * 73]))[0])
    assert got == BigramAssocMeasures.pmi(1, (109, 73), 60000) == 2.914665996613662
    # numpy's log2 is 1 ulp off here (2.9146659966136603), which can swap adjacent pairs in a ranking


def test_top_k_equals_head_of_full_ranking(shakespeare_words):
    co = count_cooccurrences([shakespeare_words[0]], window=3)
    full = top(co, min_count=3, top=0)
    assert top(co, min_count=3, top=37) == full[:37]


# ------------------------------------------------------------------------------ measures

def test_npmi_equals_gensim_npmi_scorer():
    from gensim.models.phrases import npmi_scorer

    co = count_cooccurrences([], texts=[TEXTBOOK + " A cat and a dog. The cat sat."])
    ids, counts, scores = ranked(co, measure="npmi", top=0)
    for (x, y), c, s in zip(ids.tolist(), counts.tolist(), scores.tolist()):
        ref = npmi_scorer(int(co.unigram[x]), int(co.unigram[y]), c, len(co.words), 1, co.n_tokens)
        assert s == pytest.approx(ref, abs=1e-12)


def test_log_base_changes_scale_only():
    co = count_cooccurrences([], texts=[TEXTBOOK])
    ids, counts = co.ngram_ids(), co.counts
    b2 = score(co, ids, counts, "pmi", "2")
    assert np.allclose(score(co, ids, counts, "pmi", "e"), b2 * math.log(2))
    assert np.allclose(score(co, ids, counts, "pmi", "10"), b2 * math.log10(2))


def test_ppmi_is_pmi_clipped_at_zero():
    co = count_cooccurrences([], texts=["a b a c b c b b a a c c d b"], tokenizer=WordTokenizer(pattern=r"\w+"))
    ids, counts = co.ngram_ids(), co.counts
    pmi = score(co, ids, counts, "pmi")
    assert (pmi < 0).any()
    assert np.array_equal(score(co, ids, counts, "ppmi"), np.maximum(pmi, 0))


corpora = st.lists(st.lists(st.sampled_from("abcdef"), min_size=1, max_size=30), min_size=1, max_size=6)


@settings(max_examples=60, deadline=None)
@given(corpora, st.integers(2, 5), st.sampled_from([2, 3]))
def test_npmi_in_unit_interval_and_ppmi_nonnegative(lines, window, ngram):
    window = max(window, ngram)
    texts = ["\n".join(" ".join(w) for w in lines)]
    co = count_cooccurrences([], texts=texts, window=window, ngram=ngram,
                             tokenizer=WordTokenizer(pattern=r"\w+"))
    if len(co.keys) == 0:
        return
    ids = co.ngram_ids()
    npmi = score(co, ids, co.counts, "npmi")
    assert np.all(npmi >= -1 - 1e-12) and np.all(npmi <= 1 + 1e-12)
    assert np.all(score(co, ids, co.counts, "ppmi") >= 0)


# ------------------------------------------------------------------------------ bad input

def test_window_1_is_refused():
    with pytest.raises(UsageError, match="`window` must be at least 2"):
        count_cooccurrences([], texts=["a b"], window=1)
    with pytest.raises(UsageError, match="at least 3 for `ngram` 3"):
        count_cooccurrences([], texts=["a b"], window=2, ngram=3)


def test_min_count_0_is_refused():
    co = count_cooccurrences([], texts=[TEXTBOOK])
    with pytest.raises(UsageError, match="`min_count` must be at least 1"):
        ranked(co, min_count=0)


def test_empty_corpus_gives_empty_ranking():
    co = count_cooccurrences([], texts=[""])
    assert co.n_tokens == 0
    assert len(ranked(co)[0]) == 0


def test_two_worker_processes_count_the_same(shared_data, monkeypatch):
    path = str(shared_data / "tinyshakespeare" / "input.txt")
    monkeypatch.setattr(corpus, "BLOCK_BYTES", 50021)
    one = count_cooccurrences([path], window=3)
    two = count_cooccurrences([path], window=3, jobs=2)
    assert one.words == two.words                      # ids assigned in the same order
    assert np.array_equal(one.keys, two.keys) and np.array_equal(one.counts, two.counts)


def test_auto_jobs_uses_two_processes_only_for_big_files(tmp_path, monkeypatch):
    import os

    from nlpkit.stats.counting import auto_jobs

    small = tmp_path / "small.txt"
    small.write_text("a b c\n")
    big = tmp_path / "big.txt"
    big.write_bytes(b"word " * (2 * 2**20))  # 10 MB
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert auto_jobs([str(small)]) == 1
    assert auto_jobs([str(big)]) == 2
    assert auto_jobs(["-"]) == 1
    assert auto_jobs([str(big)], 1) == 1
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    assert auto_jobs([str(big)]) == 1
