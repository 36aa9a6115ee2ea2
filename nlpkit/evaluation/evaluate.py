"""One evaluation run: items scored by one or more models, per-item records, summaries and paired comparisons.

Every item is checked with every model first (`check`: what scoring an item could refuse, named by its file and
line, before any record is printed); then items go through in blocks of `BLOCK_ITEMS` (the engine packs a block's
requests into a few forwards: one forward per item ran gemms of a few dozen rows, each streaming every weight from
memory), and records are yielded as each block is scored; what is kept is one float per item per metric per model, which the summaries
(`significance.summarize`) and the comparisons of every later model against the first
(`significance.paired_bootstrap` on one shared set of resamples, and `significance.mcnemar` for accuracies) need.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

import numpy as np

from nlpkit.errors import NlpkitError
from nlpkit.evaluation.items import Item
from nlpkit.evaluation.significance import (BOOTSTRAP_SAMPLES, SEED, mcnemar, paired_bootstrap, resample_indices,
                                            summarize)
from nlpkit.evaluation.tasks import TaskOptions, check_item, is_accuracy, metric_names, score_items

BLOCK_ITEMS = 64  # items scored together: ~3000 tokens of four-choice items, three packed forwards


@dataclass
class Evaluation:
    """Scores items with each model (`scorers`: name -> scorer) and keeps what the statistics need."""

    scorers: dict[str, object]
    options: TaskOptions = field(default_factory=TaskOptions)
    reference: object | None = None
    task: str | None = None
    values: dict[str, dict[str, list[float]]] = field(default_factory=dict)  # model -> metric -> per item
    answers: dict[str, list[str]] = field(default_factory=dict)  # generate: model -> answer per item (BLEU, chrF)
    targets: list[list[str]] = field(default_factory=list)  # generate: each item's targets

    def check(self, task: str, items: Iterable[Item]) -> None:
        """Raise, naming the file and line, the first item some model (or the reference) could not score."""
        self.options.validate()
        distinct = list({id(s): s for s in self.scorers.values()}.values())
        if task == "generate":
            for scorer in distinct:
                scorer.check(self.options.generation)
        for item in items:
            for scorer in distinct:
                check_item(scorer, task, item, self.options, self.reference)

    def run(self, items: Iterable[tuple[str, Item]], progress: Callable | None = None,
            map_items: Callable | None = None) -> Iterator[tuple[Item, str, dict]]:
        """(item, model name, record) for every item and model, in input order; the items `check`ed. `map_items`
        scores the items elsewhere (a Dask cluster): it takes the (task, item) pairs and yields ((task, item),
        per-model results) in order, each result as `score_block` gives it."""
        self.options.validate()
        if map_items is None:
            scored = (pair for block in blocks(items) for pair in
                      score_block(self.scorers, block, self.options, self.reference))
        else:
            scored = map_items(items)
        for n, ((task, item), results) in enumerate(scored, 1):
            if self.task is None:
                self.task = task
                self.values = {name: {m: [] for m in self.metrics} for name in self.scorers}
            if task == "generate":
                self.targets.append(list(item.continuations))
            for name, rec, metrics in results:
                for m in self.metrics:
                    self.values[name][m].append(metrics[m])
                if task == "generate":
                    self.answers.setdefault(name, []).append(rec["answer"])
                yield item, name, rec
            if progress and map_items is None:
                progress(n)

    @property
    def metrics(self) -> tuple[str, ...]:
        if self.task is None:
            raise NlpkitError("no items scored")
        return metric_names(self.task, self.options, self.reference is not None)

    def summaries(self) -> list[dict]:
        """One record per model and metric: value, stderr, 95% interval (Wilson's for accuracies), n."""
        out = []
        wanted = self.compared_metrics()
        for name in self.scorers:
            for m in self.metrics:
                if m not in wanted:
                    continue
                s = summarize(self.values[name][m], proportion=is_accuracy(m))
                out.append({"model": name, "metric": m, "value": s.value, "stderr": s.stderr, "low": s.low,
                            "high": s.high, "n": s.n})
            if self.task == "generate":  # corpus BLEU / chrF of the answers (sacrebleu's bootstrap interval)
                from nlpkit.evaluation.generation_task import corpus_metrics

                corpus = corpus_metrics(self.answers.get(name, []), self.targets, wanted)
                out += [{"model": name, "metric": m, **corpus[m]} for m in wanted if m in corpus]
        return out

    def compared_metrics(self) -> tuple[str, ...]:
        """The metrics the summaries, comparisons and gates cover: the generate task's `--metric` list (corpus BLEU
        and chrF included), every other task's metrics."""
        if self.task == "generate":
            return tuple(dict.fromkeys(self.options.generation.metrics))
        return self.metrics

    def comparisons(self, n_samples: int = BOOTSTRAP_SAMPLES, seed: int | None = SEED) -> list[dict]:
        """Every later model against the first, per metric: difference, its bootstrap interval, and `p_value`, the
        test a gate uses (`test`: McNemar's exact test for right/wrong metrics, valid on a few items; else the
        paired bootstrap, sacrebleu's on corpus BLEU / chrF), with `bootstrap_p` and `mcnemar_p` (None for a
        real-valued metric) beside it in every record."""
        names = list(self.scorers)
        if len(names) < 2:
            return []
        base = names[0]
        n = len(self.values[base][self.metrics[0]])
        corpus = {}
        if self.task == "generate":
            from nlpkit.evaluation.corpus_stats import corpus_scorers

            corpus = corpus_scorers(self.targets, self.compared_metrics())
        out = []
        for other in names[1:]:
            idx = resample_indices(n, n_samples, seed)  # the same resamples for every metric, as sacrebleu
            for m in self.compared_metrics():
                if m in corpus:
                    out.append(self._corpus_comparison(corpus[m], m, base, other, idx))
                    continue
                a, b = np.asarray(self.values[base][m]), np.asarray(self.values[other][m])
                p = paired_bootstrap(a, b, indices=idx)
                rec = {"model": other, "baseline": base, "metric": m, "baseline_value": p.base, "value": p.other,
                       "difference": p.difference, "low": p.low, "high": p.high, "test": "bootstrap",
                       "p_value": p.p_value, "bootstrap_p": p.p_value, "mcnemar_p": None}
                if is_accuracy(m):
                    t = mcnemar(a > 0.5, b > 0.5)
                    rec.update({"test": "mcnemar", "p_value": t.p_value, "mcnemar_p": t.p_value,
                                "only_baseline": t.b, "only_model": t.c})
                out.append(rec)
        return out

    def _corpus_comparison(self, scorer, metric: str, base: str, other: str, idx: np.ndarray) -> dict:
        """A corpus metric's comparison record: sacrebleu's paired bootstrap on the answers."""
        from nlpkit.evaluation.corpus_stats import corpus_paired

        p = corpus_paired(scorer, self.answers.get(base, []), self.answers.get(other, []), idx)
        return {"model": other, "baseline": base, "metric": metric, "baseline_value": p.base, "value": p.other,
                "difference": p.difference, "low": p.low, "high": p.high, "test": "bootstrap", "p_value": p.p_value,
                "bootstrap_p": p.p_value, "mcnemar_p": None}


def blocks(items: Iterable[tuple[str, Item]], size: int = BLOCK_ITEMS) -> Iterator[list[tuple[str, Item]]]:
    """Consecutive runs of `size` (task, item) pairs, the last one shorter."""
    block: list[tuple[str, Item]] = []
    for pair in items:
        block.append(pair)
        if len(block) == size:
            yield block
            block = []
    if block:
        yield block


def score_block(scorers: dict, block: list[tuple[str, Item]], options: TaskOptions,
                reference=None) -> Iterator[tuple[tuple[str, Item], list[tuple]]]:
    """((task, item), [(model name, record, metrics) per model]) for each item of a block of checked items, each
    model scoring the whole block in one batch (`tasks.score_items`); names that share one scorer object (the same
    model given twice) share its scores."""
    task = block[0][0]
    items = [item for _, item in block]
    scored: dict[int, list] = {}  # one scoring per distinct scorer: `-m A -m A` scores A once
    for scorer in scorers.values():
        if id(scorer) not in scored:
            scored[id(scorer)] = score_items(scorer, task, items, options, reference)
    for n, pair in enumerate(block):
        yield pair, [(name, dict(scored[id(s)][n][0]), scored[id(s)][n][1]) for name, s in scorers.items()]


def score_chunk(chunk: list[tuple[str, Item]], specs: dict, reference, options: TaskOptions,
                blas_threads: int | None = None) -> list[list[tuple]]:
    """A Dask task: the per-model results of each (task, item) of a chunk (in blocks as the local run scores them: chunks
    hold whole blocks, `stages.chunk_items`), on this worker's cached models (`specs`: name ->
    `ModelSpec`; `reference`: a `ModelSpec` or None), with the driver's BLAS thread count so that the numbers are
    the driver's own."""
    from nlpkit.evaluation.models import cached_scorer
    from nlpkit.lm.threads import match_blas_threads

    match_blas_threads(blas_threads)
    scorers = {name: cached_scorer(spec) for name, spec in specs.items()}
    ref = cached_scorer(reference) if reference is not None else None
    return [result for block in blocks(chunk) for _, result in score_block(scorers, block, options, ref)]
