"""Regenerate tests/fixtures/tokenizers/: small tokenizers of every supported family, built with the
reference libraries, and the reference's token ids for them.

Tokenizers (each a directory with tokenizer.json, or a .gguf vocabulary):
- hf-spm-legacy/     HF tokenizers BPE, SentencePiece style: byte_fallback, unk (fused), normalizer
                     Sequence[NFKC, Prepend('▁'), Replace(' ', '▁')], no pre-tokenizer, decoder
                     Sequence[Replace('▁', ' '), ByteFallback, Fuse, Strip(' ', 1, 0)], '<s> $A' post-processor.
- hf-spm-metaspace/  the same vocabulary with Metaspace(prepend_scheme='always', split=True) and ignore_merges.
- hf-spm-nmt-cf/     the hf-spm-legacy tokenizer with its NFKC replaced by a `Precompiled` normalizer holding
                     sentencepiece's own compiled `nmt_nfkc_cf` rules (NFKC + case folding), read from a
                     sentencepiece model trained with normalization_rule_name='nmt_nfkc_cf'.
- spm-converted/     a `sentencepiece` BPE model (byte_fallback) converted to tokenizer.json by transformers
                     (LlamaTokenizer.from_pretrained on a directory holding tokenizer.model).
- llama-spm.gguf     the same sentencepiece model as a GGUF `llama` vocabulary written with the `gguf` package.
- bl-llama3/, bl-qwen2/, bl-neox/  byte-level BPE trained by HF tokenizers with each family's pre-tokenizer
                     (Llama 3: its regex + ignore_merges; Qwen2: NFC + its regex; GPT-NeoX: NFC + ByteLevel regex).

expected.json also holds the references of tokenizer.json files kept elsewhere in tests/fixtures (`EXTERNAL`,
e.g. the phi3 family fixture, whose Precompiled normalizer holds sentencepiece's `nmt_nfkc`).

expected.json holds, per tokenizer: per shared-data multilingual file the line count, token count,
SHA-256 of the per-line id lists and the first lines' ids; and `strings`: random Unicode strings
(any plane, out-of-vocabulary characters, spaces, special-token text) with their ids and whether the
reference decodes them back unchanged. References: HF tokenizers for tokenizer.json (encode with
add_special_tokens=False, decode with skip_special_tokens=False); llama.cpp for the GGUF
(llama_cpp.Llama(vocab_only=True).tokenize(add_bos=False, special=True)). Without llama_cpp the GGUF
entry is left as it was.

Run: python tools/make_tokenizer_fixtures.py [--llama-only | --only NAME ...]   (needs tokenizers, sentencepiece, transformers, protobuf,
gguf, and llama_cpp for the GGUF references; reads ../shared/data).
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from conftest import nlpkit_data_dir  # noqa: E402

OUT = REPO / "tests" / "fixtures" / "tokenizers"
#: Reference entries for tokenizer.json files that other fixtures own (name -> directory).
EXTERNAL = {"phi3": REPO / "tests" / "fixtures" / "lm" / "families" / "phi3"}
SPECIALS = ["<unk>", "<s>", "</s>"]
N_STRINGS = 300


def corpus(data: Path) -> dict[str, list[str]]:
    """Every multilingual file, split at '\\n' only (the lines tests encode)."""
    out = {}
    for p in sorted((data / "multilingual").iterdir()):
        out[p.name] = p.read_text(encoding="utf-8").split("\n")
    return out


def training_text(data: Path) -> list[str]:
    """A small, mostly English training text with a little of every script (the rest hits byte fallback)."""
    lines = (data / "tinyshakespeare" / "input.txt").read_text(encoding="utf-8")[:200_000].split("\n")
    for p in sorted((data / "multilingual").iterdir()):
        lines += p.read_text(encoding="utf-8").split("\n")[:60]
    return lines


def random_strings(seed: int = 17) -> list[str]:
    """Random texts: any Unicode scalar, ASCII words, whitespace runs, special-token text, digits."""
    rng = random.Random(seed)
    words = ["the", "The", " and", "hello", "world", "<s>", "</s>", "<unk>", "  ", "\n", "\t", " ", "123",
             "4567", "don't", "I'LL", "▁", "<0x41>", "é", "ß", "日本", "Привет", "😀", "\u200b", "\r\n"]
    out = []
    for _ in range(N_STRINGS):
        parts = []
        for _ in range(rng.randint(0, 8)):
            r = rng.random()
            if r < 0.35:
                parts.append(rng.choice(words))
            elif r < 0.6:
                cp = rng.randint(0, 0x10FFFF)
                while 0xD800 <= cp <= 0xDFFF or cp == 0:
                    cp = rng.randint(1, 0x10FFFF)
                parts.append(chr(cp))
            elif r < 0.8:
                parts.append(chr(rng.randint(0x20, 0x2FF)))
            else:
                parts.append(" " * rng.randint(1, 3))
        out.append("".join(parts))
    return out


def digest(ids: list[list[int]]) -> str:
    return hashlib.sha256(json.dumps(ids, separators=(",", ":")).encode()).hexdigest()


def reference_entry(encode, decode, lines_by_file: dict[str, list[str]], strings: list[str], source: str) -> dict:
    files = {}
    for name, lines in lines_by_file.items():
        ids = [encode(line) for line in lines]
        files[name] = {"lines": len(lines), "tokens": sum(map(len, ids)), "sha256": digest(ids), "first": ids[:3]}
    rows = []
    for s in strings:
        ids = encode(s)
        rows.append({"text": s, "ids": ids, "roundtrip": decode(ids) == s})
    return {"reference": source, "files": files, "strings": rows}


# ------------------------------------------------------------------------------ builders
def train_hf_bpe(lines: list[str], vocab_size: int, pre_tokenizer, normalizer=None, byte_level: bool = False):
    from tokenizers import Tokenizer, models, trainers

    tok = Tokenizer(models.BPE())
    if normalizer is not None:
        tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizer
    kw = {"initial_alphabet": __import__("tokenizers").pre_tokenizers.ByteLevel.alphabet()} if byte_level \
        else {"limit_alphabet": 300}
    tok.train_from_iterator(lines, trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False, **kw))
    data = json.loads(tok.to_str())
    return data["model"]["vocab"], [tuple(m) if isinstance(m, list) else tuple(m.split(" "))
                                    for m in data["model"]["merges"]]


def hf_spm(lines: list[str], variant: str):
    """HF tokenizers' SentencePiece-style BPE: specials, 256 <0x..> byte tokens, trained pieces."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    trained, merges = train_hf_bpe(lines, 900, pre_tokenizers.Metaspace(prepend_scheme="always", split=True),
                                   normalizers.NFKC())
    vocab = {t: i for i, t in enumerate(SPECIALS + [f"<0x{b:02X}>" for b in range(256)])}
    for t, _ in sorted(trained.items(), key=lambda kv: kv[1]):
        vocab.setdefault(t, len(vocab))
    ignore = variant == "metaspace"
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, byte_fallback=True, unk_token="<unk>", fuse_unk=True,
                               ignore_merges=ignore))
    if variant in ("legacy", "nmt-cf"):
        first = normalizers.Precompiled(charsmap("nmt_nfkc_cf")) if variant == "nmt-cf" else normalizers.NFKC()
        tok.normalizer = normalizers.Sequence([first, normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
        tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                         decoders.Strip(" ", 1, 0)])
        tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    else:
        tok.normalizer = normalizers.NFKC()
        tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="always", split=True)
        tok.decoder = decoders.Metaspace(prepend_scheme="always", split=True)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIALS])
    return tok


