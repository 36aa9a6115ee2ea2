"""Many sequences of different lengths decoded together: one forward per step for all of them (continuous batching).

A decode step of one sequence is a product of a one-row vector with every weight matrix: it is bound by reading
the weights from memory, not by the arithmetic. `DecodingBatch` advances every live sequence in one step whose
matrix products have one row per sequence, so the weights are read once for all of them:

- each sequence has its own KV cache (batch 1, as long as its prompt and continuation need: no padding to the
  longest prompt), a slot of the batch's `kv_pool.KVPool`, and its own position, so RoPE angles, learned positions
  and sliding windows are its own;
- a step gathers one new token per sequence into a `[1, n, d]` input (the rows are sequences, not time steps),
  runs each layer's projections and MLP (`model.layer_rows()`, the closures `Model.forward` runs) on all n rows at
  once, and attention for all of them in one batch of products over the pool's slots, each query against its own
  keys only (masked past its own length: `kv_pool.PooledStepAttention`);
- sequences `join` (their prompt prefilled alone, `Model.forward` with their own cache: the same bits as a
  one-sequence prefill) and `leave` between steps, so a driver keeps the batch full (`nlpkit.lm.generation.batch_generation`);
- sequences joining together (`join_many`) are prefilled in one packed forward: their prompts end to end, each
  layer's products over all their rows at once (split over the free CPUs in ROW_MIN-row shares, one BLAS thread, as
  a long prefill is), attention per prompt under its own causal mask, each prompt's keys and values written into
  its own cache. A short prompt's prefill alone reads every weight for a few rows, on one CPU (under 64 rows):
  24 prompts of 3-30 tokens prefilled 1.7x faster packed (SmolLM2-135M, 2 CPUs); prompts of a hundred tokens and
  more are products bound by the arithmetic already, and gain a few percent only.

The logits of a row do not depend on the other rows' tokens, but a product with n rows may sum in another order
than a one-row product (BLAS picks other kernels), so a row's logits can differ from one-sequence decoding in their
last bits: greedy outputs are equal except at near-ties (tests/lm/test_batched_decoding.py measures it). So a step's
products run on its n rows as they are (`run_layers(..., pad=False)`, down to `products.matmul_rows`), not padded as
a scoring forward's are to fix a row's bits: 16 rows padded to 24 cost an eighth of the step (SmolLM2-135M, 2 CPUs).
"""

from __future__ import annotations

import functools
import weakref
from dataclasses import dataclass
from typing import Hashable, Sequence

import numpy as np

from nlpkit.errors import NlpkitError
from nlpkit.lm.transformer.cache import KVCache
from nlpkit.lm.transformer.model import Model, layer_norm, output_rows, rms_norm, softcap_
from nlpkit.lm.threads import SERIAL, blas_info, engine_threads, held_blas_threads
from nlpkit.lm.transformer.packing import packed_starts
from nlpkit.lm.transformer.kv_pool import KVPool, PooledStepAttention
from nlpkit.lm.transformer.layer_loop import PromptsAttention, run_layers
from nlpkit.lm.transformer import products, stored_weights
from nlpkit.lm.transformer.products import STEP_TILE, rows_times
from nlpkit.lm.transformer.stored_weights import is_stored


@dataclass
class _Sequence:
    key: Hashable
    cache: KVCache  # batch 1, max_len = what this sequence may fill


def supports_batching(model) -> bool:
    """Whether `DecodingBatch` can run this model: not longrope (its keys are recomputed when a sequence first
    passes the original context, one sequence at a time). Native weights (`--weights native`) are expanded a layer
    at a time as `Model.forward` does, once per step for all the live rows: batching is where they pay."""
    return model.rope is None or model.rope.long is None


KV_SHARE = 0.25  # of the memory available when a batch starts: what its sequences' KV caches may take together


