"""n-gram models against KenLM (stored lmplz / query outputs, tools/make_ngram_fixtures.py), NLTK and
the textbook formulas; ARPA reading (KenLM, SRILM forms, .gz) and its errors."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nlpkit.errors import NlpkitError, UsageError
from nlpkit.lm.ngram.arpa import read_model_file
from nlpkit.lm.ngram.ngram_model import load_ngram_model
from nlpkit.lm.ngram.line_scoring import NgramPerplexity, query_words, score_lines
from nlpkit.lm.ngram.train import train_ngram

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "ngram"
ORDERS = (2, 3, 4, 5)
QUERY = json.loads((FIX / "query.json").read_text())


def arpa_dict(path) -> dict:
    raw = read_model_file(path)
    out = {}
    for g, v, b in zip(raw.ngrams, raw.values, raw.backoffs):
        for row, p, bo in zip(g.tolist(), v.tolist(), b.tolist()):
            out[tuple(raw.vocab[i] for i in row)] = (p, bo)
    return out


def assert_same_arpa(mine: dict, ref: dict, tol: float = 1e-5) -> None:
    assert set(mine) == set(ref), (sorted(set(mine) - set(ref))[:5], sorted(set(ref) - set(mine))[:5])
    worst = max(max(abs(mine[k][0] - ref[k][0]), abs(mine[k][1] - ref[k][1])) for k in ref)
    assert worst < tol, worst


def heldout_lines() -> list[str]:
    return (FIX / "heldout.txt").read_text(encoding="utf-8").split("\n")[:-1]


@pytest.fixture(scope="module")
def nlpkit_arpas(tmp_path_factory):
    d = tmp_path_factory.mktemp("ngram")
    out = {}
    for n in ORDERS:
        p = d / f"nlpkit-{n}.arpa"
        train_ngram([str(FIX / "train.txt")], str(p), order=n)
        out[n] = p
    return out


# ------------------------------------------------------------------------- training = lmplz

@pytest.mark.parametrize("order", ORDERS)
def test_kneser_ney_arpa_equals_lmplz(nlpkit_arpas, order):
    assert_same_arpa(arpa_dict(nlpkit_arpas[order]), arpa_dict(FIX / f"kenlm-{order}.arpa.gz"))


def test_words_split_on_ascii_whitespace_only_bom_kept_as_lmplz(tmp_path):
    """No-break space and U+3000 stay inside words, a vertical tab too (lmplz splits on NUL, tab, CR,
    LF, space only); the BOM stays in the first word; an empty line is the sentence <s> </s>."""
    out = tmp_path / "tiny.arpa"
    warnings = []
    train_ngram([str(FIX / "tiny.txt")], str(out), order=3, warn=warnings.append)
    mine, ref = arpa_dict(out), arpa_dict(FIX / "tiny-3.arpa")
    assert_same_arpa(mine, ref)
    assert ("cat\u00a0ran",) in mine and ("d\u3000e",) in mine and ("a\x0bb",) in mine
    assert ("\ufeffthe",) in mine and ("<s>", "</s>") in mine
    assert any("fallback" in w for w in warnings)       # tiny data: lmplz needs --discount_fallback


def test_crlf_and_bom_corpus_counts_like_lmplz(nlpkit_arpas):
    """train.txt is Gutenberg as distributed: BOM, CRLF line ends (CR is a delimiter for lmplz)."""
    data = (FIX / "train.txt").read_bytes()
    assert data.startswith(b"\xef\xbb\xbf") and b"\r\n" in data
    assert any(k[0].startswith("\ufeff") for k in arpa_dict(nlpkit_arpas[2]) if len(k) == 1)


def test_discounts_follow_counts_of_counts():
    from nlpkit.lm.ngram.kneser_ney import discounts_from

    n = [0, 100, 40, 20, 10]
    y = 100 / (100 + 2 * 40)
    want = [1 - 2 * y * 40 / 100, 2 - 3 * y * 20 / 40, 3 - 4 * y * 10 / 20]
    assert discounts_from(n) == pytest.approx(want, rel=1e-6)
    assert discounts_from([0, 5, 0, 1, 1]) is None                    # n2 = 0: lmplz refuses


# ------------------------------------------------------------------------- scoring = query

def _check_against_query(model_path, ref: dict) -> None:
    model = load_ngram_model(model_path)
    scores = list(score_lines(model, heldout_lines()))
    words = [w for s in scores for w in s.words]
    assert words == QUERY["heldout_words"]
    log10 = np.concatenate([s.log10 for s in scores])
    np.testing.assert_allclose(log10, ref["log10"], atol=1e-5, rtol=0)
    assert np.concatenate([s.ngram for s in scores]).tolist() == ref["ngram"]
    oov = np.concatenate([s.oov for s in scores])
    assert oov.tolist() == [i == 0 for i in ref["ids"]]
    np.testing.assert_allclose([float(s.log10.sum()) for s in scores], ref["line_total"], atol=1e-4, rtol=0)
    total = NgramPerplexity()
    for s in scores:
        total.add(s)
    assert total.tokens == ref["tokens"] and total.oov == ref["oov"]
    assert total.perplexity == pytest.approx(ref["ppl"], rel=1e-5)
    assert total.perplexity_no_oov == pytest.approx(ref["ppl_no_oov"], rel=1e-5)


@pytest.mark.parametrize("order", ORDERS)
def test_perplexity_on_kenlm_arpa_equals_query(order):
    _check_against_query(FIX / f"kenlm-{order}.arpa.gz", QUERY[f"kenlm-{order}"])


@pytest.mark.parametrize("order", ORDERS)
def test_kenlm_query_scores_nlpkit_arpa_identically(nlpkit_arpas, order):
    """query.json holds KenLM query's scores of nlpkit's own ARPA (tools script): nlpkit agrees."""
    _check_against_query(nlpkit_arpas[order], QUERY[f"nlpkit-{order}"])
    np.testing.assert_allclose(QUERY[f"nlpkit-{order}"]["log10"], QUERY[f"kenlm-{order}"]["log10"], atol=1e-5)


def test_query_word_split():
    assert query_words("a\u00a0b  c\td\x0be\r") == ["a\u00a0b", "c", "d", "e"]


def test_next_word_distribution_sums_to_one_and_matches_scores():
    model = load_ngram_model(FIX / "kenlm-3.arpa.gz")
    hist = [model.bos_id, model.word_id["of"]]
    dist = model.next_log10(hist)
    p = 10.0 ** dist
    p[model.bos_id] = 0.0
    assert p.sum() == pytest.approx(1.0, abs=1e-4)
    s = next(iter(score_lines(model, ["of the"])))
    assert dist[model.word_id["the"]] == pytest.approx(s.log10[1], abs=1e-6)


# ------------------------------------------------------------------------- ARPA files

SRILM = """
\\data\\
ngram 1=4
ngram 2=3

