"""`nlpkit edit-distance`: Levenshtein-family distances, alignments and dictionary lookup.

Three modes:
  nlpkit edit-distance A B                    one pair (with --align: its operations)
  nlpkit edit-distance --pairs FILE           TSV a<TAB>b lines -> a, b, distance (vectorized)
  nlpkit edit-distance --dict WORDS [QUERY..] nearest entries per query (args or stdin lines)
With no arguments and text on stdin, stdin is read as --pairs.
"""

from __future__ import annotations

from typing import Iterator

import click

from nlpkit.cli.options import Count, FiniteFloat, INT_MAX, NumberList, file_type, given
from nlpkit.cli.common import (cli_message, common_options, input_paths, open_writer, progress, resolve_format,
                               warn)
from nlpkit.errors import NlpkitError
from nlpkit.signature import make_signature

METRIC_CHOICES = ("levenshtein", "osa", "damerau", "indel", "hamming", "lcs")


def _weights(value: list[int] | None, metric: str) -> tuple[int, int, int]:
    if value is None:
        return (1, 1, 1)
    w = value
    if metric != "levenshtein" and tuple(w) != (1, 1, 1):
        raise click.BadParameter(f"weights apply to --metric levenshtein only, not {metric} "
                                 "(as in rapidfuzz)", param_hint="--weights")
    return tuple(w)  # type: ignore[return-value]


def _read_pairs(path: str, errors: str) -> Iterator[list[tuple[str, str]]]:
    """Chunks of (a, b) from a two-column TSV; blank lines skipped, other shapes are errors.

    Reads blocks of lines and decodes each block at once (a bad byte is then located
    line by line, so the message still names the line).
    """
    import sys

    from nlpkit.io import decode_line, display_name, open_binary

    f = open_binary(path)
    lineno = 0
    try:
        while True:
            raw = f.readlines(1 << 20)
            if not raw:
                break
            if lineno == 0 and raw[0].startswith(b"\xef\xbb\xbf"):
                raw[0] = raw[0][3:]
            try:
                lines = b"".join(raw).decode("utf-8", errors).split("\n")
                if lines and lines[-1] == "":
                    lines.pop()
            except UnicodeDecodeError:
                lines = [decode_line(r, path, lineno + k, errors).rstrip("\n") for k, r in enumerate(raw, 1)]
            chunk: list[tuple[str, str]] = []
            for k, line in enumerate(lines, lineno + 1):
                if line.endswith("\r"):
                    line = line[:-1]
                cols = line.split("\t")
                if len(cols) == 2:
                    chunk.append((cols[0], cols[1]))
                elif line.strip():
                    raise NlpkitError(f"{display_name(path)}, line {k}: expected 2 tab-separated "
                                      f"columns (a<TAB>b), found {len(cols)}")
            lineno += len(raw)
            if chunk:
                yield chunk
    finally:
        if f is not sys.stdin.buffer:
            f.close()


def _write_pairs(out, chunk: list[tuple[str, str]], dist: list, norm: list | None) -> None:
    """Records a, b, distance[, normalized]; TSV lines are joined directly (same text as
    `RecordWriter.write`, which formats cell by cell and costs more than the distances; text escaped by the same
    `escape_tsv`)."""
    from nlpkit.io import escape_tsv

    if out.fmt != "tsv" or out.count == 0:
        for k, (a, b) in enumerate(chunk):
            rec = {"a": a, "b": b, "distance": dist[k]}
            if norm is not None:
                rec["normalized"] = norm[k]
            out.write(rec)
        return
    tail = "\t" + escape_tsv(out.signature) if out.signature else ""
    if norm is None:
        lines = [f"{escape_tsv(a)}\t{escape_tsv(b)}\t{d}{tail}\n" for (a, b), d in zip(chunk, dist)]
    else:
        lines = [f"{escape_tsv(a)}\t{escape_tsv(b)}\t{d}\t{n!r}{tail}\n" for (a, b), d, n in zip(chunk, dist, norm)]
    out.stream.write("".join(lines))
    out.count += len(lines)


def _queries(args: tuple[str, ...], errors: str) -> Iterator[str]:
    if args:
        yield from args
        return
    from nlpkit.io import iter_lines

    for path in input_paths([], what="queries", argument="QUERY"):
        for line in iter_lines(path, errors=errors):
            if line.strip():
                yield line.strip()


