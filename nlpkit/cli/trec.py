"""CLI pieces shared by `bm25 search` and `rrf`: printing a run, or its metrics against qrels.

A run prints as TREC run lines (``qid Q0 docid rank score tag``: the format trec_eval, ranx
and `nlpkit rrf` read; it has no room for the signature) or as records through the shared
writer (table/tsv/jsonl/json, signature included). Default: a table on a terminal, TREC
lines otherwise. With ``--qrels`` the metrics are printed instead (``--run FILE`` keeps
the run as well).
"""

from __future__ import annotations

import click

from nlpkit.cli.common import named_flags, open_writer, resolve_format, warn
from nlpkit.io import FORMATS, stdout_is_terminal, write_text

RUN_FORMATS = ("trec",) + FORMATS


def run_format_option(f):
    return click.option(
        "--format", "fmt", type=click.Choice(RUN_FORMATS), default=None,
        help="Output: trec (qid Q0 docid rank score tag), table, tsv, jsonl or json "
             "[default: table on a terminal, trec otherwise; with --qrels: table/tsv]. TSV cells write backslash, "
             "tab, newline and CR as \\\\, \\t, \\n, \\r.")(f)


def qrels_options(f):
    for deco in reversed([
        click.option("--qrels", type=click.Path(dir_okay=False), default=None,
                     help="Relevance judgements: print metrics instead of the run."),
        click.option("--qrels-format", type=click.Choice(("auto", "trec", "pairs", "cranfield")),
                     default="auto", show_default=True,
                     help="trec 'qid 0 docid rel'; pairs 'qid docid ...' (CISI, CACM); "
                          "cranfield 'qid docid code' (gain 5-code, -1 not relevant)."),
        click.option("--metrics", default="ndcg@10,map@100,recall@100", show_default=True, metavar="LIST",
                     help="Comma-separated: ndcg, map, recall, p, mrr, each optionally @k."),
        click.option("--per-query", is_flag=True, help="With --qrels: one row per query and metric too."),
        click.option("--run", "run_path", type=click.Path(dir_okay=False), default=None,
                     help="Also write the run (TREC format) to this file."),
        click.option("--tag", default=None, metavar="NAME", help="Run tag, the 6th TREC column."),
    ]):
        f = deco(f)
    return f


def emit(run: dict, signature: str, fmt: str | None, no_signature: bool, tag: str,
         qrels: str | None, qrels_format: str, metrics: str, per_query: bool,
         run_path: str | None, encoding_errors: str, quiet: bool) -> None:
    """Print `run` (or, with `qrels`, its metrics) the way the options ask."""
    from nlpkit.retrieval.runs import format_run

    if run_path:
        try:
            from nlpkit.cli.shutdown import partial_output

            with partial_output(run_path), open(run_path, "w", encoding="utf-8") as f:
                f.writelines(format_run(run, tag, sort=False))
        except OSError as e:
            from nlpkit.errors import NlpkitError

            raise NlpkitError(f"{run_path}: cannot write the run ({e.strerror or e})") from None
    if qrels:
        if fmt == "trec":
            raise click.UsageError("--format trec prints a run; with --qrels choose table, tsv, "
                                   "jsonl or json (and --run FILE to keep the run)")
        _emit_metrics(run, signature, fmt, no_signature, qrels, qrels_format, metrics, per_query,
                      encoding_errors, quiet)
        return
    if fmt is None:
        fmt = "table" if stdout_is_terminal() else "trec"
    if fmt == "trec":
        write_text("".join(format_run(run, tag, sort=False)))
        return
    with open_writer(["qid", "rank", "docid", "score"], fmt, signature, no_signature) as out:
        for qid, pairs in run.items():
            for rank, (docid, score) in enumerate(pairs, 1):
                out.write({"qid": qid, "rank": rank, "docid": docid, "score": float(score)})


def _emit_metrics(run, signature, fmt, no_signature, qrels_path, qrels_format, metrics, per_query,
                  encoding_errors, quiet) -> None:
    from nlpkit.retrieval.metrics import evaluate, norm_id, parse_metrics
    from nlpkit.retrieval.runs import read_qrels

    names = parse_metrics(metrics)
    with named_flags(fmt="--qrels-format"):
        qrels = read_qrels(qrels_path, qrels_format, errors=encoding_errors)
    means, per_q = evaluate(run, qrels, names)
    run_q = {norm_id(q) for q in run}
    absent = [q for q in per_q if norm_id(q) not in run_q]
    if absent:
        warn(f"{len(absent)} judged queries have no results in the run (they score 0), "
             f"e.g. {absent[0]!r}", quiet)
    if not per_q:
        warn("no query of the qrels has a relevant document; every metric is 0", quiet)
    sig = signature
    cols = (["qid"] if per_query else []) + ["metric", "value", "queries"]
    with open_writer(cols, resolve_format(fmt), sig, no_signature, digits=4) as out:
        if per_query:
            for qid, values in per_q.items():
                for m in names:
                    out.write({"qid": qid, "metric": m, "value": values[m], "queries": 1})
        for m in names:
            rec = {"metric": m, "value": means[m], "queries": len(per_q)}
            if per_query:
                rec["qid"] = "all"
            out.write(rec)