\\1-grams:
-1.0\t</s>
-99\t<s>\t-0.5
-0.5\ta\t-0.25
-0.7\tb

\\2-grams:
-0.2\t<s> a
-0.3\ta b
-0.4\ta </s>

\\end\\
"""


def test_srilm_arpa_missing_backoffs_minus_99_and_no_unk(tmp_path):
    p = tmp_path / "srilm.arpa.gz"
    with gzip.open(p, "wt") as f:
        f.write(SRILM)
    warned = []
    model = load_ngram_model(p, warn=warned.append)
    assert any("<unk>" in w for w in warned)
    s = next(iter(score_lines(model, ["a b b c"])))
    # a|<s> = -0.2; b|a = -0.3; b|b: no bigram, b has no backoff (0) -> p(b) = -0.7;
    # c: OOV -> <unk> -100 (KenLM's substitute) + backoff(b) = 0; </s>|c: unigram -1.0
    assert s.log10.tolist() == pytest.approx([-0.2, -0.3, -0.7, -100.0, -1.0])
    assert s.ngram.tolist() == [2, 2, 1, 1, 1]
    s = next(iter(score_lines(model, ["b a"])))
    # b|<s>: backoff(<s>) -0.5 + p(b) -0.7; a|b: b has no backoff -> -0.5; </s>|a = -0.4
    assert s.log10.tolist() == pytest.approx([-1.2, -0.5, -0.4])


def _arpa_error(tmp_path, text: str) -> str:
    p = tmp_path / "bad.arpa"
    p.write_text(text)
    with pytest.raises(NlpkitError) as e:
        load_ngram_model(p)
    return str(e.value)


def test_malformed_arpa_count_mismatch(tmp_path):
    msg = _arpa_error(tmp_path, SRILM.replace("ngram 2=3", "ngram 2=4"))
    assert "bad.arpa, line 12" in msg and "has 3 entries" in msg and "line 4 declares 4" in msg


def test_malformed_arpa_bad_line(tmp_path):
    msg = _arpa_error(tmp_path, SRILM.replace("-0.3\ta b", "-0.3\ta b c d"))
    assert "bad.arpa, line 14" in msg and "log10-probability words [backoff]" in msg
    msg = _arpa_error(tmp_path, SRILM.replace("-0.3\ta b", "x\ta b"))
    assert "bad.arpa, line 14" in msg and "log10 probability" in msg


def test_malformed_arpa_order_gap(tmp_path):
    msg = _arpa_error(tmp_path, SRILM.replace("ngram 2=3", "ngram 3=3"))
    assert "bad.arpa, line 4" in msg and "without a gap" in msg


def test_malformed_arpa_missing_prefix_and_repeated_ngram(tmp_path):
    """A 3-gram whose 2-gram prefix is not in the model (found by walking the orders), and a 2-gram
    written twice: errors with the file's line."""
    arpa = ("\\data\\\nngram 1=4\nngram 2=2\nngram 3=2\n\n\\1-grams:\n-1\t<unk>\n-99\t<s>\t-0.5\n"
            "-1\t</s>\n-1\ta\t-0.2\n\n\\2-grams:\n-0.2\t<s> a\t-0.1\n-0.3\ta </s>\n\n"
            "\\3-grams:\n-0.1\t<s> a </s>\n-0.1\ta a </s>\n\n\\end\\\n")
    good = tmp_path / "good.arpa"
    good.write_text(arpa.replace("-0.1\ta a </s>", "-0.1\t<s> a a"))
    assert load_ngram_model(good).order == 3
    msg = _arpa_error(tmp_path, arpa)
    assert "bad.arpa, line 18" in msg and "'a a </s>'" in msg and "no 2-gram 'a a'" in msg
    msg = _arpa_error(tmp_path, arpa.replace("-0.3\ta </s>", "-0.3\t<s> a").replace("-0.1\ta a </s>", "-0.1\t<s> a a"))
    assert "bad.arpa, line 14" in msg and "'<s> a' appears twice" in msg


