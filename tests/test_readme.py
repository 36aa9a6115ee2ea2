"""README's set-up commands are the ones CI runs."""

import re

from conftest import REPO


def _commands(text: str) -> list[str]:
    return re.findall(r"```sh\n(.*?)\n```", text, flags=re.S)


def test_readme_set_up_has_exactly_two_commands():
    setup = REPO.joinpath("README.md").read_text().split("## Set up", 1)[1].split("\n## ", 1)[0]
    assert len(_commands(setup)) == 2


def test_ci_runs_the_readme_test_command():
    setup = REPO.joinpath("README.md").read_text().split("## Set up", 1)[1].split("\n## ", 1)[0]
    test_cmd = _commands(setup)[1].strip()
    assert test_cmd in REPO.joinpath(".ci", "run").read_text()


def test_readme_main_job_is_generation_with_default_model():
    setup = REPO.joinpath("README.md").read_text().split("## Set up", 1)[1]
    assert 'nlpkit generate "It was a dark and stormy night"' in _commands(setup)[0]


def test_readme_is_a_front_door_under_250_lines():
    """Reference text belongs in docs/ (a page per command, models, evaluation, scaling), not the README."""
    assert len(REPO.joinpath("README.md").read_text().splitlines()) < 250


def test_readme_counts_the_registered_subcommands():
    from nlpkit.cli.main import COMMANDS

    words = {12: "twelve", 13: "thirteen", 14: "fourteen", 15: "fifteen", 16: "sixteen", 17: "seventeen"}
    n = len(set(COMMANDS) - {"completion"})
    assert f"{words.get(n, str(n))} subcommands (and `completion`)" in REPO.joinpath("README.md").read_text()
