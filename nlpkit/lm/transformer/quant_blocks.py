"""Expanding GGML weight blocks to float32: the same floats `gguf.quants.dequantize` gives, much faster.

A stored matrix's rows are runs of blocks along the input dimension (GGUF's layout); each decoder here
takes `raw` ([n_blocks, type_size] uint8, a view of the file's bytes) and writes `out` ([n_blocks,
block_size] float32) in one or two vectorized passes over the output: the codes are unpacked with
shifts and masks on uint8 views (an eighth of the output's bytes), then multiplied by their scale
straight into `out` (numpy casts the int8 codes in its inner loop, so no float32 temporary of the
codes exists). Every float operation is the one gguf does, in its order (d * q, then + m or - dm;
K-quants: d * sc first), so the floats are bit-identical to today's float32 load (tested per type).

Types: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K. Others (IQ*, TQ*, MXFP4, Q2_K,
Q3_K) are refused by `check_type`, naming the tensor.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from nlpkit.errors import NlpkitError

QK_K = 256
_SHIFT8 = np.arange(8, dtype=np.uint8)  # the 8 bits of a byte, lowest first
_F32 = np.float32


def _f16(raw: np.ndarray, at: int) -> np.ndarray:  # [n, size] uint8 -> [n, 1] float32  (an fp16 at byte `at`)
    return raw[:, at:at + 2].view(np.float16).astype(_F32)


def _nibbles(qs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # [..., k] uint8 -> low, high [..., k] uint8
    return qs & np.uint8(0x0F), qs >> np.uint8(4)


def _high_bits(qh: np.ndarray) -> np.ndarray:  # [n, 4] uint8 (a little-endian u32) -> [n, 32] uint8 of 0/16
    """Bit i of the 32-bit word, moved to bit 4 (Q5_0/Q5_1's fifth bit of weight i)."""
    bits = (qh[:, :, None] >> _SHIFT8) & np.uint8(1)  # [n, 4, 8]: byte i // 8, bit i % 8
    return (bits << np.uint8(4)).reshape(len(qh), 32)


def f32(raw, out):  # [n, 4] -> [n, 1]
    out[...] = raw.view(_F32)


def f16(raw, out):  # [n, 2] -> [n, 1]
    out[...] = raw.view(np.float16)


def bf16(raw, out):  # [n, 2] -> [n, 1]  bfloat16 is the top half of a float32
    np.left_shift(raw.view(np.uint16), np.uint32(16), out=out.view(np.uint32), dtype=np.uint32)


def q8_0(raw, out):  # [n, 34] -> [n, 32]
    np.multiply(raw[:, 2:].view(np.int8), _f16(raw, 0), out=out)


def q4_0(raw, out):  # [n, 18] -> [n, 32]  weights 0..15 low nibbles, 16..31 high nibbles, minus 8
    d = _f16(raw, 0)
    lo, hi = _nibbles(raw[:, 2:])
    np.multiply((lo.view(np.int8) - np.int8(8)), d, out=out[:, :16])
    np.multiply((hi.view(np.int8) - np.int8(8)), d, out=out[:, 16:])


def q4_1(raw, out):  # [n, 20] -> [n, 32]  d * q + m
    d, m = _f16(raw, 0), _f16(raw, 2)
    lo, hi = _nibbles(raw[:, 4:])
    np.multiply(lo, d, out=out[:, :16])
    np.multiply(hi, d, out=out[:, 16:])
    out += m


def _q5_codes(qh: np.ndarray, qs: np.ndarray) -> np.ndarray:  # [n, 4], [n, 16] -> [n, 32] uint8 (0..31)
    lo, hi = _nibbles(qs)
    q = _high_bits(qh)
    q[:, :16] |= lo
    q[:, 16:] |= hi
    return q


def q5_0(raw, out):  # [n, 22] -> [n, 32]
    q = _q5_codes(raw[:, 2:6], raw[:, 6:]).view(np.int8)
    q -= np.int8(16)
    np.multiply(q, _f16(raw, 0), out=out)


def q5_1(raw, out):  # [n, 24] -> [n, 32]
    np.multiply(_q5_codes(raw[:, 4:8], raw[:, 8:]), _f16(raw, 0), out=out)
    out += _f16(raw, 2)


def _k_scales(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # [n, >=16] -> d * sc, dmin * m: [n, 8, 1] each
    """Q4_K/Q5_K's eight 6-bit scales and mins (12 bytes at offset 4), times the block's fp16 d and dmin."""
    n = len(raw)
    s = raw[:, 4:16].reshape(n, 3, 4)
    d, m, m_d = s[:, 0], s[:, 1], s[:, 2]
    sc = np.concatenate([d & 0x3F, (m_d & 0x0F) | ((d >> 2) & 0x30)], axis=-1)  # [n, 8]
    mn = np.concatenate([m & 0x3F, (m_d >> 4) | ((m >> 2) & 0x30)], axis=-1)
    scale = _f16(raw, 0) * sc.astype(_F32)
    minimum = _f16(raw, 2) * mn.astype(_F32)
    return scale[:, :, None], minimum[:, :, None]


def q4_k(raw, out):  # [n, 144] -> [n, 256]  8 sub-blocks of 32: sub-block 2i low nibbles of qs[32i:], 2i+1 high
    n = len(raw)
    scale, minimum = _k_scales(raw)
    qs = raw[:, 16:].reshape(n, 4, 1, 32)
    o = out.reshape(n, 4, 2, 32)
    np.multiply(qs & np.uint8(0x0F), scale.reshape(n, 4, 2, 1)[:, :, :1], out=o[:, :, :1])
    np.multiply(qs >> np.uint8(4), scale.reshape(n, 4, 2, 1)[:, :, 1:], out=o[:, :, 1:])
    o -= minimum.reshape(n, 4, 2, 1)


def q5_k(raw, out):  # [n, 176] -> [n, 256]  as Q4_K, and bit j of qh[k] is the fifth bit of sub-block j's weight k
    n = len(raw)
    scale, minimum = _k_scales(raw)
    qh, qs = raw[:, 16:48], raw[:, 48:].reshape(n, 4, 32)
    q = ((qh[:, None, :] >> _SHIFT8[:, None]) & np.uint8(1)) << np.uint8(4)  # [n, 8, 32]
    q4 = q.reshape(n, 4, 2, 32)
    q4[:, :, 0] |= qs & np.uint8(0x0F)
    q4[:, :, 1] |= qs >> np.uint8(4)
    o = out.reshape(n, 8, 32)
    np.multiply(q, scale, out=o)
    o -= minimum


def q6_k(raw, out):  # [n, 210] -> [n, 256]  ql 128 | qh 64 | 16 int8 scales | fp16 d; q - 32 in 16 groups of 16
    n = len(raw)
    ql = raw[:, :128].reshape(n, 2, 1, 64)
    qh = raw[:, 128:192].reshape(n, 2, 1, 32)
    scale = _f16(raw, 208) * raw[:, 192:208].view(np.int8).astype(_F32)  # [n, 16]
    q = np.empty((n, 2, 2, 64), np.uint8)  # halves of 128, each: low nibbles of 64, then high nibbles
    q[:, :, 0:1] = ql & np.uint8(0x0F)
    q[:, :, 1:2] = ql >> np.uint8(4)
    q4 = q.reshape(n, 2, 4, 32)
    q4 |= ((qh >> np.array([0, 2, 4, 6], np.uint8)[:, None]) & np.uint8(3)) << np.uint8(4)
    qi = q.view(np.int8)
    qi -= np.int8(32)
    np.multiply(qi.reshape(n, 16, 16), scale[:, :, None], out=out.reshape(n, 16, 16))


# name -> (decoder, weights per block, bytes per block)
DECODERS: dict[str, tuple[Callable[[np.ndarray, np.ndarray], None], int, int]] = {
    "F32": (f32, 1, 4), "F16": (f16, 1, 2), "BF16": (bf16, 1, 2), "Q8_0": (q8_0, 32, 34),
    "Q4_0": (q4_0, 32, 18), "Q4_1": (q4_1, 32, 20), "Q5_0": (q5_0, 32, 22), "Q5_1": (q5_1, 32, 24),
    "Q4_K": (q4_k, QK_K, 144), "Q5_K": (q5_k, QK_K, 176), "Q6_K": (q6_k, QK_K, 210)}


def check_type(type_name: str, tensor: str, where: str = "model weights") -> None:
    """An NlpkitError naming the tensor and its type when nlpkit cannot expand it."""
    if type_name not in DECODERS:
        raise NlpkitError(f"{where}: tensor {tensor} is stored as {type_name}, which nlpkit cannot keep as stored "
                          f"(it expands {', '.join(DECODERS)}); load it with `weights` float32 (dequantized once, "
                          "where gguf can) or use a file quantized to one of those")


def expand_rows(type_name: str, raw: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Rows of stored blocks to float32: raw [rows, row_bytes] uint8 -> out [rows, cols] float32 (C order).
    # [r, row_bytes] -> [r, cols]"""
    decode, block, size = DECODERS[type_name]
    rows = raw.shape[0]
    blocks = np.ascontiguousarray(raw).reshape(-1, size)
    decode(blocks, out.reshape(rows * (out.shape[1] // block), block))
    return out


__all__ = ["DECODERS", "check_type", "expand_rows", "QK_K"]