def test_malformed_arpa_unknown_word_and_not_arpa(tmp_path):
    msg = _arpa_error(tmp_path, SRILM.replace("-0.3\ta b", "-0.3\ta zzz"))
    assert "line 14" in msg and "'zzz'" in msg
    assert "no \\data\\" in _arpa_error(tmp_path, "hello\n")


def test_nlpkit_arpa_records_options_as_comments(nlpkit_arpas):
    head = nlpkit_arpas[2].read_text(encoding="utf-8").split("\\data\\")[0]
    assert "# nlpkit: order=2" in head and "# nlpkit: smoothing=kneser-ney" in head
    assert all(line.startswith("#") for line in head.strip().split("\n"))      # KenLM skips '#' lines


def test_order_below_one_and_empty_corpus(tmp_path):
    with pytest.raises(UsageError, match="`order` must be at least 1"):
        train_ngram([str(FIX / "tiny.txt")], str(tmp_path / "x.arpa"), order=0)
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    with pytest.raises(NlpkitError, match="empty.txt: empty corpus"):
        train_ngram([str(empty)], str(tmp_path / "x.arpa"), order=2)


# ------------------------------------------------------------------------- MLE and add-k

# Jurafsky & Martin's corpus: every bigram count written out.
JM = "I am Sam\nSam I am\nI do not like green eggs and ham\n"
# C(<s> I)=2 C(<s> Sam)=1 C(I am)=2 C(I do)=1 C(am Sam)=1 C(am </s>)=1 C(Sam </s>)=1 C(Sam I)=1
# C(do not)=1 C(not like)=1 C(like green)=1 C(green eggs)=1 C(eggs and)=1 C(and ham)=1 C(ham </s>)=1
# contexts: C(<s> .)=3 C(I .)=3 C(am .)=2 C(Sam .)=2; |V| = 10 words + <s> + </s> + <unk> = 13


def _bigram(tmp_path, smoothing, k=1.0):
    corpus = tmp_path / "jm.txt"
    corpus.write_text(JM)
    out = tmp_path / f"jm-{smoothing}.ngram"
    train_ngram([str(corpus)], str(out), order=2, smoothing=smoothing, k=k)
    return load_ngram_model(out)


