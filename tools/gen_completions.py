"""Regenerate completions/nlpkit.{bash,zsh,fish} from click's shell-completion support.

Run after adding or changing a subcommand: `python tools/gen_completions.py`.
tests/test_completions.py fails when the checked-in files differ from what this writes.
"""

from __future__ import annotations

from pathlib import Path

from nlpkit.cli.completion import SHELLS, completion_script  # noqa: F401 (the test imports both)

OUT = Path(__file__).resolve().parents[1] / "completions"


def main() -> None:
    OUT.mkdir(exist_ok=True)
    for shell in SHELLS:
        (OUT / f"nlpkit.{shell}").write_text(completion_script(shell), encoding="utf-8")
        print(f"wrote completions/nlpkit.{shell}")


if __name__ == "__main__":
    main()
