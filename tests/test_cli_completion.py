"""Tab completion: every file argument and option completes file names, every choice its values.

Driven through click's completion protocol (the `type,value` lines `_NLPKIT_COMPLETE=bash_complete`
prints, which completions/nlpkit.bash reads), for each parameter of the command tree. A text
parameter that is not a file must be listed in TEXT_PARAMS: a new file option given a plain string
type fails `test_every_text_parameter_is_meant_to_be_text`.
"""

from __future__ import annotations

import os
import subprocess
import sys

import click
import pytest

from conftest import REPO
from test_cli_option_sweep import command_tree

# (command, parameter name) of free-text parameters: queries, prompts, patterns, names, lists.
TEXT_PARAMS = {
    ("bleu", "metrics"), ("bleu", "tokenize"), ("serve", "host"), ("serve", "api_key"),
    ("bm25 add", "id_field"), ("bm25 add", "field"), ("bm25 add", "dask"),
    ("bm25 index", "id_field"), ("bm25 index", "field"), ("bm25 index", "token_pattern"), ("bm25 index", "dask"),
    ("bm25 search", "query_texts"), ("bm25 search", "query_field"), ("bm25 search", "id_field"),
    ("bm25 search", "field"), ("bm25 search", "token_pattern"), ("bm25 search", "metrics"), ("bm25 search", "tag"),
    ("bpe-train", "special_tokens"), ("bpe-train", "pattern"), ("bpe-train", "dask"),
    ("edit-distance", "args"),
    ("score", "gate_metric"), ("score", "fail_if_below"), ("score", "fail_if_above"),
    ("perplexity", "fail_if_below"), ("perplexity", "fail_if_above"), ("score", "until"), ("score", "extract"), ("score", "ignore_regex"), ("score", "metric"),
    ("score", "tasks"),
    ("generate", "prompt"), ("generate", "stops"), ("generate", "system"), ("generate", "field"),
    ("ngram-train", "dask"),
    ("perplexity", "dask"),
    ("pmi", "token_pattern"), ("pmi", "pairs"), ("pmi", "dask"),
    ("rrf", "metrics"), ("rrf", "tag"), ("rrf", "short_k"),
    ("sample", "prompt"), ("sample", "stops"), ("sample", "system"), ("sample", "field"),
    ("score", "fields"), ("score", "delimiter"), ("score", "system"), ("score", "dask"),
    ("tfidf", "field"), ("tfidf", "id_field"), ("tfidf", "smart"), ("tfidf", "token_pattern"), ("tfidf", "query"),
    ("tfidf", "dask"),
    ("tokenize", "system"),
    ("cache clear", "entries"),   # entry names (completed from the cache), not paths
}

# Arguments that come before the one completed (a file argument after another).
LEADING = {("bm25 add", "corpus"): ["idx"], ("bm25 search", "index_path"): [], ("bm25 add", "index_path"): []}


def completions(words: list[str], incomplete: str = "") -> list[str]:
    """The protocol lines (`type,value`) for `nlpkit WORDS INCOMPLETE<Tab>`."""
    from click.shell_completion import BashComplete

    from nlpkit.cli.main import cli

    comp = BashComplete(cli, {}, "nlpkit", "_NLPKIT_COMPLETE")
    return [comp.format_completion(item) for item in comp.get_completions(words, incomplete)]


def parameters():
    for path, cmd in command_tree():
        if isinstance(cmd, click.Group):
            continue
        for p in cmd.params:
            if getattr(p, "hidden", False) or (isinstance(p, click.Option) and p.is_flag):
                continue
            yield path, p


def words_for(path: str, p: click.Parameter) -> list[str]:
    if isinstance(p, click.Option):
        return path.split() + [max(p.opts, key=len)]
    return path.split() + LEADING.get((path, p.name), [])


def is_file(p: click.Parameter) -> bool:
    from nlpkit.cli.options import ChoiceOrFile

    return isinstance(p.type, (click.Path, ChoiceOrFile))


FILE_PARAMS = [(path, p.name) for path, p in parameters() if is_file(p)]
CHOICE_PARAMS = [(path, p.name) for path, p in parameters() if isinstance(p.type, click.Choice)]


def param(path: str, name: str) -> click.Parameter:
    return next(p for c, p in parameters() if c == path and p.name == name)


