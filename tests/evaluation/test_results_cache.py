"""`score` / `perplexity --results-cache DIR`: a rerun prints the same bytes and computes (and loads) nothing, a run
killed mid-way resumes, a model changed in place (same path, same mtime) is recomputed, a corrupt entry or file is
ignored with a warning, and every setting that changes a number is a miss (nlpkit/evaluation/results_cache.py)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nlpkit.evaluation.results_cache import FILE_NAME, ResultsCache, make_key, model_identity

REPO = Path(__file__).resolve().parents[2]
DEFAULT = REPO / "nlpkit" / "lm" / "default"
WORDS = "the cat sat on a mat and a dog ran far away into the night while birds sang over green hills".split()


def text(lines: int, seed: int = 1) -> str:
    import random

    rng = random.Random(seed)
    return "".join(" ".join(rng.choice(WORDS) for _ in range(12)) + "\n" for _ in range(lines))


def items(n: int) -> str:
    out = []
    for k in range(n):
        out.append(json.dumps({"id": f"q{k}", "context": f"Item {k}: the {WORDS[k % len(WORDS)]} is",
                               "choices": ["blue", "a dog", "far away"], "gold": k % 3}))
    return "\n".join(out) + "\n"


def run(*args, env=None, **kw) -> subprocess.CompletedProcess:
    full = dict(os.environ, PYTHONPATH=str(REPO))
    full.pop("NLPKIT_RESULTS_CACHE", None)
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "nlpkit", *args], capture_output=True, text=True, env=full,
                          cwd=str(REPO), timeout=600, **kw)


def summary(stderr: str) -> tuple[int, int]:
    """(from the cache, computed) of the summary line."""
    line = [s for s in stderr.splitlines() if "results cache" in s and "computed" in s][-1]
    words = line.split(": ", 2)[2].split()
    return int(words[0]), int(words[-2])


def parts(stderr: str) -> int:
    """The parts of results (a text's windows) the summary line says came from the cache."""
    import re

    m = re.search(r"\(and (\d+) parts of results\)", stderr)
    return int(m.group(1)) if m else 0


@pytest.fixture
def files(tmp_path) -> dict:
    (tmp_path / "items.jsonl").write_text(items(20))
    (tmp_path / "a.txt").write_text(text(40, 1))
    (tmp_path / "b.txt").write_text(text(30, 2))
    return {k: str(tmp_path / k) for k in ("items.jsonl", "a.txt", "b.txt")} | {"cache": str(tmp_path / "rc")}


SCORE = ("score", "--format", "jsonl")
PPL = ("perplexity", "--format", "jsonl")


@pytest.mark.parametrize("command, inputs", [
    (SCORE, ("items.jsonl",)),
    (PPL, ("a.txt", "b.txt")),
    (PPL + ("--per-line",), ("a.txt",)),
    (PPL + ("--per-token", "--context", "32", "--mode", "disjoint"), ("b.txt",)),
])
def test_rerun_prints_the_same_bytes_and_loads_no_model(files, command, inputs):
    paths = [files[i] for i in inputs]
    plain = run(*command, *paths)
    assert plain.returncode == 0, plain.stderr
    first = run(*command, *paths, "--results-cache", files["cache"], "-v")
    assert first.returncode == 0, first.stderr
    assert first.stdout == plain.stdout
    assert "nlpkit: model default" in first.stderr and summary(first.stderr)[0] == 0
    again = run(*command, *paths, "-v", env={"NLPKIT_RESULTS_CACHE": files["cache"]})   # the variable too
    assert again.returncode == 0, again.stderr
    assert again.stdout == plain.stdout
    assert "nlpkit: model" not in again.stderr   # -v: nothing was loaded
    hits, computed = summary(again.stderr)
    assert computed == 0 and hits == summary(first.stderr)[1]


def test_table_and_json_rerun_are_the_same_bytes(files):
    for fmt in ("table", "json", "tsv"):
        want = run("score", files["items.jsonl"], "--format", fmt).stdout
        for _ in range(2):
            got = run("score", files["items.jsonl"], "--format", fmt, "--results-cache", files["cache"])
            assert got.stdout == want, fmt


def test_a_model_moved_elsewhere_is_the_same_model(files, tmp_path):
    """The key is the content, not the path: a copy of the model hits the entries of the original."""
    copy = tmp_path / "copy"
    shutil.copytree(DEFAULT, copy)
    first = run(*SCORE, files["items.jsonl"], "--results-cache", files["cache"])
    moved = run(*SCORE, files["items.jsonl"], "-m", str(copy), "--results-cache", files["cache"])
    assert summary(moved.stderr) == (20, 0)
    # the records name the model as given: only the model column differs
    strip = lambda out: [{k: v for k, v in json.loads(line).items() if k not in ("model", "signature")}  # noqa: E731
                         for line in out.splitlines()]
    assert strip(moved.stdout) == strip(first.stdout)


def _flip_a_weight(model: Path) -> None:
    """Change one byte of the weights in place, the file's size and mtime kept."""
    f = model / "model.safetensors"
    st = f.stat()
    with open(f, "r+b") as fh:
        fh.seek(st.st_size - 3)
        b = fh.read(1)
        fh.seek(st.st_size - 3)
        fh.write(bytes([b[0] ^ 0x40]))
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert f.stat().st_mtime_ns == st.st_mtime_ns and f.stat().st_size == st.st_size


@pytest.mark.parametrize("command, inputs", [(SCORE, ("items.jsonl",)), (PPL, ("a.txt",))])
def test_a_model_changed_in_place_is_recomputed(files, tmp_path, command, inputs):
    model = tmp_path / "model"
    shutil.copytree(DEFAULT, model)
    paths = [files[i] for i in inputs]
    first = run(*command, *paths, "-m", str(model), "--results-cache", files["cache"])
    assert first.returncode == 0, first.stderr
    _flip_a_weight(model)
    again = run(*command, *paths, "-m", str(model), "--results-cache", files["cache"])
    assert again.returncode == 0, again.stderr
    assert summary(again.stderr)[0] == 0   # nothing served from the old weights
    assert again.stdout == run(*command, *paths, "-m", str(model)).stdout != first.stdout


def _entries(cache: str) -> int:
    try:
        with sqlite3.connect(Path(cache) / FILE_NAME, timeout=30) as db:
            return db.execute("SELECT count(*) FROM results").fetchone()[0]
    except sqlite3.Error:
        return 0


def _kill_after(args: list[str], cache: str, entries: int, sig=signal.SIGKILL) -> None:
    """Start nlpkit, kill it with `sig` once the cache holds `entries` entries."""
    env = dict(os.environ, PYTHONPATH=str(REPO), NLPKIT_LM_THREADS="1")
    proc = subprocess.Popen([sys.executable, "-m", "nlpkit", *args, "--results-cache", cache], env=env, cwd=str(REPO),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 300
        while _entries(cache) < entries and proc.poll() is None and time.time() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, "finished before it could be killed"
        proc.send_signal(sig)
    finally:
        proc.wait(timeout=60)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_a_killed_perplexity_run_resumes_where_it_stopped(files, tmp_path, sig):
    book = tmp_path / "book.txt"
    book.write_text(text(80, 3))  # ~150 windows: the kill after 12 lands early, and 3 runs stay short
    args = ["perplexity", "--format", "jsonl", "--context", "32", "--stride", "8", str(book)]
    _kill_after(args, files["cache"], 12, sig)  # the run's settings and some windows stored
    stored = _entries(files["cache"])
    assert stored >= 12
    resumed = run(*args, "--results-cache", files["cache"])
    assert resumed.returncode == 0, resumed.stderr
    assert summary(resumed.stderr) == (0, 1)
    assert parts(resumed.stderr) >= stored - 1   # the stored windows (all but the run's settings) were reused
    assert resumed.stdout == run(*args).stdout


def test_a_killed_score_run_resumes_where_it_stopped(files, tmp_path):
    many = tmp_path / "many.jsonl"
    many.write_text(items(64 * 12))
    args = ["score", "--format", "jsonl", str(many)]
    _kill_after(args, files["cache"], 65)  # the model's window (for the signature) and the first block stored
    stored = _entries(files["cache"]) - 1
    resumed = run(*args, "--results-cache", files["cache"])
    assert resumed.returncode == 0, resumed.stderr
    hits, computed = summary(resumed.stderr)
    assert hits == stored and 0 < computed and hits + computed == 64 * 12
    assert resumed.stdout == run(*args).stdout


def test_a_corrupt_entry_is_ignored_with_a_warning_and_recomputed(files):
    first = run(*SCORE, files["items.jsonl"], "--results-cache", files["cache"])
    with sqlite3.connect(Path(files["cache"]) / FILE_NAME) as db:   # a number changed behind the checksum's back
        (key, value), = db.execute("SELECT key, value FROM results WHERE value LIKE '[%' LIMIT 1").fetchall()
        db.execute("UPDATE results SET value = ? WHERE key = ?", (value.replace("-", "-9", 1), key))
    again = run(*SCORE, files["items.jsonl"], "--results-cache", files["cache"])
    assert again.returncode == 0, again.stderr
    assert "1 corrupt or foreign entry ignored" in again.stderr
    assert summary(again.stderr) == (19, 1)
    assert again.stdout == first.stdout
    third = run(*SCORE, files["items.jsonl"], "--results-cache", files["cache"])
    assert summary(third.stderr) == (20, 0) and "entry ignored" not in third.stderr   # replaced


def test_a_foreign_entry_with_a_valid_checksum_is_not_used(files):
    first = run(*SCORE, files["items.jsonl"], "--results-cache", files["cache"])
    cache = ResultsCache(Path(files["cache"]))
    with sqlite3.connect(cache.path) as db:
        keys = [k for (k,) in db.execute("SELECT key FROM results WHERE value LIKE '[%'")]   # items' (not the window)
    cache.put(keys[0], {"not": "a score"})   # the right checksum, the wrong shape
    cache.close()
    again = run(*SCORE, files["items.jsonl"], "--results-cache", files["cache"])
    assert "1 corrupt or foreign entry ignored" in again.stderr and summary(again.stderr) == (19, 1)
    assert again.stdout == first.stdout


@pytest.mark.parametrize("damage", [b"not a database at all" * 100, b""])
def test_a_damaged_cache_file_is_set_aside_with_a_warning(files, damage):
    first = run(*PPL, files["a.txt"], "--results-cache", files["cache"])
    db = Path(files["cache"]) / FILE_NAME
    db.write_bytes(damage)
    again = run(*PPL, files["a.txt"], "--results-cache", files["cache"])
    assert again.returncode == 0, again.stderr
    assert again.stdout == first.stdout
    if damage:
        assert "could not be read" in again.stderr and list(Path(files["cache"]).glob("*.broken-*"))
    assert summary(run(*PPL, files["a.txt"], "--results-cache", files["cache"]).stderr)[1] == 0


@pytest.mark.parametrize("command, inputs, first, second", [
    (SCORE, ("items.jsonl",), (), ("--delimiter", ": ")),
    (SCORE, ("items.jsonl",), (), ("--context", "8")),
    (SCORE, ("items.jsonl",), (), ("--weights", "float32")),
    (SCORE, ("items.jsonl",), (), ("--mutual-info",)),
    (PPL, ("a.txt",), (), ("--context", "64")),
    (PPL, ("a.txt",), ("--context", "64"), ("--context", "64", "--stride", "16")),
    (PPL, ("a.txt",), ("--context", "64"), ("--context", "64", "--mode", "second-half")),
    (PPL, ("a.txt",), (), ("--no-add-bos",)),
    (PPL, ("a.txt",), (), ("--rope-factor", "2")),
])
def test_a_setting_that_changes_the_numbers_is_a_miss(files, command, inputs, first, second):
    paths = [files[i] for i in inputs]
    a = run(*command, *paths, *first, "--results-cache", files["cache"])
    assert a.returncode == 0, a.stderr
    b = run(*command, *paths, *second, "--results-cache", files["cache"])
    assert b.returncode == 0, b.stderr
    assert summary(b.stderr)[0] == 0
    assert b.stdout == run(*command, *paths, *second).stdout


def test_an_edited_item_is_a_miss_and_the_others_hit(files, tmp_path):
    run(*SCORE, files["items.jsonl"], "--results-cache", files["cache"])
    lines = Path(files["items.jsonl"]).read_text().splitlines()
    rec = json.loads(lines[3])
    rec["gold"] = (rec["gold"] + 1) % 3   # the gold changes acc: a new key
    lines[3] = json.dumps(rec)
    edited = tmp_path / "edited.jsonl"
    edited.write_text("\n".join(lines) + "\n")
    r = run(*SCORE, str(edited), "--results-cache", files["cache"])
    assert summary(r.stderr) == (19, 1)
    assert r.stdout == run(*SCORE, str(edited)).stdout


def test_a_file_changed_in_place_gets_a_new_digest(tmp_path):
    f = tmp_path / "m.gguf"
    f.write_bytes(b"GGUF" + bytes(100))
    cache = ResultsCache(tmp_path / "rc")
    before = model_identity(cache, f)
    assert model_identity(cache, f) == before   # memoized, same
    st = f.stat()
    f.write_bytes(b"GGUF" + bytes(99) + b"\x01")
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert model_identity(cache, f) != before


def test_put_and_get_many_keep_every_float_bit_and_refuse_what_check_refuses(tmp_path):
    warned = []
    cache = ResultsCache(tmp_path / "rc", warn=warned.append)
    value = [0.1 + 0.2, float("-inf"), float("nan"), 1e-310, -0.0, 3, "x\udcff", True]
    k = make_key("test", 1)
    cache.put(k, value)
    got = ResultsCache(tmp_path / "rc").get_many([k, make_key("test", 2)])
    assert list(got) == [k]
    v = got[k]
    assert v[0] == 0.1 + 0.2 and v[1] == float("-inf") and v[2] != v[2] and v[3] == 1e-310
    assert str(v[4]) == "-0.0" and v[5:] == [3, "x\udcff", True]
    assert cache.get_many([k], check=lambda v: isinstance(v, dict)) == {}
    assert warned and "1 corrupt or foreign entry" in warned[0]


def test_an_unwritable_cache_directory_still_runs(files, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    r = run(*PPL, files["a.txt"], "--results-cache", str(blocker / "rc"))
    assert r.returncode == 0, r.stderr
    assert "results cache not used" in r.stderr
    assert r.stdout == run(*PPL, files["a.txt"]).stdout


def test_the_weights_layout_is_read_from_the_load_spec_not_the_environment(files):
    """`--weights` and $NLPKIT_WEIGHTS build the same `LoadSpec`: the same key; the layout is the spec's."""
    a = run(*SCORE, files["items.jsonl"], "--results-cache", files["cache"], env={"NLPKIT_WEIGHTS": "float32"})
    assert a.returncode == 0, a.stderr
    b = run(*SCORE, files["items.jsonl"], "--weights", "float32", "--results-cache", files["cache"])
    assert summary(b.stderr) == (20, 0) and b.stdout == a.stdout


def test_a_cached_score_rerun_prints_the_window_in_force_in_its_signature(files):
    """The signature's `ctx` is each scorer's window: stored with the results, so that a rerun that loads no model
    prints the signature of an uncached run, byte for byte."""
    for extra in ((), ("--context", "8")):
        plain = run("score", files["items.jsonl"], "--format", "tsv", *extra)
        assert "ctx" in plain.stdout.splitlines()[1]   # the signature column holds the window in force
        for _ in range(2):
            got = run("score", files["items.jsonl"], "--format", "tsv", "-v", *extra,
                      "--results-cache", files["cache"])
            assert got.stdout == plain.stdout
        assert "nlpkit: model" not in got.stderr


def test_another_blas_kernel_is_a_miss(files, monkeypatch):
    """Bits may differ in their last places on another BLAS kernel: a cache restored on a machine with another
    kernel computes again rather than serving the first machine's bits."""
    from click.testing import CliRunner

    from nlpkit.cli.main import cli
    from nlpkit.evaluation import results_cache
    from nlpkit.lm import threads

    monkeypatch.delenv("NLPKIT_RESULTS_CACHE", raising=False)
    real = threads.blas_info()
    args = ["perplexity", files["b.txt"], "--format", "jsonl", "--context", "64", "--results-cache", files["cache"]]
    first = CliRunner().invoke(cli, args)
    assert first.exit_code == 0, first.output
    again = CliRunner().invoke(cli, args)
    assert summary(again.stderr)[1] == 0
    before = results_cache.computation_identity()
    monkeypatch.setattr(threads, "blas_info", lambda: {**real, "kernel": "SomeOtherKernel"})
    assert results_cache.computation_identity() != before
    other = CliRunner().invoke(cli, args)
    assert other.exit_code == 0, other.output
    assert summary(other.stderr)[0] == 0 and summary(other.stderr)[1] > 0
    assert other.stdout == first.stdout   # this machine computes the same bits again
    monkeypatch.setattr(threads, "blas_info", lambda: {**real, "library": "OtherBLAS"})
    assert results_cache.computation_identity() != before
