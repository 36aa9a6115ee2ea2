"""Ctrl-C while workers run: exit 130, no traceback, no process left behind, no partial output.

Each command that starts worker processes (or threads) runs on an input large enough to keep its
workers busy; SIGINT goes to the whole process group, as a terminal sends it, once the workers
exist. Repeated, since the hang it pins (a parent waiting on a lock a dying worker held) struck
2 runs in 6.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import FIXTURES, REPO

REPEAT = 3
LINE = "It is a truth universally acknowledged, that a single man in possession of a good fortune.\n"


def session_members(sid: int) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
                if int(stat[stat.rindex(")") + 2:].split()[3]) == sid and "Z" not in stat[stat.rindex(")") + 2]:
                    pids.append(int(entry))
            except (OSError, ValueError, IndexError):
                pass
    return pids


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> str:
    p = tmp_path_factory.mktemp("interrupt") / "big.txt"
    p.write_text(LINE * 360_000)   # ~33 MB: seconds of work for every command below, even on a quiet machine
    for name in ("sys2.txt", "sys3.txt"):   # bleu's systems: other names for the same text
        (p.parent / name).symlink_to(p)
    return str(p)


def cases(big: str, out: Path) -> dict[str, tuple[list[str], int, Path | None]]:
    """name -> (arguments, processes that show the workers are running, output to be removed)."""
    return {
        "tokenize": (["tokenize", big, "-j", "2", "-t", str(FIXTURES / "tokenizers" / "bl-llama3")], 3, None),
        "pmi": (["pmi", big, "-j", "2"], 3, None),
        "tfidf": (["tfidf", big, "--docs", "lines", "-j", "2"], 3, None),
        "ngram-train": (["ngram-train", big, "-j", "2", "-o", str(out / "lm.arpa")], 3, out / "lm.arpa"),
        "bpe-train": (["bpe-train", big, "-j", "2", "--vocab-size", "5000", "-o", str(out / "tok")], 3, out / "tok"),
        "bleu": (["bleu", big, big.replace("big.txt", "sys2.txt"), big.replace("big.txt", "sys3.txt"), "-r", big,
                  "-m", "ter", "-j", "2"], 3, None),
        "perplexity": (["perplexity", big, "-m", str(FIXTURES / "lm" / "llama-gqa")], 1, None),
    }


def interrupt(args: list[str], workers: int, cwd: str, settle: float | None = None
              ) -> tuple[int | None, str, list[int], bool]:
    """Start nlpkit in its own session, wait for `workers` processes (then `settle` seconds), send
    SIGINT to the group.
    Returns (exit status or None if it did not end, stderr, processes left, whether it was running)."""
    env = {k: v for k, v in os.environ.items() if k not in ("NLPKIT_DEBUG", "NLPKIT_DASK")}
    p = subprocess.Popen([sys.executable, "-m", "nlpkit", *args], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=cwd, env=env,
                         start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and p.poll() is None and len(session_members(p.pid)) < workers:
        time.sleep(0.05)
    time.sleep(settle if settle is not None else 0.3 if workers > 1 else 1.5)   # into the work itself
    running = p.poll() is None
    if running:
        os.killpg(p.pid, signal.SIGINT)
    try:
        _, err = p.communicate(timeout=30)
        code = p.returncode
    except subprocess.TimeoutExpired:
        code = None
    left = []
    for _ in range(30):
        left = session_members(p.pid)
        if not left:
            break
        time.sleep(0.1)
    if left or code is None:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        err = p.communicate()[1] if code is None else err
    return code, err.decode("utf-8", "replace"), left, running


@pytest.mark.parametrize("name", ["tokenize", "pmi", "tfidf", "ngram-train", "bpe-train", "bleu", "perplexity"])
def test_ctrl_c_stops_workers_quietly_and_exits_130(name, big, tmp_path):
    for attempt in range(REPEAT):
        out = tmp_path / f"run{attempt}"
        out.mkdir()
        args, workers, output = cases(big, out)[name]
        code, err, left, running = interrupt(args, workers, str(out))
        assert running, f"{name} ended before it could be interrupted: make its input larger"
        assert code == 130, f"attempt {attempt}: exit {code}, stderr: {err[-2000:]}"
        assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-2000:]
        assert err.strip() == "" or all(line.startswith("nlpkit: warning:") for line in err.splitlines()), err
        assert left == [], f"attempt {attempt}: processes left behind: {left}"
        if output is not None:
            assert not output.exists(), f"partial output {output} left behind"


def test_ctrl_c_keeps_a_previous_output_the_command_had_not_yet_written(big, tmp_path):
    """An output is removed only once the command has written to it."""
    from nlpkit.cli import shutdown

    kept = tmp_path / "old.arpa"
    kept.write_text("previous model\n")
    with pytest.raises(KeyboardInterrupt):
        with shutdown.partial_output(kept):
            raise KeyboardInterrupt
    assert kept.read_text() == "previous model\n"
    with pytest.raises(KeyboardInterrupt):
        with shutdown.partial_output(kept):
            kept.write_text("half a mod")
            raise KeyboardInterrupt
    assert not kept.exists()


def test_ctrl_c_stops_a_local_dask_cluster_quietly(big, tmp_path):
    """Once the cluster is up (a Ctrl-C during its start-up may be lost: the threads of numpy's BLAS
    take it while SIGINT is ignored for the workers being spawned)."""
    pytest.importorskip("distributed")
    larger = tmp_path / "larger.txt"
    larger.write_text(Path(big).read_text() * 8)
    code, err, left, running = interrupt(["pmi", "--dask", "local:2", str(larger)], 4, str(tmp_path), settle=1.5)
    assert running, "pmi --dask ended before it could be interrupted: make its input larger"
    assert code == 130, err[-2000:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-2000:]
    assert left == []


def test_ctrl_c_while_the_matrix_is_written_removes_the_vocab_out_file(tmp_path):
    """tfidf --matrix --vocab-out FILE wrote FILE whole, then the matrix: Ctrl-C during the matrix left FILE (450 KB).
    stdout is a pipe nobody reads, so the command blocks in the matrix with FILE written: SIGINT then removes it."""
    corpus = tmp_path / "c.txt"
    corpus.write_text("".join(f"w{i} w{i + 1} x{i % 97} y{i % 13} common\n" for i in range(20_000)))
    vocab = tmp_path / "vocab.txt"
    env = {k: v for k, v in os.environ.items() if k not in ("NLPKIT_DEBUG", "NLPKIT_DASK")}
    p = subprocess.Popen([sys.executable, "-m", "nlpkit", "tfidf", str(corpus), "--docs", "lines", "--matrix",
                          "--vocab-out", str(vocab)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, cwd=str(REPO), env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and p.poll() is None and not (vocab.exists() and vocab.stat().st_size):
            time.sleep(0.05)
        time.sleep(0.5)   # the vocabulary is written in one call; the matrix now fills the pipe
        assert p.poll() is None and vocab.exists(), "the command should be blocked writing the matrix"
        os.killpg(p.pid, signal.SIGINT)
        assert p.wait(timeout=30) == 130
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        p.stdout.close()
    assert not vocab.exists()
