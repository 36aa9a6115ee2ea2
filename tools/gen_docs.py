"""Write docs/commands/<command>.md, a reference page per subcommand, from the click definitions.

    python tools/gen_docs.py            # after adding or changing a command or an option

As ripgrep generates its man page from its flag definitions, the reference part of each page (usage, the
command's help, every option with its type, choices, default and help, a group's subcommands) is made
from the click command objects themselves, so it cannot drift from the code: tests/test_docs.py
regenerates every page in memory and fails when a committed page differs.

A page is the generated reference, then the MARKER line, then hand-written prose (examples, output
formats, details). The generator keeps everything after the marker as it finds it; a new command's page
gets an empty prose part to fill in. Only the text above the marker is ever rewritten.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "commands"
MARKER = "<!-- Hand-written below this line: tools/gen_docs.py keeps everything after it. -->"
NEW_PROSE = "\n## Examples\n\n(To be written.)\n"


def commands() -> dict[str, click.Command]:
    """Every registered subcommand, by name (`nlpkit.cli.main.COMMANDS`), imported."""
    from nlpkit.cli.main import COMMANDS

    return {name: importlib.import_module(module).command for name, (module, _) in COMMANDS.items()}


def _help_text(cmd: click.Command) -> str:
    """The command's help as click shows it, without click's `\\b` (no-rewrap) markers."""
    text = inspect.cleandoc(cmd.help or "")
    return "\n".join(line for line in text.splitlines() if line.strip() != "\b").strip()


def _usage(cmd: click.Command, ctx: click.Context) -> str:
    return f"{ctx.command_path} {' '.join(cmd.collect_usage_pieces(ctx))}".rstrip()


def _number(x: float) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def _type(param: click.Parameter) -> str:
    t = param.type
    if isinstance(t, click.Choice):
        return "one of " + ", ".join(f"`{c}`" for c in t.choices)
    if param.is_flag if isinstance(param, click.Option) else False:
        return "flag"
    name = getattr(t, "name", type(t).__name__)
    lo, hi = getattr(t, "min", None), getattr(t, "max", None)
    if lo is not None and hi is not None:
        name += f", {_number(lo)} to {_number(hi)}"
    elif lo is not None:
        name += f", at least {_number(lo)}"
    elif hi is not None:
        name += f", at most {_number(hi)}"
    if param.multiple:
        name += ", repeatable"
    if param.nargs == -1:
        name += ", any number"
    return name


def _default(param: click.Parameter, ctx: click.Context) -> str | None:
    value = param.get_default(ctx, call=False)
    if isinstance(param, click.Option) and param.is_flag and not param.secondary_opts and not value:
        return None                          # an off-by-default flag: nothing to say
    if callable(value):
        return "computed when the command runs"
    if type(value).__name__ == "Sentinel":   # click's UNSET: no default
        return None
    if value is None or value == () or value == []:
        return None
    if isinstance(param, click.Option) and param.is_flag and param.secondary_opts:
        return f"`{param.opts[-1] if value else param.secondary_opts[0]}`"
    if isinstance(value, (list, tuple)):
        value = " ".join(str(v) for v in value)
    return f"`{value}`"


def _option(param: click.Option, ctx: click.Context) -> str:
    record = param.get_help_record(ctx)
    head = record[0] if record else ", ".join(param.opts)
    facts = [f"type: {_type(param)}"]
    default = _default(param, ctx)
    if default is not None:
        facts.append(f"default: {default}")
    if param.envvar:
        envvars = [param.envvar] if isinstance(param.envvar, str) else list(param.envvar)
        facts.append("environment: " + ", ".join(f"`${e}`" for e in envvars))
    if param.required:
        facts.append("required")
    help_text = " ".join((param.help or "").split())
    return f"- `{head}` ({'; '.join(facts)})" + (f"  \n  {help_text}" if help_text else "")


def _reference(cmd: click.Command, ctx: click.Context, level: int) -> list[str]:
    """The generated reference of one command (and, for a group, of each of its subcommands)."""
    lines = ["```text", _usage(cmd, ctx), "```", ""]
    text = _help_text(cmd)
    if text:
        lines += ["```text", text, "```", ""]
    arguments = [p for p in cmd.get_params(ctx) if isinstance(p, click.Argument)]
    if arguments:
        lines += [f"{'#' * level} Arguments", ""]
        for p in arguments:
            lines.append(f"- `{p.make_metavar(ctx)}` (type: {_type(p)}{'' if p.required else '; optional'})")
        lines.append("")
    options = [p for p in cmd.get_params(ctx)
               if isinstance(p, click.Option) and not p.hidden and "--help" not in p.opts]
    if options:
        lines += [f"{'#' * level} Options", ""]
        lines += [_option(p, ctx) for p in options]
        lines.append("")
    if isinstance(cmd, click.Group):
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            sub_ctx = click.Context(sub, info_name=name, parent=ctx)
            lines += [f"{'#' * level} {sub_ctx.command_path}", ""]
            lines += _reference(sub, sub_ctx, level + 1)
    return lines


def reference(name: str, cmd: click.Command) -> str:
    """The generated part of docs/commands/<name>.md, up to and including the marker."""
    from nlpkit.cli.main import cli

    root = click.Context(cli, info_name="nlpkit")
    ctx = click.Context(cmd, info_name=name, parent=root)
    from nlpkit.cli.main import COMMANDS

    short = COMMANDS[name][1]
    lines = [f"# nlpkit {name}", "",
             f"<!-- Generated by tools/gen_docs.py from the click definitions (nlpkit/cli/). Edit those, "
             f"then run `python tools/gen_docs.py`. -->", "",
             short, "", "## Reference", ""]
    lines += _reference(cmd, ctx, 3)
    return "\n".join(lines).rstrip() + "\n\n" + MARKER + "\n"


def prose(path: Path) -> str:
    """The hand-written part of an existing page (what follows the marker), or a stub for a new page."""
    if not path.exists():
        return NEW_PROSE
    text = path.read_text(encoding="utf-8")
    return text.split(MARKER + "\n", 1)[1] if MARKER + "\n" in text else NEW_PROSE


def page(name: str, cmd: click.Command, path: Path) -> str:
    return reference(name, cmd) + prose(path)


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, cmd in commands().items():
        path = OUT / f"{name}.md"
        text = page(name, cmd, path)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
