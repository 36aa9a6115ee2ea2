"""`nlpkit bleu` against sacrebleu: every WMT score and signature, and wall time against the CLI.

    python benchmarks/bleu.py            # BLEU + chrF on all systems of every configuration
    python benchmarks/bleu.py --ter      # + TER (slow: ~15 s per 1,002-line system per reference)
    python benchmarks/bleu.py --ter --only "en-de ref A" --skip-timing
    python benchmarks/bleu.py --repeat 3 # timing: best of 3 alternating runs
    python benchmarks/bleu.py --jobs 4   # also time nlpkit --jobs 4 (default 2)

Checks (exact equality with the sacrebleu API for the same options, identical
signatures): WMT21 en-de, 20 systems, ref A and refs A+C+D; WMT21 en-zh,
29 systems, `--tokenize zh`, ref A and refs A+B; WMT17 en-de, 16 systems.
Timing: `nlpkit bleu` and the `sacrebleu` command, each scoring the 20 WMT21
en-de systems against 3 references in one call; the sacrebleu command's printed
scores (-w 10) must equal nlpkit's, rounded the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("NLPKIT_DATA", REPO.parent / "shared" / "data"))
SACREBLEU = Path(sys.executable).with_name("sacrebleu")


def read_like_sacrebleu_cli(path: Path) -> list[str]:
    with open(path, encoding="utf-8", newline="\n") as f:
        return [line.rstrip() for line in f]


def configurations() -> list[tuple[str, list[Path], list[Path], str | None]]:
    w21, w17 = DATA / "wmt21", DATA / "wmt17-ende"
    de = sorted((w21 / "system-outputs").glob("newstest2021.en-de.hyp.*.de"))
    zh = sorted((w21 / "system-outputs").glob("newstest2021.en-zh.hyp.*.zh"))
    ref_de = lambda r: w21 / f"references/newstest2021.en-de.ref.{r}.de"  # noqa: E731
    ref_zh = lambda r: w21 / f"references/newstest2021.en-zh.ref.{r}.zh"  # noqa: E731
    return [
        ("wmt21 en-de ref A", [ref_de("A")], de, None),
        ("wmt21 en-de refs A+C+D", [ref_de(r) for r in "ACD"], de, None),
        ("wmt21 en-zh ref A, zh", [ref_zh("A")], zh, "zh"),
        ("wmt21 en-zh refs A+B, zh", [ref_zh(r) for r in "AB"], zh, "zh"),
        ("wmt17 en-de ref", [w17 / "newstest2017-ende.ref.de"],
         sorted((w17 / "system-outputs").glob("newstest2017.*")), None),
    ]


def nlpkit_cmd(refs, hyps, metrics, tokenize=None, jobs=1) -> list[str]:
    cmd = [sys.executable, "-m", "nlpkit", "bleu", *[a for r in refs for a in ("-r", str(r))],
           *map(str, hyps), "--metrics", metrics, "--format", "jsonl", "--quiet", "--jobs", str(jobs)]
    return cmd + (["--tokenize", tokenize] if tokenize else [])


def sacrebleu_cmd(refs, hyps, metrics) -> list[str]:
    return [str(SACREBLEU), *map(str, refs), "-i", *map(str, hyps), "-m", *metrics.split(","),
            "-w", "10", "-q", "-f", "json"]


def run(cmd: list[str]) -> tuple[float, float, bytes]:
    """Run a command -> (wall seconds, CPU seconds of the child, stdout)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, check=True).stdout
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, out


def expected_records(refs, hyps, metrics, tokenize) -> list[tuple]:
    """(system, metric, score, signature) straight from the sacrebleu API."""
    from sacrebleu.metrics import BLEU, CHRF, TER

    ref_lines = [read_like_sacrebleu_cli(r) for r in refs]
    objs = {"bleu": lambda: BLEU(tokenize=tokenize, references=ref_lines),
            "chrf": lambda: CHRF(references=ref_lines), "ter": lambda: TER(references=ref_lines)}
    built = {m: objs[m]() for m in metrics.split(",")}
    out = []
    for h in hyps:
        lines = read_like_sacrebleu_cli(h)
        for m, obj in built.items():
            s = obj.corpus_score(lines, None)
            out.append((str(h), s.name, s.score, obj.get_signature().format()))
    return out


