"""Tokenizer files: HF tokenizer.json, vocab.json + merges.txt (GGUF metadata: `nlpkit.bpe.gguf_vocab`).

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

from nlpkit.bpe.pretokenize import Metaspace, PreTokenizer, SplitStep
from nlpkit.bpe.spec import AddedToken, TokenizerSpec
from nlpkit.errors import NlpkitError

MERGES_HEADER = "#version: 0.2"
_BEHAVIORS = {"Isolated": "isolated", "Removed": "removed", "MergedWithPrevious": "merged_with_previous",
              "MergedWithNext": "merged_with_next"}


def _bad(where: str, field: str, what: str) -> NlpkitError:
    return NlpkitError(f"{where}: {field}: {what}")


# ---------------------------------------------------------------------------- reading
def _pretokenizer_from_json(spec: Any, where: str, byte_level_decoder: bool) -> PreTokenizer:
    """HF pre_tokenizer JSON -> PreTokenizer: Split/Digits steps, then one ByteLevel (byte-level BPE)
    or one Metaspace or nothing (SentencePiece-style BPE)."""
    if spec is None:
        if byte_level_decoder:
            raise _bad(where, "pre_tokenizer", "missing; byte-level BPE needs a ByteLevel pre-tokenizer")
        return PreTokenizer(byte_level=False)
    items = spec.get("pretokenizers") if isinstance(spec, dict) and spec.get("type") == "Sequence" else [spec]
    if not isinstance(items, list) or not items:
        raise _bad(where, "pre_tokenizer.pretokenizers", "expected a non-empty list")
    steps: list[SplitStep] = []
    for k, item in enumerate(items):
        field = f"pre_tokenizer.pretokenizers[{k}]" if len(items) > 1 or spec is not item else "pre_tokenizer"
        kind = item.get("type") if isinstance(item, dict) else None
        if kind in ("ByteLevel", "Metaspace") and k != len(items) - 1:
            raise _bad(where, field, f"{kind} must be the last pre-tokenizer")
        if kind == "ByteLevel":
            return PreTokenizer(steps, add_prefix_space=bool(item.get("add_prefix_space", False)),
                                use_regex=bool(item.get("use_regex", True)))
        if kind == "Metaspace":
            scheme = item.get("prepend_scheme")
            if scheme is None:
                scheme = "always" if item.get("add_prefix_space", True) else "never"
            if scheme not in ("always", "first", "never") or not isinstance(item.get("replacement", "\u2581"), str):
                raise _bad(where, field, f"Metaspace prepend_scheme {scheme!r} is not supported")
            return PreTokenizer(steps, byte_level=False, metaspace=Metaspace(
                item.get("replacement", "\u2581"), scheme, bool(item.get("split", True))))
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
                raise _bad(where, f"{field}.behavior",
                           f"{item.get('behavior')!r} (invert={item.get('invert')}) is not supported")
            steps.append(SplitStep(source, behavior))
        else:
            raise _bad(where, field, f"pre-tokenizer type {kind!r} is not supported (Split, Digits, ByteLevel, Metaspace)")
    if byte_level_decoder:
        raise _bad(where, "pre_tokenizer", "no ByteLevel step, but a ByteLevel decoder")
    return PreTokenizer(steps, byte_level=False)


def _replace_args(item: dict, where: str, field: str) -> tuple[str, bool]:
    pat = item.get("pattern")
    if isinstance(pat, dict) and isinstance(pat.get("String"), str):
        return pat["String"], False
    if isinstance(pat, dict) and isinstance(pat.get("Regex"), str):
        return pat["Regex"], True
    raise _bad(where, f"{field}.pattern", "expected {\"String\": ...} or {\"Regex\": ...}")


_SIMPLE_NORMALIZERS = {"NFC": "nfc", "NFD": "nfd", "NFKC": "nfkc", "NFKD": "nfkd", "Lowercase": "lowercase",
                       "StripAccents": "strip_accents"}


def _normalizer_from_json(spec: Any, where: str) -> list[tuple]:
    """HF normalizer JSON -> plain steps (see nlpkit.bpe.normalize)."""
    if spec is None:
        return []
    items = spec.get("normalizers") if isinstance(spec, dict) and spec.get("type") == "Sequence" else [spec]
    if not isinstance(items, list):
        raise _bad(where, "normalizer.normalizers", "expected a list")
    steps: list[tuple] = []
    for k, item in enumerate(items):
        field = f"normalizer.normalizers[{k}]" if spec is not item else "normalizer"
        kind = item.get("type") if isinstance(item, dict) else None
        if kind in _SIMPLE_NORMALIZERS:
            steps.append((_SIMPLE_NORMALIZERS[kind],))
        elif kind == "Prepend" and isinstance(item.get("prepend"), str):
            steps.append(("prepend", item["prepend"]))
        elif kind == "Replace" and isinstance(item.get("content"), str):
            pattern, is_regex = _replace_args(item, where, field)
            steps.append(("replace", pattern, item["content"], is_regex))
        elif kind == "Strip":
            steps.append(("strip", bool(item.get("strip_left", True)), bool(item.get("strip_right", True))))
        elif kind == "Precompiled" and not item.get("precompiled_charsmap"):
            continue  # an empty charsmap changes nothing
        elif kind == "Precompiled" and isinstance(item.get("precompiled_charsmap"), str):
            from nlpkit.bpe.precompiled import from_base64
            try:
                from_base64(item["precompiled_charsmap"])  # parsed now, so a bad blob names the file
            except NlpkitError as e:
                raise _bad(where, f"{field}.precompiled_charsmap", str(e)) from None
            steps.append(("precompiled", item["precompiled_charsmap"]))
        else:
            raise _bad(where, field, f"normalizer {kind!r} is not supported "
                                     f"({', '.join([*_SIMPLE_NORMALIZERS, 'Prepend', 'Replace', 'Strip', 'Precompiled'])})")
    return steps


def _decoder_from_json(spec: Any, where: str) -> list[tuple]:
    """HF decoder JSON -> plain steps (see nlpkit.bpe.decode)."""
    if spec is None:
        return []
    items = spec.get("decoders") if isinstance(spec, dict) and spec.get("type") == "Sequence" else [spec]
    if not isinstance(items, list):
        raise _bad(where, "decoder.decoders", "expected a list")
    steps: list[tuple] = []
    for k, item in enumerate(items):
        field = f"decoder.decoders[{k}]" if spec is not item else "decoder"
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "ByteLevel":
            steps.append(("byte_level",))
        elif kind == "ByteFallback":
            steps.append(("byte_fallback",))
        elif kind == "Fuse":
            steps.append(("fuse",))
        elif kind == "Replace" and isinstance(item.get("content"), str):
            pattern, is_regex = _replace_args(item, where, field)
            if is_regex:
                raise _bad(where, field, "a Replace decoder with a regex is not supported")
            steps.append(("replace", pattern, item["content"]))
        elif kind == "Strip":
            steps.append(("strip", item.get("content", " "), int(item.get("start", 0)), int(item.get("stop", 0))))
        elif kind == "Metaspace":
            scheme = item.get("prepend_scheme") or ("always" if item.get("add_prefix_space", True) else "never")
            steps.append(("metaspace", item.get("replacement", "\u2581"), scheme))
        else:
            raise _bad(where, field, f"decoder {kind!r} is not supported "
                                     "(ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace)")
    return steps


def _merges_from(value: Any, where: str, field: str) -> list[tuple[str, str]]:
    if not isinstance(value, list):
        raise _bad(where, field, "expected a list of merges")
    if all(isinstance(m, str) for m in value):  # 'a b' strings: the fast, common case
        out = [tuple(m.split(" ")) for m in value]
        if all(len(m) == 2 and m[0] and m[1] for m in out):
            return out
    elif all(type(m) is list and len(m) == 2 for m in value):  # [a, b] pairs (newer tokenizer.json files)
        out = [(a, b) for a, b in value]
        if all(type(a) is str and type(b) is str and a and b for a, b in out):
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
        out.append(AddedToken(t["content"], t["id"], bool(t.get("special", False)),
                              bool(t.get("lstrip", False)), bool(t.get("rstrip", False))))
    return out


def _specials_from_post_processor(spec: Any, added: dict[str, int]) -> tuple[int | None, int | None]:
    """The ids a TemplateProcessing post-processor puts before and after a single sequence, if any."""
    if not isinstance(spec, dict):
        return None, None
    procs = spec.get("processors", [spec]) if spec.get("type") == "Sequence" else [spec]
    for p in procs:
        if isinstance(p, dict) and p.get("type") == "TemplateProcessing":
            single = [x for x in p.get("single") or [] if isinstance(x, dict)]
            ends = []
            for item in (single[:1], single[-1:]):
                sp = item[0].get("SpecialToken") if item else None
                ends.append(added.get(sp.get("id")) if isinstance(sp, dict) else None)
            return ends[0], ends[1] if len(single) > 1 else None
    return None, None


#: Model types HF tokenizers has that nlpkit does not read, and what they are.
_OTHER_MODELS = {"Unigram": "SentencePiece Unigram (T5, ALBERT, XLNet...)", "WordPiece": "WordPiece (BERT...)",
                 "WordLevel": "WordLevel"}


def load_tokenizer_json(path: str | Path) -> TokenizerSpec:
    """An HF tokenizer.json with a BPE model (byte-level or SentencePiece-style) -> TokenizerSpec."""
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
    kind = model.get("type", "BPE")
    if kind != "BPE":
        what = _OTHER_MODELS.get(kind, repr(kind))
        raise _bad(where, "model.type", f"{kind!r}: {what} tokenizers are not supported; nlpkit reads BPE models "
                                        "(byte-level, or SentencePiece-style with byte fallback)")
    for key in ("continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(key):
            raise _bad(where, f"model.{key}", "is not supported")
    if model.get("dropout"):
        raise _bad(where, "model.dropout", "BPE dropout is not supported (it makes encoding random)")
    vocab = _vocab_from(model.get("vocab"), where, "model.vocab")
    merges = _merges_from(model.get("merges"), where, "model.merges")
    added = _added_from(data.get("added_tokens"), where)
    normalizer = _normalizer_from_json(data.get("normalizer"), where)
    decoder = _decoder_from_json(data.get("decoder"), where)
    pre = _pretokenizer_from_json(data.get("pre_tokenizer"), where, ("byte_level",) in decoder)
    bos, eos = _specials_from_post_processor(data.get("post_processor"), {t.content: t.id for t in added})
    unk = model.get("unk_token")
    return TokenizerSpec(vocab, merges, added_tokens=added, pretokenizer=pre,
                         ignore_merges=bool(model.get("ignore_merges", False)), bos_id=bos, eos_id=eos,
                         source=where, normalizer=normalizer, decoder=decoder,
                         byte_fallback=bool(model.get("byte_fallback", False)),
                         unk_token=unk if isinstance(unk, str) else None, fuse_unk=bool(model.get("fuse_unk", False)),
                         add_bos=bos is not None, add_eos=eos is not None)


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


def _chat_template(value: Any, where: str) -> str | dict[str, str] | None:
    """tokenizer_config.json chat_template: a string, or a list of {"name", "template"}."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(t, dict) and isinstance(t.get("name"), str)
                                       and isinstance(t.get("template"), str) for t in value):
        return {t["name"]: t["template"] for t in value}
    raise _bad(where, "chat_template", "expected a string or a list of {\"name\": ..., \"template\": ...}")


