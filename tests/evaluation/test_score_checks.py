"""`nlpkit score` checks before it scores (issue 37 item 8): every item is read and checked with every model before
any record is printed, every model path before any model loads, one task per run (a mixed file names the line); and
each item record names its input `file` and its own `id` beside the running `index`."""

from __future__ import annotations

import json

import pytest

from conftest import FIXTURES

FIX = FIXTURES / "score"
GPT2 = str(FIX / "models" / "gpt2-bpe")
LLAMA = str(FIX / "models" / "llama-spm")
GOOD = '{"context": "a", "continuation": " b"}\n'


def records(text: str, kind: str) -> list[dict]:
    return [r for r in map(json.loads, text.splitlines()) if r["record"] == kind]


# ------------------------------------------------------------------------------ every item before any record

def test_a_bad_line_after_good_ones_prints_no_record_before_the_error(cli, tmp_path):
    """A bad line 900 used to print 899 records first: now nothing reaches stdout."""
    path = tmp_path / "items.jsonl"
    path.write_text(GOOD * 899 + "{not json\n", encoding="utf-8")
    r = cli("score", "-m", GPT2, str(path), "--format", "jsonl")
    assert r.returncode == 1 and f"{path}, line 900: not valid JSON" in r.stderr.decode()
    assert r.stdout == b""


def test_an_item_the_model_cannot_score_stops_the_run_before_any_record(cli, tmp_path):
    """Too long for the window: found when the items are checked with the model, before any is scored."""
    path = tmp_path / "items.jsonl"
    path.write_text(GOOD * 2 + '{"context": "a", "continuation": " b c d e f"}\n' + GOOD, encoding="utf-8")
    r = cli("score", "-m", GPT2, str(path), "--format", "jsonl", "--context", "2")
    err = r.stderr.decode()
    assert r.returncode == 1 and f"{path}, line 3: the continuation is" in err
    assert "longer than the window of 2 tokens" in err and r.stdout == b""


def test_an_item_only_the_second_model_cannot_score_stops_the_run_before_any_record(cli, tmp_path):
    """Every model checks every item: an n-gram model finds no words in a continuation of spaces."""
    arpa = tmp_path / "tiny.arpa"
    arpa.write_text("\\data\\\nngram 1=3\n\n\\1-grams:\n-1.0\t<s>\t0\n-0.5\t</s>\n-0.3\t<unk>\n\n\\end\\\n",
                    encoding="utf-8")
    path = tmp_path / "items.jsonl"
    path.write_text(GOOD + '{"context": "a", "continuation": "  "}\n', encoding="utf-8")
    r = cli("score", "-m", GPT2, "-m", str(arpa), str(path), "--format", "jsonl")
    assert r.returncode == 1 and f"{path}, line 2: the continuation has no words" in r.stderr.decode()
    assert r.stdout == b""


def test_a_reference_with_another_tokenizer_is_refused_before_any_record(cli):
    r = cli("score", "-m", GPT2, "--reference", LLAMA, str(FIX / "preference.jsonl"), "--format", "jsonl")
    assert r.returncode == 1 and "preference.jsonl, line 1: the reference model tokenizes this item differently" \
        in r.stderr.decode()
    assert r.stdout == b""


def test_evaluation_check_names_the_item_and_scores_nothing():
    """The library path: `Evaluation.check` raises for the item at fault; no model has scored anything."""
    from nlpkit.errors import NlpkitError
    from nlpkit.evaluation.evaluate import Evaluation
    from nlpkit.evaluation.items import Item
    from nlpkit.evaluation.models import ModelSpec, load_scorer

    scorer = load_scorer(ModelSpec(GPT2, window=2))
    items = [Item(0, "x.jsonl, line 1", "a", [" b"]), Item(1, "x.jsonl, line 2", "a", [" b c d e f"])]
    with pytest.raises(NlpkitError, match=r"^x.jsonl, line 2: the continuation is \d+ tokens, longer than the window"):
        Evaluation({"m": scorer}).check("loglikelihood", items)
    assert scorer.tokens == 0


# ------------------------------------------------------------------------------ model paths before any model

def test_a_missing_second_model_is_reported_before_the_first_loads(tmp_path, monkeypatch):
    from click.testing import CliRunner

    import nlpkit.evaluation.models as models
    from nlpkit.cli.main import cli as group

    loaded = []
    real = models.load_scorer
    monkeypatch.setattr(models, "load_scorer", lambda spec, warn=None: loaded.append(spec.path) or real(spec, warn))
    path = tmp_path / "items.jsonl"
    path.write_text(GOOD, encoding="utf-8")
    missing = str(tmp_path / "nowhere")
    r = CliRunner().invoke(group, ["score", "-m", GPT2, "-m", missing, str(path)])
    assert f"model path {missing!r} does not exist" in str(r.exception)  # main() prints it as nlpkit: error
    assert loaded == []


