"""`score --results-cache`: an evaluation that takes each item's results from the results cache
(`nlpkit.evaluation.results_cache`) where they are, computes the rest, and stores them as each block is scored.

A model is loaded only when some item misses it (`LazyScorer`): a fully cached rerun reads the items, stats the
model files and prints, without loading any weights. An item's key (`CachedEvaluation.item_key`) holds the model's
identity (`ScorerIdentity`: its content, how it is loaded -- its `LoadSpec`'s weights layout, purpose and RoPE
override -- and the scoring settings: window, chat, system message), the code and BLAS kernel that compute, the reference model's for DPO rewards, the task, every task option that changes a per-item number
(the generate task's batch size and summary metrics do not: they change no record) and the item's own content
(context, continuations, gold) -- never its file, line or id, which the record gets from the item at hand.
Items missing are checked (`tasks.check_item`) before any record is printed, as without the cache; the cached
ones passed that check when they were scored.

For `score --tasks` and other loops: `ResultsCache.get_many(keys)` / `put_many(pairs)` with keys from `make_key`
(and `model_identity` for the model part) is the whole interface.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, NamedTuple

from nlpkit.evaluation.evaluate import Evaluation, blocks
from nlpkit.evaluation.items import Item
from nlpkit.evaluation.results_cache import ResultsCache, computation_identity, encode_value, load_part, make_key, plain
from nlpkit.evaluation.tasks import check_item, metric_names, score_items

ITEM_FIELDS = ("file", "index", "id")  # what a record takes from its item, not from the cache


class LazyScorer:
    """A scorer loaded by `load()` on first use (any attribute): a model no item needs is never loaded."""

    def __init__(self, load: Callable[[], object]):
        self._load = load
        self._scorer = None

    @property
    def loaded(self) -> bool:
        return self._scorer is not None

    def get(self):
        if self._scorer is None:
            self._scorer = self._load()
        return self._scorer

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.get(), name)


@dataclass(frozen=True)
class ScorerIdentity:
    """What makes a scorer's numbers besides the item: the model's content (`results_cache.model_identity`; None:
    not cached), how it is loaded (`results_cache.load_part` of its `LoadSpec`: weights layout, purpose, RoPE) and
    the settings of the scorer (`models.ModelSpec` without its path)."""

    content: str | None
    load: tuple
    settings: tuple

    def part(self) -> list | None:
        return None if self.content is None else [self.content, list(self.load), list(self.settings)]


def spec_identity(cache: ResultsCache, spec) -> ScorerIdentity:
    """The `ScorerIdentity` of a `models.ModelSpec` (its `load` spec says the layout and purpose)."""
    from nlpkit.evaluation.results_cache import model_identity

    return ScorerIdentity(model_identity(cache, spec.path), tuple(load_part(spec.load)),
                          (spec.window, spec.chat, spec.system, spec.generate))


class Window(NamedTuple):
    """A scorer's window as `score`'s signature reads it (`generate_checks.window_setting`), without the scorer."""

    window: int | None


@dataclass
class CachedEvaluation(Evaluation):
    """An `Evaluation` whose per-item results go through `results` (a `ResultsCache`); `identities` maps each model
    name to its `ScorerIdentity`, `reference_identity` the reference model's."""

    results: ResultsCache | None = None
    identities: dict[str, ScorerIdentity] = field(default_factory=dict)
    reference_identity: ScorerIdentity | None = None
    _values: dict = field(default_factory=dict, repr=False)   # (id(item), name) -> (record fields, metrics)
    _keys: dict = field(default_factory=dict, repr=False)     # (id(item), name) -> key or None

    def _distinct(self) -> dict[str, object]:
        """One name per distinct scorer (names sharing a scorer share its results)."""
        seen: dict[int, str] = {}
        for name, scorer in self.scorers.items():
            seen.setdefault(id(scorer), name)
        return {name: self.scorers[name] for name in seen.values()}

    def item_key(self, task: str, item: Item, name: str) -> str | None:
        """The key of `item`'s results under model `name` (None: that model is not cached)."""
        model = self.identities[name].part()
        if model is None:
            return None
        ref = None
        if self.reference is not None and task == "preference":
            ref = self.reference_identity.part() if self.reference_identity is not None else None
            if ref is None:
                return None
        return make_key("score-item", computation_identity(), model, ref, task, _options_part(task, self.options),
                        item.context, list(item.continuations), list(item.gold))

    def _lookup(self, task: str, items: list[Item]) -> None:
        """Find the cached results of `items` under every distinct model (once per item)."""
        names = list(self._distinct())
        new = {}
        for item in items:
            for name in names:
                if (id(item), name) not in self._keys:
                    key = self.item_key(task, item, name)
                    self._keys[(id(item), name)] = key
                    if key is not None:
                        new[(id(item), name)] = key
        if not new or self.results is None:
            return
        expected = set(metric_names(task, self.options, self.reference is not None))
        found = self.results.get_many(list(new.values()), check=lambda v: _valid(v, expected))
        for where, key in new.items():
            if key in found:
                rec, metrics = found[key]
                self._values[where] = (rec, metrics)

    def windows(self) -> dict[str, Window]:
        """name -> the window each model's scorer keeps, for the signature (read as `window_setting` reads a loaded
        scorer's): from the cache (stored when the scorer first loaded), else the scorer loaded to ask it (and
        stored), so that a fully cached rerun prints the signature of an uncached run without loading a model."""
        distinct = self._distinct()
        keys = {name: self._window_key(name) for name in distinct}
        found = {} if self.results is None else self.results.get_many(
            [k for k in keys.values() if k is not None], count=None,
            check=lambda v: isinstance(v, dict) and (v.get("window") is None or type(v.get("window")) is int))
        got: dict[str, Window] = {}
        for name, lazy in distinct.items():
            key = keys[name]
            if key in found:
                got[name] = Window(found[key]["window"])
            else:   # the scorer loads: a generate task's `Generator` and a continuation scorer both keep `window`
                got[name] = Window(lazy.window)
                if key is not None and self.results is not None:
                    self.results.put(key, {"window": got[name].window}, count=None)
        owner = {id(lazy): name for name, lazy in distinct.items()}
        return {name: got[owner[id(lazy)]] for name, lazy in self.scorers.items()}

    def _window_key(self, name: str) -> str | None:
        model = self.identities[name].part()
        return None if model is None else make_key("score-window", computation_identity(), model)

    def missing(self, items: Iterable[Item], name: str) -> list[Item]:
        return [item for item in items if (id(item), name) not in self._values]

    def check(self, task: str, items: Iterable[Item]) -> None:
        """`Evaluation.check` of the items some model has no cached results for, with that model only."""
        self.options.validate()
        items = list(items)
        self._lookup(task, items)
        for name, scorer in self._distinct().items():
            todo = self.missing(items, name)
            if todo and task == "generate":
                scorer.check(self.options.generation)
            for item in todo:
                check_item(scorer, task, item, self.options, self.reference)

    def score_pairs(self, items: Iterable[tuple[str, Item]]) -> Iterator[tuple[tuple[str, Item], list[tuple]]]:
        """Block by block: the cached results, the missing ones scored (each model its missing items in one batch)
        and stored before the block's records are yielded."""
        for block in blocks(items):
            task = block[0][0]
            its = [item for _, item in block]
            self._lookup(task, its)
            for name, scorer in self._distinct().items():
                todo = self.missing(its, name)
                if todo:
                    self._store(task, name, todo, score_items(scorer, task, todo, self.options, self.reference))
            yield from ((pair, self._results(pair[1])) for pair in block)

    def _store(self, task: str, name: str, items: list[Item], results: list[tuple[dict, dict]]) -> None:
        """Keep and cache the (record, metrics) of `items` under model `name`."""
        puts = []
        for item, (rec, metrics) in zip(items, results):
            # as a rerun reads it back (JSON's types: lists, Python numbers), so the first run prints its bytes
            value = tuple(json.loads(encode_value([{k: v for k, v in rec.items() if k not in ITEM_FIELDS},
                                                   metrics])))
            self._values[(id(item), name)] = value
            key = self._keys.get((id(item), name))
            if key is not None:
                puts.append((key, value))
        if self.results is not None:
            self.results.put_many(puts)

    def _results(self, item: Item) -> list[tuple[str, dict, dict]]:
        """[(model name, record, metrics)] of an item whose results every model has."""
        distinct = self._distinct()
        owner = {name: next(n for n, s in distinct.items() if s is scorer) for name, scorer in self.scorers.items()}
        out = []
        for name in self.scorers:
            rec, metrics = self._values[(id(item), owner[name])]
            out.append((name, {**item.key(), **rec}, dict(metrics)))
        return out

    def run(self, items: Iterable[tuple[str, Item]], progress: Callable | None = None,
            map_items: Callable | None = None) -> Iterator[tuple[Item, str, dict]]:
        """`Evaluation.run`; with `map_items` (a Dask cluster) only the items some model misses go there."""
        if map_items is not None:
            map_items = self._cached_map(map_items)
        return super().run(items, progress, map_items)

    def _cached_map(self, map_items: Callable) -> Callable:
        def mapped(items: Iterable[tuple[str, Item]]):
            pairs = list(items)
            for task in dict.fromkeys(t for t, _ in pairs):
                self._lookup(task, [item for t, item in pairs if t == task])
            names = list(self._distinct())
            todo = [p for p in pairs if any((id(p[1]), n) not in self._values for n in names)]
            computed = iter(map_items(iter(todo))) if todo else iter(())
            for pair in pairs:
                if any((id(pair[1]), n) not in self._values for n in names):
                    (task, item), results = next(computed)
                    by_name = {name: (rec, metrics) for name, rec, metrics in results}
                    for n in names:
                        if (id(item), n) not in self._values:
                            self._store(task, n, [item], [by_name[n]])
                yield pair, self._results(pair[1])
        return mapped


def _options_part(task: str, options) -> dict:
    """The task options that change a per-item number, as a key part."""
    part = plain(options)
    gen = part.pop("generation")
    if task == "generate":
        gen.pop("batch_size", None)   # the results do not depend on it (batch_generation.py)
        gen.pop("metrics", None)      # summaries only
        part["generation"] = gen
    return part


def _valid(value, expected: set[str]) -> bool:
    """A cached score value: [record fields, metrics], the metrics the task's."""
    return (isinstance(value, list) and len(value) == 2 and isinstance(value[0], dict) and isinstance(value[1], dict)
            and set(value[1]) == expected and not (set(value[0]) & set(ITEM_FIELDS)))
