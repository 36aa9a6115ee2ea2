"""Weight matrices kept as the file stores them (`--weights native`), expanded to float32 where they are used.

A `StoredMatrix` is a projection's rows as its file holds them — `[out, in]`, each row a run of GGML blocks
(or 16-bit words) along the input dimension — memory-mapped from the GGUF or safetensors file, so a load
touches nothing and the process's memory is the file's pages the forward reads. Fused projections (q/k/v,
gate/up) are parts side by side; the loaders' row permutations (llama.cpp's interleaved RoPE rows, GPT-NeoX's
per-head q/k/v) are kept as a row order applied while expanding (blocks run along rows, so rows move whole).

`LayerExpander` gives the engine, per layer, a twin of the layer whose matrix fields are float32 views of one
set of scratch buffers (shared by all layers): `expand(li)` fills them from layer li's stored matrices just
before the layer runs, so memory is the stored weights + one layer in float32 + activations + KV cache. The
twin's fields are `[in, out]` views (the scratch's transpose), so the forward multiplies as it does a float32
layer: numpy hands BLAS the transposed operand, and every product of two or more rows gives the same bits as
the float32 layout's (a one-row product takes another BLAS kernel: equal within float32 rounding). Small
matrices are expanded in the float32 layout's C order instead (OpenBLAS picks its small-matrix kernels by
layout too), so a small model's numbers are float32's bits, decode steps included. Expansion splits the
rows over threads (numpy releases the GIL in its ufunc loops).

Embedding rows are expanded per token looked up (`take_rows`); the output projection in tiles of vocabulary
rows (`matmul_t`), so no whole float32 copy of either exists.
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass

import numpy as np

from nlpkit.errors import NlpkitError
from nlpkit.lm.transformer.products import HEAD_TILE, SMALL_HEAD, matmul_rows
from nlpkit.lm.transformer.quant_blocks import DECODERS, check_type, expand_rows
from nlpkit.lm.threads import SERIAL, RowPool, engine_threads

TILE_WEIGHTS = 1 << 17  # weights per expansion chunk: its code temporaries stay in the CPU's cache
HEAD_TILE_ROWS = HEAD_TILE  # vocabulary rows of the output projection expanded at a time
SMALL_MATRIX = SMALL_HEAD  # weights: at most this, a matrix is expanded [in, out] in C order (see LayerExpander)


@dataclass
class Part:
    """Rows of one stored tensor: raw [rows, row_bytes] uint8 (a view of the file), its GGML type name, and
    `order` (row i of the expansion is raw row order[i]; None: as stored)."""
    raw: np.ndarray
    type_name: str
    name: str = ""
    order: np.ndarray | None = None

    @property
    def rows(self) -> int:
        return self.raw.shape[0]


class StoredMatrix:
    """A `[rows, cols]` matrix (a projection's `[out, in]`: the transpose of the float32 layout's `[in, out]`)
    held as stored parts stacked along the rows. `expand` gives float32 rows exactly as a float32 load does."""

    def __init__(self, parts: list[Part], cols: int):
        self.parts, self.cols = parts, cols
        for p in parts:
            check_type(p.type_name, p.name)
            _, block, size = DECODERS[p.type_name]
            if cols % block or p.raw.ndim != 2 or p.raw.shape[1] != cols // block * size:
                raise NlpkitError(f"model weights: tensor {p.name} holds {p.raw.shape[-1]}-byte rows, not "
                                  f"{cols} {p.type_name} weights")
        self.rows = sum(p.rows for p in parts)

    @property
    def shape(self) -> tuple[int, int]:
        return self.rows, self.cols

    @property
    def nbytes(self) -> int:
        return sum(p.raw.nbytes for p in self.parts)

    @property
    def types(self) -> list[str]:
        return sorted({p.type_name for p in self.parts})

    def direct(self) -> np.ndarray | None:
        """The float32 rows themselves (a single F32 part in stored order: nothing to expand), else None."""
        if len(self.parts) == 1 and self.parts[0].type_name == "F32" and self.parts[0].order is None:
            return self.parts[0].raw.view(np.float32)
        return None

    def permute_rows(self, order: np.ndarray) -> None:
        """Reorder the rows: row i becomes row order[i] of the current rows. Each part's rows must stay in
        the part (q/k head permutations, a fused q/k/v regrouped)."""
        start = 0
        for p in self.parts:
            local = np.asarray(order[start:start + p.rows]) - start
            if local.size and (local.min() < 0 or local.max() >= p.rows):
                raise NlpkitError(f"model weights: a row permutation crosses tensor {p.name}")
            p.order = local if p.order is None else p.order[local]
            start += p.rows

    def _pieces(self, r0: int, r1: int):
        """(part, raw rows, out row offset) covering rows r0:r1."""
        start = 0
        for p in self.parts:
            s, e = max(r0, start), min(r1, start + p.rows)
            if s < e:
                idx = slice(s - start, e - start) if p.order is None else p.order[s - start:e - start]
                yield p, idx, s - r0
            start += p.rows

    def expand(self, r0: int = 0, r1: int | None = None, out: np.ndarray | None = None,
               pool: RowPool | None = None) -> np.ndarray:
        """Rows r0:r1 in float32 (into `out`, C order), chunks split over `pool`'s threads.  # -> [r1 - r0, cols]"""
        r1 = self.rows if r1 is None else r1
        if out is None:
            out = np.empty((r1 - r0, self.cols), np.float32)
        step = max(1, TILE_WEIGHTS // self.cols)
        jobs = []
        for p, idx, at in self._pieces(r0, r1):
            n = (idx.stop - idx.start) if isinstance(idx, slice) else len(idx)
            for s in range(0, n, step):
                e = min(n, s + step)
                src = p.raw[idx.start + s:idx.start + e] if isinstance(idx, slice) else p.raw[idx[s:e]]
                jobs.append((p.type_name, src, at + s, at + e))

        def run(share):
            for type_name, src, s, e in share:
                expand_rows(type_name, src, out[s:e])

        pool = pool or _pool()
        if pool.n > 1 and len(jobs) > 1:
            pool.map(run, [jobs[i::pool.n] for i in range(pool.n)])
        else:
            run(jobs)
        return out

    def take_rows(self, ids: np.ndarray) -> np.ndarray:
        """Rows `ids` in float32 (an embedding lookup).  # [n] -> [n, cols]"""
        ids = np.asarray(ids).reshape(-1)
        out = np.empty((len(ids), self.cols), np.float32)
        uniq, inv = np.unique(ids, return_inverse=True)
        start, got = 0, np.empty((len(uniq), self.cols), np.float32)
        for p in self.parts:
            sel = (uniq >= start) & (uniq < start + p.rows)
            if sel.any():
                local = uniq[sel] - start
                rows = local if p.order is None else p.order[local]
                got[sel] = expand_rows(p.type_name, p.raw[rows], np.empty((len(rows), self.cols), np.float32))
            start += p.rows
        out[:] = got[inv.reshape(-1)]
        return out

    def matmul_t(self, x: np.ndarray, tile: int = HEAD_TILE_ROWS, pad: bool = True) -> np.ndarray:
        """x @ self.T, a tile of rows at a time (no [rows, cols] float32 copy), each tile's product with its rows
        padded as `products.matmul_rows` pads them (`pad` False: as they are). # [n, cols] -> [n, rows]"""
        y = np.empty((x.shape[0], self.rows), np.float32)
        tiles = [(0, self.rows)] if self.rows * self.cols <= SMALL_MATRIX else \
            [(r, min(r + tile, self.rows)) for r in range(0, self.rows, tile)]
        for r0, r1, w in self.tiles_t(tiles):
            matmul_rows(x, w, out=y[:, r0:r1], pad=pad)
        return y

    def tile_t(self, r0: int, r1: int, scratch: np.ndarray | None = None) -> np.ndarray:
        """Rows r0:r1 transposed, a float32 [cols, r1 - r0] operand: a mapped F32 file's rows themselves, else
        the rows expanded on this thread into `scratch` ([>= r1 - r0, cols]; valid until its next use)."""
        direct = self.direct()
        if direct is not None:
            return direct[r0:r1].T
        return self.expand(r0, r1, scratch[:r1 - r0], SERIAL).T

    def tiles_t(self, tiles: list[tuple[int, int]]):
        """(r0, r1, rows r0:r1 transposed: a float32 [cols, r1 - r0] operand) for each tile, in order: a small
        matrix expanded whole in the float32 layout's C order, a mapped F32 file's rows themselves, else each
        tile expanded into one scratch buffer (valid until the next tile)."""
        if self.rows * self.cols <= SMALL_MATRIX:  # the float32 layout's C-order [in, out]
            w = np.ascontiguousarray(self.expand(pool=SERIAL).T)
            for r0, r1 in tiles:
                yield r0, r1, w[:, r0:r1]
            return
        direct = self.direct()
        if direct is not None:
            for r0, r1 in tiles:
                yield r0, r1, direct[r0:r1].T
            return
        scratch = np.empty((max(r1 - r0 for r0, r1 in tiles), self.cols), np.float32)
        pool = _pool()
        for r0, r1 in tiles:
            yield r0, r1, self.expand(r0, r1, scratch[:r1 - r0], pool).T


def _pool() -> RowPool:
    n = engine_threads()
    return RowPool(n) if n > 1 else RowPool(1)


def is_stored(w) -> bool:
    """Whether a weights field is a StoredMatrix (else a float32 array or None)."""
    return isinstance(w, StoredMatrix)


class LayerExpander:
    """Per layer, a twin whose StoredMatrix fields are `[in, out]` float32 views of shared scratch buffers;
    `expand(li)` fills the scratch from layer li. A lock keeps two threads' forwards from sharing the scratch.

    A small matrix (at most SMALL_MATRIX weights) is expanded into a C-order `[in, out]` buffer instead (a
    transposing copy, cheap at that size): OpenBLAS multiplies small products with kernels chosen by the
    operands' layout, so only the float32 layout's own gives its bits there. A large F32 matrix in stored
    order needs no expansion: its twin field is the mapped file's rows, transposed."""

    def __init__(self, layers: list):
        self.layers = layers
        self.lock = threading.RLock()
        sizes = self.scratch_sizes(layers)
        # np.empty maps pages only as they are written: a model never run costs no scratch memory
        self._scratch = {k: np.empty(n, np.float32) for k, n in sizes.items()}
        self.twins = [self._twin(layer) for layer in layers]

    @classmethod
    def scratch_sizes(cls, layers: list) -> dict[str, int]:
        """Float32 words of scratch per field: the largest of the layers' stored matrices that are expanded
        (a mapped F32 file's large matrices are read in place)."""
        sizes: dict[str, int] = {}
        for layer in layers:
            for f in dataclasses.fields(layer):
                w = getattr(layer, f.name)
                if is_stored(w) and not cls._mapped(w):
                    sizes[f.name] = max(sizes.get(f.name, 0), w.rows * w.cols)
        return sizes

    @staticmethod
    def _mapped(w: StoredMatrix) -> bool:
        return w.direct() is not None and w.rows * w.cols > SMALL_MATRIX

    def _buffer(self, field: str, shape: tuple[int, int]) -> np.ndarray:  # -> a C-order view of the scratch
        return self._scratch[field][:shape[0] * shape[1]].reshape(shape)

    def _twin(self, layer):
        views = {}
        for f in dataclasses.fields(layer):
            w = getattr(layer, f.name)
            if not is_stored(w):
                continue
            if self._mapped(w):
                views[f.name] = w.direct().T
            elif w.rows * w.cols <= SMALL_MATRIX:
                views[f.name] = self._buffer(f.name, (w.cols, w.rows))  # [in, out], C order
            else:
                views[f.name] = self._buffer(f.name, w.shape).T  # [out, in] scratch, seen as [in, out]
        return dataclasses.replace(layer, **views)

    def expand(self, li: int, rows: int = 1) -> None:
        """Layer li's stored matrices into the scratch its twin's fields view, for a forward of `rows` rows (batch
        x new tokens). A forward of several rows pads every product past OpenBLAS's small-matrix kernels
        (`products.padded_rows`), where the operand's layout does not change a bit: its small matrices are then
        viewed as stored, `[out, in]` transposed, like the large ones (a mapped F32 file's rows themselves, else
        expanded into the scratch without a transposing copy); one row (a matrix-vector product), and a batched
        decode step's unpadded products (`run_layers(pad=False)` passes 1), read the float32
        layout's C-order `[in, out]`, so that native and float32 weights give a step the same bits."""
        pool = _pool()
        layer, twin = self.layers[li], self.twins[li]
        for f in dataclasses.fields(layer):
            w = getattr(layer, f.name)
            if not is_stored(w) or self._mapped(w):
                continue
            if w.rows * w.cols > SMALL_MATRIX:
                w.expand(out=self._buffer(f.name, w.shape), pool=pool)
            elif rows > 1:  # as stored: the file's rows, or expanded (plain row copies for F32 parts)
                direct = w.direct()
                if direct is None:
                    direct = w.expand(out=self._buffer(f.name, w.shape), pool=pool)
                setattr(twin, f.name, direct.T)
            else:
                buf = self._buffer(f.name, (w.cols, w.rows))
                setattr(twin, f.name, buf)
                if w.types != ["F32"]:
                    buf[...] = w.expand(pool=SERIAL).T
                    continue
                # F32 parts (a fused q/k/v's too): each one transposing copy (no float32 rows first), on the threads
                pieces = [(p.raw.view(np.float32)[idx], at) for p, idx, at in w._pieces(0, w.rows)]

                def copy(piece, buf=buf):
                    part, at = piece  # [n, cols]: the part's rows (a view; permuted rows: gathered)
                    buf[:, at:at + part.shape[0]] = part.T

                pool.map(copy, pieces)


def has_stored(weights) -> bool:
    """Whether a `Weights` holds any StoredMatrix (a native load)."""
    return any(is_stored(getattr(obj, f.name)) for obj in [weights, *weights.layers] for f in dataclasses.fields(obj))


__all__ = ["Part", "StoredMatrix", "LayerExpander", "is_stored", "has_stored"]
