"""`nlpkit score`: log-likelihoods, multiple-choice accuracy, preference pairs and generated answers of JSONL items,
as lm-evaluation-harness computes them, with standard errors and paired comparisons of several models
(core: nlpkit/evaluation/, nlpkit/lm/transformer/packed_scoring.py, nlpkit/lm/ngram/ngram_continuations.py,
nlpkit/lm/generation/batch_generation.py)."""

from __future__ import annotations

import sys
from contextlib import ExitStack
from typing import NamedTuple

import click

from nlpkit.cli.options import INT_MAX, Count, Seed, file_type, model_path_type
from nlpkit.cli.decoding import MAX_FACTOR
from nlpkit.cli.model_line import say_loaded, verbose_option
from nlpkit.cli.results_options import open_results_cache, results_cache_option, say_results_cache
from nlpkit.cli.bounds import ABOVE_HELP, BELOW_HELP, parse_bounds, score_bounds
from nlpkit.cli.generate_checks import complete_metric_list, warn_generate

from nlpkit.cli.common import (FiniteFloat, common_options, dask_for, dask_options, input_paths, named_flags,
                               load_spec, no_cache_option, open_writer, refuse_inapplicable, weights_option, progress, resolve_format, warn)

ITEM_COLUMNS = {  # the table's columns, `id` only when some item has one (machine formats: every field)
    "loglikelihood": ["model", "file", "index", "id", "logprob", "tokens", "is_greedy", "chars", "bytes", "truncated"],
    "multiple-choice": ["model", "file", "index", "id", "gold", "pred", "pred_norm", "acc", "acc_norm", "acc_bytes", "acc_tokens",
                        "logprobs", "tokens"],
    "preference": ["model", "file", "index", "id", "logprob_chosen", "logprob_rejected", "margin", "accuracy"],
    "generate": ["model", "file", "index", "id", "generation", "answer", "target", "exact_match", "tokens", "finish",
                 "truncated"],
}
GENERATE_OPTIONS = ("until", "max_gen_toks", "extract", "extract_group", "ignore_case", "ignore_punctuation",
                    "ignore_regex", "metric", "temperature", "top_k", "top_p", "min_p", "repetition_penalty",
                    "batch_size")
SAMPLING_OPTIONS = ("temperature", "top_k", "top_p", "min_p", "repetition_penalty")
SUMMARY_COLUMNS = ["model", "metric", "value", "stderr", "low", "high", "n"]
COMPARISON_COLUMNS = ["model", "baseline", "metric", "difference", "low", "high", "test", "p_value"]
PAIRED_OPTIONS = ("fail_if_worse", "gate_metric", "bootstrap", "seed")
BOUND_COLUMNS = ["model", "metric", "value", "fails_if", "threshold", "pass"]
MAX_RESAMPLES = 100_000  # as bleu --confidence-n: each resample holds n item indices
MAX_BETA = 1e6  # DPO uses 0.01-1; rewards beta * log-ratio stay far from float overflow

EPILOG = """\b
Examples:
  nlpkit score -m SmolLM2-135M/ hellaswag.jsonl
  nlpkit score -m old/ -m new/ items.jsonl --summary-only --fail-if-worse 0.05
  nlpkit score -m lm.arpa -m SmolLM2-135M/ items.jsonl  # an n-gram baseline
  echo '{"context": "The sky is", "continuation": " blue"}' | nlpkit score
  nlpkit score -m policy/ --reference sft/ --beta 0.1 pairs.jsonl \\
      --field prompt=question
  nlpkit score -m SmolLM2-135M/ qa.jsonl --until $'\\n' --max-gen-toks 32 \\
      --ignore-case --ignore-punctuation
  nlpkit score -m base/ -m tuned/ gsm.jsonl --until "Question:" \\
      --extract "#### (\\-?[0-9.,]+)"
"""


def _complete_field(ctx, param, incomplete):
    """--field: the roles, as ``ROLE=`` (the field name follows)."""
    from click.shell_completion import CompletionItem

    from nlpkit.evaluation.items import ALL_ROLES

    return [CompletionItem(f"{r}=") for r in ALL_ROLES if f"{r}=".startswith(incomplete)]


