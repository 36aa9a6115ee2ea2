"""The model families (qwen2, qwen3, mistral, gemma 1/2/3, phi3, olmo2, gpt_neox, starcoder2, smollm3) against
transformers:
stored logits, greedy continuations and sliding-window perplexities of tiny random models built by
`tools/make_lm_fixtures.py --families`, read from their Hugging Face directories and from the GGUF files
llama.cpp's convert_hf_to_gguf.py wrote for them; the KV cache against full recomputation; bad input."""

from __future__ import annotations

import ast
import ast
import dataclasses
import json
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nlpkit
from nlpkit.errors import NlpkitError
from nlpkit.lm.transformer import families
from nlpkit.lm.transformer.config import config_from_hf
from nlpkit.lm.generation import generate_ids
from nlpkit.lm.transformer.loaders import load_model
from nlpkit.lm.generation.sampling import SamplingConfig
from nlpkit.lm.perplexity import score_ids

FAM = Path(__file__).resolve().parents[1] / "fixtures" / "lm" / "families"
FAMILIES = ["qwen2", "qwen3", "mistral", "gemma", "gemma2", "gemma3_text", "phi3", "olmo2", "gpt_neox",
            "gpt_neox-serial", "gemma2-qscale", "starcoder2", "smollm3", "smollm3-pattern"]
GGUF = [f for f in FAMILIES if (FAM / f / "model.gguf").is_file()]
_cache: dict = {}


def model(name: str, gguf: bool = False):
    key = (name, gguf)
    if key not in _cache:
        _cache[key] = load_model(FAM / name / "model.gguf" if gguf else FAM / name)
    return _cache[key]


def reference(name: str) -> dict:
    return json.loads((FAM / name / "reference.json").read_text())


@pytest.mark.parametrize("name", FAMILIES)
def test_logits_match_transformers_to_1e4(name):
    seqs = np.array(reference(name)["sequences"])
    expected = np.load(FAM / name / "logits.npy")
    got = model(name).forward(seqs)
    assert got.dtype == np.float32 and got.shape == expected.shape
    np.testing.assert_allclose(got, expected, atol=1e-4, rtol=0)
    assert model(name).config.family == name.split("-")[0]


@pytest.mark.parametrize("name", GGUF)
def test_gguf_logits_match_transformers_to_1e4(name):
    """The GGUF llama.cpp's converter wrote, read with llama.cpp's metadata and tensor layout. llama.cpp has no
    sliding window for Mistral (its converter writes none): the Mistral GGUF is checked within the window."""
    seqs = np.array(reference(name)["sequences"])
    expected = np.load(FAM / name / "logits.npy")
    if name in ("mistral", "starcoder2"):
        w = reference(name)["window"]
        seqs, expected = seqs[:, :w], expected[:, :w]
    got = model(name, gguf=True).forward(seqs)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, atol=1e-4, rtol=0)


def test_options_are_read_as_configured():
    c = {n: model(n).config for n in FAMILIES}
    assert c["qwen2"].attention_bias and not c["qwen2"].o_bias
    assert c["qwen3"].qk_norm == "head" and c["qwen3"].head_dim == 16
    assert c["mistral"].sliding_window == 8 and c["mistral"].layer_types is None
    assert c["gemma"].act == "gelu_tanh" and c["gemma"].embed_scale == pytest.approx(32 ** 0.5)
    assert (c["gemma2"].attn_softcap, c["gemma2"].final_softcap, c["gemma2"].layer_types) == (2.0, 5.0,
                                                                                            ("sliding", "full"))
    assert c["gemma3_text"].rope_local_theta == 10.0 and c["gemma3_text"].layer_types[5] == "full"
    assert c["phi3"].rope_scaling["rope_type"] == "longrope" and c["phi3"].rotary_dim == 4
    assert c["olmo2"].qk_norm == "full" and not c["olmo2"].pre_norm
    assert c["gpt_neox"].parallel_residual and not c["gpt_neox-serial"].parallel_residual
    assert (c["gpt_neox"].rotary_dim, c["gpt_neox-serial"].rotary_dim) == (4, 2)
    assert (c["starcoder2"].norm, c["starcoder2"].gated_mlp, c["starcoder2"].act) == ("layer", False, "gelu_tanh")
    assert c["starcoder2"].attention_bias and c["starcoder2"].mlp_bias and c["starcoder2"].sliding_window == 8
    assert c["smollm3"].rope_layers == (True, True, True, False)
    assert c["smollm3-pattern"].rope_layers == (False, True, False, True)
    gguf = {n: model(n, gguf=True).config for n in ("starcoder2", "smollm3")}
    assert gguf["starcoder2"].norm == "layer" and gguf["starcoder2"].mlp_bias and gguf["starcoder2"].o_bias
    assert gguf["smollm3"].rope_layers == (True, True, True, False)  # llama.cpp: every 4th layer, no list in the file


