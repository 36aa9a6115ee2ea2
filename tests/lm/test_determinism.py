"""Every number the transformer engine prints is the same bits whatever the thread count (`NLPKIT_LM_THREADS`, and so
the machine's load) and whatever else shares a packed forward: `score` (every task), `perplexity` (every mode,
`--per-line`, `--per-token`, `--compare`), `sample --dist`, and `score --dask local:2` against the local run.

OpenBLAS gives a row of a matrix product other bits when the product has one row, a few rows (its small-matrix
kernel) or several BLAS threads with a K between 384 and 768 (the default model's 688-wide MLP): `model.ROW_MIN`.
The default model (nlpkit/lm/default) is the one whose shapes showed every one of these; the runs are in process
(click's runner) so that each stays under a few seconds. Other kernels block rows otherwise (Haswell and Zen: a row's
bits depend on its index modulo 12 in its product, `lm/transformer/products.py`): the last test runs a compact set of
these checks under each OPENBLAS_CORETYPE, in a child process."""

from __future__ import annotations

import json
import random

import pytest
from click.testing import CliRunner

from conftest import FIXTURES, REPO, run_cli
from kernel_determinism import first_difference

THREADS = ("1", "2", "4")
SCORE = FIXTURES / "score"
WORDS = (REPO / "README.md").read_text(encoding="utf-8").split()


def run(threads: str, *args: str, input: str | None = None) -> str:
    """`nlpkit ARGS` in process with NLPKIT_LM_THREADS=threads; its stdout (exit status 0)."""
    from nlpkit.cli.main import cli as group

    r = CliRunner().invoke(group, list(args), input=input, env={"NLPKIT_LM_THREADS": threads})
    assert r.exit_code == 0, r.output
    return r.stdout


def same_on_every_thread_count(*args: str, input: str | None = None) -> str:
    """The output on 1 thread, after checking 2 and 4 give the same bytes: a difference is reported as its first
    differing record (never a diff of the whole outputs, which pytest would take minutes to build)."""
    outs = {n: run(n, *args, input=input) for n in THREADS}
    for n in THREADS[1:]:
        diff = first_difference(outs["1"], outs[n])
        assert diff is None, f"1 thread vs {n}: {diff}"
    return outs["1"]


def words(rng: random.Random, n: int) -> str:
    a = rng.randrange(len(WORDS) - n)
    return " ".join(WORDS[a:a + n])


@pytest.fixture(scope="module")
def items(tmp_path_factory) -> dict:
    """Item files of each task: short items (forwards under 64 tokens, where BLAS threads used to run) and long
    ones (row-parallel forwards), many packed per forward."""
    rng = random.Random(37)
    d = tmp_path_factory.mktemp("items")
    ll = [{"context": words(rng, rng.choice([3, 8, 40, 90])), "continuation": " " + words(rng, rng.randint(1, 6))}
          for _ in range(30)]
    mc = [{"context": words(rng, rng.choice([4, 30, 70])), "choices": [" " + words(rng, rng.randint(1, 4))
                                                                      for _ in range(4)], "gold": rng.randrange(4)}
          for _ in range(12)]
    pref = [{"prompt": words(rng, rng.choice([5, 60])), "chosen": " " + words(rng, 3), "rejected": " " + words(rng, 5)}
            for _ in range(10)]
    files = {}
    for name, rows in (("ll", ll), ("mc", mc), ("pref", pref)):
        files[name] = d / f"{name}.jsonl"
        files[name].write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    files["one"] = d / "one.jsonl"  # a forward of a few tokens alone
    files["one"].write_text(json.dumps({"context": "The capital of France is", "continuation": " Paris"}) + "\n")
    files["text"] = d / "text.txt"
    files["text"].write_text(" ".join(WORDS[:900]), encoding="utf-8")
    return files


@pytest.mark.parametrize("name", ["ll", "mc", "pref", "one"])
def test_score_numbers_are_the_same_bits_on_1_2_and_4_threads(items, name):
    out = same_on_every_thread_count("score", str(items[name]), "--format", "jsonl", "-q")
    assert out.count('"record": "item"') >= 1


def test_score_mutual_info_and_fixture_models_are_the_same_bits_on_1_2_and_4_threads(items):
    same_on_every_thread_count("score", str(items["mc"]), "--mutual-info", "--format", "jsonl", "-q")
    same_on_every_thread_count("score", "-m", str(SCORE / "models" / "llama-spm"), str(SCORE / "mc.jsonl"),
                               "--format", "jsonl", "-q")


@pytest.mark.parametrize("opts", [["--context", "128", "--stride", "48"], ["--mode", "disjoint", "--context", "100"],
                                  ["--mode", "second-half", "--context", "96"], ["--per-token", "--context", "200"],
                                  ["--per-line"]])
def test_perplexity_is_the_same_bits_on_1_2_and_4_threads(items, tmp_path, opts):
    text = items["text"]
    if "--per-line" in opts:  # lines of a few tokens to a few hundred
        text = tmp_path / "lines.txt"
        rng = random.Random(1)
        text.write_text("".join(words(rng, rng.choice([2, 10, 50, 150])) + "\n" for _ in range(12)))
    same_on_every_thread_count("perplexity", str(text), *opts, "--format", "jsonl", "-q")


