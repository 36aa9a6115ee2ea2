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
# Hugging Face model_type values read as the "llama" architecture: one decoder block whose per-family options
# (norm form and placement, activation, biases, q/k norms, soft-capping, windows, partial rotary) are fields below.
FAMILIES = ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "phi3", "olmo2", "gpt_neox")
LLAMA_MODEL_TYPES = FAMILIES
ROPE_TYPES = ("default", "linear", "ntk", "dynamic", "yarn", "llama3", "longrope")
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
    eos_ids: list[int] = field(default_factory=list)  # every id that ends a sequence (eos_token_id may be a list)
    add_bos: bool = False
    attention_bias: bool = False  # q/k/v projection biases
    extra: dict = field(default_factory=dict)
    # ---- per-family options of the "llama" decoder block (defaults: Llama)
    family: str = "llama"  # the model_type it was read from
    o_bias: bool | None = None  # output projection bias (None: same as attention_bias)
    norm: str = "rms"  # "rms" | "layer" (LayerNorm with bias)
    act: str = "silu"  # "silu" | "gelu_tanh" | "gelu" (exact erf)
    gated_mlp: bool = True  # act(gate) * up -> down; False: act(up + b) -> down + b (with biases)
    qk_norm: str | None = None  # "head" (RMSNorm per head, before RoPE) | "full" (over the whole q / k projection)
    pre_norm: bool = True  # norm before attention and MLP
    post_norm: bool = False  # norm of the attention / MLP output before its residual add (gemma2/3, olmo2)
    parallel_residual: bool = False  # x + attn(ln1 x) + mlp(ln2 x)  (gpt_neox)
    attn_softcap: float | None = None  # tanh soft-capping of attention scores (gemma2)
    final_softcap: float | None = None  # tanh soft-capping of the output logits (gemma2/3)
    query_scale: float | None = None  # multiplies q (None: head_dim ** -0.5)
    embed_scale: float | None = None  # multiplies the token embeddings (gemma: sqrt(hidden))
    sliding_window: int | None = None  # a query sees only the last W keys, itself included, on sliding layers
    layer_types: tuple | None = None  # per layer "sliding" | "full"; None: all sliding when a window is set
    rotary_dim: int | None = None  # rotate only the first rotary_dim dims of each head (None: all)
    rope_local_theta: float | None = None  # RoPE base of sliding layers (gemma3); they use no scaling

    def validate(self, fields: dict[str, str] | None = None) -> "ModelConfig":
        """Reject impossible shapes before any allocation happens. `fields` names the sizes as the
        model's file does (`HF_FIELDS` for config.json), so a message points at what to edit."""
        if self.arch not in ARCHITECTURES:
            raise NlpkitError(f"unsupported architecture {self.arch!r} (supported: {', '.join(ARCHITECTURES)})")
        name_of = (fields or {}).get
        checks = [("vocab_size", self.vocab_size, _MAX_VOCAB), ("hidden size", self.dim, _MAX_DIM),
                  ("n_layers", self.n_layers, _MAX_LAYERS), ("n_heads", self.n_heads, _MAX_DIM),
                  ("n_kv_heads", self.n_kv_heads, _MAX_DIM), ("head_dim", self.head_dim, _MAX_DIM),
                  ("intermediate size", self.hidden_dim, 1 << 20), ("max_seq_len", self.max_seq_len, 1 << 24)]
        for name, value, limit in checks:
            if not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= limit:
                raise NlpkitError(f"model config: {name_of(name, name)} = {value!r} is not a size between 1 and "
                                  f"{limit}")
        if self.n_heads % self.n_kv_heads:
            raise NlpkitError(f"model config: {name_of('n_heads', 'n_heads')} {self.n_heads} is not a multiple of "
                              f"{name_of('n_kv_heads', 'n_kv_heads')} {self.n_kv_heads}")
        if self.arch == "llama" and self.head_dim % 2:
            raise NlpkitError(f"model config: head_dim {self.head_dim} must be even for RoPE")
        if self.rotary_dim is not None and not (isinstance(self.rotary_dim, int) and 0 < self.rotary_dim
                                                <= self.head_dim and self.rotary_dim % 2 == 0):
            raise NlpkitError(f"model config: rotary dimensions {self.rotary_dim!r} must be even and within "
                              f"head_dim {self.head_dim}")
        if self.sliding_window is not None and not (isinstance(self.sliding_window, int) and self.sliding_window > 0):
            raise NlpkitError(f"model config: sliding_window {self.sliding_window!r} must be a positive integer")
        if self.layer_types is not None and (len(self.layer_types) != self.n_layers
                                             or not set(self.layer_types) <= {"sliding", "full"}):
            raise NlpkitError(f"model config: layer_types must list 'sliding_attention' or 'full_attention' for "
                              f"each of the {self.n_layers} layers")
        for name in ("attn_softcap", "final_softcap", "query_scale", "embed_scale"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, (int, float)) and value > 0 and math.isfinite(value)):
                raise NlpkitError(f"model config: {name} {value!r} must be a positive number")
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
            if kind == "longrope":
                orig = self.rope_scaling.get("original_max_position_embeddings")
                half = (self.rotary_dim or self.head_dim) // 2
                for key in ("short_factor", "long_factor"):
                    f = self.rope_scaling.get(key)
                    if not (isinstance(f, list) and len(f) == half):
                        raise NlpkitError(f"model config: longrope {key} must list {half} numbers")
                if not (isinstance(orig, int) and orig > 1):
                    raise NlpkitError("model config: longrope needs original_max_position_embeddings")
            elif kind != "default" and not (isinstance(factor, (int, float)) and factor > 0):
                raise NlpkitError(f"model config: rope scaling factor {factor!r} must be a positive number")
        return self

    @property
    def n_params(self) -> int:
        """Parameter count implied by the shapes (embeddings counted once when tied)."""
        d, h = self.dim, self.hidden_dim
        attn = d * (self.n_heads + 2 * self.n_kv_heads) * self.head_dim + self.n_heads * self.head_dim * d
        mlp = (3 if self.arch == "llama" and self.gated_mlp else 2) * d * h
        head = 0 if self.tie_embeddings else self.vocab_size * d
        return self.vocab_size * d + self.n_layers * (attn + mlp) + head

    @property
    def positions(self) -> int:
        """The longest sequence the model is used on (`--context`, generation, the KV cache): the
        positions it was trained on, or with a RoPE scaling its original positions times the factor
        when that is more (``max_position_embeddings`` already counts the extension in Phi-3 or
        Llama 3.1 configs; a `--rope-scaling` override or a linear/dynamic config multiplies it)."""
        s = self.rope_scaling
        if self.arch != "llama" or not s or not isinstance(s.get("factor"), (int, float)):
            return self.max_seq_len
        original = s.get("original_max_position_embeddings") or self.max_seq_len
        return max(self.max_seq_len, int(original * s["factor"]))

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
        if kind not in ROPE_TYPES or kind in ("default", "longrope"):
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
    kind = {"su": "longrope"}.get(kind, kind)
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
    if model_type == "gemma3":  # multimodal checkpoint: its text model
        text = cfg.get("text_config")
        if not isinstance(text, dict):
            raise NlpkitError("config.json: a multimodal gemma3 checkpoint needs a text_config to read its text model")
        text = {**text, "model_type": "gemma3_text"}
        for key in ("bos_token_id", "eos_token_id", "tie_word_embeddings"):
            if key not in text and key in cfg:
                text[key] = cfg[key]
        config = config_from_hf(text)
        config.extra["weight_prefixes"] = ("model.language_model.", "language_model.model.")
        return config
    if model_type in FAMILIES:
        config = _rope_family_config(cfg, model_type)
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
        raise NlpkitError(f"unsupported architecture {name!r} in config.json (model_type; nlpkit runs "
                          f"{', '.join(FAMILIES)} and gpt2 models)")
    config.bos_id = cfg.get("bos_token_id") if isinstance(cfg.get("bos_token_id"), int) else None
    eos = cfg.get("eos_token_id")
    config.eos_id = eos[0] if isinstance(eos, list) and eos else eos if isinstance(eos, int) else None
    config.eos_ids = [i for i in eos if isinstance(i, int)] if isinstance(eos, list) else []
    return config.validate(HF_FIELDS)


