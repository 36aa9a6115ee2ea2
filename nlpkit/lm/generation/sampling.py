"""Logits processors and token selection: pure numpy over a batch of next-token logits `[b, V]`.

The filters follow Hugging Face transformers' logits processors exactly (semantics and order, as
`GenerationMixin._get_logits_processor` builds the list):

    repetition penalty -> temperature -> top-k -> top-p -> min-p

Repetition penalty also applies in greedy decoding (transformers treats it as a processor, the others
as sampling warpers). Removed tokens get -inf. `temperature == 0` means greedy: the argmax of the
penalized logits. Every function returns a new array and leaves its input alone.

>>> cfg = SamplingConfig(temperature=0.7, top_k=40, top_p=0.9)
>>> filtered = process_logits(logits, seen, cfg)          # [b, V] -> [b, V], -inf where removed
>>> next_ids = select_tokens(filtered, cfg, rng)           # [b, V] -> [b]
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from nlpkit.errors import NlpkitError, UsageError

NEG_INF = np.float32(-np.inf)


@dataclass(frozen=True)
class SamplingConfig:
    """The decoding knobs. Defaults leave the model's distribution untouched (pure sampling).

    temperature 0 = greedy; top_k 0 = disabled; top_p 1.0 = disabled; min_p 0.0 = disabled;
    repetition_penalty 1.0 = disabled.
    """

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    repetition_penalty: float = 1.0

    def validate(self, source: str | None = None) -> "SamplingConfig":
        """Reject values transformers rejects (or that mean nothing), naming the option; with `source`
        (a generation_config.json the values came from) naming that file and its field instead."""
        def bad(key: str, why: str, value) -> Exception:
            if source is not None:
                return NlpkitError(f"{source}: {key} must be {why}, got {value!r}")
            return UsageError(f"--{key.replace('_', '-')} must be {why}, got {value}")

        def number(x) -> bool:
            return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)

        t = self.temperature
        if not (number(t) and t >= 0):
            raise bad("temperature", "a number >= 0 (0 = greedy)", t)
        if not (isinstance(self.top_k, int) and not isinstance(self.top_k, bool) and self.top_k >= 0):
            raise bad("top_k", "an integer >= 0 (0 = disabled)", self.top_k)
        if not (number(self.top_p) and 0.0 < self.top_p <= 1.0):
            raise bad("top_p", "in (0, 1] (1 = disabled)", self.top_p)
        if not (number(self.min_p) and 0.0 <= self.min_p <= 1.0):
            raise bad("min_p", "in [0, 1] (0 = disabled)", self.min_p)
        r = self.repetition_penalty
        if not (number(r) and r > 0):
            raise bad("repetition_penalty", "> 0 (1 = disabled)", r)
        return self

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


# ------------------------------------------------------------------------ the processors

def repetition_penalty(logits: np.ndarray, seen: np.ndarray, penalty: float) -> np.ndarray:
    """Penalize every token already in the sequence once: score / p if score > 0, else score * p.

    `seen` is a boolean mask `[b, V]` (or a `[b, t]` array of token ids). As transformers'
    RepetitionPenaltyLogitsProcessor (the prompt counts as seen).  # [b, V], [b, V] -> [b, V]
    """
    seen = seen_mask(seen, logits.shape[-1]) if seen.dtype != np.bool_ else seen
    p = np.float32(penalty)
    penalized = np.where(logits < 0, logits * p, logits / p)
    return np.where(seen, penalized, logits).astype(_dtype(logits), copy=False)


def _dtype(x: np.ndarray) -> type:
    """float64 for float64 logits (kept exact), float32 for everything else (as transformers)."""
    return np.float64 if x.dtype == np.float64 else np.float32


def seen_mask(ids: np.ndarray, vocab_size: int) -> np.ndarray:
    """Token ids `[b, t]` -> boolean mask `[b, V]` of the ids that occur in each row (ids >= V ignored)."""
    ids = np.asarray(ids)
    if ids.ndim == 1:
        ids = ids[None, :]
    mask = np.zeros((ids.shape[0], vocab_size), dtype=bool)
    rows = np.repeat(np.arange(ids.shape[0]), ids.shape[1])
    flat = ids.reshape(-1)
    ok = (flat >= 0) & (flat < vocab_size)
    mask[rows[ok], flat[ok]] = True
    return mask


def temperature(logits: np.ndarray, t: float) -> np.ndarray:  # [b, V] -> [b, V]
    """Divide the logits by t (TemperatureLogitsWarper); t must be > 0."""
    return (logits / np.float32(t)).astype(_dtype(logits), copy=False)


def top_k(logits: np.ndarray, k: int) -> np.ndarray:  # [b, V] -> [b, V]
    """Keep every token whose logit is >= the k-th largest (ties at the boundary all kept), as TopKLogitsWarper."""
    if k <= 0 or k >= logits.shape[-1]:
        return logits.copy()
    kth = -np.partition(-logits, k - 1, axis=-1)[:, k - 1:k]  # [b, 1]
    return np.where(logits < kth, NEG_INF, logits)


def _softmax(x: np.ndarray) -> np.ndarray:  # [b, V] -> [b, V], rows of -inf stay finite where allowed
    m = np.max(x, axis=-1, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=-1, keepdims=True)


def top_p(logits: np.ndarray, p: float, min_tokens_to_keep: int = 1) -> np.ndarray:  # [b, V] -> [b, V]
    """Nucleus filter as TopPLogitsWarper: sort ascending, cumulative softmax, drop tokens whose
    cumulative probability is <= 1 - p (so the token that crosses the threshold is kept), keep at
    least `min_tokens_to_keep` of the most likely.

    Equal logits straddling the threshold: transformers' torch.sort is unstable there, so which of the
    tied tokens survives is arbitrary; nlpkit keeps the lower ids (deterministic).
    """
    if p >= 1.0:
        return logits.copy()
    order = np.argsort(-logits, axis=-1, kind="stable")[:, ::-1]  # [b, V] ascending, ties by id descending
    sorted_logits = np.take_along_axis(logits, order, axis=-1)
    cum = np.cumsum(_softmax(sorted_logits), axis=-1, dtype=np.float32)  # [b, V]
    remove_sorted = cum <= np.float32(1.0 - p)
    remove_sorted[:, -min_tokens_to_keep:] = False
    remove = np.empty_like(remove_sorted)
    np.put_along_axis(remove, order, remove_sorted, axis=-1)
    return np.where(remove, NEG_INF, logits)


def min_p(logits: np.ndarray, p: float, min_tokens_to_keep: int = 1) -> np.ndarray:  # [b, V] -> [b, V]
    """Drop tokens whose probability is below p * (probability of the top token), as MinPLogitsWarper."""
    if p <= 0.0:
        return logits.copy()
    probs = _softmax(logits)
    remove = probs < np.float32(p) * probs.max(axis=-1, keepdims=True)
    keep = np.argsort(-probs, axis=-1, kind="stable")[:, :min_tokens_to_keep]  # [b, k]
    np.put_along_axis(remove, keep, False, axis=-1)
    return np.where(remove, NEG_INF, logits)


def process_logits(logits: np.ndarray, seen: np.ndarray | None, cfg: SamplingConfig) -> np.ndarray:
    """Apply the configured processors in transformers' order.  # [b, V] -> [b, V]

    Greedy configs get only the repetition penalty (as transformers' greedy search does). Logits are
    float32 as transformers' are; float64 logits (an n-gram model's exact distribution) stay float64.
    """
    x = np.asarray(logits)
    x = x.astype(_dtype(x), copy=False)
    if cfg.repetition_penalty != 1.0 and seen is not None:
        x = repetition_penalty(x, seen, cfg.repetition_penalty)
    if cfg.greedy:
        return x
    if cfg.temperature != 1.0:
        x = temperature(x, cfg.temperature)
    if cfg.top_k:
        x = top_k(x, cfg.top_k)
    if cfg.top_p < 1.0:
        x = top_p(x, cfg.top_p)
    if cfg.min_p > 0.0:
        x = min_p(x, cfg.min_p)
    return x


# ---------------------------------------------------------------------- distributions and draws

def log_softmax(logits: np.ndarray) -> np.ndarray:  # [..., V] -> [..., V] (float64 for exact sums)
    x = np.asarray(logits, dtype=np.float64)
    m = np.max(x, axis=-1, keepdims=True)
    return x - m - np.log(np.sum(np.exp(x - m), axis=-1, keepdims=True))


def token_logprobs(logits: np.ndarray, ids: np.ndarray) -> np.ndarray:  # [b, V], [b] -> [b] float64
    """log softmax(logits)[row, ids[row]] without materializing the whole log-softmax (-inf rows allowed)."""
    rows = np.arange(logits.shape[0])
    m = np.max(logits, axis=-1)  # [b]
    total = np.sum(np.exp(logits - m[:, None]), axis=-1, dtype=np.float64)  # [b]
    return logits[rows, ids].astype(np.float64) - m.astype(np.float64) - np.log(total)


def probabilities(filtered: np.ndarray, cfg: SamplingConfig) -> np.ndarray:  # [b, V] -> [b, V] float64
    """The distribution a draw comes from: softmax of the filtered logits, or one-hot argmax when greedy."""
    if cfg.greedy:
        out = np.zeros(filtered.shape, dtype=np.float64)
        out[np.arange(filtered.shape[0]), np.argmax(filtered, axis=-1)] = 1.0
        return out
    e = np.exp(filtered - np.max(filtered, axis=-1, keepdims=True))  # [b, V], 0 where filtered out
    return e / np.sum(e, axis=-1, keepdims=True, dtype=np.float64)


def draw(probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:  # [b, V] -> [b]
    """One draw per row by inverse CDF, one uniform number per row from `rng`, so a seed fixes the
    whole sequence and a zero-probability (filtered) token can never be chosen."""
    cdf = np.cumsum(probs, axis=-1)  # [b, V]
    u = (1.0 - rng.random(probs.shape[0])) * cdf[:, -1]  # (0, total]
    idx = np.sum(cdf < u[:, None], axis=-1)  # first index with cdf >= u
    return np.minimum(idx, probs.shape[-1] - 1)


def select_tokens(filtered: np.ndarray, cfg: SamplingConfig, rng: np.random.Generator) -> np.ndarray:
    """One token per row: argmax when greedy, else a draw from softmax(filtered).  # [b, V] -> [b]"""
    if cfg.greedy:
        return np.argmax(filtered, axis=-1)
    return draw(probabilities(filtered, cfg), rng)
