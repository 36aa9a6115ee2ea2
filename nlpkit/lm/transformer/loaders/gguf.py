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

import math
import struct
from pathlib import Path

import numpy as np

from nlpkit.errors import NlpkitError
from nlpkit.lm.transformer.config import ModelConfig
from nlpkit.lm.transformer.model import LlamaLayer, Model, Weights

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


# llama.cpp architecture name -> the nlpkit family it is (Mistral GGUFs are written as "llama")
GGUF_ARCHS = {"llama": "llama", "qwen2": "qwen2", "qwen3": "qwen3", "gemma": "gemma", "gemma2": "gemma2",
              "gemma3": "gemma3_text", "phi3": "phi3", "olmo2": "olmo2", "gptneox": "gpt_neox"}


def config_from_gguf(meta: dict, n_vocab_tokens: int | None, tensor_names: set | None = None) -> ModelConfig:
    arch = meta.get("general.architecture")
    if arch not in GGUF_ARCHS:
        raise NlpkitError(f"unsupported GGUF architecture {arch!r} (nlpkit reads the GGUF architectures "
                          f"{', '.join(GGUF_ARCHS)})")
    family = GGUF_ARCHS[arch]
    names = tensor_names or set()
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
    n_layers = _int(meta, a + "block_count")
    config = ModelConfig(
        arch="llama", family=family, vocab_size=_int(meta, a + "vocab_size", n_vocab_tokens), dim=dim,
        n_layers=n_layers, n_heads=n_heads,
        n_kv_heads=_int(meta, a + "attention.head_count_kv", n_heads), head_dim=head_dim,
        hidden_dim=_int(meta, a + "feed_forward_length"), max_seq_len=_int(meta, a + "context_length", 2048),
        norm_eps=float(meta.get(a + "attention.layer_norm_rms_epsilon", 1e-5)),
        rope_theta=float(meta.get(a + "rope.freq_base", 10000.0)), rope_scaling=scaling)
    rot = meta.get(a + "rope.dimension_count")
    if rot is not None and int(rot) != head_dim:
        config.rotary_dim = int(rot)
    if family == "qwen2":
        config.attention_bias, config.o_bias = "blk.0.attn_q.bias" in names, "blk.0.attn_output.bias" in names
    elif family == "llama":
        config.attention_bias = "blk.0.attn_q.bias" in names
    if family in ("qwen3", "gemma3_text"):
        config.qk_norm = "head"
    if family.startswith("gemma"):  # llama.cpp's rules: embeddings scaled by sqrt(d), q by 1/sqrt(head_dim)
        config.act, config.embed_scale = "gelu_tanh", math.sqrt(dim)
        big = (family == "gemma2" and n_layers == 46) or (family == "gemma3_text" and n_layers == 62)  # 27B
        config.query_scale = 1.0 / math.sqrt(dim / n_heads if big else head_dim)
        config.tie_embeddings = "output.weight" not in names
    if family in ("gemma2", "gemma3_text"):
        config.post_norm = True
        config.attn_softcap = meta.get(a + "attn_logit_softcapping") or None
        config.final_softcap = meta.get(a + "final_logit_softcapping") or None
        window = meta.get(a + "attention.sliding_window")
        if window:  # llama.cpp's default layer patterns: every 2nd (gemma2) / 6th (gemma3) layer is global
            config.sliding_window = int(window)
            pattern = meta.get(a + "attention.sliding_window_pattern", 2 if family == "gemma2" else 6)
            if isinstance(pattern, list):
                config.layer_types = tuple("sliding" if p else "full" for p in pattern)
            else:
                config.layer_types = tuple("sliding" if i % int(pattern) < int(pattern) - 1 else "full"
                                           for i in range(n_layers))
        if family == "gemma3_text":
            config.rope_local_theta = float(meta.get(a + "rope.freq_base_swa", 10000.0))
    if family == "phi3":
        window = meta.get(a + "attention.sliding_window")
        config.sliding_window = int(window) if window else None  # honoured (llama.cpp currently ignores it)
    if family == "olmo2":
        config.pre_norm, config.post_norm, config.qk_norm = False, True, "full"
    if family == "gpt_neox":
        config.norm, config.gated_mlp, config.act = "layer", False, "gelu"
        config.norm_eps = float(meta.get(a + "attention.layer_norm_epsilon", 1e-5))
        config.parallel_residual = bool(meta.get(a + "use_parallel_residual", True))
        config.attention_bias = config.o_bias = "blk.0.attn_qkv.bias" in names
    bos, eos = meta.get("tokenizer.ggml.bos_token_id"), meta.get("tokenizer.ggml.eos_token_id")
    config.bos_id = int(bos) if bos is not None else None
    config.eos_id = int(eos) if eos is not None else None
    config.add_bos = bool(meta.get("tokenizer.ggml.add_bos_token", meta.get("tokenizer.ggml.model") == "llama")) \
        and config.bos_id is not None
    return config


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


def _tokenizer(meta: dict, c: ModelConfig, where: str):
    """nlpkit's tokenizer from GGUF metadata ('gpt2' byte-level or 'llama' SentencePiece BPE), or None."""
    if "tokenizer.ggml.tokens" not in meta:
        return None
    from nlpkit.bpe.gguf_vocab import spec_from_gguf_metadata
    from nlpkit.bpe.tokenizer import Tokenizer
    spec = spec_from_gguf_metadata(meta, where)
    spec.bos_id, spec.eos_id = c.bos_id, c.eos_id
    return Tokenizer.from_spec(spec)