def _metric_names(ctx, param, incomplete: str) -> list[str]:
    """--gate-metric's completions: every task's metric names (corpus BLEU and chrF too)."""
    from nlpkit.evaluation.gate import PRIMARY_METRICS
    from nlpkit.evaluation.generation_task import GENERATE_METRICS
    from nlpkit.evaluation.tasks import TaskOptions, metric_names

    names = [m for task in PRIMARY_METRICS for m in metric_names(task, TaskOptions(mutual_info=True), True)]
    return [m for m in dict.fromkeys(names + list(GENERATE_METRICS)) if m.startswith(incomplete)]


def _complete_bound(ctx, param, incomplete: str) -> list:
    """--fail-if-below/--fail-if-above: ``METRIC=`` for every metric name (the value follows)."""
    from click.shell_completion import CompletionItem

    return [CompletionItem(f"{m}=") for m in _metric_names(ctx, param, "") if f"{m}=".startswith(incomplete)]


@click.command("score", epilog=EPILOG)
@click.argument("files", nargs=-1, type=file_type())
@click.option("-m", "--model", "models", multiple=True, metavar="PATH", type=model_path_type(),
              help="Model: a Hugging Face directory, .gguf, ARPA or .ngram file, or 'default' (the shipped model) "
                   "[$NLPKIT_MODEL, else the shipped model]. Repeat to compare: each later model against the first "
                   "(a model given twice is scored once; same names get their position, A#1, A#3).")
@no_cache_option
@weights_option
@click.option("--task", type=click.Choice(("loglikelihood", "multiple-choice", "preference", "generate")),
              default=None,
              help="The task [from the first record's fields: continuation, choices, chosen + rejected, or target].")
@click.option("--field", "fields", multiple=True, metavar="ROLE=NAME", shell_complete=_complete_field,
              help="Read a role (context, continuation, choices, gold, prompt, chosen, rejected, target, id) from "
                   "field NAME.")
@click.option("--delimiter", default=None,
              help="Multiple-choice: put between context and each choice (lm-evaluation-harness target_delimiter) "
                   "[a space; none with --chat].")
@click.option("--mutual-info", is_flag=True,
              help="Multiple-choice: also acc_mutual_info (each choice scored after an empty context too).")
@click.option("--reference", default=None, metavar="PATH", type=model_path_type(),
              help="Preference: the reference model of DPO's implicit reward (same tokenizer; checked).")
@click.option("--beta", type=FiniteFloat(min=0, max=MAX_BETA, min_open=True), default=None, metavar="BETA",
              help="Preference with --reference: DPO's beta, in (0, 1e6] [0.1].")
@click.option("--context", "window", type=Count(2), default=None,
              help="Window in tokens [as perplexity: the model's trained positions, at most 1024]: longer inputs "
                   "lose their left end, as with lm-evaluation-harness's max_length (whose default is the trained "
                   "positions: give --context to match it on longer items).")
@click.option("--bootstrap", type=Count(1, MAX_RESAMPLES), default=1000, show_default=True,
              help="Paired comparison: bootstrap resamples.")
@click.option("--seed", type=Seed(), default=12345, show_default=True,
              help="Paired comparison: the resampling seed (sacrebleu's default).")
@click.option("--fail-if-worse", type=FiniteFloat(min=0, max=1, min_open=True, max_open=True), default=None,
              metavar="ALPHA",
              help="Gate: exit 3 when a later model is worse than the first on a --gate-metric with a two-sided "
                   "p-value below ALPHA, a significance level (0.05), not a margin: any significant drop fails "
                   "(McNemar's exact test for right/wrong metrics, else the paired bootstrap; sacrebleu's on BLEU "
                   "and chrF); a verdict record per model and metric, the reason on stderr. For a bound on the "
                   "value itself: --fail-if-below.")
@click.option("--gate-metric", "gate_metric", multiple=True, metavar="NAME", shell_complete=_metric_names,
              help="With --fail-if-worse: the metric to gate on (repeatable) [the task's primary one: acc, logprob, "
                   "accuracy, or reward_accuracy with --reference; the generate task: every --metric].")
@click.option("--fail-if-below", "fail_if_below", multiple=True, metavar="METRIC=VALUE", callback=parse_bounds,
              shell_complete=_complete_bound,
              help=BELOW_HELP.format(what="each model's summary value, e.g. acc=0.6, exact_match=0.5, bleu=20",
                                     per="model"))
@click.option("--fail-if-above", "fail_if_above", multiple=True, metavar="METRIC=VALUE", callback=parse_bounds,
              shell_complete=_complete_bound,
              help=ABOVE_HELP.format(what="each model's summary value", per="model"))
