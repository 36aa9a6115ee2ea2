"""`nlpkit bm25`: build, search and extend BM25 indexes (core: nlpkit/retrieval/)."""

from __future__ import annotations

import click

from nlpkit.cli.options import ChoiceOrFile, Count, STOPWORD_LISTS, file_type, given
from nlpkit.cli.common import (FiniteFloat, dask_for, dask_options, encoding_option, flag, format_option,
                               input_paths, named_flags, open_writer, progress, quiet_option, signature_option,
                               warn)
from nlpkit.cli.trec import emit, qrels_options, run_format_option

VARIANTS = ("lucene", "robertson", "atire", "bm25l", "bm25+")
CORPUS_FORMATS = ("auto", "lines", "tsv", "jsonl", "paragraphs", "smart")   # = stats.documents.CORPUS_FORMATS


def corpus_options(f):
    for deco in reversed([
        click.option("--corpus-format", type=click.Choice(CORPUS_FORMATS), default="auto",
                     show_default=True,
                     help="lines (id = line number), tsv (id<TAB>text), jsonl, paragraphs "
                          "(blank-line separated), smart (.I/.T/.W: Cranfield, CISI, CACM); "
                          "auto detects smart and jsonl, else lines."),
        click.option("--id-field", default="id", show_default=True, metavar="NAME", help="JSONL: the id field."),
        click.option("--field", default=None, metavar="NAME|TAGS",
                     help="JSONL: the text field [text]; smart: comma-separated tags [T,W]."),
    ]):
        f = deco(f)
    return f


def model_options(f):
    for deco in reversed([
        click.option("--variant", type=click.Choice(VARIANTS), default="lucene", show_default=True,
                     help="BM25 variant (formulas as bm25s)."),
        click.option("--k1", type=FiniteFloat(0, 1e6), default=1.5, show_default=True,
                     help="Term-frequency saturation, 0 to 1e6 (beyond, tf no longer saturates and float32 "
                          "scores underflow)."),
        click.option("--b", type=FiniteFloat(0, 1), default=0.75, show_default=True,
                     help="Length normalisation."),
        click.option("--delta", type=FiniteFloat(0, 1e6), default=0.5, show_default=True,
                     help="bm25l / bm25+ lower bound (the other variants have none: a warning)."),
        click.option("--stopwords", default=None, type=ChoiceOrFile(STOPWORD_LISTS), metavar="english|sklearn|lucene|none|FILE",
                     help="Drop these words: a built-in list, or a file (one word a line) [none]."),
        click.option("--token-pattern", default=None, metavar="REGEX",
                     help=r"Token regex [default: (?u)\b\w\w+\b, as scikit-learn and bm25s]."),
    ]):
        f = deco(f)
    return f


def _read_corpus(paths, corpus_format, id_field, field, errors, first_id=1):
    from nlpkit.stats.documents import read_corpus

    with named_flags(fmt="--corpus-format"):
        return read_corpus(paths, corpus_format, id_field=id_field, field=field or "text",
                           fields=field or "T,W", errors=errors, first_id=first_id)


def _warn_unused_delta(variant: str, quiet: bool) -> None:
    if given("delta") and variant not in ("bm25l", "bm25+"):
        warn(f"--delta applies to --variant bm25l and bm25+ only; {variant} ignores it", quiet)


def _build(paths, corpus_format, id_field, field, variant, k1, b, delta, stopwords, token_pattern,
           errors, quiet):
    from nlpkit.retrieval.search import index_texts

    _warn_unused_delta(variant, quiet)

    records = _read_corpus(paths, corpus_format, id_field, field, errors)
    with progress("indexing", total=len(records), quiet=quiet) as tick:
        return index_texts(records, variant=variant, k1=k1, b=b, delta=delta, pattern=token_pattern,
                           stopwords=stopwords, progress=tick)


@click.group("bm25", context_settings={"max_content_width": 100})
def command() -> None:
    """BM25 search: build an index (index), query it (search), append documents (add).

    \b
      nlpkit bm25 index cran.all.1400 -o cran.idx --variant lucene --k1 1.2
      nlpkit bm25 search cran.idx --query "boundary layer heat transfer" --top 5
      nlpkit bm25 search cran.idx --queries cran.qry --query-ids position \\
          --qrels cranqrel --qrels-format cranfield
      nlpkit bm25 add cran.idx more_docs.tsv --corpus-format tsv
    """


@command.command("index", short_help="Build an index of CORPUS... in the directory -o/--output.")
@click.argument("corpus", nargs=-1, type=file_type())
@click.option("-o", "--output", "index_path", required=True, type=click.Path(file_okay=False), metavar="DIR",
              help="Index directory to write.")
