"""`nlpkit rrf`: reciprocal rank fusion of TREC runs or plain ranked lists (core: retrieval/fusion.py)."""

from __future__ import annotations

import click

from nlpkit.cli.options import Count, FiniteFloat, NumberList, file_type
from nlpkit.cli.common import (encoding_option, input_paths, named_flags, quiet_option, signature_option, top_option,
                               warn)
from nlpkit.cli.trec import emit, qrels_options, run_format_option


def _refuse_short_k(ctx, param, value):
    if value is not None:
        raise click.UsageError("rrf has no -k: use --rrf-k K for the fusion constant of 1/(k + rank), "
                               "or --top N for the number of results per query", ctx=ctx)
    return value


@click.command("rrf")
@click.argument("runs", nargs=-1, metavar="[RUN]...", type=file_type())
@click.option("--rrf-k", "k", type=FiniteFloat(min=0, max=1e6), default=60, show_default=True,
              help="The k of 1/(k + rank).")
@click.option("-k", "short_k", default=None, hidden=True, expose_value=False, callback=_refuse_short_k,
              help="Refused: say --rrf-k or --top.")
@click.option("--weights", type=NumberList(min=0, metavar="W,W,..."), default=None,
              help="One weight per run (>= 0), comma-separated [all 1].")
@top_option(None, "Keep this many per query (0 = all) [all].", short=False)
@click.option("--depth", type=Count(1), default=None,
              help="Use only the first N documents of each input run [all].")
@click.option("--tie-break", type=click.Choice(("docid-desc", "docid-asc", "input")),
              default="docid-desc", show_default=True,
              help="Order of equal scores, in the inputs and the output (docid-desc is trec_eval's).")
@qrels_options
@run_format_option
@signature_option
@quiet_option
@encoding_option
@named_flags(k="--rrf-k")
def command(runs, k, weights, top, depth, tie_break, qrels, qrels_format, metrics, per_query,
            run_path, tag, fmt, no_signature, quiet, encoding_errors):
    """Fuse RUN files: score(d) = sum over runs of w / (k + rank), rank 1-based by score.

    No RUN with empty stdin, or an empty RUN file, is an error.

    A RUN is a TREC run (qid Q0 docid rank score tag) or a plain ranked list (one id per
    line, best first, one implicit query "1"); '-' reads stdin, as does no RUN at all when
    stdin is piped. Queries missing from some runs are fused over the union of queries (with
    a warning). (-k is refused: it means --top elsewhere; the constant is --rrf-k.)

    \b
      nlpkit rrf bm25.run dense.run --rrf-k 60 --top 100 > fused.run
      nlpkit rrf a.run b.run --weights 1,0.5 --qrels qrels.txt
    """
    from nlpkit.retrieval.fusion import query_set_difference, rrf
    from nlpkit.retrieval.metrics import parse_metrics
    from nlpkit.retrieval.runs import read_run
    from nlpkit.signature import make_signature

    runs = input_paths(runs, "run", "RUN")
    w = weights
    if w and len(w) != len(runs):
        raise click.BadParameter(f"expected {len(runs)} comma-separated numbers (one per run), got {len(w)}",
                                 param_hint="--weights")
    if w and not any(w):
        raise click.BadParameter(f"at least one weight must be above 0, got {','.join(f'{x:g}' for x in w)} (every score would be 0)",
                                 param_hint="--weights")
    if qrels:
        parse_metrics(metrics)
    if list(runs).count("-") > 1:
        raise click.UsageError("stdin ('-') can be given only once")
    loaded = [read_run(p, errors=encoding_errors) for p in runs]
    for i, missing in query_set_difference(loaded):
        warn(f"{runs[i]}: has no results for {len(missing)} of the fused queries "
             f"(e.g. {missing[0]!r}); fusing over the union of queries", quiet)
    fused = rrf(loaded, k=k, weights=w, depth=depth, top=top or None, tie_break=tie_break)
    kk = int(k) if float(k).is_integer() else k
    sig = make_signature("rrf", k=kk, weights=w or "1", depth=depth or "all", tie=tie_break)
    emit(fused, sig, fmt, no_signature, tag or "nlpkit-rrf", qrels, qrels_format, metrics, per_query,
         run_path, encoding_errors, quiet)
