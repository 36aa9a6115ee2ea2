"""Model hyper-parameters, read from a Hugging Face config.json (or GGUF metadata) into one dataclass.

The forward pass never looks at a file format: loaders fill a `ModelConfig`, and `Model` reads only it.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from nlpkit.errors import NlpkitError, UsageError
from nlpkit.lm.transformer import families
from nlpkit.lm.transformer.families import GPT2_BLOCK, ROPE_BLOCK

ARCHITECTURES = (ROPE_BLOCK, GPT2_BLOCK)
ROPE_TYPES = ("default", "linear", "ntk", "dynamic", "yarn", "llama3", "longrope")
# Sizes a small CPU engine can hold; anything past these is a corrupt or hostile config.
_MAX_DIM = 1 << 16
_MAX_VOCAB = 1 << 22
_MAX_LAYERS = 1024
# The longest sequence a RoPE scaling may stretch a model to (the KV cache is sized by it).
MAX_POSITIONS = 1 << 24


@dataclass
class ModelConfig:
    """Everything the forward pass needs to know about a model's shape."""

    arch: str  # the decoder block: ROPE_BLOCK (every RoPE family) | GPT2_BLOCK
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
    mlp_bias: bool = False  # MLP up / down projection biases (gpt_neox, starcoder2)
    extra: dict = field(default_factory=dict)
    # ---- per-family options of the RoPE decoder block (defaults: Llama), set from `families.FAMILIES`
    family: str = ""  # the families.FAMILIES entry it was read by (its name)
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
    rope_layers: tuple | None = None  # per layer: applies RoPE (False: a NoPE layer, smollm3); None: every layer

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
        if self.arch == ROPE_BLOCK and self.head_dim % 2:
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
        if self.rope_layers is not None and len(self.rope_layers) != self.n_layers:
            raise NlpkitError(f"model config: no_rope_layers must list 1 (RoPE) or 0 (none) for each of the "
                              f"{self.n_layers} layers")
        for name in ("attn_softcap", "final_softcap", "query_scale", "embed_scale"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, (int, float)) and value > 0 and math.isfinite(value)):
                raise NlpkitError(f"model config: {name} {value!r} must be a positive number")
        if self.arch == GPT2_BLOCK and self.n_heads * self.head_dim != self.dim:
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
        mlp = (3 if self.arch == ROPE_BLOCK and self.gated_mlp else 2) * d * h
        head = 0 if self.tie_embeddings else self.vocab_size * d
        return self.vocab_size * d + self.n_layers * (attn + mlp) + head

    @property
    def uses_rope(self) -> bool:
        """Positions by RoPE (the RoPE block); False: GPT-2's table of learned positions."""
        return self.arch == ROPE_BLOCK

    @property
    def positions(self) -> int:
        """The longest sequence the model is used on (`--context`, generation, the KV cache): the
        positions it was trained on, or with a RoPE scaling its original positions times the factor
        when that is more (``max_position_embeddings`` already counts the extension in Phi-3 or
        Llama 3.1 configs; a `--rope-scaling` override or a linear/dynamic config multiplies it)."""
        s = self.rope_scaling
        if self.arch != ROPE_BLOCK or not s or not isinstance(s.get("factor"), (int, float)):
            return self.max_seq_len
        original = s.get("original_max_position_embeddings") or self.max_seq_len
        return max(self.max_seq_len, int(original * s["factor"]))

    def with_rope(self, kind: str | None, factor: float | None) -> "ModelConfig":
        """Return a copy with RoPE scaling overridden (`--rope-scaling`/`--rope-factor`); kind 'none' removes it."""
        if kind is None and factor is None:
            return self
        if self.arch != ROPE_BLOCK:
            raise UsageError("`rope_scaling` applies to RoPE models (llama); this model uses learned positions")
        if kind is None:  # only a factor: keep the model's own type, or linear when it has none
            kind = (self.rope_scaling or {}).get("rope_type", "linear")
        if kind == "none":
            return dataclasses.replace(self, rope_scaling=None)
        if kind not in ROPE_TYPES or kind in ("default", "longrope"):
            raise UsageError(f"`rope_scaling` must be none, linear, ntk, dynamic, yarn or llama3, not {kind!r}")
        if factor is None:
            raise UsageError(f"`rope_scaling` {kind} needs `rope_factor`")
        if not (factor > 0 and math.isfinite(factor)):
            raise UsageError(f"`rope_factor` must be a positive number, got {factor}")
        if self.max_seq_len * factor > MAX_POSITIONS:
            raise UsageError(f"`rope_factor` {factor:g} would stretch {self.max_seq_len} positions to "
                             f"{self.max_seq_len * factor:.4g}; at most {MAX_POSITIONS} positions are supported "
                             f"(`rope_factor` {MAX_POSITIONS // self.max_seq_len} or less)")
        scaling: dict[str, Any] = {"rope_type": kind, "factor": float(factor)}
        if kind in ("yarn", "llama3"):
            scaling["original_max_position_embeddings"] = self.max_seq_len
        if kind == "llama3":
            scaling.update(low_freq_factor=1.0, high_freq_factor=4.0)
        return dataclasses.replace(self, rope_scaling=scaling)


