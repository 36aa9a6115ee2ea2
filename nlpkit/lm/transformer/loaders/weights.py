"""The RoPE decoder block's weights from either file format: one reader, told by the family table how the
format names each tensor role, so a family's tensors are listed once (`families.py`) and read once (here).

Both formats' tensor sets offer the same three calls: `name in ts`, `ts.read(name, shape)` (float32, C order)
and `ts.read_t(names, shapes)` (the transposes of `[out_i, in]` matrices side by side: one `[in, sum out_i]`
matrix, the layout the forward pass multiplies by). A native source (`loaders/native.py`) answers `read_t`
and 2-D `read` with `StoredMatrix`es instead (rows as stored; its row permutations replace the column ones).
"""

from __future__ import annotations

from typing import Callable, Protocol

import numpy as np

from nlpkit.errors import NlpkitError
from nlpkit.lm.transformer.config import ModelConfig
from nlpkit.lm.transformer.model import LlamaLayer, Weights
from nlpkit.lm.transformer.stored_weights import is_stored

# role, layer (None: the model's own tensors) -> the tensor's name without ".weight" / ".bias" (None: no such role)
Namer = Callable[[str, "int | None"], "str | None"]


class TensorSource(Protocol):
    def __contains__(self, name: str) -> bool: ...

    def read(self, name: str, shape: tuple[int, ...]) -> np.ndarray: ...

    def read_t(self, names: list[str], shapes: list[tuple[int, int]]) -> np.ndarray: ...