@click.command("edit-distance")
@click.argument("args", nargs=-1)
@click.option("--pairs", "pairs_file", metavar="FILE", type=file_type(),
              help="TSV of a<TAB>b lines ('-' for stdin); appends the distance to each pair.")
@click.option("--metric", type=click.Choice(METRIC_CHOICES), default="levenshtein", show_default=True,
              help="Distance: levenshtein, osa (adjacent transpositions), damerau (unrestricted), "
                   "indel (no substitution), hamming (padded), lcs (max length - LCS).")
@click.option("--weights", type=NumberList(3, int, min=0, max=INT_MAX, metavar="INS,DEL,SUB"),
              help=f"Integer operation costs, 0 to {INT_MAX} (levenshtein only).")
@click.option("--normalize", is_flag=True,
              help="Also print distance / maximum possible distance, in [0, 1] (as rapidfuzz).")
@click.option("--level", type=click.Choice(["char", "word"]), default="char", show_default=True,
              help="Compare characters, or whitespace-separated words (WER-style).")
@click.option("--align", is_flag=True,
              help="Print the edit operations of A B and a two-line aligned view.")
@click.option("--dict", "dict_file", metavar="FILE", type=file_type(),
              help="Dictionary (word or word<TAB>count per line): find the nearest entries of each "
                   "query (ARGS, or lines on stdin). Ties: higher count first.")
@click.option("-k", "--top", type=Count(0), default=1, show_default=True, metavar="N",
              help="With --dict: entries per query (0 = all).")
@click.option("--max-distance", type=Count(0), default=None,
              help="With --dict: only entries at most this far.")
@click.option("--rank", type=click.Choice(["distance", "channel"]), default="distance", show_default=True,
              help="With --dict: order by distance then count, or by count / EDIT_ODDS**distance "
                   "(noisy channel: a frequent word one edit away beats a rare exact entry).")
@click.option("--edit-odds", type=FiniteFloat(min=1, min_open=True), default=100.0, show_default=True,
              help="With --rank channel: how many times less likely each edit is.")
@common_options
def command(args, pairs_file, metric, weights, normalize, level, align, dict_file, top, max_distance,
            rank, edit_odds, fmt, no_signature, quiet, encoding_errors):
    """Edit distance between A and B, for TSV pairs, or to the nearest dictionary entries.

    No input with empty stdin is an error; an empty --pairs file gives no rows, an empty --dict
    is an error.

    \b
    nlpkit edit-distance kitten sitting
    nlpkit edit-distance --align --level word "the cat sat" "a cat sat down"
    nlpkit edit-distance --pairs pairs.tsv --metric osa --normalize
    nlpkit edit-distance --dict count_1w.txt --top 3 speling korrect
    nlpkit edit-distance --dict count_1w.txt --rank channel < typos.txt
    """
    w = _weights(weights, metric)
    settings = dict(metric=metric, weights=w, level=level, norm=normalize)
    if sum(x is not None for x in (pairs_file, dict_file)) > 1:
        raise click.UsageError("--pairs and --dict cannot be combined")
    if align and (pairs_file or dict_file):
        raise click.UsageError("--align works on one pair A B, not with --pairs or --dict")
    if dict_file is None and (top != 1 or max_distance is not None or rank != "distance"):
        raise click.UsageError("--top, --max-distance and --rank need --dict")
    if given("edit_odds") and rank != "channel":
        raise click.UsageError("--edit-odds applies to --rank channel only")
    if dict_file:
        ranking = (rank, edit_odds)
        return _dictionary(dict_file, args, metric, w, level, normalize, top, max_distance, ranking,
                           settings, fmt, no_signature, quiet, encoding_errors)
    if pairs_file is None and not args:
        pairs_file = input_paths([], what="input: give A B, --pairs FILE or --dict FILE", argument="A B")[0]
    if pairs_file is not None:
        if args:
            raise click.UsageError("--pairs takes no A B arguments")
        return _pairs(pairs_file, metric, w, level, normalize, settings, fmt, no_signature, quiet,
                      encoding_errors)
    if len(args) != 2:
        raise click.UsageError(f"expected two arguments A B, got {len(args)}")
    if align:
        return _align(args[0], args[1], metric, w, level, settings, fmt, no_signature)
    from nlpkit.edit.distance import distance, normalized_distance, split_level

    a, b = split_level(args[0], level), split_level(args[1], level)
    columns = ["a", "b", "metric", "distance"] + (["normalized"] if normalize else [])
    with open_writer(columns, fmt, make_signature("edit-distance", **settings), no_signature) as out:
        rec = {"a": args[0], "b": args[1], "metric": metric, "distance": distance(a, b, metric, w)}
        if normalize:
            rec["normalized"] = normalized_distance(a, b, metric, w)
        out.write(rec)


