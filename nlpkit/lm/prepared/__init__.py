"""The prepared-model cache: arrays made once from a model file (dequantized, transposed, sorted, hashed),
kept in one file per model that later loads memory-map instead of rebuilding.

Why: loading SmolLM2-135M means reading 538 MB of safetensors and transposing every projection (or
dequantizing a GGUF), and loading a 100 MB ARPA means parsing text, sorting and hashing millions of
n-grams; a CI job calling nlpkit per file paid that on every call. A cached entry is mapped read-only
(the page cache holds it once for every process that maps it) and checked, never trusted:

    entry = preamble | header (JSON) | zeros to a multiple of 64 | data (arrays, each 64-byte aligned)
    preamble = b"NLPKITPC" | format version u32 | header bytes u32 | header crc32 u32 | 0 u32 | data sum u64

The header names the entry's kind, the code that made it (a digest of its source files) and the content of the
model files it was made from (sha256 and size: `cache_store.content_prints`, memoized by path, size, mtime, ctime
and inode); a different one of any is a stale entry, a
wrong crc32, size or data sum (the uint64 wrap-around sum of the data, which also touches every page
once, so the first forward after loading does not pay the page faults) a corrupt one: either is rebuilt
and replaced. An entry is written to a temporary file in the same directory and renamed over the old
one, so a reader sees a whole entry or none, and two processes building the same entry at once both
succeed (the last rename wins; a process still mapping the replaced file keeps its pages). The entry is
written by a thread while the first load goes on with the arrays it built (`flush()` waits for it, and
so does the interpreter at exit). A cache that cannot be written (read-only, full disk) costs nothing
but the rebuild: the freshly built arrays are used as they are.

Where: `$NLPKIT_CACHE_DIR`, else the platform's user cache directory (`$XDG_CACHE_HOME/nlpkit` or
`~/.cache/nlpkit` on Linux, `~/Library/Caches/nlpkit` on macOS, `%LOCALAPPDATA%\\nlpkit\\Cache` on
Windows). One entry per model *content* (the same model in two environments is one entry), about the size of its
arrays, named by it; the least recently used entries go when the whole passes `$NLPKIT_CACHE_MAX_SIZE` [10G]
(`nlpkit.lm.prepared.cache_store`); `nlpkit cache list` / `nlpkit cache clear` show and delete them.
A load with `use_cache=False` (the CLI's `--no-cache`: `LoadSpec.use_cache`), or with use_cache None and
`$NLPKIT_NO_CACHE=1` in the environment, loads without reading or writing it.

    >>> entry = load_prepared([Path("model.arpa")], "ngram", build)   # doctest: +SKIP
    >>> entry.arrays["keys.2"], entry.meta["vocab_size"]              # doctest: +SKIP
"""

from __future__ import annotations

import errno
import hashlib
import json
import mmap
import os
import struct
import sys
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

FORMAT_VERSION = 1
MAGIC = b"NLPKITPC"
_PREAMBLE = struct.Struct("<8sIIIIQ")  # magic, version, header bytes, header crc32, reserved, data sum
ALIGN = 64


@dataclass
class Prepared:
    """What a loader keeps of a model: named arrays and JSON-able metadata (config patches, words, warnings)."""
    arrays: dict[str, np.ndarray]
    meta: dict = field(default_factory=dict)
    from_cache: bool = False
    cache: str = ""  # what `load_prepared` did: read, written, off (not used), not written (no room, source changed)