@click.option("--summary-only", is_flag=True, help="Print only the summaries (and comparisons), not each item.")
@click.option("--chat", is_flag=True,
              help="Render each context (prompt) as a user turn with the model's chat template and score the "
                   "continuation as the reply (lm-evaluation-harness --apply_chat_template).")
@click.option("--system", default=None, metavar="TEXT",
              help="System message for --chat (the signature records its sha256).")
@click.option("--until", multiple=True, metavar="TEXT",
              help="Generate: stop when the generation's tail holds TEXT (cut before it); repeatable. The end-of-"
                   "sequence token always stops [only it; lm-evaluation-harness's task default is its few-shot "
                   "delimiter, \"\\n\\n\"].")
@click.option("--max-gen-toks", type=Count(1), default=None, metavar="N",
              help="Generate: at most N new tokens; the context keeps its last (window - N) tokens [256].")
@click.option("--extract", default=None, metavar="REGEX",
              help="Generate: the answer is a match of REGEX in the generation (lm-evaluation-harness's regex "
                   "filter: findall, the first non-empty group, stripped; no match: [invalid]) [the generation].")
@click.option("--extract-group", type=Count(-INT_MAX), default=None, metavar="N",
              help="Generate: with --extract, the N-th match (negative: from the end) [0].")
@click.option("--ignore-case", is_flag=True, help="Generate: exact_match ignores case.")
@click.option("--ignore-punctuation", is_flag=True, help="Generate: exact_match ignores string.punctuation.")
@click.option("--ignore-regex", multiple=True, metavar="REGEX",
              help="Generate: exact_match removes REGEX from answer and target first (regexes_to_ignore); "
                   "repeatable.")
@click.option("--metric", default=None, metavar="LIST", shell_complete=complete_metric_list,
              help="Generate: summary metrics, comma-separated: exact_match, bleu, chrf (corpus, sacrebleu's) "
                   "[exact_match].")
@click.option("--temperature", type=FiniteFloat(min=0, max=MAX_FACTOR), default=None,
              help="Generate: sample at temperature T (0 = greedy) [greedy, as lm-evaluation-harness's "
                   "do_sample: false]; each item's generator is seeded with --seed.")
@click.option("--top-k", type=Count(0), default=None,
              help="Generate, sampling: keep the K most likely tokens [0: off].")
@click.option("--top-p", type=FiniteFloat(min=0, max=1, min_open=True), default=None,
              help="Generate, sampling: nucleus P, in (0, 1] [1: off].")
@click.option("--min-p", type=FiniteFloat(min=0, max=1), default=None,
              help="Generate, sampling: drop tokens below P x the top's [0].")
@click.option("--repetition-penalty", type=FiniteFloat(min=0, max=MAX_FACTOR, min_open=True), default=None,
              help="Generate: repetition penalty [1: off].")
@click.option("--batch-size", type=Count(1), default=None, metavar="N",
              help="Generate: decode up to N items together (the results do not depend on it) [32, fewer while their KV caches would take over a quarter of the free memory].")
@click.option("--tasks", default=None, metavar="NAME[,NAME]",
              help="Run lm-evaluation-harness task files instead of item files: tasks, groups or tags (from "
                   "--include-path folders and lm-eval's own task folder when it is installed) or YAML paths; "
                   "see docs/evaluation.md.")
@click.option("--include-path", "include_paths", multiple=True, metavar="DIR",
              type=click.Path(file_okay=False), help="--tasks: a folder of task files (repeatable; later wins).")
@click.option("--num-fewshot", type=Count(0), default=None, metavar="N",
              help="--tasks: few-shot examples per document [each task's num_fewshot, else 0].")
@click.option("--limit", type=FiniteFloat(min=0, min_open=True), default=None, metavar="N",
              help="--tasks: the first N documents of each task (below 1: that fraction), as lm-eval's --limit.")
@click.option("--output-path", default=None, metavar="DIR", type=click.Path(file_okay=False),
              help="--tasks: write lm-eval's results_<time>.json under DIR/<model>/ (whole files, after the run).")
@click.option("--log-samples", is_flag=True,
              help="--tasks: also write lm-eval's samples_<task>_<time>.jsonl files.")
@click.option("--fewshot-as-multiturn", is_flag=True,
              help="--tasks with --chat: few-shot examples as user/assistant turns (lm-eval's "
                   "--fewshot_as_multiturn).")
