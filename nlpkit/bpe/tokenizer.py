"""Byte-level BPE tokenizer: encode text to ids and decode ids back, exactly as HF tokenizers.

Encoding is: split out added/special tokens -> pre-tokenize (regex) -> re-spell each piece
in the byte alphabet -> apply merges, lowest rank first (leftmost on ties), as HF's
``Word::merge_all`` does -> ids. Each distinct piece is encoded once and cached.

    >>> tok = Tokenizer.from_file("tokenizer.json")
    >>> tok.decode(tok.encode("héllo wörld")) == "héllo wörld"
    True
"""

from __future__ import annotations

import heapq
from itertools import chain
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import regex

from nlpkit.bpe.formats import from_vocab_merges, load_dir, load_gguf_tokenizer, load_tokenizer_json, save_dir
from nlpkit.bpe.pretokenize import BYTE_DECODER, PreTokenizer, byte_level
from nlpkit.bpe.spec import AddedToken, TokenizerSpec
from nlpkit.errors import NlpkitError

_SHIFT = 32  # pair (a, b) -> a << 32 | b: one int key, ordered like the tuple
_CACHE_MAX = 200_000


_TO_LATIN1 = {ord(c): b for c, b in BYTE_DECODER.items()}
_DROP_ALPHABET = {ord(c): None for c in BYTE_DECODER}


def token_to_bytes(token: str) -> bytes:
    """Raw bytes a token stands for: byte-level spelling decoded ('Ġhi' -> b' hi'), or the
    UTF-8 of the token itself when it uses characters outside the byte alphabet (as HF's decoder)."""
    if token.translate(_DROP_ALPHABET):
        return token.encode("utf-8")
    return token.translate(_TO_LATIN1).encode("latin-1")


