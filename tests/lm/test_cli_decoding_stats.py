"""`generate` and `sample` say what they loaded and how fast they ran (issue 44 item 14): `-v/--verbose` prints the
model line perplexity and score print; `--stats` names $NLPKIT_WEIGHTS when the layout came from it, never prints
`inf tok/s`, and counts in the right number (`1 step`, `1 token`)."""

from __future__ import annotations

import re

import pytest

from conftest import FIXTURES

LLAMA = str(FIXTURES / "lm" / "llama-gqa")
GPT2 = str(FIXTURES / "score" / "models" / "gpt2-bpe")
GREEDY = ["--temperature", "0", "--seed", "1", "--no-signature"]


def model_lines(stderr: bytes) -> list[str]:
    return [line for line in stderr.decode().splitlines() if line.startswith("nlpkit: model ")]


@pytest.mark.parametrize("args", [
    ["generate", "hello"], ["generate", "--prompts", "-", "--format", "tsv"], ["sample", "hello", "-n", "2"],
    ["sample", "--prompts", "-", "-n", "2"],
])
@pytest.mark.parametrize("flag", ["-v", "--verbose"])
def test_verbose_says_the_model_line_on_stderr_and_leaves_stdout(cli, args, flag):
    base = [*args, "-m", LLAMA, "--max-new-tokens", "3", *GREEDY]
    quiet = cli(*base, input="hello\nthe\n")
    loud = cli(*base, flag, input="hello\nthe\n")
    assert quiet.returncode == loud.returncode == 0, loud.stderr.decode()
    assert loud.stdout == quiet.stdout and model_lines(quiet.stderr) == []
    (line,) = model_lines(loud.stderr)
    assert re.match(r"nlpkit: model llama-gqa: llama, [0-9.]+k? parameters, weights \w+ \(", line), line


def test_verbose_names_an_ngram_model_too(cli, tmp_path):
    arpa = tmp_path / "lm.arpa"
    (tmp_path / "t.txt").write_text("the cat sat on the mat\nthe dog sat\n")
    assert cli("ngram-train", str(tmp_path / "t.txt"), "-o", str(arpa), "--order", "2").returncode == 0
    r = cli("generate", "the", "-m", str(arpa), "--max-new-tokens", "2", "-v", *GREEDY)
    assert r.returncode == 0, r.stderr.decode()
    (line,) = model_lines(r.stderr)
    assert line.startswith("nlpkit: model lm.arpa: 2-gram")


@pytest.mark.parametrize("command", [["generate", "hello"], ["sample", "hello", "-n", "2"],
                                     ["generate", "--prompts", "-", "--format", "tsv"]])
def test_stats_names_nlpkit_weights_when_the_layout_came_from_it(cli, command):
    base = [*command, "-m", LLAMA, "--max-new-tokens", "2", "--stats", *GREEDY]
    env = cli(*base, env={"NLPKIT_WEIGHTS": "native"}, input="hello\n")
    assert env.returncode == 0, env.stderr.decode()
    assert "; weights: native (set by NLPKIT_WEIGHTS=native)" in env.stderr.decode()
    given = cli(*base, "--weights", "native", env={"NLPKIT_WEIGHTS": "float32"}, input="hello\n")
    assert "; weights: native (asked for)" in given.stderr.decode()   # the option wins, and is what asked
    verbose = cli(*base, "-v", env={"NLPKIT_WEIGHTS": "float32"}, input="hello\n")
    (line,) = model_lines(verbose.stderr)
    assert "weights float32 (set by NLPKIT_WEIGHTS=float32)" in line


def test_perplexity_verbose_names_nlpkit_weights_too(cli, tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("the cat sat on the mat. " * 10)
    r = cli("perplexity", str(text), "-m", LLAMA, "-v", env={"NLPKIT_WEIGHTS": "float32"})
    assert r.returncode == 0, r.stderr.decode()
    assert "weights float32 (set by NLPKIT_WEIGHTS=float32)" in model_lines(r.stderr)[0]


@pytest.mark.parametrize("args", [
    ["generate", "hello", "--max-new-tokens", "1"],
    ["generate", "hello", "--max-new-tokens", "0"],
    ["generate", "", "--max-new-tokens", "1"],
    ["sample", "hello", "-n", "1", "--max-new-tokens", "1"],
    ["sample", "hello", "-n", "1", "--max-new-tokens", "0"],
    ["generate", "--prompts", "-", "--max-new-tokens", "1", "--format", "tsv"],
    ["generate", "--prompts", "-", "--max-new-tokens", "0", "--format", "tsv"],
    ["sample", "--prompts", "-", "-n", "1", "--max-new-tokens", "1"],
])
def test_stats_never_prints_inf_and_counts_in_the_singular(cli, args):
    r = cli(*args, "-m", GPT2, "--stats", "--ignore-eos", *GREEDY, input="hello\n")
    assert r.returncode == 0, r.stderr.decode()
    (line,) = [x for x in r.stderr.decode().splitlines() if "prefill:" in x]
    assert "inf" not in line and "nan" not in line
    assert not re.search(r"\b1 (tokens|steps|sequences|rows)\b", line), line
    assert not re.search(r"\b([02-9]|\d\d+) (token|step|sequence)\b", line), line
    if "--max-new-tokens 1" in " ".join(args):
        assert "decode: 1 token " in line


def test_stats_line_formatting_by_itself():
    from nlpkit.cli.stats_line import batch_stats_line, stats_line
    from nlpkit.lm.generation.batch_generation import BatchStats
    from nlpkit.lm.generation import GenerationStats

    one = stats_line("tokens", GenerationStats(prompt_tokens=1, new_tokens=1, prefill_seconds=0.5,
                                               decode_seconds=0.0, finish="length"), 7, None)
    assert one == "prefill: 1 token in 0.500 s (2.0 tok/s); decode: 1 token in 0.000 s; finish: length; seed: 7"
    rows = stats_line("words", GenerationStats(prompt_tokens=3, new_tokens=2, batch=4, prefill_seconds=0.0,
                                               decode_seconds=2.0, finish="eos"), None, 0.25)
    assert rows == ("warm-up: 0.250 s; prefill: 3 words in 0.000 s; decode: 2 x 4 rows words in 2.000 s "
                    "(4.0 words/s); finish: eos")
    batch = BatchStats(prompt_tokens=5, new_tokens=1, prefill_seconds=0.1, decode_seconds=0.0, steps=1, most_live=1)
    assert batch_stats_line("tokens", batch, 3, None) == ("prefill: 5 tokens in 0.100 s; decode: 1 token in 0.000 s "
                                                          "(1 step, up to 1 sequence at once); seed: 3")
