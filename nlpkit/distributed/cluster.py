"""Connecting to Dask and running a map over shards with a tree reduction.

``--dask ADDRESS`` (or ``NLPKIT_DASK``):

- ``local`` / ``local:N``: a `LocalCluster` of N worker processes (default: the CPU count),
  one thread each, on this machine; its dashboard address is printed to stderr;
- ``tcp://host:8786`` / ``tls://host:8786``: a running scheduler;
- a path to a scheduler file (``dask scheduler --scheduler-file FILE``).

Workers must run the same nlpkit version as the driver (checked on connect). Tasks hold
no state between calls except a per-process model cache (perplexity), so results do not
depend on how many threads a worker runs. A task whose worker dies is recomputed by the
scheduler (Dask's own retry); an exception in a task (an unreadable shard) is raised
here as the `NlpkitError` the worker raised.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence

from nlpkit.errors import NlpkitError, UsageError

EXTRA = "pip install 'nlpkit[dask]'"
FAN_IN = 8                      # partial results combined per reduction task


def _import_distributed():
    try:
        import distributed
    except ImportError:
        raise NlpkitError(f"`address` needs Dask, an optional extra: {EXTRA}") from None
    return distributed


def _check_address(address: str) -> None:
    """tcp://HOST:PORT and tls://HOST:PORT need both parts, the port a number (a usage error, not Dask's)."""
    scheme, _, rest = address.partition("://")
    if scheme not in ("tcp", "tls"):
        return
    host, sep, port = rest.rstrip("/").rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"`address` {address}: expected {scheme}://HOST:PORT (the scheduler's port, e.g. 8786)")


CONNECT_SECONDS = 30


def _client(distributed, label: str, failure: str, **how):
    """`distributed.Client(**how)` within CONNECT_SECONDS (twice that in all: Dask's own timeout
    covers the connection, not the handshake, so a port that is not a scheduler would hang), with
    Dask's failures turned into one message."""
    import threading

    box: dict = {}

    def make() -> None:
        try:
            box["client"] = distributed.Client(timeout=f"{CONNECT_SECONDS}s", **how)
        except BaseException as e:     # noqa: BLE001 - reported below, on the calling thread
            box["error"] = e

    t = threading.Thread(target=make, daemon=True)
    t.start()
    t.join(2 * CONNECT_SECONDS)
    if t.is_alive():
        raise NlpkitError(f"{failure}: no Dask scheduler answered in {2 * CONNECT_SECONDS} s (is it the "
                          "scheduler's port, not the dashboard's?)")
    e = box.get("error")
    if isinstance(e, TypeError) and label.startswith("tls://"):
        raise NlpkitError(f"{failure}: tls:// needs Dask's TLS settings (distributed.comm.tls.* in the dask "
                          "config: ca-file, client certificate and key)") from None
    if "scheduler_file" in how and isinstance(e, (AssertionError, ValueError, KeyError)):
        raise NlpkitError(f"{failure}: not a Dask scheduler file (JSON with the scheduler's address, as "
                          "`dask scheduler --scheduler-file FILE` writes it)") from None
    if isinstance(e, MemoryError):
        raise NlpkitError(f"{failure}: the other end does not speak Dask's protocol") from None
    if isinstance(e, (OSError, TimeoutError, ValueError, KeyError, AssertionError, TypeError)):
        raise NlpkitError(f"{failure} ({type(e).__name__}: {e})" if str(e) else f"{failure} ({type(e).__name__})") \
            from None
    if e is not None:
        raise e
    return box["client"]


def _worker_version() -> str:
    import nlpkit

    return nlpkit.__version__


