"""One interface for language models, two backends: the transformer engine and the n-gram model.

As lm-evaluation-harness's ``LM`` defines a model by a few methods that every task is written
against, nlpkit's commands are written once against `LanguageModel`; `load_language_model(path)`
sniffs the path and returns a backend (`nlpkit.lm.transformer.transformer_lm.TransformerLM` for a Hugging
Face directory or a GGUF file, `nlpkit.lm.ngram.ngram_lm.NgramLM` for an ARPA or nlpkit counts file).
Nothing above this module asks which kind of model it holds.

    >>> lm = load_language_model("lm.arpa")                 # nlpkit.lm.load; a model directory/GGUF too
    >>> state = lm.start(lm.prompt("It is a truth").ids, 1)
    >>> state.logits().shape                               # [rows, V] next-token logits
    (1, 5000)

What a model offers:

- **identity** - `kind` ("transformer" or "ngram"), `name` (as signatures name it), `signature(...)`
  (the settings line of a result, with the fields this kind records), `inapplicable` (parameters that
  mean nothing for this kind, with the reason: the CLI refuses them when given).
- **tokens** - `encode(text)` (as perplexity tokenizes), `token_text(id)`, `prefix_id` (the token the
  first token of a text is predicted from: BOS, else EOS; ``<s>`` for an n-gram model), `vocab_size`.
- **scoring** - `logprobs(ids, first)`: log p(ids[j] | ids[:j]) for j >= first, natural log, one
  window: the primitive every window-based evaluation is built on (`nlpkit.lm.perplexity`'s windows
  call it); `window_logits(ids, first)`: the same positions' logits rows, a chunk at a time (what
  `perplexity --compare` compares; the transformer only); `next_logits(ids)`: the next token's logits
  after a prompt (`sample --dist`);
  `perplexity_run(paths, ...)`: what `nlpkit perplexity` prints (each kind keeps the columns it has
  always printed: the transformer scores windows of a text, the n-gram model each line as a sentence,
  as KenLM's query), `window_context(context)` the window length it uses.
- **continuations** - `continuation_scorer(window, chat, system)` -> a scorer whose `score(context, continuations)`
  gives one `nlpkit.lm.continuations.ContinuationScore` per continuation (its summed log-probability after the
  context, its tokens, `is_greedy`): lm-evaluation-harness's encoding and left truncation, the context run
  once for all its continuations, and many items' requests packed into one forward (transformer: `score_batch`,
  which `nlpkit.lm.continuations.score_requests` uses when a scorer has it); each continuation's words after
  `<s>` and the context's, as KenLM's full_scores (n-gram). `nlpkit score` is written on it.
- **decoding** - `prompt(text, ...)` -> `Prompt` (ids and what goes between the prompt and the first
  new text), `start(prompt_ids, rows, ...)` -> a `DecodingState` (the next-token logits of every row,
  advanced one token per row at a time), `text_stream(prompt, stop)` -> a `TextStream` (token ids to
  text pieces), `end_ids(ignore_eos)`, `sampling_defaults()`, `warm_up()`. Sampling, `generate`, `sample` and `sample --dist` are written
  once over these (`nlpkit.lm.generation`).

A new evaluation feature is written once in `nlpkit/lm/` against these methods; what it needs from a
model that no method gives yet becomes one method here and one in each backend
(`nlpkit/lm/transformer/backend.py`, `nlpkit/lm/ngram/backend.py`), never an ``if lm.kind == ...``
in a command. Two are added this way:

- continuation scoring (``nlpkit score``): `continuation_scorer(window, chat, system)` -> a scorer whose
  `score_ids(context_ids, continuations)` gives one `nlpkit.lm.continuations.ContinuationScore` per
  continuation (its summed log-probability after the context, and `is_greedy`: every token the
  argmax). The transformer runs the shared context once, each choice as a branch after it, many items
  packed into one forward (`nlpkit/lm/transformer/continuations.py`); the n-gram backend scores each choice's
  words after the context's last n-1 (`nlpkit/lm/ngram/continuations.py`).
- full-vocabulary log-probabilities (``perplexity --compare``, `nlpkit.lm.comparison`): `window_logits(ids,
  first)` -> chunks of [n, V] logits rows for the positions `logprobs(ids, first)` scores (same windows,
  same convention), from which KL divergence and top-token agreement are computed. The transformer has it;
  an n-gram model does not (`inapplicable` says why).

Conventions every scoring method keeps: ids include the prefix token (`prefix_id`) when the first
text token is to be scored; `first` is the first position whose prediction is returned; natural logs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Protocol, Sequence, runtime_checkable

import numpy as np

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
    """What `perplexity` prints for a kind of model: its columns, its signature, and the records
    (`records(progress, client, shard_size)`: local, or on a Dask `client`)."""

    columns: list[str]
    signature: str
    records: Callable[..., Iterator[dict]]
    digits: int = 4                  # significant digits of floats in a table
    context: int | None = None       # the window length in force (None: no windows)
    stride: int | None = None        # the sliding-window step in force


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


@runtime_checkable
class LanguageModel(Protocol):
    """A language model of either kind (see the module docstring for what each member is for)."""

    kind: str                             # "transformer" or "ngram"
    described: str                        # "an n-gram model": how messages name this kind
    name: str                             # as signatures name the model
    vocab_size: int
    prefix_id: int | None
    context_length: int | None            # positions a prompt and its continuation may fill (None: no limit)
    inapplicable: Mapping[str, str]       # parameter -> why it means nothing for this kind
    token_unit: str                       # "tokens" or "words", as --stats counts them

    def require_tokenizer(self) -> Any: ...

    def signature(self, command: str, settings: Mapping[str, Any], extra: Mapping[str, Any] = ...) -> str: ...

    def encode(self, text: str) -> list[int]: ...

    def token_text(self, token_id: int) -> str: ...

    def logprobs(self, ids: Sequence[int], first: int) -> np.ndarray: ...

    def next_logits(self, prompt_ids: Sequence[int], context: int | None = None) -> np.ndarray: ...

    def window_logits(self, ids: Sequence[int], first: int) -> Iterator[np.ndarray]: ...

    def window_context(self, context: int | None) -> int | None: ...

    def perplexity_run(self, paths: Sequence[str], *, mode: str = "sliding", context: int | None = None,
                       stride: int | None = None, add_bos: bool | None = None, per_line: bool = False,
                       per_token: bool = False, errors: str = "strict") -> PerplexityRun: ...

    def prompt(self, text: str, *, max_new_tokens: int = 0, truncate: bool = False, chat: Any = None) -> Prompt: ...

    def start(self, prompt_ids: Sequence[int], rows: int = 1, *, use_cache: bool = True, sliding: bool = False,
              context: int | None = None, stats: Any = None) -> DecodingState: ...

    def text_stream(self, prompt: Prompt, stop: Sequence[str] = ()) -> TextStream: ...

    def end_ids(self, ignore_eos: bool, extra: Sequence[int] = ()) -> frozenset[int]: ...

    def sampling_defaults(self) -> tuple[dict, str | None]: ...

    def continuation_scorer(self, window: int | None = None, chat: bool = False, system: str | None = None) -> Any: ...

    def warm_up(self) -> float | None: ...

    def continuation_scorer(self, window: int | None = None, chat: bool = False, system: str | None = None) -> Any: ...
