"""`nlpkit bm25` and `nlpkit rrf` through the real entry point: outputs, errors, exit codes."""

from __future__ import annotations

import json

import pytest

CORPUS = "d1\tthe cat sat on the mat\nd2\ta dog sat on a log\nd3\tcats and dogs and birds\n"


@pytest.fixture
def index(tmp_path, cli):
    (tmp_path / "c.tsv").write_text(CORPUS)
    r = cli("bm25", "index", str(tmp_path / "c.tsv"), "-o", str(tmp_path / "idx"),
            "--corpus-format", "tsv", "--stopwords", "english", "--format", "jsonl")
    assert r.returncode == 0, r.stderr.decode()
    rec = json.loads(r.stdout)
    assert (rec["documents"], rec["signature"].split("|")[1]) == (3, "variant:lucene")
    return tmp_path / "idx"


def test_search_prints_trec_run_when_piped(index, cli):
    r = cli("bm25", "search", str(index), "--query", "dog sat", "--top", "2")
    assert r.returncode == 0, r.stderr.decode()
    lines = r.stdout.decode().splitlines()
    assert [ln.split()[:4] for ln in lines] == [["1", "Q0", "d2", "1"], ["1", "Q0", "d1", "2"]]
    assert lines[0].split()[5] == "nlpkit-bm25-lucene"


def test_search_jsonl_records_carry_the_signature(index, cli):
    r = cli("bm25", "search", str(index), "--query", "cat", "--format", "jsonl")
    rec = json.loads(r.stdout.decode().splitlines()[0])
    assert rec["docid"] == "d1" and rec["rank"] == 1
    assert rec["signature"].startswith("bm25|variant:lucene|k1:1.5|b:0.75|tok:word-lower|stop:english|")


def test_search_queries_file_tsv(index, tmp_path, cli):
    (tmp_path / "q.tsv").write_text("qa\tbirds\nqb\tmat log\n")
    r = cli("bm25", "search", str(index), "--queries", str(tmp_path / "q.tsv"), "--format", "tsv",
            "--no-signature")
    rows = [ln.split("\t") for ln in r.stdout.decode().splitlines()]
    assert rows[0] == ["qid", "rank", "docid", "score"]
    assert [(q, d) for q, _, d, _ in rows[1:]] == [("qa", "d3"), ("qb", "d2"), ("qb", "d1")]  # a tie: docid descending


def test_empty_query_and_stopword_query_give_empty_results(index, cli):
    for q in ("", "the and of a"):
        r = cli("bm25", "search", str(index), "--query", q)
        assert r.returncode == 0 and r.stdout == b"", r.stderr.decode()


def test_in_memory_corpus_search_equals_saved_index(index, tmp_path, cli):
    a = cli("bm25", "search", str(index), "--query", "dogs sat")
    b = cli("bm25", "search", "--corpus", str(tmp_path / "c.tsv"), "--corpus-format", "tsv",
            "--stopwords", "english", "--query", "dogs sat")
    assert a.stdout == b.stdout and a.stdout


def test_add_then_search_equals_fresh_index(index, tmp_path, cli):
    (tmp_path / "more.tsv").write_text("d4\tbirds sat on the cat\nd5\ta log cabin\n")
    r = cli("bm25", "add", str(index), str(tmp_path / "more.tsv"), "--corpus-format", "tsv")
    assert r.returncode == 0, r.stderr.decode()
    (tmp_path / "all.tsv").write_text(CORPUS + (tmp_path / "more.tsv").read_text())
    cli("bm25", "index", str(tmp_path / "all.tsv"), "-o", str(tmp_path / "fresh"), "--corpus-format",
        "tsv", "--stopwords", "english")
    q = ("--query", "cat sat log", "--query", "birds")
    a = cli("bm25", "search", str(index), *q)
    b = cli("bm25", "search", str(tmp_path / "fresh"), *q)
    assert a.stdout == b.stdout and len(a.stdout.splitlines()) == 6


