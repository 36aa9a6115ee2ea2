"""The Dask path against the local path: pmi, bm25 index and bpe-train counting (issue 18).

Corpora: the Gutenberg corpus (33 MB, 30 plain files) and a 10x copy written as 300 gzip
files to a temporary directory (a gzip file is one shard; skip it with --skip-10x).
Configurations:

- local:   the local path in one process (pmi --jobs 1, bpe-train --jobs 1, bm25 index);
- dask:1:  --dask local:1, a LocalCluster of one worker process (one thread);
- dask:2:  --dask local:2, two worker processes.

Each run is a fresh subprocess calling the same functions the CLI calls (the `nlpkit.distributed.stages`
functions with a `distributed.Client`, default --shard-size auto). Reported: the LocalCluster
start-up (apart), the wall time of the work (cluster up to result), the CPU time of driver plus
workers during the work, the peak RSS of the driver process and of each worker (getrusage in
the worker), the Dask overhead at one worker (dask:1 work / local, target within 1.3x) and the
two-worker speed-up (dask:1 work / dask:2 work). bm25 index takes one corpus file: the 33 MB
corpus as one file of lines (the 10x copy is left out for bm25: the local path holds every
record in memory). Clusters are started as `--dask local:N` starts them (`cluster.local_cluster`).

    python benchmarks/scale.py [--data ../shared/data] [--skip-10x] [--tasks pmi,bm25,bpe]
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def one(task: str, config: str, paths: list[str], out_dir: str) -> dict:
    """Run one (task, config) in this process; returns timings and peak memory."""
    t0 = time.perf_counter()
    client = cluster = None
    if config != "local":
        import distributed

        from nlpkit.distributed.cluster import local_cluster

        n = int(config.split(":")[1])
        cluster = local_cluster(n)                              # as `--dask local:N` starts it
        client = distributed.Client(cluster)
        client.wait_for_workers(n)
        workers_cpu0 = client.run(_cpu)
    t1 = time.perf_counter()
    cpu1 = _cpu()
    from nlpkit.text import WordTokenizer

    if task == "pmi":
        from nlpkit.stats import pmi

        tok = WordTokenizer()
        if client is None:
            co = pmi.count_cooccurrences(paths, tok, cross_lines=True, jobs=1)
        else:
            from nlpkit.distributed.stages import pmi_counts

            co = pmi_counts(client, paths, tok, cross_lines=True)
        result = [len(co.words), int(co.n_tokens), len(co.keys), pmi.ranked(co, min_count=5, top=20)[1].tolist()]
    elif task == "bpe":
        from nlpkit.bpe.pretokenize import PreTokenizer
        from nlpkit.bpe.trainer import count_pieces

        pre = PreTokenizer.from_pattern("gpt2")
        if client is None:
            pieces = count_pieces(paths, pre, workers=1)
        else:
            from nlpkit.distributed.stages import bpe_counts

            pieces = bpe_counts(client, paths, pre)
        result = [len(pieces), sum(pieces.values()), list(pieces)[:5]]
    else:                                   # bm25 index of one corpus file
        from nlpkit.retrieval.search import index_texts, tokenizer_settings
        from nlpkit.retrieval.store import save_index
        from nlpkit.stats.documents import read_records

        if client is None:
            idx = index_texts(read_records(paths[0], "lines"))
            save_index(idx, out_dir)
            result = [idx.n_docs, len(idx.vocab), int(len(idx.postings))]
        else:
            from nlpkit.distributed.stages import bm25_index

            s = bm25_index(client, paths[0], out_dir, "lines", "lucene", 1.5, 0.75, 0.5, tokenizer_settings())
            result = [s["documents"], s["terms"], s["postings"]]
    t2 = time.perf_counter()
    cpu = cpu_driver = _cpu() - cpu1
    workers = []
    if client is not None:
        cpu += sum(c - workers_cpu0.get(w, 0.0) for w, c in client.run(_cpu).items())
        workers = sorted(client.run(_maxrss_mb).values())
        client.close()
        cluster.close()
    return {"task": task, "config": config, "wall": t2 - t0, "start": t1 - t0, "work": t2 - t1, "cpu": cpu, "cpu_driver": cpu_driver,
            "driver_mb": _maxrss_mb(), "workers_mb": workers, "result": result}


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def make_10x(paths: list[str], d: str) -> list[str]:
    out = []
    for k in range(10):
        for p in paths:
            q = os.path.join(d, f"{k:02d}-{os.path.basename(p)}.gz")
            with open(p, "rb") as f, gzip.open(q, "wb", compresslevel=1) as g:
                shutil.copyfileobj(f, g)
            out.append(q)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    ap.add_argument("--skip-10x", action="store_true")
    ap.add_argument("--tasks", default="pmi,bm25,bpe")
    ap.add_argument("--one", nargs=4, metavar=("TASK", "CONFIG", "PATHS_JSON", "OUT"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        task, config, paths_json, out = a.one
        print(json.dumps(one(task, config, json.loads(paths_json), out)))
        return
    paths = sorted(glob.glob(os.path.join(a.data, "gutenberg", "*.txt")))
    if not paths:
        sys.exit(f"no Gutenberg corpus under {a.data}/gutenberg")
    tmp = tempfile.mkdtemp(prefix="nlpkit-scale-")
    try:
        one_file = os.path.join(tmp, "gutenberg.txt")
        with open(one_file, "wb") as f:
            for p in paths:
                f.write(open(p, "rb").read())
        corpora = {"33MB": paths}
        if not a.skip_10x:
            corpora["10x-gz"] = make_10x(paths, tmp)
        size = sum(os.path.getsize(p) for p in paths) / 1e6
        gz_mb = sum(os.path.getsize(p) for p in corpora.get("10x-gz", [])) / 1e6
        print(f"corpus: {len(paths)} files, {size:.1f} MB" + ("" if a.skip_10x else
              f"; 10x copy: {len(paths) * 10} gzip files, {gz_mb:.0f} MB compressed")
              + f"; {os.cpu_count()} CPUs; load average {_load()}")
        head = (f"{'task':<5} {'corpus':<7} {'config':<7} {'start s':>7} {'work s':>7} {'cpu s':>7} "
                f"{'driver MB':>9} {'worker MB':>11}  result")
        print(head + "\n" + "-" * len(head), flush=True)
        summary = []
        for task in a.tasks.split(","):
            for name, files in corpora.items():
                if task == "bm25":
                    if name != "33MB":
                        continue
                    files = [one_file]
                rows = {}
                for config in ("local", "dask:1", "dask:2"):
                    out = os.path.join(tmp, f"idx-{config}")
                    r = subprocess.run([sys.executable, __file__, "--one", task, config, json.dumps(files), out],
                                       capture_output=True, text=True, cwd=str(REPO))
                    if r.returncode:
                        sys.exit(r.stderr)
                    row = json.loads(r.stdout.strip().splitlines()[-1])
                    rows[config] = row
                    shutil.rmtree(out, ignore_errors=True)
                    w = "/".join(f"{m:.0f}" for m in row["workers_mb"]) or "-"
                    st = f"{row['start']:7.2f}" if config != "local" else f"{'-':>7}"
                    print(f"{task:<5} {name:<7} {config:<7} {st} {row['work']:7.2f} {row['cpu']:7.2f} "
                          f"{row['driver_mb']:9.0f} {w:>11}", flush=True)
                same = rows["local"]["result"] == rows["dask:1"]["result"] == rows["dask:2"]["result"]
                summary.append((task, name, rows["dask:1"]["work"] / rows["local"]["work"],
                                rows["dask:1"]["cpu"] / rows["local"]["cpu"],
                                rows["dask:1"]["work"] / rows["dask:2"]["work"], same))
        print(f"\n{'task':<5} {'corpus':<7} {'dask:1/local wall':>17} {'(cpu)':>6} {'dask:2 speed-up':>15}  same result")
        for task, name, over, over_cpu, speed, same in summary:
            print(f"{task:<5} {name:<7} {over:16.2f}x {over_cpu:5.2f}x {speed:14.2f}x  {same}")
        print(f"\nload average at the end: {_load()}. start = LocalCluster start-up (not in work); work = wall "
              "time from a running cluster to the result; cpu = driver + workers during work. Overhead target "
              "(issue 18): dask:1 within 1.3x of local.")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
