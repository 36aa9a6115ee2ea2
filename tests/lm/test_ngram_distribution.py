"""The next-word distribution of a backoff model (what `sample --dist` prints and `generate` draws from)
against KenLM on its own test model, lm/test.arpa, whose "blanks" (``would consider`` absent while
``also would consider`` is there) catch a distribution that stops at the first missing suffix.

Fixtures: tests/fixtures/ngram/kenlm-test.arpa and test-arpa.json (tools/make_ngram_fixtures.py: KenLM's
``query`` scoring every vocabulary word after each history). The ``model_test.cc`` cases are KenLM's
own expectations, transcribed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nlpkit.lm.ngram.ngram_model import load_ngram_model
from nlpkit.lm.generation import next_token_distribution
from nlpkit.lm.ngram.ngram_lm import NgramLM
from nlpkit.lm.ngram.ngram_sampling import prompt_history
from nlpkit.lm.ngram.line_scoring import score_lines
from nlpkit.lm.generation.sampling import SamplingConfig

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "ngram"
ARPA = FIX / "kenlm-test.arpa"
REF = json.loads((FIX / "test-arpa.json").read_text(encoding="utf-8"))
NEXT = REF["next"]
HISTORIES = [h for h in NEXT if h != "words"]


@pytest.fixture(scope="module")
def model():
    return load_ngram_model(ARPA)


def ids(model, text: str) -> list[int]:
    return [model.word_id.get(w, model.unk_id) for w in text.split()]


# KenLM lm/model_test.cc, Blanks(): (context from a null state, word, log10 p). Its Starters() and
# Continuation() start from <s>.
MODEL_TEST_CC = [
    ("", "also", -1.687872),
    ("also", "would", -2.0),
    ("also would", "consider", -3.0),
    ("also would consider", "higher", -4.0),
    ("also would consider higher", "looking", -5.0),
    ("also would consider", "not_found", -1.995635 - 7.0 - 0.30103),
    ("", "higher", -1.509559),
    ("higher", "looking", -1.285941 - 0.30103),
    ("higher looking", "not_found", -1.995635 - 0.4771212),
    ("higher looking", "consider", -1.687872 - 0.4771212),
    ("", "would", -1.687872),
    ("would", "consider", -1.687872 - 0.30103),
    ("would consider", "higher", -1.509559 - 0.30103),
    ("would consider higher", "looking", -1.285941 - 0.30103),
    ("<s>", "looking", -0.4846522),
    ("<s>", ",", -1.383514 - 0.4149733),
    ("<s>", "this_is_not_found", -1.995635 - 0.4149733),
    ("<s> looking", "on", -0.348837),
    ("<s> looking on", "a", -0.0155266),
    ("<s> looking on a", "little", -0.00306122),
    ("<s> looking on a little", "the", -4.04005),
]


@pytest.mark.parametrize("context, word, want", MODEL_TEST_CC)
def test_next_log10_passes_kenlm_model_test_blanks(model, context, word, want):
    assert model.next_log10(ids(model, context))[ids(model, word)[0]] == pytest.approx(want, abs=1e-5)


@pytest.mark.parametrize("history", HISTORIES)
def test_next_log10_equals_kenlm_query_for_every_word(model, history):
    """Every vocabulary word (and an unknown one, as <unk>) after each history, blanks included.
    query prints KenLM's float32 sums; nlpkit sums in float64, so they agree to float32 rounding."""
    dist = model.next_log10(ids(model, history))
    assert dist.dtype == np.float64
    got = dist[[model.word_id.get(w, model.unk_id) for w in NEXT["words"]]]
    np.testing.assert_allclose(got, NEXT[history]["log10"], rtol=0, atol=2e-6)


def next_word_distribution(model, history: list[int], cfg) -> list[tuple[int, float]]:
    """What `sample --dist` prints for an n-gram model: the distribution after the filters."""
    return next_token_distribution(NgramLM(model), history, cfg)


def test_also_would_consider_is_followed_by_higher_as_kenlm(model):
    """The blank "would consider" no longer hides the 4-gram "also would consider higher"."""
    hist = prompt_history(model, "also would consider")
    dist = next_word_distribution(model, hist, SamplingConfig())
    assert model.vocab[dist[0][0]] == "higher"
    ref = NEXT["<s> also would consider"]
    assert max(zip(ref["log10"], NEXT["words"]))[1] == "higher"