@pytest.mark.parametrize("make, message", [
    (lambda d: d / "nowhere", "does not exist"),
    (lambda d: (d / "empty").mkdir() or d / "empty", "config.json"),
    (lambda d: (d / "model.bin").write_bytes(b"\x80\x04") and d / "model.bin", "pickled checkpoints are refused"),
    (lambda d: (d / "notes.txt").write_text("hello") and d / "notes.txt", "not a GGUF file or a model directory"),
    (lambda d: (d / "lm.arpa").write_text("hello") and d / "lm.arpa", "not an n-gram model"),
])
def test_check_model_path_refuses_what_no_loader_reads_without_loading(tmp_path, make, message):
    from nlpkit.errors import NlpkitError
    from nlpkit.evaluation.models import check_model_path

    with pytest.raises(NlpkitError, match=message):
        check_model_path(str(make(tmp_path)))


def test_check_model_path_accepts_each_kind_nlpkit_loads(tmp_path):
    from nlpkit.evaluation.models import check_model_path

    arpa = tmp_path / "tiny.arpa"
    arpa.write_text("\\data\\\nngram 1=1\n\n\\1-grams:\n-1.0\t<s>\n\n\\end\\\n", encoding="utf-8")
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF" + b"\0" * 20)
    for path in (GPT2, str(arpa), str(gguf), str(FIX / "models" / "gpt2-bpe" / "config.json"), None):
        check_model_path(path)


# ------------------------------------------------------------------------------ one task per run

def test_a_preference_line_among_loglikelihood_items_names_its_line_and_the_deciding_one(cli, tmp_path):
    path = tmp_path / "items.jsonl"
    path.write_text(GOOD + '{"prompt": "a", "chosen": " b", "rejected": " c"}\n', encoding="utf-8")
    r = cli("score", "-m", GPT2, str(path))
    assert r.returncode == 1
    assert f"{path}, line 2: a preference item among loglikelihood items (the task of {path}, line 1)" \
        in r.stderr.decode()
    assert r.stdout == b""


def test_files_of_two_tasks_name_the_first_line_of_the_other_file(cli, tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text(GOOD, encoding="utf-8")
    b.write_text('\n{"context": "a", "choices": ["x", "y"], "gold": 0}\n', encoding="utf-8")
    r = cli("score", "-m", GPT2, str(a), str(b))
    assert r.returncode == 1
    assert f"{b}, line 2: a multiple-choice item among loglikelihood items (the task of {a}, line 1)" \
        in r.stderr.decode()


def test_a_record_missing_a_field_of_the_files_task_still_names_the_field(cli, tmp_path):
    """A record calling for no task is checked for the run's task's fields (not called another task)."""
    path = tmp_path / "items.jsonl"
    path.write_text(GOOD + '{"context": "a"}\n', encoding="utf-8")
    r = cli("score", "-m", GPT2, str(path))
    assert r.returncode == 1 and f"{path}, line 2: no field 'continuation'" in r.stderr.decode()


# ------------------------------------------------------------------------------ file and id in the records

def test_item_records_carry_file_index_and_the_items_own_id(cli, tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text('{"id": "q-7", "context": "a", "continuation": " b"}\n' + GOOD, encoding="utf-8")
    b.write_text('{"id": 12, "context": "a", "continuation": " b"}\n', encoding="utf-8")
    r = cli("score", "-m", GPT2, str(a), str(b), "--format", "jsonl")
    assert r.returncode == 0, r.stderr.decode()
    keys = [(rec["file"], rec["index"], rec.get("id")) for rec in records(r.stdout.decode(), "item")]
    assert keys == [(str(a), 0, "q-7"), (str(a), 1, None), (str(b), 2, 12)]
    assert "id" not in records(r.stdout.decode(), "item")[1]


def test_field_id_maps_the_id_and_tsv_shows_file_and_id_columns(cli):
    items = '{"qid": "first", "context": "a", "continuation": " b"}\n{"qid": "second", "context": "a", ' \
            '"continuation": " c"}\n'
    r = cli("score", "-m", GPT2, "--field", "id=qid", "--format", "tsv", "--no-signature", input=items)
    assert r.returncode == 0, r.stderr.decode()
    lines = r.stdout.decode().split("\n")
    header = lines[0].split("\t")
    assert header[:4] == ["model", "file", "index", "id"]
    assert [line.split("\t")[1:4] for line in lines[1:3]] == [["<stdin>", "0", "first"], ["<stdin>", "1", "second"]]


def test_tsv_has_no_id_column_when_no_item_has_an_id(cli):
    r = cli("score", "-m", GPT2, "--format", "tsv", "--no-signature", input=GOOD)
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout.decode().split("\n")[0].split("\t")[:4] == ["model", "file", "index", "logprob"]


@pytest.mark.parametrize("line, message", [
    ('{"id": [1], "context": "a", "continuation": " b"}', "line 1: field 'id' is a list, expected a string or an "
                                                          "integer"),
    ('{"id": true, "context": "a", "continuation": " b"}', "line 1: field 'id' is a boolean"),
])
def test_an_id_that_is_not_a_string_or_integer_names_the_line(cli, line, message):
    r = cli("score", "-m", GPT2, input=line + "\n")
    assert r.returncode == 1 and message in r.stderr.decode()


def test_a_mapped_id_field_missing_from_a_record_names_the_line(cli):
    items = '{"qid": "first", "context": "a", "continuation": " b"}\n' + GOOD
    r = cli("score", "-m", GPT2, "--field", "id=qid", input=items)
    assert r.returncode == 1 and "<stdin>, line 2: no field 'qid'" in r.stderr.decode()
