"""The models an evaluation scores with: a model file -> its continuation scorer (the transformer engine for Hugging
Face directories and GGUF files, the n-gram model for ARPA / .ngram files), loaded once per process.

A `ModelSpec` is what it takes to load one again elsewhere (a Dask worker): how to load the model (a `LoadSpec`)
and the scoring settings.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Callable

from nlpkit.errors import UsageError
from nlpkit.lm.interface import Capability
from nlpkit.lm.spec import LoadSpec


@dataclass(frozen=True)
class ModelSpec:
    """A model and how it scores: `path`, `window` (tokens; None: perplexity's default, the model's trained positions
    capped at 1024, `window_context(None)`), `chat` (render contexts with its chat template, `system` first),
    `generate` (it answers generation items: a `Generator`), `load` (how to load it: a `nlpkit.lm.spec.LoadSpec`,
    weights layout, purpose, cache; None: `LoadSpec(path)`; its path is always `path`)."""

    path: str | None
    window: int | None = None
    chat: bool = False
    system: str | None = None
    generate: bool = False
    load: LoadSpec | None = None

    def __post_init__(self) -> None:
        if self.load is None or self.load.path != self.path:
            object.__setattr__(self, "load", dataclasses.replace(self.load or LoadSpec(), path=self.path))

    def absolute(self) -> "ModelSpec":
        """The same spec with an absolute, resolved path (workers have their own working directory and environment:
        no path is $NLPKIT_MODEL's here; two specs of one model file compare equal, so `score -m A -m ./A` loads and
        scores it once)."""
        from nlpkit.lm.spec import resolve_path

        path = resolve_path(self.path)
        if path is None or "://" in path:
            return self if path == self.path else dataclasses.replace(self, path=path)
        return dataclasses.replace(self, path=os.path.realpath(path))


def check_model_path(path: str | None) -> None:
    """Raise the error loading the model at `path` would raise for a path that is not a model (missing, a pickled
    checkpoint, a file of no kind nlpkit reads), without loading one (`nlpkit.lm.model_files.model_format`: the one place
    that decides what a model path is). `score` checks every model this way before it loads any."""
    from nlpkit.lm.model_files import model_format

    model_format(path)


def load_scorer(spec: ModelSpec, warn: Callable[[str], None] | None = None,
                loaded: Callable[[object], None] | None = None):
    """The continuation scorer of `spec`: the model loaded behind `LanguageModel` (`nlpkit.lm.load`), its
    `continuation_scorer`. Settings the kind of model has no use for are refused, with the backend's reason.
    `loaded` is handed the `LanguageModel` once it has loaded (`score --verbose` describes it)."""
    from nlpkit.lm.load import load_language_model

    lm = load_language_model(spec.load, warn=warn)
    if loaded is not None:
        loaded(lm)
    for param, needs, given in (("chat", Capability.CHAT, spec.chat),
                                ("window", Capability.CONTEXT_WINDOW, spec.window is not None)):
        if given and needs not in lm.capabilities:
            raise UsageError(f"`{param}` does not apply to {lm.described} ({lm.name}): {lm.why_not[needs]}")
    window = spec.window
    if window is None and Capability.WINDOWS in lm.capabilities:
        window = lm.window_context(None)   # one rule with perplexity
    scorer = lm.continuation_scorer(window, spec.chat, spec.system)
    if spec.generate:
        from nlpkit.evaluation.generation_task import Generator

        return Generator(lm, window, scorer.render if spec.chat else None, spec.chat)
    return scorer


def cached_scorer(spec: ModelSpec):
    """`load_scorer(spec)`, once per process (a Dask worker scores many chunks with the same models): the process's
    one model cache, `nlpkit.lm.spec.cached_model`."""
    from nlpkit.lm.spec import cached_model

    return cached_model(load_scorer, spec)
