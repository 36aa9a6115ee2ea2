"""The transformer engine behind `nlpkit.lm.interface.LanguageModel`.

A thin adapter: tokenization is the model's own tokenizer, `logprobs` is one causal pass over a window
(`nlpkit.lm.perplexity.window_logprobs`), decoding prefills the prompt once and advances a KV cache
(`TransformerState`), and perplexity scores each text in the windows `--mode` chooses, with the columns
`nlpkit perplexity` has always printed for a neural model.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from nlpkit.errors import NlpkitError
from nlpkit.lm.interface import Capability, Prompt
from nlpkit.lm.spec import LoadSpec



def last_logits(model, tokens: np.ndarray, cache) -> np.ndarray:  # [b, t] -> [b, V]
    return model.forward(tokens, cache, last_only=True)[:, -1]


def prepare_prompt(model, prompt_ids: Sequence[int], *, max_new_tokens: int, truncate: bool = False,
                   context: int | None = None) -> list[int]:
    """Check the prompt against the context: an empty prompt becomes [BOS]; a prompt longer than the
    context is an error naming both lengths, unless `truncate` keeps its end (leaving room for
    `max_new_tokens` when it can)."""
    ids = [int(i) for i in prompt_ids]
    ctx = context or model.config.positions
    if not ids:
        start = model.config.bos_id if model.config.bos_id is not None else model.config.eos_id
        if start is None:
            raise NlpkitError("the prompt is empty and the model has no BOS (or EOS) token to start from")
        ids = [int(start)]
    if truncate:
        keep = max(1, min(len(ids), ctx - max_new_tokens))
        ids = ids[len(ids) - keep:]
    elif len(ids) > ctx:
        raise NlpkitError(f"the prompt is {len(ids)} tokens but the model's context is {ctx} tokens "
                          "(use `truncate_prompt` to keep the end of the prompt)")
    return ids


def encode_prompt(model, text: str) -> list[int]:
    """Tokenize a prompt the way the model's own tokenizer does (BOS first when the model adds one)."""
    tok = model.require_tokenizer()
    ids = list(tok.encode(text)) if text else []
    bos = model.config.bos_id
    if ids and model.config.add_bos and bos is not None and ids[0] != bos:
        ids = [bos] + ids
    return ids


def render_chat(model, text: str | None, system: str | None, messages_file: str | None) -> tuple[str, list[int]]:
    """(prompt text, end-of-turn ids): the conversation (`messages_file`, or `system` then `text` as the
    user message) rendered by the model's chat template with the generation prompt. The rendered text
    already holds the template's special tokens (BOS included, if any)."""
    from nlpkit.lm.chat import ChatTemplate, conversation, end_of_turn_ids, special_token_variables

    template = ChatTemplate.for_tokenizer(model.tokenizer, model.source or "model")
    if messages_file is not None:
        messages = conversation(None, system, messages_file)
        if text:
            messages.append({"role": "user", "content": text})
    else:
        messages = conversation(text, system, None)
    rendered = template.render(messages, special_token_variables(model.tokenizer))
    return rendered, end_of_turn_ids(model.tokenizer, model.config.eos_ids)


def generation_config(model) -> dict:
    """The model's generation_config.json ({} when it has none, e.g. a GGUF file)."""
    import json

    path = Path(model.source) / "generation_config.json" if model.source else None
    if path is None or not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise NlpkitError(f"{path}: not readable JSON ({e})") from None
    return data if isinstance(data, dict) else {}


