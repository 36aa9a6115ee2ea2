"""BPE tokenizer: encode text to ids and decode ids back, exactly as HF tokenizers (or llama.cpp).

One mechanism with options, for byte-level BPE (GPT-2, Llama 3, Qwen2, SmolLM) and
SentencePiece-style BPE (Llama 2, Mistral, Phi-3: '▁' word marks, ``<0x..>`` byte fallback):

split out added/special tokens -> normalize each segment (NFC, Prepend/Replace '▁', ...) ->
pre-tokenize (regexes; ByteLevel or Metaspace) -> the model on each piece: its symbols (bytes
re-spelled in the byte alphabet, or characters with byte fallback / unk) merged lowest rank
first (leftmost on ties), as HF's ``Word::merge_all`` -- or, for a GGUF ``llama`` vocabulary,
highest token score first, as llama.cpp -> ids. Each distinct piece is encoded once and cached.

    >>> tok = Tokenizer.from_file("tokenizer.json")
    >>> tok.decode(tok.encode("héllo wörld")) == "héllo wörld"
    True
"""

from __future__ import annotations

import functools
import heapq
from itertools import chain
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import regex

from nlpkit.bpe.decode import Decoder, byte_fallback_value, byte_level_bytes
from nlpkit.bpe.formats import from_vocab_merges, load_dir, load_tokenizer_json, save_dir
from nlpkit.bpe.gguf_vocab import load_gguf_tokenizer
from nlpkit.bpe.normalize import Normalizer
from nlpkit.bpe.pretokenize import DIGITS_GPT2_PATTERN, PreTokenizer, byte_level
from nlpkit.bpe.spec import AddedToken, TokenizerSpec
from nlpkit.errors import NlpkitError

_SHIFT = 32  # pair (a, b) -> a << 32 | b: one int key, ordered like the tuple
_CACHE_MAX = 200_000
_SHORT_WORD = 10  # words of at most this many symbols merge by rescanning (same order as the heap)
_DIGITS_GPT2 = regex.compile(DIGITS_GPT2_PATTERN)

token_to_bytes = byte_level_bytes  # the byte-level spelling's bytes ('Ġhi' -> b' hi'); kept for callers


class _ScorePairs:
    """llama.cpp SentencePiece merging as a pair table: (a, b) -> (-score, id of text(a)+text(b)),
    computed on first use. Ids past the vocabulary stand for characters it lacks."""

    def __init__(self, texts: list[str], vocab: Mapping[str, int], scores: Sequence[float]) -> None:
        self.texts, self.vocab, self.scores = texts, vocab, scores
        self.n_vocab = len(texts)
        self.memo: dict[int, tuple[float, int] | None] = {}

    def get(self, key: int) -> tuple[float, int] | None:
        try:
            return self.memo[key]
        except KeyError:
            texts = self.texts
            a, b = key >> _SHIFT, key & 0xFFFFFFFF
            ta, tb = texts[a], texts[b]
            new = self.vocab.get(ta + tb) if ta is not None and tb is not None else None
            m = None if new is None or new >= len(self.scores) else (-self.scores[new], new)
            if a < self.n_vocab and b < self.n_vocab:  # pseudo-ids are per word: not memoized
                self.memo[key] = m
            return m


