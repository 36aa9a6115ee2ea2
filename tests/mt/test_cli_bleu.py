"""`nlpkit bleu` end to end: numbers and signatures equal sacrebleu's, bad input is reported clearly."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import sacrebleu
from sacrebleu.metrics import BLEU, CHRF, TER
from sacrebleu.significance import PairedTest


def read_like_sacrebleu_cli(path) -> list[str]:
    """How the `sacrebleu` command reads a file: newline='\\n', line.rstrip(), BOM kept."""
    with open(path, encoding="utf-8", newline="\n") as f:
        return [line.rstrip() for line in f]


def jsonl(proc) -> list[dict]:
    assert proc.returncode == 0, proc.stderr.decode()
    return [json.loads(line) for line in proc.stdout.decode().splitlines()]


def api_expected(hyp_paths, ref_paths, metrics, tokenize=None) -> list[tuple]:
    refs = [read_like_sacrebleu_cli(p) for p in ref_paths]
    objs = {"bleu": BLEU(tokenize=tokenize, references=refs), "chrf": CHRF(references=refs),
            "ter": TER(references=refs)}
    out = []
    for h in hyp_paths:
        hyps = read_like_sacrebleu_cli(h)
        for m in metrics:
            s = objs[m].corpus_score(hyps, None)
            out.append((str(h), s.name, s.score, objs[m].get_signature().format()))
    return out


def head(src: Path, dst: Path, n: int) -> Path:
    """The first n lines of src (bytes unchanged) in dst."""
    with open(src, "rb") as f:
        dst.write_bytes(b"".join(line for _, line in zip(range(n), f)))
    return dst


# ------------------------------------------------------------------ acceptance on WMT data

WMT21_DE = ("wmt21", "references/newstest2021.en-de.ref.{}.de", "system-outputs/newstest2021.en-de.hyp.{}.de")
WMT21_ZH = ("wmt21", "references/newstest2021.en-zh.ref.{}.zh", "system-outputs/newstest2021.en-zh.hyp.{}.zh")


@pytest.mark.parametrize("pair,refs,systems,metrics,tokenize", [
    (WMT21_DE, "A", ["Facebook-AI", "Online-W"], ("bleu", "chrf"), None),
    (WMT21_DE, "ACD", ["Facebook-AI", "UEdin"], ("bleu",), None),
    (WMT21_ZH, "AB", ["Facebook-AI", "Online-B"], ("bleu", "chrf"), "zh"),
], ids=["wmt21-en-de-refA", "wmt21-en-de-refACD", "wmt21-en-zh-refAB-zh"])
def test_wmt21_scores_and_signatures_equal_sacrebleu(cli, shared_data, pair, refs, systems, metrics,
                                                     tokenize):
    """A subset (a few systems; chrF with 3 refs and TER are slow); benchmarks/bleu.py checks all."""
    root = shared_data / pair[0]
    ref_paths = [root / pair[1].format(r) for r in refs]
    hyp_paths = [root / pair[2].format(s) for s in systems]
    args = [a for r in ref_paths for a in ("-r", str(r))] + [str(h) for h in hyp_paths]
    if tokenize:
        args += ["--tokenize", tokenize]
    got = jsonl(cli("bleu", *args, "--metrics", ",".join(metrics), "--format", "jsonl"))
    expected = api_expected(hyp_paths, ref_paths, metrics, tokenize)
    assert [(r["system"], r["metric"], r["score"], r["signature"]) for r in got] == expected
    assert got[0]["signature"].startswith(f"nrefs:{len(refs)}|case:mixed|eff:no|tok:{tokenize or '13a'}|")


def test_wmt17_with_bom_line_equals_sacrebleu(cli, shared_data):
    root = shared_data / "wmt17-ende"
    ref = root / "newstest2017-ende.ref.de"
    hyps = [root / "system-outputs/newstest2017.online-A.0.en-de"]  # line 1 starts with a BOM
    got = jsonl(cli("bleu", "-r", str(ref), *map(str, hyps), "--format", "jsonl"))
    assert [(r["system"], r["metric"], r["score"], r["signature"]) for r in got] == \
        api_expected(hyps, [ref], ("bleu",))
    assert round(got[0]["score"], 4) == 20.7965  # 20.7967 if the BOM were dropped


def test_ter_and_chrfpp_equal_sacrebleu_on_wmt21_subsets(cli, shared_data, tmp_path):
    """TER is slow in sacrebleu (~15 s per 1,002-line system and reference): 50 lines, 3 refs."""
    root = shared_data / "wmt21"
    refs = [head(root / WMT21_DE[1].format(r), tmp_path / f"ref{r}", 50) for r in "ACD"]
    hyps = [head(root / WMT21_DE[2].format(s), tmp_path / s, 50) for s in ("Online-A",)]
    args = [a for r in refs for a in ("-r", str(r))] + [str(h) for h in hyps]
    got = jsonl(cli("bleu", *args, "-m", "ter,chrf", "--chrf-word-order", "2", "--format", "jsonl"))
    for rec, h in zip(got[::2], hyps):
        s = TER(references=[read_like_sacrebleu_cli(r) for r in refs])
        score = s.corpus_score(read_like_sacrebleu_cli(h), None)
        assert (rec["metric"], rec["score"], rec["num_edits"], rec["ref_length"]) == \
            ("TER", score.score, score.num_edits, score.ref_length)
        assert rec["signature"] == s.get_signature().format()
    for rec, h in zip(got[1::2], hyps):
        c = sacrebleu.corpus_chrf(read_like_sacrebleu_cli(h), [read_like_sacrebleu_cli(r) for r in refs],
                                  word_order=2)
        assert (rec["metric"], rec["score"], rec["word_order"]) == ("chrF2++", c.score, 2)


def test_sentence_scores_equal_sentence_bleu_chrf_ter(cli, shared_data, tmp_path):
    root = shared_data / "wmt21"
    refs = [head(root / WMT21_DE[1].format(r), tmp_path / f"ref{r}", 30) for r in "ACD"]
    hyp = head(root / WMT21_DE[2].format("Facebook-AI"), tmp_path / "hyp", 30)
    got = jsonl(cli("bleu", *[a for r in refs for a in ("-r", str(r))], str(hyp), "--sentence",
                    "-m", "bleu,chrf,ter", "--format", "jsonl"))
    ref_lines = [read_like_sacrebleu_cli(r) for r in refs]
    assert len(got) == 90
    for i, h in enumerate(read_like_sacrebleu_cli(hyp)):
        rs = [r[i] for r in ref_lines]
        b, c, t = got[3 * i: 3 * i + 3]
        assert b["line"] == c["line"] == t["line"] == i + 1
        assert b["score"] == sacrebleu.sentence_bleu(h, rs).score
        assert c["score"] == sacrebleu.sentence_chrf(h, rs).score
        assert t["score"] == sacrebleu.sentence_ter(h, rs).score


@pytest.fixture
def three_systems(shared_data, tmp_path):
    root = shared_data / "wmt21"
    ref = head(root / WMT21_DE[1].format("A"), tmp_path / "refA", 250)
    hyps = [head(root / WMT21_DE[2].format(s), tmp_path / s, 250) for s in ("Facebook-AI", "UEdin", "UF")]
    return ref, hyps


@pytest.mark.parametrize("flag,test,n", [("--paired-bs", "bs", 100), ("--paired-ar", "ar", 200)])
def test_paired_tests_equal_sacrebleu_with_same_seed(cli, three_systems, monkeypatch, flag, test, n):
    ref, hyps = three_systems
    got = jsonl(cli("bleu", "-r", str(ref), *map(str, hyps), flag, "--paired-n", str(n),
                    "-m", "bleu,chrf", "--format", "jsonl"))
    monkeypatch.setenv("SACREBLEU_SEED", "12345")
    refs = [read_like_sacrebleu_cli(ref)]
    sigs, res = PairedTest([(str(h), read_like_sacrebleu_cli(h)) for h in hyps],
                           {"BLEU": BLEU(references=refs), "chrF2": CHRF(references=refs)},
                           None, test_type=test, n_samples=n)()
    expected = [(str(h), m, res[m][i].score, res[m][i].p_value, res[m][i].mean, res[m][i].ci,
                 sigs[m].format()) for i, h in enumerate(hyps) for m in ("BLEU", "chrF2")]
    assert [(r["system"], r["metric"], r["score"], r["p_value"], r.get("mean"), r.get("ci95"),
             r["signature"]) for r in got] == expected
    assert got[0]["baseline"] is True and got[2]["p_value"] < 0.05


def test_confidence_equals_sacrebleu_bootstrap_for_default_and_given_seed(cli, three_systems, monkeypatch):
    ref, hyps = three_systems
    refs = [read_like_sacrebleu_cli(ref)]
    for seed in ("12345", "7"):
        got = jsonl(cli("bleu", "-r", str(ref), str(hyps[0]), "--confidence", "--confidence-n", "200",
                        "--seed", seed, "--format", "jsonl"))[0]
        monkeypatch.setenv("SACREBLEU_SEED", seed)
        bleu = BLEU(references=refs)
        s = bleu.corpus_score(read_like_sacrebleu_cli(hyps[0]), None, n_bootstrap=200)
        assert (got["score"], got["mean"], got["ci95"]) == (s.score, s._mean, s._ci)
        assert got["signature"] == bleu.get_signature().format()
        assert f"|bs:200|seed:{seed}|" in got["signature"]


# --------------------------------------------------- equality with the sacrebleu command

def test_quirky_lines_score_as_in_sacrebleu_command(cli, tmp_path):
    """BOM, trailing spaces/tabs, CRLF and an empty line: read exactly as `sacrebleu` reads them."""
    ref = tmp_path / "ref.txt"
    hyp = tmp_path / "hyp.txt"
    ref.write_bytes("Der Hund  bellt .\nEin Haus \t\r\nzwei Wörter\n\nEnde gut\n".encode("utf-8"))
    hyp.write_bytes("\ufeffDer Hund bellt. \nEin Haus\r\nzwei   Wörter \t\nleer?\nEnde  gut  ".encode("utf-8"))
    exe = Path(sys.executable).with_name("sacrebleu")
    if not exe.exists():
        pytest.skip("the sacrebleu command is not installed next to this Python")
    sb = subprocess.run([str(exe), str(ref), "-i", str(hyp), "-m", "bleu", "chrf", "ter",
                         "--chrf-whitespace", "-w", "12", "-f", "json", "-q"],
                        capture_output=True, check=True)
    expected = [(d["name"], d["score"], d["signature"]) for d in json.loads(sb.stdout)]
    got = jsonl(cli("bleu", "-r", str(ref), str(hyp), "-m", "bleu,chrf,ter", "--chrf-whitespace",
                    "--format", "jsonl"))
    assert [(r["metric"], round(r["score"], 12), r["signature"]) for r in got] == expected


# ------------------------------------------------------------------ inputs and outputs

@pytest.fixture
def small(tmp_path):
    ref = tmp_path / "ref.txt"
    ref.write_text("the cat sat on the mat\nhello world\nyes\n", encoding="utf-8")
    hyp = tmp_path / "hyp.txt"
    hyp.write_text("the cat sat on a mat\nhello there world\n\n", encoding="utf-8")  # empty line 3
    return ref, hyp


def test_empty_hypothesis_line_is_scored(cli, small):
    ref, hyp = small
    got = jsonl(cli("bleu", "-r", str(ref), str(hyp), "-m", "bleu,chrf,ter", "--format", "jsonl"))
    hyps, refs = read_like_sacrebleu_cli(hyp), [read_like_sacrebleu_cli(ref)]
    assert hyps[2] == ""
    assert [r["score"] for r in got] == [sacrebleu.corpus_bleu(hyps, refs).score,
                                         sacrebleu.corpus_chrf(hyps, refs).score,
                                         sacrebleu.corpus_ter(hyps, refs).score]


def test_hypotheses_from_stdin(cli, small):
    ref, hyp = small
    got = jsonl(cli("bleu", "-r", str(ref), "--format", "jsonl", input=hyp.read_bytes()))
    assert got[0]["system"] == "<stdin>"
    assert got[0]["score"] == sacrebleu.corpus_bleu(read_like_sacrebleu_cli(hyp),
                                                    [read_like_sacrebleu_cli(ref)]).score


def test_refs_tsv_equals_reference_files(cli, small, tmp_path):
    ref, hyp = small
    ref2 = tmp_path / "ref2.txt"
    ref2.write_text("a cat sat on the mat\nhello world !\nno\n", encoding="utf-8")
    tsv = tmp_path / "refs.tsv"
    tsv.write_text("".join(f"{a}\t{b}\n" for a, b in zip(read_like_sacrebleu_cli(ref),
                                                         read_like_sacrebleu_cli(ref2))), encoding="utf-8")
    a = jsonl(cli("bleu", "-r", str(ref), "-r", str(ref2), str(hyp), "--format", "jsonl"))
    b = jsonl(cli("bleu", "--refs-tsv", str(tsv), str(hyp), "--format", "jsonl"))
    assert a == b and a[0]["signature"].startswith("nrefs:2|")


def test_tsv_header_json_document_and_no_signature(cli, small):
    ref, hyp = small
    tsv = cli("bleu", "-r", str(ref), str(hyp), "--format", "tsv").stdout.decode().splitlines()
    assert tsv[0].split("\t") == ["system", "metric", "score", "counts", "totals", "precisions", "bp",
                                  "ratio", "sys_len", "ref_len", "signature"]
    assert tsv[1].split("\t")[-1] == f"nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:{sacrebleu.__version__}"
    doc = json.loads(cli("bleu", "-r", str(ref), str(hyp), "-m", "chrf", "--format", "json").stdout)
    assert doc["results"][0]["metric"] == "chrF2" and "signature" in doc["results"][0]
    bare = cli("bleu", "-r", str(ref), str(hyp), "--format", "jsonl", "--no-signature")
    assert "signature" not in json.loads(bare.stdout)
    short = jsonl(cli("bleu", "-r", str(ref), str(hyp), "--short-signature", "--format", "jsonl"))
    assert short[0]["signature"] == f"#:1|c:mixed|e:no|tok:13a|s:exp|v:{sacrebleu.__version__}"


def test_table_shows_scores_and_signature_footer(cli, small):
    ref, hyp = small
    out = cli("bleu", "-r", str(ref), str(hyp), "-m", "bleu,ter", "--format", "table").stdout.decode()
    assert "BLEU: nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:" in out
    assert "TER: nrefs:1|case:lc|tok:tercom|" in out
    assert "BP =" in out


# ----------------------------------------------------------------------------- errors

def test_line_count_mismatch_exits_1_naming_both_files_and_counts(cli, small, tmp_path):
    ref, _ = small
    short = tmp_path / "short.txt"
    short.write_text("only one line\n", encoding="utf-8")
    p = cli("bleu", "-r", str(ref), str(short))
    err = p.stderr.decode()
    assert p.returncode == 1 and p.stdout == b""
    assert err.startswith("nlpkit: error: line-count mismatch")
    assert f"{short} has 1 lines" in err and f"{ref} has 3" in err


def test_missing_reference_file_exits_1(cli, small, tmp_path):
    _, hyp = small
    p = cli("bleu", "-r", str(tmp_path / "nope.txt"), str(hyp))
    assert p.returncode == 1
    assert p.stderr.decode() == f"nlpkit: error: reference {tmp_path / 'nope.txt'}: no such file\n"


def test_empty_hypothesis_file_exits_1(cli, small, tmp_path):
    ref, _ = small
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    p = cli("bleu", "-r", str(ref), str(empty))
    assert p.returncode == 1 and "hypothesis" in p.stderr.decode() and "empty file" in p.stderr.decode()


def test_invalid_utf8_exits_1_naming_file_and_line(cli, small, tmp_path):
    ref, _ = small
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine\nbad \xc3\x28 bytes\nok\n")
    p = cli("bleu", "-r", str(ref), str(bad))
    assert p.returncode == 1
    assert f"{bad}, line 2: invalid UTF-8" in p.stderr.decode()
    assert cli("bleu", "-r", str(ref), str(bad), "--encoding-errors", "replace").returncode == 0


@pytest.mark.parametrize("args,message", [
    (["--metrics", "foo"], "unknown metric 'foo'"),
    (["--metrics", "bleu,meteor"], "unknown metric 'meteor'"),
    (["--paired-bs"], "need two or more HYP files"),
    (["--paired-bs", "--paired-ar", "X"], "mutually exclusive"),
    (["--sentence", "--confidence"], "cannot be combined"),
    (["--tokenize", "nope"], "unknown tokenizer 'nope'"),
])
def test_usage_errors_exit_2(cli, small, args, message):
    ref, hyp = small
    extra = [str(hyp) if a == "X" else a for a in args]
    p = cli("bleu", "-r", str(ref), str(hyp), *extra)
    assert p.returncode == 2 and message in p.stderr.decode()


def test_cli_module_does_not_import_sacrebleu_until_it_runs():
    code = "import sys, nlpkit.cli.bleu; print('sacrebleu' in sys.modules, 'numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True).stdout
    assert out.split() == [b"False", b"False"]


def test_smooth_value_without_a_method_that_uses_it_warns(cli, tmp_path):
    (tmp_path / "h.txt").write_text("the cat sat\n")
    r = cli("bleu", "-r", str(tmp_path / "h.txt"), str(tmp_path / "h.txt"), "--smooth-value", "0.5")
    assert r.returncode == 0 and b"--smooth-value applies to --smooth-method floor or add-k" in r.stderr
