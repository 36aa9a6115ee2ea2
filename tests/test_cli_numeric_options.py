"""Numeric options a user got wrong answers, hangs or fork storms from: each one, through the CLI.

(`test_cli_option_sweep.py` sweeps every numeric option with hostile values; these pin the
instances that were reported, with the message or the exact numbers.)
"""

from __future__ import annotations

import json
import math

import pytest

from conftest import FIXTURES

TEXT = "the cat sat on the mat\nthe dog sat on the log\na cat and a dog\n"


@pytest.fixture
def text(tmp_path):
    p = tmp_path / "t.txt"
    p.write_text(TEXT)
    return str(p)


def usage_error(r, *fragments: str) -> str:
    err = r.stderr.decode()
    assert r.returncode == 2, err
    assert err.startswith("nlpkit: error: ") and len(err.splitlines()) == 1, err
    for f in fragments:
        assert f in err, err
    return err


@pytest.mark.parametrize("command,args", [
    ("pmi", ["-j", "99999"]),
    ("tfidf", ["--docs", "lines", "-j", "99999"]),
    ("ngram-train", ["--jobs", "99999", "-o", "{out}"]),
    ("tokenize", ["--workers", "99999"]),   # the old name, hidden, still works
])
def test_worker_counts_are_capped_at_the_cpus_available_with_a_warning(cli, text, tmp_path, command, args):
    from nlpkit.workers import available_cpus

    args = [a.replace("{out}", str(tmp_path / "lm.arpa")) for a in args]
    r = cli(command, text, *args, "--no-signature")
    assert r.returncode == 0, r.stderr.decode()
    flag = "--jobs"
    cpus = available_cpus()
    assert f"nlpkit: warning: {flag} 99999: this machine has {cpus} CPU" in r.stderr.decode()
    assert f"using {cpus}" in r.stderr.decode()
    quiet = cli(command, text, *args, "--no-signature", "-q")
    assert b"warning" not in quiet.stderr


def test_pmi_window_longer_than_the_text_costs_nothing_and_keeps_nltk_scaling(cli, text):
    """NLTK divides a window's pair counts by W - 1: a window far longer than any line counts the
    same pairs as W = 50, so each score moves by exactly log2(49) - log2(W - 1)."""
    def scores(window: str) -> dict:
        r = cli("pmi", text, "-w", window, "-k", "0", "--format", "jsonl", "--no-signature")
        assert r.returncode == 0, r.stderr.decode()
        return {(d["word1"], d["word2"]): d["pmi"] for d in map(json.loads, r.stdout.decode().splitlines())}

    near, far = scores("50"), scores("2147483647")
    assert near.keys() == far.keys()
    shift = math.log2(49) - math.log2(2147483646)
    for pair, s in near.items():
        assert far[pair] == pytest.approx(s + shift, abs=1e-12)
    usage_error(cli("pmi", text, "-w", "2147483648"), "--window", "2147483647")


@pytest.mark.parametrize("odds", ["inf", "nan"])
def test_edit_odds_must_be_a_finite_number(cli, tmp_path, odds):
    d = tmp_path / "count_1w.txt"
    d.write_text("spelling\t10\nspewing\t3\n")
    r = cli("edit-distance", "--dict", str(d), "--rank", "channel", "--edit-odds", odds, "speling")
    usage_error(r, "--edit-odds", "not a finite number")


def test_edit_weights_beyond_the_integer_range_are_a_usage_error(cli, tmp_path):
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("kitten\tsitting\n")
    r = cli("edit-distance", "--pairs", str(pairs), "--weights", "99999999999999999999,1,1")
    usage_error(r, "--weights", "<=2.14748e+09")
    ok = cli("edit-distance", "--pairs", str(pairs), "--weights", "2147483647,1,1", "--no-signature")
    assert ok.stdout.decode().splitlines()[1] == "kitten\tsitting\t2147483649"   # one insertion, two substitutions


@pytest.mark.parametrize("factor,fragment", [
    ("inf", "'inf' is not a finite number"), ("nan", "'nan' is not a finite number"),
    ("-2", "-2.0 is not in the range x>0"), ("1e300", "at most 16777216 positions"),
])
def test_rope_factor_errors_share_one_format(cli, factor, fragment):
    r = cli("perplexity", "-m", str(FIXTURES / "lm" / "llama-gqa"), "--rope-scaling", "linear",
            "--rope-factor", factor, input="some text\n")
    usage_error(r, "--rope-factor", fragment)


@pytest.mark.parametrize("offset", ["nan", "inf", "-inf", "1e300"])
def test_tfidf_idf_offset_must_be_finite_and_in_range(cli, text, offset):
    usage_error(cli("tfidf", text, "--docs", "lines", "--idf-offset", offset), "--idf-offset")


