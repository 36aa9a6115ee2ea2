"""Turning a corpus into token-id arrays, block by block, at C speed.

Counting code (pmi, tfidf) never loops over tokens in Python. A block of text
(a few MB, ending at a line end) is lowercased once, matched once with a
combined regex ``(?:TOKEN)|BREAK`` whose BREAK alternative marks segment ends
(sentence ends, line ends, document separators), and the matched strings are
mapped to integer ids with a dict's C-level ``__getitem__``. Breaks and
stopwords get ids too; per-id flags drop them afterwards with numpy:

    "The cat sat. The dog"  ->  ids [0 1 2 3 0 4]  breaks at [3]
                            ->  kept ids [0 1 2 0 4], segment [0 0 0 1 1]

Memory per block is bounded by the block size; the vocabulary grows with the
number of distinct words only.
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from typing import Iterator

import numpy as np

from nlpkit.errors import NlpkitError
from nlpkit.io import display_name, open_binary
from nlpkit.text import WordTokenizer

BLOCK_BYTES = 1 << 21  # 2 MiB of text per block

# Segment-break regexes (matched only where the token pattern does not match).
BREAK_SENTENCE_LINE = r"[.!?\n]+"
BREAK_SENTENCE = r"[.!?]+"
BREAK_LINE = r"\n"
DOC_SEPARATOR = "\x00"          # joins documents inside a block
BREAK_DOC = r"\x00"
_LEADING_FLAGS = re.compile(r"^(?:\(\?[aiLmsux]+\))+")


def iter_blocks(path: str, errors: str = "strict", block_bytes: int | None = None) -> Iterator[str]:
    """Yield a file's text in blocks that end at a line end; ``\\r\\n`` -> ``\\n``; BOM dropped.

    Undecodable bytes raise `NlpkitError` naming the file and line, as `nlpkit.io` does.
    """
    block_bytes = block_bytes or BLOCK_BYTES
    f = open_binary(path)
    lines_before = 0
    rest = b""
    first = True
    try:
        while True:
            chunk = f.read(block_bytes)
            data = rest + chunk
            if first and data.startswith(b"\xef\xbb\xbf"):
                data = data[3:]
            first = False
            if not chunk:
                rest = b""
            else:
                cut = data.rfind(b"\n") + 1
                if cut == 0:
                    rest = data
                    continue
                data, rest = data[:cut], data[cut:]
            if data:
                yield _decode_block(data, path, lines_before, errors).replace("\r\n", "\n")
                lines_before += data.count(b"\n")
            if not chunk:
                return
    finally:
        if f is not sys.stdin.buffer:
            f.close()


def _decode_block(data: bytes, path: str, lines_before: int, errors: str) -> str:
    try:
        return data.decode("utf-8", errors=errors)
    except UnicodeDecodeError as e:
        lineno = lines_before + data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1)
        raise NlpkitError(
            f"{display_name(path)}, line {lineno}: invalid UTF-8 at byte {col} of the line "
            f"(use --encoding-errors replace to substitute U+FFFD)") from None


class BlockEncoder:
    """Encode text blocks to token ids with segment indices, sharing one vocabulary.

    ``encode(text) -> (ids, seg, n_seg)``: ids int32 [n] of the kept tokens (not
    stopwords), seg int64 [n] the segment each token is in (0..n_seg-1, segments
    separated by matches of `break_pattern`; n_seg = number of breaks + 1).
    ``words`` lists the vocabulary by id; `keep` flags real tokens (ids of
    breaks and stopwords are never returned).
    """

    def __init__(self, tokenizer: WordTokenizer, break_pattern: str | None = None) -> None:
        self.tokenizer = tokenizer
        self.break_pattern = break_pattern
        tok_re = tokenizer.regex
        self._break_re = re.compile(break_pattern) if break_pattern else None
        if break_pattern:
            # Global inline flags such as "(?u)" must lead the whole pattern: move them to flags.
            body = _LEADING_FLAGS.sub("", tokenizer.pattern)
            combined = f"(?:{body})|(?:{break_pattern})"
            module = re if isinstance(tok_re, re.Pattern) else __import__("regex")
            self._findall = module.compile(combined, tok_re.flags).findall
        else:
            self._findall = tok_re.findall
        self._vocab: defaultdict[str, int] = defaultdict()
        self._vocab.default_factory = self._vocab.__len__
        self._classified = 0
        self._is_break = np.zeros(0, dtype=bool)   # [V]
        self._keep = np.zeros(0, dtype=bool)       # [V]

    # -- vocabulary -----------------------------------------------------------------
    @property
    def words(self) -> list[str]:
        """Vocabulary strings by id (breaks and stopwords included; see `keep`)."""
        return list(self._vocab)

    @property
    def keep(self) -> np.ndarray:  # [V] bool
        self._classify()
        return self._keep

    def lookup(self, word: str) -> int | None:
        """Id of a word, or None when it never occurred."""
        return self._vocab.get(word)

    def _classify(self) -> None:
        """Flag the ids added since the last call as breaks / stopwords (per type, not token)."""
        n = len(self._vocab)
        if n == self._classified:
            return
        new = list(self._vocab)[self._classified:]
        groups = self.tokenizer.regex.groups
        tok_full = self.tokenizer.regex.fullmatch
        brk = np.zeros(len(new), dtype=bool)
        if self._break_re is not None:
            if groups:
                brk = np.array([w == "" for w in new], dtype=bool)
            else:
                bfull = self._break_re.fullmatch
                brk = np.array([bfull(w) is not None and tok_full(w) is None for w in new], dtype=bool)
        stop = self.tokenizer.stopwords
        stopped = np.array([w in stop for w in new], dtype=bool) if stop else np.zeros(len(new), bool)
        self._is_break = np.concatenate([self._is_break, brk])
        self._keep = np.concatenate([self._keep, ~(brk | stopped)])
        self._classified = n

    # -- encoding -------------------------------------------------------------------
    def encode(self, text: str) -> tuple[np.ndarray, np.ndarray, int]:
        """Token ids and segment indices of one block (see the class docstring)."""
        if self.tokenizer.lowercase:
            text = text.lower()
        tokens = self._findall(text)
        ids = np.fromiter(map(self._vocab.__getitem__, tokens), dtype=np.int32, count=len(tokens))
        del tokens
        self._classify()
        if self._break_re is not None:
            brk = self._is_break[ids]                        # [n_all]
            seg = np.cumsum(brk, dtype=np.int64)             # [n_all] breaks before-or-at
            n_seg = int(seg[-1]) + 1 if len(seg) else 1
        else:
            seg = np.zeros(len(ids), dtype=np.int64)
            n_seg = 1
        keep = self._keep[ids]
        return ids[keep], seg[keep], n_seg

    def encode_docs(self, docs: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Ids and document index (0..len(docs)-1) of the tokens of a list of documents.

        The encoder must have been built with ``break_pattern=BREAK_DOC``.
        """
        if not docs:
            return np.zeros(0, np.int32), np.zeros(0, np.int64)
        text = DOC_SEPARATOR.join(d.replace(DOC_SEPARATOR, " ") for d in docs)
        ids, seg, n_seg = self.encode(text)
        if n_seg != len(docs):  # a token pattern that swallowed a separator
            raise NlpkitError("the token pattern matches the NUL character; choose one that does not")
        return ids, seg


