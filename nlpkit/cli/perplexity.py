"""`nlpkit perplexity`: how well a language model predicts a text (core: `nlpkit.lm.perplexity.perplexity_run`;
a transformer scores windows, an n-gram model each line as KenLM's query; on Dask, the mappers built here)."""

from __future__ import annotations

from contextlib import ExitStack

import click

from nlpkit.cli.bounds import ABOVE_HELP, BELOW_HELP, parse_bounds
from nlpkit.cli.model_line import say_loaded, verbose_option
from nlpkit.cli.options import Count, file_type, model_path_type
from nlpkit.cli.common import (FiniteFloat, common_options, dask_for, dask_options, input_paths, model_options, open_writer,
                               progress, refuse_inapplicable, warn)


@click.command("perplexity")
@click.argument("files", nargs=-1, type=file_type())
@model_options
@click.option("--mode", type=click.Choice(("sliding", "disjoint", "second-half")), default="sliding",
              show_default=True, help="Windowing: transformers guide sliding window, lm-evaluation-harness "
                                      "disjoint rolling windows, or llama.cpp second-half chunks.")
@click.option("--context", type=Count(2), default=None,
              help="Window length in tokens [the model's context, at most 1024]; at most the model's "
                   "trained positions unless RoPE scaling is in force.")
@click.option("--stride", type=Count(1), default=None,
              help="Sliding-window step in tokens [context/2]; at most --context.")
@click.option("--per-line", is_flag=True, help="Score each line on its own (one record per line).")
@click.option("--per-token", is_flag=True, help="Print every scored token: position, id, text, log-probability.")
@click.option("--add-bos/--no-add-bos", default=None,
              help="Predict the first token from the model's prefix token (BOS, else EOS), as "
                   "lm-evaluation-harness does [on when the model has one]; --no-add-bos leaves the first "
                   "token unscored and out of the byte and word counts.")
@click.option("--compare", "compare", default=None, metavar="BASE", type=model_path_type(),
              help="Compare the model with a base model that has the same tokenizer (a Hugging Face directory, "
                   ".gguf file, or 'default': the shipped model): KL divergence, Δp, same top token and the PPL "
                   "ratio per file, as llama.cpp's llama-perplexity --kl-divergence. Both models are in memory "
                   "at once.")
@click.option("--fail-if-kld-above", "fail_if_kld", type=FiniteFloat(min=0), default=None, metavar="X",
              help="With --compare, a gate: exit 3 when a file's (or the corpus total's) mean KL divergence is "
                   "above X.")
@click.option("--fail-if-ppl-ratio-above", "fail_if_ppl_ratio", type=FiniteFloat(min=0, min_open=True), default=None,
              metavar="R", help="With --compare, a gate: exit 3 when a file's PPL(model)/PPL(base) is above R.")
@click.option("--fail-if-same-top-below", "fail_if_same_top", type=FiniteFloat(min=0, max=1), default=None,
              metavar="F", help="With --compare, a gate: exit 3 when the fraction of a file's tokens whose most "
                                "likely next token is the base's is below F (0.99: 99%).")
@click.option("--fail-if-below", "fail_if_below", multiple=True, metavar="METRIC=VALUE", callback=parse_bounds,
              help=BELOW_HELP.format(what="each file's and the total's figure, e.g. same_top=0.9 with --compare",
                                     per="file"))
@click.option("--fail-if-above", "fail_if_above", multiple=True, metavar="METRIC=VALUE", callback=parse_bounds,
              help=ABOVE_HELP.format(what="each file's and the total's figure, e.g. token_ppl=30, bits_per_byte=1.2",
                                     per="file"))
@dask_options(shard_help="With --dask: SIZE / 4 input tokens of windows per task, at most 65536 (64M, 1G; "
                         "auto: 64M); an n-gram model: bytes of lines per task.")
