"""nlpkit's BPE trainer gives HF tokenizers' vocabulary and merges, in order (issue 5 acceptance)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nlpkit.bpe import trainer as trainer_mod
from nlpkit.bpe.pretokenize import GPT4_PATTERN, PreTokenizer
from nlpkit.bpe.tokenizer import Tokenizer
from nlpkit.bpe.trainer import count_pieces, train_bpe
from nlpkit.errors import NlpkitError, UsageError

tokenizers = pytest.importorskip("tokenizers")
EOT = "<|endoftext|>"


def hf_train(files: list[Path], vocab_size: int, min_frequency: int = 2, specials=(EOT,),
             pattern: str = "gpt2", add_prefix_space: bool = False, **trainer_kw):
    """HF's BpeTrainer as the issue states it -> (vocab dict, merges list of tuples, Tokenizer)."""
    from tokenizers import Regex, Tokenizer as HFTokenizer, decoders, models, pre_tokenizers, trainers

    tok = HFTokenizer(models.BPE())
    if pattern == "gpt2":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space)
    elif pattern == "none":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space, use_regex=False)
    else:
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(pattern), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                  special_tokens=list(specials), show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), **trainer_kw)
    tok.train([str(f) for f in files], trainer)
    model = json.loads(tok.to_str())["model"]
    return model["vocab"], [tuple(m) for m in model["merges"]], tok


def assert_same_training(files, vocab_size, **kw):
    vocab, merges, _ = hf_train(files, vocab_size, **kw)
    kw.setdefault("min_frequency", 2)
    specials = kw.pop("specials", (EOT,))
    mine = train_bpe(files, vocab_size, special_tokens=specials, **kw)
    assert mine.merges == merges
    assert mine.vocab == vocab
    return mine


@pytest.fixture(scope="module")
def shakespeare(shared_data) -> Path:
    return shared_data / "tinyshakespeare" / "input.txt"