@pytest.mark.parametrize("history", [h for h in HISTORIES if h.startswith("<s>")])
def test_sample_dist_probabilities_are_kenlm_renormalized(model, history):
    """`sample --dist` at temperature 1: KenLM's p(w | history) over the words that can be drawn
    (not <s>, not <unk>), renormalized; float64 throughout."""
    hist = [model.bos_id] + ids(model, history)[1:]
    got = dict(next_word_distribution(model, hist, SamplingConfig()))
    ref = NEXT[history]
    p = {model.word_id[w]: 10.0 ** lp for w, lp in zip(NEXT["words"], ref["log10"])
         if w in model.word_id and w not in ("<unk>", "<s>")}
    total = sum(p.values())
    assert set(got) == set(p)
    for i, v in p.items():
        assert got[i] == pytest.approx(v / total, rel=5e-6)


@pytest.mark.parametrize("history", HISTORIES)
def test_next_log10_equals_the_sentence_scorer_digit_for_digit(model, history):
    """The distribution and the scorer (perplexity) sum the same float32 values in float64: equal
    to the last bit, for every word, the blank histories included."""
    if not history.startswith("<s>"):
        pytest.skip("the scorer starts every line with <s>")
    context = history.split()[1:]
    dist = model.next_log10(ids(model, history))
    words = [w for w in NEXT["words"] if w != "</s>"]
    scored = score_lines(model, [" ".join(context + [w]) for w in words])
    for w, s in zip(words, scored):
        assert dist[model.word_id.get(w, model.unk_id)] == s.log10[len(context)], w


def test_generate_top_k_1_after_a_blank_prints_kenlm_most_likely_word():
    out = subprocess.run([sys.executable, "-m", "nlpkit", "generate", "also would consider", "--model", str(ARPA),
                          "--top-k", "1", "--max-new-tokens", "1"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "higher"


def test_literal_unk_is_an_oov_as_query_counts_it(model):
    ref = REF["oov_text"]
    lines = ref["text"].splitlines()
    scored = list(score_lines(model, lines))
    assert sum(int(s.oov.sum()) for s in scored) == ref["oov"] == 3
    assert [int(i) for s in scored for i in np.where(s.oov, 0, 1)] == [int(i != 0) for i in ref["ids"]]
    np.testing.assert_allclose([x for s in scored for x in s.log10], ref["log10"], atol=2e-6)


def test_perplexity_counts_a_literal_unk_as_oov_as_query():
    """`printf 'the <unk> biarritz\\n' | nlpkit perplexity` gave oov 0; query counts the <unk> (and both
    perplexities follow from the count)."""
    ref = REF["oov_text"]
    out = subprocess.run([sys.executable, "-m", "nlpkit", "perplexity", "--model", str(ARPA), "--format", "jsonl"],
                         input=ref["text"], capture_output=True, text=True, check=True)
    rec = json.loads(out.stdout)
    assert (rec["oov"], rec["tokens"]) == (ref["oov"], ref["tokens"]) == (3, 9)
    assert rec["ppl"] == pytest.approx(ref["ppl"], rel=1e-5)             # query sums line totals in float32
    assert rec["ppl_no_oov"] == pytest.approx(ref["ppl_no_oov"], rel=1e-5)


def test_sample_dist_command_prints_kenlm_distribution_after_a_blank():
    """`nlpkit sample "also would consider" --dist` prints KenLM's next-word probabilities (renormalized over
    the words that can be drawn), most likely first: higher, watch, </s>, ..."""
    out = subprocess.run([sys.executable, "-m", "nlpkit", "sample", "also would consider", "--model", str(ARPA),
                          "--dist", "--format", "jsonl"], capture_output=True, text=True, check=True)
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    ref = NEXT["<s> also would consider"]
    p = {w: 10.0 ** lp for w, lp in zip(NEXT["words"], ref["log10"]) if w not in ("<unk>", "not_found")}
    total = sum(p.values())
    assert [r["token"] for r in rows[:3]] == ["higher", "watch", "</s>"]
    assert {r["token"] for r in rows} == set(p)
    for r in rows:
        assert r["probability"] == pytest.approx(p[r["token"]] / total, rel=5e-6), r["token"]