# ModelConfig's names in validation messages -> the config.json fields a user edits
HF_FIELDS = {"n_heads": "num_attention_heads", "n_kv_heads": "num_key_value_heads", "n_layers": "num_hidden_layers",
             "max_seq_len": "max_position_embeddings", "hidden size": "hidden_size",
             "intermediate size": "intermediate_size"}


# config.json fields that select variants this engine does not implement: (field, bad value test, what it is)
_REFUSED = [
    ("num_local_experts", lambda v: bool(v), "mixture-of-experts"),
    ("num_experts", lambda v: bool(v), "mixture-of-experts"),
    ("n_routed_experts", lambda v: bool(v), "mixture-of-experts"),
    ("moe_intermediate_size", lambda v: bool(v), "mixture-of-experts"),
    ("mlp_bias", lambda v: bool(v), "MLP biases"),
    ("use_bidirectional_attention", lambda v: bool(v), "bidirectional attention"),
    ("clip_qkv", lambda v: v is not None, "q/k/v clipping"),
    ("attention_chunk_size", lambda v: v is not None, "chunked attention"),
]
_ACTS = {"silu": "silu", "swish": "silu", "gelu_pytorch_tanh": "gelu_tanh", "gelu_new": "gelu_tanh",
         "gelu": "gelu"}