class DecodingBatch:
    """Live sequences, each with its own KV cache, advanced together one token each per `step`.

    `can_take(positions)` bounds the memory: the live sequences' KV caches (float32 keys and values of every layer,
    each sized for its prompt and token budget) stay within KV_SHARE of the memory available when the batch started
    (`kv_budget` bytes; None: no bound). A driver asks it before a sequence joins, so a batch size chosen for a
    small model cannot exhaust the memory with a large one's caches."""

    forks = True   # `fork`: a sequence shares a live one's prompt cache
    full = ()      # no step finds a sequence without room: a driver asks `room` first

    def __init__(self, model, context: int | None = None, kv_budget: int | None = -1):
        if not supports_batching(model):
            raise NlpkitError("batched decoding does not support longrope models")
        from nlpkit.lm.transformer.loaders.native import available_memory

        self.model = model
        self.ctx = context or model.config.positions
        self.seqs: list[_Sequence] = []
        c = model.config
        self.pool = KVPool(c.n_layers, c.n_kv_heads, c.head_dim)  # every sequence's cache: a slot of it
        self.bytes_per_position = 2 * c.n_layers * c.n_kv_heads * c.head_dim * 4  # keys + values, float32
        if kv_budget == -1:
            memory = available_memory()
            kv_budget = int(memory * KV_SHARE) if memory else None
        self.kv_budget = kv_budget

    def can_take(self, positions: Sequence[int]) -> bool:
        """Whether sequences needing `positions` each (prompt + token budget) fit in the KV budget beside the live
        ones (a driver never asks for the first sequence of an empty batch: one is never refused)."""
        if self.kv_budget is None:
            return True
        held = sum(s.cache.max_len for s in self.seqs) + sum(min(self.ctx, p) for p in positions)
        return held * self.bytes_per_position <= self.kv_budget

    def __len__(self) -> int:
        return len(self.seqs)

    @property
    def keys(self) -> list:
        """The live sequences' keys, in row order (the rows of `step`'s logits)."""
        return [s.key for s in self.seqs]

    def room(self, key: Hashable) -> int:
        """Positions the sequence can still fill (0: the token just chosen cannot be fed)."""
        c = self._find(key).cache
        return c.max_len - c.length

    def join(self, key: Hashable, prompt_ids: Sequence[int], max_new_tokens: int) -> np.ndarray:  # [P] -> [V]
        """Prefill a new sequence (alone: a one-sequence prefill's bits) with room for `max_new_tokens` more
        positions (at most the context); its next-token logits."""
        ids = np.asarray(prompt_ids, dtype=np.int64)[None, :]  # [1, P]
        if ids.shape[1] == 0:
            raise NlpkitError("decode needs at least one prompt token")
        if ids.shape[1] > self.ctx:
            raise NlpkitError(f"the prompt is {ids.shape[1]} tokens but the context is {self.ctx} tokens")
        if any(s.key == key for s in self.seqs):
            raise NlpkitError(f"sequence {key!r} is already in the batch")
        cache = self.pool.take(min(self.ctx, ids.shape[1] + max(max_new_tokens, 1)))
        try:
            logits = self.model.forward(ids, cache, last_only=True)[0, -1]  # [V]
        except BaseException:
            self.pool.give_back(cache)
            raise
        self.seqs.append(_Sequence(key, cache))
        return logits

    def join_many(self, joins: Sequence[tuple[Hashable, Sequence[int], int]]) -> list[np.ndarray]:  # -> n x [V]
        """`join` each (key, prompt_ids, max_new_tokens) in one packed prefill (see the module docstring); their
        next-token logits, in order. The caller bounds the total tokens (the forward's activations grow with it)."""
        if len(joins) == 1:
            return [self.join(*joins[0])]
        c = self.model.config
        prompts = [np.asarray(ids, dtype=np.int64) for _, ids, _ in joins]
        keys = [key for key, _, _ in joins]
        for key, ids in zip(keys, prompts):
            if len(ids) == 0:
                raise NlpkitError("decode needs at least one prompt token")
            if len(ids) > self.ctx:
                raise NlpkitError(f"the prompt is {len(ids)} tokens but the context is {self.ctx} tokens")
            if any(s.key == key for s in self.seqs) or keys.count(key) > 1:
                raise NlpkitError(f"sequence {key!r} is already in the batch")
        starts = packed_starts([len(p) for p in prompts])  # each prompt at a multiple of ROW_ALIGN (`packing`)
        ends = np.asarray([s + len(p) for s, p in zip(starts, prompts)])
        spans = list(zip(starts, ends.tolist()))  # each prompt's rows [s, e)
        toks = np.zeros(int(ends[-1]), np.int64)  # [T], padding rows token 0 (never read)
        for (s, e), ids in zip(spans, prompts):
            toks[s:e] = ids
        if min(int(p.min()) for p in prompts) < 0 or max(int(p.max()) for p in prompts) >= c.vocab_size:
            raise NlpkitError(f"token id out of range 0..{c.vocab_size - 1}")
        caches = [self.pool.take(min(self.ctx, len(ids) + max(n_new, 1))) for (_, ids, n_new) in joins]
        try:
            logits = self._prefill_packed(toks, prompts, spans, ends, caches)
        except BaseException:
            for cache in caches:
                self.pool.give_back(cache)
            raise
        for key, ids, cache in zip(keys, prompts, caches):
            cache.tokens[0, :len(ids)] = ids
            cache.advance(len(ids))
            self.seqs.append(_Sequence(key, cache))
        return list(logits)

    def _prefill_packed(self, toks, prompts, spans, ends, caches) -> np.ndarray:  # [T] -> [n, V]
        """`join_many`'s packed forward: each prompt's keys and values into its cache; each one's last logits."""
        model, c, w = self.model, self.model.config, self.model.weights
        x = w.embed_tokens(toks[None, :])  # [1, T, d]
        if c.embed_scale is not None:
            x = x * np.float32(c.embed_scale)
        with np.errstate(over="ignore"):
            pool, blas = Model._thread_policy(1, len(toks), 0)
            with held_blas_threads(blas):
                if c.uses_rope:
                    cs = _tables(model.rope, prompts, spans)
                    local_cs = _tables(model.local_rope, prompts, spans) if model.local_rope is not model.rope else cs
                else:
                    if max(len(p) for p in prompts) > c.max_seq_len:
                        raise NlpkitError(f"GPT-2 has {c.max_seq_len} learned positions")
                    pos = np.zeros(len(toks), np.int64)
                    for s, e in spans:
                        pos[s:e] = np.arange(e - s)
                    x = x + w.pos_embed[pos][None]
                    cs = local_cs = None
                att = PromptsAttention(spans, caches, self._layer_opts(cs, local_cs), (c.n_kv_heads, c.head_dim))
                x = run_layers(model, x, att, pool)
                x = x[:, ends - 1]  # [1, n, d] each prompt's last row
                x = rms_norm(x, w.norm_g, c.norm_eps) if c.uses_rope and c.norm == "rms" \
                    else layer_norm(x, w.norm_g, w.norm_b, c.norm_eps)
                logits = output_rows(x, w.lm_head, SERIAL, ends - 1)[0]  # [n, V]
        if c.final_softcap is not None:
            softcap_(logits, c.final_softcap)
        return logits

    def fork(self, source: Hashable, key: Hashable, length: int, max_new_tokens: int) -> None:
        """A new sequence `key` whose first `length` positions are those of live sequence `source` (their keys and
        values copied, no forward): continuations of one prompt prefill it once (`sample --prompts`). Its next
        logits are the source's after those positions, which the caller holds."""
        src = self._find(source).cache
        if any(s.key == key for s in self.seqs):
            raise NlpkitError(f"sequence {key!r} is already in the batch")
        if not 0 < length <= src.length:
            raise NlpkitError(f"cannot fork {length} positions of sequence {source!r}, which holds {src.length}")
        cache = self.pool.take(min(self.ctx, length + max(max_new_tokens, 1)))  # (src's views may move: read after)
        for dst, orig in zip(cache.k + cache.v, src.k + src.v):  # n_layers x [1, kv, L, hd]
            dst[:, :, :length] = orig[:, :, :length]
        cache.tokens[0, :length] = src.tokens[0, :length]
        cache.offset = src.offset
        cache.advance(length)
        self.seqs.append(_Sequence(key, cache))

    def leave(self, key: Hashable) -> None:
        """Drop a finished sequence (its cache's slot is freed)."""
        for s in self.seqs:
            if s.key == key:
                self.pool.give_back(s.cache)
        self.seqs = [s for s in self.seqs if s.key != key]

    def _find(self, key: Hashable) -> _Sequence:
        for s in self.seqs:
            if s.key == key:
                return s
        raise NlpkitError(f"no sequence {key!r} in the batch")

    def step(self, tokens: Sequence[int]) -> np.ndarray:  # [n] -> [n, V]
        """Feed one token to every live sequence (in `keys` order); the next-token logits of each."""
        model, c, w = self.model, self.model.config, self.model.weights
        n = len(self.seqs)
        toks = np.asarray(tokens, dtype=np.int64)
        if toks.shape != (n,):
            raise NlpkitError(f"step needs one token per live sequence ({n}), got {toks.shape}")
        if n == 0:
            return np.empty((0, c.vocab_size), np.float32)
        if toks.min() < 0 or toks.max() >= c.vocab_size:
            raise NlpkitError(f"token id out of range 0..{c.vocab_size - 1}")
        for s in self.seqs:
            if s.cache.length >= s.cache.max_len:
                raise NlpkitError(f"sequence {s.key!r} has no room left in its KV cache")
        pos = np.array([s.cache.position for s in self.seqs])  # [n] absolute positions of the new tokens
        x = w.embed_tokens(toks[None, :])  # [1, n, d]
        if c.embed_scale is not None:
            x = x * np.float32(c.embed_scale)
        with np.errstate(over="ignore"), held_blas_threads(engine_threads()):
            cs = local_cs = None
            if c.uses_rope:
                cs = _gather(model.rope, pos)
                local_cs = _gather(model.local_rope, pos) if model.local_rope is not model.rope else cs
            else:
                if pos.max() >= c.max_seq_len:
                    raise NlpkitError(f"GPT-2 has {c.max_seq_len} learned positions")
                x = x + w.pos_embed[pos][None]
            att = PooledStepAttention(self.pool, [s.cache for s in self.seqs], self._layer_opts(cs, local_cs),
                                      (c.n_kv_heads, c.head_dim))
            x = run_layers(model, x, att, pad=False)  # [1, n, d]: one row per sequence, products unpadded
            for s, t in zip(self.seqs, toks):
                s.cache.tokens[0, s.cache.length] = t
                s.cache.advance(1)
            x = rms_norm(x, w.norm_g, c.norm_eps) if c.uses_rope and c.norm == "rms" \
                else layer_norm(x, w.norm_g, w.norm_b, c.norm_eps)
            logits = self._head(x[0]) if n > 1 else output_rows(x, w.lm_head, SERIAL, pad=False)[0]  # [n, V]
        if c.final_softcap is not None:
            softcap_(logits, c.final_softcap)
        return logits

    def _head(self, x: np.ndarray) -> np.ndarray:  # [n, d] -> [n, V]
        """A step's output projection of n > 1 rows in `products.rows_times`' orientation, over the vocabulary rows
        `[V, d]` (`step_head`: native weights' tiles as expanded, float32 weights' copy in that layout), the same
        tiles for both (so the same bits); a small projection, or no memory for the copy: `x @ lm_head`."""
        e = step_head(self.model)
        if e is None:
            return output_rows(x[None], self.model.weights.lm_head, SERIAL, pad=False)[0]
        if not is_stored(e):
            return rows_times(x, e, tile=STEP_TILE)
        out = np.empty((x.shape[0], e.rows), np.float32)
        tiles = [(r, min(r + STEP_TILE, e.rows)) for r in range(0, e.rows, STEP_TILE)]
        for r0, r1, wt in e.tiles_t(tiles):  # [d, r1 - r0]: the stored rows (expanded), transposed
            rows_times(x, wt.T, out[:, r0:r1], tile=STEP_TILE)  # one product per tile
        return out

    def _layer_opts(self, cs, local_cs):
        """Per layer li, (RoPE tables, sliding window, softcap): a sliding layer's own tables and window."""
        model, c = self.model, self.model.config
        kinds = model.layer_kinds() if c.uses_rope else None

        def opts(li: int):
            if not c.uses_rope:
                return None, None, None
            sliding = kinds[li] == "sliding"
            return (local_cs if sliding else cs), (c.sliding_window if sliding else None), c.attn_softcap

        return opts


