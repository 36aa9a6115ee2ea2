"""Start-up time: `nlpkit --help` and a light subcommand against bare `python -c pass`.

Target: `nlpkit --help` within 100 ms of bare Python. Prints median wall times of
N runs each (subprocesses, so imports are cold per run but files are cached).

    python benchmarks/startup.py [-n 15]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time


def median_time(cmd: list[str], n: int) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=15)
    args = ap.parse_args()
    py = sys.executable
    base = median_time([py, "-c", "pass"], args.n)
    rows = [("python -c pass", base)]
    for label, argv in [("nlpkit --help", ["--help"]),
                        ("nlpkit edit-distance kitten sitting", ["edit-distance", "kitten", "sitting"])]:
        rows.append((label, median_time([py, "-m", "nlpkit", *argv], args.n)))
    print(f"{'command':40s} {'median ms':>10s} {'over python':>12s}")
    for label, t in rows:
        print(f"{label:40s} {t * 1000:10.1f} {(t - base) * 1000:12.1f}")
    over = (rows[1][1] - base) * 1000
    print(f"\n--help overhead {over:.1f} ms (target < 100 ms): {'OK' if over < 100 else 'MISSED'}")


if __name__ == "__main__":
    main()
