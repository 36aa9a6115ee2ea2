"""`score --tasks --results-cache`: lm-evaluation-harness's three request methods answered from the results cache
(`nlpkit.evaluation.results_cache`) where it has them, the rest by a `HarnessModel` loaded only when something misses.

A request's key holds the model's identity (its content, `load_part` of its `LoadSpec`), the code and BLAS kernel
(`computation_identity`), the window, the request kind and the request's full arguments: context and continuation
(loglikelihood), the text (loglikelihood_rolling), context, generation kwargs, chat and seed (generate_until). A chat
template is part of the rendered context, so it is in the key too (rendering it loads the model's tokenizer: a
`--chat` run loads the model). The misses of one call are computed in one call of the model (its batching and
packing as without the cache; loglikelihood's with the few-shot prefixes the whole call shares, `prefix_plan`, so
each miss gets the bits a run without the cache gives it) and stored when it returns. The window is stored once per model, so that a fully
cached rerun loads no model.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Sequence

from nlpkit.evaluation.harness.model_adapter import HarnessModel
from nlpkit.evaluation.results_cache import ResultsCache, computation_identity, encode_value, load_part, make_key, model_identity
from nlpkit.lm.spec import LoadSpec


def harness_model(spec: LoadSpec, warn: Callable[[str], None] | None, cache: ResultsCache | None,
                  on_load: Callable[[object], None] | None = None, make: Callable[[], Any] | None = None):
    """A `HarnessModel` for `spec`; with a cache (and a model with local files), one whose results go through it.
    `on_load(language_model)` is called when (if) the model loads (the CLI's -v line). `make()`: the model that
    answers instead of a `HarnessModel` loaded here (`--dask`: a `DistributedHarnessModel`), behind the cache too
    (made on the first miss)."""
    if cache is not None:
        identity = model_identity(cache, spec.path)
        if identity is not None:
            return CachedHarnessModel(spec, warn, cache, [identity, load_part(spec)], on_load, make)
    if make is not None:
        return make()
    model = HarnessModel(spec, warn=warn)
    if on_load is not None:
        on_load(model.lm)
    return model


def _is_loglikelihood(v: Any) -> bool:
    return isinstance(v, list) and len(v) == 2 and isinstance(v[0], (int, float)) and isinstance(v[1], bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


class CachedHarnessModel:
    """`HarnessModel`'s interface with each request's result kept in `cache`; the model loaded on first miss."""

    def __init__(self, spec: LoadSpec, warn: Callable[[str], None] | None, cache: ResultsCache, model_part: list,
                 on_load: Callable[[object], None] | None = None, make: Callable[[], Any] | None = None):
        self.spec, self.path, self.cache = spec, spec.path, cache
        self._warn, self._on_load, self._make = warn, on_load, make
        self._model: HarnessModel | None = None
        self._part = [computation_identity(), model_part]
        key = make_key("tasks-window", *self._part)
        found = cache.get_many([key], count=None, check=lambda v: isinstance(v, dict) and (
            v.get("window") is None or type(v.get("window")) is int))
        if key in found:
            self.window = found[key]["window"]
        else:
            self.window = self.model.window
            cache.put(key, {"window": self.window}, count=None)

    @property
    def model(self) -> HarnessModel:
        if self._model is None and self._make is not None:
            self._model = self._make()
        elif self._model is None:
            self._model = HarnessModel(self.spec, warn=self._warn)
            if self._on_load is not None:
                self._on_load(self._model.lm)
        return self._model

    @property
    def lm(self):
        return self.model.lm

    @property
    def template_source(self) -> str | None:
        return None if self._model is None else self._model.template_source

    def _cached(self, kind: str, args: list, compute: Callable[[list[int]], list], check: Callable[[Any], bool],
                convert: Callable[[Any], Any]) -> list:
        """The result of each request (`args[i]`: its key part): from the cache, else `compute(missing indices)`,
        stored as computed and read back as a rerun reads it (`convert` of its JSON form)."""
        keys = [make_key("tasks-" + kind, *self._part, self.window, a) for a in args]
        found = self.cache.get_many(keys, check=check)
        todo = [i for i, k in enumerate(keys) if k not in found]
        if todo:
            computed = compute(todo)
            self.cache.put_many([(keys[i], v) for i, v in zip(todo, computed)])
            found.update((keys[i], json.loads(encode_value(v))) for i, v in zip(todo, computed))
        return [convert(found[k]) for k in keys]

    def loglikelihood(self, requests: Sequence[tuple[str, str]]) -> list[tuple[float, bool]]:
        reqs = list(requests)

        def compute(todo: list[int]) -> list:
            """The misses, with the few-shot prefixes the whole call shares (so a partly cached rerun computes
            them as the full run did)."""
            plan = self.model.prefix_plan(reqs) if len(todo) < len(reqs) else None
            return self.model.loglikelihood([reqs[i] for i in todo], plan)

        return self._cached("loglikelihood", [list(r) for r in reqs], compute, _is_loglikelihood,
                            lambda v: (float(v[0]), bool(v[1])))

    def check_rolling(self, task: str) -> None:
        HarnessModel.check_rolling(self, task)   # reads only window and path

    def loglikelihood_rolling(self, texts: Sequence[str]) -> list[float]:
        texts = list(texts)
        return self._cached("loglikelihood_rolling", texts,
                            lambda todo: self.model.loglikelihood_rolling([texts[i] for i in todo]),
                            _is_number, float)

    def generate_until(self, requests: Sequence[tuple[str, dict]], chat: bool = False, seed: int = 1234,
                       batch_size: int | None = None) -> list[str]:
        reqs = list(requests)
        args = [[ctx, dict(kw), chat, seed] for ctx, kw in reqs]
        return self._cached("generate_until", args,
                            lambda todo: self.model.generate_until([reqs[i] for i in todo], chat=chat, seed=seed,
                                                                   batch_size=batch_size),
                            lambda v: isinstance(v, str), str)

    def chat_template(self, system: str | None = None) -> Callable[..., str]:
        return self.model.chat_template(system)

    def describe(self) -> dict:
        """As `HarnessModel.describe`, without loading the model."""
        return {"model": "nlpkit", "model_args": {"pretrained": self.path}, "max_length": self.window}
