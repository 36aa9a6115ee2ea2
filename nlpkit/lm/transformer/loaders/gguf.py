"""Load a GGUF file into a `Model`: metadata -> config (by the family table), tensors dequantized by `gguf`.

The header (metadata and tensor table) is parsed here, with every count, shape and offset checked
against the file size, so a lying file is an NlpkitError before anything is allocated; it is also much
faster than walking 49k-token vocabularies through memmap views. Tensor data is read per tensor and
dequantized with `gguf.quants.dequantize` (F32/F16/BF16/Q8_0/Q4_0/Q4_1/Q4_K/Q6_K/...).

GGUF stores Q and K projection rows in llama.cpp's interleaved RoPE order: convert_hf_to_gguf permutes
each head's rows `[2, hd/2] -> [hd/2, 2]`. The inverse permutation here brings them back to the
Hugging Face rotate-half layout, so `rope.py` has one layout. The tokenizer (GPT-2-style byte-level
BPE) is rebuilt from `tokenizer.ggml.tokens` / `merges`.
"""

from __future__ import annotations

import math
import mmap
import struct
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from nlpkit.bpe.gguf_vocab import gguf_adds_bos
from nlpkit.errors import NlpkitError
from nlpkit.lm.transformer import families
from nlpkit.lm.transformer.config import ACT_NAMES, ModelConfig, block_options
from nlpkit.lm.transformer.loaders.native import NativeSource, choose
from nlpkit.lm.transformer.loaders.prepared_weights import load_weights
from nlpkit.lm.transformer.loaders.weights import read_block_weights
from nlpkit.lm.transformer.model import Model
from nlpkit.lm.transformer.quant_blocks import DECODERS, check_type

_MAX_COUNT = 1 << 20  # tensors or metadata keys beyond real files' sizes: a corrupt header
_U64 = struct.Struct("<Q")
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


class _Buf:
    """Sequential little-endian reads over a GGUF header; running off the end is an NlpkitError."""

    def __init__(self, data: bytes | mmap.mmap, path: Path):
        self.data, self.pos, self.path = data, 0, path

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise NlpkitError(f"{self.path}: GGUF header runs past the end of the file (truncated or corrupt)")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def scalar(self, fmt: str):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self) -> str:
        return self.take(self.scalar("<Q")).decode("utf-8", errors="replace")

    def strings(self, n: int) -> list[str]:
        """n length-prefixed strings (a vocabulary, merges): `string` n times, without a call per piece."""
        data, pos, end, out = self.data, self.pos, len(self.data), []
        length = _U64.unpack_from
        for _ in range(n):
            if pos + 8 > end:
                raise NlpkitError(f"{self.path}: GGUF header runs past the end of the file (truncated or corrupt)")
            (k,) = length(data, pos)
            pos += 8
            if pos + k > end:
                raise NlpkitError(f"{self.path}: GGUF header runs past the end of the file (truncated or corrupt)")
            out.append(data[pos:pos + k].decode("utf-8", errors="replace"))
            pos += k
        self.pos = pos
        return out

    def value(self, vtype: int):
        if vtype in _SCALARS:
            return self.scalar(_SCALARS[vtype])
        if vtype == 8:
            return self.string()
        if vtype == 9:
            itype, n = self.scalar("<I"), self.scalar("<Q")
            if n > len(self.data):  # every item takes at least a byte
                raise NlpkitError(f"{self.path}: GGUF metadata array of {n} items is impossible (corrupt file)")
            if itype in _SCALARS:
                fmt = _SCALARS[itype]
                return np.frombuffer(self.take(n * struct.calcsize(fmt)), dtype=np.dtype(fmt)).tolist()
            if itype == 8:
                return self.strings(n)
            return [self.value(itype) for _ in range(n)]
        raise NlpkitError(f"{self.path}: unknown GGUF metadata value type {vtype}")


