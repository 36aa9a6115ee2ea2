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
