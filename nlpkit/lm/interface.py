"""One interface for language models, two backends: the transformer engine and the n-gram model.

As lm-evaluation-harness's ``LM`` defines a model by a few methods that every task is written
against, nlpkit's commands are written once against `LanguageModel`; `load_language_model(path)`
sniffs the path and returns a backend (`nlpkit.lm.transformer.transformer_lm.TransformerLM` for a
Hugging Face directory or a GGUF file, `nlpkit.lm.ngram.ngram_lm.NgramLM` for an ARPA or nlpkit
counts file). Nothing above this module asks which kind of model it holds.

    >>> lm = load_language_model("lm.arpa")                 # nlpkit.lm.load; a model directory/GGUF too
    >>> Capability.GENERATE in lm.capabilities
    True
    >>> state = lm.start(lm.prompt("It is a truth").ids, 1)
    >>> state.logits().shape                               # [rows, V] next-token logits
    (1, 5000)

What a model is (the members below); what is built on it lives beside it, as functions over these:
perplexity and its records (`nlpkit.lm.perplexity.perplexity_run`), the model comparison
(`nlpkit.lm.perplexity.comparison`), sampling and generation (`nlpkit.lm.generation`), continuation scoring for
`nlpkit score` (a `nlpkit.lm.continuations.ContinuationScorer`).

`LanguageModel` is what every backend answers, as lm-evaluation-harness's requests:
- **identity** - `kind` ("transformer" or "ngram", for messages and signatures only), `described`, `name` (as
  signatures name it), `signature(...)` (the settings line of a result), `capabilities` (what it does beyond this
  protocol, a frozenset of `Capability`) and `why_not` (each capability it lacks -> why: the CLI refuses an option
  that needs one, as a usage error), `spec` (the `nlpkit.lm.spec.LoadSpec` it was loaded by), `worker_key` (a
  (loader, LoadSpec) pair a Dask worker loads the same model with: `nlpkit.lm.spec.cached_model(*worker_key)`),
  `describe()` (a `ModelDescription`: architecture, size, weights layout and why, threads, the prepared-model
  cache, as `--verbose` and `--stats` say it).
- **tokens** - `encode(text)` (as perplexity tokenizes), `token_text(id)`, `token_bytes(id)` (which perplexity's
  byte counts use), `prefix_id` (the token a text's first token is predicted from: BOS, else EOS; ``<s>`` for an
  n-gram model), `vocab_size`, `token_unit` ("tokens" or "words"), `require_tokenizer()`.
- **requests** - `logprobs(ids, first)`: log p(ids[j] | ids[:j]) for j >= first, natural log, one window (the
  rolling log-likelihood every window-based evaluation is built on); `continuation_scorer(window, chat, system)`
  -> a `ContinuationScorer` (`score_requests`; batching declared by its `batched`; `render(context)`).

What only some backends do is a `Capability` the class declares, with the protocol of its members:
`WindowScoring` (WINDOWS: `window_context(context)`, the window length perplexity uses, checked;
`parallel_windows`), `TokenLogits` (LOGITS: `window_logits(ids, first)`, what `perplexity --compare` compares),
`SentenceScoring` (SENTENCES: `sentence_perplexity(paths, ...)`, KenLM query's figures, each line a sentence),
`Decoder` (GENERATE: `prompt`, `start` -> a `DecodingState`, `text_stream`, `end_ids`, `decoding_batch` -> a
`DecodingBatch`, `generation_prompt`/`until_stream` (lm-evaluation-harness's `generate_until`), `next_logits`,
`sampling_defaults`, `warm_up`, `context_length`), and the options a transformer takes and an n-gram model does
not (POSITIONS: RoPE, WEIGHTS_LAYOUT: --weights, KV_CACHE, CONTEXT_WINDOW, PROMPT_TRUNCATION, CHAT). Code asks
``Capability.X in lm.capabilities``; it never probes a member with hasattr, and never asks ``lm.kind``.

The rule for the next feature: write it first as a function over these members, in its own module under
`nlpkit/lm/` (as perplexity, the comparison and generation are). Add a member (and one in each backend that has
it: `nlpkit/lm/transformer/transformer_lm.py`, `nlpkit/lm/ngram/ngram_lm.py`) only when a backend must do it its
own way; a member only some backends can have is a new `Capability` with its protocol, declared by the classes
that have it, and refused (with the others' `why_not`) where an option asks for it.

Conventions every scoring method keeps: ids include the prefix token (`prefix_id`) when the first
text token is to be scored; `first` is the first position whose prediction is returned; natural logs.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Callable, Iterator, Mapping, Protocol, Sequence, runtime_checkable

import numpy as np

from nlpkit.lm.continuations import ContinuationScorer
from nlpkit.lm.spec import LoadSpec

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


class Capability(str, Enum):
    """What a backend can do beyond what every `LanguageModel` does, declared by its class (`capabilities`, a
    frozenset): code asks ``Capability.X in lm.capabilities``, never probes a member. What a backend cannot do
    it says why in `why_not` (capability -> reason), which the CLI words as a usage error (exit 2)."""

    WINDOWS = "windows"                  # scores a text in context windows (`WindowScoring`: --mode, --context, ...)
    SENTENCES = "sentences"              # scores each line as one sentence, its own way (`SentenceScoring`)
    LOGITS = "logits"                    # distributions over a token vocabulary two models share (`TokenLogits`)
    GENERATE = "generate"                # decodes: prompt, state, streams (`Decoder`: generate, sample, score's task)
    POSITIONS = "positions"              # positions a RoPE scaling can stretch (--rope-scaling, --rope-factor)
    WEIGHTS_LAYOUT = "weights"           # weights held as stored or as float32 (--weights, $NLPKIT_WEIGHTS)
    KV_CACHE = "kv_cache"                # a KV cache decoding may go without (--no-kv-cache)
    CONTEXT_WINDOW = "context_window"    # a context that fills, and may slide (--sliding)
    PROMPT_TRUNCATION = "prompt_truncation"   # a prompt longer than the context, cut (--truncate-prompt)
    CHAT = "chat"                        # a chat template (--chat, --system, --messages)


@runtime_checkable
class LanguageModel(Protocol):
    """A language model of either kind: its identity, tokens and the requests every backend answers (see the
    module docstring); what only some backends do is a capability, declared by `capabilities`, with a protocol
    below."""

    # identity
    kind: str                             # "transformer" or "ngram": for messages and signatures only
    described: str                        # "an n-gram model": how messages name this kind
    name: str                             # as signatures name the model
    capabilities: frozenset[Capability]   # what it does beyond this protocol (the protocols below)
    why_not: Mapping[Capability, str]     # each capability it lacks -> why (a usage error's reason)
    spec: LoadSpec                        # how it was loaded
    worker_key: tuple                     # (loader, LoadSpec): the same model in a Dask worker

    def signature(self, command: str, settings: Mapping[str, Any], extra: Mapping[str, Any] = ...) -> str: ...

    def describe(self) -> ModelDescription: ...

    # tokens
    vocab_size: int
    prefix_id: int | None                 # the token a text's first token is predicted from
    token_unit: str                       # "tokens" or "words", as --stats counts them

    def require_tokenizer(self) -> Any: ...

    def encode(self, text: str) -> list[int]: ...

    def token_text(self, token_id: int) -> str: ...

    def token_bytes(self, token_id: int) -> bytes: ...

    # requests: rolling log-likelihood (one window at a time) and continuation scoring
    def logprobs(self, ids: Sequence[int], first: int) -> np.ndarray: ...

    def continuation_scorer(self, window: int | None = None, chat: bool = False,
                            system: str | None = None) -> ContinuationScorer: ...


class WindowScoring(Protocol):
    """`Capability.WINDOWS`: perplexity over context windows (`nlpkit.lm.perplexity.perplexity_run`)."""

    parallel_windows: bool                # True: `logprobs` releases the GIL, windows may run on threads

    def window_context(self, context: int | None) -> int: ...   # the window length in force, checked


class TokenLogits(Protocol):
    """`Capability.LOGITS`: a window's logits rows, what `perplexity --compare` compares."""

    def window_logits(self, ids: Sequence[int], first: int) -> Iterator[np.ndarray]: ...