def check_all(metrics: str, only: str | None = None) -> bool:
    print(f"correctness: nlpkit bleu --metrics {metrics} vs sacrebleu API (exact scores, signatures)")
    print(f"{'configuration':<28}{'systems':>8}{'records':>9}{'equal':>9}")
    ok = True
    for name, refs, hyps, tok in configurations():
        if only and only not in name:
            continue
        _, _, out = run(nlpkit_cmd(refs, hyps, metrics, tok))
        got = [json.loads(line) for line in out.decode().splitlines()]
        got = [(r["system"], r["metric"], r["score"], r["signature"]) for r in got]
        want = expected_records(refs, hyps, metrics, tok)
        equal = sum(g == w for g, w in zip(got, want)) if len(got) == len(want) else 0
        ok &= equal == len(want)
        print(f"{name:<28}{len(hyps):>8}{len(want):>9}{equal:>5}/{len(want)}")
        for g, w in zip(got, want):
            if g != w:
                print(f"  MISMATCH nlpkit {g}\n           sacrebleu {w}")
    return ok


def timing(metrics: str, repeat: int, jobs: int = 1) -> bool:
    _, refs, hyps, _ = configurations()[1]
    inf = float("inf")
    wall_n = cpu_n = wall_s = cpu_s = inf
    for _ in range(repeat):  # alternate, keep the best of each: the machine may be busy
        tn, cn, out_n = run(nlpkit_cmd(refs, hyps, metrics, jobs=jobs))
        ts, cs, out_s = run(sacrebleu_cmd(refs, hyps, metrics))
        wall_n, cpu_n, wall_s, cpu_s = min(wall_n, tn), min(cpu_n, cn), min(wall_s, ts), min(cpu_s, cs)
    ours = {(r["system"], r["metric"]): f"{r['score']:.10f}"
            for r in map(json.loads, out_n.decode().splitlines())}
    theirs = {(row["system"], metric): value for row in json.loads(out_s)
              for metric, value in row.items() if metric != "system"}
    same = ours == theirs
    task = f"{metrics}: 20 systems x 3 refs" + (f" (-j {jobs})" if jobs > 1 else "")
    print(f"{task + ', wall s':<42}{wall_n:>9.2f}{wall_s:>11.2f}{wall_n / wall_s:>8.2f}")
    print(f"{task + ', CPU s':<42}{cpu_n:>9.2f}{cpu_s:>11.2f}{cpu_n / cpu_s:>8.2f}"
          f"   printed scores equal: {same}")
    return same


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ter", action="store_true", help="also check TER (slow)")
    ap.add_argument("--repeat", type=int, default=3, help="timing runs per tool (best is kept)")
    ap.add_argument("--skip-check", action="store_true", help="timing only")
    ap.add_argument("--skip-timing", action="store_true", help="correctness only")
    ap.add_argument("--only", metavar="TEXT", help="check only configurations whose name contains TEXT")
    ap.add_argument("--jobs", type=int, default=2, help="also time nlpkit --jobs N (1: skip)")
    args = ap.parse_args()
    if not (DATA / "wmt21").is_dir():
        sys.exit(f"benchmarks/bleu.py: shared data not found at {DATA} (set NLPKIT_DATA)")
    ok = True
    if not args.skip_check:
        ok &= check_all("bleu,chrf,ter" if args.ter else "bleu,chrf", args.only)
        print()
    if args.skip_timing:
        sys.exit(0 if ok else 1)
    print(f"timing: best of {args.repeat} alternating runs (one process per tool and task; "
          "CPU = user+sys of the process, robust on a busy machine)")
    print(f"{'task':<42}{'nlpkit':>9}{'sacrebleu':>11}{'ratio':>8}")
    ok &= timing("bleu", args.repeat)
    ok &= timing("bleu,chrf", args.repeat)
    if args.jobs > 1:
        ok &= timing("bleu,chrf", args.repeat, jobs=args.jobs)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
