r"""Turning a corpus into token-id arrays, block by block, at C speed.

Counting code (pmi, tfidf) never loops over tokens in Python. A block of text
(2 MB, ending at a line end) is tokenized in one pass into ids, with segment ends
(sentence ends, line ends, document separators) as break tokens; breaks and
stopwords get ids too, and per-id flags drop them afterwards with numpy:

    "The cat sat. The dog"  ->  ids [0 1 2 3 0 4]  breaks at [3]
                            ->  kept ids [0 1 2 0 4], segment [0 0 0 1 1]

Two tokenizers give the same tokens: the general one runs one findall of
``(?:TOKEN)|BREAK`` and maps the strings with a dict's C-level ``__getitem__``; the
fast one (the default patterns ``\w\w+`` / ``\w+`` on mostly-ASCII text) replaces
findall by ``bytes.translate`` and finds the pieces between non-word bytes with numpy: a
piece of up to 16 bytes is two uint64 looked up in a hash table, and only pieces not yet
in the table (new ones, longer ones) reach a Python dict, once per block.
Memory per block is bounded by the block size; the vocabulary grows with the number
of distinct words only. `BlockEncoder.encode_many` can run tokenizers in worker
processes (``--jobs``); the ids are the same as in one process.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections import defaultdict, deque
from functools import lru_cache
from itertools import islice
from typing import Any, Iterable, Iterator

import numpy as np

from nlpkit.errors import NlpkitError
from nlpkit.io import display_name, open_binary
from nlpkit.text import WordTokenizer

BLOCK_BYTES = 1 << 21     # 2 MiB of text per block

# Segment-break regexes (matched only where the token pattern does not match).
BREAK_SENTENCE_LINE = r"[.!?\n]+"
BREAK_SENTENCE = r"[.!?]+"
BREAK_LINE = r"\n"
BREAK_DOC = r"\x00"
_LEADING_FLAGS = re.compile(r"^(?:\(\?[aiLmsux]+\))+")


def iter_blocks(path: str, errors: str = "strict", block_bytes: int | None = None,
                keep_bom: bool = False) -> Iterator[str]:
    """Yield a file's text in blocks that end at a line end; ``\\r\\n`` -> ``\\n``; BOM dropped
    (kept as U+FEFF with `keep_bom`, as KenLM keeps it in the first word).

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
            if first and not keep_bom and data.startswith(b"\xef\xbb\xbf"):
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
                yield _decode_block(data.replace(b"\r\n", b"\n"), path, lines_before, errors, data)
                lines_before += data.count(b"\n")
            if not chunk:
                return
    finally:
        if f is not sys.stdin.buffer:
            f.close()


def _decode_block(data: bytes, path: str, lines_before: int, errors: str, original: bytes) -> str:
    try:
        return data.decode("utf-8", errors=errors)
    except UnicodeDecodeError:
        pass
    try:                                      # locate the bad byte in the block as it was read
        original.decode("utf-8")
        raise AssertionError("unreachable: CRLF removal cannot make valid UTF-8 invalid")
    except UnicodeDecodeError as e:
        data = original
        lineno = lines_before + data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1)
        raise NlpkitError(
            f"{display_name(path)}, line {lineno}: invalid UTF-8 at byte {col} of the line "
            f"(use `errors` replace to substitute U+FFFD)") from None


def auto_jobs(paths: list[str], jobs: int | None = None) -> int:
    """Tokenizer processes: `jobs` when given (>= 1); else 2 for 8 MB or more of files on a
    multi-core machine, 1 otherwise (stdin, small inputs).

    The parent still maps every block's ids and counts, so more than two processes gain
    little; on an idle 2-core machine two cut pmi on the 31 MB Gutenberg corpus from 2.2 s
    to 1.6 s and tfidf from 4.7 s to 3.9 s (same output). On a machine busy with other
    work one process can be faster: ``--jobs 1``.
    """
    if jobs:
        return max(1, jobs)
    if (os.cpu_count() or 1) < 2:
        return 1
    total = 0
    for p in paths:
        if p == "-":
            return 1
        try:
            total += os.path.getsize(p)
        except OSError:
            return 1
    return 2 if total >= 8 * 2**20 else 1


@lru_cache(maxsize=8)
def _compiled(pattern: str, flags: int, use_regex: bool):
    if use_regex:
        import regex

        return regex.compile(pattern, flags)
    return re.compile(pattern, flags)


