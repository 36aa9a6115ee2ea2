"""Reading inputs and writing results, the same way for every subcommand.

Inputs are paths or ``-`` (stdin), read as UTF-8. Undecodable bytes raise
`NlpkitError` naming the file and line, unless ``errors="replace"``.

Outputs go through `RecordWriter`: ``table`` (rich, on stdout's terminal),
``tsv`` (header line, tab-separated, full precision; backslash, tab, newline and carriage return escaped as
``\\\\``, ``\\t``, ``\\n``, ``\\r`` by `escape_tsv`, lists of text as JSON arrays), ``jsonl`` (one object per
record) or ``json`` (one document). The settings signature rides in every
machine-readable record (a last ``signature`` column/field) and as the table footer.
TSV and JSONL stream: each record is written as soon as it is produced.
"""

from __future__ import annotations

import io
import json
import math
import os
import sys
from typing import IO, Any, Iterable, Iterator, Sequence

from nlpkit.errors import NlpkitError

FORMATS = ("table", "tsv", "jsonl", "json")


# ---------------------------------------------------------------------------- inputs

def display_name(path) -> str:
    """How a path is named in messages: ``<stdin>`` for ``-``; a shard names its file and offset."""
    return "<stdin>" if path == "-" else str(path)


COMPRESSED = (".gz", ".bz2", ".zst")


def is_compressed(path: str) -> bool:
    """``.gz``, ``.bz2`` and ``.zst`` files are decompressed while reading."""
    return str(path).endswith(COMPRESSED)


def is_url(path: str) -> bool:
    """A path with a protocol (``s3://``, ``memory://``, ``file://``): read through fsspec."""
    return "://" in str(path)


def _fsspec_open(path: str) -> IO[bytes]:
    try:
        import fsspec
    except ImportError:
        raise NlpkitError(f"{path}: reading URLs needs fsspec: pip install 'nlpkit[dask]'") from None
    try:
        return fsspec.open(path, "rb").open()
    except FileNotFoundError:
        raise NlpkitError(f"{path}: no such file") from None
    except (OSError, ValueError, ImportError) as e:
        raise NlpkitError(f"{path}: cannot open ({e})") from None


def decompress(raw: IO[bytes], path: str) -> IO[bytes]:
    """A stream reading the decompressed bytes of `raw` (by `path`'s suffix)."""
    path = str(path)
    if path.endswith(".gz"):
        import gzip

        return gzip.GzipFile(fileobj=raw, mode="rb")
    if path.endswith(".bz2"):
        import bz2

        return bz2.BZ2File(raw, "rb")
    if path.endswith(".zst"):
        try:
            import zstandard
        except ImportError:
            raw.close()
            raise NlpkitError(f"{path}: reading .zst needs the zstandard package: "
                              "pip install zstandard (or 'nlpkit[dask]')") from None
        return io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(raw, closefd=True))
    return raw


class _Checked(io.RawIOBase):
    """A decompressing stream whose corrupt-data errors become NlpkitError naming the file."""

    def __init__(self, inner: IO[bytes], path: str) -> None:
        self.inner, self.path = inner, path

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        try:
            data = self.inner.read(len(b))
        except (OSError, EOFError, ValueError) as e:
            raise NlpkitError(f"{self.path}: cannot read ({type(e).__name__}: {e})") from None
        n = len(data)
        b[:n] = data
        return n

    def close(self) -> None:
        try:
            self.inner.close()
        finally:
            super().close()


def open_binary(path) -> IO[bytes]:
    """Open a path (or ``-`` for stdin) for binary reading; a missing file is an NlpkitError.

    ``.gz``, ``.bz2`` and ``.zst`` files are decompressed; paths with a protocol
    (``s3://``, ``memory://``) are opened with fsspec. An object with an ``open()``
    method (a `nlpkit.shards.Shard`) is opened by that method.
    """
    if not isinstance(path, str):
        return path.open()
    if path == "-":
        return sys.stdin.buffer
    if is_url(path):
        raw = _fsspec_open(path)
    else:
        try:
            if os.path.isdir(path):   # a usage error (exit 2), as click.Path(dir_okay=False) makes it
                from nlpkit.errors import UsageError

                raise UsageError(f"{path}: is a directory, expected a file")
            raw = open(path, "rb")
        except FileNotFoundError:
            raise NlpkitError(f"{path}: no such file") from None
        except PermissionError:
            raise NlpkitError(f"{path}: permission denied") from None
        except OSError as e:
            raise NlpkitError(f"{path}: cannot open ({e.strerror or e})") from None
    if is_compressed(path):
        return io.BufferedReader(_Checked(decompress(raw, path), path), 1 << 20)
    return raw


