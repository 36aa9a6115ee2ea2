"""Two models over the same windows of a text: the per-token comparison behind `perplexity --compare`.

Both models read the same token ids (their tokenizers must agree id for id, and so must their vocabulary
size and, when it is used, their prefix token) through the same windows as perplexity (`mode`, `context`,
`stride`). Window by window, each model's logits for the scored rows come a chunk at a time
(`LanguageModel.window_logits`) and are compared at once (`nlpkit.lm.perplexity.divergence.compare_logits`): the
base's logits are never kept for the whole text, only five numbers per token. Two models are in memory at
once; that is the cost. The records are llama.cpp's statistics (`nlpkit.lm.perplexity.divergence.summarize`).

    >>> run = compare_run(load_language_model("q8.gguf"), load_language_model("f32/"), ["book.txt"])
    >>> next(run.records())["kld"]                                  # doctest: +SKIP
    0.0012885
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

import numpy as np

from nlpkit.errors import NlpkitError
from nlpkit.lm.perplexity.divergence import DP_PERCENTILES, KLD_PERCENTILES, TokenComparison, compare_logits, summarize
from nlpkit.lm.interface import PerplexityRun
from nlpkit.lm.perplexity.windows import TooShort, check_window, default_stride, window_plan
from nlpkit.lm.spec import cached_model
from nlpkit.lm.threads import blas_threads, match_blas_threads

TOTAL = "(total)"  # the file cell of the corpus total row, as perplexity's


def _pct(q: float) -> str:
    return f"{q:g}"


SUMMARY = (["file", "tokens", "ppl", "ppl_unc", "base_ppl", "base_ppl_unc", "ln_ppl_cor", "ln_ppl_ratio",
            "ln_ppl_ratio_unc", "ppl_ratio", "ppl_ratio_unc", "ppl_diff", "ppl_diff_unc", "kld", "kld_unc", "kld_max"]
           + [f"kld_p{_pct(q)}" for q in KLD_PERCENTILES] + ["kld_min", "dp", "dp_unc", "dp_max"]
           + [f"dp_p{_pct(q)}" for q in DP_PERCENTILES] + ["dp_min", "rms_dp", "rms_dp_unc", "same_top", "same_top_unc"])
PER_TOKEN = ["file", "position", "id", "token", "logprob", "base_logprob", "kld", "dp", "top_id", "top",
             "base_top_id", "base_top"]


@dataclass
class Compared:
    """A text's comparison: the scored tokens' positions (in the text's ids) and ids, and their values."""

    positions: list[int]
    ids: list[int]
    tokens: TokenComparison


def check_same_ids(model, base, ids: list[int], base_ids: list[int]) -> None:
    """The two models must read the text as the same ids: an NlpkitError naming the first that differs."""
    if ids == base_ids:
        return
    k = next((i for i, (a, b) in enumerate(zip(ids, base_ids)) if a != b), min(len(ids), len(base_ids)))
    if k >= len(ids) or k >= len(base_ids):
        raise NlpkitError(f"the two models' tokenizers differ: the model reads {len(ids)} tokens, the base "
                          f"{len(base_ids)} (the same first {k})")
    raise NlpkitError(f"the two models' tokenizers differ: token {k} is id {ids[k]} {model.token_text(ids[k])!r} "
                      f"for the model, id {base_ids[k]} {base.token_text(base_ids[k])!r} for the base")


def check_pair(model, base, add_bos: bool) -> None:
    """Same vocabulary size, and with `add_bos` the same prefix token: else KL over the vocabulary means nothing."""
    if model.vocab_size != base.vocab_size:
        raise NlpkitError(f"the two models' vocabularies differ in size: {model.vocab_size} for the model, "
                          f"{base.vocab_size} for the base")
    if add_bos and model.prefix_id != base.prefix_id:
        raise NlpkitError(f"the two models' prefix tokens differ: id {model.prefix_id} for the model, "
                          f"{base.prefix_id} for the base (`add_bos` needs one prefix token that both read)")


def compare_window(model, base, ids: list[int], first: int) -> TokenComparison:
    """Both models over one window (input ids, first scored position): ids[first:] token by token.
    `model`/`base`: language models declaring `Capability.LOGITS` (a Dask worker's: its cached ones)."""
    targets = np.asarray(ids[max(first, 1):], dtype=np.int64)
    parts, done = [], 0
    for x, xb in zip(model.window_logits(ids, first), base.window_logits(ids, first)):  # [n, V] each
        parts.append(compare_logits(x, xb, targets[done:done + len(x)]))
        done += len(x)
    return TokenComparison.concat(parts)


def compare_windows_task(chunks: list[tuple[list[int], int]], model_key: tuple, base_key: tuple,
                         blas_threads: int | None = None) -> list[TokenComparison]:
    """A Dask task: `compare_window` of each (window tokens, first scored) on this worker's cached model
    and base (`nlpkit.lm.spec.cached_model` keeps both), with the driver's BLAS thread count."""
    match_blas_threads(blas_threads)
    model, base = cached_model(*model_key), cached_model(*base_key)
    return [compare_window(model, base, ids, first) for ids, first in chunks]


def compare_ids(model, base, ids: list[int], *, mode: str, context: int, stride: int | None, add_bos: bool,
                progress: Callable | None = None, map_windows: Callable | None = None) -> Compared:
    """Compare over a token-id list in perplexity's windows (the plan of `nlpkit.lm.perplexity.score_ids`);
    `map_windows(seq, windows)` yields each window's TokenComparison elsewhere (a Dask cluster)."""
    check_window(mode, context, stride)
    check_pair(model, base, add_bos)
    prefix = model.prefix_id if add_bos else None
    if add_bos and prefix is None:
        raise NlpkitError("`add_bos`: the model defines no BOS or EOS token to predict the first token from")
    seq, windows = window_plan(ids, prefix, mode=mode, context=context, stride=stride)
    results = (map_windows(seq, windows) if map_windows is not None
               else (compare_window(model, base, w.tokens(seq), w.first) for w in windows))
    positions, scored, parts = [], [], []
    for k, (w, tc) in enumerate(zip(windows, results)):
        positions += w.positions
        scored += seq[w.positions.start:w.end]
        parts.append(tc)
        if progress:
            progress(k + 1, len(windows))
    if prefix is not None:
        positions = [p - 1 for p in positions]
    return Compared(positions, scored, TokenComparison.concat(parts))


def compare_text(model, base, text: str, *, mode: str = "sliding", context: int | None = None,
                 stride: int | None = None, add_bos: bool | None = None, progress: Callable | None = None,
                 map_windows: Callable | None = None) -> Compared:
    """Tokenize `text` with both models' tokenizers (they must agree) and compare the models on it."""
    model.require_tokenizer()
    base.require_tokenizer()
    if not text:
        raise TooShort("empty text: nothing to score")
    context = model.window_context(context)
    base.window_context(context)
    if add_bos is None:
        add_bos = model.prefix_id is not None
    if mode == "sliding" and stride is None:
        stride = default_stride(context)
    ids = model.encode(text)
    check_same_ids(model, base, ids, base.encode(text))
    return compare_ids(model, base, ids, mode=mode, context=context, stride=stride, add_bos=add_bos,
                       progress=progress, map_windows=map_windows)


def summary_record(d) -> dict:
    """A `Divergence` as a record of plain numbers (fractions, not percent), in `SUMMARY`'s order."""
    rec = {k: getattr(d, k) for k in SUMMARY[1:16]}
    rec.update({f"kld_p{_pct(q)}": v for q, v in d.kld_percentiles.items()})
    rec.update(kld_min=d.kld_min, dp=d.dp, dp_unc=d.dp_unc, dp_max=d.dp_max)
    rec.update({f"dp_p{_pct(q)}": v for q, v in d.dp_percentiles.items()})
    rec.update(dp_min=d.dp_min, rms_dp=d.rms_dp, rms_dp_unc=d.rms_dp_unc, same_top=d.same_top,
               same_top_unc=d.same_top_unc)
    return rec


def token_records(name: str, compared: Compared, model, base) -> Iterator[dict]:
    """Per-token records: each scored token's log-probabilities, KLD, Δp and both models' top tokens."""
    tc = compared.tokens
    dp = tc.p_diff
    for k, (pos, i) in enumerate(zip(compared.positions, compared.ids)):
        top, top_base = int(tc.top[k]), int(tc.top_base[k])
        yield {"file": name, "position": pos, "id": i, "token": model.token_text(i), "logprob": -float(tc.nll[k]),
               "base_logprob": -float(tc.nll_base[k]), "kld": float(tc.kld[k]), "dp": float(dp[k]),
               "top_id": top, "top": model.token_text(top), "base_top_id": top_base,
               "base_top": base.token_text(top_base)}


def compare_run(model, base, paths: Sequence[str], *, mode: str = "sliding", context: int | None = None,
                stride: int | None = None, add_bos: bool | None = None, per_token: bool = False,
                errors: str = "strict") -> PerplexityRun:
    """What `perplexity --compare` prints: a record per file (then the corpus total, over every file's tokens),
    or per scored token. `records(progress, map_windows, map_lines)` runs locally or with the window mapper the
    caller built (`nlpkit.distributed.stages.perplexity_windows`: on a Dask cluster, each worker loading both
    models once)."""
    ctx = model.window_context(context)
    base.window_context(ctx)
    strd = (stride or default_stride(ctx)) if mode == "sliding" else None
    bos = model.prefix_id is not None if add_bos is None else add_bos
    sig = model.signature("perplexity", {"base": base.name, "mode": mode, "ctx": ctx, "stride": strd, "bos": bos})

    def records(progress=None, map_windows: Callable | None = None,
                map_lines: Callable | None = None) -> Iterator[dict]:
        from nlpkit.io import display_name, read_text

        compared_elsewhere = None
        if map_windows is not None:
            keys = (model.worker_key, base.worker_key)

            def compared_elsewhere(seq: list[int], windows: list) -> Iterator[TokenComparison]:
                return map_windows(compare_windows_task, [(w.tokens(seq), w.first) for w in windows],
                                   (*keys, blas_threads()))
        several = len(paths) > 1 and not per_token
        parts = []
        for path in paths:
            name = display_name(path)
            text = read_text(path, errors=errors)
            if not text.strip():
                raise NlpkitError(f"{name}: {'empty text' if not text else 'only whitespace (no text)'}, "
                                  "nothing to score")
            compared = compare_text(model, base, text, mode=mode, context=ctx, stride=strd, add_bos=bos,
                                    progress=None if map_windows is not None else progress,
                                    map_windows=compared_elsewhere)
            if per_token:
                yield from token_records(name, compared, model, base)
            else:
                yield {"file": name, **summary_record(summarize(compared.tokens)),
                       **({"total": False} if several else {})}
                parts.append(compared.tokens)
        if several:
            yield {"file": TOTAL, **summary_record(summarize(TokenComparison.concat(parts))), "total": True}

    return PerplexityRun(PER_TOKEN if per_token else SUMMARY, sig, records, context=ctx, stride=strd)
