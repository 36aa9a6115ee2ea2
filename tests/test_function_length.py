"""No function under nlpkit/ is longer than 100 lines: a longer one is doing several jobs (parse, check, run,
write), and each wants a name of its own."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "nlpkit"
MOST_LINES = 100


def function_lengths(source: str) -> list[tuple[str, int, int]]:
    """(qualified name, first line, lines) of every function and method in `source`: from its `def` line to its
    last line (decorators not counted; a nested function counts inside its parent and on its own)."""
    found = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found.append((prefix + child.name, child.lineno, child.end_lineno - child.lineno + 1))
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return found


def test_no_function_is_longer_than_100_lines():
    too_long = [f"{path.relative_to(PACKAGE.parent)}:{line} {name} ({n} lines)"
                for path in sorted(PACKAGE.rglob("*.py"))
                for name, line, n in function_lengths(path.read_text(encoding="utf-8")) if n > MOST_LINES]
    assert not too_long, "split these functions (at most 100 lines each): " + "; ".join(too_long)


def test_the_length_is_counted_from_def_to_the_last_line():
    source = "@decorator\ndef f():\n    x = 1\n\n    return x\n\nclass C:\n    def m(self):\n        pass\n"
    assert function_lengths(source) == [("f", 2, 4), ("C.m", 8, 2)]