def test_empty_corpus_is_an_error(tmp_path, cli):
    (tmp_path / "empty.txt").write_text("")
    r = cli("bm25", "index", str(tmp_path / "empty.txt"), "-o", str(tmp_path / "i"))
    assert r.returncode == 1
    assert b"nlpkit: error: empty corpus" in r.stderr


def test_duplicate_corpus_ids_are_an_error(tmp_path, cli):
    (tmp_path / "c.tsv").write_text("a\tone\nb\ttwo\na\tthree\n")
    r = cli("bm25", "index", str(tmp_path / "c.tsv"), "-o", str(tmp_path / "i"), "--corpus-format", "tsv")
    assert r.returncode == 1
    assert b"duplicate document id 'a' (record 3)" in r.stderr


def test_negative_k1_is_a_usage_error(tmp_path, cli):
    (tmp_path / "c.txt").write_text("x\n")
    r = cli("bm25", "index", str(tmp_path / "c.txt"), "-o", str(tmp_path / "i"), "--k1", "-1")
    assert r.returncode == 2
    assert b"--k1" in r.stderr


def test_corrupt_index_is_a_clear_error(index, cli):
    (index / "scores.npy").write_bytes(b"garbage")
    r = cli("bm25", "search", str(index), "--query", "cat")
    assert r.returncode == 1
    assert b"scores.npy: corrupt or truncated array" in r.stderr and b"Traceback" not in r.stderr


def test_search_with_qrels_prints_metrics(index, tmp_path, cli):
    (tmp_path / "qrels").write_text("1 0 d2 1\n1 0 d3 2\n")
    r = cli("bm25", "search", str(index), "--query", "dog", "--qrels", str(tmp_path / "qrels"),
            "--metrics", "recall@10,p@1", "--format", "jsonl")
    recs = [json.loads(x) for x in r.stdout.decode().splitlines()]
    assert [(x["metric"], x["value"], x["queries"]) for x in recs] == [("recall@10", 0.5, 1), ("p@1", 1.0, 1)]


def test_rrf_of_runs_and_plain_lists(tmp_path, cli):
    (tmp_path / "a.run").write_text("1 Q0 x 1 3.0 a\n1 Q0 y 2 2.0 a\n")
    (tmp_path / "b.txt").write_text("y\nz\n")
    r = cli("rrf", str(tmp_path / "a.run"), str(tmp_path / "b.txt"), "--rrf-k", "1", "--tag", "fused")
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout.decode().splitlines() == [
        f"1 Q0 y 1 {1 / 3 + 1 / 2!r} fused", "1 Q0 x 2 0.5 fused", f"1 Q0 z 3 {1 / 3!r} fused"]


def test_rrf_union_of_query_sets_warns(tmp_path, cli):
    (tmp_path / "a.run").write_text("1 Q0 x 1 3.0 a\n")
    (tmp_path / "b.run").write_text("2 Q0 y 1 3.0 b\n")
    r = cli("rrf", str(tmp_path / "a.run"), str(tmp_path / "b.run"))
    assert r.returncode == 0
    assert [ln.split()[0] for ln in r.stdout.decode().splitlines()] == ["1", "2"]
    assert b"nlpkit: warning:" in r.stderr and b"union of queries" in r.stderr


def test_rrf_five_field_line_names_file_and_line(tmp_path, cli):
    (tmp_path / "bad.run").write_text("1 Q0 x 1 3.0 a\n1 Q0 y 2 2.0\n")
    r = cli("rrf", str(tmp_path / "bad.run"))
    assert r.returncode == 1
    assert b"bad.run, line 2: expected 6 fields" in r.stderr


def test_rrf_duplicate_docid_is_an_error(tmp_path, cli):
    (tmp_path / "dup.run").write_text("1 Q0 x 1 3.0 a\n1 Q0 x 2 2.0 a\n")
    r = cli("rrf", str(tmp_path / "dup.run"))
    assert r.returncode == 1
    assert b"dup.run, line 2: document 'x' appears twice for query '1'" in r.stderr


