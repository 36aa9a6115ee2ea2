"""Regenerate tests/fixtures/lm/quant/: GGUF files quantized by llama.cpp's own quantizer, and their references.

`--weights native` expands K-quant blocks (Q4_K, Q5_K, Q6_K) in numpy; the unit tests feed it random valid
blocks, this fixture feeds it what llama.cpp writes. A tiny random Llama (width 256, the K-quants' block
length, so every matrix can take them; untied output; 2 layers) is saved by transformers, converted to an F32
GGUF by llama.cpp's convert_hf_to_gguf.py and quantized by `llama-quantize` to each type below (llama.cpp's
mixes: Q4_K_M and Q5_K_M keep some tensors in Q6_K, as published files do). Per file, `reference.json` holds:

- `dequantized`: per tensor, its GGML type and the sha256 of the float32 rows that **ggml's own C
  dequantization** (`ggml_get_type_traits(type)->to_float`, called through ctypes on the built libggml-base)
  gives: nlpkit's expansion must equal it bit for bit;
- `sequences` and `logits.<type>.npy`: transformers' float32 logits for the GGUF (`gguf_file=`: gguf-py
  dequantizes it), the 1e-4 reference for the model's forward.

    python tools/make_quant_fixtures.py --llama-cpp DIR     # DIR: llama.cpp source tree with build/bin/

Needs torch, transformers, tokenizers and llama.cpp built with shared libraries (`cmake -B build
-DBUILD_SHARED_LIBS=ON && cmake --build build --target llama-quantize`); none of them is an nlpkit dependency.
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_lm_fixtures import convert_to_gguf, family_tokenizer, randomize  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "tests" / "fixtures" / "lm" / "quant"
TYPES = ["Q4_K_M", "Q5_K_M", "Q6_K", "Q4_0", "Q5_1"]
CONFIG = dict(vocab_size=300, hidden_size=256, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-5, rope_theta=10000.0,
              bos_token_id=1, eos_token_id=2, tie_word_embeddings=False)
SEED = 20261128


class GGML:
    """ggml's dequantization, from the built shared library."""

    class Traits(ctypes.Structure):
        _fields_ = [("type_name", ctypes.c_char_p), ("blck_size", ctypes.c_int64),
                    ("blck_size_interleave", ctypes.c_int64), ("type_size", ctypes.c_size_t),
                    ("is_quantized", ctypes.c_bool), ("to_float", ctypes.c_void_p), ("from_float_ref", ctypes.c_void_p)]

    def __init__(self, lib: Path):
        self.lib = ctypes.CDLL(str(lib))
        self.lib.ggml_get_type_traits.restype = ctypes.POINTER(self.Traits)
        self.lib.ggml_get_type_traits.argtypes = [ctypes.c_int]

    def to_float(self, type_id: int, raw: np.ndarray, n: int) -> np.ndarray:  # stored bytes -> [n] float32
        traits = self.lib.ggml_get_type_traits(type_id).contents
        if not traits.to_float:  # F32
            return np.frombuffer(raw.tobytes(), np.float32).copy()
        fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(traits.to_float)
        src = np.ascontiguousarray(raw)
        out = np.empty(n, np.float32)
        fn(src.ctypes.data, out.ctypes.data, n)
        return out


def build_hf(d: Path):
    from transformers import LlamaConfig, LlamaForCausalLM
    model = LlamaForCausalLM(LlamaConfig(**CONFIG)).eval()
    randomize(model, SEED)
    model.save_pretrained(d, safe_serialization=True)
    (d / "generation_config.json").unlink(missing_ok=True)
    return family_tokenizer("quant", "bpe", d)  # the families' byte-level BPE (make_lm_fixtures)


def dequantized(path: Path, ggml: GGML) -> dict:
    """Per tensor: type and sha256 of ggml's float32 expansion."""
    import gguf
    out = {}
    for t in gguf.GGUFReader(path).tensors:
        n = int(np.prod([int(x) for x in t.shape]))
        rows = ggml.to_float(int(t.tensor_type), np.asarray(t.data).view(np.uint8), n)
        out[t.name] = {"type": t.tensor_type.name, "shape": [int(x) for x in t.shape],
                       "sha256": hashlib.sha256(rows.tobytes()).hexdigest()}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llama-cpp", type=Path, required=True, help="llama.cpp source tree, built in build/")
    args = ap.parse_args()
    from transformers import AutoModelForCausalLM
    bin_dir = args.llama_cpp / "build" / "bin"
    ggml = GGML(bin_dir / "libggml-base.so")
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    seqs = np.random.default_rng(SEED).integers(3, CONFIG["vocab_size"], size=(2, 24)).tolist()
    ref = {"sequences": seqs, "llama_cpp": args.llama_cpp.name, "files": {}}
    with tempfile.TemporaryDirectory() as tmp:
        hf = Path(tmp) / "hf"
        tok = build_hf(hf)
        convert_to_gguf(hf, args.llama_cpp, tok)  # -> hf/model.gguf, F32
        for qtype in TYPES:
            name = f"model-{qtype}.gguf"
            subprocess.run([str(bin_dir / "llama-quantize"), str(hf / "model.gguf"), str(OUT / name), qtype],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            model = AutoModelForCausalLM.from_pretrained(OUT, gguf_file=name, dtype=torch.float32).eval()
            with torch.no_grad():
                logits = model(torch.tensor(seqs)).logits.float().numpy()
            np.save(OUT / f"logits-{qtype}.npy", logits.astype(np.float32))
            tensors = dequantized(OUT / name, ggml)
            ref["files"][name] = {"type": qtype, "tensors": tensors}
            kinds = sorted({v["type"] for v in tensors.values()})
            print(f"{name}: {(OUT / name).stat().st_size / 1024:.0f} KB, types {kinds}, logits std {logits.std():.2f}")
    (OUT / "reference.json").write_text(json.dumps(ref, indent=1) + "\n")


if __name__ == "__main__":
    main()
