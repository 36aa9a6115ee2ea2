"""One `score --tasks` run, as lm-evaluation-harness 0.4.13's `simple_evaluate` + `evaluate`: every task's requests
built (few-shot contexts drawn in document order), answered by each model (all of a request type together, so the
engine packs and shares contexts across tasks), filtered, scored per document, aggregated per task (with lm-eval's
standard errors) and per group.

`prepare` reads everything (task files, data, hooks, prompts) before any model runs, so a bad task is reported
before minutes of scoring; `evaluate_model` runs one model and returns lm-eval's results and samples for it.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable

from nlpkit.errors import NlpkitError
from nlpkit.evaluation.harness.filters import apply_filters, build_filters
from nlpkit.evaluation.harness.metrics import TaskMetrics, aggregate, group_metrics, process_results, stderr
from nlpkit.evaluation.harness.requests import Instance, construct_requests
from nlpkit.evaluation.harness.results import hash_string, json_default
from nlpkit.evaluation.harness.selection import Selection
from nlpkit.evaluation.harness.task import FEWSHOT_SEED, HarnessTask


@dataclass(frozen=True)
class RunOptions:
    """lm-eval's run settings: --num_fewshot, --limit, --apply_chat_template, --system_instruction,
    --fewshot_as_multiturn, bootstrap_iters, the few-shot seed, and the generation batch size."""

    num_fewshot: int | None = None
    limit: float | None = None
    chat: bool = False
    system: str | None = None
    fewshot_as_multiturn: bool = False
    bootstrap_iters: int = 100_000
    fewshot_seed: int | None = FEWSHOT_SEED
    batch_size: int | None = None


@dataclass
class PreparedTask:
    task: HarnessTask
    metrics: TaskMetrics
    filters: list
    docs: list  # (doc_id, doc)


RANDOM_SEED, NUMPY_SEED = 0, 1234  # lm-eval's simple_evaluate defaults (random_seed, numpy_random_seed)


def seed_global_generators() -> None:
    """Python's and numpy's global generators seeded as lm-eval seeds them before it loads any task: hooks that draw
    from them (leaderboard_gpqa's process_docs shuffles the choices with `random.shuffle`) then draw lm-eval's
    numbers, so the documents and prompts are lm-eval's."""
    import random

    import numpy as np

    random.seed(RANDOM_SEED)
    np.random.seed(NUMPY_SEED)


def prepare(selection: Selection, options: RunOptions) -> dict[str, PreparedTask]:
    """Every selected task loaded and checked: its data, metrics, filters, `num_fewshot` resolved, its documents."""
    seed_global_generators()
    out = {}
    for name, cfg in selection.tasks.items():
        if options.num_fewshot is not None:
            if cfg.num_fewshot != 0:
                cfg.num_fewshot = options.num_fewshot
        elif cfg.num_fewshot is None:
            cfg.num_fewshot = 0
        metrics = TaskMetrics.of(cfg)
        filters = build_filters(name, cfg.filter_list)
        task = HarnessTask(cfg, options.fewshot_seed)
        out[name] = PreparedTask(task, metrics, filters, task.docs(options.limit))
    return out


def build_instances(p: PreparedTask, options: RunOptions, chat_template: Callable | None) -> list[list[Instance]]:
    """Each document's requests (lm-eval's build_all_requests), the few-shot sampler restarted from its seed."""
    task = p.task
    task.sampler.rnd.seed(options.fewshot_seed)
    template = chat_template if options.chat else None
    out = []
    for doc_id, doc in p.docs:
        ctx = task.fewshot_context(doc, task.config.num_fewshot, options.system, template,
                                   options.fewshot_as_multiturn, task.doc_to_prefix(doc))
        out.append(construct_requests(task, doc, doc_id, ctx, "acc_mutual_info" in p.metrics.fns, options.chat))
    return out


@dataclass
class ModelRun:
    """One model's results: lm-eval's per-task results, samples, and per-document metric values."""

    results: dict = field(default_factory=dict)
    samples: dict = field(default_factory=dict)
    per_doc: dict = field(default_factory=dict)  # (task, filter, metric) -> [value per document]
    configs: dict = field(default_factory=dict)
    higher_is_better: dict = field(default_factory=dict)
    n_samples: dict = field(default_factory=dict)


def answer(model, instances: list[Instance], options: RunOptions, progress: Callable | None = None) -> None:
    """Fill every instance's `resps` (each request `repeats` times), all of one request type at once."""
    by_type: dict[str, list[Instance]] = defaultdict(list)
    for inst in instances:
        by_type[inst.request_type].append(inst)
    for kind, insts in by_type.items():
        cloned = [inst for inst in insts for _ in range(inst.repeats)]
        if kind == "loglikelihood":
            resps = model.loglikelihood(with_siblings(cloned))
        elif kind == "loglikelihood_rolling":
            resps = model.loglikelihood_rolling([i.arguments[0] for i in cloned])
        else:
            resps = model.generate_until([i.arguments for i in cloned], chat=options.chat,
                                         batch_size=options.batch_size)
        for r, inst in zip(resps, cloned):
            inst.resps.append(r)
        if progress:
            progress(len(cloned))


def with_siblings(instances: list[Instance]) -> list[tuple]:
    """Each loglikelihood instance's (context, continuation), with its document's distinct non-empty contexts
    appended when there are several (winogrande's `multiple_input`: the sentence up to the blank with each option):
    the model runs their common start once per document (`HarnessModel.loglikelihood`)."""
    contexts: dict[int, dict[str, None]] = {}
    for inst in instances:
        if inst.arguments[0]:
            contexts.setdefault(id(inst.doc), {})[inst.arguments[0]] = None
    out = []
    for inst in instances:
        ctx, cont = inst.arguments[:2]
        siblings = tuple(contexts.get(id(inst.doc), ())) if ctx else ()
        out.append((ctx, cont, siblings) if len(siblings) > 1 else (ctx, cont))
    return out


def evaluate_model(prepared: dict[str, PreparedTask], selection: Selection, model, options: RunOptions,
                   progress: Callable | None = None, keep_samples: bool = True) -> ModelRun:
    for name, p in prepared.items():
        if p.task.config.output_type == "loglikelihood_rolling":
            model.check_rolling(name)
    template = model.chat_template(options.system) if options.chat else None
    per_task = {name: build_instances(p, options, template) for name, p in prepared.items()}
    answer(model, [i for groups in per_task.values() for g in groups for i in g], options, progress)
    run = ModelRun()
    for name, p in prepared.items():
        _score_task(run, name, p, per_task[name], options, keep_samples)
    for gname in selection.bottom_up():
        group = selection.groups[gname]
        run.results[gname] = group_metrics(group, run.results)
    return run


def _score_task(run: ModelRun, name: str, p: PreparedTask, docs_insts: list[list[Instance]], options: RunOptions,
                keep_samples: bool) -> None:
    task = p.task
    flat = [i for g in docs_insts for i in g]
    apply_filters(p.filters, flat)
    raw: dict = defaultdict(list)
    samples = []
    for fname, _ in p.filters:
        for (doc_id, doc), reqs in zip(p.docs, docs_insts):
            reqs = sorted(reqs, key=lambda r: r.idx)
            metrics = process_results(task, p.metrics, doc, [r.filtered_resps[fname] for r in reqs])
            if keep_samples:
                target = task.doc_to_target(doc)
                sample = {"doc_id": doc_id, "doc": doc, "target": target,
                          "arguments": [r.arguments for r in reqs], "resps": [r.resps for r in reqs],
                          "filtered_resps": [r.filtered_resps[fname] for r in reqs], "filter": fname,
                          "metrics": list(metrics.keys()),
                          "doc_hash": hash_string(json.dumps(reqs[0].doc, indent=2, default=json_default,
                                                             ensure_ascii=False)),
                          "prompt_hash": hash_string(reqs[0].arguments[0]),
                          "target_hash": hash_string(str(target))}
                sample.update(metrics)
                samples.append(sample)
            for metric, value in metrics.items():
                raw[(metric, fname)].append(value)
    agg: dict = {}
    sample_len = 0
    for (metric, fname), items in raw.items():
        fn = p.metrics.aggregation.get(metric, "mean")
        try:
            agg[f"{metric},{fname}"] = aggregate(fn, items)
            agg[f"{metric}_stderr,{fname}"] = stderr(fn, metric, items, options.bootstrap_iters)
        except NlpkitError:
            raise
        except Exception as e:
            raise NlpkitError(f"task {name}: aggregating {metric} failed: {type(e).__name__}: {e}") from None
        sample_len = max(sample_len, len(items))
    cfg = task.config.to_dict()
    run.results[name] = {"name": name, "alias": cfg.get("task_alias", name), "sample_len": sample_len, **agg}
    run.samples[name] = samples
    run.per_doc.update({(name, f, m): v for (m, f), v in raw.items()})
    run.configs[name] = cfg
    run.higher_is_better[name] = dict(p.metrics.higher_is_better)
    run.n_samples[name] = {"original": len(task.eval_docs), "effective": sample_len}
