"""The transformer forward pass in numpy float32: llama (RMSNorm, RoPE, SwiGLU, GQA) and gpt2.

picoGPT-style: a handful of small functions, each with its shape contract, composed by `Model.forward`.
Weights are plain arrays in one dataclass per layer; the loaders fill them, so nothing here knows about
file formats. Projection matrices are stored `[in, out]` (transposed once at load: for a one-token decode
step OpenBLAS reads that layout about 1.7x faster than `[out, in]`); q/k/v are fused into one matrix and
gate/up into another, so a decode step is four matmuls per layer. A tied embedding is kept once, as the
`[d, V]` output projection; token lookup gathers its columns.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass, field

import numpy as np

from nlpkit.errors import NlpkitError
from nlpkit.lm.cache import KVCache
from nlpkit.lm.config import ModelConfig
from nlpkit.lm.rope import RoPE, apply_rope
from nlpkit.lm.threads import SERIAL, RowPool, single_threaded_blas, workers


@dataclass
class LlamaLayer:
    attn_norm: np.ndarray  # [d]
    wqkv: np.ndarray  # [d, (nh + 2 nkv) hd]  columns: q heads, k heads, v heads
    wo: np.ndarray  # [nh hd, d]
    mlp_norm: np.ndarray  # [d]
    w_gate_up: np.ndarray  # [d, 2 h]  columns: gate, up
    w_down: np.ndarray  # [h, d]
    bqkv: np.ndarray | None = None  # [(nh + 2 nkv) hd]  (attention_bias models)
    bo: np.ndarray | None = None  # [d]


@dataclass
class GPT2Layer:
    ln1_g: np.ndarray  # [d]
    ln1_b: np.ndarray  # [d]
    wqkv: np.ndarray  # [d, 3 d]
    bqkv: np.ndarray  # [3 d]
    wo: np.ndarray  # [d, d]
    bo: np.ndarray  # [d]
    ln2_g: np.ndarray  # [d]
    ln2_b: np.ndarray  # [d]
    w_fc: np.ndarray  # [d, h]
    b_fc: np.ndarray  # [h]
    w_proj: np.ndarray  # [h, d]
    b_proj: np.ndarray  # [d]


@dataclass
class Weights:
    lm_head: np.ndarray  # [d, V]  output projection (the transposed embedding when tied)
    embed: np.ndarray | None = None  # [V, d]  input embedding; None when tied (lookup reads lm_head columns)
    layers: list = field(default_factory=list)  # LlamaLayer | GPT2Layer
    norm_g: np.ndarray | None = None  # [d]  final RMSNorm / LayerNorm weight
    norm_b: np.ndarray | None = None  # [d]  final LayerNorm bias (gpt2)
    pos_embed: np.ndarray | None = None  # [max_seq_len, d]  (gpt2)

    def embed_tokens(self, tokens: np.ndarray) -> np.ndarray:  # [b, t] -> [b, t, d]
        if self.embed is not None:
            return self.embed[tokens]
        b, t = tokens.shape
        return np.take(self.lm_head, tokens.reshape(-1), axis=1).T.reshape(b, t, -1)


# ---------------------------------------------------------------- building blocks

def linear(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:  # [..., in] -> [..., out]
    y = x.reshape(-1, x.shape[-1]) @ w  # w: [in, out]
    if b is not None:
        y += b
    return y.reshape(*x.shape[:-1], w.shape[1])


def rms_norm(x: np.ndarray, g: np.ndarray, eps: float) -> np.ndarray:  # [..., d] -> [..., d]
    ms = np.add.reduce(x * x, axis=-1, keepdims=True) / np.float32(x.shape[-1])
    return x * (1.0 / np.sqrt(ms + np.float32(eps))) * g


def layer_norm(x: np.ndarray, g: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:  # [..., d] -> [..., d]
    mean = np.mean(x, axis=-1, keepdims=True)
    xc = x - mean
    var = np.mean(xc * xc, axis=-1, keepdims=True)
    return xc / np.sqrt(var + np.float32(eps)) * g + b


def silu(x: np.ndarray) -> np.ndarray:  # [...] -> [...]
    d = np.negative(x)  # one temporary, updated in place
    np.exp(d, out=d)
    d += 1.0
    return np.divide(x, d, out=d)


def gelu_tanh(x: np.ndarray) -> np.ndarray:  # [...] -> [...]
    return 0.5 * x * (1.0 + np.tanh(np.float32(np.sqrt(2.0 / np.pi)) * (x + np.float32(0.044715) * x * x * x)))


def softmax_(x: np.ndarray) -> np.ndarray:  # [..., n] -> [..., n], in place
    x -= x.max(axis=-1, keepdims=True)
    np.exp(x, out=x)
    x /= x.sum(axis=-1, keepdims=True)
    return x


def causal_mask(t: int, past: int) -> np.ndarray:  # -> [t, past + t], 0 where visible, -inf above the diagonal
    j = np.arange(past + t)[None, :]
    i = np.arange(t)[:, None] + past
    return np.where(j > i, np.float32(-np.inf), np.float32(0.0)).astype(np.float32)


ATTN_BLOCK = 64  # query rows per block in causal prefill: blocks skip the keys they cannot see
PARALLEL_MIN_TOKENS = 64  # a forward over at least this many positions splits its rows over threads (threads.py)


def _attend(q, k, v, mask):  # [b, kv, g, t, hd], [b, kv, L, hd], [b, kv, L, hd], [t, L] | None -> [b, kv, g, t, hd]
    b, kv, g, t, hd = q.shape
    L = k.shape[2]
    scores = q.reshape(b, kv, g * t, hd) @ k.transpose(0, 1, 3, 2)  # [b, kv, g t, L]
    if mask is not None:
        scores = scores.reshape(b, kv, g, t, L)
        scores += mask  # [t, L] broadcasts over batch, kv heads and group
    softmax_(scores)
    return (scores.reshape(b, kv, g * t, L) @ v).reshape(b, kv, g, t, hd)


# ---------------------------------------------------------------- llama

def swiglu(x: np.ndarray, w: LlamaLayer) -> np.ndarray:  # [b, t, d] -> [b, t, d]
    gu = linear(x, w.w_gate_up)  # [b, t, 2h]
    h = gu.shape[-1] // 2
    act = silu(gu[..., :h])
    act *= gu[..., h:]
    return linear(act, w.w_down)


def block(x, cfg, project, finish, cache, li, mask, pool: RowPool):  # [b, t, d] -> [b, t, d]
    """One transformer block, split at attention so long inputs can use `pool`'s threads (one thread:
    SERIAL): `project(x_rows, s, e, q, k, v)` fills rows s:e of q (scaled), k and v; attention runs on
    query blocks; then `finish(x_rows, heads_rows) -> out_rows` (output projection, residuals, MLP)."""
    b, t, _ = x.shape
    nkv, hd = cfg.n_kv_heads, cfg.head_dim
    g = cfg.n_heads // nkv
    parts = pool.split(t)
    q = np.empty((b, nkv, g, t, hd), np.float32)
    k = np.empty((b, nkv, t, hd), np.float32)
    v = np.empty((b, nkv, t, hd), np.float32)

    def run_project(part):
        s, e = part
        with np.errstate(over="ignore"):  # errstate is per thread
            project(x[:, s:e], s, e, q, k, v)

    pool.map(run_project, parts)
    if cache is not None:
        k, v = cache.write(li, k, v)  # [b, kv, L, hd]
    o = attention(q, k, v, mask, pool)  # [b, kv, g, t, hd]
    out = np.empty_like(x)

    def run_finish(part):
        s, e = part
        with np.errstate(over="ignore"):
            heads = o[:, :, :, s:e].transpose(0, 3, 1, 2, 4).reshape(b, e - s, cfg.n_heads * hd)
            out[:, s:e] = finish(x[:, s:e], heads)

    pool.map(run_finish, parts)
    return out


def llama_rows(w: LlamaLayer, cfg, cos, sin):
    """(project, finish) for `block`: pre-norm attention with RoPE and GQA, then a SwiGLU MLP."""
    nh, nkv, hd, eps = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.norm_eps
    scale = np.float32(1.0 / np.sqrt(hd))

    def project(xr, s, e, q, k, v):  # xr [b, n, d]
        b, n, _ = xr.shape
        qkv = linear(rms_norm(xr, w.attn_norm, eps), w.wqkv, w.bqkv).reshape(b, n, nh + 2 * nkv, hd)
        qk = apply_rope(qkv[:, :, :nh + nkv], cos[s:e], sin[s:e])  # [b, n, nh + nkv, hd]
        np.multiply(qk[:, :, :nh].reshape(b, n, nkv, nh // nkv, hd).transpose(0, 2, 3, 1, 4), scale,
                    out=q[:, :, :, s:e])
        k[:, :, s:e] = qk[:, :, nh:].transpose(0, 2, 1, 3)
        v[:, :, s:e] = qkv[:, :, nh + nkv:].transpose(0, 2, 1, 3)

    def finish(xr, heads):  # [b, n, d], [b, n, nh hd] -> [b, n, d]
        y = xr + linear(heads, w.wo, w.bo)
        return y + swiglu(rms_norm(y, w.mlp_norm, eps), w)

    return project, finish


def attention(q, k, v, mask, pool: RowPool):  # [b, kv, g, t, hd], [b, kv, L, hd] x2, [t, L] -> [b, kv, g, t, hd]
    """Scaled dot-product attention (q already scaled), query heads grouped under their kv head (GQA
    without copying k/v). With a causal mask, queries go in blocks of ATTN_BLOCK rows and each block
    scores only the keys up to its last row, which halves the work of a long prefill; the blocks are
    spread over pool's threads, longest first, each to the least-loaded thread."""
    t, L = q.shape[3], k.shape[2]
    if mask is None or t <= ATTN_BLOCK:
        return _attend(q, k, v, mask)
    blocks = [(s, min(s + ATTN_BLOCK, t)) for s in range(0, t, ATTN_BLOCK)]
    load = [0] * pool.n
    shares: list[list[tuple[int, int]]] = [[] for _ in range(pool.n)]
    for s, e in sorted(blocks, key=lambda se: -se[1]):
        i = load.index(min(load))
        shares[i].append((s, e))
        load[i] += (e - s) * (L - t + e)
    out = np.empty_like(q)

    def run(share):
        for s, e in share:
            visible = L - t + e  # keys seen by the block's last query
            out[:, :, :, s:e] = _attend(q[:, :, :, s:e], k[:, :, :visible], v[:, :, :visible], mask[s:e, :visible])

    pool.map(run, [sh for sh in shares if sh])
    return out


