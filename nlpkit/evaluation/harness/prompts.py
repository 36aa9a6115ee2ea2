"""The pieces prompts are built of, byte-identical to lm-evaluation-harness 0.4.13's: its Jinja environment
(`apply_template`: StrictUndefined, trailing newline kept, a `regex_replace` filter), messages rendered as text or
chat turns (`Message`, `maybe_delimit`, `requires_delimiter`, `multiturn_to_singleturn`), and the few-shot samplers
(`default`: `Random(seed)` draws in document order, one extra when the shots come from the evaluated split and the
document itself is dropped; `first_n`: the first n in order).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from random import Random
from typing import Any, Sequence

_ENV = None
_COMPILED: dict = {}  # template text -> compiled jinja2 Template (rendering one has no state: a few-shot prompt
# renders the same few templates for every document and shot, and compiling is most of the cost)


def regex_replace(string, pattern, repl, count: int = 0):
    return re.sub(pattern, repl, string, count=count)


def apply_template(template: str, doc: dict) -> str:
    """A Jinja template rendered on a document's fields, in lm-eval's environment."""
    global _ENV
    if _ENV is None:
        from jinja2 import BaseLoader, Environment, StrictUndefined

        _ENV = Environment(loader=BaseLoader, undefined=StrictUndefined, keep_trailing_newline=True)
        _ENV.filters["regex_replace"] = regex_replace
    compiled = _COMPILED.get(template)
    if compiled is None:
        compiled = _COMPILED[template] = _ENV.from_string(template)
    return compiled.render(**doc)


def maybe_delimit(prefix: str | None, suffix: str | None, delimiter: str = " ") -> str:
    if not prefix:
        return suffix or ""
    if not suffix:
        return prefix or ""
    return prefix + delimiter + suffix if not (prefix[-1].isspace() or suffix[0].isspace()) else prefix + suffix


def requires_delimiter(prefix: str, suffix: str) -> bool:
    if prefix == "":
        return False
    return not (prefix[-1].isspace() or suffix[0].isspace())


def ends_with_whitespace(s: str) -> bool:
    return bool(s) and s[-1].isspace()


@dataclass
class Message:
    """One turn: its role, content and the delimiter that follows it as plain text."""

    role: str
    content: str
    delimiter: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}

    def to_text(self) -> str:
        return self.content + self.delimiter


def multiturn_to_singleturn(messages: list[Message]) -> list[dict[str, Any]]:
    """The turns collapsed into one user message (plus the system one, and a final assistant prefix)."""
    system, messages = (messages[0], messages[1:]) if messages[0].role == "system" else (None, messages)
    if messages[-1].role == "assistant":
        user = messages[:-1]
        user[-1].delimiter = ""
        res = [Message("user", "".join(m.to_text() for m in user)).to_dict(), messages[-1].to_dict()]
    else:
        messages[-1].delimiter = ""
        res = [Message("user", "".join(m.to_text() for m in messages)).to_dict()]
    return [system.to_dict()] + res if system else res


class ContextSampler:
    """lm-eval's `default` sampler: `Random(seed).sample` of the few-shot pool."""

    def __init__(self, docs: Sequence[dict], seed: int | None = 1234):
        self.rnd = Random(seed)
        self.docs = list(docs)

    def sample(self, n: int, eval_doc: dict | None = None) -> list[dict]:
        if n == 0:
            return []
        if not self.docs:
            raise ValueError("no documents to draw few-shot examples from")
        if not eval_doc:
            return self.rnd.sample(self.docs, n)
        res = [x for x in self.rnd.sample(self.docs, n + 1) if x != eval_doc][:n]
        if len(res) < n:
            res = self.rnd.sample([x for x in self.docs if x != eval_doc], n)
        return res


class FirstNSampler(ContextSampler):
    """lm-eval's `first_n` sampler: the first n documents of the pool (the evaluated one left out)."""

    def sample(self, n: int, eval_doc: dict | None = None) -> list[dict]:
        pool = [x for x in self.docs if x != eval_doc] if eval_doc is not None else self.docs
        if n > len(pool):
            raise ValueError(f"{n} few-shot examples asked, the pool holds {len(pool)}")
        return pool[:n]


SAMPLERS = {"default": ContextSampler, "first_n": FirstNSampler}
