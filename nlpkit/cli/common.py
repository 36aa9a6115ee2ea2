"""Options and helpers every subcommand shares (the CLI half of the README's "Conventions").

A subcommand module looks like this:

    @click.command("edit-distance")
    @click.argument("a")
    @common_options              # --format, --no-signature, --quiet, --encoding-errors
    def command(a, fmt, no_signature, quiet, encoding_errors):
        from nlpkit.edit.distance import levenshtein          # heavy imports inside
        sig = make_signature("edit-distance", metric="levenshtein")
        with open_writer(["a", "distance"], fmt, sig, no_signature) as out:
            out.write({"a": a, "distance": levenshtein(a, a)})

Inputs: `input_paths(files)` gives the files, or ``["-"]`` when none are given and
stdin is not a terminal. Progress: `progress(...)` gives a callback that draws a
rich bar on stderr only when stderr is a terminal, the work has lasted ~1 s and
``--quiet`` is off.
"""

from __future__ import annotations

import re
import sys
import time
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator, Sequence

import click

from nlpkit.cli.options import ByteSize, Count, FiniteFloat, model_path_type  # noqa: F401 - shared types: cli/options.py
from nlpkit.errors import NlpkitError
from nlpkit.io import FORMATS, RecordWriter, stderr_is_terminal, stdout_is_terminal

ProgressFn = Callable[..., None]


def format_option(f):
    return click.option(
        "--format", "fmt", type=click.Choice(FORMATS), default=None,
        help="Output format [default: table on a terminal, tsv otherwise]. TSV cells write backslash, tab, "
             "newline and CR as \\\\, \\t, \\n, \\r; a list of text as a JSON array.")(f)


def signature_option(f):
    return click.option("--no-signature", is_flag=True,
                        help="Leave the settings signature out of the output.")(f)


def quiet_option(f):
    # eager: parsed first, so option types that warn (a capped --jobs) already know it
    return click.option("-q", "--quiet", is_flag=True, is_eager=True,
                        help="No progress or warnings on stderr.")(f)


def encoding_option(f):
    return click.option(
        "--encoding-errors", type=click.Choice(["strict", "replace"]), default="strict",
        show_default=True, help="Invalid UTF-8 in inputs: an error naming file and line, or U+FFFD.")(f)


def common_options(f):
    """--format, --no-signature, --quiet, --encoding-errors (in that parameter order)."""
    for deco in (encoding_option, quiet_option, signature_option, format_option):
        f = deco(f)
    return f


def resolve_format(fmt: str | None) -> str:
    """The --format value, or the default: table on a terminal, tsv otherwise."""
    if fmt:
        return fmt
    return "table" if stdout_is_terminal() else "tsv"


def open_writer(columns: Sequence[str], fmt: str | None, signature: str | None,
                no_signature: bool = False, title: str | None = None,
                digits: int = 4, labels: Sequence[str] | None = None,
                path_columns: Sequence[str] = ()) -> RecordWriter:
    """A `RecordWriter` on stdout honouring --format and --no-signature (`path_columns`: more columns
    that hold paths, shown by basename in a table)."""
    return RecordWriter(columns, fmt=resolve_format(fmt),
                        signature=None if no_signature else signature, title=title, digits=digits,
                        labels=labels, path_columns=path_columns)


def top_option(default: int | None, help: str, short: bool = True):
    """``-k/--top N``: the same name and meaning in every subcommand (0 = all)."""
    names = ("-k", "--top") if short else ("--top",)
    return click.option(*names, "top", type=Count(0), default=default,
                        show_default=default is not None, metavar="N", help=help)


def input_paths(files: Sequence[str], what: str = "input", argument: str = "FILE") -> list[str]:
    """Files as given; none given -> stdin ('-') when it is piped, else a usage error. Piped stdin
    that is empty is an error too (exit 1): a job that forgot its input must not pass."""
    if files:
        return list(files)
    if stdin_is_piped():
        if stdin_is_empty():
            from nlpkit.errors import NlpkitError

            raise NlpkitError(f"no input (no {argument} given, and stdin is empty)")
        return ["-"]
    raise click.UsageError(f"no {what}: give a {argument} (or '-') or pipe text on stdin")


