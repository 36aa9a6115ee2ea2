"""How far a model's next-token distributions are from a base model's, token by token and in summary.

For each scored token (both models read the same ids through the same windows), from the two logits rows:
- the NLL of the token under the model and under the base;
- KL(base ‖ model) = Σ_v p_base(v) (log p_base(v) − log p_model(v)) over the whole vocabulary;
- Δp = p_model(token) − p_base(token);
- each model's top token (argmax, the first on a tie).
All in float64 from the float32 logits, exactly: no vocabulary entry is dropped. (llama.cpp's
`--kl-divergence` reads its base from a file of 16-bit quantized log-probabilities and skips entries
below e^-16: its figures differ from these in the 4th-5th digit.)

The summary (`summarize`) is llama.cpp's `kl_divergence` report (tools/perplexity/perplexity.cpp), built from
per-token values with `nlpkit.lm.uncertainty`: each model's PPL ± its uncertainty, the correlation of their
ln PPL, ln(PPL/PPL_base), PPL ratio and difference ± uncertainties with the covariance term, mean KLD ±, its
extremes and percentiles, mean Δp ±, its extremes and percentiles, RMS Δp ± and the same-top fraction ±.
A token costs five numbers; the logits themselves are never kept beyond one block of rows.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field

import numpy as np

from nlpkit.lm.threads import RowPool, engine_threads
from nlpkit.lm.uncertainty import covariance, mean_and_uncertainty, percentile

KLD_PERCENTILES = (99.9, 99.0, 95.0, 90.0, 50.0, 10.0, 5.0, 1.0, 0.1)  # llama.cpp's list, in its order
DP_PERCENTILES = (99.9, 99.0, 95.0, 90.0, 75.0, 50.0, 25.0, 10.0, 5.0, 1.0, 0.1)
BLOCK = 32  # logits rows converted to float64 at a time: a [32, vocab] temporary, not [t, vocab]


@dataclass
class TokenComparison:
    """Per scored token, in scoring order: NLL under model and base, KL(base ‖ model), top tokens."""

    nll: np.ndarray = field(default_factory=lambda: np.zeros(0))  # [n] float64, nats
    nll_base: np.ndarray = field(default_factory=lambda: np.zeros(0))  # [n] float64
    kld: np.ndarray = field(default_factory=lambda: np.zeros(0))  # [n] float64, nats
    top: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # [n] model's argmax id
    top_base: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # [n] base's argmax id

    def __len__(self) -> int:
        return len(self.nll)

    @property
    def p_diff(self) -> np.ndarray:  # [n]
        """Δp = p_model(token) − p_base(token)."""
        return np.exp(-self.nll) - np.exp(-self.nll_base)

    @classmethod
    def concat(cls, parts: list[TokenComparison]) -> TokenComparison:
        """The tokens of several windows (or texts) in order: [n1], [n2], ... -> [n1 + n2 + ...]."""
        if not parts:
            return cls()
        return cls(*(np.concatenate([getattr(p, f) for p in parts])
                     for f in ("nll", "nll_base", "kld", "top", "top_base")))


def _exp_shifted(x: np.ndarray, out: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # [n, V] -> [n], [n]
    """out = exp(x - max) per row; returns (Σ out, log-sum-exp of x), float64."""
    m = x.max(axis=-1)  # [n]
    np.subtract(x, m[:, None], out=out)
    np.exp(out, out=out)
    s = out.sum(axis=-1)  # [n]
    return s, m + np.log(s)


_BUFFERS = threading.local()


def _buffer(n: int, v: int) -> np.ndarray:  # -> [3, n, V] float64
    """This thread's float64 work rows, kept between calls: a fresh 37 MB array per chunk cost page faults
    (system time) comparable to the arithmetic."""
    buf = getattr(_BUFFERS, "buf", None)
    if buf is None or buf.shape[1] < n or buf.shape[2] != v:
        buf = _BUFFERS.buf = np.empty((3, n, v))
    return buf


def compare_logits(logits: np.ndarray, base_logits: np.ndarray, targets: np.ndarray,
                   block: int = BLOCK) -> TokenComparison:  # [t, V], [t, V], [t] -> t tokens
    """Compare two models' logits rows for the same targets (row i predicts targets[i]).

    >>> x = np.array([[0.0, 1.0, 2.0]], np.float32)
    >>> compare_logits(x, x, np.array([2])).kld
    array([0.])
    """
    if logits.shape != base_logits.shape:
        raise ValueError(f"logits shapes differ: {logits.shape} and base {base_logits.shape}")
    t, v = logits.shape
    targets = np.asarray(targets, dtype=np.int64)
    out = TokenComparison(np.empty(t), np.empty(t), np.empty(t), logits.argmax(axis=-1).astype(np.int64),
                          base_logits.argmax(axis=-1).astype(np.int64))

    def rows(starts: list[int]) -> None:
        buf = _buffer(min(block, t), v)  # [3, block, V] float64: the model's rows, the base's, exponentials
        for r0 in starts:
            span = slice(r0, r0 + block)
            tg = targets[span]  # [n]
            n, at = len(tg), np.arange(len(tg))
            x, xb, e = buf[0, :n], buf[1, :n], buf[2, :n]  # [n, V] each
            x[...] = logits[span]
            xb[...] = base_logits[span]
            _, lse = _exp_shifted(x, e)  # [n]
            sb, lse_b = _exp_shifted(xb, e)  # e = exp(xb - max): p_base = e / sb
            out.nll[span] = lse - x[at, tg]
            out.nll_base[span] = lse_b - xb[at, tg]
            # Σ p_b (log p_b − log p) = Σ p_b (xb − x) − (lse_b − lse)
            xb -= x
            out.kld[span] = np.einsum("ij,ij->i", e, xb) / sb - (lse_b - lse)

    starts = list(range(0, t, block))
    n = engine_threads() if len(starts) > 1 else 1
    if n > 1:  # numpy releases the GIL in these loops: blocks run in parallel threads, each row as alone
        RowPool(n).map(rows, [starts[i::n] for i in range(n)])
    else:
        rows(starts)
    return out


@dataclass
class Divergence:
    """llama.cpp's `--kl-divergence` statistics over `tokens` scored tokens (see `summarize`)."""

    tokens: int
    ppl: float
    ppl_unc: float
    base_ppl: float
    base_ppl_unc: float
    ln_ppl_cor: float  # correlation of ln PPL(model) and ln PPL(base)
    ln_ppl_ratio: float
    ln_ppl_ratio_unc: float
    ppl_ratio: float
    ppl_ratio_unc: float
    ppl_diff: float
    ppl_diff_unc: float
    kld: float
    kld_unc: float
    kld_max: float
    kld_percentiles: dict[float, float]
    kld_min: float
    dp: float
    dp_unc: float
    dp_max: float
    dp_percentiles: dict[float, float]
    dp_min: float
    rms_dp: float
    rms_dp_unc: float
    same_top: float
    same_top_unc: float