def decode_line(raw: bytes, path: str, lineno: int, errors: str = "strict") -> str:
    """Decode one line of UTF-8; on bad bytes name the file, line and byte offset."""
    try:
        return raw.decode("utf-8", errors=errors)
    except UnicodeDecodeError as e:
        raise NlpkitError(
            f"{display_name(path)}, line {lineno}: invalid UTF-8 at byte {e.start + 1} of the line "
            f"(use `errors` replace to substitute U+FFFD)") from None


def iter_lines(path: str, errors: str = "strict", keepends: bool = False,
               strip_bom: bool = True) -> Iterator[str]:
    """Yield the lines of a file (or stdin for ``-``) as str, streaming.

    ``keepends`` keeps each line's newline (BPE training needs it); otherwise
    a trailing ``\\n`` / ``\\r\\n`` is removed. A UTF-8 BOM at the very start is
    dropped unless ``strip_bom=False``.
    """
    f = open_binary(path)
    try:
        for lineno, raw in enumerate(f, 1):
            if lineno == 1 and strip_bom and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            line = decode_line(raw, path, lineno, errors)
            if not keepends:
                if line.endswith("\n"):
                    line = line[:-1]
                    if line.endswith("\r"):
                        line = line[:-1]
            yield line
    finally:
        if f is not sys.stdin.buffer:
            f.close()


def read_text(path: str, errors: str = "strict", strip_bom: bool = True) -> str:
    """Whole file as str; undecodable bytes reported with their line number."""
    f = open_binary(path)
    try:
        data = f.read()
    finally:
        if f is not sys.stdin.buffer:
            f.close()
    if strip_bom and data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8", errors=errors)
    except UnicodeDecodeError as e:
        lineno = data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1)
        raise NlpkitError(
            f"{display_name(path)}, line {lineno}: invalid UTF-8 at byte {col + 1} of the line "
            f"(use `errors` replace to substitute U+FFFD)") from None


def read_lines(path: str, errors: str = "strict") -> list[str]:
    """All lines of a file without their newlines (see `iter_lines`)."""
    return list(iter_lines(path, errors=errors))


def json_record(line: str, where: str, field: str = "text",
                id_field: str | None = None, id_required: bool = True) -> tuple[str | None, str]:
    """One JSONL document as (id, text): the text from `field`, the id from `id_field` (None without one; None
    too for a record without that field when not `id_required`).

    Errors name `where` (``file, line N``) and the fields the record does have, for every command that
    reads JSONL documents (tfidf, pmi, bm25).

    >>> json_record('{"id": 7, "text": "hi"}', "x, line 1", id_field="id")
    ('7', 'hi')
    """
    import json

    try:
        rec = json.loads(line)
    except json.JSONDecodeError as e:
        raise NlpkitError(f"{where}: not valid JSON ({e.msg})") from None
    if not isinstance(rec, dict):
        raise NlpkitError(f"{where}: expected a JSON object, got {type(rec).__name__}")
    if field not in rec:
        raise NlpkitError(f"{where}: no field {field!r} (fields: {', '.join(map(str, rec)) or 'none'}; "
                          "choose one with `field`)")
    text = rec[field]
    if not isinstance(text, str):
        raise NlpkitError(f"{where}: field {field!r} is {type(text).__name__}, expected a string")
    if id_field is None:
        return None, text
    if id_field not in rec:
        if not id_required:
            return None, text
        raise NlpkitError(f"{where}: no id field {id_field!r} (fields: {', '.join(map(str, rec))}; "
                          "choose one with `id_field`)")
    return str(rec[id_field]), text


# --------------------------------------------------------------------------- outputs

def escape_tsv(s: str) -> str:
    r"""Text as one TSV cell: backslash, tab, newline and carriage return written ``\\``, ``\t``, ``\n``,
    ``\r`` (as PostgreSQL's COPY and MySQL's TSV do), so a cell never breaks a row and every text reads back as
    itself (`unescape_tsv`): ``C:\new`` and a real newline stay different. Every TSV writer calls this.

    >>> escape_tsv("C:\\new\tdir\n")
    'C:\\\\new\\tdir\\n'
    """
    if "\\" in s or "\t" in s or "\n" in s or "\r" in s:
        return s.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    return s


_UNESCAPE = {"\\": "\\", "t": "\t", "n": "\n", "r": "\r"}


