"""The prepared-model cache's keeping (`nlpkit.lm.prepared`): entries keyed by the model files' *content*, a size
cap with the least recently used entries out, and what `nlpkit cache list|clear` reads.

Content, not path: the same model in two virtual environments (or copied, or moved) is one entry, and a file
changed in place is another model. A file's sha256 is read whole once, on first sight, and memoized in
`digests.json` beside the entries under its (absolute path, size, mtime_ns, ctime_ns, inode): later loads only
stat it (ctime moves on any write, even one that sets the mtime back).

The cap: `$NLPKIT_CACHE_MAX_SIZE` (bytes, or with a unit: 500M, 20G; `none`: no cap) [10G]. After an entry is
written, the entries least recently used (an entry's mtime is set when it is read) are deleted until the whole
is within the cap; an entry larger than the cap is not written (a warning says so). A process still mapping a
deleted entry keeps its pages (POSIX); where a mapped file cannot be deleted (Windows) it stays until next time.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Sequence

DIGESTS = "digests.json"
MAX_ENV = "NLPKIT_CACHE_MAX_SIZE"
DEFAULT_MAX = "10G"
_MAX_DIGESTS = 2000  # memoized files kept (the oldest go first)
_CHUNK = 1 << 20


def max_size() -> int | None:
    """The cap in bytes ($NLPKIT_CACHE_MAX_SIZE, else 10G); None: no cap. A value that is not a size is an error
    naming the variable."""
    from nlpkit.errors import UsageError
    from nlpkit.shards import parse_size

    raw = os.environ.get(MAX_ENV, "").strip() or DEFAULT_MAX
    if raw.lower() in ("none", "unlimited"):
        return None
    try:
        value = parse_size(raw)
    except (ValueError, UsageError):
        value = None
    if value is None or value < 0:
        raise UsageError(f"${MAX_ENV} must be a size (bytes, or 500M, 20G) or none, got {raw!r}")
    return int(value)


def content_prints(sources: Sequence[Path], directory: Path) -> list[list]:
    """[sha256, size] of each source file, memoized in `directory`/digests.json (see the module docstring)."""
    memo = _read_digests(directory)
    out, changed = [], False
    for p in sources:
        real = os.path.realpath(p)
        st = os.stat(real)
        stamp = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
        known = memo.get(real)
        if known is not None and known[:4] == stamp and isinstance(known[4], str):
            digest = known[4]
        else:
            digest = _sha256(real)
            if os.stat(real).st_mtime_ns == st.st_mtime_ns:   # not changed while read: worth remembering
                memo[real] = [*stamp, digest, time.time()]
                changed = True
        out.append([digest, st.st_size])
    if changed:
        _write_digests(directory, memo)
    return out


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _read_digests(directory: Path) -> dict:
    try:
        memo = json.loads((Path(directory) / DIGESTS).read_text(encoding="utf-8"))
        return memo if isinstance(memo, dict) else {}
    except (OSError, ValueError):
        return {}


def _write_digests(directory: Path, memo: dict) -> None:
    """Write the memo atomically (temporary file, rename); a cache that cannot be written only costs a re-read."""
    if len(memo) > _MAX_DIGESTS:
        keep = sorted(memo, key=lambda k: memo[k][5] if len(memo[k]) > 5 else 0)[-_MAX_DIGESTS:]
        memo = {k: memo[k] for k in keep}
    path = Path(directory) / DIGESTS
    tmp = path.with_name(f".{DIGESTS}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(memo), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        try:
            tmp.unlink()
        except OSError:
            pass


def touch(entry: Path) -> None:
    """Mark an entry used now (its mtime: what eviction orders by); a read-only cache is left as it is."""
    try:
        os.utime(entry)
    except OSError:
        pass


def entry_files(directory: Path) -> list[Path]:
    """The cache's entries (`*.npc`), whole ones only (not the temporary files of writers)."""
    try:
        return sorted(p for p in Path(directory).glob("*.npc") if p.is_file())
    except OSError:
        return []


def evict(directory: Path, keep: Path | None = None, cap: int | None = None) -> list[Path]:
    """Delete the least recently used entries until the entries' total is within `cap` (never `keep`, the entry
    just written); the deleted paths. `cap` None: `max_size()`."""
    cap = max_size() if cap is None else cap
    if cap is None:
        return []
    sized = []
    for p in entry_files(directory):
        try:
            st = p.stat()
        except OSError:
            continue
        sized.append((st.st_mtime_ns, st.st_size, p))
    total = sum(size for _, size, _ in sized)
    gone = []
    for _, size, p in sorted(sized, key=lambda t: (t[0], str(t[2]))):
        if total <= cap:
            break
        if keep is not None and p == keep:
            continue
        try:
            p.unlink()
        except OSError:
            continue
        total -= size
        gone.append(p)
    return gone


__all__ = ["max_size", "content_prints", "touch", "entry_files", "evict", "MAX_ENV", "DEFAULT_MAX", "DIGESTS"]
