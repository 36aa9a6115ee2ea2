"""Vectorized hashing for n-gram models: byte tokens to 64-bit hashes, and a numpy hash table.

`hash_tokens` reads each token eight bytes at a time through an unaligned uint64 view of the
buffer (a token of up to 8 bytes costs one gather); `HashIndex` maps unique uint64 keys to their
positions with open addressing (linear probing), built and probed for whole arrays at once: the
model's n-gram keys per order, and the vocabulary's word keys (`lookup.WordIndex`, which checks
the bytes of what a hash finds).
"""

from __future__ import annotations

import numpy as np

_PRIME = np.uint64(0x100000001B3)              # FNV-1a 64
_OFFSET = np.uint64(0xCBF29CE484222325)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)        # Fibonacci hashing: spreads keys over the top bits
_LOW = np.array([(1 << (8 * i)) - 1 for i in range(8)] + [(1 << 64) - 1], dtype=np.uint64)


def words8(buf: np.ndarray) -> np.ndarray:
    """A uint64 view starting at every byte of `buf` (padded with 8 zero bytes): w[i] = bytes i..i+7."""
    padded = np.concatenate([buf, np.zeros(8, dtype=np.uint8)])
    return np.ndarray(shape=(len(buf) + 1,), dtype="<u8", buffer=padded, strides=(1,))


def chunk(w8: np.ndarray, starts: np.ndarray, lens: np.ndarray, c: int) -> np.ndarray:
    """Bytes 8c..8c+7 of each token (zero past its end) as little-endian uint64."""
    if c == 0:
        return w8[starts] & _LOW[np.minimum(lens, 8)]
    # a token no longer than 8c bytes is masked to 0 whatever is read: clamp its index to the buffer
    return w8[np.minimum(starts + 8 * c, len(w8) - 1)] & _LOW[np.clip(lens - 8 * c, 0, 8)]


