"""n-gram training internals: counting by keys over the order below, merging shards, chunked writing."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np

from nlpkit.lm.ngram.ngram_count_shards import merge_counts
from nlpkit.lm.ngram.ngram_counts import count_ngrams, sorted_unique
from nlpkit.lm.ngram.train import train_ngram

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "ngram"


def test_sorted_unique_gives_table_counts_and_rows():
    table, counts, rows = sorted_unique(np.array([7, 3, 7], dtype=np.int64))
    assert table.tolist() == [3, 7] and counts.tolist() == [1, 2] and rows.tolist() == [1, 0, 1]
    big = np.array([2**62, 5, 2**62], dtype=np.int64)               # too wide to pack with positions: argsort
    table, counts, rows = sorted_unique(big)
    assert table.tolist() == [5, 2**62] and counts.tolist() == [1, 2] and rows.tolist() == [1, 0, 1]


def _python_counts(path: Path, order: int) -> list[Counter]:
    """Every k-gram of `<s> line </s>` (lines split on ASCII whitespace, as lmplz), <s> never predicted."""
    text = path.read_bytes().decode("utf-8").replace("\r\n", "\n")
    out = [Counter() for _ in range(order)]
    for line in text.split("\n")[:-1] if text.endswith("\n") else text.split("\n"):
        sent = ["<s>", *line.replace("\t", " ").replace("\r", " ").replace("\x00", " ").split(" "), "</s>"]
        sent = [w for w in sent if w]
        for k in range(1, order + 1):
            for end in range(max(k - 1, 1), len(sent)):
                out[k - 1][tuple(sent[end - k + 1:end + 1])] += 1
    return out


def test_counts_equal_a_python_count_of_every_sentence():
    counts = count_ngrams([str(FIX / "train.txt")], 4)
    want = _python_counts(FIX / "train.txt", 4)
    for k in range(1, 5):
        rows = counts.rows(k)[:len(counts.keys[k - 1])]
        got = {tuple(counts.vocab[i] for i in row): int(c) for row, c in zip(rows.tolist(), counts.counts[k - 1])}
        got = {g: c for g, c in got.items() if c}                  # <unk> and <s> are unigram lines of count 0
        assert got == dict(want[k - 1]), k
        if k > 1:                                                  # the suffix row names the last k-1 words
            lower = counts.rows(k - 1)[:len(counts.keys[k - 2])]
            assert np.array_equal(lower[counts.suffix[k - 1]], rows[:, 1:])


def test_shard_counts_merge_to_the_whole_corpus_counts(tmp_path):
    lines = (FIX / "train.txt").read_bytes().split(b"\n")
    parts = []
    for i, (a, b) in enumerate([(0, 40), (40, 41), (41, len(lines))]):
        p = tmp_path / f"part{i}.txt"
        p.write_bytes(b"\n".join(lines[a:b]) + (b"\n" if b < len(lines) else b""))
        parts.append(count_ngrams([str(p)], 4))
    whole = count_ngrams([str(FIX / "train.txt")], 4)
    merged = merge_counts([merge_counts(parts[:2]), parts[2]])
    assert merged.vocab == whole.vocab and merged.sentences == whole.sentences and merged.tokens == whole.tokens
    for k in range(4):
        for a, b in ((merged.keys, whole.keys), (merged.counts, whole.counts), (merged.suffix, whole.suffix)):
            assert np.array_equal(a[k], b[k]), k


def test_arpa_written_in_tiny_chunks_is_the_same_file(tmp_path, monkeypatch):
    """Block and chunk boundaries anywhere (values formatted per block of lines, in chunks; the blocks made by
    three threads against one)."""
    import nlpkit.lm.ngram.arpa as arpa

    train_ngram([str(FIX / "train.txt")], str(tmp_path / "a.arpa"), order=3, jobs=1)
    train_ngram([str(FIX / "train.txt")], str(tmp_path / "a.counts"), order=3, smoothing="mle", jobs=1)
    monkeypatch.setattr(arpa, "WRITE_ROWS", 37)
    monkeypatch.setattr(arpa, "FORMAT_CHUNK", 11)
    train_ngram([str(FIX / "train.txt")], str(tmp_path / "b.arpa"), order=3, jobs=3)
    train_ngram([str(FIX / "train.txt")], str(tmp_path / "b.counts"), order=3, smoothing="mle", jobs=3)
    assert (tmp_path / "a.arpa").read_bytes() == (tmp_path / "b.arpa").read_bytes()
    assert (tmp_path / "a.counts").read_bytes() == (tmp_path / "b.counts").read_bytes()


def test_arpa_lines_are_their_strings_one_after_another_whatever_their_lengths():
    """Lines are made by scattering every string's first 16 bytes in line order (what follows a short one is
    overwritten by the next: numpy scatters an index array's elements in order) and the rest of longer ones
    afterwards: strings of 1 to 50 bytes, over three columns, come out joined, as Python joins them. Any
    bytes (UTF-8 words): 16 bytes that read as a signalling NaN are copied as they are."""
    from nlpkit.lm.ngram.arpa import _Heads, _lines, _Strings

    rng = np.random.default_rng(0)
    snan = np.array([0x7FF0000000000001, 0xFFF4000000000000], dtype=np.uint64).tobytes()
    tables = []
    for _ in range(3):
        items = [bytes(rng.integers(1, 256, int(n), dtype=np.uint8)) for n in rng.integers(1, 51, 40)]
        items[0] = snan + items[0]
        tables.append((items, _Heads(_Strings.of(items))))
    rows = [rng.integers(0, 40, 500) for _ in tables]
    want = b"".join(b"".join(items[r[i]] for (items, _), r in zip(tables, rows)) for i in range(500))
    assert _lines([(heads, r) for (_, heads), r in zip(tables, rows)]).tobytes() == want


def test_small_pages_puts_numpys_huge_page_advice_back():
    """Training turns numpy's huge-page advice off (`lm/ngram/heap.py`) and puts it back as it was, whatever
    happens inside."""
    import pytest

    from nlpkit.lm.ngram.heap import small_pages, trim_heap

    try:
        from numpy._core.multiarray import _set_madvise_hugepage
    except ImportError:
        pytest.skip("this numpy has no huge-page switch")
    before = _set_madvise_hugepage(True)
    try:
        with pytest.raises(ZeroDivisionError):
            with small_pages():
                assert _set_madvise_hugepage(False) is False        # off inside (reading it sets it again)
                trim_heap()                                         # (a no-op off glibc)
                1 / 0
        assert _set_madvise_hugepage(True) is True                  # back on after
    finally:
        _set_madvise_hugepage(before)
