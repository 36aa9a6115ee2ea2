"""A forward's large logits are lent from recycled blocks (`transformer.recycled`): a block is lent again only once no
array over it is alive, so logits a caller still holds (or any view of them) are never overwritten by a later
forward, and dropped ones make the next forward write memory already mapped."""

from __future__ import annotations

import numpy as np
import pytest

from nlpkit.lm.threads import SERIAL
from nlpkit.lm.transformer import recycled
from nlpkit.lm.transformer.model import output_rows
from nlpkit.lm.transformer.products import HEAD_TILE

BIG = (recycled.RECYCLE_MIN // 4 // 1000 + 1, 1000)  # float32 rows x columns: just over RECYCLE_MIN bytes


def address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


@pytest.fixture(autouse=True)
def empty_pool(monkeypatch):
    monkeypatch.setattr(recycled, "_blocks", [])


def test_a_dropped_array_lends_its_memory_to_the_next_request():
    a = recycled.empty(BIG)
    where = address(a)
    del a
    b = recycled.empty(BIG)
    assert address(b) == where


@pytest.mark.parametrize("keep", [lambda a: a, lambda a: a[3:], lambda a: a.reshape(-1)[None], lambda a: a.T])
def test_memory_an_array_or_any_view_of_it_holds_is_never_lent_again(keep):
    a = recycled.empty(BIG)
    a[...] = 1.0
    held = keep(a)
    del a
    b = recycled.empty(BIG)
    b[...] = 2.0
    assert not np.shares_memory(held, b)
    assert (held == 1.0).all()


def test_small_arrays_are_plain_and_blocks_kept_are_bounded():
    assert recycled.empty((10, 10)).base is None
    held = [recycled.empty(BIG) for _ in range(recycled.KEEP + 2)]  # all lent at once: the extra ones are not kept
    assert len({address(a) for a in held}) == len(held)
    assert recycled.kept_bytes() <= recycled.KEEP * (4 * BIG[0] * BIG[1] + recycled.ROUND)


def test_logits_held_from_one_projection_survive_the_next(monkeypatch):
    monkeypatch.setattr(recycled, "RECYCLE_MIN", 1 << 16)  # this test's logits count as large
    rng = np.random.default_rng(5)
    d, v, r = 32, 3 * HEAD_TILE, 40
    w = rng.standard_normal((d, v), dtype=np.float32)
    x1, x2 = (rng.standard_normal((1, r, d), dtype=np.float32) for _ in range(2))
    index = np.arange(r)
    first = output_rows(x1, w, SERIAL, index)
    kept = first.copy()
    second = output_rows(x2, w, SERIAL, index)
    assert np.array_equal(first, kept)
    assert not np.shares_memory(first, second)
    where = address(second)
    del second
    third = output_rows(x2, w, SERIAL, index)  # the dropped logits' memory, the same numbers
    assert address(third) == where
    assert np.array_equal(third, output_rows(x2, w, SERIAL, index))


def test_a_window_reuses_an_idle_kv_cache_and_scores_the_same_bits(monkeypatch):
    """Perplexity's windows through a KV cache (`window_forward.window_cache`): a later window takes the cache an
    earlier one left, emptied, and gets the bits a new cache gives; two windows at once get two caches."""
    from pathlib import Path

    import nlpkit.lm.transformer.window_forward as wf
    from nlpkit.lm.transformer.loaders import load_model

    model = load_model(Path(__file__).resolve().parents[1] / "fixtures" / "lm" / "llama-gqa")
    monkeypatch.setattr(wf, "CHUNK", 7)
    rng = np.random.default_rng(1)
    a, b = ([1] + rng.integers(2, model.config.vocab_size, 40).tolist() for _ in range(2))
    monkeypatch.setattr(wf, "_idle_caches", wf.weakref.WeakKeyDictionary())
    alone = wf.window_logprobs(model, b, 1)  # a new cache
    [kept] = wf._idle_caches[model]
    first = wf.window_logprobs(model, a, 1)
    assert wf._idle_caches[model] == [kept]  # taken again, and left again
    assert np.array_equal(wf.window_logprobs(model, b, 1), alone)
    with wf.window_cache(model, len(a) - 1) as one, wf.window_cache(model, len(a) - 1) as two:
        assert one is not two
    assert np.array_equal(wf.window_logprobs(model, a, 1), first)
