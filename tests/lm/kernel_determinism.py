"""The determinism checks of tests/lm/test_determinism.py, compact, for one BLAS kernel: run as a script in a process
whose environment sets OPENBLAS_CORETYPE (never this test run's own), so any machine checks every kernel numpy's
OpenBLAS can be told to use.

Each check runs nlpkit twice (1 and 2 engine threads; packed and alone; native and float32 weights) and compares the
outputs record by record. Prints one line per check ("ok NAME" or "DIFF NAME: the first differing record") and the
BLAS it ran on; exits 1 when any check differs. A few seconds a kernel on the default model (a quiet machine).
"""

from __future__ import annotations

import json
import random
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

from conftest import FIXTURES, REPO  # noqa: E402

WORDS = (REPO / "README.md").read_text(encoding="utf-8").split()


def first_difference(a: str, b: str) -> str | None:
    """None when the outputs are equal, else where they first differ (one record of each, cut short)."""
    if a == b:
        return None
    la, lb = a.splitlines(), b.splitlines()
    for i, (x, y) in enumerate(zip(la, lb)):
        if x != y:
            return f"record {i + 1}: {x[:300]!r} != {y[:300]!r}"
    return f"{len(la)} records != {len(lb)} records"


def run(threads: str, *args: str) -> str:
    from click.testing import CliRunner

    from nlpkit.cli.main import cli

    r = CliRunner().invoke(cli, list(args), env={"NLPKIT_LM_THREADS": threads})
    if r.exit_code != 0:
        raise SystemExit(f"nlpkit {' '.join(args)} exited {r.exit_code}: {r.output[-500:]}")
    return r.stdout


def words(rng: random.Random, n: int) -> str:
    a = rng.randrange(len(WORDS) - n)
    return " ".join(WORDS[a:a + n])


def files(d: Path) -> dict[str, Path]:
    rng = random.Random(37)
    ll = [{"context": words(rng, rng.choice([3, 8, 40, 90])), "continuation": " " + words(rng, rng.randint(1, 6))}
          for _ in range(10)]
    mc = [{"context": words(rng, rng.choice([4, 30, 70])),
           "choices": [" " + words(rng, rng.randint(1, 4)) for _ in range(4)], "gold": rng.randrange(4)}
          for _ in range(5)]
    out = {"ll": d / "ll.jsonl", "mc": d / "mc.jsonl", "text": d / "text.txt", "lines": d / "lines.txt"}
    out["ll"].write_text("".join(json.dumps(r) + "\n" for r in ll), encoding="utf-8")
    out["mc"].write_text("".join(json.dumps(r) + "\n" for r in mc), encoding="utf-8")
    out["text"].write_text(" ".join(WORDS[:300]), encoding="utf-8")
    out["lines"].write_text("".join(words(rng, rng.choice([2, 10, 50, 150])) + "\n" for _ in range(6)))
    return out


def thread_checks(f: dict[str, Path]) -> dict[str, tuple]:
    """Commands whose output must be the same bytes on 1 and 2 threads."""
    return {
        "score ll": ("score", str(f["ll"]), "--format", "jsonl", "-q"),
        "score mc": ("score", str(f["mc"]), "--format", "jsonl", "-q"),
        "score fixture model": ("score", "-m", str(FIXTURES / "score" / "models" / "llama-spm"),
                                str(FIXTURES / "score" / "mc.jsonl"), "--format", "jsonl", "-q"),
        "perplexity sliding": ("perplexity", str(f["text"]), "--context", "128", "--stride", "48", "--per-token",
                               "--format", "jsonl", "-q"),
        "perplexity disjoint": ("perplexity", str(f["text"]), "--mode", "disjoint", "--context", "100",
                                "--format", "jsonl", "-q"),
        "perplexity per-line": ("perplexity", str(f["lines"]), "--per-line", "--format", "jsonl", "-q"),
        "sample --dist": ("sample", " ".join(WORDS[:70]), "--dist", "--seed", "1", "--top-k", "0", "--top-p", "1",
                          "--min-p", "0", "--format", "jsonl"),
    }


def packed_check(f: dict[str, Path]) -> str | None:
    """Items packed into forwards on 2 threads give the bits each gets alone on 1."""
    import os

    from nlpkit.lm.transformer.loaders import load_model
    from nlpkit.lm.transformer.packed_scoring import PackedScorer

    rows = [json.loads(line) for line in f["mc"].read_text().splitlines()]
    rows += [{"context": r["context"], "choices": [r["continuation"]]}
             for r in map(json.loads, f["ll"].read_text().splitlines())]
    requests = [(r["context"], r["choices"]) for r in rows]
    scorer = PackedScorer(load_model(None))
    os.environ["NLPKIT_LM_THREADS"] = "2"
    packed = scorer.score_requests(requests)
    os.environ["NLPKIT_LM_THREADS"] = "1"
    each = [[scorer.score_requests([(c, [x])])[0][0] for x in choices] for c, choices in requests]
    for i, (p, e) in enumerate(zip(packed, each)):
        a, b = [s.logprob for s in p], [s.logprob for s in e]
        if a != b:
            return f"request {i + 1}: packed {a} != alone {b}"
    return None


def native_check(d: Path) -> str | None:
    """Native weights give float32's bits: a quantized GGUF whose matrices and output projection take the large
    paths (expanded as stored rows; the output projection in tiles)."""
    from test_weights_native import tokens, write_llama_gguf

    from nlpkit.lm.transformer import products, stored_weights
    from nlpkit.lm.transformer.loaders import load_model

    stored_weights.SMALL_MATRIX, products.SMALL_HEAD, products.HEAD_TILE = 0, 0, 128
    for type_name in ("Q8_0", "Q4_K"):
        path = write_llama_gguf(d / f"{type_name}.gguf", type_name, tied=False)
        native = load_model(path, weights="native", use_cache=False)
        f32 = load_model(path, weights="float32", use_cache=False)
        for n, kw in ((70, {}), (50, {"logits_from": 37}), (9, {"last_only": True})):
            ids = tokens(n)
            a, b = f32.forward(ids, **kw), native.forward(ids, **kw)
            if not np.array_equal(a, b):
                r = int(np.flatnonzero((a != b).any(axis=-1)[0])[0])
                return f"{type_name}, {n} tokens {kw}: row {r} differs by up to {float(np.abs(a - b).max()):.3g}"
    return None


def main() -> int:
    from nlpkit.lm.threads import blas_info

    print("blas", json.dumps(blas_info()))
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        f = files(d)
        results = {name: first_difference(run("1", *args), run("2", *args))
                   for name, args in thread_checks(f).items()}
        results["packed = alone"] = packed_check(f)
        results["native = float32"] = native_check(d)
    for name, diff in results.items():
        print(f"ok {name}" if diff is None else f"DIFF {name}: {diff}")
        failed += diff is not None
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
