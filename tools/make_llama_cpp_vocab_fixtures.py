"""Write tests/fixtures/tokenizers/llama_cpp_add_special.json: llama.cpp's ids, special tokens added (BOS/EOS
as each vocabulary's `add_bos_token`/`add_eos_token` key says, else llama-vocab.cpp's default for its type),
for a few texts with every test vocabulary of llama.cpp's source tree that nlpkit reads.

llama.cpp's own test vectors (models/ggml-vocab-*.gguf.inp/.out) are tokenized without special tokens, so they
say nothing about BOS; this fixture does. The vocabularies themselves (several MB each) are not copied: the test
reads them from $LLAMA_CPP_DIR and skips without it.

Needs a built llama.cpp ($LLAMA_CPP_DIR, default /work/build/llama.cpp, with build/bin/llama-tokenize).
Run: python tools/make_llama_cpp_vocab_fixtures.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "fixtures" / "tokenizers" / "llama_cpp_add_special.json"
LLAMA_CPP = Path(os.environ.get("LLAMA_CPP_DIR", "/work/build/llama.cpp"))
#: the test vocabularies nlpkit reads (tests/bpe/test_tokenizer_families.py: LLAMA_CPP_VOCABS)
VOCABS = ["llama-spm", "phi-3", "llama-bpe", "qwen2", "gpt-2", "starcoder", "command-r", "refact", "mpt"]
TEXTS = ["Hello", "Hello world", " two  spaces"]


def llama_tokenize(vocab: Path, text: str) -> list[int]:
    """llama-tokenize's ids of `text` (special tokens added, special text parsed: its defaults)."""
    res = subprocess.run([str(LLAMA_CPP / "build" / "bin" / "llama-tokenize"), "-m", str(vocab), "-p", text, "--ids",
                          "--log-disable"], capture_output=True, text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    if not (LLAMA_CPP / "build" / "bin" / "llama-tokenize").exists():
        sys.exit(f"no build/bin/llama-tokenize under {LLAMA_CPP}: build llama.cpp or set LLAMA_CPP_DIR")
    out = {name: {text: llama_tokenize(LLAMA_CPP / "models" / f"ggml-vocab-{name}.gguf", text) for text in TEXTS}
           for name in VOCABS}
    OUT.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