def cache_dir() -> Path:
    """$NLPKIT_CACHE_DIR, else the platform's per-user cache directory for nlpkit."""
    env = os.environ.get("NLPKIT_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    if sys.platform == "win32":
        return Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local") / "nlpkit" / "Cache"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "nlpkit"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nlpkit"


def fingerprint(sources: Sequence[Path]) -> list[list]:
    """[sha256, size] of each source file's content (`cache_store.content_prints`: read once, then memoized by
    path, size, mtime, ctime and inode): a change to any of them makes another entry."""
    from nlpkit.lm.prepared.cache_store import content_prints

    return content_prints(sources, cache_dir())


def entry_path(sources: Sequence[Path], kind: str, label: str | None = None,
               prints: list[list] | None = None) -> Path:
    """The cache file of a model: one per (kind, content of its files: `fingerprint`, or `prints` when known), so
    one model anywhere is one entry; `label` (default: the first file's name) makes it recognisable in a listing."""
    prints = fingerprint(sources) if prints is None else prints
    digest = hashlib.sha256(json.dumps([kind, prints]).encode()).hexdigest()[:24]
    name = "".join(c if c.isalnum() or c in "._-" else "_" for c in (label or Path(sources[0]).name))[:40]
    return cache_dir() / f"{kind}-{name}-{digest}.npc"


def code_version(*files: str | os.PathLike) -> str:
    """A digest of the source files that make an entry's arrays: an entry made by other code is stale.
    (During development the version number does not change when the loaders do.)"""
    h = hashlib.sha256()
    for f in files:
        try:
            h.update(Path(f).read_bytes())
        except OSError:  # a module renamed or gone: a version of its own (no entry of the old code matches)
            h.update(f"missing {Path(f).name}".encode())
    return h.hexdigest()[:16]


def cache_enabled() -> bool:
    """False when $NLPKIT_NO_CACHE is set to anything but "" or "0" (a load whose `use_cache` is None asks it; the
    CLI's --no-cache says use_cache=False instead)."""
    return os.environ.get("NLPKIT_NO_CACHE", "") in ("", "0")


def load_prepared(sources: Sequence[Path], kind: str, build: Callable[[], Prepared], *, version: str = "",
                  label: str | None = None, use_cache: bool | None = None,
                  warn: Callable[[str], None] | None = None) -> Prepared:
    """The prepared arrays of the model made from `sources` (its first file names the entry): mapped from a
    valid cache entry, else built by `build()` and (with use_cache) written for the next load.
    `kind` names what the entry holds ("ngram", "weights"), `version` the code that made it (`code_version`):
    an entry of another version is rebuilt. use_cache None: `cache_enabled()`; False reads and writes nothing.
    A cache directory without room for the entry: the built arrays are used, nothing is written, and `warn`
    says so (the next load builds them from the model file again). `Prepared.cache` says which happened."""
    if not (cache_enabled() if use_cache is None else use_cache):
        return _said(build(), "off")
    try:
        prints = fingerprint(sources)
        path = entry_path(sources, kind, label, prints)
    except OSError:
        return _said(build(), "not written")
    tag = f"{kind}/{version}"
    entry = read_entry(path, tag, prints)
    if entry is not None:
        from nlpkit.lm.prepared.cache_store import touch

        touch(path)   # used now: the last to go when the cache passes its cap
        return _said(entry, "read")
    prepared = build()
    try:
        if fingerprint(sources) != prints:  # a source that changed while we read it is not cached
            return _said(prepared, "not written")
    except OSError:
        return _said(prepared, "not written")
    size = sum(_align(np.asarray(a).nbytes) for a in prepared.arrays.values())
    from nlpkit.lm.prepared.cache_store import MAX_ENV, max_size

    cap = max_size()
    if cap is not None and size > cap:
        if warn is not None:
            warn(f"the prepared-model entry of {Path(sources[0]).name} needs {size / 1e6:.0f} MB, more than the "
                 f"cache's cap ${MAX_ENV} ({cap / 1e6:.0f} MB): not cached")
        return _said(prepared, "not written")
    room = free_bytes(path.parent)
    if room is not None and room < size + ROOM_MARGIN:
        _no_room(warn, path.parent, size, room)
        return _said(prepared, "not written")
    # written behind: the caller goes on with the arrays it has while a thread writes them (the
    # interpreter waits for it at exit, so the entry is whole or, if the process is killed, never renamed)
    made_from = [str(Path(p).resolve()) for p in sources]
    writer = threading.Thread(target=_write_quietly, args=(path, tag, prints, prepared, warn, made_from),
                              name="nlpkit-cache-write")
    with _lock:
        _writers.append(writer)
    writer.start()
    return _said(prepared, "written")


def _said(prepared: Prepared, cache: str) -> Prepared:
    """`prepared` with what the cache did recorded (`Prepared.cache`: what `--verbose` reports)."""
    prepared.cache = cache
    return prepared


_lock = threading.Lock()
_writers: list[threading.Thread] = []


ROOM_MARGIN = 64 << 20  # bytes an entry leaves free on the cache's disk


def free_bytes(directory: Path) -> int | None:
    """Bytes free for this user on the disk of `directory` (made if missing); None when that cannot be told."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        st = os.statvfs(directory)
        return st.f_bavail * st.f_frsize
    except (OSError, AttributeError):  # unwritable (write_entry fails quietly too), or no statvfs (Windows)
        return None


def _no_room(warn: Callable[[str], None] | None, directory: Path, size: int, room: int) -> None:
    if warn is not None:
        warn(f"the prepared-model cache {directory} has {room / 1e6:.0f} MB free and the entry needs "
             f"{size / 1e6:.0f} MB: not cached, the next load prepares the model from its file again "
             "(native weights map the file and need no cache entry)")


def _write_quietly(path: Path, tag: str, prints: list[list], prepared: Prepared,
                   warn: Callable[[str], None] | None = None, made_from: list[str] | None = None) -> None:
    from nlpkit.lm.prepared.cache_store import evict

    try:
        write_entry(path, tag, prints, prepared, made_from)
        evict(path.parent, keep=path)   # the least recently used out, down to the cap
    except OSError as e:
        if e.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):  # the disk filled while writing
            _no_room(warn, path.parent, sum(np.asarray(a).nbytes for a in prepared.arrays.values()),
                     free_bytes(path.parent) or 0)
    except (TypeError, ValueError):
        pass  # an unwritable cache (or metadata JSON cannot hold) only costs the next load a rebuild


def flush() -> None:
    """Wait until every entry this process is writing is in place."""
    with _lock:
        pending = list(_writers)
        _writers.clear()
    for w in pending:
        w.join()


def _data_sum(data: np.ndarray) -> int:
    """uint64 wrap-around sum of a byte buffer whose length is a multiple of 8.  # [n] uint8 -> int"""
    return int(data.view("<u8").sum(dtype=np.uint64)) if len(data) else 0


def read_entry(path: Path, kind: str, prints: list[list]) -> Prepared | None:
    """The entry at `path` if it is whole, of this kind and made from these sources; None otherwise."""
    try:
        f = open(path, "rb")
    except OSError:
        return None
    with f:
        try:
            size = os.fstat(f.fileno()).st_size
            pre = f.read(_PREAMBLE.size)
            if len(pre) != _PREAMBLE.size:
                return None
            magic, version, hlen, hcrc, _, dsum = _PREAMBLE.unpack(pre)
            if magic != MAGIC or version != FORMAT_VERSION or _PREAMBLE.size + hlen > size:
                return None
            raw = f.read(hlen)
            if len(raw) != hlen or zlib.crc32(raw) != hcrc:
                return None
            header = json.loads(raw)
            if header.get("kind") != kind or header.get("sources") != prints:
                return None
            start, nbytes = _align(_PREAMBLE.size + hlen), int(header["data_bytes"])
            if nbytes % ALIGN or start + nbytes != size:
                return None
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError):
            return None
    data = np.frombuffer(mm, np.uint8, count=nbytes, offset=start)
    if _data_sum(data) != dsum:
        return None
    arrays = {}
    try:
        for name, dtype, shape, offset in header["arrays"]:
            dt = np.dtype(dtype)
            count = int(np.prod(shape, dtype=np.int64))
            if offset % ALIGN or offset < 0 or offset + count * dt.itemsize > nbytes:
                return None
            arrays[name] = np.frombuffer(mm, dt, count=count, offset=start + offset).reshape(shape)
    except (TypeError, ValueError):
        return None
    return Prepared(arrays, header.get("meta", {}), from_cache=True)