@corpus_options
@model_options
@dask_options
@format_option
@signature_option
@quiet_option
@encoding_option
@named_flags(fmt="--corpus-format", pattern="--token-pattern")
def index_cmd(corpus, index_path, corpus_format, id_field, field, variant, k1, b, delta, stopwords,
              token_pattern, dask, shard_size, fmt, no_signature, quiet, encoding_errors):
    """Index CORPUS (one or more files, plain or .gz/.bz2/.zst, '-', or piped stdin when no CORPUS is
    given) into the directory given by -o/--output (created if needed).

    Several files are one corpus, read in the order given: documents without ids (lines,
    paragraphs) are numbered on across the files, and an id may appear once in the corpus.
    With --corpus-format auto every file must look like the same format. No CORPUS with empty
    stdin, or a corpus with no documents, is an error."""
    from nlpkit.cli.shutdown import partial_output
    from nlpkit.retrieval.search import signature
    from nlpkit.retrieval.store import index_size, save_index

    paths = input_paths(list(corpus), "corpus", "CORPUS")
    dask = dask_for(dask, paths)
    if dask:
        _warn_unused_delta(variant, quiet)
    if dask:
        from nlpkit.distributed.cluster import connect
        from nlpkit.distributed.stages import bm25_index
        from nlpkit.retrieval.search import tokenizer_settings
        from nlpkit.shards import parse_size

        size = parse_size(shard_size)
        settings = tokenizer_settings(token_pattern, True, stopwords)
        with connect(dask, quiet) as client, progress("tasks", quiet=quiet) as tick, partial_output(index_path):
            summary = bm25_index(client, paths, index_path, corpus_format, variant, k1, b, delta, settings,
                                 id_field, field or "text", field or "T,W", encoding_errors, size, tick)
        sig = signature({"variant": variant, "k1": k1, "b": b, "delta": delta, "tokenizer": settings})
        with open_writer(["index", "documents", "terms", "postings", "avgdl", "bytes"], fmt, sig,
                         no_signature) as out:
            out.write({"index": index_path, **summary})
        return
    idx = _build(paths, corpus_format, id_field, field, variant, k1, b, delta, stopwords,
                 token_pattern, encoding_errors, quiet)
    with partial_output(index_path):
        save_index(idx, index_path)
    _summary(idx, index_path, index_size(index_path), signature(idx), fmt, no_signature)


def _summary(idx, index_path, size, sig, fmt, no_signature):
    cols = ["index", "documents", "terms", "postings", "avgdl", "bytes"]
    with open_writer(cols, fmt, sig, no_signature) as out:
        out.write({"index": index_path, "documents": idx.n_docs, "terms": len(idx.vocab),
                   "postings": int(len(idx.postings)), "avgdl": idx.avgdl, "bytes": size})


@command.command("add", short_help="Append the documents of CORPUS... to INDEX (scores recomputed).")
@click.argument("index_path", metavar="INDEX", type=click.Path(file_okay=False))
@click.argument("corpus", nargs=-1, type=file_type())
@corpus_options
@dask_options
@format_option
@signature_option
@quiet_option
@encoding_option
@named_flags(fmt="--corpus-format")
def add_cmd(index_path, corpus, corpus_format, id_field, field, dask, shard_size, fmt, no_signature, quiet,
            encoding_errors):
    """Append the documents of CORPUS (one or more files, plain or compressed, '-', or piped stdin)
    to INDEX; every score is recomputed (N, df, avgdl change).

    Documents without ids (lines, paragraphs) continue the index's numbering, across the files
    in the order given. With --dask the workers tokenize and count the new documents; the
    merged index is the same, byte for byte. An empty CORPUS adds nothing (with a warning); no
    CORPUS with empty stdin is an error.
    """
    from nlpkit.errors import NlpkitError
    from nlpkit.io import display_name
    from nlpkit.retrieval.search import add_texts, signature
    from nlpkit.retrieval.store import index_size, load_index, save_index

    paths = input_paths(list(corpus), "corpus", "CORPUS")
    dask = dask_for(dask, paths)
    idx = load_index(index_path, mmap=False)
    if dask:
        from nlpkit.distributed.cluster import connect
        from nlpkit.distributed.stages import bm25_add
        from nlpkit.shards import parse_size
        from nlpkit.stats.documents import check_unique_ids

        with connect(dask, quiet) as client, progress("tasks", quiet=quiet) as tick:
            parts, ids = bm25_add(client, idx, paths, corpus_format, id_field, field or "text", field or "T,W",
                                  encoding_errors, parse_size(shard_size), tick)
        check_unique_ids(ids, display_name(paths[0]) if len(paths) == 1 else "the corpus")
    else:
        records = _read_corpus(paths, corpus_format, id_field, field, encoding_errors,
                               first_id=idx.n_docs + 1)
        ids = [rid for rid, _ in records]
    if not ids:
        warn("no documents to add; the index is unchanged", quiet)
    else:
        old = set(idx.doc_ids)
        clash = next(((i, rid) for i, rid in enumerate(ids, 1) if rid in old), None)
        if clash is not None:
            name = display_name(paths[0]) if len(paths) == 1 else "the corpus"
            raise NlpkitError(f"{name}: document id {clash[1]!r} (record {clash[0]}) is already in "
                              f"the index {index_path}; ids must be unique")
        if dask:
            from nlpkit.retrieval.bm25 import add_shards

            idx = add_shards(idx, parts, ids)
        else:
            idx = add_texts(idx, records)
        save_index(idx, index_path)
    _summary(idx, index_path, index_size(index_path), signature(idx), fmt, no_signature)