def test_rrf_weights_count_mismatch_is_a_usage_error(tmp_path, cli):
    (tmp_path / "a.run").write_text("1 Q0 x 1 3.0 a\n")
    r = cli("rrf", str(tmp_path / "a.run"), "--weights", "1,2")
    assert r.returncode == 2


def test_cranfield_metrics_through_the_cli(shared_data, tmp_path, cli):
    d = shared_data / "cranfield"
    r = cli("bm25", "search", "--corpus", str(d / "cran.all.1400"), "--k1", "1.2",
            "--queries", str(d / "cran.qry"), "--query-ids", "position",
            "--qrels", str(d / "cranqrel"), "--qrels-format", "cranfield", "--format", "tsv",
            "--run", str(tmp_path / "lucene.run"))
    assert r.returncode == 0, r.stderr.decode()
    rows = {ln.split("\t")[0]: ln.split("\t") for ln in r.stdout.decode().splitlines()[1:]}
    assert float(rows["ndcg@10"][1]) == pytest.approx(0.34459153994568237, abs=1e-9)
    assert rows["ndcg@10"][2] == "225"
    lines = (tmp_path / "lucene.run").read_text().splitlines()
    assert lines[0] == "1 Q0 184 1 10.985965584171936 nlpkit-bm25-lucene"
    assert {ln.split()[0] for ln in lines} == {str(i) for i in range(1, 226)}


def test_corpus_from_stdin_jsonl_with_id_and_text_fields(cli):
    corpus = '{"pid": "p1", "body": "red apples"}\n{"pid": "p2", "body": "green apples and pears"}\n'
    r = cli("bm25", "search", "--corpus", "-", "--id-field", "pid", "--field", "body",
            "--query", "pears", input=corpus)
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout.decode().split()[:3] == ["1", "Q0", "p2"]


def test_rrf_depth_and_tie_break_options(tmp_path, cli):
    (tmp_path / "a.run").write_text("1 Q0 x 1 3.0 a\n1 Q0 y 2 2.0 a\n")
    (tmp_path / "b.run").write_text("1 Q0 y 1 3.0 b\n1 Q0 x 2 2.0 b\n")
    r = cli("rrf", str(tmp_path / "a.run"), str(tmp_path / "b.run"), "--depth", "1",
            "--tie-break", "docid-asc")
    assert [ln.split()[2] for ln in r.stdout.decode().splitlines()] == ["x", "y"]
    r = cli("rrf", str(tmp_path / "a.run"), str(tmp_path / "b.run"), "--depth", "1")
    assert [ln.split()[2] for ln in r.stdout.decode().splitlines()] == ["y", "x"]


def test_search_warns_when_a_query_matches_nothing(index, cli):
    r = cli("bm25", "search", str(index), "--query", "zebra")
    assert r.returncode == 0 and r.stdout == b""
    assert b"shares no term with the index" in r.stderr
    r = cli("bm25", "search", str(index), "--query", "zebra", "--query", "cat", "--quiet")
    assert r.returncode == 0 and r.stderr == b""


def test_add_names_the_file_and_record_of_an_id_already_indexed(index, tmp_path, cli):
    (tmp_path / "more.tsv").write_text("d9\tnew text\nd2\tagain\n")
    r = cli("bm25", "add", str(index), str(tmp_path / "more.tsv"), "--corpus-format", "tsv")
    assert r.returncode == 1
    assert b"more.tsv: document id 'd2' (record 2) is already in the index" in r.stderr


def test_rrf_all_zero_weights_are_a_usage_error(tmp_path, cli):
    (tmp_path / "a.run").write_text("1 Q0 x 1 3.0 a\n")
    r = cli("rrf", str(tmp_path / "a.run"), str(tmp_path / "a.run"), "--weights", "0,0")
    assert r.returncode == 2 and b"at least one weight must be above 0" in r.stderr


