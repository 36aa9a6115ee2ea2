"""The key/value cache: per layer, preallocated `[batch, n_kv_heads, max_len, head_dim]` arrays.

A forward step with a cache computes q/k/v for the new positions only, writes k/v at
`length .. length+t`, and attends over the filled part `[:length+t]`. Grouped-query attention keeps
one k/v per kv-head, so the cache is n_heads/n_kv_heads times smaller than per-head copies would be.
"""

from __future__ import annotations

import mmap

import numpy as np

from nlpkit.errors import NlpkitError


def lazy_zeros(shape: tuple[int, ...]) -> np.ndarray:
    """float32 zeros whose memory is given a page at a time, as it is written: an anonymous mapping. (numpy
    asks for transparent huge pages for arrays of 4 MB and more, and then the first key written into each
    head's region of an 8192-position cache took 2 MB: SmolLM2's cache cost 245 MB after a 6-token prompt.)"""
    n = int(np.prod(shape))
    return np.frombuffer(mmap.mmap(-1, max(4 * n, 1)), np.float32, count=n).reshape(shape)


class KVCache:
    """Preallocated keys and values of every layer, plus how many positions are filled.

    `offset` counts positions dropped by `drop_oldest`, so new tokens keep their absolute
    position (offset + length) and RoPE distances to the kept keys stay right.
    """

    def __init__(self, n_layers: int, batch: int, n_kv_heads: int, max_len: int, head_dim: int):
        if batch < 1 or max_len < 1:
            raise NlpkitError(f"KV cache needs batch >= 1 and max_len >= 1 (got {batch}, {max_len})")
        shape = (batch, n_kv_heads, max_len, head_dim)
        self.k = [lazy_zeros(shape) for _ in range(n_layers)]  # n_layers x [b, n_kv, max_len, hd]
        self.v = [lazy_zeros(shape) for _ in range(n_layers)]
        self.tokens = np.zeros((batch, max_len), np.int64)  # the ids the cache holds (to recompute it: longrope)
        self.batch, self.max_len, self.length, self.offset = batch, max_len, 0, 0

    @property
    def position(self) -> int:
        """Absolute position of the next token written."""
        return self.offset + self.length

    @property
    def free(self) -> int:
        return self.max_len - self.length

    def slots(self, layer: int, t: int) -> tuple[np.ndarray, np.ndarray]:
        """Where the keys/values of the next t positions go, to be written in place.  # -> [b, n_kv, t, hd] x2"""
        end = self.length + t
        if end > self.max_len:
            raise NlpkitError(f"KV cache is full: {self.length} + {t} positions > max_len {self.max_len}")
        return self.k[layer][:, :, self.length:end], self.v[layer][:, :, self.length:end]

    def filled(self, layer: int, t: int) -> tuple[np.ndarray, np.ndarray]:
        """The keys/values up to and with the next t positions.  # -> [b, n_kv, L+t, hd] x2"""
        end = self.length + t
        return self.k[layer][:, :, :end], self.v[layer][:, :, :end]

    def write(self, layer: int, k: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Store new keys/values at length..length+t; return the filled views.  # [b, n_kv, t, hd] -> [b, n_kv, L+t, hd]"""
        k_slot, v_slot = self.slots(layer, k.shape[2])
        k_slot[...] = k
        v_slot[...] = v
        return self.filled(layer, k.shape[2])

    def advance(self, t: int) -> None:
        """Mark t more positions filled (called once per forward, after all layers wrote)."""
        self.length += t

    def broadcast(self, n: int) -> "KVCache":
        """A batch-n cache holding n copies of this batch-1 cache (prefill once, sample n continuations)."""
        if self.batch != 1:
            raise NlpkitError(f"broadcast needs a batch-1 cache, this one has batch {self.batch}")
        _, n_kv, _, hd = self.k[0].shape
        out = KVCache(len(self.k), n, n_kv, self.max_len, hd)  # lazy zeros: untouched pages cost no memory
        for dst, src in zip(out.k + out.v, self.k + self.v):
            dst[:, :, :self.length] = src[:, :, :self.length]  # [1, kv, L, hd] broadcast to [n, kv, L, hd]
        out.tokens[:, :self.length] = self.tokens[:, :self.length]
        out.length, out.offset = self.length, self.offset
        return out

    def drop_oldest(self, n: int) -> None:
        """Forget the n oldest positions (sliding-window generation); later positions keep their RoPE angles."""
        n = min(n, self.length)
        if n <= 0:
            return
        keep = self.length - n
        for arr in self.k + self.v:
            arr[:, :, :keep] = arr[:, :, n:self.length].copy()
        self.tokens[:, :keep] = self.tokens[:, n:self.length].copy()
        self.length, self.offset = keep, self.offset + n

    def reset(self) -> None:
        self.length = self.offset = 0

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.k + self.v)
