"""The transformer forward pass in numpy float32: `Model.forward`, its blocks, attention and threads.

The RoPE block (Llama's: RMSNorm, RoPE, SwiGLU, GQA) runs every family of `families.py`: where their math
differs it takes an option from `ModelConfig` (norm form and placement, activation, biases, q/k norms,
attention/final soft-capping, sliding windows, partial rotary, layers without RoPE), decided once per layer
when the closures are built (`family_rows`), so the plain Llama path runs the same operations as before.

picoGPT-style: a handful of small functions, each with its shape contract, composed by `Model.forward`.
Here: `block` (one layer, split at attention so long inputs use threads), `output_rows` and the `Model`;
`attention` and `packed_attention` are `attention_ops`'. Weights are plain arrays in one dataclass per layer (`layer_weights`); the
loaders fill them, so nothing here knows about file formats. Projection matrices are stored `[in, out]`
(transposed once at load: for a one-token decode step OpenBLAS reads that layout about 1.7x faster than
`[out, in]`); q/k/v are fused into one matrix and gate/up into another, so a decode step is four matmuls per
layer. A tied embedding is kept once, as the `[d, V]` output projection; token lookup gathers its columns.
The norms, activations and masks are `layer_ops`'.
"""

from __future__ import annotations

import numpy as np

from nlpkit.errors import NlpkitError
from nlpkit.lm.threads import SERIAL, RowPool, engine_threads, held_blas_threads
from nlpkit.lm.transformer import attention_ops, recycled
from nlpkit.lm.transformer.attention_ops import ATTN_BLOCK, attention, packed_attention
from nlpkit.lm.transformer.cache import KVCache
from nlpkit.lm.transformer.config import ModelConfig
from nlpkit.lm.transformer.family_rows import gpt2_rows, llama_rows, plain_mlp, swiglu
from nlpkit.lm.transformer.layer_ops import (ACTIVATIONS, causal_mask, erf, gelu_erf, gelu_tanh, layer_norm, linear,
                                             rms_norm, silu, softcap_)
from nlpkit.lm.transformer.layer_loop import ROW_MIN, CacheAttention, layer, run_layers
from nlpkit.lm.transformer.layer_sets import LayerSets
from nlpkit.lm.transformer.layer_weights import GPT2Layer, LlamaLayer, Weights
from nlpkit.lm.transformer.packing import Packing
from nlpkit.lm.transformer.products import (HEAD_TILE, ROW_ALIGN, aligned_split, head_tiles, matmul_rows, padded_rows,
                                           round_up, slot_rows)
from nlpkit.lm.transformer.rope import RoPE
from nlpkit.lm.transformer.stored_weights import LayerExpander, is_stored

# Re-exported: `from nlpkit.lm.transformer.model import X` keeps working for what moved out.
__all__ = ["ACTIVATIONS", "ATTN_BLOCK", "GPT2Layer", "LlamaLayer", "Model", "PARALLEL_MIN_TOKENS", "ROW_MIN", "Weights",
           "attention", "block", "causal_mask", "decode_blas_threads", "erf", "gelu_erf", "gelu_tanh", "gpt2_rows",
           "layer_norm", "linear", "llama_rows", "output_rows", "packed_attention", "plain_mlp", "rms_norm", "silu",
           "softcap_", "swiglu"]


PARALLEL_MIN_TOKENS = 64  # a forward over at least this many positions splits its rows over threads (threads.py)
# Same bits whatever the thread count, packing or weights layout, on every OpenBLAS kernel
# (tests/lm/test_determinism.py): every product but a decode step's runs on one BLAS thread, with its rows padded
# and each row at an index fixed by its place in its own sequence (`products`); a thread's share of a layer's rows
# starts at a multiple of ROW_ALIGN and is never under ROW_MIN rows (`layer_loop`).


def block(x, cfg, project, finish, cache, li, mask, pool: RowPool, softcap=None, cs=None,
          keep: int = 0):  # [b, t, d] -> [b, t - keep, d]
    """One transformer block through one optional KV cache: `layer_loop.layer` under a `CacheAttention` of this
    layer's (mask, softcap, cs) (kept for callers of the old signature; the forward runs `layer_loop.run_layers`)."""
    plans = [None] * li + [(mask, softcap, cs)]
    att = CacheAttention(plans, cache, pool, (cfg.n_kv_heads, cfg.head_dim))
    return layer(x, cfg, project, finish, att, li, pool, keep)