def _tokenizer_config_ids(directory: Path, spec: TokenizerSpec) -> None:
    """bos/eos and the chat template from tokenizer_config.json (a string or {"content": ...}) and
    chat_template.jinja (which transformers 5 writes beside it, and which wins), when present."""
    jinja = directory / "chat_template.jinja"
    if jinja.is_file():
        try:
            spec.chat_template = jinja.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise NlpkitError(f"cannot read {jinja}: {e}") from None
    cfg_path = directory / "tokenizer_config.json"
    if not cfg_path.is_file():
        return
    try:
        cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return
    if not isinstance(cfg, dict):
        return
    if spec.chat_template is None:
        spec.chat_template = _chat_template(cfg.get("chat_template"), str(cfg_path))
    for key in ("add_bos", "add_eos"):
        if isinstance(cfg.get(key + "_token"), bool):
            setattr(spec, key, cfg[key + "_token"])
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


# ---------------------------------------------------------------------------- writing
_BEHAVIOR_NAMES = {v: k for k, v in _BEHAVIORS.items()}
_NORMALIZER_NAMES = {v: k for k, v in _SIMPLE_NORMALIZERS.items()}


def _pretokenizer_to_json(pre: PreTokenizer) -> dict | None:
    items: list[dict] = []
    for s in pre.steps:
        if s.pattern in (r"\p{N}", r"\p{N}+") and s.behavior == "isolated":
            items.append({"type": "Digits", "individual_digits": s.pattern == r"\p{N}"})
        else:
            items.append({"type": "Split", "pattern": {"Regex": s.pattern},
                          "behavior": _BEHAVIOR_NAMES[s.behavior], "invert": False})
    if pre.byte_level:
        items.append({"type": "ByteLevel", "add_prefix_space": pre.add_prefix_space, "trim_offsets": True,
                      "use_regex": pre.use_regex})
    elif pre.metaspace is not None:
        ms = pre.metaspace
        items.append({"type": "Metaspace", "replacement": ms.replacement, "prepend_scheme": ms.prepend_scheme,
                      "split": ms.split})
    if not items:
        return None
    return items[0] if len(items) == 1 else {"type": "Sequence", "pretokenizers": items}