@results_cache_option
@dask_options(shard_help="With --dask: bytes of item text per task (64M, 1G), in whole blocks of 64 items (the "
                         "local run's batches; --tasks: of request text, a context's requests together); auto: 2 "
                         "tasks per worker.")
@verbose_option
@common_options
@named_flags(window="--context", metrics="--metric", ignore_regex="--ignore-regex")
def command(files, models, task, fields, delimiter, mutual_info, reference, beta, window, bootstrap, seed,
            fail_if_worse, gate_metric, fail_if_below, fail_if_above, summary_only, chat, system, until, max_gen_toks,
            extract, extract_group, ignore_case, ignore_punctuation, ignore_regex, metric, temperature, top_k, top_p,
            min_p, repetition_penalty, batch_size, tasks, include_paths, num_fewshot, limit, output_path, log_samples,
            fewshot_as_multiturn, results_cache, dask, shard_size, verbose, fmt, no_signature, quiet, encoding_errors,
            weights=None, no_cache=False):
    """Evaluate language models on items: continuation log-likelihoods, multiple-choice accuracy,
    preference pairs and generated answers, as lm-evaluation-harness computes them.

    Each line of FILES (JSONL; '-' or none: stdin) is an item: context + continuation
    (loglikelihood), context + choices + gold (multiple-choice: acc, acc_norm per character,
    acc_bytes, acc_tokens), prompt + chosen + rejected (preference: margin, accuracy; DPO rewards
    with --reference) or context + target (generate: lm-evaluation-harness's generate_until, greedy;
    --until, --max-gen-toks, --extract, exact_match; see docs/generation.md). Tokenization is
    lm-evaluation-harness's; an empty context is conditioned on the model's BOS (else EOS). One
    record per item and model, then per model and metric the mean, standard error (sample sd /
    sqrt n) and 95% interval; with several -m, each later model against the first: difference,
    its paired bootstrap interval, and p_value, the test a gate uses (test: McNemar's exact test
    for right/wrong metrics, else the paired bootstrap), bootstrap_p and mcnemar_p beside it.

    --fail-if-worse ALPHA makes the run a gate: after the results, a verdict record per later
    model and gate metric (p-value, threshold, pass), and exit status 3 when one failed (0 when
    all passed; 1 stays an error, 2 a usage error). Right/wrong metrics are gated on McNemar's
    exact p-value (the bootstrap's is not valid on a few items), real-valued ones on the paired
    bootstrap's. --fail-if-below METRIC=VALUE and --fail-if-above METRIC=VALUE gate each model's
    summary value the same way (a verdict per model and bound). -m default is the shipped model
    (./default for a path of that name).

    -v/--verbose says on stderr, after each model loads, what it is and how it was
    loaded: architecture, parameters, weights layout (--weights) and why, bytes held,
    threads and what the prepared-model cache did.
    """
    if tasks is not None:  # lm-evaluation-harness task files (nlpkit/cli/score_tasks.py)
        from nlpkit.cli.score_tasks import run_tasks

        return run_tasks(files, models, _names(list(models) or [None]), _text_hash(system), tasks, include_paths, num_fewshot, limit, output_path, log_samples, chat,
                         system, fewshot_as_multiturn, bootstrap, seed, fail_if_worse, gate_metric, batch_size,
                         verbose, fmt, no_signature, quiet,
                         load=lambda path: load_spec(path, weights, no_cache, "score"), results_cache=results_cache,
                         dask=dask, shard_size=shard_size)
    from nlpkit.cli.score_tasks import check_item_options

    check_item_options()
    _check_options(models, task, chat, system, beta, reference, mutual_info, delimiter is not None, fail_if_worse,
                   gate_metric)
    delimiter_given = delimiter is not None
    generation = _generation_options(until, max_gen_toks, extract, extract_group, ignore_case, ignore_punctuation,
                                     ignore_regex, metric, (temperature, top_k, top_p, min_p, repetition_penalty),
                                     seed, batch_size)
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

    found, items = read_items(paths, task, parse_fields(fields), encoding_errors,  # every item read, checked
                              warn=lambda m: warn(m, quiet))
    _check_task_options(found, mutual_info, delimiter_given, reference)
    models = list(models) or [None]
    names = _names(models)
    options = TaskOptions(delimiter=delimiter, mutual_info=mutual_info, beta=0.1 if beta is None else beta,
                          generation=generation)
    gated = _gate_metrics(found, options, reference, gate_metric) if fail_if_worse is not None else ()
    bounds = score_bounds(found, options, reference, fail_if_below, fail_if_above)
    if found == "generate":
        warn_generate(until, extract, ignore_regex, dict(temperature=temperature, top_k=top_k, top_p=top_p,
                                                         min_p=min_p), quiet)
    gen = found == "generate"
    purpose = "decode" if gen else "score"   # the generate task decodes a token per step, as `generate` does

    def spec(path):  # how a model is loaded (`--weights auto` weighs the purpose)
        return load_spec(path, weights, no_cache, purpose)

    specs = {name: ModelSpec(path, window, chat, system, gen, spec(path)) for name, path in zip(names, models)}
    ref_spec = ModelSpec(reference, window, chat, system, load=spec(reference)) if reference is not None else None
    results = open_results_cache(results_cache, quiet)
    if results is None:
        scorers, ref = _load(specs, ref_spec, quiet, verbose)
        evaluation = Evaluation(scorers, options, ref)
    else:   # models load when an item misses them (`cached_scoring`)
        evaluation = _cached_evaluation(results, specs, ref_spec, options, quiet, verbose)
    evaluation.check(found, items)  # what a model could not score, before any record
    windows = evaluation.scorers if results is None else evaluation.windows()  # cached: no model loaded for them
    out = Output(resolve_format(fmt), _signature(found, names, options, delimiter, reference, window, chat, system,
                                                 bootstrap, seed, windows), no_signature, summary_only)
    item_rows = _run(evaluation, [(found, item) for item in items], names, out,
                     _item_columns(found, items), quiet, dask, shard_size, specs, ref_spec)
    say_results_cache(results, quiet)
    _write_results(evaluation, item_rows, names, out, bootstrap, seed, fail_if_worse, gated, bounds)