def _pairs(path, metric, w, level, normalize, settings, fmt, no_signature, quiet, errors):
    from nlpkit.edit.batch import normalize_distances, pairwise_distances
    from nlpkit.edit.distance import split_level

    columns = ["a", "b", "distance"] + (["normalized"] if normalize else [])
    sig = make_signature("edit-distance", **settings)
    with open_writer(columns, fmt, sig, no_signature) as out, \
            progress("pairs", quiet=quiet) as tick:
        done = 0
        for chunk in _read_pairs(path, errors):
            a = [split_level(x, level) for x, _ in chunk]
            b = [split_level(y, level) for _, y in chunk]
            values = pairwise_distances(a, b, metric, w)
            dist = values.tolist()
            norm = normalize_distances(values, a, b, metric, w).tolist() if normalize else None
            _write_pairs(out, chunk[:1], dist[:1], norm[:1] if norm else None)
            _write_pairs(out, chunk[1:], dist[1:], norm[1:] if norm else None)
            done += len(chunk)
            tick(done)


def _dictionary(path, args, metric, w, level, normalize, top, max_distance, ranking, settings, fmt,
                no_signature, quiet, errors):
    from nlpkit.edit.distance import maximum, split_level
    from nlpkit.edit.spell import DICT_METRICS, load_dictionary, nearest_many

    if metric not in DICT_METRICS:
        raise click.UsageError(f"--dict supports --metric {', '.join(DICT_METRICS)}, not {metric}")
    if w != (1, 1, 1):
        raise click.UsageError("--dict uses unit weights; drop --weights")
    rank, edit_odds = ranking
    rank_sig = rank if rank == "distance" else f"channel-{edit_odds:g}"
    sig = make_signature("edit-distance", **settings, max_distance=max_distance, rank=rank_sig)
    d = load_dictionary(path, level, errors, warn=lambda m: warn(m, quiet))
    columns = ["query", "rank", "match", "distance"] + (["normalized"] if normalize else []) + ["count"]
    with open_writer(columns, fmt, sig, no_signature) as out, \
            progress("queries", quiet=quiet) as tick:
        for q, matches in nearest_many(d, _queries(args, errors), top or len(d.words), max_distance, metric, rank,
                                       edit_odds, progress=tick):
            if not matches:
                out.write({"query": q, "rank": None, "match": None, "distance": None, "count": None})
            for m in matches:
                rec = {"query": q, "rank": m.rank, "match": m.word, "distance": m.distance}
                if normalize:
                    most = maximum(metric, len(split_level(q, level)), len(split_level(m.word, level)))
                    rec["normalized"] = m.distance / most if most else 0.0
                rec["count"] = int(m.count) if m.count.is_integer() else m.count
                out.write(rec)


def _align(a_text, b_text, metric, w, level, settings, fmt, no_signature):
    from nlpkit.edit.align import aligned_view, alignment, cost
    from nlpkit.edit.distance import split_level
    from nlpkit.errors import UsageError
    from nlpkit.io import write_text

    try:
        ops = alignment(split_level(a_text, level), split_level(b_text, level), metric, w)
    except UsageError as e:
        raise click.UsageError(cli_message(e)) from None
    sig = make_signature("edit-distance", **settings)
    if resolve_format(fmt) == "table":
        top, bottom = aligned_view(ops, " " if level == "word" else "")
        write_text(f"{top}\n{bottom}\n(distance {cost(ops, w)})\n\n")
    columns = ["op", "a_index", "b_index", "a", "b"]
    with open_writer(columns, fmt, sig, no_signature) as out:
        for op in ops:
            out.write({"op": op.tag, "a_index": op.a_index, "b_index": op.b_index,
                       "a": op.a, "b": op.b})
