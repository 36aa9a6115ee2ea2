"""`LoadSpec`: how a command loads its model, as one value; `cached_model`: the process's one model cache.

The CLI builds a `LoadSpec` once from its options (-m, --weights or $NLPKIT_WEIGHTS, --no-cache, the RoPE options,
and what the command does with the model: its `purpose`) and hands it to the loader as a parameter
(`nlpkit.lm.load.load_language_model(spec)`); the loaded model keeps it (`lm.spec`; `describe()` says the layout
the loader chose from it, and why), and its `worker_key` carries it, so that a Dask worker builds the same model
with the same weights layout. No setting travels by the environment or a module global.

    >>> spec = LoadSpec("model.gguf", weights="native", purpose="score")
    >>> lm = load_language_model(spec)                       # doctest: +SKIP

`cached_model(load, *args)` is `load(*args)` once per process (a Dask worker scores many shards with the same
model): the one model cache, keyed by a module-level loader and its arguments (a `LanguageModel.worker_key`).
It sits at the bottom of `nlpkit.lm` (it imports no backend) so that every backend and task can use it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable

WEIGHTS = ("auto", "native", "float32")     # how a transformer's weights are held (`loaders/native.py`)
PURPOSES = ("score", "decode")              # what `auto` weighs: batched forwards, or a token per step


@dataclass(frozen=True)
class LoadSpec:
    """A model and how to load it.

    `path`: a Hugging Face directory, a GGUF file or an n-gram model (None: $NLPKIT_MODEL, else the shipped model);
    `weights`: auto|native|float32 (a transformer's layout); `purpose`: "score" or "decode" (what the command does
    with the model: auto's choice weighs it; None: not said, as decoding); `rope_scaling`/`rope_factor`: a RoPE
    override (a transformer's); `use_cache`: the prepared-model cache (False: --no-cache; None: unless
    $NLPKIT_NO_CACHE)."""

    path: str | None = None
    weights: str = "auto"
    purpose: str | None = None
    rope_scaling: str | None = None
    rope_factor: float | None = None
    use_cache: bool | None = None

    def __post_init__(self) -> None:
        from nlpkit.errors import UsageError

        if self.weights not in WEIGHTS:
            raise UsageError(f"`weights` must be one of {', '.join(WEIGHTS)}, got {self.weights!r}")
        if self.purpose not in (*PURPOSES, None):
            raise UsageError(f"`purpose` must be score or decode, got {self.purpose!r}")
        if self.path is not None and not isinstance(self.path, str):
            object.__setattr__(self, "path", str(self.path))


def resolve_path(path: str | os.PathLike | None) -> str | None:
    """The model path: `path`, else $NLPKIT_MODEL, else None (the shipped model)."""
    return str(path) if path else (os.environ.get("NLPKIT_MODEL") or None)


_MODEL_CACHE: dict[tuple, Any] = {}


def cached_model(load: Callable, *args):
    """`load(*args)`, once per process: a `LanguageModel.worker_key` is such a (loader, arguments) tuple, the loader a
    module-level function or a backend's `load` (it travels by name). The last four stay loaded (perplexity --compare
    runs a model and its base in every task; `score` its models and a reference)."""
    key = (load, *args)
    model = _MODEL_CACHE.get(key)
    if model is None:
        while len(_MODEL_CACHE) >= 4:  # a model and its base, score's models and reference, stay loaded
            _MODEL_CACHE.pop(next(iter(_MODEL_CACHE)))
        model = _MODEL_CACHE[key] = load(*args)
    return model


__all__ = ["LoadSpec", "PURPOSES", "WEIGHTS", "cached_model", "resolve_path"]