def test_perplexity_compare_is_the_same_bits_on_1_2_and_4_threads(items):
    tiny = FIXTURES / "lm" / "compare" / "tiny"
    same_on_every_thread_count("perplexity", str(items["text"]), "-m", str(tiny / "model"), "--compare",
                               str(tiny / "base"), "--context", "64", "--per-token", "--format", "jsonl", "-q")
    same_on_every_thread_count("perplexity", str(items["text"]), "--compare", str(REPO / "nlpkit" / "lm" / "default"),
                               "--context", "160", "--format", "jsonl", "-q")


@pytest.mark.parametrize("prompt", ["The capital of France is", " ".join(WORDS[:120])])
def test_sample_dist_is_the_same_bits_on_1_2_and_4_threads(prompt):
    same_on_every_thread_count("sample", prompt, "--dist", "--seed", "1", "--top-k", "0", "--top-p", "1",
                               "--min-p", "0", "--format", "jsonl")


def test_a_packed_block_scores_each_item_as_it_scores_alone(items, monkeypatch):
    """Items packed into forwards of ~1000 tokens (row-parallel on 2 threads) give the bits each item gets in its own
    forward of a few tokens (one thread), and each choice the bits it gets without the other choices."""
    from nlpkit.lm.transformer.packed_scoring import PackedScorer
    from nlpkit.lm.transformer.loaders import load_model

    def requests(mc, ll) -> list[tuple[str, list[str]]]:
        rows = [json.loads(line) for line in mc.read_text().splitlines()]
        rows += [{"context": r["context"], "choices": [r["continuation"]]}
                 for r in map(json.loads, ll.read_text().splitlines())]
        return [(r["context"], r["choices"]) for r in rows]

    # the default model on long and short items; a 64-position fixture model on the fixture's short items
    for path, requests in ((None, requests(items["mc"], items["ll"])),
                           (SCORE / "models" / "llama-spm", requests(SCORE / "mc.jsonl", SCORE / "ll.jsonl"))):
        scorer = PackedScorer(load_model(path))
        monkeypatch.setenv("NLPKIT_LM_THREADS", "2")
        packed = scorer.score_requests(requests)
        monkeypatch.setenv("NLPKIT_LM_THREADS", "1")
        alone = [scorer.score_requests([request])[0] for request in requests]
        each = [[scorer.score_requests([(context, [c])])[0][0] for c in choices] for context, choices in requests]
        got = {"packed": [[(s.logprob, s.is_greedy) for s in r] for r in packed],
               "alone": [[(s.logprob, s.is_greedy) for s in r] for r in alone],
               "each": [[(s.logprob, s.is_greedy) for s in r] for r in each]}
        for how in ("alone", "each"):
            bad = [i for i, (a, b) in enumerate(zip(got["packed"], got[how])) if a != b]
            assert not bad, f"request {bad[0]}: packed {got['packed'][bad[0]]} != {how} {got[how][bad[0]]}"


def test_score_on_dask_local_2_equals_the_local_run(items):
    pytest.importorskip("distributed", reason="dask.distributed is not installed (nlpkit[dask])")
    args = ("score", str(items["ll"]), "--format", "jsonl", "-q")
    local = run_cli(*args, env={"NLPKIT_LM_THREADS": "2"})
    dask = run_cli(*args, "--dask", "local:2", "--shard-size", "1k", env={"NLPKIT_LM_THREADS": "2"})
    assert local.returncode == 0 and dask.returncode == 0, (local.stderr, dask.stderr)
    diff = first_difference(local.stdout, dask.stdout)
    assert diff is None, f"local vs --dask local:2: {diff}"


def _cpu_flags() -> set[str]:
    try:
        text = open("/proc/cpuinfo", encoding="utf-8").read()
    except OSError:
        return set()
    return set(next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), []))


# the instruction sets each OpenBLAS kernel needs: a kernel this processor cannot run is skipped
KERNELS = {"Haswell": {"avx2", "fma"}, "Zen": {"avx2", "fma"}, "SkylakeX": {"avx512f", "avx512bw", "avx512vl"},
           "SandyBridge": {"avx"}, "": set()}


@pytest.mark.parametrize("kernel", list(KERNELS), ids=[k or "own" for k in KERNELS])
def test_every_check_is_the_same_bits_on_each_openblas_kernel(kernel):
    """OPENBLAS_CORETYPE=kernel in a child process only (this run's own BLAS stays as it is): score, perplexity and
    sample --dist on 1 and 2 threads, packed items against each alone, native weights against float32
    (tests/lm/kernel_determinism.py, which prints the first differing record of a check that fails)."""
    import os
    import subprocess
    import sys

    flags = _cpu_flags()
    if flags and not KERNELS[kernel] <= flags:
        pytest.skip(f"this processor cannot run OpenBLAS's {kernel} kernel")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENBLAS_CORETYPE")}
    if kernel:
        env["OPENBLAS_CORETYPE"] = kernel
    env.pop("NLPKIT_LM_THREADS", None)
    r = subprocess.run([sys.executable, str(REPO / "tests" / "lm" / "kernel_determinism.py")], env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"{kernel or 'own'} kernel:\n{r.stdout[-3000:]}\n{r.stderr[-2000:]}"
