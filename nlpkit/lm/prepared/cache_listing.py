"""What `nlpkit cache list` and `nlpkit cache clear` show and delete: the prepared-model cache's entries
(`nlpkit.lm.prepared`), each with its kind, model, size, last use and the files it was made from."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from nlpkit.errors import UsageError
from nlpkit.lm.prepared.cache_store import DIGESTS, entry_files
from nlpkit.lm.prepared import cache_dir, read_header


@dataclass(frozen=True)
class Entry:
    """One cache entry: `name` its file name, `kind` what it holds (weights, ngram), `model` the file name it was
    made from, `bytes` its size, `last_used` (seconds since the epoch), `made_from` the model files' paths when it
    was made, `valid` False for a file that is not a whole entry (a damaged one: the next load rebuilds it)."""

    name: str
    kind: str
    model: str
    bytes: int
    last_used: float
    made_from: tuple[str, ...]
    valid: bool

    def record(self) -> dict:
        return {"entry": self.name, "kind": self.kind, "model": self.model, "bytes": self.bytes,
                "last_used": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(self.last_used)),
                "made_from": ", ".join(self.made_from), "valid": self.valid}


def list_entries(directory: Path | None = None) -> list[Entry]:
    """The entries of the cache in `directory` [`cache_dir()`], most recently used first."""
    out = []
    for p in entry_files(directory or cache_dir()):
        try:
            st = p.stat()
        except OSError:
            continue
        header = read_header(p)
        kind, _, rest = p.stem.partition("-")
        model = rest.rpartition("-")[0] or rest
        made = tuple(header.get("made_from") or ()) if header else ()
        out.append(Entry(p.name, (header or {}).get("kind", kind).split("/")[0], model, st.st_size, st.st_mtime,
                         made, header is not None))
    return sorted(out, key=lambda e: (-e.last_used, e.name))


def clear_entries(names: Sequence[str] = (), directory: Path | None = None) -> list[Entry]:
    """Delete the entries named (as listed; none: every entry, with the digest memo and writers' leftovers); the
    entries deleted. A name that is no entry is a usage error, before anything is deleted."""
    directory = directory or cache_dir()
    entries = list_entries(directory)
    if names:
        by_name = {e.name: e for e in entries}
        unknown = [n for n in names if n not in by_name]
        if unknown:
            raise UsageError(f"no entry {unknown[0]!r} in the prepared-model cache {directory} "
                             "(`nlpkit cache list` names them)")
        entries = [by_name[n] for n in dict.fromkeys(names)]
    gone = []
    for e in entries:
        try:
            os.unlink(Path(directory) / e.name)
            gone.append(e)
        except FileNotFoundError:
            continue
    if not names:
        for leftover in [Path(directory) / DIGESTS, *Path(directory).glob(".*.tmp")]:
            try:
                leftover.unlink()
            except OSError:
                pass
    return gone


__all__ = ["Entry", "list_entries", "clear_entries"]
