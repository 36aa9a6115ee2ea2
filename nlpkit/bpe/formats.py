"""Tokenizer files: HF tokenizer.json, vocab.json + merges.txt, and GGUF tokenizer metadata.

Readers return a plain `TokenizerSpec` (nlpkit.bpe.spec) and writers take one; this module
never builds a `Tokenizer` (``Tokenizer.from_spec`` does), so the two do not import each other.

Readers check every field they use and raise NlpkitError naming it
(``tokenizer.json: model.vocab: expected an object of token -> id``); writers produce what
HF ``tokenizers`` writes, so ``tokenizers.Tokenizer.from_file`` loads it and encodes the same.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import regex

from nlpkit.bpe.pretokenize import PreTokenizer, SplitStep
from nlpkit.bpe.spec import AddedToken, TokenizerSpec
from nlpkit.errors import NlpkitError

MERGES_HEADER = "#version: 0.2"
_BEHAVIORS = {"Isolated": "isolated", "Removed": "removed"}


def _bad(where: str, field: str, what: str) -> NlpkitError:
    return NlpkitError(f"{where}: {field}: {what}")


# ---------------------------------------------------------------------------- reading
def _pretokenizer_from_json(spec: Any, where: str) -> PreTokenizer:
    """HF pre_tokenizer JSON -> PreTokenizer: Split/Digits steps, then one ByteLevel."""
    if spec is None:
        raise _bad(where, "pre_tokenizer", "missing; nlpkit reads byte-level BPE, which needs a ByteLevel pre-tokenizer")
    items = spec.get("pretokenizers") if isinstance(spec, dict) and spec.get("type") == "Sequence" else [spec]
    if not isinstance(items, list) or not items:
        raise _bad(where, "pre_tokenizer.pretokenizers", "expected a non-empty list")
    steps: list[SplitStep] = []
    for k, item in enumerate(items):
        field = f"pre_tokenizer.pretokenizers[{k}]" if len(items) > 1 or spec is not item else "pre_tokenizer"
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "ByteLevel":
            if k != len(items) - 1:
                raise _bad(where, field, "ByteLevel must be the last pre-tokenizer")
            return PreTokenizer(steps, add_prefix_space=bool(item.get("add_prefix_space", False)),
                                use_regex=bool(item.get("use_regex", True)))
        if kind == "Digits":
            steps.append(SplitStep(r"\p{N}" if item.get("individual_digits") else r"\p{N}+"))
        elif kind == "Split":
            pat = item.get("pattern")
            if isinstance(pat, dict) and isinstance(pat.get("Regex"), str):
                source = pat["Regex"]
            elif isinstance(pat, dict) and isinstance(pat.get("String"), str):
                source = regex.escape(pat["String"])
            else:
                raise _bad(where, f"{field}.pattern", "expected {\"Regex\": ...} or {\"String\": ...}")
            behavior = _BEHAVIORS.get(item.get("behavior"))
            if behavior is None or item.get("invert"):
                raise _bad(where, f"{field}.behavior", f"{item.get('behavior')!r} (invert={item.get('invert')}) is not supported")
            steps.append(SplitStep(source, behavior))
        else:
            raise _bad(where, field, f"pre-tokenizer type {kind!r} is not supported (Split, Digits, ByteLevel)")
    raise _bad(where, "pre_tokenizer", "no ByteLevel step; nlpkit reads byte-level BPE only")


def _merges_from(value: Any, where: str, field: str) -> list[tuple[str, str]]:
    if not isinstance(value, list):
        raise _bad(where, field, "expected a list of merges")
    if all(isinstance(m, str) for m in value):  # 'a b' strings: the fast, common case
        out = [tuple(m.split(" ")) for m in value]
        if all(len(m) == 2 and m[0] and m[1] for m in out):
            return out
    out = []
    for k, m in enumerate(value):
        if isinstance(m, str):
            parts = m.split(" ")
        elif isinstance(m, (list, tuple)):
            parts = list(m)
        else:
            parts = None
        if not parts or len(parts) != 2 or not all(isinstance(p, str) and p for p in parts):
            raise _bad(where, f"{field}[{k}]", f"expected 'a b' or [a, b], got {m!r}")
        out.append((parts[0], parts[1]))
    return out


def _vocab_from(value: Any, where: str, field: str) -> dict[str, int]:
    if not isinstance(value, dict) or not all(isinstance(v, int) and v >= 0 for v in value.values()):
        raise _bad(where, field, "expected an object of token -> non-negative integer id")
    return dict(value)


def _added_from(value: Any, where: str) -> list[AddedToken]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _bad(where, "added_tokens", "expected a list")
    out = []
    for k, t in enumerate(value):
        if not isinstance(t, dict) or not isinstance(t.get("content"), str) or not isinstance(t.get("id"), int):
            raise _bad(where, f"added_tokens[{k}]", "expected {\"id\": int, \"content\": str, ...}")
        out.append(AddedToken(t["content"], t["id"], bool(t.get("special", False))))
    return out


def _bos_from_post_processor(spec: Any, added: dict[str, int]) -> int | None:
    """The id a TemplateProcessing post-processor puts before a single sequence, if any."""
    if not isinstance(spec, dict):
        return None
    procs = spec.get("processors", [spec]) if spec.get("type") == "Sequence" else [spec]
    for p in procs:
        if isinstance(p, dict) and p.get("type") == "TemplateProcessing":
            single = p.get("single") or []
            if single and isinstance(single[0], dict) and "SpecialToken" in single[0]:
                return added.get(single[0]["SpecialToken"].get("id"))
    return None


def load_tokenizer_json(path: str | Path) -> TokenizerSpec:
    """An HF tokenizer.json with a byte-level BPE model -> TokenizerSpec."""
    path = Path(path)
    where = str(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise NlpkitError(f"cannot read {where}: {e.strerror or e}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise NlpkitError(f"{where}: not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise _bad(where, "(top level)", "expected a JSON object")
    model = data.get("model")
    if not isinstance(model, dict):
        raise _bad(where, "model", "missing or not an object")
    if model.get("type", "BPE") != "BPE":
        raise _bad(where, "model.type", f"{model.get('type')!r} is not supported (BPE only)")
    for key in ("continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(key):
            raise _bad(where, f"model.{key}", "is not supported for byte-level BPE")
    if data.get("normalizer") is not None:
        raise _bad(where, "normalizer", f"{data['normalizer'].get('type') if isinstance(data['normalizer'], dict) else data['normalizer']!r} is not supported (byte-level BPE has none)")
    vocab = _vocab_from(model.get("vocab"), where, "model.vocab")
    merges = _merges_from(model.get("merges"), where, "model.merges")
    added = _added_from(data.get("added_tokens"), where)
    pre = _pretokenizer_from_json(data.get("pre_tokenizer"), where)
    bos = _bos_from_post_processor(data.get("post_processor"), {t.content: t.id for t in added})
    return TokenizerSpec(vocab, merges, added_tokens=added, pretokenizer=pre,
                         ignore_merges=bool(model.get("ignore_merges", False)), bos_id=bos, source=where)


def load_vocab_merges(vocab_path: str | Path, merges_path: str | Path, **kw) -> TokenizerSpec:
    """vocab.json + merges.txt (GPT-2 style, '#version' header optional) -> TokenizerSpec."""
    try:
        vocab = _vocab_from(json.loads(Path(vocab_path).read_text(encoding="utf-8")), str(vocab_path), "(top level)")
        lines = Path(merges_path).read_text(encoding="utf-8").split("\n")
    except OSError as e:
        raise NlpkitError(f"cannot read {e.filename}: {e.strerror}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise NlpkitError(f"{vocab_path}: not valid JSON: {e}") from None
    merges = []
    for k, line in enumerate(lines, 1):
        if not line or (k == 1 and line.startswith("#version")):
            continue
        parts = line.split(" ")
        if len(parts) != 2 or not all(parts):
            raise _bad(str(merges_path), f"line {k}", f"expected 'a b', got {line!r}")
        merges.append((parts[0], parts[1]))
    return from_vocab_merges(vocab, merges, source=str(merges_path), **kw)


def _tokenizer_config_ids(directory: Path, spec: TokenizerSpec) -> None:
    """bos/eos from tokenizer_config.json (a string or {"content": ...}), when present."""
    cfg_path = directory / "tokenizer_config.json"
    if not cfg_path.is_file():
        return
    try:
        cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return
    for key, attr in (("bos_token", "bos_id"), ("eos_token", "eos_id")):
        value = cfg.get(key)
        if isinstance(value, dict):
            value = value.get("content")
        if isinstance(value, str) and spec.token_id(value) is not None:
            setattr(spec, attr, spec.token_id(value))


def load_dir(directory: str | Path) -> TokenizerSpec:
    """A tokenizer directory: tokenizer.json, else vocab.json + merges.txt."""
    d = Path(directory)
    if (d / "tokenizer.json").is_file():
        spec = load_tokenizer_json(d / "tokenizer.json")
    elif (d / "vocab.json").is_file() and (d / "merges.txt").is_file():
        spec = load_vocab_merges(d / "vocab.json", d / "merges.txt")
    else:
        raise NlpkitError(f"{d}: no tokenizer.json, nor vocab.json + merges.txt")
    _tokenizer_config_ids(d, spec)
    return spec


def from_vocab_merges(vocab: Mapping[str, int] | Sequence[str], merges: Sequence[tuple[str, str] | str], *,
                      special_tokens: Mapping[str, int] | Iterable[str] = (), pattern: str | None = "gpt2",
                      pretokenizer: PreTokenizer | None = None, add_prefix_space: bool = False,
                      **kw) -> TokenizerSpec:
    """TokenizerSpec from in-memory vocab/merges. Special tokens already in the vocab keep their id;
    new ones get the next free ids."""
    if not isinstance(vocab, Mapping):
        vocab = {t: i for i, t in enumerate(vocab)}
    vocab = dict(vocab)
    pairs = _merges_from(list(merges), "merges", "merges")
    specials = dict(special_tokens) if isinstance(special_tokens, Mapping) else {s: None for s in special_tokens}
    added, next_id = [], max(vocab.values(), default=-1) + 1
    for content, i in specials.items():
        if i is None:
            i = vocab.get(content)
            if i is None:
                i, next_id = next_id, next_id + 1
        added.append(AddedToken(content, i, True))
    if pretokenizer is None:
        pretokenizer = PreTokenizer.from_pattern(pattern, add_prefix_space)
    return TokenizerSpec(vocab, pairs, added_tokens=added, pretokenizer=pretokenizer, **kw)


#: llama.cpp `tokenizer.ggml.pre` names -> the pre-tokenizer its vocabulary was trained with.
_DIGITS_GPT2 = ("digits", False)
#: llama.cpp `tokenizer.ggml.pre` names -> (pre-tokenizer, ignore_merges), after llama.cpp's
#: llama-vocab.cpp: "digits" = each \p{N} alone then the GPT-2 regex; "gpt4" = the Llama 3 split.
GGUF_PRE: dict[str, tuple[str, bool]] = {
    **{name: ("gpt2", False) for name in ("default", "gpt-2", "mpt", "olmo", "jais")},
    **{name: _DIGITS_GPT2 for name in ("smollm", "starcoder", "refact", "command-r", "codeshell",
                                       "exaone", "minerva-7b")},
    **{name: ("gpt4", True) for name in ("llama3", "llama-v3", "llama-bpe")},
}


def from_gguf_metadata(tokens: Sequence[str], merges: Sequence[str], *, pre: str | None = None,
                       token_types: Sequence[int] | None = None, bos_id: int | None = None,
                       eos_id: int | None = None) -> TokenizerSpec:
    """TokenizerSpec from GGUF metadata (tokenizer.ggml.tokens / merges / token_type / pre);
    tokens of type 3 (control) become special tokens, as llama.cpp and transformers treat them."""
    pre_name = pre or "default"
    if pre_name not in GGUF_PRE:
        raise NlpkitError(f"GGUF tokenizer.ggml.pre {pre_name!r} is not supported ({', '.join(sorted(GGUF_PRE))})")
    kind, ignore_merges = GGUF_PRE[pre_name]
    pretok = PreTokenizer.from_pattern("smollm" if kind == "digits" else kind)
    specials = {t: i for i, (t, ty) in enumerate(zip(tokens, token_types or ())) if ty == 3}
    vocab = {t: i for i, t in enumerate(tokens)}
    return from_vocab_merges(vocab, list(merges), special_tokens=specials, pretokenizer=pretok,
                             ignore_merges=ignore_merges, bos_id=bos_id, eos_id=eos_id, source="GGUF")


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


def load_gguf_tokenizer(path: str | Path) -> TokenizerSpec:
    """The tokenizer stored in a GGUF file's metadata (byte-level 'gpt2' model only)."""
    meta = read_gguf_metadata(path, "tokenizer.")
    model = meta.get("tokenizer.ggml.model")
    if model != "gpt2":
        raise NlpkitError(f"{path}: tokenizer.ggml.model {model!r} is not byte-level BPE ('gpt2')")
    for key in ("tokenizer.ggml.tokens", "tokenizer.ggml.merges"):
        if not isinstance(meta.get(key), list):
            raise NlpkitError(f"{path}: {key} is missing")
    return from_gguf_metadata(meta["tokenizer.ggml.tokens"], meta["tokenizer.ggml.merges"],
                              pre=meta.get("tokenizer.ggml.pre"), token_types=meta.get("tokenizer.ggml.token_type"),
                              bos_id=meta.get("tokenizer.ggml.bos_token_id"),
                              eos_id=meta.get("tokenizer.ggml.eos_token_id"))


