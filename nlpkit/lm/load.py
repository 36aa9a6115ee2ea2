"""`load_language_model(spec)`: sniff a model path and load the backend that reads it, as a `LoadSpec` says.

An ARPA or nlpkit counts file (plain or .gz) is an n-gram model (`NgramLM`); anything else -- a Hugging
Face directory, a GGUF file, or None ($NLPKIT_MODEL, else the model shipped in `nlpkit/lm/default/`) --
is read by the transformer engine (`TransformerLM`). Both answer `nlpkit.lm.interface.LanguageModel`.

    >>> lm = load_language_model("lm.arpa")        # doctest: +SKIP
    >>> lm.kind
    'ngram'
"""

from __future__ import annotations

import os
from typing import Callable

from nlpkit.lm.model_files import NGRAM, model_format
from nlpkit.lm.spec import LoadSpec


def backend_class(path: str | os.PathLike | None) -> type:
    """The backend that reads `path`, found by sniffing the file without loading it (`nlpkit.lm.model_files.model_format`):
    a class with `kind`, `described`, `capabilities` and `why_not` (what it cannot do, with why). A path that is no
    model goes to the transformer, whose load says why."""
    from nlpkit.errors import NlpkitError

    try:
        fmt, _ = model_format(path)
    except NlpkitError:
        fmt = None
    if fmt == NGRAM:
        from nlpkit.lm.ngram.ngram_lm import NgramLM

        return NgramLM
    from nlpkit.lm.transformer.transformer_lm import TransformerLM

    return TransformerLM


def load_language_model(spec: LoadSpec | str | os.PathLike | None = None, *, rope_scaling: str | None = None,
                        rope_factor: float | None = None, warn: Callable[[str], None] | None = None):
    """The model `spec` names behind `LanguageModel`, loaded as it says (a path alone: `LoadSpec(path)` with
    these RoPE options). RoPE options and the weights layout apply to a transformer (an n-gram model has no
    positions and no layout); `warn` receives a loader's warnings (an n-gram model without ``<unk>``, ...)."""
    if not isinstance(spec, LoadSpec):
        spec = LoadSpec(spec, rope_scaling=rope_scaling, rope_factor=rope_factor)
    return backend_class(spec.path).load(spec, warn=warn)
