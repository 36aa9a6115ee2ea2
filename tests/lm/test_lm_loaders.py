"""Loaders: a GGUF round trip of a fixture model, and every kind of bad model file as a clear NlpkitError."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

from nlpkit.errors import NlpkitError
from nlpkit.lm.transformer.loaders import load_model
from nlpkit.lm.transformer.loaders.safetensors import SafetensorsFile

LM = Path(__file__).resolve().parents[1] / "fixtures" / "lm"


def hf_permute(w: np.ndarray, n_heads: int) -> np.ndarray:
    """convert_hf_to_gguf.py's Q/K permutation (HF rotate-half rows -> llama.cpp interleaved rows)."""
    return w.reshape(n_heads, 2, w.shape[0] // n_heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_gguf(path: Path, model, arch: str = "llama", embed_rows: int | None = None) -> None:
    """Write a fixture model as an F32 GGUF the way llama.cpp's converter lays it out."""
    import gguf
    c, w = model.config, model.weights
    wr = gguf.GGUFWriter(str(path), arch)
    wr.add_block_count(c.n_layers)
    wr.add_context_length(c.max_seq_len)
    wr.add_embedding_length(c.dim)
    wr.add_feed_forward_length(c.hidden_dim)
    wr.add_head_count(c.n_heads)
    wr.add_head_count_kv(c.n_kv_heads)
    wr.add_rope_freq_base(c.rope_theta)
    wr.add_layer_norm_rms_eps(c.norm_eps)
    wr.add_vocab_size(c.vocab_size)
    wr.add_rope_dimension_count(c.head_dim)
    nh, nkv, hd = c.n_heads, c.n_kv_heads, c.head_dim
    for i, L in enumerate(w.layers):
        q, k, v = np.split(L.wqkv.T, [nh * hd, (nh + nkv) * hd])  # nlpkit keeps [in, out]; GGUF rows are [out, in]
        h = L.w_gate_up.shape[1] // 2
        for name, arr in [("attn_norm", L.attn_norm), ("attn_q", hf_permute(q, nh)), ("attn_k", hf_permute(k, nkv)),
                          ("attn_v", v), ("attn_output", L.wo.T), ("ffn_norm", L.mlp_norm),
                          ("ffn_gate", L.w_gate_up.T[:h]), ("ffn_up", L.w_gate_up.T[h:]), ("ffn_down", L.w_down.T)]:
            wr.add_tensor(f"blk.{i}.{name}.weight", np.ascontiguousarray(arr))
    embed = w.lm_head.T  # tied: the embedding is the transposed output projection
    wr.add_tensor("token_embd.weight", np.ascontiguousarray(embed[:embed_rows] if embed_rows else embed))
    wr.add_tensor("output_norm.weight", w.norm_g)
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()


def test_gguf_round_trip_undoes_qk_permutation(tmp_path):
    hf = load_model(LM / "llama-gqa")
    write_gguf(tmp_path / "m.gguf", hf)
    g = load_model(tmp_path / "m.gguf")
    toks = np.array(json.loads((LM / "llama-gqa" / "reference.json").read_text())["sequences"])
    np.testing.assert_allclose(g.forward(toks), np.load(LM / "llama-gqa" / "logits.npy"), atol=1e-4)
    assert g.config.n_kv_heads == 2 and g.config.tie_embeddings


def test_gguf_of_unsupported_architecture_names_it(tmp_path):
    write_gguf(tmp_path / "f.gguf", load_model(LM / "llama-gqa"), arch="falcon")
    with pytest.raises(NlpkitError, match="unsupported GGUF architecture 'falcon'"):
        load_model(tmp_path / "f.gguf")


def test_gguf_with_shapes_that_contradict_metadata(tmp_path):
    write_gguf(tmp_path / "bad.gguf", load_model(LM / "llama-gqa"), embed_rows=100)
    with pytest.raises(NlpkitError, match="token_embd.weight has shape"):
        load_model(tmp_path / "bad.gguf")


def test_truncated_gguf_is_rejected(tmp_path):
    write_gguf(tmp_path / "m.gguf", load_model(LM / "llama-gqa"))
    data = (tmp_path / "m.gguf").read_bytes()
    (tmp_path / "t.gguf").write_bytes(data[: len(data) // 2])
    with pytest.raises(NlpkitError, match="t.gguf"):
        load_model(tmp_path / "t.gguf")


def test_gguf_header_with_absurd_counts(tmp_path):
    p = tmp_path / "huge.gguf"
    p.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 1 << 40, 5) + b"\0" * 64)
    with pytest.raises(NlpkitError, match="impossible"):
        load_model(p)


def copy_fixture(tmp_path, name="llama-gqa") -> Path:
    d = tmp_path / name
    shutil.copytree(LM / name, d)
    return d


def test_missing_model_path():
    with pytest.raises(NlpkitError, match="does not exist"):
        load_model("/nonexistent/model")


def test_directory_without_config(tmp_path):
    with pytest.raises(NlpkitError, match="no config.json"):
        load_model(tmp_path)


def test_unsupported_architecture_is_named(tmp_path):
    d = copy_fixture(tmp_path)
    cfg = json.loads((d / "config.json").read_text())
    cfg["model_type"], cfg["architectures"] = "bert", ["BertForMaskedLM"]
    (d / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(NlpkitError, match="unsupported architecture 'bert'"):
        load_model(d)


def test_truncated_safetensors(tmp_path):
    d = copy_fixture(tmp_path)
    data = (d / "model.safetensors").read_bytes()
    (d / "model.safetensors").write_bytes(data[:-1000])
    with pytest.raises(NlpkitError, match="past the end"):
        load_model(d)


def test_safetensors_header_length_past_end(tmp_path):
    p = tmp_path / "x.safetensors"
    p.write_bytes(struct.pack("<Q", 10 ** 12) + b"{}")
    with pytest.raises(NlpkitError, match="header length"):
        SafetensorsFile(p)


def test_safetensors_offsets_that_lie_about_shape(tmp_path):
    header = json.dumps({"w": {"dtype": "F32", "shape": [100000, 100000], "data_offsets": [0, 16]}}).encode()
    p = tmp_path / "y.safetensors"
    p.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 16)
    with pytest.raises(NlpkitError, match="needs 40000000000 bytes"):
        SafetensorsFile(p)


def test_shape_that_contradicts_config(tmp_path):
    d = copy_fixture(tmp_path)
    cfg = json.loads((d / "config.json").read_text())
    cfg["intermediate_size"] = 64
    (d / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(NlpkitError, match="the config implies"):
        load_model(d)


def test_impossible_config_values(tmp_path):
    d = copy_fixture(tmp_path)
    cfg = json.loads((d / "config.json").read_text())
    cfg["num_key_value_heads"] = 3
    (d / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(NlpkitError, match="not a multiple"):
        load_model(d)


def test_pickle_checkpoints_are_refused(tmp_path):
    (tmp_path / "model.bin").write_bytes(b"\x80\x04junk")
    with pytest.raises(NlpkitError, match="execute arbitrary code"):
        load_model(tmp_path / "model.bin")
    d = tmp_path / "pt"
    d.mkdir()
    (d / "config.json").write_text((LM / "llama-gqa" / "config.json").read_text())
    (d / "pytorch_model.bin").write_bytes(b"\x80\x04junk")
    with pytest.raises(NlpkitError, match="refuses pickle"):
        load_model(d)


def test_not_a_model_file(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(NlpkitError, match="not a GGUF file"):
        load_model(tmp_path / "notes.txt")


def test_bf16_and_f16_weights_load_as_float32():
    for name in ("gpt2", "llama-untied"):
        m = load_model(LM / name)
        assert m.weights.lm_head.dtype == np.float32


def test_default_model_from_environment(monkeypatch):
    monkeypatch.setenv("NLPKIT_MODEL", str(LM / "gpt2"))
    assert load_model(None).config.arch == "gpt2"
