"""From a generation to an answer, and an answer against its targets: lm-evaluation-harness's `regex` filter and its
`exact_match` metric, with the same results.

- `RegexFilter` (lm-evaluation-harness `filters/extraction.py` RegexFilter, then `take_first`): every match of the
  pattern (`re.findall`); the `group_select`'th of them (negative counts from the end); when the pattern has several
  groups, `findall` gives a tuple per match and the first non-empty group is the answer; stripped of surrounding
  whitespace. No match at all (or no non-empty group) gives the fallback, "[invalid]". A `group_select` past the
  matches found is the fallback too (lm-evaluation-harness raises IndexError there).
- `exact_match` (lm-evaluation-harness `api/metrics.py` exact_match_hf_evaluate, a copy of HF evaluate's): each of
  `regexes_to_ignore` removed in turn (`re.sub(r, "", s)`) from prediction and reference, then lower case with
  `ignore_case`, then `string.punctuation` deleted with `ignore_punctuation`; equal strings score 1. With several
  targets (a list: lm-evaluation-harness `multiple_target`), right when any is. The comparison runs on numpy string
  arrays there, which drop trailing NUL characters: so does this one.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass, field
from typing import Sequence

from nlpkit.errors import UsageError

FALLBACK = "[invalid]"  # lm-evaluation-harness RegexFilter's default fallback
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def compile_regex(pattern: str, param: str) -> re.Pattern:
    """`pattern` compiled, or a UsageError naming the parameter and what is wrong with the pattern."""
    try:
        return re.compile(pattern)
    except re.error as e:
        raise UsageError(f"`{param}` {pattern!r} is not a valid regular expression: {e}") from None


_PROBES = ("Paris", "42", "The answer is 42.", "a b\tc")  # answers an --ignore-regex must leave something of
_GENERATIONS = (" Paris", " 42", "The answer is 42.", "\nParis", " a b\tc")  # an --extract must find text in one


def pattern_problem(pattern: str, role: str, group_select: int = 0) -> str | None:
    """Why a pattern would make every item's result the same, or None: an `extract` pattern that matches the empty
    string and gives an empty answer for any text (`''`, `(\\d*)`: findall's first match is the empty one before the
    first digit), an `ignore_regex` that is empty (it removes nothing) or removes every character of any answer
    (every answer then equals every target: exact_match 1). `score` refuses these as it refuses an empty stop string;
    lm-evaluation-harness runs them."""
    regex = compile_regex(pattern, role)
    if role == "extract" and regex.fullmatch("") is not None:
        probe = RegexFilter(pattern, group_select)
        if all(probe.apply(p) == "" for p in _GENERATIONS):
            return (f"{pattern!r} matches the empty string, and the match it takes is empty in any answer (every "
                    "answer would be ''): give a pattern that needs some text, such as '(\\d+)'")
    if role == "ignore_regex" and pattern == "":
        return "'' removes nothing: leave it out, or give the text to remove"
    if role == "ignore_regex" and all(regex.sub("", p) == "" for p in _PROBES):
        return (f"{pattern!r} removes every character of any answer and target, so every answer would equal every "
                "target (exact_match 1)")
    return None


@dataclass(frozen=True)
class RegexFilter:
    """lm-evaluation-harness's `regex` filter followed by `take_first` (one generation per item).

    >>> RegexFilter(r"#### (\\-?[0-9\\.\\,]+)").apply("so #### 42 and #### 7")
    '42'
    >>> RegexFilter(r"(\\d+)", group_select=-1).apply("1 then 2 then 3")
    '3'
    >>> RegexFilter(r"(\\d+)").apply("none")
    '[invalid]'
    """

    pattern: str
    group_select: int = 0
    fallback: str = FALLBACK
    _regex: re.Pattern = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "_regex", compile_regex(self.pattern, "extract"))

    def apply(self, text: str) -> str:
        matches = self._regex.findall(text)
        if not matches:
            return self.fallback
        try:
            match = matches[self.group_select]
        except IndexError:
            return self.fallback
        if isinstance(match, tuple):
            groups = [g for g in match if g]
            if not groups:
                return self.fallback
            match = groups[0]
        return match.strip()


@dataclass(frozen=True)
class MatchOptions:
    """exact_match's options, named as lm-evaluation-harness's metric_list names them."""

    ignore_case: bool = False
    ignore_punctuation: bool = False
    regexes_to_ignore: tuple[str, ...] = ()

    def validate(self) -> "MatchOptions":
        for r in self.regexes_to_ignore:
            compile_regex(r, "ignore_regex")
        return self

    def normalize(self, text: str) -> str:
        """The string exact_match compares: regexes removed, case and punctuation dropped as asked."""
        for r in self.regexes_to_ignore:
            text = re.sub(r, "", text)
        text = text.rstrip("\x00")  # numpy's str_ arrays drop trailing NULs
        if self.ignore_case:
            text = text.lower()
        if self.ignore_punctuation:
            text = text.translate(_PUNCTUATION)
        return text


def exact_match(answer: str, targets: str | Sequence[str], options: MatchOptions = MatchOptions()) -> float:
    """1.0 when `answer` equals the target (any of a list of targets) after `options`' normalization, else 0.0.

    >>> exact_match("Paris.", ["paris", "Lyon"], MatchOptions(ignore_case=True, ignore_punctuation=True))
    1.0
    """
    if isinstance(targets, str):
        targets = [targets]
    a = options.normalize(answer)
    return float(any(a == options.normalize(t) for t in targets))