class Tokenizer:
    """BPE: a vocabulary (token strings -> ids), ranked merges (or token scores), added tokens,
    and the normalizer / pre-tokenizer / decoder settings of the file it came from.

    Build one with ``Tokenizer.from_file`` (tokenizer.json), ``from_dir``, ``from_gguf``,
    ``from_vocab_merges``, ``from_spec`` or ``nlpkit.bpe.trainer.train_bpe``.
    """

    def __init__(self, vocab: Mapping[str, int], merges: Sequence[tuple[str, str]], *,
                 added_tokens: Iterable[AddedToken] = (), pretokenizer: PreTokenizer | None = None,
                 ignore_merges: bool = False, bos_id: int | None = None, eos_id: int | None = None,
                 normalizer: Sequence[Sequence] = (), decoder: Sequence[Sequence] = (),
                 byte_fallback: bool = False, unk_token: str | None = None, fuse_unk: bool = False,
                 scores: Sequence[float] | None = None, add_bos: bool = False, add_eos: bool = False,
                 chat_template: str | dict[str, str] | None = None) -> None:
        self.vocab: dict[str, int] = dict(vocab)
        self.merges: list[tuple[str, str]] = [tuple(m) for m in merges]
        self.added_tokens: list[AddedToken] = list(added_tokens)
        self.pretokenizer = pretokenizer if pretokenizer is not None else PreTokenizer.from_pattern("gpt2")
        self.ignore_merges = ignore_merges
        self.bos_id = bos_id
        self.eos_id = eos_id
        self.normalizer = Normalizer(normalizer)
        self.decoder = Decoder(decoder if decoder or self.pretokenizer.byte_level else [("fuse",)])
        self.byte_fallback = byte_fallback
        self.unk_token = unk_token
        self.fuse_unk = fuse_unk
        self.scores = list(scores) if scores is not None else None
        self.add_bos = add_bos
        self.add_eos = add_eos
        self.chat_template = chat_template
        self._build()

    def _build(self) -> None:
        """Derive id -> token, token bytes, merge ranks and the added-token splitter."""
        size = max([*self.vocab.values(), *(t.id for t in self.added_tokens), -1]) + 1
        self._id_to_token: list[str | None] = [None] * size
        for tok, i in self.vocab.items():
            self._id_to_token[i] = tok
        for t in self.added_tokens:
            self._id_to_token[t.id] = t.content
        dec = self.decoder
        self.__dict__.pop("_bytes", None)  # made on first use (`_bytes`): a load that only encodes skips it
        self._is_byte = [False] * size
        self._byte_ids: dict[int, int] = {}  # byte value -> id of its <0x..> token
        if not self.pretokenizer.byte_level:
            for tok, i in self.vocab.items():
                b = byte_fallback_value(tok)
                if b is not None:
                    self._byte_ids.setdefault(b, i)
                    self._is_byte[i] = dec.byte_fallback
        vocab = self.vocab
        if self.scores is not None:
            self._ranks = _ScorePairs(list(self._id_to_token), vocab, self.scores)
        else:
            self._ranks = {}
            for rank, (a, b) in enumerate(self.merges):
                try:
                    ia, ib, new = vocab[a], vocab[b], vocab[a + b]
                except KeyError as e:
                    raise NlpkitError(f"merges[{rank}] ({a!r} {b!r}): token {e.args[0]!r} is not in the vocabulary") \
                        from None
                self._ranks[ia << _SHIFT | ib] = (rank, new)  # a later duplicate wins, as in HF
        self.special_tokens: dict[str, int] = {t.content: t.id for t in self.added_tokens if t.special}
        self._added_re = self._splitter(self.added_tokens)
        self._plain_re = self._splitter([t for t in self.added_tokens if not t.special])
        self._added_ids = {t.content: t.id for t in self.added_tokens}
        self._char_ids = {c: i for c, i in vocab.items() if len(c) == 1}
        self._unk_id = vocab.get(self.unk_token) if self.unk_token is not None else None
        if self._unk_id is None and self.unk_token is not None:
            self._unk_id = self._added_ids.get(self.unk_token)
        self._cache: dict[str, list[int]] = {}
        pre = self.pretokenizer
        plain = not pre.steps and pre.use_regex and not pre.add_prefix_space and pre.metaspace is None
        self._split = pre._gpt2.compiled.findall if plain else pre.split  # skip the wrapper when we can
        if (len(pre.steps) == 1 and pre.steps[0].pattern == r"\p{N}" and pre.steps[0].behavior == "isolated"
                and pre.use_regex and not pre.add_prefix_space and pre.metaspace is None):
            self._split = _DIGITS_GPT2.findall  # digits alone then GPT-2's regex, in one pass
        self._piece_ids = self._bpe if pre.byte_level and self.scores is None else self._bpe_chars
        self._word_split = self._word_splitter()

    @functools.cached_property
    def _bytes(self) -> list[bytes | None]:
        """Each id's bytes (None for an unused id), for decoding: SmolLM2's 49,152 took 0.07 s of every load."""
        dec = self.decoder
        added_contents = {t.content for t in self.added_tokens}
        return [None if t is None else t.encode("utf-8") if t in added_contents and not dec.byte_level
                else dec.token_bytes(t) for t in self._id_to_token]

    def _word_splitter(self) -> regex.Pattern | None:
        """SentencePiece-style BPE without a pre-tokenizer treats a whole line as one word. When no token
        has a word mark ('▁') right after another character, no merge can join across the start of a
        '▁' run, so cutting there gives the same ids -- and words short enough to cache."""
        pre = self.pretokenizer
        if pre.byte_level or pre.steps or self.ignore_merges or pre.metaspace is not None and pre.metaspace.split:
            return None
        if pre.metaspace is not None:
            mark = pre.metaspace.replacement
        else:
            marks = [st[2] for st in self.normalizer.steps if st[0] == "replace" and st[1] == " " and len(st[2]) == 1]
            if not marks:
                return None
            mark = marks[-1]
        inside = regex.compile(f"[^{regex.escape(mark)}]{regex.escape(mark)}")
        if mark not in self.vocab or any(inside.search(t) for t in self.vocab):  # (an unk '▁' could fuse across)
            return None
        return regex.compile(f"(?<=[^{regex.escape(mark)}])(?={regex.escape(mark)})")

    def stream_cut(self) -> str | None:
        """Where a long text may be cut into parts that encode (later parts with ``continued=True``)
        to exactly the ids of the whole: "line" (after a newline, before a line starting with a letter
        or digit), "newline" (just before the newline that ends a line, when the next line starts with a
        letter), "space" (before a space that follows an ASCII letter or digit), or None (nowhere known).

        "line" holds for byte-level BPE split by the GPT-4/Llama 3 or Qwen2 regex (and digit splits):
        their whitespace pieces end with the last newline of a run, and no piece runs from a newline
        into a letter or digit. GPT-2's regex gives a whitespace run before a letter all but its last
        character, so a run ending a line splits off its final newline: "newline" cuts there. "space"
        holds for SentencePiece-style BPE whose words start at '▁' runs (Metaspace split, or no merge
        across a run's start): the cut is a word start. All need normalizers that act on characters or
        grapheme clusters alone (a cluster always ends after a newline, or between an ASCII letter and a
        space; not between CR and LF, so "newline" takes no Precompiled step) and added tokens that
        cannot span the cut or eat the whitespace before it."""
        for t in self.added_tokens:
            if t.lstrip or t.rstrip or any(c.isspace() for c in t.content):
                return None
        kinds = {st[0] for st in self.normalizer.steps}
        for st in self.normalizer.steps:
            if st[0] == "replace" and (len(st) > 3 and st[3] or len(st[1]) != 1 or st[1] == "\n"):
                return None
        if not kinds <= {"nfc", "nfd", "nfkc", "nfkd", "lowercase", "strip_accents", "precompiled", "prepend",
                         "replace"}:
            return None
        pre = self.pretokenizer
        if pre.byte_level:
            from nlpkit.bpe.pretokenize import GPT2_PATTERN, GPT4_PATTERN, QWEN2_PATTERN
            if pre.add_prefix_space or any(s.behavior != "isolated" for s in pre.steps):
                return None
            patterns = {s.pattern for s in pre.steps} | ({GPT2_PATTERN} if pre.use_regex else set())
            digits = {r"\p{N}", r"\p{N}+"}
            if not patterns - digits:
                return None  # no word-splitting regex: the whole text is one word
            if patterns <= {GPT4_PATTERN, QWEN2_PATTERN} | digits:
                return "line"
            if patterns <= {GPT2_PATTERN} | digits and "precompiled" not in kinds:
                return "newline"
            return None
        if pre.steps:
            return None
        marks = [st[2] for st in self.normalizer.steps if st[0] == "replace" and st[1] == " "]
        if pre.metaspace is not None and pre.metaspace.split and not marks:
            return "space"
        if self._word_split is not None:
            return "space"
        return None

    @property
    def _normalizer_continued(self) -> Normalizer:
        """The normalizer without its Prepend steps (for a continued part)."""
        norm = self.__dict__.get("_norm_cont")
        if norm is None:
            norm = self.__dict__["_norm_cont"] = Normalizer([s for s in self.normalizer.steps if s[0] != "prepend"])
        return norm

    def _splitter(self, tokens: list[AddedToken]) -> regex.Pattern | None:
        """Regex matching any of `tokens`, longest first (HF matches leftmost-longest); group 1 is
        the token itself when lstrip/rstrip let the match take surrounding whitespace."""
        if not tokens:
            return None
        by_content = {t.content: t for t in tokens}
        alts = []
        for c in sorted(by_content, key=lambda s: (-len(s), s)):
            t = by_content[c]
            alts.append(("\\s*" if t.lstrip else "") + "(" + regex.escape(c) + ")" + ("\\s*" if t.rstrip else ""))
        return regex.compile("(?|" + "|".join(alts) + ")")

    # ------------------------------------------------------------------ properties
    @property
    def vocab_size(self) -> int:
        """Number of ids (largest id + 1, added tokens included), the model's embedding rows."""
        return len(self._id_to_token)

    @property
    def byte_level(self) -> bool:
        """Whether tokens are spelled in the byte-level alphabet (GPT-2 family) rather than SentencePiece-style."""
        return self.pretokenizer.byte_level

    def id_to_token(self, i: int) -> str | None:
        """The token string (byte-level or '▁' spelling) of id `i`, or None for an unused id."""
        return self._id_to_token[i] if 0 <= i < len(self._id_to_token) else None

    def token_to_id(self, token: str) -> int | None:
        """The id of a token string (vocabulary spelling, or an added token's content)."""
        return self._added_ids.get(token, self.vocab.get(token))

    def token_bytes(self, i: int) -> bytes:
        """The raw bytes token `i` stands for (b' the' for 'Ġthe' or '▁the', b'\\n' for '<0x0A>')."""
        b = self._bytes[i] if 0 <= i < len(self._bytes) else None
        if b is None:
            raise NlpkitError(f"token id {i} is not in the vocabulary (size {self.vocab_size})")
        return b

    # ------------------------------------------------------------------ encode
    def encode(self, text: str, allowed_special: str | Iterable[str] = "all", add_special: bool = False,
               continued: bool = False) -> list[int]:
        """Token ids of `text`. Special tokens in `allowed_special` ("all", "none" or a set of
        strings) are matched whole; others are encoded as plain text. Non-special added
        tokens are always matched whole, as in HF. `add_special` adds the BOS/EOS the
        tokenizer's post-processor adds (``add_bos``/``add_eos``). `continued`: `text` is a later
        part of a longer text cut where `stream_cut` allows (no word mark is prepended to it)."""
        if allowed_special == "all":
            splitter = self._added_re
        elif allowed_special == "none" or not allowed_special:
            splitter = self._plain_re
        else:
            allowed = set(allowed_special)
            splitter = self._splitter([t for t in self.added_tokens if not t.special or t.content in allowed])
        if splitter is None:
            ids = self._encode_ordinary(text, True, continued)
        else:
            ids = []
            last = 0
            for m in splitter.finditer(text):
                if m.start() > last:
                    ids.extend(self._encode_ordinary(text[last:m.start()], last == 0, continued and last == 0))
                ids.append(self._added_ids[m.group(1)])
                last = m.end()
            if last < len(text):
                ids.extend(self._encode_ordinary(text[last:], last == 0, continued and last == 0))
        if add_special:
            if self.add_bos and self.bos_id is not None:
                ids.insert(0, self.bos_id)
            if self.add_eos and self.eos_id is not None:
                ids.append(self.eos_id)
        return ids

    def _encode_ordinary(self, text: str, first: bool = True, continued: bool = False) -> list[int]:
        """Ids of text without added tokens: normalize, pre-tokenize, then BPE each piece (cached).
        `first`: the text starts the input (for Metaspace's prepend_scheme "first"); `continued`: it
        goes on from an earlier part (no Prepend, not first)."""
        if continued:
            first = False
            if self.normalizer:
                text = self._normalizer_continued(text)
        elif self.normalizer:
            text = self.normalizer(text)
        pieces = self._split(text, first) if self.pretokenizer.metaspace is not None else self._split(text)
        if self._word_split is not None:
            pieces = [w for piece in pieces for w in self._word_split.split(piece)]
        try:  # all pieces seen before: no Python-level loop at all
            return list(chain.from_iterable(map(self._cache.__getitem__, pieces)))
        except KeyError:
            cache = self._cache
            if len(cache) >= _CACHE_MAX:
                cache.clear()
            for piece in pieces:
                if piece not in cache:
                    cache[piece] = self._piece_ids(piece)
            return list(chain.from_iterable(map(cache.__getitem__, pieces)))

    def _bpe(self, piece: str) -> list[int]:
        """Byte-level BPE of one raw piece: 'Ġthe' -> [id('Ġthe')] (a byte missing from the vocab is dropped, as HF)."""
        word = byte_level(piece)
        if self.ignore_merges and word in self.vocab:
            return [self.vocab[word]]
        chars = self._char_ids
        return self._merge([chars[c] for c in word if c in chars])

    def _bpe_chars(self, word: str) -> list[int]:
        """SentencePiece-style BPE of one piece: characters in the vocabulary, else their UTF-8 bytes
        as <0x..> tokens (byte fallback), else unk (runs fused with fuse_unk) -- HF ``BPE::merge_word``;
        with scores, llama.cpp's ``llm_tokenizer_spm`` (any character becomes a symbol, and one that is
        not a token in the end becomes its bytes)."""
        vocab = self.vocab
        if self.ignore_merges and word in vocab:
            return [vocab[word]]
        chars = self._char_ids
        if self.scores is not None:
            ranks = self._ranks
            ids = []
            for c in word:
                i = chars.get(c)
                if i is None:  # a pseudo-id past the vocabulary, so merges can still find it
                    ranks.texts.append(c)
                    i = len(ranks.texts) - 1
                ids.append(i)
            n_vocab = len(self._id_to_token)
            out = []
            for i in self._merge(ids):
                if i < n_vocab:
                    out.append(i)
                else:
                    out.extend(self._byte_id(b) for b in ranks.texts[i].encode("utf-8"))
            del ranks.texts[n_vocab:]
            return out
        ids: list[int] = []
        unk, fuse, pending = self._unk_id, self.fuse_unk, False
        byte_ids = self._byte_ids if self.byte_fallback else None
        for c in word:
            i = chars.get(c)
            if i is not None:
                if pending:
                    ids.append(unk)
                    pending = False
                ids.append(i)
                continue
            if byte_ids is not None:
                bs = [byte_ids.get(b) for b in c.encode("utf-8")]
                if None not in bs:
                    ids.extend(bs)  # a pending unk is not flushed first (as HF)
                    continue
            if unk is not None:
                if pending and not fuse:
                    ids.append(unk)
                pending = True
        if pending:
            ids.append(unk)
        return self._merge(ids)

    def _byte_id(self, b: int) -> int:
        """llama.cpp ``byte_to_token``: the <0x..> token, else the byte as a one-character token, else unk."""
        i = self._byte_ids.get(b)
        if i is None:
            i = self.vocab.get(chr(b)) if b < 128 else None
        if i is None:
            i = self._unk_id
        if i is None:
            raise NlpkitError(f"byte 0x{b:02X} has no token (no <0x{b:02X}> in the vocabulary and no unk token)")
        return i

    def _merge(self, ids: list[int]) -> list[int]:
        """Merge a word's symbols, best pair first (lowest rank, or highest score), leftmost first on
        ties (HF ``Word::merge_all``; llama.cpp's SentencePiece bigram queue orders the same way)."""
        n = len(ids)
        if n < 2:
            return ids
        get = self._ranks.get
        if n <= _SHORT_WORD:  # a few symbols: rescanning the pairs beats keeping a heap
            while n > 1:
                best, at, a = None, -1, ids[0]
                for i in range(1, n):
                    b = ids[i]
                    m = get(a << _SHIFT | b)
                    if m is not None and (best is None or m[0] < best[0]):
                        best, at = m, i - 1
                    a = b
                if best is None:
                    break
                ids[at:at + 2] = [best[1]]
                n -= 1
            return ids
        heap = []
        for i in range(n - 1):
            m = get(ids[i] << _SHIFT | ids[i + 1])
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
            m = get(ids[pos] << _SHIFT | ids[j])
            if m is None or m[1] != new:  # stale entry
                continue
            ids[pos] = new
            alive[j] = False
            k = nxt[j]
            nxt[pos] = k
            if k < n:
                prv[k] = pos
                m = get(new << _SHIFT | ids[k])
                if m is not None:
                    push(heap, (m[0], pos, m[1]))
            p = prv[pos]
            if p >= 0:
                m = get(ids[p] << _SHIFT | new)
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
        """Text of `ids` through the tokenizer's decoder; invalid UTF-8 (a partial character) becomes
        U+FFFD, as HF. Raises NlpkitError naming an id outside the vocabulary."""
        ids = ids if isinstance(ids, list) else list(ids)
        if skip_special:
            specials = set(self.special_tokens.values())
            ids = [i for i in ids if i not in specials]
        dec = self.decoder
        if dec.byte_level or not dec.byte_fallback:
            return dec.text([self.decode_bytes(ids)], [False])
        self.decode_bytes(ids)  # validates the ids
        table, is_byte = self._bytes, self._is_byte
        return dec.text([table[i] for i in ids], [is_byte[i] for i in ids])

    # ------------------------------------------------------------------ files
    @classmethod
    def from_spec(cls, spec: TokenizerSpec) -> "Tokenizer":
        """Build from a file's plain description (what `nlpkit.bpe.formats` readers return)."""
        try:
            return cls(spec.vocab, spec.merges, added_tokens=spec.added_tokens, pretokenizer=spec.pretokenizer,
                       ignore_merges=spec.ignore_merges, bos_id=spec.bos_id, eos_id=spec.eos_id,
                       normalizer=spec.normalizer, decoder=spec.decoder, byte_fallback=spec.byte_fallback,
                       unk_token=spec.unk_token, fuse_unk=spec.fuse_unk, scores=spec.scores,
                       add_bos=spec.add_bos, add_eos=spec.add_eos, chat_template=spec.chat_template)
        except NlpkitError as e:
            if not spec.source:
                raise
            raise NlpkitError(f"{spec.source}: model.merges: {e}") from None

    def to_spec(self) -> TokenizerSpec:
        """The plain description of this tokenizer (for writing it)."""
        return TokenizerSpec(self.vocab, self.merges, added_tokens=self.added_tokens, pretokenizer=self.pretokenizer,
                             ignore_merges=self.ignore_merges, bos_id=self.bos_id, eos_id=self.eos_id,
                             normalizer=self.normalizer.steps, decoder=self.decoder.steps,
                             byte_fallback=self.byte_fallback, unk_token=self.unk_token, fuse_unk=self.fuse_unk,
                             scores=self.scores, add_bos=self.add_bos, add_eos=self.add_eos,
                             chat_template=self.chat_template)

    @classmethod
    def load(cls, path: str | Path) -> "Tokenizer":
        """Any tokenizer nlpkit reads: a tokenizer.json (with the tokenizer_config.json beside it),
        a directory (bpe-train output or model directory) or a GGUF file."""
        p = Path(path)
        if p.is_dir():
            return cls.from_dir(p)
        if not p.is_file():
            raise NlpkitError(f"{p}: no such tokenizer file or directory")
        try:
            with open(p, "rb") as f:
                magic = f.read(4)
        except OSError as e:
            raise NlpkitError(f"cannot read {p}: {e.strerror or e}") from None
        if magic == b"GGUF":
            return cls.from_gguf(p)
        if p.suffix.lower() == ".gguf":
            raise NlpkitError(f"{p}: not a GGUF file ({'empty' if not magic else 'no GGUF magic bytes'}); expected "
                              "a GGUF model, a tokenizer.json or a directory")
        if p.name == "tokenizer.json":
            return cls.from_dir(p.parent)
        return cls.from_file(p)

    @classmethod
    def from_file(cls, path: str | Path) -> "Tokenizer":
        """Load an HF tokenizer.json (byte-level or SentencePiece-style BPE)."""
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
                f"norm={self.normalizer.name}, pre={self.pretokenizer.name}, specials={list(self.special_tokens)})")
