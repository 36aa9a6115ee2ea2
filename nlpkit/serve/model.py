"""The served model: loaded by one function (`load_served_model`), and what the API asks of it: how it reads a prompt
(text or token ids), the text of a token, a chat conversation's prompt, the tokenizer's description.

A prompt is read as `nlpkit score` reads a context (`packed_scoring.tok_encode`): BOS first when the model's tokenizer
adds one. A prompt of token ids gets that BOS too when it does not start with it (lm-evaluation-harness's remote
tokenizer asks for ids without special tokens, then sends them back as the prompt: with the BOS added, the model
sees what lm-evaluation-harness's Hugging Face backend feeds it). A BOS the server adds is never echoed: the echoed
tokens are the client's, and the first of them has a log-probability (conditioned on the BOS).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from nlpkit.errors import NlpkitError, UsageError


@dataclass
class ModelInput:
    """A prompt as the model reads it: `ids` (the BOS the server added first, when `added`), and the prompt's own
    tokens (`shown`: `ids[added:]`, what echo returns)."""

    ids: list[int]
    added: int = 0

    @property
    def shown(self) -> list[int]:
        return self.ids[self.added:]


class ServedModel:
    """One loaded model and its exact continuation scorer (`lm`: the `LanguageModel`; `scorer`: its packed scorer,
    which scores token ids)."""

    def __init__(self, lm, scorer, name: str | None = None):
        self.lm = lm
        self.scorer = scorer
        self.engine_model = scorer.model
        self.tokenizer = lm.require_tokenizer()
        self.name = name or lm.name
        self.context = int(lm.context_length)
        self.specials = frozenset(self.tokenizer.special_tokens.values())

    # ------------------------------------------------------------------ prompts
    def bos(self) -> int | None:
        """The BOS id the model's tokenizer adds, or None when it adds none."""
        c = self.engine_model.config
        return c.bos_id if c.add_bos and c.bos_id is not None else None

    def read_text(self, text: str) -> ModelInput:
        """A text prompt as the model reads it (`nlpkit score`'s encoding: BOS first when the model adds one); an
        empty text is the prefix token (BOS, else EOS), as `generate` starts."""
        from nlpkit.lm.transformer.packed_scoring import tok_encode

        ids = tok_encode(self.engine_model, text)
        bos = self.bos()
        if not ids:
            return ModelInput(self.start_ids(), 1)
        return ModelInput(ids, 1 if bos is not None and ids[0] == bos and not self._starts_with_bos_text(text) else 0)

    def read_ids(self, ids: Sequence[int]) -> ModelInput:
        """A prompt of token ids: the BOS first when the model adds one and the ids do not start with it."""
        ids = [int(i) for i in ids]
        bos = self.bos()
        if not ids:
            return ModelInput(self.start_ids(), 1)
        if bos is not None and ids[0] != bos:
            return ModelInput([bos] + ids, 1)
        return ModelInput(ids, 0)

    def start_ids(self) -> list[int]:
        prefix = self.lm.prefix_id
        if prefix is None:
            raise NlpkitError("the prompt is empty and the model has no BOS (or EOS) token to start from")
        return [int(prefix)]

    def _starts_with_bos_text(self, text: str) -> bool:
        bos = self.engine_model.config.bos_id
        return bos is not None and text.startswith(self.tokenizer.decode([bos]))

    def tokenize(self, text: str, add_special_tokens: bool) -> list[int]:
        """`/tokenize`: the text's ids, special tokens written in it recognised; the BOS the model reads first
        with `add_special_tokens` (as lm-evaluation-harness's remote tokenizer and vLLM's endpoint)."""
        if add_special_tokens:
            from nlpkit.lm.transformer.packed_scoring import tok_encode

            return tok_encode(self.engine_model, text)
        return list(self.tokenizer.encode(text)) if text else []

    def check_ids(self, ids: Sequence[int]) -> None:
        """An id outside the vocabulary is the client's error (named)."""
        v = self.lm.vocab_size
        for i in ids:
            if not 0 <= i < v:
                raise UsageError(f"token id {i} is outside the vocabulary (0..{v - 1})")

    # ------------------------------------------------------------------ text
    def token_string(self, token_id: int) -> str:
        """How one token reads (a partial UTF-8 character as \\xNN escapes)."""
        return self.lm.token_text(int(token_id))

    def token_bytes(self, token_id: int) -> list[int]:
        return list(self.lm.token_bytes(int(token_id)))

    def decode(self, ids: Sequence[int], skip_special: bool = True) -> str:
        return self.tokenizer.decode([int(i) for i in ids], skip_special=skip_special)

    def end_ids(self, extra: Sequence[int] = ()) -> frozenset[int]:
        return self.lm.end_ids(False, extra)

    # ------------------------------------------------------------------ chat
    def chat_input(self, messages: list[dict]) -> tuple[ModelInput, tuple[int, ...]]:
        """A conversation rendered by the model's chat template, the generation prompt added (`nlpkit generate
        --chat`'s rendering); and the template's end-of-turn ids."""
        from nlpkit.lm.chat import ChatTemplate, end_of_turn_ids

        tpl = ChatTemplate.for_tokenizer(self.tokenizer, self.name)
        ids = tpl.encode(messages, self.tokenizer)
        if not ids:
            ids = self.start_ids()
        eos = getattr(self.engine_model.config, "eos_ids", ())
        return ModelInput(ids, 0), tuple(sorted(end_of_turn_ids(self.tokenizer, eos)))

    def tokenizer_info(self) -> dict:
        """`/tokenizer_info`, as lm-evaluation-harness's remote tokenizer reads it (`eos_token`, `bos_token`, ...)."""
        from nlpkit.lm.chat import special_token_variables

        info = dict(special_token_variables(self.tokenizer))
        template = getattr(self.tokenizer, "chat_template", None)
        if isinstance(template, dict):
            template = template.get("default")
        return {"eos_token": info.get("eos_token"), "bos_token": info.get("bos_token"),
                "pad_token": info.get("pad_token"), "unk_token": info.get("unk_token"),
                "chat_template": template, "model_max_length": self.context, "add_bos_token": self.bos() is not None,
                "vocab_size": self.lm.vocab_size, "tokenizer_class": "nlpkit"}


def load_served_model(spec, warn: Callable[[str], None] | None = None) -> ServedModel:
    """The model `spec` names (a `nlpkit.lm.spec.LoadSpec`, or a path) ready to serve: loaded behind
    `LanguageModel` (`nlpkit.lm.load`), its continuation scorer over the whole context (no window shorter than the
    model's: a prompt longer than the context is refused, never cut). The one place the server loads a model. A
    model whose scorer cannot score token ids (an n-gram model) is refused."""
    from nlpkit.lm.load import load_language_model
    from nlpkit.lm.transformer.packed_scoring import PackedScorer

    lm = load_language_model(spec, warn=warn)
    scorer = lm.continuation_scorer(int(lm.context_length)) if lm.context_length else None
    if not isinstance(scorer, PackedScorer):
        raise UsageError(f"serve needs a transformer model (a Hugging Face directory or a GGUF file); {lm.name} is "
                         f"{lm.described}")
    return ServedModel(lm, scorer)