def read_gguf_header(path: Path) -> tuple[dict, list[tuple[str, tuple[int, ...], int, int, int]]]:
    """(metadata, tensors) of a GGUF file; a tensor is (name, numpy shape, ggml type, absolute offset, nbytes)."""
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(24)
        if len(head) < 24 or head[:4] != b"GGUF":
            raise NlpkitError(f"{path}: truncated or not a GGUF file")
        version, n_tensors, n_kv = struct.unpack("<IQQ", head[4:24])
        if version not in (2, 3):
            raise NlpkitError(f"{path}: GGUF version {version} is not supported (2 or 3)")
        if n_tensors > _MAX_COUNT or n_kv > _MAX_COUNT or (n_tensors + n_kv) * 8 > size:
            raise NlpkitError(f"{path}: GGUF header claims {n_tensors} tensors and {n_kv} metadata keys, "
                              f"impossible in {size} bytes (corrupt file)")
        # metadata + tensor table read through a map: only the header's pages are touched (reading a bounded
        # prefix instead cost 0.3 s per load of a 538 MB file, most of it tensor data)
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            buf = _Buf(data, path)
            buf.pos = 24
            meta = {}
            for _ in range(n_kv):
                key = buf.string()
                meta[key] = buf.value(buf.scalar("<I"))
            infos = []
            for _ in range(n_tensors):
                name = buf.string()
                n_dims = buf.scalar("<I")
                if not 1 <= n_dims <= 4:
                    raise NlpkitError(f"{path}: tensor {name} has {n_dims} dimensions (GGUF allows 1 to 4)")
                dims = [buf.scalar("<Q") for _ in range(n_dims)]
                infos.append((name, dims, buf.scalar("<I"), buf.scalar("<Q")))
    align = meta.get("general.alignment", 32)
    if not isinstance(align, int) or align <= 0 or align & (align - 1):
        raise NlpkitError(f"{path}: GGUF alignment {align!r} is not a power of two")
    data_start = buf.pos
    data_start += -data_start % align
    tensors = []
    for name, dims, ttype, offset in infos:
        try:
            qtype = GGMLQuantizationType(ttype)
            block, type_size = GGML_QUANT_SIZES[qtype]
        except (ValueError, KeyError):
            raise NlpkitError(f"{path}: tensor {name} has unknown GGML type {ttype}") from None
        n = 1
        for d in dims:
            n *= d
        if dims[0] % block or n > 1 << 40:
            raise NlpkitError(f"{path}: tensor {name} has an impossible shape {dims} for {qtype.name}")
        nbytes = n // block * type_size
        start = data_start + offset
        if start + nbytes > size:
            raise NlpkitError(f"{path}: tensor {name} ({qtype.name} {dims}) ends at byte {start + nbytes}, past "
                              f"the end of the {size}-byte file (truncated or corrupt)")
        tensors.append((name, tuple(reversed(dims)), ttype, start, nbytes))  # GGML lists dims innermost first
    return meta, tensors


def _int(meta: dict, key: str, default=None) -> int:
    value = meta.get(key, default)
    if value is None:
        raise NlpkitError(f"GGUF metadata: {key} is missing")
    if isinstance(value, list):
        value = value[0] if value else default
    return int(value)


