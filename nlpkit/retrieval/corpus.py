"""Reading document collections and query files for retrieval: (id, text) pairs.

Formats (``--corpus-format`` / ``--queries-format``):

- ``lines``: one document per line; ids are line numbers from 1 (blank lines keep their number).
- ``tsv``: ``id<TAB>text`` per line.
- ``jsonl``: one object per line; the id and text come from ``id_field`` / ``field``.
- ``paragraphs``: documents separated by blank lines; ids are paragraph numbers from 1.
- ``smart``: the SMART ``.I``/``.T``/``.W`` blocks of the classic collections (Cranfield, CISI,
  CACM); the text is the fields named by ``field`` (default ``T,W``: title and abstract).
- ``auto``: ``smart`` when the first line starts with ``.I``, ``jsonl`` when it starts with ``{``,
  else ``tsv`` for queries and ``lines`` for documents.

>>> parse_smart(".I 1\\n.T\\nA title\\n.W\\nSome text\\n".splitlines(), ["T", "W"], "x")
[('1', 'A title\\nSome text')]
"""

from __future__ import annotations

import re
from typing import Iterable, Iterator, Sequence

from nlpkit.errors import NlpkitError
from nlpkit.io import display_name, iter_lines, json_record

CORPUS_FORMATS = ("auto", "lines", "tsv", "jsonl", "paragraphs", "smart")
_SMART_ID = re.compile(r"^\.I\s+(\S+)\s*$")
_SMART_TAG = re.compile(r"^\.([A-Z])\s*$")


def detect_format(lines: Iterable[str], default: str = "lines") -> str:
    """Guess a file's format from its first non-blank line (see module docstring)."""
    for line in lines:
        s = line.strip()
        if not s:
            continue
        if _SMART_ID.match(s):
            return "smart"
        if s.startswith("{"):
            return "jsonl"
        return default
    return default


def parse_smart(lines: Iterable[str], fields: Sequence[str], name: str,
                skip_empty: bool = False) -> list[tuple[str, str]]:
    """SMART records as (id, text): the lines of the chosen tags, in file order, joined by newlines.

    A record with none of the chosen fields has empty text; ``skip_empty`` drops it (the CACM
    query file ends with a bodiless ``.I 0`` sentinel).
    """
    wanted = {f.upper() for f in fields}
    records: list[tuple[str, list[str]]] = []
    keep = False
    for lineno, line in enumerate(lines, 1):
        m = _SMART_ID.match(line)
        if m:
            records.append((m.group(1), []))
            keep = False
            continue
        m = _SMART_TAG.match(line)
        if m:
            if not records:
                raise NlpkitError(f"{name}, line {lineno}: SMART field .{m.group(1)} before any .I line")
            keep = m.group(1) in wanted
            continue
        if not records:
            if line.strip():
                raise NlpkitError(f"{name}, line {lineno}: expected a SMART '.I <id>' line, "
                                  f"got {line[:40]!r}")
            continue
        if keep:
            records[-1][1].append(line)
    out = [(rid, "\n".join(body).strip()) for rid, body in records]
    if skip_empty:
        out = [(rid, text) for rid, text in out if text]
    return out


def _iter_paragraphs(lines: Iterable[str]) -> Iterator[str]:
    block: list[str] = []
    for line in lines:
        if line.strip():
            block.append(line)
        elif block:
            yield "\n".join(block)
            block = []
    if block:
        yield "\n".join(block)


def _jsonl_records(lines: Sequence[str], name: str, id_field: str | None, field: str,
                   first_id: int = 1) -> Iterator[tuple[str, str]]:
    n = first_id - 1
    for lineno, line in enumerate(lines, 1):
        if line.strip():
            n += 1
            rid, text = json_record(line, f"{name}, line {lineno}", field, id_field)
            yield (str(n) if rid is None else rid), text


def _tsv_records(lines: Sequence[str], name: str) -> Iterator[tuple[str, str]]:
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        rid, tab, text = line.partition("\t")
        if not tab:
            raise NlpkitError(f"{name}, line {lineno}: expected 'id<TAB>text', found no tab")
        yield rid.strip(), text


def read_records(path: str, fmt: str = "auto", id_field: str | None = "id", field: str = "text",
                 errors: str = "strict", kind: str = "corpus", fields: str = "T,W",
                 query_ids: str = "file", first_id: int = 1) -> list[tuple[str, str]]:
    """All (id, text) records of a corpus or query file; duplicate ids are an error.

    ``kind`` is ``corpus`` or ``queries`` (queries default to tsv, and skip bodiless SMART
    records). ``query_ids="position"`` renumbers records 1..n in file order (the Cranfield
    qrels number queries by position, not by the ``.I`` ids of ``cran.qry``). Formats without
    ids (lines, paragraphs, jsonl without ``id_field``) number records from ``first_id``.
    """
    if fmt not in CORPUS_FORMATS:
        raise NlpkitError(f"unknown format {fmt!r} (choose from {', '.join(CORPUS_FORMATS)})")
    name = display_name(path)
    lines = list(iter_lines(path, errors=errors))  # read once: stdin cannot be rewound
    if fmt == "auto":
        fmt = detect_format(lines, default="tsv" if kind == "queries" else "lines")
    if fmt == "lines":
        records = [(str(i), t) for i, t in enumerate(lines, first_id)]
        if kind == "queries":
            records = [r for r in records if r[1].strip()]
    elif fmt == "tsv":
        records = list(_tsv_records(lines, name))
    elif fmt == "jsonl":
        records = list(_jsonl_records(lines, name, id_field, field, first_id))
    elif fmt == "paragraphs":
        records = [(str(i), t) for i, t in enumerate(_iter_paragraphs(lines), first_id)]
    else:
        tags = [t.strip() for t in fields.split(",") if t.strip()]
        records = parse_smart(lines, tags, name, skip_empty=kind == "queries")
    if query_ids == "position":
        records = [(str(i), t) for i, (_, t) in enumerate(records, 1)]
    check_unique_ids([r[0] for r in records], name, kind)
    return records


def check_unique_ids(ids: Sequence[str], name: str, kind: str = "corpus") -> None:
    """Raise naming the first repeated id (two documents with one id make results ambiguous)."""
    seen: set[str] = set()
    for i, rid in enumerate(ids, 1):
        if rid in seen:
            what = "query" if kind == "queries" else "document"
            raise NlpkitError(f"{name}: duplicate {what} id {rid!r} (record {i}); ids must be unique")
        seen.add(rid)