# ------------------------------------------------------------------------- documents

DOC_MODES = ("files", "lines", "paragraphs", "jsonl")
PARAGRAPH_BREAK = re.compile(r"\n(?:[^\S\n]*\n)+")   # one or more blank lines


def split_paragraphs(text: str) -> list[str]:
    """Blank-line separated paragraphs that contain something other than whitespace.

    >>> split_paragraphs("a b\\nc\\n\\n  \\nd\\n")
    ['a b\\nc', 'd\\n']
    """
    return [p for p in PARAGRAPH_BREAK.split(text) if p.strip()]


def iter_documents(paths: list[str], mode: str = "lines", field: str = "text",
                   id_field: str | None = None, errors: str = "strict",
                   batch_chars: int | None = None) -> Iterator[tuple[list[str], list[str]]]:
    """Yield batches ``(names, texts)`` of documents, a few MB of text per batch.

    Modes: ``files`` (a file is a document, named by its path), ``lines`` (a line
    is a document, named by its line number, ``path:N`` with several files; empty
    lines are empty documents), ``paragraphs`` (blank-line separated, numbered from 1),
    ``jsonl`` (one JSON object per line; the text is `field`, the name `id_field`
    or the line number; a line without the field is an error naming file and line).
    """
    if mode not in DOC_MODES:
        raise NlpkitError(f"unknown document mode {mode!r} (choose from {', '.join(DOC_MODES)})")
    batch_chars = batch_chars or BLOCK_BYTES
    multi = len(paths) > 1
    para_no = 0
    for path in paths:
        prefix = f"{display_name(path)}:" if multi else ""
        if mode == "files":
            yield [display_name(path)], ["".join(iter_blocks(path, errors))]
            continue
        line_no = 0
        carry = ""
        for block in iter_blocks(path, errors, batch_chars):
            if mode == "lines":
                lines = block.split("\n")[:-1]              # a block ends with "\n"
                names = [f"{prefix}{line_no + i + 1}" for i in range(len(lines))]
                line_no += len(lines)
                yield names, lines
            elif mode == "paragraphs":
                parts = PARAGRAPH_BREAK.split(carry + block)
                carry = parts.pop()
                docs = [p for p in parts if p.strip()]
                names = [f"{prefix}{para_no + i + 1}" for i in range(len(docs))]
                para_no += len(docs)
                yield names, docs
            else:
                names, docs = [], []
                for line in block.split("\n")[:-1]:
                    line_no += 1
                    if line.strip():
                        name, text = _json_doc(line, path, line_no, field, id_field)
                        names.append(prefix + name)
                        docs.append(text)
                yield names, docs
        if mode == "paragraphs" and carry.strip():
            para_no += 1
            yield [f"{prefix}{para_no}"], [carry]


def _json_doc(line: str, path: str, line_no: int, field: str, id_field: str | None) -> tuple[str, str]:
    import json

    where = f"{display_name(path)}, line {line_no}"
    try:
        rec = json.loads(line)
    except json.JSONDecodeError as e:
        raise NlpkitError(f"{where}: not valid JSON ({e.msg})") from None
    if not isinstance(rec, dict):
        raise NlpkitError(f"{where}: expected a JSON object, got {type(rec).__name__}")
    if field not in rec:
        raise NlpkitError(f"{where}: no field {field!r} (fields: {', '.join(map(str, rec)) or 'none'}; "
                          "choose one with --field)")
    text = rec[field]
    if not isinstance(text, str):
        raise NlpkitError(f"{where}: field {field!r} is {type(text).__name__}, expected a string")
    if id_field is None:
        return str(line_no), text
    if id_field not in rec:
        raise NlpkitError(f"{where}: no id field {id_field!r}")
    return str(rec[id_field]), text
