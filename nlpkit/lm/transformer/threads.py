"""Row-parallel numpy for long forward passes: our own worker threads, with BLAS held to one thread.

Why: a 512-token prefill is a few large matmuls per layer and many element-wise passes (norms, RoPE,
SiLU, softmax) and small attention matmuls. OpenBLAS threads only the matmuls, and its threads sync
on every small one, so two BLAS threads gave 1.4x one thread. Splitting the rows (and the attention
blocks) over two Python threads instead, each calling single-threaded BLAS, runs everything in
parallel: numpy releases the GIL in matmul and in ufunc loops.

The BLAS handle is numpy's bundled OpenBLAS (found through ctypes, as threadpoolctl does); with any
other BLAS `blas_threads()` is None and the engine keeps its single-thread-per-call path.
"""

from __future__ import annotations

import ctypes
import functools
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path


@functools.cache
def _openblas() -> tuple[Callable[[], int], Callable[[int], None]] | None:
    """(get_num_threads, set_num_threads) of numpy's OpenBLAS, or None when it is not found."""
    try:
        import numpy
        libdir = Path(numpy.__file__).resolve().parent.parent / "numpy.libs"
        paths = sorted(libdir.glob("lib*openblas*.so*"))
    except OSError:
        return None
    for path in paths:
        try:
            lib = ctypes.CDLL(str(path))  # already loaded by numpy: dlopen returns the same handle
        except OSError:
            continue
        for prefix in ("scipy_openblas_", "openblas_"):
            for suffix in ("64_", ""):
                get = getattr(lib, f"{prefix}get_num_threads{suffix}", None)
                put = getattr(lib, f"{prefix}set_num_threads{suffix}", None)
                if get is not None and put is not None:
                    get.restype, get.argtypes = ctypes.c_int, []
                    put.restype, put.argtypes = None, [ctypes.c_int]
                    return get, put
    return None


def blas_threads() -> int | None:
    """How many threads numpy's OpenBLAS uses (it honours OPENBLAS_NUM_THREADS / OMP_NUM_THREADS)."""
    handle = _openblas()
    return int(handle[0]()) if handle else None


def workers() -> int:
    """Worker threads for a row-parallel pass: BLAS's own thread count (so the user's environment
    variables still decide), at most the CPUs this process may use; 1 disables the parallel path."""
    if os.environ.get("NLPKIT_LM_THREADS"):
        value = os.environ["NLPKIT_LM_THREADS"]
        if not value.strip().isdigit():
            from nlpkit.errors import NlpkitError
            raise NlpkitError(f"NLPKIT_LM_THREADS must be a whole number of threads, got {value!r}")
        return max(1, int(value))
    n = blas_threads()
    if n is None:
        return 1
    return max(1, min(n, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))


_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def _executor(n: int) -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None or _pool._max_workers != n:
            _pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="nlpkit-lm")
        return _pool


class RowPool:
    """`map(fn, parts)` runs fn on each part in n threads and waits; exceptions propagate."""

    def __init__(self, n: int):
        self.n = n
        self.executor = _executor(n) if n > 1 else None

    def map(self, fn: Callable, parts: Sequence) -> list:
        if self.executor is None:
            return [fn(p) for p in parts]
        if len(parts) == 1:
            return [fn(parts[0])]
        futures = [self.executor.submit(fn, p) for p in parts[1:]]
        first = fn(parts[0])  # the calling thread does a share too
        return [first] + [f.result() for f in futures]

    def split(self, n_rows: int) -> list[tuple[int, int]]:
        """n contiguous [start, end) row ranges of near-equal size."""
        bounds = [n_rows * i // self.n for i in range(self.n + 1)]
        return [(s, e) for s, e in zip(bounds, bounds[1:]) if e > s]


SERIAL = RowPool(1)  # everything on the calling thread: short inputs and decode steps


@contextmanager
def single_threaded_blas():
    """Hold BLAS to one thread inside the block (and restore its count after)."""
    handle = _openblas()
    if handle is None:
        yield
        return
    get, put = handle
    before = int(get())
    put(1)
    try:
        yield
    finally:
        put(before)
