"""The command reference in docs/commands/ is what tools/gen_docs.py makes from the click definitions,
and the docs a newcomer reads link to pages that exist."""

import re
import sys
from pathlib import Path

import click
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))

from gen_docs import MARKER, OUT, commands, page  # noqa: E402

COMMANDS = commands()


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_command_reference_page_is_current(name):
    path = OUT / f"{name}.md"
    assert path.exists(), f"docs/commands/{name}.md is missing: run `python tools/gen_docs.py`"
    assert path.read_text(encoding="utf-8") == page(name, COMMANDS[name], path), (
        f"docs/commands/{name}.md is stale (an option changed): run `python tools/gen_docs.py`")


def test_every_reference_page_is_a_command_and_keeps_its_marker():
    pages = {p.stem for p in OUT.glob("*.md")} - {"README"}
    assert pages == set(COMMANDS), "run `python tools/gen_docs.py` (and delete pages of removed commands)"
    for p in OUT.glob("*.md"):
        if p.stem in COMMANDS:
            assert p.read_text(encoding="utf-8").count(MARKER) == 1, p


def test_every_registered_option_is_on_its_page():
    """Belt and braces: each visible option's long name appears in its command's page."""
    for name, cmd in COMMANDS.items():
        text = (OUT / f"{name}.md").read_text(encoding="utf-8")
        subs = cmd.commands.values() if hasattr(cmd, "commands") else [cmd]
        for sub in subs:
            for p in sub.params:
                if not isinstance(p, click.Option) or p.hidden or "--help" in p.opts:
                    continue
                assert any(o in text for o in p.opts), (name, p.opts)


DOCS = [REPO / "README.md", REPO / "CONTRIBUTING.md", REPO / "benchmarks" / "README.md",
        *sorted((REPO / "docs").rglob("*.md"))]


def anchors(path: Path) -> set[str]:
    """The anchors GitHub gives a Markdown file's headings (lowercase, punctuation dropped, spaces -> '-')."""
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.S | re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
            for h in re.findall(r"^#+ (.*)$", text, flags=re.M)}


@pytest.mark.parametrize("doc", DOCS, ids=[str(d.relative_to(REPO)) for d in DOCS])
def test_relative_links_point_at_files_and_headings_that_exist(doc):
    text = doc.read_text(encoding="utf-8")
    for target, anchor in re.findall(r"\]\(([^)#\s]*)(?:#([^)\s]*))?\)", text):
        if "://" in target or target.startswith("mailto:"):
            continue
        path = (doc.parent / target) if target else doc
        assert path.exists(), f"{doc.relative_to(REPO)} links to {target}, which does not exist"
        if anchor and path.suffix == ".md":
            assert anchor in anchors(path), f"{doc.relative_to(REPO)} links to {target}#{anchor}: no such heading"


def test_readme_links_every_command_page():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for name in COMMANDS:
        assert f"docs/commands/{name}.md" in readme, name
