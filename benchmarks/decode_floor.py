"""Where a decode step's time goes: the matrix products alone against the whole step, and llama.cpp's F32 step.

    python benchmarks/decode_floor.py [--tokens 128] [--repeats 5]

A decode step of SmolLM2-135M streams its 540 MB of float32 weights once (four matmuls per layer: fused QKV,
output, fused gate/up, down; then the LM head). This script times, at 1 and 2 BLAS threads in this process:
- "matmuls alone": the step's 121 matrix-vector products over the model's own weight arrays, in the same
  order, with nothing between them (the floor any numpy engine built on numpy's OpenBLAS has);
- "whole step": `Model.forward` of one token with the KV cache (the engine's decode, greedy, `--tokens` steps);
- llama.cpp's F32 GGUF `tg` (llama-bench, 3 repetitions) at the same threads, when it is built.
The difference between the first two is the engine's per-token overhead (norms, RoPE, attention, Python);
the difference between the first and llama.cpp is what OpenBLAS's gemv gives up to ggml's at these shapes.
Needs the float32 directory and F32 GGUF that benchmarks/lm.py makes in benchmarks/out/.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import lm as bench_lm  # noqa: E402  (HF_DIR, F32_GGUF, llamacpp_bin())


def step_matmuls(weights) -> list[np.ndarray]:
    """The weight matrices a decode step multiplies by, in order."""
    mats = []
    for layer in weights.layers:
        mats += [layer.wqkv, layer.wo, layer.w_gate_up, layer.w_down]
    return mats + [weights.lm_head]


def time_matmuls(mats: list[np.ndarray], repeats: int) -> float:
    """Best seconds per step of x @ W over `mats` (x a [1, in] vector, as in a decode step)."""
    xs = {m.shape[0]: np.random.default_rng(0).standard_normal((1, m.shape[0]), dtype=np.float32) for m in mats}
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        for m in mats:
            xs[m.shape[0]] @ m
        best = min(best, time.perf_counter() - t)
    return best


def time_decode(model, tokens: int) -> float:
    """Seconds per greedy decode step after a 32-token prompt (as benchmarks/lm.py)."""
    ids = np.array([bench_lm.prompt_ids(32)])
    cache = model.new_cache(1, 32 + tokens + 1)
    logits = model.forward(ids, cache, last_only=True)
    t = time.perf_counter()
    for _ in range(tokens):
        logits = model.forward(np.array([[int(logits[0, -1].argmax())]]), cache, last_only=True)
    return (time.perf_counter() - t) / tokens


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    import os

    from nlpkit.lm.transformer.loaders import load_model
    from nlpkit.lm.threads import held_blas_threads

    model = load_model(bench_lm.HF_DIR)
    mats = step_matmuls(model.weights)
    print(f"load average {os.getloadavg()[0]:.2f}; {len(mats)} matmuls, "
          f"{sum(m.nbytes for m in mats) / 1e6:.0f} MB of weights per step")
    print(f"{'threads':>8}{'matmuls ms':>12}{'step ms':>10}{'overhead':>10}{'llama.cpp ms':>14}{'step/l.cpp':>12}")
    for n in (1, 2):
        os.environ["NLPKIT_LM_THREADS"] = str(n)
        with held_blas_threads(n):
            time_matmuls(mats, 1)  # warm
            floor = time_matmuls(mats, args.repeats)
            step = time_decode(model, args.tokens)
        peer = bench_lm.llamacpp_bin(n, bench_lm.F32_GGUF) if bench_lm.F32_GGUF.is_file() else None
        peer_ms = 1e3 / peer["decode_tok_s"] if peer and peer.get("decode_tok_s") else float("nan")
        print(f"{n:>8}{floor * 1e3:>12.2f}{step * 1e3:>10.2f}{(step - floor) * 1e3:>10.2f}{peer_ms:>14.2f}"
              f"{step * 1e3 / peer_ms:>12.2f}")


if __name__ == "__main__":
    main()
