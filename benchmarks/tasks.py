"""Benchmark `nlpkit score --tasks` against lm-evaluation-harness's HF backend on the same task files, side by side.

    python benchmarks/tasks.py [--docs 200] [--mmlu-docs 100] [--threads 2] [--batch-sizes 8,auto] [--skip-lmeval]

Two task files (written to a temporary folder, data from tinyshakespeare in ../shared/data or $NLPKIT_DATA, else
generated text): `bench_mc`, four-choice HellaSwag-shaped documents, 0-shot; `bench_mmlu5`, MMLU-shaped documents
(question, choices A-D listed in the prompt, the answer letter scored), 5-shot with the `first_n` sampler from a dev
split, so every document's context starts with the same five examples. Model: SmolLM2-135M-Instruct as float32
(benchmarks/lm.py converts the GGUF once into the Hugging Face directory both sides load). Each side runs in its own
subprocess with the same thread count (model load included, as a user waits for it): nlpkit runs `nlpkit score
--tasks`, lm-evaluation-harness `simple_evaluate` with `HFLM` at each batch size. Prints docs/s, peak RSS and acc
per side, and the ratio of nlpkit's docs/s to lm-eval's best. lm-eval's TaskManager is built without indexing its
own task folder (that costs it seconds a user pays; left out to compare scoring). The machine is shared: timings are
noisy.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
import lm as bench_lm  # noqa: E402  (HF_DIR, convert(), peak_rss_mb())

REPO = Path(__file__).resolve().parents[1]
MC_YAML = """task: bench_mc
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{ctx}}}}"
doc_to_choice: endings
doc_to_target: label
metric_list:
  - metric: acc
  - metric: acc_norm
"""
MMLU_YAML = """task: bench_mmlu5
dataset_path: json
dataset_kwargs:
  data_files:
    dev: {dev}
    test: {data}
test_split: test
fewshot_split: dev
fewshot_config:
  sampler: first_n
num_fewshot: 5
description: "The following are multiple choice questions (with answers) about literature.\\n\\n"
output_type: multiple_choice
doc_to_text: "{{{{question.strip()}}}}\\nA. {{{{choices[0]}}}}\\nB. {{{{choices[1]}}}}\\nC. {{{{choices[2]}}}}\\nD. {{{{choices[3]}}}}\\nAnswer:"
doc_to_choice: ["A", "B", "C", "D"]
doc_to_target: answer
metric_list:
  - metric: acc
