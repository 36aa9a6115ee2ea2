"""Items to score, one JSON object per line: the task from the fields present, every field checked.

Four tasks (field names are roles; a file may call them anything, mapped with `fields`):

- loglikelihood: `context`, `continuation`;
- multiple-choice: `context`, `choices` (a non-empty list of strings), `gold` (an index, a choice string, or a list
  of indices: any of them is right);
- preference: `prompt`, `chosen`, `rejected`;
- generate (lm-evaluation-harness `generate_until`): `context`, `target` (a string, or a non-empty list of strings:
  any of them is right; a number is refused, as any other non-string), and neither `choices` nor `continuation` (an item with both is an error naming it);
- any task: an optional `id` (a string or an integer), the item's own name, carried into its records (an id two
  items share is warned about, naming both lines).

Without an explicit task, the first record decides: `choices` -> multiple-choice, `chosen` and `rejected` ->
preference, `continuation` -> loglikelihood, `target` -> generate; a later record whose fields call for another task is an error naming
both lines (one task per run). Every record is then checked for that task's fields, and every error names the file
and line (`items.jsonl, line 7: no field 'gold' ...`). Blank lines are skipped (they keep their line numbers).
`iter_items` streams one record at a time; `read_items` reads and checks every file before anything is scored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Callable, Iterator, Sequence

from nlpkit.errors import NlpkitError, UsageError

TASKS = ("loglikelihood", "multiple-choice", "preference", "generate")
ROLES = {
    "loglikelihood": ("context", "continuation"),
    "multiple-choice": ("context", "choices", "gold"),
    "preference": ("prompt", "chosen", "rejected"),
    "generate": ("context", "target"),
}
ALL_ROLES = ("context", "continuation", "choices", "gold", "prompt", "chosen", "rejected", "target", "id")


@dataclass
class Item:
    """One record: `continuations` are what gets scored after `context` (loglikelihood: the continuation;
    multiple-choice: the choices, without the delimiter; preference: chosen, then rejected)."""

    index: int  # 0-based among the records (of all files, in order)
    where: str  # "file, line N" for messages
    context: str
    continuations: list[str]
    gold: tuple[int, ...] = field(default_factory=tuple)  # multiple-choice: the right choices
    file: str = ""  # the input file as messages name it (<stdin> for '-')
    id: str | int | None = None  # the record's own `id` field, when it has one

    def key(self) -> dict:
        """What names the item in its records: `file`, `index`, and `id` when the item has one."""
        return {"file": self.file, "index": self.index, **({"id": self.id} if self.id is not None else {})}


def parse_fields(specs: list[str] | tuple[str, ...]) -> dict[str, str]:
    """`["gold=label", "choices=endings"]` -> {"gold": "label", "choices": "endings"}: role -> field name.

    >>> parse_fields(["gold=label"])
    {'gold': 'label'}
    """
    out: dict[str, str] = {}
    for spec in specs:
        role, sep, name = spec.partition("=")
        role = role.strip()
        if not sep or not name or role not in ALL_ROLES:
            raise UsageError(f"field mapping {spec!r}: expected ROLE=NAME with ROLE one of {', '.join(ALL_ROLES)}")
        out[role] = name
    return out


def task_of(record: dict, fields: dict[str, str]) -> str | None:
    """The task a record's fields call for, or None when they call for none (see the module docstring)."""
    name = lambda role: fields.get(role, role)  # noqa: E731
    if name("choices") in record:
        return "multiple-choice"
    if name("chosen") in record and name("rejected") in record:
        return "preference"
    if name("continuation") in record:
        return "loglikelihood"
    if name("target") in record:
        return "generate"
    return None


def detect_task(record: dict, fields: dict[str, str], where: str) -> str:
    """The task a record's fields call for (see the module docstring); an error listing them when none."""
    task = task_of(record, fields)
    if task is not None:
        return task
    name = lambda role: fields.get(role, role)  # noqa: E731
    have = ", ".join(map(str, record)) or "none"
    raise NlpkitError(f"{where}: cannot tell the task from the fields ({have}): expected "
                      f"{name('continuation')!r} (loglikelihood), {name('choices')!r} and {name('gold')!r} "
                      f"(multiple-choice), {name('chosen')!r} and {name('rejected')!r} (preference), or "
                      f"{name('target')!r} (generate); map fields "
                      "with `field` ROLE=NAME or choose the `task`")


