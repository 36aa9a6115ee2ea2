"""Edit distances, batch kernels, dictionary search and alignments against rapidfuzz."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

rapidfuzz = pytest.importorskip("rapidfuzz")
from rapidfuzz import process  # noqa: E402
from rapidfuzz.distance import OSA, DamerauLevenshtein, Hamming, Indel, LCSseq, Levenshtein  # noqa: E402

import nlpkit.edit.batch as bd  # noqa: E402
import nlpkit.edit.bitparallel as bp  # noqa: E402
from nlpkit.edit import distance as nd  # noqa: E402
from nlpkit.edit.align import aligned_view, alignment, apply, cost, editops  # noqa: E402
from nlpkit.errors import NlpkitError, UsageError  # noqa: E402
from nlpkit.edit.spell import Dictionary, load_dictionary, nearest  # noqa: E402

REFERENCE = {"levenshtein": Levenshtein, "osa": OSA, "damerau": DamerauLevenshtein,
             "indel": Indel, "hamming": Hamming, "lcs": LCSseq}

# Small alphabets make matches (and transpositions) likely; the full range covers Unicode.
chars = st.one_of(st.text("abcé中", max_size=12), st.text(max_size=12),
                  st.text("ab", min_size=60, max_size=140))
words = st.lists(st.sampled_from(["the", "a", "cat", "sat", "on", "mat", "Mat", "über"]), max_size=10)
weights = st.tuples(*[st.integers(0, 5)] * 3)


def pairwise(*args, **kw):
    """`pairwise_distances` forced through the numpy kernels even for tiny batches
    (which normally take the Python-int path), checked equal to the default path."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bd, "NUMPY_MIN_GROUP", 1)
        got = bd.pairwise_distances(*args, **kw)
    assert got.tolist() == bd.pairwise_distances(*args, **kw).tolist()
    return got


def expected(a, b, metric, normalize=False, w=None):
    ref = REFERENCE[metric]
    kw = {"weights": w} if w is not None else {}
    return ref.normalized_distance(a, b, **kw) if normalize else ref.distance(a, b, **kw)


# ------------------------------------------------------------------------- scalar

def test_textbook_values():
    assert nd.levenshtein("kitten", "sitting") == 3
    assert nd.osa("CA", "ABC") == 3
    assert nd.damerau_levenshtein("CA", "ABC") == 2
    assert nd.indel("kitten", "sitting") == 5
    assert nd.lcs_seq("kitten", "sitting") == 3
    assert nd.hamming("karolin", "kathrin") == 3
    assert nd.hamming("abc", "abcde") == 2


@settings(max_examples=150, deadline=None)
@given(chars, chars)
def test_every_metric_matches_rapidfuzz_on_unicode_strings(a, b):
    for metric in REFERENCE:
        assert nd.distance(a, b, metric) == expected(a, b, metric)
        assert nd.normalized_distance(a, b, metric) == expected(a, b, metric, normalize=True)


@settings(max_examples=150, deadline=None)
@given(words, words)
def test_every_metric_matches_rapidfuzz_on_word_sequences(a, b):
    for metric in REFERENCE:
        assert nd.distance(a, b, metric) == expected(a, b, metric)
        assert nd.normalized_distance(a, b, metric) == expected(a, b, metric, normalize=True)


@settings(max_examples=150, deadline=None)
@given(st.one_of(chars, words), st.one_of(chars, words), weights)
def test_weighted_levenshtein_and_its_normalization_match_rapidfuzz(a, b, w):
    if isinstance(a, str) != isinstance(b, str):
        b = list(b) if isinstance(a, list) else "".join(b)
    assert nd.levenshtein(a, b, w) == Levenshtein.distance(a, b, weights=w)
    assert nd.normalized_distance(a, b, "levenshtein", w) == Levenshtein.normalized_distance(a, b, weights=w)


def test_weights_on_other_metrics_and_bad_weights_are_usage_errors():
    with pytest.raises(UsageError):
        nd.distance("a", "b", "osa", (1, 1, 2))
    with pytest.raises(UsageError):
        nd.levenshtein("a", "b", (1, -1, 1))
    with pytest.raises(UsageError):
        nd.distance("a", "b", "jaro")
    with pytest.raises(NlpkitError):
        nd.hamming("ab", "abc", pad=False)