def read_header(path: Path) -> dict | None:
    """The JSON header of the entry at `path` (kind, sources, made_from, ...), None when it is not a whole one's:
    what a listing shows, without reading the data."""
    try:
        with open(path, "rb") as f:
            pre = f.read(_PREAMBLE.size)
            if len(pre) != _PREAMBLE.size:
                return None
            magic, version, hlen, hcrc, _, _ = _PREAMBLE.unpack(pre)
            if magic != MAGIC or version != FORMAT_VERSION:
                return None
            raw = f.read(hlen)
        if len(raw) != hlen or zlib.crc32(raw) != hcrc:
            return None
        header = json.loads(raw)
        return header if isinstance(header, dict) else None
    except (OSError, ValueError, UnicodeDecodeError):
        return None


def _align(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def write_entry(path: Path, kind: str, prints: list[list], prepared: Prepared,
                made_from: list[str] | None = None) -> None:
    """Write the entry to a temporary file beside `path` and rename it into place (atomic). `made_from`: the
    model files' paths when it was made (`nlpkit cache list` shows them; the key is their content)."""
    layout, offset = [], 0
    for name, a in prepared.arrays.items():
        a = np.asarray(a)
        if a.dtype.hasobject:
            raise TypeError(f"array {name} holds Python objects")
        layout.append([name, a.dtype.str, list(a.shape), offset])
        offset += _align(a.nbytes)
    raw = json.dumps({"kind": kind, "sources": prints, "meta": prepared.meta, "arrays": layout, "data_bytes": offset,
                      "made_from": made_from or []}, separators=(",", ":")).encode()
    head = _PREAMBLE.size + len(raw)
    path.parent.mkdir(parents=True, exist_ok=True)
    for old in path.parent.glob(f".{path.name}.*.tmp"):  # a writer killed before its rename, an hour ago or more
        try:
            if time.time() - old.stat().st_mtime > 3600:
                old.unlink()
        except OSError:
            pass
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    total = 0
    try:
        with open(tmp, "wb") as f:
            f.write(_PREAMBLE.pack(MAGIC, FORMAT_VERSION, len(raw), zlib.crc32(raw), 0, 0))
            f.write(raw)
            f.write(bytes(_align(head) - head))
            for a in prepared.arrays.values():
                b = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
                f.write(memoryview(b))
                whole = len(b) - len(b) % 8
                total += _data_sum(b[:whole])
                total += int.from_bytes(bytes(b[whole:]), "little")  # the last word, zero-padded
                f.write(bytes(_align(len(b)) - len(b)))
            f.seek(_PREAMBLE.size - 8)
            f.write(struct.pack("<Q", total % (1 << 64)))
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


__all__ = ["Prepared", "cache_dir", "cache_enabled", "code_version", "flush", "entry_path", "load_prepared", "read_entry",
           "read_header", "write_entry", "FORMAT_VERSION"]
