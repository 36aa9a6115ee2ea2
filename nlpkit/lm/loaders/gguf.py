"""Load a GGUF file (llama architecture) into a `Model`: metadata -> config, tensors dequantized by `gguf`.

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

import struct
from pathlib import Path

import numpy as np

from nlpkit.errors import NlpkitError
from nlpkit.lm.config import ModelConfig
from nlpkit.lm.model import LlamaLayer, Model, Weights

_MAX_COUNT = 1 << 20  # tensors or metadata keys beyond real files' sizes: a corrupt header
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


class _Buf:
    """Sequential little-endian reads over a GGUF header; running off the end is an NlpkitError."""

    def __init__(self, data: bytes, path: Path):
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
        buf = _Buf(f.read(min(size, 512 << 20)), path)  # metadata + tensor table (bounded)
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
    data_start = 24 + buf.pos
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


def config_from_gguf(meta: dict, n_vocab_tokens: int | None) -> ModelConfig:
    arch = meta.get("general.architecture")
    if arch != "llama":
        raise NlpkitError(f"unsupported GGUF architecture {arch!r} (nlpkit loads llama-architecture GGUF files)")
    a = arch + "."
    dim, n_heads = _int(meta, a + "embedding_length"), _int(meta, a + "attention.head_count")
    head_dim = _int(meta, a + "attention.key_length", dim // n_heads if n_heads else 0)
    scaling = None
    kind = meta.get(a + "rope.scaling.type")
    if kind and kind != "none":
        factor = float(meta.get(a + "rope.scaling.factor", 1.0))
        kind = {"linear": "linear", "yarn": "yarn"}.get(kind)
        if kind is None:
            raise NlpkitError(f"GGUF metadata: rope scaling {meta[a + 'rope.scaling.type']!r} is not supported")
        scaling = {"rope_type": kind, "factor": factor}
        if kind == "yarn":
            scaling["original_max_position_embeddings"] = _int(meta, a + "rope.scaling.original_context_length")
    config = ModelConfig(
        arch="llama", vocab_size=_int(meta, a + "vocab_size", n_vocab_tokens), dim=dim,
        n_layers=_int(meta, a + "block_count"), n_heads=n_heads,
        n_kv_heads=_int(meta, a + "attention.head_count_kv", n_heads), head_dim=head_dim,
        hidden_dim=_int(meta, a + "feed_forward_length"), max_seq_len=_int(meta, a + "context_length", 2048),
        norm_eps=float(meta.get(a + "attention.layer_norm_rms_epsilon", 1e-5)),
        rope_theta=float(meta.get(a + "rope.freq_base", 10000.0)), rope_scaling=scaling)
    rot = meta.get(a + "rope.dimension_count")
    if rot is not None and int(rot) != head_dim:
        raise NlpkitError(f"GGUF metadata: partial rotary embeddings (rope.dimension_count {rot} < head_dim "
                          f"{head_dim}) are not supported")
    bos, eos = meta.get("tokenizer.ggml.bos_token_id"), meta.get("tokenizer.ggml.eos_token_id")
    config.bos_id = int(bos) if bos is not None else None
    config.eos_id = int(eos) if eos is not None else None
    config.add_bos = bool(meta.get("tokenizer.ggml.add_bos_token", False)) and config.bos_id is not None
    return config.validate()


def unpermute_qk(w: np.ndarray, n_heads: int) -> np.ndarray:
    """llama.cpp's interleaved rows back to HF rotate-half rows.  # [nh hd, d] -> [nh hd, d]"""
    rows, d = w.shape
    return w.reshape(n_heads, rows // n_heads // 2, 2, d).swapaxes(1, 2).reshape(rows, d)


class _Tensors:
    """Tensor data read from the file on demand and dequantized with the gguf package."""

    def __init__(self, tensors: list, path: Path):
        self.path = path
        self.by_name = {t[0]: t for t in tensors}

    def __contains__(self, name: str) -> bool:
        return name in self.by_name

    def _rows(self, name: str, shape: tuple[int, ...], r0: int, r1: int) -> np.ndarray:
        """Rows r0..r1 of tensor `name` (flattened to [rows, cols]), dequantized.  # -> [r1 - r0, cols]"""
        from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType
        from gguf.quants import dequantize
        if name not in self.by_name:
            raise NlpkitError(f"{self.path}: tensor {name} is missing")
        _, got, ttype, offset, _ = self.by_name[name]
        if tuple(got) != tuple(shape):
            raise NlpkitError(f"{self.path}: tensor {name} has shape {list(got)}, the metadata implies {list(shape)}")
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

    def read(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        rows = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
        return np.ascontiguousarray(self._rows(name, shape, 0, rows)).reshape(shape)

    def read_t(self, name: str, shape: tuple[int, int], block: int = 2048) -> np.ndarray:
        """The transpose [in, out] of an [out, in] matrix, dequantized and transposed a block of rows at a time."""
        out = np.empty((shape[1], shape[0]), np.float32)
        for r0 in range(0, shape[0], block):
            r1 = min(r0 + block, shape[0])
            out[:, r0:r1] = self._rows(name, shape, r0, r1).T
        return out


def _tokenizer(meta: dict, c: ModelConfig):
    """nlpkit's byte-level BPE tokenizer from GGUF metadata (GPT-2-style models), or None."""
    if meta.get("tokenizer.ggml.model") != "gpt2" or "tokenizer.ggml.tokens" not in meta:
        return None
    from nlpkit.bpe.formats import from_gguf_metadata
    from nlpkit.bpe.tokenizer import Tokenizer
    spec = from_gguf_metadata(meta["tokenizer.ggml.tokens"], meta.get("tokenizer.ggml.merges", []),
                              pre=meta.get("tokenizer.ggml.pre"), token_types=meta.get("tokenizer.ggml.token_type"),
                              bos_id=c.bos_id, eos_id=c.eos_id)
    return Tokenizer.from_spec(spec)


def load_gguf(path: str | Path) -> Model:
    """Read a llama-architecture GGUF file; quantized tensors are dequantized to float32 once, at load."""
    path = Path(path)
    meta, tensors = read_gguf_header(path)
    tokens = meta.get("tokenizer.ggml.tokens")
    c = config_from_gguf(meta, len(tokens) if isinstance(tokens, list) else None)
    ts = _Tensors(tensors, path)
    d, nh, nkv, hd, h = c.dim, c.n_heads, c.n_kv_heads, c.head_dim, c.hidden_dim
    layers = []
    for i in range(c.n_layers):
        a = f"blk.{i}."
        q = unpermute_qk(ts.read(a + "attn_q.weight", (nh * hd, d)), nh)
        k = unpermute_qk(ts.read(a + "attn_k.weight", (nkv * hd, d)), nkv)
        v = ts.read(a + "attn_v.weight", (nkv * hd, d))
        gate, up = ts.read(a + "ffn_gate.weight", (h, d)), ts.read(a + "ffn_up.weight", (h, d))
        layers.append(LlamaLayer(  # [out, in] -> [in, out], fused
            attn_norm=ts.read(a + "attn_norm.weight", (d,)), wqkv=np.concatenate([q, k, v]).T.copy(),
            wo=ts.read_t(a + "attn_output.weight", (d, nh * hd)), mlp_norm=ts.read(a + "ffn_norm.weight", (d,)),
            w_gate_up=np.concatenate([gate, up]).T.copy(), w_down=ts.read_t(a + "ffn_down.weight", (d, h))))
        del q, k, v, gate, up
    c.tie_embeddings = "output.weight" not in ts
    if c.tie_embeddings:
        embed, lm_head = None, ts.read_t("token_embd.weight", (c.vocab_size, d))
    else:
        embed = ts.read("token_embd.weight", (c.vocab_size, d))
        lm_head = ts.read_t("output.weight", (c.vocab_size, d))
    weights = Weights(lm_head=lm_head, embed=embed, layers=layers, norm_g=ts.read("output_norm.weight", (d,)))
    tok = _tokenizer(meta, c)
    return Model(c, weights, tok, source=str(path))