def test_misspelling_pairs_match_rapidfuzz(shared_data):
    pairs = []
    for name in ("spell-testset1.txt", "spell-testset2.txt"):
        for line in (shared_data / "spelling" / name).read_text().splitlines():
            right, wrong = line.split(":")
            pairs += [(w, right) for w in wrong.split()]
    for line in (shared_data / "spelling" / "spell-errors.txt").read_text().splitlines()[:1500]:
        right, wrongs = line.split(":")
        pairs += [(w.strip().split("*")[0], right) for w in wrongs.split(",") if w.strip()]
    a, b = [p[0] for p in pairs], [p[1] for p in pairs]
    for metric in REFERENCE:
        exp = [expected(x, y, metric) for x, y in pairs]
        assert [nd.distance(x, y, metric) for x, y in pairs] == exp
        assert bd.pairwise_distances(a, b, metric).tolist() == exp
        expn = [expected(x, y, metric, normalize=True) for x, y in pairs]
        assert bd.pairwise_distances(a, b, metric, normalize=True).tolist() == expn
    w = (1, 2, 3)
    assert bd.pairwise_distances(a, b, "levenshtein", w).tolist() == \
        [Levenshtein.distance(x, y, weights=w) for x, y in pairs]


# -------------------------------------------------------------------------- batch

@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(chars, chars), min_size=1, max_size=30))
def test_batch_kernels_match_rapidfuzz_pair_for_pair(pairs):
    a, b = [p[0] for p in pairs], [p[1] for p in pairs]
    for metric in REFERENCE:
        assert pairwise(a, b, metric).tolist() == [expected(x, y, metric) for x, y in pairs]
        assert pairwise(a, b, metric, normalize=True).tolist() == \
            [expected(x, y, metric, normalize=True) for x, y in pairs]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(words, words), min_size=1, max_size=30), weights)
def test_batch_word_level_and_weights_match_rapidfuzz(pairs, w):
    a, b = [p[0] for p in pairs], [p[1] for p in pairs]
    for metric in REFERENCE:
        assert pairwise(a, b, metric).tolist() == [expected(x, y, metric) for x, y in pairs]
    assert pairwise(a, b, "levenshtein", w).tolist() == \
        [Levenshtein.distance(x, y, weights=w) for x, y in pairs]
    assert pairwise(a, b, "levenshtein", w, normalize=True).tolist() == \
        [Levenshtein.normalized_distance(x, y, weights=w) for x, y in pairs]


def test_batch_handles_multiword_patterns_and_long_lines():
    import random

    rng = random.Random(7)
    a = ["".join(rng.choice("abc ") for _ in range(rng.randint(0, 300))) for _ in range(120)]
    b = [x[5:] + "abc" if i % 2 else "".join(rng.choice("abc ") for _ in range(len(x)))
         for i, x in enumerate(a)]
    for metric in ("levenshtein", "osa", "indel", "lcs"):
        assert pairwise(a, b, metric, budget=5000).tolist() == \
            [expected(x, y, metric) for x, y in zip(a, b)]


# --------------------------------------------------------------------- dictionary

def test_textbook_dictionary_carr_gives_car_first():
    d = Dictionary.from_entries(["cat", "car", "cart", "care", "cards", "cast"])
    first = nearest(d, "carr")[0]
    assert (first.word, first.distance) == ("car", 1)
    assert [(m.word, m.distance) for m in nearest(d, "carr", top=4)] == \
        [("car", 1), ("cart", 1), ("care", 1), ("cat", 2)]


def test_dictionary_ties_break_by_count_then_order(tmp_path):
    f = tmp_path / "d.tsv"
    f.write_text("cart\t5\ncar\t2\ncare\t9\ncat\t100\n")
    d = load_dictionary(str(f))
    assert [m.word for m in nearest(d, "carr", top=3)] == ["care", "cart", "car"]
    assert nearest(d, "dog", max_distance=1) == []
    assert [m.word for m in nearest(d, "dog", top=2, max_distance=3)] == ["cat", "car"]


def test_dictionary_bad_count_names_the_line(tmp_path):
    f = tmp_path / "d.tsv"
    f.write_text("cat\t1\ncar\tmany\n")
    with pytest.raises(NlpkitError, match="line 2"):
        load_dictionary(str(f))


def test_dictionary_search_equals_rapidfuzz_ranking(shared_data):
    entries = [line.split("\t")[0] for line in
               (shared_data / "spelling" / "count_1w.txt").read_text().splitlines()[:20000]]
    d = Dictionary.from_entries(entries, list(range(len(entries), 0, -1)))
    for metric, scorer in (("levenshtein", Levenshtein.distance), ("osa", OSA.distance),
                           ("indel", Indel.distance)):
        for q in ["speling", "korrect", "thier", "accomodation", "a", "zzzzzzzzzzzz", "über"]:
            scores = process.cdist([q], entries, scorer=scorer)[0]
            order = sorted(range(len(entries)), key=lambda i: (scores[i], i))[:5]
            got = nearest(d, q, top=5, metric=metric)
            assert [(m.word, m.distance) for m in got] == [(entries[i], int(scores[i])) for i in order]
            best = process.extractOne(q, entries, scorer=scorer)
            assert (got[0].word, got[0].distance) == (best[0], best[1])


