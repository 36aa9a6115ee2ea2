"""The layer loop, written once: every forward of the engine runs `run_layers`.

A prefill, a scoring forward or a decode step through one KV cache (`Model.forward`), several prompts prefilled in one
packed forward and a decode step of several sequences each with its own cache (`batch_decoding`) differ only in
their attention: where a layer's new keys and values go and which keys each query sees. That is an `Attention`
(nanoGPT's one Block; llama.cpp's one batch for single and batched decoding); the rest of a layer is the same
`layer`: each row's projections (`project`), attention, then the output projection, residuals and MLP (`finish`),
the per-family closures `Model.layer_rows` builds, the rows split over a `RowPool`'s threads at multiples of
`products.ROW_ALIGN` (each share on one BLAS thread: the same bits as one thread).
"""

from __future__ import annotations

from typing import Callable, Protocol

import numpy as np

from nlpkit.lm.threads import SERIAL, RowPool
from nlpkit.lm.transformer.attention_ops import attention, packed_attention
from nlpkit.lm.transformer.cache import KVCache
from nlpkit.lm.transformer.layer_ops import causal_mask
from nlpkit.lm.transformer.packing import Packing
from nlpkit.lm.transformer.products import aligned_split

ROW_MIN = 32  # a thread's share of a layer's rows is never under this (fewer would only add hand-offs)


class Attention(Protocol):
    """What a forward's layers attend to: `tables(li)` the RoPE (cos, sin) of layer li's rows (None: GPT-2),
    `keys_values(li, b, t)` the [b, kv, t, hd] buffers its projections write the new keys and values into (a KV
    cache's slots, or new arrays), `attend(li, q, k, v, keep)` the attention output of its query rows from `keep` on:
    [b, kv, g, t - keep, hd]."""

    def tables(self, li: int) -> tuple[np.ndarray, np.ndarray] | None: ...

    def keys_values(self, li: int, b: int, t: int) -> tuple[np.ndarray, np.ndarray]: ...

    def attend(self, li: int, q: np.ndarray, k: np.ndarray, v: np.ndarray, keep: int) -> np.ndarray: ...