class Output(NamedTuple):
    """How results are written: the format, the signature, --no-signature, --summary-only."""

    fmt: str
    sig: str
    no_signature: bool
    summary_only: bool


def _check_options(models, task, chat, system, beta, reference, mutual_info, delimiter_given, fail_if_worse,
                   gate_metric) -> None:
    """The usage errors the options alone show (before any file is read)."""
    from click.core import ParameterSource

    cctx = click.get_current_context()
    given = {name for name in (*PAIRED_OPTIONS, *GENERATE_OPTIONS)
             if cctx.get_parameter_source(name) not in (ParameterSource.DEFAULT, None)}
    if task not in (None, "generate") and given & set(GENERATE_OPTIONS):
        name = sorted(given & set(GENERATE_OPTIONS))[0]
        raise click.UsageError(f"--{name.replace('_', '-')} applies to the generate task only")
    if len(models) < 2:
        for name in PAIRED_OPTIONS:
            if name == "seed" and given & set(SAMPLING_OPTIONS):  # it seeds the sampling too
                continue
            if name in given:
                raise click.UsageError(f"--{name.replace('_', '-')} compares models: give -m at least twice "
                                       "(the first is the baseline)")
    if gate_metric and fail_if_worse is None:
        raise click.UsageError("--gate-metric names what --fail-if-worse gates on: give --fail-if-worse ALPHA")
    if system is not None and not chat:
        raise click.UsageError("--system needs --chat")
    if beta is not None and reference is None:
        raise click.UsageError("--beta needs --reference (the DPO reward compares the model with a reference)")
    if reference is not None and task not in (None, "preference"):
        raise click.UsageError("--reference applies to the preference task only")
    for flag, given_ in (("--mutual-info", mutual_info), ("--delimiter", delimiter_given)):
        if given_ and task not in (None, "multiple-choice"):
            raise click.UsageError(f"{flag} applies to the multiple-choice task only")