def _first(cfg: dict, keys: tuple[str, ...], default: Any = None) -> Any:
    """The value of the first of `keys` that cfg holds (not null), else default."""
    for k in keys:
        if cfg.get(k) is not None:
            return cfg[k]
    return default


def _int(cfg: dict, *keys: str, default: Any = None) -> Any:
    return _first(cfg, keys, default)


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
# config.json activation names -> the block's (`model.ACTIVATIONS`)
ACT_NAMES = {"silu": "silu", "swish": "silu", "gelu_pytorch_tanh": "gelu_tanh", "gelu_new": "gelu_tanh",
             "gelu": "gelu"}


def config_from_hf(cfg: dict) -> ModelConfig:
    """Build a ModelConfig from a parsed Hugging Face config.json: its model_type names the family
    (`families.FAMILIES`), whose entry says which keys to read and which block options it uses."""
    if not isinstance(cfg, dict):
        raise NlpkitError("config.json does not hold a JSON object")
    model_type = cfg.get("model_type")
    archs = cfg.get("architectures") or []
    fam = families.multimodal(model_type)
    if fam is not None:  # multimodal checkpoint: its text model
        text = cfg.get("text_config")
        if not isinstance(text, dict):
            raise NlpkitError(f"config.json: a multimodal {model_type} checkpoint needs a text_config to read its "
                              "text model")
        text = {**text, "model_type": fam.model_types[0]}
        for key in ("bos_token_id", "eos_token_id", "tie_word_embeddings"):
            if key not in text and key in cfg:
                text[key] = cfg[key]
        config = config_from_hf(text)
        config.extra["weight_prefixes"] = fam.hf_multimodal_prefixes
        return config
    fam = families.by_model_type(model_type)
    if fam is None:
        name = model_type or (archs[0] if archs else "unknown")
        *rest, last = families.MODEL_TYPES
        raise NlpkitError(f"unsupported architecture {name!r} in config.json (model_type; nlpkit runs "
                          f"{', '.join(rest)} and {last} models)")
    config = _gpt2_config(cfg, fam) if fam.block == families.GPT2_BLOCK else _rope_config(cfg, fam)
    config.bos_id = cfg.get("bos_token_id") if isinstance(cfg.get("bos_token_id"), int) else None
    eos = cfg.get("eos_token_id")
    config.eos_id = eos[0] if isinstance(eos, list) and eos else eos if isinstance(eos, int) else None
    config.eos_ids = [i for i in eos if isinstance(i, int)] if isinstance(eos, list) else []
    return config.validate(HF_FIELDS)


