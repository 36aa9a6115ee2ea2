"""`generate --prompts` decodes its prompts together (`--batch-size`): the same records, in input order, as one
prompt at a time."""

from __future__ import annotations

import json

import pytest

from conftest import FIXTURES

MODEL = str(FIXTURES / "score" / "models" / "gpt2-bpe")
PROMPTS = "It is a truth\nThe capital of France is\n\nOnce upon a\na single man\nHello\nthe\n"


def records(cli, *args):
    r = cli("generate", "-m", MODEL, "--prompts", "-", "--max-new-tokens", "9", "--format", "jsonl",
            "--no-signature", *args, input=PROMPTS)
    assert r.returncode == 0, r.stderr.decode()
    return [json.loads(line) for line in r.stdout.decode().splitlines()]


@pytest.mark.parametrize("sampling", [["--temperature", "0"], ["--temperature", "1", "--top-k", "20", "--seed", "5"]])
def test_batched_records_equal_one_prompt_at_a_time(cli, sampling):
    one = records(cli, *sampling, "--no-kv-cache")  # the one-prompt-at-a-time path
    for size in ("1", "4"):
        assert records(cli, *sampling, "--batch-size", size) == one
    assert [r["index"] for r in one] == list(range(7))


def test_stop_strings_end_each_prompt_on_its_own(cli):
    got = records(cli, "--temperature", "0", "--stop", "o", "--batch-size", "3")
    assert got == records(cli, "--temperature", "0", "--stop", "o", "--no-kv-cache")
    assert all("o" not in r["text"] for r in got)


@pytest.mark.parametrize("args, message", [
    (["Hello", "--batch-size", "2"], "--batch-size applies to --prompts FILE"),
    (["--prompts", "-", "--batch-size", "2", "--sliding"], "not with --no-kv-cache or --sliding"),
    (["--prompts", "-", "--batch-size", "0"], "--batch-size"),
])
def test_batch_size_usage_errors(cli, args, message):
    r = cli("generate", "-m", MODEL, *args, input="a\n")
    assert r.returncode == 2 and message in r.stderr.decode()


def test_jsonl_prompts_with_field_carry_their_id(cli):
    """--field NAME: a JSONL --prompts file (blank lines skipped), each record with the line's id (none: empty)."""
    text = '{"id": "x", "p": "It is a truth"}\n\n{"p": "Hello"}\n'
    r = cli("generate", "-m", MODEL, "--prompts", "-", "--field", "p", "--max-new-tokens", "9", "--format", "jsonl",
            "--no-signature", "--temperature", "0", input=text)
    assert r.returncode == 0, r.stderr.decode()
    got = [json.loads(line) for line in r.stdout.decode().splitlines()]
    assert [(g["index"], g["id"], g["prompt"]) for g in got] == [(0, "x", "It is a truth"), (1, None, "Hello")]
    plain = records(cli, "--temperature", "0")
    assert [g["text"] for g in got] == [plain[0]["text"], plain[5]["text"]]
