"""Text generation, written once for every `LanguageModel` (the transformer engine and n-gram models).

Three layers, each usable alone:

- `decode_steps(model, prompt_ids, ...)` - the loop. The model's `DecodingState` holds the rows
  (the transformer prefills the prompt once and broadcasts its KV cache to `n` rows; an n-gram model
  keeps a word history per row); each step filters every row's next-token logits, draws one token
  per row and yields a `Step` (a token per row with its log-probabilities).
- the model's text stream - token ids to text pieces that never show any part of a stop string
  (`TokenTextStream` for a tokenizer's bytes, never splitting a UTF-8 sequence; words joined by spaces
  for an n-gram model).
- `generate(...)` (one streamed continuation), `sample_batch(...)` (N continuations in one batch,
  with their total log-probabilities) and `next_token_distribution(...)` - what the CLI offers.

`model` is a `LanguageModel` (`nlpkit.lm.load.load_language_model`) or a bare transformer `Model`;
`prompt_ids` a list of ids or a `Prompt` (`LanguageModel.prompt`: ids, the text between prompt and
continuation, extra end ids).

>>> stats = GenerationStats()
>>> for piece in generate(model, model.tokenizer.encode("Once upon"), max_new_tokens=20, stats=stats):
...     print(piece, end="", flush=True)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Sequence

import numpy as np

from nlpkit.errors import NlpkitError, UsageError
from nlpkit.lm.interface import Prompt
from nlpkit.lm.generation.sampling import SamplingConfig, draw, probabilities, process_logits, token_logprobs

FINISH_REASONS = ("eos", "stop", "length", "context")


@dataclass
class GenerationStats:
    """Timings and counts of one generation (or one batch): what `--stats` prints."""

    prompt_tokens: int = 0
    new_tokens: int = 0  # decode steps (per row)
    batch: int = 1
    prefill_seconds: float = 0.0
    decode_seconds: float = 0.0
    finish: str = ""  # one of FINISH_REASONS (for a batch: the first row's)
    context_dropped: int = 0  # positions forgotten by --sliding

    @property
    def prefill_tps(self) -> float:
        return self.prompt_tokens / self.prefill_seconds if self.prefill_seconds > 0 else float("inf")

    @property
    def decode_tps(self) -> float:
        """Generated tokens per second, counting every row of a batch."""
        return self.new_tokens * self.batch / self.decode_seconds if self.decode_seconds > 0 else float("inf")


@dataclass
class Step:
    """One decode step for every row: the chosen ids and their log-probabilities."""

    ids: np.ndarray  # [b] int
    logprob: np.ndarray  # [b] under the model's own (unfiltered) distribution
    logprob_filtered: np.ndarray  # [b] under the distribution actually sampled from


# ------------------------------------------------------------------------------ the loop

def as_language_model(model):
    """`model` itself when it is a `LanguageModel`; a bare transformer `Model` wrapped as one."""
    from nlpkit.lm.transformer.model import Model

    if not isinstance(model, Model):
        return model
    from nlpkit.lm.transformer.transformer_lm import TransformerLM

    return TransformerLM(model)


def as_prompt(prompt) -> Prompt:
    return prompt if isinstance(prompt, Prompt) else Prompt([int(i) for i in prompt])


def decode_steps(model, prompt_ids, *, n: int = 1, sampling: SamplingConfig | None = None,
                 seed: int | None = None, use_cache: bool = True, sliding: bool = False,
                 context: int | None = None, stats: GenerationStats | None = None) -> Iterator[Step]:
    """Yield one `Step` per generated position for `n` rows sharing one prompt, until the consumer
    stops or the context is full (then `stats.finish = "context"`).

    The transformer prefills the prompt once with batch 1 and broadcasts its cache to `n` rows; with
    `sliding`, a full context forgets its oldest quarter instead of stopping (the prompt included).
    """
    lm = as_language_model(model)
    ids0 = as_prompt(prompt_ids).ids
    cfg = (sampling or SamplingConfig()).validate()
    stats = stats if stats is not None else GenerationStats()
    rng = np.random.default_rng(seed)
    state = lm.start(ids0, n, use_cache=use_cache, sliding=sliding, context=context, stats=stats)
    V = lm.vocab_size
    prompt = np.asarray(ids0, dtype=np.int64)
    seen = np.zeros((n, V), dtype=bool)  # [n, V] tokens in each row (repetition penalty)
    seen[:, prompt[prompt < V]] = True
    rows = np.arange(n)
    logits = state.logits()  # [n, V]
    while True:
        t0 = time.perf_counter()
        filtered = process_logits(logits, seen, cfg)  # [n, V]
        if cfg.greedy:
            ids, lpf = np.argmax(filtered, axis=-1), np.zeros(n)  # the one-hot distribution: log 1
        else:
            probs = probabilities(filtered, cfg)  # [n, V]
            ids = draw(probs, rng)  # [n]
            lpf = np.log(probs[rows, ids])
        lp = token_logprobs(logits, ids)  # [n]
        seen[rows, ids] = True
        stats.new_tokens += 1
        stats.decode_seconds += time.perf_counter() - t0
        yield Step(ids, lp, lpf)

        t0 = time.perf_counter()
        if not state.advance(ids):  # no room for the token just chosen
            stats.finish = "context"
            return
        logits = state.logits()  # [n, V]
        stats.decode_seconds += time.perf_counter() - t0


# ------------------------------------------------------------------------- the front ends

def generate_ids(model, prompt_ids, *, max_new_tokens: int = 128,
                 sampling: SamplingConfig | None = None, seed: int | None = None, use_cache: bool = True,
                 sliding: bool = False, ignore_eos: bool = False, context: int | None = None,
                 stats: GenerationStats | None = None, eos_ids: Iterable[int] = ()) -> Iterator[int]:
    """New token ids of one continuation (EOS -- or any of `eos_ids` -- and length stop it; EOS itself
    is not yielded)."""
    lm = as_language_model(model)
    prompt = as_prompt(prompt_ids)
    stats = stats if stats is not None else GenerationStats()
    if max_new_tokens < 0:
        raise UsageError(f"`max_new_tokens` must be >= 0, got {max_new_tokens}")
    if max_new_tokens == 0:
        stats.finish = "length"
        return
    eos = lm.end_ids(ignore_eos, (*prompt.end_ids, *eos_ids))
    for step in decode_steps(lm, prompt, n=1, sampling=sampling, seed=seed, use_cache=use_cache,
                             sliding=sliding, context=context, stats=stats):
        tid = int(step.ids[0])
        if tid in eos:
            stats.finish = "eos"
            return
        yield tid
        if stats.new_tokens >= max_new_tokens:
            stats.finish = "length"
            return
    # decode_steps returned: context full (stats.finish already says so)


def generate(model, prompt_ids, *, stop: Sequence[str] = (), stats: GenerationStats | None = None,
             **kwargs) -> Iterator[str]:
    """Text pieces of one continuation, streamed as produced (see `generate_ids` for the options)."""
    lm = as_language_model(model)
    prompt = as_prompt(prompt_ids)
    stats = stats if stats is not None else GenerationStats()
    stream = lm.text_stream(prompt, stop)
    for tid in generate_ids(lm, prompt, stats=stats, **kwargs):
        piece = stream.push(tid)
        if piece:
            yield piece
        if stream.stopped:
            stats.finish = "stop"
            return
    rest = stream.finish()
    if rest:
        yield rest


@dataclass
class Sample:
    """One continuation of `sample_batch`."""

    index: int
    ids: list[int] = field(default_factory=list)
    text: str = ""
    logprob: float = 0.0  # sum over its tokens, model's own distribution
    logprob_filtered: float = 0.0  # sum over its tokens, the filtered distribution it was drawn from
    finish: str = ""


def sample_batch(model, prompt_ids, n: int, *, max_new_tokens: int = 128,
                 sampling: SamplingConfig | None = None, seed: int | None = None, stop: Sequence[str] = (),
                 use_cache: bool = True, sliding: bool = False, ignore_eos: bool = False,
                 context: int | None = None, stats: GenerationStats | None = None,
                 eos_ids: Iterable[int] = ()) -> list[Sample]:
    """N continuations decoded together in one batch (prompt prefilled once, cache broadcast).

    Each row stops on its own (EOS, stop string, length); a stopped row's later tokens are ignored.
    Log-probabilities count the tokens of the returned ids (EOS included when it ended the row,
    a token that completed a stop string included).
    """
    lm = as_language_model(model)
    prompt = as_prompt(prompt_ids)
    if n < 1:
        raise UsageError(f"`n` must be at least 1, got {n}")
    if max_new_tokens < 0:
        raise UsageError(f"`max_new_tokens` must be at least 0, got {max_new_tokens}")
    stats = stats if stats is not None else GenerationStats()
    eos = lm.end_ids(ignore_eos, (*prompt.end_ids, *eos_ids))
    samples = [Sample(i) for i in range(n)]
    if max_new_tokens == 0:                     # as generate: empty texts, nothing decoded
        for s in samples:
            s.finish = "length"
        stats.finish = "length"
        return samples
    streams = [lm.text_stream(prompt, stop) for _ in range(n)]
    active = np.ones(n, dtype=bool)
    for step in decode_steps(lm, prompt, n=n, sampling=sampling, seed=seed, use_cache=use_cache,
                             sliding=sliding, context=context, stats=stats):
        for i in np.flatnonzero(active):
            s, tid = samples[i], int(step.ids[i])
            s.logprob += float(step.logprob[i])
            s.logprob_filtered += float(step.logprob_filtered[i])
            s.ids.append(tid)
            if tid in eos:
                s.finish, active[i] = "eos", False
                continue
            if streams[i] is not None:
                streams[i].push(tid)
                if streams[i].stopped:
                    s.finish, active[i] = "stop", False
                    continue
            if len(s.ids) >= max_new_tokens:
                s.finish, active[i] = "length", False
        if not active.any():
            break
    for i, s in enumerate(samples):
        if not s.finish:
            s.finish = stats.finish or "context"
        if streams[i] is not None:
            s.text = streams[i].text()
    stats.finish = samples[0].finish
    return samples


def next_token_distribution(model, prompt_ids, sampling: SamplingConfig | None = None,
                            context: int | None = None) -> list[tuple[int, float]]:
    """(id, probability) of every token left after the filters, most likely first (greedy: one token, 1.0)."""
    lm = as_language_model(model)
    ids = as_prompt(prompt_ids).ids
    cfg = (sampling or SamplingConfig()).validate()
    logits = lm.next_logits(ids, context)[None, :]  # [1, V]
    seen = np.zeros(logits.shape, dtype=bool)
    seen[0, ids] = True
    probs = probabilities(process_logits(logits, seen, cfg), cfg)[0]  # [V]
    order = np.argsort(-probs, kind="stable")
    order = order[probs[order] > 0]
    return [(int(i), float(probs[i])) for i in order]


__all__ = ["GenerationStats", "Step", "Sample", "decode_steps", "generate_ids", "generate",
           "sample_batch", "next_token_distribution", "as_language_model"]