def load_gguf(path: str | Path) -> Model:
    """Read a GGUF file of a supported architecture; quantized tensors are dequantized to float32 once, at load."""
    path = Path(path)
    meta, tensors = read_gguf_header(path)
    tokens = meta.get("tokenizer.ggml.tokens")
    ts = _Tensors(tensors, path)
    c = config_from_gguf(meta, len(tokens) if isinstance(tokens, list) else None, set(ts.by_name))
    if c.family == "phi3" and "rope_factors_long.weight" in ts:  # longrope: per-dimension factors as tensors
        half = (c.rotary_dim or c.head_dim) // 2
        a = "phi3.rope.scaling."
        c.rope_scaling = {"rope_type": "longrope",
                          "long_factor": ts.read("rope_factors_long.weight", (half,)).tolist(),
                          "short_factor": ts.read("rope_factors_short.weight", (half,)).tolist(),
                          "original_max_position_embeddings": _int(meta, a + "original_context_length"),
                          "attention_factor": float(meta.get(a + "attn_factor", 1.0))}
    c.validate()
    d, nh, nkv, hd, h = c.dim, c.n_heads, c.n_kv_heads, c.head_dim, c.hidden_dim
    permuted = c.family == "llama"  # convert_hf_to_gguf permutes q/k rows of llama-arch models only
    layers = []
    for i in range(c.n_layers):
        a = f"blk.{i}."

        def opt(name: str, shape: tuple) -> np.ndarray | None:
            return ts.read(a + name, shape) if a + name in ts else None

        if a + "attn_qkv.weight" in ts:  # phi3, gptneox: fused, rows q heads, k heads, v heads
            wqkv = ts.read_t(a + "attn_qkv.weight", ((nh + 2 * nkv) * hd, d))
            bqkv = opt("attn_qkv.bias", ((nh + 2 * nkv) * hd,))
        else:
            q, k = ts.read(a + "attn_q.weight", (nh * hd, d)), ts.read(a + "attn_k.weight", (nkv * hd, d))
            if permuted:
                q, k = unpermute_qk(q, nh), unpermute_qk(k, nkv)
            wqkv = np.concatenate([q, k, ts.read(a + "attn_v.weight", (nkv * hd, d))]).T.copy()
            del q, k
            bqkv = None
            if c.attention_bias:
                bq, bk = ts.read(a + "attn_q.bias", (nh * hd,)), ts.read(a + "attn_k.bias", (nkv * hd,))
                if permuted:
                    bq, bk = unpermute_qk(bq[:, None], nh)[:, 0], unpermute_qk(bk[:, None], nkv)[:, 0]
                bqkv = np.concatenate([bq, bk, ts.read(a + "attn_v.bias", (nkv * hd,))])
        if not c.gated_mlp:
            w_gate_up = ts.read_t(a + "ffn_up.weight", (h, d))
        elif a + "ffn_gate.weight" in ts:
            w_gate_up = np.concatenate([ts.read(a + "ffn_gate.weight", (h, d)), ts.read(a + "ffn_up.weight", (h, d))]).T.copy()
        else:  # phi3: gate and up fused in ffn_up
            w_gate_up = ts.read_t(a + "ffn_up.weight", (2 * h, d))
        layer = LlamaLayer(  # [out, in] -> [in, out], fused
            attn_norm=opt("attn_norm.weight", (d,)), attn_norm_b=opt("attn_norm.bias", (d,)),
            wqkv=wqkv, bqkv=bqkv, wo=ts.read_t(a + "attn_output.weight", (d, nh * hd)),
            bo=opt("attn_output.bias", (d,)),
            mlp_norm=opt("ffn_norm.weight", (d,)), mlp_norm_b=opt("ffn_norm.bias", (d,)),
            w_gate_up=w_gate_up, w_down=ts.read_t(a + "ffn_down.weight", (d, h)),
            b_up=opt("ffn_up.bias", (h,)), b_down=opt("ffn_down.bias", (d,)),
            attn_post_norm=opt("post_attention_norm.weight", (d,)), mlp_post_norm=opt("post_ffw_norm.weight", (d,)))
        if c.qk_norm:
            qs, ks = ((hd,), (hd,)) if c.qk_norm == "head" else ((nh * hd,), (nkv * hd,))
            layer.q_norm, layer.k_norm = ts.read(a + "attn_q_norm.weight", qs), ts.read(a + "attn_k_norm.weight", ks)
        if c.pre_norm and layer.attn_norm is None:
            raise NlpkitError(f"{path}: tensor {a}attn_norm.weight is missing")
        layers.append(layer)
    c.tie_embeddings = "output.weight" not in ts
    if c.tie_embeddings:
        embed, lm_head = None, ts.read_t("token_embd.weight", (c.vocab_size, d))
    else:
        embed = ts.read("token_embd.weight", (c.vocab_size, d))
        lm_head = ts.read_t("output.weight", (c.vocab_size, d))
    weights = Weights(lm_head=lm_head, embed=embed, layers=layers, norm_g=ts.read("output_norm.weight", (d,)),
                      norm_b=ts.read("output_norm.bias", (d,)) if "output_norm.bias" in ts else None)
    model = Model(c, weights, None, source=str(path))
    try:
        model.tokenizer = _tokenizer(meta, c, str(path))
        if model.tokenizer is None:
            model.tokenizer_error = f"its GGUF tokenizer model {meta.get('tokenizer.ggml.model')!r} is not supported"
    except NlpkitError as e:
        model.tokenizer_error = f"its tokenizer is not supported ({e})"
    return model