def _generation_options(until, max_gen_toks, extract, extract_group, ignore_case, ignore_punctuation, ignore_regex,
                        metric, sampling, seed, batch_size):
    """The generate task's `GenerationOptions`, checked (a usage error naming the option)."""
    from nlpkit.evaluation.answer_filters import MatchOptions
    from nlpkit.evaluation.generation_task import DEFAULT_MAX_GEN_TOKS, GenerationOptions
    from nlpkit.lm.generation.batch_generation import DEFAULT_BATCH
    from nlpkit.cli.generate_checks import refuse_patterns
    from nlpkit.lm.generation.sampling import SamplingConfig

    if extract_group is not None and extract is None:
        raise click.UsageError("--extract-group needs --extract")
    temperature, top_k, top_p, min_p, rep = sampling
    cfg = None
    if any(v is not None for v in sampling):
        cfg = SamplingConfig(temperature=0.0 if temperature is None else temperature, top_k=top_k or 0,
                             top_p=1.0 if top_p is None else top_p, min_p=min_p or 0.0,
                             repetition_penalty=1.0 if rep is None else rep).validate()
    metrics = tuple(dict.fromkeys(m.strip() for m in metric.split(","))) if metric is not None else ("exact_match",)
    refuse_patterns(extract, ignore_regex, extract_group or 0)
    return GenerationOptions(until=tuple(until), max_gen_toks=DEFAULT_MAX_GEN_TOKS if max_gen_toks is None
                             else max_gen_toks, extract=extract, extract_group=extract_group or 0,
                             match=MatchOptions(ignore_case, ignore_punctuation, tuple(ignore_regex)), metrics=metrics,
                             sampling=cfg, seed=seed, batch_size=DEFAULT_BATCH if batch_size is None
                             else batch_size).validate()


def _check_task_options(found: str, mutual_info: bool, delimiter_given: bool, reference) -> None:
    """The usage errors of options that do not apply to the task the items call for."""
    from click.core import ParameterSource

    cctx = click.get_current_context()
    if found != "generate":
        for name in GENERATE_OPTIONS:
            if cctx.get_parameter_source(name) not in (ParameterSource.DEFAULT, None):
                raise click.UsageError(f"--{name.replace('_', '-')} applies to the generate task, these items are "
                                       f"{found}")
    for flag, given_ in (("--mutual-info", mutual_info), ("--delimiter", delimiter_given)):
        if found != "multiple-choice" and given_:
            raise click.UsageError(f"{flag} applies to the multiple-choice task, these items are {found}")
    if found != "preference" and reference is not None:
        raise click.UsageError(f"--reference applies to the preference task, these items are {found}")


def _gate_metrics(task: str, options, reference, requested) -> tuple[str, ...]:
    """The metrics --fail-if-worse gates on: --gate-metric's (each one the task has), else the task's primary."""
    from nlpkit.errors import UsageError
    from nlpkit.evaluation.gate import gate_metrics
    from nlpkit.evaluation.tasks import metric_names

    available = metric_names(task, options, reference is not None)
    if task == "generate":  # the generate task's metrics are --metric's (corpus BLEU and chrF too): each gated
        available = tuple(dict.fromkeys(options.generation.metrics))
        requested = requested or available
    try:
        return gate_metrics(task, available, requested, reference is not None)
    except UsageError as e:
        hint = " (--metric names the metrics the generate task computes)" if task == "generate" else ""
        raise click.BadParameter(str(e).replace("`gate_metrics`: ", "") + hint, param_hint="--gate-metric") from None


def _load(specs: dict, ref_spec, quiet: bool, verbose: bool = False) -> tuple[dict, object]:
    """(name -> scorer, reference scorer or None): every model path checked before any model loads (a missing
    second model is reported at once, not after the first has loaded); a model given twice (the same resolved
    path and settings) is loaded once, and its one scorer scores for both names. --verbose: a line per model
    loaded (in this process: with --dask too, the workers load their own)."""
    _check_models(specs, ref_spec)
    loaded: dict = {}
    for spec in specs.values():
        if spec.absolute() not in loaded:
            loaded[spec.absolute()] = _scorer(spec, quiet, verbose)
    scorers = {name: loaded[spec.absolute()] for name, spec in specs.items()}
    return scorers, _scorer(ref_spec, quiet, verbose) if ref_spec is not None else None


def _check_models(specs: dict, ref_spec) -> None:
    """Every model path checked before any model loads; --weights refused when it applies to none of them."""
    from nlpkit.evaluation.models import check_model_path
    from nlpkit.lm.interface import Capability
    from nlpkit.lm.load import backend_class

    given = [spec for spec in [*specs.values(), ref_spec] if spec is not None]
    for spec in given:
        check_model_path(spec.path)
    backends = [backend_class(spec.path) for spec in given]
    if not any(Capability.WEIGHTS_LAYOUT in b.capabilities for b in backends):   # --weights applies to none
        refuse_inapplicable(click.get_current_context(), backends[0], ("weights",))


