"""`nlpkit score --tasks NAME[,NAME]`: lm-evaluation-harness task files run by nlpkit (core:
nlpkit/evaluation/harness/). This module parses and formats: the checks of the options, a summary record per model,
task (or group), filter and metric on stdout, with several -m the paired comparisons and the --fail-if-worse gate per
task, and with --output-path lm-eval's results (and --log-samples samples) files, written after the whole run.
"""

from __future__ import annotations

import sys
import time
from contextlib import ExitStack

import click

from nlpkit.cli.common import open_writer, progress, resolve_format, warn

SUMMARY_COLUMNS = ["model", "task", "filter", "metric", "value", "stderr", "n"]
COMPARISON_COLUMNS = ["model", "baseline", "task", "filter", "metric", "difference", "test", "p_value", "low",
                      "high", "bootstrap_p", "mcnemar_p"]
ITEM_ONLY = ("task", "fields", "delimiter", "mutual_info", "reference", "beta", "window", "until", "max_gen_toks",
             "extract", "extract_group", "ignore_case", "ignore_punctuation", "ignore_regex", "metric", "temperature",
             "top_k", "top_p", "min_p", "repetition_penalty", "summary_only")
TASK_ONLY = ("include_paths", "num_fewshot", "limit", "output_path", "log_samples", "fewshot_as_multiturn")


def check_item_options() -> None:
    """Options of `--tasks` runs given without --tasks: a usage error naming the first."""
    from click.core import ParameterSource

    ctx = click.get_current_context()
    for name in TASK_ONLY:
        if ctx.get_parameter_source(name) not in (ParameterSource.DEFAULT, None):
            flag = "--include-path" if name == "include_paths" else "--" + name.replace("_", "-")
            raise click.UsageError(f"{flag} applies to --tasks runs only")


def run_tasks(files, models, labels: list[str], system_hash: str | None, tasks: str, include_paths, num_fewshot, limit, output_path, log_samples, chat, system,
              fewshot_as_multiturn, bootstrap, seed, fail_if_worse, gate_metric, batch_size, verbose, fmt,
              no_signature, quiet, load, results_cache: str | None = None, dask: str | None = None,
              shard_size: str | None = None) -> None:
    from click.core import ParameterSource

    ctx = click.get_current_context()
    for name in ITEM_ONLY:
        if ctx.get_parameter_source(name) not in (ParameterSource.DEFAULT, ParameterSource.ENVIRONMENT, None):
            raise click.UsageError(f"--{name.replace('_', '-').replace('fields', 'field')} applies to item files, "
                                   "not to --tasks")
    if files:
        raise click.UsageError("give either item FILES or --tasks, not both")
    from nlpkit.cli.common import dask_for

    dask = dask_for(dask, [])   # --shard-size without --dask: a warning
    if system is not None and not chat:
        raise click.UsageError("--system needs --chat")
    if fewshot_as_multiturn and not chat:
        raise click.UsageError("--fewshot-as-multiturn needs --chat")
    if log_samples and output_path is None:
        raise click.UsageError("--log-samples needs --output-path (the samples files go beside the results)")
    models = list(models) or [None]
    if len(models) < 2 and (fail_if_worse is not None or gate_metric):
        raise click.UsageError("--fail-if-worse compares models: give -m at least twice (the first is the baseline)")
    if gate_metric and fail_if_worse is None:
        raise click.UsageError("--gate-metric names what --fail-if-worse gates on: give --fail-if-worse ALPHA")
    names = [t.strip() for t in tasks.split(",") if t.strip()]
    if not names:
        raise click.BadParameter("no task name", param_hint="--tasks")

    from nlpkit.errors import UsageError
    from nlpkit.evaluation.harness.results import planned_files, results_document, write_run
    from nlpkit.evaluation.harness.run import RunOptions, prepare
    from nlpkit.evaluation.harness.selection import select
    from nlpkit.evaluation.harness.task_files import TaskRegistry, UnknownTask
    from nlpkit.evaluation.models import check_model_path

    options = RunOptions(num_fewshot=num_fewshot, limit=limit, chat=chat, system=system,
                         fewshot_as_multiturn=fewshot_as_multiturn, batch_size=batch_size)
    registry = TaskRegistry(list(include_paths))
    try:
        selection = select(names, registry)
    except UnknownTask as e:
        raise UsageError(str(e)) from None
    for m in models:   # every model path, then every task file, dataset and prompt hook, before a model runs
        check_model_path(m)
    prepared = prepare(selection, options)
    runs, docs = {}, {}
    from nlpkit.cli.results_options import open_results_cache, say_results_cache

    cache = open_results_cache(results_cache, quiet)
    loaded: dict = {}
    with ExitStack() as stack:
        client = None
        if dask:  # the requests answered on the cluster (nlpkit/evaluation/harness/distributed_model.py)
            from nlpkit.distributed.cluster import connect

            client = stack.enter_context(connect(dask, quiet))
        for label, path in zip(labels, models):
            start = time.time()
            key = str(path)
            if key not in loaded:
                model, run = _evaluate(prepared, selection, options, load(path), label, cache, client, shard_size,
                                       verbose, quiet)
                loaded[key] = (model, run, model.template_source)
            model, run, template = loaded[key]
            runs[label] = run
            docs[label] = results_document(run, selection, model.describe(), options, start, template)
    sig = _signature(names, labels, options, bootstrap, seed, system_hash)
    out_fmt = resolve_format(fmt)
    summary = _summaries(runs, selection)
    comparisons = _comparisons(runs, labels, bootstrap, seed) if len(labels) > 1 else []
    verdicts = _verdicts(comparisons, fail_if_worse, gate_metric, prepared) if fail_if_worse is not None else None
    if output_path is not None:  # every file whole, after the run (an interrupted run leaves none)
        for label, path in zip(labels, models):
            name = str(path) if path is not None else "default"
            files = planned_files(output_path, name, list(selection.tasks), log_samples)
            write_run(files, docs[label], runs[label].samples if log_samples else None)
    _write(summary, comparisons, verdicts, out_fmt, sig, no_signature)
    say_results_cache(cache, quiet)
    if verdicts is not None:
        from nlpkit.cli.gate import enforce

        enforce(verdicts)


