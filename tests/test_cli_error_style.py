"""One error style: an invalid option value is a usage error (exit 2) printed as one line
`nlpkit: error: ...`, and a directory where a file is expected is that error for every file
parameter of every subcommand (generated from the click command tree)."""

from __future__ import annotations

import click
import pytest

from test_cli_completion import LEADING, parameters


def file_params():
    for path, p in parameters():
        if isinstance(p.type, click.Path) and not p.type.dir_okay:
            yield path, p


CASES = [(path, p.name) for path, p in file_params()]


def one_line_usage_error(r) -> str:
    err = r.stderr.decode()
    assert r.returncode == 2, err
    assert err.startswith("nlpkit: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err and "Usage:" not in err
    return err


@pytest.mark.parametrize("path,name", CASES, ids=lambda x: x)
def test_a_directory_where_a_file_is_expected_is_a_usage_error(cli, tmp_path, path, name):
    p = next(q for c, q in parameters() if c == path and q.name == name)
    adir = tmp_path / "adir"
    adir.mkdir()
    words = path.split()
    if isinstance(p, click.Option):
        words += [max(p.opts, key=len), str(adir)]
    else:
        words += [str(tmp_path / w) for w in LEADING.get((path, name), [])] + [str(adir)]
    err = one_line_usage_error(cli(*words, input=b""))
    assert "is a directory" in err


@pytest.mark.parametrize("args", [["pmi", "{d}"], ["tokenize", "{d}"], ["ngram-train", "x.txt", "-o", "{d}"],
                                  ["perplexity", "{d}"], ["edit-distance", "--dict", "{d}", "x"]])
def test_the_reported_directory_cases_agree(cli, tmp_path, args):
    err = one_line_usage_error(cli(*[a.format(d=tmp_path) for a in args]))
    assert f"'{tmp_path}' is a directory" in err


@pytest.mark.parametrize("args", [
    ["perplexity", "--rope-scaling", "linear", "--rope-factor", "nan"],
    ["perplexity", "--rope-scaling", "linear", "--rope-factor", "-2"],
    ["pmi", "--no-such-option"],
    ["pmi", "--measure", "nope"],
    ["generate", "--top-p", "2", "x"],
    ["pmi", "-w", "1"],
])
def test_usage_errors_are_one_line(cli, args):
    one_line_usage_error(cli(*args, input=b"some text\n"))


def test_options_with_no_effect_are_refused_or_warned(cli, tmp_path):
    words = tmp_path / "w.txt"
    words.write_text("spelling\t10\n")
    err = one_line_usage_error(cli("edit-distance", "--dict", str(words), "--edit-odds", "5", "speling"))
    assert "--edit-odds applies to --rank channel only" in err
    r = cli("pmi", "-", "--shard-size", "64M", input=b"the cat sat on the mat\n")
    assert r.returncode == 0 and "nlpkit: warning: --shard-size applies to --dask only; ignored" in r.stderr.decode()
    corpus = tmp_path / "c.tsv"
    corpus.write_text("d1\tthe cat\n")
    r = cli("bm25", "index", str(corpus), "--corpus-format", "tsv", "-o", str(tmp_path / "i"), "--delta", "1")
    assert r.returncode == 0
    assert "nlpkit: warning: --delta applies to --variant bm25l and bm25+ only; lucene ignores it" in r.stderr.decode()
