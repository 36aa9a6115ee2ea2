"""The shard protocol: byte ranges of files that start and end at record boundaries, and the
signature of a counting stage's map function.

A plain file is cut every `shard_bytes` (default 64 MB) at the next line end (or, for
paragraph corpora, the next blank line; for SMART files the next ``.I`` line), so every
line belongs to exactly one shard. A compressed file (``.gz``, ``.bz2``, ``.zst``) cannot
be cut without reading it, so it is one shard. Paths may be local or anything fsspec
opens (``s3://``, ``gs://``, ``hdfs://``, ``memory://``): a worker opens its shard
itself, so only the shard description (path, start, end) crosses the network.

Planning reads a few bytes around each cut point (a seek and a short read per shard), not
the file. Nothing here imports dask: this is the ground floor the wings' shard modules
(``stats/pmi_shards.py``, ``retrieval/bm25_shards.py``, ...) build on, and the same shards are
read by the local path in tests; `nlpkit.distributed` (the one module that knows Dask) plans
and submits them.

>>> s = Shard("corpus.txt", 0, 0, 100)
>>> str(s)
'corpus.txt'
"""

from __future__ import annotations

import io
import os
import re
from dataclasses import dataclass
from typing import IO, Callable, Generic, Protocol, Sequence, TypeVar

from nlpkit.errors import NlpkitError, UsageError
from nlpkit.io import decompress, is_compressed, is_url, open_binary

SHARD_BYTES = 64 << 20
MIN_AUTO_BYTES = 1 << 20        # --shard-size auto: never smaller tasks than this
TASKS_PER_WORKER = 2            # --shard-size auto: tasks per worker (2 or more workers)
_PROBE = 1 << 16                # bytes read at a time when looking for a boundary
# A boundary is the position just after the match: after a newline (lines), after a blank
# line (paragraphs), before a ".I" line (SMART).
BOUNDARIES = {"line": re.compile(rb"\n"), "paragraph": re.compile(rb"\n[ \t\r\f\v]*\n"),
              "smart": re.compile(rb"\n(?=\.I[ \t\r\n])"), "file": None}


@dataclass(frozen=True)
class Shard:
    """Bytes ``start:end`` of file `path` (end None = to the end); `index` = position in the file.

    ``open()`` gives a binary stream of exactly those bytes (decompressed for a whole
    compressed file), so every reader that takes a path also takes a shard
    (`nlpkit.io.open_binary` calls ``open()``). A shard after the first is named
    ``path@OFFSET`` in messages (line numbers then count from that byte). `path` is the path as the
    user gave it (for names in output and messages); a worker opens `location`, the absolute path
    the driver resolved (workers run in directories of their own).
    """

    path: str
    index: int
    start: int
    end: int | None
    file_index: int = 0          # which input file (files are never crossed)
    location: str | None = None  # the absolute local path (None: `path` is a URL, or already absolute)

    @property
    def first(self) -> bool:
        return self.start == 0

    def __str__(self) -> str:
        return self.path if self.start == 0 else f"{self.path}@{self.start}"

    def open(self) -> IO[bytes]:
        raw = open_binary(self.location or self.path)
        if self.start == 0 and self.end is None:
            return raw
        try:
            raw.seek(self.start)
        except (OSError, ValueError) as e:
            raw.close()
            raise NlpkitError(f"{self}: cannot seek ({e})") from None
        return io.BufferedReader(_Range(raw, self.end - self.start), 1 << 20)   # readline: buffered


class _Range(io.RawIOBase):
    """At most `n` bytes of `raw` from its current position."""

    def __init__(self, raw: IO[bytes], n: int) -> None:
        self.raw, self.left = raw, n

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        if self.left <= 0:
            return 0
        data = self.raw.read(min(len(b), self.left))
        n = len(data)
        b[:n] = data
        self.left -= n
        return n

    def close(self) -> None:
        try:
            self.raw.close()
        finally:
            super().close()


def file_size(path: str) -> int:
    """Size in bytes of a local or fsspec path; a missing file is an NlpkitError naming it."""
    if is_url(path):
        try:
            import fsspec

            fs, p = fsspec.core.url_to_fs(path)
            return int(fs.size(p))
        except ImportError:
            raise NlpkitError(f"{path}: reading URLs needs fsspec: pip install 'nlpkit[dask]'") from None
        except FileNotFoundError:
            raise NlpkitError(f"{path}: no such file") from None
        except OSError as e:
            raise NlpkitError(f"{path}: cannot read ({e})") from None
    try:
        if os.path.isdir(path):
            raise NlpkitError(f"{path}: is a directory, expected a file")
        return os.path.getsize(path)
    except FileNotFoundError:
        raise NlpkitError(f"{path}: no such file") from None
    except OSError as e:
        raise NlpkitError(f"{path}: cannot read ({e.strerror or e})") from None


