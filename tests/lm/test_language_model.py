"""One `LanguageModel` interface, two backends: what every backend answers the same way."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from nlpkit.lm.interface import DecodingState, LanguageModel, TextStream
from nlpkit.lm.load import backend_class, load_language_model

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "ngram"
QUERY = json.loads((FIX / "query.json").read_text())


@pytest.fixture(scope="module")
def ngram():
    return load_language_model(FIX / "kenlm-3.arpa.gz")


@pytest.fixture(scope="module")
def transformer():
    return load_language_model(None)


def test_load_language_model_picks_the_backend_by_sniffing_the_path(ngram, transformer, monkeypatch):
    monkeypatch.delenv("NLPKIT_MODEL", raising=False)
    assert (ngram.kind, transformer.kind) == ("ngram", "transformer")
    assert isinstance(ngram, LanguageModel) and isinstance(transformer, LanguageModel)
    assert backend_class(FIX / "tiny-3.arpa").kind == "ngram" and backend_class(None).kind == "transformer"
    monkeypatch.setenv("NLPKIT_MODEL", str(FIX / "kenlm-3.arpa.gz"))
    assert backend_class(None).kind == "ngram"


def test_ngram_window_logprobs_are_kenlm_query_scores(ngram):
    """`logprobs(ids, first)` of each held-out line as one window <s> words </s> gives KenLM query's
    log10 probabilities (in nats)."""
    lines = (FIX / "heldout.txt").read_text(encoding="utf-8").splitlines()
    got = np.concatenate([ngram.logprobs([ngram.prefix_id, *ngram.encode(line), ngram.model.eos_id], 1)
                          for line in lines])
    np.testing.assert_allclose(got / math.log(10), QUERY["kenlm-3"]["log10"], atol=1e-5, rtol=0)


def test_transformer_window_logprobs_are_what_perplexity_scores(transformer):
    """The window primitive scores exactly the tokens `perplexity --per-token` prints."""
    from nlpkit.lm.perplexity import perplexity

    text = "The cat sat on the mat."
    _, scored = perplexity(transformer.model, text, context=64)
    ids = [transformer.prefix_id, *transformer.encode(text)]
    np.testing.assert_array_equal(transformer.logprobs(ids, 1), scored.logprobs)


@pytest.mark.parametrize("kind", ["ngram", "transformer"])
def test_decoding_state_rows_advance_together_and_stream_text(kind, ngram, transformer):
    lm = ngram if kind == "ngram" else transformer
    prompt = lm.prompt("the old house")
    state = lm.start(prompt.ids, 3)
    assert isinstance(state, DecodingState)
    logits = state.logits()
    assert logits.shape == (3, lm.vocab_size)
    ids = np.argmax(logits, axis=-1)
    assert state.advance(ids) is True and ids.tolist() == [ids[0]] * 3
    stream = lm.text_stream(prompt)
    assert isinstance(stream, TextStream)
    assert stream.push(int(ids[0])) + stream.finish() == stream.text() != ""
    np.testing.assert_array_equal(lm.next_logits(prompt.ids), logits[0])
