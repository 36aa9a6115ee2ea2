"""Shared helpers of the server tests: an in-process app (`api`), lm-evaluation-harness's way of asking for a
loglikelihood (`lm_eval_request`), and `nlpkit score`'s records of the fixture items."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import FIXTURES, run_cli  # noqa: E402

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

SCORE = FIXTURES / "score"
MODELS = ["gpt2-bpe", "llama-spm"]   # byte-level BPE without BOS; SentencePiece whose tokenizer adds BOS


def model_path(name: str) -> Path:
    return SCORE / "models" / name


def make_client(name: str, **kw):
    from fastapi.testclient import TestClient

    from nlpkit.serve.app import create_app
    from nlpkit.serve.engine import Engine
    from nlpkit.serve.model import load_served_model

    served = load_served_model(str(model_path(name)))
    engine = Engine(served, kw.pop("batch_size", 8))
    return TestClient(create_app(served, engine, **kw)), served, engine


def items(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def score_records(name: str, path: Path) -> list[dict]:
    """`nlpkit score`'s item records of a fixture file."""
    r = run_cli("score", "-m", str(model_path(name)), str(path), "--format", "jsonl")
    assert r.returncode == 0, r.stderr.decode()
    return [rec for rec in map(json.loads, r.stdout.decode().splitlines()) if rec.get("record") == "item"]


def lm_eval_pair(tokenize, prefix_id: int, context: str, continuation: str) -> tuple[list[int], list[int]]:
    """(context ids, continuation ids) as lm-evaluation-harness's `loglikelihood` builds them with a remote
    tokenizer (`TemplateLM._encode_pair`, the prefix token for an empty context)."""
    if context == "":
        cont = tokenize(continuation)
        return ([prefix_id], cont) if cont[0] != prefix_id else (cont[:1], cont[1:])
    n = len(context) - len(context.rstrip())
    if n:
        context, continuation = context[:-n], context[-n:] + continuation
    whole = tokenize(context + continuation)
    ctx = tokenize(context)
    return ctx, whole[len(ctx):]


def lm_eval_loglikelihood(choice: dict, ctxlen: int) -> tuple[float, bool]:
    """`LocalCompletionsAPI.parse_logprobs` of one choice (max_tokens 1: the last token is the generated one)."""
    lps = choice["logprobs"]["token_logprobs"][ctxlen:-1]
    tops = choice["logprobs"]["top_logprobs"][ctxlen:-1]
    return sum(lps), all(lp == max(top.values()) for lp, top in zip(lps, tops))


class Server:
    """A real `nlpkit serve` process on 127.0.0.1 and a free port (`--port 0`: the port is read from its first
    stderr line); `stop()` sends SIGTERM and returns the exit status."""

    def __init__(self, *args: str, env: dict | None = None):
        import os
        import re
        import subprocess
        import sys
        import time

        from conftest import REPO

        full = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
        full.pop("NLPKIT_DEBUG", None)
        self.proc = subprocess.Popen([sys.executable, "-m", "nlpkit", "serve", "--port", "0", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=full, cwd=str(REPO))
        line = self.proc.stderr.readline().decode()
        m = re.search(r"on (http://[^ ]+)/v1", line)
        if not m:
            self.proc.kill()
            raise AssertionError(f"no server: {line}{self.proc.stderr.read().decode()}")
        self.url = m.group(1)
        deadline = time.monotonic() + 60
        import httpx

        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)

    def stop(self, timeout: float = 60) -> int:
        import signal

        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()

    def stderr(self) -> str:
        return self.proc.stderr.read().decode()

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