def layer(x: np.ndarray, cfg, project, finish, att: Attention, li: int, pool: RowPool = SERIAL,
          keep: int = 0, pad: bool = True) -> np.ndarray:  # [b, t, d] -> [b, t - keep, d]
    """One transformer layer: `project(x_rows, s, e, q, k, v, cs, pad)` fills rows s:e of q (scaled), k and v; `att`
    attends; `finish(x_rows, heads_rows, pad) -> out_rows`. Rows before `keep` get keys and values only (the last
    layer, when nobody reads their output); each returned row is the same bits as without. `pad` False: every
    share's products on its rows as they are, unpadded (`products.matmul_rows`: a batched decode step's)."""
    b, t, _ = x.shape
    nkv, hd = cfg.n_kv_heads, cfg.head_dim
    q = np.empty((b, nkv, cfg.n_heads // nkv, t, hd), np.float32)
    k, v = att.keys_values(li, b, t)
    cs = att.tables(li)
    parts = aligned_split(t, pool.n, ROW_MIN)
    if len(parts) == 1:  # short inputs and decode steps: no closures, no thread hand-offs
        project(x, 0, t, q, k, v, cs, pad)
    else:
        def run_project(part):
            s, e = part
            with np.errstate(over="ignore"):  # errstate is per thread
                project(x[:, s:e], s, e, q, k, v, cs, pad)

        pool.map(run_project, parts)
    o = att.attend(li, q, k, v, keep)  # [b, kv, g, t - keep, hd]
    parts = aligned_split(t - keep, pool.n, ROW_MIN)
    if len(parts) == 1:
        heads = o.transpose(0, 3, 1, 2, 4).reshape(b, t - keep, cfg.n_heads * hd)
        return finish(x[:, keep:], heads, pad)
    out = np.empty((b, t - keep, x.shape[2]), np.float32)  # C order, as the one-share output

    def run_finish(part):
        s, e = part
        with np.errstate(over="ignore"):
            heads = o[:, :, :, s:e].transpose(0, 3, 1, 2, 4).reshape(b, e - s, cfg.n_heads * hd)
            out[:, s:e] = finish(x[:, keep + s:keep + e], heads, pad)

    pool.map(run_finish, parts)
    return out


def run_layers(model, x: np.ndarray, att: Attention, pool: RowPool = SERIAL,
               keep: int = 0, pad: bool = True) -> np.ndarray:  # [b, t, d] -> [b, t - keep, d]
    """Every layer of `model` on x, in order (`layer`; the last one skips the rows before `keep`; `pad` False: the
    products unpadded, a batched decode step's). With native weights each layer's stored matrices are expanded
    into the scratch its closures read just before it runs: this forward's own set (`Model.layer_sets().held()`:
    forwards on other threads at once use others)."""
    with model.layer_sets().held() as (layers, expander):
        for li, (project, finish) in enumerate(layers):
            if expander is not None:
                expander.expand(li, x.shape[0] * x.shape[1] if pad else 1)  # unpadded: as one row
            x = layer(x, model.config, project, finish, att, li, pool, keep if li == len(layers) - 1 else 0, pad)
    return x


# ---------------------------------------------------------------- the attentions

class CacheAttention:
    """One sequence batch through one optional KV cache (`Model.forward`): per layer a plan (mask | Packing | None,
    softcap, RoPE tables); the new keys and values written into the cache's slots, the queries against all its
    filled keys (a causal prefill in query blocks split over `pool`'s threads, a packed forward per segment)."""

    def __init__(self, plans: list[tuple], cache: KVCache | None, pool: RowPool, shape: tuple[int, int],
                 slots: np.ndarray | None = None):
        self.plans, self.cache, self.pool, self.shape = plans, cache, pool, shape  # shape: (kv heads, head dim)
        self.slots = slots  # a packed forward's: token i's row in the layer's products (`Packing.slots`)

    def tables(self, li: int):
        return self.plans[li][2]

    def keys_values(self, li: int, b: int, t: int):
        if self.cache is not None:
            return self.cache.slots(li, t)  # [b, kv, t, hd] views: written in place
        kv, hd = self.shape
        return np.empty((b, kv, t, hd), np.float32), np.empty((b, kv, t, hd), np.float32)

    def attend(self, li, q, k, v, keep):
        if self.cache is not None:
            k, v = self.cache.filled(li, q.shape[3])  # [b, kv, L, hd]
        mask, softcap, _ = self.plans[li]
        if self.slots is None:
            return attention(q[:, :, :, keep:], k, v, mask, self.pool, softcap, keep)
        if isinstance(mask, Packing) and not mask.attends_itself:  # read at the slots, no gather
            return packed_attention(q, k, v, mask, self.pool, softcap, slots=self.slots)
        sl = self.slots  # the packed tokens' rows, gathered in order: the segments as the Packing lays them out
        o = np.zeros_like(q)  # padding rows stay zero
        o[:, :, :, sl] = attention(q[:, :, :, sl], k[:, :, sl], v[:, :, sl], mask, self.pool, softcap)
        return o


class OwnCaches:
    """What `PromptsAttention` and a batched decode step's `kv_pool.PooledStepAttention` share: each sequence has its
    own KV cache, so a layer's new keys and values go to fresh arrays (`attend` writes them into the caches), and
    `layer_opts(li)` -> (RoPE tables, sliding window, softcap) gives the RoPE tables."""

    layer_opts: Callable
    shape: tuple[int, int]

    def tables(self, li: int):
        return self.layer_opts(li)[0]

    def keys_values(self, li: int, b: int, t: int):
        kv, hd = self.shape
        return np.empty((b, kv, t, hd), np.float32), np.empty((b, kv, t, hd), np.float32)


class PromptsAttention(OwnCaches):
    """Prompts packed end to end, each with its own KV cache (`DecodingBatch.join_many`): rows `spans`; each prompt's
    keys and values written into its cache, its queries under the causal mask its own prefill uses. Padding rows
    between prompts (`packing`) get zeros. `layer_opts(li)` -> (RoPE tables, sliding window, softcap)."""

    def __init__(self, spans: list[tuple[int, int]], caches: list[KVCache], layer_opts, shape: tuple[int, int]):
        self.spans, self.caches, self.layer_opts, self.shape = spans, caches, layer_opts, shape

    def attend(self, li, q, k, v, keep):
        _, window, softcap = self.layer_opts(li)
        o = np.zeros_like(q)
        for (s, e), cache in zip(self.spans, self.caches):
            keys, values = cache.write(li, k[:, :, s:e], v[:, :, s:e])  # [1, kv, n, hd]
            n = e - s
            mask = None if n == 1 else causal_mask(n, 0, window if window and n > window else None)
            o[:, :, :, s:e] = attention(np.ascontiguousarray(q[:, :, :, s:e]), keys, values, mask, SERIAL, softcap)
        return o[:, :, :, keep:]
