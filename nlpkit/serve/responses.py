"""OpenAI-shaped response bodies: a completion choice's `logprobs` object (legacy completions: tokens,
token_logprobs, top_logprobs, text_offset), a chat choice's (`content`: token, logprob, bytes, top_logprobs),
the bodies and the server-sent-event chunks of both endpoints. Formatting only: every number comes from the engine.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field


@dataclass
class TokenLogprob:
    """One token of a choice: its id, log-probability (None: nothing to condition the first token on) and top
    (ids, log-probabilities) or None."""

    id: int
    logprob: float | None
    top: tuple | None


@dataclass
class Choice:
    """One choice as it is built: the echoed prompt (text and tokens), the generated tokens, the text released so
    far (streaming), the final text, why it ended."""

    index: int
    echo_text: str = ""
    echo_tokens: list[TokenLogprob] = field(default_factory=list)
    tokens: list[TokenLogprob] = field(default_factory=list)
    gen_ids: list[int] = field(default_factory=list)
    text: str = ""
    finish: str | None = None


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


def completion_logprobs(served, tokens: list[TokenLogprob], start_offset: int = 0) -> dict:
    """The legacy `logprobs` object of `tokens`: their strings, log-probabilities, top log-probabilities (token
    string -> log-probability, best first) and character offsets (cumulative token string lengths)."""
    strings, offsets, pos = [], [], start_offset
    for t in tokens:
        s = served.token_string(t.id)
        strings.append(s)
        offsets.append(pos)
        pos += len(s)
    tops = [None if t.top is None else {served.token_string(i): lp for i, lp in zip(*t.top)} for t in tokens]
    return {"tokens": strings, "token_logprobs": [t.logprob for t in tokens], "top_logprobs": tops,
            "text_offset": offsets}


def chat_logprobs(served, tokens: list[TokenLogprob]) -> dict:
    """The chat `logprobs` object: {"content": [{token, logprob, bytes, top_logprobs}]}."""
    def entry(i: int, lp: float) -> dict:
        return {"token": served.token_string(i), "logprob": lp, "bytes": served.token_bytes(i)}

    return {"content": [{**entry(t.id, t.logprob),
                         "top_logprobs": [] if t.top is None else [entry(i, lp) for i, lp in zip(*t.top)]}
                        for t in tokens]}


def usage(prompt_tokens: int, completion_tokens: int) -> dict:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def completion_body(rid: str, model: str, choices: list[dict], use: dict) -> dict:
    return {"id": rid, "object": "text_completion", "created": int(time.time()), "model": model,
            "choices": choices, "usage": use}


def completion_choice(served, c: Choice, logprobs: bool, echo: bool) -> dict:
    lp = None
    if logprobs:
        shown = (c.echo_tokens if echo else []) + c.tokens
        lp = completion_logprobs(served, shown)
    return {"index": c.index, "text": (c.echo_text if echo else "") + c.text, "logprobs": lp,
            "finish_reason": c.finish}


def chat_body(rid: str, model: str, choices: list[dict], use: dict) -> dict:
    return {"id": rid, "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": choices, "usage": use}


def chat_choice(served, c: Choice, logprobs: bool) -> dict:
    return {"index": c.index, "message": {"role": "assistant", "content": c.text},
            "logprobs": chat_logprobs(served, c.tokens) if logprobs else None, "finish_reason": c.finish}


def sse(data: dict | str) -> bytes:
    """One server-sent event."""
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return f"data: {text}\n\n".encode("utf-8")


def completion_chunk(rid: str, model: str, index: int, text: str, logprobs: dict | None,
                     finish: str | None) -> dict:
    return {"id": rid, "object": "text_completion", "created": int(time.time()), "model": model,
            "choices": [{"index": index, "text": text, "logprobs": logprobs, "finish_reason": finish}]}


def chat_chunk(rid: str, model: str, index: int, delta: dict, logprobs: dict | None, finish: str | None) -> dict:
    return {"id": rid, "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
            "choices": [{"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": finish}]}


def usage_chunk(rid: str, model: str, obj: str, use: dict) -> dict:
    return {"id": rid, "object": obj, "created": int(time.time()), "model": model, "choices": [], "usage": use}
