"""A task's `filter_list`: named pipelines applied to every request's responses, as lm-evaluation-harness 0.4.13's
filters: `regex` (findall, the `group_select`-th match, its first non-empty group, stripped; `fallback` when none),
`multi_choice_regex` (the pattern, else a choice's text or a ": X" letter of the document's `choices`), `take_first`,
`take_first_k`, `remove_whitespace`, `lowercase`, `uppercase`, `majority_vote`, `map`, `custom` (its `filter_fn`
hook), and `function: !function module.Class` filter classes of the task's folder (lm-eval's Filter protocol:
`Class(**kwargs).apply(resps, docs)`; bbh's MultiChoiceRegexFilter, ...). Any other filter is refused by name.
Without a `filter_list`, one pipeline "none" = take_first.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from typing import Callable

from nlpkit.errors import NlpkitError

Filter = Callable[[list, list], list]  # (responses per request, docs) -> filtered per request


def regex(regex_pattern: str = r"#### (\-?[0-9\.\,]+)", group_select: int = 0, fallback: str = "[invalid]") -> Filter:
    rx = re.compile(regex_pattern)

    def one(resp):
        if not isinstance(resp, str):
            resp = ""
        match = rx.findall(resp)
        if not match:
            return fallback
        match = match[group_select]
        if isinstance(match, tuple):
            match = [m for m in match if m]
            match = match[0] if match else fallback
        return match.strip()

    return lambda resps, docs: [[one(r) for r in inst] for inst in resps]


@functools.cache
def _punctuation_table() -> dict:
    """Every code point below sys.maxunicode whose Unicode category is P* -> None (str.translate deletes them), as
    lm-eval's multi_choice_regex drops punctuation (exact_match's `string.punctuation` is another set)."""
    import sys
    import unicodedata

    return dict.fromkeys(i for i in range(sys.maxunicode) if unicodedata.category(chr(i)).startswith("P"))


def multi_choice_regex(regex_pattern: str = r"#### (\-?[0-9\.\,]+)", group_select: int = 0,
                       fallback: str = "[invalid]", ignore_case: bool = False, ignore_punctuation: bool = False,
                       regexes_to_ignore: list | None = None) -> Filter:
    """lm-eval's multi_choice_regex (mmlu_flan_n_shot generative, ...): the pattern's `group_select`-th match; else a
    choice's text found in the response (both after the ignore options; longest choice first), as its letter
    "(A)", "(B)", ...; else ": A"-style letters of the document's `choices`, as "(A)"; else `fallback`."""
    rx = re.compile(regex_pattern)

    def find(regex, resp, convert: dict):
        if not isinstance(resp, str):
            resp = ""
        match = regex.findall(resp)
        if match:
            match = match[group_select]
            if isinstance(match, tuple):
                match = [m for m in match if m]
                if not match:
                    return ""
                match = match[0]
            match = match.strip()
            if match and match in convert:
                match = convert[match]
        return match

    def ignores(st: str) -> str:
        for pat in regexes_to_ignore or ():
            st = re.sub(pat, "", st)
        if ignore_case:
            st = st.lower()
        if ignore_punctuation:
            st = st.translate(_punctuation_table())
        return st

    def apply(resps, docs):
        out = []
        for inst, doc in zip(resps, docs, strict=True):
            choice_to_letter, texts, letters = {}, [], []
            for i, c in enumerate(doc["choices"]):
                letter = chr(ord("A") + i)
                m = ignores(c.strip())
                texts.append(re.escape(m))
                choice_to_letter[m] = f"({letter})"
                letters.append(letter)
            by_text = re.compile("|".join(sorted(texts, key=len, reverse=True)))
            by_letter = re.compile(rf":[\s]*({'|'.join(letters)})")
            to_target = {x: f"({x})" for x in letters}
            filtered = []
            for resp in inst:
                match = find(rx, resp, {})
                if not match:
                    match = find(by_text, ignores(resp), choice_to_letter)
                    if not match:
                        match = find(by_letter, resp, to_target)
                filtered.append(match if match else fallback)
            out.append(filtered)
        return out

    return apply


def take_first() -> Filter:
    return lambda resps, docs: [r[0] for r in resps]


