"""N continuations of each of many prompts, decoded together (continuous batching): what `sample --prompts` runs.

`sample_prompts(lm, prompts, n, batch_size=B)` gives each prompt's `n` continuations (`Sample`s, as
`nlpkit.lm.generation.sample_batch` gives one prompt's) through `nlpkit.lm.generation.batch_generation.generate_batched`: every
continuation is a sequence of its own in the model's decoding batch (its own KV cache, prefilled with its prompt;
the transformer's `DecodingBatch`, an n-gram model's one state per sequence), at most `B` of them live at once, the
next one joining as soon as one ends. A prompt's continuations are one `Request.family`: on a batch that can `fork`
a sequence, one joining while a sibling is live copies the sibling's prompt keys and values instead of prefilling
the prompt again (`DecodingBatch.fork`; an n-gram model's states are cheap to start). The results come per prompt,
in input order, each prompt's as soon as its continuations and every earlier prompt's are done.

How a seed maps to the draws. `sample_batch(prompt, n, seed=S)` (`nlpkit sample PROMPT -n N --seed S`) draws one
uniform number per row and step from one generator seeded with S, so row j's t-th draw is number t*n + j of that
generator's stream. Here continuation j of every prompt draws from `RowGenerator(S, j, n)`: numbers j, j+n, j+2n, ...
of that same stream (PCG64 jumps ahead instead of drawing the numbers in between). So each prompt's n continuations
are the ones `nlpkit sample PROMPT -n N --seed S` gives for that prompt alone, whatever the batch size, the other
prompts and their order; two equal prompts get equal continuations (as `generate --prompts` gives equal prompts equal
texts). One caveat, the batched engine's: a row's logits may differ from a lone batch's in their last bits (BLAS
sums a product of many rows in another order), which changes a draw only when its uniform number falls on the
boundary between two tokens' cumulative probabilities.
"""

from __future__ import annotations

from typing import Iterable, Iterator, Sequence

import numpy as np

from nlpkit.errors import UsageError
from nlpkit.lm.generation.batch_generation import DEFAULT_BATCH, BatchStats, Generated, Request, generate_batched
from nlpkit.lm.generation import Sample
from nlpkit.lm.interface import Prompt
from nlpkit.lm.generation.sampling import SamplingConfig


class RowGenerator:
    """Row `row`'s share of the stream `np.random.default_rng(seed)` gives a batch of `rows` rows that draws one number
    per row and step (`nlpkit.lm.generation.sampling.draw`): its numbers row, row + rows, row + 2*rows, ... (seed None: a fresh
    random stream)."""

    def __init__(self, seed: int | None, row: int, rows: int):
        if not 0 <= row < rows:
            raise UsageError(f"`row` must be in 0..{rows - 1}, got {row}")
        self._bits = np.random.PCG64(seed)  # what default_rng(seed) wraps
        self._bits.advance(row)
        self._numbers = np.random.Generator(self._bits)
        self._skip = rows - 1  # the other rows' numbers of a step

    def random(self, size: int | None = None) -> np.ndarray | float:
        """Uniform numbers in [0, 1), each the next of this row's share (one 64-bit draw each, as `random` takes)."""
        out = np.empty(1 if size is None else size)
        for k in range(out.size):
            out[k] = self._numbers.random()
            if self._skip:
                self._bits.advance(self._skip)
        return float(out[0]) if size is None else out


def sample_prompts(lm, prompts: Iterable[Prompt], n: int, *, batch_size: int = DEFAULT_BATCH,
                   max_new_tokens: int = 128, sampling: SamplingConfig | None = None, seed: int | None = None,
                   stop: Sequence[str] = (), ignore_eos: bool = False, context: int | None = None,
                   stats: BatchStats | None = None) -> Iterator[list[Sample]]:
    """Each prompt's `n` continuations, in input order (see the module docstring); `batch_size` bounds the live
    sequences (continuations, not prompts). A `Sample` counts as `sample_batch`'s does: its ids, token count and
    log-probabilities include the end token that ended it."""
    if n < 1:
        raise UsageError(f"`n` must be at least 1, got {n}")
    if max_new_tokens < 0:
        raise UsageError(f"`max_new_tokens` must be at least 0, got {max_new_tokens}")
    streams: dict[int, object] = {}

    def requests() -> Iterator[Request]:
        for i, prompt in enumerate(prompts):
            for j in range(n):
                stream = streams[i * n + j] = lm.text_stream(prompt, stop)

                def on_token(tid: int, stream=stream) -> bool:
                    stream.push(tid)
                    return stream.stopped

                yield Request(prompt, max_new_tokens, on_token, RowGenerator(seed, j, n), family=i)

    group: list[Sample] = []
    for g in generate_batched(lm, requests(), batch_size=batch_size, sampling=sampling, seed=seed,
                              ignore_eos=ignore_eos, context=context, stats=stats):
        group.append(_sample(g, g.index % n, streams.pop(g.index)))
        if len(group) == n:
            yield group
            group = []


def _sample(g: Generated, j: int, stream) -> Sample:
    """A finished sequence as `sample_batch` reports a row (the end token that ended it among its ids)."""
    ids = g.ids + ([g.end_id] if g.end_id is not None else [])
    return Sample(j, ids, stream.text(), g.logprob, g.logprob_filtered, g.finish)


__all__ = ["RowGenerator", "sample_prompts"]