def test_mle_bigram_textbook(tmp_path):
    model = _bigram(tmp_path, "mle")
    s = next(iter(score_lines(model, ["I am Sam"])))
    want = [2 / 3, 2 / 3, 1 / 2, 1 / 2]                      # I|<s>, am|I, Sam|am, </s>|Sam
    assert (10.0 ** s.log10).tolist() == pytest.approx(want)
    s = next(iter(score_lines(model, ["Sam am"])))            # am|Sam never seen: probability 0
    assert (10.0 ** s.log10).tolist() == pytest.approx([1 / 3, 0.0, 1 / 2])
    total = NgramPerplexity()
    total.add(s)
    assert total.zero_prob == 1 and total.perplexity == math.inf


def test_mle_zero_probability_count(tmp_path):
    model = _bigram(tmp_path, "mle")
    total = NgramPerplexity()
    for s in score_lines(model, ["Sam am", "I like ham"]):
        total.add(s)
    # Sam am </s>: am|Sam = 0, </s>|am = 1/2;  I like ham </s>: like|I = 0, ham|like = 0, </s>|ham = 1
    assert total.zero_prob == 3 and total.perplexity == math.inf


def test_add_one_bigram_textbook(tmp_path):
    model = _bigram(tmp_path, "add-k", 1.0)
    assert model.vocab_size == 13
    s = next(iter(score_lines(model, ["I am Sam", "Sam am"])))
    want = [(2 + 1) / (3 + 13), (2 + 1) / (3 + 13), (1 + 1) / (2 + 13), (1 + 1) / (2 + 13)]
    assert (10.0 ** s.log10).tolist() == pytest.approx(want)
    model = _bigram(tmp_path, "add-k", 0.5)
    s = next(iter(score_lines(model, ["Sam am"])))
    assert 10.0 ** s.log10[1] == pytest.approx((0 + 0.5) / (2 + 0.5 * 13))


def _nltk_pairs():
    train = [line.split() for line in (FIX / "train.txt").read_text(encoding="utf-8-sig").splitlines()]
    held = [line.split() for line in heldout_lines()]
    return train, held


@pytest.mark.parametrize("smoothing", ["mle", "add-k"])
def test_bigram_equals_nltk(tmp_path, smoothing):
    nltk_lm = pytest.importorskip("nltk.lm")
    from nltk.lm.preprocessing import padded_everygram_pipeline

    train, held = _nltk_pairs()
    text = tmp_path / "train.txt"
    text.write_text("\n".join(" ".join(s) for s in train) + "\n", encoding="utf-8")
    out = tmp_path / "m.ngram"
    train_ngram([str(text)], str(out), order=2, smoothing=smoothing, k=1.0)
    model = load_ngram_model(out)
    ref = (nltk_lm.MLE if smoothing == "mle" else nltk_lm.Laplace)(2)
    ngrams, vocab = padded_everygram_pipeline(2, train)
    ref.fit(ngrams, vocab)
    assert len(ref.vocab) == model.vocab_size
    mine = [10.0 ** lp for s in score_lines(model, [" ".join(h) for h in held]) for lp in s.log10]
    theirs = [ref.score(w, [prev]) for h in held for prev, w in zip(["<s>"] + h, h + ["</s>"])]
    np.testing.assert_allclose(mine, theirs, rtol=1e-9, atol=0)
    assert any(p == 0 for p in theirs) == (smoothing == "mle")


# ------------------------------------------------------------------------- vectorized reading and writing

def test_hash_index_and_token_hashes():
    from nlpkit.lm.ngram.hashing import HashIndex, hash_tokens, words8

    keys = np.array([7, 9, 2**63 + 5, 123456789], dtype=np.uint64)
    assert HashIndex(keys).find(np.array([9, 8, 2**63 + 5, 7], dtype=np.uint64)).tolist() == [1, -1, 2, 0]
    text = b"ab abcdefghijk ab abcdefghijkl"
    buf = np.frombuffer(text, dtype=np.uint8)
    h = hash_tokens(words8(buf), np.array([0, 3, 15, 18]), np.array([2, 11, 2, 12]))
    assert h[0] == h[2] and len(set(h.tolist())) == 3       # same bytes, same hash; 9+ bytes hashed whole


def test_float_format_is_the_shortest_round_trip_of_7_8_9_digits():
    from nlpkit.lm.ngram.arpa import _format_floats

    def reference(v):                      # what lmplz prints: shortest of %.7g/%.8g/%.9g reading back
        for d in (7, 8, 9):
            t = f"%.{d}g" % float(v)
            if np.float32(float(t)) == v:
                return t
        return t

    rng = np.random.default_rng(0)
    x = np.concatenate([np.array([0, -0.0, -99, -100, 1, -1.5e-5, 9.9999999, 999.99994, -np.inf, 12345.678]),
                        -rng.random(5000) * 12, -(10 ** rng.uniform(-6, 3, 5000))]).astype(np.float32)
    s = _format_floats(x)
    got = [bytes(s.pool[a:a + n]).decode() for a, n in zip(s.starts.tolist(), s.lens.tolist())]
    assert got == [reference(v) for v in x]