def charsmap(rule: str) -> bytes:
    """sentencepiece's compiled normalization rules `rule` (the precompiled_charsmap of a model trained with it)."""
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2

    with tempfile.TemporaryDirectory() as tmp:
        text = Path(tmp) / "train.txt"
        text.write_text("\n".join(["a b c d e f g h i j k l m n o p"] * 50), encoding="utf-8")
        spm.SentencePieceTrainer.train(input=str(text), model_prefix=str(Path(tmp) / "n"), model_type="bpe",
                                       vocab_size=30, normalization_rule_name=rule, num_threads=1, minloglevel=2)
        proto = sentencepiece_model_pb2.ModelProto()
        proto.ParseFromString((Path(tmp) / "n.model").read_bytes())
    return proto.normalizer_spec.precompiled_charsmap


def byte_level_family(lines: list[str], family: str):
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

    sys.path.insert(0, str(REPO))
    from nlpkit.bpe.pretokenize import GPT4_PATTERN, QWEN2_PATTERN

    norm = None if family == "llama3" else normalizers.NFC()
    if family == "neox":
        pre = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    else:
        pattern = GPT4_PATTERN if family == "llama3" else QWEN2_PATTERN
        pre = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(pattern), behavior="isolated"),
                                       pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    vocab, merges = train_hf_bpe(lines, 700, pre, norm, byte_level=True)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, ignore_merges=family == "llama3"))
    if norm is not None:
        tok.normalizer = norm
    tok.pre_tokenizer = pre
    tok.decoder = decoders.ByteLevel()
    eot = "<|endoftext|>"
    from tokenizers import AddedToken
    tok.add_special_tokens([AddedToken(eot, special=True, normalized=False)])
    return tok


def sentencepiece_model(lines: list[str], workdir: Path) -> Path:
    import sentencepiece as spm

    text = workdir / "train.txt"
    text.write_text("\n".join(lines), encoding="utf-8")
    spm.SentencePieceTrainer.train(input=str(text), model_prefix=str(workdir / "spm"), model_type="bpe",
                                   vocab_size=1000, byte_fallback=True, character_coverage=0.98, unk_id=0,
                                   bos_id=1, eos_id=2, pad_id=-1, num_threads=1, minloglevel=2)
    return workdir / "spm.model"


