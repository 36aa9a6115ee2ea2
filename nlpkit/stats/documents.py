"""The one reader of document collections, for tfidf, bm25 (corpora and query files) and pmi.

Formats (tfidf ``--docs``, bm25 ``--corpus-format`` / ``--queries-format``):

- ``files``: a file is a document, named by its path (tfidf only).
- ``lines``: one document per line; ids are line numbers from 1 (blank lines keep their number).
- ``tsv``: ``id<TAB>text`` per line (blank lines skipped).
- ``jsonl``: one object per line; the id and text come from ``id_field`` / ``field``.
- ``paragraphs``: documents separated by one or more blank (whitespace-only) lines; a paragraph
  is its lines joined by ``\n``, without a final newline; ids are paragraph numbers from 1.
- ``smart``: the SMART ``.I``/``.T``/``.W`` blocks of the classic collections (Cranfield, CISI,
  CACM); the text is the fields named by ``fields`` (default ``T,W``: title and abstract).
- ``auto`` (bm25): ``smart`` when the first line starts with ``.I``, ``jsonl`` when it starts
  with ``{``, ``tsv`` when the first lines look like ``id<TAB>text`` (an id without spaces, then
  a tab), else ``lines`` -- for corpora and queries alike. When the first line looks like
  ``id<TAB>text`` but a later one of the first 20 does not, auto refuses and names both formats.

Two shapes over the same parsing rules: `iter_records` streams ``(id, text)`` pairs (bm25),
and `iter_documents` yields ``(n_docs, text)`` batches for the counting core (tfidf): the
documents of a few MB of input joined into one text, each ended by a break the
`nlpkit.stats.counting.BlockEncoder` recognizes (a newline for ``lines``, NUL otherwise),
so a whole batch is tokenized in one pass. Document names go to a `DocNames`, which stores
numbered ranges (``path:N``) compactly.

>>> parse_smart(".I 1\n.T\nA title\n.W\nSome text\n".splitlines(), ["T", "W"], "x")
[('1', 'A title\nSome text')]
"""

from __future__ import annotations

import bisect
import re

import numpy as np
from itertools import chain
from typing import Iterable, Iterator, Sequence

from nlpkit.errors import NlpkitError
from nlpkit.io import display_name, iter_lines, json_record
from nlpkit.stats.counting import BLOCK_BYTES, BREAK_DOC, BREAK_LINE, iter_blocks

DOC_SEPARATOR = "\x00"          # ends each document inside a batch (BREAK_DOC matches it)

DOC_MODES = ("files", "lines", "tsv", "jsonl", "paragraphs", "smart")
RECORD_FORMATS = ("lines", "tsv", "jsonl", "paragraphs", "smart")
CORPUS_FORMATS = ("auto",) + RECORD_FORMATS
PARAGRAPH_BREAK = re.compile(r"\n(?:[^\S\n]*\n)+")   # one or more blank lines
_LEADING_BLANK = re.compile(r"^(?:[^\S\n]*\n)+")      # blank lines before a file's first paragraph
_SMART_ID = re.compile(r"^\.I\s+(\S+)\s*$")
_SMART_TAG = re.compile(r"^\.([A-Z])\s*$")
_ID_TAB = re.compile(r"^[^\s]+\t")               # `id<TAB>text`: an id without spaces, then a tab
DETECT_LINES = 20                                   # non-blank lines `auto` looks at


def split_paragraphs(text: str) -> list[str]:
    """Blank-line separated paragraphs that contain something other than whitespace,
    each without its final newline (the rule every format reader here follows).

    >>> split_paragraphs("a b\\nc\\n\\n  \\nd\\n")
    ['a b\\nc', 'd']
    """
    return [_paragraph(p) for p in PARAGRAPH_BREAK.split(text) if p.strip()]


def _paragraph(p: str) -> str:
    """A split piece as a paragraph: no leading blank lines, no final newline."""
    if p.endswith("\n"):
        p = p[:-1]
    return _LEADING_BLANK.sub("", p) if p[:1].isspace() else p


def batch_texts(texts: Iterable[str], names: DocNames | None = None,
                batch_chars: int | None = None) -> Iterator[tuple[int, str]]:
    """In-memory documents as `iter_documents`-style batches (named by position from 1)."""
    batch_chars = batch_chars or BLOCK_BYTES
    buf: list[str] = []
    size = 0
    for t in texts:
        buf.append(t)
        size += len(t)
        if size >= batch_chars:
            if names is not None:
                names.add_range("", len(names) + 1, len(buf))
            yield len(buf), join_docs(buf)
            buf, size = [], 0
    if buf:
        if names is not None:
            names.add_range("", len(names) + 1, len(buf))
        yield len(buf), join_docs(buf)


