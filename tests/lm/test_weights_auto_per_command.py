"""What `--weights auto` picks per command is what docs/weights.md's table says (issue 44 item 18): native for
perplexity and score's scoring tasks, float32 (a model that fits) for generate, sample and score's generate task."""

from __future__ import annotations

import pytest

from conftest import FIXTURES, REPO

LLAMA = str(FIXTURES / "lm" / "llama-gqa")


@pytest.fixture
def files(tmp_path):
    (tmp_path / "t.txt").write_text("the cat sat on the mat. " * 10)
    (tmp_path / "ll.jsonl").write_text('{"context": "the cat", "continuation": " sat"}\n')
    (tmp_path / "gen.jsonl").write_text('{"context": "the cat", "target": "sat"}\n')
    return tmp_path


@pytest.mark.parametrize("args, layout", [
    (["perplexity", "{d}/t.txt"], "native (auto: scoring"),
    (["score", "{d}/ll.jsonl", "--format", "jsonl"], "native (auto: scoring"),
    (["score", "{d}/gen.jsonl", "--format", "jsonl", "--max-gen-toks", "2"], "float32 (auto: decoding, and its float32"),
    (["generate", "hello", "--max-new-tokens", "2", "--seed", "1"], "float32 (auto: decoding, and its float32"),
    (["sample", "hello", "-n", "2", "--max-new-tokens", "2", "--seed", "1"], "float32 (auto: decoding, and its float32"),
])
def test_auto_picks_per_command_what_the_docs_say(cli, files, args, layout):
    r = cli(*[a.format(d=files) for a in args], "-m", LLAMA, "-v", env={"NLPKIT_WEIGHTS": ""})
    assert r.returncode == 0, r.stderr.decode()
    line = next(x for x in r.stderr.decode().splitlines() if x.startswith("nlpkit: model "))
    assert f"weights {layout}" in line, line
    doc = (REPO / "docs" / "weights.md").read_text(encoding="utf-8")
    assert "| `score`, the generate task (items with a `target`) | float32 when the model fits" in doc