HEAD_COPY_SHARE = 0.1  # of the memory available: the most a float32 output projection's step copy may take


def step_head(model):  # -> [V, d] C order | StoredMatrix | None
    """The output projection as vocabulary rows `[V, d]` for a batched step's `products.rows_times`, when it is
    larger than `products.SMALL_HEAD` (a small one stays `x @ lm_head`, as native weights expand it whole): native
    weights' StoredMatrix (its tiles expanded as rows: no copy, and no slower than `x @ tile.T` on any kernel
    measured); for float32 weights (`[d, V]`, the layout a one-row step's matrix-vector product reads fastest), on
    OpenBLAS's AVX-512 kernels only (`rows_kernel`), a C-order copy made at the first batched step of n > 1 rows
    and kept while the model lives (`_STEP_HEADS`; SmolLM2-135M: 113 MB beside 540 MB of weights), unless it would
    take more than HEAD_COPY_SHARE of the memory available; else None."""
    from nlpkit.lm.transformer.loaders.native import available_memory

    w = model.weights.lm_head
    small = stored_weights.SMALL_MATRIX if is_stored(w) else products.SMALL_HEAD  # (equal; a test moves them)
    if (w.rows * w.cols if is_stored(w) else w.size) <= small:
        return None
    if is_stored(w):
        return w
    e = _STEP_HEADS.get(model)
    if e is None:
        memory = available_memory()
        fits = rows_kernel() and (memory is None or w.nbytes <= memory * HEAD_COPY_SHARE)
        e = _STEP_HEADS[model] = np.ascontiguousarray(w.T) if fits else False  # [V, d] | not here (asked once)
    return e if e is not False else None