def take_first_k(k: int) -> Filter:
    def f(resps, docs):
        if resps and len(resps[0]) < k:
            raise NlpkitError(f"take_first_k {k}: only {len(resps[0])} responses per document (raise repeats)")
        return [r[:k] for r in resps]
    return f


def remove_whitespace() -> Filter:
    return lambda resps, docs: [[r.strip() for r in inst] for inst in resps]


def lowercase() -> Filter:
    return lambda resps, docs: [[r.lower() for r in inst] for inst in resps]


def uppercase() -> Filter:
    return lambda resps, docs: [[r.upper() for r in inst] for inst in resps]


def majority_vote() -> Filter:
    return lambda resps, docs: [[Counter(r).most_common(1)[0][0]] for r in resps]


def map_values(mapping_dict: dict | None = None, default_value=None) -> Filter:
    """lm-eval's `map`: each response looked up in `mapping_dict` (`default_value` when absent)."""
    mapping = mapping_dict or {}
    if not isinstance(mapping, dict):
        raise TypeError("map: mapping_dict must be a mapping")
    return lambda resps, docs: [[mapping.get(r, default_value) for r in inst] for inst in resps]


def hook_filter(task: str, cls: Callable, kwargs: dict) -> Filter:
    """A `function: !function module.Class` step: lm-eval's Filter protocol, `Class(**kwargs).apply(resps, docs)`
    (a fresh instance per application, as lm-eval's pipeline makes one); its failures name the task and the hook."""
    from nlpkit.evaluation.harness.hooks import call_hook, foreign, hook_name

    def make():
        inst = call_hook(task, "filter", cls, **kwargs)
        if not callable(getattr(inst, "apply", None)):
            raise NlpkitError(f"task {task}: filter hook {hook_name(cls)} has no apply(resps, docs) (lm-eval's "
                              "Filter protocol)")
        return inst

    def apply(resps, docs):
        inst = make()
        try:
            return list(inst.apply(resps, docs))
        except NlpkitError:
            raise
        except Exception as e:
            raise NlpkitError(f"task {task}: filter hook {hook_name(cls)} raised {type(e).__name__}: {foreign(e)}") \
                from None

    make()  # its arguments checked before any model runs
    return apply


def custom(task: str, filter_fn: Callable | None = None) -> Filter:
    """lm-eval's `custom`: `filter_fn(resps, docs)` (a `!function` hook)."""
    from nlpkit.evaluation.harness.hooks import call_hook

    if not callable(filter_fn):
        raise TypeError("custom: filter_fn must be a !function hook")
    return lambda resps, docs: list(call_hook(task, "filter_fn", filter_fn, resps, docs))


FILTERS = {"regex": regex, "multi_choice_regex": multi_choice_regex, "take_first": take_first, "take_first_k": take_first_k,
           "remove_whitespace": remove_whitespace, "lowercase": lowercase, "uppercase": uppercase,
           "majority_vote": majority_vote, "map": map_values}


def build_filters(task: str, filter_list) -> list[tuple[str, list[Filter]]]:
    """(name, pipeline) per entry of `filter_list` (None: [("none", [take_first])])."""
    if filter_list is None:
        return [("none", [take_first()])]
    out = []
    for entry in filter_list:
        steps = []
        for fn in entry.get("filter", []):
            name = fn.get("function")
            kwargs = {k: v for k, v in fn.items() if k != "function"}
            if callable(name):
                steps.append(hook_filter(task, name, kwargs))
                continue
            if name != "custom" and name not in FILTERS:
                raise NlpkitError(f"task {task}: filter {name!r} is not supported ({', '.join(FILTERS)}, custom, "
                                  "or a !function filter class)")
            try:
                steps.append(custom(task, **kwargs) if name == "custom" else FILTERS[name](**kwargs))
            except (TypeError, re.error) as e:
                raise NlpkitError(f"task {task}: filter {name}: {e}") from None
        out.append((entry["name"], steps))
    return out


def apply_filters(pipelines, instances) -> None:
    """Fill each instance's `filtered_resps[name]` for every pipeline."""
    if not instances:
        return
    for name, steps in pipelines:
        resps = [list(inst.resps) for inst in instances]
        docs = [inst.doc for inst in instances]
        for f in steps:
            resps = list(f(resps, docs))
        for inst, r in zip(instances, resps):
            inst.filtered_resps[name] = r
