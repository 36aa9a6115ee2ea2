"""`nlpkit score`: log-likelihoods, multiple-choice accuracy and preference pairs of JSONL items, as
lm-evaluation-harness computes them, with standard errors and paired comparisons of several models
(core: nlpkit/evaluation/, nlpkit/lm/transformer/packed_scoring.py, nlpkit/lm/ngram/ngram_continuations.py)."""

from __future__ import annotations

import sys
from contextlib import ExitStack
from typing import NamedTuple

import click

from nlpkit.cli.options import file_type, model_path_type

from nlpkit.cli.common import (FiniteFloat, common_options, dask_for, dask_options, input_paths, named_flags,
                               no_cache_option, open_writer, weights_option, progress, resolve_format, warn)

ITEM_COLUMNS = {  # `id` only when some item has one
    "loglikelihood": ["model", "file", "index", "id", "logprob", "tokens", "is_greedy", "chars", "bytes", "truncated"],
    "multiple-choice": ["model", "file", "index", "id", "gold", "pred", "pred_norm", "acc", "acc_norm", "acc_bytes", "acc_tokens",
                        "logprobs", "tokens"],
    "preference": ["model", "file", "index", "id", "logprob_chosen", "logprob_rejected", "margin", "accuracy"],
}
SUMMARY_COLUMNS = ["model", "metric", "value", "stderr", "low", "high", "n"]
COMPARISON_COLUMNS = ["model", "baseline", "metric", "difference", "p_value", "low", "high", "mcnemar_p"]
PAIRED_OPTIONS = ("fail_if_worse", "bootstrap", "seed")

EPILOG = """\b
Examples:
  nlpkit score -m SmolLM2-135M/ hellaswag.jsonl
  nlpkit score -m base/ -m finetuned/ items.jsonl --summary-only --fail-if-worse 0.05
  nlpkit score -m lm.arpa -m SmolLM2-135M/ items.jsonl       # a KenLM baseline beside a neural model
  echo '{"context": "The sky is", "continuation": " blue"}' | nlpkit score --format jsonl
  nlpkit score -m policy/ --reference sft/ --beta 0.1 pairs.jsonl --field prompt=question
"""


@click.command("score", epilog=EPILOG)
@click.argument("files", nargs=-1, type=file_type())
@click.option("-m", "--model", "models", multiple=True, metavar="PATH", type=model_path_type(),
              help="Model: a Hugging Face directory, .gguf, ARPA or .ngram file [$NLPKIT_MODEL, else the shipped "
                   "model]. Repeat to compare: each later model against the first.")
@no_cache_option
@weights_option
@click.option("--task", type=click.Choice(("loglikelihood", "multiple-choice", "preference")), default=None,
              help="The task [from the first record's fields: continuation, choices, or chosen + rejected].")
@click.option("--field", "fields", multiple=True, metavar="ROLE=NAME",
              help="Read a role (context, continuation, choices, gold, prompt, chosen, rejected, id) from field "
                   "NAME.")
@click.option("--delimiter", default=None,
              help="Multiple-choice: put between context and each choice (lm-evaluation-harness target_delimiter) "
                   "[a space; none with --chat].")
@click.option("--mutual-info", is_flag=True,
              help="Multiple-choice: also acc_mutual_info (each choice scored after an empty context too).")
@click.option("--reference", default=None, metavar="PATH", type=model_path_type(),
              help="Preference: the reference model of DPO's implicit reward (same tokenizer; checked).")
@click.option("--beta", type=FiniteFloat(min=0, min_open=True), default=None, metavar="BETA",
              help="Preference with --reference: DPO's beta, a positive number [0.1].")
@click.option("--context", "window", type=click.IntRange(min=2), default=None,
              help="Window in tokens [the model's trained positions]: longer inputs lose their left end, as "
                   "lm-evaluation-harness's max_length.")
