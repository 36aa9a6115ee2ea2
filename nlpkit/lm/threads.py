"""Row-parallel numpy for long forward passes: our own worker threads, with BLAS held to one thread.

Shared by the engine (`nlpkit.lm.transformer.model`), perplexity's windows, the model comparison and the
Dask stages (`match_blas_threads`: a worker's BLAS thread count equal to the driver's, so the numbers are).

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
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from nlpkit.workers import available_cpus


@functools.cache
def _openblas_lib() -> tuple[ctypes.CDLL, str, str] | None:
    """(numpy's OpenBLAS library, its symbol prefix, its symbol suffix), or None when it is not found."""
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
                if getattr(lib, f"{prefix}get_num_threads{suffix}", None) is not None:
                    return lib, prefix, suffix
    return None


@functools.cache
def _openblas() -> tuple[Callable[[], int], Callable[[int], None]] | None:
    """(get_num_threads, set_num_threads) of numpy's OpenBLAS, or None when it is not found."""
    found = _openblas_lib()
    if found is None:
        return None
    lib, prefix, suffix = found
    get = getattr(lib, f"{prefix}get_num_threads{suffix}", None)
    put = getattr(lib, f"{prefix}set_num_threads{suffix}", None)
    if get is None or put is None:
        return None
    get.restype, get.argtypes = ctypes.c_int, []
    put.restype, put.argtypes = None, [ctypes.c_int]
    return get, put


def _openblas_text(name: str) -> str | None:
    """The string OpenBLAS's `openblas_get_NAME` returns (corename, config), or None."""
    found = _openblas_lib()
    if found is None:
        return None
    lib, prefix, suffix = found
    fn = getattr(lib, f"{prefix}get_{name}{suffix}", None)
    if fn is None:
        return None
    fn.restype, fn.argtypes = ctypes.c_char_p, []
    value = fn()
    return value.decode("ascii", errors="replace").strip() if value else None


def blas_info() -> dict:
    """The BLAS numpy multiplies with: {"library", "version", "kernel", "threads"}. The kernel is OpenBLAS's core
    (the processor's own, or the one OPENBLAS_CORETYPE forces): the engine's numbers are the same bits at any thread
    count, load or packing on one kernel, but may differ in their last bits on another (another machine), so a
    result records it. For a BLAS other than numpy's OpenBLAS, numpy's build information (kernel None).

    >>> blas_info()  # doctest: +SKIP
    {'library': 'OpenBLAS', 'version': '0.3.31.188.0', 'kernel': 'SkylakeX', 'threads': 2}
    """
    config = _openblas_text("config")
    if config:  # "OpenBLAS 0.3.31.188.0  USE64BITINT DYNAMIC_ARCH NO_AFFINITY SkylakeX MAX_THREADS=64"
        words = config.split()
        return {"library": words[0], "version": words[1] if len(words) > 1 else None,
                "kernel": _openblas_text("corename"), "threads": blas_threads()}
    library = version = None
    try:
        import numpy
        deps = numpy.show_config(mode="dicts").get("Build Dependencies", {}).get("blas", {})
        library, version = deps.get("name"), deps.get("version")
    except Exception:  # numpy < 1.26 has no dict mode
        pass
    return {"library": library, "version": version, "kernel": None, "threads": blas_threads()}


def blas_line() -> str:
    """`blas_info` as one line for `-v`: "OpenBLAS 0.3.31.188.0, kernel SkylakeX, 2 threads"."""
    info = blas_info()
    parts = [" ".join(str(x) for x in (info["library"] or "unknown BLAS", info["version"]) if x)]
    if info["kernel"]:
        parts.append(f"kernel {info['kernel']}")
    if info["threads"]:
        parts.append(f"{info['threads']} thread{'s' if info['threads'] != 1 else ''}")
    return ", ".join(parts)


def blas_threads() -> int | None:
    """How many threads numpy's OpenBLAS uses (it honours OPENBLAS_NUM_THREADS / OMP_NUM_THREADS)."""
    handle = _openblas()
    return int(handle[0]()) if handle else None


def match_blas_threads(blas_threads: int | None) -> None:
    """A Dask worker (which Dask starts with one BLAS thread) uses the driver's BLAS thread count, so that its
    decode steps run as the driver's do (scoring forwards run on one BLAS thread anyway: `lm/transformer/model.py`)."""
    handle = _openblas()
    if blas_threads and handle is not None and int(handle[0]()) != blas_threads:
        handle[1](blas_threads)


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
    return max(1, min(n, available_cpus()))


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

    def split(self, n_rows: int, least: int = 1) -> list[tuple[int, int]]:
        """Contiguous [start, end) row ranges of near-equal size, n of them, fewer when that leaves a range under
        `least` rows (a matrix product of very few rows may take another OpenBLAS kernel, with other bits)."""
        parts = max(1, min(self.n, n_rows // max(1, least)))
        bounds = [n_rows * i // parts for i in range(parts + 1)]
        return [(s, e) for s, e in zip(bounds, bounds[1:]) if e > s]


SERIAL = RowPool(1)  # everything on the calling thread: short inputs and decode steps


@contextmanager
def held_blas_threads(n: int):
    """Hold BLAS to n threads inside the block (and restore its count after)."""
    handle = _openblas()
    if handle is None:
        yield
        return
    get, put = handle
    before = int(get())
    if before == n:
        yield
        return
    put(n)
    try:
        yield
    finally:
        put(before)


# ---------------------------------------------------------------- how many threads, now

_HZ = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") and "SC_CLK_TCK" in os.sysconf_names else 100


class CpuShare:
    """How many threads the engine should run now: the CPUs this process may use, less those that other
    processes kept busy over the last `interval` seconds or more (the busy time of those CPUs in /proc/stat,
    less this process's own CPU time); between measurements the last answer stands. Before a first
    measurement it goes by the tasks runnable at that moment. Without /proc/stat (macOS, Windows) the
    count asked for stands.

    Why: with a thread on every CPU, one busy process beside nlpkit makes every threaded BLAS call (a
    decode step makes 121) and every row-parallel pass wait for a descheduled thread: on 2 CPUs beside
    other work, 2-thread decode ran at 1.5 tok/s against 21 tok/s on one thread. llama.cpp leaves the
    count to its user (`-t`, default the physical cores) and slows down the same way; here the count
    follows the machine, all CPUs while they are free and fewer while they are not. Thread counts
    never change a number of a prefill, a score or a perplexity: every matrix product but a decode
    step's runs on one BLAS thread, in row shares cut as `lm/transformer/products.py` cuts them
    (tests/lm/test_determinism.py); a decode step's matrix-vector products run on OpenBLAS's threads.

    ``CpuShare().threads(2) -> 1`` while another process keeps one of 2 CPUs busy.
    """

    def __init__(self, interval: float = 0.2):
        self.interval = interval
        self.cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set(range(os.cpu_count() or 1))
        self._mark = self._sample()
        self._free: float | None = None

    def _sample(self) -> tuple[float, float, float, int] | None:
        """(monotonic s, busy CPU-s of our CPUs, this process's CPU-s, runnable tasks); None without /proc/stat."""
        try:
            with open("/proc/stat", "rb") as f:
                data = f.read()
        except OSError:
            return None
        busy, running = 0, 1
        for line in data.split(b"\n"):
            if line[:3] == b"cpu" and line[3:4].isdigit():
                name, *fields = line.split()
                if int(name[3:]) in self.cpus:
                    v = [int(x) for x in fields[:8]]  # user nice system idle iowait irq softirq steal
                    busy += sum(v) - v[3] - v[4]
            elif line.startswith(b"procs_running"):
                running = int(line.split()[1])
        return time.monotonic(), busy / _HZ, time.process_time(), running

    def free(self) -> float:
        """How many of our CPUs other processes left idle, lately."""
        if self._mark is None:
            return float(len(self.cpus))
        if self._free is not None and time.monotonic() - self._mark[0] < self.interval:
            return self._free
        now = self._sample()
        if now is None:
            return float(len(self.cpus))
        elapsed = now[0] - self._mark[0]
        if elapsed >= self.interval:
            others = (now[1] - self._mark[1]) - (now[2] - self._mark[2])  # CPU-seconds of other processes
            self._free = len(self.cpus) - min(float(len(self.cpus)), max(0.0, others / elapsed))
            self._mark = now
        else:  # nothing measured yet: the tasks runnable now, this one aside
            self._free = float(len(self.cpus) - min(len(self.cpus), max(0, now[3] - 1)))
        return self._free

    def threads(self, want: int) -> int:
        """min(want, the free CPUs rounded to the nearest), at least 1."""
        return 1 if want <= 1 else max(1, min(want, int(self.free() + 0.5)))


_share = CpuShare()  # measuring from import on, so the first forward after loading has a measurement


_local = threading.local()


@contextmanager
def serial_here():
    """Inside the block, this thread's forward passes and log-softmaxes run on it alone (`engine_threads()` is
    1 here): for a caller that already runs several of them at once on its own threads (perplexity's windows),
    with BLAS held to one thread around them."""
    before = getattr(_local, "serial", False)
    _local.serial = True
    try:
        yield
    finally:
        _local.serial = before


def engine_threads() -> int:
    """Threads for the next forward pass: `workers()`, fewer while other processes keep CPUs busy
    (`CpuShare`); $NLPKIT_LM_THREADS, when set, is used as it is; 1 inside `serial_here`."""
    if getattr(_local, "serial", False):
        return 1
    want = workers()
    if want <= 1 or os.environ.get("NLPKIT_LM_THREADS"):
        return want
    return _share.threads(want)