def _gpt2_config(cfg: dict, fam: families.Family) -> ModelConfig:
    """GPT-2's own block: learned positions, every head its own kv head."""
    def get(name: str, default: Any = None) -> Any:
        return _first(cfg, fam.hf_key(name), default)

    dim, n_heads = get("dim"), get("n_heads")
    try:
        head_dim = dim // n_heads
    except TypeError:
        raise NlpkitError("config.json: n_embd / n_head missing or not numbers") from None
    act = get("act", fam.act)
    if act not in ("gelu_new", "gelu_pytorch_tanh"):
        raise NlpkitError(f"config.json: GPT-2 activation {act!r} is not supported (gelu_new)")
    if cfg.get("scale_attn_by_inverse_layer_idx") or cfg.get("reorder_and_upcast_attn"):
        raise NlpkitError("config.json: scale_attn_by_inverse_layer_idx / reorder_and_upcast_attn not supported")
    return ModelConfig(
        arch=fam.block, family=fam.name, vocab_size=get("vocab_size"), dim=dim, n_layers=get("n_layers"),
        n_heads=n_heads, n_kv_heads=n_heads, head_dim=head_dim,
        hidden_dim=get("hidden_dim", 4 * dim if isinstance(dim, int) else None), max_seq_len=get("max_seq_len", 1024),
        norm_eps=get("norm_eps", fam.eps_default), tie_embeddings=fam.tie_default)


def block_options(fam: families.Family) -> dict:
    """The ModelConfig fields a family fixes, whatever its file says."""
    return dict(arch=fam.block, family=fam.name, norm=fam.norm, pre_norm=fam.pre_norm, post_norm=fam.post_norm,
                qk_norm=fam.qk_norm, gated_mlp=fam.gated_mlp)


def _rope_config(cfg: dict, fam: families.Family) -> ModelConfig:
    """The RoPE decoder block's options of one family from its config.json (transformers 4 or 5 field names)."""
    for key, bad, what in _REFUSED:
        if key in cfg and bad(cfg[key]):
            raise NlpkitError(f"config.json: {key} = {cfg[key]!r} ({what}) is not supported for {fam.name} models")
    for key, what in fam.refused:
        if cfg.get(key):
            raise NlpkitError(f"config.json: {key} on a {fam.name} model ({what}) is not supported")

    def get(name: str, default: Any = None) -> Any:
        return _first(cfg, fam.hf_key(name), default)

    n_heads, dim = get("n_heads"), get("dim")
    try:
        head_dim = get("head_dim") or dim // n_heads
    except TypeError:
        raise NlpkitError("config.json: hidden_size / num_attention_heads missing or not numbers") from None
    n_layers = get("n_layers")
    params = cfg.get("rope_parameters") or {}
    local_params = None
    if fam.local_rope and isinstance(params.get("full_attention"), dict):  # transformers 5, per layer type
        local_params = params.get("sliding_attention") or {}
        cfg = {**cfg, "rope_parameters": params["full_attention"]}
    theta, scaling = rope_scaling_from_hf(cfg)
    if scaling is not None and scaling["rope_type"] == "longrope":  # transformers' _compute_longrope_parameters
        if cfg.get("original_max_position_embeddings"):  # the top-level field wins, as in transformers
            scaling["original_max_position_embeddings"] = cfg["original_max_position_embeddings"]
        orig = scaling.get("original_max_position_embeddings")
        if scaling.get("factor") is None and isinstance(orig, int) and orig > 0:
            scaling["factor"] = get("max_seq_len", orig) / orig
    act_keys = fam.hf_key("act")
    act_name = get("act", fam.act)
    if act_name not in ACT_NAMES:
        field = next(k for k in act_keys if cfg.get(k) is not None)
        raise NlpkitError(f"config.json: {field} {act_name!r} is not supported for {fam.name} models "
                          f"(supported: {', '.join(ACT_NAMES)})")

    def bias(rule: str | bool) -> bool:
        return rule if isinstance(rule, bool) else bool(cfg.get(rule, fam.bias_default))

    tie = fam.hf_key("tie_embeddings")
    config = ModelConfig(
        **block_options(fam), vocab_size=get("vocab_size"), dim=dim, n_layers=n_layers, n_heads=n_heads,
        n_kv_heads=get("n_kv_heads", n_heads), head_dim=head_dim, hidden_dim=get("hidden_dim"),
        max_seq_len=get("max_seq_len", 2048), norm_eps=get("norm_eps", fam.eps_default), rope_theta=theta,
        rope_scaling=scaling, tie_embeddings=bool(cfg.get(tie[0], fam.tie_default)),
        attention_bias=bias(fam.qkv_bias), o_bias=bias(fam.o_bias), mlp_bias=bias(fam.mlp_bias),
        act=ACT_NAMES[act_name])
    if fam.parallel_residual is not None:
        config.parallel_residual = bool(cfg.get(fam.hf_key("parallel_residual")[0], fam.parallel_residual))
    if fam.embed_scale:
        config.embed_scale = math.sqrt(dim)
    if fam.query_pre_attn_scalar:
        config.query_scale = float(cfg.get("query_pre_attn_scalar") or head_dim) ** -0.5
    if fam.softcap:
        config.final_softcap = cfg.get("final_logit_softcapping")
        config.attn_softcap = cfg.get("attn_logit_softcapping")
    if fam.rotary_keys:
        fraction = _first(cfg, fam.rotary_keys)
        if fraction is None:
            fraction = (cfg.get("rope_parameters") or {}).get("partial_rotary_factor")
        if fraction is not None and fraction != 1.0:
            config.rotary_dim = int(head_dim * fraction)
    if fam.no_rope:
        config.rope_layers = _rope_layers(cfg, n_layers, fam)
    if fam.local_rope:
        if local_params is not None:
            config.rope_local_theta = float(local_params.get("rope_theta") or 10000.0)
            if (local_params.get("rope_type") or "default") != "default":
                raise NlpkitError(f"config.json: rope_parameters.sliding_attention.rope_type "
                                  f"{local_params.get('rope_type')!r} is not supported")
        else:
            config.rope_local_theta = float(cfg.get("rope_local_base_freq") or 10000.0)
    _sliding_from_hf(config, cfg, fam)
    return config


