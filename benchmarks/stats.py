"""pmi and tfidf against NLTK and scikit-learn on the Gutenberg corpus (33 MB), side by side.

Each side runs in its own subprocess; the parent times it and samples the resident memory
of the whole process tree (worker processes included) every 10 ms for the peak.

- pmi: `nlpkit pmi --cross-lines --cross-sentences --min-count 5 --top 100` (the CLI, start-up
  included) vs NLTK: the same tokens (files separated by a None so no pair crosses a file),
  BigramCollocationFinder.from_words + apply_freq_filter(5) + score_ngrams(pmi)[:100].
  The two top-100 lists are checked to be identical.
- tfidf: blank-line separated paragraphs, `nlpkit.stats.tfidf.tfidf` (defaults: raw tf, smooth idf,
  l2) vs TfidfVectorizer().fit_transform on the same paragraphs (same token pattern). The
  matrices are checked equal (same nonzeros, max |difference|).

    python benchmarks/stats.py [--data ../shared/data] [--skip-nltk] [--jobs 0]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------------ the sides

def side_nltk_pmi(paths: list[str], out: str) -> None:
    from nltk.collocations import BigramCollocationFinder
    from nltk.metrics import BigramAssocMeasures

    from nlpkit.stats.counting import iter_blocks
    from nlpkit.text import WordTokenizer

    tok = WordTokenizer()
    words: list = []
    for p in paths:
        words.extend(tok.tokenize("".join(iter_blocks(p))))
        words.append(None)                          # NLTK skips pairs with None: files not crossed
    finder = BigramCollocationFinder.from_words(words, window_size=2)
    finder.apply_freq_filter(5)
    top = finder.score_ngrams(BigramAssocMeasures.pmi)[:100]
    Path(out).write_text(json.dumps([[list(g), s] for g, s in top]))


def side_sklearn_tfidf(paths: list[str], out: str) -> None:
    import numpy as np
    from sklearn.feature_extraction.text import TfidfVectorizer

    from nlpkit.stats.counting import iter_blocks
    from nlpkit.stats.documents import split_paragraphs

    docs = [p for path in paths for p in split_paragraphs("".join(iter_blocks(path)))]
    X = TfidfVectorizer().fit_transform(docs).tocsr()
    X.sort_indices()
    np.savez(out, indptr=X.indptr, indices=X.indices, data=X.data)


def side_nlpkit_tfidf(paths: list[str], out: str, jobs: int) -> None:
    import numpy as np

    from nlpkit.stats.counting import auto_jobs
    from nlpkit.stats.documents import DocNames, iter_documents
    from nlpkit.stats.tfidf import tfidf

    names = DocNames()
    m = tfidf(batches=iter_documents(paths, "paragraphs", names), names=names, jobs=auto_jobs(paths, jobs))
    np.savez(out, indptr=m.indptr, indices=m.indices, data=m.data)


# ---------------------------------------------------------------------------- measuring

def _tree_memory(pid: int) -> tuple[int, int]:
    """(RSS, PSS) bytes of a process and all its descendants (Linux /proc).

    PSS splits pages shared between processes (forked workers share the parent's
    interpreter and numpy) among them, so the sum over the tree counts each page once.
    """
    rss = pss = 0
    stack = [pid]
    while stack:
        p = stack.pop()
        try:
            with open(f"/proc/{p}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Rss:"):
                        rss += int(line.split()[1]) * 1024
                    elif line.startswith("Pss:"):
                        pss += int(line.split()[1]) * 1024
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    stack.extend(int(c) for c in f.read().split())
        except (OSError, ValueError):
            pass
    return rss, pss


def run(cmd: list[str], stdout=subprocess.DEVNULL) -> tuple[float, float, float, float]:
    """Wall seconds, CPU seconds (user+sys, waited-for workers included), peak tree PSS and RSS (MB)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.PIPE, cwd=str(REPO))
    peak_rss = peak_pss = 0
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        rss, pss = _tree_memory(proc.pid)
        peak_rss, peak_pss = max(peak_rss, rss), max(peak_pss, pss)
        time.sleep(0.05)
    elapsed = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{proc.stderr.read().decode()}")
    peak_rss = max(peak_rss, usage.ru_maxrss * 1024)
    return elapsed, usage.ru_utime + usage.ru_stime, peak_pss / 2 ** 20, peak_rss / 2 ** 20


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    ap.add_argument("--skip-nltk", action="store_true", help="NLTK takes minutes; skip its side")
    ap.add_argument("--jobs", type=int, default=0, help="nlpkit tokenizer processes (0 = auto)")
    ap.add_argument("--side", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    paths = sorted(glob.glob(os.path.join(args.data, "gutenberg", "*.txt")))
    if args.side:
        name, out = args.side
        {"nltk-pmi": lambda: side_nltk_pmi(paths, out),
         "sklearn-tfidf": lambda: side_sklearn_tfidf(paths, out),
         "nlpkit-tfidf": lambda: side_nlpkit_tfidf(paths, out, args.jobs)}[name]()
        return
    if not paths:
        sys.exit(f"no Gutenberg files under {args.data}")
    mb = sum(os.path.getsize(p) for p in paths) / 2 ** 20
    py, me = sys.executable, [sys.executable, __file__, "--data", args.data, "--jobs", str(args.jobs)]
    rows = []          # (task, peer, ours, theirs, check); ours/theirs = (wall, cpu, pss, rss) or None
    with tempfile.TemporaryDirectory() as tmp:
        pmi_out = os.path.join(tmp, "pmi.jsonl")
        with open(pmi_out, "wb") as f:
            ours = run([py, "-m", "nlpkit", "pmi", "--cross-lines", "--cross-sentences", "--min-count", "5",
                        "--top", "100", "--format", "jsonl", "--no-signature", "--jobs", str(args.jobs),
                        *paths], stdout=f)
        theirs, check = None, "nltk skipped"
        if not args.skip_nltk:
            theirs = run(me + ["--side", "nltk-pmi", os.path.join(tmp, "nltk.json")])
            mine = [json.loads(line) for line in open(pmi_out, encoding="utf-8")]
            ref = json.loads(Path(tmp, "nltk.json").read_text())
            same = ([[r["word1"], r["word2"]] for r in mine] == [g for g, _ in ref]
                    and max(abs(r["pmi"] - s) for r, (_, s) in zip(mine, ref)) <= 1e-9)
            check = "top-100 pairs, order and scores identical" if same else "TOP-100 DIFFERS"
        rows.append(("pmi window 2, min-count 5", "nltk", ours, theirs, check))

        ours = run(me + ["--side", "nlpkit-tfidf", os.path.join(tmp, "ours.npz")])
        theirs = run(me + ["--side", "sklearn-tfidf", os.path.join(tmp, "sk.npz")])
        import numpy as np

        a, b = np.load(os.path.join(tmp, "ours.npz")), np.load(os.path.join(tmp, "sk.npz"))
        same = np.array_equal(a["indptr"], b["indptr"]) and np.array_equal(a["indices"], b["indices"])
        diff = float(np.abs(a["data"] - b["data"]).max()) if same else float("nan")
        rows.append(("tfidf paragraphs raw/smooth/l2", "sklearn", ours, theirs,
                     f"{len(a['data']):,} nonzeros equal, max diff {diff:.1e}" if same else "MATRICES DIFFER"))
    print(f"Gutenberg: {len(paths)} files, {mb:.1f} MB; {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f}; nlpkit jobs={args.jobs or 1}\n")
    head = (f"{'task':31s} {'peer':8s} {'wall s':>14s} {'x':>6s} {'cpu s':>14s} {'x':>6s} "
            f"{'peak MB (PSS)':>14s} {'ratio':>6s}")
    print(head + "\n" + "-" * len(head))
    for task, peer, o, t, check in rows:
        if t is None:
            print(f"{task:31s} {peer:8s} {o[0]:6.2f} {'-':>7s} {'':>6s} {o[1]:6.2f} {'-':>7s} {'':>6s} "
                  f"{o[2]:6.0f} {'-':>7s}")
        else:
            print(f"{task:31s} {peer:8s} {o[0]:6.2f} {t[0]:7.2f} {t[0] / o[0]:5.1f}x {o[1]:6.2f} {t[1]:7.2f} "
                  f"{t[1] / o[1]:5.1f}x {o[2]:6.0f} {t[2]:7.0f} {o[2] / t[2]:5.2f}x")
        print(f"{'':31s} check: {check}; peak RSS sum nlpkit {o[3]:.0f} MB"
              + (f", peer {t[3]:.0f} MB" if t else ""))
    print("\nwall/cpu: nlpkit then peer, x = peer / nlpkit (speed-up). MB: nlpkit then peer, ratio = "
          "nlpkit / peer.\nCPU includes worker processes; PSS counts pages shared by forked workers once.")


if __name__ == "__main__":
    main()