def doc_break(mode: str) -> str:
    """The break regex between documents of a `DocBatch` text in this mode."""
    return BREAK_LINE if mode == "lines" else BREAK_DOC


def join_docs(docs: list[str]) -> str:
    """Documents as one text, each ended by the NUL separator (NULs inside become spaces)."""
    if not docs:
        return ""
    text = DOC_SEPARATOR.join(docs)
    if text.count(DOC_SEPARATOR) != len(docs) - 1:      # rare: NULs inside documents
        text = DOC_SEPARATOR.join(d.replace(DOC_SEPARATOR, " ") for d in docs)
    return text + DOC_SEPARATOR


class DocNames:
    """Document names, stored compactly: explicit lists or numbered ranges ``prefix + N``."""

    def __init__(self) -> None:
        self._chunks: list[tuple[int, object]] = []   # (first index, list[str] | (prefix, first number))
        self._starts: list[int] = []
        self._n = 0
        self.units = 0      # lines or paragraphs read (iter_documents): numbering after a shard

    def add_list(self, names: list[str]) -> None:
        if names:
            self._chunks.append((self._n, list(names)))
            self._starts.append(self._n)
            self._n += len(names)

    def add_range(self, prefix: str, first: int, count: int) -> None:
        if count:
            self._chunks.append((self._n, (prefix, first)))
            self._starts.append(self._n)
            self._n += count

    def add_numbers(self, prefix: str, numbers: list[int]) -> None:
        """Names ``prefix + N`` for the given numbers (JSONL lines without an id field)."""
        if numbers:
            self._chunks.append((self._n, (prefix, np.asarray(numbers, dtype=np.int64))))
            self._starts.append(self._n)
            self._n += len(numbers)

    def shifted(self, offset: int) -> "DocNames":
        """These names with every number (line or paragraph numbers) raised by `offset`: a
        shard numbers from 1, the file numbers from the lines of the shards before it."""
        out = DocNames()
        out._n, out._starts = self._n, list(self._starts)
        for start, chunk in self._chunks:
            if isinstance(chunk, tuple):
                chunk = (chunk[0], chunk[1] + offset)
            out._chunks.append((start, chunk))
        return out

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: int) -> str:
        if not 0 <= i < self._n:
            raise IndexError(i)
        k = bisect.bisect_right(self._starts, i) - 1
        start, chunk = self._chunks[k]
        if isinstance(chunk, list):
            return chunk[i - start]
        prefix, first = chunk
        if isinstance(first, np.ndarray):
            return f"{prefix}{first[i - start]}"
        return f"{prefix}{first + i - start}"

    def __iter__(self) -> Iterator[str]:
        return (self[i] for i in range(self._n))


def iter_documents(paths: list[str], mode: str = "lines", names: DocNames | None = None,
                   field: str = "text", id_field: str | None = None, errors: str = "strict",
                   batch_chars: int | None = None, fields: str = "T,W",
                   prefix: str | None = None) -> Iterator[tuple[int, str]]:
    """Yield ``(n_docs, text)`` batches: `text` holds n_docs documents, each ended by a break.

    Modes: ``files`` (a file is a document, named by its path), ``lines`` (a line
    is a document, named by its line number, ``path:N`` with several files; empty
    lines are empty documents), ``paragraphs`` (blank-line separated, numbered from 1),
    ``jsonl`` (one JSON object per line; the text is `field`, the name `id_field`
    or the line number; a line without the field is an error naming file and line),
    ``tsv`` and ``smart`` (named by their ids, as `iter_records` reads them).
    Document names are appended to `names` as batches are produced; `prefix` overrides the
    ``path:`` name prefix (a shard of a file), and ``names.units`` ends as the count of
    lines (lines, jsonl) or paragraphs read from the last path, for numbering shards.
    """
    if mode not in DOC_MODES:
        raise NlpkitError(f"unknown document mode {mode!r} (choose from {', '.join(DOC_MODES)})")
    names = names if names is not None else DocNames()
    multi = len(paths) > 1
    para_no = 0
    fixed_prefix = prefix
    for path in paths:
        prefix = fixed_prefix if fixed_prefix is not None else (f"{display_name(path)}:" if multi else "")
        if mode == "files":
            names.add_list([display_name(path)])
            yield 1, join_docs(["".join(iter_blocks(path, errors))])
            continue
        if mode in ("tsv", "smart"):
            yield from _record_batches(iter_records(path, mode, errors=errors, fields=fields),
                                       names, prefix, batch_chars or BLOCK_BYTES)
            continue
        line_no = 0
        carry = ""
        first_para = para_no
        for block in iter_blocks(path, errors, batch_chars):
            if mode == "lines":
                if not block.endswith("\n"):
                    block += "\n"
                n = block.count("\n")
                names.add_range(prefix, line_no + 1, n)
                line_no += n
                yield n, block
            elif mode == "paragraphs":
                parts = PARAGRAPH_BREAK.split(carry + block)
                carry = parts.pop()
                docs = [p for p in parts if p.strip()]   # inner pieces end at a break: no "\n" to drop
                if docs and para_no == first_para:       # a file's first paragraph: drop leading blanks
                    docs[0] = _paragraph(docs[0])
                names.add_range(prefix, para_no + 1, len(docs))
                para_no += len(docs)
                yield len(docs), join_docs(docs)
            else:
                batch_names, docs, numbers = [], [], []
                for line in block.split("\n"):
                    line_no += 1
                    if line.strip():
                        rid, text = json_record(line, f"{display_name(path)}, line {line_no}", field, id_field)
                        if rid is None:
                            numbers.append(line_no)
                        else:
                            batch_names.append(prefix + rid)
                        docs.append(text)
                line_no -= 1 if block.endswith("\n") else 0   # the piece after the last newline
                if numbers and batch_names:
                    raise NlpkitError(f"{display_name(path)}: some records have the id field "
                                      f"{id_field!r} and some do not")
                names.add_list(batch_names)
                names.add_numbers(prefix, numbers)
                yield len(docs), join_docs(docs)
        if mode == "paragraphs" and carry.strip():
            para_no += 1
            names.add_range(prefix, para_no, 1)
            yield 1, join_docs([_paragraph(carry)])
        names.units = para_no if mode == "paragraphs" else line_no


