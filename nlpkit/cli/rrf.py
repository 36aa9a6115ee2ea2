"""`nlpkit rrf`: reciprocal rank fusion of TREC runs or plain ranked lists (core: retrieval/fusion.py)."""

from __future__ import annotations

import click

from nlpkit.cli.common import encoding_option, parse_number_list, quiet_option, signature_option, warn
from nlpkit.cli.trec import emit, qrels_options, run_format_option


@click.command("rrf")
@click.argument("runs", nargs=-1, required=True)
@click.option("-k", "k", type=click.FloatRange(min=0), default=60, show_default=True,
              help="The k of 1/(k + rank).")
@click.option("--weights", default=None, help="One weight per run, comma-separated [all 1].")
@click.option("--top", type=click.IntRange(min=1), default=None, help="Keep this many per query [all].")
@click.option("--depth", type=click.IntRange(min=1), default=None,
              help="Use only the first N documents of each input run [all].")
@click.option("--tie-break", type=click.Choice(("docid-desc", "docid-asc", "input")),
              default="docid-desc", show_default=True,
              help="Order of equal scores, in the inputs and the output (docid-desc is trec_eval's).")
@qrels_options
@run_format_option
@signature_option
@quiet_option
@encoding_option
def command(runs, k, weights, top, depth, tie_break, qrels, qrels_format, metrics, per_query,
            run_path, tag, fmt, no_signature, quiet, encoding_errors):
    """Fuse RUN files: score(d) = sum over runs of w / (k + rank), rank 1-based by score.

    A RUN is a TREC run (qid Q0 docid rank score tag) or a plain ranked list (one id per
    line, best first, one implicit query "1"); '-' reads stdin. Queries missing from some
    runs are fused over the union of queries (with a warning).

    \b
      nlpkit rrf bm25.run dense.run -k 60 --top 100 > fused.run
      nlpkit rrf a.run b.run --weights 1,0.5 --qrels qrels.txt
    """
    from nlpkit.retrieval.fusion import query_set_difference, rrf
    from nlpkit.retrieval.metrics import parse_metrics
    from nlpkit.retrieval.runs import read_run
    from nlpkit.signature import make_signature

    w = parse_number_list(weights, "--weights", n=len(runs)) if weights else None
    if qrels:
        parse_metrics(metrics)
    if list(runs).count("-") > 1:
        raise click.UsageError("stdin ('-') can be given only once")
    loaded = [read_run(p, errors=encoding_errors) for p in runs]
    for i, missing in query_set_difference(loaded):
        warn(f"{runs[i]}: has no results for {len(missing)} of the fused queries "
             f"(e.g. {missing[0]!r}); fusing over the union of queries", quiet)
    fused = rrf(loaded, k=k, weights=w, depth=depth, top=top, tie_break=tie_break)
    kk = int(k) if float(k).is_integer() else k
    sig = make_signature("rrf", k=kk, weights=w or "1", depth=depth or "all", tie=tie_break)
    emit(fused, sig, fmt, no_signature, tag or "nlpkit-rrf", qrels, qrels_format, metrics, per_query,
         run_path, encoding_errors, quiet)
