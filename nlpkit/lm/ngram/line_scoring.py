"""Perplexity of text under an n-gram model, as KenLM's ``query`` reports it, plus nlpkit's figures.

Each line is a sentence: its words (split on ASCII whitespace, as ``query`` splits them, after
the model's recorded lowercasing / tokenizer) and ``</s>`` are scored with ``<s>`` as the first
history. Per token: log10 p and the length of the n-gram used; totals as ``query`` prints them, and
nlpkit's (`line_totals`): bits per byte count the UTF-8 bytes of the scored lines with their newlines
(what ``</s>`` predicts), so an n-gram model and a neural model compare on the same text. An MLE
model gives probability 0 to an unseen event: its perplexity is infinite and `zero_prob` counts such
tokens.
"""

from __future__ import annotations

import re
from itertools import islice, repeat
from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable, Iterable, Iterator

import numpy as np

from nlpkit.lm.ngram.lookup import split_words
from nlpkit.lm.ngram.ngram_model import NgramModel
from nlpkit.lm.ngram.line_totals import LineSums, LineTotals, NgramPerplexity, collector_paused

_QUERY_SPACES = str.maketrans({"\t": " ", "\n": " ", "\r": " ", "\x0b": " ", "\x0c": " "})
BATCH_LINES = 16384
BATCH_CHARS = 1 << 21              # a batch: at most this many lines, or about this many characters


def query_words(line: str) -> list[str]:
    """Words as ``query`` reads them: split on space, tab, CR, LF, VT and FF only.

    ``"a\\u00a0b  c" -> ["a\\u00a0b", "c"]``
    """
    return [w for w in line.translate(_QUERY_SPACES).split(" ") if w]


class LineScore(tuple):
    """One scored line of a `ScoredBatch`: its words (+ </s>), log10 p, n-gram lengths, OOV mask and
    UTF-8 bytes, each read from the batch when asked (a line costs one small tuple, not five arrays).

    A tuple (batch, first token, end token, line index) underneath, so that `ScoredBatch.lines` makes
    thousands of them in C; read it by its fields."""

    __slots__ = ()

    @property
    def words(self) -> list[str]:
        b, first, end, _ = self
        return b.tokens[first:end - 1] + ["</s>"]

    @property
    def ids(self) -> np.ndarray:
        return self[0].ids[self[1]:self[2]]

    @property
    def log10(self) -> np.ndarray:
        return self[0].log10[self[1]:self[2]]

    @property
    def ngram(self) -> np.ndarray:
        return self[0].ngram[self[1]:self[2]]

    @property
    def oov(self) -> np.ndarray:
        return self[0].oov[self[1]:self[2]]

    @property
    def bytes(self) -> int:
        return self[0].line_bytes()[self[3]]

    def __repr__(self) -> str:
        return f"LineScore(words={self.words!r}, log10={self.log10!r})"


def query_lines(source, errors: str = "strict") -> Iterator:
    """Whether `source` (a path, '-' or a shard) starts a text with a UTF-8 BOM, then its lines as
    KenLM's ``query`` reads them: a BOM stays in the first word, and a CR before the newline stays
    (a word delimiter for ``query``; a byte of the text for bits per byte, as the neural path counts it)."""
    from nlpkit.io import iter_lines

    first = True
    for line in iter_lines(source, errors=errors, keepends=True, strip_bom=False):
        if first:
            yield line.startswith("\ufeff") and getattr(source, "first", True)
            first = False
        yield line[:-1] if line.endswith("\n") else line
    if first:
        yield False


def score_source(model: NgramModel, source, errors: str = "strict",
                 transform: Callable[[str], str] | None = None) -> Iterator["ScoredBatch"]:
    """`score_batches` of a file's lines as `query_lines` reads them; a BOM that starts the text is
    part of the first word, not a byte of the text (the first batch's `bom`)."""
    lines = query_lines(source, errors)
    bom = next(lines)
    for b in score_batches(model, lines, transform):
        b.bom, bom = bom, False
        yield b


def score_shard(shard, model_key: tuple, errors: str = "strict", per_token: bool = False,
                per_line: bool = False) -> list:
    """A Dask task: the shard's lines scored with the model of `model_key` (an `NgramLM.worker_key`, loaded once
    per process by `nlpkit.lm.spec.cached_model`): a `ScoredBatch` a batch with `per_token`, else its `LineSums`
    (with each line's bytes for `per_line`)."""
    from nlpkit.lm.spec import cached_model

    lm = cached_model(*model_key)
    return [b if per_token else b.line_sums(per_line) for b in score_source(lm.model, shard, errors, lm.transform)]