class TransformerState:
    """`rows` continuations of one prompt: the prompt prefilled once with batch 1, its cache broadcast
    to the rows; with `sliding`, a full context forgets its oldest quarter instead of stopping."""

    def __init__(self, model, prompt_ids: Sequence[int], rows: int, *, use_cache: bool = True,
                 sliding: bool = False, context: int | None = None, stats=None):
        self.model, self.rows, self.sliding = model, rows, sliding
        self.ctx = context or model.config.positions
        self.stats = stats
        prompt = np.asarray(prompt_ids, dtype=np.int64)[None, :]  # [1, P]
        if prompt.shape[1] == 0:
            raise NlpkitError("decode needs at least one prompt token")
        if prompt.shape[1] > self.ctx:
            raise NlpkitError(f"the prompt is {prompt.shape[1]} tokens but the context is {self.ctx} tokens")
        if stats is not None:
            stats.prompt_tokens, stats.batch = prompt.shape[1], rows
        t0 = time.perf_counter()
        self.cache = model.new_cache(1, self.ctx) if use_cache else None
        logits = last_logits(model, prompt, self.cache)  # [1, V]
        self._logits = np.repeat(logits, rows, axis=0)  # [n, V]
        if self.cache is not None and rows > 1:
            self.cache = self.cache.broadcast(rows)
        self.tokens = np.repeat(prompt, rows, axis=0)  # [n, T] everything so far (no-cache path, --sliding)
        if stats is not None:
            stats.prefill_seconds += time.perf_counter() - t0

    def logits(self) -> np.ndarray:  # -> [n, V]
        return self._logits

    def advance(self, ids: np.ndarray) -> bool:  # [n] -> False when the context is full (and not sliding)
        model, cache, ctx = self.model, self.cache, self.ctx
        self.tokens = np.concatenate([self.tokens, ids[:, None]], axis=1)
        filled = cache.length if cache is not None else self.tokens.shape[1] - 1
        if filled >= ctx:  # no room for the token just chosen
            if not self.sliding:
                return False
            if cache is None:
                self._dropped(1)  # the recomputed window below starts one token later
            else:
                drop = max(1, ctx // 4)
                self._dropped(drop)
                if model.config.uses_rope:
                    cache.drop_oldest(drop)  # kept keys keep their RoPE angles; new positions continue
                else:  # learned positions cannot continue past their table: re-prefill the kept window
                    cache.reset()
                    model.forward(self.tokens[:, -(ctx - drop):-1], cache, last_only=True)
        if cache is not None:
            self._logits = last_logits(model, ids[:, None], cache)  # [n, V]
        else:
            self._logits = last_logits(model, self.tokens[:, -ctx:], None)  # [n, V], full recompute
        return True

    def _dropped(self, k: int) -> None:
        if self.stats is not None:
            self.stats.context_dropped += k


class TransformerLM:
    """A loaded `Model` (Hugging Face directory or GGUF file) as a `LanguageModel`."""

    kind = "transformer"
    token_unit = "tokens"
    capabilities = frozenset(Capability) - {Capability.SENTENCES}   # windows, logits, decoding, RoPE, layouts, chat
    why_not: Mapping[Capability, str] = {
        Capability.SENTENCES: "it scores windows of tokens, not a line as one sentence"}

    described = "a transformer model"

    def __init__(self, model, spec: LoadSpec | None = None):
        self.model = model
        self.spec = spec if spec is not None else LoadSpec(model.source)   # how it was loaded

    @classmethod
    def load(cls, spec: LoadSpec, *, warn: Callable[[str], None] | None = None) -> "TransformerLM":
        """The engine `Model` `spec` names, loaded as it says (path, weights layout and purpose, RoPE, cache)."""
        from nlpkit.lm.transformer.loaders import load_model

        return cls(load_model(spec.path, rope_scaling=spec.rope_scaling, rope_factor=spec.rope_factor,
                              use_cache=spec.use_cache, weights=spec.weights, purpose=spec.purpose, warn=warn), spec)

    def require_tokenizer(self):
        return self.model.require_tokenizer()

    def continuation_scorer(self, window: int | None = None, chat: bool = False, system: str | None = None):
        """Continuation scoring (`nlpkit score`): a `packed_scoring.PackedScorer` on this model, lm-evaluation-
        harness's encoding and truncation at `window` tokens [the trained positions]; with `chat`, contexts
        rendered as a user turn by the model's chat template (`system` first)."""
        from nlpkit.errors import UsageError
        from nlpkit.lm.transformer.packed_scoring import PackedScorer, chat_renderer

        self.model.require_tokenizer()
        if window is not None and window > self.model.config.positions:
            raise UsageError(f"`window` {window} exceeds the {self.model.config.positions} positions of "
                             f"{self.model.source or 'the model'}")
        return PackedScorer(self.model, window, chat_renderer(self.model, system) if chat else None)

    @property
    def context_length(self) -> int:
        """Positions the model can attend to (trained, or scaled by RoPE scaling)."""
        return self.model.config.positions

    # ------------------------------------------------------------------ identity
    @property
    def name(self) -> str:
        """`default` for the shipped model, else the file or directory name."""
        from nlpkit.lm.transformer.loaders import DEFAULT_MODEL_DIR

        src = Path(self.model.source) if self.model.source else None
        if src is None or src.resolve() == DEFAULT_MODEL_DIR.resolve():
            return "default"
        return src.name

    @property
    def rope_label(self) -> str:
        """`none`, `learned` (gpt2), or `<type>x<factor>` (e.g. `yarnx2.0`)."""
        c = self.model.config
        if not c.uses_rope:
            return "learned"
        scaling = c.rope_scaling or {}
        kind = scaling.get("rope_type", "none")
        factor = scaling.get("factor")      # a longrope GGUF carries its factors, not this one
        return kind if kind == "none" or factor is None else f"{kind}x{factor}"

    def signature(self, command: str, settings: Mapping[str, Any], extra: Mapping[str, Any] = {}) -> str:
        from nlpkit.signature import make_signature

        return make_signature(command, model=self.name, **settings, rope=self.rope_label, **extra)

    def describe(self):
        """The model as `--verbose` names it: its family, parameters (implied by its shapes), the weights' layout
        and why (the loader's choice), their bytes as held, the forward's threads and what the cache did."""
        import dataclasses

        from nlpkit.lm.interface import ModelDescription
        from nlpkit.lm.threads import workers

        m = self.model
        arrays = [getattr(obj, f.name) for obj in [m.weights, *m.weights.layers] for f in dataclasses.fields(obj)
                  if f.name != "layers"]   # float32 arrays, or StoredMatrix (native): both have nbytes
        held = sum(int(w.nbytes) for w in arrays if w is not None)
        layout, why = m.weights_layout
        return ModelDescription(self.name, m.config.family or m.config.arch, m.config.n_params, "parameters", held,
                                layout, why, workers(), m.weights_cache)

    # ------------------------------------------------------------------ tokens
    @property
    def vocab_size(self) -> int:
        return self.model.config.vocab_size

    @property
    def prefix_id(self) -> int | None:
        from nlpkit.lm.transformer.conventions import prefix_token

        return prefix_token(self.model.config)

    def encode(self, text: str) -> list[int]:
        return list(self.model.require_tokenizer().encode(text))

    def token_text(self, token_id: int) -> str:
        """How one token reads: its bytes as UTF-8, a partial character shown as \\xNN escapes."""
        return self.token_bytes(token_id).decode("utf-8", errors="backslashreplace")

    def token_bytes(self, token_id: int) -> bytes:
        """One token's bytes (a piece of a UTF-8 character, for a byte-level tokenizer)."""
        return self.model.tokenizer.decode_bytes([token_id])

    # ------------------------------------------------------------------ scoring
    def logprobs(self, ids: Sequence[int], first: int) -> np.ndarray:  # [t] -> [t - first]
        from nlpkit.lm.transformer.window_forward import window_logprobs

        return window_logprobs(self.model, list(ids), first)

    def window_logits(self, ids: Sequence[int], first: int) -> Iterator[np.ndarray]:  # [t] -> chunks of [n, V]
        """The logits rows `logprobs(ids, first)` scores, a chunk at a time (`perplexity --compare`)."""
        from nlpkit.lm.transformer.window_forward import window_logits

        return window_logits(self.model, list(ids), first)

    @property
    def parallel_windows(self) -> bool:
        """A window's forward releases the GIL: perplexity runs windows on threads (float32 weights, and native
        weights whose layer scratch is small: each forward expands into its own; a large one's windows run one
        at a time, row-parallel: `Model.parallel_windows`)."""
        return self.model.parallel_windows

    @property
    def worker_key(self) -> tuple:
        """How a Dask worker loads the same model (`nlpkit.lm.spec.cached_model(*worker_key)`): the loader and this
        model's `LoadSpec` with its absolute path (workers have their own cwd), the same layout and options."""
        import dataclasses

        return (TransformerLM.load, dataclasses.replace(self.spec, path=os.path.abspath(str(self.model.source))))

    def next_logits(self, prompt_ids: Sequence[int], context: int | None = None) -> np.ndarray:  # [P] -> [V]
        ctx = context or self.model.config.positions
        prompt = np.asarray(prompt_ids, dtype=np.int64)[None, :]
        cache = self.model.new_cache(1, max(ctx, prompt.shape[1]))
        return last_logits(self.model, prompt, cache)[0]

    # ------------------------------------------------------------------ decoding
    def sampling_defaults(self) -> tuple[dict, str | None]:
        """The model's sampling settings (its generation_config.json, else llama.cpp's), and the file
        they came from (named when one of them is invalid)."""
        from nlpkit.lm.transformer.conventions import sampling_defaults

        base, _ = sampling_defaults(generation_config(self.model))
        return base, f"{self.model.source}/generation_config.json"

    def prompt(self, text: str, *, max_new_tokens: int = 0, truncate: bool = False, chat=None) -> Prompt:
        """The prompt's ids, checked against the context (`prepare_prompt`). `chat` = (system, messages
        file): `text` becomes the last user message of a conversation rendered by the model's chat
        template (its special tokens recognised, no BOS added again), ended by its end-of-turn ids."""
        model = self.model
        if chat is None:
            full, end = encode_prompt(model, text), ()
        else:
            rendered, end = render_chat(model, text, *chat)
            full = model.tokenizer.encode(rendered, allowed_special="all", add_special=False)
        ids = prepare_prompt(model, full, max_new_tokens=max_new_tokens, truncate=truncate)
        echo = text if chat is None else model.tokenizer.decode(ids)   # with --chat: what the model sees
        return Prompt(ids, end_ids=tuple(end), echo=echo, full_length=len(full))

    def warm_up(self) -> float:
        """One throwaway 1-token forward pass (touches every weight: page-ins, thread pools), timed, so
        --stats does not count start-up work as prefill."""
        model = self.model
        t0 = time.perf_counter()
        start = model.config.bos_id if model.config.bos_id is not None else 0
        model.forward(np.array([[start]], dtype=np.int64), model.new_cache(1, 8), last_only=True)
        return time.perf_counter() - t0

    def start(self, prompt_ids: Sequence[int], rows: int = 1, *, use_cache: bool = True, sliding: bool = False,
              context: int | None = None, stats=None) -> TransformerState:
        return TransformerState(self.model, prompt_ids, rows, use_cache=use_cache, sliding=sliding,
                                context=context, stats=stats)

    def decoding_batch(self, context: int | None = None):
        """Many sequences decoded together (`batch_decoding.DecodingBatch`: one forward per step for all); a
        longrope model one state per sequence (`nlpkit.lm.decoding.StateBatch`)."""
        from nlpkit.lm.decoding import StateBatch
        from nlpkit.lm.transformer.batch_decoding import DecodingBatch, supports_batching

        return DecodingBatch(self.model, context) if supports_batching(self.model) else StateBatch(self, context)

    def generation_prompt(self, text: str, max_new_tokens: int, window: int | None = None,
                          chat: bool = False) -> Prompt:
        """A generation task's prompt as lm-evaluation-harness's `generate_until` encodes it: the context's last
        `window - max_new_tokens` tokens (`stop_strings.generation_prompt`)."""
        from nlpkit.lm.transformer.stop_strings import generation_prompt

        self.model.require_tokenizer()
        return generation_prompt(self.model, text, max_new_tokens, window, chat)

    def until_stream(self, prompt: Prompt, until: Sequence[str] = ()):
        """A generation task's stop test and text, as lm-evaluation-harness's HF backend (`stop_strings.UntilStream`:
        the decoded tail holds a stop string; the text decoded without special tokens, cut at the stops)."""
        from nlpkit.lm.transformer.stop_strings import UntilStream

        return UntilStream(self.model, until)

    def end_ids(self, ignore_eos: bool, extra: Sequence[int] = ()) -> frozenset[int]:
        """The model's EOS (every id of a list), plus `extra` (a chat template's end-of-turn tokens);
        none with `ignore_eos`."""
        if ignore_eos:
            return frozenset()
        model = self.model
        eos = model.config.eos_id
        if eos is None and model.tokenizer is not None:
            eos = model.tokenizer.eos_id
        ids = {*model.config.eos_ids, *extra}
        if eos is not None:
            ids.add(eos)
        return frozenset(ids)

    def text_stream(self, prompt: Prompt | None = None, stop: Sequence[str] = ()):
        from nlpkit.lm.transformer.text_stream import TokenTextStream

        return TokenTextStream(self.model.tokenizer, stop) if self.model.tokenizer is not None else None

    # ------------------------------------------------------------------ perplexity
    def window_context(self, context: int | None) -> int:
        """The window length perplexity uses: `context`, else the model's (at most 1024), checked
        against the model's positions."""
        from nlpkit.lm.transformer.conventions import check_context, default_context

        ctx = context or default_context(self.model)
        check_context(self.model, ctx)
        return ctx