def _normalizer_to_json(steps: list[tuple]) -> dict | None:
    items = []
    for st in steps:
        if st[0] in _NORMALIZER_NAMES:
            items.append({"type": _NORMALIZER_NAMES[st[0]]})
        elif st[0] == "prepend":
            items.append({"type": "Prepend", "prepend": st[1]})
        elif st[0] == "replace":
            items.append({"type": "Replace", "pattern": {"Regex" if len(st) > 3 and st[3] else "String": st[1]},
                          "content": st[2]})
        elif st[0] == "strip":
            items.append({"type": "Strip", "strip_left": st[1], "strip_right": st[2]})
        elif st[0] == "precompiled":
            items.append({"type": "Precompiled", "precompiled_charsmap": st[1]})
    if not items:
        return None
    return items[0] if len(items) == 1 else {"type": "Sequence", "normalizers": items}


def _decoder_to_json(steps: list[tuple]) -> dict:
    if not steps or ("byte_level",) in steps:
        return {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
    names = {"byte_fallback": "ByteFallback", "fuse": "Fuse"}
    items = []
    for st in steps:
        if st[0] in names:
            items.append({"type": names[st[0]]})
        elif st[0] == "replace":
            items.append({"type": "Replace", "pattern": {"String": st[1]}, "content": st[2]})
        elif st[0] == "strip":
            items.append({"type": "Strip", "content": st[1], "start": st[2], "stop": st[3]})
        elif st[0] == "metaspace":
            items.append({"type": "Metaspace", "replacement": st[1], "prepend_scheme": st[2], "split": True})
    return items[0] if len(items) == 1 else {"type": "Sequence", "decoders": items}


def _post_processor_to_json(tok: TokenizerSpec) -> dict | None:
    id_to_text = {t.id: t.content for t in tok.added_tokens}
    bos = id_to_text.get(tok.bos_id) if tok.add_bos else None
    eos = id_to_text.get(tok.eos_id) if tok.add_eos else None
    if bos is None and eos is None:
        return None
    single = ([{"SpecialToken": {"id": bos, "type_id": 0}}] if bos else []) + \
        [{"Sequence": {"id": "A", "type_id": 0}}] + ([{"SpecialToken": {"id": eos, "type_id": 0}}] if eos else [])
    specials = {t: {"id": t, "ids": [i], "tokens": [t]} for t, i in ((bos, tok.bos_id), (eos, tok.eos_id)) if t}
    return {"type": "TemplateProcessing", "single": single, "pair": single, "special_tokens": specials}


def tokenizer_json(tok: TokenizerSpec) -> dict:
    """The HF tokenizer.json object for `tok` (a BPE with merges: not a GGUF 'llama' vocabulary,
    which merges by token score)."""
    if tok.scores is not None:
        raise NlpkitError("a GGUF 'llama' vocabulary merges by token score and has no merge list: it cannot be "
                          "written as tokenizer.json")
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": t.id, "content": t.content, "single_word": False, "lstrip": t.lstrip,
                          "rstrip": t.rstrip, "normalized": not t.special, "special": t.special}
                         for t in sorted(tok.added_tokens, key=lambda t: t.id)],
        "normalizer": _normalizer_to_json(tok.normalizer),
        "pre_tokenizer": _pretokenizer_to_json(tok.pretokenizer or PreTokenizer.from_pattern("gpt2")),
        "post_processor": _post_processor_to_json(tok),
        "decoder": _decoder_to_json(tok.decoder),
        "model": {"type": "BPE", "dropout": None, "unk_token": tok.unk_token, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": tok.fuse_unk, "byte_fallback": tok.byte_fallback,
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