def test_bm25_k1_beyond_1e6_is_refused_and_1e6_still_ranks(cli, tmp_path):
    corpus = tmp_path / "c.tsv"
    corpus.write_text("d1\tthe cat sat\nd2\tthe dog ran\nd3\tcat cat dog\n")
    r = cli("bm25", "index", str(corpus), "--corpus-format", "tsv", "-o", str(tmp_path / "big"), "--k1", "1e300")
    usage_error(r, "--k1", "0<=x<=1000000")
    assert not (tmp_path / "big").exists()
    idx = str(tmp_path / "idx")
    assert cli("bm25", "index", str(corpus), "--corpus-format", "tsv", "-o", idx, "--k1", "1e6").returncode == 0
    run = cli("bm25", "search", idx, "--query", "cat dog", "--format", "tsv", "--no-signature").stdout.decode()
    rows = [line.split("\t") for line in run.splitlines()[1:]]
    assert [r[2] for r in rows] == ["d3", "d2", "d1"] and all(float(r[3]) > 0 for r in rows)


@pytest.mark.parametrize("k", ["inf", "nan", "0"])
def test_add_k_needs_a_finite_positive_k(cli, text, tmp_path, k):
    out = tmp_path / "lm.arpa"
    usage_error(cli("ngram-train", text, "-o", str(out), "--smoothing", "add-k", "--k", k), "--k")
    assert not out.exists()


@pytest.mark.parametrize("option,value", [("--max-ngram-order", "101"), ("--chrf-char-order", "101"),
                                          ("--confidence-n", "100001")])
def test_bleu_orders_and_resamples_have_a_ceiling(cli, tmp_path, option, value):
    hyp, ref = tmp_path / "hyp", tmp_path / "ref"
    hyp.write_text("the cat sat\n")
    ref.write_text("the cat sat\n")
    usage_error(cli("bleu", str(hyp), "-r", str(ref), "-m", "bleu,chrf", option, value), option)


@pytest.mark.parametrize("command,args", [
    ("pmi", []), ("tfidf", ["--docs", "lines"]), ("tokenize", ["-t", str(FIXTURES / "tokenizers" / "bl-llama3")]),
    ("ngram-train", ["-o", "{out}"]), ("bpe-train", ["-o", "{out}", "--vocab-size", "300"]),
])
def test_jobs_0_means_all_the_cpus_everywhere(cli, text, tmp_path, command, args):
    """`-j 0` was "auto" in pmi/tfidf and refused by tokenize, ngram-train, bpe-train and bleu: one meaning now."""
    args = [a.replace("{out}", str(tmp_path / "out")) for a in args]
    r = cli(command, text, *args, "-j", "0", "--no-signature")
    assert r.returncode == 0, r.stderr.decode()
    assert b"--jobs" not in r.stderr
    assert "0 = all the CPUs available" in cli(command, "--help").stdout.decode().replace("\n", " ").replace("  ", "")


def test_bleu_jobs_0_scores_as_one_job(cli, tmp_path):
    hyp, ref = tmp_path / "h", tmp_path / "r"
    hyp.write_text("the cat sat on the mat\n")
    ref.write_text("the cat sat on a mat\n")
    one = cli("bleu", str(hyp), "-r", str(ref), "-j", "1", "--format", "jsonl", "--no-signature")
    zero = cli("bleu", str(hyp), "-r", str(ref), "-j", "0", "--format", "jsonl", "--no-signature")
    assert zero.returncode == 0 and zero.stdout == one.stdout, zero.stderr.decode()


@pytest.mark.parametrize("args, option", [
    (["edit-distance", "--dict", "{dict}", "--max-distance", "2147483648", "speling"], "--max-distance"),
    (["edit-distance", "--dict", "{dict}", "--top", "9223372036854775808", "speling"], "--top"),
    (["bpe-train", "{text}", "-o", "{out}", "--vocab-size", "9223372036854775808"], "--vocab-size"),
    (["generate", "x", "--max-new-tokens", "2147483648"], "--max-new-tokens"),
    (["generate", "x", "--top-k", "2147483648"], "--top-k"),
    (["generate", "x", "--top-k", "-1"], "--top-k"),
    (["generate", "x", "--seed", "2147483648"], "--seed"),
    (["bleu", "{text}", "-r", "{text}", "--seed", "9223372036854775808"], "--seed"),
    (["score", "{text}", "--seed", "2147483648"], "--seed"),
    (["rrf", "{text}", "--rrf-k", "1e300"], "--rrf-k"),
])
def test_counts_seeds_and_constants_past_their_ceiling_are_usage_errors(cli, text, tmp_path, args, option):
    """The README: counts are refused past 2147483647; the reported options accepted 2**31 and 2**63."""
    d = tmp_path / "dict.txt"
    d.write_text("spelling\t10\n")
    args = [a.format(dict=d, text=text, out=tmp_path / "tok") for a in args]
    usage_error(cli(*args), option)


@pytest.mark.parametrize("command", ["score", "pmi", "perplexity"])
def test_shard_size_past_1024g_is_a_usage_error(cli, text, command):
    usage_error(cli(command, text, "--shard-size", str(2 ** 63)), "--shard-size", "1024G")
