"""A job that forgets its input fails: no FILE and empty stdin is `nlpkit: error: no input (...)`,
exit 1, for every command that reads input; empty qrels and runs are errors; an empty named file
follows the rule each command's --help states."""

from __future__ import annotations

import pytest

from conftest import FIXTURES

MODEL = str(FIXTURES / "lm" / "llama-gqa")
TOKENIZER = str(FIXTURES / "tokenizers" / "bl-llama3")


@pytest.fixture
def files(tmp_path) -> dict[str, str]:
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "words.txt").write_text("spelling\t10\n")
    (tmp_path / "c.tsv").write_text("d1\tthe cat sat\nd2\tthe dog ran\n")
    return {"empty": str(tmp_path / "empty.txt"), "dict": str(tmp_path / "words.txt"),
            "corpus": str(tmp_path / "c.tsv"), "out": str(tmp_path / "out"), "index": str(tmp_path / "idx")}


NO_INPUT = {
    "rrf": (["rrf"], "RUN"),
    "tokenize": (["tokenize", "-t", TOKENIZER], "FILE"),
    "edit-distance": (["edit-distance"], "A B"),
    "edit-distance --dict": (["edit-distance", "--dict", "{dict}"], "QUERY"),
    "pmi": (["pmi"], "FILE"),
    "tfidf": (["tfidf"], "FILE"),
    "bleu": (["bleu", "-r", "{dict}"], "HYP"),
    "perplexity": (["perplexity", "-m", MODEL], "FILE"),
    "ngram-train": (["ngram-train", "-o", "{out}"], "FILE"),
    "bpe-train": (["bpe-train", "-o", "{out}", "--vocab-size", "300"], "FILE"),
    "bm25 index": (["bm25", "index", "-o", "{out}"], "CORPUS"),
    "bm25 add": (["bm25", "add", "{index}"], "CORPUS"),
    "bm25 search": (["bm25", "search", "{index}"], "--query or --queries"),
    "generate": (["generate", "-m", MODEL], "PROMPT"),
    "sample": (["sample", "-m", MODEL], "PROMPT"),
}


@pytest.mark.parametrize("name", sorted(NO_INPUT))
def test_no_input_and_empty_stdin_is_an_error(cli, files, name):
    args, what = NO_INPUT[name]
    if "{index}" in args:
        assert cli("bm25", "index", files["corpus"], "--corpus-format", "tsv", "-o", files["index"]).returncode == 0
    r = cli(*[a.format(**files) for a in args], input=b"")
    assert r.returncode == 1, r.stderr.decode()
    assert r.stderr.decode().startswith(f"nlpkit: error: no input (no {what} given, and stdin is empty"), r.stderr
    assert r.stdout == b""


def test_prompt_given_as_empty_text_still_starts_from_bos(cli):
    r = cli("generate", "", "-m", MODEL, "--max-new-tokens", "2", "--seed", "1", input=b"")
    assert r.returncode == 0, r.stderr.decode()


def test_empty_qrels_are_an_error(cli, files):
    assert cli("bm25", "index", files["corpus"], "--corpus-format", "tsv", "-o", files["index"]).returncode == 0
    r = cli("bm25", "search", files["index"], "--query", "cat", "--qrels", files["empty"])
    assert r.returncode == 1
    assert r.stderr.decode() == f"nlpkit: error: {files['empty']}: no relevance judgements (the qrels file is empty)\n"


def test_empty_run_is_an_error(cli, files):
    r = cli("rrf", "-", files["empty"], input="d1\nd2\n")
    assert r.returncode == 1
    assert r.stderr.decode() == f"nlpkit: error: {files['empty']}: empty run (no result lines)\n"


@pytest.mark.parametrize("args,code,fragment", [
    (["tokenize", "{empty}", "-t", TOKENIZER], 0, None),                 # no rows
    (["edit-distance", "--pairs", "{empty}"], 0, None),                  # no rows
    (["edit-distance", "--dict", "{empty}", "x"], 1, "the dictionary has no entries"),
    (["pmi", "{empty}"], 1, "empty corpus"),
    (["tfidf", "--docs", "lines", "{empty}"], 1, "empty corpus"),
    (["perplexity", "{empty}", "-m", MODEL], 1, "empty text"),
    (["ngram-train", "{empty}", "-o", "{out}"], 1, "empty corpus"),
    (["bm25", "index", "{empty}", "-o", "{out}"], 1, "empty corpus"),
])
def test_an_empty_named_file_follows_the_rule_the_help_states(cli, files, args, code, fragment):
    r = cli(*[a.format(**files) for a in args], "--format", "tsv", "--no-signature")
    assert r.returncode == code, r.stderr.decode()
    if fragment:
        assert fragment in r.stderr.decode()
    else:
        assert len(r.stdout.decode().splitlines()) == 1    # the header only