def _rope_family_config(cfg: dict, family: str) -> ModelConfig:
    """The decoder-block options of one RoPE family from its config.json (transformers 4 or 5 field names)."""
    for key, bad, what in _REFUSED:
        if key in cfg and bad(cfg[key]):
            raise NlpkitError(f"config.json: {key} = {cfg[key]!r} ({what}) is not supported for {family} models")
    n_heads = _int(cfg, "num_attention_heads")
    dim = _int(cfg, "hidden_size")
    try:
        head_dim = _int(cfg, "head_dim", default=None) or dim // n_heads
    except TypeError:
        raise NlpkitError("config.json: hidden_size / num_attention_heads missing or not numbers") from None
    n_layers = _int(cfg, "num_hidden_layers")
    params = cfg.get("rope_parameters") or {}
    local_params = None
    if family == "gemma3_text" and isinstance(params.get("full_attention"), dict):  # transformers 5, per layer type
        local_params = params.get("sliding_attention") or {}
        cfg = {**cfg, "rope_parameters": params["full_attention"]}
    theta, scaling = rope_scaling_from_hf(cfg)
    if scaling is not None and scaling["rope_type"] == "longrope":  # transformers' _compute_longrope_parameters
        if cfg.get("original_max_position_embeddings"):  # the top-level field wins, as in transformers
            scaling["original_max_position_embeddings"] = cfg["original_max_position_embeddings"]
        orig = scaling.get("original_max_position_embeddings")
        if scaling.get("factor") is None and isinstance(orig, int) and orig > 0:
            scaling["factor"] = _int(cfg, "max_position_embeddings", default=orig) / orig
    act_name = cfg.get("hidden_activation") or cfg.get("hidden_act") or "silu"
    if family in ("gemma", "gemma2", "gemma3_text") and cfg.get("hidden_activation") is None:
        act_name = "gelu_pytorch_tanh"  # transformers' Gemma ignores the legacy hidden_act "gelu"
    if act_name not in _ACTS:
        field = "hidden_activation" if cfg.get("hidden_activation") else "hidden_act"
        raise NlpkitError(f"config.json: {field} {act_name!r} is not supported for {family} models "
                          f"(supported: {', '.join(_ACTS)})")
    bias = bool(cfg.get("attention_bias"))
    config = ModelConfig(
        arch="llama", family=family, vocab_size=_int(cfg, "vocab_size"), dim=dim, n_layers=n_layers,
        n_heads=n_heads, n_kv_heads=_int(cfg, "num_key_value_heads", default=n_heads), head_dim=head_dim,
        hidden_dim=_int(cfg, "intermediate_size"), max_seq_len=_int(cfg, "max_position_embeddings", default=2048),
        norm_eps=_int(cfg, "rms_norm_eps", "layer_norm_eps", default=1e-6), rope_theta=theta, rope_scaling=scaling,
        tie_embeddings=bool(cfg.get("tie_word_embeddings", family in ("gemma", "gemma2", "gemma3_text"))),
        attention_bias=bias, o_bias=bias, act=_ACTS[act_name])
    window = cfg.get("sliding_window")
    if family in ("qwen2", "qwen3"):
        config.attention_bias = family == "qwen2" or bias  # qwen2: q/k/v biases, no output bias
        config.o_bias = bias if family == "qwen3" else False
        if not cfg.get("use_sliding_window"):
            window = None
        elif cfg.get("layer_types") is None:
            start = _int(cfg, "max_window_layers", default=n_layers)
            cfg = {**cfg, "layer_types": ["sliding_attention" if i >= start else "full_attention"
                                          for i in range(n_layers)]}
        config.qk_norm = "head" if family == "qwen3" else None
    elif family in ("gemma", "gemma2", "gemma3_text"):
        config.embed_scale = math.sqrt(dim)
        if family == "gemma":
            window = None
        else:
            config.post_norm = True
            config.query_scale = float(cfg.get("query_pre_attn_scalar") or head_dim) ** -0.5
            config.final_softcap = cfg.get("final_logit_softcapping")
            config.attn_softcap = cfg.get("attn_logit_softcapping")
            if cfg.get("layer_types") is None:
                pattern = 2 if family == "gemma2" else _int(cfg, "sliding_window_pattern", default=6)
                cfg = {**cfg, "layer_types": ["sliding_attention" if (i + 1) % pattern else "full_attention"
                                              for i in range(n_layers)]}
        if family == "gemma3_text":
            config.qk_norm = "head"
            if local_params is not None:
                config.rope_local_theta = float(local_params.get("rope_theta") or 10000.0)
                if (local_params.get("rope_type") or "default") != "default":
                    raise NlpkitError(f"config.json: rope_parameters.sliding_attention.rope_type "
                                      f"{local_params.get('rope_type')!r} is not supported")
            else:
                config.rope_local_theta = float(cfg.get("rope_local_base_freq") or 10000.0)
    elif family == "phi3":
        prf = cfg.get("partial_rotary_factor") or (cfg.get("rope_parameters") or {}).get("partial_rotary_factor")
        if prf is not None and prf != 1.0:
            config.rotary_dim = int(head_dim * prf)
    elif family == "olmo2":
        config.pre_norm, config.post_norm, config.qk_norm = False, True, "full"
    elif family == "gpt_neox":
        config.norm, config.gated_mlp, config.n_kv_heads = "layer", False, n_heads
        config.norm_eps = _int(cfg, "layer_norm_eps", default=1e-5)
        config.parallel_residual = bool(cfg.get("use_parallel_residual", True))
        config.attention_bias = config.o_bias = bool(cfg.get("attention_bias", True))
        pct = cfg.get("rotary_pct")
        if pct is None:
            pct = cfg.get("partial_rotary_factor", (cfg.get("rope_parameters") or {}).get("partial_rotary_factor", 1.0))
        if pct != 1.0:
            config.rotary_dim = int(head_dim * pct)
        config.tie_embeddings = bool(cfg.get("tie_word_embeddings", False))
    if family in ("llama", "olmo2", "gemma", "gpt_neox"):
        window = None  # these families have no sliding window
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window <= 0):
        raise NlpkitError(f"config.json: sliding_window = {window!r} must be a positive integer (or null: no window)")
    config.sliding_window = window
    types = cfg.get("layer_types")
    if config.sliding_window and isinstance(types, list):
        config.layer_types = tuple("sliding" if t == "sliding_attention" else "full" if t == "full_attention"
                                   else str(t) for t in types)
    if family == "mistral" and cfg.get("layer_types"):
        raise NlpkitError("config.json: layer_types on a mistral model (alternating attention) is not supported")
    return config
