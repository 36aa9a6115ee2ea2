"""`nlpkit edit-distance` through the real entry point: modes, formats, pipes, errors, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import REPO
from nlpkit import __version__

SIG = f"edit-distance|metric:levenshtein|weights:1,1,1|level:char|norm:no|v:{__version__}"


def tsv(r: subprocess.CompletedProcess) -> list[list[str]]:
    assert r.returncode == 0, r.stderr.decode()
    return [line.split("\t") for line in r.stdout.decode().splitlines()]


def test_pair_prints_one_record_with_signature(cli):
    rows = tsv(cli("edit-distance", "kitten", "sitting"))
    assert rows == [["a", "b", "metric", "distance", "signature"],
                    ["kitten", "sitting", "levenshtein", "3", SIG]]


def test_normalized_weighted_jsonl_matches_rapidfuzz(cli):
    from rapidfuzz.distance import Levenshtein

    r = cli("edit-distance", "lewenstein", "levenshtein", "--weights", "1,1,2", "--normalize",
            "--format", "jsonl")
    rec = json.loads(r.stdout)
    assert rec["distance"] == Levenshtein.distance("lewenstein", "levenshtein", weights=(1, 1, 2)) == 3
    assert rec["normalized"] == Levenshtein.normalized_distance("lewenstein", "levenshtein", weights=(1, 1, 2))
    assert rec["signature"] == f"edit-distance|metric:levenshtein|weights:1,1,2|level:char|norm:yes|v:{__version__}"


def test_word_level_is_wer_style(cli):
    rows = tsv(cli("edit-distance", "--level", "word", "--no-signature", "the cat sat on the mat",
                   "the cat sat on mat"))
    assert rows[1] == ["the cat sat on the mat", "the cat sat on mat", "levenshtein", "1"]


def test_pairs_from_stdin_append_distance(cli):
    rows = tsv(cli("edit-distance", "--metric", "damerau", input="ca\tabc\nkitten\tsitting\n"))
    assert rows[0][:3] == ["a", "b", "distance"]
    assert [r[:3] for r in rows[1:]] == [["ca", "abc", "2"], ["kitten", "sitting", "3"]]


def test_pairs_file_matches_rapidfuzz(cli, tmp_path):
    from rapidfuzz.distance import OSA

    pairs = [("speling", "spelling"), ("teh", "the"), ("", "abc"), ("über", "uber")]
    f = tmp_path / "pairs.tsv"
    f.write_text("".join(f"{a}\t{b}\n" for a, b in pairs), encoding="utf-8")
    rows = tsv(cli("edit-distance", "--pairs", str(f), "--metric", "osa", "--normalize", "--format", "tsv"))
    assert [r[:4] for r in rows[1:]] == [[a, b, str(OSA.distance(a, b)), repr(OSA.normalized_distance(a, b))]
                                         for a, b in pairs]


def test_dict_textbook_example_gives_car_first(cli, tmp_path):
    f = tmp_path / "words.txt"
    f.write_text("cat\ncar\ncart\ncare\ncards\ncast\n")
    rows = tsv(cli("edit-distance", "--dict", str(f), "carr", "--top", "3", "--no-signature"))
    assert rows[0] == ["query", "rank", "match", "distance", "count"]
    assert rows[1] == ["carr", "1", "car", "1", "0"]
    assert [r[2] for r in rows[1:]] == ["car", "cart", "care"]


def test_dict_queries_from_stdin_use_counts(cli, tmp_path):
    f = tmp_path / "words.tsv"
    f.write_text("cart\t5\ncar\t2\ncare\t9\n")
    rows = tsv(cli("edit-distance", "--dict", str(f), "--format", "tsv", "--max-distance", "1",
                   input="carr\nxyzzy\n"))
    assert [r[:5] for r in rows[1:]] == [["carr", "1", "care", "1", "9"], ["xyzzy", "", "", "", ""]]


def test_align_operations_replay_a_into_b(cli):
    rows = tsv(cli("edit-distance", "--align", "kitten", "sitting", "--no-signature"))
    assert rows[0] == ["op", "a_index", "b_index", "a", "b"]
    ops = rows[1:]
    assert [op[0] for op in ops] == ["substitute", "match", "match", "match", "substitute", "match", "insert"]
    assert "".join(op[4] for op in ops if op[0] != "delete") == "sitting"
    assert "".join(op[3] for op in ops if op[0] != "insert") == "kitten"


def test_align_table_shows_two_line_view(cli):
    r = cli("edit-distance", "--align", "--format", "table", "kitten", "sitting")
    assert r.returncode == 0
    assert r.stdout.decode().splitlines()[:2] == ["kitten-", "sitting"]


def test_head_1_on_large_input_exits_quietly(tmp_path):
    f = tmp_path / "big.tsv"
    f.write_text("kitten\tsitting\n" * 300_000)
    cmd = f"{sys.executable} -m nlpkit edit-distance --pairs {f} | head -1"
    r = subprocess.run(["sh", "-c", cmd], capture_output=True, cwd=str(REPO), timeout=300)
    assert r.returncode == 0
    assert r.stdout.decode().startswith("a\tb\tdistance")
    assert b"Traceback" not in r.stderr and b"Error" not in r.stderr


def test_missing_file_is_exit_1_naming_it(cli):
    r = cli("edit-distance", "--pairs", "no/such/pairs.tsv")
    assert r.returncode == 1
    assert b"no/such/pairs.tsv" in r.stderr and b"nlpkit: error:" in r.stderr
    r = cli("edit-distance", "--dict", "no/such/words.txt", "x")
    assert r.returncode == 1 and b"no/such/words.txt" in r.stderr


def test_invalid_utf8_is_exit_1_naming_file_and_line(cli, tmp_path):
    f = tmp_path / "bad.tsv"
    f.write_bytes(b"a\tb\nc\t\xff\xfe\n")
    r = cli("edit-distance", "--pairs", str(f))
    assert r.returncode == 1
    assert str(f).encode() in r.stderr and b"line 2" in r.stderr and b"Traceback" not in r.stderr
    rows = tsv(cli("edit-distance", "--pairs", str(f), "--encoding-errors", "replace"))
    assert rows[2][:3] == ["c", "\ufffd\ufffd", "2"]


def test_pairs_line_with_one_column_is_exit_1_naming_the_line(cli, tmp_path):
    f = tmp_path / "pairs.tsv"
    f.write_text("a\tb\nc\td\nlonely\n")
    r = cli("edit-distance", "--pairs", str(f))
    assert r.returncode == 1
    assert b"line 3" in r.stderr and b"found 1" in r.stderr


@pytest.mark.parametrize("fmt,expected", [("tsv", "a\tb\tdistance\tsignature\n"), ("jsonl", "")])
def test_empty_input_gives_header_only(cli, tmp_path, fmt, expected):
    f = tmp_path / "empty.tsv"
    f.write_text("")
    r = cli("edit-distance", "--pairs", str(f), "--format", fmt)
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout.decode() == expected


@pytest.mark.parametrize("args", [["--no-such-option", "a", "b"], ["--metric", "jaro", "a", "b"],
                                  ["--metric", "osa", "--weights", "1,1,2", "a", "b"],
                                  ["--weights", "1,1", "a", "b"], ["only-one"],
                                  ["--align", "--metric", "osa", "ab", "ba"],
                                  ["--top", "3", "a", "b"]])
def test_usage_errors_exit_2(cli, args):
    r = cli("edit-distance", *args)
    assert r.returncode == 2, (args, r.stderr.decode())
    assert b"Traceback" not in r.stderr


def test_single_pair_does_not_import_numpy_or_rich():
    code = ("import sys; sys.argv=['nlpkit','edit-distance','kitten','sitting']\n"
            "from nlpkit.cli.main import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "heavy = [m for m in ('numpy','rich') if m in sys.modules]\n"
            "sys.stderr.write('HEAVY=' + ','.join(heavy))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, cwd=str(REPO))
    assert r.stderr.decode().split("HEAVY=")[1].strip() == ""


def test_pairs_word_level_json_document(cli, tmp_path):
    from rapidfuzz.distance import Levenshtein

    f = tmp_path / "pairs.tsv"
    f.write_text("the cat sat on the mat\tthe cat sat on mat\na b c\tc b a\n")
    doc = json.loads(cli("edit-distance", "--pairs", str(f), "--level", "word", "--format", "json").stdout)
    assert doc["signature"] == f"edit-distance|metric:levenshtein|weights:1,1,1|level:word|norm:no|v:{__version__}"
    assert [r["distance"] for r in doc["results"]] == [
        Levenshtein.distance("the cat sat on the mat".split(), "the cat sat on mat".split()),
        Levenshtein.distance("a b c".split(), "c b a".split())]


_text = st.text(st.characters(blacklist_characters="\t\n\r\\", blacklist_categories=("Cs",)), max_size=15)


@settings(max_examples=60, deadline=None)
@given(_text, _text, st.sampled_from(["levenshtein", "indel", "lcs", "hamming"]),
       st.sampled_from(["char", "word"]))
def test_align_output_replayed_on_a_yields_b(a, b, metric, level):
    """Property: the --align records (in-process click runner, TSV) turn A into B."""
    from click.testing import CliRunner

    from nlpkit.cli.main import cli as group

    r = CliRunner().invoke(group, ["edit-distance", "--align", "--metric", metric, "--level", level,
                                   "--format", "tsv", "--no-signature", "--", a, b])
    assert r.exit_code == 0, r.output
    rows = [line.split("\t") for line in r.output.split("\n")[1:] if line]
    src = list(a) if level == "char" else a.split()
    out, i = [], 0
    for op, a_index, _b_index, unit_a, unit_b in rows:
        if op in ("match", "substitute", "delete"):
            assert int(a_index) == i and src[i] == unit_a
            i += 1
        if op != "delete":
            out.append(unit_b)
    assert i == len(src)
    assert out == (list(b) if level == "char" else b.split())


def test_dictionary_repeats_warn_and_keep_the_first_count(cli, tmp_path):
    (tmp_path / "d.txt").write_text("the\t10\ncat\t3\nthe\t20\n")
    r = cli("edit-distance", "--dict", str(tmp_path / "d.txt"), "--top", "1", "thx", "--format", "tsv",
            "--no-signature")
    assert r.stdout.decode().splitlines()[1] == "thx\t1\tthe\t1\t10"
    assert b"1 repeated word (the first: 'the', line 3)" in r.stderr