def _record_batches(records: Iterable[tuple[str, str]], names: DocNames, prefix: str,
                    batch_chars: int) -> Iterator[tuple[int, str]]:
    ids: list[str] = []
    docs: list[str] = []
    size = 0
    for rid, text in records:
        ids.append(prefix + rid)
        docs.append(text)
        size += len(text)
        if size >= batch_chars:
            names.add_list(ids)
            yield len(docs), join_docs(docs)
            ids, docs, size = [], [], 0
    if docs:
        names.add_list(ids)
        yield len(docs), join_docs(docs)


def detect_format(lines: Iterable[str], default: str = "lines", name: str = "input") -> str:
    """Guess a file's format from its first non-blank lines (see module docstring).

    >>> detect_format(["d1\tsome text", "d2\tmore"])
    'tsv'
    >>> detect_format(["just words", "more words"])
    'lines'
    """
    seen: list[str] = []
    for line in lines:
        if not line.strip():
            continue
        s = line.strip()
        if not seen:
            if _SMART_ID.match(s):
                return "smart"
            if s.startswith("{"):
                return "jsonl"
        seen.append(line)
        if len(seen) >= DETECT_LINES:
            break
    if not seen:
        return default
    tabbed = [bool(_ID_TAB.match(line)) for line in seen]
    if all(tabbed):
        return "tsv"
    if tabbed[0]:
        k = tabbed.index(False) + 1
        raise NlpkitError(f"{name}: the first line looks like 'id<TAB>text' but non-blank line {k} does not: "
                          "choose `fmt` tsv (ids in the first column) or `fmt` lines "
                          "(one record per line, numbered from 1)")
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
    """Paragraphs of newline-free lines: the same documents `split_paragraphs` finds in a text."""
    block: list[str] = []
    for line in lines:
        if line.strip():
            block.append(line)
        elif block:
            yield "\n".join(block)
            block = []
    if block:
        yield "\n".join(block)


def _jsonl_records(lines: Iterable[str], name: str, id_field: str | None, field: str,
                   first_id: int = 1) -> Iterator[tuple[str, str]]:
    n = first_id - 1
    for lineno, line in enumerate(lines, 1):
        if line.strip():
            n += 1
            rid, text = json_record(line, f"{name}, line {lineno}", field, id_field)
            yield (str(n) if rid is None else rid), text


def _tsv_records(lines: Iterable[str], name: str) -> Iterator[tuple[str, str]]:
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        rid, tab, text = line.partition("\t")
        if not tab:
            raise NlpkitError(f"{name}, line {lineno}: expected 'id<TAB>text', found no tab "
                              "(for plain text lines use `fmt` lines)")
        yield rid.strip(), text


