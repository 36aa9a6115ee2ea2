"""Load a Hugging Face model directory (config.json + safetensors + tokenizer) into a `Model`.

RoPE families: `weights.read_block_weights` with the tensor names of the family table (q/k/v rows stacked
into one matrix and gate/up into another, transposed once into the `[in, out]` layout the forward pass
uses). GPT-2 stores its projections as Conv1D `[in, out]` already. A tied embedding is kept once, as the `[d, V]` output projection.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from nlpkit.errors import NlpkitError
from nlpkit.lm.transformer import families
from nlpkit.lm.transformer.config import ModelConfig, config_from_hf
from nlpkit.lm.transformer.loaders.native import NativeSource, choose
from nlpkit.lm.transformer.loaders.prepared_weights import load_weights
from nlpkit.lm.transformer.loaders.safetensors import TensorSet
from nlpkit.lm.transformer.loaders.weights import read_block_weights
from nlpkit.lm.transformer.model import GPT2Layer, Model, Weights


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


def load_rope_weights(ts: TensorSet, c: ModelConfig) -> Weights:
    """Weights of any RoPE family into `LlamaLayer`s, named as its `families.FAMILIES` entry says."""
    fam = families.by_model_type(c.family)
    p = _prefix(ts, c.extra.get("weight_prefixes", ()) + fam.hf_prefixes, fam.hf_tensor("embed") + ".weight")
    return read_block_weights(ts, c, lambda role, i: fam.hf_tensor_name(role, i, p), plus_one=fam.norm_plus_one,
                              qkv_per_head=fam.hf_qkv_per_head)


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
        return tok.special_tokens.get(value)
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


def load_hf_dir(directory: str | Path, use_cache: bool | None = None, weights: str | None = None,
                purpose: str | None = None, warn=None) -> Model:
    """Load config.json, the safetensors weights and the tokenizer of a Hugging Face model directory; the
    weights from the prepared-model cache when they were prepared before (use_cache None: unless
    $NLPKIT_NO_CACHE; False: neither read nor write it). With the native layout (`native.choose`) a RoPE
    family's matrices stay as stored (F32/F16/BF16), mapped from the files, and no cache entry is made."""
    directory = Path(directory)
    cfg_path = directory / "config.json"
    if not cfg_path.is_file():
        raise NlpkitError(f"{directory}: not a model directory (no config.json); pass a Hugging Face model "
                          "directory or a .gguf file")
    config = config_from_hf(_read_json(cfg_path))
    ts = TensorSet(directory)
    layout, why = choose(weights, sum(int(np.prod(ts.shape(n), dtype=np.int64)) for n in ts.where), purpose)
    if layout == "native" and not config.uses_rope:
        layout, why = "float32", f"{why}, but GPT-2's weights are read as float32"
    # the weights are mapped and checked (or read and prepared) on a thread while this one reads the tokenizer:
    # numpy's sums and copies release the GIL, the tokenizer's dictionaries are Python
    with ThreadPoolExecutor(1, thread_name_prefix="nlpkit-weights") as pool:
        if layout == "native":
            pending = pool.submit(load_rope_weights, NativeSource(ts), config)
        else:
            pending = pool.submit(load_weights, [cfg_path, *ts.paths()], directory.name, config,
                                  lambda: load_rope_weights(ts, config) if config.uses_rope
                                  else load_gpt2_weights(ts, config), use_cache=use_cache, warn=warn)
        try:
            tok, tok_error = load_tokenizer(directory), None
        except NlpkitError as e:  # e.g. a tokenizer kind nlpkit cannot read yet: the model still runs on token ids
            tok, tok_error = None, f"its tokenizer is not supported ({e})"
        weights, cache = pending.result() if layout != "native" else (pending.result(), "")
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
    model.weights_layout, model.weights_cache = (layout, why), cache
    return model
