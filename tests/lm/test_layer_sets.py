"""Native weights' forwards on several threads at once (`layer_sets.LayerSets`): each forward expands its layers
into its own scratch, so perplexity's windows run two at a time with native weights too, with the bits of one
window at a time; a native model whose layer scratch is large keeps one set, its windows one at a time."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from nlpkit.lm.perplexity.text_perplexity import score_ids
from nlpkit.lm.transformer import layer_sets
from nlpkit.lm.transformer.loaders import load_model

pytest.importorskip("gguf")
from test_weights_native import write_llama_gguf  # noqa: E402


@pytest.mark.parametrize("type_name", ["Q8_0", "F32"])
def test_native_windows_run_on_threads_with_the_bits_of_one_at_a_time(tmp_path, monkeypatch, type_name):
    import nlpkit.lm.transformer.model as model_mod
    path = write_llama_gguf(tmp_path / f"m-{type_name}.gguf", type_name)
    model = load_model(path, weights="native", use_cache=False)
    assert model.parallel_windows
    monkeypatch.setattr(model_mod, "PARALLEL_MIN_TOKENS", 2)
    ids = [int(i) for i in np.random.default_rng(3).integers(0, 320, 90)]
    monkeypatch.setenv("NLPKIT_LM_THREADS", "1")
    one = score_ids(model, ids, mode="sliding", context=24, stride=8)
    monkeypatch.setenv("NLPKIT_LM_THREADS", "2")
    two = score_ids(model, ids, mode="sliding", context=24, stride=8)
    assert two.positions == one.positions and two.logprobs == one.logprobs
    f32 = load_model(path, weights="float32", use_cache=False)
    assert score_ids(f32, ids, mode="sliding", context=24, stride=8).logprobs == one.logprobs


def test_forwards_at_once_hold_their_own_sets_and_a_large_scratch_keeps_one(tmp_path, monkeypatch):
    model = load_model(write_llama_gguf(tmp_path / "m.gguf", "Q8_0"), weights="native", use_cache=False)
    monkeypatch.setenv("NLPKIT_LM_THREADS", "2")
    sets = model.layer_sets()
    inside, go = threading.Barrier(2), threading.Event()
    held = []

    def hold():
        with sets.held() as (rows, expander):
            with sets.held() as again:  # a forward inside a forward keeps its set
                assert again[1] is expander
            held.append(expander)
            inside.wait()
            go.wait()

    threads = [threading.Thread(target=hold) for _ in range(2)]
    for t in threads:
        t.start()
    while len(held) < 2:
        pass
    assert held[0] is not held[1]
    go.set()
    for t in threads:
        t.join()
    monkeypatch.setattr(layer_sets, "SMALL_SCRATCH", 0)
    assert not sets.parallel and sets.most() == 1 and not model.parallel_windows