def config_from_gguf(meta: dict, n_vocab_tokens: int | None, tensor_names: set | None = None) -> ModelConfig:
    """A ModelConfig from GGUF metadata: general.architecture names the family (`families.FAMILIES`), whose
    entry says which options the block uses; biases are read where the file has them (GGUF does not say)."""
    arch = meta.get("general.architecture")
    fam = families.by_gguf_arch(arch)
    if fam is None:
        raise NlpkitError(f"unsupported GGUF architecture {arch!r} (nlpkit reads the GGUF architectures "
                          f"{', '.join(families.GGUF_ARCHS)})")
    names = tensor_names or set()

    def key(name: str) -> str:
        return f"{arch}.{fam.gguf_key(name)}"

    dim, n_heads = _int(meta, key("dim")), _int(meta, key("n_heads"))
    head_dim = _int(meta, key("head_dim"), dim // n_heads if n_heads else 0)
    scaling = None
    kind = meta.get(key("rope_scaling_type"))
    if kind and kind != "none":
        factor = float(meta.get(key("rope_factor"), 1.0))
        kind = {"linear": "linear", "yarn": "yarn"}.get(kind)
        if kind is None:
            raise NlpkitError(f"GGUF metadata: rope scaling {meta[key('rope_scaling_type')]!r} is not supported")
        scaling = {"rope_type": kind, "factor": factor}
        if kind == "yarn":
            scaling["original_max_position_embeddings"] = _int(meta, key("rope_original_context"))
    n_layers = _int(meta, key("n_layers"))
    tensor = families.GGUF_TENSORS
    config = ModelConfig(
        **block_options(fam), vocab_size=_int(meta, key("vocab_size"), n_vocab_tokens), dim=dim,
        n_layers=n_layers, n_heads=n_heads, n_kv_heads=_int(meta, key("n_kv_heads"), n_heads), head_dim=head_dim,
        hidden_dim=_int(meta, key("hidden_dim")), max_seq_len=_int(meta, key("max_seq_len"), 2048),
        norm_eps=float(meta.get(key("norm_eps"), 1e-5)), rope_theta=float(meta.get(key("rope_theta"), 10000.0)),
        rope_scaling=scaling, act=ACT_NAMES[fam.act],
        attention_bias=any(f"blk.0.{tensor[r]}.bias" in names for r in ("q", "qkv")),
        o_bias=f"blk.0.{tensor['o']}.bias" in names, mlp_bias=f"blk.0.{tensor['up']}.bias" in names)
    rot = meta.get(key("rotary_dim"))
    if rot is not None and int(rot) != head_dim:
        config.rotary_dim = int(rot)
    if fam.embed_scale:  # llama.cpp's rules: embeddings scaled by sqrt(d), q by 1/sqrt(head_dim)
        config.embed_scale = math.sqrt(dim)
        big = n_layers == fam.gguf_big_layers  # 27B: by 1/sqrt(d / n_heads)
        config.query_scale = 1.0 / math.sqrt(dim / n_heads if big else head_dim)
    if fam.softcap:
        config.attn_softcap = meta.get(key("attn_softcap")) or None
        config.final_softcap = meta.get(key("final_softcap")) or None
    if fam.sliding in ("all", "pattern"):
        window = meta.get(key("sliding_window"))
        config.sliding_window = int(window) if window else None
        if window and fam.sliding == "pattern":  # llama.cpp's default: every layer_pattern-th layer is global
            pattern = meta.get(key("layer_pattern"), fam.layer_pattern)
            if isinstance(pattern, list):
                config.layer_types = tuple("sliding" if p else "full" for p in pattern)
            else:
                config.layer_types = tuple("sliding" if i % int(pattern) < int(pattern) - 1 else "full"
                                           for i in range(n_layers))
    if fam.local_rope:
        config.rope_local_theta = float(meta.get(key("rope_local_theta"), 10000.0))
    if fam.parallel_residual is not None:
        config.parallel_residual = bool(meta.get(key("parallel_residual"), fam.parallel_residual))
    if fam.no_rope:  # llama.cpp's rule: no RoPE on every no_rope_interval-th layer (no list in the file)
        config.rope_layers = tuple((i + 1) % fam.no_rope_interval != 0 for i in range(n_layers))
    bos, eos = meta.get("tokenizer.ggml.bos_token_id"), meta.get("tokenizer.ggml.eos_token_id")
    config.bos_id = int(bos) if bos is not None else None
    config.eos_id = int(eos) if eos is not None else None
    config.add_bos = gguf_adds_bos(meta) and config.bos_id is not None
    return config


class _Tensors:
    """Tensor data read from the file on demand and dequantized with the gguf package."""

    def __init__(self, tensors: list, path: Path):
        self.path = path
        self.by_name = {t[0]: t for t in tensors}
        self._map: mmap.mmap | None = None  # the file, mapped read-only (native weights view it)

    def __contains__(self, name: str) -> bool:
        return name in self.by_name

    def _entry(self, name: str, shape: tuple[int, ...]) -> tuple[int, int, int]:
        """(type, offset, bytes) of tensor `name`, checked: present, and of the shape the metadata implies."""
        if name not in self.by_name:
            raise NlpkitError(f"{self.path}: tensor {name} is missing")
        _, got, ttype, offset, nbytes = self.by_name[name]
        if tuple(got) != tuple(shape):
            raise NlpkitError(f"{self.path}: tensor {name} has shape {list(got)}, the metadata implies {list(shape)}")
        return ttype, offset, nbytes

    def _rows(self, name: str, shape: tuple[int, ...], r0: int, r1: int) -> np.ndarray:
        """Rows r0..r1 of tensor `name` (flattened to [rows, cols]), dequantized.  # -> [r1 - r0, cols]"""
        from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType
        from gguf.quants import dequantize
        ttype, offset, _ = self._entry(name, shape)
        qtype = GGMLQuantizationType(ttype)
        block, type_size = GGML_QUANT_SIZES[qtype]
        row_bytes = shape[-1] // block * type_size
        raw = np.empty((r1 - r0, row_bytes), np.uint8)
        with open(self.path, "rb") as f:
            f.seek(offset + r0 * row_bytes)
            if f.readinto(memoryview(raw.reshape(-1))) != raw.nbytes:
                raise NlpkitError(f"{self.path}: tensor {name} is truncated")
        try:
            arr = dequantize(raw, qtype)
        except NotImplementedError:
            raise NlpkitError(f"{self.path}: tensor {name} uses {qtype.name}, which gguf cannot dequantize") \
                from None
        return np.asarray(arr, dtype=np.float32).reshape(r1 - r0, shape[-1])

    def part(self, name: str, shape: tuple[int, int]):
        """Tensor `name`'s rows as stored: a `stored_weights.Part` viewing the mapped file (nothing read)."""
        from gguf.constants import GGMLQuantizationType

        from nlpkit.lm.transformer.stored_weights import Part
        ttype, offset, nbytes = self._entry(name, shape)
        qtype = GGMLQuantizationType(ttype)
        check_type(qtype.name, name, str(self.path))
        if self._map is None:
            with open(self.path, "rb") as f:
                self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        if offset + nbytes > len(self._map):
            raise NlpkitError(f"{self.path}: tensor {name} is truncated (the file is shorter than it was)")
        raw = np.frombuffer(self._map, np.uint8, count=nbytes, offset=offset).reshape(shape[0], -1)
        return Part(raw, qtype.name, name)

    def read(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        rows = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
        return np.ascontiguousarray(self._rows(name, shape, 0, rows)).reshape(shape)

    def read_t(self, names: list[str], shapes: list[tuple[int, int]], block: int = 2048) -> np.ndarray:
        """Transposed and concatenated, as `TensorSet.read_t`: [out_i, in] tensors -> one [in, sum out_i] matrix.
        Stacked or small tensors are read whole (a third of the page faults of filling a fresh matrix block by
        block); a large one (an embedding) is dequantized and transposed a block of rows at a time."""
        if len(names) > 1 or shapes[0][0] <= block:
            return np.concatenate([self.read(n, s) for n, s in zip(names, shapes)]).T.copy()
        (name,), (shape,) = names, shapes
        out = np.empty((shape[1], shape[0]), np.float32)
        for r0 in range(0, shape[0], block):
            r1 = min(r0 + block, shape[0])
            out[:, r0:r1] = self._rows(name, shape, r0, r1).T
        return out


def _tokenizer(meta: dict, c: ModelConfig, where: str):
    """nlpkit's tokenizer from GGUF metadata ('gpt2' byte-level or 'llama' SentencePiece BPE), or None."""
    if "tokenizer.ggml.tokens" not in meta:
        return None
    from nlpkit.bpe.gguf_vocab import spec_from_gguf_metadata
    from nlpkit.bpe.tokenizer import Tokenizer
    spec = spec_from_gguf_metadata(meta, where)
    spec.bos_id, spec.eos_id = c.bos_id, c.eos_id
    return Tokenizer.from_spec(spec)


def load_gguf(path: str | Path, use_cache: bool | None = None, weights: str | None = None,
              purpose: str | None = None, warn=None) -> Model:
    """Read a GGUF file of a supported architecture. Layout (`native.choose`: `weights` auto|native|float32,
    None: auto; `purpose` score|decode for auto): native maps the tensors as stored; float32
    dequantizes them once, at load, and keeps them in the prepared-model cache (use_cache None: unless
    $NLPKIT_NO_CACHE; False: neither read nor write)."""
    path = Path(path)
    meta, tensors = read_gguf_header(path)
    from gguf.constants import GGMLQuantizationType
    odd = {GGMLQuantizationType(t[2]).name for t in tensors} - set(DECODERS)
    layout, why = choose(weights, sum(int(np.prod(t[1], dtype=np.int64)) for t in tensors), purpose, unsupported=odd)
    tokens = meta.get("tokenizer.ggml.tokens")
    ts = _Tensors(tensors, path)
    c = config_from_gguf(meta, len(tokens) if isinstance(tokens, list) else None, set(ts.by_name))
    if "rope_factors_long.weight" in ts:  # longrope (phi3): per-dimension factors as tensors
        half = (c.rotary_dim or c.head_dim) // 2
        a = f"{meta['general.architecture']}.rope.scaling."
        c.rope_scaling = {"rope_type": "longrope",
                          "long_factor": ts.read("rope_factors_long.weight", (half,)).tolist(),
                          "short_factor": ts.read("rope_factors_short.weight", (half,)).tolist(),
                          "original_max_position_embeddings": _int(meta, a + "original_context_length"),
                          "attention_factor": float(meta.get(a + "attn_factor", 1.0))}
    c.validate()
    fam = families.by_gguf_arch(meta.get("general.architecture"))
    # dequantized and transposed once, then mapped from the cache, on a thread while this one builds the tokenizer
    with ThreadPoolExecutor(1, thread_name_prefix="nlpkit-weights") as pool:
        if layout == "native":  # the file mapped as stored: nothing to prepare, no cache entry
            pending = pool.submit(read_block_weights, NativeSource(ts), c, families.gguf_tensor_name,
                                  qk_permuted=fam.gguf_qk_permuted)
        else:
            pending = pool.submit(load_weights, [path], path.name, c, lambda: read_block_weights(
                ts, c, families.gguf_tensor_name, qk_permuted=fam.gguf_qk_permuted), use_cache=use_cache, warn=warn)
        tokenizer, tokenizer_error = None, None
        try:
            tokenizer = _tokenizer(meta, c, str(path))
            if tokenizer is None:
                tokenizer_error = f"its GGUF tokenizer model {meta.get('tokenizer.ggml.model')!r} is not supported"
        except NlpkitError as e:
            tokenizer_error = f"its tokenizer is not supported ({e})"
        weights, cache = pending.result() if layout != "native" else (pending.result(), "")
    model = Model(c, weights, tokenizer, source=str(path))
    model.tokenizer_error = tokenizer_error
    model.weights_layout, model.weights_cache = (layout, why), cache
    return model
