"""`!function module.fn` hooks of task files: imported from the folder of the YAML that names them (a `module.py`
beside it, `a.b.fn` -> `a/b.py`), else as an importable module, as lm-evaluation-harness does. Task code runs only
from the task folders the user named (`--include-path`, a task file's path, lm-eval's own folder), never from data.

A hook that raises while a task runs is reported as one line naming the task and the hook (`call_hook`).
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from typing import Any, Callable

from nlpkit.errors import NlpkitError

_MODULES: dict[tuple[str, int], Any] = {}


def _load_module(path: Path):
    key = (str(path), path.stat().st_mtime_ns)
    if key in _MODULES:
        return _MODULES[key]
    p = str(path)
    if "/lm_eval/tasks/" in p:  # lm-eval's own hooks import each other as lm_eval.tasks.x.y
        name = "lm_eval.tasks." + p[p.find("/lm_eval/tasks/") + len("/lm_eval/tasks/"):].replace(".py", "").replace(
            "/", ".")
    else:
        name = "nlpkit_task_hooks." + re.sub(r"\W", "_", str(path.with_suffix("")))
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise NlpkitError(f"{path}: cannot be imported")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # the hook module's own failure, named
        hint = " (the task's hooks need a package that is not installed)" if isinstance(e, ImportError) else ""
        raise NlpkitError(f"{path}: importing it raised {type(e).__name__}: {foreign(e)}{hint}") from None
    sys.modules[name] = module
    _MODULES[key] = module
    return module


def import_function(qual: str, base_dir: Path) -> Callable:
    """The function `qual` ("utils.process_docs") names, from `base_dir`'s module file or an importable module."""
    mod_path, _, fn_name = str(qual).rpartition(".")
    if not mod_path:
        raise NlpkitError(f"{base_dir}: !function {qual!r} names no module (write module.function)")
    rel = (Path(base_dir) / f"{mod_path.replace('.', '/')}.py").resolve()
    if rel.exists():
        module = _load_module(rel)
        if not hasattr(module, fn_name):
            raise NlpkitError(f"{rel}: has no function {fn_name!r} (!function {qual} in a task file of {base_dir})")
        return getattr(module, fn_name)
    try:
        module = __import__(mod_path, fromlist=[fn_name])
    except ImportError as e:
        raise NlpkitError(f"{base_dir}: !function {qual}: no {mod_path.replace('.', '/')}.py beside the task file "
                          f"and no module {mod_path} to import ({e})") from None
    if not hasattr(module, fn_name):
        raise NlpkitError(f"{base_dir}: !function {qual}: module {mod_path} has no function {fn_name!r}")
    return getattr(module, fn_name)


def hook_name(fn: Callable) -> str:
    """`module.function` as the task file names it (the module by its file's name)."""
    code = getattr(fn, "__code__", None)
    source = code.co_filename if code is not None else \
        getattr(sys.modules.get(getattr(fn, "__module__", None) or ""), "__file__", None)  # a class: its module's
    module = Path(source).stem if source else (getattr(fn, "__module__", None) or "?").rpartition(".")[2]
    return f"{module}.{getattr(fn, '__name__', repr(fn))}"


def foreign(e: BaseException) -> str:
    """A task code exception's message on one line, its backquotes made plain quotes (the CLI reads `name` in an
    error as one of its own parameters and spells it as an option)."""
    lines = str(e).strip().splitlines()
    return (lines[0] if lines else "").replace("`", "'")


def call_hook(task: str, what: str, fn: Callable, *args, **kwargs):
    """`fn(*args, **kwargs)`; an exception becomes one line naming the task, the hook and what it does."""
    try:
        return fn(*args, **kwargs)
    except NlpkitError:
        raise
    except Exception as e:
        raise NlpkitError(f"task {task}: {what} hook {hook_name(fn)} raised {type(e).__name__}: {foreign(e)}") \
            from None
