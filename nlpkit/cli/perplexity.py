"""`nlpkit perplexity`: tokens, mean NLL, token/word/byte perplexity and bits per byte (core: lm/perplexity.py)."""

from __future__ import annotations

from contextlib import ExitStack

import click

from nlpkit.cli.common import (common_options, dask_for, dask_options, input_paths, model_name,
                               model_options, open_writer, progress, rope_label, warn)

SUMMARY = ["file", "tokens", "mean_nll", "token_ppl", "word_ppl", "byte_ppl", "bits_per_byte", "words", "bytes"]
PER_LINE = ["file", "line", "tokens", "mean_nll", "token_ppl", "word_ppl", "byte_ppl", "bits_per_byte", "words",
            "bytes"]
TOTAL = "(total)"  # the file cell of the corpus total row (JSON records also carry "total": true)
PER_TOKEN = ["file", "line", "position", "id", "token", "logprob"]


@click.command("perplexity")
@click.argument("files", nargs=-1)
@model_options
@click.option("--mode", type=click.Choice(("sliding", "disjoint", "second-half")), default="sliding",
              show_default=True, help="Windowing: transformers guide sliding window, lm-evaluation-harness "
                                      "disjoint rolling windows, or llama.cpp second-half chunks.")
@click.option("--context", type=click.IntRange(min=2), default=None,
              help="Window length in tokens [the model's context, at most 1024]; at most the model's "
                   "trained positions unless RoPE scaling is in force.")
@click.option("--stride", type=click.IntRange(min=1), default=None,
              help="Sliding-window step in tokens [context/2]; at most --context.")
@click.option("--per-line", is_flag=True, help="Score each line on its own (one record per line).")
@click.option("--per-token", is_flag=True, help="Print every scored token: position, id, text, log-probability.")
@click.option("--add-bos/--no-add-bos", default=None,
              help="Predict the first token from the model's prefix token (BOS, else EOS), as "
                   "lm-evaluation-harness does [on when the model has one]; --no-add-bos leaves the first "
                   "token unscored and out of the byte and word counts.")
