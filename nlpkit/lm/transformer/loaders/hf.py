"""Load a Hugging Face model directory (config.json + safetensors + tokenizer) into a `Model`.

Llama: q/k/v rows are stacked into one matrix and gate/up into another while reading, then transposed
once into the `[in, out]` layout the forward pass uses. GPT-2 stores its projections as Conv1D
`[in, out]` already. A tied embedding is kept once, as the `[d, V]` output projection.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from nlpkit.errors import NlpkitError
from nlpkit.lm.transformer.config import ModelConfig, config_from_hf
from nlpkit.lm.transformer.loaders.safetensors import TensorSet
from nlpkit.lm.transformer.model import GPT2Layer, LlamaLayer, Model, Weights


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise NlpkitError(f"{path}: cannot read JSON ({e})") from None
    if not isinstance(data, dict):
        raise NlpkitError(f"{path}: expected a JSON object")
    return data


def _prefix(ts: TensorSet, candidates: tuple[str, ...], probe: str) -> str:
    for p in candidates:
        if p + probe in ts:
            return p
    raise NlpkitError(f"model weights: tensor {candidates[0]}{probe} is missing")


GEMMA_FAMILIES = ("gemma", "gemma2", "gemma3_text")


def load_llama_weights(ts: TensorSet, c: ModelConfig) -> Weights:
    """Weights of any RoPE family (see `ModelConfig.family`) into `LlamaLayer`s."""
    if c.family == "gpt_neox":
        return load_neox_weights(ts, c)
    d, nh, nkv, hd, h = c.dim, c.n_heads, c.n_kv_heads, c.head_dim, c.hidden_dim
    p = _prefix(ts, c.extra.get("weight_prefixes", ()) + ("model.", ""), "embed_tokens.weight")
    shift = np.float32(1.0) if c.family in GEMMA_FAMILIES else None  # Gemma RMSNorm scales by (1 + w)

    def norm(name: str, size: int = d) -> np.ndarray:
        g = ts.read(name, (size,))
        return g + shift if shift is not None else g

    layers = []
    for i in range(c.n_layers):
        a = f"{p}layers.{i}."
        if c.family == "phi3":  # fused q/k/v and gate/up projections
            wqkv = ts.read_t([a + "self_attn.qkv_proj.weight"], [((nh + 2 * nkv) * hd, d)])
            w_gate_up = ts.read_t([a + "mlp.gate_up_proj.weight"], [(2 * h, d)])
        else:
            wqkv = ts.read_t([a + f"self_attn.{n}_proj.weight" for n in "qkv"],
                             [(nh * hd, d), (nkv * hd, d), (nkv * hd, d)])
            w_gate_up = ts.read_t([a + "mlp.gate_proj.weight", a + "mlp.up_proj.weight"], [(h, d), (h, d)])
        bias = None
        if c.attention_bias:
            bias = np.concatenate([ts.read(a + f"self_attn.{n}_proj.bias", (m * hd,))
                                   for n, m in zip("qkv", (nh, nkv, nkv))])
        layer = LlamaLayer(
            attn_norm=norm(a + "input_layernorm.weight") if c.pre_norm else None,
            wqkv=wqkv, bqkv=bias,
            wo=ts.read_t([a + "self_attn.o_proj.weight"], [(d, nh * hd)]),
            bo=ts.read(a + "self_attn.o_proj.bias", (d,)) if (c.o_bias if c.o_bias is not None else c.attention_bias)
            else None,
            mlp_norm=None, w_gate_up=w_gate_up, w_down=ts.read_t([a + "mlp.down_proj.weight"], [(d, h)]))
        if c.post_norm:  # gemma2/3: pre- and post-norms; olmo2: post-norms only
            layer.attn_post_norm = norm(a + "post_attention_layernorm.weight")
            layer.mlp_post_norm = norm(a + "post_feedforward_layernorm.weight")
            if c.pre_norm:
                layer.mlp_norm = norm(a + "pre_feedforward_layernorm.weight")
        else:
            layer.mlp_norm = norm(a + "post_attention_layernorm.weight")
        if c.qk_norm == "head":
            layer.q_norm, layer.k_norm = norm(a + "self_attn.q_norm.weight", hd), norm(a + "self_attn.k_norm.weight", hd)
        elif c.qk_norm == "full":
            layer.q_norm = norm(a + "self_attn.q_norm.weight", nh * hd)
            layer.k_norm = norm(a + "self_attn.k_norm.weight", nkv * hd)
        layers.append(layer)
    if not c.tie_embeddings and "lm_head.weight" not in ts:
        c.tie_embeddings = True  # some exports drop lm_head when it equals the embedding
    if c.tie_embeddings:
        embed, lm_head = None, ts.read_t([p + "embed_tokens.weight"], [(c.vocab_size, d)])
    else:
        embed = ts.read(p + "embed_tokens.weight", (c.vocab_size, d))
        lm_head = ts.read_t(["lm_head.weight"], [(c.vocab_size, d)])
    return Weights(lm_head=lm_head, embed=embed, layers=layers, norm_g=norm(p + "norm.weight"))


def load_neox_weights(ts: TensorSet, c: ModelConfig) -> Weights:
    """GPT-NeoX (Pythia): per-head interleaved fused q/k/v rows `[nh, 3, hd]` regrouped as q heads, k heads, v heads."""
    d, nh, hd, h = c.dim, c.n_heads, c.head_dim, c.hidden_dim
    p = _prefix(ts, ("gpt_neox.", ""), "embed_in.weight")

    def regroup(w: np.ndarray) -> np.ndarray:  # [nh 3 hd, ...] -> [3 nh hd, ...]
        return w.reshape(nh, 3, hd, *w.shape[1:]).swapaxes(0, 1).reshape(w.shape)

    layers = []
    for i in range(c.n_layers):
        a = f"{p}layers.{i}."
        layers.append(LlamaLayer(
            attn_norm=ts.read(a + "input_layernorm.weight", (d,)), attn_norm_b=ts.read(a + "input_layernorm.bias", (d,)),
            wqkv=np.ascontiguousarray(regroup(ts.read(a + "attention.query_key_value.weight", (3 * d, d))).T),
            bqkv=regroup(ts.read(a + "attention.query_key_value.bias", (3 * d,))) if c.attention_bias else None,
            wo=ts.read_t([a + "attention.dense.weight"], [(d, d)]),
            bo=ts.read(a + "attention.dense.bias", (d,)) if c.o_bias else None,
            mlp_norm=ts.read(a + "post_attention_layernorm.weight", (d,)),
            mlp_norm_b=ts.read(a + "post_attention_layernorm.bias", (d,)),
            w_gate_up=ts.read_t([a + "mlp.dense_h_to_4h.weight"], [(h, d)]), b_up=ts.read(a + "mlp.dense_h_to_4h.bias", (h,)),
            w_down=ts.read_t([a + "mlp.dense_4h_to_h.weight"], [(d, h)]), b_down=ts.read(a + "mlp.dense_4h_to_h.bias", (d,))))
    if c.tie_embeddings or "embed_out.weight" not in ts:
        c.tie_embeddings = True
        embed, lm_head = None, ts.read_t([p + "embed_in.weight"], [(c.vocab_size, d)])
    else:
        embed = ts.read(p + "embed_in.weight", (c.vocab_size, d))
        lm_head = ts.read_t(["embed_out.weight"], [(c.vocab_size, d)])
    return Weights(lm_head=lm_head, embed=embed, layers=layers, norm_g=ts.read(p + "final_layer_norm.weight", (d,)),
                   norm_b=ts.read(p + "final_layer_norm.bias", (d,)))


def load_gpt2_weights(ts: TensorSet, c: ModelConfig) -> Weights:
    d, h = c.dim, c.hidden_dim
    p = _prefix(ts, ("transformer.", ""), "wte.weight")

    def conv1d(name: str, n_in: int, n_out: int) -> np.ndarray:  # Conv1D weights are [in, out] already
        return ts.read(name, (n_in, n_out))

    layers = []
    for i in range(c.n_layers):
        a = f"{p}h.{i}."
        layers.append(GPT2Layer(
            ln1_g=ts.read(a + "ln_1.weight", (d,)), ln1_b=ts.read(a + "ln_1.bias", (d,)),
            wqkv=conv1d(a + "attn.c_attn.weight", d, 3 * d), bqkv=ts.read(a + "attn.c_attn.bias", (3 * d,)),
            wo=conv1d(a + "attn.c_proj.weight", d, d), bo=ts.read(a + "attn.c_proj.bias", (d,)),
            ln2_g=ts.read(a + "ln_2.weight", (d,)), ln2_b=ts.read(a + "ln_2.bias", (d,)),
            w_fc=conv1d(a + "mlp.c_fc.weight", d, h), b_fc=ts.read(a + "mlp.c_fc.bias", (h,)),
            w_proj=conv1d(a + "mlp.c_proj.weight", h, d), b_proj=ts.read(a + "mlp.c_proj.bias", (d,))))
    return Weights(lm_head=ts.read_t([p + "wte.weight"], [(c.vocab_size, d)]), layers=layers,
                   norm_g=ts.read(p + "ln_f.weight", (d,)), norm_b=ts.read(p + "ln_f.bias", (d,)),
                   pos_embed=ts.read(p + "wpe.weight", (c.max_seq_len, d)))


def _special_id(tok, value) -> int | None:
    """A token id from a tokenizer_config entry: a string, or {"content": ...}."""
    if isinstance(value, dict):
        value = value.get("content")
    if isinstance(value, str) and tok is not None:
        return getattr(tok, "special_tokens", {}).get(value)
    return None


def _add_bos_default(directory: Path, tok_cfg: dict) -> bool:
    """Whether the model's own tokenizer prepends BOS: tokenizer_config's add_bos_token, else the post-processor."""
    if isinstance(tok_cfg.get("add_bos_token"), bool):
        return tok_cfg["add_bos_token"]
    tj = directory / "tokenizer.json"
    if tj.is_file():
        try:
            post = json.loads(tj.read_text("utf-8")).get("post_processor") or {}
        except (OSError, ValueError):
            return False
        procs = post.get("processors", [post]) if isinstance(post, dict) else []
        for proc in procs:
            single = proc.get("single") if isinstance(proc, dict) else None
            if proc.get("type") == "TemplateProcessing" and single and "SpecialToken" in single[0]:
                return True
    return False


def load_tokenizer(directory: Path):
    """nlpkit's BPE tokenizer for the directory, or None when it has no tokenizer files."""
    if not ((directory / "tokenizer.json").is_file() or (directory / "vocab.json").is_file()):
        return None
    try:
        from nlpkit.bpe.tokenizer import Tokenizer
    except ImportError:
        return None
    return Tokenizer.from_dir(directory)


