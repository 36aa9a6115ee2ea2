"""Item fields say what they hold (issue 44 item 12): a generate `target` is a string or a list of strings, a number
refused with the error that says so; an `id` two items share is warned about naming both lines; an empty field name
is a usage error (exit 2), in `score --field` as in `generate`/`sample --field`."""

from __future__ import annotations

import json

import pytest

from conftest import FIXTURES

GPT2 = str(FIXTURES / "score" / "models" / "gpt2-bpe")


@pytest.mark.parametrize("target, holds", [
    (2, "a number 2"), (["2", 2], "a list with a number 2"), (2.5, "a number 2.5"), ([], "an empty list"),
    (True, "a boolean true"),
])
def test_a_target_that_is_not_strings_is_refused_as_the_error_says(cli, tmp_path, target, holds):
    path = tmp_path / "items.jsonl"
    path.write_text('{"context": "1+1=", "target": "2"}\n' + json.dumps({"context": "2+0=", "target": target}) + "\n")
    r = cli("score", "-m", GPT2, str(path), "--format", "jsonl")
    assert r.returncode == 1 and r.stdout == b""
    assert r.stderr.decode() == (f"nlpkit: error: {path}, line 2: field 'target' must be a string or a non-empty "
                                 f"list of strings (any of them right); it holds {holds}\n")


def test_read_items_warns_of_each_shared_id_naming_both_lines(tmp_path):
    from nlpkit.evaluation.items import read_items

    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    item = lambda i: json.dumps({"id": i, "context": "x", "continuation": " y"})  # noqa: E731
    a.write_text("\n".join([item("q1"), item(2), item("q3"), item("q1")]) + "\n")
    b.write_text(item("2") + "\n" + item("new") + "\n")
    said: list[str] = []
    _, items = read_items([str(a), str(b)], warn=said.append)
    assert len(items) == 6  # warned, still scored
    assert said == [f'{a}, line 4: id "q1" is also the id of {a}, line 1 (ids name items in the records: make '
                    "them unique)",
                    f'{b}, line 1: id "2" is also the id of {a}, line 2 (ids name items in the records: make '
                    "them unique)"]


def test_many_shared_ids_are_summed_up_after_the_first_few(tmp_path):
    from nlpkit.evaluation.items import read_items

    path = tmp_path / "items.jsonl"
    path.write_text(json.dumps({"id": 1, "context": "x", "continuation": " y"}) + "\n" * 1)
    path.write_text(path.read_text() * 9)
    said: list[str] = []
    read_items([str(path)], warn=said.append)
    assert len(said) == 6 and said[-1] == "3 more items repeat an earlier item's id"


def test_score_warns_of_a_shared_id_on_stderr_and_scores_both(cli, tmp_path):
    path = tmp_path / "items.jsonl"
    path.write_text('{"id": 7, "context": "a", "continuation": " b"}\n\n{"id": 7, "context": "c", "continuation": " d"}\n')
    r = cli("score", "-m", GPT2, str(path), "--format", "jsonl", "--no-signature")
    assert r.returncode == 0, r.stderr.decode()
    assert f"nlpkit: warning: {path}, line 3: id \"7\" is also the id of {path}, line 1" in r.stderr.decode()
    assert sum(json.loads(line)["record"] == "item" for line in r.stdout.decode().splitlines()) == 2
    quiet = cli("score", "-m", GPT2, str(path), "--format", "jsonl", "-q")
    assert quiet.returncode == 0 and quiet.stderr == b""


@pytest.mark.parametrize("args", [
    ["score", "-m", GPT2, "--field", ""],
    ["score", "-m", GPT2, "--field", "target="],
    ["score", "-m", GPT2, "--field", "=q"],
    ["generate", "-m", GPT2, "--prompts", "-", "--field", ""],
    ["sample", "-m", GPT2, "--prompts", "-", "--field", ""],
])
def test_an_empty_field_name_is_a_usage_error(cli, args):
    r = cli(*args, input='{"context": "a", "target": "b", "q": "x"}\n')
    assert r.returncode == 2, r.stderr.decode()
    err = r.stderr.decode()
    assert err.startswith("nlpkit: error: ") and len(err.splitlines()) == 1 and "not valid JSON" not in err
