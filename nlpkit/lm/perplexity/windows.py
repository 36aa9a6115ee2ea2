"""Perplexity's window plans: which forward passes score a token-id list, and which tokens each one scores.

The three modes the `nlpkit.lm.perplexity` docstring describes (`sliding`, `disjoint`, `second-half`) as lists of
`Window`s over the sequence with its prefix token (`window_plan`), the checks on their settings, and the defaults.
No model runs here: `nlpkit.lm.perplexity.window_scoring` runs the plans.
"""

from __future__ import annotations

from dataclasses import dataclass

from nlpkit.errors import NlpkitError, UsageError

MODES = ("sliding", "disjoint", "second-half")


class TooShort(NlpkitError):
    """The text has no token that the chosen procedure can score."""


@dataclass(frozen=True)
class Window:
    """One forward pass of a scoring plan: seq[start:end] is the input (with `swap`, when set, in
    its first place), tokens first..end-start-1 of it are scored; `weight` is the transformers
    guide's `trg_len - 1` for sliding windows."""

    start: int
    end: int
    first: int
    swap: int | None = None
    weight: int = 0

    def tokens(self, seq: list[int]) -> list[int]:
        chunk = list(seq[self.start:self.end])
        if self.swap is not None:
            chunk[0] = self.swap
        return chunk

    @property
    def positions(self) -> range:
        return range(self.start + max(self.first, 1), self.end)


def sliding_windows(n: int, context: int, stride: int) -> list[Window]:
    """The transformers guide loop (see module docstring) over a sequence of n tokens."""
    out, prev_end = [], 0
    for begin in range(0, n, stride):
        end = min(begin + context, n)
        trg_len = end - prev_end
        first = max(end - trg_len, begin + 1)  # the window's first token has no prediction
        out.append(Window(begin, end, first - begin, weight=trg_len - 1))
        prev_end = end
        if end == n:
            break
    return out


def disjoint_windows(n: int, context: int, prefixed: bool) -> list[Window]:
    """lm-evaluation-harness get_rolling_token_windows(context_len=1) + make_disjoint_window over a
    sequence of n tokens (`prefixed`: its first is the prefix token).

    Windows predict `context` tokens each, conditioned on the token before them (the first window on the
    prefix token); the last, shorter window is rolled back to a full `context` tokens of input, as there.
    """
    offset = 1 if prefixed else 0  # without a prefix token the first token stays unscored
    bounds = [(1, min(context + 1 - (1 - offset), n))]  # seq[a:b] is predicted
    while bounds[-1][1] < n:
        a = bounds[-1][1]
        bounds.append((a, min(a + context, n)))
    out = []
    for a, b in bounds:
        if b > a:
            start = max(b - context - 1, 0)
            out.append(Window(start, b, a - start))
    return out


def second_half_windows(n: int, context: int, bos_id: int | None) -> list[Window]:
    """llama.cpp perplexity: n_chunk = n // context chunks, each scoring tokens context/2+1 .. context-1
    (`bos_id`, when given, replaces each chunk's first token)."""
    if n < 2 * context:
        raise NlpkitError(f"`mode` second-half needs at least 2 x context = {2 * context} tokens, the text has "
                          f"{n} (lower `context` or use `mode` sliding)")
    return [Window(c * context, (c + 1) * context, context // 2 + 1, swap=bos_id) for c in range(n // context)]


def check_window(mode: str, context: int, stride: int | None) -> None:
    if mode not in MODES:
        raise UsageError(f"`mode` must be one of {', '.join(MODES)}, not {mode!r}")
    if context < 2:
        raise UsageError(f"`context` must be at least 2 tokens, got {context}")
    if stride is not None and not 1 <= stride <= context:
        raise UsageError(f"`stride` {stride} must be between 1 and `context` {context}")


def window_plan(ids: list[int], prefix: int | None, *, mode: str, context: int,
                stride: int | None) -> tuple[list[int], list[Window]]:
    """The sequence (prefix token first, when given) and the windows `mode` scores it in: the one plan
    that perplexity (`score_ids`) and the model comparison (`nlpkit.lm.perplexity.comparison`) both run."""
    seq = ([prefix] if prefix is not None else []) + list(ids)
    if mode in ("sliding", "disjoint") and len(seq) < 2:
        raise TooShort("text too short: at least 2 tokens (or 1 after the prefix token) are needed to score one")
    if mode == "sliding":
        windows = sliding_windows(len(seq), context, stride or context)
    elif mode == "disjoint":
        windows = disjoint_windows(len(seq), context, prefix is not None)
    else:
        windows = second_half_windows(len(seq), context, prefix)
    return seq, windows


def default_stride(context: int) -> int:
    """Half the context: every token after the first window sees at least context/2 tokens of history."""
    return max(context // 2, 1)