# ---------------------------------------------------------------------------- writing
def _pretokenizer_to_json(pre: PreTokenizer) -> dict:
    items: list[dict] = []
    for s in pre.steps:
        if s.pattern in (r"\p{N}", r"\p{N}+") and s.behavior == "isolated":
            items.append({"type": "Digits", "individual_digits": s.pattern == r"\p{N}"})
        else:
            items.append({"type": "Split", "pattern": {"Regex": s.pattern},
                          "behavior": s.behavior.capitalize(), "invert": False})
    items.append({"type": "ByteLevel", "add_prefix_space": pre.add_prefix_space, "trim_offsets": True,
                  "use_regex": pre.use_regex})
    return items[0] if len(items) == 1 else {"type": "Sequence", "pretokenizers": items}


def tokenizer_json(tok: TokenizerSpec) -> dict:
    """The HF tokenizer.json object for `tok`."""
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": t.id, "content": t.content, "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": not t.special, "special": t.special}
                         for t in sorted(tok.added_tokens, key=lambda t: t.id)],
        "normalizer": None,
        "pre_tokenizer": _pretokenizer_to_json(tok.pretokenizer or PreTokenizer.from_pattern("gpt2")),
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": tok.ignore_merges,
                  "vocab": dict(sorted(tok.vocab.items(), key=lambda kv: kv[1])),
                  "merges": [list(m) for m in tok.merges]},
    }


def save_dir(tok: TokenizerSpec, directory: str | Path) -> None:
    """tokenizer.json + vocab.json + merges.txt (with the '#version: 0.2' header)."""
    d = Path(directory)
    try:
        d.mkdir(parents=True, exist_ok=True)
        (d / "tokenizer.json").write_text(json.dumps(tokenizer_json(tok), ensure_ascii=False, indent=2) + "\n",
                                          encoding="utf-8")
        vocab = dict(sorted(tok.vocab.items(), key=lambda kv: kv[1]))
        (d / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False) + "\n", encoding="utf-8")
        (d / "merges.txt").write_text("\n".join([MERGES_HEADER, *(f"{a} {b}" for a, b in tok.merges)]) + "\n",
                                      encoding="utf-8")
    except OSError as e:
        raise NlpkitError(f"cannot write to {d}: {e.strerror or e}") from None