def converted(model: Path, workdir: Path):
    from tokenizers import Tokenizer
    from transformers import LlamaTokenizer

    d = workdir / "spmdir"
    d.mkdir()
    shutil.copy(model, d / "tokenizer.model")
    LlamaTokenizer.from_pretrained(str(d)).save_pretrained(str(workdir / "conv"))
    return Tokenizer.from_file(str(workdir / "conv" / "tokenizer.json"))


def write_gguf(model: Path, out: Path) -> None:
    import gguf
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(model))
    tokens, scores, types = [], [], []
    for i in range(sp.get_piece_size()):
        tokens.append(sp.id_to_piece(i))
        scores.append(sp.get_score(i))
        types.append(2 if sp.is_unknown(i) else 3 if sp.is_control(i) else 6 if sp.is_byte(i)
                     else 5 if sp.is_unused(i) else 1)
    w = gguf.GGUFWriter(str(out), "llama")
    w.add_context_length(128)
    w.add_embedding_length(16)
    w.add_block_count(1)
    w.add_feed_forward_length(32)
    w.add_head_count(2)
    w.add_head_count_kv(2)
    w.add_rope_dimension_count(8)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_space_prefix(True)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def llama_cpp_reference(path: Path):
    try:
        import llama_cpp
    except ImportError:
        return None
    llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    encode = lambda s: llm.tokenize(s.encode("utf-8"), add_bos=False, special=True)  # noqa: E731
    decode = lambda ids: llm.detokenize(ids).decode("utf-8", errors="replace")  # noqa: E731
    return encode, decode


def main() -> None:
    import argparse
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-only", action="store_true",
                    help="only (re)compute the llama.cpp references of the existing llama-spm.gguf")
    ap.add_argument("--only", nargs="+", metavar="NAME",
                    help="only (re)build these entries (e.g. hf-spm-nmt-cf phi3), leaving the others as they are")
    args = ap.parse_args()
    data = nlpkit_data_dir()
    if data is None:
        sys.exit("shared data folder not found")
    lines, train = corpus(data), training_text(data)
    strings = random_strings()
    OUT.mkdir(parents=True, exist_ok=True)
    expected_path = OUT / "expected.json"
    expected = json.loads(expected_path.read_text(encoding="utf-8")) if expected_path.is_file() else {}

    def hf_entry(tok):
        return reference_entry(lambda s: tok.encode(s, add_special_tokens=False).ids,
                               lambda ids: tok.decode(ids, skip_special_tokens=False), lines, strings,
                               "HF tokenizers " + __import__("tokenizers").__version__)

    builders = {"hf-spm-legacy": lambda: hf_spm(train, "legacy"), "hf-spm-metaspace": lambda: hf_spm(train, "metaspace"),
                "hf-spm-nmt-cf": lambda: hf_spm(train, "nmt-cf"),
                **{f"bl-{f}": (lambda f=f: byte_level_family(train, f)) for f in ("llama3", "qwen2", "neox")}}
    wanted = set(args.only) if args.only else set(builders) | set(EXTERNAL) | {"spm-converted", "llama-spm.gguf"}
    if args.llama_only:
        wanted = {"llama-spm.gguf"}
    hf = {name: build() for name, build in builders.items() if name in wanted}
    if "spm-converted" in wanted:
        with tempfile.TemporaryDirectory() as tmp:
            model = sentencepiece_model(train, Path(tmp))
            hf["spm-converted"] = converted(model, Path(tmp))
            write_gguf(model, OUT / "llama-spm.gguf")
    for name, tok in hf.items():
        (OUT / name).mkdir(exist_ok=True)
        tok.save(str(OUT / name / "tokenizer.json"))
        expected[name] = hf_entry(tok)
        print(name, tok.get_vocab_size(), sum(f["tokens"] for f in expected[name]["files"].values()))
    from tokenizers import Tokenizer
    for name, d in EXTERNAL.items():
        if name in wanted:
            expected[name] = hf_entry(Tokenizer.from_file(str(d / "tokenizer.json")))
            print(name, sum(f["tokens"] for f in expected[name]["files"].values()))
    ref = llama_cpp_reference(OUT / "llama-spm.gguf") if "llama-spm.gguf" in wanted else None
    if ref is not None:
        import llama_cpp
        expected["llama-spm.gguf"] = reference_entry(*ref, lines, strings, "llama.cpp (llama_cpp_python "
                                                     f"{llama_cpp.__version__})")
        print("llama-spm.gguf", sum(f["tokens"] for f in expected["llama-spm.gguf"]["files"].values()))
    else:
        print("llama-spm.gguf references left as they were (not asked for, or llama_cpp not importable)")
    expected_path.write_text(json.dumps(expected, ensure_ascii=False, indent=None, separators=(",", ":")) + "\n",
                             encoding="utf-8")


if __name__ == "__main__":
    main()
