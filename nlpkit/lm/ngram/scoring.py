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


def _score_batch(model: NgramModel, lines: list[str], transform) -> list[LineScore]:
    words = [query_words(transform(line) if transform else line) for line in lines]
    lengths = np.fromiter(map(len, words), dtype=np.int64, count=len(words)) + 2   # <s> ... </s>
    flat = [w for ws in words for w in ws]
    ids, oov = model.lookup(flat)
    starts = np.cumsum(lengths) - lengths
    seq = np.empty(int(lengths.sum()), dtype=np.int64)
    seq[starts] = model.bos_id
    seq[starts + lengths - 1] = model.eos_id
    line_of = np.repeat(np.arange(len(words)), lengths - 2)
    first_flat = np.cumsum(lengths - 2) - (lengths - 2)
    rank = np.arange(len(flat)) - first_flat[line_of]
    seq[starts[line_of] + 1 + rank] = ids
    offset = np.arange(len(seq)) - np.repeat(starts, lengths)
    logp, ngram = model.score_sequence(seq, offset)
    oov_full = np.zeros(len(seq), dtype=bool)
    oov_full[starts[line_of] + 1 + rank] = oov
    scored = offset >= 1
    oov_scored = oov_full[scored]
    ids_scored = seq[scored]
    out = []
    pos = 0
    for i, ws in enumerate(words):
        n = len(ws) + 1
        out.append(LineScore(words=ws + ["</s>"], ids=ids_scored[pos:pos + n], log10=logp[pos:pos + n],
                             ngram=ngram[pos:pos + n], oov=oov_scored[pos:pos + n],
                             bytes=len(lines[i].encode("utf-8", "surrogatepass")) + 1))
        pos += n
    return out


def perplexity_of_lines(model: NgramModel, lines: Iterable[str], transform=None) -> NgramPerplexity:
    total = NgramPerplexity()
    for s in score_lines(model, lines, transform):
        total.add(s)
    return total


__all__ = ["query_words", "LineScore", "NgramPerplexity", "score_lines", "perplexity_of_lines", "line_transform"]
