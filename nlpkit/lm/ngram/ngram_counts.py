"""Counting the n-grams of a corpus, one sentence a line, as KenLM's ``lmplz`` reads it.

Text is split into lines, and lines into words on ASCII whitespace only (``lmplz`` splits on
NUL, tab, CR, LF and space: a no-break space or U+3000 stays inside a word). Each line is a
sentence ``<s> w1 ... wn </s>`` (an empty line too); every k-gram, k = 1..order, that does
not cross a sentence is counted, ``<s>`` only at its start. Word ids follow KenLM's:
``<unk>`` 0, ``<s>`` 1, ``</s>`` 2, then words in order of first appearance.

The words come from the streaming counting core (`BlockEncoder` in whitespace mode, blocks of
2 MB); the sentences are kept as one int32 sequence (4 bytes a token, 1 more for the position
in the sentence) and counted one order at a time. A k-gram is one int64 key over the order below,

    key = (row of its first k-1 words in the sorted (k-1)-gram table) * V + its last word,

so keys sort as the n-grams do, lexicographically. One sort of an order's keys (`sorted_unique`)
gives its table, its counts and the row of the k-gram at every position: the next order's keys,
and the row of each k-gram's suffix (its last k-1 words), the join Kneser-Ney needs:

    "a b\\n" -> ids [3 4] -> sentence [1 3 4 2] -> bigram keys 1V+3, 3V+4, 4V+2
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import numpy as np

from nlpkit.errors import NlpkitError, UsageError
from nlpkit.lm.ngram.heap import trim_heap

UNK, BOS, EOS = 0, 1, 2
SPECIALS = ("<unk>", "<s>", "</s>")
# lmplz's word delimiters (corpus_count.cc): NUL, tab, LF, CR, space. \v and \f stay in words.
TRAIN_TOKEN_PATTERN = r"[^\x00\t\n\r ]+"


@dataclass
class NgramCounts:
    """Raw counts of every k-gram, k = 1..order, as sorted keys over the order below.

    ``vocab[i]`` is word i (ids as KenLM: <unk>, <s>, </s>, then first appearance).
    ``keys[k-1]`` int64 [n_k], sorted: `ngram_keys` of (row of the first k-1 words in order k-1,
    last word); order 1 is the whole vocabulary by id, <unk> and <s> with count 0.
    ``counts[k-1]`` [n_k] (int32 while every count fits, else int64); ``suffix[k-1]`` [n_k] (int32 while rows fit)
    the row in order k-1 of each k-gram's last k-1 words (empty for k = 1). ``rows(k)`` gives the
    word ids themselves, a slice at a time.
    """

    order: int
    vocab: list[str]
    keys: list[np.ndarray] = field(default_factory=list)
    counts: list[np.ndarray] = field(default_factory=list)
    suffix: list[np.ndarray] = field(default_factory=list)
    sentences: int = 0
    tokens: int = 0
    skipped_symbols: int = 0

    def rows(self, k: int) -> "NgramRows":
        return NgramRows(self.keys, k, len(self.vocab))

    def sizes(self) -> list[int]:
        return [len(key) for key in self.keys]


class NgramRows:
    """The word ids of order k's n-grams, made a slice at a time from the keys (memory: a whole
    table of 5-grams would take 20 bytes a row). ``rows[a:b] -> [b - a, k] int32``."""

    def __init__(self, keys: list[np.ndarray], k: int, vocab_size: int) -> None:
        self.keys, self.k, self.V = keys, k, vocab_size

    def __len__(self) -> int:
        return len(self.keys[self.k - 1])

    def __getitem__(self, sl: slice) -> np.ndarray:
        key = self.keys[self.k - 1][sl]
        out = np.empty((len(key), self.k), dtype=np.int32)
        for j in range(self.k - 1, 0, -1):               # last word, then down the prefixes
            prefix = key // self.V
            last = prefix * self.V                       # (key - prefix * V: no second division)
            np.subtract(key, last, out=last)
            out[:, j] = last
            key = self.keys[j - 1].take(prefix)
        out[:, 0] = key                                  # an order-1 key is the word id
        return out


# ----------------------------------------------------------------------------- keys

def ngram_keys(prefix_rows: np.ndarray, last: np.ndarray, vocab_size: int) -> np.ndarray:
    """One int64 key per n-gram: (row of its first k-1 words in the (k-1)-gram table) * V + last word.

    With both tables sorted lexicographically the keys are sorted too: ``(2, 7), V=10 -> 27``.
    """
    keys = prefix_rows.astype(np.int64)                 # a copy, then in place: one array, not four
    keys *= vocab_size
    keys += last
    return keys


def row_dtype(n: int) -> type:
    """int32 for row numbers (and counts) below `n` while they fit: half the memory of int64."""
    return np.int32 if n < 2**31 else np.int64


def sorted_unique(keys: np.ndarray | list[np.ndarray], weights: np.ndarray | None = None
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Non-negative int64 keys [n] -> (the distinct keys sorted [u], how often each occurs (int32 while
    n fits) or the sum of its `weights` (int64) [u], the row of every key in them [n]). `keys` is
    consumed (sorted in place); given as ``[keys]``, the list is emptied and the keys let go as soon as
    their table is made (memory: the caller holds no reference to them).

    One sort: when a key and its position fit in 64 bits together they are sorted as one uint64
    (numpy's vectorized sort, ~5x faster than an argsort), else argsort.
    ``[7, 3, 7] -> [3, 7], [1, 2], [1, 0, 1]``
    """
    if isinstance(keys, list):
        keys = keys.pop()
    n = len(keys)
    if n == 0:
        return keys, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int32)
    packed = None
    pos_bits = max(1, (n - 1).bit_length())
    if int(keys.max()).bit_length() + pos_bits <= 64:
        packed = keys.view(np.uint64)
        packed <<= np.uint64(pos_bits)
        for c in range(0, n, 1 << 20):                             # (no [n] array of positions)
            packed[c:c + (1 << 20)] |= np.arange(c, min(c + (1 << 20), n), dtype=np.uint64)
        packed.sort()
        order = np.empty(n, dtype=row_dtype(n))                    # (int32: memory for what follows)
        np.bitwise_and(packed, np.uint64((1 << pos_bits) - 1), out=order, casting="unsafe")
        packed >>= np.uint64(pos_bits)
    else:
        order = np.argsort(keys)
        keys = keys[order]
    del packed                                                     # (`keys` is the sorted keys)
    new = np.empty(n, dtype=bool)                                  # [n] first of its run of equal keys
    new[0] = True
    np.not_equal(keys[1:], keys[:-1], out=new[1:])
    table = keys[new]                                              # [u]
    del keys                                                       # (memory for what follows)
    starts = np.flatnonzero(new)                                   # [u]
    if weights is None:                                            # run lengths, at most n
        counts = np.empty(len(starts), dtype=row_dtype(n))
        np.subtract(starts[1:], starts[:-1], out=counts[:-1])
        counts[-1] = n - starts[-1]
    else:
        counts = np.add.reduceat(weights[order], starts, dtype=np.int64)
    del starts
    rank = np.cumsum(new, dtype=row_dtype(len(table)))
    del new
    rank -= 1
    rows = np.empty(n, dtype=rank.dtype)
    rows[order] = rank
    return table, counts, rows