def _evaluate(prepared, selection, options, spec, label: str, cache, client, shard_size, verbose: bool, quiet: bool):
    """(the harness model, its `ModelRun`) of one model: here, or with a Dask `client` on its workers (progress:
    requests answered, or Dask tasks done), through the results cache when there is one."""
    from nlpkit.cli.model_line import say_loaded
    from nlpkit.evaluation.harness.cached_model import harness_model
    from nlpkit.evaluation.harness.run import evaluate_model

    on_load = say_loaded if verbose else None
    with progress(f"{'tasks' if client is not None else 'requests'} ({label})", total=None, quiet=quiet) as tick:
        make, step = None, None
        if client is not None:
            from nlpkit.distributed.stages import ClusterMap
            from nlpkit.evaluation.harness.distributed_model import DistributedHarnessModel
            from nlpkit.lm.threads import blas_threads
            from nlpkit.shards import parse_size

            tasks = ClusterMap(client, parse_size(shard_size), tick)

            def make():
                return DistributedHarnessModel(spec, tasks, blas_threads(), lambda msg: warn(msg, quiet), on_load)
        else:
            done = [0]

            def step(n):
                done[0] += n
                tick(done[0])
        model = harness_model(spec, lambda msg: warn(msg, quiet), cache, on_load, make)
        return model, evaluate_model(prepared, selection, model, options, step, keep_samples=True)


def _signature(names, labels, options, bootstrap, seed, system_hash) -> str:
    from nlpkit.signature import make_signature

    limit = options.limit
    if limit is not None and limit >= 1 and float(limit).is_integer():
        limit = int(limit)
    settings = {"tasks": ",".join(names), "fewshot": options.num_fewshot, "limit": limit,
                "chat": options.chat or None, "multiturn": options.fewshot_as_multiturn or None,
                "models": ",".join(labels), "bootstrap": bootstrap if len(labels) > 1 else None,
                "seed": seed if len(labels) > 1 else None}
    if system_hash is not None:
        settings["system"] = system_hash
    return make_signature("score", **{k: v for k, v in settings.items() if v is not None})


def _summaries(runs: dict, selection) -> list[dict]:
    out = []
    for label, run in runs.items():
        for name, res in run.results.items():
            n = res.get("sample_len")
            for key, value in res.items():
                if "," not in key or "_stderr," in key:
                    continue
                metric, filt = key.split(",", 1)
                se = res.get(f"{metric}_stderr,{filt}")
                out.append({"model": label, "task": name, "filter": filt, "metric": metric,
                            "value": _number(value), "stderr": _number(se), "n": n})
    return out


