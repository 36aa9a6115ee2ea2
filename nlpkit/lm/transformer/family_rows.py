"""Each family's layer as (project, finish) closures for `model.block`: the RoPE block and GPT-2's.

`llama_rows` is the RoPE block (Llama's: RMSNorm, RoPE, SwiGLU, GQA) with every family's options from
`ModelConfig` (norm form and placement, activation, biases, q/k norms, partial rotary, NoPE layers), decided
once per layer when the closures are built; `gpt2_rows` is GPT-2's (LayerNorm, GELU MLP). `Model.layer_rows`
builds them once per model.
"""

from __future__ import annotations

import numpy as np

from nlpkit.lm.transformer.layer_ops import ACTIVATIONS, gelu_tanh, layer_norm, linear, rms_norm, silu, silu_times
from nlpkit.lm.transformer.layer_weights import GPT2Layer, LlamaLayer
from nlpkit.lm.transformer.rope import apply_rope, apply_rope_partial


# ---------------------------------------------------------------- llama

def swiglu(x: np.ndarray, w: LlamaLayer, act=silu, pad: bool = True) -> np.ndarray:  # [b, t, d] -> [b, t, d]
    gu = linear(x, w.w_gate_up, pad=pad)  # [b, t, 2h]
    h = gu.shape[-1] // 2
    if act is silu:  # in row blocks that stay in cache (`silu_times`: the same bits)
        a = silu_times(gu.reshape(-1, 2 * h), h).reshape(*gu.shape[:-1], h)
    else:
        a = act(gu[..., :h])
        a *= gu[..., h:]
    return linear(a, w.w_down, pad=pad)


def plain_mlp(x: np.ndarray, w: LlamaLayer, act, pad: bool = True) -> np.ndarray:  # [b, t, d] -> [b, t, d]  (gpt_neox)
    return linear(act(linear(x, w.w_gate_up, w.b_up, pad)), w.w_down, w.b_down, pad)


