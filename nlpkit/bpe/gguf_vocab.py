"""GGUF tokenizer metadata: the vocabulary llama.cpp stores in a model file, as a `TokenizerSpec`.

``tokenizer.ggml.model`` ``gpt2`` is byte-level BPE (tokens + merges + ``tokenizer.ggml.pre``, the
name of the pre-tokenizer regex); ``llama`` is SentencePiece BPE, encoded as llama.cpp does: a
space before each stretch of text (``add_space_prefix``), spaces as '▁', symbols merged by highest
token score, characters left over as ``<0x..>`` byte tokens. Token types (1 normal, 2 unknown,
3 control, 4 user-defined, 6 byte) make control/unknown tokens special and user-defined ones
always matched whole.

    >>> spec = load_gguf_tokenizer("SmolLM2-135M-Instruct.Q4_1.gguf")   # doctest: +SKIP
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from nlpkit.bpe.formats import from_vocab_merges
from nlpkit.bpe.pretokenize import PreTokenizer
from nlpkit.bpe.spec import AddedToken, TokenizerSpec
from nlpkit.errors import NlpkitError

#: llama.cpp `tokenizer.ggml.pre` names -> the pre-tokenizer its vocabulary was trained with.
_DIGITS_GPT2 = ("digits", False)
#: llama.cpp `tokenizer.ggml.pre` names -> (pre-tokenizer, ignore_merges), after llama.cpp's
#: llama-vocab.cpp: "digits" = each \p{N} alone then the GPT-2 regex; "gpt4" = the Llama 3 split.
GGUF_PRE: dict[str, tuple[str, bool]] = {
    **{name: ("gpt2", False) for name in ("default", "gpt-2", "mpt", "olmo", "jais")},
    **{name: _DIGITS_GPT2 for name in ("smollm", "starcoder", "refact", "command-r", "codeshell",
                                       "exaone", "minerva-7b")},
    **{name: ("gpt4", True) for name in ("llama3", "llama-v3", "llama-bpe")},
    **{name: ("qwen2", False) for name in ("qwen2", "deepseek-r1-qwen")},
}
#: `tokenizer.ggml.pre` names of byte-level BPE vocabularies that llama.cpp (llama-vocab.cpp) gives a
#: BOS when the file has no ``tokenizer.ggml.add_bos_token`` key; every other ``gpt2`` vocabulary gets
#: none, and every ``llama`` (SentencePiece) vocabulary gets one.
GGUF_PRE_ADD_BOS = frozenset({"llama3", "llama-v3", "llama-bpe"})
#: tokenizer.ggml.model values llama.cpp knows that nlpkit does not read, and what they are.
OTHER_MODELS = {"bert": "WordPiece", "t5": "SentencePiece Unigram", "rwkv": "RWKV", "plamo2": "PLaMo-2",
                "no_vocab": "no vocabulary"}


def from_gguf_metadata(tokens: Sequence[str], merges: Sequence[str], *, pre: str | None = None,
                       token_types: Sequence[int] | None = None, bos_id: int | None = None,
                       eos_id: int | None = None) -> TokenizerSpec:
    """TokenizerSpec from GGUF metadata (tokenizer.ggml.tokens / merges / token_type / pre);
    tokens of type 3 (control) become special tokens, as llama.cpp and transformers treat them, and
    tokens of type 4 (user-defined) added tokens that are always matched whole."""
    pre_name = pre or "default"
    if pre_name not in GGUF_PRE:
        raise NlpkitError(f"GGUF tokenizer.ggml.pre {pre_name!r} is not supported ({', '.join(sorted(GGUF_PRE))})")
    kind, ignore_merges = GGUF_PRE[pre_name]
    pretok = PreTokenizer.from_pattern("smollm" if kind == "digits" else kind)
    specials = {t: i for i, (t, ty) in enumerate(zip(tokens, token_types or ())) if ty == 3}
    vocab = {t: i for i, t in enumerate(tokens)}
    spec = from_vocab_merges(vocab, list(merges), special_tokens=specials, pretokenizer=pretok,
                             ignore_merges=ignore_merges, bos_id=bos_id, eos_id=eos_id, source="GGUF")
    spec.added_tokens += [AddedToken(t, i, special=False)
                          for i, (t, ty) in enumerate(zip(tokens, token_types or ())) if ty == 4]
    return spec


_GGUF_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


def read_gguf_metadata(path: str | Path, prefix: str = "") -> dict[str, Any]:
    """The key/value metadata of a GGUF file (keys starting with `prefix`), read straight from
    the header without touching tensors: a fraction of a second, where ``GGUFReader`` takes seconds."""
    import mmap
    import struct

    unpack = struct.unpack_from
    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            pos = 0

            def string() -> str:
                nonlocal pos
                (n,) = unpack("<Q", mm, pos)
                pos += 8 + n
                return mm[pos - n:pos].decode("utf-8", errors="replace")

            def value(vtype: int) -> Any:
                nonlocal pos
                if vtype == 8:
                    return string()
                if vtype == 9:
                    itype, count = unpack("<IQ", mm, pos)
                    pos += 12
                    if itype == 8:
                        return [string() for _ in range(count)]
                    if itype in _GGUF_SCALARS:
                        code = _GGUF_SCALARS[itype][1]
                        out = list(unpack(f"<{count}{code}", mm, pos))
                        pos += struct.calcsize(f"<{count}{code}")
                        return out
                    return [value(itype) for _ in range(count)]
                if vtype in _GGUF_SCALARS:
                    fmt = _GGUF_SCALARS[vtype]
                    (v,) = unpack(fmt, mm, pos)
                    pos += struct.calcsize(fmt)
                    return v
                raise NlpkitError(f"{path}: unknown GGUF metadata type {vtype}")

            if mm[:4] != b"GGUF":
                raise NlpkitError(f"{path}: not a GGUF file (bad magic)")
            version, _n_tensors, n_kv = unpack("<IQQ", mm, 4)
            if version < 2:
                raise NlpkitError(f"{path}: GGUF version {version} is not supported")
            pos = 24
            meta: dict[str, Any] = {}
            for _ in range(n_kv):
                key = string()
                (vtype,) = unpack("<I", mm, pos)
                pos += 4
                v = value(vtype)
                if key.startswith(prefix):
                    meta[key] = v
            return meta
    except (struct.error, ValueError) as e:
        raise NlpkitError(f"{path}: truncated or corrupt GGUF header ({e})") from None
    except OSError as e:
        raise NlpkitError(f"cannot read {path}: {e.strerror or e}") from None


def spm_from_gguf_metadata(tokens: Sequence[str], scores: Sequence[float], token_types: Sequence[int] | None, *,
                           add_space_prefix: bool = True, bos_id: int | None = None, eos_id: int | None = None,
                           unk_id: int | None = None, add_bos: bool = True, add_eos: bool = False) -> TokenizerSpec:
    """TokenizerSpec of a GGUF ``llama`` (SentencePiece BPE) vocabulary, encoding as llama.cpp."""
    types = list(token_types) if token_types is not None else [1] * len(tokens)
    vocab = {t: i for i, t in enumerate(tokens)}  # a later duplicate wins, as llama.cpp's token_to_id
    added = [AddedToken(t, i, special=ty in (2, 3)) for i, (t, ty) in enumerate(zip(tokens, types)) if ty in (2, 3, 4)]
    normalizer: list[tuple] = [("prepend", "\u2581")] if add_space_prefix else []
    normalizer.append(("replace", " ", "\u2581", False))
    decoder = [("replace", "\u2581", " "), ("byte_fallback",), ("fuse",)]
    if add_space_prefix:
        decoder.append(("strip", " ", 1, 0))
    unk = tokens[unk_id] if unk_id is not None and 0 <= unk_id < len(tokens) else None
    return TokenizerSpec(vocab, [], added_tokens=added, pretokenizer=PreTokenizer(byte_level=False),
                         bos_id=bos_id, eos_id=eos_id, source="GGUF", normalizer=normalizer, decoder=decoder,
                         byte_fallback=True, unk_token=unk, scores=[float(x) for x in scores],
                         add_bos=add_bos, add_eos=add_eos)


def gguf_adds_bos(meta: dict[str, Any]) -> bool:
    """Whether a GGUF vocabulary prepends BOS: ``tokenizer.ggml.add_bos_token``, else llama.cpp's default for
    its kind (SentencePiece ``llama`` vocabularies do, byte-level ``gpt2`` ones do not)."""
    return bool(meta.get("tokenizer.ggml.add_bos_token", meta.get("tokenizer.ggml.model") == "llama"))


def spec_from_gguf_metadata(meta: dict[str, Any], where: str = "GGUF") -> TokenizerSpec:
    """The tokenizer of GGUF metadata (keys ``tokenizer.*``): ``gpt2`` or ``llama`` model. Without
    ``add_bos_token``/``add_eos_token`` keys, llama.cpp's defaults per vocabulary type: a ``llama``
    vocabulary adds BOS, a ``gpt2`` one only for the pre-tokenizers of `GGUF_PRE_ADD_BOS`; no EOS."""
    model = meta.get("tokenizer.ggml.model")
    if model not in ("gpt2", "llama"):
        what = f" ({OTHER_MODELS[model]})" if model in OTHER_MODELS else ""
        raise NlpkitError(f"{where}: tokenizer.ggml.model {model!r}{what} is not supported; nlpkit reads 'gpt2' "
                          "(byte-level BPE) and 'llama' (SentencePiece BPE) vocabularies")
    keys = ["tokenizer.ggml.tokens", "tokenizer.ggml.merges" if model == "gpt2" else "tokenizer.ggml.scores"]
    for key in keys:
        if not isinstance(meta.get(key), list):
            raise NlpkitError(f"{where}: {key} is missing")
    g = lambda k, d=None: meta.get("tokenizer.ggml." + k, d)  # noqa: E731
    if model == "gpt2":
        spec = from_gguf_metadata(g("tokens"), g("merges"), pre=g("pre"), token_types=g("token_type"),
                                  bos_id=g("bos_token_id"), eos_id=g("eos_token_id"))
        spec.add_bos = bool(g("add_bos_token", g("pre") in GGUF_PRE_ADD_BOS))
        spec.add_eos = bool(g("add_eos_token", False))
    else:
        if len(g("scores")) != len(g("tokens")):
            raise NlpkitError(f"{where}: tokenizer.ggml.scores has {len(g('scores'))} entries for "
                              f"{len(g('tokens'))} tokens")
        spec = spm_from_gguf_metadata(g("tokens"), g("scores"), g("token_type"),
                                      add_space_prefix=bool(g("add_space_prefix", True)), bos_id=g("bos_token_id"),
                                      eos_id=g("eos_token_id"), unk_id=g("unknown_token_id"),
                                      add_bos=bool(g("add_bos_token", True)), add_eos=bool(g("add_eos_token", False)))
    spec.source = where
    template = meta.get("tokenizer.chat_template")
    spec.chat_template = template if isinstance(template, str) else None
    return spec


def load_gguf_tokenizer(path: str | Path) -> TokenizerSpec:
    """The tokenizer stored in a GGUF file's metadata (reads the header only)."""
    return spec_from_gguf_metadata(read_gguf_metadata(path, "tokenizer."), str(path))
