"""The models an evaluation scores with: a model file -> its continuation scorer (the transformer engine for Hugging
Face directories and GGUF files, the n-gram model for ARPA / .ngram files), loaded once per process.

A `ModelSpec` is what it takes to load one again elsewhere (a Dask worker): the path and the scoring settings.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

from nlpkit.errors import UsageError


@dataclass(frozen=True)
class ModelSpec:
    """A model and how it scores: `window` (tokens; None: the model's trained positions), `chat` (render contexts
    with its chat template, `system` first)."""

    path: str | None
    window: int | None = None
    chat: bool = False
    system: str | None = None

    def absolute(self) -> "ModelSpec":
        """The same spec with an absolute path (workers have their own working directory)."""
        if self.path is None or "://" in self.path:
            return self
        return ModelSpec(os.path.abspath(self.path), self.window, self.chat, self.system)


def is_ngram(path: str | None) -> bool:
    """Whether the path (else $NLPKIT_MODEL) is an n-gram model file."""
    from nlpkit.lm.ngram import is_ngram_model

    path = path or os.environ.get("NLPKIT_MODEL") or None
    return bool(path) and is_ngram_model(path)


def load_scorer(spec: ModelSpec, warn: Callable[[str], None] | None = None):
    """The continuation scorer of `spec` (see the module docstring)."""
    if is_ngram(spec.path):
        from nlpkit.lm.ngram import load_ngram_model
        from nlpkit.lm.ngram.continuations import NgramContinuationScorer
        from nlpkit.lm.ngram.line_scoring import line_transform

        path = spec.path or os.environ["NLPKIT_MODEL"]
        if spec.chat:
            raise UsageError(f"chat does not apply to an n-gram model ({path}): it has no chat template")
        if spec.window is not None:
            raise UsageError(f"a window does not apply to an n-gram model ({path}): it sees its last words only")
        model = load_ngram_model(path, warn=warn)
        return NgramContinuationScorer(model, line_transform(model))
    from nlpkit.lm.transformer.continuations import ContinuationScorer, chat_renderer
    from nlpkit.lm.transformer.loaders import load_model

    model = load_model(spec.path)
    model.require_tokenizer()
    if spec.window is not None and spec.window > model.config.positions:
        raise UsageError(f"`window` {spec.window} exceeds the {model.config.positions} positions of "
                         f"{spec.path or 'the model'}")
    return ContinuationScorer(model, spec.window, chat_renderer(model, spec.system) if spec.chat else None)


_CACHE: dict[ModelSpec, object] = {}


def cached_scorer(spec: ModelSpec):
    """`load_scorer(spec)`, once per process (a Dask worker scores many chunks with the same models)."""
    if spec not in _CACHE:
        _CACHE[spec] = load_scorer(spec)
    return _CACHE[spec]