@click.option("--bootstrap", type=click.IntRange(min=1), default=1000, show_default=True,
              help="Paired comparison: bootstrap resamples.")
@click.option("--seed", type=int, default=12345, show_default=True,
              help="Paired comparison: the resampling seed (sacrebleu's default).")
@click.option("--fail-if-worse", type=FiniteFloat(min=0, max=1, min_open=True, max_open=True), default=None,
              metavar="ALPHA",
              help="Exit 1 when a later model is worse than the first with a paired bootstrap p-value below ALPHA "
                   "(a reason on stderr).")
@click.option("--summary-only", is_flag=True, help="Print only the summaries (and comparisons), not each item.")
@click.option("--chat", is_flag=True,
              help="Render each context (prompt) as a user turn with the model's chat template and score the "
                   "continuation as the reply (lm-evaluation-harness --apply_chat_template).")
@click.option("--system", default=None, metavar="TEXT", help="System message for --chat.")
@dask_options
@common_options
@named_flags(window="--context")
def command(files, models, task, fields, delimiter, mutual_info, reference, beta, window, bootstrap, seed,
            fail_if_worse, summary_only, chat, system, dask, shard_size, fmt, no_signature, quiet, encoding_errors):
    """Evaluate language models on items: continuation log-likelihoods, multiple-choice accuracy and
    preference pairs, as lm-evaluation-harness computes them.

    Each line of FILES (JSONL; '-' or none: stdin) is an item: context + continuation
    (loglikelihood), context + choices + gold (multiple-choice: acc, acc_norm per character,
    acc_bytes, acc_tokens) or prompt + chosen + rejected (preference: margin, accuracy; DPO rewards
    with --reference). Tokenization is lm-evaluation-harness's; an empty context is conditioned on
    the model's BOS (else EOS). One record per item and model, then per model and metric the mean,
    standard error (sample sd / sqrt n) and 95% interval; with several -m, each later model against
    the first: difference, paired bootstrap p-value and interval, McNemar's exact test.
    """
    _check_options(models, task, chat, system, beta, reference, mutual_info)
    if delimiter is None:
        delimiter = "" if chat else " "
    paths = input_paths(files, "items")
    dask = dask_for(dask, paths)
    if paths.count("-") > 1:
        raise click.UsageError("stdin ('-') can be given only once")

    from nlpkit.evaluation.evaluate import Evaluation
    from nlpkit.evaluation.items import parse_fields, read_items
    from nlpkit.evaluation.models import ModelSpec
    from nlpkit.evaluation.tasks import TaskOptions

    found, items = read_items(paths, task, parse_fields(fields), encoding_errors)  # every item read and checked
    _check_task_options(found, mutual_info, reference)
    models = list(models) or [None]
    names = _names(models)
    options = TaskOptions(delimiter=delimiter, mutual_info=mutual_info, beta=0.1 if beta is None else beta)
    specs = {name: ModelSpec(path, window, chat, system) for name, path in zip(names, models)}
    ref_spec = ModelSpec(reference, window, chat, system) if reference is not None else None
    scorers, ref = _load(specs, ref_spec, quiet)
    evaluation = Evaluation(scorers, options, ref)
    evaluation.check(found, items)  # what a model could not score, before any record
    out = Output(resolve_format(fmt), _signature(found, names, options, delimiter, reference, window, chat,
                                                 bootstrap, seed), no_signature, summary_only)
    item_rows = _run(evaluation, [(found, item) for item in items], names, out,
                     _item_columns(found, items, len(names) > 1), quiet, dask, shard_size, specs, ref_spec)
    comparisons = _write_results(evaluation, item_rows, names, out, bootstrap, seed)
    if fail_if_worse is not None:
        _gate(comparisons, fail_if_worse)


class Output(NamedTuple):
    """How results are written: the format, the signature, --no-signature, --summary-only."""

    fmt: str
    sig: str
    no_signature: bool
    summary_only: bool