def load_hf_dir(directory: str | Path) -> Model:
    """Load config.json, the safetensors weights and the tokenizer of a Hugging Face model directory."""
    directory = Path(directory)
    cfg_path = directory / "config.json"
    if not cfg_path.is_file():
        raise NlpkitError(f"{directory}: not a model directory (no config.json); pass a Hugging Face model "
                          "directory or a .gguf file")
    config = config_from_hf(_read_json(cfg_path))
    ts = TensorSet(directory)
    weights = load_llama_weights(ts, config) if config.arch == "llama" else load_gpt2_weights(ts, config)
    try:
        tok, tok_error = load_tokenizer(directory), None
    except NlpkitError as e:  # e.g. a tokenizer kind nlpkit cannot read yet: the model still runs on token ids
        tok, tok_error = None, f"its tokenizer is not supported ({e})"
    tok_cfg = _read_json(directory / "tokenizer_config.json") if (directory / "tokenizer_config.json").is_file() else {}
    gen_cfg = _read_json(directory / "generation_config.json") \
        if (directory / "generation_config.json").is_file() else {}
    bos = _special_id(tok, tok_cfg.get("bos_token"))
    eos = _special_id(tok, tok_cfg.get("eos_token"))
    config.bos_id = bos if bos is not None else config.bos_id if config.bos_id is not None else gen_cfg.get("bos_token_id")
    gen_eos = gen_cfg.get("eos_token_id")
    if isinstance(gen_eos, list):  # generation stops at any of them
        config.eos_ids = [*config.eos_ids, *(i for i in gen_eos if isinstance(i, int) and i not in config.eos_ids)]
    gen_eos = gen_eos[0] if isinstance(gen_eos, list) and gen_eos else gen_eos
    config.eos_id = eos if eos is not None else config.eos_id if config.eos_id is not None else gen_eos
    config.add_bos = _add_bos_default(directory, tok_cfg) and config.bos_id is not None
    if tok is not None:
        tok.bos_id, tok.eos_id = config.bos_id, config.eos_id
    model = Model(config, weights, tok, source=str(directory))
    model.tokenizer_error = tok_error
    return model