def test_arpa_reading_survives_hash_collisions(tmp_path, monkeypatch, nlpkit_arpas):
    """Every long word hashing alike sends the reader to its exact fallback (a dict): same model.
    (n-grams are found by exact integer keys: nothing to collide.)"""
    import nlpkit.lm.ngram.lookup as lookup

    want = load_ngram_model(nlpkit_arpas[3])
    assert sum(len(w.encode()) > 8 for w in want.vocab) >= 2            # long words: keyed by their hash
    monkeypatch.setattr(lookup, "hash_tokens", lambda w8, starts, lens: np.zeros(len(starts), dtype=np.uint64))
    got = load_ngram_model(nlpkit_arpas[3])
    assert got.vocab == want.vocab
    for k in range(3):
        assert np.array_equal(got.keys[k], want.keys[k])
        assert np.array_equal(got.logprob[k], want.logprob[k]) and np.array_equal(got.backoff[k], want.backoff[k])


def test_arpa_crlf_and_section_order_do_not_matter(tmp_path, nlpkit_arpas):
    """A CRLF copy with the bigrams in reverse order loads to the same arrays."""
    text = nlpkit_arpas[2].read_text(encoding="utf-8")
    head, rest = text.split("\\2-grams:\n")
    body, tail = rest.split("\n\n", 1)
    flipped = head + "\\2-grams:\n" + "\n".join(body.split("\n")[::-1]) + "\n\n" + tail
    p = tmp_path / "crlf.arpa"
    p.write_bytes(flipped.replace("\n", "\r\n").encode("utf-8"))
    a, b = load_ngram_model(nlpkit_arpas[2]), load_ngram_model(p)
    assert a.vocab == b.vocab
    assert all(np.array_equal(x, y) for x, y in zip(a.keys + a.logprob + a.backoff, b.keys + b.logprob + b.backoff))


def test_malformed_arpa_stray_line_after_a_blank(tmp_path):
    msg = _arpa_error(tmp_path, SRILM.replace("-0.4\ta </s>\n", "-0.4\ta </s>\n\n-0.5\tb a\n"))
    assert "bad.arpa, line 17" in msg and "after the 3 entries" in msg, msg


def test_arpa_last_value_short_at_the_end_of_the_file(tmp_path):
    """Floats of different widths in one column, the last one short and the file without \\end\\'s newline."""
    p = tmp_path / "short.arpa"
    p.write_text("\\data\\\nngram 1=3\n\n\\1-grams:\n-1.234567891\t<s>\t-0.123456789\n-0.5\t</s>\n-1\ta\t-1\n\n\\end\\")
    m = load_ngram_model(p)
    assert m.backoff[0][:3].tolist() == pytest.approx([-0.123456789, 0.0, -1.0])
    assert m.logprob[0][:3].tolist() == pytest.approx([-1.234567891, -0.5, -1.0])


def test_arpa_sections_parsed_in_chunks(tmp_path, monkeypatch, nlpkit_arpas):
    """Tiny chunks (cut at line ends) give the same model, and errors keep their file lines."""
    import nlpkit.lm.ngram.arpa as arpa

    want = load_ngram_model(nlpkit_arpas[3])
    monkeypatch.setattr(arpa, "CHUNK_BYTES", 40)
    got = load_ngram_model(nlpkit_arpas[3])
    assert got.vocab == want.vocab
    assert all(np.array_equal(x, y) for x, y in zip(got.keys + got.logprob + got.backoff,
                                                    want.keys + want.logprob + want.backoff))
    msg = _arpa_error(tmp_path, SRILM.replace("-0.4\ta </s>", "x\ta </s>"))
    assert "bad.arpa, line 15" in msg and "log10 probability" in msg
    msg = _arpa_error(tmp_path, SRILM.replace("-0.4\ta </s>", "-0.4\ta zzz"))
    assert "bad.arpa, line 15" in msg and "'zzz'" in msg


# ------------------------------------------------------------------------- vectorized scoring

