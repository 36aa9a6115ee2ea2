"""A batched decode step's output projection over vocabulary rows (`products.rows_times`, `batch_decoding.step_head`):
the same numbers as `x @ lm_head` (within float32 rounding), tile by tile, for float32 and native weights."""

from __future__ import annotations

import weakref

import numpy as np
import pytest

from conftest import FIXTURES

from nlpkit.lm.transformer import batch_decoding, products, stored_weights
from nlpkit.lm.transformer.batch_decoding import DecodingBatch, step_head
from nlpkit.lm.transformer.loaders import load_model
from nlpkit.lm.transformer.products import rows_times


def test_rows_times_is_x_times_the_rows_transposed_across_tile_edges():
    rng = np.random.default_rng(0)
    e = rng.standard_normal((37, 24)).astype(np.float32)  # [n, k]: 37 rows, tiles of 8 and a tail of 5
    for m in (2, 5, 16):
        x = rng.standard_normal((m, 24)).astype(np.float32)
        want = x.astype(np.float64) @ e.T.astype(np.float64)
        got = rows_times(x, e, tile=8)
        assert got.shape == (m, 37) and got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        out = np.full((m, 40), np.float32(7))
        rows_times(x, e, out[:, 2:39], tile=8)  # into columns of a wider array
        assert np.array_equal(out[:, 2:39], got) and (out[:, :2] == 7).all() and (out[:, 39:] == 7).all()


def test_a_tiles_columns_do_not_depend_on_the_other_tiles():
    rng = np.random.default_rng(1)
    e = rng.standard_normal((64, 32)).astype(np.float32)
    x = rng.standard_normal((16, 32)).astype(np.float32)
    whole = rows_times(x, e, tile=16)
    assert np.array_equal(rows_times(x, e[16:32], tile=16), whole[:, 16:32])


@pytest.fixture(scope="module")
def model():
    return load_model(FIXTURES / "score" / "models" / "llama-spm")


def _steps(model, prompts, steps=3):
    batch = DecodingBatch(model)
    logits = batch.join_many([(i, p, steps + 1) for i, p in enumerate(prompts)])
    out = []
    for _ in range(steps):
        rows = batch.step([int(np.argmax(r)) for r in logits])
        out.append(rows)
        logits = list(rows)
    return out


def test_a_batched_step_reads_the_float32_output_projection_as_a_kept_copy_of_its_rows(model, monkeypatch):
    assert step_head(model) is None  # a small projection (the fixture's): `x @ lm_head`, no copy
    monkeypatch.setattr(products, "SMALL_HEAD", 0)  # the fixture's projection taken as a large one
    monkeypatch.setattr(batch_decoding, "rows_kernel", lambda: True)  # an AVX-512 OpenBLAS kernel, wherever run
    e = step_head(model)
    assert e is step_head(model)  # made once, kept while the model lives
    assert e.flags.c_contiguous and np.array_equal(e, model.weights.lm_head.T)
    prompts = [[5, 9, 11], [7], [3, 4, 5, 6, 8]]
    with_rows = _steps(model, prompts)
    # without room for the copy: `x @ lm_head` as before, the same logits within float32 rounding
    monkeypatch.setattr(batch_decoding, "_STEP_HEADS", weakref.WeakKeyDictionary())
    monkeypatch.setattr(batch_decoding, "HEAD_COPY_SHARE", 0.0)
    assert step_head(model) is None
    without = _steps(model, prompts)
    for a, b in zip(with_rows, without):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-5)


def test_native_and_float32_weights_project_a_step_through_the_same_tiles_of_rows(tmp_path, monkeypatch):
    """A large output projection held natively is expanded a tile of rows at a time and multiplied as the float32
    copy's tiles are: a batched step's logits, the same bits for both layouts."""
    from test_weights_native import write_llama_gguf

    path = write_llama_gguf(tmp_path / "m.gguf", "Q8_0", tied=True)
    native = load_model(path, weights="native", use_cache=False)
    f32 = load_model(path, weights="float32", use_cache=False)
    monkeypatch.setattr(products, "SMALL_HEAD", 0)  # the projection a large one, on both layouts
    monkeypatch.setattr(stored_weights, "SMALL_MATRIX", 0)
    monkeypatch.setattr(batch_decoding, "STEP_TILE", 16)  # several tiles of the fixture's vocabulary
    monkeypatch.setattr(batch_decoding, "rows_kernel", lambda: True)
    assert stored_weights.is_stored(step_head(native)) and step_head(f32).flags.c_contiguous
    x = np.random.default_rng(2).standard_normal((5, f32.config.dim)).astype(np.float32)
    a, b = DecodingBatch(native)._head(x), DecodingBatch(f32)._head(x)
    assert np.array_equal(a, b)
    np.testing.assert_allclose(b, x @ f32.weights.lm_head, rtol=1e-5, atol=1e-5)


def test_float32_weights_are_not_copied_where_the_kernel_runs_x_times_lm_head_faster(model, monkeypatch):
    monkeypatch.setattr(products, "SMALL_HEAD", 0)
    monkeypatch.setattr(batch_decoding, "_STEP_HEADS", weakref.WeakKeyDictionary())
    monkeypatch.setattr(batch_decoding, "rows_kernel", lambda: False)  # OpenBLAS's Haswell or Zen kernels
    assert step_head(model) is None
