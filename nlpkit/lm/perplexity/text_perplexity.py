"""Perplexity of one text or token-id list: its windows scored, and the tokens, bytes and words they cover.

`perplexity` (an engine `Model`) and `text_perplexity` (a `LanguageModel`) tokenize a text, run its window plan
(`nlpkit.lm.perplexity.windows`) through `nlpkit.lm.perplexity.window_scoring`, and summarize it as a `Perplexity`
(`covered`: the bytes and words the scored tokens cover); `score_lines_shard` is ``--per-line`` on a Dask worker.
The figures are the ones the `nlpkit.lm.perplexity` docstring defines.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Callable

import numpy as np

from nlpkit.errors import NlpkitError
from nlpkit.lm.perplexity.windows import TooShort, check_window, default_stride, window_plan
from nlpkit.lm.threads import match_blas_threads
from nlpkit.lm.uncertainty import standard_error
from nlpkit.lm.spec import cached_model
from nlpkit.lm.perplexity.window_scoring import Scored, score_windows
from nlpkit.lm.transformer.conventions import check_context, default_context, prefix_token

@dataclass
class Perplexity:
    tokens: int
    nll: float  # total negative log-likelihood, nats
    mean_nll: float  # nats per token
    words: int
    bytes: int
    nll_sq: float = math.nan  # sum of the squared token NLLs: the uncertainty (`mean_nll_se`)

    @property
    def token_perplexity(self) -> float:
        return math.exp(self.mean_nll)

    @property
    def mean_nll_se(self) -> float:
        """σ of the mean NLL as llama.cpp's `PPL = X +/- Y` takes it (tokens as independent draws; they are not:
        see `nlpkit.lm.uncertainty`). NaN for a single token."""
        return standard_error(self.nll, self.nll_sq, self.tokens)

    @property
    def token_perplexity_unc(self) -> float:
        """The ± of the token perplexity, llama.cpp's ppl × σ(mean NLL)."""
        return self.token_perplexity * self.mean_nll_se

    @property
    def word_perplexity(self) -> float:
        return math.exp(self.nll / self.words) if self.words else float("nan")

    @property
    def byte_perplexity(self) -> float:
        return math.exp(self.nll / self.bytes) if self.bytes else float("nan")

    @property
    def bits_per_byte(self) -> float:
        return self.nll / self.bytes / math.log(2) if self.bytes else float("nan")


def count_words(text: str) -> int:
    """lm-evaluation-harness word count: len(re.split(r"\\s+", text))."""
    return len(re.split(r"\s+", text))


def score_ids(model, ids: list[int], *, mode: str = "sliding", context: int, stride: int | None = None,
              add_bos: bool = False, progress: Callable | None = None,
              map_windows: Callable | None = None) -> Scored:
    """Score a token-id list (without prefix token; `add_bos` puts the model's prefix token before it:
    prepended in every mode, and swapped into each chunk's first place in second-half).
    `positions` index `ids`. `map_windows` runs the windows elsewhere (see `score_windows`)."""
    check_window(mode, context, stride)
    return _score_planned(model, ids, prefix_token(model.config) if add_bos else None, add_bos, mode, context, stride,
                          progress, map_windows)


def _score_planned(scorer, ids, prefix, add_bos, mode, context, stride, progress, map_windows) -> Scored:
    """`ids` scored in the windows of `mode` (`prefix` before them when `add_bos`; positions index `ids`), by any
    scorer `score_windows` takes: the engine's model or a `LanguageModel`."""
    if add_bos and prefix is None:
        raise NlpkitError("`add_bos`: this model defines no BOS or EOS token to predict the first token from")
    seq, windows = window_plan(ids, prefix, mode=mode, context=context, stride=stride)
    res = score_windows(scorer, seq, windows, progress, map_windows)
    if prefix is not None:
        res.positions = [p - 1 for p in res.positions]
    return res


