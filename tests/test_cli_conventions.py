"""Conventions every subcommand shares: entry point, help, version, exit codes, start-up imports."""

import json
import os
import subprocess
import sys

import pytest

from conftest import REPO, run_cli
from nlpkit import __version__
from nlpkit.cli.main import COMMANDS


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
    ({}, ["generate", "hi", "--model", _LM, "--chat"], 1,
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
