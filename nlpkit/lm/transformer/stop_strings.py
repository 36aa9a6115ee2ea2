"""Prompts and stop strings of a generation task as lm-evaluation-harness's Hugging Face backend makes them
(`HFLM.generate_until`, `tok_batch_encode`, `MultiTokenEOSCriteria`, `postprocess_generated_text`), for the transformer
engine (`TransformerLM.generation_prompt`, `TransformerLM.until_stream`).

- The context is encoded with the model's own tokenizer (BOS first when it adds one, unless the text starts with
  it: `packed_scoring.tok_encode`, the same encoding as a loglikelihood context) and keeps its last
  `window - max_new_tokens` tokens (`max_ctx_len`); an empty context is the prefix token.
- After each new token, each stop string is looked for in the decoded last (its own token count + 2) generated
  tokens, special tokens shown; the end-of-sequence token's text is a stop string too (lm-evaluation-harness adds
  it to `until`).
- The text is the generated tokens decoded without special tokens, cut before the first occurrence of each stop
  string in turn.
"""

from __future__ import annotations

from typing import Sequence

from nlpkit.errors import NlpkitError
from nlpkit.lm.interface import Prompt


def generation_prompt_ids(model, text: str, max_new_tokens: int, window: int | None = None) -> list[int]:
    """The context's ids as lm-evaluation-harness's `generate_until` feeds them (see the module docstring)."""
    return _context_ids(model, text, max_new_tokens, window)[0]


def _context_ids(model, text: str, max_new_tokens: int, window: int | None = None) -> tuple[list[int], int]:
    """(the context's ids as `generate_until` feeds them, its token count before the cut)."""
    from nlpkit.lm.transformer.packed_scoring import tok_encode

    window = window or model.config.positions
    full = tok_encode(model, text)
    ids = full[-(window - max_new_tokens):]
    if not ids:  # an empty context: the prefix token, as `generate` starts
        start = model.config.bos_id if model.config.bos_id is not None else model.config.eos_id
        if start is None:
            raise NlpkitError("the context is empty and the model has no BOS (or EOS) token to start from")
        ids = [int(start)]
    return ids, len(full)


def eos_text(model) -> str | None:
    """The end-of-sequence token's text, or None when the model has none."""
    eos = model.config.eos_id
    if eos is None:
        eos = model.tokenizer.eos_id
    return None if eos is None else model.tokenizer.decode([int(eos)])


class TailStops:
    """lm-evaluation-harness's `MultiTokenEOSCriteria` for one sequence: `push(id)` is True once a stop string is in
    the decoded tail of the generated tokens (its token count + 2 of them, special tokens shown)."""

    def __init__(self, tokenizer, stops: Sequence[str]):
        self.tokenizer = tokenizer
        self.stops = [(s, len(tokenizer.encode(s, add_special=False)) + 2) for s in stops if s]
        self.ids: list[int] = []

    def push(self, token_id: int) -> bool:
        self.ids.append(int(token_id))
        for s, k in self.stops:
            if s in self.tokenizer.decode(self.ids[-k:]):
                return True
        return False


def cut_at_stops(text: str, stops: Sequence[str]) -> str:
    """The text before the first occurrence of each stop string in turn (lm-evaluation-harness's post-hoc cut:
    `s.split(term)[0]` for each non-empty term).

    >>> cut_at_stops("4\\n\\nQ: next", ["\\n\\n", "Q:"])
    '4'
    """
    for s in stops:
        if s:
            text = text.split(s)[0]
    return text


class UntilStream:
    """One sequence's stop test and text (`push(id)` -> True at a stop string; `text(ids)` the generation)."""

    def __init__(self, model, until: Sequence[str]):
        eos = eos_text(model)
        self.stops = list(until) + ([eos] if eos and eos not in until else [])
        self.tokenizer = model.tokenizer
        self.tail = TailStops(model.tokenizer, self.stops)

    def push(self, token_id: int) -> bool:
        return self.tail.push(token_id)

    def text(self, ids: Sequence[int]) -> str:
        return cut_at_stops(self.tokenizer.decode(list(ids), skip_special=True), self.stops)


def generation_prompt(model, text: str, max_new_tokens: int, window: int | None = None,
                      chat: bool = False) -> Prompt:
    """A `Prompt` of the ids above; with `chat` (the text a rendered chat turn), the template's end of turn ends
    the continuation too."""
    end: tuple[int, ...] = ()
    if chat:
        from nlpkit.lm.chat import end_of_turn_ids

        end = tuple(sorted(end_of_turn_ids(model.tokenizer, model.config.eos_ids)))
    ids, full = _context_ids(model, text, max_new_tokens, window)
    return Prompt(ids, end_ids=end, echo=text, full_length=full if full > len(ids) else 0)
