"""Perplexity of text under an n-gram model, as KenLM's ``query`` reports it, plus nlpkit's figures.

Each line is a sentence: its words (split on ASCII whitespace, as ``query`` splits them, after
the model's recorded lowercasing / tokenizer) and ``</s>`` are scored with ``<s>`` as the first
history. Per token: log10 p and the length of the n-gram used. Totals, as ``query`` prints:

    perplexity including OOVs = 10 ** (-sum log10 p / tokens)            tokens count </s>
    perplexity excluding OOVs = 10 ** (-(sum - sum over OOVs) / (tokens - OOVs))

and nlpkit's: mean NLL in nats per token, and bits per byte = -sum log2 p / bytes, the bytes
being the UTF-8 bytes of the scored lines with their newlines (what ``</s>`` predicts), so an
n-gram model and a neural model compare on the same text. An MLE model gives probability 0 to
an unseen event: its perplexity is infinite and `zero_prob` counts such tokens.
"""

from __future__ import annotations

import math
import re
from itertools import repeat
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

import numpy as np

from nlpkit.lm.ngram.model import NgramModel

_QUERY_SPACES = str.maketrans({"\t": " ", "\n": " ", "\r": " ", "\x0b": " ", "\x0c": " "})
BATCH_LINES = 4096


def query_words(line: str) -> list[str]:
    """Words as ``query`` reads them: split on space, tab, CR, LF, VT and FF only.

    ``"a\\u00a0b  c" -> ["a\\u00a0b", "c"]``
    """
    return [w for w in line.translate(_QUERY_SPACES).split(" ") if w]


@dataclass
class LineScore:
    """One scored line: its words (+ </s>), log10 p, n-gram lengths, OOV mask, UTF-8 bytes."""

    words: list[str]
    ids: np.ndarray
    log10: np.ndarray
    ngram: np.ndarray
    oov: np.ndarray
    bytes: int


@dataclass
class NgramPerplexity:
    """Totals over some lines (see the module docstring)."""

    sentences: int = 0
    tokens: int = 0
    oov: int = 0
    zero_prob: int = 0
    log10_total: float = 0.0
    log10_oov: float = 0.0
    bytes: int = 0
    words: int = 0

    def add(self, s: LineScore) -> None:
        self.sentences += 1
        self.tokens += len(s.log10)
        self.oov += int(s.oov.sum())
        self.zero_prob += int(np.isneginf(s.log10).sum())
        self.log10_total += float(np.sum(s.log10, dtype=np.float64))
        self.log10_oov += float(np.sum(s.log10[s.oov], dtype=np.float64))
        self.bytes += s.bytes
        self.words += len(s.log10) - 1

    @property
    def perplexity(self) -> float:
        return 10.0 ** (-self.log10_total / self.tokens) if self.tokens else math.nan

    @property
    def perplexity_no_oov(self) -> float:
        n = self.tokens - self.oov
        return 10.0 ** (-(self.log10_total - self.log10_oov) / n) if n else math.nan

    @property
    def nll_nats(self) -> float:
        return -self.log10_total * math.log(10.0)

    @property
    def mean_nll(self) -> float:
        return self.nll_nats / self.tokens if self.tokens else math.nan

    @property
    def bits_per_byte(self) -> float:
        return -self.log10_total * math.log2(10.0) / self.bytes if self.bytes else math.nan


def line_transform(model: NgramModel) -> Callable[[str], str] | None:
    """The model's recorded text options (lowercase, tokenizer) as a text rewrite."""
    from nlpkit.lm.ngram.train import text_transform

    lower = model.options.get("lowercase", "false") == "true"
    return text_transform(lower, model.options.get("tokenizer") or None)


def score_lines(model: NgramModel, lines: Iterable[str], transform: Callable[[str], str] | None = None
                ) -> Iterator[LineScore]:
    """Score each line as a sentence, in batches of lines (vectorized over the batch)."""
    batch: list[str] = []
    for line in lines:
        batch.append(line)
        if len(batch) >= BATCH_LINES:
            yield from _score_batch(model, batch, transform)
            batch = []
    if batch:
        yield from _score_batch(model, batch, transform)


_BATCH_WORDS = re.compile(r"[^ \t\n\r\x0b\x0c]+|\n")        # query's words, and the line breaks


def _score_batch(model: NgramModel, original: list[str], transform) -> list[LineScore]:
    lines = [transform(line) for line in original] if transform is not None else original
    # One pass over the batch: words and "\n" tokens (lines never hold a newline: an embedded one
    # would split the line in two, so those lines go word by word).
    if any("\n" in line for line in lines):
        words_of = [query_words(line) for line in lines]
        tokens = [w for ws in words_of for w in ws]
        lengths = np.fromiter(map(len, words_of), dtype=np.int64, count=len(lines))
        ids, oov = model.lookup(tokens)
        begin = (np.cumsum(lengths) - lengths).tolist()             # each line's words in `tokens`
    else:
        tokens = _BATCH_WORDS.findall("\n".join(lines) + "\n")
        raw = np.fromiter(map(model.word_id_with_break().get, tokens, repeat(-1)), dtype=np.int64,
                          count=len(tokens))
        breaks = np.flatnonzero(raw == -2)                          # one per line
        lengths = np.diff(breaks, prepend=-1) - 1
        begin = (breaks - lengths).tolist()
        ids = raw[raw != -2]
        oov = ids < 0
        ids[oov] = model.unk_id
    lengths = lengths + 2                                          # <s> ... </s>
    starts = np.cumsum(lengths) - lengths
    seq = np.empty(int(lengths.sum()), dtype=np.int64)
    seq[starts] = model.bos_id
    seq[starts + lengths - 1] = model.eos_id
    n_words = lengths - 2
    line_of = np.repeat(np.arange(len(lines)), n_words)
    first_flat = np.cumsum(n_words) - n_words
    rank = np.arange(len(ids)) - first_flat[line_of]
    where = starts[line_of] + 1 + rank
    seq[where] = ids
    offset = np.arange(len(seq)) - np.repeat(starts, lengths)
    logp, ngram = model.score_sequence(seq, offset)
    oov_full = np.zeros(len(seq), dtype=bool)
    oov_full[where] = oov
    scored = offset >= 1
    oov_scored = oov_full[scored]
    ids_scored = seq[scored]
    out = []
    pos = 0
    for i, (b, n) in enumerate(zip(begin, n_words.tolist())):
        line = original[i]                                         # bytes of the text as given
        out.append(LineScore(words=tokens[b:b + n] + ["</s>"], ids=ids_scored[pos:pos + n + 1],
                             log10=logp[pos:pos + n + 1], ngram=ngram[pos:pos + n + 1], oov=oov_scored[pos:pos + n + 1],
                             bytes=(len(line) if line.isascii() else len(line.encode("utf-8", "surrogatepass"))) + 1))
        pos += n + 1
    return out


def perplexity_of_lines(model: NgramModel, lines: Iterable[str], transform=None) -> NgramPerplexity:
    total = NgramPerplexity()
    for s in score_lines(model, lines, transform):
        total.add(s)
    return total


__all__ = ["query_words", "LineScore", "NgramPerplexity", "score_lines", "perplexity_of_lines", "line_transform"]
