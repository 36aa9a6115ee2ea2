"""`nlpkit pmi` and `nlpkit tfidf` through the real entry point (subprocess)."""

import json

import pytest

TEXTBOOK = "The cat sat on the mat. The dog sat on the mat.\n"


def lines(r):
    return r.stdout.decode().splitlines()


# ------------------------------------------------------------------------------ pmi

def test_pmi_matrix_prints_textbook_counts(cli):
    r = cli("pmi", "--matrix", "--format", "tsv", "--no-signature", input=TEXTBOOK)
    assert r.returncode == 0, r.stderr.decode()
    assert lines(r) == ["word\t->the\t->mat\t->on\t->sat\t->cat\t->dog",
                        "the\t0\t2\t0\t0\t1\t1",
                        "mat\t0\t0\t0\t0\t0\t0",
                        "on\t2\t0\t0\t0\t0\t0",
                        "sat\t0\t0\t2\t0\t0\t0",
                        "cat\t0\t0\t0\t1\t0\t0",
                        "dog\t0\t0\t0\t1\t0\t0"]


def test_pmi_matrix_columns_of_words_named_word_or_signature_stay_apart(cli):
    """Vocabulary columns are '->WORD': a word 'word' or 'signature' never repeats an own column's name."""
    r = cli("pmi", "--matrix", "--format", "tsv", input="word signature word signature count\n")
    assert r.returncode == 0, r.stderr.decode()
    header, *rows = [ln.split("\t") for ln in lines(r)]
    assert header == ["word", "->signature", "->word", "->count", "signature"]
    assert len(set(header)) == len(header)
    assert [row[:4] for row in rows] == [["signature", "0", "1", "1"], ["word", "2", "0", "0"], ["count", "0", "0", "0"]]


def test_pmi_ranked_tsv_with_signature(cli, tmp_path):
    p = tmp_path / "t.txt"
    p.write_text(TEXTBOOK)
    r = cli("pmi", str(p), "--format", "tsv", "--top", "3")
    rows = [x.split("\t") for x in lines(r)]
    assert rows[0] == ["word1", "word2", "count", "freq1", "freq2", "pmi", "signature"]
    assert [x[:5] for x in rows[1:]] == [["cat", "sat", "1", "1", "2"], ["dog", "sat", "1", "1", "2"],
                                         ["sat", "on", "2", "2", "2"]]
    assert float(rows[1][5]) == pytest.approx(2.584962500721156, abs=1e-15)     # log2(12/4)... = log2(6)
    assert rows[1][6].startswith("pmi|measure:pmi|ngram:2|window:2|min-count:1|log:2|tok:word-lower")


def test_pmi_pair_reports_counts_and_missing_pairs(cli):
    r = cli("pmi", "--pair", "The", "mat", "--pair", "mat", "the", "--measure", "npmi",
            "--format", "jsonl", input=TEXTBOOK)
    recs = [json.loads(x) for x in lines(r)]
    assert (recs[0]["word1"], recs[0]["count"], recs[0]["freq1"], recs[0]["freq2"]) == ("the", 2, 4, 2)
    assert recs[0]["npmi"] == pytest.approx(0.6131471927654584, abs=1e-12)
    assert recs[1]["count"] == 0 and recs[1]["npmi"] is None
    assert "signature" in recs[0]


def test_pmi_trigrams_and_cross_lines(cli):
    r = cli("pmi", "--ngram", "3", "--cross-lines", "--top", "0", "--format", "tsv", "--no-signature",
            input="new york city\nnew york city\n")
    rows = [x.split("\t") for x in lines(r)]
    assert rows[0] == ["word1", "word2", "word3", "count", "freq1", "freq2", "freq3", "pmi"]
    assert {tuple(x[:3]) for x in rows[1:]} == {("new", "york", "city"), ("york", "city", "new"),
                                                 ("city", "new", "york")}


@pytest.mark.parametrize("args,message", [
    (["--window", "1"], "--window must be at least 2"),
    (["--min-count", "0"], "--min-count must be at least 1"),
    (["--ngram", "3", "--window", "2"], "--window must be at least 3"),
])
def test_pmi_bad_options_are_usage_errors(cli, args, message):
    r = cli("pmi", *args, input=TEXTBOOK)
    assert r.returncode == 2
    assert message in r.stderr.decode() and b"Traceback" not in r.stderr


def test_pmi_empty_and_all_stopword_corpora_exit_1(cli):
    r = cli("pmi", input="")
    assert r.returncode == 1 and "nlpkit: error: no input (no FILE given, and stdin is empty)" in r.stderr.decode()
    r = cli("pmi", "-", input=". , ;\n")
    assert r.returncode == 1 and "empty corpus: no words found in <stdin>" in r.stderr.decode()
    r = cli("pmi", "--stopwords", "english", input="the of and. it is\n")
    assert r.returncode == 1 and "every word is a stopword" in r.stderr.decode()


def test_pmi_min_count_above_all_counts_is_empty_result(cli):
    r = cli("pmi", "--min-count", "50", "--format", "tsv", "--no-signature", input=TEXTBOOK)
    assert r.returncode == 0
    assert lines(r) == ["word1\tword2\tcount\tfreq1\tfreq2\tpmi"]
    assert "no pairs occur at least 50 times" in r.stderr.decode()