def _unigram_model(words: list[str]):
    """An order-1 ARPA model over `words` (+ <s>, </s>, <unk>): enough to look words up."""
    from nlpkit.lm.ngram.ngram_model import NgramModel

    vocab = ["<unk>", "<s>", "</s>", *dict.fromkeys(w for w in words if w not in ("<unk>", "<s>", "</s>"))]
    V = len(vocab)
    return NgramModel(kind="arpa", vocab=vocab, keys=[np.arange(V)], logprob=[np.full(V, -1.0, np.float32)],
                      backoff=[np.zeros(V, np.float32)])


def _dict_ids(model, lines):
    """What query does, a word at a time: split on its six ASCII separators, look each word up."""
    words = [w for line in lines for w in query_words(line)]
    ids = [model.word_id.get(w, -1) for w in words]
    return [i if i >= 0 else model.unk_id for i in ids], [i < 0 for i in ids], [len(query_words(x)) for x in lines]


_PIECES = ["a", "ab", "abcdefgh", "abcdefghi", "abcdefghijklmnopq", "é", "😀", "\u00a0", "\u3000", "\ufeff",
           "\x1c", "\x85", "\udcff", "\x00", " ", "  ", "\t", "\r", "\x0b", "\x0c", "x" * 30]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.sampled_from(_PIECES), max_size=12).map("".join), min_size=1, max_size=8),
       st.lists(st.lists(st.sampled_from(_PIECES[:14]), min_size=1, max_size=4).map("".join), max_size=10))
def test_batch_word_ids_equal_a_dict_lookup_per_word(lines, vocab):
    """The numpy word lookup (UTF-8 bytes split on query's separators, hashed, checked byte for byte)
    gives the ids a dict gives: a no-break space, U+3000, a BOM, U+001C and U+0085 stay inside words
    (str.split would split on some), NUL, long words and lone surrogates included."""
    from nlpkit.lm.ngram.line_scoring import _batch_ids

    model = _unigram_model(vocab + [w for line in lines[:1] for w in query_words(line)])
    ids, oov, lengths = _batch_ids(model, lines)
    want_ids, want_oov, want_lengths = _dict_ids(model, lines)
    assert ids.tolist() == want_ids and oov.tolist() == want_oov and lengths.tolist() == want_lengths
    scored = list(score_lines(model, lines))                          # and the words each line reports
    assert [s.words for s in scored] == [query_words(line) + ["</s>"] for line in lines]
    assert [s.bytes for s in scored] == [len(line.encode("utf-8", "surrogatepass")) + 1 for line in lines]


def test_word_lookup_compares_bytes_not_only_hashes(monkeypatch):
    """Long words that share a hash (forced: the hash is the length) are told apart by their bytes, in
    the first eight bytes and after them; short words are keyed by their bytes."""
    import nlpkit.lm.ngram.lookup as lookup
    from nlpkit.lm.ngram.line_scoring import _batch_ids

    monkeypatch.setattr(lookup, "hash_tokens", lambda w8, starts, lens: lens.astype(np.uint64))
    model = _unigram_model(["abcdef", "abcdefghij", "ab", "abcdefghijklmnopqrstu"])
    assert model.word_index() is not None
    ids, oov, _ = _batch_ids(model, ["abcdef xyzxyz abcdefghij Xbcdefghij abcdefghiX ab zz ab\x00 "
                                     "abcdefghijklmnopqrstu abcdefghijklmnopqrstX"])
    assert [model.vocab[i] for i in ids] == ["abcdef", "<unk>", "abcdefghij", "<unk>", "<unk>", "ab", "<unk>",
                                             "<unk>", "abcdefghijklmnopqrstu", "<unk>"]


def test_vocabulary_hash_collision_falls_back_to_a_dict(monkeypatch):
    import nlpkit.lm.ngram.lookup as lookup
    from nlpkit.lm.ngram.line_scoring import _batch_ids

    monkeypatch.setattr(lookup, "hash_tokens", lambda w8, starts, lens: np.zeros(len(starts), np.uint64))
    model = _unigram_model(["abcdefghi", "defghijkl", "de"])       # two long words, one hash
    assert model.word_index() is None
    lines = ["abcdefghi x", "de defghijkl", "a\nde"]
    ids, oov, lengths = _batch_ids(model, lines)
    assert (ids.tolist(), oov.tolist(), lengths.tolist()) == tuple(_dict_ids(model, lines))


