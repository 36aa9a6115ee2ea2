"""Which layout a model's weights are held in (`--weights auto|native|float32`), and the tensor source that
keeps them as stored.

native: projections and embeddings stay in the file's precision (F32/F16/BF16 words, GGML blocks), mapped
from the file and expanded per layer while the forward runs (`stored_weights.py`); the load reads no weight
and writes no cache entry, and memory is about the file's size. float32: today's layout, every matrix
dequantized and transposed once and kept in the prepared-model cache (fastest per decode step, 4 bytes a
weight). `auto` takes native for scoring (perplexity, score: batched forwards, where one expansion per
layer is spread over hundreds of rows) and for any model whose float32 copy would not fit comfortably in
the memory available; float32 for decoding a model that fits (a decode step reads every weight once, and
expanding them on each step costs more than reading float32). The layout asked for and what the model is for
are parameters (`nlpkit.lm.spec.LoadSpec`'s `weights` and `purpose`, which the CLI builds from --weights or
$NLPKIT_WEIGHTS and its command); a caller who says no purpose gets float32 for a model that fits.
"""

from __future__ import annotations

from nlpkit.errors import UsageError
from nlpkit.lm.spec import WEIGHTS as LAYOUTS
from nlpkit.lm.transformer.stored_weights import Part, StoredMatrix

FIT_SHARE = 0.6  # auto: float32 only when its copy takes at most this share of the memory available

def requested(weights: str | None = None) -> str:
    """The layout asked for: `weights`, else auto."""
    value = weights if weights is not None else "auto"
    if value not in LAYOUTS:
        raise UsageError(f"`weights` must be one of {', '.join(LAYOUTS)}, got {value!r}")
    return value


def available_memory() -> int | None:
    """MemAvailable from /proc/meminfo, in bytes (None where there is none)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _gb(n: float) -> str:
    return f"{n / 1e9:.2f} GB"


def choose(weights: str | None, n_weights: int, purpose: str | None = None, memory: int | None = None,
           unsupported: set[str] | frozenset = frozenset()) -> tuple[str, str]:
    """(layout, why) for a model of `n_weights` parameters: the request, or auto's choice. `unsupported`: the
    stored types of the model's tensors that cannot be kept as stored (auto then loads float32)."""
    asked = requested(weights)
    if asked != "auto":
        return asked, "asked for"
    if unsupported:
        return "float32", f"auto: its {', '.join(sorted(unsupported))} tensors cannot be kept as stored"
    float32 = 4 * n_weights
    if purpose == "score":
        return "native", "auto: scoring, where a batched forward expands each layer once for all its rows"
    memory = available_memory() if memory is None else memory
    if memory is not None and float32 > FIT_SHARE * memory:
        return "native", (f"auto: its float32 copy ({_gb(float32)}) would not fit comfortably in the "
                          f"{_gb(memory)} of memory available")
    doing = "decoding, and " if purpose == "decode" else ""
    return "float32", f"auto: {doing}its float32 copy ({_gb(float32)}) fits in memory"


class NativeSource:
    """A tensor source (`weights.TensorSource`) whose matrices stay as stored: `read_t` and a 2-D `read` give
    `StoredMatrix`es (rows as the file holds them), 1-D tensors (norms, biases) float32 as before. `ts` is a
    GGUF `_Tensors` or a safetensors `TensorSet` (both offer `part(name, shape)`)."""

    def __init__(self, ts):
        self.ts = ts

    def __contains__(self, name: str) -> bool:
        return name in self.ts

    def read(self, name: str, shape: tuple[int, ...]):
        if len(shape) == 2:  # an untied embedding [V, d]: rows looked up per token
            return StoredMatrix([self._part(name, shape)], shape[1])
        return self.ts.read(name, shape)

    def read_t(self, names: list[str], shapes: list[tuple[int, int]]) -> StoredMatrix:
        return StoredMatrix([self._part(n, s) for n, s in zip(names, shapes)], shapes[0][1])

    def _part(self, name: str, shape: tuple[int, int]) -> Part:
        return self.ts.part(name, shape)


__all__ = ["LAYOUTS", "NativeSource", "available_memory", "choose", "requested"]
