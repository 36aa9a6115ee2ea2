"""Run the docs' language-model examples on two source trees and diff their output byte for byte.

    python tools/readme_examples.py OLD_TREE [NEW_TREE]     # NEW_TREE defaults to this checkout

Each example is a command of the language-model pages (docs/commands/generate.md, sample.md, perplexity.md,
ngram-train.md; once the README's sections), run as
``python -m nlpkit ...`` with PYTHONPATH set to a tree, on the shipped default model and an ARPA model
(tests/fixtures/ngram/kenlm-3.arpa.gz); the docs' files become committed fixtures (book.txt ->
tests/fixtures/text/held_out_sample.txt, held-out.txt -> tests/fixtures/ngram/heldout.txt) and a
command that would draw a random seed gets ``--seed 1``. stdout, stderr (timings of --stats masked)
and the exit status of every example must be the same in both trees; a refactoring that claims
"byte-identical output" runs this before it lands (`OLD_TREE` from ``git archive <base> | tar -x``).
Exit status 1 when any example differs.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures"
BOOK = str(FIX / "text" / "held_out_sample.txt")
HELD = str(FIX / "ngram" / "heldout.txt")
TRAIN = str(FIX / "ngram" / "train.txt")
ARPA = str(FIX / "ngram" / "kenlm-3.arpa.gz")

# (stdin or None, arguments): the docs' examples, with their files replaced by fixtures
EXAMPLES: list[tuple[str | None, list[str]]] = [
    # generate and sample
    (None, ["generate", "It was a dark and stormy night", "--max-new-tokens", "60", "--temperature", "0.7",
            "--top-p", "0.9", "--seed", "1"]),
    ("Once upon a time\n", ["generate", "--temperature", "0", "--stop", "."]),
    (None, ["sample", "The old house", "-n", "8", "--temperature", "0.8", "--top-k", "40", "--seed", "1",
            "--format", "jsonl"]),
    (None, ["sample", "The old house", "--dist", "--top-p", "0.9", "--seed", "1"]),
    (None, ["generate", "Once upon a time", "--max-new-tokens", "20", "--seed", "1", "--format", "jsonl"]),
    (None, ["generate", "The old house", "--max-new-tokens", "40", "--seed", "3", "--stop", "."]),
    (None, ["sample", "It was", "-n", "3", "--max-new-tokens", "12", "--seed", "2", "--stop", ","]),
    # perplexity
    (None, ["perplexity", BOOK]),
    (None, ["perplexity", BOOK, "--context", "64", "--stride", "32"]),
    (None, ["perplexity", BOOK, "--mode", "disjoint", "--context", "128"]),
    (None, ["perplexity", BOOK, "--mode", "second-half", "--context", "64"]),
    (None, ["perplexity", "--per-line", BOOK, "--format", "jsonl"]),
    ("The cat sat on the mat.\n", ["perplexity", "--per-token"]),
    (None, ["perplexity", BOOK, HELD, "--format", "jsonl"]),
    # n-gram models
    (None, ["perplexity", HELD, "--model", ARPA]),
    (None, ["perplexity", HELD, "--model", ARPA, "--per-token", "--format", "jsonl"]),
    (None, ["perplexity", HELD, "--model", ARPA, "--per-line"]),
    (None, ["perplexity", HELD, TRAIN, "--model", ARPA, "--format", "jsonl"]),
    (None, ["generate", "It is a truth", "--model", ARPA, "--top-k", "40", "--seed", "1"]),
    (None, ["generate", "It is a truth", "--model", ARPA, "--seed", "4", "--max-new-tokens", "30", "--stop", "the",
            "--format", "jsonl"]),
    (None, ["sample", "the", "--model", ARPA, "-n", "4", "--seed", "1", "--max-new-tokens", "10", "--ignore-eos"]),
    (None, ["sample", "the", "--model", ARPA, "--dist", "--top-k", "10", "--seed", "1"]),
    (None, ["generate", "hello", "--model", ARPA, "--context", "8"]),                      # refused: exit 2
    (None, ["perplexity", HELD, "--model", ARPA, "--stride", "8"]),                        # refused: exit 2
    # the commands' help
    (None, ["generate", "--help"]),
    (None, ["sample", "--help"]),
    (None, ["perplexity", "--help"]),
]

_TIMINGS = re.compile(r"\d+\.\d+ s|\([\d.]+ [\w/]+\)|inf")


def run(tree: Path, stdin: str | None, args: list[str]) -> str:
    """One example's stdout, stderr (timings masked) and exit status, as one text."""
    env = {**os.environ, "PYTHONPATH": str(tree), "NLPKIT_NO_CACHE": "1", "COLUMNS": "120"}
    env.pop("NLPKIT_MODEL", None)
    with tempfile.TemporaryDirectory() as cache:
        env["NLPKIT_CACHE_DIR"] = cache
        r = subprocess.run([sys.executable, "-m", "nlpkit", *args], input=(stdin or "").encode(),
                           capture_output=True, env=env, cwd=tree)
    err = _TIMINGS.sub("<t>", r.stderr.decode("utf-8", "replace"))
    return f"exit {r.returncode}\n--- stdout\n{r.stdout.decode('utf-8', 'replace')}--- stderr\n{err}"


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 2
    old, new = Path(argv[0]).resolve(), Path(argv[1] if len(argv) > 1 else ROOT).resolve()
    differ = 0
    for stdin, args in EXAMPLES:
        a, b = run(old, stdin, args), run(new, stdin, args)
        shown = " ".join(a if not a.startswith(str(ROOT)) else os.path.relpath(a, ROOT) for a in args)
        if a == b:
            print(f"same    nlpkit {shown}")
        else:
            differ += 1
            import difflib

            print(f"DIFFERS nlpkit {shown}")
            sys.stdout.writelines(difflib.unified_diff(a.splitlines(True), b.splitlines(True), str(old), str(new)))
    print(f"{len(EXAMPLES) - differ} of {len(EXAMPLES)} examples byte-identical")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
