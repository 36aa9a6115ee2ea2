"""The package layout (issue 13): wings per subcommand (no exemption), no import cycle, old paths still importable."""

from __future__ import annotations

import ast
import importlib
import re
import warnings
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "nlpkit"

# Top-level modules are shared infrastructure only; a subcommand's algorithm lives in its wing.
TOP_LEVEL_ALLOWED = {"__init__", "__main__", "io", "text", "errors", "signature", "workers", "shards"}


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PKG.rglob("*.py")}


def _imports(path: Path, name: str, known: set[str]) -> set[str]:
    """Every nlpkit module `path` imports, at any depth (inside functions too), resolved statically."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(up + ([base] if base else []))
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for t in targets:
            if t in known:
                found.add(t)
    found.discard(name)
    return found


def test_no_top_level_module_holds_a_subcommand_algorithm():
    top = {p.stem for p in PKG.glob("*.py")}
    assert top <= TOP_LEVEL_ALLOWED, f"move these into a wing: {sorted(top - TOP_LEVEL_ALLOWED)}"


def test_no_import_cycle_counting_function_level_imports():
    mods = _modules()
    known = set(mods)
    graph = {m: _imports(p, m, known) for m, p in mods.items()}
    # A package's own __init__ is imported by its submodules implicitly; edges into a package
    # __init__ that only documents (imports nothing) cannot close a cycle, so the plain graph is right.
    WHITE, GREY, BLACK = 0, 1, 2
    state = dict.fromkeys(graph, WHITE)
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(m: str) -> None:
        state[m] = GREY
        stack.append(m)
        for n in sorted(graph[m]):
            if state[n] == GREY:
                cycles.append(stack[stack.index(n):] + [n])
            elif state[n] == WHITE:
                visit(n)
        stack.pop()
        state[m] = BLACK

    for m in sorted(graph):
        if state[m] == WHITE:
            visit(m)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_no_command_module_imports_another_command_module():
    """Options and steps shared by commands live in shared modules (cli/common.py, cli/decoding.py),
    never in a command that another command imports."""
    from nlpkit.cli.main import COMMANDS

    mods = _modules()
    known = set(mods)
    commands = {module for module, _ in COMMANDS.values()}
    found = {m: sorted(_imports(mods[m], m, known) & (commands - {m})) for m in sorted(commands)}
    assert not {m: ts for m, ts in found.items() if ts}, found


@pytest.mark.parametrize("old, new", [
    ("nlpkit.distance", "nlpkit.edit.distance"),
    ("nlpkit.bitparallel", "nlpkit.edit.bitparallel"),
    ("nlpkit.batch_distance", "nlpkit.edit.batch"),
    ("nlpkit.align", "nlpkit.edit.align"),
    ("nlpkit.spell", "nlpkit.edit.spell"),
    ("nlpkit.corpus", "nlpkit.stats.counting"),
    ("nlpkit.cooccur", "nlpkit.stats.pmi"),
    ("nlpkit.tfidf", "nlpkit.stats.tfidf"),
    ("nlpkit.documents", "nlpkit.stats.documents"),
    ("nlpkit.retrieval.corpus", "nlpkit.stats.documents"),
    ("nlpkit.mt_eval", "nlpkit.mt.bleu"),
    ("nlpkit.lm.model", "nlpkit.lm.transformer.model"),
    ("nlpkit.lm.config", "nlpkit.lm.transformer.config"),
    ("nlpkit.lm.cache", "nlpkit.lm.transformer.cache"),
    ("nlpkit.lm.rope", "nlpkit.lm.transformer.rope"),
    ("nlpkit.lm.loaders", "nlpkit.lm.transformer.loaders"),
    ("nlpkit.lm.loaders.hf", "nlpkit.lm.transformer.loaders.hf"),
    ("nlpkit.lm.loaders.gguf", "nlpkit.lm.transformer.loaders.gguf"),
    ("nlpkit.lm.loaders.safetensors", "nlpkit.lm.transformer.loaders.safetensors"),
    ("nlpkit.lm.scoring", "nlpkit.lm.perplexity"),
    ("nlpkit.lm.sampling", "nlpkit.lm.generation.sampling"),
])
def test_old_module_paths_import_the_new_module_with_a_deprecation_warning(old, new):
    import sys

    sys.modules.pop(old, None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mod = importlib.import_module(old)
    assert mod is importlib.import_module(new)
    assert any(issubclass(w.category, DeprecationWarning) and new in str(w.message) for w in caught)


def test_old_submodule_path_under_a_moved_package_is_the_same_module_object():
    """`import nlpkit.lm.loaders.hf` after `nlpkit.lm.loaders` gives the new module, not a second copy."""
    import sys

    for old in ("nlpkit.lm.loaders", "nlpkit.lm.loaders.gguf"):
        sys.modules.pop(old, None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import nlpkit.lm.loaders  # noqa: F401
        old = importlib.import_module("nlpkit.lm.loaders.gguf")
    new = importlib.import_module("nlpkit.lm.transformer.loaders.gguf")
    assert old is new
    assert old.read_gguf_header is new.read_gguf_header


def test_every_moved_module_path_is_tested():
    """The alias table and this test's list agree, so no old path is left untested."""
    import nlpkit

    tested = {old for old, _ in test_old_module_paths_import_the_new_module_with_a_deprecation_warning
              .pytestmark[0].args[1]}
    assert set(nlpkit._MOVED) == tested


