"""`score`'s generate task, what the command line adds around the core (nlpkit/evaluation/generation_task.py): the
options it refuses (a pattern that makes every result the same), what it warns about (a backslash sequence a shell
passed literally, sampling options greedy decoding ignores, a context that lost its left end), and the settings its
signature records (every setting that changes a number; stop strings and patterns hashed, as `--system` is)."""

from __future__ import annotations

from typing import Sequence

import click

SAMPLING_ONLY = {"top_k": 0, "top_p": 1.0, "min_p": 0.0}  # filters greedy's argmax ignores, and their "off" values
_ESCAPES = {"\\n": "a newline", "\\t": "a tab", "\\\\": "one backslash"}


def refuse_patterns(extract: str | None, ignore_regex: Sequence[str], extract_group: int = 0) -> None:
    """Usage errors (exit 2) of --extract and --ignore-regex patterns that would make every item's result the same
    (`answer_filters.pattern_problem`), as `--until ''` is refused."""
    from nlpkit.evaluation.answer_filters import pattern_problem

    for flag, role, values in (("--extract", "extract", [extract] if extract is not None else []),
                               ("--ignore-regex", "ignore_regex", ignore_regex)):
        for v in values:
            why = pattern_problem(v, role, extract_group)
            if why is not None:
                raise click.BadParameter(why, param_hint=flag)


def _stop_escapes(text: str) -> list[str]:
    """The backslash sequences (\\n, \\t, \\\\) a stop string holds as plain characters."""
    return [e for e in _ESCAPES if e in text]


def _regex_escapes(pattern: str) -> list[str]:
    """The backslash sequences of a regular expression, read as the regex engine reads them (`\\\\` a pair)."""
    found, i = [], 0
    while i < len(pattern) - 1:
        if pattern[i] == "\\":
            pair = pattern[i:i + 2]
            if pair in _ESCAPES and pair not in found:
                found.append(pair)
            i += 2
        else:
            i += 1
    return found


def escape_warnings(until: Sequence[str], extract: str | None = None, ignore_regex: Sequence[str] = (),
                    stop_flag: str = "--until") -> list[str]:
    """A warning per stop string or pattern holding a literal backslash sequence: lm-evaluation-harness users write
    YAML, where "\\n" is a newline, but a shell passes `--until "\\n"` as a backslash and an n, and generation then
    never stops at a line break, silently."""
    out = []
    for stop in until:
        found = _stop_escapes(stop)
        if found:
            out.append(f"{stop_flag} '{stop}' holds {' and '.join(found)} as plain characters (a backslash, then "
                       f"{'/'.join(f[1] for f in found)}), not {' or '.join(_ESCAPES[f] for f in found)}: a shell "
                       "passes \"\\n\" as two characters (YAML's \"\\n\" is a newline), so generation stops only at "
                       f"that literal text; for a newline write {stop_flag} $'\\n' (bash, zsh)")
    for flag, values in (("--extract", [extract] if extract is not None else []), ("--ignore-regex", ignore_regex)):
        for pattern in values:
            found = _regex_escapes(pattern)
            if found:
                meaning = ", ".join(f"{f} as {_ESCAPES[f]}" for f in found)
                out.append(f"{flag} '{pattern}' holds {' and '.join(found)}: the regular expression reads {meaning}"
                           " (a pattern copied from a YAML file in double quotes has each backslash doubled there: "
                           "\"\\\\d\" in YAML is \\d here)")
    return out


def greedy_ignored(sampling: dict) -> str | None:
    """The warning when sampling filters are given (other than their "off" values) but decoding is greedy (no
    --temperature, or 0): they cannot change the most likely token, so they are ignored (the repetition penalty
    can, and applies). `sampling`: option name -> value given (None: not given)."""
    temperature = sampling.get("temperature")
    given = [k for k, off in SAMPLING_ONLY.items() if sampling.get(k) is not None and sampling[k] != off]
    if not given or (temperature is not None and temperature > 0):
        return None
    flags = ", ".join("--" + k.replace("_", "-") for k in given)
    why = "--temperature 0" if temperature is not None else "no --temperature"
    return (f"{flags} {'has' if len(given) == 1 else 'have'} no effect: decoding is greedy ({why}: always the most "
            "likely token, as lm-evaluation-harness's do_sample: false); give --temperature T > 0 to sample")


def generate_settings(g) -> dict:
    """The generate task's signature entries of `GenerationOptions` `g`: stop strings, --extract and --ignore-regex
    patterns hashed (sha256, as --system), the extract group, matching, metrics, max tokens and the sampling settings
    given (all five once any is; the seed when sampling)."""
    from nlpkit.signature import text_hash

    match = ",".join(k for k, on in (("case", g.match.ignore_case), ("punct", g.match.ignore_punctuation)) if on)
    cfg = g.sampling
    out = {"until": text_hash(g.until) if g.until else "none", "max_gen": g.max_gen_toks,
           "extract": text_hash(g.extract) if g.extract is not None else "none",
           "extract_group": g.extract_group if g.extract is not None else None, "match": match or "exact",
           "ignore_regex": text_hash(g.match.regexes_to_ignore) if g.match.regexes_to_ignore else None,
           "metric": ",".join(dict.fromkeys(g.metrics)), "temp": cfg.temperature if cfg is not None else 0.0}
    if cfg is not None:
        out.update({"top_k": cfg.top_k, "top_p": cfg.top_p, "min_p": cfg.min_p, "rep": cfg.repetition_penalty})
    return out


def window_setting(scorers: dict) -> str:
    """The window in force, as the signature's `ctx`: the tokens each model's scorer (or generator) keeps, one value
    when all agree, else one per model in -m order ('none' for an n-gram model, which has no window)."""
    values = [s.window for s in scorers.values()]
    shown = ["none" if v is None else str(v) for v in values]
    return shown[0] if len(set(shown)) == 1 else ",".join(shown)


def truncation_warning(where: str, model: str, window: int | None, max_gen_toks: int) -> str:
    """The warning of a generation item whose context lost its left end (its record says `truncated`)."""
    return (f"{where}: the context is longer than {model}'s window ({window} tokens) less --max-gen-toks "
            f"{max_gen_toks}: it loses its left end (as lm-evaluation-harness truncates; the record says truncated)")


def warn_generate(until: Sequence[str], extract: str | None, ignore_regex: Sequence[str], sampling: dict,
                  quiet: bool) -> None:
    """The generate task's warnings on stderr: backslash sequences a shell passed literally, sampling filters greedy
    decoding ignores (`sampling`: temperature, top_k, top_p, min_p as given)."""
    from nlpkit.cli.common import warn

    for message in escape_warnings(until, extract, ignore_regex):
        warn(message, quiet)
    ignored = greedy_ignored(sampling)
    if ignored is not None:
        warn(ignored, quiet)


def complete_metric_list(ctx, param, incomplete: str) -> list:
    """`score --metric`'s shell completions: the generate task's metrics after those already in the comma-separated
    list (`exact_match,` -> `exact_match,bleu`, `exact_match,chrf`)."""
    from click.shell_completion import CompletionItem

    from nlpkit.evaluation.generation_task import GENERATE_METRICS

    head, _, last = incomplete.rpartition(",")
    done = set(head.split(",")) if head else set()
    prefix = head + "," if head else ""
    return [CompletionItem(prefix + m) for m in GENERATE_METRICS if m.startswith(last) and m not in done]
