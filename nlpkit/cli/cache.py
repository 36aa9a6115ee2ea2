"""`nlpkit cache list|clear|dir`: the prepared-model cache's entries, deleting them, and where it is (as `pip cache`
and `huggingface-cli scan-cache` / `delete-cache` do for theirs; core: nlpkit/lm/prepared/cache_listing.py)."""

from __future__ import annotations

import sys

import click

from nlpkit.cli.common import format_option, open_writer, quiet_option

COLUMNS = ["entry", "kind", "model", "bytes", "last_used", "made_from", "valid"]


@click.group("cache")
def command() -> None:
    """The prepared-model cache: models' arrays made once (weights transposed or dequantized,
    n-gram tables sorted and hashed) and mapped by later loads.

    An entry is keyed by the content of the model files (the same model in two environments
    is one entry; a file changed in place another). The cache lives in $NLPKIT_CACHE_DIR, else
    the platform's user cache directory (`nlpkit cache dir`). When its entries pass
    $NLPKIT_CACHE_MAX_SIZE (bytes, or 500M, 20G; none: no cap) [10G], the least recently used
    are deleted. --no-cache (or NLPKIT_NO_CACHE=1) loads a model without it.

    \b
      nlpkit cache list
      nlpkit cache clear                       # every entry
      nlpkit cache clear weights-model.gguf-0123abcd4567ef890123abcd.npc
      NLPKIT_CACHE_MAX_SIZE=2G nlpkit score -m model/ items.jsonl
    """


@command.command("list", short_help="The entries: kind, model, size, last use, files made from.")
@format_option
@quiet_option
def list_cmd(fmt, quiet):
    """List the entries, most recently used first: file name, kind (weights, ngram), the model
    file it was made from, bytes, last use, the model's paths when it was made, and whether it
    is whole (a damaged entry is rebuilt by the next load). Then, on stderr, the total, the cap
    and the directory."""
    from nlpkit.lm.prepared.cache_listing import list_entries
    from nlpkit.lm.prepared.cache_store import max_size
    from nlpkit.lm.prepared import cache_dir

    entries = list_entries()
    with open_writer(COLUMNS, fmt, None, True, path_columns=("made_from",)) as out:
        for e in entries:
            out.write(e.record())
    if not quiet:
        cap = max_size()
        total = sum(e.bytes for e in entries)
        limit = f"of the {_size(cap)} cap" if cap is not None else "(no cap)"
        sys.stderr.write(f"nlpkit: {len(entries)} entr{'y' if len(entries) == 1 else 'ies'}, {_size(total)} "
                         f"{limit}, in {cache_dir()}\n")


def _complete_entry(ctx, param, incomplete: str) -> list[str]:
    """ENTRY: the names of the cache's entries."""
    from nlpkit.lm.prepared.cache_store import entry_files
    from nlpkit.lm.prepared import cache_dir

    return [p.name for p in entry_files(cache_dir()) if p.name.startswith(incomplete)]


@command.command("clear", short_help="Delete the entries named, or every entry.")
@click.argument("entries", nargs=-1, metavar="[ENTRY]...", shell_complete=_complete_entry)
@quiet_option
def clear_cmd(entries, quiet):
    """Delete the ENTRY files named (as `nlpkit cache list` shows them), or, with none, every
    entry (and the memo of model files' digests). The next load of a model whose entry is
    gone prepares it from its files again."""
    from nlpkit.lm.prepared.cache_listing import clear_entries
    from nlpkit.lm.prepared import cache_dir

    gone = clear_entries(entries)
    if not quiet:
        sys.stderr.write(f"nlpkit: deleted {len(gone)} entr{'y' if len(gone) == 1 else 'ies'}, "
                         f"{_size(sum(e.bytes for e in gone))}, from {cache_dir()}\n")


@command.command("dir", short_help="Print the cache's directory.")
def dir_cmd():
    """Print the prepared-model cache's directory ($NLPKIT_CACHE_DIR, else the platform's user
    cache directory), e.g. for a CI job's cache step."""
    from nlpkit.lm.prepared import cache_dir

    click.echo(str(cache_dir()))


def _size(n: int) -> str:
    """1.23 GiB, 538.0 MiB, 12.0 KiB, 950 B (the units of $NLPKIT_CACHE_MAX_SIZE: 10G is 10 GiB)."""
    for scale, unit in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if n >= scale:
            return f"{n / scale:.{2 if unit == 'GiB' else 1}f} {unit}"
    return f"{n} B"
