"""What a model path is, decided in one place: `model_format(path)` sniffs a path without loading it -- an n-gram model
(ARPA or nlpkit counts), a Hugging Face directory or a GGUF file -- or raises the error a load would. The backend
choice (`nlpkit.lm.load.backend_class`), the transformer's loader (`nlpkit.lm.transformer.loaders.load_model`) and
`score`'s check of every model before it loads any all ask it.
"""

from __future__ import annotations

import os
from pathlib import Path

from nlpkit.errors import NlpkitError
from nlpkit.lm.ngram.arpa import sniff
from nlpkit.lm.spec import resolve_path

DEFAULT_MODEL_DIR = Path(__file__).resolve().parent / "default"
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")
NGRAM_SUFFIXES = (".arpa", ".arpa.gz", ".lm", ".lm.gz", ".ngram", ".ngram.gz")   # what n-gram models are named
NGRAM, HF, GGUF = "ngram", "hf", "gguf"


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


def model_format(path: str | os.PathLike | None) -> tuple[str, Path]:
    """What the model at `path` is, sniffed without loading it: (NGRAM, file) for an ARPA or nlpkit counts file
    (plain or .gz), (HF, directory) for a Hugging Face directory (config.json; a config.json or .safetensors file
    names its directory), (GGUF, file) for a GGUF file. Anything else raises the error a load would (missing, a
    pickled checkpoint -- refused, unpickling runs arbitrary code --, unreadable, of no kind nlpkit reads), so that a
    command can check every model before it loads any. None: $NLPKIT_MODEL, else the shipped model."""
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


__all__ = ["DEFAULT_MODEL_DIR", "GGUF", "HF", "NGRAM", "PICKLE_SUFFIXES", "model_format", "resolve_model_path"]
