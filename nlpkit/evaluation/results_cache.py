"""The results cache (`score` / `perplexity --results-cache DIR`, `$NLPKIT_RESULTS_CACHE`): each request's result
stored under a key of everything that makes its number, so that a rerun prints the same bytes and computes only
what is missing, and a run killed mid-way (Ctrl-C, SIGKILL, a CI job's timeout) resumes where it stopped.

What a key holds (`make_key` hashes a JSON list of parts): the model's *content* (`model_identity`: a sha256 of
every file the loader reads, not its path: a file changed in place is a new model; the tokenizer's files are among
them, so the request's text stands for its tokens), how it is loaded (`load_part` of its `LoadSpec`: the weights
layout asked for, the purpose, the RoPE override), what computes (`computation_identity`: nlpkit's sources, numpy's
version and the BLAS kernel, whose last bits may differ from another's), the request's text and every setting that changes the
number. lm-evaluation-harness's `--use_cache` keys on the request alone and serves stale results once the weights
change; this cache cannot: other weights are another key.

Where: one SQLite file in DIR (`results-v1.sqlite`). Entries are written as requests finish, each batch in one
transaction whose commit is fsync'd (SQLite's rollback journal: a process killed while writing leaves the last
commit whole), and several processes may share DIR (SQLite's locks). Each entry carries a checksum of its key and
value: a corrupt entry (or one whose value is not what the caller expects: `check`) is ignored with a warning and
recomputed, never used; a file that is not this cache's is moved aside (`*.broken-*`) with a warning.

File content digests are memoized in the same file under (path, size, mtime_ns, ctime_ns, inode): a model is read
whole once, on first sight (about a second per GB), and only stat'ed after.

    >>> cache = ResultsCache(Path("results"), warn=print)               # doctest: +SKIP
    >>> key = make_key("score", model_identity(Path("m.gguf")), "item text")   # doctest: +SKIP
    >>> cache.get_many([key]).get(key)                                   # doctest: +SKIP
    >>> cache.put(key, {"logprob": -3.25})                               # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sqlite3
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

ENV = "NLPKIT_RESULTS_CACHE"
FORMAT = "nlpkit-results-cache"
VERSION = 1
FILE_NAME = f"results-v{VERSION}.sqlite"
_BATCH = 500  # keys per SELECT (SQLite's host-parameter limit is 999 on old builds)
_HASH_CHUNK = 1 << 20


def make_key(*parts: Any) -> str:
    """The sha256 (hex) of `parts` as canonical JSON (sorted keys; lone surrogates escaped): equal parts, equal keys."""
    raw = json.dumps(plain(list(parts)), sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=True)
    return hashlib.sha256(raw.encode("ascii")).hexdigest()


def plain(value: Any) -> Any:
    """`value` with numpy scalars as Python numbers and tuples as lists (what JSON holds); NaN and infinities kept."""
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        return value.item()
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if hasattr(value, "__dataclass_fields__"):
        return {"__type__": type(value).__name__,
                **{f: plain(getattr(value, f)) for f in value.__dataclass_fields__}}
    return value


def encode_value(value: Any) -> str:
    """A result as stored: JSON (numpy scalars as numbers, NaN and infinities as JSON's extension tokens)."""
    return json.dumps(plain(value), separators=(",", ":"), ensure_ascii=True, allow_nan=True)  # lone surrogates too


def _checksum(key: str, text: str) -> str:
    return hashlib.sha256(f"{key}\n{text}".encode("utf-8", "surrogatepass")).hexdigest()[:32]


def cache_directory(given: str | os.PathLike | None) -> Path | None:
    """The results cache's directory: `given` (--results-cache), else $NLPKIT_RESULTS_CACHE, else None (off)."""
    if given:
        return Path(given).expanduser()
    env = os.environ.get(ENV)
    return Path(env).expanduser() if env else None


class ResultsCache:
    """Results by key in DIR/results-v1.sqlite: `get_many` the valid ones, `put`/`put_many` new ones (committed and
    fsync'd before they return). `warn` receives what was ignored and why; `hits` and `computed` count what this
    process read and wrote (the CLI's summary line)."""

    def __init__(self, directory: Path, warn: Callable[[str], None] | None = None):
        self.directory = Path(directory)
        self.path = self.directory / FILE_NAME
        self._warn = warn or (lambda message: None)
        self.hits = 0
        self.computed = 0
        self.part_hits = 0
        self._ignored = 0
        self._db: sqlite3.Connection | None = None
        self._open()

    # ------------------------------------------------------------------ the file
    def _open(self) -> None:
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            self._off(f"cannot create {self.directory}: {e.strerror or e}")
            return
        for attempt in (1, 2):
            try:
                self._db = self._connect()
                return
            except sqlite3.DatabaseError as e:
                if self._db is not None:
                    self._db.close()
                self._db = None
                if attempt == 2 or not self._set_aside(str(e)):
                    self._off(f"{self.path}: {e}")
                    return

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=120, isolation_level=None, check_same_thread=False)
        self._db = db
        db.execute("PRAGMA synchronous=FULL")  # every commit fsync'd: a finished request survives a killed run
        with _transaction(db):
            db.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
            db.execute("CREATE TABLE IF NOT EXISTS results (key TEXT PRIMARY KEY, value TEXT NOT NULL, "
                       "sum TEXT NOT NULL, written REAL NOT NULL)")
            db.execute("CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, size INTEGER, mtime_ns INTEGER, "
                       "ctime_ns INTEGER, inode INTEGER, sha256 TEXT NOT NULL)")
            meta = dict(db.execute("SELECT name, value FROM meta").fetchall())
            if not meta:
                db.executemany("INSERT INTO meta VALUES (?, ?)", [("format", FORMAT), ("version", str(VERSION))])
            elif meta.get("format") != FORMAT or meta.get("version") != str(VERSION):
                raise sqlite3.DatabaseError(f"not an nlpkit results cache of version {VERSION} "
                                            f"(format {meta.get('format')!r}, version {meta.get('version')!r})")
        return db

    def _set_aside(self, why: str) -> bool:
        """Move a file that is not a readable cache of this version out of the way; True when it was."""
        aside = self.path.with_name(f"{self.path.name}.broken-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}")
        try:
            os.replace(self.path, aside)
        except OSError:
            return False
        for suffix in ("-journal", "-wal", "-shm"):
            try:
                os.replace(f"{self.path}{suffix}", f"{aside}{suffix}")
            except OSError:
                pass
        self._warn(f"results cache {self.path} could not be read ({why}): moved to {aside.name}, a new cache is "
                   "started")
        return True

    def _off(self, why: str) -> None:
        self._db = None
        self._warn(f"results cache not used: {why}; every result is computed")

    @property
    def enabled(self) -> bool:
        return self._db is not None

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def _failed(self, e: sqlite3.Error) -> None:
        """A cache that fails mid-run (a disk error, a file damaged under us) is dropped: results are computed."""
        if self._db is not None:
            try:
                self._db.close()
            except sqlite3.Error:
                pass
        self._off(f"{self.path}: {e}")

    # ------------------------------------------------------------------ results
    def get_many(self, keys: Sequence[str], check: Callable[[Any], bool] | None = None,
                 count: str | None = "results") -> dict[str, Any]:
        """key -> value of every key with a valid entry. An entry whose checksum does not match its key and value,
        whose value is not JSON, or that `check` refuses (not the shape its caller stores) is left out, with a
        warning (one per call, counting them): it is recomputed and replaced. `count`: what the summary counts the
        hits as: "results", "parts" (of a result: a window of a text) or None (a run's settings)."""
        found: dict[str, Any] = {}
        if self._db is None:
            return found
        bad = 0
        wanted = list(dict.fromkeys(keys))
        try:
            for start in range(0, len(wanted), _BATCH):
                part = wanted[start:start + _BATCH]
                rows = self._db.execute(f"SELECT key, value, sum FROM results WHERE key IN "
                                        f"({','.join('?' * len(part))})", part).fetchall()
                for key, text, total in rows:
                    value = _decoded(key, text, total)
                    if value is _BAD or (check is not None and not _checked(check, value)):
                        bad += 1
                        continue
                    found[key] = value
        except sqlite3.Error as e:
            self._failed(e)
            return {}
        if bad:
            self._ignored += bad
            self._warn(f"results cache {self.path}: {bad} corrupt or foreign entr{'y' if bad == 1 else 'ies'} "
                       "ignored (recomputed, then replaced)")
        if count == "results":
            self.hits += len(found)
        elif count == "parts":
            self.part_hits += len(found)
        return found

    def put(self, key: str, value: Any, count: str | None = "results") -> None:
        """Store one result (committed, fsync'd)."""
        self.put_many([(key, value)], count)

    def put_many(self, pairs: Iterable[tuple[str, Any]], count: str | None = "results") -> None:
        """Store results in one transaction (committed, fsync'd when this returns); a failing cache is dropped with
        a warning, the run goes on. `count`: as `get_many`'s."""
        rows = []
        now = time.time()
        for key, value in pairs:
            text = encode_value(value)
            rows.append((key, text, _checksum(key, text), now))
        if not rows:
            return
        if count == "results":
            self.computed += len(rows)
        if self._db is None:
            return
        try:
            with _transaction(self._db):
                self._db.executemany("INSERT OR REPLACE INTO results VALUES (?, ?, ?, ?)", rows)
        except sqlite3.Error as e:
            self._failed(e)

    def summary(self) -> str:
        """One line for stderr: what came from the cache and what was computed."""
        where = str(self.directory) if self.enabled else f"{self.directory} (off)"
        total = self.hits + self.computed
        parts = f" (and {self.part_hits} parts of results)" if self.part_hits else ""
        return f"results cache {where}: {self.hits} of {total} results from the cache{parts}, {self.computed} computed"

    # ------------------------------------------------------------------ file digests
    def file_digest(self, path: Path) -> str:
        """sha256 of a file's content, memoized under its (path, size, mtime_ns, ctime_ns, inode): read again only
        when one of them changed (ctime moves on any write, even one that puts the mtime back)."""
        path = Path(os.path.realpath(path))
        st = os.stat(path)
        stamp = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
        if self._db is not None:
            try:
                row = self._db.execute("SELECT size, mtime_ns, ctime_ns, inode, sha256 FROM files WHERE path = ?",
                                       (str(path),)).fetchone()
                if row is not None and tuple(row[:4]) == stamp:
                    return row[4]
            except sqlite3.Error as e:
                self._failed(e)
        digest = _sha256_file(path)
        if os.stat(path).st_mtime_ns != st.st_mtime_ns:  # changed while we read it: not memoized
            return digest
        if self._db is not None:
            try:
                with _transaction(self._db):
                    self._db.execute("INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?, ?)",
                                     (str(path), *stamp, digest))
            except sqlite3.Error as e:
                self._failed(e)
        return digest