def unescape_tsv(cell: str) -> str:
    r"""The text `escape_tsv` wrote as `cell` (an unknown escape ``\x`` is kept as it is).

    >>> unescape_tsv(escape_tsv("a\\nb\nc")) == "a\\nb\nc"
    True
    """
    if "\\" not in cell:
        return cell
    out, i = [], 0
    while i < len(cell):
        c = cell[i]
        if c == "\\" and i + 1 < len(cell) and cell[i + 1] in _UNESCAPE:
            out.append(_UNESCAPE[cell[i + 1]])
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def format_value(value: Any) -> str:
    """A cell for TSV: floats at full precision (repr), None empty, booleans true/false, a list of numbers
    comma-joined (``1.5,2``), any other list a JSON array (``["Paris","Paris, France"]``: a comma inside an item
    stays unambiguous), text escaped by `escape_tsv`."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, (list, tuple)):
        if all(_is_number(v) for v in value):
            return ",".join(format_value(v) for v in value)
        return escape_tsv(json.dumps(jsonable(value), ensure_ascii=False, separators=(",", ":")))
    if hasattr(value, "item") and not isinstance(value, str):  # numpy scalar
        return format_value(value.item())
    return escape_tsv(str(value))


def _is_number(v: Any) -> bool:
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):   # numpy scalar
        v = v.item()
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def jsonable(value: Any) -> Any:
    """`value` as JSON can hold it: numpy scalars as Python numbers, NaN and infinities as null, recursively."""
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):  # numpy scalar
        return value.item()
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    return value


def _table_cell(value: Any, digits: int) -> str:
    """A table cell: numbers at `digits` decimals (machine formats keep full precision); a list's items each so,
    separated by ", " so that a folding column breaks between numbers, never inside one."""
    if hasattr(value, "item") and not isinstance(value, str):
        value = value.item()
    if isinstance(value, (list, tuple)):
        if all(_is_number(v) for v in value):
            return ", ".join(_table_cell(v, digits) for v in value)
        return json.dumps(jsonable(value), ensure_ascii=False)   # text items: quoted, so their commas stay theirs
    if isinstance(value, float):
        if value != 0 and (abs(value) >= 1e6 or abs(value) < 10 ** -digits):
            return f"{value:.{digits}g}"
        return f"{value:.{digits}f}"
    if isinstance(value, str):   # for reading: a backslash shows as itself unless the text holds a control character
        return escape_tsv(value) if ("\t" in value or "\n" in value or "\r" in value) else value
    return format_value(value)


class RecordWriter:
    """Write records (dicts) in one of `FORMATS`; tsv/jsonl stream, table/json collect.

    Use as a context manager:

        with RecordWriter(["a", "b", "distance"], fmt="tsv", signature=sig) as out:
            out.write({"a": "kitten", "b": "sitting", "distance": 3})
    """

    def __init__(self, columns: Sequence[str], fmt: str = "tsv", signature: str | None = None,
                 stream: IO[str] | None = None, title: str | None = None, digits: int = 4,
                 header: bool = True, labels: Sequence[str] | None = None,
                 path_columns: Sequence[str] = ()) -> None:
        if fmt not in FORMATS:
            raise NlpkitError(f"unknown output format {fmt!r} (choose from {', '.join(FORMATS)})")
        self.columns = list(columns)
        self.labels = list(labels) if labels is not None else self.columns   # tsv/table header names
        self.fmt = fmt
        self.signature = signature
        self.stream = stream if stream is not None else sys.stdout
        self.title = title
        self.digits = digits
        self.header = header
        self.path_columns = tuple(path_columns)    # more columns of paths, shown by basename in a table
        self.rows: list[dict] = []
        self.extra: dict[str, Any] = {}   # json: more keys of the one document after `results` (e.g. `verdicts`)
        self._started = False
        self.count = 0

    def _start(self) -> None:
        if self._started:
            return
        self._started = True
        if self.fmt == "tsv" and self.header:
            cols = self.labels + (["signature"] if self.signature else [])
            self.stream.write("\t".join(map(escape_tsv, cols)) + "\n")

    def write(self, record: dict) -> None:
        """Emit one record (keys beyond `columns` are kept in json/jsonl, dropped in tsv/table)."""
        self._start()
        self.count += 1
        if self.fmt == "tsv":
            cells = [format_value(record.get(c)) for c in self.columns]
            if self.signature:
                cells.append(escape_tsv(self.signature))
            self.stream.write("\t".join(cells) + "\n")
        elif self.fmt == "jsonl":
            rec = dict(record)
            if self.signature:
                rec["signature"] = self.signature
            self.stream.write(json.dumps(jsonable(rec), ensure_ascii=False) + "\n")
        else:
            self.rows.append(record)

    def write_many(self, records: Iterable[dict]) -> None:
        for r in records:
            self.write(r)

    def close(self) -> None:
        """Finish the output: render the table / json document; flush."""
        self._start()
        if self.fmt == "json":
            doc: dict[str, Any] = {"results": jsonable(self.rows), **jsonable(self.extra)}
            if self.signature:
                doc = {"signature": self.signature, **doc}
            self.stream.write(json.dumps(doc, ensure_ascii=False, indent=2) + "\n")
        elif self.fmt == "table":
            render_table(self.columns, self.rows, self.signature, self.stream, self.title, self.digits,
                         self.labels, PATH_COLUMNS + self.path_columns)
        self.stream.flush()

    def __enter__(self) -> "RecordWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            try:
                self.stream.flush()
            except Exception:
                pass


PATH_COLUMNS = ("file", "system", "index")   # shown by basename in tables (machine formats keep the path)


def _short_paths(values: list[str]) -> dict[str, str]:
    """Path -> basename for a table, unless two different paths share a basename (then keep them)."""
    base = {v: os.path.basename(v.rstrip("/")) or v for v in values}
    if len(set(base.values())) != len(set(base)):
        return {v: v for v in values}
    return base


def render_table(columns: Sequence[str], rows: list[dict], signature: str | None,
                 stream: IO[str], title: str | None = None, digits: int = 4,
                 labels: Sequence[str] | None = None, path_columns: Sequence[str] = ()) -> None:
    """Render rows with rich (imported lazily); the signature is the footer line.

    The table fits the terminal width (``$COLUMNS``, 80 when unknown): numbers never wrap, text
    columns fold, and paths (``file``, ``system``, ``index``) show as basenames. When even that
    is too wide, each row prints as a block of ``column  value`` lines.
    """
    from rich.console import Console
    from rich.table import Table

    short = {c: _short_paths([r[c] for r in rows if isinstance(r.get(c), str)])
             for c in columns if c in (path_columns or PATH_COLUMNS)}
    table = Table(title=title, show_edge=False, header_style="bold")
    numeric_cols = set()
    for c, label in zip(columns, labels or columns):
        numeric = any(isinstance(r.get(c), (int, float)) and not isinstance(r.get(c), bool)
                      for r in rows[:50])
        if numeric:
            numeric_cols.add(c)
            table.add_column(label, justify="right", overflow="fold")
        else:
            table.add_column(label, justify="left", overflow="fold")
    for r in rows:
        cells = []
        for c in columns:
            v = r.get(c)
            if c in short and isinstance(v, str):
                v = short[c].get(v, v)
            cells.append(_table_cell(v, digits))
        table.add_row(*cells)
    class PipeConsole(Console):
        def on_broken_pipe(self) -> None:   # rich exits 1 on a closed pipe; `| head` is not a failure
            self.quiet = True
            raise BrokenPipeError

    console = PipeConsole(file=stream, highlight=False, soft_wrap=False)
    needed = _fit_numbers(table, columns, rows, numeric_cols, digits)
    if needed > console.width and len(columns) > 2:
        _render_records(table, labels or columns, console)   # too many columns: one block per record
    else:
        console.print(table)
    if signature:  # the footer: one unwrapped line, so it can be copied whole
        console.print(signature, style="dim", soft_wrap=True, markup=False)


def _fit_numbers(table, columns, rows, numeric_cols, digits) -> int:
    """Set each column's minimum width and return the width the table needs: number columns as wide
    as their widest number and their header; text columns as their header, and up to 16 characters
    of their content (longer text folds)."""
    for col, c, label in zip(table.columns, columns, [str(col.header) for col in table.columns]):
        widest = max([len(_table_cell(r.get(c), digits)) for r in rows] + [0])
        col.min_width = max(widest, len(label)) if c in numeric_cols else max(len(label), min(widest, 16))
    return sum(col.min_width for col in table.columns) + 3 * len(columns) - 1


def _render_records(table, columns, console) -> None:
    """Each row as a block of ``column  value`` lines (a table too wide for the terminal)."""
    from rich.table import Table

    cells = [list(col.cells) for col in table.columns]
    if table.title:
        console.print(table.title, style="italic")
    for i in range(len(cells[0]) if cells else 0):
        block = Table(show_header=False, show_edge=False, box=None, padding=(0, 2, 0, 0))
        block.add_column(style="bold", no_wrap=True)
        block.add_column(overflow="fold")
        for c, col_cells in zip(columns, cells):
            block.add_row(c, col_cells[i])
        if i:
            console.print()
        console.print(block)


def silence_stdout() -> None:
    """After a broken pipe (`| head`), point stdout at /dev/null so the final flush cannot fail."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def write_text(text: str, stream: IO[str] | None = None) -> None:
    """Write raw text to stdout (for formats that are not records: TREC runs, MatrixMarket)."""
    (stream or sys.stdout).write(text)


def stdout_is_terminal() -> bool:
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


def stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False
