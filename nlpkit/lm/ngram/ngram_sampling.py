"""An n-gram model's side of sampling: the prompt as a sentence start, next-word logits, words to text.

The prompt is the start of a sentence: ``<s>`` then its words (after the model's lowercasing /
tokenizer). Each step turns log10 p(w | history) over the vocabulary into logits (natural log);
the filters (repetition penalty -> temperature -> top-k -> top-p -> min-p) and the draw are the
neural models' own (`nlpkit.lm.generation`, through `nlpkit.lm.ngram.ngram_lm.NgramLM`). ``<s>`` and
``<unk>`` are never drawn; ``</s>`` ends the text (finish "eos"), or with `ignore_eos` ends the line
and starts a new sentence. Words are joined by single spaces. Where an MLE model never saw the
history (every word has probability 0), the history is shortened from the left until it was seen,
as NLTK's ``generate`` does.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from nlpkit.lm.ngram.line_scoring import query_words
from nlpkit.lm.ngram.ngram_model import NgramModel

LN10 = math.log(10.0)


def prompt_history(model: NgramModel, text: str, transform: Callable[[str], str] | None = None) -> list[int]:
    """``<s>`` and the ids of the prompt's words (OOV -> <unk>)."""
    words = query_words(transform(text) if transform else text)
    ids, _ = model.lookup(words)
    return [model.bos_id] + ids.tolist()


def next_logits(model: NgramModel, history: list[int]) -> np.ndarray:  # -> [V] float64
    """Natural-log scores of the next word, <s> and <unk> excluded. A history an MLE model never saw
    gives every word probability 0: its oldest word is dropped until one is left that was seen (the
    unigrams at the end), as NLTK's ``LanguageModel.generate`` backs off."""
    hist = list(history)[-(model.order - 1):] if model.order > 1 else []
    while True:
        out = model.next_log10(hist) * LN10             # float64: the filters keep it (process_logits)
        out[model.bos_id] = -np.inf
        if model.unk_id >= 0:
            out[model.unk_id] = -np.inf
        if not hist or np.isfinite(out).any():
            return out
        hist = hist[1:]


def prompt_lead(prompt: str | None, detok=None) -> str:
    """What goes between a prompt and the first word drawn: a space, unless the prompt ends in one
    (or BPE pieces are joined by their own tokenizer, `detok`)."""
    return " " if prompt and not prompt[-1].isspace() and detok is None else ""


def join_words(words: list[str], lead: str = "", detok: Callable[[list[str]], str] | None = None) -> str:
    """The text of the words drawn: `lead` before the first (unless it is a line break), words joined
    by single spaces (or by the BPE tokenizer, `detok`), "\\n" (a sentence end) as a line break."""
    start = lead if words and words[0] != "\n" else ""
    if detok is not None:
        return start + detok(words)
    out = []
    for w in words:
        if w == "\n":
            out.append("\n")
        else:
            out.append(w if not out or out[-1] == "\n" else " " + w)
    return start + "".join(out)


__all__ = ["prompt_history", "prompt_lead", "next_logits", "join_words"]
