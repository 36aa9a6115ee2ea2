"""`load_model(path)`: a Hugging Face model directory or a GGUF file -> `Model`.

None means `$NLPKIT_MODEL`, else the default model shipped in `nlpkit/lm/default/`. What the path is (and the error
for a path that is no model nlpkit reads, a pickled checkpoint among them) is decided in one place,
`nlpkit.lm.model_files.model_format`.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from nlpkit.errors import NlpkitError
from nlpkit.lm.model_files import DEFAULT_MODEL_DIR, NGRAM, model_format, resolve_model_path  # noqa: F401 - the API


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
    fmt, p = model_format(path)
    if fmt == NGRAM:
        raise NlpkitError(f"{p}: an n-gram model, not a transformer: load it with "
                          "`nlpkit.lm.load.load_language_model`")
    if p.is_dir():
        from nlpkit.lm.transformer.loaders.hf import load_hf_dir
        with _named(p / "config.json", p / "model.safetensors"):
            model = load_hf_dir(p, use_cache, weights, purpose, warn)
    else:
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


__all__ = ["load_model", "resolve_model_path", "DEFAULT_MODEL_DIR"]
