"""`nlpkit bpe-train`: train a byte-level BPE tokenizer (core: nlpkit/bpe/trainer.py)."""

from __future__ import annotations

import click

from nlpkit.cli.options import Count, file_type, jobs_option
from nlpkit.cli.common import (cli_message, common_options, dask_for, dask_options, input_paths, open_writer,
                               progress, warn)


def _split_specials(values: tuple[str, ...]) -> list[str]:
    """--special-tokens '<a>,<b>' --special-tokens '<c>' -> ['<a>', '<b>', '<c>']."""
    out: list[str] = []
    for v in values:
        out.extend(t for t in v.split(",") if t)
    return list(dict.fromkeys(out))


#: what bpe-train writes: a directory holding nothing else is a tokenizer output, rewritten freely
TOKENIZER_FILES = frozenset({"tokenizer.json", "vocab.json", "merges.txt"})


def _check_output_dir(output, force: bool) -> None:
    """Refuse (before the work) an -o directory that holds more than a tokenizer output: its vocab.json
    or tokenizer.json would be replaced by accident (a model's tokenizer, an unrelated project's)."""
    if force or not output.is_dir():
        return
    others = sorted(p.name for p in output.iterdir() if p.name not in TOKENIZER_FILES)
    if not others:
        return
    model_files = [f for f in ("config.json", "model.safetensors") if f in others]
    if model_files:
        raise click.BadParameter(f"{output} holds a model ({', '.join(model_files)}): training would replace its "
                                 "tokenizer; write to a new directory (or --force)", param_hint="-o/--output")
    shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
    raise click.BadParameter(f"{output} is not empty and not a tokenizer output (it holds {shown}); write to a new "
                             "or empty directory, or give --force to write into it", param_hint="-o/--output")


@click.command("bpe-train")
@click.argument("files", nargs=-1, type=file_type())
@click.option("-o", "--output", "output", required=True, type=click.Path(file_okay=False),
              help="Directory for tokenizer.json, vocab.json and merges.txt (created if needed).")
@click.option("--vocab-size", type=Count(1), required=True,
              help="Target vocabulary size, special tokens and the 256 byte symbols included.")
@click.option("--min-frequency", type=Count(0), default=0, show_default=True,
              help="Stop when the best pair occurs fewer times (training may stop short of --vocab-size).")
@click.option("--special-tokens", "special_tokens", multiple=True, metavar="TOK[,TOK...]",
              help="Special tokens (ids 0, 1, ...), comma-separated or repeated.")
@click.option("--pattern", default="gpt2", show_default=True, metavar="gpt2|gpt4|none|REGEX",
              help="Pre-tokenizer: GPT-2 regex, GPT-4 cl100k regex, no split, or a custom regex.")
@click.option("--add-prefix-space", is_flag=True,
              help="Prepend a space to each line (each piece for gpt4/REGEX), as HF ByteLevel does.")
@click.option("--max-token-length", type=Count(1), default=None,
              help="Form no token longer than N-1 characters, as HF's max_token_length (N of 1 or 2 still "
                   "forms 2-character tokens) [no limit].")
@click.option("--limit-alphabet", type=Count(1), default=None,
              help="Keep only the N most frequent byte symbols (lossy below 256) [all 256].")
@jobs_option("Processes for counting large inputs [the CPUs available, at most 8].", old_names=("--workers",))
@click.option("--force", is_flag=True,
              help="Write into -o DIR even when it holds other files than a tokenizer's (a model directory too).")
@dask_options
@common_options
def command(files, output, vocab_size, min_frequency, special_tokens, pattern, add_prefix_space,
            max_token_length, limit_alphabet, jobs, force, dask, shard_size, fmt, no_signature, quiet,
            encoding_errors):
    """Train a byte-level BPE tokenizer on FILES ('-' or a pipe for stdin).

    No FILES with empty stdin, or an empty corpus, is an error.

    Same merges, in the same order, as HF tokenizers' BpeTrainer with a ByteLevel
    pre-tokenizer. Files are read line by line, each line keeping its newline. Writes
    tokenizer.json (loads in HF tokenizers), vocab.json and merges.txt into -o DIR and
    prints a summary record. DIR must be new, empty or an earlier bpe-train output (only
    those three files): anything else is refused unless --force.

    \b
      nlpkit bpe-train corpus.txt -o tok/ --vocab-size 8000 \\
          --special-tokens '<|endoftext|>'
      cat *.txt | nlpkit bpe-train - -o tok/ --vocab-size 32000 \\
          --min-frequency 2 --pattern gpt4
    """
    import time
    from pathlib import Path

    from nlpkit.bpe.pretokenize import PreTokenizer
    from nlpkit.bpe.trainer import train_bpe
    from nlpkit.errors import UsageError
    from nlpkit.signature import make_signature

    paths = input_paths(files, "corpus")
    if paths.count("-") > 1:
        raise click.UsageError("stdin ('-') can be given only once")
    if not output.strip():
        raise click.BadParameter("give a directory", param_hint="-o/--output")
    _check_output_dir(Path(output), force)
    specials = _split_specials(special_tokens)
    try:
        pre = PreTokenizer.from_pattern(pattern, add_prefix_space)
    except UsageError as e:
        raise click.BadParameter(cli_message(e), param_hint="--pattern") from None
    start = time.perf_counter()
    pieces = None
    dask = dask_for(dask, paths)
    if dask:                     # count on the cluster; merges are sequential, here
        from nlpkit.distributed.cluster import connect
        from nlpkit.distributed.stages import bpe_counts
        from nlpkit.shards import parse_size

        size = parse_size(shard_size)
        with connect(dask, quiet) as client, progress("tasks", quiet=quiet) as tick:
            pieces = bpe_counts(client, paths, pre, encoding_errors, size, tick)
    with progress("counting MB", quiet=quiet) as count_tick, progress("merges", quiet=quiet) as tick:
        counting = [True]

        def merge_tick(done: int, total: int) -> None:
            if counting[0]:  # one bar at a time: counting is over when merging starts
                count_tick.close()
                counting[0] = False
            tick(done, total)

        tok = train_bpe([Path(p) for p in paths], vocab_size, min_frequency, specials, pattern,
                        add_prefix_space=add_prefix_space, max_token_length=max_token_length,
                        limit_alphabet=limit_alphabet, progress=merge_tick, workers=jobs,
                        encoding_errors=encoding_errors, count_progress=count_tick, pieces=pieces)
    seconds = time.perf_counter() - start
    if tok.vocab_size < vocab_size:
        warn(f"the vocabulary has {tok.vocab_size} entries, fewer than --vocab-size {vocab_size}: "
             + (f"no pair occurring at least {min_frequency} times was left to merge (a lower --min-frequency, "
                "or a larger corpus, gives more)" if min_frequency > 1 else
                "no pair was left to merge (a larger corpus gives more)"), quiet)
    from nlpkit.cli.shutdown import partial_output

    with partial_output(output):
        tok.save(output)
    sig = make_signature("bpe-train", vocab=vocab_size, min_freq=min_frequency,
                         specials=len(specials), pattern=pre.name, prefix_space=add_prefix_space,
                         max_len=max_token_length, alphabet=limit_alphabet or 256)
    columns = ["vocab_size", "merges", "special_tokens", "seconds", "output"]
    with open_writer(columns, fmt, sig, no_signature, title="bpe-train") as out:
        out.write({"vocab_size": tok.vocab_size, "merges": len(tok.merges),
                   "special_tokens": len(specials), "seconds": round(seconds, 3), "output": output})