@verbose_option
@common_options
def command(files, model, mode, context, stride, per_line, per_token, add_bos,
            compare, fail_if_kld, fail_if_ppl_ratio, fail_if_same_top, fail_if_below, fail_if_above, dask, shard_size,
            verbose, fmt, no_signature,
            quiet, encoding_errors):
    """Perplexity of text under a language model.

    No FILES with empty stdin, or an empty FILE, is an error.

    Prints scored tokens, mean negative log-likelihood (nats/token), token, word and byte
    perplexity and bits per byte (lm-evaluation-harness normalizations), all over the scored
    tokens and the bytes and words they cover. Long texts are scored in windows: --mode sliding
    (--context/--stride, as the transformers perplexity guide), disjoint (lm-evaluation-harness
    rolling windows) or second-half (llama.cpp llama-perplexity). Several files: a corpus total
    row follows (file "(total)"; "total": true in JSON). Each figure's uncertainty is llama.cpp's
    (mean_nll_se, token_ppl_unc; "34.88 ± 0.52" in a table).

    --compare BASE runs both models over the same windows and reports, per file, how far the
    model's next-token distributions are from the base's: KL divergence, Δp, top-token agreement
    and the ratio of perplexities, with llama.cpp's statistics (--per-token: every token's).
    --fail-if-kld-above, --fail-if-ppl-ratio-above and --fail-if-same-top-below make it a gate:
    after the results, a verdict record per file (and the total) and bound, and exit status 3
    when one failed (1 stays an error, 2 a usage error). -m default and --compare default name
    the shipped model.

    -v/--verbose says on stderr, after each model loads, what it is and how it was
    loaded: architecture, parameters, weights layout (--weights) and why, bytes held,
    threads and what the prepared-model cache did.

    An n-gram model (--model lm.arpa, .arpa.gz or an nlpkit counts file) scores each line as one
    sentence, as KenLM's query does: sentences, tokens, OOVs, log10 probability, perplexity with
    and without OOVs, plus NLL and bits per byte (no windows, no RoPE options).

    \b
      nlpkit perplexity book.txt --model SmolLM2-135M/ --context 512 --stride 256
      nlpkit perplexity --per-line sentences.txt --format jsonl
      echo "The cat sat on the mat." | nlpkit perplexity --per-token
      nlpkit perplexity held-out.txt --model lm.arpa
      nlpkit perplexity book.txt -m model-Q8_0.gguf --compare model_dir/
      nlpkit perplexity a.txt -m q.gguf --compare default --fail-if-kld-above 0.01
    """
    from nlpkit.lm.interface import Capability
    from nlpkit.lm.load import backend_class, load_language_model

    refuse_inapplicable(click.get_current_context(), backend_class(model.path))
    if stride is not None and context is not None and stride > context:
        raise click.BadParameter(f"--stride {stride} is larger than --context {context}", param_hint="--stride")
    if stride is not None and mode != "sliding":
        raise click.BadParameter("--stride applies to --mode sliding only", param_hint="--stride")
    paths = input_paths(files, "text")
    dask = dask_for(dask, paths)
    if paths.count("-") > 1:
        raise click.UsageError("stdin ('-') can be given only once")

    thresholds = _thresholds(fail_if_kld, fail_if_ppl_ratio, fail_if_same_top, compare, per_token)
    _check_bounds(fail_if_below, fail_if_above, per_line, per_token)
    if compare is not None:
        base_cls = backend_class(compare)
        if Capability.LOGITS not in base_cls.capabilities:
            raise click.UsageError(f"--compare does not apply to {base_cls.described} "
                                   f"({base_cls.why_not[Capability.LOGITS]}): {compare}")
        if per_line:
            raise click.UsageError("--compare summarizes whole files: --per-line does not apply")

    lm = load_language_model(model, warn=lambda m: warn(m, quiet))
    if verbose:
        say_loaded(lm)
    base = None
    if compare is not None:   # what makes the comparison impossible comes first, before any window setting
        import dataclasses

        from nlpkit.errors import NlpkitError

        try:
            base = load_language_model(dataclasses.replace(model, path=compare), warn=lambda m: warn(m, quiet))
        except NlpkitError as e:
            raise NlpkitError(f"--compare {compare}: {e}") from None
        if verbose:
            say_loaded(base)
        _check_comparable(lm, base, add_bos)
    ctx = lm.window_context(context) if Capability.WINDOWS in lm.capabilities else None
    if stride is not None and ctx is not None and stride > ctx:
        raise click.BadParameter(f"--stride {stride} is larger than the context {ctx}", param_hint="--stride")
    run = _run(lm, base, paths, mode, ctx, stride, add_bos, per_line, per_token, encoding_errors, quiet)
    thresholds += _bounds(fail_if_below, fail_if_above, run.columns)
    _write(run, thresholds, compare is not None, per_token, dask, shard_size, fmt, no_signature, quiet)


def _run(lm, base, paths, mode, ctx, stride, add_bos, per_line, per_token, encoding_errors, quiet):
    """The core's run: `compare_run` of the model against `base`, else `perplexity_run` of the model."""
    if base is not None:
        from nlpkit.lm.perplexity.comparison import compare_run

        run = compare_run(lm, base, paths, mode=mode, context=ctx, stride=stride, add_bos=add_bos,
                          per_token=per_token, errors=encoding_errors)
    else:
        from nlpkit.lm.perplexity import perplexity_run

        run = perplexity_run(lm, paths, mode=mode, context=ctx, stride=stride, add_bos=add_bos, per_line=per_line,
                             per_token=per_token, errors=encoding_errors)
    if run.stride is not None and run.stride >= run.context:
        warn(f"--stride {run.stride} equal to the context {run.context}: as in the transformers guide, the first "
             "token of each window after the first is not scored (a smaller --stride, or --mode disjoint, scores "
             "every token)", quiet)
    return run


