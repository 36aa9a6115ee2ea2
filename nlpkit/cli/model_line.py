"""`-v/--verbose` of the model commands (`perplexity`, `score`, `generate`, `sample`): after each model loads, one
line on stderr saying what was loaded and how (the model's `describe()`, `nlpkit.lm.interface.ModelDescription`), and the weights note
`generate`/`sample --stats` end with. Formatting only: every fact comes from the model.

    nlpkit: model m.gguf: llama, 1.10B parameters, weights native (auto: scoring, ...), 1.14 GB as stored,
    2 threads, prepared-model cache: not used
    nlpkit: BLAS OpenBLAS 0.3.31.188.0, kernel SkylakeX, 2 threads

The BLAS line follows a transformer model's (`nlpkit.lm.threads.blas_info`): its numbers are the same bits at any
thread count or load on one BLAS kernel, and may differ in their last bits on another (another machine).
"""

from __future__ import annotations

import sys

import click

CACHE = {"read": "read", "written": "written", "off": "off", "not written": "not written", "": "not used"}


def verbose_option(f):
    """-v/--verbose: a line per loaded model on stderr (stdout unchanged)."""
    return click.option("-v", "--verbose", is_flag=True,
                        help="After each model loads, say on stderr what it is and how it was loaded: "
                             "architecture, parameters, weights layout and why, bytes held, threads, "
                             "prepared-model cache (stdout unchanged).")(f)


def say_loaded(lm) -> None:
    """The --verbose line of a loaded model, on stderr (even with --quiet: it was asked for); after an engine
    model's (one with threads), the BLAS its products run on."""
    d = lm.describe()
    sys.stderr.write(model_line(_named(d)) + "\n")
    if d.threads is not None:
        from nlpkit.lm.threads import blas_line

        sys.stderr.write(f"nlpkit: BLAS {blas_line()}\n")


ENV = "NLPKIT_WEIGHTS"


def weights_from_environment() -> bool:
    """Whether the running command's weights layout came from $NLPKIT_WEIGHTS rather than --weights: click's
    parameter source of `weights` (ENVIRONMENT, or DEFAULT with the variable set, whichever way the option reads
    it), never the loader's globals."""
    import os

    from click.core import ParameterSource

    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return False
    source = ctx.get_parameter_source("weights")
    if source == ParameterSource.ENVIRONMENT:
        return True
    return source in (None, ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP) and bool(os.environ.get(ENV))


def _named(d):
    """`d` with "asked for" saying who asked: ``set by NLPKIT_WEIGHTS`` when the layout came from the environment."""
    if d.layout_why == "asked for" and weights_from_environment():
        import dataclasses

        return dataclasses.replace(d, layout_why=f"set by {ENV}={d.layout}")
    return d


def model_line(d) -> str:
    """`nlpkit: model NAME: ARCH, SIZE, weights LAYOUT (WHY), BYTES, THREADS, prepared-model cache: WHAT` of a
    `ModelDescription` (the parts it has)."""
    parts = [d.architecture, f"{_count(d.size)} {d.size_unit}"]
    if d.layout:
        parts.append(f"weights {d.layout}" + (f" ({d.layout_why})" if d.layout_why else ""))
    if d.held_bytes is not None:
        held = {"native": "as stored", "float32": "in float32"}.get(d.layout or "", "in memory")
        parts.append(f"{_bytes(d.held_bytes)} {held}")
    if d.threads is not None:
        parts.append(f"{d.threads} thread{'s' if d.threads != 1 else ''}")
    parts.append(f"prepared-model cache: {CACHE.get(d.cache, d.cache)}")
    return f"nlpkit: model {d.name}: " + ", ".join(parts)


def weights_note(lm) -> str:
    """"; weights: native (why)" for a model with a weights layout its loader chose (`--stats`), else ""."""
    d = _named(lm.describe())
    return f"; weights: {d.layout} ({d.layout_why})" if d.layout and d.layout_why else ""


def _count(n: int) -> str:
    """1.10B, 135.0M, 12.3k, 950."""
    for scale, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if n >= scale:
            return f"{n / scale:.{2 if suffix == 'B' else 1}f}{suffix}"
    return str(n)


def _bytes(n: int) -> str:
    """1.14 GB, 4.6 MB, 12.0 kB, 512 B (decimal units, as `docs/weights.md` and the loaders' messages)."""
    for scale, unit, digits in ((1e9, "GB", 2), (1e6, "MB", 1), (1e3, "kB", 1)):
        if n >= scale:
            return f"{n / scale:.{digits}f} {unit}"
    return f"{n} B"


__all__ = ["model_line", "say_loaded", "verbose_option", "weights_from_environment", "weights_note"]
