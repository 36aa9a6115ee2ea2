"""Counting the n-grams of a corpus, one sentence a line, as KenLM's ``lmplz`` reads it.

Text is split into lines, and lines into words on ASCII whitespace only (``lmplz`` splits on
NUL, tab, CR, LF and space: a no-break space or U+3000 stays inside a word). Each line is a
sentence ``<s> w1 ... wn </s>`` (an empty line too); every k-gram, k = 1..order, that does
not cross a sentence is counted, ``<s>`` only at its start. Word ids follow KenLM's:
``<unk>`` 0, ``<s>`` 1, ``</s>`` 2, then words in order of first appearance.

The words come from the streaming counting core (`BlockEncoder` in whitespace mode, blocks of
2 MB); each block's n-grams are counted with numpy (words packed two to a uint64, lexsort) and
the partial counts merged as they grow, so memory follows the number of distinct n-grams:

    "a b\\n" -> ids [3 4]  -> sentence [1 3 4 2] -> bigrams (1,3) (3,4) (4,2)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import numpy as np

from nlpkit.errors import NlpkitError, UsageError

UNK, BOS, EOS = 0, 1, 2
COUNT = np.int32                # partial counts (a block's n-gram is seen < 2**31 times); results are int64
SPECIALS = ("<unk>", "<s>", "</s>")
# lmplz's word delimiters (corpus_count.cc): NUL, tab, LF, CR, space. \v and \f stay in words.
TRAIN_TOKEN_PATTERN = r"[^\x00\t\n\r ]+"


@dataclass
class NgramCounts:
    """Raw counts of every k-gram, k = 1..order.

    ``vocab[i]`` is word i (ids as KenLM: <unk>, <s>, </s>, then first appearance);
    ``ngrams[k-1]`` is an int32 array [n_k, k] of word ids, sorted lexicographically, and
    ``counts[k-1]`` its int64 counts [n_k]. Unigrams list the whole vocabulary by id
    (<unk> and <s> with count 0).
    """

    order: int
    vocab: list[str]
    ngrams: list[np.ndarray] = field(default_factory=list)
    counts: list[np.ndarray] = field(default_factory=list)
    sentences: int = 0
    tokens: int = 0
    skipped_symbols: int = 0


# ----------------------------------------------------------------------------- packing

def _bits(vocab_size: int) -> int:
    """Bits per word id for ids below `vocab_size`."""
    return max(1, int(vocab_size - 1).bit_length())


def _pack(grams: np.ndarray, bits: int = 32) -> tuple[np.ndarray, ...]:
    """[n, k] word ids (< 2**bits) -> uint64 columns holding 64 // bits words each, first word highest.

    Tuples of columns compare as the word sequences do: ``[[1, 2, 3]], bits 32 -> (1<<32|2, 3<<32)``;
    with a vocabulary under 65,536 words (16 bits) a 4-gram is one uint64.
    """
    g = grams.astype(np.uint64)
    per = 64 // bits
    cols = []
    for j in range(0, g.shape[1], per):
        c = np.zeros(len(g), dtype=np.uint64)
        for i in range(per):
            if j + i < g.shape[1]:
                c |= g[:, j + i] << np.uint64(bits * (per - 1 - i))
        cols.append(c)
    return tuple(cols)


def _unpack(cols: Sequence[np.ndarray], k: int, bits: int = 32) -> np.ndarray:
    out = np.empty((len(cols[0]) if cols else 0, k), dtype=np.int32)
    per = 64 // bits
    mask = np.uint64((1 << bits) - 1)
    for j in range(k):
        out[:, j] = (cols[j // per] >> np.uint64(bits * (per - 1 - j % per))) & mask
    return out


def _unique_sum(cols, counts: np.ndarray) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """Sort packed n-grams and add the counts of equal ones. A list `cols` is consumed (its columns
    replaced one at a time by their sorted copies: less memory at once)."""
    if len(counts) == 0:
        return tuple(cols), counts
    cols = list(cols)
    order = np.argsort(cols[0]) if len(cols) == 1 else np.lexsort(cols[::-1])
    for j in range(len(cols)):
        cols[j] = cols[j][order]
    counts = counts[order]
    del order
    new = np.ones(len(counts), dtype=bool)
    diff = np.zeros(len(counts) - 1, dtype=bool)
    for c in cols:
        diff |= c[1:] != c[:-1]
    new[1:] = diff
    del diff
    starts = np.flatnonzero(new)
    del new
    for j in range(len(cols)):
        cols[j] = cols[j][starts]
    return tuple(cols), np.add.reduceat(counts, starts)


class _OrderAccumulator:
    """Partial counts of one order (packed at some bits per word), merged when the pending part
    outgrows the merged part; parts packed narrower are repacked when the vocabulary outgrows them."""

    def __init__(self, k: int) -> None:
        self.k = k
        self.main: tuple[tuple[np.ndarray, ...], np.ndarray, int] | None = None
        self.pending: list[tuple[tuple[np.ndarray, ...], np.ndarray, int]] = []
        self.pending_rows = 0

    def add(self, grams: np.ndarray, bits: int) -> None:
        cols, counts = _unique_sum(_pack(grams, bits), np.ones(len(grams), dtype=COUNT))
        self.pending.append((cols, counts, bits))
        self.pending_rows += len(counts)
        if self.main is None or self.pending_rows > len(self.main[1]):
            self._merge()

    def _merge(self) -> None:
        parts = self.pending + ([self.main] if self.main is not None else [])
        if not parts:
            return
        self.pending, self.pending_rows, self.main = [], 0, None
        bits = max(p[2] for p in parts)
        parts = [p if p[2] == bits else (_pack(_unpack(p[0], self.k, p[2]), bits), p[1], bits) for p in parts]
        cols = [np.concatenate([p[0][j] for p in parts]) for j in range(len(parts[0][0]))]
        counts = np.concatenate([p[1] for p in parts])
        del parts                                          # only the concatenation is left
        cols, counts = _unique_sum(cols, counts)
        if counts.dtype != np.int64 and counts.max(initial=0) >= 2**30:   # room to add: go 64-bit
            counts = counts.astype(np.int64)
        self.main = (cols, counts, bits)

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        self._merge()
        if self.main is None:
            return np.zeros((0, self.k), dtype=np.int32), np.zeros(0, dtype=np.int64)
        return _unpack(self.main[0], self.k, self.main[2]), self.main[1].astype(np.int64)


# ----------------------------------------------------------------------------- sentences

def sentences_array(ids: np.ndarray, line_of: np.ndarray, n_lines: int) -> tuple[np.ndarray, np.ndarray]:
    """Word ids with their line numbers -> the padded sequence and each position's offset in its sentence.

    ``ids [5 6 7], lines [0 0 2], n_lines 3 -> seq [1 5 6 2 1 2 1 7 2], offset [0 1 2 3 0 1 0 1 2]``
    """
    per_line = np.bincount(line_of, minlength=n_lines).astype(np.int64)   # [L]
    lengths = per_line + 2
    starts = np.cumsum(lengths) - lengths                                  # [L] where each <s> goes
    seq = np.empty(int(lengths.sum()), dtype=np.int32)
    seq[starts] = BOS
    seq[starts + lengths - 1] = EOS
    first_of_line = np.cumsum(per_line) - per_line                         # [L] index in ids
    rank = np.arange(len(ids)) - first_of_line[line_of]
    seq[starts[line_of] + 1 + rank] = ids
    offset = np.arange(len(seq)) - np.repeat(starts, lengths)
    return seq, offset


def windows(seq: np.ndarray, offset: np.ndarray, k: int) -> np.ndarray:
    """Every k-gram of the padded sequence inside one sentence, <s> never predicted: [n, k] int32."""
    ends = np.flatnonzero(offset >= max(k - 1, 1))
    return np.stack([seq[ends - (k - 1 - j)] for j in range(k)], axis=1) if len(ends) else \
        np.zeros((0, k), dtype=np.int32)


# ----------------------------------------------------------------------------- the corpus

def whitespace_blocks(paths: Sequence[str], errors: str = "strict") -> Iterable[tuple[bool, str]]:
    """(block ends with a newline, text) for every block of every file; each file ends its last line."""
    from nlpkit.stats.counting import iter_blocks

    for path in paths:
        last = None
        for block in iter_blocks(path, errors=errors, keep_bom=True):
            if last is not None:
                yield True, last
            last = block
        if last is not None:
            yield last.endswith("\n"), last


def count_ngrams(paths: Sequence[str], order: int, *, lowercase: bool = False,
                 transform: Callable[[str], str] | None = None, errors: str = "strict",
                 jobs: int | None = None, progress=None, on_symbol=None) -> NgramCounts:
    """Stream `paths` (files or '-') and count every k-gram, k = 1..order (see the module docstring).

    `transform` rewrites each block's text first (e.g. BPE pieces joined by spaces, line by line);
    `lowercase` lowercases it. ``<s>``, ``</s>`` and ``<unk>`` in the text are dropped (as
    ``lmplz --skip_symbols``); `on_symbol(n)` hears how many were.
    """
    if order < 1:
        raise UsageError(f"--order must be at least 1, got {order}")
    from nlpkit.stats.counting import BREAK_LINE, BlockEncoder, auto_jobs
    from nlpkit.text import WordTokenizer

    encoder = BlockEncoder(WordTokenizer(TRAIN_TOKEN_PATTERN, lowercase=False), BREAK_LINE)
    lut = np.zeros(0, dtype=np.int32)        # encoder id -> model id
    vocab: dict[str, int] = {w: i for i, w in enumerate(SPECIALS)}
    accs = [_OrderAccumulator(k) for k in range(1, order + 1)]
    unigrams = np.zeros(len(SPECIALS), dtype=np.int64)
    result = NgramCounts(order=order, vocab=[])

    def texts():
        for ends_nl, text in whitespace_blocks(paths, errors):
            if lowercase:
                text = text.lower()
            if transform is not None:
                text = transform(text)
            yield (ends_nl, len(text)), text

    n_jobs = auto_jobs(list(paths), jobs)
    for (ends_nl, n_chars), ids, seg, n_seg in encoder.encode_many(texts(), jobs=n_jobs):
        if len(encoder) > len(lut):
            words = encoder.words[len(lut):]
            keep = encoder.keep[len(lut):]                  # the line break has an id too: never a word
            add = np.fromiter((vocab.setdefault(w, len(vocab)) if kept else -1 for w, kept in zip(words, keep)),
                              dtype=np.int32, count=len(words))
            lut = np.concatenate([lut, add])
        ids = lut[ids]
        special = ids < 3
        if special.any():
            result.skipped_symbols += int(special.sum())
            ids, seg = ids[~special], seg[~special]
        n_lines = n_seg - 1 if ends_nl else n_seg
        if n_lines <= 0:
            continue
        seq, offset = sentences_array(ids, seg, n_lines)
        result.sentences += n_lines
        result.tokens += len(ids)
        bits = _bits(len(vocab))
        unigrams = np.concatenate([unigrams, np.zeros(len(vocab) - len(unigrams), dtype=np.int64)])
        unigrams += np.bincount(seq[offset >= 1], minlength=len(vocab))
        for k in range(2, order + 1):
            accs[k - 1].add(windows(seq, offset, k), bits)
        if progress is not None:
            progress(n_chars)
    if result.skipped_symbols and on_symbol is not None:
        on_symbol(result.skipped_symbols)
    result.vocab = list(vocab)
    for k in range(1, order + 1):
        if k == 1:                           # every word id, <unk> and <s> with count 0
            grams = np.arange(len(vocab), dtype=np.int32)[:, None]
            counts = np.concatenate([unigrams, np.zeros(len(vocab) - len(unigrams), dtype=np.int64)])
        else:
            grams, counts = accs[k - 1].result()
            accs[k - 1] = None                   # the packed copy: memory
        result.ngrams.append(grams)
        result.counts.append(counts)
    if result.sentences == 0:
        raise NlpkitError(f"{', '.join(_names(paths))}: empty corpus, no lines to count")
    return result


def count_shard(shard, order: int, lowercase: bool = False, transform: Callable[[str], str] | None = None,
                errors: str = "strict") -> NgramCounts:
    """`count_ngrams` of one shard (`nlpkit.distributed`) or a list of them; lines never cross shards."""
    group = list(shard) if isinstance(shard, (list, tuple)) else [shard]
    return count_ngrams(group, order, lowercase=lowercase, transform=transform, errors=errors, jobs=1)


def merge_counts(parts: list[NgramCounts]) -> NgramCounts:
    """Sum shards' counts; ids stay in first-appearance order over the parts in order."""
    vocab: dict[str, int] = {}
    luts = [np.fromiter((vocab.setdefault(w, len(vocab)) for w in p.vocab), dtype=np.int64, count=len(p.vocab))
            for p in parts]
    order = parts[0].order
    out = NgramCounts(order=order, vocab=list(vocab), sentences=sum(p.sentences for p in parts),
                      tokens=sum(p.tokens for p in parts),
                      skipped_symbols=sum(p.skipped_symbols for p in parts))
    for k in range(1, order + 1):
        if k == 1:
            full = np.zeros(len(vocab), dtype=np.int64)
            for p, lut in zip(parts, luts):
                full[lut[p.ngrams[0][:, 0]]] += p.counts[0]
            out.ngrams.append(np.arange(len(vocab), dtype=np.int32)[:, None])
            out.counts.append(full)
            continue
        grams = np.concatenate([lut[p.ngrams[k - 1]] for p, lut in zip(parts, luts)])
        bits = _bits(len(vocab))
        cols, counts = _unique_sum(_pack(grams.reshape(-1, k), bits),
                                   np.concatenate([p.counts[k - 1] for p in parts]).astype(np.int64))
        out.ngrams.append(_unpack(cols, k, bits) if len(counts) else np.zeros((0, k), dtype=np.int32))
        out.counts.append(counts)
    return out


def _names(paths: Sequence[str]) -> list[str]:
    return ["<stdin>" if p == "-" else p for p in paths]


__all__ = ["NgramCounts", "count_ngrams", "sentences_array", "windows", "UNK", "BOS", "EOS", "SPECIALS",
           "TRAIN_TOKEN_PATTERN"]
