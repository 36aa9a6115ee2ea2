"""Chat templates: a conversation -> the prompt text an instruct model was trained on -> ids.

The template is the model's own (chat_template.jinja beside it, tokenizer_config.json's
chat_template -- a string or a list of named templates -- or the GGUF's tokenizer.chat_template),
rendered with jinja2 exactly as transformers' ``apply_chat_template`` does: an immutable sandboxed
environment with trim_blocks, lstrip_blocks and the loop-controls extension; ``raise_exception``,
``strftime_now`` and a ``tojson`` that does not escape non-ASCII; the special tokens (``bos_token``,
``eos_token``, ...) as variables; the generation prompt added. The rendered text is encoded without
adding special tokens again, the special tokens written in it recognised.

    >>> tpl = ChatTemplate.for_tokenizer(tok)                                   # doctest: +SKIP
    >>> tpl.encode([{"role": "user", "content": "What is the capital of France?"}], tok)   # doctest: +SKIP
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from nlpkit.errors import NlpkitError, UsageError

#: End-of-turn tokens of common templates: generation stops at any of these that is a special token.
END_OF_TURN = ("<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>")


class ChatTemplate:
    """One jinja chat template, compiled as transformers compiles it."""

    def __init__(self, source: str, where: str = "chat template") -> None:
        self.source = source
        self.where = where
        try:
            import jinja2
            import jinja2.ext
            from jinja2.sandbox import ImmutableSandboxedEnvironment
        except ImportError:
            raise NlpkitError("chat templates need jinja2: pip install jinja2") from None
        self._jinja2 = jinja2

        def raise_exception(message):
            raise jinja2.exceptions.TemplateError(message)

        def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
            return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

        def strftime_now(fmt):
            from datetime import datetime
            return datetime.now().strftime(fmt)

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                            extensions=[jinja2.ext.loopcontrols])
        env.filters["tojson"] = tojson
        env.globals["raise_exception"] = raise_exception
        env.globals["strftime_now"] = strftime_now
        try:
            self._template = env.from_string(source)
        except jinja2.exceptions.TemplateSyntaxError as e:
            raise NlpkitError(f"{where}: the chat template does not parse (line {e.lineno}: {e.message})") from None

    @classmethod
    def for_tokenizer(cls, tok, where: str = "model", name: str | None = None) -> "ChatTemplate":
        """The tokenizer's own template (`name` picks one of several named templates; else "default")."""
        template = tok.chat_template
        if template is None:
            raise UsageError(f"{where}: the model has no chat template (no chat_template.jinja, no chat_template in "
                              "tokenizer_config.json, no tokenizer.chat_template in the GGUF); give a plain prompt "
                              "without `chat`")
        if isinstance(template, dict):
            pick = name or "default"
            if pick not in template:
                raise UsageError(f"{where}: no chat template named {pick!r} (it has {', '.join(sorted(template))})")
            template = template[pick]
        return cls(template, where)

    def render(self, messages: Sequence[dict], variables: dict[str, Any] | None = None,
               add_generation_prompt: bool = True) -> str:
        """The prompt text of `messages` ({role, content} dicts), generation prompt added."""
        try:
            return self._template.render(messages=list(messages), tools=None, documents=None,
                                         add_generation_prompt=add_generation_prompt, **(variables or {}))
        except self._jinja2.exceptions.TemplateError as e:
            raise NlpkitError(f"{self.where}: the chat template raised an error: {e}") from None
        except Exception as e:  # a template bug (a missing key, a bad operand...): the template's, not ours
            raise NlpkitError(f"{self.where}: the chat template failed: {type(e).__name__}: {e}") from None

    def encode(self, messages: Sequence[dict], tok) -> list[int]:
        """Ids of the rendered prompt: special tokens in it recognised, none added."""
        return tok.encode(self.render(messages, special_token_variables(tok)), allowed_special="all",
                          add_special=False)

    @staticmethod
    def system(text: str | None) -> list[dict]:
        """[] or the one system message."""
        return [] if text is None else [{"role": "system", "content": text}]


def special_token_variables(tok) -> dict[str, str]:
    """bos_token, eos_token, unk_token as templates see them (when the tokenizer knows them; an nlpkit `Tokenizer`
    has no pad token)."""
    out = {}
    for name, i in (("bos", tok.bos_id), ("eos", tok.eos_id)):
        text = tok.id_to_token(i) if isinstance(i, int) else None
        if text is not None:
            out[f"{name}_token"] = text
    if tok.unk_token is not None:
        out["unk_token"] = tok.unk_token
    return out


def end_of_turn_ids(tok, eos_ids: Sequence[int] = ()) -> set[int]:
    """Ids generation stops at in a chat: the model's EOS id(s) and the template's end-of-turn tokens."""
    ids = {i for i in eos_ids if isinstance(i, int)}
    if isinstance(tok.eos_id, int):
        ids.add(tok.eos_id)
    for t in END_OF_TURN:
        i = tok.special_tokens.get(t)
        if i is not None:
            ids.add(i)
    return ids


def read_messages(path: str) -> list[dict]:
    """A JSON file holding a list of {"role": str, "content": str}; a clear error otherwise."""
    from nlpkit.io import read_text

    where = "<stdin>" if path == "-" else path
    text = read_text(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise NlpkitError(f"{where}: `messages_file` is not valid JSON ({e})") from None
    if not isinstance(data, list) or not data:
        raise NlpkitError(f"{where}: `messages_file` must be a non-empty JSON list of {{\"role\": ..., \"content\": ...}}")
    for k, m in enumerate(data):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
            raise NlpkitError(f"{where}: message {k + 1} must be an object with string \"role\" and \"content\", "
                              f"got {json.dumps(m, ensure_ascii=False)[:80]}")
    return data


def conversation(prompt: str | None, system: str | None, messages_file: str | Path | None) -> list[dict]:
    """The messages of --chat: --messages FILE, else [system,] user PROMPT."""
    if messages_file is not None:
        messages = read_messages(str(messages_file))
        return ChatTemplate.system(system) + messages if system is not None else messages
    return ChatTemplate.system(system) + [{"role": "user", "content": prompt or ""}]