class SentenceScoring(Protocol):
    """`Capability.SENTENCES`: each line scored as one sentence, the backend's own perplexity (KenLM query's)."""

    def sentence_perplexity(self, paths: Sequence[str], *, per_line: bool = False, per_token: bool = False,
                            errors: str = "strict") -> PerplexityRun: ...


class Decoder(Protocol):
    """`Capability.GENERATE`: a prompt, then the next-token logits of every row, one token per row at a time: what
    sampling and generation are built on."""

    context_length: int | None            # positions a prompt and its continuation may fill (None: no limit)

    def next_logits(self, prompt_ids: Sequence[int], context: int | None = None) -> np.ndarray: ...

    def prompt(self, text: str, *, max_new_tokens: int = 0, truncate: bool = False, chat: Any = None) -> Prompt: ...

    def start(self, prompt_ids: Sequence[int], rows: int = 1, *, use_cache: bool = True, sliding: bool = False,
              context: int | None = None, stats: Any = None) -> DecodingState: ...

    def text_stream(self, prompt: Prompt, stop: Sequence[str] = ()) -> TextStream: ...

    def end_ids(self, ignore_eos: bool, extra: Sequence[int] = ()) -> frozenset[int]: ...

    def decoding_batch(self, context: int | None = None) -> DecodingBatch: ...   # many sequences, one step for all

    def generation_prompt(self, text: str, max_new_tokens: int, window: int | None = None,
                          chat: bool = False) -> Prompt: ...            # a generation task's prompt (lm-eval's)

    def until_stream(self, prompt: Prompt, until: Sequence[str] = ()) -> Any: ...   # its stop test and text

    def sampling_defaults(self) -> tuple[dict, str | None]: ...

    def warm_up(self) -> float | None: ...


class DecodingBatch(Protocol):
    """Many sequences decoded together (`Decoder.decoding_batch`): `forks` says whether `fork` (a new sequence
    sharing a live one's prompt cache) is offered; `full` names the sequences whose last `step` found no room."""

    forks: bool
    full: Sequence

    def step(self, tokens: Sequence[int]) -> np.ndarray: ...   # [n] -> [n, V]