def test_smollm3_layers_without_rope_are_left_unrotated():
    """smollm3-pattern leaves RoPE out of layers 0 and 2 (no_rope_layers [0, 1, 0, 1]): its logits equal
    transformers' (test above), and rotating every layer would miss them by far more than 1e-4."""
    m = model("smollm3-pattern")
    seqs = np.array(reference("smollm3-pattern")["sequences"])
    expected = np.load(FAM / "smollm3-pattern" / "logits.npy")
    wrong = load_model(FAM / "smollm3-pattern")
    wrong.config = dataclasses.replace(wrong.config, rope_layers=None)
    assert np.abs(wrong.forward(seqs) - expected).max() > 1e-2
    np.testing.assert_allclose(m.forward(seqs), expected, atol=1e-4, rtol=0)



def test_gemma2_query_pre_attn_scalar_other_than_head_dim():
    """gemma2-qscale scales q by query_pre_attn_scalar ** -0.5 = 40 ** -0.5, not head_dim ** -0.5 (16): its logits
    equal transformers' (eager attention, test above), and the head_dim scale would miss them by far more than 1e-4."""
    cfg = json.loads((FAM / "gemma2-qscale" / "config.json").read_text())
    assert (cfg["query_pre_attn_scalar"], cfg["head_dim"]) == (40, 16)
    m = model("gemma2-qscale")
    assert m.config.query_scale == pytest.approx(40 ** -0.5)
    seqs = np.array(reference("gemma2-qscale")["sequences"])
    expected = np.load(FAM / "gemma2-qscale" / "logits.npy")
    np.testing.assert_allclose(m.forward(seqs), expected, atol=1e-4, rtol=0)
    wrong = load_model(FAM / "gemma2-qscale")
    wrong.config = dataclasses.replace(wrong.config, query_scale=16 ** -0.5)
    assert np.abs(wrong.forward(seqs) - expected).max() > 1e-2


# ----------------------------------------------------------------- KV cache == full recomputation

@pytest.mark.parametrize("name", FAMILIES)
@settings(max_examples=8, deadline=None)
@given(data=st.data())
def test_kv_cache_decode_equals_full_recompute(name, data):
    """Prefill then one-token steps (and two-token chunks) past the sliding window equal one full pass. Phi-3's
    longrope switches to its long factors past original_max_position_embeddings (16 here) for a whole forward
    call; crossing it while decoding recomputes the cache, as transformers' generate does."""
    seqs = np.array(reference(name)["sequences"])
    total = data.draw(st.integers(10, seqs.shape[1]), label="total")
    prefill = data.draw(st.integers(1, total - 1), label="prefill")
    m = model(name)
    cache = m.new_cache(len(seqs), 32)
    i, step = 0, prefill
    while i < total:
        got = m.forward(seqs[:, i:i + step], cache)
        # full recomputation of the prefix seqs[:, :i + step]: for causal models, the same as the whole sequence;
        # for longrope it is also what decides short or long factors
        np.testing.assert_allclose(got, m.forward(seqs[:, :i + step])[:, i:], atol=2e-5, rtol=0)
        i += step
        step = 1 if (i - prefill) % 3 else min(2, total - i)  # mostly one token, sometimes a chunk


