"""SentencePiece's precompiled character map (the ``Precompiled`` normalizer of HF tokenizers).

A sentencepiece model carries its normalization rules (``nmt_nfkc``, ``nmt_nfkc_cf``, ...) compiled into one
blob, ``precompiled_charsmap``: a little-endian u32 giving the size in bytes of a Darts-clone double-array
trie, the trie's u32 units, then the replacement strings, each ended by a NUL byte. A trie key is the UTF-8
of a character sequence; its value is the byte offset of the replacement.

HF tokenizers applies it like this (and so do we): the text is cut into extended grapheme clusters; a cluster
shorter than 6 UTF-8 bytes whose bytes *start with* some key is replaced, whole, by the replacement of the
*shortest* such key (a quirk kept for compatibility: marks after a mapped first character go with it);
otherwise each character is looked up alone and replaced when it starts with a key. Lookups stop at a NUL
byte.

Here the trie is read once into a plain dict (key bytes -> replacement), which is what makes the per-text work
cheap: a text none of whose characters begins a key is returned as it is after one regex search, and the
replacement of every distinct cluster seen is cached.

    >>> import base64
    >>> pm = Precompiled(build_charsmap({"\\uff21": "A", "\\u2460": "1"}))
    >>> pm("\\uff21\\u2460 x")
    'A1 x'
"""

from __future__ import annotations

import base64
import binascii
from functools import lru_cache

import numpy as np
import regex

from nlpkit.errors import NlpkitError

_GRAPHEME = regex.compile(r"\X", regex.DOTALL)
_CACHE_MAX = 1 << 18
_MAX_CLUSTER_BYTES = 6  # clusters of this many UTF-8 bytes or more are looked up character by character


#: Characters that can join the character before or after them into one grapheme cluster (UAX #29 rules
#: GB3-GB9c, GB12-13). A text with none of them is all one-character clusters.
_JOINERS = regex.compile(r"[\r\p{Grapheme_Cluster_Break=Extend}\p{Grapheme_Cluster_Break=ZWJ}"
                         r"\p{Grapheme_Cluster_Break=SpacingMark}\p{Grapheme_Cluster_Break=Prepend}"
                         r"\p{Grapheme_Cluster_Break=L}\p{Grapheme_Cluster_Break=V}\p{Grapheme_Cluster_Break=T}"
                         r"\p{Grapheme_Cluster_Break=Regional_Indicator}]")


#: Marks that the `regex` module (a newer Unicode) joins to the character before them but HF tokenizers'
#: grapheme segmentation (an older Unicode, where they are unassigned) does not: HF looks them up on their
#: own. Found by asking tokenizers 0.23 (nmt_nfkc_cf fixture): "A" + mark normalizes to "a" + mark, not "a".
_UNJOINED_MARKS = regex.compile("[\U000005c8-\U000005c9\U00000b53-\U00000b54\U00001ade-\U00001adf\U00001aec-\U00001af0\U00010ecb-\U00010ecf\U00010ef0-\U00010ef9\U00011df0\U0001d127-\U0001d128\U0001d250-\U0001d252\U0001d25b-\U0001d25c\U0001d25f\U0001d280-\U0001d281]")


def _clusters(text: str) -> list[str]:
    """Grapheme clusters as HF's segmentation cuts them (`_UNJOINED_MARKS` stand alone)."""
    parts = _GRAPHEME.findall(text)
    if not _UNJOINED_MARKS.search(text):
        return parts
    out: list[str] = []
    for part in parts:
        if len(part) == 1 or not _UNJOINED_MARKS.search(part):
            out.append(part)
            continue
        for piece in regex.split(f"({_UNJOINED_MARKS.pattern})", part):    # the marks kept, each alone
            if piece:
                out.extend([piece] if _UNJOINED_MARKS.fullmatch(piece) else _GRAPHEME.findall(piece))
    return out


def _offset(u):
    return (u >> 10) << ((u & (1 << 9)) >> 6)


def _label(u):
    return u & ((1 << 31) | 0xFF)


def short_keys(units: np.ndarray, depth: int = 4) -> dict[bytes, int]:
    """Every key of at most `depth` bytes of a Darts-clone double array -> its value, walked breadth-first
    (one numpy step per byte: a node's children are the labels c whose unit at base ^ c carries label c)."""
    units = units.astype(np.int64)
    n = len(units)
    out: dict[bytes, int] = {}
    if n == 0:
        return out
    labels = np.arange(1, 256, dtype=np.int64)
    nodes = _offset(units[:1])
    prefixes = [b""]
    for _ in range(depth):
        if not len(nodes):
            break
        pos = nodes[:, None] ^ labels[None, :]
        ok = pos < n
        unit = np.where(ok, units[np.minimum(pos, n - 1)], -1)
        parent, col = np.nonzero(ok & (_label(unit) == labels[None, :]))
        child_unit = unit[parent, col]
        child = pos[parent, col] ^ _offset(child_unit)
        keep = child < n
        parent, col, child_unit, child = parent[keep], col[keep], child_unit[keep], child[keep]
        keys = [prefixes[p] + bytes((c + 1,)) for p, c in zip(parent.tolist(), col.tolist())]
        leaf = ((child_unit >> 8) & 1).astype(bool)
        for k, f, v in zip(keys, leaf.tolist(), (units[child] & ((1 << 31) - 1)).tolist()):
            if f:
                out[k] = v
        nodes, prefixes = child, keys
    return out


