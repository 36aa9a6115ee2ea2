"""The per-layer closures a forward runs, and, for native weights, the float32 scratch they read: one set per
forward running at once.

A float32 model has one set of closures (`family_rows`), shared by every thread. A native model's closures read
a `LayerExpander`'s twins, filled from the stored matrices just before each layer runs: two forwards sharing one
expander would overwrite each other's scratch. Each forward therefore checks a set (expander + closures) out for
its layers and returns it after (`LayerSets.held`): forwards on several threads at once (perplexity's windows,
`window_scoring.local_windows`) each get their own scratch — as many sets as forwards run together, at most
`most()` — and a forward alone reuses the one set. A set's scratch is one layer's expanded matrices: a mapped
F32 file's only the fused q/k/v and gate/up copies (SmolLM2-135M: 9 MB), a quantized file's every matrix.
Sets beyond the first are made only while that scratch is at most SMALL_SCRATCH bytes, so a large model keeps one
(its forwards queue, one at a time, each row-parallel) and its memory stays the stored weights + one layer.
"""

from __future__ import annotations

import dataclasses
import threading
from contextlib import contextmanager
from typing import Callable, Iterator

from nlpkit.lm.threads import workers
from nlpkit.lm.transformer.stored_weights import LayerExpander, is_stored

SMALL_SCRATCH = 64 << 20  # bytes: a native model whose layer scratch is at most this runs forwards on threads at once


class LayerSets:
    """A model's (closures, expander | None) sets: `held()` gives this forward its own (reentrant per thread)."""

    def __init__(self, layers: list, make: Callable[[object, int], tuple]):
        self.layers, self.make = layers, make  # make(layer, li) -> (project, finish)
        self.native = has_stored_layers(layers)
        self.scratch_bytes = 4 * sum(LayerExpander.scratch_sizes(layers).values()) if self.native else 0
        self._idle: list[tuple[list, LayerExpander | None]] = []
        self._made = 0
        self._cond = threading.Condition()
        self._mine = threading.local()
        self.first = self._new()  # built eagerly: `Model.layer_rows` returns its closures
        self._idle.append(self.first)

    def most(self) -> int:
        """How many sets may exist: one for float32 weights (shared, nothing to overwrite) or a large scratch;
        else one per CPU the engine may use."""
        if not self.native:
            return 1
        return max(1, workers()) if self.scratch_bytes <= SMALL_SCRATCH else 1

    @property
    def parallel(self) -> bool:
        """Whether forwards on several threads at once each get their own set (float32: they share the one)."""
        return not self.native or self.scratch_bytes <= SMALL_SCRATCH

    def _new(self) -> tuple[list, LayerExpander | None]:
        self._made += 1
        if not self.native:
            return [self.make(layer, li) for li, layer in enumerate(self.layers)], None
        expander = LayerExpander(self.layers)
        return [self.make(layer, li) for li, layer in enumerate(expander.twins)], expander

    @contextmanager
    def held(self) -> Iterator[tuple[list, LayerExpander | None]]:
        """This forward's set: the float32 closures, or an idle native set (a new one while under `most()`, else
        waiting for one); a thread that already holds one (a forward inside a forward) keeps it."""
        if not self.native:
            yield self.first
            return
        mine = getattr(self._mine, "set", None)
        if mine is not None:
            yield mine
            return
        with self._cond:
            while not self._idle and self._made >= self.most():
                self._cond.wait()
            got = self._idle.pop() if self._idle else self._new()
        self._mine.set = got
        try:
            yield got
        finally:
            self._mine.set = None
            with self._cond:
                self._idle.append(got)
                self._cond.notify()


def has_stored_layers(layers: list) -> bool:
    """Whether any layer holds a StoredMatrix (a native load)."""
    return any(is_stored(getattr(layer, f.name)) for layer in layers for f in dataclasses.fields(layer))


__all__ = ["LayerSets", "SMALL_SCRATCH"]
