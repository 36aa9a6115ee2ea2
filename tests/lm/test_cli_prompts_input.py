"""`generate --prompts` and `sample --prompts` read their FILE alike: no prompt at all is an error (exit 1) before
the model loads, `--field ''` is a usage error, a too-long prompt is named by its file and line, and with
--truncate-prompt the cut is named by its line and said in the records (`truncated`)."""

from __future__ import annotations

import json

import pytest

from conftest import FIXTURES

MODEL = str(FIXTURES / "score" / "models" / "gpt2-bpe")   # a 64-token context
LONG = " ".join(["word"] * 80)                               # more than 64 tokens
COMMON = ["-m", MODEL, "--max-new-tokens", "3", "--temperature", "0", "--no-signature"]


@pytest.mark.parametrize("command", ["generate", "sample"])
@pytest.mark.parametrize("how", ["stdin", "empty file", "blank jsonl"])
def test_prompts_without_a_prompt_exit_1_in_generate_as_in_sample(cli, tmp_path, command, how):
    path = tmp_path / "p.txt"
    args, stdin = ["--prompts", "-"], b""
    if how == "empty file":
        path.write_bytes(b"")
        args = ["--prompts", str(path)]
    elif how == "blank jsonl":
        path.write_bytes(b"\n  \n\n")
        args = ["--prompts", str(path), "--field", "q"]
    r = cli(command, *COMMON, *args, input=stdin)
    assert r.returncode == 1, r.stderr.decode()
    name = "<stdin>" if how == "stdin" else str(path)
    tail = " (blank lines only)" if how == "blank jsonl" else ""
    assert r.stderr.decode() == f"nlpkit: error: {name}: no prompts{tail}\n"
    assert r.stdout == b""


@pytest.mark.parametrize("command", ["generate", "sample"])
@pytest.mark.parametrize("field", ["", "  "])
def test_an_empty_field_name_is_a_usage_error(cli, command, field):
    r = cli(command, *COMMON, "--prompts", "-", "--field", field, input='{"q": "a"}\n')
    assert r.returncode == 2, r.stderr.decode()
    assert "--field needs the NAME" in r.stderr.decode()


@pytest.mark.parametrize("command", ["generate", "sample"])
@pytest.mark.parametrize("extra", [[], ["--no-kv-cache"]])
def test_a_too_long_prompt_is_named_by_its_file_and_line(cli, tmp_path, command, extra):
    path = tmp_path / "prompts.txt"
    path.write_text(f"Hello\n{LONG}\nthe\n")
    r = cli(command, *COMMON, *extra, "--prompts", str(path))
    assert r.returncode == 1
    err = r.stderr.decode()
    assert err.startswith(f"nlpkit: error: {path}, line 2: the prompt is "), err
    assert "--truncate-prompt" in err and len(err.splitlines()) == 1


def test_a_too_long_jsonl_prompt_is_named_by_its_line(cli):
    text = '{"q": "Hello"}\n\n' + json.dumps({"q": LONG}) + "\n"
    r = cli("generate", *COMMON, "--prompts", "-", "--field", "q", input=text)
    assert r.returncode == 1 and r.stderr.decode().startswith("nlpkit: error: <stdin>, line 3: the prompt is ")


@pytest.mark.parametrize("extra", [[], ["--no-kv-cache"]])
def test_truncate_prompt_names_the_line_and_the_generate_record_says_it_was_cut(cli, tmp_path, extra):
    path = tmp_path / "prompts.txt"
    path.write_text(f"Hello\n{LONG}\n")
    r = cli("generate", *COMMON, *extra, "--prompts", str(path), "--truncate-prompt", "--format", "jsonl")
    assert r.returncode == 0, r.stderr.decode()
    got = [json.loads(line) for line in r.stdout.decode().splitlines()]
    assert [g["truncated"] for g in got] == [False, True]
    warnings = r.stderr.decode().splitlines()
    assert len(warnings) == 1 and warnings[0].startswith(f"nlpkit: warning: {path}, line 2: --truncate-prompt: "
                                                         "the prompt was cut from ")
    tsv = cli("generate", *COMMON, *extra, "--prompts", str(path), "--truncate-prompt", "--format", "tsv", "-q")
    rows = [line.split("\t") for line in tsv.stdout.decode().splitlines()]
    assert rows[0][-1] == "truncated" and [r[-1] for r in rows[1:]] == ["false", "true"]


def test_truncate_prompt_in_sample_records(cli):
    r = cli("sample", *COMMON, "-n", "2", "--prompts", "-", "--truncate-prompt", "--format", "jsonl",
            input=f"Hello\n{LONG}\n")
    assert r.returncode == 0, r.stderr.decode()
    got = [json.loads(line) for line in r.stdout.decode().splitlines()]
    assert [(g["prompt_index"], g["truncated"]) for g in got] == [(0, False), (0, False), (1, True), (1, True)]
    assert "<stdin>, line 2: --truncate-prompt" in r.stderr.decode()
    one = cli("sample", LONG, *COMMON, "-n", "1", "--truncate-prompt", "--format", "jsonl", "-q")
    assert json.loads(one.stdout.decode())["truncated"] is True


def test_records_have_no_truncated_column_without_the_option(cli):
    r = cli("generate", *COMMON, "--prompts", "-", "--format", "tsv", input="Hello\n")
    assert r.stdout.decode().splitlines()[0].split("\t") == ["index", "prompt", "text", "tokens", "finish"]