def _get(record: dict, role: str, fields: dict[str, str], where: str):
    key = fields.get(role, role)
    if key not in record:
        have = ", ".join(map(str, record)) or "none"
        how = f"map another with `field` {role}=NAME" if key == role else f"the {role} field, `field` {role}={key}"
        raise NlpkitError(f"{where}: no field {key!r} ({how}; the record has: {have})")
    return record[key]


def _text(record: dict, role: str, fields: dict[str, str], where: str, allow_empty: bool = True) -> str:
    value = _get(record, role, fields, where)
    key = fields.get(role, role)
    if not isinstance(value, str):
        raise NlpkitError(f"{where}: field {key!r} is {_kind(value)}, expected a string")
    if not allow_empty and not value:
        raise NlpkitError(f"{where}: field {key!r} is empty: nothing to score")
    return value


def _kind(value) -> str:
    return "null" if value is None else {dict: "an object", list: "a list", bool: "a boolean", str: "a string",
                                         int: "a number", float: "a number"}.get(type(value), type(value).__name__)


def parse_gold(value, choices: list[str], key: str, where: str) -> tuple[int, ...]:
    """`gold` as the indices of the right choices: an index, a choice string, or a list of indices.

    >>> parse_gold("b", ["a", "b"], "gold", "x")
    (1,)
    """
    n = len(choices)

    def index(v) -> int:
        if isinstance(v, bool) or not isinstance(v, int):
            raise NlpkitError(f"{where}: field {key!r} holds {_kind(v)} {json.dumps(v, ensure_ascii=False)}: "
                              "expected a choice index, a choice string or a list of indices")
        if not 0 <= v < n:
            raise NlpkitError(f"{where}: {key} {v} is out of range for {n} choice{'s' * (n != 1)} "
                              f"(indices 0..{n - 1})")
        return v

    if isinstance(value, str):
        if value not in choices:
            raise NlpkitError(f"{where}: {key} {value!r} is not one of the choices")
        return (choices.index(value),)
    if isinstance(value, list):
        if not value:
            raise NlpkitError(f"{where}: field {key!r} is an empty list: no right choice")
        return tuple(sorted(set(index(v) for v in value)))
    return (index(value),)


def item_id(record: dict, fields: dict[str, str], where: str) -> str | int | None:
    """The record's own `id` (a string or an integer), None when it has none; mapped with `field` id=NAME, a
    record without that field is an error (a misspelt mapping would otherwise name no item)."""
    key = fields.get("id", "id")
    if key not in record:
        if "id" in fields:
            _get(record, "id", fields, where)  # the error naming the field
        return None
    value = record[key]
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise NlpkitError(f"{where}: field {key!r} is {_kind(value)}, expected a string or an integer (the item's id)")
    return value


def make_item(record, task: str, fields: dict[str, str], index: int, where: str, file: str = "") -> Item:
    """One checked `Item` from a parsed JSON value."""
    if not isinstance(record, dict):
        raise NlpkitError(f"{where}: expected a JSON object, got {_kind(record)}")
    ident = item_id(record, fields, where)
    target = fields.get("target", "target")
    if target in record:
        both = [fields.get(r, r) for r in ("choices", "continuation") if fields.get(r, r) in record]
        if both:
            raise NlpkitError(f"{where}: the item has both {target!r} and {both[0]!r}: a generation item has a "
                              f"target and no choices or continuation (drop one, or map another with `field`)")
    if task == "generate":
        from nlpkit.evaluation.generation_task import targets_of

        return Item(index, where, _text(record, "context", fields, where),
                    targets_of(_get(record, "target", fields, where), target, where), file=file, id=ident)
    if task == "loglikelihood":
        return Item(index, where, _text(record, "context", fields, where),
                    [_text(record, "continuation", fields, where, allow_empty=False)], file=file, id=ident)
    if task == "preference":
        return Item(index, where, _text(record, "prompt", fields, where),
                    [_text(record, "chosen", fields, where, allow_empty=False),
                     _text(record, "rejected", fields, where, allow_empty=False)], file=file, id=ident)
    context = _text(record, "context", fields, where)
    choices = _get(record, "choices", fields, where)
    key = fields.get("choices", "choices")
    if not isinstance(choices, list):
        raise NlpkitError(f"{where}: field {key!r} is {_kind(choices)}, expected a list of strings")
    if not choices:
        raise NlpkitError(f"{where}: field {key!r} is empty: an item needs at least one choice")
    for i, c in enumerate(choices):
        if not isinstance(c, str):
            raise NlpkitError(f"{where}: choice {i} of {key!r} is {_kind(c)}, expected a string")
    gold = parse_gold(_get(record, "gold", fields, where), choices, fields.get("gold", "gold"), where)
    return Item(index, where, context, list(choices), gold, file=file, id=ident)


