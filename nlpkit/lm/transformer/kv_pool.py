"""The KV caches of a decoding batch in one pool per layer, so a decode step attends for every sequence at once.

A batched decode step's attention is, per sequence, a few small products of its query heads with its own keys and
values. Run one sequence at a time, that is a dozen numpy calls per sequence and layer: 16 sequences of
SmolLM2-135M made 5,800 calls a step, a seventh of the step's time. Here every sequence's keys and values live in
one array per layer, `[slots, kv, cap, hd]`, a sequence in a slot: the step writes every new key and value with one
indexed assignment and runs one batch of products over the slots' keys up to the longest sequence, each row masked
at its own length (and a sliding layer's window) — a handful of numpy calls a layer whatever the batch.

- Each sequence still has a `KVCache` (`take`), whose arrays are views of its slot (sized for what it may fill):
  its prefill (`Model.forward`), a packed prefill (`join_many`) and `fork` write through it as into any cache.
- The live slots are 0..n-1: a sequence that leaves (`give_back`) hands its slot to the last one, whose filled keys
  and values move there (one copy per leave, not per step); the vacated slot's pages are returned to the system.
- The pool grows (more slots, or a longer `cap` for a longer sequence) by copying the live sequences into new
  arrays and pointing their caches at them; the arrays are anonymous mappings, so the slots' unwritten positions
  take no memory (`cache.lazy_zeros`).

The bits: a row's attention reads its own keys only, but its product runs over the longest sequence's keys, the
positions past its own masked (weights exactly 0), so its sums may run in another order than a lone sequence's:
its logits may differ from one-sequence decoding in their last bits, as the step's matrix products already do
(`batch_decoding`; tests/lm/test_batched_decoding.py holds them to 1e-4 and equal greedy tokens).
"""

from __future__ import annotations

import mmap

import numpy as np

from nlpkit.errors import NlpkitError
from nlpkit.lm.transformer.cache import KVCache
from nlpkit.lm.transformer.layer_loop import OwnCaches
from nlpkit.lm.transformer.layer_ops import softcap_

CAP_STEP = 256  # positions: a slot's capacity grows in steps of this


