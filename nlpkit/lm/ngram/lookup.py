"""Word ids for a batch of lines with numpy: the words of query, found in a hash table of the vocabulary.

KenLM's ``query`` splits a line on six ASCII bytes (space, tab, LF, CR, VT, FF). Those bytes never
occur inside a multi-byte UTF-8 character, so the batch's text is split on its UTF-8 bytes in one
numpy pass; every word is hashed eight bytes at a time (`hashing.hash_tokens`), looked up in a
`HashIndex` of the vocabulary's hashes, and a hit is then compared byte for byte with the word it
found: a hash collision can never give a wrong id. A Python dict lookup per word costs about
200 ns (a fresh string hashes itself first); this costs a few numpy passes over the batch.

Text is encoded with ``surrogatepass`` on both sides (the vocabulary and the lines), so a line read
with ``--encoding-errors surrogateescape`` still finds its words.
"""

from __future__ import annotations

import numpy as np

from nlpkit.lm.ngram.hashing import HashIndex, all_distinct, chunk, hash_tokens, words8

SEPARATORS = b" \t\n\r\x0b\x0c"                # query's word separators


class WordIndex:
    """The vocabulary's UTF-8 bytes in one pool, and a hash table over them.

    ``WordIndex(["a", "bc"]).find(*split_words("bc x a")[:3]) -> [1, -1, 0]``
    """

    def __init__(self, vocab: list[str]) -> None:
        encoded = [w.encode("utf-8", "surrogatepass") for w in vocab]
        self.lens = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
        self.starts = np.cumsum(self.lens) - self.lens
        self.w8 = words8(np.frombuffer(b"".join(encoded), dtype=np.uint8))
        self.head = chunk(self.w8, self.starts, self.lens, 0)
        hashes = hash_tokens(self.w8, self.starts, self.lens, self.head)
        self.index = HashIndex(hashes, load=0.125) if all_distinct(hashes) else None   # None: a shared hash

    def find(self, w8: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
        """The id of each word (bytes starts[i]:starts[i] + lens[i] of `w8`'s buffer), -1 if not in the
        vocabulary.  # [n] int64"""
        head = chunk(w8, starts, lens, 0)                                 # the first 8 bytes
        ids = self.index.find(hash_tokens(w8, starts, lens, head))
        hit = np.flatnonzero(ids >= 0)
        cand = ids.take(hit)
        n = lens.take(hit)
        same = self.lens.take(cand) == n
        same &= self.head.take(cand) == head.take(hit)
        for c in range(1, (int(n.max()) + 7) // 8 if len(n) else 0):    # longer words: 8 bytes at a time
            sel = np.flatnonzero(same & (n > 8 * c))
            same[sel] = chunk(w8, starts[hit[sel]], n[sel], c) == chunk(self.w8, self.starts[cand[sel]], n[sel], c)
        ids[hit[~same]] = -1
        return ids


def split_words(text: str, lines: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The words of `text` (`lines` lines joined with LF) as query splits them: a `words8` view of its
    UTF-8 bytes, each word's byte start and length, and the number of words on each line.

    ``split_words("ab c\nd", 2)[1:] -> ([0, 3, 5], [2, 1, 1], [2, 1])``
    """
    buf = np.frombuffer(text.encode("utf-8", "surrogatepass"), dtype=np.uint8)
    sep = (buf - np.uint8(9)) < 5                        # tab, LF, VT, FF, CR (9-13)
    sep |= buf == 32
    sep = sep.view(np.int8)
    edge = np.flatnonzero(np.diff(sep, prepend=np.int8(1), append=np.int8(1)))   # word starts and ends, in turn
    starts, ends = edge[0::2], edge[1::2]
    at_lf = np.searchsorted(starts, np.flatnonzero(buf == 10))     # words before each line end
    return words8(buf), starts, ends - starts, np.diff(at_lf, prepend=0, append=len(starts))


__all__ = ["SEPARATORS", "WordIndex", "split_words"]
