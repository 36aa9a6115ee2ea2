"""`nlpkit bpe-train` through the real entry point: outputs, stdin, formats and error exits."""

from __future__ import annotations

import json

import pytest

EOT = "<|endoftext|>"
CORPUS = "the cat sat on the mat\nthe dog sat on the log\r\nhéllo wörld 😀\n" * 30


def test_bpe_train_writes_hf_loadable_files_and_a_signed_record(cli, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(CORPUS, encoding="utf-8")
    out = tmp_path / "tok"
    r = cli("bpe-train", str(corpus), "-o", str(out), "--vocab-size", "280", "--min-frequency", "2",
            "--special-tokens", f"{EOT},<pad>", "--special-tokens", "<unk>", "--format", "jsonl")
    assert r.returncode == 0, r.stderr.decode()
    rec = json.loads(r.stdout)
    assert rec["vocab_size"] == 280 and rec["merges"] == 280 - 259 and rec["special_tokens"] == 3
    assert rec["output"] == str(out)
    assert rec["signature"].startswith("bpe-train|vocab:280|min-freq:2|specials:3|pattern:gpt2|")
    assert (out / "merges.txt").read_text(encoding="utf-8").startswith("#version: 0.2\n")
    vocab = json.loads((out / "vocab.json").read_text(encoding="utf-8"))
    assert [vocab[EOT], vocab["<pad>"], vocab["<unk>"]] == [0, 1, 2]
    tokenizers = pytest.importorskip("tokenizers")
    hf = tokenizers.Tokenizer.from_file(str(out / "tokenizer.json"))
    from nlpkit.bpe import Tokenizer
    mine = Tokenizer.from_dir(out)
    text = f"the cat{EOT} sat on héllo 😀\r\n"
    assert hf.encode(text).ids == mine.encode(text)


def test_bpe_train_reads_stdin_and_matches_file_input(cli, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(CORPUS, encoding="utf-8")
    a = cli("bpe-train", str(corpus), "-o", str(tmp_path / "a"), "--vocab-size", "290", "--format", "tsv")
    b = cli("bpe-train", "-", "-o", str(tmp_path / "b"), "--vocab-size", "290", "--format", "tsv",
            "--no-signature", input=CORPUS)
    assert a.returncode == 0 and b.returncode == 0, b.stderr.decode()
    assert a.stdout.decode().splitlines()[0].split("\t") == [
        "vocab_size", "merges", "special_tokens", "seconds", "output", "signature"]
    assert "signature" not in b.stdout.decode()
    assert (tmp_path / "a" / "merges.txt").read_bytes() == (tmp_path / "b" / "merges.txt").read_bytes()


def test_bpe_train_gpt4_pattern_and_options(cli, tmp_path):
    r = cli("bpe-train", "-", "-o", str(tmp_path / "t"), "--vocab-size", "280", "--pattern", "gpt4",
            "--add-prefix-space", "--max-token-length", "3", "--format", "json", input=CORPUS)
    assert r.returncode == 0, r.stderr.decode()
    rec = json.loads(r.stdout)
    rec = rec[0] if isinstance(rec, list) else rec.get("records", [rec])[0]
    assert "pattern:gpt4" in rec["signature"] and "prefix-space:yes" in rec["signature"]
    data = json.loads((tmp_path / "t" / "tokenizer.json").read_text(encoding="utf-8"))
    assert [p["type"] for p in data["pre_tokenizer"]["pretokenizers"]] == ["Split", "ByteLevel"]
    assert max(len(t) for t in data["model"]["vocab"]) <= 3


def test_bpe_train_vocab_below_minimum_is_usage_error_naming_it(cli, tmp_path):
    r = cli("bpe-train", "-", "-o", str(tmp_path / "t"), "--vocab-size", "200",
            "--special-tokens", EOT, input=CORPUS)
    assert r.returncode == 2
    assert b"minimum 257" in r.stderr and b"Traceback" not in r.stderr


def test_bpe_train_bad_pattern_is_usage_error(cli, tmp_path):
    r = cli("bpe-train", "-", "-o", str(tmp_path / "t"), "--vocab-size", "300", "--pattern", "([a-z",
            input=CORPUS)
    assert r.returncode == 2
    assert b"--pattern" in r.stderr and b"does not compile" in r.stderr


def test_bpe_train_empty_corpus_is_an_error(cli, tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    r = cli("bpe-train", str(empty), "-o", str(tmp_path / "t"), "--vocab-size", "300")
    assert r.returncode == 1
    assert r.stderr.decode().startswith("nlpkit: error: empty corpus")
    assert not (tmp_path / "t").exists()


def test_bpe_train_invalid_utf8_names_file_and_line(cli, tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok\nbad \xfe\n")
    r = cli("bpe-train", str(bad), "-o", str(tmp_path / "t"), "--vocab-size", "300")
    assert r.returncode == 1
    assert b"bad.txt, line 2: invalid UTF-8" in r.stderr
    r = cli("bpe-train", str(bad), "-o", str(tmp_path / "t"), "--vocab-size", "300",
            "--encoding-errors", "replace", "--format", "jsonl")
    assert r.returncode == 0, r.stderr.decode()


def test_bpe_train_missing_file_is_an_error(cli, tmp_path):
    r = cli("bpe-train", str(tmp_path / "nope.txt"), "-o", str(tmp_path / "t"), "--vocab-size", "300")
    assert r.returncode == 1
    assert b"no such file" in r.stderr


def test_training_into_a_model_directory_is_refused(cli, tmp_path):
    """A model's tokenizer is not replaced by accident (its outputs would be gibberish, exit 0)."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (tmp_path / "c.txt").write_text("the cat sat on the mat\n" * 20)
    r = cli("bpe-train", str(tmp_path / "c.txt"), "-o", str(model), "--vocab-size", "260")
    assert r.returncode == 2 and b"holds a model (config.json)" in r.stderr
    assert sorted(p.name for p in model.iterdir()) == ["config.json"]
    r = cli("bpe-train", str(tmp_path / "c.txt"), "-o", "", "--vocab-size", "260")
    assert r.returncode == 2


def test_training_into_an_unrelated_directory_is_refused_unless_forced(cli, tmp_path):
    """Only a new, empty or earlier bpe-train directory is written; another project's vocab.json is not
    replaced by accident (bm25 index refuses a foreign directory too). --force writes anyway."""
    other = tmp_path / "project"
    other.mkdir()
    (other / "vocab.json").write_text('{"mine": 1}')
    (other / "notes.txt").write_text("keep me")
    (tmp_path / "c.txt").write_text("the cat sat on the mat\n" * 20)
    r = cli("bpe-train", str(tmp_path / "c.txt"), "-o", str(other), "--vocab-size", "260")
    assert r.returncode == 2
    assert f"{other} is not empty and not a tokenizer output (it holds notes.txt)".encode() in r.stderr
    assert b"--force" in r.stderr and b"Traceback" not in r.stderr
    assert (other / "vocab.json").read_text() == '{"mine": 1}'
    r = cli("bpe-train", str(tmp_path / "c.txt"), "-o", str(other), "--vocab-size", "260", "--force")
    assert r.returncode == 0, r.stderr.decode()
    assert sorted(p.name for p in other.iterdir()) == ["merges.txt", "notes.txt", "tokenizer.json", "vocab.json"]


def test_retraining_into_an_earlier_output_directory_is_allowed(cli, tmp_path):
    (tmp_path / "c.txt").write_text("the cat sat on the mat\n" * 20)
    for size in ("260", "262"):
        r = cli("bpe-train", str(tmp_path / "c.txt"), "-o", str(tmp_path / "tok"), "--vocab-size", size)
        assert r.returncode == 0, r.stderr.decode()
    assert sorted(p.name for p in (tmp_path / "tok").iterdir()) == ["merges.txt", "tokenizer.json", "vocab.json"]
