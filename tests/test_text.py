"""The shared word tokenizer (nlpkit/text.py): pattern, lowercasing, stopwords, sentences."""

import re

import pytest

from nlpkit.errors import NlpkitError, UsageError
from nlpkit.text import (DEFAULT_PATTERN, WordTokenizer, compile_pattern, load_stopwords,
                         stopwords_name, tokenize)


def test_default_tokenize_lowercases_and_drops_punctuation_and_one_letter_words():
    assert tokenize("The cat sat on a mat. I saw it!") == ["the", "cat", "sat", "on", "mat", "saw", "it"]


def test_default_pattern_equals_sklearn_default():
    sk = pytest.importorskip("sklearn.feature_extraction.text")
    analyzer = sk.CountVectorizer().build_analyzer()
    text = "Héllo WORLD, naïve café — x y zz 3.14 don't Straße ΣΊΣΥΦΟΣ 東京都"
    assert tokenize(text) == analyzer(text)
    assert sk.CountVectorizer().token_pattern == DEFAULT_PATTERN


def test_one_letter_pattern_keeps_single_letters():
    assert tokenize("I saw a cat", pattern=r"(?u)\b\w+\b") == ["i", "saw", "a", "cat"]


def test_lowercase_off_keeps_case():
    assert WordTokenizer(lowercase=False).tokenize("New York") == ["New", "York"]


def test_english_stopwords_are_nltk_list():
    words = load_stopwords("english")
    assert len(words) == 179
    assert {"the", "a", "ourselves", "wouldn't", "y"} <= words
    assert tokenize("The cat sat on the mat", stopwords="english") == ["cat", "sat", "mat"]


def test_lucene_stopwords_are_33_words():
    assert len(load_stopwords("lucene")) == 33


def test_stopwords_from_file_ignore_comments_and_blanks(tmp_path):
    p = tmp_path / "stop.txt"
    p.write_text("# my list\ncat\n\n  mat  \n", encoding="utf-8")
    assert load_stopwords(str(p)) == frozenset({"cat", "mat"})
    assert stopwords_name(str(p)) == "file:stop.txt"
    assert tokenize("the cat sat on the mat", stopwords=str(p)) == ["the", "sat", "on", "the"]


def test_missing_stopword_file_is_clear_error():
    with pytest.raises(NlpkitError, match="no such file and not a built-in list"):
        load_stopwords("/no/such/stopwords.txt")


def test_stopwords_none_and_iterable():
    assert load_stopwords(None) == frozenset()
    assert load_stopwords("none") == frozenset()
    assert load_stopwords(["a", "b"]) == frozenset({"a", "b"})


def test_regex_module_fallback_for_unicode_properties():
    assert tokenize("Ab1 cd2", pattern=r"\p{L}+") == ["ab", "cd"]


def test_one_capturing_group_gives_group_text_like_re_findall():
    assert tokenize("x=1 y=2", pattern=r"(\w)=") == ["x", "y"]


def test_bad_patterns_are_usage_errors():
    with pytest.raises(UsageError, match="capturing groups"):
        compile_pattern(r"(\w)(\w)")
    with pytest.raises(UsageError, match="empty string"):
        compile_pattern(r"\w*")
    with pytest.raises(UsageError, match="invalid `pattern`"):
        compile_pattern(r"(\w")


def test_sentences_split_at_end_punctuation_and_lines():
    tok = WordTokenizer()
    assert tok.sentences("The cat sat. The dog?\nran on\n\nand on!") == [
        ["the", "cat", "sat"], ["the", "dog"], ["ran", "on"], ["and", "on"]]


def test_signature_names():
    assert WordTokenizer().signature == "word-lower"
    assert WordTokenizer(lowercase=False).signature == "word"
    assert WordTokenizer(pattern=r"(?u)\b\w+\b").signature == "word1-lower"
    assert re.fullmatch(r"re:[0-9a-f]{8}-lower", WordTokenizer(pattern=r"\S+").signature)


from hypothesis import given, settings
from hypothesis import strategies as st


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab_1 .,'-\n\tÉéßΣς東京\u0301\u200d")), max_size=60))
def test_fast_default_pattern_finds_the_same_tokens_as_sklearns(text):
    assert tokenize(text) == re.findall(DEFAULT_PATTERN, text.lower())
    assert tokenize(text, pattern=r"(?u)\b\w+\b") == re.findall(r"(?u)\b\w+\b", text.lower())


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(alphabet=st.sampled_from(list("aB_1 .!?\n\x00\x01,'-\tÉéßΣΑ’—東\u0301")), max_size=80),
                 st.text(alphabet=st.sampled_from(list("aBcD_1 .!?\n,'-Éé’—\u212a\u0130")), max_size=80)),
       st.sampled_from([None, r"[.!?\n]+", r"[.!?]+", r"\n", r"\x00"]),
       st.sampled_from([None, r"(?u)\b\w+\b"]), st.booleans())
def test_block_encoder_fast_path_equals_regex_path(text, brk, pattern, lowercase):
    """The bytes translate/split tokenizer gives the tokens and segments of the combined regex."""
    import numpy as np

    from nlpkit.stats import counting as corpus

    corpus.FAST_MAX_MULTIBYTE = 1e9                      # never fall back: test the fast code itself

    tok = WordTokenizer(pattern=pattern, lowercase=lowercase)
    fast, slow = corpus.BlockEncoder(tok, brk), corpus.BlockEncoder(tok, brk)
    assert fast._spec[0] == "fast"
    slow._spec = ("regex", lowercase, fast._spec[-1], tok.regex.flags, False)

    def run(enc):
        ids, seg, _ = enc.encode(text * 3)
        part = np.unique(seg, return_inverse=True)[1] if len(seg) else seg
        return [enc.words[i] for i in ids], part.tolist()

    try:
        assert run(fast) == run(slow)
    finally:
        corpus.FAST_MAX_MULTIBYTE = 0.1


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from(list("abcdefghij_1 .\nÉé’")), max_size=120), min_size=1, max_size=6),
       st.sampled_from([1, 3, 19]))
def test_fast_piece_table_keeps_ids_across_blocks_and_collisions(blocks, bits):
    """The numpy piece table (long pieces, a table of 2 slots full of collisions) gives the dict's ids."""
    from nlpkit.stats import counting as corpus

    import numpy as np

    class DictPieces(corpus._FastTokenizer):         # the plain dict lookup the table replaces
        def _piece_ids(self, tr):
            n0 = len(self.raw)
            pieces = tr.split()
            rid = np.fromiter(map(self.raw.__getitem__, pieces), dtype=np.int32, count=len(pieces))
            if len(self.raw) > n0:
                self._add_pieces(corpus._tail(self.raw, n0))
            return rid

    enc = corpus.BlockEncoder(WordTokenizer(), r"[.!?\n]+")
    fast, slow = corpus._make_tokenizer(enc._spec), DictPieces(*enc._spec[1:])
    fast.table_bits = bits
    fast_words: list[str] = []
    slow_words: list[str] = []
    for text in blocks + blocks:
        new, ids = fast.tokenize(text)
        fast_words += new
        new_slow, ids_slow = slow.tokenize(text)
        slow_words += new_slow
        assert [fast_words[i] for i in ids] == [slow_words[i] for i in ids_slow]
    assert fast_words == slow_words          # the same vocabulary in the same order


def test_sklearn_stopwords_are_scikit_learns_list():
    sklearn_text = pytest.importorskip("sklearn.feature_extraction.text")
    assert load_stopwords("sklearn") == frozenset(sklearn_text.ENGLISH_STOP_WORDS)
    assert stopwords_name("sklearn") == "sklearn"