class Tokenizer:
    """Byte-level BPE: a vocabulary (byte-level token strings -> ids), ranked merges, added tokens.

    Build one with ``Tokenizer.from_file`` (tokenizer.json), ``from_dir``, ``from_vocab_merges``
    or ``nlpkit.bpe.trainer.train_bpe``.
    """

    def __init__(self, vocab: Mapping[str, int], merges: Sequence[tuple[str, str]], *,
                 added_tokens: Iterable[AddedToken] = (), pretokenizer: PreTokenizer | None = None,
                 ignore_merges: bool = False, bos_id: int | None = None, eos_id: int | None = None) -> None:
        self.vocab: dict[str, int] = dict(vocab)
        self.merges: list[tuple[str, str]] = [tuple(m) for m in merges]
        self.added_tokens: list[AddedToken] = list(added_tokens)
        self.pretokenizer = pretokenizer if pretokenizer is not None else PreTokenizer.from_pattern("gpt2")
        self.ignore_merges = ignore_merges
        self.bos_id = bos_id
        self.eos_id = eos_id
        self._build()

    def _build(self) -> None:
        """Derive id -> token, token bytes, merge ranks and the added-token splitter."""
        size = max([*self.vocab.values(), *(t.id for t in self.added_tokens), -1]) + 1
        self._id_to_token: list[str | None] = [None] * size
        for tok, i in self.vocab.items():
            self._id_to_token[i] = tok
        for t in self.added_tokens:
            self._id_to_token[t.id] = t.content
        self._bytes = [token_to_bytes(t) if t is not None else None for t in self._id_to_token]
        self._ranks: dict[int, tuple[int, int]] = {}
        vocab = self.vocab
        for rank, (a, b) in enumerate(self.merges):
            try:
                ia, ib, new = vocab[a], vocab[b], vocab[a + b]
            except KeyError as e:
                raise NlpkitError(f"merges[{rank}] ({a!r} {b!r}): token {e.args[0]!r} is not in the vocabulary") from None
            self._ranks[ia << _SHIFT | ib] = (rank, new)  # a later duplicate wins, as in HF
        self.special_tokens: dict[str, int] = {t.content: t.id for t in self.added_tokens if t.special}
        self._added_re = self._splitter(self.added_tokens)
        self._plain_re = self._splitter([t for t in self.added_tokens if not t.special])
        self._added_ids = {t.content: t.id for t in self.added_tokens}
        self._char_ids = {c: i for c, i in vocab.items() if len(c) == 1}
        self._cache: dict[str, list[int]] = {}
        pre = self.pretokenizer
        plain = not pre.steps and pre.use_regex and not pre.add_prefix_space
        self._split = pre._gpt2.compiled.findall if plain else pre.split  # skip the wrapper when we can

    @staticmethod
    def _splitter(tokens: list[AddedToken]) -> regex.Pattern | None:
        """Regex matching any of `tokens`, longest first (HF matches leftmost-longest)."""
        if not tokens:
            return None
        alts = sorted({t.content for t in tokens}, key=lambda s: (-len(s), s))
        return regex.compile("|".join(regex.escape(a) for a in alts))

    # ------------------------------------------------------------------ properties
    @property
    def vocab_size(self) -> int:
        """Number of ids (largest id + 1, added tokens included), the model's embedding rows."""
        return len(self._id_to_token)

    def id_to_token(self, i: int) -> str | None:
        """The token string (byte-level spelling) of id `i`, or None for an unused id."""
        return self._id_to_token[i] if 0 <= i < len(self._id_to_token) else None

    def token_to_id(self, token: str) -> int | None:
        """The id of a token string (byte-level spelling, or an added token's content)."""
        return self._added_ids.get(token, self.vocab.get(token))

    def token_bytes(self, i: int) -> bytes:
        """The raw bytes token `i` stands for (b' the' for 'Ġthe')."""
        b = self._bytes[i] if 0 <= i < len(self._bytes) else None
        if b is None:
            raise NlpkitError(f"token id {i} is not in the vocabulary (size {self.vocab_size})")
        return b

    # ------------------------------------------------------------------ encode
    def encode(self, text: str, allowed_special: str | Iterable[str] = "all") -> list[int]:
        """Token ids of `text`. Special tokens in `allowed_special` ("all", "none" or a set of
        strings) are matched whole; others are encoded as plain text. Non-special added
        tokens are always matched whole, as in HF."""
        if allowed_special == "all":
            splitter = self._added_re
        elif allowed_special == "none" or not allowed_special:
            splitter = self._plain_re
        else:
            allowed = set(allowed_special)
            splitter = self._splitter([t for t in self.added_tokens if not t.special or t.content in allowed])
        if splitter is None:
            return self._encode_ordinary(text)
        ids: list[int] = []
        last = 0
        for m in splitter.finditer(text):
            if m.start() > last:
                ids.extend(self._encode_ordinary(text[last:m.start()]))
            ids.append(self._added_ids[m.group()])
            last = m.end()
        if last < len(text):
            ids.extend(self._encode_ordinary(text[last:]))
        return ids

    def _encode_ordinary(self, text: str) -> list[int]:
        """Ids of text without added tokens: pre-tokenize, then BPE each piece (cached)."""
        pieces = self._split(text)
        try:  # all pieces seen before: no Python-level loop at all
            return list(chain.from_iterable(map(self._cache.__getitem__, pieces)))
        except KeyError:
            cache = self._cache
            if len(cache) >= _CACHE_MAX:
                cache.clear()
            for piece in pieces:
                if piece not in cache:
                    cache[piece] = self._bpe(byte_level(piece))
            return list(chain.from_iterable(map(cache.__getitem__, pieces)))

    def _bpe(self, word: str) -> list[int]:
        """Merge the symbols of one byte-level word, lowest merge rank first, leftmost first on
        equal ranks (HF ``Word::merge_all``): 'Ġthe' -> [id('Ġthe')]."""
        if self.ignore_merges and word in self.vocab:
            return [self.vocab[word]]
        chars = self._char_ids
        ids = [chars[c] for c in word if c in chars]  # a byte missing from the vocab is dropped, as HF
        n = len(ids)
        if n < 2:
            return ids
        ranks = self._ranks
        heap = []
        for i in range(n - 1):
            m = ranks.get(ids[i] << _SHIFT | ids[i + 1])
            if m is not None:
                heap.append((m[0], i, m[1]))
        if not heap:
            return ids
        heapq.heapify(heap)
        nxt = list(range(1, n + 1))
        prv = list(range(-1, n - 1))
        alive = [True] * n
        pop, push = heapq.heappop, heapq.heappush
        while heap:
            _, pos, new = pop(heap)
            if not alive[pos]:
                continue
            j = nxt[pos]
            if j >= n:
                continue
            m = ranks.get(ids[pos] << _SHIFT | ids[j])
            if m is None or m[1] != new:  # stale entry
                continue
            ids[pos] = new
            alive[j] = False
            k = nxt[j]
            nxt[pos] = k
            if k < n:
                prv[k] = pos
                m = ranks.get(new << _SHIFT | ids[k])
                if m is not None:
                    push(heap, (m[0], pos, m[1]))
            p = prv[pos]
            if p >= 0:
                m = ranks.get(ids[p] << _SHIFT | new)
                if m is not None:
                    push(heap, (m[0], p, m[1]))
        return [ids[i] for i in range(n) if alive[i]]

    # ------------------------------------------------------------------ decode
    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """Raw bytes of `ids` (may end mid-character: for incremental detokenization)."""
        table = self._bytes
        ids = ids if isinstance(ids, list) else list(ids)
        try:
            if ids and min(ids) < 0:
                raise IndexError
            return b"".join([table[i] for i in ids])
        except (IndexError, TypeError):
            for i in ids:
                self.token_bytes(i)  # raises NlpkitError naming the bad id
            raise

    def decode(self, ids: Iterable[int], skip_special: bool = False) -> str:
        """Text of `ids`; invalid UTF-8 (a partial character) becomes U+FFFD, as HF."""
        if skip_special:
            specials = set(self.special_tokens.values())
            ids = [i for i in ids if i not in specials]
        return self.decode_bytes(ids).decode("utf-8", errors="replace")

    # ------------------------------------------------------------------ files
    @classmethod
    def from_spec(cls, spec: TokenizerSpec) -> "Tokenizer":
        """Build from a file's plain description (what `nlpkit.bpe.formats` readers return)."""
        try:
            return cls(spec.vocab, spec.merges, added_tokens=spec.added_tokens, pretokenizer=spec.pretokenizer,
                       ignore_merges=spec.ignore_merges, bos_id=spec.bos_id, eos_id=spec.eos_id)
        except NlpkitError as e:
            if not spec.source:
                raise
            raise NlpkitError(f"{spec.source}: model.merges: {e}") from None

    def to_spec(self) -> TokenizerSpec:
        """The plain description of this tokenizer (for writing it)."""
        return TokenizerSpec(self.vocab, self.merges, added_tokens=self.added_tokens, pretokenizer=self.pretokenizer,
                             ignore_merges=self.ignore_merges, bos_id=self.bos_id, eos_id=self.eos_id)

    @classmethod
    def from_file(cls, path: str | Path) -> "Tokenizer":
        """Load an HF tokenizer.json (byte-level BPE)."""
        return cls.from_spec(load_tokenizer_json(path))

    @classmethod
    def from_dir(cls, path: str | Path) -> "Tokenizer":
        """Load a directory: tokenizer.json, else vocab.json + merges.txt."""
        return cls.from_spec(load_dir(path))

    @classmethod
    def from_gguf(cls, path: str | Path) -> "Tokenizer":
        """Load the tokenizer stored in a GGUF file's metadata (reads the header only)."""
        return cls.from_spec(load_gguf_tokenizer(path))

    @classmethod
    def from_vocab_merges(cls, vocab: Mapping[str, int] | Sequence[str], merges: Sequence[tuple[str, str] | str],
                          special_tokens: Mapping[str, int] | Iterable[str] = (), pattern: str | None = "gpt2",
                          **kw) -> "Tokenizer":
        """Build from a vocabulary (dict, or list of tokens where the index is the id, as GGUF
        stores it) and merges (pairs, or 'a b' strings); special tokens by name or name -> id."""
        return cls.from_spec(from_vocab_merges(vocab, merges, special_tokens=special_tokens, pattern=pattern, **kw))

    def save(self, directory: str | Path) -> None:
        """Write tokenizer.json, vocab.json and merges.txt into `directory`."""
        save_dir(self.to_spec(), directory)

    def __repr__(self) -> str:
        return (f"Tokenizer(vocab_size={self.vocab_size}, merges={len(self.merges)}, "
                f"pre={self.pretokenizer.name}, specials={list(self.special_tokens)})")
