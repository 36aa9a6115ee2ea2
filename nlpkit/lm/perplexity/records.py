"""What `nlpkit perplexity` prints: its columns, and the records of a run per file, per line or per token.

`perplexity_run` resolves the window settings for a `LanguageModel` and yields its records, here or with the
mappers the caller built (a Dask cluster); the scoring is `nlpkit.lm.perplexity.text_perplexity`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

import numpy as np

from nlpkit.errors import NlpkitError
from nlpkit.lm.interface import Capability, PerplexityRun
from nlpkit.lm.perplexity.windows import TooShort, Window, default_stride
from nlpkit.lm.perplexity.text_perplexity import Perplexity, score_lines_shard, text_perplexity
from nlpkit.lm.threads import blas_threads
from nlpkit.lm.perplexity.window_scoring import Scored, score_windows_task

PERPLEXITY_SUMMARY = ["file", "tokens", "mean_nll", "mean_nll_se", "token_ppl", "token_ppl_unc", "word_ppl",
                      "byte_ppl", "bits_per_byte", "words", "bytes"]
PERPLEXITY_PER_LINE = ["file", "line", *PERPLEXITY_SUMMARY[1:]]
PERPLEXITY_PER_TOKEN = ["file", "line", "position", "id", "token", "logprob"]
TOTAL = "(total)"  # the file cell of the corpus total row (JSON records also carry "total": true)


def perplexity_run(lm, paths: Sequence[str], *, mode: str = "sliding", context: int | None = None,
                   stride: int | None = None, add_bos: bool | None = None, per_line: bool = False,
                   per_token: bool = False, errors: str = "strict") -> PerplexityRun:
    """What `nlpkit perplexity` prints for a `LanguageModel`: each text scored in windows (`mode`), a record per
    file (then a corpus total), per line (`per_line`) or per scored token (`per_token`). A model that declares
    `Capability.SENTENCES` (an n-gram model) scores each line as one sentence, its own way
    (`lm.sentence_perplexity`: KenLM query's figures, the columns it has always printed).

    `records(progress, map_windows, map_lines)` runs locally, or with the mappers the caller built
    (`nlpkit.distributed.stages.perplexity_windows` / `perplexity_lines`: on a Dask cluster, each worker loading
    the model once from `lm.worker_key`)."""
    if Capability.SENTENCES in lm.capabilities:   # an n-gram model: each line one sentence, its own figures
        return lm.sentence_perplexity(paths, per_line=per_line, per_token=per_token, errors=errors)
    ctx = lm.window_context(context)
    strd = (stride or default_stride(ctx)) if mode == "sliding" else None
    bos = lm.prefix_id is not None if add_bos is None else add_bos
    columns = PERPLEXITY_PER_LINE if per_line else PERPLEXITY_SUMMARY
    if per_token:
        columns = PERPLEXITY_PER_TOKEN if per_line else [c for c in PERPLEXITY_PER_TOKEN if c != "line"]
    sig = lm.signature("perplexity", {"mode": mode, "ctx": ctx, "stride": strd, "bos": bos})
    settings = _Settings(mode, ctx, strd, bos, errors, per_token)

    def records(progress=None, map_windows: Callable | None = None,
                map_lines: Callable | None = None) -> Iterator[dict]:
        if per_line:
            return _line_records(lm, paths, settings, progress, map_lines)
        return _text_records(lm, paths, settings, progress, map_windows)

    return PerplexityRun(columns, sig, records, context=ctx, stride=strd)


@dataclass(frozen=True)
class _Settings:
    mode: str
    context: int
    stride: int | None
    add_bos: bool
    errors: str
    per_token: bool


def perplexity_stats(p: Perplexity) -> dict:
    """A record's figures of a `Perplexity` (the results cache's records too: `evaluation.cached_perplexity`)."""
    return {"tokens": p.tokens, "mean_nll": p.mean_nll, "mean_nll_se": p.mean_nll_se,
            "token_ppl": p.token_perplexity, "token_ppl_unc": p.token_perplexity_unc,
            "word_ppl": p.word_perplexity, "byte_ppl": p.byte_perplexity, "bits_per_byte": p.bits_per_byte,
            "words": p.words, "bytes": p.bytes}


def _token_rows(lm, name: str, line: int | None, scored: Scored) -> list[dict]:
    where = {"file": name} if line is None else {"file": name, "line": line}
    return [{**where, "position": pos, "id": i, "token": lm.token_bytes(i).decode("utf-8", errors="replace"),
             "logprob": lp}
            for pos, i, lp in zip(scored.positions, scored.ids, scored.logprobs)]


def _line_records(lm, paths, s: _Settings, progress, map_lines) -> Iterator[dict]:
    """``--per-line``: each line scored on its own, here or on the workers (`score_lines_shard`)."""
    if map_lines is not None:
        results = map_lines(list(paths), score_lines_shard,
                            (lm.worker_key, s.mode, s.context, s.stride, s.add_bos, s.errors, blas_threads(),
                             s.per_token))
        lines = _numbered(results)
    else:
        lines = _local_lines(lm, paths, s)
    for name, lineno, p in lines:
        if p is None:
            if not s.per_token:
                yield {"file": name, "line": lineno, "tokens": 0, "words": 0, "bytes": 0}
        elif s.per_token:
            yield from _token_rows(lm, name, lineno, p[1])
        else:
            yield {"file": name, "line": lineno, **perplexity_stats(p)}


def _numbered(results) -> Iterator[tuple[str, int, object]]:
    """(file, line number, result) from `map_lines`' (file index, path, (lines, results)) per shard."""
    line, current = 0, None
    for index, path, (_, scored) in results:
        if index != current:
            current, line = index, 0
        for p in scored:
            line += 1
            yield path, line, p