def _tail(d: dict, start: int) -> list:
    """Keys of `d` from insertion position `start` on, read from the end: ``_tail({1:0, 2:0}, 1) -> [2]``."""
    return list(islice(reversed(d), len(d) - start))[::-1]


class _RegexTokenizer:
    """Per-process tokenizer state: one findall per block, ids from a vocabulary kept across blocks.

    ``tokenize(text) -> (new_words, ids)``: ids index this object's own vocabulary; only the
    words first seen in this block are returned, so a caller (or a worker's parent) maps
    local ids to its global ids with a growing lookup table.
    """

    def __init__(self, lowercase: bool, pattern: str, flags: int, use_regex: bool) -> None:
        self.lowercase = lowercase
        self.findall = _compiled(pattern, flags, use_regex).findall
        self.vocab: defaultdict[str, int] = defaultdict()
        self.vocab.default_factory = self.vocab.__len__
        self.reported = 0

    def new_words(self) -> list[str]:
        """Words added since the last call (from the end of the dict: O(new), not O(vocabulary))."""
        words = _tail(self.vocab, self.reported)
        self.reported = len(self.vocab)
        return words

    def tokenize(self, text: str) -> tuple[list[str], np.ndarray]:
        if self.lowercase:
            text = text.lower()
        tokens = self.findall(text)
        ids = np.fromiter(map(self.vocab.__getitem__, tokens), dtype=np.int32, count=len(tokens))
        return self.new_words(), ids


# Fast path for the \w\w+ / \w+ patterns: ASCII non-word bytes become spaces (bytes.translate),
# bytes.split() cuts the block, and each distinct piece is looked at once per process:
# pure-ASCII pieces are tokens as they are (or nothing when too short); pieces with UTF-8
# bytes (é, curly quotes, dashes) are re-tokenized with the real regex; b"\x01" pieces are
# the breaks. Same tokens as findall, because a \w+ match never holds an ASCII non-word byte.
_WORD_BYTES = bytes(c if (48 <= c <= 57 or 65 <= c <= 90 or 97 <= c <= 122 or c in (1, 95) or c >= 128)
                    else 32 for c in range(256))
FAST_MAX_MULTIBYTE = 0.1    # extra UTF-8 bytes per character above which the regex path is faster
_FAST_MIN_LEN = {r"\w\w+": 2, r"\w+": 1}
_TABLE_BITS = 19           # piece hash table slots (2**19: 10 MB; Gutenberg has 58k distinct pieces)
_MASKS = np.array([(1 << 8 * k) - 1 for k in range(9)], dtype=np.uint64)   # a uint64's first k bytes
_MUL1, _MUL2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F)   # multiply-shift hashing
_BREAK_CHARS = {BREAK_SENTENCE_LINE: ".!?\n", BREAK_SENTENCE: ".!?", BREAK_LINE: "\n", BREAK_DOC: "\x00"}


