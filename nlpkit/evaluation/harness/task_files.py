"""Finding and reading lm-evaluation-harness task files (YAML), with lm-eval 0.4.13's loader semantics.

- `load_yaml(path)`: one YAML file with its `include`s (recursive, relative to the including file or absolute; the
  included keys first, the file's own keys win; an included file's `task_list` is not inherited) and its
  `!function module.fn` tags (imported from the folder of the YAML that names them: `hooks.import_function`).
- `TaskRegistry`: names -> entries (a task, a group, a tag) from every YAML under the `--include-path` folders and,
  when lm-evaluation-harness is installed, its own task folder read as files (never imported). Later folders win over
  earlier ones (lm-eval: its own folder first, then the include paths); inside one folder the first file (by path)
  that defines a name wins. lm-eval's folder holds ~14,000 files: it is read lazily, only the files that mention a
  name asked for are parsed (a full parse takes seconds).

Every error is one line naming the file (and the line, for YAML syntax): `TaskFileError`.
"""

from __future__ import annotations

import difflib
import importlib.util
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nlpkit.errors import NlpkitError

IGNORE_DIRS = {"__pycache__", ".ipynb_checkpoints"}


class TaskFileError(NlpkitError):
    """A task file that cannot be read: missing, bad YAML, a missing include, a hook that cannot be imported."""


class UnknownTask(TaskFileError):
    """A name no task file defines (the CLI makes it a usage error: it is what the user typed)."""


@dataclass(frozen=True)
class FunctionRef:
    """An unresolved `!function module.fn` (the index reads files without importing their hooks)."""

    base_dir: str
    spec: str


def lmeval_tasks_dir() -> Path | None:
    """lm-evaluation-harness's task folder when the package is installed (found without importing it)."""
    try:
        spec = importlib.util.find_spec("lm_eval")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    d = Path(list(spec.submodule_search_locations)[0]) / "tasks"
    return d if d.is_dir() else None


def _loader(base_dir: Path, resolve: bool):
    import yaml

    base = yaml.CSafeLoader if getattr(yaml, "__with_libyaml__", False) else yaml.SafeLoader

    class Loader(base):  # type: ignore[misc, valid-type]
        pass

    def ctor(loader, node):
        spec = loader.construct_scalar(node)
        if not resolve:
            return FunctionRef(str(base_dir), spec)
        from nlpkit.evaluation.harness.hooks import import_function

        return import_function(spec, base_dir)

    Loader.add_constructor("!function", ctor)
    return Loader


def load_yaml(path: str | Path, *, resolve: bool = True, _seen: set | None = None) -> dict[str, Any]:
    """The config a task file defines: its includes merged under its own keys, `!function`s imported (`resolve`) or
    left as `FunctionRef`s."""
    import yaml

    path = Path(path).expanduser()
    if not path.is_file():
        raise TaskFileError(f"{path}: no such task file")
    path = path.resolve()
    seen = set() if _seen is None else _seen
    if path in seen:
        raise TaskFileError(f"{path}: include cycle")
    seen.add(path)
    try:
        with path.open("rb") as fh:
            cfg = yaml.load(fh, Loader=_loader(path.parent, resolve))  # noqa: S506 (a SafeLoader + !function)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        raise TaskFileError(f"{path}{line}: YAML error: {e.problem or e.context}") from None
    except yaml.YAMLError as e:
        raise TaskFileError(f"{path}: YAML error: {e}") from None
    except UnicodeDecodeError as e:
        raise TaskFileError(f"{path}: not UTF-8 ({e.reason})") from None
    if not isinstance(cfg, dict):
        raise TaskFileError(f"{path}: a task file must hold a mapping (task: ..., or group: ...), got "
                            f"{type(cfg).__name__}")
    if "include" not in cfg:
        return cfg
    includes = cfg.pop("include")
    merged: dict[str, Any] = {}
    for inc in includes if isinstance(includes, list) else [includes]:
        inc_path = Path(inc) if Path(str(inc)).is_absolute() else path.parent / str(inc)
        if not inc_path.is_file():
            raise TaskFileError(f"{path}: include {inc!r}: no such file {inc_path}")
        inc_cfg = load_yaml(inc_path, resolve=resolve, _seen=seen)
        inc_cfg.pop("task_list", None)
        merged.update(inc_cfg)
    merged.update(cfg)
    return merged


@dataclass
class Entry:
    """A name the registry knows: `category` task, group or tag; a tag's `members` are task names."""

    name: str
    category: str
    path: Path | None
    cfg: dict | None = None
    members: set = field(default_factory=set)


def category_of(cfg: dict) -> str:
    if "class" in cfg:
        return "python"
    if "group" in cfg:
        return "group"
    if "task" in cfg:
        return "task"
    return "unknown"


def _yaml_files(root: Path) -> list[Path]:
    return sorted((p for p in root.glob("**/*.yaml") if not any(part in IGNORE_DIRS for part in p.parts)),
                  key=lambda p: p.as_posix())