# step_head's copies, per model while it lives (False: asked, none made)
_STEP_HEADS: "weakref.WeakKeyDictionary[Model, np.ndarray | bool]" = weakref.WeakKeyDictionary()


ROWS_KERNELS = ("skylakex", "cooperlake", "sapphirerapids")  # OpenBLAS cores where `rows_times` pays for a copy


@functools.cache
def rows_kernel() -> bool:
    """Whether numpy's OpenBLAS runs its AVX-512 (SkylakeX family) kernels, where a 16-row output projection over
    `[V, d]` rows takes 11-12 ms against 16-17 for `x @ [d, V]` (SmolLM2-135M, 2 threads); its Haswell and Zen
    kernels run `x @ [d, V]` in ~8 ms and `rows_times` in ~11, so a float32 copy would cost memory for nothing."""
    return (blas_info().get("kernel") or "").lower() in ROWS_KERNELS


def _tables(rope, prompts, spans) -> tuple[np.ndarray, np.ndarray]:  # -> [T, rot/2] x2
    """RoPE tables of packed prompts (rows `spans`), each prompt's positions 0.. as its own prefill asks for them;
    zeros on the padding rows between."""
    cos = np.zeros((spans[-1][1], rope.cos_sin(0, 1)[0].shape[-1]), np.float32)
    sin = np.zeros_like(cos)
    for p, (s, e) in zip(prompts, spans):
        cos[s:e], sin[s:e] = rope.cos_sin(0, len(p))
    return cos, sin


def _gather(rope, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # [n] -> [n, rot/2] x2
    """RoPE tables at each sequence's own position (the rows of a step are sequences), each as a one-sequence
    step asks for it (dynamic scaling depends on the sequence's length)."""
    tables = [rope.cos_sin(int(p), 1) for p in pos]
    return np.concatenate([t[0] for t in tables]), np.concatenate([t[1] for t in tables])
