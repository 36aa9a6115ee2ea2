"""What the side-by-side benchmarks share: each side in a fresh process of this Python, with the same thread count
and an offline environment, timed from its start to its exit (`run_worker`). Used by score.py and tasks.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def worker_env(threads: int) -> dict:
    """The environment of a worker: `threads` BLAS/OpenMP threads -- and nlpkit's engine held to as many
    (NLPKIT_LM_THREADS: it would otherwise take fewer while other processes keep a CPU busy, where torch keeps its
    count, which on a shared machine made nlpkit's times swing by whatever else ran) --, Hugging Face offline,
    this checkout first on the path."""
    return dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
                MKL_NUM_THREADS=str(threads), NLPKIT_LM_THREADS=str(threads), HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1",
                TOKENIZERS_PARALLELISM="false", PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def run_worker(script: str, args: list[str], threads: int) -> dict:
    """`python SCRIPT --worker ARGS` in a fresh process: the JSON object its last stdout line prints, with
    "seconds" the process's whole wall time (start-up and imports included) unless the worker measured its own.
    Exits with the worker's stderr when it fails."""
    t = time.perf_counter()
    r = subprocess.run([sys.executable, script, "--worker", *args], capture_output=True, text=True,
                       env=worker_env(threads))
    seconds = time.perf_counter() - t
    if r.returncode != 0:
        sys.exit(f"worker {args} failed:\n{r.stderr[-3000:]}")
    res = json.loads(r.stdout.strip().splitlines()[-1])
    res.setdefault("seconds", seconds)
    return res
