"""The `--stats` line of `generate` and `sample` (one generation, or a batched run's totals), on stderr: counts with
their unit in the right number (`1 token`, `2 tokens`, `1 step`), rates only where there is time to divide by (never
`inf tok/s`), the seed, and the weights note (`model_line.weights_note`). Formatting only: the numbers come from
`GenerationStats` / `BatchStats`."""

from __future__ import annotations


def counted(n: int, unit: str) -> str:
    """`n` and `unit` (given plural: tokens, words, steps, rows, sequences) in the number `n` calls for.

    >>> counted(1, "tokens"), counted(0, "tokens"), counted(2, "steps"), counted(1, "words")
    ('1 token', '0 tokens', '2 steps', '1 word')
    """
    return f"{n} {unit[:-1] if n == 1 and unit.endswith('s') else unit}"


def rate(n: float, seconds: float, per_s: str) -> str | None:
    """`n / seconds` as ``12.3 tok/s``; None when there is nothing to divide (no time measured, nothing done), where
    the line used to say ``inf tok/s``."""
    if n <= 0 or not seconds > 0:
        return None
    return f"{n / seconds:.1f} {per_s}"


def per_second(unit: str) -> str:
    """tokens -> tok/s, words -> words/s."""
    return "tok/s" if unit == "tokens" else f"{unit}/s"


def _timed(what: str, seconds: float, speed: str | None, more: str = "") -> str:
    inside = ", ".join(x for x in (speed, more) if x)
    return f"{what} in {seconds:.3f} s" + (f" ({inside})" if inside else "")


def stats_line(unit: str, stats, seed: int | None, warm_seconds: float | None, weights: str = "") -> str:
    """One generation's line (`GenerationStats`; a batch of rows from one prompt counts each row's tokens)."""
    per_s = per_second(unit)
    warm = f"warm-up: {warm_seconds:.3f} s; " if warm_seconds is not None else ""
    rows = f" x {counted(stats.batch, 'rows')}" if stats.batch > 1 else ""
    new = f"{stats.new_tokens}{rows} {unit}" if rows else counted(stats.new_tokens, unit)
    prefill = _timed(f"prefill: {counted(stats.prompt_tokens, unit)}", stats.prefill_seconds,
                     rate(stats.prompt_tokens, stats.prefill_seconds, per_s))
    decode = _timed(f"decode: {new}", stats.decode_seconds,
                    rate(stats.new_tokens * stats.batch, stats.decode_seconds, per_s))
    return (f"{warm}{prefill}; {decode}; finish: {stats.finish}" + (f"; seed: {seed}" if seed is not None else "")
            + weights)


def batch_stats_line(unit: str, stats, seed: int | None, warm_seconds: float | None, weights: str = "") -> str:
    """A batched run's line (`BatchStats`): totals over every sequence."""
    per_s = per_second(unit)
    warm = f"warm-up: {warm_seconds:.3f} s; " if warm_seconds is not None else ""
    more = f"{counted(stats.steps, 'steps')}, up to {counted(stats.most_live, 'sequences')} at once"
    decode = _timed(f"decode: {counted(stats.new_tokens, unit)}", stats.decode_seconds,
                    rate(stats.new_tokens, stats.decode_seconds, per_s), more)
    return (f"{warm}prefill: {counted(stats.prompt_tokens, unit)} in {stats.prefill_seconds:.3f} s; {decode}; "
            f"seed: {seed}" + weights)


__all__ = ["batch_stats_line", "counted", "per_second", "rate", "stats_line"]
