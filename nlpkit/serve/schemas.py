"""Request bodies -> checked parameters (`CompletionParams`, `ChatParams`), or an `ApiError` naming the field.

Checked by hand rather than by a schema library, so that each error says which field and why in OpenAI's shape,
and no value is coerced (``"max_tokens": "5"`` or ``true`` is an error, not 5 or 1). A body that is not a JSON
object, or a field of the wrong type, is 422 (unprocessable); a well-formed value the server cannot honour
(a prompt longer than the context, too many logprobs) is 400. Fields the server does not use (`user`,
`logit_bias` when empty, ...) are accepted and ignored, as OpenAI-compatible servers do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

MAX_LOGPROBS = 20   # top log-probabilities per position (vLLM's default limit)
MAX_N = 64          # choices per prompt
MAX_PROMPTS = 1024  # prompts in one completions request
MAX_CHOICES = 1024  # prompts x n in one request (each a job: a request cannot fill the engine's queue alone)
MAX_STOPS = 16


class ApiError(Exception):
    """An OpenAI-shaped error: HTTP `status`, a message, the offending `param`, a `code`."""

    TYPES = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
             413: "invalid_request_error", 422: "invalid_request_error", 503: "server_unavailable",
             504: "timeout_error", 500: "server_error"}

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.TYPES.get(self.status, "invalid_request_error"),
                          "param": self.param, "code": self.code}}


@dataclass
class Sampling:
    """The decoding knobs a request gives (OpenAI's defaults: temperature 1, top_p 1; vLLM's top_k and min_p)."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    n: int = 1
    max_tokens: int = 16

    def config(self):
        from nlpkit.lm.generation.sampling import SamplingConfig

        return SamplingConfig(temperature=self.temperature, top_k=self.top_k, top_p=self.top_p,
                              min_p=self.min_p).validate()


@dataclass
class CompletionParams:
    prompts: list  # each a str or a list[int]
    sampling: Sampling
    echo: bool = False
    logprobs: int | None = None
    stream: bool = False
    include_usage: bool = False


@dataclass
class ChatParams:
    messages: list[dict]
    sampling: Sampling
    logprobs: bool = False
    top_logprobs: int = 0
    stream: bool = False
    include_usage: bool = False
    extra: dict = field(default_factory=dict)


def _type_name(v: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "an array",
            dict: "an object", type(None): "null"}.get(type(v), type(v).__name__)


def _bad(name: str, want: str, v: Any) -> ApiError:
    return ApiError(422, f"`{name}` must be {want}, got {_type_name(v)}", name, "invalid_type")


def _int(body: dict, name: str, default, lo: int | None = None, hi: int | None = None, nullable: bool = True):
    v = body.get(name, default)
    if v is None:
        if not nullable and name in body:
            raise _bad(name, "an integer", v)
        return default
    if isinstance(v, bool) or not isinstance(v, int):
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        else:
            raise _bad(name, "an integer", v)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        span = f"at least {lo}" if hi is None else f"between {lo} and {hi}"
        raise ApiError(400, f"`{name}` must be {span}, got {v}", name, "invalid_value")
    return v


def _float(body: dict, name: str, default: float, lo: float, hi: float | None = None) -> float:
    v = body.get(name, default)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise _bad(name, "a number", v)
    v = float(v)
    if not math.isfinite(v) or v < lo or (hi is not None and v > hi):
        span = f"at least {lo}" if hi is None else f"between {lo} and {hi}"
        raise ApiError(400, f"`{name}` must be {span}, got {v}", name, "invalid_value")
    return v


def _bool(body: dict, name: str, default: bool = False) -> bool:
    v = body.get(name, default)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise _bad(name, "a boolean", v)
    return v


def _stop(body: dict) -> tuple[str, ...]:
    v = body.get("stop")
    if v is None:
        return ()
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, list) or not all(isinstance(s, str) for s in v):
        raise _bad("stop", "a string or an array of strings", v)
    if len(v) > MAX_STOPS:
        raise ApiError(400, f"`stop` holds {len(v)} strings, at most {MAX_STOPS}", "stop", "invalid_value")
    return tuple(s for s in v if s)