# Module paths release 0.1.0 had (a151b07) that are gone from the tree: the only paths an alias may keep.
RELEASED_0_1_0_MODULES = frozenset({
    "nlpkit.align", "nlpkit.batch_distance", "nlpkit.bitparallel", "nlpkit.cooccur", "nlpkit.corpus",
    "nlpkit.distance", "nlpkit.documents", "nlpkit.lm.cache", "nlpkit.lm.config", "nlpkit.lm.loaders",
    "nlpkit.lm.loaders.gguf", "nlpkit.lm.loaders.hf", "nlpkit.lm.loaders.safetensors", "nlpkit.lm.model",
    "nlpkit.lm.rope", "nlpkit.lm.sampling", "nlpkit.lm.scoring", "nlpkit.mt_eval", "nlpkit.retrieval.corpus",
    "nlpkit.spell", "nlpkit.tfidf",
})


def test_no_module_keeps_a_moved_names_hook():
    """Only module paths a release had keep an alias (`nlpkit._MOVED`); no module answers moved names through a
    module-level `__getattr__` (issue 41)."""
    hooks = [str(p.relative_to(PKG.parent)) for p in PKG.rglob("*.py")
             if any(isinstance(n, (ast.FunctionDef, ast.Assign)) and
                    (getattr(n, "name", None) == "__getattr__" or
                     any(isinstance(t, ast.Name) and t.id == "__getattr__" for t in getattr(n, "targets", [])))
                    for n in ast.parse(p.read_text(encoding="utf-8")).body)]
    assert hooks == [], hooks


def test_every_alias_is_a_module_path_release_0_1_0_had():
    """The 0.1.0 module paths (git show a151b07): an alias for any other path would keep a name no release had."""
    import nlpkit

    released = RELEASED_0_1_0_MODULES
    assert set(nlpkit._MOVED) <= released, set(nlpkit._MOVED) - released


# Modules of the lm wing that still reach `nlpkit.distributed` for the perplexity path (being moved out:
# the CLI is to build the window and line mappers and pass them down, as `score` does).


def _wing_imports_of_distributed(wing: str) -> dict[str, list[str]]:
    mods = _modules()
    known = set(mods)
    found = {}
    for m, path in sorted(mods.items()):
        if m == wing or m.startswith(wing + "."):
            up = sorted(t for t in _imports(path, m, known) if t == "nlpkit.distributed"
                        or t.startswith("nlpkit.distributed."))
            if up:
                found[m] = up
    return found


@pytest.mark.parametrize("wing", [
    "nlpkit.edit", "nlpkit.stats", "nlpkit.retrieval", "nlpkit.bpe", "nlpkit.mt", "nlpkit.evaluation",
    "nlpkit.io", "nlpkit.shards", "nlpkit.text", "nlpkit.errors", "nlpkit.signature", "nlpkit.workers",
    "nlpkit.lm",
])
def test_no_wing_imports_the_dask_adapter(wing):
    """`nlpkit.distributed` is the one module that knows Dask: it imports the wings (their ``*_shards`` modules),
    never the reverse, at any depth (imports inside functions count too)."""
    found = _wing_imports_of_distributed(wing)
    assert not found, "a wing imports nlpkit.distributed: " + "; ".join(f"{m} -> {', '.join(t)}"
                                                                          for m, t in found.items())


FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def _strings_spelling_flags(root: Path) -> list[str]:
    """Every string literal (docstrings aside) under `root` outside nlpkit/cli/ that spells a `--flag`,
    as ``path:line: --flag``. A command quoted in backticks (`dask scheduler --scheduler-file`) is not
    one of ours."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if (PKG / "cli") in path.parents:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                      and node.body and isinstance(node.body[0], ast.Expr)
                      and isinstance(node.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                for flag in FLAG.findall(re.sub(r"`[^`]*`", "", node.value)):
                    found.append(f"{path.relative_to(PKG.parent)}:{node.lineno}: {flag}")
    return found


@pytest.mark.parametrize("wing", ["outside lm", "lm"])
def test_no_message_outside_the_cli_spells_a_flag(wing):
    """The core names its own parameters (`` `b` must be between 0 and 1``); the CLI spells them as
    the options a user typed (`nlpkit.cli.common.cli_message`), so the Python API never tells its
    callers about options they did not pass."""
    hits = _strings_spelling_flags(PKG)
    hits = [h for h in hits if h.startswith("nlpkit/lm/") == (wing == "lm")]
    assert not hits, "name the parameter in backticks instead:\n" + "\n".join(hits)


def _private_imports() -> list[tuple[str, str]]:
    """(where, name) of every private name (`_x`, not a dunder) one nlpkit module takes from another: `from
    nlpkit.m import _x`, or `m._x` on an imported nlpkit module."""
    mods = _modules()
    found = []
    for name, path in sorted(mods.items()):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        aliases: dict[str, str] = {}  # local name -> nlpkit module
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(up + ([base] if base else []))
                if not base.startswith("nlpkit") or base == name:
                    continue
                for a in node.names:
                    if a.name.startswith("_") and not a.name.startswith("__"):
                        found.append((f"{path.relative_to(PKG.parent)}:{node.lineno}", a.name))
                    if f"{base}.{a.name}" in mods:
                        aliases[a.asname or a.name] = f"{base}.{a.name}"
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith("nlpkit"):
                        aliases[a.asname or a.name.split(".")[0]] = a.asname and a.name or a.name.split(".")[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                base = node.value
                while isinstance(base, ast.Attribute):
                    base = base.value
                if isinstance(base, ast.Name) and base.id in aliases and aliases[base.id] != name:
                    found.append((f"{path.relative_to(PKG.parent)}:{node.lineno}", node.attr))
    return found


def test_no_private_name_is_imported_from_another_module():
    """A name starting with `_` is its module's own: one shared with another module is public (or moves there)."""
    hits = [f"{where}: {name}" for where, name in _private_imports()]
    assert not hits, "make these public or move them:\n" + "\n".join(hits)


# ----------------------------------------------------------------- the language-model layer (issue 34)

def test_no_two_modules_under_lm_share_a_basename():
    """A module's name says where it is: `transformer_lm.py`, `ngram_lm.py`, never two `backend.py`."""
    seen: dict[str, list[str]] = {}
    for path in sorted((PKG / "lm").rglob("*.py")):
        if path.name != "__init__.py":
            seen.setdefault(path.stem, []).append(path.relative_to(PKG.parent).as_posix())
    assert {stem: paths for stem, paths in seen.items() if len(paths) > 1} == {}


