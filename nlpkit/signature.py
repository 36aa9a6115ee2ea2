"""Settings signatures, sacrebleu style: every result says how it was computed.

>>> make_signature("bm25", variant="lucene", k1=1.2, b=0.75)
'bm25|variant:lucene|k1:1.2|b:0.75|v:0.2.0'

Two runs with the same signature and the same input give the same numbers.
"""

from __future__ import annotations

from typing import Sequence

from nlpkit import __version__


def _fmt(value: object) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ",".join(_fmt(v) for v in value)
    return str(value)


def make_signature(name: str, **settings: object) -> str:
    """`name|key:value|...|v:<nlpkit version>`; keys keep the order given; None prints as `none`."""
    parts = [name] + [f"{k.replace('_', '-')}:{_fmt(v)}" for k, v in settings.items()]
    parts.append(f"v:{__version__}")
    return "|".join(parts)


def text_hash(text: str | Sequence[str] | None) -> str | None:
    """A text setting as a signature records it (a --system message, stop strings, a regular expression):
    sha256's first 12 hex digits, so that runs with different texts never share a signature and the signature
    stays one line (lm-evaluation-harness records `system_instruction_sha`). A list of texts is hashed as its JSON
    array (order kept: `["a", "b"]` and `["ab"]` differ). None stays None.

    >>> text_hash("You are terse.")
    'sha256-97dd3b604bbd'
    """
    import hashlib
    import json

    if text is None:
        return None
    if not isinstance(text, str):
        text = json.dumps(list(text), ensure_ascii=True)
    return "sha256-" + hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:12]
