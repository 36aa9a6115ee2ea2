"""The checked-in shell completions are what tools/gen_completions.py generates."""

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))

from gen_completions import SHELLS, completion_script  # noqa: E402


@pytest.mark.parametrize("shell", SHELLS)
def test_completion_file_is_current(shell):
    path = REPO / "completions" / f"nlpkit.{shell}"
    assert path.read_text(encoding="utf-8") == completion_script(shell), (
        f"completions/nlpkit.{shell} is stale: run `python tools/gen_completions.py`")