def stdin_is_piped() -> bool:
    """stdin is a pipe, a file or /dev/null rather than a terminal."""
    try:
        return sys.stdin is not None and not sys.stdin.isatty()
    except (AttributeError, ValueError):
        return False


def stdin_is_empty() -> bool:
    """Piped stdin holds no byte (waits for the first one; it stays buffered for the reader)."""
    buffer = getattr(sys.stdin, "buffer", None)
    if buffer is None or not hasattr(buffer, "peek"):
        return False
    try:
        return buffer.peek(1) == b""
    except (OSError, ValueError):
        return False


def warn(message: str, quiet: bool = False) -> None:
    """A warning on stderr (`nlpkit: warning: ...`), unless --quiet."""
    if not quiet:
        sys.stderr.write(f"nlpkit: warning: {message}\n")


_PARAMETER = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*)`")

# Core parameters whose option is not ``--`` + the name in every command that has them; a command's own
# exceptions are declared on it with `named_flags` (``@named_flags(pattern="--token-pattern")``).
CORE_FLAGS = {"address": "--dask", "errors": "--encoding-errors", "messages_file": "--messages"}


def flag(name: str) -> str:
    """The option that sets the core parameter `name`: ``min_df`` -> ``--min-df``."""
    return "--" + name.replace("_", "-")


def cli_message(error: BaseException, **flags: str) -> str:
    """A core error's message as the CLI shows it: each parameter the core names in backticks spelled as
    the option a user typed (`` `min_df` `` -> ``--min-df``). `flags` (and `named_flags` around the call)
    give the options whose name is not the parameter's (``k="--rrf-k"``).

    >>> cli_message(NlpkitError("`b` must be between 0 and 1, got 2"))
    '--b must be between 0 and 1, got 2'
    """
    names = {**CORE_FLAGS, **getattr(error, "flags", {}), **flags}
    return _PARAMETER.sub(lambda m: names.get(m[1]) or flag(m[1]), str(error))


@contextmanager
def named_flags(**flags: str) -> Iterator[None]:
    """Core errors raised in the block spell these parameters as the given options when shown
    (``with named_flags(k="--rrf-k"): fuse(...)``, or ``@named_flags(...)`` right above a command's
    function); the error itself is unchanged, and an inner block's names win."""
    try:
        yield
    except NlpkitError as e:
        e.flags = {**flags, **getattr(e, "flags", {})}
        raise


SHARD_HELP = ("With --dask: bytes of input per task (64M, 1G; cut at record ends; a compressed file is one task; "
              "auto: 2 tasks per worker, at most 64M, and one counting task on a single worker).")


def _complete_dask(ctx, param, incomplete):
    """--dask: ``local`` and ``local:N`` (N up to the CPUs available), else file names (a scheduler file)."""
    from click.shell_completion import CompletionItem

    from nlpkit.workers import available_cpus

    names = ["local"] + [f"local:{n}" for n in range(1, available_cpus() + 1)]
    hits = [CompletionItem(n) for n in names if n.startswith(incomplete)]
    return hits or [CompletionItem(incomplete, type="file")]


def dask_options(f=None, *, shard_help: str = SHARD_HELP):
    """--dask ADDRESS ($NLPKIT_DASK) and --shard-size: run the counting stage on a Dask cluster. `shard_help` says
    what a task holds where it is not a counting task (score: items; perplexity: windows)."""
    if f is None:
        return lambda g: dask_options(g, shard_help=shard_help)
    f = click.option("--shard-size", type=ByteSize(), default="auto", show_default=True, help=shard_help)(f)
    return click.option("--dask", "dask", default=None, envvar="NLPKIT_DASK", metavar="ADDRESS",
                        shell_complete=_complete_dask,
                        help="Run on Dask: local, local:N (N worker processes), tcp://HOST:PORT, "
                             "tls://HOST:PORT or a scheduler file [$NLPKIT_DASK]; needs "
                             "pip install 'nlpkit[dask]'.")(f)


def dask_from_env() -> bool:
    """True when --dask came from $NLPKIT_DASK (a mode --dask does not cover then runs locally)."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return False
    return ctx.get_parameter_source("dask") == click.core.ParameterSource.ENVIRONMENT


def dask_for(dask: str | None, paths: Sequence[str]) -> str | None:
    """The --dask address for these inputs: workers read files, so stdin ('-') runs here when the
    address came from $NLPKIT_DASK, and is a usage error with --dask itself. --shard-size without
    --dask has no effect: a warning says so."""
    ctx = click.get_current_context(silent=True)
    if not dask and ctx is not None and "shard_size" in ctx.params \
            and ctx.get_parameter_source("shard_size") != click.core.ParameterSource.DEFAULT:
        warn("--shard-size applies to --dask only; ignored", bool(ctx.params.get("quiet")))
    if dask and "-" in paths:
        if dask_from_env():
            return None
        raise click.UsageError("--dask reads files (local, shared or fsspec URLs), not stdin ('-'): "
                               "give the input as a file")
    return dask


class _Progress:
    """Callback `(done, total=None)` that starts a rich bar on stderr after `delay` seconds."""

    def __init__(self, description: str, total: float | None, enabled: bool, delay: float) -> None:
        self.description = description
        self.total = total
        self.enabled = enabled
        self.start = time.monotonic()
        self.delay = delay
        self.bar = None
        self.task = None

    def __call__(self, done: float, total: float | None = None) -> None:
        if not self.enabled:
            return
        if total is not None:
            self.total = total
        if self.bar is None:
            if time.monotonic() - self.start < self.delay:
                return
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                       TimeElapsedColumn, TimeRemainingColumn)

            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TimeElapsedColumn(), TimeRemainingColumn(),
                                console=Console(file=sys.stderr), transient=True)
            self.bar.start()
            self.task = self.bar.add_task(self.description, total=self.total)
        self.bar.update(self.task, completed=done, total=self.total)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def stream_line(pieces: Iterable[str], echo: str = "") -> bool:
    """Write `echo`, then each text piece as it comes, to stdout, and end with a newline (on a
    terminal and in a pipe alike) unless the text already ends with one. False when the reader went
    away (`| head`): stdout is silenced and the caller stops quietly."""
    from nlpkit.io import silence_stdout

    out = sys.stdout
    try:
        last = ""
        if echo:
            out.write(echo)
            out.flush()
            last = echo
        for piece in pieces:
            if piece:
                out.write(piece)
                out.flush()
                last = piece
        if not last.endswith("\n"):
            out.write("\n")
        out.flush()
    except BrokenPipeError:
        silence_stdout()
        return False
    return True


@contextmanager
def progress(description: str, total: float | None = None, quiet: bool = False,
             delay: float = 1.0) -> Iterator[ProgressFn]:
    """`with progress("merging", total=n, quiet=quiet) as tick: tick(i)` — stderr only, lazy."""
    p = _Progress(description, total, enabled=(not quiet) and stderr_is_terminal(), delay=delay)
    try:
        yield p
    finally:
        p.close()


ROPE_CHOICES = ("none", "linear", "ntk", "dynamic", "yarn", "llama3")


def no_cache_option(f):
    """--no-cache: load models from their files, without the prepared-model cache (the command receives `no_cache`;
    `load_spec` makes it the spec's `use_cache`)."""
    return click.option("--no-cache", is_flag=True,
                        help="Load the model from its file without the prepared-model cache, and write no "
                             "cache entry [$NLPKIT_NO_CACHE].")(f)


WEIGHTS_CHOICES = ("auto", "native", "float32")
_DECODING_COMMANDS = ("generate", "sample")


def weights_option(f):
    """--weights auto|native|float32: the layout a transformer's weights are held in; $NLPKIT_WEIGHTS, when the user
    set it, is read here, once (the command receives `weights`: None when neither says)."""
    return click.option("--weights", type=click.Choice(WEIGHTS_CHOICES), default=None, envvar="NLPKIT_WEIGHTS",
                        help="Hold the weights as the file stores them (native: memory near the file's size, "
                             "expanded per layer as used) or as float32 (fastest decoding); auto: native for "
                             "scoring and for models whose float32 copy would not fit in memory "
                             "[$NLPKIT_WEIGHTS, else auto].")(f)


def load_spec(path: str | None, weights: str | None = None, no_cache: bool = False, purpose: str = "score",
              rope_scaling: str | None = None, rope_factor: float | None = None):
    """The command's `nlpkit.lm.spec.LoadSpec`: what its options say of how to load the model at `path`, and what
    the command does with it (`purpose`: "score" or "decode", what `--weights auto` weighs)."""
    from nlpkit.lm.spec import LoadSpec

    return LoadSpec(path, weights=weights or "auto", purpose=purpose, rope_scaling=rope_scaling,
                    rope_factor=rope_factor, use_cache=False if no_cache else None)


_MODEL_PARAMS = ("model_path", "rope_scaling", "rope_factor", "weights", "no_cache")


def model_options(f):
    """-m/--model, --rope-scaling, --rope-factor, --no-cache, --weights: how perplexity, generate and sample
    pick a model; the command receives them as one `model: LoadSpec` (its purpose: decode for generate and sample,
    else score)."""
    import functools

    @functools.wraps(f)
    def command(*args, **kwargs):
        path, rope_scaling, rope_factor, weights, no_cache = (kwargs.pop(name) for name in _MODEL_PARAMS)
        purpose = "decode" if click.get_current_context().command.name in _DECODING_COMMANDS else "score"
        kwargs["model"] = load_spec(path, weights, no_cache, purpose, rope_scaling, rope_factor)
        return f(*args, **kwargs)

    g = no_cache_option(weights_option(command))
    g = click.option("--rope-factor", type=FiniteFloat(min=0, min_open=True), default=None,
                     help="RoPE scaling factor s: with --rope-scaling, or alone to scale the model's own "
                          "RoPE type (linear when it has none).")(g)
    g = click.option("--rope-scaling", type=click.Choice(ROPE_CHOICES), default=None,
                     help="Override RoPE scaling: linear interpolation, NTK-aware base change, "
                          "transformers' dynamic NTK, YaRN, Llama 3.1 [the model's own].")(g)
    g = click.option("-m", "--model", "model_path", default=None, metavar="PATH", type=model_path_type(),
                     help="Hugging Face model directory, .gguf file, n-gram model (ARPA, .arpa.gz, an "
                          "ngram-train counts file), or 'default' (the shipped model) [$NLPKIT_MODEL, else the "
                          "shipped model].")(g)
    return g


# Flag pairs named whole when an option is refused
_FLAG_PAIRS = {"add_bos": "--add-bos/--no-add-bos"}


def option_needs() -> dict:
    """Option (parameter name) -> the `nlpkit.lm.interface.Capability` it needs, in the order they are checked."""
    from nlpkit.lm.interface import Capability as C

    return {"mode": C.WINDOWS, "context": C.WINDOWS, "stride": C.WINDOWS, "add_bos": C.WINDOWS,
            "rope_scaling": C.POSITIONS, "rope_factor": C.POSITIONS, "no_kv_cache": C.KV_CACHE,
            "sliding": C.CONTEXT_WINDOW, "truncate_prompt": C.PROMPT_TRUNCATION, "chat": C.CHAT, "system": C.CHAT,
            "messages_file": C.CHAT, "compare": C.LOGITS, "weights": C.WEIGHTS_LAYOUT}


def refuse_inapplicable(ctx: click.Context, backend, params: Sequence[str] | None = None) -> None:
    """A usage error for the first option given (on the command line or by its environment variable) that needs a
    capability this kind of model does not declare (`backend.capabilities`; the reason is its `why_not`), e.g.
    --context or --weights for an n-gram model. `params`: only these (default: every option `option_needs` names)."""
    from click.core import ParameterSource

    for name, needs in option_needs().items():
        if needs in backend.capabilities or (params is not None and name not in params) or name not in ctx.params:
            continue
        source = ctx.get_parameter_source(name)
        if source in (ParameterSource.DEFAULT, None):
            continue
        opt = _FLAG_PAIRS.get(name) or CORE_FLAGS.get(name) or flag(name)
        if source is ParameterSource.ENVIRONMENT:
            opt = "$" + next(p.envvar for p in ctx.command.params if p.name == name)
        raise click.UsageError(f"{opt} does not apply to {backend.described} ({backend.why_not[needs]})")
