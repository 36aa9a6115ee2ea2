"""Large float32 arrays recycled between forwards: a scoring forward's logits, the largest array it makes.

Why: memory new to a process costs a page fault per page on its first write (the kernel zeroes it), and on a
virtual machine whose balloon takes freed pages back (free page reporting) the host faults them in again too:
measured on the 2-CPU benchmark machine, 200 MB freshly allocated took 20 ms to touch right after a free, 200 to 450
ms two to four seconds after one. A forward's [r, V] logits (SmolLM2: 100 MB a 512-row chunk of perplexity's window,
200 MB a 1024-row forward) are allocated once per forward, seconds apart: their first tile of the output projection
took 150-350 ms instead of 13-26 ms, 8% of the window path. Lent again, the same memory is written at full speed.

How: `empty(shape)` lends a pooled block as a flat array over a memoryview of it, reshaped. numpy's views of the
lent array (a slice, a reshape, `[None]`, views of views) all have that flat array as their base (numpy collapses a
view's base to the first array whose own base is not an array), so the block stays lent while any of them is alive;
a weak reference to the flat array tells when none is, and the block is free for the next request. Nothing reads a block
before writing it, as with `np.empty`: the same numbers. Arrays under RECYCLE_MIN bytes come from `np.empty` (the
allocator reuses those fast); at most KEEP blocks are kept, so idle memory is bounded by KEEP of the largest
logits made.
"""

from __future__ import annotations

import threading
import weakref

import numpy as np

RECYCLE_MIN = 16 << 20  # bytes: smaller arrays are plain np.empty
KEEP = 4  # blocks kept at most (one per window forward running at once, and a forward's logits held meanwhile)
ROUND = 8 << 20  # bytes: block sizes rounded up to this, so a window's chunks of a few rows more or less share one



class _Block:
    """A raw float32 block and a weak reference to the array last lent over it (None: never lent)."""

    __slots__ = ("raw", "lent")

    def __init__(self, size: int):
        self.raw, self.lent = np.empty(size, np.float32), None

    @property
    def free(self) -> bool:
        return self.lent is None or self.lent() is None


_lock = threading.Lock()
_blocks: list[_Block] = []  # last used last


def empty(shape: tuple[int, ...]) -> np.ndarray:
    """An uninitialised float32 array of `shape`, over a recycled block when it is large (`np.empty` otherwise)."""
    n = int(np.prod(shape))
    if 4 * n < RECYCLE_MIN:
        return np.empty(shape, np.float32)
    with _lock:
        fits = [blk for blk in _blocks if blk.free and blk.raw.size >= n]
        if fits:
            block = min(fits, key=lambda blk: blk.raw.size)
            _blocks.remove(block)  # (identity: _Block has no __eq__)
        else:
            idle = [blk for blk in _blocks if blk.free]
            if len(_blocks) >= KEEP and idle:
                _blocks.remove(idle[0])  # the least recently used idle block makes room
            if len(_blocks) >= KEEP:
                return np.empty(shape, np.float32)  # every kept block is lent: this one is not kept
            block = _Block(-(-4 * n // ROUND) * ROUND // 4)
        flat = np.frombuffer(memoryview(block.raw), np.float32, count=n)  # the base of every view of what we lend
        block.lent = weakref.ref(flat)
        _blocks.append(block)
    return flat.reshape(shape)


def kept_bytes() -> int:
    """Bytes of the blocks kept (lent or idle)."""
    with _lock:
        return sum(blk.raw.nbytes for blk in _blocks)