class _Transaction:
    def __init__(self, db: sqlite3.Connection):
        self.db = db

    def __enter__(self):
        self.db.execute("BEGIN IMMEDIATE")
        return self.db

    def __exit__(self, kind, value, tb):
        if kind is None:
            self.db.execute("COMMIT")
        else:
            try:
                self.db.execute("ROLLBACK")
            except sqlite3.Error:
                pass
        return False


def _transaction(db: sqlite3.Connection) -> _Transaction:
    return _Transaction(db)


_BAD = object()


def _decoded(key: str, text: Any, total: Any) -> Any:
    """The value of a row, or `_BAD` when its checksum or JSON is wrong."""
    if not isinstance(text, str) or not isinstance(total, str) or _checksum(key, text) != total:
        return _BAD
    try:
        return json.loads(text)
    except ValueError:
        return _BAD


def _checked(check: Callable[[Any], bool], value: Any) -> bool:
    try:
        return bool(check(value))
    except (TypeError, ValueError, KeyError, IndexError, AttributeError):
        return False


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_HASH_CHUNK):
            h.update(chunk)
    return h.hexdigest()


# ---------------------------------------------------------------------- identities

def model_files(path: str | os.PathLike | None) -> list[Path] | None:
    """The files a model's load reads, as `nlpkit.lm.model_files.model_format` resolves `path` (None: $NLPKIT_MODEL,
    else the shipped model): a Hugging Face directory's top-level files (config, tokenizer, weights, chat template:
    all of them, hidden files aside), else the one file (GGUF, ARPA, counts). None for a model that is not a local
    path (a URL): such a model has no content key and is not cached."""
    from nlpkit.lm.model_files import HF, model_format
    from nlpkit.lm.spec import resolve_path

    given = resolve_path(path)
    if given is not None and "://" in given:
        return None
    kind, p = model_format(given)
    if kind == HF:
        return sorted(f for f in p.iterdir() if f.is_file() and not f.name.startswith("."))
    return [p]


