"""`nlpkit ngram-train`: count a corpus and write an n-gram model (core: nlpkit/lm/ngram/train.py)."""

from __future__ import annotations

import click

from nlpkit.cli.options import Count, FiniteFloat, file_type, jobs_option, model_path_type
from nlpkit.cli.common import (cli_message, common_options, dask_for, dask_options, input_paths, open_writer,
                               progress, warn)

MAX_ORDER = 255   # n-gram counts keep one byte per order below this (nlpkit.lm.ngram.counting)


@click.command("ngram-train")
@click.argument("files", nargs=-1, type=file_type())
@click.option("-o", "--output", "output", required=True, metavar="MODEL", type=file_type(dash=False),
              help="Model file: MODEL.arpa (kneser-ney) or MODEL.ngram (mle, add-k); .gz compresses.")
@click.option("--order", type=Count(1, MAX_ORDER), default=3, show_default=True,
              help=f"n: the longest n-gram (1 to {MAX_ORDER}).")
@click.option("--smoothing", type=click.Choice(("kneser-ney", "mle", "add-k")), default="kneser-ney",
              show_default=True,
              help="kneser-ney: interpolated modified Kneser-Ney as KenLM lmplz (ARPA); mle / add-k: "
                   "counts in nlpkit's counts format (the ARPA backoff form cannot hold them).")
@click.option("--k", "k", type=FiniteFloat(0, 1e6, min_open=True), default=1.0, show_default=True,
              help="The k of add-k smoothing (1 = Laplace).")
@click.option("--lowercase", is_flag=True, help="Lowercase the text (recorded in the model, applied when scoring).")
@click.option("--tokenizer", "tokenizer", metavar="PATH", default=None, type=model_path_type(),
              help="Split lines into BPE tokens first (tokenizer.json or a directory holding one; recorded "
                   "in the model and applied when scoring), as CCNet applies SentencePiece before KenLM.")
@jobs_option("Tokenizer processes for large inputs, and threads making the model file's lines (at most the "
             "CPUs available) [processes: 2 for 8 MB or more on a multi-core machine; threads: 2 there].")
@dask_options
@common_options
def command(files, output, order, smoothing, k, lowercase, tokenizer, jobs, dask, shard_size, fmt, no_signature,
            quiet, encoding_errors):
    """Train an n-gram language model on FILES ('-' or a pipe for stdin), one sentence a line.

    No FILES with empty stdin, or an empty corpus, is an error.

    Lines are split into words on ASCII whitespace only, as KenLM does (a no-break space stays inside
    a word); each line is scored as <s> words </s>. The default writes the same ARPA file as KenLM's
    `lmplz -o N` (falling back, with a warning, to the discounts 0.5 1 1.5 where lmplz needs
    --discount_fallback). Prints a summary record.

    \b
      nlpkit ngram-train corpus.txt -o lm.arpa --order 5
      nlpkit ngram-train corpus.txt -o bi.ngram --order 2 --smoothing add-k --k 1
      nlpkit perplexity held-out.txt --model lm.arpa
    """
    import time

    from nlpkit.errors import UsageError
    from nlpkit.lm.ngram.train import train_ngram
    from nlpkit.signature import make_signature

    from click.core import ParameterSource

    if smoothing != "add-k" and click.get_current_context().get_parameter_source("k") != ParameterSource.DEFAULT:
        raise click.BadParameter(f"applies to --smoothing add-k only, not {smoothing}", param_hint="--k")
    name = output.lower().removesuffix(".gz")
    if smoothing == "kneser-ney" and name.endswith(".ngram"):
        raise click.BadParameter(f"{output}: a Kneser-Ney model is written as ARPA; name it MODEL.arpa",
                                 param_hint="--output")
    if smoothing != "kneser-ney" and name.endswith(".arpa"):
        raise click.BadParameter(f"{output}: {smoothing} models are written in nlpkit's counts format, "
                                 "which ARPA readers cannot read; name it MODEL.ngram", param_hint="--output")
    paths = input_paths(files, "corpus")
    if paths.count("-") > 1:
        raise click.UsageError("stdin ('-') can be given only once")
    start = time.perf_counter()
    counts = None
    dask = dask_for(dask, paths)
    if dask:                     # count on the cluster; the estimate is made here
        import os

        from nlpkit.distributed.cluster import connect
        from nlpkit.distributed.stages import ngram_counts
        from nlpkit.lm.ngram.train import text_transform
        from nlpkit.shards import parse_size

        size = parse_size(shard_size)
        transform = text_transform(False, os.path.abspath(tokenizer) if tokenizer else None)
        with connect(dask, quiet) as client, progress("tasks", quiet=quiet) as tick:
            counts = ngram_counts(client, paths, order, lowercase, transform, encoding_errors, size, tick)
    from nlpkit.cli.shutdown import partial_output

    try:
        with progress("counting (chars)", quiet=quiet) as tick, partial_output(output):
            done = [0]

            def advance(n: int) -> None:
                done[0] += n
                tick(done[0])

            res = train_ngram(paths, output, order=order, smoothing=smoothing, k=k, lowercase=lowercase,
                              tokenizer=tokenizer, errors=encoding_errors, jobs=jobs, progress=advance,
                              warn=lambda m: warn(m, quiet), counts=counts)
    except UsageError as e:
        raise click.UsageError(cli_message(e)) from None
    seconds = time.perf_counter() - start
    sig = make_signature("ngram-train", order=order, smoothing=smoothing, k=k if smoothing == "add-k" else None,
                         lower=lowercase, tok="bpe" if tokenizer else "whitespace")
    columns = ["order", "smoothing", "sentences", "tokens", "vocab_size", "ngrams", "seconds", "output"]
    with open_writer(columns, fmt, sig, no_signature, title="ngram-train") as out:
        out.write({"order": order, "smoothing": smoothing, "sentences": res.sentences, "tokens": res.tokens,
                   "vocab_size": res.vocab_size, "ngrams": ",".join(map(str, res.ngrams)),
                   "seconds": round(seconds, 3), "output": output})
