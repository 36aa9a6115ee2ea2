"""nlpkit.mt.bleu against sacrebleu's own API: same inputs and options, same numbers and signatures."""

from __future__ import annotations

import random

import pytest
from sacrebleu.metrics import BLEU, CHRF, TER
from sacrebleu.significance import PairedTest

from nlpkit.mt import bleu as mt_eval
from nlpkit.errors import NlpkitError, UsageError
from nlpkit.mt.bleu import EvalOptions

WORDS = ("the cat dog sat on a mat , . house Haus big small ran quickly über naïve "
         "of to in it is was we they 's ( ) - 2021 3.5").split()


def corpus(seed: int, n: int = 60) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 14))) for _ in range(n)]


def noisy(lines: list[str], seed: int) -> list[str]:
    """A 'system output': each line with some words dropped/replaced."""
    rng = random.Random(seed)
    out = []
    for line in lines:
        words = [w if rng.random() > 0.3 else rng.choice(WORDS) for w in line.split()
                 if rng.random() > 0.1]
        out.append(" ".join(words))
    return out


REFS = [corpus(1), noisy(corpus(1), 2)]
SYSTEMS = [("base", noisy(REFS[0], 10)), ("sys2", noisy(REFS[0], 11)), ("sys3", noisy(REFS[0], 12))]


def api_metrics(o: EvalOptions, refs) -> dict:
    """The sacrebleu metric objects for the same options, built directly."""
    return {
        "bleu": BLEU(lowercase=o.lowercase, tokenize=o.tokenize, smooth_method=o.smooth_method,
                     smooth_value=o.smooth_value, max_ngram_order=o.max_ngram_order,
                     effective_order=o.effective_order, references=refs),
        "chrf": CHRF(char_order=o.chrf_char_order, word_order=o.chrf_word_order, beta=o.chrf_beta,
                     lowercase=o.chrf_lowercase, whitespace=o.chrf_whitespace,
                     eps_smoothing=o.chrf_eps_smoothing, references=refs),
        "ter": TER(case_sensitive=o.ter_case_sensitive, normalized=o.ter_normalized,
                   no_punct=o.ter_no_punct, asian_support=o.ter_asian_support, references=refs),
    }


# ----------------------------------------------------------------------------- reading

def test_read_segments_reads_like_sacrebleu_cli(tmp_path):
    # sacrebleu's CLI: open(encoding='utf-8', newline='\n') and line.rstrip(): BOM kept
    raw = "\ufeffErste Zeile  \r\nzweite\t\n\n  vierte \u3000\nletzte ohne newline".encode("utf-8")
    p = tmp_path / "h.txt"
    p.write_bytes(raw)
    with open(p, encoding="utf-8", newline="\n") as f:
        expected = [line.rstrip() for line in f]
    assert mt_eval.read_segments(str(p)) == expected
    assert expected[0].startswith("\ufeff") and expected[2] == ""


def test_empty_file_is_an_error_naming_the_file(tmp_path):
    p = tmp_path / "empty.txt"
    p.write_bytes(b"")
    with pytest.raises(NlpkitError, match=r"hypothesis .*empty\.txt: empty file"):
        mt_eval.read_segments(str(p), role="hypothesis")


def test_invalid_utf8_names_file_and_line(tmp_path):
    p = tmp_path / "bad.txt"
    p.write_bytes(b"ok\nfine\nbroken \xff here\n")
    with pytest.raises(NlpkitError, match=r"reference .*bad\.txt, line 3: invalid UTF-8"):
        mt_eval.load_references([str(p)])
    assert mt_eval.read_segments(str(p), errors="replace")[2] == "broken \ufffd here"


