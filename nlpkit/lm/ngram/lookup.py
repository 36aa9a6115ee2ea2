"""Word ids for a batch of lines with numpy: the words of query, found in a hash table of the vocabulary.

KenLM's ``query`` splits a line on six ASCII bytes (space, tab, LF, CR, VT, FF). Those bytes never
occur inside a multi-byte UTF-8 character, so the batch's text is split on its UTF-8 bytes in one
numpy pass. A word of up to 8 bytes is its own key (its bytes as one uint64); a longer one is keyed
by its 64-bit hash (`hashing.hash_tokens`, eight bytes at a time) and compared byte for byte with
the word it finds, so a hash collision can never give a wrong id. Keys are looked up in a
`HashIndex` of the vocabulary's. A Python dict lookup per word costs about 200 ns (a fresh string
hashes itself first); this costs a few numpy passes over the batch. The ARPA reader maps the
words of its n-gram lines through the same index.

Text is encoded with ``surrogatepass`` on both sides (the vocabulary and the lines), so a line read
with ``--encoding-errors surrogateescape`` still finds its words.
"""

from __future__ import annotations

import numpy as np

from nlpkit.lm.ngram.hashing import HashIndex, all_distinct, chunk, hash_tokens, words8


class WordIndex:
    """The vocabulary's UTF-8 bytes in one pool, and a hash table over the words' keys.

    A word of up to 8 bytes is its own key (its bytes as a little-endian uint64; with its length, that
    is the word), a longer one is keyed by its 64-bit hash and compared byte for byte when found.

    ``WordIndex(["a", "bc"]).find(*split_words("bc x a", 1)[:3]) -> [1, -1, 0]``
    """

    def __init__(self, vocab: list[str]) -> None:
        self._build([w.encode("utf-8", "surrogatepass") for w in vocab])

    @classmethod
    def from_bytes(cls, words: list[bytes]) -> "WordIndex":
        """The index of words given as bytes (an ARPA file's unigrams, as read)."""
        index = cls.__new__(cls)
        index._build(words)
        return index

    def _build(self, encoded: list[bytes]) -> None:
        self.lens = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
        self.starts = np.cumsum(self.lens) - self.lens
        self.w8 = words8(np.frombuffer(b"".join(encoded), dtype=np.uint8))
        keys = word_keys(self.w8, self.starts, self.lens)
        self.index = HashIndex(keys, load=0.125) if all_distinct(keys) else None     # None: a shared key

    def find(self, w8: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
        """The id of each word (bytes starts[i]:starts[i] + lens[i] of `w8`'s buffer), -1 if not in the
        vocabulary.  # [n] int64"""
        long = np.flatnonzero(lens > 8)
        ids = self.index.find(word_keys(w8, starts, lens, long))
        same = self.lens.take(ids) == lens                   # a short word: same key and length, same bytes
        long = long.take(np.flatnonzero(ids.take(long) >= 0))  # a long one found: compare 8 bytes at a time
        if len(long):
            at, vs, ln = starts.take(long), self.starts.take(ids.take(long)), lens.take(long)
            for c in range((int(ln.max()) + 7) // 8):
                sel = np.flatnonzero(ln > 8 * c)
                same[long[sel]] &= chunk(w8, at[sel], ln[sel], c) == chunk(self.w8, vs[sel], ln[sel], c)
        ids[~same] = -1                                      # (ids -1 read the last word's length: harmless)
        return ids


def word_keys(w8: np.ndarray, starts: np.ndarray, lens: np.ndarray, long: np.ndarray | None = None) -> np.ndarray:
    """A word's key: its bytes if they fit in 8, else its `hash_tokens` hash (`long`: the indices of the
    words longer than 8 bytes, when known).  # [n] uint64"""
    key = chunk(w8, starts, lens, 0)
    if long is None:
        long = np.flatnonzero(lens > 8)
    if len(long):
        key[long] = hash_tokens(w8, starts.take(long), lens.take(long))
    return key


def split_words(text: str, lines: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The words of `text` (`lines` lines joined with LF) as query splits them: a `words8` view of its
    UTF-8 bytes, each word's byte start and length, and the number of words on each line.

    ``split_words("ab c\nd", 2)[1:] -> ([0, 3, 5], [2, 1, 1], [2, 1])``
    """
    buf = np.frombuffer(text.encode("utf-8", "surrogatepass"), dtype=np.uint8)
    sep = np.empty(len(buf) + 2, dtype=bool)             # a separator before and after the text
    sep[0] = sep[-1] = True
    np.less(buf - np.uint8(9), 5, out=sep[1:-1])         # tab, LF, VT, FF, CR (9-13)
    sep[1:-1] |= buf == 32
    edge = np.flatnonzero(sep[1:] != sep[:-1])           # word starts and ends, in turn
    starts, ends = edge[0::2], edge[1::2]
    at_lf = np.searchsorted(starts, np.flatnonzero(buf == 10))     # words before each line end
    return words8(buf), starts, ends - starts, np.diff(at_lf, prepend=0, append=len(starts))


__all__ = ["WordIndex", "split_words", "word_keys"]