_RESOLVE = object()


def line_transform(model: NgramModel, tokenizer=_RESOLVE) -> Callable[[str], str] | None:
    """The model's recorded text options (lowercase, tokenizer) as a text rewrite; `tokenizer`, when
    given, is the recorded tokenizer already found (`train.recorded_tokenizer`), not looked up again."""
    from nlpkit.lm.ngram.train import recorded_tokenizer, text_transform

    lower = model.options.get("lowercase", "false") == "true"
    if tokenizer is _RESOLVE:
        tokenizer = recorded_tokenizer(model.options, model.source)
    return text_transform(lower, tokenizer)


def score_batches(model: NgramModel, lines: Iterable[str], transform: Callable[[str], str] | None = None
                  ) -> Iterator[ScoredBatch]:
    """Score each line as a sentence, a batch of lines at a time (vectorized over the batch)."""
    it = iter(lines)
    while batch := list(islice(it, BATCH_LINES)):
        cuts = [0]
        if sum(map(len, batch)) >= BATCH_CHARS:          # long lines: cut where BATCH_CHARS is reached
            ends = np.cumsum(np.fromiter(map(len, batch), dtype=np.int64, count=len(batch)))
            while cuts[-1] < len(batch):
                base = ends[cuts[-1] - 1] if cuts[-1] else 0
                cuts.append(min(int(np.searchsorted(ends, base + BATCH_CHARS)) + 1, len(batch)))
        else:
            cuts.append(len(batch))
        for a, b in zip(cuts[:-1], cuts[1:]):
            yield _score_batch(model, batch[a:b], transform)


def score_lines(model: NgramModel, lines: Iterable[str], transform: Callable[[str], str] | None = None
                ) -> Iterator[LineScore]:
    """Score each line as a sentence: one `LineScore` a line (built from `score_batches`)."""
    for batch in score_batches(model, lines, transform):
        yield from batch.lines()


_SEP = "\x00"                                                 # line separator for str.split (a word to split())
# str.split() also splits on these (not query's separators): a batch holding one is split line by line
_SPLIT_ONLY = re.compile("[\x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]")


def _batch_tokens(lines: list[str]) -> tuple[list[str], str]:
    """Each line's words, then a line break that is never a word (returned too): `_SEP` after one
    str.split() of the batch when that splits as query does, else "\n" after each line's words."""
    text = f" {_SEP} ".join(lines)
    if text.isascii():
        splits = not any(c in text for c in "\x1c\x1d\x1e\x1f")
    else:
        splits = _SPLIT_ONLY.search(text) is None
    if splits and text.count(_SEP) == len(lines) - 1:
        tokens = text.split()
        tokens.append(_SEP)
        return tokens, _SEP
    return [t for line in lines for t in (*query_words(line), "\n")], "\n"