@dask_options
@common_options
def command(files, model_path, rope_scaling, rope_factor, mode, context, stride, per_line, per_token, add_bos,
            dask, shard_size, fmt, no_signature, quiet, encoding_errors):
    """Perplexity of text under a language model.

    Prints scored tokens, mean negative log-likelihood (nats/token), token, word and byte
    perplexity and bits per byte (lm-evaluation-harness normalizations), all over the scored
    tokens and the bytes and words they cover. Long texts are scored in windows: --mode sliding
    (--context/--stride, as the transformers perplexity guide), disjoint (lm-evaluation-harness
    rolling windows) or second-half (llama.cpp llama-perplexity). Several files: a corpus total
    row follows (file "(total)"; "total": true in JSON).

    An n-gram model (--model lm.arpa, .arpa.gz or an nlpkit counts file) scores each line as one
    sentence, as KenLM's query does: sentences, tokens, OOVs, log10 probability, perplexity with
    and without OOVs, plus NLL and bits per byte (no windows, no RoPE options).

    \b
      nlpkit perplexity book.txt --model SmolLM2-135M/ --context 512 --stride 256
      nlpkit perplexity --per-line sentences.txt --format jsonl
      echo "The cat sat on the mat." | nlpkit perplexity --per-token
      nlpkit perplexity held-out.txt --model lm.arpa
    """
    from nlpkit.cli.ngram import ngram_model_path
    if ngram_model_path(model_path):  # an ARPA / counts file: KenLM query's figures (nlpkit/cli/ngram.py)
        from nlpkit.cli.ngram import ngram_perplexity, refuse_neural_options
        refuse_neural_options(click.get_current_context())
        paths = input_paths(files, "text")
        return ngram_perplexity(ngram_model_path(model_path), paths, per_line, per_token,
                                fmt, no_signature, quiet, encoding_errors, dask_for(dask, paths), shard_size)
    if stride is not None and context is not None and stride > context:
        raise click.BadParameter(f"--stride {stride} is larger than --context {context}", param_hint="--stride")
    if stride is not None and mode != "sliding":
        raise click.BadParameter("--stride applies to --mode sliding only", param_hint="--stride")
    paths = input_paths(files, "text")
    dask = dask_for(dask, paths)
    if paths.count("-") > 1:
        raise click.UsageError("stdin ('-') can be given only once")

    from nlpkit.errors import NlpkitError
    from nlpkit.io import display_name, read_text
    from nlpkit.lm.transformer.loaders import load_model
    from nlpkit.lm.perplexity import Perplexity, check_context, default_context, default_stride, perplexity, prefix_token
    from nlpkit.signature import make_signature

    model = load_model(model_path, rope_scaling=rope_scaling, rope_factor=rope_factor)
    ctx = context or default_context(model)
    check_context(model, ctx)
    if stride is not None and stride > ctx:
        raise click.BadParameter(f"--stride {stride} is larger than the context {ctx}", param_hint="--stride")
    strd = (stride or default_stride(ctx)) if mode == "sliding" else None
    if strd is not None and strd >= ctx:
        warn(f"--stride {strd} equal to the context {ctx}: as in the transformers guide, the first token of "
             "each window after the first is not scored (a smaller --stride, or --mode disjoint, scores "
             "every token)", quiet)
    bos = prefix_token(model.config) is not None if add_bos is None else add_bos
    sig = make_signature("perplexity", model=model_name(model), mode=mode, ctx=ctx, stride=strd, bos=bos,
                         rope=rope_label(model))
    columns = PER_LINE if per_line else SUMMARY
    if per_token:
        columns = PER_TOKEN if per_line else [c for c in PER_TOKEN if c != "line"]
    tok = model.tokenizer

    def stats(p) -> dict:
        return {"tokens": p.tokens, "mean_nll": p.mean_nll, "token_ppl": p.token_perplexity,
                "word_ppl": p.word_perplexity, "byte_ppl": p.byte_perplexity, "bits_per_byte": p.bits_per_byte,
                "words": p.words, "bytes": p.bytes}

    def token_rows(name: str, line: int | None, scored) -> list[dict]:
        where = {"file": name} if line is None else {"file": name, "line": line}
        return [{**where, "position": pos, "id": i,
                 "token": tok.decode_bytes([i]).decode("utf-8", errors="replace"), "logprob": lp}
                for pos, i, lp in zip(scored.positions, scored.ids, scored.logprobs)]

    several = len(paths) > 1 and not per_line and not per_token
    totals: list = []
    with ExitStack() as stack:
        client = None
        if dask:
            from nlpkit.distributed.cluster import connect
            from nlpkit.distributed.shards import parse_size
            from nlpkit.distributed.stages import perplexity_lines, perplexity_windows

            size = parse_size(shard_size)
            import os

            key = (os.path.abspath(str(model.source)), rope_scaling, rope_factor)   # workers have their own cwd
            client = stack.enter_context(connect(dask, quiet))
        out = stack.enter_context(open_writer(columns, fmt, sig, no_signature))
        tick = stack.enter_context(progress("tasks" if dask else "scoring", quiet=quiet))
        if per_line:
            records = (perplexity_lines(client, paths, key, mode, ctx, strd, bos, encoding_errors, size, tick,
                                        per_token) if client is not None
                       else _local_lines(model, paths, mode, ctx, strd, bos, encoding_errors, per_token))
            for name, lineno, p in records:
                if p is None:
                    if not per_token:
                        out.write({"file": name, "line": lineno, "tokens": 0, "words": 0, "bytes": 0})
                elif per_token:
                    out.write_many(token_rows(name, lineno, p[1]))
                else:
                    out.write({"file": name, "line": lineno, **stats(p)})
            return
        map_windows = perplexity_windows(client, key, size, tick) if client is not None else None
        for path in paths:
            name = display_name(path)
            text = read_text(path, errors=encoding_errors)
            if not text.strip():
                what = "empty text" if not text else "only whitespace (no text)"
                raise NlpkitError(f"{display_name(path)}: {what}, nothing to score")
            p, scored = perplexity(model, text, mode=mode, context=ctx, stride=strd, add_bos=bos,
                                   progress=None if client is not None else tick, map_windows=map_windows)
            if per_token:
                out.write_many(token_rows(name, None, scored))
            else:
                out.write({"file": name, **stats(p), **({"total": False} if several else {})})
                totals.append(p)
        if several and totals:
            nll = sum(p.nll for p in totals)
            n = sum(p.tokens for p in totals)
            p = Perplexity(tokens=n, nll=nll, mean_nll=nll / n, words=sum(p.words for p in totals),
                           bytes=sum(p.bytes for p in totals))
            out.write({"file": TOTAL, **stats(p), "total": True})


def _local_lines(model, paths, mode, ctx, strd, bos, errors, per_token):
    """(file, line number, Perplexity — with `per_token` a (Perplexity, Scored) pair — or None when
    the line is too short), as `nlpkit.distributed.stages.perplexity_lines` yields them."""
    from nlpkit.io import display_name, iter_lines
    from nlpkit.lm.perplexity import TooShort, perplexity

    for path in paths:
        name = display_name(path)
        for lineno, line in enumerate(iter_lines(path, errors=errors), 1):
            try:
                p, scored = perplexity(model, line, mode=mode, context=ctx, stride=strd, add_bos=bos)
            except TooShort:
                yield name, lineno, None
                continue
            yield name, lineno, ((p, scored) if per_token else p)
