"""The Python examples of docs/python.md run as written (issue 44 item 18: the generate task and batched generation
from Python), on the shipped default model."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from conftest import REPO

BLOCKS = re.findall(r"```python\n(.*?)```", (REPO / "docs" / "python.md").read_text(encoding="utf-8"), re.S)
ITEMS = ('{"context": "Q: 1+1?\\nA:", "target": "2"}\n'
         '{"context": "It was a dark and", "target": ["stormy", " stormy"]}\n')


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_each_python_example_runs(tmp_path, index):
    (tmp_path / "items.jsonl").write_text(ITEMS, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    r = subprocess.run([sys.executable, "-c", BLOCKS[index]], cwd=tmp_path, env=env, capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode()
    lines = r.stdout.decode().splitlines()
    assert lines and all(re.match(r"\d+ ", line) for line in lines), lines


def test_the_examples_are_there():
    assert len(BLOCKS) >= 2 and any("generate_batched" in b for b in BLOCKS) and any("Generator" in b for b in BLOCKS)