# ---------------------------------------------------------------- gpt2

def gpt2_rows(w: GPT2Layer, cfg):
    """(project, finish) for `block`: GPT-2 (LayerNorm, every head its own kv head, GELU MLP)."""
    nh, hd, eps = cfg.n_heads, cfg.head_dim, cfg.norm_eps
    scale = np.float32(1.0 / np.sqrt(hd))

    def project(xr, s, e, q, k, v):  # xr [b, n, d]
        b, n, _ = xr.shape
        qkv = linear(layer_norm(xr, w.ln1_g, w.ln1_b, eps), w.wqkv, w.bqkv).reshape(b, n, 3, nh, hd)
        np.multiply(qkv[:, :, 0].transpose(0, 2, 1, 3), scale, out=q[:, :, 0, s:e])
        k[:, :, s:e] = qkv[:, :, 1].transpose(0, 2, 1, 3)
        v[:, :, s:e] = qkv[:, :, 2].transpose(0, 2, 1, 3)

    def finish(xr, heads):  # [b, n, d], [b, n, d] -> [b, n, d]
        y = xr + linear(heads, w.wo, w.bo)
        return y + linear(gelu_tanh(linear(layer_norm(y, w.ln2_g, w.ln2_b, eps), w.w_fc, w.b_fc)), w.w_proj, w.b_proj)

    return project, finish