@pytest.mark.parametrize("path,name", FILE_PARAMS, ids=lambda x: x)
def test_file_parameter_completes_file_names(path, name):
    lines = completions(words_for(path, param(path, name)))
    assert "file," in lines or "dir," in lines, lines


@pytest.mark.parametrize("path,name", CHOICE_PARAMS, ids=lambda x: x)
def test_choice_parameter_completes_its_values(path, name):
    p = param(path, name)
    lines = completions(words_for(path, p))
    assert lines == [f"plain,{c}" for c in p.type.choices]


def test_every_text_parameter_is_meant_to_be_text():
    text = {(path, p.name) for path, p in parameters()
            if not is_file(p) and not isinstance(p.type, click.Choice)
            and isinstance(p.type, click.types.StringParamType)}
    assert text - TEXT_PARAMS == set(), "a file parameter needs a click.Path type (nlpkit.cli.options.file_type)"


@pytest.mark.parametrize("words", [
    ["perplexity"], ["tokenize", "-m"], ["bleu", "-r"], ["rrf"], ["bm25", "index"], ["ngram-train"],
    ["bpe-train"], ["edit-distance", "--dict"], ["edit-distance", "--pairs"], ["generate", "--prompts"],
    ["sample", "--messages"], ["tokenize", "--messages"],
])
def test_the_reported_file_parameters_complete_file_names(words):
    lines = completions(words)
    assert "file," in lines or "dir," in lines, lines


def test_bleu_tokenize_and_stopwords_offer_their_values():
    assert completions(["bleu", "--tokenize"], "fl") == ["plain,flores101", "plain,flores200"]
    assert completions(["pmi", "--stopwords"], "e") == ["file,e", "plain,english"]
    assert "plain,lucene" in completions(["bm25", "index", "--stopwords"])


def test_completion_protocol_end_to_end(tmp_path):
    """`_NLPKIT_COMPLETE=bash_complete nlpkit ...`, as completions/nlpkit.bash calls it."""
    env = {**os.environ, "COMP_WORDS": "nlpkit bleu --tokenize ", "COMP_CWORD": "3",
           "_NLPKIT_COMPLETE": "bash_complete"}
    r = subprocess.run([sys.executable, "-m", "nlpkit"], capture_output=True, env=env, cwd=str(REPO))
    assert r.returncode == 0
    assert r.stdout.decode().splitlines()[:2] == ["plain,13a", "plain,intl"]
    env["COMP_WORDS"], env["COMP_CWORD"] = "nlpkit perplexity ", "2"
    r = subprocess.run([sys.executable, "-m", "nlpkit"], capture_output=True, env=env, cwd=str(REPO))
    assert r.stdout.decode().splitlines() == ["file,"]


def test_score_field_completes_the_roles():
    from nlpkit.evaluation.items import ALL_ROLES

    assert completions(["score", "--field"]) == [f"plain,{r}=" for r in ALL_ROLES]
    assert completions(["score", "--field"], "ch") == ["plain,choices=", "plain,chosen="]


@pytest.mark.parametrize("path", [p for p, cmd in command_tree() if any("--dask" in q.opts for q in cmd.params)])
def test_dask_completes_local_and_local_n_else_a_scheduler_file(path):
    from nlpkit.workers import available_cpus

    lines = completions(path.split() + ["--dask"])
    assert lines[:2] == ["plain,local", "plain,local:1"] and f"plain,local:{available_cpus()}" in lines
    assert completions(path.split() + ["--dask"], "sched") == ["file,sched"]


def test_shard_size_help_says_what_a_task_holds():
    """score and perplexity said "one counting task": their tasks hold items and windows."""
    from nlpkit.cli.main import cli

    ctx = click.Context(cli)
    for name, what in (("score", "item text per task"), ("perplexity", "tokens of windows per task")):
        opt = next(p for p in cli.get_command(ctx, name).params if p.name == "shard_size")
        assert what in opt.help and "counting" not in opt.help


def test_every_help_example_fits_80_columns():
    """One help example was 88 columns wide: at COLUMNS=80 no line of any command's --help is wider than 80."""
    from click.testing import CliRunner

    from nlpkit.cli.main import cli

    wide = []
    for path, cmd in command_tree():
        r = CliRunner().invoke(cli, path.split() + ["--help"], terminal_width=80, env={"COLUMNS": "80"})
        assert r.exit_code == 0, r.output
        wide += [f"{path}: {line}" for line in r.output.splitlines() if len(line) > 80]
    assert not wide, "\n".join(wide)
