"""The forward pass's elementwise and row-wise building blocks: projections, norms, activations, masks.

`linear` (a plain or a native-weights projection), `rms_norm`, `layer_norm`, the MLP activations
(`ACTIVATIONS`), `softcap_` and `causal_mask`: small functions with their shape contracts, used by the
per-family rows (`family_rows`), the forward (`model`) and batched decoding (`batch_decoding`).
"""

from __future__ import annotations

import numpy as np

from nlpkit.lm.transformer.products import ROW_ALIGN, matmul_rows, round_up
from nlpkit.lm.transformer.stored_weights import is_stored


def linear(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None,
           pad: bool = True) -> np.ndarray:  # [..., in] -> [..., out]
    """x @ w (+ b), its rows padded as `products.matmul_rows` pads them (a row's bits: its content and its index
    modulo ROW_ALIGN); a batch of sequences [b, t, in] has each sequence's rows start at a multiple of ROW_ALIGN.
    `pad` False: the rows as they are (a batched decode step's, `matmul_rows`)."""
    if pad and x.ndim == 3 and x.shape[0] > 1 and x.shape[1] > 1 and x.shape[1] % ROW_ALIGN:
        bsz, t, d = x.shape
        xp = np.zeros((bsz, round_up(t), d), np.float32)
        xp[:, :t] = x
        return np.ascontiguousarray(linear(xp, w, b)[:, :t])
    if is_stored(w):  # native weights ([out, in] as stored): expanded a tile of rows at a time
        y = w.matmul_t(x.reshape(-1, x.shape[-1]), pad=pad)
        if b is not None:
            y += b
        return y.reshape(*x.shape[:-1], w.rows)
    y = matmul_rows(x.reshape(-1, x.shape[-1]), w, pad=pad)  # w: [in, out]
    if b is not None:
        y += b
    return y.reshape(*x.shape[:-1], w.shape[1])


def _sum_sq(x: np.ndarray) -> np.ndarray:  # [..., d] -> [...]  one pass, no x * x temporary
    return np.vecdot(x, x) if hasattr(np, "vecdot") else np.einsum("...i,...i->...", x, x)  # numpy < 2: einsum


def rms_norm(x: np.ndarray, g: np.ndarray, eps: float) -> np.ndarray:  # [..., d] -> [..., d]
    rms = _sum_sq(x)[..., None]
    rms *= np.float32(1.0 / x.shape[-1])
    rms += np.float32(eps)
    np.sqrt(rms, out=rms)
    y = np.divide(x, rms)
    y *= g
    return y


def layer_norm(x: np.ndarray, g: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:  # [..., d] -> [..., d]
    mean = np.mean(x, axis=-1, keepdims=True)
    xc = x - mean
    var = np.mean(xc * xc, axis=-1, keepdims=True)
    return xc / np.sqrt(var + np.float32(eps)) * g + b


def silu(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:  # [...] -> [...]  (into `out`, not x)
    d = np.negative(x, out=out)  # one temporary (or `out`), updated in place
    np.exp(d, out=d)
    d += 1.0
    return np.divide(x, d, out=d)


ELEMENT_BLOCK = 1 << 16  # floats per row block of an elementwise chain: its passes stay in a core's L2 cache


def silu_times(gu: np.ndarray, h: int) -> np.ndarray:  # [n, 2h] -> [n, h]
    """silu(gate) * up of a fused gate/up product's rows (gate the first h columns), a block of rows at a time so
    that the chain's passes (negate, exp, add, divide, multiply) run on a block held in cache instead of streaming
    the whole [n, h] through memory five times: the same operations on each element, so the same bits."""
    n = gu.shape[0]
    a = np.empty((n, h), np.float32)
    step = max(1, ELEMENT_BLOCK // h)
    for r in range(0, n, step):
        g = gu[r:r + step]
        o = silu(g[:, :h], out=a[r:r + step])
        o *= g[:, h:]
    return a


def gelu_tanh(x: np.ndarray) -> np.ndarray:  # [...] -> [...]
    return 0.5 * x * (1.0 + np.tanh(np.float32(np.sqrt(2.0 / np.pi)) * (x + np.float32(0.044715) * x * x * x)))


def gelu_erf(x: np.ndarray) -> np.ndarray:  # [...] -> [...]  exact GELU, x * Phi(x)
    return 0.5 * x * (1.0 + erf(x * np.float32(1 / np.sqrt(2.0))))


def erf(x: np.ndarray) -> np.ndarray:  # [...] -> [...]
    """erf in float64 by Abramowitz & Stegun 7.1.26 refined by one Newton step (|error| < 1e-9), cast back."""
    z = np.abs(x.astype(np.float64))
    t = 1.0 / (1.0 + 0.3275911 * z)
    y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t \
        * np.exp(-z * z)
    return (np.sign(x) * y).astype(x.dtype)


ACTIVATIONS = {"silu": silu, "gelu_tanh": gelu_tanh, "gelu": gelu_erf}


def softcap_(x: np.ndarray, cap: float) -> np.ndarray:  # [...] -> [...], in place: cap * tanh(x / cap)
    x /= np.float32(cap)
    np.tanh(x, out=x)
    x *= np.float32(cap)
    return x


def causal_mask(t: int, past: int, window: int | None = None) -> np.ndarray:  # -> [t, past + t]
    """0 where visible, -inf above the diagonal (and, with a window W, at keys W or more positions back)."""
    j = np.arange(past + t)[None, :]
    i = np.arange(t)[:, None] + past
    hidden = j > i if window is None else (j > i) | (j <= i - window)
    return np.where(hidden, np.float32(-np.inf), np.float32(0.0)).astype(np.float32)