@pytest.mark.parametrize("load", [0.5, 0.125])
def test_hash_index_finds_what_a_dict_finds(load):
    from nlpkit.lm.ngram.hashing import HashIndex

    rng = np.random.default_rng(load.as_integer_ratio()[1])
    keys = np.unique(rng.integers(0, 1 << 20, 5000))              # int64 keys, dense: long probe runs
    index = HashIndex(keys, load=load)
    q = rng.integers(0, 1 << 20, 20000)
    where = {k: i for i, k in enumerate(keys.tolist())}
    assert index.find(q).tolist() == [where.get(k, -1) for k in q.tolist()]


def test_hash_index_finds_keys_past_runs_longer_than_its_probe_window():
    """A table 98% full: runs of taken slots far longer than the 64 slots probed at once at the end."""
    from nlpkit.lm.ngram.hashing import HashIndex

    rng = np.random.default_rng(7)
    keys = rng.choice(1 << 40, 4014, replace=False).astype(np.uint64)
    index = HashIndex(keys, load=0.99)
    assert len(index.vals) == 4096
    q = np.concatenate([keys, rng.integers(0, 1 << 40, 4000).astype(np.uint64)])
    where = {k: i for i, k in enumerate(keys.tolist())}
    assert index.find(q).tolist() == [where.get(k, -1) for k in q.tolist()]


@pytest.mark.parametrize("smoothing", ["kneser-ney", "mle"])
def test_line_totals_equal_each_line_score_added(tmp_path, smoothing):
    """perplexity --per-line sums each line over the batch at once: the same totals as a LineScore a
    line (OOVs, an MLE model's zero probabilities, non-ASCII bytes)."""
    from nlpkit.lm.ngram.line_scoring import score_batches

    model_path = tmp_path / "m.arpa"
    train_ngram([str(FIX / "train.txt")], str(model_path), order=3, smoothing=smoothing)
    model = load_ngram_model(model_path)
    lines = heldout_lines()[:200] + ["", "naïve café zzzunseen", "  "]
    for batch in score_batches(model, lines):
        for got, s in zip(batch.line_totals(), batch.lines(), strict=True):
            want = NgramPerplexity()
            want.add(s)
            assert (got.tokens, got.oov, got.zero_prob, got.bytes, got.words) == \
                   (want.tokens, want.oov, want.zero_prob, want.bytes, want.words)
            assert got.log10_total == pytest.approx(want.log10_total, rel=1e-12, abs=1e-9) or \
                   got.log10_total == want.log10_total
            assert got.log10_oov == pytest.approx(want.log10_oov, rel=1e-12, abs=1e-9) or \
                   got.log10_oov == want.log10_oov


@pytest.mark.parametrize("smoothing", ["kneser-ney", "mle"])
def test_an_order_without_ngrams_is_written_read_and_scored(tmp_path, smoothing):
    """Order 5 on lines of two words: the file declares `ngram 5=0` and an empty section; it loads,
    and a 5-gram lookup finds nothing (no error), as a model with no 5-grams should."""
    corpus = tmp_path / "c.txt"
    corpus.write_text("a b\nb a\n")
    path = tmp_path / ("m.arpa" if smoothing == "kneser-ney" else "m.ngram")
    train_ngram([str(corpus)], str(path), order=5, smoothing=smoothing)
    assert "ngram 5=0" in path.read_text()
    model = load_ngram_model(path)
    assert model.order == 5 and len(model.keys[4]) == 0
    s = list(score_lines(model, ["a b", "b b b"]))
    if smoothing == "kneser-ney":
        assert [int(x.ngram.max()) for x in s] == [4, 2]     # the longest n-grams the model has
    assert np.isfinite(s[0].log10).all()
    assert np.isfinite(s[1].log10).all() == (smoothing == "kneser-ney")   # MLE: "b b" was never seen


def test_malformed_arpa_nan_or_positive_log10_probability(tmp_path):
    """KenLM's query refuses both ("Could not parse nan", "Positive log probability"); -inf (p = 0) reads."""
    msg = _arpa_error(tmp_path, SRILM.replace("-0.3\ta b", "nan\ta b"))
    assert "bad.arpa, line 14" in msg and "'nan'" in msg
    msg = _arpa_error(tmp_path, SRILM.replace("-0.7\tb", "0.5\tb"))
    assert "bad.arpa, line 10" in msg and "0 or less" in msg
    msg = _arpa_error(tmp_path, SRILM.replace("-0.5\ta\t-0.25", "-0.5\ta\tnan"))
    assert "bad.arpa, line 9" in msg and "backoff" in msg
    p = tmp_path / "ok.arpa"
    p.write_text(SRILM.replace("-0.7\tb", "-inf\tb"))
    assert load_ngram_model(p).logprob[0][3] == -np.inf


