"""Worker processes, started one way by every command that uses them.

Why one way: Ctrl-C reaches every process of the terminal's process group. A pool worker that
takes it prints ``Process ForkPoolWorker-1: Traceback ... KeyboardInterrupt`` and may die holding
the pool's queue lock, and the parent then waits on that lock forever. Workers started here ignore
SIGINT (it is blocked while they fork, so none sees one before it ignores it); the parent alone
stops the work (`nlpkit.cli.shutdown` ends the process and its workers on Ctrl-C).

    with process_pool(2) as pool:
        total = sum(pool.imap(len, ["a", "bb"]))      # -> 3
"""

from __future__ import annotations

import os
import signal
from contextlib import contextmanager
from typing import Any, Callable, Iterator


def fork_is_safe() -> bool:
    """No thread but the main one (and nlpkit's Ctrl-C waiter, parked in sigwait) could hold a lock
    a forked child would inherit held."""
    import threading

    return all(t is threading.main_thread() or t.name == "nlpkit-sigint" for t in threading.enumerate())


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def ignore_sigint(initializer: Callable[..., Any] | None = None, *initargs: Any) -> None:
    """Worker start-up: leave Ctrl-C to the parent, die on SIGTERM (the pool's terminate), then run
    `initializer(*initargs)`."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    _die_with_parent()
    if initializer is not None:
        initializer(*initargs)


def _die_with_parent() -> None:
    """Linux: this worker is killed when the process that started it ends (a Ctrl-C that ends the
    parent while it is still forking workers must leave none behind, waiting on the pool's pipe)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL))      # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:                        # the parent ended before prctl took effect
        os._exit(0)


@contextmanager
def sigint_blocked() -> Iterator[None]:
    """SIGINT held back in this thread while workers fork (they inherit the mask, then ignore it)."""
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def mp_context(method: str | None = "fork"):
    """The multiprocessing context for `method`, or None when the platform lacks it."""
    import multiprocessing

    if method is not None and method not in multiprocessing.get_all_start_methods():
        return None
    return multiprocessing.get_context(method)


@contextmanager
def process_pool(jobs: int, initializer: Callable[..., Any] | None = None, initargs: tuple = (),
                 method: str = "fork"):
    """A `multiprocessing.Pool` of `jobs` workers that ignore SIGINT; terminated when the block ends."""
    ctx = mp_context(method)
    if ctx is None:
        raise RuntimeError(f"this platform cannot start workers by {method}")
    with sigint_blocked():
        pool = ctx.Pool(jobs, initializer=ignore_sigint, initargs=(initializer, *initargs))
    try:
        yield pool
    finally:
        pool.terminate()


def process_executor(jobs: int, initializer: Callable[..., Any] | None = None, initargs: tuple = (),
                     method: str | None = "fork"):
    """A `concurrent.futures.ProcessPoolExecutor` whose workers ignore SIGINT (use it in `with`)."""
    from concurrent.futures import ProcessPoolExecutor

    with sigint_blocked():
        return ProcessPoolExecutor(jobs, mp_context=mp_context(method) or mp_context(None),
                                   initializer=ignore_sigint, initargs=(initializer, *initargs))
