"""`load_model(path)`: a Hugging Face model directory or a GGUF file -> `Model`.

None means `$NLPKIT_MODEL`, else the default model shipped in `nlpkit/lm/default/`.
Pickled checkpoints (.bin/.pt/.pth/.ckpt) are refused: unpickling runs arbitrary code.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from nlpkit.errors import NlpkitError

DEFAULT_MODEL_DIR = Path(__file__).resolve().parents[2] / "default"
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")


def resolve_model_path(path: str | os.PathLike | None) -> Path:
    """The path to load: the argument, else $NLPKIT_MODEL, else the shipped default model."""
    if path is None or str(path) == "":
        env = os.environ.get("NLPKIT_MODEL")
        if env:
            return Path(env)
        if not (DEFAULT_MODEL_DIR / "config.json").is_file():
            raise NlpkitError(f"no model given and the default model is not installed ({DEFAULT_MODEL_DIR} has no "
                              "config.json); pass `model` PATH or set NLPKIT_MODEL")
        return DEFAULT_MODEL_DIR
    return Path(path)


NGRAM_SUFFIXES = (".arpa", ".arpa.gz", ".lm", ".lm.gz", ".ngram", ".ngram.gz")   # what n-gram models are named


def load_model(path: str | os.PathLike | None = None, *, rope_scaling: str | None = None,
               rope_factor: float | None = None, use_cache: bool | None = None, weights: str | None = None,
               purpose: str | None = None, warn=None):
    """Load a model: HF directory (config.json + safetensors) or .gguf file; optional RoPE scaling override.
    The prepared weights come from the prepared-model cache (`nlpkit.lm.prepared`) when they were made
    before from the same files; use_cache=False neither reads nor writes it (None: unless $NLPKIT_NO_CACHE).
    `weights` (auto|native|float32; None: auto) and `purpose` (score|decode) choose the layout
    (`loaders/native.py`); `model.weights_layout` says which and why; `warn` gets the
    loaders' warnings (a cache directory without room).

    >>> model = load_model("tests/fixtures/lm/llama-gqa")   # doctest: +SKIP
    """
    p = resolve_model_path(path)
    if not p.exists():
        raise NlpkitError(f"model path {str(p)!r} does not exist")
    if p.is_file() and p.suffix.lower() in PICKLE_SUFFIXES:
        raise NlpkitError(f"{p}: pickled checkpoints are refused, because loading one can execute arbitrary code; "
                          "use a model.safetensors directory or a .gguf file")
    if p.is_file() and p.name in ("config.json", "model.safetensors") or p.suffix == ".safetensors":
        p = p.parent
    if p.is_dir():
        from nlpkit.lm.transformer.loaders.hf import load_hf_dir
        with _named(p / "config.json", p / "model.safetensors"):
            model = load_hf_dir(p, use_cache, weights, purpose, warn)
    else:
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
        from nlpkit.lm.transformer.loaders.gguf import load_gguf
        with _named(p, p):
            model = load_gguf(p, use_cache, weights, purpose, warn)
    if rope_scaling is not None or rope_factor is not None:
        model.set_rope(rope_scaling, rope_factor)
    return model


@contextmanager
def _named(config_file: Path, weights_file: Path) -> Iterator[None]:
    """Config and weight errors (raised as "model config: ...", "config.json: ...", "model weights: ...",
    without a path) name the file they come from."""
    try:
        yield
    except NlpkitError as e:
        msg = str(e)
        for prefix, file in (("model config: ", config_file), ("model weights: ", weights_file),
                             ("config.json: ", config_file)):
            if msg.startswith(prefix):
                raise NlpkitError(f"{file}: {msg[len(prefix):]}") from None
        raise


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


__all__ = ["load_model", "resolve_model_path", "DEFAULT_MODEL_DIR"]
