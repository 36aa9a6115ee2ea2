"""Every model family the transformer engine runs, in one table: where each is named, how its files spell
its hyper-parameters and tensors, and which options of the one decoder block it uses.

`config.py` (config.json and GGUF metadata -> `ModelConfig`) and the loaders (tensors -> `Weights`) are
generic readers driven by a `Family`; the block (`model.py`) reads only `ModelConfig`. Adding a family is
one entry here plus a fixture in `tools/make_lm_fixtures.py --families`, as llama.cpp keeps a family in one
file and transformers in one modular file. This is the only module under `nlpkit/` that spells a family's
names (`tests/lm/test_lm_families.py` checks it).

    >>> by_model_type("qwen3").qk_norm
    'head'
"""

from __future__ import annotations

from dataclasses import dataclass, field

# the two decoder blocks (ModelConfig.arch), named after the families that defined them
ROPE_BLOCK, GPT2_BLOCK = "llama", "gpt2"

# ModelConfig field -> the config.json keys that may hold it, first found wins (transformers 4 and 5 names)
HF_KEYS: dict[str, tuple[str, ...]] = {
    "vocab_size": ("vocab_size",), "dim": ("hidden_size",), "n_layers": ("num_hidden_layers",),
    "n_heads": ("num_attention_heads",), "n_kv_heads": ("num_key_value_heads",), "head_dim": ("head_dim",),
    "hidden_dim": ("intermediate_size",), "max_seq_len": ("max_position_embeddings",),
    "norm_eps": ("rms_norm_eps", "layer_norm_eps"), "act": ("hidden_activation", "hidden_act"),
    "tie_embeddings": ("tie_word_embeddings",), "sliding_window": ("sliding_window",),
    "parallel_residual": ("use_parallel_residual",),
}
# ModelConfig field -> GGUF metadata key, after "<architecture>." (llama.cpp's names)
GGUF_KEYS: dict[str, str] = {
    "vocab_size": "vocab_size", "dim": "embedding_length", "n_layers": "block_count",
    "n_heads": "attention.head_count", "n_kv_heads": "attention.head_count_kv", "head_dim": "attention.key_length",
    "hidden_dim": "feed_forward_length", "max_seq_len": "context_length",
    "norm_eps": "attention.layer_norm_rms_epsilon",
    "rope_theta": "rope.freq_base", "rotary_dim": "rope.dimension_count", "sliding_window": "attention.sliding_window",
    "layer_pattern": "attention.sliding_window_pattern", "attn_softcap": "attn_logit_softcapping",
    "final_softcap": "final_logit_softcapping", "rope_local_theta": "rope.freq_base_swa",
    "parallel_residual": "use_parallel_residual", "rope_scaling_type": "rope.scaling.type",
    "rope_factor": "rope.scaling.factor", "rope_original_context": "rope.scaling.original_context_length",
}
# a layer's tensors by role, without ".weight" / ".bias": Hugging Face (Llama's names, after "model.layers.{i}.")
HF_TENSORS: dict[str, str] = {
    "attn_norm": "input_layernorm", "q": "self_attn.q_proj", "k": "self_attn.k_proj", "v": "self_attn.v_proj",
    "o": "self_attn.o_proj", "q_norm": "self_attn.q_norm", "k_norm": "self_attn.k_norm",
    "mlp_norm": "post_attention_layernorm", "gate": "mlp.gate_proj", "up": "mlp.up_proj", "down": "mlp.down_proj",
    # the model's own: embedding, final norm (after the prefix), output projection (no prefix)
    "embed": "embed_tokens", "final_norm": "norm", "lm_head": "lm_head",
}
# ... and GGUF (llama.cpp's names after "blk.{i}.", the same for every architecture). A fused q/k/v
# ("qkv") or gate/up ("gate_up") is read where the file has one.
GGUF_TENSORS: dict[str, str] = {
    "attn_norm": "attn_norm", "q": "attn_q", "k": "attn_k", "v": "attn_v", "qkv": "attn_qkv", "o": "attn_output",
    "q_norm": "attn_q_norm", "k_norm": "attn_k_norm", "attn_post_norm": "post_attention_norm",
    "mlp_norm": "ffn_norm", "gate": "ffn_gate", "up": "ffn_up", "gate_up": "ffn_up", "down": "ffn_down",
    "mlp_post_norm": "post_ffw_norm", "embed": "token_embd", "final_norm": "output_norm", "lm_head": "output",
}
GGUF_LAYER = "blk.{i}."


