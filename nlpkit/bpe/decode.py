"""Decoders: token ids back to text, for byte-level BPE and SentencePiece-style BPE (HF ``decoders``).

A decoder is a list of plain steps, as HF writes them: byte-level BPE has ``[("byte_level",)]``
(or nothing); SentencePiece-style BPE has ``[("replace", "▁", " "), ("byte_fallback",), ("fuse",),
("strip", " ", 1, 0)]`` or ``[("metaspace", "▁", "first")]``. `Decoder` turns them into what the
tokenizer needs: the bytes of each token and how many leading spaces to drop from the whole text.

    >>> d = Decoder([("replace", "▁", " "), ("byte_fallback",), ("fuse",), ("strip", " ", 1, 0)])
    >>> d.token_bytes("▁hello"), d.token_bytes("<0x0A>"), d.strip_start
    (b' hello', b'\\n', 1)
"""

from __future__ import annotations

from typing import Sequence

import regex

from nlpkit.bpe.pretokenize import BYTE_DECODER
from nlpkit.errors import NlpkitError

STEP_KINDS = ("byte_level", "replace", "byte_fallback", "fuse", "strip", "metaspace")
_BYTE_TOKEN = regex.compile(r"<0x([0-9A-Fa-f]{2})>")
_TO_LATIN1 = {ord(c): b for c, b in BYTE_DECODER.items()}
_DROP_ALPHABET = {ord(c): None for c in BYTE_DECODER}


def byte_fallback_value(token: str) -> int | None:
    """The byte a ``<0xAB>`` byte-fallback token stands for, else None: '<0x0A>' -> 10."""
    m = _BYTE_TOKEN.fullmatch(token) if len(token) == 6 else None
    return int(m.group(1), 16) if m else None


def byte_level_bytes(token: str) -> bytes:
    """Raw bytes a byte-level token stands for ('Ġhi' -> b' hi'), or the UTF-8 of the token itself
    when it uses characters outside the byte alphabet (as HF's ByteLevel decoder)."""
    if token.translate(_DROP_ALPHABET):
        return token.encode("utf-8")
    return token.translate(_TO_LATIN1).encode("latin-1")


class Decoder:
    """Plain decoder steps -> per-token bytes, byte-fallback handling and leading-space strip."""

    def __init__(self, steps: Sequence[Sequence] = ()) -> None:
        self.steps = [tuple(s) for s in steps]
        kinds = [s[0] for s in self.steps]
        for k in kinds:
            if k not in STEP_KINDS:
                raise NlpkitError(f"decoder {k!r} is not supported ({', '.join(STEP_KINDS)})")
        self.byte_level = not kinds or "byte_level" in kinds
        self.byte_fallback = "byte_fallback" in kinds
        self.replacements = [(s[1], s[2]) for s in self.steps if s[0] == "replace"]
        self.replacements += [(s[1], " ") for s in self.steps if s[0] == "metaspace"]
        self.strip_start = sum(s[2] for s in self.steps if s[0] == "strip" and s[1] == " ")
        self.strip_start += sum(1 for s in self.steps if s[0] == "metaspace" and s[2] != "never")

    def token_bytes(self, token: str) -> bytes:
        """The bytes one token contributes to the text."""
        if self.byte_level:
            return byte_level_bytes(token)
        if self.byte_fallback:
            b = byte_fallback_value(token)
            if b is not None:
                return bytes((b,))
        for old, new in self.replacements:
            token = token.replace(old, new)
        return token.encode("utf-8")

    def text(self, pieces: list[bytes], is_byte: list[bool]) -> str:
        """The text of a sequence of token bytes: runs of byte-fallback tokens decode together and,
        when not valid UTF-8, give one U+FFFD per byte (HF ByteFallback); the rest is UTF-8 with
        U+FFFD for invalid sequences; then `strip_start` leading spaces are dropped."""
        if self.byte_level or not self.byte_fallback:
            out = b"".join(pieces).decode("utf-8", errors="replace")
        else:
            parts: list[str] = []
            run: list[bytes] = []
            for b, fallback in zip(pieces, is_byte):
                if fallback:
                    run.append(b)
                    continue
                if run:
                    parts.append(_run_text(run))
                    run = []
                parts.append(b.decode("utf-8", errors="replace"))
            if run:
                parts.append(_run_text(run))
            out = "".join(parts)
        n = self.strip_start
        while n and out.startswith(" "):
            out, n = out[1:], n - 1
        return out

    @property
    def name(self) -> str:
        return "byte_level" if self.byte_level else "+".join(s[0] for s in self.steps)


def _run_text(run: list[bytes]) -> str:
    data = b"".join(run)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return "\ufffd" * len(data)
