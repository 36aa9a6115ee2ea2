"""One interface for language models, two backends: the transformer engine and the n-gram model.

As lm-evaluation-harness's ``LM`` defines a model by a few methods that every task is written
against, nlpkit's commands are written once against `LanguageModel`; `load_language_model(path)`
sniffs the path and returns a backend (`nlpkit.lm.transformer.transformer_lm.TransformerLM` for a
Hugging Face directory or a GGUF file, `nlpkit.lm.ngram.ngram_lm.NgramLM` for an ARPA or nlpkit
counts file). Nothing above this module asks which kind of model it holds.

    >>> lm = load_language_model("lm.arpa")                 # nlpkit.lm.load; a model directory/GGUF too
    >>> state = lm.start(lm.prompt("It is a truth").ids, 1)
    >>> state.logits().shape                               # [rows, V] next-token logits
    (1, 5000)

What a model is (the members below); what is built on it lives beside it, as functions over these:
perplexity and its records (`nlpkit.lm.perplexity.perplexity_run`), the model comparison
(`nlpkit.lm.comparison`), sampling and generation (`nlpkit.lm.generation`), continuation scoring for
`nlpkit score` (a `nlpkit.lm.continuations.ContinuationScorer`).

- **identity** (`ModelIdentity`) - `kind` ("transformer" or "ngram", for messages and signatures only),
  `described`, `name` (as signatures name it), `signature(...)` (the settings line of a result, with the fields this kind
  records), `inapplicable` (parameters that mean nothing for this kind, with the reason: the CLI refuses
  them when given), `worker_key` (a (loader, arguments) tuple a Dask worker loads the same model with:
  `nlpkit.lm.perplexity.cached_model(*worker_key)`), `describe()` (a `ModelDescription`: what the model is and how
  it was loaded -- architecture, size, weights layout and why, threads, what the prepared-model cache did -- as
  `--verbose` and `--stats` say it).
- **tokens** (`ModelTokens`) - `encode(text)` (as perplexity tokenizes), `token_text(id)` (how a token reads),
  `token_bytes(id)` (its bytes, which perplexity's byte counts use), `prefix_id` (the token the first
  token of a text is predicted from: BOS, else EOS; ``<s>`` for an n-gram model), `vocab_size`,
  `token_unit` ("tokens" or "words"), `require_tokenizer()`.
- **scoring** (`ModelScoring`) - `logprobs(ids, first)`: log p(ids[j] | ids[:j]) for j >= first, natural log, one
  window: the primitive every window-based evaluation is built on (`parallel_windows`: whether windows
  may run on threads); `window_logits(ids, first)`: the same positions' logits rows, a chunk at a time
  (what `perplexity --compare` compares; the transformer only); `next_logits(ids)`: the next token's
  logits after a prompt (`sample --dist`); `window_context(context)`: the window length perplexity uses,
  None when the model has no windows and scores each line as one sentence its own way
  (`sentence_perplexity(paths, ...)`, KenLM query's figures: the n-gram model only).
- **continuations** (`ModelScoring`) - `continuation_scorer(window, chat, system)` -> a
  `nlpkit.lm.continuations.ContinuationScorer` (one scoring method, `score_requests`; batching declared by
  its `batched`; `render(context)`).
- **decoding state** (`ModelDecoding`) - `prompt(text, ...)` -> `Prompt` (ids and what goes between the
  prompt and the first new text), `context_length`, `start(prompt_ids, rows, ...)` -> a `DecodingState` (the next-token logits of
  every row, advanced one token per row at a time), `text_stream(prompt, stop)` -> a `TextStream` (token ids
  to text pieces), `end_ids(ignore_eos)`, `sampling_defaults()`, `warm_up()`; `decoding_batch(context)` -> many
  sequences advanced together (`nlpkit.lm.batch_generation`: `generate --prompts`, `score`'s generate task; the
  transformer advances them in one forward per step), `generation_prompt(text, ...)` and `until_stream(prompt,
  until)`: a generation task's prompt and stop test as lm-evaluation-harness's `generate_until` makes them.

The rule for the next feature: write it first as a function over these members, in its own module under
`nlpkit/lm/` (as perplexity, the comparison and generation are). Add a member here (and one in each backend:
`nlpkit/lm/transformer/transformer_lm.py`, `nlpkit/lm/ngram/ngram_lm.py`) only when a backend must do it its
own way (as `sentence_perplexity`: an n-gram model's KenLM figures; `continuation_scorer`: the engine packs
many requests into one forward) or needs what no member gives. Never an ``if lm.kind == ...`` in a command.

Conventions every scoring method keeps: ids include the prefix token (`prefix_id`) when the first
text token is to be scored; `first` is the first position whose prediction is returned; natural logs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Protocol, Sequence, runtime_checkable

import numpy as np

from nlpkit.lm.continuations import ContinuationScorer

KINDS = ("transformer", "ngram")


@dataclass
class Prompt:
    """A prompt ready to decode: its token ids (with the start token the model needs) and `lead`,
    the text put between the prompt and the first new text (a space for an n-gram model's words)."""

    ids: list[int]
    lead: str = ""
    end_ids: tuple[int, ...] = ()   # extra ids that end a continuation (a chat template's end of turn)
    echo: str = ""                  # the prompt as `generate --echo` prints it
    full_length: int = 0            # tokens before `truncate` cut the prompt (0: not cut)


@dataclass
class PerplexityRun:
    """What `perplexity` prints: its columns, its signature, and the records (`records(progress, map_windows,
    map_lines)`: local, or with the mappers the caller built, e.g. `nlpkit.distributed.stages`' on a cluster)."""

    columns: list[str]
    signature: str
    records: Callable[..., Iterator[dict]]
    digits: int = 4                  # significant digits of floats in a table
    context: int | None = None       # the window length in force (None: no windows)
    stride: int | None = None        # the sliding-window step in force


@dataclass(frozen=True)
class ModelDescription:
    """What a loaded model tells of itself (`describe()`), for `--verbose` and `--stats`: facts the load already
    settled, none probed again. A field that means nothing for a kind is None (an n-gram model has no layout)."""

    name: str                        # as signatures name the model
    architecture: str                # "llama" (the family its config was read by), "3-gram kneser-ney", ...
    size: int                        # what it is made of, counted in `size_unit`
    size_unit: str                   # "parameters" (a transformer: implied by its shapes) or "n-grams"
    held_bytes: int | None = None    # its weights' (arrays') bytes as held: mapped or built
    layout: str | None = None        # "native" or "float32": how a transformer's weights are held
    layout_why: str = ""             # "asked for", or auto's reason
    threads: int | None = None       # worker threads of a forward (`nlpkit.lm.threads.workers`)
    cache: str = ""                  # the prepared-model cache at load: read, written, off, not written ("": none)


@runtime_checkable
class DecodingState(Protocol):
    """`rows` continuations of one prompt, decoded together."""

    rows: int

    def logits(self) -> np.ndarray:  # -> [rows, V] float32, natural-log scores of the next token
        ...

    def advance(self, ids: np.ndarray) -> bool:  # [rows] -> False when no token fits any more
        ...


@runtime_checkable
class TextStream(Protocol):
    """Token ids in, text out: `push(id)` gives the text now safe to show ('' while held back, never
    a part of a stop string); `stopped` turns True at a stop string; `finish()` gives the held-back
    rest; `text()` the whole text so far (what a record prints)."""

    stopped: bool

    def push(self, token_id: int) -> str: ...

    def finish(self) -> str: ...

    def text(self) -> str: ...


class ModelIdentity(Protocol):
    """How results and messages name a model, and what does not apply to its kind."""

    kind: str                             # "transformer" or "ngram": for messages and signatures only
    described: str                        # "an n-gram model": how messages name this kind
    name: str                             # as signatures name the model
    inapplicable: Mapping[str, str]       # parameter -> why it means nothing for this kind
    worker_key: tuple                     # (loader, *arguments): the same model in a Dask worker

    def signature(self, command: str, settings: Mapping[str, Any], extra: Mapping[str, Any] = ...) -> str: ...

    def describe(self) -> ModelDescription: ...


class ModelTokens(Protocol):
    """Text to token ids and back."""

    vocab_size: int
    prefix_id: int | None                 # the token a text's first token is predicted from
    token_unit: str                       # "tokens" or "words", as --stats counts them

    def require_tokenizer(self) -> Any: ...

    def encode(self, text: str) -> list[int]: ...

    def token_text(self, token_id: int) -> str: ...

    def token_bytes(self, token_id: int) -> bytes: ...


class ModelScoring(Protocol):
    """Log-probabilities and logits of given tokens: what perplexity, the comparison and `score` are built on."""

    parallel_windows: bool                # True: `logprobs` releases the GIL, windows may run on threads

    def logprobs(self, ids: Sequence[int], first: int) -> np.ndarray: ...

    def window_logits(self, ids: Sequence[int], first: int) -> Iterator[np.ndarray]: ...

    def next_logits(self, prompt_ids: Sequence[int], context: int | None = None) -> np.ndarray: ...

    def window_context(self, context: int | None) -> int | None: ...

    def sentence_perplexity(self, paths: Sequence[str], *, per_line: bool = False, per_token: bool = False,
                            errors: str = "strict") -> PerplexityRun: ...

    def continuation_scorer(self, window: int | None = None, chat: bool = False,
                            system: str | None = None) -> ContinuationScorer: ...


class ModelDecoding(Protocol):
    """A prompt, then the next-token logits of every row, one token per row at a time: what sampling and
    generation are built on."""

    context_length: int | None            # positions a prompt and its continuation may fill (None: no limit)

    def prompt(self, text: str, *, max_new_tokens: int = 0, truncate: bool = False, chat: Any = None) -> Prompt: ...

    def start(self, prompt_ids: Sequence[int], rows: int = 1, *, use_cache: bool = True, sliding: bool = False,
              context: int | None = None, stats: Any = None) -> DecodingState: ...

    def text_stream(self, prompt: Prompt, stop: Sequence[str] = ()) -> TextStream: ...

    def end_ids(self, ignore_eos: bool, extra: Sequence[int] = ()) -> frozenset[int]: ...

    def decoding_batch(self, context: int | None = None) -> Any: ...   # many sequences, one step for all

    def generation_prompt(self, text: str, max_new_tokens: int, window: int | None = None,
                          chat: bool = False) -> Prompt: ...            # a generation task's prompt (lm-eval's)

    def until_stream(self, prompt: Prompt, until: Sequence[str] = ()) -> Any: ...   # its stop test and text

    def sampling_defaults(self) -> tuple[dict, str | None]: ...

    def warm_up(self) -> float | None: ...


@runtime_checkable
class LanguageModel(ModelIdentity, ModelTokens, ModelScoring, ModelDecoding, Protocol):
    """A language model of either kind: its identity, tokens, scoring and decoding (see the module docstring for
    what each member is for; a function needing only a part can ask for that part's protocol)."""