def _getattr_on_scorers(root: Path) -> list[str]:
    """`getattr(x, ...)` / `hasattr(x, ...)` where x is named like a continuation scorer (`scorer`, `sc`,
    `reference`, `*_scorer`), as ``path:line``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("getattr", "hasattr") and node.args
                    and isinstance(node.args[0], ast.Name)
                    and re.fullmatch(r"(\w+_)?scorers?|sc|reference", node.args[0].id)):
                found.append(f"{path.relative_to(root.parent)}:{node.lineno}")
    return found


def test_no_optional_scorer_method_is_probed_with_getattr():
    """A `ContinuationScorer` declares what it does (`batched`, `render`, `score_requests`): callers read the
    protocol, never probe a scorer for a method it might have."""
    assert _getattr_on_scorers(PKG) == []


def test_the_probe_finder_finds_a_probe(tmp_path):
    (tmp_path / "m.py").write_text("def f(scorer):\n    return getattr(scorer, 'score_batch', None)\n")
    assert len(_getattr_on_scorers(tmp_path)) == 1


def test_no_command_asks_which_kind_of_model_it_holds():
    """Commands (nlpkit/cli/) and the evaluation wing are written against `LanguageModel`: no `lm.kind == ...`,
    no isinstance of a backend class, no import of a backend module (they go through `nlpkit.lm.load`)."""
    backends = {"nlpkit.lm.transformer.transformer_lm", "nlpkit.lm.ngram.ngram_lm"}
    mods = _modules()
    found = []
    for name, path in sorted(mods.items()):
        if not name.startswith(("nlpkit.cli", "nlpkit.evaluation")):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare) and any(isinstance(x, ast.Attribute) and x.attr == "kind"
                                                    for x in [node.left, *node.comparators]):
                found.append(f"{name}:{node.lineno}: compares .kind")
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance"
                    and "LM" in ast.unparse(node.args[1])):
                found.append(f"{name}:{node.lineno}: isinstance of a backend")
        found += [f"{name}: imports {m}" for m in _imports(path, name, set(mods)) & backends]
    assert found == []


def test_the_shared_lm_layer_needs_no_backend_at_import():
    """`lm/generation/__init__.py` needs only the interface at import (a bare engine `Model` is wrapped lazily)."""
    mods = _modules()
    gen = ast.parse(mods["nlpkit.lm.generation"].read_text(encoding="utf-8"))
    top = {n.module for n in gen.body if isinstance(n, ast.ImportFrom)} | \
          {a.name for n in gen.body if isinstance(n, ast.Import) for a in n.names}
    assert not {m for m in top if m and m.startswith(("nlpkit.lm.transformer", "nlpkit.lm.ngram"))}


TASK_PACKAGES = ("nlpkit.lm.perplexity", "nlpkit.lm.generation")


def test_backends_import_no_task_module():
    """The backends (`lm/transformer/`, `lm/ngram/`) import no task module (`lm/perplexity/`, `lm/generation/`), at
    any depth of a function: the tasks are written over the backends' `LanguageModel`, never the other way."""
    mods = _modules()
    known = set(mods)
    found = []
    for name, path in sorted(mods.items()):
        if name.startswith(("nlpkit.lm.transformer", "nlpkit.lm.ngram")):
            found += [f"{name} imports {m}" for m in sorted(_imports(path, name, known))
                      if m.startswith(TASK_PACKAGES)]
    assert found == []


def test_lm_holds_at_most_ten_modules_directly():
    """`nlpkit/lm/` is grouped by what it does: the interface, the load spec and loader, what every backend shares;
    perplexity, generation, the transformer engine and the n-gram models are packages."""
    direct = sorted(p.name for p in (PKG / "lm").glob("*.py") if p.name != "__init__.py")
    assert len(direct) <= 10, direct


# ----------------------------------------------------------------- the server (issue 45)

def _third_party_imports(path: Path) -> set[str]:
    """Top-level names of every module `path` imports, at any depth."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_the_server_is_a_top_floor_adapter():
    """`nlpkit.serve` sits beside `nlpkit.cli`: only `nlpkit.cli.serve` imports it, and only the two of them import
    the web framework (fastapi, starlette, uvicorn)."""
    mods = _modules()
    known = set(mods)
    web = {"fastapi", "starlette", "uvicorn"}
    importers = sorted(m for m, p in mods.items() if not m.startswith("nlpkit.serve")
                       and any(t == "nlpkit.serve" or t.startswith("nlpkit.serve.") for t in _imports(p, m, known)))
    assert importers == ["nlpkit.cli.serve"]
    web_users = sorted(m for m, p in mods.items() if _third_party_imports(p) & web)
    assert all(m.startswith("nlpkit.serve") or m == "nlpkit.cli.serve" for m in web_users), web_users