def unpermute_qk(w: np.ndarray, n_heads: int) -> np.ndarray:
    """llama.cpp's interleaved RoPE order back to Hugging Face's rotate-half order, along the last axis
    (the output columns of an `[in, out]` matrix, or a bias).  # [..., nh hd] -> [..., nh hd]"""
    *lead, n = w.shape
    return w.reshape(*lead, n_heads, n // n_heads // 2, 2).swapaxes(-1, -2).reshape(w.shape)


def heads_grouped(w: np.ndarray, n_heads: int) -> np.ndarray:
    """Fused q/k/v columns grouped per head `[nh, 3, hd]` (GPT-NeoX) regrouped as q heads, k heads, v heads.
    # [..., nh 3 hd] -> [..., 3 nh hd]"""
    *lead, n = w.shape
    return np.ascontiguousarray(w.reshape(*lead, n_heads, 3, n // n_heads // 3).swapaxes(-3, -2).reshape(w.shape))


def read_block_weights(ts: TensorSource, c: ModelConfig, name: Namer, *, plus_one: bool = False,
                       qk_permuted: bool = False, qkv_per_head: bool = False) -> Weights:
    """Every layer's weights of the RoPE decoder block, as `c` says the block uses them (norm placement, biases,
    q/k norms, gated or plain MLP). `plus_one`: norm gains are stored as w for a (1 + w) scale (Gemma's
    Hugging Face weights); `qk_permuted`: q/k rows in llama.cpp's interleaved RoPE order; `qkv_per_head`: a
    fused q/k/v grouped per head."""
    d, nh, nkv, hd, h = c.dim, c.n_heads, c.n_kv_heads, c.head_dim, c.hidden_dim
    one = np.float32(1.0)
    layer_norm = c.norm == "layer"

    def full(role: str, i: int | None, suffix: str = ".weight") -> str:
        n = name(role, i)
        if n is None:
            raise NlpkitError(f"model weights: no {role} tensor for a {c.family} model")
        return n + suffix

    def has(role: str, i: int | None) -> bool:
        n = name(role, i)
        return n is not None and n + ".weight" in ts

    def norm(role: str, i: int | None, size: int = d) -> np.ndarray:  # -> [size]
        g = ts.read(full(role, i), (size,))
        return g + one if plus_one else g

    def norm_b(role: str, i: int | None) -> np.ndarray | None:  # -> [d]
        return ts.read(full(role, i, ".bias"), (d,)) if layer_norm else None

    o_bias = c.o_bias if c.o_bias is not None else c.attention_bias
    q_rows, kv_rows = nh * hd, nkv * hd
    layers = []
    for i in range(c.n_layers):
        if has("qkv", i):  # fused: rows q heads, k heads, v heads (or per head)
            wqkv = ts.read_t([full("qkv", i)], [(q_rows + 2 * kv_rows, d)])
            bqkv = ts.read(full("qkv", i, ".bias"), (q_rows + 2 * kv_rows,)) if c.attention_bias else None
            if qkv_per_head:
                if is_stored(wqkv):  # its rows regrouped as the float32 layout's columns are
                    wqkv.permute_rows(heads_grouped(np.arange(wqkv.rows)[None], nh)[0])
                else:
                    wqkv = heads_grouped(wqkv, nh)
                bqkv = heads_grouped(bqkv, nh) if bqkv is not None else None
        else:
            wqkv = ts.read_t([full(r, i) for r in "qkv"], [(q_rows, d), (kv_rows, d), (kv_rows, d)])
            bqkv = np.concatenate([ts.read(full(r, i, ".bias"), (n,))
                                   for r, n in zip("qkv", (q_rows, kv_rows, kv_rows))]) if c.attention_bias else None
        if qk_permuted and is_stored(wqkv):  # [q | k | v, d]: the same permutation of its rows
            order = np.arange(wqkv.rows)
            order[:q_rows] = unpermute_qk(order[None, :q_rows], nh)[0]
            order[q_rows:q_rows + kv_rows] = unpermute_qk(order[None, q_rows:q_rows + kv_rows], nkv)[0]
            wqkv.permute_rows(order)
        elif qk_permuted:  # [d, q | k | v]: q and k columns back to rotate-half order
            wqkv[:, :q_rows] = unpermute_qk(wqkv[:, :q_rows], nh)
            wqkv[:, q_rows:q_rows + kv_rows] = unpermute_qk(wqkv[:, q_rows:q_rows + kv_rows], nkv)
        if qk_permuted:
            if bqkv is not None:
                bqkv[:q_rows] = unpermute_qk(bqkv[:q_rows], nh)
                bqkv[q_rows:q_rows + kv_rows] = unpermute_qk(bqkv[q_rows:q_rows + kv_rows], nkv)
        if not c.gated_mlp:
            w_gate_up = ts.read_t([full("up", i)], [(h, d)])
        elif has("gate", i) or name("gate_up", i) is None:
            w_gate_up = ts.read_t([full("gate", i), full("up", i)], [(h, d), (h, d)])
        else:  # gate and up fused (phi3)
            w_gate_up = ts.read_t([full("gate_up", i)], [(2 * h, d)])
        layer = LlamaLayer(
            attn_norm=norm("attn_norm", i) if c.pre_norm else None, wqkv=wqkv, bqkv=bqkv,
            wo=ts.read_t([full("o", i)], [(d, q_rows)]), bo=ts.read(full("o", i, ".bias"), (d,)) if o_bias else None,
            mlp_norm=norm("mlp_norm", i) if c.pre_norm else None, w_gate_up=w_gate_up,
            w_down=ts.read_t([full("down", i)], [(d, h)]),
            b_up=ts.read(full("up", i, ".bias"), (h,)) if c.mlp_bias else None,
            b_down=ts.read(full("down", i, ".bias"), (d,)) if c.mlp_bias else None)
        if c.pre_norm:
            layer.attn_norm_b, layer.mlp_norm_b = norm_b("attn_norm", i), norm_b("mlp_norm", i)
        if c.post_norm:
            layer.attn_post_norm, layer.mlp_post_norm = norm("attn_post_norm", i), norm("mlp_post_norm", i)
        if c.qk_norm:
            q_size, k_size = (hd, hd) if c.qk_norm == "head" else (q_rows, kv_rows)
            layer.q_norm, layer.k_norm = norm("q_norm", i, q_size), norm("k_norm", i, k_size)
        layers.append(layer)
    if not c.tie_embeddings and not has("lm_head", None):
        c.tie_embeddings = True  # some exports drop the output projection when it equals the embedding
    if c.tie_embeddings:
        embed, lm_head = None, ts.read_t([full("embed", None)], [(c.vocab_size, d)])
    else:
        embed = ts.read(full("embed", None), (c.vocab_size, d))
        lm_head = ts.read_t([full("lm_head", None)], [(c.vocab_size, d)])
    return Weights(lm_head=lm_head, embed=embed, layers=layers, norm_g=norm("final_norm", None),
                   norm_b=norm_b("final_norm", None))
