"""CONTRIBUTING's map names every module, and docs/layout.md every part of the repository: a module or a
script added without a line in the map fails here, so the map stays the one a newcomer can trust."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from nlpkit.cli.main import COMMANDS

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "nlpkit"


def _section(text: str, heading: str) -> str:
    """The text under `## heading`, its ### subsections included, up to the next `## `."""
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:] if end < 0 else text[start:end]


def named_in(text: str) -> set[str]:
    """What a map names: each `code span` that is a path or a module name (`io.py`, `distance`, `loaders/`,
    `stats/pmi_shards.py`, `nlpkit.lm.load`), and each entry of a fenced block's tree; a path or a dotted name
    stands for its last part, with and without `.py`."""
    blocks = re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S)
    spans = re.findall(r"`([^`]+)`", re.sub(r"```.*?```", "", text, flags=re.S))  # a span may wrap a line
    for block in blocks:
        spans += re.split(r"[\s,]+", block)
    names = set()
    for span in spans:
        span = span.strip().rstrip(",")
        if not re.fullmatch(r"[\w./]+", span):
            continue  # a call, a command line, a sentence
        last = span.rstrip("/").rsplit("/", 1)[-1]
        if last.endswith(".py"):
            last = last[:-3]
        names.add(last.rsplit(".", 1)[-1] if last.startswith("nlpkit.") else last)
    return names


def command_modules() -> set[Path]:
    """The command modules: `cli/<name>.py` registered in `COMMANDS` (the map says one module per command)."""
    return {REPO / (module.replace(".", "/") + ".py") for module, _ in COMMANDS.values()}


def unnamed_modules(text: str) -> list[str]:
    names = named_in(text)
    commands = command_modules()
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name in ("__init__.py", "__main__.py") or path in commands:
            continue
        if path.stem not in names:
            missing.append(str(path.relative_to(REPO)))
    for init in sorted(PACKAGE.rglob("__init__.py")):
        package = init.parent
        if package != PACKAGE and package.name not in names:
            missing.append(str(package.relative_to(REPO)) + "/")
    return missing


def test_contributing_map_names_every_module():
    """Every module and package under nlpkit/ is named in CONTRIBUTING's "Where the code lives" (a command's
    module is its entry in `COMMANDS`)."""
    text = _section((REPO / "CONTRIBUTING.md").read_text(encoding="utf-8"), "Where the code lives")
    missing = unnamed_modules(text)
    assert not missing, f"name these in CONTRIBUTING.md's map (Where the code lives): {', '.join(missing)}"


def test_the_map_check_sees_a_module_left_out():
    """The check itself: a map without `spell` misses `nlpkit/edit/spell.py`."""
    text = _section((REPO / "CONTRIBUTING.md").read_text(encoding="utf-8"), "Where the code lives")
    assert "nlpkit/edit/spell.py" in unnamed_modules(text.replace("`spell`", "spelling"))


def _repository_parts() -> list[str]:
    """The top-level folders git tracks, and every script in tools/ and benchmarks/ (outside a git checkout:
    the folders on disk, hidden ones but .ci left out)."""
    try:
        tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
        tops = sorted({line.split("/", 1)[0] + "/" for line in tracked.splitlines() if "/" in line})
    except (OSError, subprocess.CalledProcessError):
        tops = sorted(p.name + "/" for p in REPO.iterdir() if p.is_dir() and p.name != "__pycache__"
                      and (not p.name.startswith(".") or p.name == ".ci") and not p.name.endswith(".egg-info"))
    scripts = [f"{d}/{p.name}" for d in ("tools", "benchmarks") for p in sorted((REPO / d).glob("*.py"))]
    return tops + scripts


@pytest.mark.parametrize("part", _repository_parts())
def test_docs_layout_names_every_part_of_the_repository(part):
    """docs/layout.md, the map of the repository, names each top-level folder (`tests/`) and each script of
    tools/ and benchmarks/ (`gen_docs.py`), in a code span of its own."""
    spans = {span.strip() for span in re.findall(r"`([^`]+)`", (REPO / "docs" / "layout.md").read_text("utf-8"))}
    assert {part, Path(part).name if part.endswith(".py") else part} & spans, f"docs/layout.md does not name {part}"