def _number(v):
    """A metric as a record holds it: a float (numpy's too), else None ("N/A", a list)."""
    import numbers

    return float(v) if isinstance(v, numbers.Real) and not isinstance(v, bool) else None


def _comparisons(runs: dict, labels: list[str], n_samples: int, seed: int) -> list[dict]:
    """Each later model against the first, per task, filter and per-document metric (numbers only: accuracies,
    exact match, per-document log-likelihoods): the paired bootstrap, and McNemar's exact test for right/wrong."""
    import numpy as np

    from nlpkit.evaluation.significance import mcnemar, paired_bootstrap, resample_indices
    from nlpkit.evaluation.tasks import is_accuracy

    base = runs[labels[0]]
    out = []
    for other in labels[1:]:
        for (task, filt, metric), a in base.per_doc.items():
            b = runs[other].per_doc.get((task, filt, metric))
            if b is None or not a or not all(isinstance(v, (int, float)) for v in list(a) + list(b)):
                continue
            x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
            p = paired_bootstrap(x, y, indices=resample_indices(len(x), n_samples, seed))
            rec = {"model": other, "baseline": labels[0], "task": task, "filter": filt, "metric": metric,
                   "baseline_value": p.base, "value": p.other, "difference": p.difference, "test": "bootstrap",
                   "p_value": p.p_value, "bootstrap_p": p.p_value, "mcnemar_p": None, "low": p.low, "high": p.high}
            if is_accuracy(metric):  # right/wrong: McNemar's exact test is the headline (and the gate's), as `score`
                t = mcnemar(x > 0.5, y > 0.5)
                rec.update({"test": "mcnemar", "p_value": t.p_value, "mcnemar_p": t.p_value, "only_baseline": t.b,
                            "only_model": t.c})
            out.append(rec)
    return out


def _verdicts(comparisons: list[dict], alpha: float, requested, prepared) -> list:
    """--fail-if-worse per task: on --gate-metric's metrics, else each task's first metric (acc for
    multiple-choice), filter by filter."""
    from nlpkit.evaluation.gate import Verdict, worse_verdicts

    out = []
    by_task: dict = {}
    for c in comparisons:
        by_task.setdefault(c["task"], []).append(c)
    for task, cs in by_task.items():
        metrics = tuple(requested) or (next(iter(prepared[task].metrics.fns)),)
        for v in worse_verdicts(cs, alpha, metrics):
            rec = {"task": task, **v.record}
            out.append(Verdict(rec, f"{task}: {v.reason}" if v.reason else None))
    if requested:
        have = {c["metric"] for c in comparisons}
        missing = [m for m in requested if m not in have]
        if missing:
            raise click.BadParameter(f"no task has a per-document metric {missing[0]!r}", param_hint="--gate-metric")
    return out


def _write(summary, comparisons, verdicts, fmt, sig, no_signature) -> None:
    import json

    from nlpkit.io import jsonable

    if fmt == "json":
        doc = {} if no_signature else {"signature": sig}
        doc["summary"] = summary
        if comparisons:
            doc["comparisons"] = comparisons
        if verdicts is not None:
            doc["verdicts"] = [v.record for v in verdicts]
        sys.stdout.write(json.dumps(jsonable(doc), ensure_ascii=False, indent=2) + "\n")
        return
    sections = [(summary, SUMMARY_COLUMNS, "summary")]
    if comparisons:
        sections.append((comparisons, COMPARISON_COLUMNS, "comparison"))
    for k, (rows, columns, kind) in enumerate(sections):
        if k and fmt in ("tsv", "table"):
            sys.stdout.write("\n")
        cols = columns if fmt == "table" else list(dict.fromkeys(c for r in rows for c in r))
        with open_writer(cols, fmt, sig, no_signature, title=kind) as out:
            for r in rows:
                out.write({"record": kind, **r} if fmt == "jsonl" else r)
    if verdicts is not None:
        from nlpkit.cli.gate import write_verdicts

        write_verdicts(verdicts, ["model", "baseline", "task", "metric", "difference", "test", "p_value",
                                  "threshold", "pass"], fmt, sig, no_signature)