def mixed_tasks(where: str, task: str, found: str, decided: str) -> NlpkitError:
    """The error of an item whose fields call for another task than the run's (decided by the record at
    `decided`)."""
    return NlpkitError(f"{where}: a {task} item among {found} items (the task of {decided}): one task per run; "
                       "split the file, or choose the `task`")


def _has_lone_surrogate(value) -> bool:
    """Whether a parsed JSON value holds a string with an unpaired surrogate (JSON's ``"\\ud800"`` escape parses to
    one; it cannot be encoded as UTF-8)."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def iter_items(lines: Iterator[str], name: str, task: str | None = None,
               fields: dict[str, str] | None = None, start: int = 0) -> Iterator[tuple[str, Item]]:
    """(task, Item) for each non-blank line of a JSONL stream; `name` is the file as messages show it, `start` the
    index of its first item. Without a `task`, the first record decides it and a record calling for another is an
    error naming both lines."""
    fields = fields or {}
    if task is not None and task not in TASKS:
        raise UsageError(f"task must be one of {', '.join(TASKS)}, not {task!r}")
    detect, decided = task is None, ""
    index = start
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{name}, line {lineno}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise NlpkitError(f"{where}: not valid JSON ({e.msg} at column {e.colno})") from None
        if "\\u" in line and _has_lone_surrogate(record):
            raise NlpkitError(f"{where}: a string holds a lone surrogate escape (\\ud800-\\udfff without its pair): "
                              "not a character, so not text a model can read")
        if detect:
            if not isinstance(record, dict):
                raise NlpkitError(f"{where}: expected a JSON object, got {_kind(record)}")
            if task is None:
                task, decided = detect_task(record, fields, where), where
            else:
                own = task_of(record, fields)
                if own is not None and own != task:
                    raise mixed_tasks(where, own, task, decided)
        yield task, make_item(record, task, fields, index, where, name)
        index += 1
    if index == start:
        raise NlpkitError(f"{name}: no items (expected one JSON object per line)")


def read_items(paths: Sequence[str], task: str | None = None, fields: dict[str, str] | None = None,
               errors: str = "strict", warn: Callable[[str], None] | None = None) -> tuple[str, list[Item]]:
    """(task, items) of every file in turn ('-': stdin), all read and checked before anything is scored: one task
    for all (each file's first record decides its task; another file's is an error naming both lines), indices
    counting on across files. `warn` hears of each `id` given to two items (`DuplicateIds`)."""
    from nlpkit.io import display_name, iter_lines

    found, decided, items = task, "", []
    duplicates = DuplicateIds()
    for path in paths:
        for t, item in iter_items(iter_lines(path, errors=errors), display_name(path), task, fields, len(items)):
            if found is not None and t != found:
                raise mixed_tasks(item.where, t, found, decided or "`task`")
            if found is None or not decided:
                found, decided = t, decided or item.where
            duplicates.add(item)
            items.append(item)
    if warn is not None:
        for message in duplicates.messages():
            warn(message)
    return found, items  # type: ignore[return-value]


class DuplicateIds:
    """The items whose `id` an earlier item already has (ids name items in the records, so two alike are almost
    always a mistake: a file concatenated twice, ids restarting per part). 2 and "2" are alike (a TSV cell shows
    both as 2). Messages name both lines: the first `SHOWN` duplicates one by one, then a count of the rest."""

    SHOWN = 5

    def __init__(self) -> None:
        self.first: dict[str, str] = {}          # id -> where the first item with it is
        self.found: list[tuple[str, str, str]] = []   # (where, id, first where)

    def add(self, item: Item) -> None:
        if item.id is None:
            return
        key = str(item.id)
        if key in self.first:
            self.found.append((item.where, key, self.first[key]))
        else:
            self.first[key] = item.where

    def messages(self) -> list[str]:
        out = [f"{where}: id {json.dumps(key, ensure_ascii=False)} is also the id of {first} (ids name items in "
               "the records: make them unique)" for where, key, first in self.found[:self.SHOWN]]
        rest = len(self.found) - self.SHOWN
        if rest > 0:
            out.append(f"{rest} more item{'s' * (rest != 1)} repeat an earlier item's id")
        return out