def _check_options(models, task, chat, system, beta, reference, mutual_info) -> None:
    """The usage errors the options alone show (before any file is read)."""
    from click.core import ParameterSource

    cctx = click.get_current_context()
    if len(models) < 2:
        for name in PAIRED_OPTIONS:
            if cctx.get_parameter_source(name) not in (ParameterSource.DEFAULT, None):
                raise click.UsageError(f"--{name.replace('_', '-')} compares models: give -m at least twice "
                                       "(the first is the baseline)")
    if system is not None and not chat:
        raise click.UsageError("--system needs --chat")
    if beta is not None and reference is None:
        raise click.UsageError("--beta needs --reference (the DPO reward compares the model with a reference)")
    if reference is not None and task not in (None, "preference"):
        raise click.UsageError("--reference applies to the preference task only")
    if mutual_info and task not in (None, "multiple-choice"):
        raise click.UsageError("--mutual-info applies to the multiple-choice task only")


def _check_task_options(found: str, mutual_info: bool, reference) -> None:
    """The usage errors of options that do not apply to the task the items call for."""
    if found != "multiple-choice" and mutual_info:
        raise click.UsageError(f"--mutual-info applies to the multiple-choice task, these items are {found}")
    if found != "preference" and reference is not None:
        raise click.UsageError(f"--reference applies to the preference task, these items are {found}")


def _load(specs: dict, ref_spec, quiet: bool) -> tuple[dict, object]:
    """(name -> scorer, reference scorer or None): every model path checked before any model loads (a missing
    second model is reported at once, not after the first has loaded)."""
    from nlpkit.evaluation.models import check_model_path

    for spec in [*specs.values(), ref_spec]:
        if spec is not None:
            check_model_path(spec.path)
    scorers = {name: _scorer(spec, quiet) for name, spec in specs.items()}
    return scorers, _scorer(ref_spec, quiet) if ref_spec is not None else None


def _item_columns(task: str, items: list, several: bool) -> list[str]:
    """The item table's columns: `model` with several models, `id` when some item has one."""
    columns = ITEM_COLUMNS[task] if several else ITEM_COLUMNS[task][1:]
    if not any(item.id is not None for item in items):
        columns = [c for c in columns if c != "id"]
    return columns


def _signature(task, names, options, delimiter, reference, window, chat, bootstrap, seed) -> str:
    from nlpkit.signature import make_signature

    norms = "chars,bytes,tokens" + (",mutual-info" if options.mutual_info else "") if task == "multiple-choice" \
        else None
    settings = {"task": task, "delimiter": repr(delimiter) if task == "multiple-choice" else None, "norm": norms,
                "models": ",".join(names), "reference": _names([reference])[0] if reference else None,
                "beta": options.beta if reference else None, "ctx": window or "model", "chat": chat or None,
                "bootstrap": bootstrap if len(names) > 1 else None, "seed": seed if len(names) > 1 else None}
    return make_signature("score", **{k: v for k, v in settings.items() if v is not None})