def test_word_level_dictionary():
    d = Dictionary.from_entries(["new york", "new york city", "york"], level="word")
    assert [(m.word, m.distance) for m in nearest(d, "new yorks city", top=2)] == \
        [("new york city", 1), ("new york", 2)]


# ---------------------------------------------------------------------- alignment

@settings(max_examples=200, deadline=None)
@given(st.one_of(chars, words), st.one_of(chars, words), weights)
def test_align_ops_applied_to_a_yield_b(a, b, w):
    if isinstance(a, str) != isinstance(b, str):
        b = list(b) if isinstance(a, list) else "".join(b)
    for metric in ("levenshtein", "indel", "lcs", "hamming"):
        ops = alignment(a, b, metric)
        assert apply(a, ops) == list(b)
        assert cost(ops) == REFERENCE["indel" if metric == "lcs" else metric].distance(a, b)
    ops = alignment(a, b, "levenshtein", w)
    assert apply(a, ops) == list(b)
    assert cost(ops, w) == Levenshtein.distance(a, b, weights=w)


@settings(max_examples=200, deadline=None)
@given(st.one_of(chars, words), st.one_of(chars, words))
def test_editops_equal_rapidfuzz_editops(a, b):
    if isinstance(a, str) != isinstance(b, str):
        b = list(b) if isinstance(a, list) else "".join(b)
    ref = [(t.replace("replace", "substitute"), i, j) for t, i, j in Levenshtein.editops(a, b).as_list()]
    assert editops(a, b) == ref
    assert editops(a, b, "indel") == [tuple(x) for x in Indel.editops(a, b).as_list()]


def test_aligned_view_kitten_sitting_and_words():
    assert aligned_view(alignment("kitten", "sitting")) == ("kitten-", "sitting")
    top, bottom = aligned_view(alignment("the cat sat".split(), "a cat sat down".split()), " ")
    assert (top, bottom) == ("the cat sat ----", "a   cat sat down")


def test_align_refuses_transposition_metrics():
    with pytest.raises(UsageError):
        alignment("ab", "ba", "osa")


def test_channel_ranking_prefers_a_common_word_one_edit_away():
    d = Dictionary.from_entries(["seperate", "separate", "separated"], [1_739_278, 36_138_447, 9_000_000])
    assert nearest(d, "seperate")[0].word == "seperate"
    ranked = nearest(d, "seperate", top=3, rank="channel", edit_odds=10)
    assert [(m.word, m.distance) for m in ranked] == [("separate", 1), ("seperate", 0), ("separated", 2)]
    assert nearest(d, "seperate", rank="channel", edit_odds=100)[0].word == "seperate"  # 36M/100 < 1.7M
    with pytest.raises(UsageError):
        nearest(d, "x", rank="popularity")


def test_channel_ranking_equals_brute_force_over_count_1w(shared_data):
    import math

    lines = (shared_data / "spelling" / "count_1w.txt").read_text().splitlines()[:20000]
    entries = [line.split("\t")[0] for line in lines]
    counts = [float(line.split("\t")[1]) for line in lines]
    d = Dictionary.from_entries(entries, counts)
    for q in ["speling", "seperate", "begining", "korrect", "a", "zzzzzzzz"]:
        dist = process.cdist([q], entries, scorer=OSA.distance)[0]
        key = lambda i: (-(math.log1p(counts[i]) - dist[i] * math.log(100)), dist[i], i)  # noqa: E731
        expected_top = [(entries[i], int(dist[i])) for i in sorted(range(len(entries)), key=key)[:5]]
        got = nearest(d, q, top=5, metric="osa", rank="channel", edit_odds=100)
        assert [(m.word, m.distance) for m in got] == expected_top


def test_column_masks_table_and_compare_paths_agree():
    import numpy as np

    rng = np.random.default_rng(0)
    P = rng.integers(0, 5, (50, 128)).astype(np.int32)
    P[:, 100:] = bd.PAD_A
    T = rng.integers(0, 6, (50, 90)).astype(np.int32)
    big = np.where(P >= 0, P + 200_000, P), np.where(T >= 0, T + 200_000, T)  # ids via np.unique
    for P_, T_ in ((P, T), big):
        table = bp.column_masks(P_, T_, 128)
        compare = bp.column_masks(P_, T_, 128, table_bytes=0)
        for j in (0, 17, 89):
            assert np.array_equal(table(j, 50), compare(j, 50))
            assert np.array_equal(table(j, 20), compare(j, 20))
    for width in (8, 16, 32, 64):
        Pw = P[:, :width].copy()
        Pw[:, width - 3:] = bd.PAD_A
        table = bp.column_masks(Pw, T, width)
        compare = bp.column_masks(Pw, T, width, table_bytes=0)
        for j in (0, 17, 89):
            assert np.array_equal(table(j, 50), compare(j, 50))


