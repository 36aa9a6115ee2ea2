"""Load a GGUF file (llama architecture) into a `Model`: metadata -> config, tensors dequantized by `gguf`.

GGUF stores Q and K projection rows in llama.cpp's interleaved RoPE order: convert_hf_to_gguf permutes
each head's rows `[2, hd/2] -> [hd/2, 2]`. The inverse permutation here brings them back to the
Hugging Face rotate-half layout, so `rope.py` has one layout. The tokenizer (GPT-2-style byte-level
BPE) is rebuilt from `tokenizer.ggml.tokens` / `merges`.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from nlpkit.errors import NlpkitError
from nlpkit.lm.config import ModelConfig
from nlpkit.lm.model import LlamaLayer, Model, Weights

_MAX_COUNT = 1 << 20  # tensors or metadata keys; real files have hundreds


def _check_header(path: Path) -> None:
    """Reject absurd counts before the gguf reader walks them."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(24)
    if len(head) < 24:
        raise NlpkitError(f"{path}: truncated GGUF file ({size} bytes)")
    version, n_tensors, n_kv = struct.unpack("<IQQ", head[4:24])
    if version not in (2, 3):
        raise NlpkitError(f"{path}: GGUF version {version} is not supported (2 or 3)")
    if n_tensors > _MAX_COUNT or n_kv > _MAX_COUNT or (n_tensors + n_kv) * 8 > size:
        raise NlpkitError(f"{path}: GGUF header claims {n_tensors} tensors and {n_kv} metadata keys, "
                          f"impossible in {size} bytes (corrupt file)")


def _fields(reader) -> dict:
    out = {}
    for key, field in reader.fields.items():
        if key.startswith("GGUF."):
            continue
        try:
            out[key] = field.contents()
        except Exception:  # an odd value type we do not need
            continue
    return out


def _int(meta: dict, key: str, default=None) -> int:
    value = meta.get(key, default)
    if value is None:
        raise NlpkitError(f"GGUF metadata: {key} is missing")
    if isinstance(value, list):
        value = value[0] if value else default
    return int(value)