def covered(text: str, token_bytes: list[int], scored: list[int]) -> tuple[int, int]:
    """(bytes, words) of `text` that the tokens at positions `scored` cover (see the module docstring).

    token_bytes[i] is token i's UTF-8 length; if they do not add up to the text's (a tokenizer that adds
    a prefix space or normalizes), the first token absorbs the difference.
    """
    raw_len = len(text.encode("utf-8"))
    lens = np.asarray(token_bytes, dtype=np.int64)
    if len(lens) and lens.sum() != raw_len:
        lens = lens.copy()
        lens[0] = max(lens[0] + raw_len - lens.sum(), 0)
    mask = np.zeros(len(lens), dtype=bool)
    mask[np.asarray(scored, dtype=np.int64)] = True
    nbytes = int(lens[mask].sum())
    if mask.all():
        return raw_len, count_words(text)
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]])  # token i covers bytes starts[i] .. starts[i]+lens[i]-1
    word_chars = np.array([0] + [m.end() for m in re.finditer(r"\s+", text)], dtype=np.int64)
    if raw_len == len(text):  # ASCII: characters are bytes
        word_bytes = word_chars
    else:
        cps = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
        clen = 1 + (cps >= 0x80) + (cps >= 0x800) + (cps >= 0x10000)
        word_bytes = np.concatenate([[0], np.cumsum(clen)])[word_chars]
    word_bytes = np.minimum(word_bytes, max(raw_len - 1, 0))  # the empty piece after trailing whitespace
    tok = np.searchsorted(starts, word_bytes, side="right") - 1
    words = int(mask[np.clip(tok, 0, len(mask) - 1)].sum()) if len(mask) else 0
    return nbytes, words


def perplexity(model, text: str, *, mode: str = "sliding", context: int | None = None, stride: int | None = None,
               add_bos: bool | None = None, progress: Callable | None = None,
               map_windows: Callable | None = None) -> tuple[Perplexity, Scored]:
    """Tokenize `text` with the model's tokenizer and score it; `add_bos` None: the prefix token whenever
    the model has one. Raises TooShort when no token can be scored.

    >>> perplexity(load_model(), "The cat sat.", context=512)[0].token_perplexity   # doctest: +SKIP
    """
    model.require_tokenizer()
    if not text:
        raise TooShort("empty text: nothing to score")
    context = context or default_context(model)
    check_context(model, context)
    if add_bos is None:
        add_bos = prefix_token(model.config) is not None
    if mode == "sliding" and stride is None:
        stride = default_stride(context)
    check_window(mode, context, stride)
    tok = model.tokenizer
    ids = tok.encode(text)
    res = score_ids(model, ids, mode=mode, context=context, stride=stride, add_bos=add_bos, progress=progress,
                    map_windows=map_windows)
    return summarize_scored(text, [len(tok.decode_bytes([i])) for i in ids], res), res


def summarize_scored(text: str, token_bytes: list[int], res: Scored) -> Perplexity:
    """The `Perplexity` of a scored text: its scored tokens' NLL, and the bytes and words they cover (`covered`;
    `token_bytes[i]` is token i's UTF-8 length)."""
    nbytes, words = covered(text, token_bytes, res.positions)
    lp = np.asarray(res.logprobs, dtype=np.float64)
    nll = -float(np.sum(lp))
    return Perplexity(tokens=len(lp), nll=nll, mean_nll=res.mean_nll, words=words, bytes=nbytes,
                      nll_sq=float(np.sum(lp * lp)))


def text_perplexity(lm, text: str, *, mode: str, context: int, stride: int | None, add_bos: bool,
                    progress: Callable | None = None, map_windows: Callable | None = None) -> tuple[Perplexity, Scored]:
    """`perplexity` written over a `LanguageModel` (its `encode`, `prefix_id`, `logprobs` and `token_bytes`), the
    window settings already resolved (`perplexity_run`): the same windows, the same numbers."""
    if not text:
        raise TooShort("empty text: nothing to score")
    check_window(mode, context, stride)
    ids = lm.encode(text)
    res = _score_planned(lm, ids, lm.prefix_id if add_bos else None, add_bos, mode, context, stride, progress,
                         map_windows)
    return summarize_scored(text, [len(lm.token_bytes(i)) for i in ids], res), res


def score_lines_shard(shard, model_key: tuple, mode: str, context: int, stride: int | None,
                      add_bos: bool, errors: str = "strict", blas_threads: int | None = None,
                      per_token: bool = False) -> tuple[int, list]:
    """Score each line of a shard on its own, as ``perplexity --per-line`` does: (lines, one
    `Perplexity` per line — a (`Perplexity`, `Scored`) pair with `per_token` — None where the
    line is too short to score). `blas_threads`: see `nlpkit.lm.threads.match_blas_threads`.
    """
    from nlpkit.io import iter_lines

    match_blas_threads(blas_threads)
    lm = cached_model(*model_key)
    out: list = []
    for line in iter_lines(shard, errors=errors, strip_bom=getattr(shard, "first", True)):
        try:
            p, scored = text_perplexity(lm, line, mode=mode, context=context, stride=stride, add_bos=add_bos)
        except TooShort:
            p = scored = None
        out.append((p, scored) if per_token and p is not None else p)
    return len(out), out
