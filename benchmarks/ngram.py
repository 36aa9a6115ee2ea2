"""n-gram models: nlpkit against KenLM (lmplz, and the `kenlm` Python module), side by side in one run.

    python benchmarks/ngram.py [--order 5] [--train-only] [--skip-train] [--skip-query] [--skip-heldout]
                               [--card-neural]

1. Training on the whole Gutenberg corpus (30 novels, 33 MB, as distributed): `nlpkit ngram-train
   --order 5` against `lmplz -o 5 -S 2G --discount_fallback` (when built: $KENLM_BIN, see
   tools/make_ngram_fixtures.py), each in its own process: wall time, CPU time and peak RSS (its own,
   os.wait4). lmplz reads the files on stdin as nlpkit reads them: every file's last line ended
   (`963-0.txt` has no final newline). Both ARPA files are then loaded and compared word by word
   (same n-grams, largest log10 difference of probabilities and backoffs).
2. Loading and querying a 5-gram ARPA of about 100 MB (trained by lmplz, else nlpkit, on the first
   novels up to 5 MB): load time, and the time to score Persuasion (`105.txt`, line by line, words and
   </s>) with nlpkit (`score_batches`: per-token arrays for up to 16384 lines, 2M characters, at a
   time; also `score_lines`, one object a line) and with the `kenlm` module (`Model.full_scores` per
   line, the same numbers as `query`; `pip install kenlm` builds it from source), each summing every
   token's log10 p; then each line's total alone (nlpkit's `line_totals`, as `perplexity --per-line`
   prints them, against `Model.score`); wall and CPU seconds, the best of 5. Total log10 p is checked
   equal. Each side's peak memory is that of a process that only loads the model (os.wait4). nlpkit's
   load is timed parsing the file (no cache), then again from the prepared-model cache the first load
   wrote (memory-mapped; the cache lives in the scratch directory), with that process's peak memory.
3. Held-out perplexity of orders 2-5 on Persuasion, cleaned as the default model's card does
   (tools/gutenberg.py: header, licence, BOM removed, LF), trained on the other 29 novels cleaned the
   same way, beside the shipped neural model's bits per byte on the same novel, scored in the same
   run with the card's settings (`--card-neural` prints the card's figure instead,
   nlpkit/lm/default/README.md: 1.508 bits per byte on the whole novel).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
DATA = Path(os.environ.get("NLPKIT_DATA", REPO.parent / "shared" / "data")) / "gutenberg"
KENLM_BIN = Path(os.environ.get("KENLM_BIN", "/work/build/kenlm/build/bin"))
NEURAL_BPB = 1.508      # default model card, whole held-out novel
REPEAT = 5              # query timings: the best of this many runs, for each side


# A child's peak RSS starts from its parent's high-water mark when it forks (Linux copies it into the
# child), so a command is started by a small launcher process, which reports its own child's wait4.
_LAUNCHER = ("import os, sys; pid = os.posix_spawnp(sys.argv[2], sys.argv[2:], os.environ); "
             "_, status, ru = os.wait4(pid, 0); "
             "open(sys.argv[1], 'w').write(f'{status} {ru.ru_utime + ru.ru_stime} {ru.ru_maxrss}')")


def run_measured(cmd: list[str], stdin_paths: list[Path] | None = None, env=None) -> tuple[float, float, float]:
    """Run a command; (wall s, cpu s, peak RSS MB) of that process alone (os.wait4 in a small launcher)."""
    report = Path(tempfile.mkstemp(prefix="ngram-bench-rusage-")[1])
    cmd = [sys.executable, "-c", _LAUNCHER, str(report), *cmd]
    t0 = time.perf_counter()
    if stdin_paths:
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        feeder = threading.Thread(target=feed_lines, args=(stdin_paths, p.stdin))
        feeder.start()
    else:
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    p.wait()
    if stdin_paths:
        feeder.join()
    wall = time.perf_counter() - t0
    got = report.read_text().split()
    report.unlink()
    if p.returncode != 0 or not got or int(got[0]) != 0:
        sys.exit(f"failed: {' '.join(cmd[4:])}")
    return wall, float(got[1]), int(got[2]) / 1024


def feed_lines(paths: list[Path], pipe) -> None:
    """The files to lmplz's stdin as nlpkit reads them: each file ends its last line. (`cat` would
    glue a last line without a newline to the next file's first line: 963-0.txt ends without one,
    and "...eBooks.\ufeffThe" became one word, the vocabulary difference seen before.)"""
    try:
        for path in paths:
            data = path.read_bytes()
            pipe.write(data)
            if data and not data.endswith(b"\n"):
                pipe.write(b"\n")
    except BrokenPipeError:
        pass
    finally:
        try:
            pipe.close()
        except BrokenPipeError:
            pass


SCRATCH: list[Path] = []


def scratch() -> Path:
    """A temporary directory, removed when the benchmark ends (the ARPA files are large)."""
    SCRATCH.append(Path(tempfile.mkdtemp(prefix="ngram-bench-")))
    return SCRATCH[-1]


def timed(fn, repeat: int = 1):
    """((wall s, cpu s) of the fastest of `repeat` calls, its result)."""
    best, out = None, None
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        t = (time.perf_counter() - t0, time.process_time() - c0)
        best = t if best is None or t[0] < best[0] else best
    return best, out


def lmplz_cmd(order: int, out: Path) -> list[str]:
    return ["sh", "-c", f"{KENLM_BIN / 'lmplz'} -o {order} -S 2G --discount_fallback -T {tempfile.gettempdir()} "
                        f"> {out}"]


def compare_arpas(a: Path, b: Path) -> str:
    """Same n-grams? Largest log10 difference of probabilities and backoffs (b's words mapped to a's ids)."""
    import numpy as np

    from nlpkit.lm.ngram.ngram_counts import NgramRows
    from nlpkit.lm.ngram.ngram_model import load_ngram_model, walk_rows

    ma, mb = load_ngram_model(a), load_ngram_model(b)
    if set(ma.vocab) != set(mb.vocab):
        only_a, only_b = sorted(set(ma.vocab) - set(mb.vocab)), sorted(set(mb.vocab) - set(ma.vocab))
        return f"different vocabularies: {len(only_a)} words only in {a.name} {only_a[:3]}, " \
               f"{len(only_b)} only in {b.name} {only_b[:3]}"
    lut = np.array([ma.word_id[w] for w in mb.vocab], dtype=np.int64)
    worst, same = 0.0, ma.order == mb.order
    for k in range(1, min(ma.order, mb.order) + 1):
        if len(ma.keys[k - 1]) != len(mb.keys[k - 1]):
            same = False
            continue
        rows_b = lut[NgramRows(mb.keys, k, mb.vocab_size)[:]]       # b's k-grams in a's word ids
        at = walk_rows(ma.key_index, rows_b, ma.vocab_size)         # their rows in a
        if (at < 0).any():
            same = False
            continue
        worst = max(worst, float(np.abs(ma.logprob[k - 1][at] - mb.logprob[k - 1]).max()),
                    float(np.abs(ma.backoff[k - 1][at] - mb.backoff[k - 1]).max()))
    return f"same n-grams: {same}; max |log10 diff| {worst:.1e}"


def bench_train(order: int) -> None:
    paths = sorted(p for p in DATA.glob("*.txt"))
    mb = sum(p.stat().st_size for p in paths) / 1e6
    print(f"\n== training, order {order}, {len(paths)} files, {mb:.1f} MB ({os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.1f})")
    tmp = scratch()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    mine = tmp / "nlpkit.arpa"
    o = run_measured([sys.executable, "-m", "nlpkit", "ngram-train", *map(str, paths), "-o", str(mine),
                      "--order", str(order), "-q"], env=env)
    print(f"{'task':28s} {'tool':8s} {'wall s':>8s} {'cpu s':>8s} {'peak MB':>8s}")
    print(f"{'ngram-train / lmplz':28s} {'nlpkit':8s} {o[0]:8.1f} {o[1]:8.1f} {o[2]:8.0f}")
    if (KENLM_BIN / "lmplz").exists():
        ref = tmp / "lmplz.arpa"
        t = run_measured(lmplz_cmd(order, ref), stdin_paths=paths)
        print(f"{'':28s} {'lmplz':8s} {t[0]:8.1f} {t[1]:8.1f} {t[2]:8.0f}   "
              f"ratio wall {o[0] / t[0]:.2f}x, memory {o[2] / t[2]:.2f}x (nlpkit / lmplz)")
        print(f"check: {compare_arpas(mine, ref)}; ARPA {mine.stat().st_size / 1e6:.0f} MB")
    else:
        print(f"lmplz not built ({KENLM_BIN}): see tools/make_ngram_fixtures.py")


def bench_query(order: int) -> None:
    import numpy as np

    from nlpkit.lm.ngram.ngram_model import load_ngram_model
    from nlpkit.lm.ngram.line_scoring import score_batches, score_lines
    from nlpkit.lm.prepared import flush

    tmp = scratch()
    paths, total = [], 0
    for p in sorted(DATA.glob("*.txt")):
        if p.name == "105.txt":
            continue
        paths.append(p)
        total += p.stat().st_size
        if total >= 5e6:
            break
    arpa = tmp / "model.arpa"
    if (KENLM_BIN / "lmplz").exists():
        run_measured(lmplz_cmd(order, arpa), stdin_paths=paths)
        made = "lmplz"
    else:
        from nlpkit.lm.ngram.train import train_ngram
        train_ngram([str(p) for p in paths], str(arpa), order=order)
        made = "nlpkit"
    lines = (DATA / "105.txt").read_text(encoding="utf-8").splitlines()
    print(f"\n== loading and querying a {order}-gram ARPA of {arpa.stat().st_size / 1e6:.0f} MB ({made}, "
          f"{total / 1e6:.1f} MB of text); scoring Persuasion, {len(lines)} lines")
    # The prepared-model cache of this run lives in the scratch directory (never the user's cache).
    os.environ["NLPKIT_CACHE_DIR"] = str(tmp / "cache")
    # Each side's memory, in a process of its own that only loads the model: nlpkit parsing the file
    # (no cache), then mapping the entry a first load wrote (the second load of the same file).
    load_cmd = [sys.executable, "-c", f"from nlpkit.lm.ngram.ngram_model import load_ngram_model; "
                                      f"load_ngram_model({str(arpa)!r})"]
    mem_n = run_measured(load_cmd, env={**os.environ, "PYTHONPATH": str(REPO), "NLPKIT_NO_CACHE": "1"})[2]
    try:
        mem_k = run_measured([sys.executable, "-c", f"import kenlm; kenlm.Model({str(arpa)!r})"])[2]
    except SystemExit:
        mem_k = None                                # the kenlm module is not installed
    load_n, model = timed(lambda: load_ngram_model(arpa, use_cache=False))
    load_first, _ = timed(lambda: load_ngram_model(arpa))           # parses and writes the cache entry ...
    flush()                                                           # ... on a thread: wait for it
    load_again, model = timed(lambda: load_ngram_model(arpa), repeat=3)  # maps it
    mem_again = run_measured(load_cmd, env={**os.environ, "PYTHONPATH": str(REPO)})[2]
    entry_mb = sum(p.stat().st_size for p in (tmp / "cache").glob("*.npc")) / 1e6
    cache_rows = [f"{'load s, again (cache, mapped)':30s} {load_again[0]:7.3f} / {load_again[1]:6.3f}",
                  f"{'  first load (writes the cache)':30s} {load_first[0]:7.2f} / {load_first[1]:6.2f}",
                  f"{'  peak RSS MB, load again':30s} {mem_again:16.0f}   (cache entry {entry_mb:.0f} MB; "
                  f"target: load again <= 0.1 s)"]

    def nlpkit_scores() -> tuple[int, float]:      # per-token log10 of every line, used (summed), as below
        tokens, total = 0, 0.0
        for b in score_batches(model, lines):      # flat per-token arrays, up to 16384 lines at a time
            tokens += len(b.log10)
            total += float(np.sum(b.log10, dtype=np.float64))
        return tokens, total

    def nlpkit_line_scores() -> float:             # the same, through one LineScore object a line
        return sum(s.log10.sum(dtype=np.float64) for s in score_lines(model, lines))

    def nlpkit_line_totals() -> float:             # each line's total (what perplexity --per-line prints)
        return sum(t.log10_total for b in score_batches(model, lines) for t in b.line_totals())
    score_n, (tokens, sum_n) = timed(nlpkit_scores, repeat=REPEAT)
    score_l, _ = timed(nlpkit_line_scores, repeat=REPEAT)
    score_t, sum_t = timed(nlpkit_line_totals, repeat=REPEAT)
    print(f"{'task':30s} {'nlpkit':>16s} {'kenlm':>16s} {'ratio':>7s}   (wall / cpu)")
    try:
        import kenlm
    except ImportError:
        kenlm = None
    if kenlm is None:
        print(f"{'load s':30s} {load_n[0]:7.2f} / {load_n[1]:6.2f} {'-':>16s}")
        print(f"{'load, peak RSS MB (own process)':30s} {mem_n:16.0f} {'-':>16s}")
        print("\n".join(cache_rows))
        print(f"{'query tokens/s':30s} {tokens / score_n[0]:7.0f} / {tokens / score_n[1]:6.0f} {'-':>16s}   "
              "(pip install kenlm for the peer)")
        return
    load_k, km = timed(lambda: kenlm.Model(str(arpa)))

    def kenlm_scores() -> float:                   # per token, as query prints (Model.full_scores)
        total = 0.0
        for line in lines:
            for lp, _, _ in km.full_scores(line, bos=True, eos=True):
                total += lp
        return total

    def kenlm_line_totals() -> float:              # each line's total (Model.score, summed in C++)
        return sum(km.score(line, bos=True, eos=True) for line in lines)
    score_k, sum_k = timed(kenlm_scores, repeat=REPEAT)
    score_kt, _ = timed(kenlm_line_totals, repeat=REPEAT)

    def row(name: str, mine, theirs, what: str) -> None:
        print(f"{name:30s} {tokens / mine[0]:7.0f} / {tokens / mine[1]:6.0f} "
              f"{tokens / theirs[0]:7.0f} / {tokens / theirs[1]:6.0f} {theirs[0] / mine[0]:6.2f}x  {what}")
    print(f"{'load s':30s} {load_n[0]:7.2f} / {load_n[1]:6.2f} {load_k[0]:7.2f} / {load_k[1]:6.2f} "
          f"{load_n[0] / load_k[0]:6.1f}x  (nlpkit time / kenlm time)")
    print(f"{'load, peak RSS MB (own process)':30s} {mem_n:16.0f} {mem_k:16.0f} {mem_n / mem_k:6.1f}x  "
          "(nlpkit / kenlm)")
    print(f"{cache_rows[0]} {load_k[0]:7.2f} / {load_k[1]:6.2f} {load_again[0] / load_k[0]:6.2f}x  "
          "(nlpkit time / kenlm time)")
    print("\n".join(cache_rows[1:]))
    row("query tokens/s, per token", score_n, score_k,
        f"(nlpkit speed / kenlm speed; best of {REPEAT}): score_batches / full_scores")
    row("  per-line LineScore objects", score_l, score_k, "score_lines / full_scores")
    row("  per-line totals", score_t, score_kt, "ScoredBatch.line_totals / Model.score")
    print(f"check: {tokens} tokens; total log10 p nlpkit {sum_n:.4f} (per-line totals {sum_t:.4f}), "
          f"kenlm {sum_k:.4f}")


def bench_heldout(neural: bool = True) -> None:
    sys.path.insert(0, str(REPO / "tools"))
    from gutenberg import held_out_text, training_docs

    from nlpkit.lm.ngram.ngram_model import load_ngram_model
    from nlpkit.lm.ngram.line_scoring import perplexity_of_lines
    from nlpkit.lm.ngram.train import train_ngram

    tmp = scratch()
    train = tmp / "train.txt"
    train.write_text("\n".join(d.rstrip("\n") for d in training_docs(DATA.parent)) + "\n", encoding="utf-8")
    held = held_out_text(DATA.parent)
    lines = held.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    print(f"\n== held-out Persuasion ({len(held.encode()):,} bytes, {len(lines):,} lines), trained on the other "
          f"29 novels ({train.stat().st_size / 1e6:.1f} MB), Kneser-Ney as lmplz")
    print(f"{'model':28s} {'tokens':>8s} {'OOV':>6s} {'ppl':>8s} {'ppl-no-oov':>10s} {'bits/byte':>9s} {'train s':>8s}")
    for order in (2, 3, 4, 5):
        arpa = tmp / f"kn{order}.arpa"
        t0 = time.perf_counter()
        train_ngram([str(train)], str(arpa), order=order)
        secs = time.perf_counter() - t0
        p = perplexity_of_lines(load_ngram_model(arpa), lines)
        print(f"{f'{order}-gram Kneser-Ney':28s} {p.tokens:8d} {p.oov:6d} {p.perplexity:8.1f} {p.perplexity_no_oov:10.1f} "
              f"{p.bits_per_byte:9.3f} {secs:8.1f}")
        arpa.unlink()
    if neural:
        from nlpkit.lm.transformer.loaders import load_model
        from nlpkit.lm.perplexity import perplexity

        t0 = time.perf_counter()
        p, _ = perplexity(load_model(None), held)   # the card's settings: sliding 512 / 256, BOS-predicted
        secs = time.perf_counter() - t0
        print(f"{'default neural model':28s} {p.tokens:8d} {'-':>6s} {p.token_perplexity:8.1f} {'-':>10s} "
              f"{p.bits_per_byte:9.3f} {secs:7.1f}s scoring  (card: {NEURAL_BPB})")
    else:
        print(f"{'default neural model (card)':28s} {'':>8s} {'':>6s} {'':>8s} {'':>10s} {NEURAL_BPB:9.3f}")
    print("bits per byte: -sum log2 p over the UTF-8 bytes of the lines and their newlines (what </s> predicts).")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--order", type=int, default=5)
    ap.add_argument("--skip-train", action="store_true")
    ap.add_argument("--skip-query", action="store_true")
    ap.add_argument("--skip-heldout", action="store_true")
    ap.add_argument("--train-only", action="store_true", help="only part 1, training against lmplz")
    ap.add_argument("--card-neural", action="store_true",
                    help="print the default model's bits per byte from its card instead of scoring the novel")
    args = ap.parse_args()
    if args.train_only:
        args.skip_query = args.skip_heldout = True
    if not DATA.is_dir():
        sys.exit(f"no corpus at {DATA}")
    try:
        if not args.skip_train:
            bench_train(args.order)
        if not args.skip_query:
            bench_query(args.order)
        if not args.skip_heldout:
            bench_heldout(neural=not args.card_neural)
    finally:
        for d in SCRATCH:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
