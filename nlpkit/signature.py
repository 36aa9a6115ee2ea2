"""Settings signatures, sacrebleu style: every result says how it was computed.

>>> make_signature("bm25", variant="lucene", k1=1.2, b=0.75)
'bm25|variant:lucene|k1:1.2|b:0.75|v:0.2.0'

Two runs with the same signature and the same input give the same numbers.
"""

from __future__ import annotations

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