def gguf_tensor_name(role: str, layer: int | None) -> str | None:
    """A tensor's GGUF name without ".weight" / ".bias" (None: GGUF has no such role)."""
    name = GGUF_TENSORS.get(role)
    return None if name is None else GGUF_LAYER.format(i=layer) + name if layer is not None else name


# Gemma 2/3 and OLMo 2 name their norms by place: pre- and post-norms around attention and around the MLP
_SANDWICH_NORMS = {"attn_post_norm": "post_attention_layernorm", "mlp_norm": "pre_feedforward_layernorm",
                   "mlp_post_norm": "post_feedforward_layernorm"}


@dataclass(frozen=True)
class Family:
    """One model family: its names, how its files spell things, and its options of the decoder block.
    Defaults are Llama's; an entry lists only what differs."""

    name: str  # nlpkit's name (ModelConfig.family): the model_type read
    model_types: tuple[str, ...]  # config.json model_type values read as this family
    gguf_arch: str | None  # llama.cpp's general.architecture (None: no GGUF reader)
    block: str = ROPE_BLOCK  # ModelConfig.arch: the RoPE decoder block, or GPT-2's
    # ---- config.json: keys and defaults that differ from HF_KEYS / Llama's
    hf_keys: dict = field(default_factory=dict)
    hf_multimodal: tuple[str, ...] = ()  # model_types of multimodal checkpoints whose text_config is this family
    hf_multimodal_prefixes: tuple[str, ...] = ()  # ... and where their text model's tensors are
    eps_default: float = 1e-6
    act: str = "silu"  # activation when config.json names none (and the GGUF's, which names none)
    tie_default: bool = False  # tie_word_embeddings when config.json does not say
    # biases: a config.json key holding them, or a fixed answer; bias_default when the key is absent
    qkv_bias: str | bool = "attention_bias"
    o_bias: str | bool = "attention_bias"
    mlp_bias: str | bool = False
    bias_default: bool = False
    rotary_keys: tuple[str, ...] = ()  # keys of a partial rotary fraction (also read in rope_parameters)
    refused: tuple[tuple[str, str], ...] = ()  # config.json keys this family's variant nlpkit does not run
    # ---- block options (ModelConfig fields of the same names)
    norm: str = "rms"  # "rms" | "layer" (LayerNorm with biases)
    norm_plus_one: bool = False  # HF weights scale by (1 + w) (Gemma); llama.cpp's converter stores 1 + w
    pre_norm: bool = True  # norm before attention and MLP
    post_norm: bool = False  # norm of the attention / MLP output before its residual add
    qk_norm: str | None = None  # "head" (RMSNorm per head) | "full" (over the whole q / k projection)
    gated_mlp: bool = True  # act(gate) * up -> down; False: act(up + b) -> down + b
    parallel_residual: bool | None = None  # x + attn(ln1 x) + mlp(ln2 x): the default of use_parallel_residual
    embed_scale: bool = False  # token embeddings times sqrt(hidden)
    softcap: bool = False  # attention / final logit soft-capping (attn_logit_softcapping, final_logit_softcapping)
    query_pre_attn_scalar: bool = False  # q scaled by query_pre_attn_scalar ** -0.5 (default head_dim)
    # sliding windows: "none"; "all" (every layer, unless layer_types says); "flag" (only with
    # use_sliding_window; layer_types, else rule `flag_layers`); "pattern" (every `layer_pattern`-th layer full)
    sliding: str = "none"
    flag_layers: str = "max_window_layers"  # "max_window_layers": layers from it on | "no_rope": the NoPE layers
    layer_pattern: int = 0  # every n-th layer full (gemma2: 2, gemma3: sliding_window_pattern, default 6)
    layer_pattern_key: str | None = None
    local_rope: bool = False  # sliding layers use their own RoPE base without scaling (gemma3)
    no_rope: bool = False  # RoPE left out of some layers: no_rope_layers (1 = RoPE), else every no_rope_interval-th
    no_rope_interval: int = 4  # ... llama.cpp's fixed rule for GGUF files (n_no_rope_layer_step)
    # ---- tensors
    hf_prefixes: tuple[str, ...] = ("model.", "")  # before embed / final_norm / layers
    hf_layer: str = "layers.{i}."
    hf_tensors: dict = field(default_factory=dict)  # roles whose names differ from HF_TENSORS
    hf_qkv_per_head: bool = False  # fused q/k/v rows grouped per head [nh, 3, hd] (GPT-NeoX)
    gguf_keys: dict = field(default_factory=dict)  # metadata keys whose names differ from GGUF_KEYS
    gguf_qk_permuted: bool = False  # the converter permuted q/k rows into llama.cpp's interleaved RoPE order
    gguf_big_layers: int | None = None  # llama.cpp scales q by 1/sqrt(d / n_heads) at this depth (27B)

    def hf_tensor(self, role: str) -> str | None:
        """The Hugging Face name of a tensor role (None: the family has no such tensor)."""
        return self.hf_tensors.get(role, HF_TENSORS.get(role))

    def hf_tensor_name(self, role: str, layer: int | None, prefix: str) -> str | None:
        """A tensor's Hugging Face name without ".weight" / ".bias": `prefix` (e.g. "model.") and, in layer
        `layer`, the layer's path; the output projection has no prefix. None: the family has no such tensor."""
        name = self.hf_tensor(role)
        if name is None:
            return None
        if layer is not None:
            return prefix + self.hf_layer.format(i=layer) + name
        return name if role == "lm_head" else prefix + name

    def hf_key(self, name: str) -> tuple[str, ...]:
        """The config.json keys that hold ModelConfig field `name`."""
        return self.hf_keys.get(name, HF_KEYS.get(name, ()))

    def gguf_key(self, name: str) -> str:
        """The GGUF metadata key of ModelConfig field `name` (after "<architecture>.")."""
        return self.gguf_keys.get(name, GGUF_KEYS[name])


