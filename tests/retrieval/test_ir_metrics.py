"""IR metrics (nlpkit/retrieval/metrics.py, runs.py): trec_eval semantics, equal to ranx."""

from __future__ import annotations

import io

import pytest

from nlpkit.errors import NlpkitError
from nlpkit.stats.documents import read_records
from nlpkit.retrieval.metrics import evaluate, norm_id, parse_metrics
from nlpkit.retrieval.runs import read_qrels, read_run, trec_order, write_run
from nlpkit.retrieval.search import index_texts, search_texts

COLLECTIONS = {  # docs, queries, query ids, qrels, qrels format
    "cranfield": ("cranfield/cran.all.1400", "cranfield/cran.qry", "position", "cranfield/cranqrel", "cranfield"),
    "cisi": ("cisi/CISI.ALL", "cisi/CISI.QRY", "file", "cisi/CISI.REL", "pairs"),
    "cacm": ("cacm/cacm.all", "cacm/query.text", "file", "cacm/qrels.text", "pairs"),
}
METRICS = ["ndcg@10", "map@100", "recall@100"]


def bm25_run(data, name, k=100):
    docs, queries, qids, qrels, qfmt = COLLECTIONS[name]
    idx = index_texts(read_records(str(data / docs), "smart"), k1=1.2, b=0.75)
    qs = read_records(str(data / queries), "smart", fields="W", kind="queries", query_ids=qids)
    return search_texts(idx, qs, k), read_qrels(str(data / qrels), qfmt)


@pytest.mark.parametrize("name", sorted(COLLECTIONS))
def test_metrics_equal_ranx_on_classic_collections(shared_data, name):
    ranx = pytest.importorskip("ranx")
    run, qrels = bm25_run(shared_data, name)
    means, per_query = evaluate(run, qrels, METRICS)
    # ranx sorts ties arbitrarily: give it the trec_eval order as strictly decreasing scores,
    # and the numeric ids without zero padding (CACM's qrels write query 1 as "01").
    judged = {norm_id(q): {norm_id(d): g for d, g in docs.items()}
              for q, docs in qrels.items() if any(g > 0 for g in docs.values())}
    ranked = {norm_id(q): {norm_id(d): float(len(pairs) - i) for i, (d, _) in enumerate(trec_order(pairs))}
              for q, pairs in run.items() if norm_id(q) in judged and pairs}
    ref = ranx.evaluate(ranx.Qrels(judged), ranx.Run(ranked), METRICS, make_comparable=True)
    assert len(per_query) == len(judged)
    for m in METRICS:
        assert means[m] == pytest.approx(float(ref[m]), abs=1e-9), m


def test_bm25_effectiveness_on_cranfield_is_pinned(shared_data):
    run, qrels = bm25_run(shared_data, "cranfield")
    means, per_query = evaluate(run, qrels, METRICS)
    assert len(per_query) == 225
    assert means["ndcg@10"] == pytest.approx(0.34459153994568237, abs=1e-9)


def test_ties_are_ranked_by_docid_descending_as_trec_eval():
    run = {"q": [("a", 1.0), ("b", 1.0), ("c", 0.5)]}
    # trec_eval order: b, a, c; only "a" is relevant -> found at rank 2
    means, _ = evaluate(run, {"q": {"a": 1}}, ["map@10", "mrr", "p@1", "recall@1"])
    assert means == {"map@10": 0.5, "mrr": 0.5, "p@1": 0.0, "recall@1": 0.0}


def test_ndcg_uses_linear_gain_and_all_judged_gains_for_the_ideal():
    import math

    run = {"q": [("a", 3.0), ("b", 2.0), ("c", 1.0)]}
    qrels = {"q": {"a": 1, "c": 3, "z": 2}}
    dcg = 1 / math.log2(2) + 3 / math.log2(4)
    idcg = 3 / math.log2(2) + 2 / math.log2(3) + 1 / math.log2(4)
    means, _ = evaluate(run, qrels, ["ndcg@3"])
    assert means["ndcg@3"] == pytest.approx(dcg / idcg, abs=1e-15)


def test_map_at_k_divides_by_all_relevant_and_missing_queries_score_zero():
    run = {"q1": [("a", 2.0), ("x", 1.0)]}
    qrels = {"q1": {"a": 1, "b": 1, "c": 1}, "q2": {"d": 1}, "q3": {"e": 0}}
    means, per_query = evaluate(run, qrels, ["map@1"])
    assert per_query == {"q1": {"map@1": 1 / 3}, "q2": {"map@1": 0.0}}   # q3: no relevant, skipped
    assert means["map@1"] == pytest.approx(1 / 6)


def test_qrels_formats(tmp_path):
    p = tmp_path / "q"
    p.write_text("1 0 d1 2\n1 0 d2 0\n")
    assert read_qrels(str(p)) == {"1": {"d1": 2, "d2": 0}}
    p.write_text("01 1410  0 0\n01 1572  0 0\n")
    assert read_qrels(str(p)) == {"01": {"1410": 1, "1572": 1}}
    p.write_text("1 184 2 \n1 29 -1\n")
    assert read_qrels(str(p), "cranfield") == {"1": {"184": 3, "29": 0}}
    with pytest.raises(NlpkitError, match="line 1: 3-column qrels are ambiguous"):
        read_qrels(str(p))


def test_run_round_trip_and_plain_ranked_list(tmp_path):
    run = {"q1": [("d2", 1.5), ("d1", 0.25)], "q2": [("d9", -1.0)]}
    buf = io.StringIO()
    write_run(run, buf, tag="t")
    assert buf.getvalue().splitlines()[0] == "q1 Q0 d2 1 1.5 t"
    (tmp_path / "r").write_text(buf.getvalue())
    assert read_run(str(tmp_path / "r")) == run
    (tmp_path / "plain").write_text("d3\nd1\n\nd2\n")
    assert read_run(str(tmp_path / "plain")) == {"1": [("d3", 3.0), ("d1", 2.0), ("d2", 1.0)]}


def test_run_line_with_five_fields_names_file_and_line(tmp_path):
    p = tmp_path / "bad.run"
    p.write_text("1 Q0 d1 1 2.0 t\n1 Q0 d2 2 1.0\n")
    with pytest.raises(NlpkitError, match=r"bad\.run, line 2: expected 6 fields .* found 5"):
        read_run(str(p))


def test_duplicate_docid_within_a_query_is_an_error(tmp_path):
    p = tmp_path / "dup.run"
    p.write_text("1 Q0 d1 1 2.0 t\n2 Q0 d1 1 2.0 t\n1 Q0 d1 2 1.0 t\n")
    with pytest.raises(NlpkitError, match=r"dup\.run, line 3: document 'd1' appears twice for query '1' "
                                          r"\(first on line 1\)"):
        read_run(str(p))


def test_parse_metrics_rejects_unknown_names():
    assert parse_metrics("NDCG@10, map@100,precision@5") == ["ndcg@10", "map@100", "p@5"]
    with pytest.raises(NlpkitError, match="unknown metric 'bleu'"):
        parse_metrics("bleu")