def _sqrt(x: float) -> float:
    return math.sqrt(x) if x > 0 else 0.0  # a variance that rounding made negative counts as 0


def summarize(tc: TokenComparison) -> Divergence:
    """llama.cpp's summary of a comparison (see the module docstring), from the per-token values.

    Uncertainties are llama.cpp's (`nlpkit.lm.uncertainty`): tokens counted as independent draws.
    Two deviations where llama.cpp divides by zero: RMS Δp ± is 0 when every Δp is 0, and the
    same-top ± is NaN for a single token.
    """
    n = len(tc)
    if n == 0:
        raise ValueError("no scored token to summarize")
    nll, nll_b, kld, dp = tc.nll, tc.nll_base, tc.kld, tc.p_diff
    ln_ppl, ln_ppl_unc = mean_and_uncertainty(float(nll.sum()), float((nll * nll).sum()), n)
    ln_base, ln_base_unc = mean_and_uncertainty(float(nll_b.sum()), float((nll_b * nll_b).sum()), n)
    cov = covariance(float(nll.sum()), float(nll_b.sum()), float((nll * nll_b).sum()), n)
    ppl, base_ppl = math.exp(ln_ppl), math.exp(ln_base)
    ppl_unc, base_unc = ppl * ln_ppl_unc, base_ppl * ln_base_unc
    denom = ln_ppl_unc * ln_base_unc
    ln_ratio = ln_ppl - ln_base
    ln_ratio_unc = _sqrt(ln_ppl_unc ** 2 + ln_base_unc ** 2 - 2.0 * cov)
    ratio = math.exp(ln_ratio)
    kld_mean, kld_unc = mean_and_uncertainty(float(kld.sum()), float((kld * kld).sum()), n)
    dp_mean, dp_unc = mean_and_uncertainty(float(dp.sum()), float((dp * dp).sum()), n)
    dp2 = dp * dp
    mse, mse_unc = mean_and_uncertainty(float(dp2.sum()), float((dp2 * dp2).sum()), n)
    rms = math.sqrt(mse)
    same = float(np.count_nonzero(tc.top == tc.top_base)) / n
    ks, ds = np.sort(kld), np.sort(dp)
    return Divergence(
        tokens=n, ppl=ppl, ppl_unc=ppl_unc, base_ppl=base_ppl, base_ppl_unc=base_unc,
        ln_ppl_cor=cov / denom if denom > 0 else float("nan"),
        ln_ppl_ratio=ln_ratio, ln_ppl_ratio_unc=ln_ratio_unc, ppl_ratio=ratio, ppl_ratio_unc=ratio * ln_ratio_unc,
        ppl_diff=ppl - base_ppl,
        ppl_diff_unc=_sqrt(ppl_unc ** 2 + base_unc ** 2 - 2.0 * ppl * base_ppl * cov),
        kld=kld_mean, kld_unc=kld_unc, kld_max=float(ks[-1]),
        kld_percentiles={q: percentile(ks, q / 100) for q in KLD_PERCENTILES}, kld_min=float(ks[0]),
        dp=dp_mean, dp_unc=dp_unc, dp_max=float(ds[-1]),
        dp_percentiles={q: percentile(ds, q / 100) for q in DP_PERCENTILES}, dp_min=float(ds[0]),
        rms_dp=rms, rms_dp_unc=0.5 / rms * mse_unc if mse_unc else 0.0,
        same_top=same, same_top_unc=math.sqrt(same * (1 - same) / (n - 1)) if n > 1 else float("nan"))