def _mapped_zeros(shape: tuple[int, ...]) -> tuple[np.ndarray, mmap.mmap | None]:
    """float32 zeros in a private anonymous mapping (pages given as written, returned with `madvise`), and the map."""
    n = int(np.prod(shape))
    try:
        m = mmap.mmap(-1, max(4 * n, 1), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    except (AttributeError, OSError, ValueError):  # no MAP_PRIVATE here: plain zeros (numpy's lazily mapped pages)
        return np.zeros(shape, np.float32), None
    return np.frombuffer(m, np.float32, count=n).reshape(shape), m


class KVPool:
    """The keys and values of a batch's sequences, `[slots, kv, cap, hd]` per layer (see the module docstring)."""

    def __init__(self, n_layers: int, n_kv_heads: int, head_dim: int):
        self.n_layers, self.kv, self.hd = n_layers, n_kv_heads, head_dim
        self.slots = self.cap = 0
        self.k: list[np.ndarray] = []  # n_layers x [slots, kv, cap, hd]
        self.v: list[np.ndarray] = []
        self._maps: list = []
        self.users: list[KVCache] = []  # the cache in each live slot, slot order

    def take(self, max_len: int) -> KVCache:
        """A cache of `max_len` positions in the next free slot (the pool grows when it must)."""
        if max_len < 1:
            raise NlpkitError(f"KV cache needs max_len >= 1 (got {max_len})")
        n = len(self.users)
        if n == self.slots or max_len > self.cap:
            slots = max(self.slots, 4) * (2 if n == self.slots else 1)
            self._grow(slots, max(self.cap, -(-max_len // CAP_STEP) * CAP_STEP))
        cache = KVCache.__new__(KVCache)
        cache.tokens = np.zeros((1, max_len), np.int64)
        cache.batch, cache.max_len, cache.length, cache.offset = 1, max_len, 0, 0
        self.users.append(cache)
        self._point(n)
        return cache

    def give_back(self, cache: KVCache) -> None:
        """Free `cache`'s slot: the last slot's sequence moves into it (its filled keys and values copied)."""
        i = next(j for j, c in enumerate(self.users) if c is cache)
        last = len(self.users) - 1
        if i != last:
            moved = self.users[last]
            for arr in self.k + self.v:
                arr[i, :, :moved.length] = arr[last, :, :moved.length]
            self.users[i] = moved
            self._point(i)
        self.users.pop()
        self._release(last)

    def slot_of(self, caches: list[KVCache]) -> np.ndarray:  # -> [n]
        """Each cache's slot."""
        where = {id(c): j for j, c in enumerate(self.users)}
        return np.array([where[id(c)] for c in caches], np.int64)

    def _point(self, slot: int) -> None:
        """Point the cache in `slot` at its slot's views (`max_len` positions)."""
        c = self.users[slot]
        c.k = [a[slot:slot + 1, :, :c.max_len] for a in self.k]  # n_layers x [1, kv, max_len, hd]
        c.v = [a[slot:slot + 1, :, :c.max_len] for a in self.v]

    def _grow(self, slots: int, cap: int) -> None:
        shape = (slots, self.kv, cap, self.hd)
        new = [_mapped_zeros(shape) for _ in range(2 * self.n_layers)]
        for (dst, _), src in zip(new, self.k + self.v):
            for j, c in enumerate(self.users):
                dst[j, :, :c.length] = src[j, :, :c.length]
        self.k = [a for a, _ in new[:self.n_layers]]
        self.v = [a for a, _ in new[self.n_layers:]]
        self._maps = [m for _, m in new]
        self.slots, self.cap = slots, cap
        for j in range(len(self.users)):
            self._point(j)

    def _release(self, slot: int) -> None:
        """The slot's pages back to the system (they read as zeros again); zeros written where that cannot be."""
        size = self.kv * self.cap * self.hd * 4
        for arr, m in zip(self.k + self.v, self._maps or [None] * (2 * self.n_layers)):
            if m is not None and size % mmap.PAGESIZE == 0 and hasattr(m, "madvise"):
                m.madvise(mmap.MADV_DONTNEED, slot * size, size)
            else:
                arr[slot] = 0


class PooledStepAttention(OwnCaches):
    """A decode step of several sequences (`DecodingBatch.step`) whose caches are a `KVPool`'s: row i is sequence
    i's new token; every row's key and value written at its cache's next position at once, then every row's query
    heads against its slot's keys up to the longest sequence, masked past its own length and, in a sliding layer,
    before its last `window` (see the module docstring). `layer_opts(li)` -> (RoPE tables, sliding window,
    softcap)."""

    def __init__(self, pool: KVPool, caches: list[KVCache], layer_opts, shape: tuple[int, int]):
        self.pool, self.layer_opts, self.shape = pool, layer_opts, shape
        for c in caches:
            if c.length >= c.max_len:
                raise NlpkitError(f"KV cache is full: {c.length} + 1 positions > max_len {c.max_len}")
        self.slots = pool.slot_of(caches)  # [n] each row's slot
        self.at = np.array([c.length for c in caches], np.int64)  # [n] where each row's key goes
        self.order = np.argsort(self.slots)  # the rows in slot order (slots 0..n-1)
        self._masks: dict = {}

    def _mask(self, window: int | None) -> tuple[int, int, np.ndarray]:
        """(lo, hi, [n, 1, 1, hi - lo] 0 or -inf, slot order): the key columns lo:hi the rows attend over."""
        if window not in self._masks:
            at = self.at[self.order]  # slot order
            first = np.maximum(at + 1 - window, 0) if window is not None else np.zeros_like(at)
            lo, hi = int(first.min()), int(at.max()) + 1
            j = np.arange(lo, hi)[None, :]
            hidden = (j > at[:, None]) | (j < first[:, None])
            mask = np.where(hidden, np.float32(-np.inf), np.float32(0))[:, None, None, :]
            self._masks[window] = (lo, hi, mask)
        return self._masks[window]

    def attend(self, li, q, k, v, keep):  # [1, kv, g, n, hd], [1, kv, n, hd] x2 -> [1, kv, g, n, hd]
        _, window, softcap = self.layer_opts(li)
        n = q.shape[3]
        K, V = self.pool.k[li], self.pool.v[li]  # [slots, kv, cap, hd]
        K[self.slots, :, self.at] = k[0].transpose(1, 0, 2)  # [n, kv, hd]: each row's key at its slot and position
        V[self.slots, :, self.at] = v[0].transpose(1, 0, 2)
        lo, hi, mask = self._mask(window)
        qs = q[0].transpose(2, 0, 1, 3)[self.order]  # [n, kv, g, hd] slot order
        scores = qs @ K[:n, :, lo:hi].transpose(0, 1, 3, 2)  # [n, kv, g, L]
        if softcap is not None:
            softcap_(scores, softcap)
        scores += mask
        np.subtract(scores, scores.max(axis=-1, keepdims=True), out=scores)
        np.exp(scores, out=scores)
        o = scores @ V[:n, :, lo:hi]  # [n, kv, g, hd]
        o /= scores.sum(axis=-1, keepdims=True)
        out = np.empty_like(o)
        out[self.order] = o  # back to row order
        return out.transpose(1, 2, 0, 3)[None]  # [1, kv, g, n, hd]: the rows in order, as `layer` reads them
