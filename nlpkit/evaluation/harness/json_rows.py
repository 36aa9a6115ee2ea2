"""A task's local JSON Lines data read without Hugging Face `datasets`, when that gives exactly the rows `datasets`
would: `plain_json_splits(path, name, kwargs)` -> {split: JsonRows} or None (then `datasets` reads it).

Why: importing `datasets` (pandas, pyarrow, fsspec, ...) and building its Arrow cache costs ~0.7 s a run, a seventh of
a 30-document 5-shot run on a 135M model; a task file over a few local JSON Lines files needs none of it.

`datasets.load_dataset("json", data_files=...)` parses with Arrow, which infers one type per column: missing keys
and nulls become None, integers mixed with floats become floats, ISO-8601 strings become timestamps
(`datetime`), mixed structs become JSON strings; and the Python rows it gives back are those types. So the rows are
read here only when every one of those conversions is the identity: `dataset_path: json`, no `dataset_name`, no
other `dataset_kwargs` than `data_files` (one existing, plain local `.json`/`.jsonl` file per split; no glob,
URL, `~` or hidden or special path part; split names `datasets` accepts; 32 MB in all at most), each line one
JSON object (no BOM, no blank line, no duplicate key, no NaN or infinity), and every row of a file the same
"shape": the same keys in the same order, each value the same type as in the first row -- str (none that starts
like a date), bool, int (in int64), float (finite), a non-empty list of one such shape (not of objects), or a
non-empty object of such values, recursively. Anything else goes to `datasets`. `tests/evaluation/test_json_rows.py`
checks the rows against `datasets` itself on such files and on the shapes that must fall back.

Used only for tasks without `process_docs` hooks (they get the real `Dataset`).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any, Iterator

MAX_BYTES = 32 << 20  # larger data: datasets' import is a small share of the run, and its Arrow cache pays
_SPLIT_NAME = re.compile(r"^\w+(\.\w+)*$")  # datasets' split name rule
_DATE_LIKE = re.compile(r"[+-]?\d{4,}-")  # Arrow infers timestamp[s] for ISO-8601 strings ("2020-01-01 10:00")
_INT64 = (-(1 << 63), (1 << 63) - 1)


class _Refused(Exception):
    """A row the fast path does not read (duplicate key, NaN/Infinity): `datasets` reads the file."""


class JsonRows:
    """One split's rows, read as a `datasets.Dataset` is by the harness: `len`, an int index, iteration; each access a
    fresh copy, as a Dataset's row is, so a hook that changes a document changes no other access to it."""

    def __init__(self, rows: list[dict]):
        self._rows = rows

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, i: int) -> dict:
        if not isinstance(i, int):
            raise TypeError("JsonRows takes an int index")
        return _copy(self._rows[i])

    def __iter__(self) -> Iterator[dict]:
        return (_copy(r) for r in self._rows)


def plain_json_splits(path: str | None, name: str | None, kwargs: dict | None) -> dict[str, JsonRows] | None:
    """The splits of `datasets.load_dataset(path, name, **kwargs)` as `JsonRows`, when they are plain local JSON Lines
    whose rows `datasets` gives back unchanged (the module docstring); None otherwise."""
    if path != "json" or name is not None or not kwargs or set(kwargs) != {"data_files"}:
        return None
    data_files = kwargs["data_files"]
    if isinstance(data_files, (str, list)):
        data_files = {"train": data_files}
    if not isinstance(data_files, dict) or not data_files:
        return None
    out: dict[str, JsonRows] = {}
    total = 0
    for split, f in data_files.items():
        if not isinstance(split, str) or not _SPLIT_NAME.match(split):
            return None
        if isinstance(f, list):
            if len(f) != 1:
                return None
            f = f[0]
        p = _plain_file(f)
        if p is None:
            return None
        total += p.stat().st_size
        if total > MAX_BYTES:
            return None
        rows = read_rows(p)
        if rows is None:
            return None
        out[split] = JsonRows(rows)
    return out


def _plain_file(f: Any) -> Path | None:
    if not isinstance(f, str) or not f:
        return None
    if any(c in f for c in "*?[]{}") or "://" in f or "::" in f or f.startswith("~"):
        return None
    p = Path(f)
    if p.suffix not in (".json", ".jsonl"):
        return None
    if any(part.startswith((".", "__")) for part in p.parts):
        return None
    return p if p.is_file() else None


def read_rows(path: Path) -> list[dict] | None:
    """Every line's object, when the file is JSON Lines of rows of one shape (the module docstring); else None."""
    data = path.read_bytes()
    if not data.startswith(b"{"):  # also: empty, a BOM, a JSON array, leading blank space
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    rows, shape = [], None
    for line in lines:
        if not line.strip():
            return None
        try:
            row = json.loads(line, object_pairs_hook=_no_duplicates, parse_constant=_refuse)
        except (ValueError, _Refused):
            return None
        if not isinstance(row, dict):
            return None
        s = _shape(row)
        if s is None or (shape is not None and s != shape):
            return None
        shape = s
        rows.append(row)
    return rows or None


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    d = dict(pairs)
    if len(d) != len(pairs):
        raise _Refused("duplicate key")
    return d


def _refuse(constant: str):
    raise _Refused(constant)


def _shape(v: Any):
    """A value's type, recursively (lists: their one element shape; objects: their keys in order and shapes), or
    None where Arrow's round trip might not give the same Python value back."""
    if isinstance(v, str):
        if _DATE_LIKE.match(v):
            return None
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate (\ud800)
            return None
        return "str"
    if v is True or v is False:
        return "bool"
    if isinstance(v, int):
        return "int" if _INT64[0] <= v <= _INT64[1] else None
    if isinstance(v, float):
        return "float" if math.isfinite(v) else None
    if isinstance(v, list):
        if not v:
            return None
        first = _shape(v[0])
        if first is None or isinstance(first, tuple) and first[0] == "object":
            return None
        for x in v[1:]:
            if _shape(x) != first:
                return None
        return ("list", first)
    if isinstance(v, dict):
        if not v:
            return None
        items = []
        for k, x in v.items():
            s = _shape(x)
            if s is None:
                return None
            items.append((k, s))
        return ("object", tuple(items))
    return None  # null


def _copy(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _copy(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_copy(x) for x in v]
    return v

