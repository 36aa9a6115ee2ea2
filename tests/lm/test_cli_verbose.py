"""`perplexity -v` and `score -v`: after each model loads, one line on stderr saying what it is and how it was
loaded (`LanguageModel.describe()`): the weights layout and why, the parameters, the bytes held, the threads and
what the prepared-model cache did. stdout is the same bytes with and without -v."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import run_cli
from test_weights_native import write_llama_gguf

from nlpkit.cli.main import cli
from nlpkit.lm.interface import ModelDescription
from nlpkit.lm.load import load_language_model

FIX = Path(__file__).resolve().parents[1] / "fixtures"
KENLM = FIX / "ngram" / "kenlm-3.arpa.gz"
TINY = FIX / "lm" / "compare" / "tiny"
TEXT = "the cat sat on the mat. " * 8


GGUF = FIX / "lm" / "families" / "qwen2" / "model.gguf"   # a tiny GGUF with a tokenizer (F32 tensors)


@pytest.fixture(scope="module")
def gguf(tmp_path_factory) -> Path:
    """The qwen2 fixture under a name of its own (m.gguf): no other test has a cache entry of this path."""
    import shutil

    return Path(shutil.copy(GGUF, tmp_path_factory.mktemp("verbose") / "m.gguf"))


@pytest.fixture
def text(tmp_path) -> Path:
    p = tmp_path / "t.txt"
    p.write_text(TEXT, encoding="utf-8")
    return p


def invoke(*args: str):
    r = CliRunner().invoke(cli, [str(a) for a in args])
    assert r.exit_code == 0, r.output
    return r


def model_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("nlpkit: model ")]


@pytest.mark.parametrize("weights, held", [("native", "as stored"), ("float32", "in float32")])
def test_perplexity_verbose_says_the_layout_and_why_on_stderr_and_leaves_stdout(gguf, text, weights, held):
    quiet = invoke("perplexity", "-m", gguf, text, "--weights", weights, "--format", "tsv")
    loud = invoke("perplexity", "-m", gguf, text, "--weights", weights, "--format", "tsv", "-v")
    assert loud.stdout_bytes == quiet.stdout_bytes
    assert model_lines(quiet.stderr) == []
    (line,) = model_lines(loud.stderr)
    assert re.fullmatch(rf"nlpkit: model m\.gguf: qwen2, [0-9.]+k parameters, weights {weights} \(asked for\), "
                        rf"[0-9.]+ kB {held}, \d+ threads?, prepared-model cache: \w[\w ]*", line), line


def test_perplexity_auto_says_why_native_for_scoring(gguf, text):
    (line,) = model_lines(invoke("perplexity", "-m", gguf, text, "--verbose").stderr)
    assert "weights native (auto: scoring, where a batched forward expands each layer once" in line
    assert line.endswith("prepared-model cache: not used")   # native: the file mapped, no cache entry


def test_float32_load_says_whether_the_cache_was_written_read_or_off(tmp_path, text):
    import shutil

    from nlpkit.lm import prepared

    path = shutil.copy(GGUF, tmp_path / "c.gguf")  # a path no other test has cached
    args = ("perplexity", "-m", path, text, "--weights", "float32", "-v")
    assert model_lines(invoke(*args).stderr)[0].endswith("prepared-model cache: written")
    prepared.flush()
    assert model_lines(invoke(*args).stderr)[0].endswith("prepared-model cache: read")
    assert model_lines(invoke(*args, "--no-cache").stderr)[0].endswith("prepared-model cache: off")


def test_ngram_model_line_names_its_order_and_n_grams_and_no_layout(text):
    lm = load_language_model(KENLM)
    n_grams = sum(len(k) for k in lm.model.keys)
    quiet = invoke("perplexity", "-m", KENLM, text, "--format", "jsonl")
    loud = invoke("perplexity", "-m", KENLM, text, "--format", "jsonl", "-v")
    assert loud.stdout_bytes == quiet.stdout_bytes
    (line,) = model_lines(loud.stderr)
    assert line.startswith(f"nlpkit: model kenlm-3.arpa.gz: 3-gram arpa, {n_grams / 1000:.1f}k n-grams, ")
    assert "weights" not in line and "thread" not in line


def test_compare_says_a_line_for_each_model_in_load_order(text):
    args = ("perplexity", text, "-m", TINY / "model", "--compare", TINY / "base", "--context", "16", "--format", "tsv")
    quiet, loud = invoke(*args), invoke(*args, "-v")
    assert loud.stdout_bytes == quiet.stdout_bytes
    lines = model_lines(loud.stderr)
    assert [line.split(":")[1] for line in lines] == [" model model", " model base"]
    assert all("weights native (auto: scoring" in line for line in lines)


def test_score_verbose_says_each_model_once_and_leaves_stdout(gguf, tmp_path):
    items = tmp_path / "items.jsonl"
    items.write_text('{"context": "The sky is", "continuation": " blue"}\n', encoding="utf-8")
    args = ("score", "-m", gguf, "-m", KENLM, "-m", gguf, items, "--format", "jsonl", "--weights", "float32")
    quiet, loud = invoke(*args), invoke(*args, "-v")
    assert loud.stdout_bytes == quiet.stdout_bytes
    lines = model_lines(loud.stderr)
    assert len(lines) == 2   # a model given twice is loaded (and said) once
    assert "weights float32 (asked for)" in lines[0] and lines[1].startswith("nlpkit: model kenlm-3.arpa.gz: 3-gram")


def test_describe_is_the_one_member_both_backends_answer(tmp_path):
    from nlpkit.lm.transformer.loaders import load_model
    from nlpkit.lm.transformer.transformer_lm import TransformerLM

    path = write_llama_gguf(tmp_path / "q.gguf", "Q8_0")   # Q8_0: 34 bytes per 32 weights as stored
    native, f32 = (TransformerLM(load_model(path, weights=w, use_cache=False)).describe()
                   for w in ("native", "float32"))
    assert isinstance(native, ModelDescription)
    assert (native.name, native.architecture, native.size_unit) == ("q.gguf", "llama", "parameters")
    assert (native.layout, native.layout_why, f32.layout, f32.cache) == ("native", "asked for", "float32", "off")
    assert native.threads >= 1 and native.size == f32.size
    assert 3.5 < f32.held_bytes / native.held_bytes < 4   # the matrices held as stored, not as float32
    n = load_language_model(KENLM).describe()
    assert (n.layout, n.threads, n.size_unit) == (None, None, "n-grams") and n.held_bytes > 0


def test_dask_runs_say_the_line_from_the_client(gguf, text):
    args = ("perplexity", "-m", str(gguf), str(text), "--format", "tsv", "--dask", "local:1")
    loud = run_cli(*args, "-v")
    assert loud.returncode == 0, loud.stderr.decode()
    assert loud.stdout == run_cli("perplexity", "-m", str(gguf), str(text), "--format", "tsv").stdout
    (line,) = model_lines(loud.stderr.decode())
    assert "weights native (auto: scoring" in line


def test_verbose_names_the_blas_library_version_and_kernel_after_an_engine_model_only(gguf, text):
    """Bits can differ across BLAS kernels (another machine): -v records which one ran (`threads.blas_info`)."""
    from nlpkit.lm.threads import blas_info

    info = blas_info()
    assert set(info) == {"library", "version", "kernel", "threads"}
    for args in (("perplexity", "-m", gguf, text), ("score", "-m", gguf, FIX / "score" / "mc.jsonl")):
        lines = [x for x in invoke(*args, "-v").stderr.splitlines() if x.startswith("nlpkit: BLAS ")]
        assert len(lines) == 1, lines
        if info["library"]:
            assert info["library"] in lines[0]
        if info["kernel"]:
            assert f"kernel {info['kernel']}" in lines[0]
    assert not [x for x in invoke("perplexity", "-m", KENLM, text, "-v").stderr.splitlines() if "BLAS" in x]


def test_blas_info_names_the_kernel_openblas_was_told_to_use():
    """OPENBLAS_CORETYPE (set in a child process only) is the kernel blas_info reports."""
    import os
    import subprocess
    import sys

    from nlpkit.lm.threads import blas_info

    if blas_info()["kernel"] is None:
        pytest.skip("numpy's BLAS is not an OpenBLAS nlpkit can query")
    env = {**os.environ, "OPENBLAS_CORETYPE": "SandyBridge"}
    out = subprocess.run([sys.executable, "-c", "from nlpkit.lm.threads import blas_info; print(blas_info()['kernel'])"],
                         env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip().lower() == "sandybridge"