@pytest.mark.parametrize("name", ["mistral", "gemma2", "gemma3_text", "starcoder2"])
def test_sliding_window_hides_keys_older_than_the_window(name):
    """Changing a token more than W positions back changes nothing on the all-sliding model's first layer
    ... and full-attention layers still see it: checked by the logits test. Here: Mistral, every layer sliding."""
    m = model(name)
    w = m.config.sliding_window
    seq = np.array(reference(name)["sequences"][0])
    other = seq.copy()
    other[0] = (other[0] + 1) % m.config.vocab_size
    a, b = m.forward(seq[None]), m.forward(other[None])
    assert not np.allclose(a[0, 0], b[0, 0])
    if name in ("mistral", "starcoder2"):  # 2 sliding layers: a token reaches at most 2 (W - 1) positions further
        far = 2 * (w - 1) + 1
        np.testing.assert_allclose(a[0, far:], b[0, far:], atol=1e-6, rtol=0)


# ----------------------------------------------------------------- generate and perplexity

@pytest.mark.parametrize("name", FAMILIES)
def test_greedy_generate_equals_transformers_generate(name):
    ref = reference(name)
    ids = list(generate_ids(model(name), ref["prompt"], max_new_tokens=len(ref["generated"]),
                            sampling=SamplingConfig(temperature=0), ignore_eos=True, context=64))
    assert ids == ref["generated"]


@pytest.mark.parametrize("name", ["mistral", "gemma2", "gemma2-qscale", "starcoder2"])
@pytest.mark.parametrize("case", ["sliding_c16_s8", "sliding_c24_s8"])
def test_sliding_perplexity_past_the_window_equals_transformers(name, case):
    ref = reference(name)
    assert ref["window"] < int(case.split("_c")[1].split("_")[0]) < len(ref["ppl_ids"])
    context, stride = (int(x[1:]) for x in case.split("_")[1:])
    got = score_ids(model(name), ref["ppl_ids"], mode="sliding", context=context, stride=stride, add_bos=False)
    # the fixture is the transformers guide's loop, which weights each window by trg_len - 1;
    # nlpkit prints the exact mean and keeps the guide's figure beside it (issue 14)
    assert got.guide_mean_nll == pytest.approx(ref["ppl"][case], rel=1e-6)


def test_cli_perplexity_on_mistral_past_its_window(cli, tmp_path):
    ref = reference("mistral")
    text = tmp_path / "t.txt"
    text.write_text(ref["ppl_text"], encoding="utf-8")
    r = cli("perplexity", str(text), "--model", str(FAM / "mistral"), "--context", "16", "--stride", "8",
            "--no-add-bos", "--format", "jsonl")
    assert r.returncode == 0, r.stderr
    rec = json.loads(r.stdout.decode().splitlines()[0])
    # the CLI prints the exact mean over the scored tokens; the same windows' guide-weighted
    # figure equals transformers' (test above), so compare with the library's exact mean
    lib = score_ids(model("mistral"), ref["ppl_ids"], mode="sliding", context=16, stride=8, add_bos=False)
    assert lib.guide_mean_nll == pytest.approx(ref["ppl"]["sliding_c16_s8"], rel=1e-6)
    assert rec["mean_nll"] == pytest.approx(lib.mean_nll, rel=1e-9)


@pytest.mark.parametrize("name", ["gemma2", "phi3"])
def test_sentencepiece_style_tokenizers_of_gemma_and_phi3_are_read(name):
    """Their tokenizer.json (SentencePiece-style BPE, byte fallback) loads with the model and round-trips."""
    tok = model(name).require_tokenizer()
    text = "Hello world, naïve café"
    assert tok.decode(tok.encode(text)) == text


# ----------------------------------------------------------------- bad input

def _cfg(name: str, **changes) -> dict:
    cfg = json.loads((FAM / name / "config.json").read_text())
    cfg.update(changes)
    return cfg


@pytest.mark.parametrize("changes, message", [
    (dict(model_type="mixtral"), "unsupported architecture 'mixtral'"),
    (dict(model_type=None, architectures=["FooForCausalLM"]), "unsupported architecture 'FooForCausalLM'"),
    (dict(num_local_experts=8), "num_local_experts = 8 \\(mixture-of-experts\\)"),
    (dict(num_experts=4), "num_experts = 4"),
    (dict(mlp_bias=True), "mlp_bias = True"),
    (dict(hidden_act="relu2"), "hidden_act 'relu2' is not supported"),
    (dict(rope_parameters={"rope_type": "mrope", "rope_theta": 100.0}), "rope scaling type 'mrope'"),
])
def test_unknown_families_and_unsupported_options_are_refused_by_name(changes, message):
    with pytest.raises(NlpkitError, match=message):
        config_from_hf(_cfg("mistral", **changes))