def _search_ids(cli, index, query: str) -> list[str]:
    r = cli("bm25", "search", str(index), "--query", query, "--format", "tsv", "--no-signature")
    assert r.returncode == 0, r.stderr.decode()
    return [ln.split("\t")[2] for ln in r.stdout.decode().splitlines()[1:]]


def test_index_of_several_files_numbers_documents_on_in_file_order(tmp_path, cli):
    """Lines of a.txt, then of b.txt.gz (compressed), then c.txt: ids 1-2, 3-4, 5, as one file would."""
    import gzip

    (tmp_path / "a.txt").write_text("the cat sat\n\n")
    with gzip.open(tmp_path / "b.txt.gz", "wt") as f:
        f.write("a dog ran\nbirds flew\n")
    (tmp_path / "c.txt").write_text("cats and dogs\n")
    (tmp_path / "all.txt").write_text("the cat sat\n\na dog ran\nbirds flew\ncats and dogs\n")
    r = cli("bm25", "index", *(str(tmp_path / n) for n in ("a.txt", "b.txt.gz", "c.txt")), "-o", str(tmp_path / "i"),
            "--format", "jsonl")
    assert r.returncode == 0, r.stderr.decode()
    assert json.loads(r.stdout)["documents"] == 5
    cli("bm25", "index", str(tmp_path / "all.txt"), "-o", str(tmp_path / "one"))
    assert sorted(_search_ids(cli, tmp_path / "i", "dog birds")) == ["3", "4"]
    files = {p: (tmp_path / "i" / p).read_bytes() for p in sorted(p.name for p in (tmp_path / "i").iterdir())}
    assert files == {p: (tmp_path / "one" / p).read_bytes() for p in files}


def test_index_of_several_files_refuses_an_id_repeated_across_files(tmp_path, cli):
    (tmp_path / "a.tsv").write_text("d1\tone\nd2\ttwo\n")
    (tmp_path / "b.tsv").write_text("d3\tthree\nd1\tfour\n")
    r = cli("bm25", "index", str(tmp_path / "a.tsv"), str(tmp_path / "b.tsv"), "-o", str(tmp_path / "i"))
    assert r.returncode == 1
    assert r.stderr.decode() == (f"nlpkit: error: {tmp_path / 'b.tsv'}: document id 'd1' (record 2) is also in "
                                 f"{tmp_path / 'a.tsv'}; ids must be unique\n")


def test_index_of_files_of_different_formats_needs_corpus_format(tmp_path, cli):
    (tmp_path / "a.tsv").write_text("d1\tone\n")
    (tmp_path / "b.txt").write_text("just words\n")
    r = cli("bm25", "index", str(tmp_path / "a.tsv"), str(tmp_path / "b.txt"), "-o", str(tmp_path / "i"))
    assert r.returncode == 1
    assert b"b.txt looks like lines but" in r.stderr and b"(give --corpus-format)" in r.stderr


def test_add_several_files_continues_the_numbering_in_file_order(tmp_path, cli):
    import gzip

    (tmp_path / "a.txt").write_text("the cat sat\n")
    cli("bm25", "index", str(tmp_path / "a.txt"), "-o", str(tmp_path / "i"))
    (tmp_path / "b.txt").write_text("a dog ran\n")
    with gzip.open(tmp_path / "c.txt.gz", "wt") as f:
        f.write("birds flew\ndogs barked\n")
    r = cli("bm25", "add", str(tmp_path / "i"), str(tmp_path / "b.txt"), str(tmp_path / "c.txt.gz"),
            "--format", "jsonl")
    assert r.returncode == 0, r.stderr.decode()
    assert json.loads(r.stdout)["documents"] == 4
    assert _search_ids(cli, tmp_path / "i", "birds") == ["3"]
    assert sorted(_search_ids(cli, tmp_path / "i", "dog dogs")) == ["2", "4"]