def _edited(rng, text: str, edits: int, alphabet: str) -> str:
    out = list(text)
    for _ in range(edits):
        i, op = rng.randrange(len(out) + 1), rng.random()
        if op < 0.3 and i < len(out):
            out[i] = rng.choice(alphabet)
        elif op < 0.5 and i < len(out):
            del out[i]
        elif op < 0.7 and i + 1 < len(out):
            out[i], out[i + 1] = out[i + 1], out[i]
        else:
            out.insert(i, rng.choice(alphabet))
    return "".join(out)


def test_band_kernel_is_exact_up_to_band_and_never_below_it():
    import random

    import numpy as np

    rng = random.Random(11)
    a = ["".join(rng.choice("abcd") for _ in range(rng.randint(70, 250))) for _ in range(300)]
    b = [_edited(rng, x, rng.randint(0, 45), "abcd") for x in a]
    pairs = [(x, y) if len(x) <= len(y) else (y, x) for x, y in zip(a, b)]
    pairs = [p for p in pairs if len(p[1]) - len(p[0]) <= bp.BAND]
    pairs.sort(key=lambda p: -len(p[1]))
    P, lp = bd.encode([p[0] for p in pairs], bd.PAD_A)
    T, lt = bd.encode([p[1] for p in pairs], bd.PAD_B)
    width = int(bp.width_class(lp.max(keepdims=True))[0])
    P = bd.widen(P, width, bd.PAD_A)[:, :width]
    for ref, osa in ((Levenshtein, False), (OSA, True)):
        got = bp.band_levenshtein(*bp.match_table(P, T, width), lp, lt, transpositions=osa)
        true = np.array([ref.distance(x, y) for x, y in pairs])
        assert np.array_equal(got[true <= bp.BAND], true[true <= bp.BAND])
        assert (got[true > bp.BAND] > bp.BAND).all()
        assert (true <= bp.BAND).sum() > 100 and (true > bp.BAND).sum() > 10


def test_long_lines_with_few_or_many_edits_match_rapidfuzz():
    import random

    rng = random.Random(12)
    a = ["".join(rng.choice("abcdefgh ") for _ in range(rng.randint(100, 400))) for _ in range(300)]
    b = [_edited(rng, x, rng.randint(0, 60), "abcdefgh ") for x in a]
    for metric in ("levenshtein", "osa", "indel"):
        assert pairwise(a, b, metric).tolist() == [expected(x, y, metric) for x, y in zip(a, b)]


def test_bigint_lcs_with_patterns_filling_whole_words_matches_rapidfuzz():
    import random

    rng = random.Random(13)
    a = ["".join(rng.choice("abcd") for _ in range(k)) for k in (63, 64, 65, 127, 128, 192, 256, 300) * 4]
    b = [_edited(rng, x, rng.randint(0, 80), "abcde") + "a" * (i % 3) for i, x in enumerate(a)]
    for metric in ("indel", "lcs"):
        assert bd.pairwise_distances(a, b, metric).tolist() == [expected(x, y, metric) for x, y in zip(a, b)]


@pytest.mark.parametrize("metric", ["levenshtein", "osa", "indel", "lcs", "hamming", "damerau"])
@pytest.mark.parametrize("n", [1, 8, 300])
def test_pairwise_str_against_token_list_is_the_same_at_every_batch_size(metric, n):
    """A str's characters equal one-character tokens (rapidfuzz compares them so), small batch or numpy path."""
    ref = {"levenshtein": Levenshtein, "osa": OSA, "indel": Indel, "lcs": LCSseq, "hamming": Hamming,
           "damerau": DamerauLevenshtein}[metric]
    pairs = [("kitten", list("sitting")), (list("flaw"), "lawn"), ("", list("ab")), ("abc", [])]
    if metric == "hamming":
        pairs = [("kitten", list("sittin")), (list("flaw"), "lawn"), ("", []), ("abc", list("abd"))]
    a = [x for x, _ in pairs] * n
    b = [y for _, y in pairs] * n
    want = [ref.distance(x, y) for x, y in pairs] * n
    assert bd.pairwise_distances(a, b, metric).tolist() == want
    assert bd.pairwise_distances(b, a, metric).tolist() == want