def _rope_layers(cfg: dict, n_layers: Any, fam: families.Family) -> tuple[bool, ...] | None:
    """Which layers apply RoPE: no_rope_layers (1: RoPE, 0: none), else all but every no_rope_layer_interval-th."""
    flags = cfg.get("no_rope_layers")
    if not isinstance(n_layers, int):
        return None  # validate() names the bad layer count
    if flags is None:
        every = _int(cfg, "no_rope_layer_interval", default=fam.no_rope_interval)
        if not isinstance(every, int) or isinstance(every, bool) or every <= 0:
            raise NlpkitError(f"config.json: no_rope_layer_interval = {every!r} must be a positive integer")
        flags = [int((i + 1) % every != 0) for i in range(n_layers)]
    if not (isinstance(flags, list) and len(flags) >= n_layers and all(f in (0, 1) for f in flags)):
        raise NlpkitError(f"config.json: no_rope_layers must list 1 (RoPE) or 0 (none) for each of the {n_layers} "
                          f"layers")
    return tuple(bool(f) for f in flags[:n_layers])


def _sliding_from_hf(config: ModelConfig, cfg: dict, fam: families.Family) -> None:
    """The sliding window and which layers use it, by the family's rule (`Family.sliding`)."""
    window, types, n_layers = cfg.get("sliding_window"), cfg.get("layer_types"), config.n_layers
    if fam.sliding == "none":
        window = None
    elif fam.sliding == "flag":  # only with use_sliding_window; layer_types, else the family's rule
        if not cfg.get("use_sliding_window"):
            window = None
        elif types is None and fam.flag_layers == "no_rope" and config.rope_layers is not None:
            types = ["full_attention" if rope else "sliding_attention" for rope in config.rope_layers]
        elif types is None:
            start = _int(cfg, "max_window_layers", default=n_layers)
            types = ["sliding_attention" if i >= start else "full_attention" for i in range(n_layers)]
    elif fam.sliding == "pattern" and types is None:  # every n-th layer full
        every = _int(cfg, fam.layer_pattern_key, default=fam.layer_pattern) if fam.layer_pattern_key \
            else fam.layer_pattern
        types = ["sliding_attention" if (i + 1) % every else "full_attention" for i in range(n_layers)]
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window <= 0):
        raise NlpkitError(f"config.json: sliding_window = {window!r} must be a positive integer (or null: no window)")
    config.sliding_window = window
    if window and isinstance(types, list):
        config.layer_types = tuple("sliding" if t == "sliding_attention" else "full" if t == "full_attention"
                                   else str(t) for t in types)