def build_charsmap(mapping: dict[str, str]) -> bytes:
    """A charsmap blob for `mapping` (for tests and examples): a tiny double array built by first fit."""
    strings = bytearray()
    values = {}
    for key, rep in sorted(mapping.items()):
        values[key.encode("utf-8")] = len(strings)
        strings += rep.encode("utf-8") + b"\0"
    array: dict[int, int] = {}

    def children_of(prefix: bytes) -> list[int]:
        return sorted({k[len(prefix)] for k in values if len(k) > len(prefix) and k.startswith(prefix)})

    def place(prefix: bytes, node: int) -> None:
        labels = ([0] if prefix in values else []) + children_of(prefix)
        base = 1
        while any((base ^ c) in array or (base ^ c) == 0 for c in labels):
            base += 1
        # the unit at `node` holds the offset to its children (offset < 2**21, no extension bit)
        array[node] = (array.get(node, 0) & ~(((1 << 21) - 1) << 10)) | (base ^ node) << 10
        for c in labels:
            pos = base ^ c
            if c == 0:
                array[pos] = (1 << 31) | values[prefix]
            else:
                array[pos] = c
        if prefix in values:
            array[node] |= 1 << 8
        for c in labels:
            if c:
                place(prefix + bytes((c,)), base ^ c)

    array[0] = 0
    place(b"", 0)
    units = np.zeros(max(array) + 1, dtype="<u4")
    for k, v in array.items():
        units[k] = v
    return len(units.tobytes()).to_bytes(4, "little") + units.tobytes() + bytes(strings)


class _Cache(dict):
    """Grapheme cluster -> its replacement, filled on first sight."""

    def __init__(self, fn) -> None:
        super().__init__()
        self.fn = fn

    def __missing__(self, cluster: str) -> str:
        if len(self) >= _CACHE_MAX:
            self.clear()
        out = self[cluster] = self.fn(cluster)
        return out


class Precompiled:
    """The normalizer of a precompiled charsmap: callable on a string."""

    def __init__(self, blob: bytes) -> None:
        if len(blob) < 4:
            raise NlpkitError("precompiled_charsmap: too short to hold a trie size")
        size = int.from_bytes(blob[:4], "little")
        if size % 4 or size < 4 or 4 + size > len(blob):
            raise NlpkitError(f"precompiled_charsmap: trie size {size} does not fit the {len(blob)}-byte blob")
        units = np.frombuffer(blob, dtype="<u4", count=size // 4, offset=4)
        self._units = units.tolist()
        self._strings = blob[4 + size:]
        self._replacements: dict[int, str] = {}
        # One-character keys give a str.translate table, enough for texts of one-character clusters.
        single: dict[int, str] = {}
        self._whole_chars = True
        for key, value in short_keys(units).items():
            try:
                ch = key.decode("utf-8")
            except UnicodeDecodeError:
                ch = ""
            if len(ch) == 1:
                single[ord(ch)] = self._replacement(value)
            if not ch:  # a key that ends inside a character: every text takes the cluster path
                self._whole_chars = False
        self._single = single
        # ASCII text needs work only where it holds an ASCII key (or a CR: CR LF is one cluster)
        ascii_keys = sorted({c for c in single if c < 128} | {ord("\r")}) if self._whole_chars else None
        self._ascii_keys = regex.compile("[" + "".join(regex.escape(chr(c)) for c in ascii_keys) + "]") \
            if ascii_keys is not None else None
        self._cache = _Cache(self._cluster)

    def _replacement(self, value: int) -> str:
        rep = self._replacements.get(value)
        if rep is None:
            strings = self._strings
            if value > len(strings):
                raise NlpkitError(f"precompiled_charsmap: replacement offset {value} is past the end of the strings")
            end = strings.find(b"\0", value)
            try:
                rep = strings[value:end if end >= 0 else len(strings)].decode("utf-8")
            except UnicodeDecodeError as e:
                raise NlpkitError(f"precompiled_charsmap: replacement at offset {value} is not UTF-8 ({e})") from None
            self._replacements[value] = rep
        return rep

    def transform(self, chunk: str) -> str | None:
        """The replacement of the shortest key that `chunk`'s UTF-8 starts with (up to a NUL), or None."""
        units = self._units
        n = len(units)
        pos = _offset(units[0])
        for c in chunk.encode("utf-8"):
            if c == 0:
                return None
            pos ^= c
            if pos >= n:
                return None
            unit = units[pos]
            if _label(unit) != c:
                return None
            pos ^= _offset(unit)
            if unit >> 8 & 1:
                if pos >= n:
                    return None
                return self._replacement(units[pos] & ((1 << 31) - 1))
        return None

    def _cluster(self, cluster: str) -> str:
        if len(cluster.encode("utf-8")) < _MAX_CLUSTER_BYTES:
            rep = self.transform(cluster)
            if rep is not None:
                return rep
        if len(cluster) == 1:
            return cluster
        out = []
        for c in cluster:
            rep = self.transform(c)
            out.append(c if rep is None else rep)
        return "".join(out)

    def __call__(self, text: str) -> str:
        if self._ascii_keys is not None and text.isascii() and not self._ascii_keys.search(text):
            return text  # the usual case: ASCII without controls
        if self._whole_chars and not _JOINERS.search(text):
            return text.translate(self._single) if self._single else text
        return "".join(map(self._cache.__getitem__, _clusters(text)))


@lru_cache(maxsize=8)
def from_base64(charsmap: str) -> Precompiled:
    """The normalizer for a tokenizer.json's base64 ``precompiled_charsmap`` (parsed once per process)."""
    try:
        blob = base64.b64decode(charsmap, validate=True)
    except (binascii.Error, ValueError) as e:
        raise NlpkitError(f"precompiled_charsmap is not valid base64 ({e})") from None
    return Precompiled(blob)