def parse_size(shard_size: str | int | None) -> int | None:
    """``64M``, ``1G``, ``500k``, ``4096`` -> bytes; ``auto`` (or None) -> None (`auto_shard_bytes`)."""
    if isinstance(shard_size, int):
        return shard_size
    if shard_size is None or str(shard_size).strip().lower() == "auto":
        return None
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgG]?)[bB]?\s*", str(shard_size))
    if not m:
        raise UsageError(f"`shard_size`: expected auto or a size such as 64M, 1G or 65536, got {shard_size!r}")
    n = float(m.group(1)) * {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[m.group(2).lower()]
    if n < 1:
        raise UsageError(f"`shard_size` must be at least 1 byte, got {shard_size!r}")
    return int(n)


def _next_boundary(f: IO[bytes], pos: int, size: int, pattern: re.Pattern) -> int:
    """The first boundary at or after byte `pos` (`size` when there is none)."""
    back = 16                     # a boundary match may start a little before pos
    start = max(0, pos - back)
    f.seek(start)
    buf = b""
    while True:
        chunk = f.read(_PROBE)
        buf += chunk
        for m in pattern.finditer(buf):
            if start + m.end() > pos or (start + m.end() == pos and pos > 0):
                return start + m.end()
        if not chunk:
            return size
        keep = len(buf) - back     # keep a tail where a match may continue
        start += keep
        buf = buf[keep:]


def auto_shard_bytes(paths: list[str], n_workers: int) -> int:
    """``--shard-size auto``: one task for one worker, else about `TASKS_PER_WORKER` tasks per
    worker; between 1 MB and `SHARD_BYTES` (64 MB) either way.

    Small inputs still keep every worker busy (33 MB on two workers: 4 tasks of 8 MB) and large
    ones get 64 MB tasks; one worker gains nothing from more tasks than the 64 MB cap gives
    (every task is one more partial result to pickle and merge). Results never depend on the
    shard size, only the run time does.
    """
    total = sum(file_size(p) for p in paths)
    tasks = 1 if n_workers <= 1 else TASKS_PER_WORKER * n_workers
    return int(min(SHARD_BYTES, max(MIN_AUTO_BYTES, -(-total // tasks))))


def shard_size(shard: Shard) -> int:
    """Bytes of a shard as stored (a compressed file: its compressed size)."""
    return shard.end - shard.start if shard.end is not None else file_size(shard.path)


def group_shards(shards: list[Shard], target: int) -> list[list[Shard]]:
    """Consecutive shards packed into tasks of about `target` bytes (small files together).

    ``group_shards([a(1 MB), b(1 MB), c(70 MB)], 64 MB) -> [[a, b], [c]]``: order is kept, so
    a task is a run of the input and partial counts still merge in input order.
    """
    groups: list[list[Shard]] = []
    size = 0
    for sh in shards:
        n = shard_size(sh)
        if not groups or (size > 0 and size + n > target):
            groups.append([])
            size = 0
        groups[-1].append(sh)
        size += n
    return groups


def plan_shards(paths: list[str], shard_bytes: int = SHARD_BYTES, split: str = "line") -> list[Shard]:
    """Shards of `paths` in input order; `split` is line, paragraph, smart or file (never cut)."""
    if split not in BOUNDARIES:
        raise ValueError(split)
    if any(p == "-" for p in paths):
        raise UsageError("Dask workers read files (local, shared or fsspec URLs), not stdin '-'")
    shards: list[Shard] = []
    pattern = BOUNDARIES[split]
    for k, path in enumerate(paths):
        size = file_size(path)
        where = None if is_url(path) or os.path.isabs(path) else os.path.abspath(path)
        if is_compressed(path) or pattern is None or size <= shard_bytes:
            shards.append(Shard(path, 0, 0, None, k, where))
            continue
        cuts = [0]
        f = open_binary(path)
        try:
            while True:
                nxt = _next_boundary(f, cuts[-1] + shard_bytes, size, pattern)
                if nxt >= size:
                    break
                cuts.append(nxt)
        finally:
            f.close()
        for i, s in enumerate(cuts):
            e = cuts[i + 1] if i + 1 < len(cuts) else size
            shards.append(Shard(path, i, s, e, k, where))
    return shards


__all__ = ["SHARD_BYTES", "Shard", "plan_shards", "group_shards", "auto_shard_bytes", "parse_size", "file_size",
           "decompress", "CountShards", "CountingStage"]


# ------------------------------------------------------------------ a counting stage's map function

SettingsT = TypeVar("SettingsT", contravariant=True)
PartT = TypeVar("PartT")


class CountShards(Protocol[SettingsT, PartT]):
    """The map function of a counting stage: ``count(shards, settings) -> part``.

    `shards` are one task's shards in input order (paths work too: the local path and the tests
    pass files); `settings` is the stage's own frozen record of options (each wing's
    ``CountSettings``), the same for every task. The part is what the stage's `merge` sums, or
    what stays on a worker for the stage's next map (tfidf, bm25).
    """

    def __call__(self, shards: Sequence[Shard | str], settings: SettingsT, /) -> PartT: ...


@dataclass(frozen=True)
class CountingStage(Generic[SettingsT, PartT]):
    """A wing's counting stage (declared in its ``*_shards`` module) as `nlpkit.distributed.stages` runs
    it: its map function and the merge of partial results in input order (None: the parts stay on the
    workers)."""

    count: CountShards[SettingsT, PartT]
    merge: Callable[[list[PartT]], PartT] | None = None