class _FastTokenizer(_RegexTokenizer):
    """`_RegexTokenizer` with the combined (token | break) regex, ~2x faster on mostly-ASCII text."""

    def __init__(self, lowercase: bool, min_len: int, break_chars: str, break_token: str,
                 pattern: str, combined: str) -> None:
        super().__init__(lowercase, combined, re.UNICODE, False)
        self.min_len, self.break_chars, self.break_token = min_len, break_chars, break_token
        self.piece_findall = re.compile(pattern).findall
        self.raw: defaultdict[bytes, int] = defaultdict()
        self.raw.default_factory = self.raw.__len__
        self.lens = np.zeros(0, dtype=np.int64)      # [n_raw] tokens each piece stands for
        self.starts = np.zeros(0, dtype=np.int64)    # [n_raw] where its tokens start in `flat`
        self.flat = np.zeros(0, dtype=np.int32)      # token ids of all pieces, concatenated
        self.table_bits = _TABLE_BITS
        self.hkey = np.zeros((2, 0), dtype=np.uint64)   # [2, T] hash table: a piece's 16 bytes
        self.hrid = np.zeros(0, dtype=np.int32)         # [T] its raw id (-1: empty)

    def _add_pieces(self, keys: list[bytes]) -> None:
        """Expand pieces seen for the first time into token ids."""
        tokens: list[list[str]] = []
        for k in keys:
            if k.isascii():
                if k == b"\x01":
                    tokens.append([self.break_token])
                else:
                    tokens.append([k.decode()] if len(k) >= self.min_len else [])
            else:
                piece = k.decode("utf-8", "surrogatepass")
                tokens.append(self.piece_findall(piece.lower() if self.lowercase else piece))
        lens = np.fromiter(map(len, tokens), dtype=np.int64, count=len(tokens))
        flat = np.fromiter(map(self.vocab.__getitem__, (t for ts in tokens for t in ts)),
                           dtype=np.int32, count=int(lens.sum()))
        self.starts = np.concatenate([self.starts, len(self.flat) + np.cumsum(lens) - lens])
        self.lens = np.concatenate([self.lens, lens])
        self.flat = np.concatenate([self.flat, flat])

    def _piece_ids(self, tr: bytes) -> np.ndarray:  # -> [p] raw ids
        """Raw ids of the pieces of translated bytes `tr` (runs of bytes other than space).

        Same ids as ``map(raw.__getitem__, tr.split())``, in numpy: a piece of up to 16 bytes
        is two little-endian uint64 (its bytes, zero-padded; pieces hold no zero byte), looked up
        in a hash table. The rest go through the ``raw`` dict once per distinct piece: pieces
        new in this block, longer ones, and the few whose table slot another piece took.
        """
        if not self.hrid.size:
            self.hkey = np.zeros((2, 1 << self.table_bits), dtype=np.uint64)
            self.hrid = np.full(1 << self.table_bits, -1, dtype=np.int32)
        padded = b" " + tr + b" " * 17                  # offsets below are into `padded`
        word = np.frombuffer(padded, dtype=np.uint8) != 32
        edges = np.flatnonzero(word[1:] != word[:-1])   # [2p] alternating piece starts and ends, - 1
        del word
        starts, ends = edges[0::2] + 1, edges[1::2] + 1  # [p]
        lens = ends - starts
        eight = np.ndarray((len(padded) - 7,), dtype="<u8", buffer=padded, strides=(1,))  # at each offset
        k1 = eight[starts] & _MASKS[np.minimum(lens, 8)]
        k2 = np.zeros(len(starts), dtype=np.uint64)
        over = np.flatnonzero(lens > 8)                 # few: most words are short
        k2[over] = eight[starts[over] + 8] & _MASKS[np.minimum(lens[over] - 8, 8)]
        h = (((k1 * _MUL1) ^ (k2 * _MUL2)) >> np.uint64(64 - self.table_bits)).astype(np.intp)
        rid = self.hrid[h]
        miss = np.flatnonzero((self.hkey[0][h] != k1) | (self.hkey[1][h] != k2) | (lens > 16))
        if not len(miss):
            return rid
        short = miss[lens[miss] <= 16]
        order = np.lexsort((k2[short], k1[short]))       # stable: a piece's first occurrence leads
        grouped = short[order]
        lead = np.ones(len(grouped), dtype=bool)
        lead[1:] = (k1[grouped[1:]] != k1[grouped[:-1]]) | (k2[grouped[1:]] != k2[grouped[:-1]])
        reps = grouped[lead]                              # [d] first occurrence of each short piece
        look = np.sort(np.concatenate([reps, miss[lens[miss] > 16]]))   # dict order = text order
        n0, get = len(self.raw), self.raw.__getitem__
        rid[look] = np.fromiter((get(padded[a:b]) for a, b in zip(starts[look].tolist(), ends[look].tolist())),
                                dtype=np.int32, count=len(look))
        rid[grouped] = rid[reps][np.cumsum(lead) - 1]
        if len(self.raw) > n0:
            self._add_pieces(_tail(self.raw, n0))
        free = reps[self.hrid[h[reps]] < 0]               # remember pieces whose slot is free
        slots, first = np.unique(h[free], return_index=True)   # first come, first served
        free = free[first]
        self.hkey[0][slots], self.hkey[1][slots], self.hrid[slots] = k1[free], k2[free], rid[free]
        return rid

    def tokenize(self, text: str) -> tuple[list[str], np.ndarray]:
        data = text.encode("utf-8", "surrogatepass")
        multibyte = len(data) - len(text)
        if multibyte > FAST_MAX_MULTIBYTE * len(text):
            return super().tokenize(text)
        if self.lowercase:
            if multibyte and "\u03a3" in text:   # capital sigma: str.lower() looks at its neighbours
                data = text.lower().encode("utf-8", "surrogatepass")
            else:                                # ASCII letters here; multi-byte pieces in _add_pieces
                data = data.lower()
        del text
        if b"\x01" in data:
            data = data.replace(b"\x01", b" ")
        for ch in self.break_chars:
            data = data.replace(ch.encode(), b" \x01 ")
        rid = self._piece_ids(data.translate(_WORD_BYTES))                     # [p]
        del data
        n_out = self.lens[rid]                                                   # [p]
        if n_out.max(initial=0) <= 1:                # no piece holds two tokens: drop the empty ones
            if n_out.min(initial=1) == 0:
                rid = rid[n_out == 1]
            return self.new_words(), self.flat[self.starts[rid]]
        total = int(n_out.sum())
        first = np.repeat(self.starts[rid], n_out)                               # [total]
        within = np.arange(total) - np.repeat(np.cumsum(n_out) - n_out, n_out)
        return self.new_words(), self.flat[first + within]


