"""Model hyper-parameters, read from a Hugging Face config.json (or GGUF metadata) into one dataclass.

The forward pass never looks at a file format: loaders fill a `ModelConfig`, and `Model` reads only it.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from nlpkit.errors import NlpkitError, UsageError

ARCHITECTURES = ("llama", "gpt2")
# Hugging Face model_type values that are the llama architecture as far as the math goes.
LLAMA_MODEL_TYPES = ("llama", "mistral")
ROPE_TYPES = ("default", "linear", "ntk", "dynamic", "yarn", "llama3")
# Sizes a small CPU engine can hold; anything past these is a corrupt or hostile config.
_MAX_DIM = 1 << 16
_MAX_VOCAB = 1 << 22
_MAX_LAYERS = 1024


@dataclass
class ModelConfig:
    """Everything the forward pass needs to know about a model's shape."""

    arch: str  # "llama" | "gpt2"
    vocab_size: int
    dim: int  # hidden size
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    hidden_dim: int  # MLP inner size
    max_seq_len: int
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    rope_scaling: dict | None = None  # {"rope_type": "linear"|"ntk"|"dynamic"|"yarn"|"llama3", "factor": s, ...}
    tie_embeddings: bool = False
    bos_id: int | None = None
    eos_id: int | None = None
    add_bos: bool = False
    attention_bias: bool = False
    extra: dict = field(default_factory=dict)

    def validate(self) -> "ModelConfig":
        """Reject impossible shapes before any allocation happens."""
        if self.arch not in ARCHITECTURES:
            raise NlpkitError(f"unsupported architecture {self.arch!r} (supported: {', '.join(ARCHITECTURES)})")
        checks = [("vocab_size", self.vocab_size, _MAX_VOCAB), ("hidden size", self.dim, _MAX_DIM),
                  ("n_layers", self.n_layers, _MAX_LAYERS), ("n_heads", self.n_heads, _MAX_DIM),
                  ("n_kv_heads", self.n_kv_heads, _MAX_DIM), ("head_dim", self.head_dim, _MAX_DIM),
                  ("intermediate size", self.hidden_dim, 1 << 20), ("max_seq_len", self.max_seq_len, 1 << 24)]
        for name, value, limit in checks:
            if not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= limit:
                raise NlpkitError(f"model config: {name} = {value!r} is not a size between 1 and {limit}")
        if self.n_heads % self.n_kv_heads:
            raise NlpkitError(f"model config: n_heads {self.n_heads} is not a multiple of n_kv_heads {self.n_kv_heads}")
        if self.arch == "llama" and self.head_dim % 2:
            raise NlpkitError(f"model config: head_dim {self.head_dim} must be even for RoPE")
        if self.arch == "gpt2" and self.n_heads * self.head_dim != self.dim:
            raise NlpkitError(f"model config: n_head {self.n_heads} does not divide n_embd {self.dim}")
        if not (isinstance(self.norm_eps, (int, float)) and 0 <= self.norm_eps < 1):
            raise NlpkitError(f"model config: norm eps {self.norm_eps!r} is not a small non-negative number")
        if not (isinstance(self.rope_theta, (int, float)) and self.rope_theta > 1 and math.isfinite(self.rope_theta)):
            raise NlpkitError(f"model config: rope_theta {self.rope_theta!r} must be a number > 1")
        if self.rope_scaling is not None:
            kind = self.rope_scaling.get("rope_type")
            if kind not in ROPE_TYPES:
                raise NlpkitError(f"model config: rope scaling type {kind!r} is not supported "
                                  f"(supported: {', '.join(ROPE_TYPES)})")
            factor = self.rope_scaling.get("factor", 1.0)
            if kind != "default" and not (isinstance(factor, (int, float)) and factor > 0):
                raise NlpkitError(f"model config: rope scaling factor {factor!r} must be a positive number")
        return self

    @property
    def n_params(self) -> int:
        """Parameter count implied by the shapes (embeddings counted once when tied)."""
        d, h = self.dim, self.hidden_dim
        attn = d * (self.n_heads + 2 * self.n_kv_heads) * self.head_dim + self.n_heads * self.head_dim * d
        mlp = (3 if self.arch == "llama" else 2) * d * h
        head = 0 if self.tie_embeddings else self.vocab_size * d
        return self.vocab_size * d + self.n_layers * (attn + mlp) + head

    def with_rope(self, kind: str | None, factor: float | None) -> "ModelConfig":
        """Return a copy with RoPE scaling overridden (`--rope-scaling`/`--rope-factor`); kind 'none' removes it."""
        if kind is None and factor is None:
            return self
        if self.arch != "llama":
            raise UsageError("--rope-scaling applies to RoPE models (llama); this model uses learned positions")
        if kind is None:  # only a factor: keep the model's own type, or linear when it has none
            kind = (self.rope_scaling or {}).get("rope_type", "linear")
        if kind == "none":
            return dataclasses.replace(self, rope_scaling=None)
        if kind not in ROPE_TYPES or kind == "default":
            raise UsageError(f"--rope-scaling must be none, linear, ntk, dynamic, yarn or llama3, not {kind!r}")
        if factor is None:
            raise UsageError(f"--rope-scaling {kind} needs --rope-factor")
        if not factor > 0:
            raise UsageError(f"--rope-factor must be positive, got {factor}")
        scaling: dict[str, Any] = {"rope_type": kind, "factor": float(factor)}
        if kind in ("yarn", "llama3"):
            scaling["original_max_position_embeddings"] = self.max_seq_len
        if kind == "llama3":
            scaling.update(low_freq_factor=1.0, high_freq_factor=4.0)
        return dataclasses.replace(self, rope_scaling=scaling)


