"""Normalizers: the text rewriting a tokenizer does before it splits (HF ``normalizers``).

A normalizer is a list of plain steps, applied in order to each stretch of text between
added tokens (HF normalizes each such segment on its own, so ``Prepend`` marks each one):

    >>> Normalizer([("prepend", "▁"), ("replace", " ", "▁", False)])("hello world")
    '▁hello▁world'
    >>> Normalizer([("nfc",)])("e\\u0301") == "\\u00e9"
    True
"""

from __future__ import annotations

import unicodedata
from typing import Callable, Sequence

import regex

from nlpkit.errors import NlpkitError

#: Step kinds and what each takes: ("nfc",), ("prepend", text), ("replace", pattern, content, is_regex),
#: ("lowercase",), ("strip", left, right), ("strip_accents",), ("precompiled", base64 charsmap) (sentencepiece's
#: compiled normalization rules, see nlpkit.bpe.precompiled).
STEP_KINDS = ("nfc", "nfd", "nfkc", "nfkd", "prepend", "replace", "lowercase", "strip", "strip_accents",
              "precompiled")


#: Characters whose decompositions Unicode added after the tables HF tokenizers normalizes with
#: (unicode-normalization-alignments, before Unicode 12); HF leaves them unchanged, and so do we.
_COMPAT_NEWER = "\u32ff\ua7f2-\ua7f4\uab69\U00010781-\U00010785\U00010787-\U000107b0\U000107b2-\U000107ba" \
                "\U0001f16c\U0001fbf0-\U0001fbf9"
_CANON_NEWER = "\U00011938"
_KEEP = {"nfc": None, "nfd": _CANON_NEWER, "nfkc": _COMPAT_NEWER, "nfkd": _COMPAT_NEWER + _CANON_NEWER}


def _unicode_form(kind: str) -> Callable[[str], str]:
    """unicodedata.normalize, leaving alone the characters HF's older tables do not decompose."""
    form = kind.upper()
    if _KEEP[kind] is None:
        return lambda s: unicodedata.normalize(form, s)
    keep = regex.compile(f"([{_KEEP[kind]}])")

    def normalize(s: str) -> str:
        if s.isascii() or not keep.search(s):
            return unicodedata.normalize(form, s)
        return "".join(p if k % 2 else unicodedata.normalize(form, p) for k, p in enumerate(keep.split(s)))
    return normalize


def _step(step: Sequence) -> Callable[[str], str]:
    kind = step[0]
    if kind in ("nfc", "nfd", "nfkc", "nfkd"):
        return _unicode_form(kind)
    if kind == "prepend":
        prefix = step[1]
        return lambda s: prefix + s if s else s
    if kind == "replace":
        pattern, content, is_regex = step[1], step[2], step[3] if len(step) > 3 else False
        if is_regex:
            compiled = regex.compile(pattern)
            return lambda s: compiled.sub(content.replace("\\", "\\\\"), s)
        return lambda s: s.replace(pattern, content)
    if kind == "lowercase":
        return str.lower
    if kind == "strip":
        left, right = step[1], step[2]
        return lambda s: (s.lstrip() if left else s).rstrip() if right else (s.lstrip() if left else s)
    if kind == "precompiled":
        from nlpkit.bpe.precompiled import from_base64
        return from_base64(step[1])
    if kind == "strip_accents":
        return lambda s: "".join(c for c in s if not unicodedata.combining(c))
    raise NlpkitError(f"normalizer step {kind!r} is not supported ({', '.join(STEP_KINDS)})")


class Normalizer:
    """A sequence of normalizer steps, callable on a string; ``steps`` are plain tuples."""

    def __init__(self, steps: Sequence[Sequence] = ()) -> None:
        self.steps = [tuple(s) for s in steps]
        self._fns = [_step(s) for s in self.steps]

    def __bool__(self) -> bool:
        return bool(self.steps)

    def __call__(self, text: str) -> str:
        for fn in self._fns:
            text = fn(text)
        return text

    @property
    def name(self) -> str:
        """Short name for signatures: nfc+prepend+replace, or none."""
        return "+".join(s[0] for s in self.steps) or "none"