def _cached_evaluation(results, specs: dict, ref_spec, options, quiet: bool, verbose: bool):
    """A `CachedEvaluation` over `results`: every model path checked, each model (and the reference) loaded on first
    use by an item the cache misses, the models' identities from their content and load specs."""
    from functools import partial

    from nlpkit.evaluation.cached_scoring import CachedEvaluation, LazyScorer, spec_identity

    _check_models(specs, ref_spec)
    lazy: dict = {}
    for spec in specs.values():
        lazy.setdefault(spec.absolute(), LazyScorer(partial(_scorer, spec, quiet, verbose)))
    ref = LazyScorer(partial(_scorer, ref_spec, quiet, verbose)) if ref_spec is not None else None
    return CachedEvaluation({name: lazy[spec.absolute()] for name, spec in specs.items()}, options, ref,
                            results=results,
                            identities={name: spec_identity(results, spec) for name, spec in specs.items()},
                            reference_identity=spec_identity(results, ref_spec) if ref_spec is not None else None)


def _item_columns(task: str, items: list) -> list[str]:
    """The item table's columns (`model` whatever the model count), `id` when some item has one."""
    columns = ITEM_COLUMNS[task]
    if not any(item.id is not None for item in items):
        columns = [c for c in columns if c != "id"]
    return columns


def _signature(task, names, options, delimiter, reference, window, chat, system, bootstrap, seed,
               scorers=None) -> str:
    """Every setting that changes a number: the task's, the generate task's (`generate_checks.generate_settings`:
    stop strings and patterns hashed) and the window in force (`ctx`, each model's)."""
    from nlpkit.cli.generate_checks import generate_settings, window_setting
    from nlpkit.signature import make_signature

    norms = "chars,bytes,tokens" + (",mutual-info" if options.mutual_info else "") if task == "multiple-choice" \
        else None
    g = options.generation
    gen = task == "generate"
    settings = {"task": task, "delimiter": repr(delimiter) if task == "multiple-choice" else None, "norm": norms,
                **(generate_settings(g) if gen else {}),
                "models": ",".join(names), "reference": _names([reference])[0] if reference else None,
                "beta": options.beta if reference else None,
                "ctx": window_setting(scorers) if scorers else window or "model-max-1024", "chat": chat or None,
                "system": _text_hash(system),
                "bootstrap": bootstrap if len(names) > 1 else None,
                "seed": seed if len(names) > 1 or (gen and g.sampling is not None and not g.sampling.greedy) else None}
    return make_signature("score", **{k: v for k, v in settings.items() if v is not None})


def _run(evaluation, pairs, names, out: "Output", columns, quiet, dask, shard_size, specs, ref_spec) -> list[dict]:
    """Score the (task, item) pairs, locally or on the Dask cluster, writing each item's records as its block is
    scored (json: kept, and returned, for the one document)."""
    kept: list[dict] = []
    with ExitStack() as stack:
        tick = stack.enter_context(progress("tasks" if dask else "items", total=None if dask else len(pairs),
                                            quiet=quiet))
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
        warned: set[int] = set()
        for item, name, rec in evaluation.run(pairs, progress=tick, map_items=map_items):
            if rec.get("truncated") and "generation" in rec and id(item) not in warned:
                from nlpkit.cli.generate_checks import truncation_warning

                warned.add(id(item))
                warn(truncation_warning(item.where, name, evaluation.scorers[name].window,
                                        evaluation.options.generation.max_gen_toks), quiet)
            elif rec.get("truncated") and name == names[0] and "generation" not in rec:
                warn(f"{item.where}: context and continuation exceed the window: the context loses its left end "
                     "(as lm-evaluation-harness truncates)", quiet)
            row = {"model": name, **rec}   # a model column whatever the model count: columns never shift
            if out.fmt == "json":
                if not out.summary_only:
                    kept.append(row)
            elif not out.summary_only:
                if item_out is None:   # TSV has JSONL's fields: the first record's, in its order
                    cols = columns if out.fmt == "table" else _record_columns(row, columns)
                    item_out = stack.enter_context(open_writer(cols, out.fmt, out.sig, out.no_signature,
                                                               title="items", path_columns=("file",)))
                item_out.write({"record": "item", **row} if out.fmt == "jsonl" else row)
    return kept


def _record_columns(row: dict, columns: list[str]) -> list[str]:
    """TSV's item columns: the first record's fields in their order (every field JSONL has), with `id` after
    `index` when some item has one (a record holds `id` only when its item does)."""
    cols = list(row)
    if "id" in columns and "id" not in cols:
        cols.insert(cols.index("index") + 1, "id")
    return cols