def decode_blas_threads(rows: int, past: int, n: int) -> int:
    """BLAS threads for a forward of `rows` = batch x new tokens after `past` cached ones: n for a decode step of
    one row (matrix-vector products, OpenBLAS splitting their output columns: 1.5x one thread's speed), else 1
    (see ROW_MIN: a multi-threaded OpenBLAS product's bits depend on the thread count; the row-parallel prefill
    runs our own threads instead). A one-token prompt is a prefill: one thread, as every number it gives."""
    return n if rows == 1 and past > 0 else 1


def output_rows(x: np.ndarray, w, pool: RowPool, index: np.ndarray | None = None, pad: bool = True
                ) -> np.ndarray:  # [b, r, d], [d, V] | StoredMatrix -> [b, r, V]
    """The output projection of rows x. With `index` (each row's row in its forward: [r], the same for every
    sequence of the batch), a scoring forward's: the rows laid out by their residue modulo ROW_ALIGN
    (`products.slot_rows`), the columns in `products.head_tiles` (float32 and native weights alike), one BLAS
    thread each: a row's logits are the same bits whatever else is projected with it. Several tiles: the tiles
    split over pool's threads, each thread multiplying every row by its own tiles (a native tile expanded on the
    thread that uses it: no hand-off per tile); one tile (a small model's): its rows split at multiples of
    ROW_ALIGN. Without `index`: one product (a decode step's matrix-vector product; `pad` False: a batched decode
    step's rows as they are, `products.matmul_rows`)."""
    b, r, d = x.shape
    if index is None:
        if is_stored(w):
            return w.matmul_t(x.reshape(b * r, d), pad=pad).reshape(b, r, w.rows)
        return linear(x, w, pad=pad)
    v = w.rows if is_stored(w) else w.shape[1]
    tiles = head_tiles(v, d)
    rows = []  # per sequence: its rows at their slots [p, d], where they went
    for bi in range(b):
        xs, pick = slot_rows(x[bi], index)  # [p, d]
        least = max(padded_rows(xs.shape[0], c1 - c0, d) for c0, c1 in tiles)
        if least > xs.shape[0]:  # a small model's products: rows enough to stay off the small-matrix kernels
            xs = np.concatenate([xs, np.zeros((least - xs.shape[0], d), np.float32)])
        rows.append((xs, pick))
    if len(tiles) > 1 and not all(isinstance(pick, slice) for _, pick in rows):
        # rows out of order (a packed forward's): each tile's product lands in a small per-thread buffer and is
        # copied to the rows' order from there, instead of a second pass over the whole [p, V] logits (a
        # gather that took as long as half the products)
        out = recycled.empty((b, r, v))
        _tiles_on_threads(rows, [], w, tiles, pool, out)
        return out
    ys = [recycled.empty((xs.shape[0], v)) for xs, _ in rows]  # logits: large, lent again when dropped
    if len(tiles) > 1:
        _tiles_on_threads(rows, ys, w, tiles, pool)
    else:
        for (xs, _), y in zip(rows, ys):
            # a share's least rows: its own product past the small-matrix kernels
            parts = aligned_split(xs.shape[0], pool.n, max(ROW_MIN, padded_rows(2, v, d)))
            for c0, c1, wt in (w.tiles_t(tiles) if is_stored(w) else [(0, v, w)]):
                def run(part, wt=wt):
                    s, e = part
                    matmul_rows(xs[s:e], wt, out=y[s:e])

                pool.map(run, parts)
    if b == 1:
        return ys[0][rows[0][1]][None]  # one sequence: a view of y when its rows are contiguous
    out = recycled.empty((b, r, v))
    for bi, ((_, pick), y) in enumerate(zip(rows, ys)):
        out[bi] = y[pick]
    return out