def _sampling(body: dict, max_tokens_default: int | None, max_tokens_names=("max_tokens",)) -> Sampling:
    for name in ("presence_penalty", "frequency_penalty"):
        if _float(body, name, 0.0, -2.0, 2.0) != 0.0:
            raise ApiError(400, f"`{name}` is not supported (only 0)", name, "unsupported")
    if body.get("logit_bias"):
        raise ApiError(400, "`logit_bias` is not supported", "logit_bias", "unsupported")
    if body.get("best_of") not in (None, 1) and body.get("best_of") != body.get("n", 1):
        raise ApiError(400, "`best_of` is not supported (only equal to `n`)", "best_of", "unsupported")
    max_tokens = max_tokens_default
    for name in max_tokens_names:
        if body.get(name) is not None:
            max_tokens = _int(body, name, max_tokens_default, 0)
    top_k = _int(body, "top_k", 0, -1)
    return Sampling(temperature=_float(body, "temperature", 1.0, 0.0, 2.0), top_p=_float(body, "top_p", 1.0, 0.0, 1.0),
                    top_k=max(top_k, 0), min_p=_float(body, "min_p", 0.0, 0.0, 1.0), seed=_int(body, "seed", None, 0),
                    stop=_stop(body), n=_int(body, "n", 1, 1, MAX_N), max_tokens=max_tokens)


def _stream_options(body: dict) -> bool:
    opts = body.get("stream_options")
    if opts is None:
        return False
    if not isinstance(opts, dict):
        raise _bad("stream_options", "an object", opts)
    return _bool(opts, "include_usage")


def _model(body: dict) -> None:
    v = body.get("model")
    if v is not None and not isinstance(v, str):
        raise _bad("model", "a string", v)


def _prompts(v: Any) -> list:
    """`prompt`: a string, an array of strings, an array of token ids, or an array of arrays of token ids."""
    if isinstance(v, str):
        return [v]
    if isinstance(v, list):
        if not v:
            raise ApiError(400, "`prompt` is empty", "prompt", "invalid_value")
        if all(isinstance(p, str) for p in v):
            out = list(v)
        elif all(isinstance(i, int) and not isinstance(i, bool) for i in v):
            out = [list(v)]
        elif all(isinstance(p, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in p) for p in v):
            out = [list(p) for p in v]
        else:
            raise _bad("prompt", "a string, an array of strings, an array of token ids or an array of arrays of "
                       "token ids", v)
        if len(out) > MAX_PROMPTS:
            raise ApiError(400, f"`prompt` holds {len(out)} prompts, at most {MAX_PROMPTS}", "prompt",
                           "invalid_value")
        return out
    if v is None:
        raise ApiError(422, "`prompt` is required", "prompt", "missing")
    raise _bad("prompt", "a string, an array of strings, an array of token ids or an array of arrays of token ids", v)


def completion_params(body: Any) -> CompletionParams:
    """A `/v1/completions` body checked (see the module docstring)."""
    if not isinstance(body, dict):
        raise ApiError(422, f"the request body must be a JSON object, got {_type_name(body)}", None, "invalid_type")
    _model(body)
    prompts = _prompts(body.get("prompt"))
    sampling = _sampling(body, 16)
    logprobs = _int(body, "logprobs", None, 0, MAX_LOGPROBS)
    if isinstance(body.get("logprobs"), bool):
        raise _bad("logprobs", "an integer", body["logprobs"])
    if len(prompts) * sampling.n > MAX_CHOICES:
        raise ApiError(400, f"{len(prompts)} prompts x n {sampling.n} make {len(prompts) * sampling.n} choices, at most "
                       f"{MAX_CHOICES}", "n", "invalid_value")
    return CompletionParams(prompts, sampling, echo=_bool(body, "echo"), logprobs=logprobs,
                            stream=_bool(body, "stream"), include_usage=_stream_options(body))


def _content(m: dict, k: int) -> str:
    c = m.get("content")
    if c is None:
        return ""
    if isinstance(c, str):
        return c
    if isinstance(c, list):   # content parts: text parts only
        texts = []
        for part in c:
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise ApiError(400, f"message {k + 1}: only text content parts are supported", "messages",
                               "unsupported")
            texts.append(part["text"])
        return "".join(texts)
    raise _bad(f"messages[{k}].content", "a string or an array of content parts", c)


def chat_params(body: Any) -> ChatParams:
    """A `/v1/chat/completions` body checked (see the module docstring)."""
    if not isinstance(body, dict):
        raise ApiError(422, f"the request body must be a JSON object, got {_type_name(body)}", None, "invalid_type")
    _model(body)
    messages = body.get("messages")
    if messages is None:
        raise ApiError(422, "`messages` is required", "messages", "missing")
    if not isinstance(messages, list):
        raise _bad("messages", "an array", messages)
    if not messages:
        raise ApiError(400, "`messages` is empty", "messages", "invalid_value")
    checked = []
    for k, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise ApiError(422, f"message {k + 1} must be an object with a string `role`", "messages",
                           "invalid_type")
        checked.append({"role": m["role"], "content": _content(m, k)})
    sampling = _sampling(body, None, ("max_tokens", "max_completion_tokens"))
    top = _int(body, "top_logprobs", 0, 0, MAX_LOGPROBS)
    return ChatParams(checked, sampling, logprobs=_bool(body, "logprobs"), top_logprobs=top or 0,
                      stream=_bool(body, "stream"), include_usage=_stream_options(body))
