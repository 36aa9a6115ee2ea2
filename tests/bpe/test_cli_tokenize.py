"""`nlpkit tokenize` through the real entry point: ids equal HF tokenizers' on SmolLM2's GGUF and on
a bpe-train output, counts add up, --decode inverts, and bad input gets a clear error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO
from test_bpe_tokenizer import smollm2_gguf

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "tokenizers"


def jsonl(proc) -> list[dict]:
    assert proc.returncode == 0, proc.stderr.decode()
    return [json.loads(x) for x in proc.stdout.decode("utf-8").splitlines()]


@pytest.fixture(scope="module")
def corpus(shared_data, tmp_path_factory) -> Path:
    """3,000 multilingual lines (enough for the multi-process path)."""
    lines = []
    for name in ("newstest2021.de-en.src.de", "newstest2021.ru-en.src.ru", "newstest2021.zh-en.src.zh",
                 "newstest2021.ja-en.src.ja"):
        lines += (shared_data / "multilingual" / name).read_text(encoding="utf-8").split("\n")[:750]
    path = tmp_path_factory.mktemp("tok") / "corpus.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def hf_smollm2():
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import AddedToken, models, pre_tokenizers

    from nlpkit.bpe import Tokenizer
    mine = Tokenizer.from_gguf(smollm2_gguf())
    hf = tokenizers.Tokenizer(models.BPE(vocab=dict(mine.vocab), merges=mine.merges))
    hf.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                pre_tokenizers.ByteLevel(add_prefix_space=False)])
    hf.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in mine.special_tokens])
    return hf


def test_tokenize_smollm2_gguf_equals_hf_tokenizers(cli, corpus, hf_smollm2):
    lines = corpus.read_text(encoding="utf-8").split("\n")[:-1]
    want = [e.ids for e in hf_smollm2.encode_batch(lines, add_special_tokens=False)]
    rows = jsonl(cli("tokenize", "-m", str(smollm2_gguf()), str(corpus), "--format", "jsonl", "-j", "2"))
    assert [r["ids"] for r in rows] == want
    assert [r["line"] for r in rows] == list(range(1, len(lines) + 1))
    counts = jsonl(cli("tokenize", "-m", str(smollm2_gguf()), str(corpus), "--count", "--format", "jsonl"))
    assert counts[-1]["file"] == "total" and counts[-1]["tokens"] == sum(map(len, want))
    assert [r["tokens"] for r in counts[:-1]] == list(map(len, want))


def test_tokenize_bpe_train_output_equals_hf_tokenizers(cli, tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    text = "the cat sat on the mat. The dog ate the hat! 12345 héllo wörld\n" * 50
    (tmp_path / "train.txt").write_text(text, encoding="utf-8")
    assert cli("bpe-train", str(tmp_path / "train.txt"), "-o", str(tmp_path / "tok"), "--vocab-size", "300",
               "--special-tokens", "<|endoftext|>").returncode == 0
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "tok" / "tokenizer.json"))
    probe = ["the hat sat", "héllo <|endoftext|> wörld 42", "  zebra ☃"]
    rows = jsonl(cli("tokenize", "--tokenizer", str(tmp_path / "tok"), "--format", "jsonl", "--pieces",
                     "--ids", input="\n".join(probe) + "\n"))
    for row, line in zip(rows, probe):
        enc = hf.encode(line)
        assert row["ids"] == enc.ids and row["pieces"] == enc.tokens and row["file"] == "<stdin>"
    per_file = jsonl(cli("tokenize", "-t", str(tmp_path / "tok" / "tokenizer.json"), str(tmp_path / "train.txt"),
                         "--per-file", "--count", "--format", "jsonl"))
    assert per_file[0]["tokens"] == len(hf.encode(text).ids) == per_file[-1]["tokens"]


def test_add_special_adds_bos_and_decode_inverts(cli):
    tj = str(FIX / "hf-spm-legacy" / "tokenizer.json")
    with_bos = jsonl(cli("tokenize", "-t", tj, "--format", "jsonl", input="Hello wörld \U0001F99C\n"))[0]["ids"]
    without = jsonl(cli("tokenize", "-t", tj, "--no-add-special", "--format", "jsonl",
                        input="Hello wörld \U0001F99C\n"))[0]["ids"]
    assert with_bos == [1] + without
    back = jsonl(cli("tokenize", "-t", tj, "--decode", "--format", "jsonl",
                     input=" ".join(map(str, without)) + "\n" + json.dumps(without) + "\n"))
    assert [r["text"] for r in back] == ["Hello wörld \U0001F99C"] * 2


@pytest.mark.parametrize("ids, message", [("1 5 99999", "token id 99999 is out of range"),
                                          ("-1", "token id -1 is out of range"),
                                          ("1 x 2", "'x' is not a token id")])
def test_decode_bad_ids_is_a_clear_error(cli, ids, message):
    proc = cli("tokenize", "-t", str(FIX / "bl-neox"), "--decode", input=f"1\n{ids}\n")
    assert proc.returncode == 1
    err = proc.stderr.decode()
    assert err.startswith("nlpkit: error: <stdin>, line 2: ") and message in err and "Traceback" not in err


def test_usage_errors(cli):
    assert cli("tokenize", "-t", "x", "-m", "y", input="a\n").returncode == 2
    assert cli("tokenize", "--decode", "--count", input="1\n").returncode == 2
    proc = cli("tokenize", "-t", "/nonexistent/tok", input="a\n")
    assert proc.returncode == 1 and b"no such tokenizer" in proc.stderr


def test_head_closes_the_pipe_quietly(tmp_path):
    big = tmp_path / "big.txt"
    big.write_text("hello world, the quick brown fox\n" * 20000, encoding="utf-8")
    script = (f"'{sys.executable}' -m nlpkit tokenize -t '{FIX / 'bl-neox'}' '{big}' --format tsv | head -2; "
              "exit ${PIPESTATUS[0]}")
    proc = subprocess.run(["bash", "-c", script], capture_output=True, cwd=str(REPO), timeout=300)
    assert proc.returncode == 0 and proc.stderr == b"" and len(proc.stdout.splitlines()) == 2


def test_tokenize_and_perplexity_with_a_precompiled_normalizer(cli):
    """The phi3 fixture's tokenizer.json normalizes with sentencepiece's precompiled nmt_nfkc charsmap."""
    tokenizers = pytest.importorskip("tokenizers")
    phi3 = FIX.parent / "lm" / "families" / "phi3"
    hf = tokenizers.Tokenizer.from_file(str(phi3 / "tokenizer.json"))
    probe = ["ｈｅｌｌｏ wörld ①½", "Ａ\u0301 e\u0301\tx", "It is a truth universally acknowledged"]
    rows = jsonl(cli("tokenize", "-m", str(phi3), "--format", "jsonl", input="\n".join(probe) + "\n"))
    assert [r["ids"] for r in rows] == [hf.encode(line).ids for line in probe]
    ppl = jsonl(cli("perplexity", "-m", str(phi3), "--format", "jsonl", input=probe[2] + "\n"))
    assert ppl[0]["tokens"] > 0 and ppl[0]["mean_nll"] > 0


def test_a_leading_bom_is_text_to_the_tokenizer_as_in_hf(cli, tmp_path):
    """HF encodes a file read as UTF-8 with its BOM (and bpe-train learns it): per line and per file."""
    tokenizers = pytest.importorskip("tokenizers")
    from conftest import FIXTURES

    tj = FIXTURES / "lm" / "families" / "qwen2" / "tokenizer.json"
    text = "\ufeffhello world\nsecond line\n"
    (tmp_path / "bom.txt").write_text(text, encoding="utf-8")
    hf = tokenizers.Tokenizer.from_file(str(tj))
    r = cli("tokenize", "--tokenizer", str(tj), str(tmp_path / "bom.txt"), "--format", "jsonl", "--no-signature")
    rows = [json.loads(x) for x in r.stdout.decode().splitlines() if '"line"' in x and json.loads(x).get("line")]
    assert [x["ids"] for x in rows] == [hf.encode(line).ids for line in text.splitlines()]
    r = cli("tokenize", "--tokenizer", str(tj), str(tmp_path / "bom.txt"), "--per-file", "--count", "--format",
            "jsonl", "--no-signature")
    assert json.loads(r.stdout.decode().splitlines()[0])["tokens"] == len(hf.encode(text).ids)


def test_decode_refuses_an_empty_field_between_commas(cli):
    from conftest import FIXTURES

    r = cli("tokenize", "--tokenizer", str(FIXTURES / "lm" / "families" / "qwen2" / "tokenizer.json"), "--decode",
            input="1,2,,3\n")
    assert r.returncode == 1 and b"<stdin>, line 1: an empty field between commas" in r.stderr
