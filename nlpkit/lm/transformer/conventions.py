"""The conventions a transformer is used by, read from its config and files: the token a text's first token is
predicted from (lm-evaluation-harness's), the window perplexity uses when none is given and the check of a window
against the model's positions, and the sampling values when the user gives none (its generation_config.json, else
llama.cpp's). The backend (`transformer_lm.TransformerLM`) and the engine's packed scorer answer by them; the
task modules (`nlpkit.lm.perplexity`, `nlpkit.lm.generation`) re-export them for a bare engine `Model`.
"""

from __future__ import annotations

from nlpkit.errors import UsageError


def prefix_token(config) -> int | None:
    """The token a text's first token is predicted from: BOS when the model defines one, else EOS/EOT
    (lm-evaluation-harness `prefix_token_id`); None when the model has neither."""
    return config.bos_id if config.bos_id is not None else config.eos_id


def default_context(model) -> int:
    """The model's context length, capped at 1024 tokens to bound memory and time."""
    return min(model.config.max_seq_len, 1024)


def check_context(model, context: int) -> None:
    """A usage error when `context` exceeds the model's positions (`ModelConfig.positions`: trained
    positions, or original positions times a RoPE scaling's factor)."""
    c = model.config
    if context > c.positions:
        if c.positions > c.max_seq_len:
            raise UsageError(f"`context` {context} exceeds the {c.positions} positions of this model with its RoPE "
                             f"scaling ({c.rope_scaling.get('rope_type')} x{c.rope_scaling.get('factor')}): use "
                             f"`context` {c.positions} or less, or a larger `rope_factor`")
        hint = " or set a RoPE scaling (`rope_scaling`, `rope_factor`)" if c.uses_rope and not c.rope_scaling \
            else ""
        raise UsageError(f"`context` {context} exceeds the {c.max_seq_len} positions this model was trained on: "
                         f"use `context` {c.max_seq_len} or less{hint}")


SAMPLING_KEYS = ("temperature", "top_k", "top_p", "min_p", "repetition_penalty")
LLAMA_CPP_DEFAULTS = {"temperature": 0.8, "top_k": 40, "top_p": 0.95, "min_p": 0.05, "repetition_penalty": 1.0}
TRANSFORMERS_DEFAULTS = {"temperature": 1.0, "top_k": 50, "top_p": 1.0, "min_p": 0.0, "repetition_penalty": 1.0}


def sampling_defaults(generation_config: dict | None) -> tuple[dict, str]:
    """The sampling values to use when the user gives none, and where they come from.

    A model whose generation_config.json sets sampling values gets them, as transformers'
    `generate` applies them (its defaults for the keys the file leaves out; ``do_sample: false``
    means greedy). Otherwise llama.cpp's defaults: temperature 0.8, top-k 40, top-p 0.95, min-p 0.05.

    >>> sampling_defaults({})
    ({'temperature': 0.8, 'top_k': 40, 'top_p': 0.95, 'min_p': 0.05, 'repetition_penalty': 1.0}, 'llama.cpp')
    >>> sampling_defaults({"do_sample": True, "temperature": 0.7, "top_p": 0.8})[0]["top_k"]
    50
    """
    gc = generation_config or {}
    given = {k: gc[k] for k in SAMPLING_KEYS if gc.get(k) is not None}
    if not given and "do_sample" not in gc:
        return dict(LLAMA_CPP_DEFAULTS), "llama.cpp"
    values = {**TRANSFORMERS_DEFAULTS, **given}
    if gc.get("do_sample") is False:
        values["temperature"] = 0.0
    values["top_k"] = int(values["top_k"])
    return values, "generation_config"