def _write_results(evaluation, item_rows, names, out: "Output", bootstrap, seed, alpha, gated, bounds=()) -> None:
    """The summaries and comparisons after the items, then with --fail-if-worse (`alpha`) the verdicts on the
    `gated` metrics and with --fail-if-below/--fail-if-above (`bounds`) each model's verdict per bound (json: all in
    the one document); exit 3 (`GateFailed`) when a verdict failed."""
    from nlpkit.cli.gate import enforce, write_verdicts
    from nlpkit.evaluation.gate import WORSE_COLUMNS, threshold_verdicts, worse_verdicts

    summary = evaluation.summaries()
    comparisons = evaluation.comparisons(bootstrap, seed)
    verdicts = worse_verdicts(comparisons, alpha, gated) if alpha is not None else None
    bound_verdicts = None
    if bounds:
        per_model: dict[str, dict] = {}
        for row in summary:
            per_model.setdefault(row["model"], {"model": row["model"]})[row["metric"]] = row["value"]
        bound_verdicts = threshold_verdicts(per_model.values(), bounds, where="model")
    if out.fmt == "json":
        both = None if verdicts is None and bound_verdicts is None else (verdicts or []) + (bound_verdicts or [])
        _write_json({"items": item_rows}, summary, comparisons, out.sig, out.no_signature, both)
    else:
        _write_section(summary, SUMMARY_COLUMNS, out.fmt, out.sig, out.no_signature, "summary",
                       separate=not out.summary_only)
        if comparisons:
            _write_section(comparisons, COMPARISON_COLUMNS, out.fmt, out.sig, out.no_signature, "comparison",
                           separate=True)
        if verdicts is not None:
            write_verdicts(verdicts, WORSE_COLUMNS, out.fmt, out.sig, out.no_signature)
        if bound_verdicts is not None:
            write_verdicts(bound_verdicts, BOUND_COLUMNS, out.fmt, out.sig, out.no_signature)
    if verdicts is not None or bound_verdicts is not None:
        enforce((verdicts or []) + (bound_verdicts or []))


def _text_hash(text: str | None) -> str | None:
    """A --system message as the signature records it (`nlpkit.signature.text_hash`)."""
    from nlpkit.signature import text_hash

    return text_hash(text)


def _names(models: list[str | None]) -> list[str]:
    """Models as records and signatures name them: the file or directory name, the path when two share one, and
    when the same path is given twice each gets its position among the -m (`A#1`, `B`, `A#3`): every -m is a
    column of its own."""
    import os

    base = [os.path.basename(str(m).rstrip("/")) if m else "default" for m in models]
    paths = {b: {m for bb, m in zip(base, models) if bb == b} for b in base}  # the paths behind each name
    names = [m if len(paths[b]) > 1 and m else b for b, m in zip(base, models)]
    return [f"{n}#{k}" if names.count(n) > 1 else n for k, n in enumerate(names, 1)]


def _scorer(spec, quiet: bool, verbose: bool = False):
    """The continuation scorer of a model (`nlpkit.evaluation.models.load_scorer`); --verbose says what loaded."""
    from nlpkit.evaluation.models import load_scorer

    return load_scorer(spec, warn=lambda m: warn(m, quiet), loaded=say_loaded if verbose else None)


def _write_section(rows, columns, fmt, sig, no_signature, kind, separate):
    """The summary / comparison records after the items: jsonl records carry `record`, tsv blocks and tables are
    separated by a blank line."""
    if separate and fmt in ("tsv", "table"):
        sys.stdout.write("\n")
    if fmt != "table":   # the machine formats: every field of the records (the table keeps `columns`)
        columns = list(dict.fromkeys(k for r in rows for k in r))
    with open_writer(columns, fmt, sig, no_signature, title=kind) as out:
        for r in rows:
            out.write({"record": kind, **r} if fmt == "jsonl" else r)


def _write_json(records, summary, comparisons, sig, no_signature, verdicts=None):
    import json

    from nlpkit.io import jsonable

    doc = {} if no_signature else {"signature": sig}
    if records["items"]:
        doc["items"] = records["items"]
    doc["summary"] = summary
    if comparisons:
        doc["comparisons"] = comparisons
    if verdicts is not None:
        doc["verdicts"] = [v.record for v in verdicts]
    sys.stdout.write(json.dumps(jsonable(doc), ensure_ascii=False, indent=2) + "\n")
