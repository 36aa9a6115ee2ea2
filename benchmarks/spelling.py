"""Spelling correction accuracy of `nlpkit edit-distance --dict` on Norvig's test sets.

Dictionary: spelling/count_1w.txt (100,000 words with Google Web counts). Each
misspelling of spell-testset1.txt (270) and spell-testset2.txt (400) is one query;
the correction is the top entry, ranked by distance, then count (the default
ranking of --dict). A query counts as correct when that entry is the right word.
Norvig's own corrector ("How to Write a Spelling Corrector") reaches about 75% and
68%; it ranks the same way (known edits at distance 1 before distance 2, then the
most frequent) but over its own big.txt vocabulary, with transpositions as one edit.

Also shown: `--rank channel` (count / 100**distance, a noisy-channel score in which
each edit is a hundred times less likely than none), which lets a common word one
edit away beat a rare web misspelling that count_1w.txt itself contains
("begining", "seperate", "independant").

Runs the real CLI (one subprocess per test set and metric) and prints a table.

    python benchmarks/spelling.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NORVIG = {"spell-testset1.txt": 0.75, "spell-testset2.txt": 0.68}


def data_dir() -> Path:
    for c in [os.environ.get("NLPKIT_DATA"), REPO.parent / "shared" / "data"]:
        if c and Path(c).is_dir():
            return Path(c)
    sys.exit("shared data not found: set NLPKIT_DATA")


def test_set(path: Path) -> list[tuple[str, str]]:
    """(wrong, right) pairs from Norvig's `right: wrong1 wrong2 ...` lines."""
    pairs = []
    for line in path.read_text().splitlines():
        right, wrongs = line.split(":")
        pairs += [(w, right.strip()) for w in wrongs.split()]
    return pairs


def correct(dict_path: Path, queries: list[str], metric: str, rank: str) -> tuple[list[str], float]:
    """Top-1 correction of each query through `nlpkit edit-distance --dict` (queries on stdin)."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(queries) + "\n")
    try:
        t = time.perf_counter()
        with open(f.name, "rb") as stdin:
            r = subprocess.run([sys.executable, "-m", "nlpkit", "edit-distance", "--dict", str(dict_path),
                                "--top", "1", "--metric", metric, "--rank", rank, "--format", "tsv",
                                "--no-signature"],
                               stdin=stdin, capture_output=True, check=True)
        elapsed = time.perf_counter() - t
    finally:
        os.unlink(f.name)
    rows = [line.split("\t") for line in r.stdout.decode().splitlines()[1:]]
    return [row[2] for row in rows], elapsed


def main() -> None:
    data = data_dir() / "spelling"
    dict_path = data / "count_1w.txt"
    vocab = {line.split("\t")[0] for line in dict_path.read_text().splitlines()}
    print(f"{'test set':20s} {'metric':12s} {'rank':9s} {'n':>5s} {'nlpkit':>8s} {'norvig':>8s} "
          f"{'right word in dict':>19s} {'time s':>7s}")
    for name, norvig in NORVIG.items():
        pairs = test_set(data / name)
        for metric, rank in (("levenshtein", "distance"), ("osa", "distance"),
                             ("levenshtein", "channel"), ("osa", "channel")):
            guesses, elapsed = correct(dict_path, [w for w, _ in pairs], metric, rank)
            acc = sum(g == right for g, (_, right) in zip(guesses, pairs)) / len(pairs)
            known = sum(right in vocab for _, right in pairs) / len(pairs)
            print(f"{name:20s} {metric:12s} {rank:9s} {len(pairs):5d} {acc:8.1%} {norvig:8.0%} {known:19.1%} "
                  f"{elapsed:7.2f}")


if __name__ == "__main__":
    main()
