"""Decoding adapters any `Decoder` can use: `StateBatch` (the `DecodingBatch` of a model without batched decoding -- an
n-gram model, a longrope transformer -- one `DecodingState` per sequence, advanced in turn) and `StreamStops` (a
`TextStream` as a generation task's stop test). Backends return them (`decoding_batch`, `until_stream`); the batch
driver (`nlpkit.lm.generation.batch_generation`) runs them. They sit under both, so a backend imports no task module.
"""

from __future__ import annotations

import numpy as np


class StateBatch:
    """The batch interface over a model without batched decoding: one `DecodingState` per sequence."""

    forks = False   # no `fork`: a sequence has its own state

    def __init__(self, lm, context: int | None = None):
        self.lm, self.context = lm, context
        self.states: dict = {}
        self.full: list = []   # the keys whose state found no room at the last `step`

    def __len__(self) -> int:
        return len(self.states)

    @property
    def keys(self) -> list:
        return list(self.states)

    def room(self, key) -> int:
        return 1  # a state says itself when it is full (`advance` -> False)

    def can_take(self, positions: list[int]) -> bool:
        return True  # a state holds what its model needs; no shared budget

    def join(self, key, prompt_ids, max_new_tokens: int) -> np.ndarray:  # -> [V]
        state = self.lm.start(prompt_ids, 1, context=self.context)
        self.states[key] = state
        return state.logits()[0]

    def join_many(self, joins) -> list[np.ndarray]:  # -> n x [V]
        return [self.join(*j) for j in joins]

    def leave(self, key) -> None:
        self.states.pop(key, None)

    def step(self, tokens) -> np.ndarray:  # [n] -> [n, V]; a full state's row is None-filled (NaN)
        rows = []
        for (key, state), t in zip(list(self.states.items()), tokens):
            if state.advance(np.array([int(t)])):
                rows.append(state.logits()[0])
            else:
                rows.append(None)
        self.full = [k for k, r in zip(self.states, rows) if r is None]
        width = next((len(r) for r in rows if r is not None), 0)
        return np.stack([r if r is not None else np.full(width, np.nan) for r in rows]) if rows else np.empty((0, 0))


class StreamStops:
    """A `TextStream` as a generation task's stop test (`LanguageModel.until_stream` of a model whose text is its
    stream's: an n-gram model's words): `push(id)` -> True at a stop string; `text(ids)` the text, cut before it."""

    def __init__(self, stream):
        self.stream = stream

    def push(self, token_id: int) -> bool:
        self.stream.push(token_id)
        return self.stream.stopped

    def text(self, ids=None) -> str:
        return self.stream.text()