def _int(cfg: dict, *keys: str, default: Any = None) -> Any:
    for k in keys:
        if cfg.get(k) is not None:
            return cfg[k]
    return default


def rope_scaling_from_hf(cfg: dict) -> tuple[float, dict | None]:
    """(rope_theta, scaling dict or None) from a config.json, transformers 4 (`rope_scaling`) or 5 (`rope_parameters`)."""
    params = dict(cfg.get("rope_parameters") or cfg.get("rope_scaling") or {})
    theta = params.pop("rope_theta", None) or cfg.get("rope_theta") or 10000.0
    kind = params.pop("rope_type", None) or params.pop("type", None) or "default"
    if kind == "default":
        return float(theta), None
    params["rope_type"] = kind
    if kind in ("yarn", "llama3"):
        params.setdefault("original_max_position_embeddings",
                          cfg.get("original_max_position_embeddings") or cfg.get("max_position_embeddings"))
        if cfg.get("original_max_position_embeddings"):
            params["original_max_position_embeddings"] = cfg["original_max_position_embeddings"]
    return float(theta), params


def config_from_hf(cfg: dict) -> ModelConfig:
    """Build a ModelConfig from a parsed Hugging Face config.json (LlamaForCausalLM or GPT2LMHeadModel)."""
    if not isinstance(cfg, dict):
        raise NlpkitError("config.json does not hold a JSON object")
    model_type = cfg.get("model_type")
    archs = cfg.get("architectures") or []
    if model_type in LLAMA_MODEL_TYPES:
        n_heads = _int(cfg, "num_attention_heads")
        dim = _int(cfg, "hidden_size")
        try:
            head_dim = _int(cfg, "head_dim", default=None) or dim // n_heads
        except TypeError:
            raise NlpkitError("config.json: hidden_size / num_attention_heads missing or not numbers") from None
        theta, scaling = rope_scaling_from_hf(cfg)
        config = ModelConfig(
            arch="llama", vocab_size=_int(cfg, "vocab_size"), dim=dim, n_layers=_int(cfg, "num_hidden_layers"),
            n_heads=n_heads, n_kv_heads=_int(cfg, "num_key_value_heads", default=n_heads), head_dim=head_dim,
            hidden_dim=_int(cfg, "intermediate_size"), max_seq_len=_int(cfg, "max_position_embeddings", default=2048),
            norm_eps=_int(cfg, "rms_norm_eps", default=1e-6), rope_theta=theta, rope_scaling=scaling,
            tie_embeddings=bool(cfg.get("tie_word_embeddings", False)), attention_bias=bool(cfg.get("attention_bias")))
        act = cfg.get("hidden_act", "silu")
        if act != "silu":
            raise NlpkitError(f"config.json: hidden_act {act!r} is not supported (llama models use silu)")
        if cfg.get("mlp_bias"):
            raise NlpkitError("config.json: mlp_bias=true is not supported")
    elif model_type == "gpt2":
        dim = _int(cfg, "n_embd", "hidden_size")
        n_heads = _int(cfg, "n_head", "num_attention_heads")
        try:
            head_dim = dim // n_heads
        except TypeError:
            raise NlpkitError("config.json: n_embd / n_head missing or not numbers") from None
        config = ModelConfig(
            arch="gpt2", vocab_size=_int(cfg, "vocab_size"), dim=dim, n_layers=_int(cfg, "n_layer"),
            n_heads=n_heads, n_kv_heads=n_heads, head_dim=head_dim,
            hidden_dim=_int(cfg, "n_inner", default=4 * dim if isinstance(dim, int) else None),
            max_seq_len=_int(cfg, "n_positions", "n_ctx", default=1024),
            norm_eps=_int(cfg, "layer_norm_epsilon", default=1e-5), tie_embeddings=True)
        act = cfg.get("activation_function", "gelu_new")
        if act not in ("gelu_new", "gelu_pytorch_tanh"):
            raise NlpkitError(f"config.json: GPT-2 activation {act!r} is not supported (gelu_new)")
        if cfg.get("scale_attn_by_inverse_layer_idx") or cfg.get("reorder_and_upcast_attn"):
            raise NlpkitError("config.json: scale_attn_by_inverse_layer_idx / reorder_and_upcast_attn not supported")
    else:
        name = model_type or (archs[0] if archs else "unknown")
        raise NlpkitError(f"unsupported architecture {name!r} in config.json "
                          f"(nlpkit runs llama-family and gpt2 models)")
    config.bos_id = cfg.get("bos_token_id") if isinstance(cfg.get("bos_token_id"), int) else None
    eos = cfg.get("eos_token_id")
    config.eos_id = eos[0] if isinstance(eos, list) and eos else eos if isinstance(eos, int) else None
    return config.validate()
