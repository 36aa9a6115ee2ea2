"""Benchmark `nlpkit score --tasks` against lm-evaluation-harness's HF backend on the same task files, side by side.

    python benchmarks/tasks.py [--docs 200] [--mmlu-docs 100] [--threads 2] [--batch-sizes 8,16,32] [--skip-lmeval]
                               [--tasks bench_mc,bench_mmlu5,hellaswag,arc_easy,piqa,winogrande]

Task files written to a temporary folder (the documents are the same for a given count):
- lm-evaluation-harness's own `hellaswag`, `arc_easy`, `piqa` and `winogrande` files, 0-shot, each wrapped as the
  tests wrap them (tests/evaluation/real_task_data.py: a YAML that `include`s the installed file and points
  `dataset_kwargs.data_files` at local JSON Lines; nothing of lm-eval's is copied) around generated documents in the
  dataset's schema at about its lengths (`make_real_docs`: sentences of the Gutenberg novels in ../shared/data or
  $NLPKIT_DATA, each used once): hellaswag a one- or two-sentence context and four one-sentence endings, arc_easy
  a question and four short answers, piqa a goal and two solutions, winogrande a sentence with a blank and two
  options (`multiple_input`: two contexts, one shared continuation);
- `bench_mc`, four-choice documents with half-line contexts (tinyshakespeare), 0-shot (`--docs`);
- `bench_mmlu5`, MMLU-shaped documents (question, choices A-D listed in the prompt, the answer letter scored),
  5-shot with the `first_n` sampler from a dev split, so every document's context starts with the same five
  examples (`--mmlu-docs`).
Model: SmolLM2-135M-Instruct as float32 (benchmarks/lm.py converts the GGUF once into the Hugging Face directory both
sides load).

Fair by construction: each side runs in its own fresh process, with the same thread count and the same environment,
and is timed from the process's start to its exit -- interpreter start-up, imports, model load, data and task
loading, scoring and output on both sides, as a user waits for them. nlpkit runs `nlpkit score --tasks`;
lm-evaluation-harness `simple_evaluate` with `HFLM` (float32, CPU) once per batch size, and the ratio is taken
against its best (fastest) batch size. Two choices favour lm-eval: its TaskManager is built without indexing its own
task folder (`include_defaults=False`: ~14,700 YAMLs, 5.9 s on this machine, which a user of `lm_eval --tasks`
pays; `--lmeval-index` counts it), and its `auto` batch size is not in the default list (its probe on a CPU took
320 s and 14 GB for 30 documents, against 25 s at batch size 8). The output gives, per side: docs/s, seconds, peak RSS, acc and acc_norm
(the same on both sides; a warning when not), lm-eval's import time (part of its seconds), and the ratio of
lm-eval's best seconds to nlpkit's. The machine may be shared: the load average at the start and the end is printed;
quote it with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _timing  # noqa: E402  (run_worker: a side in a fresh process)
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
    default = next((d for d in (REPO.parent / "shared" / "data", REPO.parents[1] / "shared" / "data") if d.is_dir()),
                   REPO.parent / "shared" / "data")  # beside the checkout, or beside a worktree's folder
    data = Path(os.environ.get("NLPKIT_DATA", default))
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


# lm-evaluation-harness's real task files (read from the installed package, never copied): task -> (its file,
# the splits the wrapper points at local data, the split evaluated)
REAL = {"hellaswag": ("hellaswag/hellaswag.yaml", ("train", "validation"), "validation"),
        "arc_easy": ("arc/arc_easy.yaml", ("train", "validation", "test"), "test"),
        "piqa": ("piqa/piqa.yaml", ("train", "validation"), "validation"),
        "winogrande": ("winogrande/default.yaml", ("train", "validation"), "validation")}


def _sentences() -> list[str]:
    """Sentences of English prose (5-60 words): the Gutenberg novels of ../shared/data (or $NLPKIT_DATA), else
    `_lines()`. Underscores (the novels' italics) are dropped: winogrande's blank is the sentence's only "_"."""
    default = next((d for d in (REPO.parent / "shared" / "data", REPO.parents[1] / "shared" / "data") if d.is_dir()),
                   REPO.parent / "shared" / "data")
    data = Path(os.environ.get("NLPKIT_DATA", default)) / "gutenberg"
    out: list[str] = []
    for p in sorted(data.glob("*.txt"))[:4]:
        text = p.read_text(encoding="utf-8", errors="replace").replace("_", "")
        text = text[len(text) // 10: -len(text) // 10]  # past the licence and front matter
        for s in re.split(r"(?<=[.!?])\s+", re.sub(r"\s+", " ", text)):
            n = len(s.split())
            if 5 <= n <= 60 and s[:1].isupper() and '"' not in s and "\u201c" not in s:
                out.append(s)
    out = list(dict.fromkeys(out))  # each sentence once
    return out if len(out) > 2000 else _lines()


def make_real_docs(task: str, n: int, seed: int = 0) -> list[dict]:
    """`n` documents in `task`'s dataset schema, with the real dataset's lengths (about): hellaswag a one- or
    two-sentence ctx_a (15-45 words), a ctx_b of 2-5 words, four endings of a sentence (8-30 words); arc_easy a
    question of 10-35 words and four answers of 1-6 words; piqa a goal of 5-15 words and two solutions of 10-35;
    winogrande a sentence of 15-30 words with a blank 40-80% through and two one-word options."""
    rnd = random.Random(seed)
    sents = _sentences()
    rnd.shuffle(sents)
    fresh = iter(sents * 4)  # no sentence twice while they last: two documents whose texts coincide trip lm-eval's
    # logits cache (a context + continuation equal to another's split elsewhere gets its logits misaligned, #2984)

    def words(lo, hi):
        w = next(fresh).split()
        while len(w) < lo:
            w += next(fresh).split()
        return w[:rnd.randint(lo, hi)]

    def sentence(lo, hi):
        w = words(lo, hi)
        return " ".join(w).rstrip(",;:") + ("" if w[-1][-1] in ".!?" else ".")

    docs = []
    for i in range(n):
        if task == "hellaswag":
            label = rnd.randrange(4)
            docs.append({"ind": i, "activity_label": " ".join(words(1, 2)).strip(".,;:!?").title(),
                         "ctx_a": sentence(15, 45), "ctx_b": " ".join(words(2, 5)).lower(),
                         "ctx": "", "endings": [sentence(8, 30) for _ in range(4)], "source_id": f"s{i}",
                         "split": "val", "split_type": "indomain", "label": str(label)})
            docs[-1]["ctx"] = docs[-1]["ctx_a"] + " " + docs[-1]["ctx_b"]
        elif task == "arc_easy":
            docs.append({"id": f"q{i}", "question": sentence(10, 35)[:-1] + "?",
                         "choices": {"text": [" ".join(words(1, 6)).strip(".,;:!?") for _ in range(4)],
                                     "label": ["A", "B", "C", "D"]}, "answerKey": "ABCD"[rnd.randrange(4)]})
        elif task == "piqa":
            docs.append({"goal": sentence(5, 15), "sol1": sentence(10, 35), "sol2": sentence(10, 35),
                         "label": rnd.randrange(2)})
        elif task == "winogrande":
            w = words(15, 30)
            at = rnd.randint(int(len(w) * 0.4), int(len(w) * 0.8))
            options = [w[at].strip(".,;:!?") or "it"]
            while len(options) < 2:  # two different options (the same twice: a tie either side may break)
                other = rnd.choice(next(fresh).split()).strip(".,;:!?")
                if other and other != options[0]:
                    options.append(other)
            rnd.shuffle(options)
            w[at] = "_"
            docs.append({"sentence": " ".join(w), "option1": options[0], "option2": options[1],
                         "answer": rnd.choice("12")})
    return docs


def write_real_task(d: Path, task: str, n: int) -> None:
    """Into folder `d`: `task`'s local data (`n` documents in the evaluated split, 5 in the others) and a YAML that
    includes lm-eval's own task file and reads them (as tests/evaluation/real_task_data.py wraps them)."""
    import lm_eval

    rel, splits, evaluated = REAL[task]
    files = {}
    for split in splits:
        docs = make_real_docs(task, n if split == evaluated else 5, seed=0 if split == evaluated else 1)
        p = d / f"{task}-{split}.jsonl"
        p.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in docs), encoding="utf-8")
        files[split] = str(p)
    (d / f"{task}.yaml").write_text(
        f"include: {Path(lm_eval.__file__).parent / 'tasks' / rel}\ntask: {task}\ndataset_path: json\n"
        f"dataset_name: null\ndataset_kwargs:\n  data_files: {json.dumps(files)}\n", encoding="utf-8")


