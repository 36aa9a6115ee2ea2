"""Documents for tfidf: files, lines, blank-line paragraphs or JSONL records, in batches.

A batch is ``(n_docs, text)``: the documents of a few MB of input joined into one
text, each ended by a break the `nlpkit.corpus.BlockEncoder` recognizes (a newline
for ``lines``, NUL otherwise), so a whole batch is tokenized in one pass. Document
names go to a `DocNames`, which stores numbered ranges (``path:N``) compactly.
"""

from __future__ import annotations

import bisect
import re
from typing import Iterable, Iterator

from nlpkit.corpus import BREAK_DOC, BREAK_LINE, iter_blocks
from nlpkit.errors import NlpkitError
from nlpkit.io import display_name, json_record

DOC_SEPARATOR = "\x00"          # ends each document inside a batch (BREAK_DOC matches it)

DOC_MODES = ("files", "lines", "paragraphs", "jsonl")
PARAGRAPH_BREAK = re.compile(r"\n(?:[^\S\n]*\n)+")   # one or more blank lines


def split_paragraphs(text: str) -> list[str]:
    """Blank-line separated paragraphs that contain something other than whitespace.

    >>> split_paragraphs("a b\\nc\\n\\n  \\nd\\n")
    ['a b\\nc', 'd\\n']
    """
    return [p for p in PARAGRAPH_BREAK.split(text) if p.strip()]


def batch_texts(texts: Iterable[str], names: DocNames | None = None,
                batch_chars: int | None = None) -> Iterator[tuple[int, str]]:
    """In-memory documents as `iter_documents`-style batches (named by position from 1)."""
    import nlpkit.corpus

    batch_chars = batch_chars or nlpkit.corpus.BLOCK_BYTES
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
        return f"{prefix}{first + i - start}"

    def __iter__(self) -> Iterator[str]:
        return (self[i] for i in range(self._n))


def iter_documents(paths: list[str], mode: str = "lines", names: DocNames | None = None,
                   field: str = "text", id_field: str | None = None, errors: str = "strict",
                   batch_chars: int | None = None) -> Iterator[tuple[int, str]]:
    """Yield ``(n_docs, text)`` batches: `text` holds n_docs documents, each ended by a break.

    Modes: ``files`` (a file is a document, named by its path), ``lines`` (a line
    is a document, named by its line number, ``path:N`` with several files; empty
    lines are empty documents), ``paragraphs`` (blank-line separated, numbered from 1),
    ``jsonl`` (one JSON object per line; the text is `field`, the name `id_field`
    or the line number; a line without the field is an error naming file and line).
    Document names are appended to `names` as batches are produced.
    """
    if mode not in DOC_MODES:
        raise NlpkitError(f"unknown document mode {mode!r} (choose from {', '.join(DOC_MODES)})")
    names = names if names is not None else DocNames()
    multi = len(paths) > 1
    para_no = 0
    for path in paths:
        prefix = f"{display_name(path)}:" if multi else ""
        if mode == "files":
            names.add_list([display_name(path)])
            yield 1, join_docs(["".join(iter_blocks(path, errors))])
            continue
        line_no = 0
        carry = ""
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
                docs = [p for p in parts if p.strip()]
                names.add_range(prefix, para_no + 1, len(docs))
                para_no += len(docs)
                yield len(docs), join_docs(docs)
            else:
                batch_names, docs = [], []
                for line in block.split("\n"):
                    line_no += 1
                    if line.strip():
                        name, text = _json_doc(line, path, line_no, field, id_field)
                        batch_names.append(prefix + name)
                        docs.append(text)
                line_no -= 1 if block.endswith("\n") else 0   # the piece after the last newline
                names.add_list(batch_names)
                yield len(docs), join_docs(docs)
        if mode == "paragraphs" and carry.strip():
            para_no += 1
            names.add_range(prefix, para_no, 1)
            yield 1, join_docs([carry])


def _json_doc(line: str, path: str, line_no: int, field: str, id_field: str | None) -> tuple[str, str]:
    rid, text = json_record(line, f"{display_name(path)}, line {line_no}", field, id_field)
    return (str(line_no) if rid is None else rid), text