def narrow(counts: np.ndarray) -> np.ndarray:
    """int64 counts as int32 when they all fit (half the memory)."""
    return counts.astype(np.int32, copy=False) if counts.max(initial=0) < 2**31 else counts


def count_orders(sentences: list[np.ndarray], order: int, vocab_size: int
                 ) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
    """The padded sentences, ``[seq, offset]`` [T] (word ids, and each position's offset in its sentence,
    which may be clipped at `order`) -> keys, counts and suffix rows of every order (`NgramCounts`' fields).
    The list is emptied (memory: the sentences are let go before the last order is sorted).

    Order k's keys come from the row of the (k-1)-gram ending one position earlier and the word
    here; the k-gram's suffix is the (k-1)-gram ending here.
    """
    seq, offset = sentences
    sentences.clear()
    V = vocab_size
    unigrams = np.bincount(seq, minlength=V)              # <s> only ever starts a sentence: never predicted
    unigrams[BOS] = 0
    keys, counts, suffix = [np.arange(V, dtype=np.int64)], [unigrams], [np.zeros(0, dtype=np.int32)]
    rows = seq                                            # [T] row of the (k-1)-gram ending at each position
    ends = np.flatnonzero(offset >= 1)                    # [n] positions where a bigram ends
    if len(seq) < 2**31:
        ends = ends.astype(np.int32)                      # half the memory (numpy indexes with it as well)
    for k in range(2, order + 1):
        if k > 2:                                         # where a k-gram ends: among where a (k-1)-gram does
            ends = ends[offset[ends] >= k - 1]
            trim_heap()                                   # (the order below's sort)
        ends -= 1                                         # (in place, as below: no copy of n positions)
        prefix = rows[ends]
        ends += 1
        keys_k = [ngram_keys(prefix, seq[ends], V)]
        del prefix
        if k == order:                                    # the last order: only the suffix rows are still needed
            suffix_rows = rows[ends]
            del seq, offset, rows, ends
            table, c, at = sorted_unique(keys_k)
            suf = np.empty(len(table), dtype=suffix_rows.dtype)
            suf[at] = suffix_rows
            del at, suffix_rows
            keys.append(table)
            counts.append(narrow(c))
            suffix.append(suf)
            break
        table, c, at = sorted_unique(keys_k)
        suf = np.empty(len(table), dtype=rows.dtype)
        suf[at] = rows[ends]                              # every k-gram at a row has the same suffix
        if rows is seq or rows.dtype != at.dtype:         # order k+1 reads only positions that end a k-gram
            rows = np.empty(len(seq), dtype=at.dtype)
        rows[ends] = at                                   # (the other positions keep stale rows, never read)
        del at
        keys.append(table)
        counts.append(narrow(c))
        suffix.append(suf)
    return keys, counts, suffix


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
        raise UsageError(f"`order` must be at least 1, got {order}")
    from nlpkit.stats.counting import BREAK_LINE, BlockEncoder, auto_jobs
    from nlpkit.text import WordTokenizer

    encoder = BlockEncoder(WordTokenizer(TRAIN_TOKEN_PATTERN, lowercase=False), BREAK_LINE)
    lut = np.zeros(0, dtype=np.int32)        # encoder id -> model id
    vocab: dict[str, int] = {w: i for i, w in enumerate(SPECIALS)}
    seqs, offsets = [], []                   # each block's padded sentences
    clip = np.uint8 if order < 255 else np.int32
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
        seqs.append(seq)
        offsets.append(np.minimum(offset, order).astype(clip))
        if progress is not None:
            progress(n_chars)
    if result.skipped_symbols and on_symbol is not None:
        on_symbol(result.skipped_symbols)
    if result.sentences == 0:
        raise EmptyCorpus(f"{', '.join(_names(paths))}: empty corpus, no lines to count")
    result.vocab = list(vocab)
    del encoder, vocab
    sentences = [np.concatenate(seqs), np.concatenate(offsets)]
    del seqs, offsets
    trim_heap()                                           # the blocks' arrays (see `trim_heap`)
    result.keys, result.counts, result.suffix = count_orders(sentences, order, len(result.vocab))
    trim_heap()                                           # the sorts' arrays
    return result


def _names(paths: Sequence) -> list[str]:
    return ["<stdin>" if p == "-" else str(p) for p in paths]      # a path, '-' or a shard


class EmptyCorpus(NlpkitError):
    """No line to count."""


__all__ = ["NgramCounts", "NgramRows", "count_ngrams", "count_orders", "ngram_keys", "sorted_unique",
           "sentences_array", "UNK", "BOS", "EOS", "SPECIALS", "TRAIN_TOKEN_PATTERN"]