def _tiles_on_threads(rows: list, ys: list, w, tiles: list[tuple[int, int]], pool: RowPool,
                      out: np.ndarray | None = None) -> None:
    """Each thread: for each of its tiles (every n-th), the tile's operand (float32 columns, a mapped F32 file's
    rows, or the stored rows expanded into the thread's own scratch), then every sequence's rows times it, into
    the sequence's logits columns. The same products as one thread's, so the same bits. With `out` ([b, r, V]):
    each product goes to a [p, HEAD_TILE] buffer of the thread's and its rows are copied to `out` in their order
    (`pick`), while the buffer is still in cache; `ys` is not written then."""
    stored = is_stored(w)

    def run(share):
        scratch = np.empty((HEAD_TILE, w.cols), np.float32) if stored and w.direct() is None else None
        bufs = None if out is None else [np.empty((xs.shape[0], HEAD_TILE), np.float32) for xs, _ in rows]
        for c0, c1 in share:
            wt = w.tile_t(c0, c1, scratch) if stored else w[:, c0:c1]  # [d, c1 - c0]
            if bufs is not None:
                for bi, ((xs, pick), buf) in enumerate(zip(rows, bufs)):
                    y = matmul_rows(xs, wt, out=buf[:, :c1 - c0])  # [p, c1 - c0]
                    out[bi, :, c0:c1] = y[pick]
                continue
            for (xs, _), y in zip(rows, ys):
                matmul_rows(xs, wt, out=y[:, c0:c1])

    n = min(pool.n, len(tiles))
    pool.map(run, [tiles[i::n] for i in range(n)])