def worker_nlpkit(task_dir: str, task: str) -> dict:
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "nlpkit", "score", "-m", str(bench_lm.HF_DIR), "--tasks", task,
                        "--include-path", task_dir, "--format", "jsonl", "--quiet"], capture_output=True, text=True)
    seconds = time.perf_counter() - t
    if r.returncode != 0:
        sys.exit(r.stderr[-2000:])
    recs = [json.loads(line) for line in r.stdout.splitlines()]
    acc = {x["metric"]: x["value"] for x in recs if x.get("metric") in ("acc", "acc_norm")}
    import resource

    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # the nlpkit process's peak, MB
    return {"seconds": seconds, "acc": acc, "rss_mb": rss}


def worker_lmeval(task_dir: str, task: str, batch_size: str, index: bool = False) -> dict:
    t = time.perf_counter()
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    imports = time.perf_counter() - t
    bs = batch_size if batch_size == "auto" else int(batch_size)
    lm = HFLM(pretrained=str(bench_lm.HF_DIR), dtype="float32", batch_size=bs, device="cpu")
    # include_defaults=False: lm-eval's index of its own 14,700 task files (seconds) is left out of its time, unless
    # `index` (--lmeval-index: as `lm_eval --tasks ... --include_path DIR` builds it)
    res = simple_evaluate(model=lm, tasks=[task], batch_size=bs,
                          task_manager=TaskManager(include_path=task_dir, include_defaults=index),
                          bootstrap_iters=0, log_samples=False)
    acc = {m: res["results"][task][f"{m},none"] for m in ("acc", "acc_norm") if f"{m},none" in res["results"][task]}
    return {"imports": imports, "acc": acc, "rss_mb": bench_lm.peak_rss_mb()}


