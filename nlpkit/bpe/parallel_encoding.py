"""Encode a stream of texts on several processes, in order, with bounded memory.

    >>> for ids in encode_stream(tok, open("corpus.txt"), workers=2):   # doctest: +SKIP
    ...     print(len(ids))

Texts are cut into blocks of `block` texts; at most ``2 * workers`` blocks are in flight, so
memory does not grow with the input. Workers are forked with the tokenizer already built (no
pickling of it), after this process has encoded the first block (so they start with its words in
the cache); ids come back as flat arrays. With one worker (or a short input) everything runs in
this process.
"""

from __future__ import annotations

from array import array
from collections import deque
from itertools import chain, islice
from typing import Iterable, Iterator

import regex

from nlpkit.bpe.tokenizer import Tokenizer
from nlpkit.workers import available_cpus

_worker_tok: Tokenizer | None = None
_worker_kw: dict = {}


def _encode_block(texts: list) -> tuple[array, array]:
    """(lengths, all ids) of a block's texts: two flat arrays travel between processes far faster
    than a list of lists."""
    return _encode_block_with(_worker_tok, _worker_kw, texts)


def _encode_block_with(tok: Tokenizer, kw: dict, texts: list) -> tuple[array, array]:
    lengths, flat = array("q"), array("q")
    for t in texts:
        ids = tok.encode(t, **kw) if isinstance(t, str) else tok.encode(t[0], continued=t[1], **kw)
        lengths.append(len(ids))
        flat.extend(ids)
    return lengths, flat


def _unpack(block: tuple[array, array]) -> list[list[int]]:
    lengths, flat = block
    ids = flat.tolist()
    out, pos = [], 0
    for n in lengths:
        out.append(ids[pos:pos + n])
        pos += n
    return out


def encode_stream(tok: Tokenizer, texts: Iterable[str], *, workers: int | None = None, block: int = 2000,
                  **encode_kw) -> Iterator[list[int]]:
    """The ids of each text, in input order (`encode_kw` go to `Tokenizer.encode`). A text may also be
    a pair (text, continued), as `file_parts` gives."""
    global _worker_tok, _worker_kw
    workers = available_cpus() if workers is None else workers
    it = iter(texts)
    first = list(islice(it, block))
    if workers <= 1 or len(first) < block:  # short input: a pool costs more than it saves
        for t in chain(first, it):
            yield tok.encode(t, **encode_kw) if isinstance(t, str) else tok.encode(t[0], continued=t[1], **encode_kw)
        return
    from nlpkit.workers import mp_context, process_pool

    if mp_context("fork") is None:  # no fork (Windows): one process
        yield from encode_stream(tok, chain(first, it), workers=1, block=block, **encode_kw)
        return
    if block >= 100:  # encode the first block here: the forked workers start with its words cached
        yield from _unpack(_encode_block_with(tok, encode_kw, first))
        first = list(islice(it, block))
        if not first:
            return
    _worker_tok, _worker_kw = tok, encode_kw
    try:
        with process_pool(workers) as pool:
            pending: deque = deque([pool.apply_async(_encode_block, (first,))])
            blocks = iter(lambda: list(islice(it, block)), [])
            for b in islice(blocks, 2 * workers - 1):
                pending.append(pool.apply_async(_encode_block, (b,)))
            while pending:
                done = pending.popleft().get()
                nxt = next(blocks, None)
                if nxt is not None:
                    pending.append(pool.apply_async(_encode_block, (nxt,)))
                yield from _unpack(done)
    finally:
        _worker_tok, _worker_kw = None, {}


_LINE_CUT = regex.compile(r"[\p{L}\p{N}]")
_LETTER = regex.compile(r"\p{L}")
_SPACE_CUT = regex.compile(r"(?<=[A-Za-z0-9]) ")


def file_parts(lines: Iterable[str], cut: str | None, size: int = 1 << 20) -> Iterator[tuple[str, bool]]:
    """One text given as lines (newlines kept) -> parts of about `size` characters and whether each
    continues the one before, cut only where `Tokenizer.stream_cut` says the ids do not change:
    "line" (before a line starting with a letter or digit), "newline" (before the newline ending a line
    when the next one starts with a letter), "space" (before the last space after an ASCII letter or
    digit), None (the whole text in one part). Memory holds about one part."""
    if cut not in ("line", "newline", "space"):
        yield "".join(lines), False
        return
    pending = ""
    scanned = 0  # pending[:scanned] holds no cut (space rule)
    continued = False
    for line in lines:
        if cut == "line":
            if len(pending) >= size and _LINE_CUT.match(line):
                yield pending, continued
                pending, continued = "", True
            pending += line
            continue
        if cut == "newline":
            if len(pending) > size and pending[-1] == "\n" and _LETTER.match(line):
                yield pending[:-1], continued
                pending, continued = "\n", True
            pending += line
            continue
        pending += line
        if len(pending) >= size:
            last = None
            for last in _SPACE_CUT.finditer(pending, max(1, scanned)):
                pass
            if last is None:
                scanned = len(pending)
            else:
                yield pending[:last.start()], continued
                pending, continued, scanned = pending[last.start():], True, 1
    if pending or not continued:
        yield pending, continued


def encode_file(tok: Tokenizer, lines: Iterable[str], *, add_special: bool = False, workers: int | None = None,
                size: int = 1 << 20) -> Iterator[list[int]]:
    """The ids of one text given as lines (newlines kept), part by part (`file_parts`, on `workers`
    processes): their concatenation is ``tok.encode(text, add_special=add_special)``, and memory
    holds a few parts, not the text."""
    pieces = file_parts(lines, tok.stream_cut(), size)
    head = list(islice(pieces, 2))
    if len(head) < 2:  # one part (a short file): no worker processes
        parts = iter([tok.encode(t, continued=c) for t, c in head])
    else:
        parts = encode_stream(tok, chain(head, pieces), workers=workers, block=1)
    bos = [tok.bos_id] if add_special and tok.add_bos and tok.bos_id is not None else []
    eos = [tok.eos_id] if add_special and tok.add_eos and tok.eos_id is not None else []
    ids = next(parts)
    if bos:
        ids = bos + ids
    for nxt in parts:
        yield ids
        ids = nxt
    yield ids + eos if eos else ids
