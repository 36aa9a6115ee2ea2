"""`nlpkit tfidf`: TF-IDF weights (scikit-learn's and gensim SMART numbers), top terms, matrix, query."""

from __future__ import annotations

import click

from nlpkit.cli.options import ChoiceOrFile, Count, DocFrequency, FiniteFloat, NumberList, STOPWORD_LISTS, jobs_option
from nlpkit.cli.common import (common_options, dask_for, dask_options, input_paths, named_flags, open_writer,
                               progress, warn)


def _df_value(value: str, name: str) -> float:
    """'5' -> 5 documents; '0.5' -> half of the documents (scikit-learn's int/float rule)."""
    try:
        if any(ch in value for ch in ".eE"):
            v = float(value)
            if not 0.0 <= v <= 1.0:
                raise click.BadParameter("a proportion must be in [0, 1]", param_hint=name)
            return v
        v = int(value)
        if v < 0:
            raise click.BadParameter("a document count must be >= 0", param_hint=name)
        return v
    except ValueError:
        raise click.BadParameter(f"expected a document count (5) or a proportion (0.5), got {value!r}",
                                 param_hint=name) from None


@click.command("tfidf")
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--docs", type=click.Choice(["files", "lines", "tsv", "jsonl", "paragraphs", "smart"]), default=None,
              help="What a document is: a file [default], a line, an id<TAB>text line, a JSONL record "
                   "(implied by --field), a blank-line separated paragraph, or a SMART .I record.")
@click.option("--field", default=None, metavar="NAME",
              help="JSONL: the field holding the text [text]; smart: comma-separated tags [T,W].")
@click.option("--id-field", default=None, metavar="NAME", help="JSONL field naming the document.")
@click.option("--tf", type=click.Choice(["raw", "relative", "log", "boolean", "augmented"]), default=None,
              help="Term frequency: raw count [default], count/length, 1+log, 0/1, 0.5+0.5*count/max.")
@click.option("--idf", type=click.Choice(["standard", "smooth", "probabilistic", "none"]), default=None,
              help="standard log(N/df); smooth ln((1+N)/(1+df))+1 (scikit-learn, default); "
                   "probabilistic max(0, log((N-df)/df)); none.")
@click.option("--idf-offset", type=FiniteFloat(-1e6, 1e6), default=0.0, show_default=True,
              help="Add this to every idf, -1e6 to 1e6 (scikit-learn smooth_idf=False = --idf standard "
                   "--idf-offset 1).")
@click.option("--norm", type=click.Choice(["l2", "l1", "none"]), default=None,
              help="Document vector normalization [default: l2].")
@click.option("--sublinear", is_flag=True, help="tf = 1 + log(count) (scikit-learn sublinear_tf); same as --tf log.")
@click.option("--smart", default=None, metavar="XYZ",
              help="gensim SMART letters, e.g. ntc, ltc, apc (tf: b n a l d L; idf: n f t p; norm: n c; log base 2).")
@click.option("--log-base", type=click.Choice(["2", "e", "10"]), default="e", show_default=True,
              help="Logarithm base for log tf and idf.")
@click.option("--min-df", type=DocFrequency(), default="1", show_default=True, metavar="N|P",
              help="Drop terms in fewer documents (count, or proportion 0-1).")
@click.option("--max-df", type=DocFrequency(), default="1.0", show_default=True, metavar="N|P",
              help="Drop terms in more documents (count, or proportion 0-1).")
@click.option("--ngram-range", type=NumberList(2, int, metavar="MIN,MAX"), default="1,1",
              show_default=True, help="Word n-grams, up to 3.")
@click.option("--stopwords", default="none", show_default=True, type=ChoiceOrFile(STOPWORD_LISTS), metavar="english|sklearn|lucene|none|FILE",
              help="Drop these words (english = NLTK's list, sklearn = scikit-learn's).")
@click.option("--token-pattern", default=None, metavar="REGEX",
              help=r"Token regex [default: (?u)\b\w\w+\b, as scikit-learn].")
@click.option("--lowercase/--no-lowercase", default=True, show_default=True, help="Lowercase the text first.")
@click.option("-k", "--top", type=Count(0), metavar="N", default=10, show_default=True,
              help="Top terms per document; with --query, top documents (0 = all).")
@click.option("--query", default=None, metavar="TEXT", help="Rank the documents by cosine similarity to TEXT.")
@click.option("--matrix", is_flag=True, help="Print the whole matrix in MatrixMarket coordinate format.")
@click.option("--vocab-out", type=click.Path(dir_okay=False, writable=True), default=None,
              help="With --matrix: write the terms (column order) to this file instead of header comments.")
@jobs_option("Tokenizer worker processes, at most the CPUs available [2 for 8 MB or more of files on a "
             "multi-core machine, else 1].")
