"""The Precompiled normalizer (sentencepiece's precompiled_charsmap) against HF tokenizers' own."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nlpkit.bpe import Tokenizer
from nlpkit.bpe.precompiled import Precompiled, build_charsmap, from_base64
from nlpkit.errors import NlpkitError

FIX = Path(__file__).resolve().parents[1] / "fixtures"
#: name -> tokenizer.json whose normalizer holds a Precompiled step (nmt_nfkc, nmt_nfkc_cf)
SOURCES = {"nmt_nfkc": FIX / "lm" / "families" / "phi3" / "tokenizer.json",
           "nmt_nfkc_cf": FIX / "tokenizers" / "hf-spm-nmt-cf" / "tokenizer.json"}


def charsmap(name: str) -> str:
    spec = json.loads(SOURCES[name].read_text(encoding="utf-8"))["normalizer"]
    return next(n["precompiled_charsmap"] for n in spec["normalizers"] if n["type"] == "Precompiled")


@pytest.fixture(scope="module")
def pairs():
    normalizers = pytest.importorskip("tokenizers.normalizers")
    return {name: (from_base64(charsmap(name)), normalizers.Precompiled(base64.b64decode(charsmap(name))))
            for name in SOURCES}


# Characters the rules touch, and the ones that glue clusters together: combining marks, Hangul jamo,
# ZWJ + emoji, regional indicators, CR LF, fullwidth and compatibility forms, controls, NUL.
_TRICKY = st.sampled_from(list("aAeE<=>\u0300\u0301\u0308\u0327\u0338\u20dd\u1100\u1161\u11a8\uac00\uac01"
                               "\u200d\U0001F468\U0001F469\U0001F1EB\U0001F1F7\r\n\t \u00a0\u3000\uff21\uff41"
                               "\u2460\u00bd\ufb01\u1e9b\u0130\u00df\u03a3\u0000\u0001\u007f\u0085\u200b"
                               "\u0915\u094d\u0937\u093f\u0e01\u0e33\u0f40\u0f71\u0f72"))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(alphabet=st.one_of(_TRICKY, st.characters(codec="utf-8")), max_size=30))
@pytest.mark.parametrize("name", list(SOURCES))
def test_normalizes_as_hf_tokenizers(pairs, name, text):
    ours, hf = pairs[name]
    assert ours(text) == hf.normalize_str(text)


def test_normalizes_every_multilingual_line_as_hf_tokenizers(pairs, shared_data):
    for path in sorted((shared_data / "multilingual").iterdir()):
        text = path.read_text(encoding="utf-8")
        for ours, hf in pairs.values():
            assert ours(text) == hf.normalize_str(text), path.name


def test_a_cluster_takes_the_replacement_of_its_shortest_key():
    """The quirk HF keeps: a short cluster whose first character is a key is replaced whole (its marks go)."""
    pm = Precompiled(build_charsmap({"\uff21": "A", "\uff21\u0301": "\u00c1", "\u2460": "1"}))
    assert pm("\uff21\u0301") == "A"            # shortest key wins, the accent is dropped
    assert pm("x\u2460\u0301") == "x1"
    assert pm("\uff21\u0301\u0301\u0301") == "A\u0301\u0301\u0301"  # 7 bytes: character by character
    assert pm("plain") == "plain"


def test_built_charsmaps_mean_the_same_to_hf():
    normalizers = pytest.importorskip("tokenizers.normalizers")
    mapping = {"\uff21": "A", "ab": "X", "a\u0301": "\u00e1", "\u2460": "(1)", "\t": " ", "\u00ad": ""}
    blob = build_charsmap(mapping)
    hf, ours = normalizers.Precompiled(blob), Precompiled(blob)
    for text in ["\uff21\u2460 ab a\u0301 \tx\u00ady", "a\u0301\u0301", "", "\u0000ab"]:
        assert ours(text) == hf.normalize_str(text)


@pytest.mark.parametrize("blob, message", [(b"\x01", "too short"), (b"\x08\x00\x00\x00\x00", "does not fit"),
                                           (b"\x03\x00\x00\x00abc", "does not fit")])
def test_a_malformed_charsmap_is_a_clear_error(blob, message):
    with pytest.raises(NlpkitError, match=message):
        Precompiled(blob)


def test_a_malformed_charsmap_in_tokenizer_json_names_the_file_and_field(tmp_path):
    data = json.loads(SOURCES["nmt_nfkc"].read_text(encoding="utf-8"))
    data["normalizer"]["normalizers"][0]["precompiled_charsmap"] = "AAE="
    (tmp_path / "tokenizer.json").write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(NlpkitError, match=r"tokenizer\.json.*precompiled_charsmap.*too short"):
        Tokenizer.from_file(tmp_path / "tokenizer.json")


@pytest.mark.parametrize("text", ["A\U00010ecb", "A\U00010ecbB", "x\u05c8y", "e\u0301\U00010ecb", "\U0001d127a"])
def test_marks_newer_than_hf_segmentation_stand_alone_as_in_hf(text):
    """The regex module's Unicode joins these marks to the letter before them; HF's grapheme segmentation
    (an older Unicode) does not, so HF normalizes "A" + mark as "a" + mark, not "a" (hypothesis found it)."""
    tokenizers = pytest.importorskip("tokenizers")
    path = FIX / "tokenizers" / "hf-spm-nmt-cf" / "tokenizer.json"
    hf = tokenizers.Tokenizer.from_file(str(path))
    assert Tokenizer.from_file(path).encode(text) == hf.encode(text, add_special_tokens=False).ids