"""


def _lines() -> list[str]:
    data = Path(os.environ.get("NLPKIT_DATA", REPO.parent / "shared" / "data"))
    for p in [data / "tinyshakespeare" / "input.txt", *sorted(data.glob("**/*.txt"))[:1]]:
        if p.is_file():
            lines = [ln.strip() for ln in p.read_text(encoding="utf-8", errors="replace").splitlines()]
            lines = [ln for ln in lines if len(ln.split()) >= 6]
            if len(lines) > 100:
                return lines
    rnd = random.Random(0)
    words = "the a king queen said would not shall love night day sword crown heart lord lady come go".split()
    return [" ".join(rnd.choice(words) for _ in range(rnd.randint(6, 14))) for _ in range(2000)]


def make_docs(n_mc: int, n_mmlu: int, seed: int = 0) -> tuple[list, list, list]:
    rnd = random.Random(seed)
    lines = _lines()

    def halves(line):
        w = line.split()
        return " ".join(w[:len(w) // 2]), " " + " ".join(w[len(w) // 2:])

    mc = []
    for i in range(n_mc):
        a, b = halves(lines[(i * 7) % len(lines)])
        wrong = [halves(rnd.choice(lines))[1].strip() for _ in range(3)]
        label = rnd.randrange(4)
        endings = wrong[:label] + [b.strip()] + wrong[label:]
        mc.append({"ctx": a, "endings": endings, "label": label})

    def question(i):
        a, b = halves(lines[(i * 13 + 5) % len(lines)])
        choices = [b.strip()] + [halves(rnd.choice(lines))[1].strip() for _ in range(3)]
        rnd.shuffle(choices)
        return {"question": f"Which words complete the line '{a} ...'?", "choices": choices,
                "answer": choices.index(b.strip())}

    return mc, [question(i) for i in range(n_mmlu)], [question(10_000 + i) for i in range(5)]


def worker_nlpkit(task_dir: str, task: str) -> dict:
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "nlpkit", "score", "-m", str(bench_lm.HF_DIR), "--tasks", task,
                        "--include-path", task_dir, "--format", "jsonl", "--quiet"], capture_output=True, text=True)
    seconds = time.perf_counter() - t
    if r.returncode != 0:
        sys.exit(r.stderr[-2000:])
    recs = [json.loads(line) for line in r.stdout.splitlines()]
    acc = next(x["value"] for x in recs if x.get("metric") == "acc")
    import resource

    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # the nlpkit process's peak, MB
    return {"seconds": seconds, "acc": acc, "rss_mb": rss}


def worker_lmeval(task_dir: str, task: str, batch_size: str) -> dict:
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    t = time.perf_counter()
    bs = batch_size if batch_size == "auto" else int(batch_size)
    lm = HFLM(pretrained=str(bench_lm.HF_DIR), dtype="float32", batch_size=bs, device="cpu")
    # include_defaults=False: lm-eval's index of its own 14,000 task files (seconds) is left out of its time
    res = simple_evaluate(model=lm, tasks=[task], batch_size=bs,
                          task_manager=TaskManager(include_path=task_dir, include_defaults=False),
                          bootstrap_iters=0, log_samples=False)
    seconds = time.perf_counter() - t
    return {"seconds": seconds, "acc": res["results"][task]["acc,none"], "rss_mb": bench_lm.peak_rss_mb()}


def run_worker(args: list[str], threads: int) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), HF_DATASETS_OFFLINE="1",
               HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, __file__, "--worker", *args], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"worker {args} failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=200)
    ap.add_argument("--mmlu-docs", type=int, default=100)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch-sizes", default="8,auto")
    ap.add_argument("--tasks", default="bench_mc,bench_mmlu5")
    ap.add_argument("--skip-lmeval", action="store_true")
    ap.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        side, task_dir, task, *rest = args.worker
        res = worker_nlpkit(task_dir, task) if side == "nlpkit" else worker_lmeval(task_dir, task, rest[0])
        print(json.dumps(res))
        return
    load_start = time.perf_counter(), os.getloadavg()[0]
    bench_lm.convert()
    mc, mmlu, dev = make_docs(args.docs, args.mmlu_docs)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        for name, rows in (("mc.jsonl", mc), ("mmlu.jsonl", mmlu), ("dev.jsonl", dev)):
            (d / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        (d / "bench_mc.yaml").write_text(MC_YAML.format(data=d / "mc.jsonl"))
        (d / "bench_mmlu5.yaml").write_text(MMLU_YAML.format(data=d / "mmlu.jsonl", dev=d / "dev.jsonl"))
        for task in args.tasks.split(","):
            n = args.docs if task == "bench_mc" else args.mmlu_docs
            rows = [("nlpkit score --tasks", run_worker(["nlpkit", tmp, task], args.threads))]
            if not args.skip_lmeval:
                for bs in args.batch_sizes.split(","):
                    rows.append((f"lm-eval hf bs={bs}", run_worker(["lmeval", tmp, task, bs], args.threads)))
            print(f"\n{task}: {n} documents, SmolLM2-135M float32, {args.threads} threads, load average at start "
                  f"{load_start[1]:.1f}")
            print(f"{'engine':<24}{'docs/s':>10}{'seconds':>10}{'peak RSS MB':>13}{'acc':>8}")
            for name, r in rows:
                print(f"{name:<24}{n / r['seconds']:>10.2f}{r['seconds']:>10.1f}{r['rss_mb']:>13.0f}{r['acc']:>8.3f}")
            if len(rows) > 1:
                best = min(rows[1:], key=lambda nr: nr[1]["seconds"])
                print(f"ratio nlpkit / {best[0]} (best lm-eval): {best[1]['seconds'] / rows[0][1]['seconds']:.2f}x")
    print(f"benchmark wall time {time.perf_counter() - load_start[0]:.0f} s, load average now {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