_WORKER_STATE: dict[str, _RegexTokenizer] = {}
_SHARED_STATE: dict[str, _RegexTokenizer] = {}     # BlockEncoder(shared=True): per-process tokenizers


def _make_tokenizer(spec: tuple) -> _RegexTokenizer:
    return _FastTokenizer(*spec[1:]) if spec[0] == "fast" else _RegexTokenizer(*spec[1:])


def _tokenize_task(key: str, spec: tuple, text: str) -> tuple[int, list[str], np.ndarray]:
    """Worker entry: tokenize with this process's state for encoder `key`."""
    state = _WORKER_STATE.get(key)
    if state is None:
        _WORKER_STATE.clear()
        state = _WORKER_STATE[key] = _make_tokenizer(spec)
    return (os.getpid(), *state.tokenize(text))


class BlockEncoder:
    """Encode text blocks to token ids with segment indices, sharing one vocabulary.

    ``encode(text) -> (ids, seg, n_seg)``: ids int32 [n] of the kept tokens (not
    stopwords), seg int64 [n] the segment each token is in (0..n_seg-1, segments
    separated by matches of `break_pattern`; n_seg = number of breaks + 1).
    ``words`` lists the vocabulary by id; `keep` flags real tokens (ids of
    breaks and stopwords are never returned). `encode_many` spreads the regex
    work over worker processes and merges their vocabularies in order.
    """

    def __init__(self, tokenizer: WordTokenizer, break_pattern: str | None = None,
                 shared: bool = False) -> None:
        self.tokenizer = tokenizer
        self.shared = shared    # reuse this process's tokenizer state (a Dask worker's shards)
        self.break_pattern = break_pattern
        tok_re = tokenizer.regex
        self._break_re = re.compile(break_pattern) if break_pattern else None
        use_regex = not isinstance(tok_re, re.Pattern)
        if break_pattern:
            # Global inline flags such as "(?u)" must lead the whole pattern: move them to flags.
            body = _LEADING_FLAGS.sub("", tok_re.pattern)
            combined = f"(?:{body})|(?:{break_pattern})"
        else:
            combined = tok_re.pattern
        min_len = _FAST_MIN_LEN.get(tok_re.pattern) if not use_regex and tok_re.flags == re.UNICODE else None
        if min_len is not None and (break_pattern is None or break_pattern in _BREAK_CHARS):
            chars = _BREAK_CHARS.get(break_pattern, "")
            token = next((c for c in chars if self._break_re.fullmatch(c)), "")
            self._spec: tuple = ("fast", tokenizer.lowercase, min_len, chars, token, tok_re.pattern, combined)
        else:
            self._spec = ("regex", tokenizer.lowercase, combined, tok_re.flags, use_regex)
        self._vocab: defaultdict[str, int] = defaultdict()
        self._vocab.default_factory = self._vocab.__len__
        self._classified = 0
        self._is_break = np.zeros(0, dtype=bool)   # [V]
        self._keep = np.zeros(0, dtype=bool)       # [V]
        self._keep_all = True
        self._local: _RegexTokenizer | None = None  # in-process tokenizer state
        self._luts: dict[int, np.ndarray] = {}      # tokenizer process -> its ids -> our ids
        self._key = f"{os.getpid()}-{id(self)}-{time.monotonic_ns()}"

    # -- vocabulary -----------------------------------------------------------------
    @property
    def words(self) -> list[str]:
        """Vocabulary strings by id (breaks and stopwords included; see `keep`)."""
        return list(self._vocab)

    @property
    def keep(self) -> np.ndarray:  # [V] bool
        self._classify()
        return self._keep

    def __len__(self) -> int:
        return len(self._vocab)

    def _classify(self) -> None:
        """Flag the ids added since the last call as breaks / stopwords (per type, not token)."""
        n = len(self._vocab)
        if n == self._classified:
            return
        new = _tail(self._vocab, self._classified)
        tok_re = self.tokenizer.regex
        brk = np.zeros(len(new), dtype=bool)
        if self._break_re is not None:
            if tok_re.groups:
                brk = np.array([w == "" for w in new], dtype=bool)
            else:
                bfull, tfull = self._break_re.fullmatch, tok_re.fullmatch
                brk = np.array([bfull(w) is not None and tfull(w) is None for w in new], dtype=bool)
        stop = self.tokenizer.stopwords
        stopped = np.array([w in stop for w in new], dtype=bool) if stop else np.zeros(len(new), bool)
        self._is_break = np.concatenate([self._is_break, brk])
        self._keep = np.concatenate([self._keep, ~(brk | stopped)])
        self._keep_all = bool(self._keep.all())     # no break or stopword seen: nothing to drop
        self._classified = n

    # -- encoding -------------------------------------------------------------------
    def encode(self, text: str) -> tuple[np.ndarray, np.ndarray, int]:
        """Token ids and segment indices of one block (see the class docstring)."""
        if self.shared:
            return self._encode_shared(text)
        if self._local is None:
            self._local = _make_tokenizer(self._spec)
        return self._merge(0, *self._local.tokenize(text))

    def _encode_shared(self, text: str) -> tuple[np.ndarray, np.ndarray, int]:
        """`encode` with the process-wide tokenizer for these settings: its piece cache, built
        by earlier shards, is reused; its ids are mapped to ours lazily (only ids that occur),
        so our vocabulary holds this encoder's words only."""
        key = repr(self._spec)
        tok = _SHARED_STATE.get(key)
        if tok is None:
            if len(_SHARED_STATE) >= 4:
                _SHARED_STATE.clear()
            tok = _SHARED_STATE[key] = _make_tokenizer(self._spec)
            tok.id_words = []
        new_words, local = tok.tokenize(text)
        tok.id_words.extend(new_words)
        lut = self._luts.get(-1, np.zeros(0, dtype=np.int32))
        if len(lut) < len(tok.id_words):
            lut = np.concatenate([lut, np.full(len(tok.id_words) - len(lut), -1, dtype=np.int32)])
        ids = lut[local]
        missing = ids < 0
        if missing.any():
            need = np.unique(local[missing])
            words = tok.id_words
            lut[need] = np.fromiter((self._vocab[words[i]] for i in need.tolist()), dtype=np.int32,
                                    count=len(need))
            ids = lut[local]
        self._luts[-1] = lut
        return self._segment(ids)

    def _segment(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        self._classify()
        if self._break_re is not None:
            seg = np.cumsum(self._is_break[ids], dtype=np.int64)   # [n_all] breaks up to here
            n_seg = int(seg[-1]) + 1 if len(seg) else 1
        else:
            seg = None
            n_seg = 1
        if not self._keep_all:
            keep = self._keep[ids]
            ids = ids[keep]
            seg = seg[keep] if seg is not None else None
        return ids, (seg if seg is not None else np.zeros(len(ids), dtype=np.int64)), n_seg

    def _merge(self, source: int, new_words: list[str], local: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        """A tokenizer's (new words, local ids) -> our ids; `source` names the tokenizer process."""
        lut = self._luts.get(source, np.zeros(0, dtype=np.int32))
        if new_words:
            add = np.fromiter(map(self._vocab.__getitem__, new_words), dtype=np.int32, count=len(new_words))
            lut = self._luts[source] = np.concatenate([lut, add])
        return self._segment(lut[local])

    def encode_many(self, items: Iterable[tuple[Any, str]], jobs: int = 1
                    ) -> Iterator[tuple[Any, np.ndarray, np.ndarray, int]]:
        """``(meta, text)`` items -> ``(meta, ids, seg, n_seg)`` in input order.

        With ``jobs > 1`` the lowercasing and regex run in worker processes, at most
        2*jobs blocks in flight (memory stays bounded); ids equal the serial ones.
        """
        if jobs <= 1:
            for meta, text in items:
                yield (meta, *self.encode(text))
            return
        from nlpkit.workers import fork_is_safe, process_pool

        method = "fork" if fork_is_safe() else "forkserver"
        pending: deque = deque()
        with process_pool(jobs, method=method) as pool:
            for meta, text in items:
                pending.append((meta, pool.apply_async(_tokenize_task, (self._key, self._spec, text))))
                if len(pending) >= 2 * jobs:
                    meta, res = pending.popleft()
                    yield (meta, *self._merge(*res.get()))
            while pending:
                meta, res = pending.popleft()
                yield (meta, *self._merge(*res.get()))