def _run(evaluation, pairs, names, out: "Output", columns, quiet, dask, shard_size, specs, ref_spec) -> list[dict]:
    """Score the (task, item) pairs, locally or on the Dask cluster, writing each item's records as its block is
    scored (json: kept, and returned, for the one document)."""
    kept: list[dict] = []
    with ExitStack() as stack:
        tick = stack.enter_context(progress("tasks" if dask else "items", quiet=quiet))
        map_items = None
        if dask:
            from nlpkit.distributed.cluster import connect
            from nlpkit.distributed.stages import score_items
            from nlpkit.shards import parse_size
            from nlpkit.evaluation.evaluate import BLOCK_ITEMS, score_chunk

            client = stack.enter_context(connect(dask, quiet))
            absolute = ({name: spec.absolute() for name, spec in specs.items()},  # workers have their own cwd
                        ref_spec.absolute() if ref_spec is not None else None)
            map_items = score_items(client, score_chunk, (*absolute, evaluation.options),
                                    parse_size(shard_size), tick, BLOCK_ITEMS)
        item_out = None
        if not out.summary_only and out.fmt != "json":
            item_out = stack.enter_context(open_writer(columns, out.fmt, out.sig, out.no_signature, title="items",
                                                       path_columns=("file",)))
        for item, name, rec in evaluation.run(pairs, progress=tick, map_items=map_items):
            if rec.get("truncated") and name == names[0]:
                warn(f"{item.where}: context and continuation exceed the window: the context loses its left end "
                     "(as lm-evaluation-harness truncates)", quiet)
            row = {"model": name, **rec} if len(names) > 1 else rec
            if out.fmt == "json":
                if not out.summary_only:
                    kept.append(row)
            elif item_out is not None:
                item_out.write({"record": "item", **row} if out.fmt == "jsonl" else row)
    return kept


def _write_results(evaluation, item_rows, names, out: "Output", bootstrap, seed) -> list[dict]:
    """The summaries and comparisons after the items (json: the one document); the comparisons returned."""
    summary = evaluation.summaries()
    comparisons = evaluation.comparisons(bootstrap, seed)
    several = len(names) > 1
    if out.fmt == "json":
        _write_json({"items": item_rows}, summary, comparisons, out.sig, out.no_signature, several)
    else:
        _write_section(summary, SUMMARY_COLUMNS if several else SUMMARY_COLUMNS[1:], out.fmt, out.sig,
                       out.no_signature, "summary", separate=not out.summary_only)
        if comparisons:
            _write_section(comparisons, COMPARISON_COLUMNS, out.fmt, out.sig, out.no_signature, "comparison",
                           separate=True)
    return comparisons


def _gate(comparisons: list[dict], alpha: float) -> None:
    """--fail-if-worse: exit 1 with the first reason (and how many more) when a later model is significantly
    worse."""
    from nlpkit.evaluation.evaluate import significantly_worse

    reasons = significantly_worse(comparisons, alpha)
    if reasons:
        sys.stdout.flush()
        sys.stderr.write(f"nlpkit: error: {reasons[0]}" + (f" (and {len(reasons) - 1} more)" if len(reasons) > 1
                                                            else "") + "\n")
        sys.exit(1)


def _names(models: list[str | None]) -> list[str]:
    """Models as records and signatures name them: the file or directory name, the path when two share one."""
    import os

    base = [os.path.basename(str(m).rstrip("/")) if m else "default" for m in models]
    return [m if base.count(b) > 1 and m else b for b, m in zip(base, models)]


def _scorer(spec, quiet: bool):
    """The continuation scorer of a model (`nlpkit.evaluation.models.load_scorer`)."""
    from nlpkit.evaluation.models import load_scorer

    return load_scorer(spec, warn=lambda m: warn(m, quiet))


def _write_section(rows, columns, fmt, sig, no_signature, kind, separate):
    """The summary / comparison records after the items: jsonl records carry `record`, tsv blocks and tables are
    separated by a blank line."""
    if separate and fmt in ("tsv", "table"):
        sys.stdout.write("\n")
    with open_writer(columns, fmt, sig, no_signature, title=kind) as out:
        for r in rows:
            out.write({"record": kind, **r} if fmt == "jsonl" else r)


def _write_json(records, summary, comparisons, sig, no_signature, several):
    import json

    from nlpkit.io import jsonable

    doc = {} if no_signature else {"signature": sig}
    if records["items"]:
        doc["items"] = records["items"]
    doc["summary"] = summary if several else [{k: v for k, v in r.items() if k != "model"} for r in summary]
    if comparisons:
        doc["comparisons"] = comparisons
    sys.stdout.write(json.dumps(jsonable(doc), ensure_ascii=False, indent=2) + "\n")
