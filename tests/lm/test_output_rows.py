"""The output projection of a scoring forward (`model.output_rows`) runs on every thread of its pool and gives the
same bits as on one: several column tiles are split over the threads (float32, a mapped F32 file's rows, or rows
expanded on the thread that uses them), one tile has its rows split."""

from __future__ import annotations

import numpy as np
import pytest

from nlpkit.lm.threads import SERIAL, RowPool
from nlpkit.lm.transformer.model import output_rows
from nlpkit.lm.transformer.products import HEAD_TILE
from nlpkit.lm.transformer.stored_weights import Part, StoredMatrix


class CountingPool(RowPool):
    """A RowPool that records how many shares each `map` ran."""

    def __init__(self, n: int):
        super().__init__(n)
        self.shares: list[int] = []

    def map(self, fn, parts):
        self.shares.append(len(parts))
        return super().map(fn, parts)


def head(kind: str, w: np.ndarray):  # [d, V] float32 -> the layout asked for
    if kind == "float32":
        return w
    rows = np.ascontiguousarray(w.T)  # [V, d] as a file stores it
    part = Part(rows.view(np.uint8), "F32", "output")
    if kind == "expanded":  # a row order makes it expand (a GGUF's permuted rows would)
        part.order = np.arange(rows.shape[0])
    return StoredMatrix([part], w.shape[0])


@pytest.mark.parametrize("kind", ["float32", "mapped", "expanded"])
@pytest.mark.parametrize("d, v, r", [(128, 4 * HEAD_TILE + 100, 50), (64, 1000, 200)])
def test_output_projection_runs_on_two_threads_with_the_bits_of_one(kind, d, v, r):
    rng = np.random.default_rng(7)
    w = head(kind, rng.standard_normal((d, v), dtype=np.float32))
    x = rng.standard_normal((1, r, d), dtype=np.float32)
    index = np.arange(3, 3 + r)
    one = output_rows(x, w, SERIAL, index)
    pool = CountingPool(2)
    two = output_rows(x, w, pool, index)
    assert np.array_equal(one, two)
    assert pool.shares == [2]  # both threads, one hand-off (several tiles: all of them at once)


@pytest.mark.parametrize("kind", ["float32", "expanded"])
def test_rows_out_of_order_get_the_logits_each_row_gets_alone(kind):
    """A packed forward's rows come in any order and with gaps (several tiles: each tile's product is copied to the
    rows' order from a per-thread buffer): each row's logits are the bits it gets projected alone at its index."""
    rng = np.random.default_rng(3)
    d, v = 64, 3 * HEAD_TILE + 7
    w = head(kind, rng.standard_normal((d, v), dtype=np.float32))
    index = np.array([40, 3, 17, 18, 19, 90, 5, 64, 65, 2, 11, 30, 31, 77])
    x = rng.standard_normal((1, len(index), d), dtype=np.float32)
    got = output_rows(x, w, CountingPool(2), index)
    alone = np.concatenate([output_rows(x[:, [i]], w, SERIAL, index[[i]]) for i in range(len(index))], axis=1)
    assert np.array_equal(got, alone)
