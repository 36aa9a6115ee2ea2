"""SentencePiece-style and byte-level BPE families against their references (HF tokenizers for
tokenizer.json, llama.cpp for GGUF), through fixtures built by tools/make_tokenizer_fixtures.py."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nlpkit.bpe import Tokenizer
from nlpkit.errors import NlpkitError

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "tokenizers"
EXPECTED = json.loads((FIX / "expected.json").read_text(encoding="utf-8"))
#: tokenizer.json fixtures owned by other tests, with their references in expected.json too.
EXTERNAL = {"phi3": FIX.parent / "lm" / "families" / "phi3"}
JSON_NAMES = ["hf-spm-legacy", "hf-spm-metaspace", "hf-spm-nmt-cf", "phi3", "spm-converted", "bl-llama3", "bl-qwen2",
              "bl-neox"]
ALL_NAMES = JSON_NAMES + ["llama-spm.gguf"]


def where(name: str) -> Path:
    return EXTERNAL.get(name, FIX / name)


def load(name: str) -> Tokenizer:
    return Tokenizer.from_gguf(FIX / name) if name.endswith(".gguf") else Tokenizer.from_dir(where(name))


def expected(name: str) -> dict:
    if name not in EXPECTED:
        pytest.skip(f"no reference ids stored for {name} (tools/make_tokenizer_fixtures.py needs llama_cpp)")
    return EXPECTED[name]


@pytest.mark.parametrize("name", ALL_NAMES)
def test_ids_equal_the_reference_on_every_multilingual_line(name, shared_data):
    tok, exp = load(name), expected(name)
    for fname, want in exp["files"].items():
        lines = (shared_data / "multilingual" / fname).read_text(encoding="utf-8").split("\n")
        ids = [tok.encode(line) for line in lines]
        assert ids[:3] == want["first"], fname
        assert sum(map(len, ids)) == want["tokens"], fname
        got = hashlib.sha256(json.dumps(ids, separators=(",", ":")).encode()).hexdigest()
        assert got == want["sha256"], fname


@pytest.mark.parametrize("name", ALL_NAMES)
def test_ids_and_round_trip_equal_the_reference_on_random_unicode(name):
    tok, exp = load(name), expected(name)
    for row in exp["strings"]:
        ids = tok.encode(row["text"])
        assert ids == row["ids"], row["text"]
        if row["roundtrip"]:
            assert tok.decode(ids) == row["text"]


@pytest.fixture(scope="module")
def hf_tokenizers():
    tokenizers = pytest.importorskip("tokenizers")
    return {name: (tokenizers.Tokenizer.from_file(str(where(name) / "tokenizer.json")), load(name))
            for name in JSON_NAMES}


@pytest.mark.parametrize("name", JSON_NAMES)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=40))
def test_any_unicode_encodes_and_decodes_as_hf(hf_tokenizers, name, text):
    hf, tok = hf_tokenizers[name]
    want = hf.encode(text, add_special_tokens=False).ids
    assert tok.encode(text) == want
    assert tok.decode(want) == hf.decode(want, skip_special_tokens=False)


def test_out_of_vocabulary_characters_hit_byte_fallback():
    tok = load("hf-spm-legacy")
    ids = tok.encode("\U0001F99C")  # a parrot: not in the fixture's vocabulary
    assert [tok.id_to_token(i) for i in ids] == ["▁", "<0xF0>", "<0x9F>", "<0xA6>", "<0x9C>"]
    assert tok.decode(ids) == "\U0001F99C"


def test_add_special_adds_what_the_post_processor_adds():
    tok = load("hf-spm-legacy")
    assert tok.encode("hi", add_special=True)[0] == tok.token_to_id("<s>")
    assert tok.encode("hi", add_special=False)[0] != tok.token_to_id("<s>")


@pytest.mark.parametrize("model_type, named", [("Unigram", "Unigram"), ("WordPiece", "WordPiece"),
                                               ("WordLevel", "WordLevel")])
def test_unsupported_model_types_are_named(tmp_path, model_type, named):
    data = json.loads((FIX / "spm-converted" / "tokenizer.json").read_text(encoding="utf-8"))
    data["model"]["type"] = model_type
    (tmp_path / "tokenizer.json").write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(NlpkitError, match=f"model.type: '{named}'.*not supported"):
        Tokenizer.from_file(tmp_path / "tokenizer.json")


def test_unsupported_gguf_tokenizer_model_is_named():
    from nlpkit.bpe.gguf_vocab import spec_from_gguf_metadata
    with pytest.raises(NlpkitError, match="'t5' \\(SentencePiece Unigram\\) is not supported"):
        spec_from_gguf_metadata({"tokenizer.ggml.model": "t5", "tokenizer.ggml.tokens": ["a"]}, "x.gguf")


@pytest.mark.parametrize("name", ALL_NAMES)
def test_specs_round_trip_through_the_spec(name):
    tok = load(name)
    again = Tokenizer.from_spec(tok.to_spec())
    text = "Hello wörld 123 \U0001F99C  <s>x"
    assert again.encode(text) == tok.encode(text)


#: llama.cpp's test vocabularies (models/ggml-vocab-*.gguf with .inp/.out) that nlpkit reads, and whether
#: llama.cpp adds a BOS to "Hello" (the file's add_bos_token key, else llama-vocab.cpp's default for
#: the vocabulary type: SentencePiece yes, byte-level BPE only for the llama3 pre-tokenizers).
LLAMA_CPP_VOCABS = {"llama-spm": True, "phi-3": True, "llama-bpe": True, "qwen2": False, "gpt-2": False,
                    "starcoder": False, "command-r": True, "refact": False, "mpt": False}
#: the others, and why nlpkit refuses them (a vocabulary type or pre-tokenizer it does not read).
LLAMA_CPP_UNREAD = {"bert-bge": "'bert'", "deepseek-coder": "'deepseek-coder'", "deepseek-llm": "'deepseek-llm'",
                    "falcon": "'falcon'", "gemma-4": "'gemma4'", "qwen35": "'qwen35'"}


def llama_cpp_models() -> Path:
    import os
    root = os.environ.get("LLAMA_CPP_DIR")
    if not root or not (Path(root) / "models" / "ggml-vocab-llama-bpe.gguf.out").is_file():
        pytest.skip("set LLAMA_CPP_DIR to a llama.cpp source tree to run its vocabulary tests")
    return Path(root) / "models"


def test_every_llama_cpp_test_vocabulary_is_read_or_refused_by_name():
    """Each ggml-vocab-*.gguf that has test vectors is either tested below or refused with its reason."""
    models = llama_cpp_models()
    names = {p.name[len("ggml-vocab-"):-len(".gguf.out")] for p in models.glob("ggml-vocab-*.gguf.out")}
    assert names <= set(LLAMA_CPP_VOCABS) | set(LLAMA_CPP_UNREAD), sorted(names - set(LLAMA_CPP_VOCABS))
    for name in sorted(names & set(LLAMA_CPP_UNREAD)):
        with pytest.raises(NlpkitError, match=f"{LLAMA_CPP_UNREAD[name]}.* not supported"):
            Tokenizer.from_gguf(models / f"ggml-vocab-{name}.gguf")


LLAMA_CPP_ADD_SPECIAL = json.loads((FIX / "llama_cpp_add_special.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", sorted(LLAMA_CPP_VOCABS))
def test_llama_cpp_vocab_adds_bos_as_llama_cpp(name):
    """llama-tokenize's ids with special tokens added (tools/make_llama_cpp_vocab_fixtures.py): llama-bpe has no
    add_bos_token key and llama.cpp adds BOS (128000 9906), as for every llama3 vocabulary; gpt-2 gets none."""
    tok = Tokenizer.from_gguf(llama_cpp_models() / f"ggml-vocab-{name}.gguf")
    for text, want in LLAMA_CPP_ADD_SPECIAL[name].items():
        assert tok.encode(text, add_special=True) == want, text
    assert want[0] == tok.bos_id if LLAMA_CPP_VOCABS[name] else want[0] != tok.bos_id
    if name == "llama-bpe":
        assert LLAMA_CPP_ADD_SPECIAL[name]["Hello"] == [128000, 9906]


@pytest.mark.parametrize("name", sorted(LLAMA_CPP_VOCABS))
def test_llama_cpp_vocab_tests_pass(name):
    """llama.cpp's own tokenizer tests (models/ggml-vocab-*.gguf + .inp/.out of its source tree),
    when $LLAMA_CPP_DIR points at one."""
    models = llama_cpp_models()
    tok = Tokenizer.from_gguf(models / f"ggml-vocab-{name}.gguf")
    inputs = (models / f"ggml-vocab-{name}.gguf.inp").read_text(encoding="utf-8").split("\n__ggml_vocab_test__\n")
    outputs = (models / f"ggml-vocab-{name}.gguf.out").read_text(encoding="utf-8").split("\n")
    for text, want in zip(inputs, outputs):
        assert tok.encode(text, allowed_special="none") == [int(x) for x in want.split()], text


@pytest.mark.parametrize("pre, key, adds", [("llama-bpe", None, True), ("llama3", None, True), ("gpt-2", None, False),
                                             ("qwen2", None, False), ("llama-bpe", False, False), ("gpt-2", True, True)])
def test_gguf_bpe_bos_default_follows_llama_cpp_per_pre_tokenizer(pre, key, adds):
    """Without tokenizer.ggml.add_bos_token, llama.cpp's llama-vocab.cpp adds BOS to byte-level BPE only for
    the llama3 pre-tokenizers; the key, when present, decides."""
    from nlpkit.bpe.gguf_vocab import spec_from_gguf_metadata
    meta = {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": ["a", "b", "<bos>"], "tokenizer.ggml.merges": [],
            "tokenizer.ggml.pre": pre, "tokenizer.ggml.bos_token_id": 2}
    if key is not None:
        meta["tokenizer.ggml.add_bos_token"] = key
    assert spec_from_gguf_metadata(meta).add_bos is adds


def test_gguf_sentencepiece_vocabulary_adds_bos_without_the_key():
    from nlpkit.bpe.gguf_vocab import spec_from_gguf_metadata
    meta = {"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": ["<unk>", "<s>", "</s>", "a"],
            "tokenizer.ggml.scores": [0.0] * 4, "tokenizer.ggml.bos_token_id": 1}
    assert spec_from_gguf_metadata(meta).add_bos is True


@pytest.mark.parametrize("name", JSON_NAMES)
def test_saved_tokenizer_json_encodes_like_the_original_in_hf(name, tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    load(name).save(tmp_path)
    ours, orig = (tokenizers.Tokenizer.from_file(str(p / "tokenizer.json")) for p in (tmp_path, where(name)))
    for text in ("Hello wörld 123 \U0001F99C  <s>x", "  two  spaces", "", "e\u0301 ½ ﬁ"):
        assert ours.encode(text).ids == orig.encode(text).ids
        assert ours.decode(orig.encode(text).ids) == orig.decode(orig.encode(text).ids)


@pytest.fixture(scope="module")
def llama_cpp_vocab():
    llama_cpp = pytest.importorskip("llama_cpp")
    return llama_cpp.Llama(model_path=str(FIX / "llama-spm.gguf"), vocab_only=True, verbose=False)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=40))
def test_gguf_llama_vocabulary_encodes_as_llama_cpp(llama_cpp_vocab, text):
    """Live against llama.cpp when llama_cpp is installed (it is not a CI dependency)."""
    tok = load("llama-spm.gguf")
    want = llama_cpp_vocab.tokenize(text.encode("utf-8"), add_bos=False, special=True)
    assert tok.encode(text) == want