def _write(run, thresholds, comparing, per_token, dask, shard_size, fmt, no_signature, quiet) -> None:
    """Score the run (here, or on Dask through the mappers handed to the core) and write its records, then the
    gate's verdicts and exit 3 when one failed."""
    verdicts = None
    with ExitStack() as stack:
        client = size = None
        if dask:
            from nlpkit.distributed.cluster import connect
            from nlpkit.shards import parse_size

            size = parse_size(shard_size)
            client = stack.enter_context(connect(dask, quiet))
        out = stack.enter_context(open_writer(run.columns, fmt, run.signature, no_signature, digits=run.digits))
        tick = stack.enter_context(progress("tasks" if dask else "scoring", quiet=quiet))
        map_windows = map_lines = None
        if client is not None:  # the core is handed mappers, as `score` hands `Evaluation.run` one
            from nlpkit.distributed.stages import perplexity_lines, perplexity_windows

            map_windows, map_lines = perplexity_windows(client, size, tick), perplexity_lines(client, size, tick)
        records = run.records(tick, map_windows, map_lines)
        if thresholds:
            from nlpkit.evaluation.gate import threshold_verdicts

            records = list(records)
            verdicts = threshold_verdicts(records, thresholds)
            out.extra["verdicts"] = [v.record for v in verdicts]  # json: in the one document
        from nlpkit.cli.perplexity_table import compare_table, merged_columns, merged_record

        if out.fmt != "table" or per_token:
            out.write_many(records)
        elif comparing:  # a line per statistic, a column per file
            out.columns, out.labels, rows = compare_table(list(records))
            out.write_many(rows)
        else:  # figures shown with their uncertainty
            out.columns = out.labels = merged_columns(run.columns)
            out.write_many(merged_record(r) for r in records)
    if verdicts is not None:
        from nlpkit.cli.gate import enforce, write_verdicts
        from nlpkit.evaluation.gate import THRESHOLD_COLUMNS

        if out.fmt != "json":
            write_verdicts(verdicts, THRESHOLD_COLUMNS, out.fmt, run.signature, no_signature)
        enforce(verdicts)


def _thresholds(kld, ppl_ratio, same_top, compare, per_token) -> list:
    """The --fail-if-* bounds as the gate's `Threshold`s; each needs --compare and the per-file summary."""
    from nlpkit.evaluation.gate import Threshold

    bounds = (("--fail-if-kld-above", kld, "kld", "above", "mean KLD"),
              ("--fail-if-ppl-ratio-above", ppl_ratio, "ppl_ratio", "above", "PPL ratio"),
              ("--fail-if-same-top-below", same_top, "same_top", "below", "same top fraction"))
    given = [(flag, Threshold(metric, value, fails_if, label))
             for flag, value, metric, fails_if, label in bounds if value is not None]
    if given and compare is None:
        raise click.UsageError(f"{given[0][0]} gates the comparison with a base model: give --compare BASE")
    if given and per_token:
        raise click.UsageError(f"{given[0][0]} gates each file's statistics: --per-token does not apply")
    return [t for _, t in given]


def _check_bounds(below, above, per_line: bool, per_token: bool) -> None:
    """--fail-if-below/--fail-if-above gate each file's figures (and the total's): not per line or token."""
    if below or above:
        flag = "--fail-if-below" if below else "--fail-if-above"
        for other, on in (("--per-line", per_line), ("--per-token", per_token)):
            if on:
                raise click.UsageError(f"{flag} gates each file's figures: {other} does not apply")


def _bounds(below, above, columns) -> list:
    """--fail-if-below/--fail-if-above as `Threshold`s on the run's figures (its numeric columns)."""
    if not below and not above:
        return []
    from nlpkit.cli.bounds import bound_thresholds

    figures = [c for c in columns if c not in ("file", "total", "signature", "line", "model", "base")]
    return bound_thresholds(below, above, figures, "perplexity records")


PROBE = "The quick brown fox, 1234 \u2014 na\u00efve caf\u00e9, \u6771\u4eac \U0001f600\n  indented\tlines\n"


def _check_comparable(lm, base, add_bos: bool | None) -> None:
    """--compare needs the same tokenizer (id for id on a mixed probe text), vocabulary size and prefix token: checked
    before the windows, so that a base that cannot be compared is said so rather than its context refused."""
    from nlpkit.lm.perplexity.comparison import check_pair, check_same_ids

    from nlpkit.errors import NlpkitError

    lm.require_tokenizer()
    base.require_tokenizer()
    try:
        check_same_ids(lm, base, lm.encode(PROBE), base.encode(PROBE))
    except NlpkitError as e:
        raise NlpkitError(f"{e} (on a probe text {PROBE[:15]!r}..., before any window)") from None
    check_pair(lm, base, lm.prefix_id is not None if add_bos is None else add_bos)