def iter_records(path: str, fmt: str = "auto", id_field: str | None = "id", field: str = "text",
                 errors: str = "strict", kind: str = "corpus", fields: str = "T,W",
                 first_id: int = 1) -> Iterator[tuple[str, str]]:
    """Stream the (id, text) records of a corpus or query file (see the module docstring).

    ``kind`` is ``corpus`` or ``queries`` (queries skip blank lines and bodiless SMART
    records). Formats without ids (lines, paragraphs, jsonl without ``id_field``) number
    records from ``first_id``.
    """
    if fmt not in CORPUS_FORMATS:
        raise NlpkitError(f"unknown format {fmt!r} (choose from {', '.join(CORPUS_FORMATS)})")
    name = display_name(path)
    lines: Iterable[str] = iter_lines(path, errors=errors)
    if fmt == "auto":
        head: list[str] = []                 # peek: stdin cannot be rewound
        filled = 0
        for line in lines:
            head.append(line)
            filled += bool(line.strip())
            if filled >= DETECT_LINES:
                break
        fmt = detect_format(head, default="lines", name=name)
        lines = chain(head, lines)
    if fmt == "lines":
        records = ((str(i), t) for i, t in enumerate(lines, first_id))
        if kind == "queries":
            records = (r for r in records if r[1].strip())
        return records
    if fmt == "tsv":
        return _tsv_records(lines, name)
    if fmt == "jsonl":
        return _jsonl_records(lines, name, id_field, field, first_id)
    if fmt == "paragraphs":
        return ((str(i), t) for i, t in enumerate(_iter_paragraphs(lines), first_id))
    tags = [t.strip() for t in fields.split(",") if t.strip()]
    return iter(parse_smart(lines, tags, name, skip_empty=kind == "queries"))


def read_records(path: str, fmt: str = "auto", id_field: str | None = "id", field: str = "text",
                 errors: str = "strict", kind: str = "corpus", fields: str = "T,W",
                 query_ids: str = "file", first_id: int = 1) -> list[tuple[str, str]]:
    """All (id, text) records of a corpus or query file (`iter_records`); duplicate ids are an error.

    ``query_ids="position"`` renumbers records 1..n in file order (the Cranfield qrels number
    queries by position, not by the ``.I`` ids of ``cran.qry``).
    """
    records = list(iter_records(path, fmt, id_field, field, errors, kind, fields, first_id))
    if query_ids == "position":
        records = [(str(i), t) for i, (_, t) in enumerate(records, 1)]
    check_unique_ids([r[0] for r in records], display_name(path), kind)
    return records


def one_format(paths: Sequence[str], fmt: str = "auto") -> str:
    """The format of a corpus in several files: `fmt`, or with ``auto`` the format each file is
    detected as (`detect_format`), which must be the same for all. One file keeps ``auto`` (stdin,
    which cannot be read twice, is then detected as it is read)."""
    if fmt != "auto" or len(paths) < 2:
        return fmt
    if "-" in paths:
        raise NlpkitError("stdin among several corpus files: give `fmt` (auto would read stdin twice)")
    found = []
    for path in paths:
        head = []
        for line in iter_lines(path, errors="replace"):
            head.append(line)
            if sum(bool(x.strip()) for x in head) >= DETECT_LINES:
                break
        found.append(detect_format(head, default="lines", name=display_name(path)))
    if len(set(found)) > 1:
        i = next(k for k, f in enumerate(found) if f != found[0])
        raise NlpkitError(f"{display_name(paths[i])} looks like {found[i]} but {display_name(paths[0])} like "
                          f"{found[0]}: one corpus has one format (give `fmt`)")
    return found[0]


def read_corpus(paths: Sequence[str], fmt: str = "auto", id_field: str | None = "id", field: str = "text",
                errors: str = "strict", fields: str = "T,W", first_id: int = 1) -> list[tuple[str, str]]:
    """The (id, text) records of a corpus in one or more files, in file order (`read_records` of each):
    formats without ids number documents on across files from `first_id` (file 2's first line is
    document n1 + 1), and an id may appear once in the whole corpus. ``auto`` as `one_format`.
    (Lines a.txt of 2 lines, then b.txt.gz of 1: ids 1, 2, 3.)
    """
    fmt = one_format(paths, fmt)
    out: list[tuple[str, str]] = []
    where: dict[str, str] = {}
    for path in paths:
        records = read_records(path, fmt, id_field=id_field, field=field, errors=errors, fields=fields,
                               first_id=first_id + len(out))
        name = display_name(path)
        for i, (rid, _) in enumerate(records, 1):
            if rid in where:
                raise NlpkitError(f"{name}: document id {rid!r} (record {i}) is also in {where[rid]}; "
                                  "ids must be unique")
            where[rid] = name
        out.extend(records)
    return out


def check_unique_ids(ids: Sequence[str], name: str, kind: str = "corpus") -> None:
    """Raise naming the first repeated id (two documents with one id make results ambiguous)."""
    seen: set[str] = set()
    for i, rid in enumerate(ids, 1):
        if rid in seen:
            what = "query" if kind == "queries" else "document"
            raise NlpkitError(f"{name}: duplicate {what} id {rid!r} (record {i}); ids must be unique")
        seen.add(rid)
