"""Every numeric option of every subcommand, given hostile values, ends cleanly.

The cases are generated from the click command tree: each option whose type is numeric (click's
int/float types and ranges, nlpkit's number lists and byte sizes) is given ``nan``, ``inf``,
``-inf``, ``-1``, ``0``, ``1e300``, ``2**31`` and ``2**63`` on a small valid input. Each run must end within
the timeout with exit 0 (then with no NaN or infinity in the output), 1, 2 or 3 (a failed gate), with no traceback, no
"unexpected" error, no Python warning on stderr and no process left behind; a value outside the option's
declared range is a usage error naming the option. Every integer option has a ceiling of at most 2147483647 (the
README's "counts up to 2147483647"; worker counts are capped at the CPUs instead) and every real one refuses
``nan`` and ``inf`` (`test_every_numeric_option_is_bounded`). A new subcommand or numeric option without a base
invocation below fails `test_every_numeric_option_is_swept`.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import click
import pytest

from conftest import FIXTURES, REPO
from nlpkit.errors import GATE_FAILED

VALUES = ("nan", "inf", "-inf", "-1", "0", "1e300", str(2 ** 31), str(2 ** 63))
MODEL = str(FIXTURES / "lm" / "llama-gqa")
ARPA = str(FIXTURES / "ngram" / "tiny-3.arpa")
TOKENIZER = str(FIXTURES / "tokenizers" / "bl-llama3")
SCORE_MODEL = str(FIXTURES / "score" / "models" / "gpt2-bpe")
COMPARE = FIXTURES / "lm" / "compare" / "tiny"   # a model and its base with one tokenizer (perplexity's gates)
TIMEOUT = 60  # seconds: generous for a loaded machine; a healthy run takes about one

TEXT = ("The cat sat on the mat. The dog sat on the log.\n"
        "A cat and a dog met on the mat.\nThe mat was red and the log was brown.\n")
CORPUS = "d1\tthe boundary layer of heat transfer\nd2\tsome other text about flow\nd3\tboundary conditions\n"
RUN_A = "1 Q0 d1 1 3.0 a\n1 Q0 d2 2 2.0 a\n1 Q0 d3 3 1.0 a\n"
RUN_B = "1 Q0 d2 1 3.0 b\n1 Q0 d1 2 2.0 b\n"
QRELS = "1 0 d1 1\n1 0 d3 1\n"

# The invocation each command's options are swept on ({name} = a file in the case directory).
BASE: dict[str, list[str]] = {
    "bleu": ["{hyp}", "-r", "{ref}", "-m", "bleu,chrf,ter"],
    "bm25 index": ["{corpus}", "--corpus-format", "tsv", "-o", "{out}/idx"],
    "bm25 search": ["{index}", "--query", "boundary layer"],
    "bm25 add": ["{index}", "{corpus2}", "--corpus-format", "tsv"],
    "bpe-train": ["{text}", "-o", "{out}/tok", "--vocab-size", "300"],
    "edit-distance": ["kitten", "sitting"],
    "generate": ["The cat", "-m", MODEL, "--max-new-tokens", "3", "--seed", "1"],
    "ngram-train": ["{text}", "-o", "{out}/lm.arpa"],
    "perplexity": ["{text}", "-m", MODEL],
    "pmi": ["{text}"],
    "rrf": ["{run_a}", "{run_b}"],
    "score": ["-m", SCORE_MODEL, str(FIXTURES / "score" / "mc.jsonl"), "--summary-only"],
    "serve": ["-m", ARPA, "--port", "0"],   # refused after the options (an n-gram model): never left listening
    "sample": ["The cat", "-m", MODEL, "-n", "2", "--max-new-tokens", "3", "--seed", "1"],
    "tfidf": ["{text}", "--docs", "lines"],
    "tokenize": ["{text}", "-t", TOKENIZER],
}

# Options that act only with another setting: swept with it, so the value is really used.
CONTEXT: dict[tuple[str, str], list[str]] = {
    ("bleu", "--smooth-value"): ["--smooth-method", "add-k"],
    ("bleu", "--confidence-n"): ["--confidence"],
    ("bleu", "--paired-n"): ["{hyp}", "--paired-bs"],
    ("bleu", "--seed"): ["--confidence", "--confidence-n", "20"],
    ("bm25 index", "--delta"): ["--variant", "bm25l"],
    ("bm25 search", "--delta"): ["--variant", "bm25l", "--corpus", "{corpus}", "--corpus-format", "tsv"],
    ("bm25 search", "--k1"): ["--corpus", "{corpus}", "--corpus-format", "tsv"],
    ("bm25 search", "--b"): ["--corpus", "{corpus}", "--corpus-format", "tsv"],
    ("edit-distance", "--weights"): [],
    ("edit-distance", "--top"): ["--dict", "{dict}", "speling"],
    ("edit-distance", "--max-distance"): ["--dict", "{dict}", "speling"],
    ("edit-distance", "--edit-odds"): ["--dict", "{dict}", "--rank", "channel", "speling"],
    ("ngram-train", "--k"): ["--smoothing", "add-k"],
    ("perplexity", "--rope-factor"): ["--rope-scaling", "linear"],
    ("generate", "--rope-factor"): ["--rope-scaling", "linear"],
    ("sample", "--rope-factor"): ["--rope-scaling", "linear"],
    ("perplexity", "--stride"): ["--context", "16"],
    ("pmi", "--jobs"): ["{big}"],
    ("tfidf", "--jobs"): ["{big}"],
    ("tokenize", "--jobs"): ["{big}"],
    ("ngram-train", "--jobs"): ["{big}"],
    ("bpe-train", "--jobs"): ["{big}"],
    ("rrf", "--weights"): [],
    ("score", "--bootstrap"): ["-m", SCORE_MODEL],
    ("score", "--seed"): ["-m", SCORE_MODEL],
    ("score", "--fail-if-worse"): ["-m", SCORE_MODEL],
}

# Options whose setting needs another input than the command's base invocation.
BASE_FOR: dict[tuple[str, str], list[str]] = {
    ("score", "--beta"): ["-m", SCORE_MODEL, "--reference", SCORE_MODEL, str(FIXTURES / "score" / "preference.jsonl"),
                          "--summary-only"],
    **{("perplexity", gate): ["{text}", "-m", str(COMPARE / "model"), "--compare", str(COMPARE / "base")]
       for gate in ("--fail-if-kld-above", "--fail-if-ppl-ratio-above", "--fail-if-same-top-below")},
}

# For list options: where the swept value goes.
TEMPLATES: dict[tuple[str, str], list[str]] = {
    ("edit-distance", "--weights"): ["{v},1,1", "1,1,{v}"],
    ("rrf", "--weights"): ["{v},1", "1,{v}"],
    ("tfidf", "--ngram-range"): ["1,{v}", "{v},2"],
}


def command_tree():
    """(command path, click command) for every subcommand, groups and their members included."""
    from nlpkit.cli.main import cli

    out = []

    def walk(cmd, path):
        if path:
            out.append((" ".join(path), cmd))
        if isinstance(cmd, click.Group):
            ctx = click.Context(cmd)
            for name in cmd.list_commands(ctx):
                walk(cmd.get_command(ctx, name), path + [name])

    walk(cli, [])
    return out


def is_numeric(param: click.Parameter) -> bool:
    from nlpkit.cli.options import NUMERIC_TYPES

    return isinstance(param, click.Option) and not param.is_flag and isinstance(param.type, NUMERIC_TYPES)


def numeric_options() -> list[tuple[str, str]]:
    """(command path, longest option name) for each numeric option."""
    cases = []
    for path, cmd in command_tree():
        for p in cmd.params:
            if is_numeric(p) and not p.hidden:
                cases.append((path, max(p.opts, key=len)))
    return cases


def test_every_numeric_option_is_swept():
    commands = {path for path, cmd in command_tree() if not isinstance(cmd, click.Group)}
    numeric = {path for path, _ in numeric_options()}
    assert numeric - set(BASE) == set(), "give these commands a base invocation in BASE"
    assert commands - {"completion"} <= set(BASE) | (commands - numeric)


def option_param(path: str, option: str) -> click.Parameter:
    cmd = dict(command_tree())[path]
    return next(p for p in cmd.params if option in p.opts)


def test_every_numeric_option_is_bounded():
    """Integers: a range whose ceiling is at most INT_MAX (a count past it, or a seed of 2**63, is a usage error,
    not an overflow deep inside numpy); worker counts (`Jobs`) instead cap at the CPUs. Reals: nan and inf refused
    (`FiniteFloat`)."""
    from nlpkit.cli.options import INT_MAX, Jobs, FiniteFloat

    unbounded = []
    for path, option in numeric_options():
        t = option_param(path, option).type
        if isinstance(t, Jobs):
            continue
        if isinstance(t, click.types.IntParamType):
            if not isinstance(t, click.IntRange) or t.max is None or t.max > INT_MAX:
                unbounded.append(f"{path} {option}: {t!r}")
        elif isinstance(t, click.types.FloatParamType) and not isinstance(t, FiniteFloat):
            unbounded.append(f"{path} {option}: {t!r} takes nan/inf")
    assert not unbounded, "\n".join(unbounded)


def out_of_range(param: click.Parameter, value: str) -> bool:
    """Whether `value` is a number outside the option's declared range (then it must be a usage error; a worker
    count past the CPUs is capped instead)."""
    from nlpkit.cli.options import ByteSize, Jobs

    t = param.type
    if isinstance(t, ByteSize):
        return value.isdigit() and int(value) > ByteSize.MAX_BYTES
    if not isinstance(t, click.types._NumberRangeBase):
        return False
    try:
        x = int(value) if isinstance(t, click.types.IntParamType) else float(value)
    except ValueError:
        return False
    if x != x:
        return False
    lo_bad = t.min is not None and (x < t.min or (t.min_open and x == t.min))
    hi_bad = t.max is not None and (x > t.max or (t.max_open and x == t.max))
    return lo_bad or (hi_bad and not isinstance(t, Jobs))


@pytest.fixture(scope="module")
def case_files(tmp_path_factory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("sweep")
    files = {"text": TEXT, "hyp": "the cat sat on the mat\na dog\n", "ref": "the cat sat on a mat\nthe dog\n",
             "corpus": CORPUS, "corpus2": "d4\tmore text on heat\n", "run_a": RUN_A, "run_b": RUN_B,
             "qrels": QRELS, "dict": "spelling\t10\nspewing\t3\nselling\t5\n"}
    paths = {}
    for name, body in files.items():
        (d / name).write_text(body, encoding="utf-8")
        paths[name] = str(d / name)
    (d / "big").write_text(TEXT * 2000, encoding="utf-8")   # large enough for worker pools
    paths["big"] = str(d / "big")
    paths["root"] = str(d)
    return paths


def _session_members(sid: int) -> list[str]:
    """Processes (pid and command) still in session `sid`."""
    left = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            fields = stat[stat.rindex(")") + 2:].split()
            if int(fields[3]) == sid:
                left.append(f"{entry} {stat[stat.index('(') + 1:stat.rindex(')')]} {fields[0]}")
        except (OSError, ValueError, IndexError):
            continue
    return left


def run_case(args: list[str], cwd: str) -> tuple[int | None, str, str, list[str]]:
    """Run nlpkit in a new session; (exit status or None on timeout, stdout, stderr, leftovers)."""
    env = dict(os.environ)
    env.pop("NLPKIT_DEBUG", None)
    env.pop("NLPKIT_DASK", None)
    p = subprocess.Popen([sys.executable, "-m", "nlpkit", *args], stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd, env=env,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=TIMEOUT)
        code = p.returncode
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        code = None
    left = []
    for _ in range(20):   # workers may take a moment to see their parent gone
        left = _session_members(p.pid)
        if not left:
            break
        time.sleep(0.1)
    if left:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return code, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), left


NONFINITE = re.compile(r"(?<![\w.])[-+]?(nan|inf|infinity)(?![\w.])", re.IGNORECASE)


def problems(code, out: str, err: str, left: list[str]) -> list[str]:
    found = []
    if code is None:
        found.append(f"no exit within {TIMEOUT} s")
    elif code not in (0, 1, 2, GATE_FAILED):
        found.append(f"exit {code}")
    if "Traceback" in err or "unexpected" in err:
        found.append("traceback/unexpected: " + err.strip().splitlines()[-1][:300])
    if re.search(r"\w+Warning\b", err):
        found.append("a Python/numpy warning on stderr: " + re.search(r".*\w+Warning\b.*", err).group(0)[:200])
    if code == 0 and NONFINITE.search(out):
        found.append("non-finite number in the output: " + NONFINITE.search(out).group(0))
    if code == GATE_FAILED and not err.startswith(("nlpkit: gate failed:", "nlpkit: warning:")):
        found.append("gate failure not in nlpkit's style: " + err.strip()[:200])
    if code in (1, 2) and not err.startswith(("nlpkit: error:", "nlpkit: warning:")):
        found.append("error not in nlpkit's style: " + err.strip()[:200])
    if left:
        found.append(f"processes left behind: {left}")
    return found


def _fill(args: list[str], files: dict[str, str], out: str, index: str) -> list[str]:
    return [a.format(out=out, index=index, **files) for a in args]


@pytest.fixture(scope="module")
def index_dir(case_files) -> str:
    d = Path(case_files["root"]) / "base-index"
    r = subprocess.run([sys.executable, "-m", "nlpkit", "bm25", "index", case_files["corpus"], "--corpus-format",
                        "tsv", "-o", str(d), "-q"], capture_output=True, cwd=str(REPO))
    assert r.returncode == 0, r.stderr.decode()
    return str(d)


@pytest.mark.parametrize("path,option", numeric_options(), ids=lambda x: x)
def test_numeric_option_survives_hostile_values(path, option, case_files, index_dir, tmp_path):
    base = BASE_FOR.get((path, option), BASE[path])
    context = CONTEXT.get((path, option), [])
    templates = TEMPLATES.get((path, option), ["{v}"])
    param = option_param(path, option)
    failures = []
    for value in VALUES:
        for template in templates:
            case_dir = tmp_path / f"case{len(list(tmp_path.iterdir()))}"
            case_dir.mkdir()
            index = str(case_dir / "index")
            if "{index}" in " ".join(base):
                import shutil

                shutil.copytree(index_dir, index)
            words = path.split() + _fill(base + context, case_files, str(case_dir), index)
            args = words + [option, template.replace("{v}", value)]
            code, out, err, left = run_case(args, str(case_dir))
            found = problems(code, out, err, left)
            if out_of_range(param, template.replace("{v}", value)) and "{v}" == template and code != 2:
                found.append(f"outside the option's range {param.type._describe_range()} but exit {code}")
            for problem in found:
                failures.append(f"nlpkit {' '.join(args[:len(path.split())])} ... {option} "
                                f"{template.replace('{v}', value)}: {problem}")
    assert not failures, "\n".join(failures)
