"""`score --tasks --dask`: lm-evaluation-harness's three request methods answered by the workers of a cluster, each
with its own `HarnessModel` of the same `LoadSpec` (loaded once per worker process), and the same bytes as the local
run.

The driver holds no model: it builds the requests (task files, data, prompts: `run.prepare`), splits each call's
requests into chunks of consecutive units and hands them to a `TaskMap` (`nlpkit.distributed.stages.ClusterMap`:
the one place that knows Dask), which runs a module-level task function on each chunk and yields the results in
order. A unit is all the requests that share one context (loglikelihood: a document's choices; generate_until: its
`repeats`) or one text (loglikelihood_rolling), never split.

Why the numbers are the local run's:
- loglikelihood: a forward's rows do not depend on what else it packs (issue 43), but which contexts share a few-shot
  prefix depends on every context of the call (`nlpkit.lm.transformer.prefix_scoring`). So a first round of tasks
  summarizes each chunk's prefix clusters, the driver merges them (`merge_prefix_summaries`: the prefixes the local
  call would share), and every chunk is scored with those prefixes;
- loglikelihood_rolling: each text is scored alone;
- generate_until: each request has its own random generator seeded with the run's seed; a decode step's logits can
  differ in their last bits with the batch's size (docs/generation.md), as with `--batch-size`, so a greedy or
  sampled text equals the local run's except at a near-tie.

The window (the results file's `max_length`, the rolling check) and the model's description (`-v`) come from a
worker. Rendering the chat template (`--chat`) needs the model's tokenizer: the model is then loaded here too.
"""

from __future__ import annotations

import dataclasses
import os
from collections import OrderedDict
from typing import Callable, Iterator, Protocol, Sequence

from nlpkit.evaluation.harness.model_adapter import HarnessModel
from nlpkit.lm.spec import LoadSpec


class TaskMap(Protocol):
    """Runs `func(chunk, *args)` for every chunk elsewhere and yields the results in order; `plan(sizes)` splits
    units of these sizes (bytes of request text) into runs of consecutive units, one task each (by default
    several per worker; `per_worker=1` for generations, which decode faster in one batch than in two in turn)."""

    def __call__(self, func: Callable, chunks: list, args: tuple = ()) -> Iterator: ...

    def plan(self, sizes: Sequence[int], per_worker: int = ...) -> list[range]: ...


# ---------------------------------------------------------------------- worker side (module-level: they travel by name)
def _load(spec: LoadSpec) -> HarnessModel:
    return HarnessModel(spec)


def worker_model(spec: LoadSpec, blas_threads: int | None) -> HarnessModel:
    """This process's `HarnessModel` of `spec` (loaded on first use, then kept: `nlpkit.lm.spec.cached_model`),
    with the driver's BLAS thread count (its decode steps run as the driver's)."""
    from nlpkit.lm.spec import cached_model
    from nlpkit.lm.threads import match_blas_threads

    match_blas_threads(blas_threads)
    return cached_model(_load, spec)


def window_task(spec: LoadSpec, blas_threads: int | None) -> tuple:
    """The model's window (as `HarnessModel.window`) and what it says of itself (`LanguageModel.describe()`)."""
    model = worker_model(spec, blas_threads)
    return model.window, model.lm.describe()


def prefix_task(chunk: list, spec: LoadSpec, blas_threads: int | None) -> dict:
    """The prefix clusters of a chunk of (context, continuation) requests (`HarnessModel.prefix_summary`)."""
    return worker_model(spec, blas_threads).prefix_summary(chunk)


def loglikelihood_task(chunk: list, spec: LoadSpec, prefixes: dict, blas_threads: int | None) -> list:
    """(log-probability, is_greedy) of each request of a chunk, the call's shared `prefixes` given."""
    return worker_model(spec, blas_threads).loglikelihood(chunk, prefixes)


def rolling_task(chunk: list, spec: LoadSpec, blas_threads: int | None) -> list:
    """The rolling log-likelihood of each text of a chunk."""
    return worker_model(spec, blas_threads).loglikelihood_rolling(chunk)


def generate_task(chunk: list, spec: LoadSpec, chat: bool, seed: int, batch_size: int | None,
                  blas_threads: int | None) -> list:
    """The generation of each (context, generation kwargs) request of a chunk."""
    return worker_model(spec, blas_threads).generate_until(chunk, chat=chat, seed=seed, batch_size=batch_size)


# ---------------------------------------------------------------------- driver side
def absolute(spec: LoadSpec) -> LoadSpec:
    """`spec` with an absolute, resolved path (workers have their own working directory and environment: no path
    is $NLPKIT_MODEL's here, else the shipped model)."""
    from nlpkit.lm.spec import resolve_path

    path = resolve_path(spec.path)
    if path is None or "://" in path:
        return dataclasses.replace(spec, path=path)
    return dataclasses.replace(spec, path=os.path.realpath(path))


