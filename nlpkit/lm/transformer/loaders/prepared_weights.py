"""A transformer's prepared weights in the prepared-model cache (`nlpkit.lm.prepared`): `Weights` as named
arrays and back, so the second load of a model maps its transposed, fused (and, from a GGUF, dequantized)
float32 matrices instead of reading and preparing them again.

A loader may also settle config fields while reading weights (an export without `lm_head` is tied); those
changes are kept with the entry and applied again on a cached load.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from nlpkit.lm.prepared import Prepared, code_version, load_prepared
from nlpkit.lm.transformer.model import GPT2Layer, LlamaLayer, Weights

KIND = "weights"
_ENGINE = Path(__file__).resolve().parents[1]


def _made_by() -> list[Path]:
    """The engine's and the loaders' modules: what decides the arrays (an entry made by other code is rebuilt)."""
    return sorted(_ENGINE.glob("*.py")) + sorted((_ENGINE / "loaders").glob("*.py"))


def pack(weights, config_changes: dict) -> Prepared:
    """Weights -> Prepared: every array field by name ("lm_head", "layers.3.wqkv"), the layer class in meta."""
    arrays: dict[str, np.ndarray] = {}
    meta = {"layer_class": type(weights.layers[0]).__name__ if weights.layers else None,
            "n_layers": len(weights.layers), "config": config_changes}
    for prefix, obj in [("", weights)] + [(f"layers.{i}.", layer) for i, layer in enumerate(weights.layers)]:
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if isinstance(value, np.ndarray):
                arrays[prefix + f.name] = value
            elif value is not None and f.name != "layers":
                raise TypeError(f"weights field {prefix}{f.name} is not an array")  # not cacheable: built each time
    return Prepared(arrays, meta)


def unpack(entry: Prepared):
    """Prepared -> Weights (the arrays themselves: mapped read-only from a cache entry, or just built)."""
    a = entry.arrays
    classes = {"LlamaLayer": LlamaLayer, "GPT2Layer": GPT2Layer}
    cls = classes.get(entry.meta["layer_class"])
    layers = []
    for i in range(entry.meta["n_layers"]):
        layers.append(cls(**{f.name: a.get(f"layers.{i}.{f.name}") for f in dataclasses.fields(cls)}))
    top = {f.name: a.get(f.name) for f in dataclasses.fields(Weights) if f.name != "layers"}
    return Weights(layers=layers, **top)


class _NotCacheable(Exception):
    def __init__(self, weights):
        super().__init__("weights with a field that is not an array")
        self.weights = weights


def _fields(config) -> dict:
    return {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}


def load_weights(sources: Sequence[Path], label: str, config, build: Callable[[], object], *,
                 use_cache: bool | None = None, warn: Callable[[str], None] | None = None) -> tuple[object, str]:
    """(the model's Weights, what the cache did: `Prepared.cache`): from its cache entry when one was made from
    these files by this code, else `build()` (and written). Config fields `build` changed are recorded and set
    again on a cached load."""
    before = _fields(config)

    def make() -> Prepared:
        weights = build()
        after = _fields(config)
        try:
            return pack(weights, {k: v for k, v in after.items() if before[k] != v})
        except TypeError:
            raise _NotCacheable(weights) from None

    if not sources:
        return build(), "not written"
    try:
        entry = load_prepared(sources, KIND, make, version=code_version(*_made_by()), label=label,
                              use_cache=use_cache, warn=warn)
    except _NotCacheable as e:  # a field that is not an array: this model is built on every load
        return e.weights, "not written"
    for k, v in entry.meta.get("config", {}).items():
        setattr(config, k, v)
    return unpack(entry), entry.cache
