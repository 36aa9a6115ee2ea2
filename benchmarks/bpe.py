"""BPE training and encoding: nlpkit vs HF tokenizers (and sentencepiece BPE, for reference).

Training at vocab 8,000 and 32,000 on a 10 MB slice and on all 33 MB of shared/data/gutenberg,
min-frequency 2, one special token; each run in its own subprocess, reporting wall time and
peak RSS (nlpkit: the parent plus its counting workers). Also checks that nlpkit's merges equal
HF's. Encoding: the 10 MB slice, line by line, with HF's trained 32k tokenizer.json loaded in both.

    python benchmarks/bpe.py                 # everything (a few minutes on 2 cores)
    python benchmarks/bpe.py --quick         # 10 MB slice, vocab 8,000 only
    python benchmarks/bpe.py --no-spm        # skip sentencepiece

Targets (issue 5): training within 2.5x of HF's wall time, peak memory within 3x; encoding
within 10x.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EOT = "<|endoftext|>"

# Each trainer runs in a fresh interpreter: argv = [kind, vocab, outdir, *files]; prints JSON.
WORKER = r'''
import hashlib, json, resource, sys, time
from pathlib import Path
kind, vocab, out, files = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
t0 = time.perf_counter()
merges = None
if kind == "nlpkit":
    from nlpkit.bpe.trainer import train_bpe
    tok = train_bpe([Path(f) for f in files], vocab, min_frequency=2, special_tokens=["<|endoftext|>"])
    seconds = time.perf_counter() - t0
    tok.save(out)
    merges = [list(m) for m in tok.merges]
elif kind == "hf":
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train(files, trainers.BpeTrainer(vocab_size=vocab, min_frequency=2, special_tokens=["<|endoftext|>"],
              initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    seconds = time.perf_counter() - t0
    tok.save(out + "/tokenizer.json")
    merges = [list(m) for m in json.loads(tok.to_str())["model"]["merges"]]
else:
    import sentencepiece as spm
    spm.SentencePieceTrainer.train(input=",".join(files), model_prefix=out + "/spm", model_type="bpe",
                                   vocab_size=vocab, character_coverage=1.0, byte_fallback=True,
                                   minloglevel=2, num_threads=2, user_defined_symbols=["<|endoftext|>"])
    seconds = time.perf_counter() - t0
self_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
child_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
digest = hashlib.sha256(json.dumps(merges).encode()).hexdigest() if merges is not None else None
print(json.dumps({"seconds": seconds, "self_mb": self_kb / 1024, "child_mb": child_kb / 1024,
                  "merges": len(merges) if merges is not None else None, "digest": digest}))
'''


def run_trainer(kind: str, vocab: int, files: list[str], out: Path) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    r = subprocess.run([sys.executable, "-c", WORKER, kind, str(vocab), str(out), *files],
                       capture_output=True, text=True, cwd=str(REPO))
    if r.returncode != 0:
        raise RuntimeError(f"{kind} failed: {r.stderr[-2000:]}")
    res = json.loads(r.stdout.strip().splitlines()[-1])
    workers = min(os.cpu_count() or 1, 8) if kind == "nlpkit" else 0
    res["peak_mb"] = res["self_mb"] + workers * res["child_mb"]  # counting workers run side by side
    return res


def make_slice(files: list[Path], nbytes: int, path: Path) -> Path:
    """The first `nbytes` of the corpus (whole lines), as one file."""
    n = 0
    with open(path, "wb") as out:
        for f in files:
            with open(f, "rb") as fh:
                for line in fh:
                    if n >= nbytes:
                        return path
                    out.write(line)
                    n += len(line)
    return path


def encode_speed(tokenizer_json: Path, text_file: Path) -> list[tuple[str, float, float]]:
    """MB/s of nlpkit (one process) and HF (one thread per call; encode_batch on all cores)."""
    from tokenizers import Tokenizer as HFTokenizer

    from nlpkit.bpe import Tokenizer

    with open(text_file, encoding="utf-8", newline="\n") as f:
        lines = f.readlines()
    mb = sum(len(x.encode("utf-8")) for x in lines) / 1e6
    mine = Tokenizer.from_file(tokenizer_json)
    hf = HFTokenizer.from_file(str(tokenizer_json))
    t = time.perf_counter()
    ids_mine = [mine.encode(x) for x in lines]
    t_mine = time.perf_counter() - t
    t = time.perf_counter()
    ids_hf = [e.ids for e in hf.encode_batch(lines)]
    t_batch = time.perf_counter() - t
    t = time.perf_counter()
    for x in lines:
        hf.encode(x)
    t_single = time.perf_counter() - t
    same = "same ids" if ids_mine == ids_hf else "IDS DIFFER"
    return [(f"encode {mb:.0f} MB, HF encode_batch ({same})", mb / t_mine, mb / t_batch),
            (f"encode {mb:.0f} MB, HF encode one by one", mb / t_mine, mb / t_single)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=None, help="shared data folder [../shared/data]")
    ap.add_argument("--quick", action="store_true", help="10 MB slice at vocab 8,000 only")
    ap.add_argument("--no-spm", action="store_true", help="skip sentencepiece")
    args = ap.parse_args()
    sys.path.insert(0, str(REPO / "tests"))
    from conftest import nlpkit_data_dir

    data = args.data or nlpkit_data_dir()
    if data is None:
        sys.exit("no shared data folder: pass --data")
    books = sorted((data / "gutenberg").glob("*.txt"))
    try:
        import sentencepiece  # noqa: F401
        spm = not args.no_spm
    except ImportError:
        spm = False
    tmp = Path(tempfile.mkdtemp(prefix="nlpkit-bpe-bench-"))
    try:
        run(books, tmp, args.quick, spm)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(books: list[Path], tmp: Path, quick: bool, spm: bool) -> None:
    slice10 = make_slice(books, 10_000_000, tmp / "slice10.txt")
    corpora = [("10 MB", [str(slice10)])] + ([] if quick else [("33 MB", [str(b) for b in books])])
    vocabs = [8000] if quick else [8000, 32000]
    print(f"{'task':44s} {'nlpkit':>9s} {'HF':>9s} {'ratio':>6s} {'spm':>9s}  merges")
    for cname, files in corpora:
        for vocab in vocabs:
            key = f"{cname.replace(' ', '')}-{vocab}"
            mine = run_trainer("nlpkit", vocab, files, tmp / f"nlpkit-{key}")
            hf = run_trainer("hf", vocab, files, tmp / f"hf-{key}")
            sp = run_trainer("spm", vocab, files, tmp / f"spm-{key}") if spm else None
            same = "identical" if mine["digest"] == hf["digest"] else "DIFFERENT"
            for what, unit, k in (("train time", "s", "seconds"), ("train peak RSS", "MB", "peak_mb")):
                label = f"{what} {cname} vocab {vocab} ({unit})"
                spv = f"{sp[k]:9.1f}" if sp else f"{'-':>9s}"
                line = f"{label:44s} {mine[k]:9.1f} {hf[k]:9.1f} {mine[k] / hf[k]:6.2f} {spv}  {same}"
                print(line, flush=True)
    for label, m, h in encode_speed(tmp / f"hf-10MB-{vocabs[-1]}" / "tokenizer.json", slice10):
        print(f"{label + ' (MB/s)':44s} {m:9.2f} {h:9.2f} {h / m:6.2f}", flush=True)
    print("\nratio = nlpkit / HF for time and memory, HF / nlpkit for MB/s (lower is better for nlpkit);")
    print("peak RSS of nlpkit = parent + workers x largest worker (forked, so shared pages count twice).")


if __name__ == "__main__":
    main()