def llama_rows(w: LlamaLayer, cfg, li: int = 0):
    """(project, finish) for `block`: pre-norm attention with RoPE and GQA, then a SwiGLU MLP — and each
    family's variations of it (`cfg`'s options; layer `li`'s own ones), chosen here once per layer (built once
    per model, see Model.layer_rows). Both take `pad`: the products' rows padded (`products.matmul_rows`) or,
    False, as they are (a batched decode step)."""
    nh, nkv, hd, eps = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.norm_eps
    scale = np.float32(cfg.query_scale if cfg.query_scale is not None else 1.0 / np.sqrt(hd))
    if cfg.norm == "layer":
        def norm(x, g, b):
            return layer_norm(x, g, b, eps)
    else:
        def norm(x, g, b):
            return rms_norm(x, g, eps)
    rot = cfg.rotary_dim or hd
    rope = apply_rope if rot == hd else lambda x, c, s_: apply_rope_partial(x, c, s_, rot)
    if cfg.rope_layers is not None and not cfg.rope_layers[li]:  # a NoPE layer (smollm3): no rotation
        def rope(x, c, s_):
            return x
    pre_norm, post_norm = cfg.pre_norm, cfg.post_norm
    qk_norm = cfg.qk_norm
    act = ACTIVATIONS[cfg.act]
    if cfg.gated_mlp:
        def mlp(x, pad):
            return swiglu(x, w, act, pad)
    else:
        def mlp(x, pad):
            return plain_mlp(x, w, act, pad)

    def project(xr, s, e, q, k, v, cs, pad=True):  # xr [b, n, d], cs = (cos, sin) [t, rot/2] each
        b, n, _ = xr.shape
        cos, sin = cs
        h = norm(xr, w.attn_norm, w.attn_norm_b) if pre_norm else xr
        qkv = linear(h, w.wqkv, w.bqkv, pad)  # [b, n, (nh + 2 nkv) hd]
        if qk_norm == "full":  # olmo2: RMSNorm over all of q and all of k
            qkv[..., :nh * hd] = rms_norm(qkv[..., :nh * hd], w.q_norm, eps)
            qkv[..., nh * hd:(nh + nkv) * hd] = rms_norm(qkv[..., nh * hd:(nh + nkv) * hd], w.k_norm, eps)
        qkv = qkv.reshape(b, n, nh + 2 * nkv, hd)
        if qk_norm == "head":  # qwen3, gemma3: RMSNorm of each head
            qkv[:, :, :nh] = rms_norm(qkv[:, :, :nh], w.q_norm, eps)
            qkv[:, :, nh:nh + nkv] = rms_norm(qkv[:, :, nh:nh + nkv], w.k_norm, eps)
        qk = rope(qkv[:, :, :nh + nkv], cos[s:e], sin[s:e])  # [b, n, nh + nkv, hd]
        np.multiply(qk[:, :, :nh].reshape(b, n, nkv, nh // nkv, hd).transpose(0, 2, 3, 1, 4), scale,
                    out=q[:, :, :, s:e])
        k[:, :, s:e] = qk[:, :, nh:].transpose(0, 2, 1, 3)
        v[:, :, s:e] = qkv[:, :, nh + nkv:].transpose(0, 2, 1, 3)

    if cfg.parallel_residual:
        def finish(xr, heads, pad=True):  # [b, n, d], [b, n, nh hd] -> [b, n, d]
            y = mlp(norm(xr, w.mlp_norm, w.mlp_norm_b), pad)  # (mlp + attention) + x, summed in place
            y += linear(heads, w.wo, w.bo, pad)
            y += xr
            return y
    elif not post_norm:
        def finish(xr, heads, pad=True):  # the residual adds in place (a + b is b + a, bit for bit)
            y = linear(heads, w.wo, w.bo, pad)
            y += xr
            m = mlp(norm(y, w.mlp_norm, w.mlp_norm_b), pad)
            m += y
            return m
    else:  # gemma2/3 (pre and post norms), olmo2 (post norms only)
        def finish(xr, heads, pad=True):
            y = rms_norm(linear(heads, w.wo, w.bo, pad), w.attn_post_norm, eps)
            y += xr  # the residual adds in place (a + b is b + a, bit for bit)
            m = mlp(norm(y, w.mlp_norm, w.mlp_norm_b) if pre_norm else y, pad)
            m = rms_norm(m, w.mlp_post_norm, eps)
            m += y
            return m

    return project, finish


# ---------------------------------------------------------------- gpt2

def gpt2_rows(w: GPT2Layer, cfg, li: int = 0):
    """(project, finish) for `block`: GPT-2 (LayerNorm, every head its own kv head, GELU MLP)."""
    nh, hd, eps = cfg.n_heads, cfg.head_dim, cfg.norm_eps
    scale = np.float32(1.0 / np.sqrt(hd))

    def project(xr, s, e, q, k, v, cs=None, pad=True):  # xr [b, n, d]
        b, n, _ = xr.shape
        qkv = linear(layer_norm(xr, w.ln1_g, w.ln1_b, eps), w.wqkv, w.bqkv, pad).reshape(b, n, 3, nh, hd)
        np.multiply(qkv[:, :, 0].transpose(0, 2, 1, 3), scale, out=q[:, :, 0, s:e])
        k[:, :, s:e] = qkv[:, :, 1].transpose(0, 2, 1, 3)
        v[:, :, s:e] = qkv[:, :, 2].transpose(0, 2, 1, 3)

    def finish(xr, heads, pad=True):  # [b, n, d], [b, n, d] -> [b, n, d]
        y = xr + linear(heads, w.wo, w.bo, pad)
        return y + linear(gelu_tanh(linear(layer_norm(y, w.ln2_g, w.ln2_b, eps), w.w_fc, w.b_fc, pad)), w.w_proj,
                          w.b_proj, pad)

    return project, finish
