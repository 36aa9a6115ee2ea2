"""A small, defensive `.safetensors` reader: JSON header checked against the file size, tensors read
straight into float32 arrays.

Format: 8-byte little-endian header length N, N bytes of JSON `{name: {dtype, shape, data_offsets: [begin, end]}}`,
then the data block (offsets are relative to its start). Every offset, shape and byte count is checked
before anything is allocated, so a truncated or lying file is an NlpkitError, never a crash or a huge
allocation. Reading goes through `readinto` into the destination array (F32) or a same-sized temporary
(F16/BF16), which keeps peak memory at about the model's float32 size.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import numpy as np

from nlpkit.errors import NlpkitError

_DTYPES = {"F32": (np.float32, 4), "F16": (np.float16, 2), "BF16": (np.uint16, 2), "F64": (np.float64, 8)}
# Other dtypes may hold buffers we never read (masks, position ids); their sizes still get checked.
_ITEMSIZE = {**{k: v[1] for k, v in _DTYPES.items()}, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U64": 8, "U32": 4,
             "U16": 2, "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1}
_MAX_HEADER = 100 * 1024 * 1024


class SafetensorsFile:
    """Index of one .safetensors file: `names`, `shape(name)`, `read(name) -> float32 array`, `read_into`."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        try:
            size = self.path.stat().st_size
            with open(self.path, "rb") as f:
                head = f.read(8)
                if len(head) < 8:
                    raise NlpkitError(f"{self.path}: truncated safetensors file ({size} bytes, no header)")
                (n,) = struct.unpack("<Q", head)
                if n > min(size - 8, _MAX_HEADER):
                    raise NlpkitError(f"{self.path}: safetensors header length {n} runs past the end of the "
                                      f"{size}-byte file (truncated or not a safetensors file)")
                raw = f.read(n)
        except OSError as e:
            raise NlpkitError(f"{self.path}: cannot read: {e.strerror or e}") from None
        try:
            header = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise NlpkitError(f"{self.path}: safetensors header is not valid JSON ({e})") from None
        if not isinstance(header, dict):
            raise NlpkitError(f"{self.path}: safetensors header is not a JSON object")
        self.metadata = header.pop("__metadata__", None) or {}
        self.data_start = 8 + n
        data_size = size - self.data_start
        self.entries: dict[str, tuple[str, tuple[int, ...], int, int]] = {}
        for name, info in header.items():
            try:
                dtype, shape, (begin, end) = info["dtype"], tuple(info["shape"]), info["data_offsets"]
            except (KeyError, TypeError, ValueError):
                raise NlpkitError(f"{self.path}: malformed header entry for tensor {name!r}") from None
            if dtype not in _ITEMSIZE:
                raise NlpkitError(f"{self.path}: tensor {name!r} has unknown dtype {dtype!r}")
            if not all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s < 1 << 40 for s in shape):
                raise NlpkitError(f"{self.path}: tensor {name!r} has an impossible shape {list(shape)}")
            if not (isinstance(begin, int) and isinstance(end, int) and 0 <= begin <= end):
                raise NlpkitError(f"{self.path}: tensor {name!r} has bad data offsets {[begin, end]}")
            nbytes = int(np.prod(shape, dtype=np.float64)) * _ITEMSIZE[dtype] if shape else _ITEMSIZE[dtype]
            if end - begin != nbytes:
                raise NlpkitError(f"{self.path}: tensor {name!r} shape {list(shape)} needs {nbytes} bytes "
                                  f"but its offsets span {end - begin}")
            if end > data_size:
                raise NlpkitError(f"{self.path}: tensor {name!r} ends at byte {self.data_start + end}, past the end "
                                  f"of the {size}-byte file (truncated download?)")
            self.entries[name] = (dtype, shape, self.data_start + begin, nbytes)
        self._map = None  # the file, mapped read-only on first `part` (native weights view it)

    @property
    def names(self) -> list[str]:
        return list(self.entries)

    def shape(self, name: str) -> tuple[int, ...]:
        return self.entries[name][1]

    def read_into(self, name: str, out: np.ndarray) -> np.ndarray:
        """Read tensor `name` into the float32 C-contiguous array (or row slice) `out` of the same size."""
        dtype, shape, offset, nbytes = self.entries[name]
        if dtype not in _DTYPES:
            raise NlpkitError(f"{self.path}: tensor {name!r} has dtype {dtype}; nlpkit reads F32, F16, BF16 weights")
        if out.size != (int(np.prod(shape)) if shape else 1) or out.dtype != np.float32 or not out.flags.c_contiguous:
            raise NlpkitError(f"{self.path}: tensor {name!r} has shape {list(shape)}, expected {list(out.shape)}")
        np_dtype, _ = _DTYPES[dtype]
        buf = out if dtype == "F32" else np.empty(out.shape, np_dtype)
        with open(self.path, "rb") as f:
            f.seek(offset)
            got = f.readinto(memoryview(buf.reshape(-1)).cast("B"))
        if got != nbytes:
            raise NlpkitError(f"{self.path}: tensor {name!r} is truncated ({got} of {nbytes} bytes)")
        if dtype == "BF16":  # bfloat16 is the top half of a float32
            out.reshape(-1).view(np.uint32)[:] = buf.reshape(-1).astype(np.uint32) << 16
        elif dtype != "F32":
            out[...] = buf
        return out

    def part(self, name: str):
        """Tensor `name`'s rows as stored (F32, F16, BF16): a `stored_weights.Part` viewing the mapped file."""
        import mmap

        from nlpkit.lm.transformer.quant_blocks import check_type
        from nlpkit.lm.transformer.stored_weights import Part
        dtype, shape, offset, nbytes = self.entries[name]
        check_type(dtype, name, str(self.path))
        if self._map is None:
            try:
                with open(self.path, "rb") as f:
                    self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            except (OSError, ValueError) as e:
                raise NlpkitError(f"{self.path}: cannot map: {e}") from None
        if offset + nbytes > len(self._map):
            raise NlpkitError(f"{self.path}: tensor {name!r} is truncated (the file is shorter than it was)")
        raw = np.frombuffer(self._map, np.uint8, count=nbytes, offset=offset)
        return Part(raw.reshape(shape[0] if shape else 1, -1), dtype, name)

    def read(self, name: str) -> np.ndarray:
        shape = self.entries[name][1]
        return self.read_into(name, np.empty(shape, np.float32))

    def read_transposed_into(self, name: str, out: np.ndarray, block_bytes: int = 8 << 20) -> np.ndarray:
        """Write the transpose of 2-D tensor `name` ([rows, cols]) into `out` ([cols, rows], any strides),
        a block of rows at a time, so no full-size temporary exists."""
        dtype, shape, offset, _ = self.entries[name]
        if dtype not in _DTYPES:
            raise NlpkitError(f"{self.path}: tensor {name!r} has dtype {dtype}; nlpkit reads F32, F16, BF16 weights")
        rows, cols = shape
        np_dtype, size = _DTYPES[dtype]
        step = max(1, block_bytes // max(1, cols * size))
        with open(self.path, "rb") as f:
            for r0 in range(0, rows, step):
                r1 = min(rows, r0 + step)
                buf = np.empty((r1 - r0, cols), np_dtype)
                f.seek(offset + r0 * cols * size)
                if f.readinto(memoryview(buf.reshape(-1)).cast("B")) != buf.nbytes:
                    raise NlpkitError(f"{self.path}: tensor {name!r} is truncated")
                if dtype == "BF16":
                    buf = (buf.astype(np.uint32) << 16).view(np.float32)
                out[:, r0:r1] = buf.T
        return out


class TensorSet:
    """The tensors of a model directory: one model.safetensors, or shards listed in model.safetensors.index.json."""

    def __init__(self, directory: Path):
        index = directory / "model.safetensors.index.json"
        single = directory / "model.safetensors"
        self.files: dict[str, SafetensorsFile] = {}
        self.where: dict[str, SafetensorsFile] = {}
        self.index: Path | None = None if single.is_file() else index
        if single.is_file():
            f = SafetensorsFile(single)
            self.files[single.name] = f
            self.where = {n: f for n in f.names}
        elif index.is_file():
            try:
                weight_map = json.loads(index.read_text("utf-8"))["weight_map"]
            except (OSError, ValueError, KeyError, TypeError) as e:
                raise NlpkitError(f"{index}: not a valid safetensors index ({e})") from None
            for name, fname in weight_map.items():
                if "/" in fname or "\\" in fname or fname.startswith("."):
                    raise NlpkitError(f"{index}: shard name {fname!r} must be a file in the model directory")
                if fname not in self.files:
                    if not (directory / fname).is_file():
                        raise NlpkitError(f"{index}: shard {fname} is missing from {directory}")
                    self.files[fname] = SafetensorsFile(directory / fname)
                if name not in self.files[fname].entries:
                    raise NlpkitError(f"{index}: tensor {name} is not in shard {fname}")
                self.where[name] = self.files[fname]
        else:
            pickles = sorted(p.name for p in directory.iterdir()
                             if p.suffix in (".bin", ".pt", ".pth", ".ckpt", ".pkl"))
            if pickles:
                raise NlpkitError(f"{directory} holds only pickled weights ({', '.join(pickles[:3])}); nlpkit refuses "
                                  "pickle checkpoints because loading one can execute arbitrary code. Convert them "
                                  "to model.safetensors (e.g. transformers' save_pretrained(safe_serialization=True)).")
            raise NlpkitError(f"{directory}: no model.safetensors or model.safetensors.index.json")

    def __contains__(self, name: str) -> bool:
        return name in self.where

    def paths(self) -> list[Path]:
        """The files the tensors come from (the index first, when there is one)."""
        return ([self.index] if self.index is not None else []) + [f.path for f in self.files.values()]

    def shape(self, name: str) -> tuple[int, ...]:
        return self.where[name].shape(name)

    def read(self, name: str, shape: tuple[int, ...] | None = None) -> np.ndarray:
        if name not in self.where:
            raise NlpkitError(f"model weights: tensor {name} is missing")
        got = self.shape(name)
        if shape is not None and tuple(got) != tuple(shape):
            raise NlpkitError(f"model weights: tensor {name} has shape {list(got)}, the config implies {list(shape)}")
        return self.where[name].read(name)

    def part(self, name: str, shape: tuple[int, int]):
        """Tensor `name`'s rows as stored, checked against `shape` (`stored_weights.Part`)."""
        if name not in self.where:
            raise NlpkitError(f"model weights: tensor {name} is missing")
        if tuple(self.shape(name)) != tuple(shape):
            raise NlpkitError(f"model weights: tensor {name} has shape {list(self.shape(name))}, the config "
                              f"implies {list(shape)}")
        return self.where[name].part(name)

    def read_t(self, names: list[str], shapes: list[tuple[int, int]]) -> np.ndarray:
        """Transposed and concatenated: [out_i, in] tensors -> one contiguous [in, sum out_i] matrix
        (the fused q/k/v or gate/up projection in the forward pass's layout)."""
        for n, s in zip(names, shapes):
            if n not in self.where:
                raise NlpkitError(f"model weights: tensor {n} is missing")
            if tuple(self.shape(n)) != tuple(s):
                raise NlpkitError(f"model weights: tensor {n} has shape {list(self.shape(n))}, the config "
                                  f"implies {list(s)}")
        out = np.empty((shapes[0][1], sum(s[0] for s in shapes)), np.float32)
        col = 0
        for n, s in zip(names, shapes):
            self.where[n].read_transposed_into(n, out[:, col:col + s[0]])
            col += s[0]
        return out