def config_from_gguf(meta: dict, n_vocab_tokens: int | None) -> ModelConfig:
    arch = meta.get("general.architecture")
    if arch != "llama":
        raise NlpkitError(f"unsupported GGUF architecture {arch!r} (nlpkit loads llama-architecture GGUF files)")
    a = arch + "."
    dim, n_heads = _int(meta, a + "embedding_length"), _int(meta, a + "attention.head_count")
    head_dim = _int(meta, a + "attention.key_length", dim // n_heads if n_heads else 0)
    scaling = None
    kind = meta.get(a + "rope.scaling.type")
    if kind and kind != "none":
        factor = float(meta.get(a + "rope.scaling.factor", 1.0))
        kind = {"linear": "linear", "yarn": "yarn"}.get(kind)
        if kind is None:
            raise NlpkitError(f"GGUF metadata: rope scaling {meta[a + 'rope.scaling.type']!r} is not supported")
        scaling = {"rope_type": kind, "factor": factor}
        if kind == "yarn":
            scaling["original_max_position_embeddings"] = _int(meta, a + "rope.scaling.original_context_length")
    config = ModelConfig(
        arch="llama", vocab_size=_int(meta, a + "vocab_size", n_vocab_tokens), dim=dim,
        n_layers=_int(meta, a + "block_count"), n_heads=n_heads,
        n_kv_heads=_int(meta, a + "attention.head_count_kv", n_heads), head_dim=head_dim,
        hidden_dim=_int(meta, a + "feed_forward_length"), max_seq_len=_int(meta, a + "context_length", 2048),
        norm_eps=float(meta.get(a + "attention.layer_norm_rms_epsilon", 1e-5)),
        rope_theta=float(meta.get(a + "rope.freq_base", 10000.0)), rope_scaling=scaling)
    rot = meta.get(a + "rope.dimension_count")
    if rot is not None and int(rot) != head_dim:
        raise NlpkitError(f"GGUF metadata: partial rotary embeddings (rope.dimension_count {rot} < head_dim "
                          f"{head_dim}) are not supported")
    bos, eos = meta.get("tokenizer.ggml.bos_token_id"), meta.get("tokenizer.ggml.eos_token_id")
    config.bos_id = int(bos) if bos is not None else None
    config.eos_id = int(eos) if eos is not None else None
    config.add_bos = bool(meta.get("tokenizer.ggml.add_bos_token", False)) and config.bos_id is not None
    return config.validate()


def unpermute_qk(w: np.ndarray, n_heads: int) -> np.ndarray:
    """llama.cpp's interleaved rows back to HF rotate-half rows.  # [nh hd, d] -> [nh hd, d]"""
    rows, d = w.shape
    return w.reshape(n_heads, rows // n_heads // 2, 2, d).swapaxes(1, 2).reshape(rows, d)


class _Tensors:
    def __init__(self, reader, path: Path):
        self.path = path
        self.by_name = {t.name: t for t in reader.tensors}

    def __contains__(self, name: str) -> bool:
        return name in self.by_name

    def read(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        from gguf.quants import dequantize
        t = self.by_name.get(name)
        if t is None:
            raise NlpkitError(f"{self.path}: tensor {name} is missing")
        got = tuple(int(x) for x in reversed(t.shape.tolist()))  # GGML lists dims innermost first
        if got != tuple(shape):
            raise NlpkitError(f"{self.path}: tensor {name} has shape {list(got)}, the metadata implies {list(shape)}")
        try:
            arr = dequantize(t.data, t.tensor_type)
        except NotImplementedError:
            raise NlpkitError(f"{self.path}: tensor {name} uses {t.tensor_type.name}, which gguf cannot dequantize") \
                from None
        return np.ascontiguousarray(arr, dtype=np.float32).reshape(shape)


def _tokenizer(meta: dict, c: ModelConfig):
    """nlpkit's byte-level BPE tokenizer from GGUF metadata (GPT-2-style models), or None."""
    if meta.get("tokenizer.ggml.model") != "gpt2" or "tokenizer.ggml.tokens" not in meta:
        return None
    from nlpkit.bpe.formats import from_gguf_metadata
    return from_gguf_metadata(meta["tokenizer.ggml.tokens"], meta.get("tokenizer.ggml.merges", []),
                              pre=meta.get("tokenizer.ggml.pre"), token_types=meta.get("tokenizer.ggml.token_type"),
                              bos_id=c.bos_id, eos_id=c.eos_id)


def load_gguf(path: str | Path) -> Model:
    """Read a llama-architecture GGUF file; quantized tensors are dequantized to float32 once, at load."""
    from gguf import GGUFReader
    path = Path(path)
    _check_header(path)
    try:
        reader = GGUFReader(path)
    except Exception as e:  # the reader raises ValueError/IndexError/... on malformed files
        raise NlpkitError(f"{path}: not a readable GGUF file ({type(e).__name__}: {e})") from None
    meta = _fields(reader)
    tokens = meta.get("tokenizer.ggml.tokens")
    c = config_from_gguf(meta, len(tokens) if isinstance(tokens, list) else None)
    ts = _Tensors(reader, path)
    d, nh, nkv, hd, h = c.dim, c.n_heads, c.n_kv_heads, c.head_dim, c.hidden_dim
    layers = []
    for i in range(c.n_layers):
        a = f"blk.{i}."
        q = unpermute_qk(ts.read(a + "attn_q.weight", (nh * hd, d)), nh)
        k = unpermute_qk(ts.read(a + "attn_k.weight", (nkv * hd, d)), nkv)
        v = ts.read(a + "attn_v.weight", (nkv * hd, d))
        gate, up = ts.read(a + "ffn_gate.weight", (h, d)), ts.read(a + "ffn_up.weight", (h, d))
        layers.append(LlamaLayer(  # [out, in] -> [in, out], fused
            attn_norm=ts.read(a + "attn_norm.weight", (d,)), wqkv=np.concatenate([q, k, v]).T.copy(),
            wo=ts.read(a + "attn_output.weight", (d, nh * hd)).T.copy(), mlp_norm=ts.read(a + "ffn_norm.weight", (d,)),
            w_gate_up=np.concatenate([gate, up]).T.copy(), w_down=ts.read(a + "ffn_down.weight", (d, h)).T.copy()))
        del q, k, v, gate, up
    c.tie_embeddings = "output.weight" not in ts
    if c.tie_embeddings:
        embed, lm_head = None, ts.read("token_embd.weight", (c.vocab_size, d)).T.copy()
    else:
        embed = ts.read("token_embd.weight", (c.vocab_size, d))
        lm_head = ts.read("output.weight", (c.vocab_size, d)).T.copy()
    weights = Weights(lm_head=lm_head, embed=embed, layers=layers, norm_g=ts.read("output_norm.weight", (d,)))
    tok = _tokenizer(meta, c)
    del reader
    return Model(c, weights, tok, source=str(path))