@contextmanager
def connect(address: str, quiet: bool = False) -> Iterator[Any]:
    """A `distributed.Client` for `address` (see the module docstring); closed on exit."""
    distributed = _import_distributed()
    cluster = None
    if address == "local" or address.startswith("local:"):
        n = address.partition(":")[2]
        try:
            n_workers = int(n) if n else (os.cpu_count() or 1)
        except ValueError:
            raise UsageError(f"`address` {address}: expected local or local:N (N workers)") from None
        if n_workers < 1:
            raise UsageError(f"`address` {address}: N must be at least 1")
        import logging

        cluster = local_cluster(n_workers)
        for name in ["distributed", *logging.root.manager.loggerDict]:   # this process runs the scheduler:
            if name.startswith("distributed"):       # its errors come back as nlpkit's messages, and the
                logging.getLogger(name).setLevel(logging.CRITICAL)     # shutdown after Ctrl-C says nothing
        client = distributed.Client(cluster)
        if not quiet:
            sys.stderr.write(f"nlpkit: dask LocalCluster with {n_workers} worker(s); "
                             f"dashboard {client.dashboard_link}\n")
    elif address.startswith(("tcp://", "tls://", "inproc://", "ucx://")):
        _check_address(address)
        client = _client(distributed, address, f"`address` {address}: cannot reach the scheduler", address=address)
    elif os.path.isfile(address):
        client = _client(distributed, address, f"`address` {address}: cannot connect with this scheduler file",
                         scheduler_file=address)
    else:
        raise UsageError(f"`address` {address!r}: expected local, local:N, tcp://HOST:PORT, tls://HOST:PORT "
                         "or a scheduler file")
    try:
        check_versions(client)
        yield client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def local_cluster(n_workers: int):
    """A LocalCluster of `n_workers` one-thread worker processes, without Dask's default
    ``MALLOC_TRIM_THRESHOLD_=65536`` for workers: it turns every numpy temporary over 128 kB into
    an mmap and its page faults (the counting stages ran 1.6x slower with it). Its workers log only
    critical events: a task's error comes back as nlpkit's own message, not also as a worker's
    "Compute Failed" traceback."""
    import logging

    import dask
    import distributed

    import signal
    import threading

    # Ctrl-C reaches the whole process group: the workers start with SIGINT ignored (Python keeps an
    # ignored SIGINT ignored), so only this process stops (nlpkit.cli.shutdown) and exits 130 quietly.
    # SIGINT is also blocked meanwhile: a Ctrl-C during start-up waits and is handled once the cluster
    # is up, instead of being lost (the cluster's threads, started now, keep it blocked for good).
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT}) if main else None
    try:
        with dask.config.set({"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}):
            return distributed.LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                                            dashboard_address=":0", silence_logs=logging.CRITICAL)
    finally:
        if main:
            signal.signal(signal.SIGINT, previous)
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def check_versions(client) -> None:
    """Every worker must run this nlpkit version (results are only comparable then)."""
    import nlpkit

    if not client.scheduler_info().get("workers"):
        client.wait_for_workers(1, timeout=60)
    try:
        versions = client.run(_worker_version)
    except Exception as e:  # noqa: BLE001 - a worker without nlpkit cannot unpickle the task
        raise NlpkitError(f"the Dask workers cannot run nlpkit ({type(e).__name__}: {e}); "
                          f"install nlpkit {nlpkit.__version__} on every worker") from None
    bad = {w: v for w, v in versions.items() if v != nlpkit.__version__}
    if bad:
        w, v = next(iter(bad.items()))
        raise NlpkitError(f"Dask worker {w} runs nlpkit {v}, this driver {nlpkit.__version__}: "
                          f"install the same version on every worker ({len(bad)} mismatched)")


def _same(obj):
    return obj


class _Whole:
    """Pickles as its object, in one piece: Dask serializes a dict or list item by item (a
    50k-term vocabulary took seconds of the driver's event loop); unpickled, it is the object."""

    def __init__(self, obj) -> None:
        self.obj = obj

    def __reduce__(self):
        return _same, (self.obj,)


def broadcast(client, objs: list) -> list:
    """Futures of `objs` held by every worker (``client.scatter(..., broadcast=True)``), each sent
    as one pickle and not hashed (`hash=False`: no tokenizing of large containers)."""
    return client.scatter([_Whole(o) for o in objs], broadcast=True, hash=False)


class Ticker:
    """Counts finished tasks for a progress callback ``progress(done, total)``."""

    def __init__(self, progress: Callable[..., None] | None, total: int) -> None:
        self.progress, self.total, self.done = progress, total, 0

    def add(self, n: int) -> None:
        self.total += n

    def __call__(self, n: int = 1) -> None:
        self.done += n
        if self.progress is not None:
            self.progress(self.done, self.total)


def map_reduce(client, func: Callable, items: Sequence, combine: Callable[[list], Any],
               progress: Callable[..., None] | None = None, args: tuple = (),
               fan_in: int = FAN_IN, ticker: Ticker | None = None) -> Any:
    """``combine([func(items[0], *args), func(items[1], *args), ...])`` as a tree on the cluster.

    `combine` takes a list of partial results in input order and returns one; groups of
    `fan_in` neighbours are combined level by level, so the result does not depend on which
    task finishes first. Only the final result comes back to this process.
    """
    from distributed import as_completed

    if not items:
        raise NlpkitError("no input to process")
    level = client.map(func, list(items), *[[a] * len(items) for a in args], pure=False)
    held = {f.key: f for f in level}           # futures this process still references
    inputs: dict[str, list[str]] = {}          # reduction task -> the keys it combines
    while len(level) > 1:
        nxt = []
        for i in range(0, len(level), fan_in):
            group = level[i:i + fan_in]
            if len(group) == 1:
                nxt.append(group[0])
                continue
            f = client.submit(combine, group, pure=False)
            held[f.key] = f
            inputs[f.key] = [g.key for g in group]
            nxt.append(f)
        level = nxt
    final = level[0]
    tick = ticker or Ticker(progress, 0)
    tick.add(len(held))
    del level
    done = as_completed(list(held.values()))
    for fut in done:
        if fut.status == "error":
            fut.result()                      # raises the worker's exception here
        for k in inputs.pop(fut.key, ()):     # combined: the partials may be freed
            held.pop(k, None)
        del fut
        tick()
    return final.result()


def map_ordered(client, func: Callable, items: Sequence, progress: Callable[..., None] | None = None,
                args: tuple = (), window: int | None = None, ticker: Ticker | None = None) -> Iterator[Any]:
    """Yield ``func(item, *args)`` in input order, holding at most `window` results here.

    Results are fetched one at a time in order (a streaming merge): this process never
    holds more than the results finished ahead of the one it is waiting for.
    """
    from distributed import wait

    items = list(items)
    tick = ticker or Ticker(progress, 0)
    tick.add(len(items))
    window = window or max(4, 4 * len(client.scheduler_info().get("workers", {})))
    pending: list = []
    i = 0
    while i < len(items) or pending:
        while i < len(items) and len(pending) < window:
            pending.append(client.submit(func, items[i], *args, pure=False))
            i += 1
        fut = pending.pop(0)
        wait([fut])
        result = fut.result()
        del fut
        tick()
        yield result
