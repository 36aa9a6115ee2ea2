"""The one document reader (nlpkit.stats.documents): tfidf and bm25 see the same documents."""

from __future__ import annotations

import json

from nlpkit.stats.documents import DocNames, iter_documents, iter_records, read_records, split_paragraphs

PARAGRAPH_TEXT = "  \n\nFirst para\nline two\n\n \t\nSecond\n\n\nthird one\n"
SMART_TEXT = ".I 1\n.T\nBoundary layer\n.A\nSmith\n.W\nHeat transfer in a\nboundary layer.\n.I 2\n.T\nWings\n.W\nLift.\n"


def _docs_from_batches(batches) -> list[str]:
    docs: list[str] = []
    for n, text in batches:
        parts = text.split("\x00")[:-1]
        assert len(parts) == n
        docs += parts
    return docs


def test_paragraph_rule_is_the_same_for_tfidf_batches_and_bm25_records(tmp_path):
    p = tmp_path / "p.txt"
    p.write_text(PARAGRAPH_TEXT)
    expected = ["First para\nline two", "Second", "third one"]
    assert split_paragraphs(PARAGRAPH_TEXT) == expected
    assert [t for _, t in iter_records(str(p), "paragraphs")] == expected
    for block in (None, 8):     # tiny blocks force paragraphs across block boundaries
        assert _docs_from_batches(iter_documents([str(p)], "paragraphs", batch_chars=block)) == expected


def test_tfidf_reads_tsv_and_smart_like_bm25(tmp_path):
    tsv = tmp_path / "c.tsv"
    tsv.write_text("d1\tthe cat\n\nd7\tthe dog barks\n")
    names = DocNames()
    assert _docs_from_batches(iter_documents([str(tsv)], "tsv", names)) == ["the cat", "the dog barks"]
    assert list(names) == ["d1", "d7"]
    assert read_records(str(tsv), "tsv") == [("d1", "the cat"), ("d7", "the dog barks")]

    smart = tmp_path / "c.all"
    smart.write_text(SMART_TEXT)
    names = DocNames()
    docs = _docs_from_batches(iter_documents([str(smart)], "smart", names))
    assert docs == ["Boundary layer\nHeat transfer in a\nboundary layer.", "Wings\nLift."]
    assert list(names) == ["1", "2"]
    assert [t for _, t in read_records(str(smart), "auto")] == docs


def test_auto_format_peeks_without_losing_stdin_lines(tmp_path):
    p = tmp_path / "q.jsonl"
    p.write_text("\n" + json.dumps({"id": "a", "text": "x"}) + "\n" + json.dumps({"id": "b", "text": "y"}) + "\n")
    assert read_records(str(p), "auto") == [("a", "x"), ("b", "y")]


def test_cli_tfidf_docs_tsv_names_documents_by_id(cli, tmp_path):
    tsv = tmp_path / "c.tsv"
    tsv.write_text("alpha\tcats purr loudly\nbeta\tdogs bark loudly\n")
    r = cli("tfidf", "--docs", "tsv", "--top", "1", "--format", "jsonl", "--no-signature", str(tsv))
    assert r.returncode == 0, r.stderr
    recs = [json.loads(line) for line in r.stdout.decode().splitlines()]
    assert [rec["doc"] for rec in recs] == ["alpha", "beta"]


def test_cli_tfidf_field_needs_jsonl_or_smart(cli, tmp_path):
    p = tmp_path / "c.txt"
    p.write_text("a b\n")
    r = cli("tfidf", "--docs", "lines", "--field", "text", str(p))
    assert r.returncode == 2
    assert b"--field needs --docs jsonl or smart" in r.stderr
