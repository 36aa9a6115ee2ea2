"""Rotary position embeddings: inverse frequencies for each scaling method, cos/sin tables, and the rotation.

The formulas follow the literature and equal transformers' rope initialization functions
(`modeling_rope_utils.py`) for the same config:

- default:  inv_freq_i = 1 / theta^(2i/d)
- linear:   position interpolation, inv_freq / s
- ntk:      NTK-aware base change, theta' = theta * s^(d/(d-2))  (static)
- dynamic:  transformers' dynamic NTK, theta' = theta * (s*L/L0 - (s-1))^(d/(d-2)) once L > L0
- yarn:     per-dimension ramp between interpolation and extrapolation, attention factor 0.1 ln s + 1
- llama3:   Llama 3.1 wavelength bands
- longrope: Phi-3 per-dimension short/long factors; like transformers, the long factors are used for a whole
            forward call whose last position is past original_max_position_embeddings, the short ones otherwise
            (`Model.forward` recomputes a cache of short-factor keys when decoding crosses that length, as
            transformers' Phi-3 generate does, so cached decoding equals full recomputation)

Rotation uses the Hugging Face "rotate_half" layout (first half / second half of each head);
the GGUF loader permutes Q/K weights into it, so there is one layout here.
"""

from __future__ import annotations

import math

import numpy as np


def default_inv_freq(theta: float, dim: int) -> np.ndarray:  # -> [dim/2]
    return (1.0 / (theta ** (np.arange(0, dim, 2, dtype=np.int64).astype(np.float32) / dim))).astype(np.float32)


def yarn_inv_freq(theta: float, dim: int, s: dict) -> tuple[np.ndarray, float]:  # -> [dim/2], attention factor
    """YaRN (Peng et al. 2023): interpolate low frequencies, keep high ones, linear ramp in between."""
    factor = s["factor"]
    orig = s["original_max_position_embeddings"]
    attn = s.get("attention_factor")
    mscale, mscale_all = s.get("mscale"), s.get("mscale_all_dim")

    def get_mscale(scale: float, m: float = 1.0) -> float:
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    if attn is None:
        attn = get_mscale(factor, mscale) / get_mscale(factor, mscale_all) if mscale and mscale_all \
            else get_mscale(factor)
    beta_fast, beta_slow = s.get("beta_fast") or 32, s.get("beta_slow") or 1

    def correction_dim(rotations: float) -> float:  # dimension index that completes `rotations` turns in `orig`
        return (dim * math.log(orig / (rotations * 2 * math.pi))) / (2 * math.log(theta))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if s.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(dim // 2, dtype=np.float32) - low) / (high - low), 0, 1).astype(np.float32)
    pos_freqs = (theta ** (np.arange(0, dim, 2).astype(np.float32) / dim)).astype(np.float32)
    extrapolation, interpolation = 1.0 / pos_freqs, 1.0 / (factor * pos_freqs)
    keep = 1 - ramp  # 1 = extrapolate (high frequency, kept as is)
    return (interpolation * (1 - keep) + extrapolation * keep).astype(np.float32), float(attn)


def llama3_inv_freq(theta: float, dim: int, s: dict) -> np.ndarray:  # -> [dim/2]
    """Llama 3.1: divide long wavelengths by the factor, keep short ones, blend the band between."""
    inv = default_inv_freq(theta, dim)
    factor, lo, hi = s["factor"], s.get("low_freq_factor", 1.0), s.get("high_freq_factor", 4.0)
    old = s["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv
    scaled = np.where(wavelen > old / lo, inv / factor, inv)
    smooth = (old / wavelen - lo) / (hi - lo)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < old / hi) & ~(wavelen > old / lo)
    return np.where(medium, smoothed, scaled).astype(np.float32)


def longrope_inv_freq(theta: float, dim: int, s: dict, long: bool) -> tuple[np.ndarray, float]:
    """Phi-3 LongRoPE: 1 / (ext_factor_i * theta^(2i/d)); attention factor sqrt(1 + ln f / ln L0)."""
    orig = s["original_max_position_embeddings"]
    factor = s.get("factor") or 1.0
    attn = s.get("attention_factor")
    if attn is None:
        attn = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(orig))
    ext = np.asarray(s["long_factor"] if long else s["short_factor"], dtype=np.float32)
    shape = (np.arange(0, dim, 2, dtype=np.int64).astype(np.float32) / np.float32(dim)).astype(np.float32)
    return (1.0 / (ext * np.float32(theta) ** shape)).astype(np.float32), float(attn)