def run_worker(args: list[str], threads: int) -> dict:
    """One side in a fresh process (`_timing.run_worker`). lm-eval's side is the worker process itself, timed from
    its start to its exit; nlpkit's worker times the `nlpkit` process it starts the same way (and reads its peak
    RSS)."""
    return _timing.run_worker(__file__, args, threads)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", default="200", help="the 0-shot tasks' document counts (bench_mc and lm-eval's "
                    "real task files), comma-separated (one run each)")
    ap.add_argument("--mmlu-docs", default="100", help="bench_mmlu5 document counts, comma-separated")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch-sizes", default="8,16,32", help="lm-eval's batch sizes; the ratio is to its best")
    ap.add_argument("--tasks", default="bench_mc,bench_mmlu5," + ",".join(REAL),
                    help="bench_mc, bench_mmlu5 and lm-eval's real task files: " + ", ".join(REAL))
    ap.add_argument("--skip-lmeval", action="store_true")
    ap.add_argument("--lmeval-index", action="store_true",
                    help="build lm-eval's TaskManager as its CLI does, indexing its own task folder (its time counted)")
    ap.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        side, task_dir, task, *rest = args.worker
        res = worker_nlpkit(task_dir, task) if side == "nlpkit" else \
            worker_lmeval(task_dir, task, rest[0], len(rest) > 1 and rest[1] == "index")
        print(json.dumps(res))
        return
    start = time.perf_counter()
    bench_lm.convert()
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        for task in args.tasks.split(","):
            for n in (int(x) for x in (args.mmlu_docs if task == "bench_mmlu5" else args.docs).split(",")):
                d = Path(tmp) / f"{task}-{n}"
                d.mkdir()
                if task in REAL:
                    write_real_task(d, task, n)
                else:
                    mc, mmlu, dev = make_docs(n, n)
                    for name, rows in (("mc.jsonl", mc), ("mmlu.jsonl", mmlu), ("dev.jsonl", dev)):
                        (d / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
                    (d / "bench_mc.yaml").write_text(MC_YAML.format(data=d / "mc.jsonl"))
                    (d / "bench_mmlu5.yaml").write_text(MMLU_YAML.format(data=d / "mmlu.jsonl",
                                                                         dev=d / "dev.jsonl"))
                load = os.getloadavg()[0]
                rows = [("nlpkit score --tasks", run_worker(["nlpkit", str(d), task], args.threads))]
                if not args.skip_lmeval:
                    for bs in args.batch_sizes.split(","):
                        extra = ["index"] if args.lmeval_index else []
                        rows.append((f"lm-eval hf bs={bs}", run_worker(["lmeval", str(d), task, bs, *extra],
                                                                        args.threads)))
                print(f"\n{task}: {n} documents, SmolLM2-135M float32, {args.threads} threads, whole processes "
                      f"(start-up, imports, model load included on both sides); load average {load:.1f} -> "
                      f"{os.getloadavg()[0]:.1f}")
                print(f"{'engine':<24}{'docs/s':>10}{'seconds':>10}{'of which imports':>18}{'peak RSS MB':>13}"
                      f"{'acc':>8}{'acc_norm':>10}")
                for name, r in rows:
                    imports = f"{r['imports']:.1f}" if "imports" in r else "-"
                    norm = f"{r['acc']['acc_norm']:.3f}" if "acc_norm" in r["acc"] else "-"
                    print(f"{name:<24}{n / r['seconds']:>10.2f}{r['seconds']:>10.1f}{imports:>18}"
                          f"{r['rss_mb']:>13.0f}{r['acc']['acc']:>8.3f}{norm:>10}")
                if any(r["acc"] != rows[0][1]["acc"] for _, r in rows[1:]):
                    print("WARNING: the sides' acc differ")
                if len(rows) > 1:
                    best = min(rows[1:], key=lambda nr: nr[1]["seconds"])
                    ratio = best[1]["seconds"] / rows[0][1]["seconds"]
                    ratios.append(f"{task} {n} docs: {ratio:.2f}x (against {best[0]})")
                    print(f"ratio: nlpkit {ratio:.2f}x lm-eval's best ({best[0]})")
    if ratios:
        print("\nratios (lm-eval's best seconds / nlpkit's):\n  " + "\n  ".join(ratios))
    print(f"benchmark wall time {time.perf_counter() - start:.0f} s, load average now {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