class DistributedHarnessModel:
    """`HarnessModel`'s interface, each request answered on a worker (`tasks`); `spec.path` is the one the user gave
    (the results file's `model_args`), the workers load its absolute path."""

    def __init__(self, spec: LoadSpec, tasks: TaskMap, blas_threads: int | None = None,
                 warn: Callable[[str], None] | None = None, on_load: Callable[[object], None] | None = None):
        self.spec, self.path, self.tasks = spec, spec.path, tasks
        self.remote = absolute(spec)
        self.blas_threads = blas_threads
        self._warn, self._on_load = warn, on_load
        self._local: HarnessModel | None = None
        ((self.window, described),) = list(tasks(window_task, [self.remote], (blas_threads,)))
        if on_load is not None:   # -v: what a worker loaded
            on_load(_Described(described))

    @property
    def template_source(self) -> str | None:
        return None if self._local is None else self._local.template_source

    def _chunks(self, keys: Sequence[str], sizes: Sequence[int], **how) -> list[list[int]]:
        """Request indices per task: units of requests with the same key (in first-seen order), whole, in runs
        the `TaskMap` plans from their sizes (`how`: its `plan`'s options)."""
        units: "OrderedDict[str, list[int]]" = OrderedDict()
        for i, key in enumerate(keys):
            units.setdefault(key, []).append(i)
        groups = list(units.values())
        plan = self.tasks.plan([sum(sizes[i] for i in g) for g in groups], **how)
        return [[i for g in groups[r.start:r.stop] for i in g] for r in plan]

    def _run(self, func: Callable, requests: list, chunks: list[list[int]], args: tuple) -> list:
        out: list = [None] * len(requests)
        parts = [[requests[i] for i in idx] for idx in chunks]
        for idx, results in zip(chunks, self.tasks(func, parts, (self.remote, *args, self.blas_threads))):
            for i, r in zip(idx, results):
                out[i] = r
        return out

    def _ll_chunks(self, reqs: list) -> list[list[int]]:
        # a document's contexts (r[2], `run.answer`) in one chunk: they share their common start there
        return self._chunks(["\0".join(r[2]) if len(r) > 2 else r[0] for r in reqs],
                            [_size(r[0]) + _size(r[1]) for r in reqs])

    def prefix_plan(self, requests: Sequence[tuple[str, str]], chunks: list[list[int]] | None = None) -> dict:
        """The shared prefixes of these requests together: each chunk's clusters (a first round of tasks), merged."""
        from nlpkit.lm.transformer.prefix_scoring import merge_prefix_summaries

        reqs = [tuple(r) for r in requests]
        parts = [[reqs[i] for i in idx] for idx in (chunks if chunks is not None else self._ll_chunks(reqs))]
        return merge_prefix_summaries(list(self.tasks(prefix_task, parts, (self.remote, self.blas_threads))))

    def loglikelihood(self, requests: Sequence[tuple[str, str]],
                      prefixes: dict | None = None) -> list[tuple[float, bool]]:
        """`prefixes`: as `HarnessModel.loglikelihood`'s (None: these requests' own, `prefix_plan`)."""
        reqs = [tuple(r) for r in requests]
        if not reqs:
            return []
        chunks = self._ll_chunks(reqs)
        if prefixes is None:
            prefixes = self.prefix_plan(reqs, chunks)
        return self._run(loglikelihood_task, reqs, chunks, (prefixes,))

    def check_rolling(self, task: str) -> None:
        HarnessModel.check_rolling(self, task)   # reads only window and path

    def loglikelihood_rolling(self, texts: Sequence[str]) -> list[float]:
        texts = list(texts)
        if not texts:
            return []
        return self._run(rolling_task, texts, self._chunks(texts, [_size(t) for t in texts]), ())

    def generate_until(self, requests: Sequence[tuple[str, dict]], chat: bool = False, seed: int = 1234,
                       batch_size: int | None = None) -> list[str]:
        reqs = list(requests)
        if not reqs:
            return []
        chunks = self._chunks([c for c, _ in reqs], [_size(c) for c, _ in reqs], per_worker=1)
        return self._run(generate_task, reqs, chunks, (chat, seed, batch_size))

    def chat_template(self, system: str | None = None) -> Callable[..., str]:
        """The model's chat template, rendered here: the model is loaded in this process for it."""
        if self._local is None:
            self._local = HarnessModel(self.spec, warn=self._warn)
            if self._on_load is not None:
                self._on_load(self._local.lm)
        return self._local.chat_template(system)

    def describe(self) -> dict:
        """As `HarnessModel.describe` (the window from a worker)."""
        return {"model": "nlpkit", "model_args": {"pretrained": self.path}, "max_length": self.window}


class _Described:
    """A model loaded elsewhere, as `on_load` sees it: its `describe()`."""

    def __init__(self, description) -> None:
        self.description = description

    def describe(self):
        return self.description


def _size(text: str) -> int:
    return len(text.encode("utf-8"))
