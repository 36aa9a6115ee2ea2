"""Encode a stream of texts on several processes, in order, with bounded memory.

    >>> for ids in encode_stream(tok, open("corpus.txt"), workers=2):   # doctest: +SKIP
    ...     print(len(ids))

Texts are cut into blocks of `block` texts; at most ``2 * workers`` blocks are in flight, so
memory does not grow with the input. Workers are forked with the tokenizer already built (no
pickling of it); with one worker (or a short input) everything runs in this process.
"""

from __future__ import annotations

import os
from collections import deque
from itertools import islice
from typing import Iterable, Iterator

from nlpkit.bpe.tokenizer import Tokenizer

_worker_tok: Tokenizer | None = None
_worker_kw: dict = {}


def _encode_block(texts: list[str]) -> list[list[int]]:
    tok = _worker_tok
    return [tok.encode(t, **_worker_kw) for t in texts]


def default_workers() -> int:
    """Processes to use: the cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return os.cpu_count() or 1


def encode_stream(tok: Tokenizer, texts: Iterable[str], *, workers: int | None = None, block: int = 2000,
                  **encode_kw) -> Iterator[list[int]]:
    """The ids of each text, in input order (`encode_kw` go to `Tokenizer.encode`)."""
    global _worker_tok, _worker_kw
    workers = default_workers() if workers is None else workers
    it = iter(texts)
    first = list(islice(it, block))
    if workers <= 1 or len(first) < block:  # short input: a pool costs more than it saves
        for t in first:
            yield tok.encode(t, **encode_kw)
        for t in it:
            yield tok.encode(t, **encode_kw)
        return
    import multiprocessing

    try:
        ctx = multiprocessing.get_context("fork")
    except ValueError:  # no fork (Windows, macOS default): one process
        yield from (tok.encode(t, **encode_kw) for t in (*first, *it))
        return
    _worker_tok, _worker_kw = tok, encode_kw
    pool = ctx.Pool(workers)
    try:
        pending: deque = deque([pool.apply_async(_encode_block, (first,))])
        blocks = iter(lambda: list(islice(it, block)), [])
        for b in islice(blocks, 2 * workers - 1):
            pending.append(pool.apply_async(_encode_block, (b,)))
        while pending:
            done = pending.popleft().get()
            nxt = next(blocks, None)
            if nxt is not None:
                pending.append(pool.apply_async(_encode_block, (nxt,)))
            yield from done
    finally:
        pool.terminate()
        _worker_tok, _worker_kw = None, {}