def test_refs_tsv_columns_equal_separate_reference_files(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("\n".join(REFS[0]) + "\n", encoding="utf-8")
    b.write_text("\n".join(REFS[1]) + "\n", encoding="utf-8")
    tsv = tmp_path / "refs.tsv"
    tsv.write_text("".join(f"{x}\t{y}\n" for x, y in zip(*REFS)), encoding="utf-8")
    names, from_files = mt_eval.load_references([str(a), str(b)])
    names_tsv, from_tsv = mt_eval.load_references([], str(tsv))
    assert from_tsv == from_files == [[s.rstrip() for s in r] for r in REFS]
    assert names_tsv == [f"{tsv}[1]", f"{tsv}[2]"]


def test_refs_tsv_ragged_row_names_the_line(tmp_path):
    tsv = tmp_path / "refs.tsv"
    tsv.write_text("a\tb\nc\td\ne\n", encoding="utf-8")
    with pytest.raises(NlpkitError, match=r"refs\.tsv, line 3: 1 tab-separated references, but line 1 has 2"):
        mt_eval.read_refs_tsv(str(tsv))


def test_references_of_different_lengths_name_both(tmp_path):
    a, b = tmp_path / "refA", tmp_path / "refB"
    a.write_text("x\ny\nz\n", encoding="utf-8")
    b.write_text("x\ny\n", encoding="utf-8")
    with pytest.raises(NlpkitError, match=r"refA has 3 lines, .*refB has 2"):
        mt_eval.load_references([str(a), str(b)])


def test_line_count_mismatch_names_both_counts():
    with pytest.raises(NlpkitError, match=r"hypothesis h\.txt has 59 lines, reference r\.txt has 60"):
        mt_eval.corpus_scores([("h.txt", SYSTEMS[0][1][:-1])], REFS, EvalOptions(), ref_name="r.txt")


def test_unknown_tokenizer_and_metric_are_usage_errors():
    with pytest.raises(UsageError, match="unknown tokenizer 'nope'"):
        mt_eval.build_metrics(EvalOptions(tokenize="nope"), REFS)
    with pytest.raises(UsageError, match="unknown metric 'meteor'"):
        mt_eval.build_metrics(EvalOptions(metrics=("meteor",)), REFS)


# ----------------------------------------------------------------------------- scores

@pytest.mark.parametrize("options", [
    EvalOptions(metrics=("bleu", "chrf", "ter")),
    EvalOptions(metrics=("bleu", "chrf", "ter"), tokenize="intl", lowercase=True,
                smooth_method="floor", smooth_value=0.2, chrf_word_order=2, chrf_lowercase=True,
                ter_case_sensitive=True, ter_no_punct=True),
    EvalOptions(metrics=("bleu", "chrf"), tokenize="char", smooth_method="add-k",
                max_ngram_order=3, effective_order=True, chrf_whitespace=True,
                chrf_eps_smoothing=True, chrf_beta=1),
    EvalOptions(metrics=("bleu", "ter"), tokenize="none", smooth_method="none",
                ter_normalized=True, ter_asian_support=True, short_signature=True),
])
def test_corpus_scores_equal_sacrebleu_api(options):
    records = mt_eval.corpus_scores(SYSTEMS, REFS, options)
    api = api_metrics(options, REFS)
    expected = []
    for name, hyps in SYSTEMS:
        for m in options.metrics:
            s = api[m].corpus_score(hyps, None)
            expected.append((name, s.name, s.score, api[m].get_signature().format(options.short_signature)))
    assert [(r["system"], r["metric"], r["score"], r["signature"]) for r in records] == expected


def test_bleu_components_equal_sacrebleu_bleuscore():
    rec = mt_eval.corpus_scores(SYSTEMS[:1], REFS, EvalOptions())[0]
    s = BLEU(references=REFS).corpus_score(SYSTEMS[0][1], None)
    assert (rec["counts"], rec["totals"], rec["precisions"]) == (s.counts, s.totals, s.precisions)
    assert (rec["bp"], rec["ratio"], rec["sys_len"], rec["ref_len"]) == (s.bp, s.ratio, s.sys_len, s.ref_len)
    assert rec["signature"] == "nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:" + s_version()


def s_version() -> str:
    import sacrebleu

    return sacrebleu.__version__


def test_sentence_scores_equal_sentence_bleu_chrf_ter():
    import sacrebleu

    hyps = SYSTEMS[1][1][:25] + [""]  # an empty hypothesis line is legal and scored
    refs = [r[:26] for r in REFS]
    recs = list(mt_eval.sentence_scores([("s", hyps)], refs, EvalOptions(metrics=("bleu", "chrf", "ter"))))
    assert len(recs) == 3 * 26
    for i, hyp in enumerate(hyps):
        r = [ref[i] for ref in refs]
        b, c, t = recs[3 * i: 3 * i + 3]
        assert b["line"] == i + 1 and b["score"] == sacrebleu.sentence_bleu(hyp, r).score
        assert c["score"] == sacrebleu.sentence_chrf(hyp, r).score
        assert t["score"] == sacrebleu.sentence_ter(hyp, r).score
    assert recs[0]["signature"].startswith("nrefs:2|case:mixed|eff:yes|tok:13a")


# ------------------------------------------------------------------- bootstrap, paired

def test_confidence_equals_sacrebleu_bootstrap_with_seed(monkeypatch):
    monkeypatch.delenv("SACREBLEU_SEED", raising=False)
    opts = EvalOptions(metrics=("bleu", "chrf"))
    for seed in (12345, 7):
        recs = mt_eval.corpus_scores(SYSTEMS[:1], REFS, opts, confidence_n=200, seed=seed)
        monkeypatch.setenv("SACREBLEU_SEED", str(seed))
        for rec, m in zip(recs, (BLEU(references=REFS), CHRF(references=REFS))):
            s = m.corpus_score(SYSTEMS[0][1], None, n_bootstrap=200)
            assert (rec["score"], rec["mean"], rec["ci95"]) == (s.score, s._mean, s._ci)
            assert rec["signature"] == m.get_signature().format()
            assert f"|bs:200|seed:{seed}|" in rec["signature"]
        monkeypatch.delenv("SACREBLEU_SEED")
    import os

    assert "SACREBLEU_SEED" not in os.environ  # the seed is set for the call only


@pytest.mark.parametrize("test,n,conf", [("bs", 100, 0), ("ar", 200, 0), ("ar", 200, 50)])
def test_paired_tests_equal_sacrebleu_paired_test(monkeypatch, test, n, conf):
    opts = EvalOptions(metrics=("bleu", "chrf", "ter"))
    recs = mt_eval.paired_test(SYSTEMS, REFS, opts, test=test, n_samples=n, confidence_n=conf, seed=99)
    monkeypatch.setenv("SACREBLEU_SEED", "99")
    api = api_metrics(opts, REFS)
    sigs, results = PairedTest(SYSTEMS, {k: api[k] for k in opts.metrics}, None, test_type=test,
                               n_samples=n, n_ar_confidence=conf or -1)()
    expected = []
    for i, (name, _) in enumerate(SYSTEMS):
        for metric in (k for k in results if k != "System"):
            res = results[metric][i]
            expected.append((name, metric, res.score, res.p_value, res.mean, res.ci, sigs[metric].format()))
    got = [(r["system"], r["metric"], r["score"], r["p_value"], r.get("mean"), r.get("ci95"),
            r["signature"]) for r in recs]
    assert got == expected
    assert recs[0]["baseline"] and recs[0]["p_value"] is None
    assert {f"{test}:{n}", "seed:99"} <= set(recs[0]["signature"].split("|"))


def test_paired_bs_ignores_confidence_n_and_keeps_its_signature():
    a = mt_eval.paired_test(SYSTEMS, REFS, EvalOptions(), test="bs", n_samples=30, confidence_n=500)
    b = mt_eval.paired_test(SYSTEMS, REFS, EvalOptions(), test="bs", n_samples=30)
    assert a == b and "|bs:30|" in a[0]["signature"]


def test_paired_components_equal_plain_corpus_scores():
    opts = EvalOptions(metrics=("bleu", "ter"))
    paired = mt_eval.paired_test(SYSTEMS, REFS, opts, test="bs", n_samples=20)
    plain = mt_eval.corpus_scores(SYSTEMS, REFS, opts)
    drop = ("signature", "p_value", "mean", "ci95", "baseline")
    assert [{k: v for k, v in r.items() if k not in drop} for r in paired] == \
           [{k: v for k, v in r.items() if k not in drop} for r in plain]


def test_parallel_jobs_give_identical_records():
    opts = EvalOptions(metrics=("bleu", "chrf", "ter"))
    assert mt_eval.corpus_scores(SYSTEMS, REFS, opts, confidence_n=50, jobs=2) == \
        mt_eval.corpus_scores(SYSTEMS, REFS, opts, confidence_n=50)
    assert mt_eval.paired_test(SYSTEMS, REFS, opts, "ar", 100, jobs=2) == \
        mt_eval.paired_test(SYSTEMS, REFS, opts, "ar", 100)


def test_paired_test_needs_two_systems():
    with pytest.raises(UsageError, match="at least two"):
        mt_eval.paired_test(SYSTEMS[:1], REFS, EvalOptions())


@pytest.mark.parametrize("name", ["bleu", "chrf", "ter"])
def test_score_of_summed_segment_statistics_is_sacrebleus_corpus_score(name):
    """The one place nlpkit reads sacrebleu's statistics (`segment_statistics`, `score_of_totals`: what `score`'s
    bootstrap of corpus BLEU/chrF resamples) gives the corpus score sacrebleu computes itself."""
    hyps = noisy(REFS[0], 7)
    metric = mt_eval.build_metrics(EvalOptions(metrics=(name,)), REFS)[name]
    stats = mt_eval.segment_statistics(metric, hyps)
    assert len(stats) == len(hyps)
    totals = [sum(column) for column in zip(*stats)]
    expected = api_metrics(EvalOptions(metrics=(name,)), REFS)[name].corpus_score(hyps, REFS)
    assert mt_eval.score_of_totals(metric, totals).score == expected.score