@command.command("search", short_help="Search INDEX (or an in-memory --corpus): --query, --queries or stdin.")
@click.argument("index_path", metavar="[INDEX]", required=False, type=click.Path(file_okay=False))
@click.option("--query", "query_texts", multiple=True, help="A query (repeatable; ids 1, 2, ...).")
@click.option("--queries", "queries_path", type=click.Path(dir_okay=False, allow_dash=True), default=None,
              metavar="FILE",
              help="Query file ('-' = stdin; also read when stdin is piped and no query is given): "
                   "TSV qid<TAB>text, JSONL, lines or SMART (see --queries-format).")
@click.option("--queries-format", type=click.Choice(CORPUS_FORMATS), default="auto", show_default=True,
              help="auto: smart, jsonl or tsv (qid<TAB>text) when the file looks so, else lines "
                   "(numbered 1, 2, ...).")
@click.option("--query-field", default="text", show_default=True, metavar="NAME", help="JSONL queries: the text field.")
@click.option("--query-ids", type=click.Choice(("file", "position")), default="file", show_default=True,
              help="position: number queries 1..n in file order (Cranfield's qrels do).")
@click.option("--corpus", "corpus_path", default=None, metavar="FILE", type=file_type(),
              help="Build an in-memory index from this corpus instead of loading INDEX.")
@corpus_options
@model_options
@click.option("-k", "--top", type=Count(0), default=None, metavar="N",
              help="Results per query, 0 = all [default: 10; 1000 with --qrels].")
@qrels_options
@run_format_option
@signature_option
@quiet_option
@encoding_option
@named_flags(pattern="--token-pattern")
def search_cmd(index_path, query_texts, queries_path, queries_format, query_field, query_ids,
               corpus_path, corpus_format, id_field, field, variant, k1, b, delta, stopwords,
               token_pattern, top, qrels, qrels_format, metrics, per_query, run_path, tag, fmt,
               no_signature, quiet, encoding_errors):
    """Search INDEX (or an in-memory --corpus) with --query TEXT, --queries FILE, or the
    queries piped on stdin (one per line, or qid<TAB>text). No query with empty stdin, or an
    empty --qrels file, is an error; an empty --queries file gives an empty run (with a warning)."""
    from nlpkit.stats.documents import read_records
    from nlpkit.retrieval.search import search_texts, signature
    from nlpkit.retrieval.store import load_index

    if (index_path is None) == (corpus_path is None):
        raise click.UsageError("give an INDEX directory or --corpus FILE (exactly one)")
    if index_path:
        ctx = click.get_current_context()
        given = [flag(p) for p in ("variant", "k1", "b", "delta", "stopwords",
                                                      "token_pattern", "corpus_format", "field")
                 if ctx.get_parameter_source(p) is not click.core.ParameterSource.DEFAULT]
        if given:
            verb = "applies" if len(given) == 1 else "apply"
            raise click.UsageError(f"{', '.join(given)} {verb} to --corpus; a saved index keeps the "
                                   "settings it was built with")
    if not query_texts and not queries_path:
        from nlpkit.cli.common import stdin_is_empty, stdin_is_piped

        if not stdin_is_piped():
            raise click.UsageError("give --query TEXT or --queries FILE, or pipe queries on stdin")
        if stdin_is_empty():
            from nlpkit.errors import NlpkitError

            raise NlpkitError("no input (no --query or --queries given, and stdin is empty)")
        queries_path = "-"
    if qrels:
        from nlpkit.retrieval.metrics import parse_metrics
        parse_metrics(metrics)  # a bad --metrics is a usage error before any work
    queries = [(str(i), q) for i, q in enumerate(query_texts, 1)]
    if queries_path:
        qfield = query_field
        with named_flags(fmt="--queries-format"):
            queries += read_records(queries_path, queries_format, id_field=id_field, field=qfield,
                                    fields="W", errors=encoding_errors, kind="queries",
                                    query_ids=query_ids)
        if not queries and not query_texts:
            from nlpkit.io import display_name

            warn(f"{display_name(queries_path)}: no queries; the run is empty", quiet)
    if index_path:
        idx = load_index(index_path)
    else:
        idx = _build([corpus_path], corpus_format, id_field, field, variant, k1, b, delta, stopwords,
                     token_pattern, encoding_errors, quiet)
    k = (1000 if qrels else 10) if top is None else (top or idx.n_docs)
    with progress("searching", total=len(queries), quiet=quiet) as tick:
        run = search_texts(idx, queries, k, progress=tick)
    empty = [qid for qid, hits in run.items() if not hits]
    if empty:
        some = ", ".join(empty[:5]) + (", ..." if len(empty) > 5 else "")
        warn(f"{len(empty)} of {len(run)} queries share no term with the index: no results for {some}"
             if len(run) > 1 else "the query shares no term with the index: no results", quiet)
    sig = signature(idx)
    emit(run, sig, fmt, no_signature, tag or f"nlpkit-bm25-{idx.variant}", qrels, qrels_format,
         metrics, per_query, run_path, encoding_errors, quiet)