def test_bad_family_specific_options():
    with pytest.raises(NlpkitError, match="use_bidirectional_attention"):
        config_from_hf(_cfg("gemma3_text", use_bidirectional_attention=True))
    with pytest.raises(NlpkitError, match="longrope short_factor must list 2 numbers"):
        cfg = _cfg("phi3")
        cfg["rope_parameters"] = {**cfg["rope_parameters"], "short_factor": [1.0]}
        config_from_hf(cfg)
    with pytest.raises(NlpkitError, match="layer_types"):
        config_from_hf(_cfg("gemma2", layer_types=["sliding_attention"]))
    with pytest.raises(NlpkitError, match="text_config"):
        config_from_hf({"model_type": "gemma3"})
    with pytest.raises(NlpkitError, match="no_rope_layers must list 1 \\(RoPE\\) or 0 \\(none\\) for each of the 4"):
        config_from_hf(_cfg("smollm3", no_rope_layers=[1, 1, 0]))
    with pytest.raises(NlpkitError, match="no_rope_layer_interval = 0 must be a positive integer"):
        config_from_hf(_cfg("smollm3", no_rope_layers=None, no_rope_layer_interval=0))


def test_multimodal_gemma3_reads_its_text_config():
    text = _cfg("gemma3_text")
    c = config_from_hf({"model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"],
                        "text_config": {k: v for k, v in text.items() if k != "model_type"}})
    assert c.family == "gemma3_text" and c.extra["weight_prefixes"][0] == "model.language_model."
    assert c.n_layers == 6 and c.qk_norm == "head"


def _gguf_with_arch(path: Path, arch: str) -> None:
    def s(x: str) -> bytes:
        b = x.encode()
        return struct.pack("<Q", len(b)) + b
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + s("general.architecture") + struct.pack("<I", 8)
                     + s(arch))


def test_gguf_of_an_unsupported_architecture_is_refused(tmp_path):
    p = tmp_path / "m.gguf"
    _gguf_with_arch(p, "mamba")
    with pytest.raises(NlpkitError, match="unsupported GGUF architecture 'mamba'.*qwen2"):
        load_model(p)


# ----------------------------------------------------------------- one family, one place

def test_family_names_are_spelled_in_the_family_table_only():
    """Every Hugging Face model_type and GGUF architecture the engine reads is written in `families.py` and in
    no other module under nlpkit/: the config readers and loaders find a family through the table. Tokenizer
    code is another vocabulary and is left out: nlpkit/bpe/ and bpe-train's --pattern default spell
    pre-tokenizer patterns and GGUF tokenizer kinds ('gpt2', 'llama', 'qwen2')."""
    names = {*families.MODEL_TYPES, *families.GGUF_ARCHS, *(t for f in families.FAMILIES for t in f.hf_multimodal)}
    root = Path(nlpkit.__file__).parent
    table = Path(families.__file__).relative_to(root.parent).as_posix()
    where: dict[str, set] = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).as_posix()
        if rel.startswith("nlpkit/bpe/") or rel == "nlpkit/cli/bpe_train.py":
            continue
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names:
                where.setdefault(node.value, set()).add(rel)
    assert {name: files - {table} for name, files in where.items() if files - {table}} == {}
    assert set(where) == names


@pytest.mark.parametrize("name", FAMILIES)
def test_packed_forward_equals_each_sequence_alone(name):
    """`forward(packing=)` (how `nlpkit score` runs many items at once): two sequences as segments of one packed
    row get transformers' logits of each alone -- sliding windows, soft-capping and per-layer RoPE included."""
    from nlpkit.lm.transformer.packing import pack, tree
    seqs = np.array(reference(name)["sequences"])
    expected = np.load(FAM / name / "logits.npy")
    T = seqs.shape[1]
    got = model(name).forward(seqs.reshape(1, -1), packing=pack([tree(T, []), tree(T, [])]))[0]
    np.testing.assert_allclose(got.reshape(expected.shape), expected, atol=1e-4, rtol=0)