def _index_files(files: list[Path], index: dict[str, Entry], broken: list | None = None) -> None:
    """Add the entries of `files` (one folder's, in path order) to `index`: the first definition of a name wins.
    A file that cannot be read is skipped, as lm-eval skips it, and kept in `broken` with its error (asking for a
    name it mentions reports that error rather than an unknown task)."""
    for path in files:
        try:
            cfg = load_yaml(path, resolve=False)
        except TaskFileError as e:
            if broken is not None:
                broken.append((path, e))
            continue
        category = category_of(cfg)
        if category == "group":
            name = cfg["group"]
            if isinstance(name, str) and name not in index:
                index[name] = Entry(name, "group", path, cfg)
        elif category in ("task", "python"):
            name = cfg["task"]
            if not isinstance(name, str) or name in index:
                continue
            index[name] = Entry(name, category, path, cfg)
            tags = cfg.get("tag")
            for tag in ([tags] if isinstance(tags, str) else tags or []):
                index.setdefault(tag, Entry(tag, "tag", None)).members.add(name)


class TaskRegistry:
    """Task, group and tag names -> `Entry`, from the include paths (read whole) and lm-eval's task folder (read
    lazily). `lookup(name)` -> Entry or None; `all_names()` for suggestions."""

    def __init__(self, include_paths: list[str | Path] = (), lmeval_dir: Path | None | bool = True):
        self.include_paths = [Path(p) for p in include_paths]
        for p in self.include_paths:
            if not p.is_dir():
                raise TaskFileError(f"{p}: an include path must be a folder of task files")
        self.lmeval_dir = lmeval_tasks_dir() if lmeval_dir is True else (lmeval_dir or None)
        self._local: dict[str, Entry] = {}
        self.broken: list[tuple[Path, TaskFileError]] = []
        for root in self.include_paths:  # later paths win
            one: dict[str, Entry] = {}
            _index_files(_yaml_files(root), one, self.broken)
            for name, e in one.items():
                if name in self._local and e.category == "tag" and self._local[name].category == "tag":
                    e.members |= self._local[name].members
                self._local[name] = e
        self._lm: dict[str, Entry] = {}
        self._lm_looked: set[str] = set()
        self._lm_texts: list[tuple[Path, str]] | None = None

    def lookup(self, name: str) -> Entry | None:
        if name in self._local:
            return self._local[name]
        if self.lmeval_dir is None:
            return None
        if name not in self._lm_looked:
            self._scan_lmeval(name)
        return self._lm.get(name)

    def _texts(self) -> list[tuple[Path, str]]:
        if self._lm_texts is None:
            out = []
            for p in _yaml_files(self.lmeval_dir):
                try:
                    out.append((p, p.read_text(encoding="utf-8", errors="replace")))
                except OSError:
                    continue
            self._lm_texts = out
        return self._lm_texts

    def _scan_lmeval(self, name: str) -> None:
        """Parse the files of lm-eval's folder that mention `name` (and those including a template that does)."""
        self._lm_looked.add(name)
        texts = self._texts()
        pat = re.compile(r"(?<![\w-])" + re.escape(name) + r"(?![\w-])")
        hits = [p for p, t in texts if name in t and pat.search(t)]  # the substring test first: 25x faster
        text_of = dict(texts)
        templates = {p.name for p in hits if not re.search(r"^[\"']?(task|group)[\"']?\s*:", text_of[p], re.M)}
        if templates:
            inc = re.compile(r"^include:.*(" + "|".join(re.escape(t) for t in templates) + ")", re.M)
            hits += [p for p, t in texts if p not in hits and any(n in t for n in templates) and inc.search(t)]
        found: dict[str, Entry] = {}
        _index_files(sorted(set(hits), key=lambda p: p.as_posix()), found)
        for n, e in found.items():
            if n == name or n not in self._lm:
                self._lm[n] = e
        self._lm_looked.update(n for n, e in found.items() if e.category != "tag")

    def all_names(self) -> list[str]:
        """Every task and group name (for suggestions): the include paths' and the names lm-eval's files define at
        their top level (`task:`/`group:`/`tag:` lines; no parse)."""
        names = set(self._local)
        if self.lmeval_dir is not None:
            line = re.compile(r"^[\"']?(?:task|group|tag)[\"']?\s*:\s*[\"']?([\w.-]+)[\"']?\s*$", re.M)
            for _, t in self._texts():
                names.update(line.findall(t))
        return sorted(names)

    def unknown(self, name: str) -> TaskFileError:
        """The error of asking for `name`: a broken task file of the include paths that mentions it, else an unknown
        task with the closest names."""
        pat = re.compile(r"(?<![\w-])" + re.escape(name) + r"(?![\w-])")
        for path, err in self.broken:
            try:
                if pat.search(path.read_text(encoding="utf-8", errors="replace")):
                    return err
            except OSError:
                continue
        close = difflib.get_close_matches(name, self.all_names(), n=3, cutoff=0.6)
        where = ", ".join(str(p) for p in self.include_paths) or "no include path"
        lm = f" and lm-evaluation-harness's tasks ({self.lmeval_dir})" if self.lmeval_dir else \
            " (lm-evaluation-harness is not installed: its task names are unknown)"
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        return UnknownTask(f"unknown task {name!r} (searched {where}{lm}){hint}")