# ---------------------------------------------------------------- the model

class Model:
    """A loaded language model: `forward(tokens[b, t], cache) -> logits[b, t, vocab]`."""

    def __init__(self, config: ModelConfig, weights: Weights, tokenizer=None, source: str = ""):
        self.config, self.weights, self.tokenizer, self.source = config, weights, tokenizer, source
        self.rope = RoPE(config.head_dim, config.rope_theta, config.rope_scaling, config.max_seq_len) \
            if config.arch == "llama" else None

    def set_rope(self, kind: str | None, factor: float | None) -> None:
        """Override RoPE scaling (`--rope-scaling`, `--rope-factor`)."""
        self.config = self.config.with_rope(kind, factor).validate()
        c = self.config
        self.rope = RoPE(c.head_dim, c.rope_theta, c.rope_scaling, c.max_seq_len)

    def new_cache(self, batch: int = 1, max_len: int | None = None) -> KVCache:
        """An empty KV cache; max_len defaults to the model's context (memory is touched only as it fills)."""
        c = self.config
        max_len = max_len or c.max_seq_len
        if c.arch == "gpt2" and max_len > c.max_seq_len:
            raise NlpkitError(f"max_len {max_len} exceeds GPT-2's {c.max_seq_len} learned positions")
        return KVCache(c.n_layers, batch, c.n_kv_heads, max_len, c.head_dim)

    def forward(self, tokens: np.ndarray, cache: KVCache | None = None, *, last_only: bool = False,
                logits_from: int = 0) -> np.ndarray:  # [b, t] -> [b, t - logits_from, V]  ([b, 1, V] if last_only)
        """Logits for every position from `logits_from` on (or the last only). With a cache, positions continue
        at cache.position. Skipping rows nobody reads saves their share of the output projection."""
        tokens = np.asarray(tokens)
        if tokens.ndim == 1:
            tokens = tokens[None, :]
        if tokens.ndim != 2 or tokens.shape[1] == 0:
            raise NlpkitError(f"forward needs a [batch, time] array of token ids with time >= 1, got {tokens.shape}")
        c, w = self.config, self.weights
        b, t = tokens.shape
        if tokens.size and (tokens.min() < 0 or tokens.max() >= c.vocab_size):
            raise NlpkitError(f"token id out of range 0..{c.vocab_size - 1}: {int(tokens.min())}..{int(tokens.max())}")
        past, start = (cache.length, cache.position) if cache is not None else (0, 0)
        if cache is not None and cache.batch != b:
            raise NlpkitError(f"tokens have batch {b} but the KV cache has batch {cache.batch}")
        mask = causal_mask(t, past) if t > 1 else None
        x = w.embed_tokens(tokens)  # [b, t, d]
        n_threads = workers() if t >= PARALLEL_MIN_TOKENS else 1
        with np.errstate(over="ignore"):
            if c.arch == "llama":
                cos, sin = self.rope.cos_sin(start, t)  # [t, hd/2]
            else:
                if start + t > c.max_seq_len:
                    raise NlpkitError(f"GPT-2 has {c.max_seq_len} learned positions; {start + t} tokens do not fit "
                                      f"(use a sliding window: perplexity --context)")
                x = x + w.pos_embed[start:start + t]
            pool = RowPool(n_threads) if n_threads > 1 else SERIAL
            with single_threaded_blas() if n_threads > 1 else nullcontext():
                for li, layer in enumerate(w.layers):
                    rows = llama_rows(layer, c, cos, sin) if c.arch == "llama" else gpt2_rows(layer, c)
                    x = block(x, c, *rows, cache, li, mask, pool)
        if cache is not None:
            cache.advance(t)
        if last_only:
            x = x[:, -1:]
        elif logits_from:
            x = x[:, logits_from:]
        x = rms_norm(x, w.norm_g, c.norm_eps) if c.arch == "llama" else layer_norm(x, w.norm_g, w.norm_b, c.norm_eps)
        return linear(x, w.lm_head)  # [b, t, V]