def hash_tokens(w8: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each token (bytes starts[i]:starts[i] + lens[i] of `words8`'s buffer).  # [n] uint64"""
    n = len(starts)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    h = chunk(w8, starts, lens, 0)
    h ^= _OFFSET
    h *= _PRIME
    for c in range(1, (int(lens.max()) + 7) // 8):
        sel = np.flatnonzero(lens > 8 * c)
        h[sel] = (h[sel] ^ chunk(w8, starts[sel], lens[sel], c)) * _PRIME
    return mix(h)


def mix(h: np.ndarray) -> np.ndarray:
    """A finalizer (splitmix64's) so that every bit of the result depends on every input bit."""
    h = h ^ (h >> np.uint64(30))
    h *= np.uint64(0xBF58476D1CE4E5B9)
    h ^= h >> np.uint64(27)
    h *= np.uint64(0x94D049BB133111EB)
    h ^= h >> np.uint64(31)
    return h


_FIND_BLOCK = 1 << 20


class HashIndex:
    """Unique uint64 keys -> their index in the key array; `find` gives -1 for a key not there.

    The table holds only positions (int32 while they fit): a probe reads the key it points at in the
    caller's array, which the index keeps. Open addressing with linear probing, at most `load` full.

    ``HashIndex(np.array([7, 9], np.uint64)).find(np.array([9, 8], np.uint64)) -> [1, -1]``
    """

    def __init__(self, keys: np.ndarray, load: float = 0.5) -> None:
        n = len(keys)
        self.source = keys.view(np.uint64) if keys.dtype == np.int64 else keys
        bits = max(4, int(np.ceil(np.log2(max(n, 1) / load))))     # at most `load` full
        self.mask = (1 << bits) - 1
        self.shift = np.uint64(64 - bits)
        self.vals = np.full(1 << bits, -1, dtype=np.int32 if n < 2**31 else np.int64)
        pending = np.arange(n)
        slot = self._slot(self.source)
        while len(pending):
            s = slot[pending]
            free = self.vals[s] < 0
            cand, cs = pending[free], s[free]
            self.vals[cs] = cand                   # one of the keys that want a slot gets it
            placed = np.zeros(n, dtype=bool)
            placed[cand[self.vals[cs] == cand]] = True
            pending = pending[~placed[pending]]
            slot[pending] = (slot[pending] + 1) & self.mask

    @classmethod
    def from_table(cls, keys: np.ndarray, vals: np.ndarray) -> "HashIndex":
        """The index over `keys` whose table `vals` an earlier `HashIndex(keys).vals` built (a cached model)."""
        index = cls.__new__(cls)
        index.source = keys.view(np.uint64) if keys.dtype == np.int64 else keys
        bits = int(len(vals)).bit_length() - 1
        index.mask, index.shift, index.vals = (1 << bits) - 1, np.uint64(64 - bits), vals
        return index

    def _slot(self, keys: np.ndarray) -> np.ndarray:
        return ((keys * _GOLDEN) >> self.shift).astype(np.intp)

    def find(self, q: np.ndarray) -> np.ndarray:
        """Index of each of `q` in the keys, -1 where absent.  # [m] uint64 (or int64) -> [m] int64"""
        q = q.view(np.uint64) if q.dtype == np.int64 else q
        if len(self.source) == 0:
            return np.full(len(q), -1, dtype=np.int64)
        if len(q) > _FIND_BLOCK:                   # bounded temporaries for millions of keys (loading)
            return np.concatenate([self._find(q[i:i + _FIND_BLOCK]) for i in range(0, len(q), _FIND_BLOCK)])
        return self._find(q)

    def _find(self, q: np.ndarray) -> np.ndarray:
        slot = q * _GOLDEN
        slot >>= self.shift
        slot = slot.view(np.int64)                            # the home slots (below 2**bits)
        v = self.vals.take(slot)
        out = v.astype(np.int64)                              # int64 rows
        miss = self.source.take(v) != q                       # v = -1 (empty) reads the last key ...
        miss |= v < 0                                         # ... which is no hit
        active = np.flatnonzero(miss)
        out[active] = -1
        on = np.flatnonzero(v.take(active) >= 0)              # a key there, not ours: probe on
        active = active.take(on)
        slot, q = slot.take(active), q.take(active)            # the probing keys' slots and keys, compacted
        while len(active) > _FEW:
            slot += 1
            slot &= self.mask
            v = self.vals.take(slot)
            hit = self.source.take(v) == q
            taken = v >= 0
            hit &= taken
            h = np.flatnonzero(hit)
            if len(h):
                out[active.take(h)] = v.take(h)
                taken ^= hit
            keep = np.flatnonzero(taken)
            active, slot, q = active.take(keep), slot.take(keep), q.take(keep)
        while len(active):                                    # the last few: _WINDOW slots a pass, not one
            win = slot[:, None] + _AHEAD                      # [m, w]
            win &= self.mask
            v = self.vals.take(win)
            hit = self.source.take(v) == q[:, None]
            stop = v < 0                                      # an empty slot ends the search ...
            hit &= ~stop
            stop |= hit                                       # ... and so does the key
            first = stop.argmax(axis=1)                       # the first stop (0 when none)
            rows = np.arange(len(active))
            found = hit[rows, first]
            out[active[found]] = v[rows[found], first[found]]
            on = np.flatnonzero(~stop[rows, first])           # no stop in the window: the next window
            active, slot, q = active.take(on), slot.take(on) + _WINDOW, q.take(on)
        return out


_FEW, _WINDOW = 256, 64            # fewer keys than _FEW still probing: probe _WINDOW slots at once
_AHEAD = np.arange(1, _WINDOW + 1)


def all_distinct(keys: np.ndarray) -> bool:
    s = np.sort(keys)
    return not bool((s[1:] == s[:-1]).any())


__all__ = ["all_distinct", "hash_tokens", "HashIndex", "words8", "chunk", "mix"]
