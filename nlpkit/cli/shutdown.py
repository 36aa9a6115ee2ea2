"""Ctrl-C, one way for every command: stop the workers, remove partial outputs, exit 130.

`install()` (called by `nlpkit.cli.main.main`) blocks SIGINT in the main thread (and so in every
thread started later) and starts one thread that waits for it: Ctrl-C ends the process from that
thread, whatever the main thread is blocked in, rather than by a KeyboardInterrupt unwinding
through pool, thread and Dask code,
where a `finally: pool.terminate()` could wait forever on a lock a dying worker held (the hang of
``timeout -s INT 2 nlpkit tokenize big.txt``). The handler kills every process this one started
(pool workers, Dask workers: its descendants), removes the outputs registered with
`partial_output` that were not finished, and exits 130 without a traceback. Worker processes
that inherit the handler by fork do nothing with it (the parent stops them).

    with partial_output(path):      # removed on Ctrl-C unless the block finished
        write_model(path)
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

_MAIN_PID: int | None = None
_PARTIAL: dict[str, tuple[bool, tuple | None]] = {}   # path -> (was a directory, its stat before)


def install() -> Callable[[], None]:
    """Make SIGINT (Ctrl-C) and SIGTERM end this command cleanly (main thread only); returns a
    function that puts the previous handlers back (for callers of `main` inside a process)."""
    global _MAIN_PID, _ACTIVE
    import threading

    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    _MAIN_PID = os.getpid()
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    mask = None
    if previous[signal.SIGINT] is not signal.SIG_IGN:       # nohup / background jobs keep ignoring it
        signal.signal(signal.SIGINT, _on_signal)
        # SIGINT blocked here and so in every thread started later (BLAS, pools, Dask): the kernel keeps
        # it for one thread that waits for it, whatever the main thread is blocked in. (A Python handler
        # runs in the main thread only, and a Ctrl-C taken by another thread left the main thread
        # waiting in a lock.)
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        _ACTIVE = True
        _start_waiter()
    if previous[signal.SIGTERM] is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _on_signal)

    def restore() -> None:
        global _ACTIVE
        _ACTIVE = False
        if mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        for sig, handler in previous.items():
            if handler is not None:
                signal.signal(sig, handler)
        _PARTIAL.clear()

    return restore


_WAITER = None
_ACTIVE = False   # install() is in effect (not yet restored)
_GRACEFUL: Callable[[int], None] | None = None   # a command's own clean stop (`stop_gracefully`)


def stop_gracefully(stop: Callable[[int], None] | None) -> None:
    """A command that stops cleanly on its own (`serve`: stop accepting, finish what is in flight, exit 0): the
    first SIGINT or SIGTERM calls `stop(signum)` instead of ending the process; a second one ends it as usual.
    None: back to the usual way."""
    global _GRACEFUL
    _GRACEFUL = stop


def _start_waiter() -> None:
    """One daemon thread per process that takes SIGINT (blocked everywhere) and shuts down."""
    global _WAITER
    import threading

    if _WAITER is not None and _WAITER[0] == os.getpid() and _WAITER[1].is_alive():
        return

    def wait() -> None:
        while True:
            signum = signal.sigwait({signal.SIGINT})
            if os.getpid() == _MAIN_PID and _ACTIVE:
                _shutdown(signum)

    t = threading.Thread(target=wait, name="nlpkit-sigint", daemon=True)
    t.start()
    _WAITER = (os.getpid(), t)


def _is_main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def _descendants(pid: int) -> list[int]:
    """Every process below `pid` (from /proc; empty where there is none)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def stop_workers() -> None:
    """Kill every process this one started (SIGKILL: they hold no state worth saving)."""
    for pid in _descendants(os.getpid()):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    try:   # reap direct children, so none is left defunct
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except OSError:
        pass


def remove_partial_outputs() -> None:
    """Delete the registered outputs whose writing did not finish."""
    for path in list(_PARTIAL):
        _remove(path)


def _stamp(path: str) -> tuple | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def _remove(path: str) -> None:
    was_dir, before = _PARTIAL.pop(path, (False, None))
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            if before is None:               # the command created it
                shutil.rmtree(path, ignore_errors=True)
        elif os.path.lexists(path) and _stamp(path) != before:   # written (or created) by the command
            os.unlink(path)
    except OSError:
        pass


def _on_signal(signum, frame) -> None:
    if os.getpid() != _MAIN_PID:   # a forked worker inherited this handler
        if signum == signal.SIGINT:    # Ctrl-C: the parent stops it
            return
        signal.signal(signum, signal.SIG_DFL)   # SIGTERM (pool.terminate()): die as a worker should
        os.kill(os.getpid(), signum)
        return
    _shutdown(signum)


def _shutdown(signum: int) -> None:
    """Kill the workers, remove partial outputs, exit 128 + signum (130 for Ctrl-C). From the waiter
    thread nothing is flushed: the main thread may hold a stream's lock, blocked on a full pipe. A command that
    stops on its own (`stop_gracefully`) is asked to, the first time."""
    global _GRACEFUL
    if _GRACEFUL is not None:
        stop, _GRACEFUL = _GRACEFUL, None
        stop(signum)
        return
    main = _is_main_thread()
    if main:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        if os.isatty(2):
            os.write(2, b"\x1b[?25h")     # a progress bar may have hidden the cursor
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)               # nothing left worth reading: no complaint about killed helpers
    except OSError:
        pass
    stop_workers()
    remove_partial_outputs()
    if main:
        try:
            sys.stdout.flush()
        except Exception:  # noqa: BLE001 - a closed pipe or a write in progress: nothing to save
            pass
    os._exit(130 if signum == signal.SIGINT else 128 + signum)


@contextmanager
def partial_output(path: str | os.PathLike) -> Iterator[None]:
    """Register `path` as being written: removed on Ctrl-C (or an error) unless the block ends.

    A directory is removed only when the command created it (one that existed keeps what the
    command had not yet replaced); a file only when the command created or changed it (an error
    before writing leaves a previous file alone).
    """
    key = os.path.abspath(os.fspath(path))
    _PARTIAL[key] = (os.path.isdir(key), _stamp(key))
    try:
        yield
    except BaseException:
        if key in _PARTIAL:
            _remove(key)
        raise
    else:
        _PARTIAL.pop(key, None)
