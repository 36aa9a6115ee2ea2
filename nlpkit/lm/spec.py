"""`LoadSpec`: how a command loads its model, as one value; `cached_model`: the process's one model cache.

The CLI builds a `LoadSpec` once from its options (-m, --weights or $NLPKIT_WEIGHTS, --no-cache, the RoPE options,
and what the command does with the model: its `purpose`) and hands it to the loader as a parameter
(`nlpkit.lm.load.load_language_model(spec)`); the loaded model keeps it (`describe()` reads it), and its
`worker_key` carries it, so that a Dask worker builds the same model with the same weights layout. No setting
travels by the environment or a module global.

    >>> spec = LoadSpec("model.gguf", weights="native", purpose="score")
    >>> lm = load_language_model(spec)                       # doctest: +SKIP

`cached_model(load, *args)` is `load(*args)` once per process (a Dask worker scores many shards with the same
model): the one model cache, keyed by a module-level loader and its arguments (a `LanguageModel.worker_key`).
It sits at the bottom of `nlpkit.lm` (it imports no backend) so that every backend and task can use it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

WEIGHTS = ("auto", "native", "float32")     # how a transformer's weights are held (`loaders/native.py`)
PURPOSES = ("score", "decode")              # what `auto` weighs: batched forwards, or a token per step


@dataclass(frozen=True)
class LoadSpec:
    """A model and how to load it.

    `path`: a Hugging Face directory, a GGUF file or an n-gram model (None: $NLPKIT_MODEL, else the shipped model);
    `weights`: auto|native|float32 (a transformer's layout); `purpose`: "score" or "decode" (what the command does
    with the model: auto's choice weighs it; None: not said, as decoding); `rope_scaling`/`rope_factor`: a RoPE
    override (a transformer's); `use_cache`: the prepared-model cache (False: --no-cache; None: unless
    $NLPKIT_NO_CACHE)."""

    path: str | None = None
    weights: str = "auto"
    purpose: str | None = None
    rope_scaling: str | None = None
    rope_factor: float | None = None
    use_cache: bool | None = None

    def __post_init__(self) -> None:
        from nlpkit.errors import UsageError

        if self.weights not in WEIGHTS:
            raise UsageError(f"`weights` must be one of {', '.join(WEIGHTS)}, got {self.weights!r}")
        if self.purpose not in (*PURPOSES, None):
            raise UsageError(f"`purpose` must be score or decode, got {self.purpose!r}")
        if self.path is not None and not isinstance(self.path, str):
            object.__setattr__(self, "path", str(self.path))


def resolve_path(path: str | os.PathLike | None) -> str | None:
    """The model path: `path`, else $NLPKIT_MODEL, else None (the shipped model)."""
    return str(path) if path else (os.environ.get("NLPKIT_MODEL") or None)


# ------------------------------------------------------------------ what a model path is (decided here alone)

DEFAULT_MODEL_DIR = Path(__file__).resolve().parent / "default"
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")
NGRAM_SUFFIXES = (".arpa", ".arpa.gz", ".lm", ".lm.gz", ".ngram", ".ngram.gz")   # what n-gram models are named
NGRAM, HF, GGUF = "ngram", "hf", "gguf"


def resolve_model_path(path: str | os.PathLike | None) -> Path:
    """The path to load: the argument, else $NLPKIT_MODEL, else the shipped default model."""
    from nlpkit.errors import NlpkitError

    if path is None or str(path) == "":
        env = os.environ.get("NLPKIT_MODEL")
        if env:
            return Path(env)
        if not (DEFAULT_MODEL_DIR / "config.json").is_file():
            raise NlpkitError(f"no model given and the default model is not installed ({DEFAULT_MODEL_DIR} has no "
                              "config.json); pass `model` PATH or set NLPKIT_MODEL")
        return DEFAULT_MODEL_DIR
    return Path(path)


def model_format(path: str | os.PathLike | None) -> tuple[str, Path]:
    """What the model at `path` is, sniffed without loading it: (NGRAM, file) for an ARPA or nlpkit counts file
    (plain or .gz), (HF, directory) for a Hugging Face directory (config.json; a config.json or .safetensors file
    names its directory), (GGUF, file) for a GGUF file. Anything else raises the error a load would (missing, a
    pickled checkpoint -- refused, unpickling runs arbitrary code --, unreadable, of no kind nlpkit reads), so that a
    command can check every model before it loads any. None: $NLPKIT_MODEL, else the shipped model."""
    from nlpkit.errors import NlpkitError
    from nlpkit.lm.ngram.arpa import sniff

    given = resolve_path(path)
    if given is not None and "://" not in given and os.path.exists(given) and sniff(given) is not None:
        return NGRAM, Path(given)
    p = resolve_model_path(given)
    if not p.exists():
        raise NlpkitError(f"model path {str(p)!r} does not exist")
    if p.is_file() and p.suffix.lower() in PICKLE_SUFFIXES:
        raise NlpkitError(f"{p}: pickled checkpoints are refused, because loading one can execute arbitrary code; "
                          "use a model.safetensors directory or a .gguf file")
    if p.is_file() and p.name in ("config.json", "model.safetensors") or p.suffix == ".safetensors":
        p = p.parent
    if p.is_dir():
        if not (p / "config.json").is_file():
            raise NlpkitError(f"{p}: not a model directory (no config.json); pass a Hugging Face model "
                              "directory or a .gguf file")
        return HF, p
    try:
        with open(p, "rb") as f:
            magic = f.read(4)
    except OSError as e:
        raise NlpkitError(f"{p}: cannot read: {e.strerror or e}") from None
    if magic != b"GGUF":
        if any(p.name.lower().endswith(s) for s in NGRAM_SUFFIXES):
            raise NlpkitError(f"{p}: not an n-gram model: no \\data\\ (ARPA) or \\counts\\ (nlpkit) line "
                              f"before its first entry{_why_not_text(p, magic)}")
        raise NlpkitError(f"{p}: not a GGUF file or a model directory (expected a Hugging Face directory with "
                          "config.json, a .gguf file, or an n-gram model: ARPA or nlpkit counts)")
    return GGUF, p


def _why_not_text(p: Path, magic: bytes) -> str:
    """Why a file named like an n-gram model has no text to read, when that is the reason."""
    if p.stat().st_size == 0:
        return " (the file is empty)"
    if magic[:2] == b"\x1f\x8b":
        import gzip

        try:
            with gzip.open(p) as f:
                return " (it decompresses to nothing)" if not f.read(1) else ""
        except (OSError, EOFError):
            return " (a gzip file that does not decompress)"
    return ""


_MODEL_CACHE: dict[tuple, Any] = {}


def cached_model(load: Callable, *args):
    """`load(*args)`, once per process: a `LanguageModel.worker_key` is such a (loader, arguments) tuple, the loader a
    module-level function or a backend's `load` (it travels by name). The last four stay loaded (perplexity --compare
    runs a model and its base in every task; `score` its models and a reference)."""
    key = (load, *args)
    model = _MODEL_CACHE.get(key)
    if model is None:
        while len(_MODEL_CACHE) >= 4:  # a model and its base, score's models and reference, stay loaded
            _MODEL_CACHE.pop(next(iter(_MODEL_CACHE)))
        model = _MODEL_CACHE[key] = load(*args)
    return model


__all__ = ["DEFAULT_MODEL_DIR", "GGUF", "HF", "LoadSpec", "NGRAM", "PURPOSES", "WEIGHTS", "cached_model", "model_format",
           "resolve_model_path", "resolve_path"]