def inv_freq_for(theta: float, dim: int, scaling: dict | None, max_seq_len: int,
                 seq_len: int | None = None) -> tuple[np.ndarray, float]:  # -> [dim/2], attention factor
    """Inverse frequencies and the cos/sin multiplier for a scaling config (None = plain RoPE)."""
    kind = (scaling or {}).get("rope_type", "default")
    if kind == "default":
        return default_inv_freq(theta, dim), 1.0
    factor = float(scaling.get("factor") or 1.0)
    if kind == "linear":
        return default_inv_freq(theta, dim) / np.float32(factor), 1.0
    if kind == "ntk":
        return default_inv_freq(theta * factor ** (dim / (dim - 2)), dim), 1.0
    if kind == "dynamic":
        L = max(seq_len or max_seq_len, max_seq_len)
        base = theta * ((factor * L / max_seq_len) - (factor - 1)) ** (dim / (dim - 2))
        return default_inv_freq(base, dim), 1.0
    if kind == "yarn":
        return yarn_inv_freq(theta, dim, scaling)
    if kind == "llama3":
        return llama3_inv_freq(theta, dim, scaling), 1.0
    if kind == "longrope":
        return longrope_inv_freq(theta, dim, scaling, long=bool(seq_len and seq_len >
                                                                 scaling["original_max_position_embeddings"]))
    raise ValueError(f"unknown rope type {kind!r}")


class RoPE:
    """cos/sin tables for absolute positions, grown on demand; `dynamic` recomputes per call like transformers."""

    def __init__(self, head_dim: int, theta: float, scaling: dict | None, max_seq_len: int):
        self.head_dim, self.theta, self.scaling, self.max_seq_len = head_dim, theta, scaling, max_seq_len
        self.dynamic = (scaling or {}).get("rope_type") == "dynamic"
        self.inv_freq, self.attention_factor = inv_freq_for(theta, head_dim, scaling, max_seq_len)
        self._cos = self._sin = np.zeros((0, head_dim // 2), np.float32)
        self.long = None
        if (scaling or {}).get("rope_type") == "longrope":  # the long-factor tables, used past this length
            self.long_after = int(scaling["original_max_position_embeddings"])
            inv, _ = longrope_inv_freq(theta, head_dim, scaling, long=True)
            self.long = RoPE(head_dim, theta, None, max_seq_len)
            self.long.inv_freq, self.long.attention_factor = inv, self.attention_factor

    def _table(self, inv_freq: np.ndarray, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        angles = positions.astype(np.float32)[:, None] * inv_freq[None, :]  # [t, hd/2], float32 like transformers
        f = np.float32(self.attention_factor)
        return (np.cos(angles) * f).astype(np.float32), (np.sin(angles) * f).astype(np.float32)

    def cos_sin(self, start: int, t: int) -> tuple[np.ndarray, np.ndarray]:  # -> [t, hd/2], [t, hd/2]
        """Tables for positions start .. start+t-1."""
        if self.long is not None and start + t > self.long_after:
            return self.long.cos_sin(start, t)
        if self.dynamic and start + t > self.max_seq_len:
            inv, _ = inv_freq_for(self.theta, self.head_dim, self.scaling, self.max_seq_len, seq_len=start + t)
            return self._table(inv, np.arange(start, start + t))
        if start + t > len(self._cos):
            n = max(start + t, 2 * len(self._cos), 256)
            self._cos, self._sin = self._table(self.inv_freq, np.arange(n))
        return self._cos[start:start + t], self._sin[start:start + t]


ROPE_BLOCK = 1 << 15  # floats of x per block of rows: the rotation's passes and temporaries stay in cache


def apply_rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """Rotate pairs (i, i + hd/2) of each head by its angle, a block of rows at a time (each element's operations
    are the same whatever the block).  # [b, t, h, hd], [t, hd/2] -> [b, t, h, hd]"""
    half = x.shape[-1] // 2
    out = np.empty(x.shape, x.dtype)
    t = x.shape[1]
    step = max(1, ROPE_BLOCK // max(1, x.shape[0] * x.shape[2] * x.shape[3]))
    for r in range(0, t, step):
        xb, ob = x[:, r:r + step], out[:, r:r + step]
        x1, x2 = xb[..., :half], xb[..., half:]
        c, s = cos[r:r + step, None, :], sin[r:r + step, None, :]  # [n, 1, hd/2] broadcasts over batch and heads
        o1, o2 = ob[..., :half], ob[..., half:]
        np.multiply(x1, c, out=o1)  # x1 c - x2 s, x2 c + x1 s: the same operations in the same order, in place
        o1 -= x2 * s
        np.multiply(x2, c, out=o2)
        o2 += x1 * s
    return out


def apply_rope_partial(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, rot: int) -> np.ndarray:
    """Rotate the first `rot` dims of each head, pass the rest through (gpt_neox rotary_pct, partial_rotary_factor).
    # [b, t, h, hd], [t, rot/2] -> [b, t, h, hd]"""
    out = x.copy()
    out[..., :rot] = apply_rope(x[..., :rot], cos, sin)
    return out