class Model:
    """A loaded language model: `forward(tokens[b, t], cache) -> logits[b, t, vocab]`."""

    def __init__(self, config: ModelConfig, weights: Weights, tokenizer=None, source: str = ""):
        self.config, self.weights, self.tokenizer, self.source = config, weights, tokenizer, source
        self.tokenizer_error: str | None = None  # why the tokenizer files could not be read (model still runs on ids)
        self._make_rope()
        self._sets: LayerSets | None = None  # per layer (project, finish) closures (+ native scratch), lazily
        self._sets_for: tuple = ()
        self.weights_layout = ("float32", "")  # (layout, why): set by the loaders
        self.weights_cache = ""  # what the prepared-model cache did at load (`Prepared.cache`; "": not involved)

    @property
    def parallel_windows(self) -> bool:
        """Whether whole windows may run on threads at once (perplexity): float32 weights, and native weights
        whose one layer's float32 scratch is small (`layer_sets.SMALL_SCRATCH`: each forward running at once
        expands into its own). A large native scratch is one: its windows run one at a time, each forward
        splitting its rows over the threads instead (the same bits)."""
        return self.layer_sets().parallel

    def layer_sets(self) -> LayerSets:
        """Each layer's (project, finish) closures, built once (rebuilt if the config or weights object changes):
        the per-family choices are made here, not on every decode step; native weights' closures read a
        `LayerExpander`'s twins, one set per forward running at once (`LayerSets.held`)."""
        key = (id(self.config), id(self.weights), len(self.weights.layers))
        if self._sets is None or self._sets_for != key:
            c = self.config
            make = llama_rows if c.uses_rope else gpt2_rows
            self._sets, self._sets_for = LayerSets(self.weights.layers, lambda layer, li: make(layer, c, li)), key
        return self._sets

    def layer_rows(self) -> list:
        """Each layer's (project, finish) closures (native weights: those of the first scratch set)."""
        return self.layer_sets().first[0]

    @property
    def expander(self) -> LayerExpander | None:
        """Native weights: the first set's expander (fills a layer's scratch before it runs), else None."""
        return self.layer_sets().first[1]

    def require_tokenizer(self):
        """The tokenizer, or an NlpkitError saying why there is none (text must be encoded, ids would do)."""
        if self.tokenizer is None:
            why = self.tokenizer_error or "no tokenizer.json, or vocab.json + merges.txt"
            raise NlpkitError(f"model {self.source}: cannot encode text: {why}")
        return self.tokenizer

    def _make_rope(self) -> None:
        """RoPE tables: one for full-attention layers, and one for sliding layers when their base differs (gemma3)."""
        c = self.config
        self.rope = self.local_rope = None
        if not c.uses_rope:
            return
        rot = c.rotary_dim or c.head_dim
        self.rope = RoPE(rot, c.rope_theta, c.rope_scaling, c.max_seq_len)
        self.local_rope = RoPE(rot, c.rope_local_theta, None, c.max_seq_len) if c.rope_local_theta else self.rope

    def layer_kinds(self) -> list[str]:
        """"sliding" or "full" per layer."""
        c = self.config
        if c.layer_types is not None:
            return list(c.layer_types)
        return ["sliding" if c.sliding_window else "full"] * c.n_layers

    def set_rope(self, kind: str | None, factor: float | None) -> None:
        """Override RoPE scaling (`--rope-scaling`, `--rope-factor`)."""
        self.config = self.config.with_rope(kind, factor).validate()
        self._make_rope()

    def new_cache(self, batch: int = 1, max_len: int | None = None) -> KVCache:
        """An empty KV cache; max_len defaults to the model's context (memory is touched only as it fills)."""
        c = self.config
        max_len = max_len or c.positions
        if not c.uses_rope and max_len > c.max_seq_len:
            raise NlpkitError(f"max_len {max_len} exceeds GPT-2's {c.max_seq_len} learned positions")
        return KVCache(c.n_layers, batch, c.n_kv_heads, max_len, c.head_dim)

    @staticmethod
    def _cos_sin(rope: RoPE, start: int, t: int, packing: Packing | None) -> tuple[np.ndarray, np.ndarray]:
        """RoPE tables of positions start .. start + t - 1, or of a packing's positions.  # -> [t, rot/2] x2"""
        if packing is None:
            return rope.cos_sin(start, t)
        cos, sin = rope.cos_sin(0, int(packing.positions.max()) + 1)  # as one sequence that long would have them
        return cos[packing.positions], sin[packing.positions]

    def forward(self, tokens: np.ndarray, cache: KVCache | None = None, *, last_only: bool = False,
                logits_from: int = 0, packing: Packing | None = None, rows: np.ndarray | None = None
                ) -> np.ndarray:  # [b, t] -> [b, t - logits_from, V]  ([b, 1, V] if last_only, [b, R, V] for R rows)
        """Logits for every position from `logits_from` on (or the last only, or the positions `rows` only:
        [b, len(rows), V]). With a cache, positions continue at cache.position. With a `packing` (batch 1, no
        cache), the tokens are independent segments, each with its own positions and mask (`packing.py`).
        Skipping rows nobody reads saves their share of the output projection.

        The steps: check the inputs, restart a longrope sequence, embed, plan each layer's attention (mask,
        RoPE tables), choose the threads, run the blocks, keep the rows read, project to logits."""
        tokens = self._checked_tokens(tokens, cache, packing)  # [b, t]
        tokens, logits_from = self._longrope_restart(tokens, cache, logits_from)
        b, t = tokens.shape
        past, start = (cache.length, cache.position) if cache is not None else (0, 0)
        x = self._embed(tokens, start, packing)  # [b, t, d]
        with np.errstate(over="ignore"):
            plans = self._attention_plans(t, past, start, packing)  # per layer (mask, softcap, cos/sin)
            keep = self._last_layer_keep(t, last_only, logits_from, packing, rows)
            pool, blas = self._thread_policy(b, t, past)
            slots = None
            if packing is not None:  # rows at slots by residue (`Packing.slots`): [1, t, d] -> [1, p, d]
                slots = packing.slots(tokens[0])
                x, plans = self._to_slots(x, slots), [(m, sc, self._cs_to_slots(cs, slots)) for m, sc, cs in plans]
            att = CacheAttention(plans, cache, pool, (self.config.n_kv_heads, self.config.head_dim), slots)
            with held_blas_threads(blas):
                x = run_layers(self, x, att, pool, keep)  # [b, t - keep, d]
        if cache is not None:
            cache.tokens[:, past:past + t] = tokens
            cache.advance(t)
        if slots is not None:
            sel = slots[-1:] if last_only else slots[rows] if rows is not None else slots[logits_from:]
            x, index = x[:, sel], sel
        else:
            x, index = self._read_rows(x, last_only, rows, logits_from, keep)  # [b, r, d], [r]
        decode_step = t == 1 and past > 0  # one matrix-vector product per weight: its documented exception
        return self._logits(x, blas, pool, None if decode_step else index)  # [b, r, V]

    # ---- the steps of forward

    def _checked_tokens(self, tokens, cache: KVCache | None, packing: Packing | None) -> np.ndarray:  # -> [b, t]
        """The token ids as a [batch, time] array, refused when out of range or not matching the cache/packing."""
        tokens = np.asarray(tokens)
        if tokens.ndim == 1:
            tokens = tokens[None, :]
        if tokens.ndim != 2 or tokens.shape[1] == 0:
            raise NlpkitError(f"forward needs a [batch, time] array of token ids with time >= 1, got {tokens.shape}")
        b, t = tokens.shape
        vocab = self.config.vocab_size
        if tokens.size and (tokens.min() < 0 or tokens.max() >= vocab):
            raise NlpkitError(f"token id out of range 0..{vocab - 1}: {int(tokens.min())}..{int(tokens.max())}")
        if packing is not None and (cache is not None or b != 1 or packing.length != t):
            raise NlpkitError(f"a packed forward takes one row of {packing.length} tokens and no KV cache, "
                              f"got {tokens.shape}")
        if cache is not None and cache.batch != b:
            raise NlpkitError(f"tokens have batch {b} but the KV cache has batch {cache.batch}")
        return tokens

    def _longrope_restart(self, tokens: np.ndarray, cache: KVCache | None,
                          logits_from: int) -> tuple[np.ndarray, int]:  # [b, t] -> [b, kept + t]
        """longrope, like transformers' Phi-3 generate: when the sequence first passes the original context, the
        cached short-factor keys are dropped and everything is recomputed with the long factors (the cached
        tokens go first; their logits are not returned)."""
        t = tokens.shape[1]
        if cache is None or not cache.length or self.rope is None or self.rope.long is None \
                or not cache.position <= self.rope.long_after < cache.position + t:
            return tokens, logits_from
        kept = cache.length
        tokens = np.concatenate([cache.tokens[:, :kept], tokens], axis=1)
        cache.length = 0
        return tokens, logits_from + kept

    def _embed(self, tokens: np.ndarray, start: int, packing: Packing | None) -> np.ndarray:  # [b, t] -> [b, t, d]
        """Token embeddings (scaled where the family scales them), plus GPT-2's learned positions."""
        c, w = self.config, self.weights
        x = w.embed_tokens(tokens)
        if c.embed_scale is not None:
            x = x * np.float32(c.embed_scale)
        if c.uses_rope:
            return x
        t = tokens.shape[1]
        end = start + t if packing is None else int(packing.positions.max()) + 1
        if end > c.max_seq_len:
            raise NlpkitError(f"GPT-2 has {c.max_seq_len} learned positions; {end} tokens do not fit "
                              f"(use a sliding window: perplexity `context`)")
        with np.errstate(over="ignore"):
            return x + (w.pos_embed[start:start + t] if packing is None else w.pos_embed[packing.positions])

    def _attention_plans(self, t: int, past: int, start: int, packing: Packing | None) -> list[tuple]:
        """Per layer, what its attention needs: (mask, softcap, (cos, sin)): the causal mask (or the packing),
        windowed for sliding layers; the RoPE tables of the layer's kind (None for GPT-2).
        # masks [t, past + t] | Packing | None; cos, sin [t, rot/2]"""
        c = self.config
        window = c.sliding_window
        if packing is not None:
            mask = packing
            local_mask = packing.windowed(window) if window and int(packing.positions.max()) >= window else mask
        else:
            mask = causal_mask(t, past) if t > 1 else None
            local_mask = causal_mask(t, past, window) if window and past + t > window else mask
        if not c.uses_rope:
            return [(mask, None, None)] * len(self.weights.layers)
        cs = self._cos_sin(self.rope, start, t, packing)
        local_cs = self._cos_sin(self.local_rope, start, t, packing) if self.local_rope is not self.rope else cs
        full, sliding = (mask, c.attn_softcap, cs), (local_mask, c.attn_softcap, local_cs)
        return [sliding if kind == "sliding" else full for kind in self.layer_kinds()]

    @staticmethod
    def _last_layer_keep(t: int, last_only: bool, logits_from: int, packing: Packing | None,
                         rows: np.ndarray | None) -> int:
        """The rows the last layer skips (`block`'s `keep`): it finishes only the rows read after it, from a whole
        attention block on and at least a block's rows, so its matrix products keep the shapes (and OpenBLAS
        kernels, bits) of the full pass. A packed forward's rows, or chosen `rows`, are anywhere: none skipped."""
        if packing is not None or rows is not None:
            return 0
        keep = t - 1 if last_only else min(logits_from, t - 1)
        step = np.lcm(attention_ops.ATTN_BLOCK, ROW_ALIGN)  # and the rows keep their index modulo ROW_ALIGN
        most = max(t - attention_ops.ATTN_BLOCK, 0)
        return int(min(keep - keep % step, most - most % step))

    @staticmethod
    def _thread_policy(b: int, t: int, past: int) -> tuple[RowPool, int]:
        """(row pool, BLAS threads). Long inputs split their rows over the free CPUs (`threads.engine_threads`),
        each row on one BLAS thread, the output projection too (`output_rows`). BLAS's own threads run only a
        decode step of batch 1 (`decode_blas_threads`): every other product has one BLAS thread, whose bits do not
        depend on the thread count (ROW_MIN); a small batch (sample -n N) gained nothing from BLAS threads anyway
        (measured: sample -n 8 15x slower with 2 BLAS threads on a busy machine)."""
        n = engine_threads()  # the CPUs free for us now, at most BLAS's own count (threads.CpuShare)
        n_rows = n if t >= PARALLEL_MIN_TOKENS else 1
        pool = RowPool(n_rows) if n_rows > 1 else SERIAL
        return pool, decode_blas_threads(b * t, past, n)

    @staticmethod
    def _to_slots(x: np.ndarray, slots: np.ndarray) -> np.ndarray:  # [1, t, d] -> [1, p, d]
        out = np.zeros((x.shape[0], round_up(int(slots.max()) + 1), x.shape[2]), np.float32)
        out[:, slots] = x
        return out

    @staticmethod
    def _cs_to_slots(cs, slots: np.ndarray):  # (cos, sin) [t, r] -> [p, r] x2 | None
        if cs is None:
            return None
        p = round_up(int(slots.max()) + 1)
        out = []
        for a in cs:
            b = np.zeros((p, a.shape[1]), a.dtype)
            b[slots] = a
            out.append(b)
        return tuple(out)

    @staticmethod
    def _read_rows(x: np.ndarray, last_only: bool, rows: np.ndarray | None, logits_from: int,
                   keep: int) -> tuple[np.ndarray, np.ndarray]:  # [b, t - keep, d] -> [b, r, d], [r]
        """The rows whose logits are asked for (x starts at row `keep` of the input), and their rows in the input."""
        t = keep + x.shape[1]
        if last_only:
            return x[:, -1:], np.array([t - 1])
        if rows is not None:
            return x[:, rows], np.asarray(rows)
        first = max(logits_from, keep)
        return x[:, first - keep:], np.arange(first, t)  # [b, t - logits_from, d]

    def _logits(self, x: np.ndarray, blas_threads: int, pool: RowPool,
                index: np.ndarray | None = None) -> np.ndarray:  # [b, r, d] -> [b, r, V]
        """The final norm and the output projection (soft-capped where the family caps it), its rows split over
        pool's threads (`output_rows`; `index`: the rows' rows in the input, None for a decode step)."""
        c, w = self.config, self.weights
        x = rms_norm(x, w.norm_g, c.norm_eps) if c.uses_rope and c.norm == "rms" \
            else layer_norm(x, w.norm_g, w.norm_b, c.norm_eps)
        with held_blas_threads(blas_threads):
            logits = output_rows(x, w.lm_head, pool, index)  # [b, r, V]
        if c.final_softcap is not None:
            softcap_(logits, c.final_softcap)
        return logits
