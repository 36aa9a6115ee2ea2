"""Click parameter types every subcommand shares: real numbers in range, worker counts capped at
the CPUs available, comma-separated number lists.

Each numeric option uses one of these (or click's own int/float ranges), so a hostile value
(``nan``, ``inf``, ``-1``, ``2**63``) is a usage error (one line, exit 2) before any
work starts; `NUMERIC_TYPES` lets the tests find every numeric option of the command tree.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import click

from nlpkit.workers import available_cpus

INT_MAX = 2**31 - 1   # the largest count or size an integer option takes (numpy int32 indices and C ints)


class FiniteFloat(click.FloatRange):
    """A float in [min, max] that is a real number: ``inf`` and ``nan`` are usage errors.

    >>> FiniteFloat(min=0).convert("1e300", None, None)
    1e+300
    """

    name = "number"

    def convert(self, value, param, ctx):
        if isinstance(value, str) and value.strip().lower().lstrip("+-") in ("nan", "inf", "infinity"):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        rv = super().convert(value, param, ctx)
        if isinstance(rv, float) and not math.isfinite(rv):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return rv


class Count(click.IntRange):
    """An integer in [min, max] with a finite default ceiling (`INT_MAX`): ``2**63`` is a usage
    error, not an overflow deep inside numpy."""

    def __init__(self, min: int | None = None, max: int | None = INT_MAX, **kw: Any) -> None:
        super().__init__(min=min, max=max, **kw)

    _converting = False

    def convert(self, value, param, ctx):
        self._converting = True            # an error names the whole range, the ceiling included
        try:
            return super().convert(value, param, ctx)
        finally:
            self._converting = False

    def _describe_range(self) -> str:
        """The help shows the floor only when the ceiling is the common one (`INT_MAX`, said once in the README);
        an error shows both."""
        if self.max == INT_MAX and self.min is not None and not self.max_open and not self._converting:
            return f"x{'>' if self.min_open else '>='}{self.min}"
        return super()._describe_range()


class Seed(Count):
    """A random seed in [min, `INT_MAX`]: sacrebleu's and numpy's seeds are non-negative, and a seed a run
    draws itself (`secrets.randbelow(2**31)`) can be given back. ``-1`` = random where `min` is -1 (the
    decoding commands, as llama.cpp)."""

    def __init__(self, min: int = 0) -> None:
        super().__init__(min=min, max=INT_MAX)


class Jobs(click.IntRange):
    """A worker count: 0 = all the CPUs available (the same meaning in every command); more than the
    CPUs available is capped to them, with a warning (hundreds of forked processes only slow the
    machine down)."""

    name = "integer"

    def __init__(self, min: int = 0) -> None:
        super().__init__(min=min)

    def convert(self, value, param, ctx):
        rv = super().convert(value, param, ctx)
        cpus = available_cpus()
        if rv == 0:
            return cpus
        if rv > cpus:
            quiet = bool(ctx and ctx.params.get("quiet"))
            warned = ctx.meta.setdefault("nlpkit.jobs_capped", set()) if ctx else set()
            if not quiet and rv not in warned:     # an old alias and -j/--jobs may both convert it
                warned.add(rv)
                click.echo(f"nlpkit: warning: --jobs {rv}: this machine has {cpus} CPU"
                           f"{'s' if cpus != 1 else ''} available; using {cpus}", err=True)
            rv = cpus
        return rv


class NumberList(click.ParamType):
    """Comma-separated numbers: ``'1,0.5'`` -> ``[1.0, 0.5]``, each real and in [min, max].

    `n` fixes how many; `cast` is int or float. Whether the count must match something else
    (one weight per run) is the command's check.
    """

    name = "numbers"

    def __init__(self, n: int | None = None, cast: Callable[[str], Any] = float, min: float | None = None,
                 max: float | None = None, metavar: str | None = None) -> None:
        self.n, self.cast, self.min, self.max, self.metavar = n, cast, min, max, metavar

    def get_metavar(self, param, *args, **kwargs) -> str | None:
        return self.metavar

    def convert(self, value, param, ctx):
        if isinstance(value, (list, tuple)):
            return list(value)
        kind = "integers" if self.cast is int else "numbers"
        try:
            items = [self.cast(x.strip()) for x in str(value).split(",")]
        except ValueError:
            self.fail(f"expected comma-separated {kind}, got {value!r}.", param, ctx)
        if self.n is not None and len(items) != self.n:
            self.fail(f"expected {self.n} comma-separated {kind}, got {len(items)}.", param, ctx)
        for x in items:
            if isinstance(x, float) and not math.isfinite(x):
                self.fail(f"{value!r}: {x} is not a finite number.", param, ctx)
            if (self.min is not None and x < self.min) or (self.max is not None and x > self.max):
                lo = "" if self.min is None else f">={self.min:g}"
                hi = "" if self.max is None else f"<={self.max:g}"
                self.fail(f"{value!r}: each number must be {' and '.join(filter(None, (lo, hi)))}.",
                          param, ctx)
        return items


NUMERIC_TYPES: tuple[type, ...] = (click.types._NumberParamTypeBase, NumberList)


def jobs_option(help: str, default: int | None = None, min: int = 0, old_names: tuple[str, ...] = ()):
    """``-j/--jobs N``, the one name of a worker count (0 = all the CPUs available, everywhere; the help
    says so); old names still work, hidden from --help (click gives the value written on the command line
    precedence over the other's default)."""
    import re

    default_note = re.search(r" \[[^\[\]]*\]\.?$", help.rstrip())   # the "[default]" stays last
    cut = default_note.start() if default_note else len(help.rstrip())
    help = help[:cut].rstrip(".") + "; 0 = all the CPUs available." + help[cut:].rstrip(".")
    def decorate(f):
        for name in old_names:
            f = click.option(name, "jobs", type=Jobs(min=min), default=None, hidden=True)(f)
        return click.option("-j", "--jobs", "jobs", type=Jobs(min=min), default=default,
                            show_default=default is not None, metavar="N", help=help)(f)
    return decorate


class DocFrequency(click.ParamType):
    """A document frequency bound, scikit-learn's int/float rule: ``'5'`` = 5 documents,
    ``'0.5'`` = half of the documents (a proportion in [0, 1]). The text is kept (it is what the
    signature shows); a malformed or out-of-range one is a usage error."""

    name = "N|P"

    def convert(self, value, param, ctx):
        text = str(value).strip()
        try:
            if any(ch in text for ch in ".eE") and not text.lower().lstrip("+-").startswith(("inf", "nan")):
                v = float(text)
                if not 0.0 <= v <= 1.0:
                    self.fail(f"a proportion must be in [0, 1], got {value!r}.", param, ctx)
                return text
            v = int(text)
        except ValueError:
            self.fail(f"expected a document count (5) or a proportion (0.5), got {value!r}.", param, ctx)
        if not 0 <= v <= INT_MAX:
            self.fail(f"a document count must be in [0, {INT_MAX}], got {value!r}.", param, ctx)
        return text


class ByteSize(click.ParamType):
    """A size in bytes with an optional unit (``64M``, ``1G``) or ``auto``, at most `MAX_BYTES`; the text is kept
    (the command turns it into bytes when it uses it), a malformed or huge one is a usage error at once."""

    name = "SIZE"
    MAX_BYTES = 1 << 40   # 1024G: a task of more input than any machine holds is a typo (2**63 was accepted)

    def convert(self, value, param, ctx):
        from nlpkit.errors import UsageError
        from nlpkit.shards import parse_size

        try:
            n = parse_size(value)
        except UsageError as e:   # the core names its parameter (`shard_size`); click names the option
            import re

            self.fail(re.sub(r"^`\w+`:? ?", "", str(e)), param, ctx)
        if n is not None and n > self.MAX_BYTES:
            self.fail(f"{value!r} is more than 1024G bytes per task.", param, ctx)
        return value


NUMERIC_TYPES = (click.types._NumberParamTypeBase, NumberList, DocFrequency, ByteSize)


STOPWORD_LISTS = ("english", "sklearn", "lucene", "none")   # nlpkit.text.BUILTIN_STOPWORDS and none


class ChoiceOrFile(click.ParamType):
    """A built-in name or a file (``--stopwords english|sklearn|lucene|none|FILE``): completes the
    names that match, else file names. The value is checked by the command that reads it."""

    name = "text"

    def __init__(self, choices: tuple[str, ...]) -> None:
        self.choices = tuple(choices)

    def shell_complete(self, ctx, param, incomplete):
        from click.shell_completion import CompletionItem

        names = [CompletionItem(c) for c in self.choices if c.startswith(incomplete)]
        return [CompletionItem(incomplete, type="file")] + names   # bash: names when any match, else files


def complete_choices(choices: tuple[str, ...]):
    """A `shell_complete` callback offering `choices` for an option whose values a library checks."""
    def complete(ctx, param, incomplete):
        from click.shell_completion import CompletionItem

        return [CompletionItem(c) for c in choices if c.startswith(incomplete)]
    return complete


def file_type(dash: bool = True) -> click.Path:
    """An input file: completes file names; a directory is a usage error (exit 2); '-' is stdin."""
    return click.Path(dir_okay=False, allow_dash=dash)


DEFAULT_MODEL_NAME = "default"  # `-m default`: the model shipped in nlpkit/lm/default/


class ModelPath(click.Path):
    """A model path, or `default`: the model shipped with nlpkit (`nlpkit/lm/default/`), as a CI script names it
    whatever $NLPKIT_MODEL says. The name wins over a file or directory called `default` in the current
    directory (write `./default` for that one; a warning says so), so `-m default` means one model everywhere."""

    def convert(self, value, param, ctx):
        if value != DEFAULT_MODEL_NAME:
            return super().convert(value, param, ctx)
        import os

        from nlpkit.lm.transformer.loaders import DEFAULT_MODEL_DIR

        if os.path.exists(value) and not (ctx is not None and ctx.params.get("quiet")):
            flag = max(param.opts, key=len) if param is not None else "the model"
            click.echo(f"nlpkit: warning: {flag} default is the shipped model, not the '{value}' in the current "
                       f"directory (write ./{value} for that one)", err=True)
        return str(DEFAULT_MODEL_DIR)

    def shell_complete(self, ctx, param, incomplete):
        from click.shell_completion import CompletionItem

        named = [CompletionItem(DEFAULT_MODEL_NAME)] if DEFAULT_MODEL_NAME.startswith(incomplete) else []
        return named + super().shell_complete(ctx, param, incomplete)


def model_path_type() -> click.Path:
    """A model: a directory or a file (.gguf, .arpa, ...), or `default` (`ModelPath`); completes both."""
    return ModelPath()


def given(name: str) -> bool:
    """Whether the option `name` (its parameter name) was set by the user rather than defaulted."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return False
    source = ctx.get_parameter_source(name)
    return source is not None and source is not click.core.ParameterSource.DEFAULT
