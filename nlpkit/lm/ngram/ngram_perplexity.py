"""What `nlpkit perplexity --model lm.arpa` prints: each line scored as one sentence, KenLM query's figures (sentences,
tokens, OOVs, zero-probability words, log10 probability, perplexity with and without OOVs) plus NLL and bits per
byte, per file (then a corpus total), per line or per token. The n-gram model's own perplexity (it has no windows:
`NgramLM.window_context` is None), reached through `NgramLM.sentence_perplexity` from
`nlpkit.lm.perplexity.perplexity_run`; the scoring itself is `line_scoring`'s.
"""

from __future__ import annotations

from typing import Callable, Iterator, Sequence

from nlpkit.errors import NlpkitError
from nlpkit.lm.interface import PerplexityRun
from nlpkit.lm.ngram.ngram_model import NgramModel, log10_to_nats

PERPLEXITY_SUMMARY = ["file", "sentences", "tokens", "oov", "zero_prob", "log10_prob", "ppl", "ppl_unc",
                      "ppl_no_oov", "mean_nll", "mean_nll_se", "bits_per_byte", "bytes"]
PERPLEXITY_PER_LINE = ["file", "line", "tokens", "oov", "zero_prob", "log10_prob", "ppl", "ppl_unc", "ppl_no_oov",
                       "mean_nll", "mean_nll_se", "bits_per_byte"]
PERPLEXITY_PER_TOKEN = ["file", "line", "position", "token", "id", "ngram", "log10_prob", "logprob", "oov"]
TOTAL = "(total)"  # the file cell of the corpus total row, as for a transformer


def sentence_perplexity_run(model: NgramModel, transform: Callable[[str], str] | None, signature: str,
                            paths: Sequence[str], *, per_line: bool = False, per_token: bool = False,
                            errors: str = "strict", worker_key: tuple | None = None) -> PerplexityRun:
    """Per-token records always name their line (each line is a sentence, positions count from its first word).
    `records(progress, map_windows, map_lines)`: with `map_lines` (`nlpkit.distributed.stages.perplexity_lines`)
    the workers score line shards (`line_scoring.score_shard`, the model loaded from `worker_key`): the same
    records, digit for digit."""
    columns = PERPLEXITY_PER_TOKEN if per_token else PERPLEXITY_PER_LINE if per_line else PERPLEXITY_SUMMARY

    def records(progress=None, map_windows: Callable | None = None,
                map_lines: Callable | None = None) -> Iterator[dict]:
        return _records(model, transform, paths, per_line, per_token, errors, map_lines, worker_key)

    return PerplexityRun(columns, signature, records, digits=6)


def _records(model, transform, paths, per_line, per_token, errors, map_lines, worker_key) -> Iterator[dict]:
    from nlpkit.io import display_name
    from nlpkit.lm.ngram.line_scoring import NgramPerplexity, score_shard, score_source

    several = len(paths) > 1 and not per_line and not per_token
    corpus = NgramPerplexity()
    if map_lines is not None:
        results = ((k, part) for k, _, parts in map_lines(list(paths), score_shard,
                                                          (worker_key, errors, per_token, per_line))
                   for part in parts)
    else:
        results = ((k, b if per_token else b.line_sums(per_line)) for k, path in enumerate(paths)
                   for b in score_source(model, path, errors, transform))
    pending = next(results, None)
    for k, path in enumerate(paths):
        name = display_name(path)
        total = NgramPerplexity()
        lineno = 0
        while pending is not None and pending[0] == k:
            item = pending[1]
            if per_token:
                total.add_batch(item)
                for lineno, s in enumerate(item.lines(), lineno + 1):
                    yield from ({"file": name, "line": lineno, "position": i, "token": w, "id": int(t),
                                 "ngram": int(n), "log10_prob": float(lp), "logprob": float(log10_to_nats(lp)),
                                 "oov": bool(o)}
                                for i, (w, t, n, lp, o)
                                in enumerate(zip(s.words, s.ids.tolist(), s.ngram.tolist(), s.log10.tolist(),
                                                 s.oov.tolist())))
            else:
                total.add_sums(item)
                if per_line:
                    for lineno, one in enumerate(item.lines(), lineno + 1):
                        rec = _record(one)
                        rec.pop("sentences"), rec.pop("bytes")
                        yield {"file": name, "line": lineno, **rec}
            pending = next(results, None)
        if total.sentences == 0 and not per_line:
            raise NlpkitError(f"{name}: empty text, nothing to score")
        if not per_line and not per_token:
            yield {"file": name, **_record(total), **({"total": False} if several else {})}
            corpus.merge(total)
    if several:
        yield {"file": TOTAL, **_record(corpus), "total": True}


def _record(p) -> dict:
    return {"sentences": p.sentences, "tokens": p.tokens, "oov": p.oov, "zero_prob": p.zero_prob,
            "log10_prob": p.log10_total, "ppl": p.perplexity, "ppl_unc": p.perplexity_unc,
            "ppl_no_oov": p.perplexity_no_oov, "mean_nll": p.mean_nll, "mean_nll_se": p.mean_nll_se,
            "bits_per_byte": p.bits_per_byte, "bytes": p.bytes}