_GEMMA = dict(act="gelu_pytorch_tanh", tie_default=True, norm_plus_one=True, embed_scale=True,
              hf_keys={"act": ("hidden_activation",)})  # transformers' Gemma ignores the legacy hidden_act "gelu"
_GEMMA23 = dict(_GEMMA, post_norm=True, softcap=True, query_pre_attn_scalar=True, sliding="pattern",
                hf_tensors=_SANDWICH_NORMS)
_LAYER_NORM = dict(norm="layer", gated_mlp=False, eps_default=1e-5,
                   gguf_keys={"norm_eps": "attention.layer_norm_epsilon"})

FAMILIES: tuple[Family, ...] = (
    Family("llama", ("llama",), "llama", gguf_qk_permuted=True),
    Family("mistral", ("mistral",), None, sliding="all",
           refused=(("layer_types", "alternating attention"),)),  # Mistral GGUFs are written as "llama"
    Family("qwen2", ("qwen2",), "qwen2", qkv_bias=True, o_bias=False, sliding="flag"),
    Family("qwen3", ("qwen3",), "qwen3", qk_norm="head", sliding="flag"),
    Family("gemma", ("gemma",), "gemma", **_GEMMA),
    Family("gemma2", ("gemma2",), "gemma2", layer_pattern=2, gguf_big_layers=46, **_GEMMA23),
    Family("gemma3_text", ("gemma3_text",), "gemma3", qk_norm="head", layer_pattern=6, hf_multimodal=("gemma3",),
           hf_multimodal_prefixes=("model.language_model.", "language_model.model."),
           layer_pattern_key="sliding_window_pattern", local_rope=True, gguf_big_layers=62, **_GEMMA23),
    Family("phi3", ("phi3",), "phi3", sliding="all", rotary_keys=("partial_rotary_factor",),
           hf_tensors={"qkv": "self_attn.qkv_proj", "gate_up": "mlp.gate_up_proj"}),
    Family("olmo2", ("olmo2",), "olmo2", pre_norm=False, post_norm=True, qk_norm="full", hf_tensors=_SANDWICH_NORMS),
    Family("gpt_neox", ("gpt_neox",), "gptneox", act="gelu", mlp_bias=True, bias_default=True, parallel_residual=True,
           rotary_keys=("rotary_pct", "partial_rotary_factor"), hf_prefixes=("gpt_neox.", ""), hf_qkv_per_head=True,
           hf_keys={"norm_eps": ("layer_norm_eps",), "n_kv_heads": ()},
           hf_tensors={"qkv": "attention.query_key_value", "q": None, "o": "attention.dense",
                       "up": "mlp.dense_h_to_4h", "down": "mlp.dense_4h_to_h", "embed": "embed_in",
                       "final_norm": "final_layer_norm", "lm_head": "embed_out"}, **_LAYER_NORM),
    Family("starcoder2", ("starcoder2",), "starcoder2", act="gelu_pytorch_tanh", tie_default=True,
           qkv_bias="use_bias", o_bias="use_bias", mlp_bias="use_bias", bias_default=True, sliding="all",
           hf_keys={"norm_eps": ("norm_epsilon",)}, hf_tensors={"up": "mlp.c_fc", "down": "mlp.c_proj"}, **_LAYER_NORM),
    Family("smollm3", ("smollm3",), "smollm3", tie_default=True, sliding="flag", flag_layers="no_rope",
           no_rope=True, gguf_qk_permuted=True),
    # GPT-2 runs its own block (learned positions, LayerNorm, GELU MLP, Conv1D weights): see config._gpt2_config
    Family("gpt2", ("gpt2",), None, block=GPT2_BLOCK, act="gelu_new", eps_default=1e-5, tie_default=True,
           hf_keys={"dim": ("n_embd", "hidden_size"), "n_heads": ("n_head", "num_attention_heads"),
                    "n_layers": ("n_layer",), "hidden_dim": ("n_inner",), "max_seq_len": ("n_positions", "n_ctx"),
                    "norm_eps": ("layer_norm_epsilon",), "act": ("activation_function",)}),
)
_BY_MODEL_TYPE = {t: f for f in FAMILIES for t in f.model_types}
_BY_MULTIMODAL = {t: f for f in FAMILIES for t in f.hf_multimodal}
_BY_GGUF_ARCH = {f.gguf_arch: f for f in FAMILIES if f.gguf_arch}


def by_model_type(model_type: object) -> Family | None:
    """The family a config.json model_type names (None: not one nlpkit runs)."""
    return _BY_MODEL_TYPE.get(model_type) if isinstance(model_type, str) else None


def multimodal(model_type: object) -> Family | None:
    """The family of a multimodal checkpoint's text model, by the checkpoint's model_type (None: not one)."""
    return _BY_MULTIMODAL.get(model_type) if isinstance(model_type, str) else None


def by_gguf_arch(arch: object) -> Family | None:
    """The family a GGUF general.architecture names (None: not one nlpkit reads)."""
    return _BY_GGUF_ARCH.get(arch) if isinstance(arch, str) else None


MODEL_TYPES: tuple[str, ...] = tuple(_BY_MODEL_TYPE)
GGUF_ARCHS: tuple[str, ...] = tuple(_BY_GGUF_ARCH)
