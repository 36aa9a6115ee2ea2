"""Integer keys for counting with numpy: n-grams packed into one int64, and runs of equal keys.

Counting code (pmi, tfidf, bm25's postings) turns what it counts into one int64 key per
occurrence, sorts the keys and counts the runs of equal ones: no Python loop touches a token.
An n-gram of word ids packs into one key, the first id in the highest bits:

    bigram   a << 32 | b                 ids below 2**32
    trigram  a << 42 | b << 21 | c       ids below 2**21 (`TRIGRAM_VOCAB` distinct words)

so keys sort as the id tuples do.

>>> count_runs(np.sort(pack_ngrams(np.array([1, 2, 1]), np.array([2, 3, 2]))))[1].tolist()
[2, 1]
"""

from __future__ import annotations

import numpy as np

ID_BITS = {2: 32, 3: 21}               # bits an id of a bigram / trigram code holds
TRIGRAM_VOCAB = 1 << ID_BITS[3]        # the most distinct words trigram codes can tell apart
_SHIFTS = {1: (0,), 2: (32, 0), 3: (42, 21, 0)}


def pack_ngrams(*ids: np.ndarray) -> np.ndarray:  # n x [P] -> [P] int64
    """The code of each n-gram given as n id columns (see the module docstring)."""
    shifts = _SHIFTS[len(ids)]
    code = ids[0].astype(np.int64)
    if shifts[0]:
        code <<= shifts[0]
    for col, shift in zip(ids[1:], shifts[1:]):
        code |= (col.astype(np.int64) << shift) if shift else col
    return code


def pack_ngram(ids: tuple[int, ...] | list[int]) -> int:
    """The code of one n-gram of Python ints (`pack_ngrams` of one row)."""
    return sum(int(i) << s for i, s in zip(ids, _SHIFTS[len(ids)]))


def unpack_ngrams(codes: np.ndarray, n: int) -> np.ndarray:  # [P] int64 -> [P, n] int64
    """The id columns of n-gram codes (the inverse of `pack_ngrams`)."""
    if n == 1:
        return codes.astype(np.int64)[:, None]
    bits = ID_BITS[n]
    mask = (1 << bits) - 1
    cols = [codes >> s if k == 0 else (codes >> s) & mask for k, s in enumerate(_SHIFTS[n])]
    return np.stack(cols, axis=1)


def run_starts(*keys: np.ndarray) -> np.ndarray:  # n x [P] sorted -> [U] int64
    """Where each run of equal rows begins in sorted keys (one array, or several columns sorted
    together, as `np.lexsort` leaves them)."""
    new = np.ones(len(keys[0]), dtype=bool)
    if len(new) > 1:
        np.not_equal(keys[0][1:], keys[0][:-1], out=new[1:])
        for col in keys[1:]:
            new[1:] |= col[1:] != col[:-1]
    return np.flatnonzero(new)


def run_lengths(starts: np.ndarray, n: int) -> np.ndarray:  # [U] -> [U] int64
    """The length of each run that starts at `starts` in an array of `n` keys."""
    return np.diff(np.append(starts, n))


def count_runs(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # [P] sorted -> [U], [U] int64
    """The distinct values of sorted `keys` and how often each occurs."""
    starts = run_starts(keys)
    return keys[starts], run_lengths(starts, len(keys))


def sum_by_key(keys: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # [P], [P] -> [U], [U]
    """The distinct keys, sorted, and the sum of the counts of each (int64)."""
    order = np.argsort(keys)                  # equal keys are summed: no need for a stable sort
    keys, counts = keys[order], counts[order].astype(np.int64)
    if not len(keys):
        return keys, counts
    starts = run_starts(keys)
    return keys[starts], np.add.reduceat(counts, starts)