# ------------------------------------------------------------------------------ tfidf

DOCS = "the cat sat on the mat\nthe dog sat\n\nbirds fly high\n"


def test_tfidf_top_terms_per_line(cli):
    r = cli("tfidf", "--docs", "lines", "--top", "1", "--format", "tsv", "--no-signature", input=DOCS)
    assert r.returncode == 0, r.stderr.decode()
    rows = [x.split("\t") for x in lines(r)]
    assert rows[0] == ["doc", "rank", "term", "weight"]
    assert [x[:3] for x in rows[1:]] == [["1", "1", "the"], ["2", "1", "dog"], ["4", "1", "birds"]]


def test_tfidf_worked_example_relative_tf(cli, tmp_path):
    doc = tmp_path / "doc.txt"
    doc.write_text(" ".join(["cat"] * 3 + [f"w{i:02d}" for i in range(97)]))
    r = cli("tfidf", str(doc), "--tf", "relative", "--idf", "none", "--norm", "none", "--top", "1",
            "--format", "jsonl")
    rec = json.loads(lines(r)[0])
    assert (rec["term"], rec["weight"]) == ("cat", 0.03)
    assert rec["signature"].startswith("tfidf|tf:relative|idf:none|norm:none|log:e")


def test_tfidf_query_ranks_by_cosine(cli):
    r = cli("tfidf", "--docs", "lines", "--query", "Cat on a MAT", "--format", "tsv", "--no-signature", input=DOCS)
    assert [x.split("\t")[:2] for x in lines(r)] == [["rank", "doc"], ["1", "1"]]


def test_tfidf_matrix_and_vocab_out(cli, tmp_path):
    vocab = tmp_path / "vocab.txt"
    r = cli("tfidf", "--docs", "lines", "--matrix", "--vocab-out", str(vocab), input=DOCS)
    out = lines(r)
    assert out[0] == "%%MatrixMarket matrix coordinate real general"
    assert "4 9 11" in out
    assert vocab.read_text().split() == ["birds", "cat", "dog", "fly", "high", "mat", "on", "sat", "the"]


def test_tfidf_jsonl_field_and_missing_field(cli):
    good = '{"id": "x1", "body": "alpha beta"}\n{"id": "x2", "body": "beta gamma"}\n'
    r = cli("tfidf", "--field", "body", "--id-field", "id", "--top", "1", "--format", "jsonl", input=good)
    assert [json.loads(x)["doc"] for x in lines(r)] == ["x1", "x2"]
    r = cli("tfidf", "--field", "text", input='{"text": "ok"}\n{"body": "no text"}\n')
    assert r.returncode == 1
    assert "<stdin>, line 2: no field 'text'" in r.stderr.decode()


@pytest.mark.parametrize("args,code,message", [
    (["--smart", "xtc"], 2, "unknown tf letter 'x'"),
    (["--smart", "ntc", "--norm", "l1"], 2, "do not combine"),
    (["--ngram-range", "1,4"], 2, "--ngram-range must satisfy"),
])
def test_tfidf_bad_options(cli, args, code, message):
    r = cli("tfidf", "--docs", "lines", *args, input=DOCS)
    assert r.returncode == code
    assert message in r.stderr.decode() and b"Traceback" not in r.stderr


def test_tfidf_empty_and_all_stopword_corpora_exit_1(cli):
    r = cli("tfidf", "--docs", "lines", input="")
    assert r.returncode == 1 and "nlpkit: error: no input" in r.stderr.decode()
    r = cli("tfidf", "--docs", "lines", "-", input="")
    assert r.returncode == 1 and "empty corpus" in r.stderr.decode()
    r = cli("tfidf", "--docs", "lines", "--stopwords", "english", input="the of\nand it\n")
    assert r.returncode == 1 and "no words other than stopwords" in r.stderr.decode()


def test_tfidf_matrix_refuses_a_format(cli, tmp_path):
    (tmp_path / "d.txt").write_text("cats sat\ndogs ran\n")
    r = cli("tfidf", "--docs", "lines", "--matrix", "--format", "jsonl", str(tmp_path / "d.txt"))
    assert r.returncode == 2 and b"--matrix writes MatrixMarket" in r.stderr


def test_tfidf_min_df_above_the_document_count_says_so(cli, tmp_path):
    (tmp_path / "d.txt").write_text("cats sat\ndogs ran\n")
    r = cli("tfidf", "--docs", "lines", "--min-df", "10", str(tmp_path / "d.txt"))
    assert r.returncode == 2 and b"--min-df 10 asks for terms in 10 or more of 2 documents" in r.stderr


def test_tfidf_table_shows_file_documents_by_basename(cli, tmp_path):
    a, b = tmp_path / "first.txt", tmp_path / "second.txt"
    a.write_text("cats sat on mats\n")
    b.write_text("dogs ran to logs\n")
    r = cli("tfidf", "--top", "1", str(a), str(b), "--format", "table", env={"COLUMNS": "80"})
    out = r.stdout.decode()
    assert "first.txt" in out and str(tmp_path) not in out.split("tfidf|")[0]