def _local_lines(lm, paths, s: _Settings) -> Iterator[tuple[str, int, object]]:
    """(file, line number, Perplexity — with `per_token` a (Perplexity, Scored) pair — or None when the line is
    too short), as `_numbered` yields them from the workers."""
    from nlpkit.io import display_name, iter_lines

    for path in paths:
        name = display_name(path)
        for lineno, line in enumerate(iter_lines(path, errors=s.errors), 1):
            try:
                p, scored = text_perplexity(lm, line, mode=s.mode, context=s.context, stride=s.stride,
                                            add_bos=s.add_bos)
            except TooShort:
                yield name, lineno, None
                continue
            yield name, lineno, ((p, scored) if s.per_token else p)


def _text_records(lm, paths, s: _Settings, progress, map_windows) -> Iterator[dict]:
    """Each file scored whole in windows, here or on the workers (`score_windows_task`)."""
    from nlpkit.io import display_name, read_text

    windows_elsewhere = None
    if map_windows is not None:
        key = lm.worker_key

        def windows_elsewhere(seq: list[int], windows: list[Window]) -> Iterator[np.ndarray]:
            return map_windows(score_windows_task, [(w.tokens(seq), w.first) for w in windows],
                               (key, blas_threads()))

    several = len(paths) > 1 and not s.per_token
    totals: list = []
    for path in paths:
        name = display_name(path)
        text = read_text(path, errors=s.errors)
        if not text.strip():
            what = "empty text" if not text else "only whitespace (no text)"
            raise NlpkitError(f"{name}: {what}, nothing to score")
        p, scored = text_perplexity(lm, text, mode=s.mode, context=s.context, stride=s.stride, add_bos=s.add_bos,
                                    progress=None if map_windows is not None else progress,
                                    map_windows=windows_elsewhere)
        if s.per_token:
            yield from _token_rows(lm, name, None, scored)
        else:
            yield {"file": name, **perplexity_stats(p), **({"total": False} if several else {})}
            totals.append(p)
    if several and totals:
        yield total_record(totals)


def total_record(totals: list[Perplexity]) -> dict:
    """The TOTAL record of several files' figures: their tokens, NLL, words and bytes pooled."""
    nll = sum(p.nll for p in totals)
    n = sum(p.tokens for p in totals)
    p = Perplexity(tokens=n, nll=nll, mean_nll=nll / n, words=sum(p.words for p in totals),
                   bytes=sum(p.bytes for p in totals), nll_sq=sum(p.nll_sq for p in totals))
    return {"file": TOTAL, **perplexity_stats(p), "total": True}
