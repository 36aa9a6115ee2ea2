"""GGUF files quantized by llama.cpp's own `llama-quantize` (tools/make_quant_fixtures.py: Q4_K_M and Q5_K_M
mixes with Q6_K, Q6_K, Q4_0, Q5_1): every tensor nlpkit expands equals ggml's C dequantization bit for bit
(sha256 of the float32 rows), and the model held natively gives its float32 load's logits, which equal
transformers' (gguf_file=) within 1e-4."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from nlpkit.lm.transformer.loaders import load_model
from nlpkit.lm.transformer.quant_blocks import expand_rows
from nlpkit.lm.transformer.stored_weights import is_stored

QUANT = Path(__file__).resolve().parents[1] / "fixtures" / "lm" / "quant"
REF = json.loads((QUANT / "reference.json").read_text())
FILES = sorted(REF["files"])


@pytest.mark.parametrize("name", FILES)
def test_every_tensor_expands_to_ggmls_own_dequantization(name):
    from gguf import GGUFReader

    want = REF["files"][name]["tensors"]
    seen = set()
    for t in GGUFReader(QUANT / name).tensors:
        shape = [int(x) for x in t.shape]  # GGUF order: [in, out] (ne0 first)
        raw = np.asarray(t.data).view(np.uint8).reshape(int(np.prod(shape[1:])), -1)  # [rows, row bytes]
        got = expand_rows(t.tensor_type.name, raw, np.empty((raw.shape[0], shape[0]), np.float32))
        assert hashlib.sha256(got.tobytes()).hexdigest() == want[t.name]["sha256"], (t.name, t.tensor_type.name)
        seen.add(t.tensor_type.name)
    assert seen == {v["type"] for v in want.values()}


def test_the_files_hold_the_k_quant_mixes_llama_cpp_writes():
    types = {name: {v["type"] for v in REF["files"][name]["tensors"].values()} for name in FILES}
    assert types["model-Q4_K_M.gguf"] == {"F32", "Q4_K", "Q6_K"}
    assert types["model-Q5_K_M.gguf"] == {"F32", "Q5_K", "Q6_K"}
    assert types["model-Q6_K.gguf"] == {"F32", "Q6_K"}


@pytest.mark.parametrize("name", FILES)
def test_native_equals_float32_equals_transformers(name):
    qtype = REF["files"][name]["type"]
    seqs = np.array(REF["sequences"])
    native = load_model(QUANT / name, weights="native", use_cache=False)
    f32 = load_model(QUANT / name, weights="float32", use_cache=False)
    assert is_stored(native.weights.layers[0].wqkv) and not is_stored(f32.weights.layers[0].wqkv)
    a, b = f32.forward(seqs), native.forward(seqs)
    assert np.array_equal(a, b)
    np.testing.assert_allclose(b, np.load(QUANT / f"logits-{qtype}.npy"), atol=1e-4, rtol=0)


@pytest.mark.parametrize("name", ["model-Q4_K_M.gguf", "model-Q6_K.gguf"])
def test_kv_cache_decoding_of_native_k_quants_equals_recomputation(name):
    seqs = np.array(REF["sequences"])[:1]
    native = load_model(QUANT / name, weights="native", use_cache=False)
    full = native.forward(seqs)[0]  # [t, V]
    cache = native.new_cache(1, seqs.shape[1])
    steps = [native.forward(seqs[:, :10], cache)[0, -1]]
    steps += [native.forward(seqs[:, t:t + 1], cache)[0, -1] for t in range(10, seqs.shape[1])]
    np.testing.assert_allclose(np.stack(steps), full[9:], atol=1e-5 * np.abs(full).max(), rtol=1e-4)