def _batch_ids(model: NgramModel, lines: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The batch's word ids (OOV -> <unk>), the OOV mask (unknown words and <unk> itself: query counts
    every word whose id is <unk>'s) and each line's word count."""
    text = "\n".join(lines)
    index = model.word_index()
    if index is not None and text.count("\n") == len(lines) - 1:      # line feeds are line ends
        w8, starts, lens, lengths = split_words(text, len(lines))
        ids = index.find(w8, starts, lens)
    else:                                                              # a word per dict lookup
        tokens, brk = _batch_tokens(lines)
        raw = np.fromiter(map(model.word_id_with_break(brk).get, tokens, repeat(-1)), dtype=np.int64,
                          count=len(tokens))
        breaks = np.flatnonzero(raw == -2)                             # one per line
        lengths = np.diff(breaks, prepend=-1) - 1
        ids = raw[raw != -2]
    oov = ids < 0
    ids[oov] = model.unk_id
    return ids, oov | (ids == model.unk_id), lengths        # a literal <unk> is an OOV too (as query counts it)


@dataclass
class ScoredBatch:
    """Lines scored at once. Per token, flat over the batch (each line's words, then </s>): ids,
    log10 p, n-gram length, OOV mask; line i's tokens are [start[i], start[i + 1]). `lines()` gives
    one `LineScore` a line, built only when asked."""

    original: list[str]
    scored: list[str]               # the lines as scored (after the model's lowercasing / tokenizer)
    start: np.ndarray               # [L + 1]
    ids: np.ndarray
    log10: np.ndarray
    ngram: np.ndarray
    oov: np.ndarray
    bom: bool = False               # the first line starts the text with a BOM (part of its first word)
    _line_bytes: list[int] | None = field(default=None, repr=False)

    @cached_property
    def tokens(self) -> list[str]:
        """Each line's words, then a line break: line i's words are tokens[start[i]:start[i + 1] - 1]."""
        return _batch_tokens(self.scored)[0]

    @property
    def bytes(self) -> int:
        """UTF-8 bytes of the lines as given, each with its newline (a BOM that starts the text not counted)."""
        text = "\n".join(self.original)
        n = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
        return n + 1 - 3 * self.bom if self.original else 0

    def line_bytes(self) -> list[int]:
        """UTF-8 bytes of each line as given, with its newline (computed once)."""
        if self._line_bytes is None:
            self._line_bytes = self._count_line_bytes()
        return self._line_bytes

    def _count_line_bytes(self) -> list[int]:
        if "".join(self.original).isascii():
            out = [n + 1 for n in map(len, self.original)]
        else:
            out = [len(line.encode("utf-8", "surrogatepass")) + 1 for line in self.original]
        if self.bom and out:
            out[0] -= 3
        return out

    def line_sums(self, line_bytes: bool = False) -> LineSums:
        """Each line's figures, summed over the batch at once (no object per line)."""
        first = self.start[:-1]
        if len(first) == 0:
            z = np.zeros(0, dtype=np.int64)
            return LineSums(z, z, z, z.astype(np.float64), z.astype(np.float64), z.astype(np.float64), 0,
                            [] if line_bytes else None, z.astype(np.float64))
        lb = self.line_bytes() if line_bytes else None
        log10, oov = self.log10, self.oov
        zero = np.isneginf(log10)                  # (none in a backoff model: no reduceat then)
        return LineSums(tokens=np.diff(self.start), oov=np.add.reduceat(oov, first, dtype=np.int64),
                        zero_prob=np.add.reduceat(zero, first, dtype=np.int64) if zero.any()
                        else np.zeros(len(first), dtype=np.int64),
                        log10=np.add.reduceat(log10, first, dtype=np.float64),
                        log10_oov=np.add.reduceat(np.where(oov, log10, 0.0), first, dtype=np.float64),
                        log10_known=np.add.reduceat(np.where(oov, 0.0, log10), first, dtype=np.float64),
                        bytes=sum(lb) if lb is not None else self.bytes, line_bytes=lb,
                        log10_sq=np.add.reduceat(log10 * log10, first, dtype=np.float64))

    def line_totals(self) -> list[LineTotals]:
        """Each line's totals, as `NgramPerplexity.add` of its `LineScore` gives (sums per line over the
        batch at once, not an object per line first)."""
        return self.line_sums(line_bytes=True).lines()

    def lines(self) -> list[LineScore]:
        """One `LineScore` a line (each a view of this batch)."""
        bos = self.start.tolist()
        with collector_paused():
            return list(map(tuple.__new__, repeat(LineScore), zip(repeat(self), bos, bos[1:], range(len(bos) - 1))))


def _score_batch(model: NgramModel, original: list[str], transform) -> ScoredBatch:
    lines = [transform(line) for line in original] if transform is not None else original
    ids, oov, n_words = _batch_ids(model, lines)
    start = np.zeros(len(lines) + 1, dtype=np.int64)                # each line's words, then </s>
    np.cumsum(n_words + 1, out=start[1:])
    word = np.ones(start[-1], dtype=bool)
    word[start[1:] - 1] = False
    tokens = np.full(start[-1], model.eos_id, dtype=np.int64)
    tokens[word] = ids
    oov_tokens = np.zeros(start[-1], dtype=bool)
    oov_tokens[word] = oov
    logp, ngram = model.score_sentences(tokens, start[:-1])
    return ScoredBatch(original=original, scored=lines, start=start, ids=tokens, log10=logp, ngram=ngram,
                       oov=oov_tokens)


def perplexity_of_lines(model: NgramModel, lines: Iterable[str], transform=None) -> NgramPerplexity:
    total = NgramPerplexity()
    for b in score_batches(model, lines, transform):
        total.add_batch(b)
    return total


__all__ = ["query_words", "query_lines", "LineScore", "LineSums", "LineTotals", "ScoredBatch", "NgramPerplexity", "score_lines",
           "score_batches", "score_source", "score_shard", "perplexity_of_lines", "line_transform"]