@dask_options
@common_options
@named_flags(mode="--docs", fmt="--docs", pattern="--token-pattern")
def command(files, docs, field, id_field, tf, idf, idf_offset, norm, sublinear, smart, log_base, min_df,
            max_df, ngram_range, stopwords, token_pattern, lowercase, top, query, matrix, vocab_out,
            jobs, dask, shard_size, fmt, no_signature, quiet, encoding_errors):
    """TF-IDF weights of documents: top terms per document, the matrix, or a query ranking.

    No FILES with empty stdin, or documents with no words, is an error.

    With the defaults the numbers equal scikit-learn's TfidfVectorizer() (raw tf,
    smooth idf, l2 norm, the same token pattern); --smart XYZ equals gensim's
    TfidfModel(smartirs=XYZ).

    \b
    Examples:
      nlpkit tfidf --docs lines --stopwords english --top 5 corpus.txt
      nlpkit tfidf --docs jsonl --field body --query "boundary layer" docs.jsonl
      nlpkit tfidf --docs lines --matrix --vocab-out vocab.txt corpus.txt > X.mtx
    """
    from nlpkit.stats import tfidf as core
    from nlpkit.stats.counting import auto_jobs
    from nlpkit.stats.documents import DocNames, doc_break, iter_documents
    from nlpkit.errors import NlpkitError, UsageError
    from nlpkit.io import write_text
    from nlpkit.signature import make_signature
    from nlpkit.text import WordTokenizer

    if top < 0:
        raise UsageError(f"--top must be >= 0 (0 = all), got {top}")
    if vocab_out and not matrix:
        raise UsageError("--vocab-out needs --matrix")
    if vocab_out:
        import os

        parent = os.path.dirname(os.path.abspath(vocab_out))
        if not os.path.isdir(parent):     # before the work, not after it
            raise NlpkitError(f"--vocab-out {vocab_out}: cannot write (no directory {parent})")
    if matrix and query:
        raise UsageError("choose --matrix or --query, not both")
    if matrix and fmt is not None:
        raise UsageError("--matrix writes MatrixMarket: it does not take --format")
    mode = docs or ("jsonl" if field or id_field else "files")
    if (field and mode not in ("jsonl", "smart")) or (id_field and mode != "jsonl"):
        raise UsageError("--field needs --docs jsonl or smart; --id-field needs --docs jsonl")
    lo, hi = ngram_range
    if smart:
        if tf or idf or norm or sublinear or idf_offset:
            raise UsageError("--smart sets tf, idf and norm: do not combine it with --tf/--idf/--norm/"
                             "--sublinear/--idf-offset")
        weighting = core.smart_weighting(smart)
    else:
        if sublinear and tf not in (None, "log"):
            raise UsageError(f"--sublinear means --tf log; it contradicts --tf {tf}")
        weighting = core.Weighting(tf="log" if sublinear else (tf or "raw"), idf=idf or "smooth",
                                   norm=norm or "l2", log_base=log_base, idf_offset=idf_offset)
    tok = WordTokenizer(pattern=token_pattern, lowercase=lowercase, stopwords=stopwords)
    paths = input_paths(files)
    dask = dask_for(dask, paths)
    if dask:
        _dask_tfidf(dask, shard_size, paths, mode, tok, weighting, (lo, hi), min_df, max_df, top,
                    field, id_field, matrix, vocab_out, query, encoding_errors, fmt, no_signature, quiet)
        return
    names = DocNames()
    batches = iter_documents(paths, mode, names, field if mode == "jsonl" and field else "text", id_field,
                             encoding_errors, fields=field if mode == "smart" and field else "T,W")
    with progress("documents", quiet=quiet) as tick:
        m = core.tfidf(tokenizer=tok, weighting=weighting, ngram_range=(lo, hi),
                       min_df=_df_value(min_df, "--min-df"), max_df=_df_value(max_df, "--max-df"),
                       batches=batches, doc_break=doc_break(mode), names=names,
                       jobs=auto_jobs(paths, jobs), progress=tick)
    w = m.weighting
    settings = {"smart": w.smart} if w.smart else {"tf": w.tf, "idf": w.idf, "norm": w.norm, "log": w.log_base,
                                                   "idf_offset": f"{w.idf_offset:g}"}
    sig = make_signature("tfidf", **settings, ngram=f"{lo},{hi}", min_df=min_df, max_df=max_df,
                         tok=tok.signature, stop=tok.stopwords_name, docs=mode)
    if matrix:
        import sys

        with _vocab_output(vocab_out):   # partial (removed on Ctrl-C) until the matrix is written too
            if vocab_out:
                _write_vocab(vocab_out, m.terms)
            core.write_matrix_market(m, sys.stdout, None if no_signature else sig, vocab_in_header=not vocab_out)
            write_text("")
        return
    if query is not None:
        hits = core.rank_by_cosine(m, tok.tokenize(query), top)
        if not hits:
            warn("no document shares a term with the query", quiet)
        with open_writer(["rank", "doc", "cosine"], fmt, sig, no_signature, path_columns=_paths(mode)) as out:
            for r, (i, s) in enumerate(hits, 1):
                out.write({"rank": r, "doc": m.names[i], "cosine": s})
        return
    with open_writer(["doc", "rank", "term", "weight"], fmt, sig, no_signature, path_columns=_paths(mode)) as out:
        for i, terms in core.top_terms(m, top):
            for r, (term, weight) in enumerate(terms, 1):
                out.write({"doc": m.names[i], "rank": r, "term": term, "weight": weight})