def model_identity(cache: ResultsCache, path: str | os.PathLike | None) -> str | None:
    """A digest of the model's content (`model_files`, each file's sha256 by name): the same bytes, the same
    identity, wherever the model lies; None when the model has no local files."""
    files = model_files(path)
    if files is None:
        return None
    return make_key("model", [[f.name, cache.file_digest(f)] for f in files])


_CODE: str | None = None


def code_identity() -> str:
    """A digest of what computes a result: nlpkit's Python sources (a development tree changes without its version
    number) and numpy's version. Results of other code are other keys."""
    global _CODE
    if _CODE is None:
        import numpy

        root = Path(__file__).resolve().parents[1]
        h = hashlib.sha256(f"numpy {numpy.__version__}\n".encode())
        for f in sorted(root.rglob("*.py")):
            h.update(str(f.relative_to(root)).encode() + b"\0")
            h.update(f.read_bytes())
        _CODE = h.hexdigest()[:24]
    return _CODE


def load_part(spec) -> list:
    """What of a `nlpkit.lm.spec.LoadSpec` changes a result, as a key part: the weights layout asked for (--weights,
    else $NLPKIT_WEIGHTS, else auto: a layout may change the last bits of a transformer's numbers), what the model is
    loaded for (auto weighs it) and the RoPE override. Its path is not (the model's content is), nor its use of the
    prepared-model cache (the same arrays either way)."""
    return [spec.weights, spec.purpose, spec.rope_scaling, spec.rope_factor]


def blas_kernel() -> list:
    """The BLAS library and kernel the numbers are multiplied with (`nlpkit.lm.threads.blas_info`): the engine's
    bits are the same on one kernel, but may differ in their last bits on another (another machine), so a cache
    restored elsewhere misses rather than serving the other kernel's bits. Not memoized (OPENBLAS_CORETYPE is read
    when numpy loads, but a test may stand in another `blas_info`)."""
    from nlpkit.lm import threads

    info = threads.blas_info()
    return [info.get("library"), info.get("kernel")]


def computation_identity() -> list:
    """What computes a result, as a key part: the code (`code_identity`) and the BLAS kernel (`blas_kernel`)."""
    return [code_identity(), *blas_kernel()]


__all__ = ["ResultsCache", "make_key", "encode_value", "plain", "cache_directory", "model_files", "model_identity",
           "code_identity", "load_part", "blas_kernel", "computation_identity", "ENV", "FILE_NAME"]