@pytest.fixture(scope="module")
def shakespeare_slice(shakespeare, tmp_path_factory) -> Path:
    """The first 8,000 lines (about 250 KB): enough for the option variants, quick to train."""
    with open(shakespeare, encoding="utf-8", newline="\n") as f:
        lines = f.readlines()[:8000]
    path = tmp_path_factory.mktemp("bpe") / "slice.txt"
    path.write_text("".join(lines), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def shakespeare_8000(shakespeare) -> tuple[Tokenizer, object]:
    vocab, merges, hf = hf_train([shakespeare], 8000)
    mine = train_bpe([shakespeare], 8000, min_frequency=2, special_tokens=[EOT])
    return mine, (vocab, merges, hf)


def test_bpe_matches_hf_tinyshakespeare_vocab_1000(shakespeare):
    mine = assert_same_training([shakespeare], 1000)
    assert len(mine.merges) == 1000 - 257
    assert mine.merges[:3] == [("Ġ", "t"), ("h", "e"), ("Ġ", "a")]


def test_bpe_matches_hf_tinyshakespeare_vocab_8000(shakespeare_8000):
    mine, (vocab, merges, _) = shakespeare_8000
    assert mine.merges == merges and mine.vocab == vocab
    assert mine.vocab_size == 8000 and mine.special_tokens == {EOT: 0}


def test_bpe_matches_hf_gutenberg_novel_vocab_16000(shared_data):
    novel = shared_data / "gutenberg" / "766-0.txt"  # CRLF lines and a BOM, kept as HF keeps them
    mine = assert_same_training([novel], 16000)
    assert mine.vocab_size == 16000


def test_bpe_min_frequency_stops_short_like_hf(shakespeare_slice):
    mine = assert_same_training([shakespeare_slice], 4000, min_frequency=10)
    assert mine.vocab_size < 8000


def test_bpe_matches_hf_gpt4_none_patterns_and_prefix_space(shakespeare_slice):
    assert_same_training([shakespeare_slice], 1500, pattern=GPT4_PATTERN)
    assert_same_training([shakespeare_slice], 1000, add_prefix_space=True)
    assert_same_training([shakespeare_slice], 600, pattern="none")


def test_bpe_matches_hf_max_token_length(shakespeare_slice):
    mine = assert_same_training([shakespeare_slice], 2000, max_token_length=4)
    assert max(len(t) for t in mine.vocab if t != EOT) <= 4


def test_bpe_matches_hf_multilingual_no_specials(shared_data):
    files = [shared_data / "multilingual" / n for n in
             ("newstest2021.ja-en.src.ja", "florestest2021.hi-bn.src.hi")]
    assert_same_training(files, 1500, specials=(), min_frequency=0)


def test_trained_tokenizer_json_encodes_like_hf(shakespeare_8000, shared_data, shakespeare, tmp_path):
    """Our tokenizer.json loads in HF tokenizers; every line of multilingual + tinyshakespeare
    encodes to the same ids there and in nlpkit."""
    from tokenizers import Tokenizer as HFTokenizer

    mine, _ = shakespeare_8000
    mine.save(tmp_path)
    hf = HFTokenizer.from_file(str(tmp_path / "tokenizer.json"))
    lines: list[str] = []
    for f in sorted((shared_data / "multilingual").iterdir()) + [shakespeare]:
        with open(f, encoding="utf-8", newline="\n") as fh:
            lines += fh.readlines()
    lines.append(f"two {EOT} specials{EOT}\n")
    expected = [e.ids for e in hf.encode_batch(lines)]
    got = [mine.encode(line) for line in lines]
    assert got == expected
    assert hf.decode(got[-1], skip_special_tokens=False) == mine.decode(got[-1])
    merges_txt = (tmp_path / "merges.txt").read_text(encoding="utf-8").split("\n")
    assert merges_txt[0] == "#version: 0.2" and merges_txt[1] == "Ġ t"


def test_texts_and_streams_train_like_files(shakespeare_slice):
    text = shakespeare_slice.read_text(encoding="utf-8")
    a = train_bpe([shakespeare_slice], 600, special_tokens=[EOT])
    b = train_bpe([text[:100_000], text[100_000:]], 600, special_tokens=[EOT])  # cut mid-line
    with open(shakespeare_slice, "rb") as f:
        c = train_bpe([f], 600, special_tokens=[EOT])
    d = train_bpe([str(shakespeare_slice)], 600, special_tokens=[EOT])  # a str naming a file
    assert a.merges == c.merges == d.merges
    assert len(b.merges) == len(a.merges)  # a text is its own sequence of lines


def test_parallel_counting_equals_serial(shared_data, monkeypatch):
    files = [shared_data / "multilingual" / "newstest2021.de-en.src.de", shared_data / "gutenberg" / "105.txt"]
    pre = PreTokenizer.from_pattern("gpt2")
    serial = count_pieces(files, pre, workers=1)
    monkeypatch.setattr(trainer_mod, "_BLOCK_BYTES", 50_000)  # many blocks, cut mid-file
    monkeypatch.setattr(trainer_mod, "_PARALLEL_MIN_BYTES", 1)
    assert count_pieces(files, pre, workers=2) == serial


def test_tie_break_smallest_pair_ids():
    # 'ab' and 'cd' both occur twice; ('a','b') has the smaller ids, so it merges first.
    tok = train_bpe(["cd ab\n", "ab cd\n"], 256 + 2)
    assert tok.merges == [("a", "b"), ("c", "d")]


def test_bad_inputs_raise_clear_errors(tmp_path):
    with pytest.raises(UsageError, match="minimum 258"):
        train_bpe(["x"], 257, special_tokens=["<a>", "<b>"])
    with pytest.raises(UsageError, match="does not compile"):
        train_bpe(["x"], 300, pattern="(unclosed")
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    with pytest.raises(NlpkitError, match="empty corpus"):
        train_bpe([empty], 300)
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine\nstill fine\nbad \xff byte\n")
    with pytest.raises(NlpkitError, match=r"bad.txt, line 3: invalid UTF-8"):
        train_bpe([bad], 300)