def _signature(w, lo, hi, min_df, max_df, tok, mode):
    from nlpkit.signature import make_signature

    settings = {"smart": w.smart} if w.smart else {"tf": w.tf, "idf": w.idf, "norm": w.norm, "log": w.log_base,
                                                   "idf_offset": f"{w.idf_offset:g}"}
    return make_signature("tfidf", **settings, ngram=f"{lo},{hi}", min_df=min_df, max_df=max_df,
                          tok=tok.signature, stop=tok.stopwords_name, docs=mode)


def _vocab_output(vocab_out: str | None):
    """--vocab-out FILE registered as a partial output around the vocabulary and the matrix: FILE and the matrix on
    stdout are one result, so Ctrl-C while the matrix is written removes FILE too (`cli.shutdown`)."""
    from contextlib import nullcontext

    from nlpkit.cli.shutdown import partial_output

    return partial_output(vocab_out) if vocab_out else nullcontext()


def _write_vocab(vocab_out: str, terms: list[str]) -> None:
    """Write the vocabulary (the caller holds it as a partial output, `_vocab_output`)."""
    from nlpkit.errors import NlpkitError
    from nlpkit.stats.tfidf import escape_term

    try:
        with open(vocab_out, "w", encoding="utf-8") as f:
            f.write("".join(escape_term(t) + "\n" for t in terms))
    except OSError as e:
        raise NlpkitError(f"--vocab-out {vocab_out}: cannot write ({e.strerror or e})") from None


def _dask_tfidf(dask, shard_size, paths, mode, tok, weighting, ngram_range, min_df, max_df, top,
                field, id_field, matrix, vocab_out, query, encoding_errors, fmt, no_signature, quiet):
    """Top terms per document, the matrix or a query ranking on a Dask cluster (streamed in
    document order; the same output as the local path)."""
    import sys

    from nlpkit.distributed import stages
    from nlpkit.distributed.cluster import connect
    from nlpkit.io import write_text
    from nlpkit.shards import parse_size

    size = parse_size(shard_size)
    sig = _signature(weighting, *ngram_range, min_df, max_df, tok, mode)
    common = dict(ngram_range=ngram_range, min_df=_df_value(min_df, "--min-df"),
                  max_df=_df_value(max_df, "--max-df"), field=field if mode == "jsonl" and field else "text",
                  id_field=id_field, fields=field if mode == "smart" and field else "T,W", errors=encoding_errors,
                  shard_bytes=size)
    with connect(dask, quiet) as client, progress("tasks", quiet=quiet) as tick:
        if matrix:
            terms, text = stages.tfidf_matrix(client, paths, mode, tok, weighting, progress=tick,
                                              signature=None if no_signature else sig,
                                              vocab_in_header=not vocab_out, **common)
            with _vocab_output(vocab_out):
                if vocab_out:
                    _write_vocab(vocab_out, terms)
                for chunk in text:
                    sys.stdout.write(chunk)
                write_text("")
            return
        if query is not None:
            hits = stages.tfidf_query(client, paths, mode, tok, weighting, tok.tokenize(query), top,
                                      progress=tick, **common)
            if not hits:
                warn("no document shares a term with the query", quiet)
            with open_writer(["rank", "doc", "cosine"], fmt, sig, no_signature, path_columns=_paths(mode)) as out:
                for r, (name, cos) in enumerate(hits, 1):
                    out.write({"rank": r, "doc": name, "cosine": cos})
            return
        _, rows = stages.tfidf_top_terms(client, paths, mode, tok, weighting, top=top, progress=tick, **common)
        with open_writer(["doc", "rank", "term", "weight"], fmt, sig, no_signature, path_columns=_paths(mode)) as out:
            for doc, r, term, weight in rows:
                out.write({"doc": doc, "rank": r, "term": term, "weight": weight})


def _paths(mode: str) -> tuple[str, ...]:
    """With --docs files a document is named by its path: the table shows its basename."""
    return ("doc",) if mode == "files" else ()
