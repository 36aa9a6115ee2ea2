"""lm-evaluation-harness itself as the client: `lm_eval --model local-completions` with its remote tokenizer against
`nlpkit serve`, on tasks written here (a multiple-choice task and a generate_until task over small JSONL files).
Every sample's log-likelihoods and greedy flags equal `nlpkit score`'s on the same items (1e-5 per token), and
every generation equals `nlpkit score`'s generate task (lm-evaluation-harness's `generate_until`). Skipped when
lm-eval is not installed (it is not in the test extra)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from serve_helpers import MODELS, Server, model_path, run_cli

pytestmark = pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("lm_eval", "tenacity", "aiohttp", "requests")),
    reason="lm-eval with its API extra (lm-eval[api]: tenacity, aiohttp, requests) is not installed")

TOL = 1e-5  # per token (see test_serve_api.TOL)

MC = [
    {"context": "The capital of France is", "choices": ["Paris", "London", "Berlin"], "gold": 0},
    {"context": "Question: what is two plus two?\nAnswer:", "choices": ["four", "five", "twenty-two"], "gold": 0},
    {"context": "Pick the animal: ", "choices": ["cat", "car", "cup"], "gold": 0},
    {"context": "", "choices": ["The sun rises in the east.", "The sun rises in the west."], "gold": 0},
    {"context": "Café au lait est une boisson", "choices": ["française", "japonaise"], "gold": 0},
]
GEN = [
    {"context": "Question: what is two plus two?\nAnswer:", "target": "4"},
    {"context": "The capital of France is", "target": "Paris"},
    {"context": "Once upon a time", "target": "x"},
]
TASK_MC = """task: serve_mc
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{context}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: "{{{{gold}}}}"
target_delimiter: " "
metric_list:
  - metric: acc
"""
TASK_GEN = """task: serve_gen
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: "{{{{context}}}}"
doc_to_target: "{{{{target}}}}"
generation_kwargs:
  until: ["\\n\\n"]
  max_gen_toks: 12
  do_sample: false
  temperature: 0
metric_list:
  - metric: exact_match
"""


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def samples(out_dir, task: str) -> list[dict]:
    files = sorted(out_dir.rglob(f"samples_{task}_*.jsonl"))
    assert files, list(out_dir.rglob("*"))
    rows = [json.loads(line) for line in files[-1].read_text(encoding="utf-8").splitlines()]
    return sorted(rows, key=lambda r: r["doc_id"])


def item_records(r) -> list[dict]:
    assert r.returncode == 0, r.stderr.decode()
    return [rec for rec in map(json.loads, r.stdout.decode().splitlines()) if rec.get("record") == "item"]


@pytest.mark.parametrize("name", MODELS)
def test_lm_eval_local_completions_through_the_server_equals_nlpkit_score(name, tmp_path):
    write_jsonl(tmp_path / "mc.jsonl", MC)
    write_jsonl(tmp_path / "gen.jsonl", GEN)
    (tmp_path / "serve_mc.yaml").write_text(TASK_MC.format(data=tmp_path / "mc.jsonl"))
    (tmp_path / "serve_gen.yaml").write_text(TASK_GEN.format(data=tmp_path / "gen.jsonl"))
    with Server("-m", str(model_path(name))) as srv:
        args = (f"model={name},base_url={srv.url}/v1/completions,tokenizer_backend=remote,max_length=64,"
                "num_concurrent=2,max_retries=1")
        env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
        r = subprocess.run([sys.executable, "-m", "lm_eval", "run", "--model", "local-completions", "--model_args",
                            args, "--tasks", "serve_mc,serve_gen", "--include_path", str(tmp_path), "--batch_size",
                            "4", "--log_samples", "--output_path", str(tmp_path / "out")],
                           capture_output=True, env=env, timeout=900, cwd=str(tmp_path))
        assert r.returncode == 0, r.stderr.decode()[-3000:]
        assert srv.stop() == 0
    mc = item_records(run_cli("score", "-m", str(model_path(name)), str(tmp_path / "mc.jsonl"), "--format", "jsonl"))
    got = samples(tmp_path / "out", "serve_mc")
    assert len(got) == len(MC)
    for s, rec in zip(got, mc):
        lls = [float(ll) for ll, _ in s["filtered_resps"]]  # lm-eval logs them as strings
        assert lls == pytest.approx(rec["logprobs"], abs=TOL * max(rec["tokens"])), s["doc_id"]
    gen = item_records(run_cli("score", "-m", str(model_path(name)), str(tmp_path / "gen.jsonl"), "--until", "\n\n",
                               "--max-gen-toks", "12", "--format", "jsonl"))
    got = samples(tmp_path / "out", "serve_gen")
    assert [s["resps"][0][0] for s in got] == [rec["generation"] for rec in gen]