@pytest.mark.parametrize("edit, where, why", [
    (("smoothing=mle", "smoothing=bogus"), "smoothing", "expected mle or add-k"),
    (("order=2", "order=5"), "order", "up to order 2"),
    (("format=1", "format=9"), "format", "reads format 1"),
    (("lowercase=false", "lowercase=maybe"), "lowercase", "true or false"),
])
def test_counts_file_options_checked_against_the_file(tmp_path, edit, where, why):
    corpus = tmp_path / "c.txt"
    corpus.write_text("a b c\nb c d\n")
    train_ngram([str(corpus)], str(tmp_path / "m.ngram"), order=2, smoothing="mle")
    text = (tmp_path / "m.ngram").read_text()
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if ln.startswith(f"# nlpkit: {where}="))
    (tmp_path / "bad.ngram").write_text(text.replace(*edit))
    with pytest.raises(NlpkitError) as e:
        load_ngram_model(tmp_path / "bad.ngram")
    assert f"bad.ngram, line {line}:" in str(e.value) and why in str(e.value)


def test_add_k_file_needs_a_positive_k(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("a b c\nb c d\n")
    train_ngram([str(corpus)], str(tmp_path / "m.ngram"), order=2, smoothing="add-k", k=0.5)
    text = (tmp_path / "m.ngram").read_text()
    for bad in ("k=-1", "k=0", "k=nan", "k=x"):
        (tmp_path / "bad.ngram").write_text(text.replace("k=0.5", bad))
        with pytest.raises(NlpkitError, match="add-k needs a k above 0"):
            load_ngram_model(tmp_path / "bad.ngram")


def test_mle_perplexity_without_oovs_is_inf_not_nan(tmp_path):
    """An MLE model gives an OOV and an unseen bigram probability 0: both perplexities are infinite
    (subtracting the OOVs' -inf from the total's -inf gave NaN)."""
    corpus = tmp_path / "c.txt"
    corpus.write_text("a b c\nb c d\n")
    train_ngram([str(corpus)], str(tmp_path / "m.ngram"), order=2, smoothing="mle")
    model = load_ngram_model(tmp_path / "m.ngram")
    total = NgramPerplexity()
    for s in score_lines(model, ["a zzz"]):
        total.add(s)
    assert (total.oov, total.zero_prob) == (1, 2)
    assert total.perplexity == math.inf and total.perplexity_no_oov == math.inf
    line = next(b for b in __import__("nlpkit.lm.ngram.line_scoring", fromlist=["x"]).score_batches(model, ["a zzz"]))
    assert line.line_totals()[0].perplexity_no_oov == math.inf
    known = NgramPerplexity()
    for s in score_lines(model, ["a b c"]):
        known.add(s)
    assert known.perplexity_no_oov == pytest.approx(known.perplexity)     # no OOV: the same figure


def test_mle_sampling_backs_off_from_an_unseen_history_as_nltk(tmp_path):
    """NLTK's generate drops the oldest word of a history the model never saw; from an unseen word an
    MLE bigram draws from the unigram distribution (NLTK's MLE unigram scores without <s>, renormalised),
    never <unk> or NaN."""
    from nltk.lm import MLE
    from nltk.lm.preprocessing import padded_everygram_pipeline

    from nlpkit.lm.generation import next_token_distribution
    from nlpkit.lm.ngram.ngram_lm import NgramLM
    from nlpkit.lm.generation.sampling import SamplingConfig

    sents = ["I am Sam", "Sam I am", "I do not like green eggs and ham"]
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(sents) + "\n")
    train_ngram([str(corpus)], str(tmp_path / "m.ngram"), order=2, smoothing="mle")
    lm = NgramLM(load_ngram_model(tmp_path / "m.ngram"))
    dist = dict((lm.token_text(i), p) for i, p in next_token_distribution(lm, lm.prompt("qqzz"), SamplingConfig()))
    train, vocab = padded_everygram_pipeline(2, [s.split() for s in sents])
    ref = MLE(2)
    ref.fit(train, vocab)
    want = {w: ref.score(w) for w in ref.vocab if w not in ("<s>", "<UNK>") and ref.score(w) > 0}
    norm = sum(want.values())
    assert dist.keys() == want.keys()
    assert all(dist[w] == pytest.approx(want[w] / norm, rel=1e-6) for w in want)
