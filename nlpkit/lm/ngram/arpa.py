r"""ARPA files (KenLM, SRILM, nlpkit) and nlpkit's counts format, read into numpy arrays and written.

ARPA::

    # nlpkit: order=3                       <- nlpkit's options, comment lines KenLM skips
    \data\
    ngram 1=5
    ngram 2=7
                                            <- then one section per order:
    \1-grams:
    -1.2041	<unk>	0                       <- log10 p, words, [log10 backoff]
    ...
    \end\

A missing backoff is 0 (SRILM leaves them out); ``-99`` marks an impossible event (``<s>``).
Words are split on ASCII whitespace; lines before ``\data\`` are skipped. `.gz` files are
read and written compressed.

nlpkit's counts format (``mle`` and ``add-k`` models, which the backoff form cannot express)
has the same layout with ``\counts\`` in place of ``\data\`` and a raw count in place of the
log-probability, no backoffs: every k-gram of the training text, k = 1..order, with its count.
ARPA readers refuse it (no ``\data\`` line), so it is never mistaken for an ARPA model.
"""

from __future__ import annotations

import gzip
import math
import mmap
import os
from dataclasses import dataclass, field
from functools import partial
from typing import IO, Callable, Iterable, Iterator, Sequence

import numpy as np

from nlpkit.errors import NlpkitError
from nlpkit.lm.ngram.hashing import words8
from nlpkit.lm.ngram.lookup import WordIndex

OPTION_PREFIX = "# nlpkit: "
FORMAT_VERSION = "1"                  # the `# nlpkit: format=` of the files nlpkit writes and reads


@dataclass
class RawModel:
    """A parsed file: sections as arrays, not yet indexed.

    kind "arpa": ``values`` are log10 probabilities and ``backoffs`` log10 backoffs;
    kind "counts": ``values`` are counts. ``ngrams[k-1]`` int32 [n_k, k] in file order;
    ``line_of[k-1]`` is the file line of each section's first entry (for messages).
    """

    kind: str
    vocab: list[str]
    ngrams: list[np.ndarray]
    values: list[np.ndarray]
    backoffs: list[np.ndarray]
    options: dict[str, str] = field(default_factory=dict)
    first_line: list[int] = field(default_factory=list)
    option_line: dict[str, int] = field(default_factory=dict)   # where each option was read


def _open_read(path: str):
    """The file's bytes: a read-only memory map of a plain file (its pages are let go as the parser
    passes them, see `_release`), the decompressed bytes of a .gz one."""
    try:
        with open(path, "rb") as f:
            head = f.read(2)
            f.seek(0)
            if head == b"\x1f\x8b":
                with gzip.open(f) as g:
                    return g.read()
            if os.fstat(f.fileno()).st_size == 0:
                return b""
            try:
                return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            except (OSError, ValueError):                  # no mmap here (a pipe, a special file)
                return f.read()
    except FileNotFoundError:
        raise NlpkitError(f"{path}: no such file") from None
    except (OSError, EOFError) as e:
        raise NlpkitError(f"{path}: cannot read ({getattr(e, 'strerror', None) or e})") from None


def _release(data, end: int) -> None:
    """Let the pages of a memory-mapped file before `end` go (they are parsed): the file's size does
    not add to the peak memory. Reading them again (an error message) maps them back in."""
    if isinstance(data, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED"):
        upto = end - end % mmap.PAGESIZE
        if upto > 0:
            data.madvise(mmap.MADV_DONTNEED, 0, upto)


def _count_lf(data, start: int, end: int) -> int:
    """Line feeds in data[start:end] (bytes or a memory map, which has no .count)."""
    if isinstance(data, bytes):
        return data.count(b"\n", start, end)
    end = max(start, end)
    return int(np.count_nonzero(np.frombuffer(data, dtype=np.uint8, count=end - start, offset=start) == 10))


def sniff(path: str | os.PathLike) -> str | None:
    """"arpa", "counts" or None: what the first line that is not blank or a comment says."""
    p = str(path)
    if os.path.isdir(p) or not os.path.isfile(p):
        return None
    try:
        with open(p, "rb") as f:
            head = f.read(2)
            f.seek(0)
            stream: IO[bytes] = gzip.open(f) if head == b"\x1f\x8b" else f  # type: ignore[assignment]
            for _ in range(200):
                line = stream.readline(4096)
                if not line:
                    return None
                s = line.strip()
                if s == b"\\data\\":
                    return "arpa"
                if s == b"\\counts\\":
                    return "counts"
                if s and not s.startswith(b"#"):
                    return None
    except (OSError, EOFError, gzip.BadGzipFile):
        return None
    return None


def _is_delimiter(buf: np.ndarray) -> np.ndarray:
    """ARPA's delimiters: tab, LF, CR, space (\\v, \\f stay in words), by comparisons (3x a lookup table's speed).

    # [n] uint8 -> [n] bool"""
    sep = (buf - np.uint8(9)) < 2
    sep |= buf == 13
    sep |= buf == 32
    return sep


class _Text:
    """The file's bytes, read forward line by line (for the few header lines) by byte offset."""

    def __init__(self, data: bytes, path: str) -> None:
        self.data = data
        self.pos = 0          # offset of the next line
        self.lineno = 0       # number of the last line read (1-based)
        self.path = path

    def error(self, lineno: int, msg: str) -> NlpkitError:
        return NlpkitError(f"{self.path}, line {lineno}: {msg}")

    def at_end(self) -> bool:
        return self.pos >= len(self.data)

    def next_line(self) -> bytes:
        end = self.data.find(b"\n", self.pos)
        end = len(self.data) if end < 0 else end
        line = self.data[self.pos:end].rstrip(b"\r")
        self.pos = end + 1
        self.lineno += 1
        return line

    def next_nonblank(self) -> tuple[int, bytes] | None:
        while not self.at_end():
            line = self.next_line()
            if line.strip():
                return self.lineno, line
        return None


def read_model_file(path: str | os.PathLike) -> RawModel:
    """Parse an ARPA or counts file into arrays; errors name the file and line.

    The sections are parsed with numpy over the file's bytes (token boundaries, a vectorized
    float parse, words mapped to unigram ids through `lookup.WordIndex`); the line to blame is looked
    for only when a check fails."""
    path = str(path)
    src = _Text(_open_read(path), path)
    options: dict[str, str] = {}
    option_line: dict[str, int] = {}
    kind = None
    while True:
        got = src.next_nonblank()
        if got is None:
            raise NlpkitError(f"{path}: no \\data\\ line: not an ARPA language model")
        lineno, line = got
        s = line.strip()
        if s in (b"\\data\\", b"\\counts\\"):
            kind = "arpa" if s == b"\\data\\" else "counts"
            break
        text = line.decode("utf-8", "replace")
        if text.startswith(OPTION_PREFIX) and "=" in text:
            key, _, value = text[len(OPTION_PREFIX):].partition("=")
            options[key.strip()] = value.strip()
            option_line[key.strip()] = lineno
    header_line = lineno
    declared: list[int] = []
    declared_at: list[int] = []
    while True:
        if src.at_end():
            raise src.error(src.lineno, "the file ends inside the \\data\\ header")
        line = src.next_line()
        if not line.strip():
            if declared:
                break
            continue
        parts = line.split(b"=")
        head = parts[0].split()
        if len(parts) != 2 or len(head) != 2 or head[0] != b"ngram" or not head[1].isdigit() \
                or not parts[1].strip().isdigit():
            raise src.error(src.lineno, f"expected 'ngram N=COUNT' in the header, got {_show(line)}")
        k = int(head[1])
        if k != len(declared) + 1:
            raise src.error(src.lineno, f"the n-gram orders must go 1, 2, 3, ... without a gap; "
                                        f"got order {k} after {len(declared)}")
        declared.append(int(parts[1]))
        declared_at.append(src.lineno)
    if not declared:
        raise src.error(header_line, "no 'ngram N=COUNT' lines after \\data\\")

    vocab: list[str] = []
    voc = None
    ngrams, values, backoffs, first = [], [], [], []
    for k, n in enumerate(declared, 1):
        got = src.next_nonblank()
        want = f"\\{k}-grams:".encode()
        if got is None or got[1].strip() != want:
            where = got[0] if got else src.lineno
            saw = _show(got[1]) if got else "the end of the file"
            raise src.error(where, f"expected the section header {want.decode()}, got {saw}")
        grams, vals, bos, voc = _parse_section(src, n, k, kind, declared_at[k - 1], vocab, voc)
        ngrams.append(grams)
        values.append(vals)
        backoffs.append(bos)
        first.append(got[0] + 1)
    got = src.next_nonblank()
    if got is None or got[1].strip() != b"\\end\\":
        where = got[0] if got else src.lineno
        raise src.error(where, f"expected \\end\\ after the {len(declared)}-grams, got "
                               f"{_show(got[1]) if got else 'the end of the file'}")
    _check_options(path, kind, len(declared), options, option_line)
    return RawModel(kind=kind, vocab=vocab, ngrams=ngrams, values=values, backoffs=backoffs,
                    options=options, first_line=first, option_line=option_line)


def _check_options(path: str, kind: str, order: int, options: dict[str, str], line: dict[str, int]) -> None:
    """The ``# nlpkit:`` options must agree with the file (they decide how text is scored)."""
    def bad(key: str, why: str) -> NlpkitError:
        return NlpkitError(f"{path}, line {line[key]}: {why}")

    if "format" in options and options["format"] != FORMAT_VERSION:
        raise bad("format", f"nlpkit model format {options['format']!r}; this nlpkit reads format {FORMAT_VERSION} "
                            "(written by another version?)")
    if "order" in options and options["order"] != str(order):
        raise bad("order", f"order={options['order']} but the file holds n-grams up to order {order}")
    smoothing = options.get("smoothing")
    allowed = ("kneser-ney",) if kind == "arpa" else ("mle", "add-k")
    if smoothing is not None and smoothing not in allowed:
        raise bad("smoothing", f"smoothing={smoothing!r} in {'an ARPA' if kind == 'arpa' else 'a counts'} file "
                               f"(expected {' or '.join(allowed)})")
    if kind == "counts" and smoothing == "add-k":
        if "k" not in options:
            raise bad("smoothing", "an add-k model without a k= option line")
        try:
            k = float(options["k"])
        except ValueError:
            k = math.nan
        if not (k > 0 and math.isfinite(k)):
            raise bad("k", f"k={options['k']}: add-k needs a k above 0")
    if options.get("lowercase", "false") not in ("true", "false"):
        raise bad("lowercase", f"lowercase={options['lowercase']!r} (expected true or false)")


def _show(line: bytes) -> str:
    text = line.decode("utf-8", "replace")
    return repr(text if len(text) <= 60 else text[:57] + "...")


def _parse_floats(w8: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> np.ndarray | None:
    """The tokens as float64 (a fixed-width bytes array, gathered 8 bytes at a time, cast by numpy);
    None if one does not parse."""
    from nlpkit.lm.ngram.hashing import chunk

    if len(starts) == 0:
        return np.zeros(0, dtype=np.float64)
    n_chunks = (int(lens.max()) + 7) // 8
    if n_chunks > 8:
        return None
    chars = np.empty((len(starts), n_chunks), dtype="<u8")
    for c in range(n_chunks):
        chars[:, c] = chunk(w8, starts, lens, c)
    try:
        return chars.view(f"S{8 * n_chunks}").ravel().astype(np.float64)
    except ValueError:
        return None


class _Vocab:
    """Unigram words: the byte strings, and a `WordIndex` over them (a dict if two share a key)."""

    def __init__(self, words: list[bytes]) -> None:
        self.words = words
        index = WordIndex.from_bytes(words)
        self.index = index if index.index is not None else None
        self.unique = self.index is not None
        self.dict = None if self.unique else {w: i for i, w in enumerate(words)}


CHUNK_BYTES = 1 << 22                        # a section is parsed 4 MB at a time: small temporaries, in cache


def _parse_section(src: _Text, n: int, k: int, kind: str, declared_at: int, vocab: list[str], voc: _Vocab | None):
    """The section after its header line (src at its first entry): (grams, values, backoffs, vocab).

    Its entries are the lines up to the first blank one (or the next line starting with a backslash);
    they are parsed with numpy in chunks of about CHUNK_BYTES, cut at line ends. The count is checked
    first (the lines before the blank ones that end the section); a blank line inside shows up in
    its chunk."""
    data, start, header = src.data, src.pos, src.lineno
    j = data.find(b"\n\\", start - 1)                 # the next line that starts with a backslash
    region_end = max(start, len(data) if j < 0 else j + 1)
    end = region_end                                     # back over the blank lines that end the section
    while end > start and data[end - 1] in b" \t\r\n":
        end -= 1
    nl = data.find(b"\n", end, region_end)
    entries_end = start if end == start else region_end if nl < 0 else nl + 1    # (no entries: "ngram 5=0")
    m = _count_lf(data, start, entries_end) + (1 if entries_end > start and data[entries_end - 1] != 10 else 0)

    def count_error(m: int) -> NlpkitError:
        return src.error(header, f"the \\{k}-grams: section has {m} entries (lines {header + 1}-{header + m}) "
                                 f"but line {declared_at} declares {n}")

    def blank_inside(m: int) -> NlpkitError:                # entries end at line m: the rest must be blank
        if m != n:
            return count_error(m)
        lines = data[start:region_end].split(b"\n")[m:]
        i = next(i for i, line in enumerate(lines) if line.strip(b" \t\r"))
        stray = _show(lines[i].rstrip(b"\r"))
        return src.error(header + 1 + m + i, f"expected a blank line or a section header after the {m} entries of "
                                             f"the \\{k}-grams: section, got {stray}")

    if m != n:
        first_blank = data.find(b"\n\n", start, entries_end)       # an empty line inside explains it best
        raise blank_inside(_count_lf(data, start, first_blank) + 1) if first_blank >= 0 and \
            _count_lf(data, start, first_blank) + 1 < m else count_error(m)
    bounds = [start]
    while bounds[-1] + CHUNK_BYTES < entries_end:
        e = data.find(b"\n", bounds[-1] + CHUNK_BYTES, entries_end)
        if e < 0 or e + 1 >= entries_end:
            break
        bounds.append(e + 1)
    bounds.append(entries_end)
    parts, words_all = [], []
    lines_before = 0
    for cs, ce in zip(bounds[:-1], bounds[1:]):
        part = _parse_chunk(src, data, cs, ce, header + lines_before, k, kind, voc)
        if isinstance(part, int):                          # a blank line inside: the entries end there
            raise blank_inside(lines_before + part)
        if k == 1:
            words_all += part[3]
        parts.append((part[0], part[1].astype(np.float64 if kind == "counts" else np.float32), part[2]))
        _release(data, ce)
        lines_before += len(part[1])
    if k == 1:
        voc = _Vocab(words_all)
        if not voc.unique:                                     # a repeated word (or, rarely, two hashes alike)
            seen: dict[bytes, int] = {}
            for i, w in enumerate(words_all):
                if w in seen:
                    raise src.error(header + 1 + i, f"the unigram {_show(w)} appears twice")
                seen[w] = i
        vocab.extend(w.decode("utf-8", "surrogateescape") for w in words_all)
        grams = np.arange(m, dtype=np.int32)[:, None]
    else:
        grams = np.concatenate([p[0] for p in parts]) if parts else np.zeros((0, k), dtype=np.int32)
    vals = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0)   # (float32 for log10 p)
    bo = np.concatenate([p[2] for p in parts]) if parts else np.zeros(0, dtype=np.float32)
    src.pos = entries_end
    src.lineno = header + m
    return grams, vals.astype(np.float64 if kind == "counts" else np.float32), bo, voc


def _bad_values(vals: np.ndarray, kind: str) -> np.ndarray:
    """Values a model cannot hold: a count that is negative, not whole or not finite; a log10
    probability that is NaN or above 0 (KenLM's query refuses both; -inf, a probability of 0, is read)."""
    if kind == "counts":
        return ~np.isfinite(vals) | (vals < 0) | (vals != np.floor(vals))
    return np.isnan(vals) | (vals > 0)


def _parse_chunk(src: _Text, data: bytes, cs: int, ce: int, before: int, k: int, kind: str, voc: _Vocab | None):
    """Entry lines data[cs:ce] -> (grams or None, values, backoffs[, words]), or the
    index of the first blank line; `before` is the file line just before the chunk's first (for messages)."""
    buf = np.frombuffer(data, dtype=np.uint8, count=ce - cs, offset=cs)
    nl = np.flatnonzero(buf == 10)
    m = len(nl) + (1 if len(buf) and buf[-1] != 10 else 0)
    line_start = np.concatenate([[0], nl + 1])[:m]
    line_end = np.append(nl, len(buf))[:m]
    word = ~_is_delimiter(buf)
    edges = np.diff(np.concatenate([[False], word, [False]]).view(np.int8))
    del word
    t_start = np.flatnonzero(edges == 1)
    t_end = np.flatnonzero(edges == -1)
    del edges
    fields = np.diff(np.searchsorted(t_start, np.append(line_start, len(buf))))   # tokens per line
    blank = np.flatnonzero(fields == 0)
    if len(blank):
        return int(blank[0])
    t_len = t_end - t_start

    def line_text(i: int) -> bytes:
        return data[cs + int(line_start[i]):cs + int(line_end[i])].rstrip(b"\r")

    def tok(t: int) -> bytes:
        return data[cs + int(t_start[t]):cs + int(t_end[t])]

    max_fields = k + 1 if kind == "counts" else k + 2
    bad = np.flatnonzero((fields < k + 1) | (fields > max_fields))
    if len(bad):
        i = int(bad[0])
        form = "count words" if kind == "counts" else "log10-probability words [backoff]"
        raise src.error(before + 1 + i, f"expected '{form}' with {k} word{'s' if k > 1 else ''}, "
                                        f"got {_show(line_text(i))}")
    w8 = words8(buf)
    first = np.cumsum(fields) - fields                         # [m] token index of each line's first field
    vals = _parse_floats(w8, t_start[first], t_len[first])
    if vals is None or _bad_values(vals, kind).any():
        for i in range(m):
            text = tok(first[i])
            try:
                v = float(text)
            except ValueError:
                v = None
            if v is None or _bad_values(np.array([v]), kind)[0]:
                what = "a count" if kind == "counts" else "a log10 probability (0 or less)"
                raise src.error(before + 1 + i, f"expected {what} first, got {_show(text)}")
    bo = np.zeros(m, dtype=np.float32)
    rows = np.flatnonzero(fields == k + 2)
    if len(rows):
        last = first[rows] + k + 1
        b = _parse_floats(w8, t_start[last], t_len[last])
        if b is None or not np.isfinite(b).all():
            for i, t in zip(rows.tolist(), last.tolist()):
                try:
                    ok = math.isfinite(float(tok(t)))
                except ValueError:
                    ok = False
                if not ok:
                    raise src.error(before + 1 + i, f"expected a log10 backoff last, got {_show(tok(t))}")
        bo[rows] = b
    widx = (first[:, None] + np.arange(1, k + 1)).ravel()      # [m * k] token index of every word
    w_start, w_len = t_start[widx], t_len[widx]
    if k == 1:
        words = [data[cs + s:cs + s + ln] for s, ln in zip(w_start.tolist(), w_len.tolist())]
        return None, vals, bo, words
    if voc.dict is not None:
        get = voc.dict.get
        ids = np.fromiter((get(data[cs + s:cs + s + ln], -1) for s, ln in zip(w_start.tolist(), w_len.tolist())),
                          dtype=np.int32, count=len(w_start))
    else:
        ids = voc.index.find(w8, w_start, w_len).astype(np.int32)
    missing = np.flatnonzero(ids < 0)
    if len(missing):
        t = int(missing[0])
        word = data[cs + int(w_start[t]):cs + int(w_start[t] + w_len[t])]
        raise src.error(before + 1 + t // k, f"the word {_show(word)} is not among the unigrams")
    return ids.reshape(m, k), vals, bo


# ------------------------------------------------------------------------------ writing

_POW10 = 10 ** np.arange(19, dtype=np.int64)
WRITE_ROWS = 1 << 16                      # lines made at a time (their distinct values formatted together): numpy
                                          # operations long enough that two threads gain from the GIL let go in them
FORMAT_CHUNK = 1 << 16                    # values formatted at a time


class _Strings:
    """Strings as one byte pool with starts and lengths."""

    def __init__(self, pool: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> None:
        self.pool, self.starts, self.lens = pool, starts, lens

    @classmethod
    def of(cls, items: list[bytes]) -> "_Strings":
        lens = np.fromiter(map(len, items), dtype=np.int64, count=len(items))
        pool = np.frombuffer(b"".join(items), dtype=np.uint8) if items else np.zeros(0, np.uint8)
        return cls(pool, np.cumsum(lens) - lens, lens)


_DIGITS4 = np.array([b"%04d" % i for i in range(10000)]).view(np.uint32)    # [10000] four ASCII digits each
_POW10F = 10.0 ** np.arange(20)                                               # (what 10.0 ** f gives, looked up)


_TRAILING4 = np.array([4] + [len(b"%04d" % i) - len((b"%04d" % i).rstrip(b"0")) for i in range(1, 10000)],
                      dtype=np.int64)                                 # [10000] trailing zeros of each 4 digits


def _digit_groups(m: np.ndarray) -> np.ndarray:
    """Integers 0 <= m < 10**16 as four groups of four decimal digits, most significant first.  # [n] -> [4, n]"""
    out = np.empty((4, len(m)), dtype=np.int64)
    r = m
    for g in (3, 2, 1):
        q = r // 10000
        np.subtract(r, q * 10000, out=out[g])
        r = q
    out[0] = r
    return out


_ROW = 32                                  # bytes a formatted value is laid out in (see `_decimal`)


def _decimal(x: np.ndarray, end: bytes) -> tuple[_Strings, np.ndarray]:
    """'%.{7,8,9}g' (the fewest digits that read back to the same float32) of float32 values
    with 1e-4 <= |x| < 1e4, or 0, vectorized, each followed by `end` (one byte or none); and a
    mask of the values this could not do.

    The value rounded to 7, 8 or 9 significant digits is an integer m and a count f of fraction
    digits (m / 10**f). Each value is laid out in a row of 32 bytes: its integer part in bytes 0-7
    (digits, with leading zeros), the point in byte 8, its fraction in bytes 9-24 (digits, with
    trailing zeros); the sign goes just before the first integer digit shown (the units at least) and
    `end` just after the last fraction digit that is not 0 (on the point when there is none). The
    string is that span of the row:
    ``-0.25 -> m 2500000, f 7 -> "0000000-0.250000000000000\t" -> "-0.25\t"``"""
    a32 = np.abs(x)
    a = a32.astype(np.float64)
    e = np.floor(np.log10(np.where(a == 0, 1.0, a))).astype(np.int64)
    f = 6 - e                                                      # 7 digits, then 8, 9 for those that need them
    m = np.rint(a * _POW10F[f]).astype(np.int64)                  # (0 is m = 0 whatever f)
    todo = np.flatnonzero((m / _POW10F[f]).astype(np.float32) != a32)
    for sig in (8, 9):                                             # 9 digits always read back
        ft = sig - 1 - e[todo]
        scale = _POW10F[ft]
        mt = np.rint(a[todo] * scale).astype(np.int64)
        ok = (mt / scale).astype(np.float32) == a32[todo] if sig < 9 else np.ones(len(todo), dtype=bool)
        f[todo[ok]], m[todo[ok]] = ft[ok], mt[ok]
        todo = todo[~ok]
    bad = np.zeros(len(x), dtype=bool)
    bad[todo] = True
    n = len(x)
    unit = _POW10[f]
    ip = m // unit                                                 # [n] integer part (< 10**8)
    frac = m - ip * unit
    frac *= _POW10[16 - f]                                         # the fraction's digits, left-aligned in 16
    groups = _digit_groups(frac)                                   # [4, n]
    zeros = np.where(groups[3] > 0, _TRAILING4[groups[3]],          # trailing zeros of the 16 digits
                     np.where(groups[2] > 0, 4 + _TRAILING4[groups[2]],
                              np.where(groups[1] > 0, 8 + _TRAILING4[groups[1]], 12 + _TRAILING4[groups[0]])))
    shown = 16 - zeros                                             # fraction digits shown (0 for none)
    nd = np.ones(n, dtype=np.int64)                                # integer digits ("0" has one)
    for j in range(1, 8):
        nd += ip >= _POW10[j]
    flat = np.empty(n * _ROW, dtype=np.uint8)
    hi = ip // 10000

    def column(byte: int) -> np.ndarray:                           # the 4 bytes at `byte` of every row, as uint32
        return np.ndarray((n,), dtype=np.uint32, buffer=flat, offset=byte, strides=(_ROW,))
    column(0)[...] = _DIGITS4[hi]
    column(4)[...] = _DIGITS4[ip - hi * 10000]
    for g in range(4):
        column(9 + 4 * g)[...] = _DIGITS4[groups[g]]
    at = np.arange(0, n * _ROW, _ROW)                              # [n] where each row starts
    flat[at + 8] = ord(".")
    first = at + 8 - nd                                            # first integer digit shown
    neg = np.flatnonzero(np.signbit(x))
    first[neg] -= 1
    flat[first[neg]] = ord("-")
    stop = at + np.where(shown > 0, 9 + shown, 8)                  # past the number
    if end:
        flat[stop] = end[0]
        stop += 1
    return _Strings(flat, first, stop - first), bad


def _distinct(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Non-negative int64 keys (consumed) -> (the index of one occurrence of each distinct key [u],
    the distinct key of every element [n]): what is formatted once and what points at it."""
    from nlpkit.lm.ngram.ngram_counts import sorted_unique

    table, _, rows = sorted_unique(keys)
    first = np.empty(len(table), dtype=np.int64)
    first[rows] = np.arange(len(rows))
    return first, rows


def _shortest(u: np.ndarray, end: bytes) -> _Strings:
    """float32 values as the shortest of '%.7g', '%.8g', '%.9g' that reads back to the same float32
    (lmplz prints the shortest round-trip form: the values agree to the last bit), each followed by
    `end`; vectorized for 0 and 1e-4 <= |x| < 1e4 (every log10 probability and backoff in practice),
    FORMAT_CHUNK values at a time (in cache), Python for the rest."""
    au = np.abs(u)
    vectorized = (au == 0) | ((au >= 1e-4) & (au < 1e4))
    fast = np.flatnonzero(vectorized)
    parts = [_decimal(u[fast[i:i + FORMAT_CHUNK]], end) for i in range(0, len(fast), FORMAT_CHUNK)]
    pool = [p[0].pool for p in parts]                              # the strings of `fast`, in order
    lens = np.zeros(len(u), dtype=np.int64)
    starts = np.zeros(len(u), dtype=np.int64)
    if parts:
        base = np.cumsum([0] + [len(p) for p in pool[:-1]])         # each part's offset in the pool
        lens[fast] = np.concatenate([p[0].lens for p in parts])
        starts[fast] = np.concatenate([p[0].starts + b for p, b in zip(parts, base.tolist())])
    slow = np.flatnonzero(~vectorized)
    if parts:
        slow = np.concatenate([slow, fast[np.concatenate([p[1] for p in parts])]])
    if len(slow):
        extra = []
        for i in slow.tolist():                                    # exponents, inf, nan
            v = float(u[i])
            for digits in (7, 8, 9):
                t = f"%.{digits}g" % v
                if v != v or np.float32(float(t)) == u[i]:
                    break
            extra.append(t.encode() + end)
        more = _Strings.of(extra)
        starts[slow] = more.starts + sum(len(p) for p in pool)
        lens[slow] = more.lens
        pool.append(more.pool)
    return _Strings(np.concatenate(pool) if pool else np.zeros(0, np.uint8), starts, lens)


def _float_strings(x: np.ndarray, end: bytes = b"") -> tuple[_Strings, np.ndarray]:
    """`_shortest` of float32 values, each distinct one formatted once: (the strings of the distinct
    values, the string of every value [n])."""
    x = np.asarray(x, dtype=np.float32)
    first, rows = _distinct(x.view(np.uint32).astype(np.int64))  # bit patterns: -0.0 and 0.0 apart
    return _shortest(x[first], end), rows


def _format_floats(x: np.ndarray) -> _Strings:
    """`_float_strings` one string per value (without an end)."""
    s, rows = _float_strings(x)
    return _Strings(s.pool, s.starts[rows], s.lens[rows])


def _int_strings(x: np.ndarray, end: bytes = b"") -> tuple[_Strings, np.ndarray]:
    """Counts in decimal, each followed by `end`: as `_float_strings` (each distinct count once)."""
    x = np.asarray(x)
    first, rows = _distinct(x.astype(np.int64))                   # a copy: _distinct sorts it
    return _Strings.of([b"%d%s" % (v, end) for v in x[first].tolist()]), rows


ITEM = 16                                 # bytes a line's strings are moved by: one complex128 (numpy's numeric
                                          # gathers and scatters let go of the GIL, its void ones do not)


def _windows(buf: np.ndarray) -> np.ndarray:
    """A complex128 view starting at every byte of `buf`: w[i] = bytes i..i+15 (a raw 16-byte copy; the
    bits are never computed with).  # [len(buf) - 15] complex128"""
    return np.ndarray(shape=(len(buf) - ITEM + 1,), dtype=np.complex128, buffer=buf, strides=(1,))


class _Heads:
    """Strings as the first 16 bytes of each (one aligned complex128, whatever follows the string in its pool
    after it: overwritten when the next string is put down) and their lengths; the bytes of longer strings
    past the 16th are put down afterwards, in windows of their pool."""

    def __init__(self, s: _Strings) -> None:
        pool = np.concatenate([s.pool, np.zeros(ITEM, dtype=np.uint8)])
        self.window = _windows(pool)                                  # [len(pool) + 1]
        self.starts = s.starts
        self.lens = s.lens.astype(np.int32)                           # (strings are shorter than 2 GB)
        self.head = self.window[s.starts]                             # [count] complex128, a copy
        self.long = bool(len(s.lens)) and int(s.lens.max()) > ITEM


def _lines(columns: list[tuple[_Heads, np.ndarray]]) -> np.ndarray:
    """Lines made of strings (each column a `_Heads` and the row of every line in it), one after another.

    Every string's first 16 bytes are scattered in line order into the output, at the sum of the lengths
    before it: what follows a shorter string in its 16 bytes is overwritten by the next string (numpy
    scatters the elements of an index array in order: `tests/lm/test_ngram_train.py` pins it), and the
    last string's by nothing (the slack is cut off). Then the rest of the strings longer than 16 bytes,
    in 16-byte windows that end inside them (in any order: they only write their own bytes).  # [bytes] uint8

    ``[("-1.5\\t", "a\\n"), ("-2\\t", "bc\\n")] -> b"-1.5\\ta\\n-2\\tbc\\n"``
    """
    m, C = len(columns[0][1]), len(columns)
    items = np.empty((m, C), dtype=np.complex128)                   # [m, C]: row-major is the order in the file
    lens = np.empty((m, C), dtype=np.int32)
    for c, (h, rows) in enumerate(columns):
        items[:, c] = h.head.take(rows)
        lens[:, c] = h.lens.take(rows)
    lens = lens.reshape(-1)
    at = np.cumsum(lens, dtype=np.int64)                            # [m * C] where each string ends ...
    total = int(at[-1]) if len(at) else 0
    at -= lens                                                      # ... and starts
    out = np.empty(total + ITEM, dtype=np.uint8)
    dest = _windows(out)
    dest[at] = items.reshape(-1)
    del items
    if any(h.long for h, _ in columns):
        longer = np.flatnonzero(lens > ITEM)                       # [s] the strings longer than 16 bytes
        line, col = np.divmod(longer, C)
        for c, (h, rows) in enumerate(columns):
            if not h.long:
                continue
            here = col == c
            n, p, src = lens[longer[here]], at[longer[here]], h.starts[rows[line[here]]]
            for j in range(1, (int(n.max(initial=0)) - 1) // ITEM + 1):  # window j ends 16 (j - 1) bytes before the end
                more = np.flatnonzero(n > ITEM * j)
                off = n[more] - ITEM * j
                dest[p[more] + off] = h.window[src[more] + off]
    return out[:total]


def _section_blocks(g, values: np.ndarray, backoffs: np.ndarray | None, words: list[_Heads],
                    value_strings: Callable) -> Iterator[Callable[[], np.ndarray]]:
    """The lines of one section as functions that each make WRITE_ROWS of them (uint8 arrays), in order, so
    that several threads can make them (numpy lets go of the GIL in its numeric gathers and scatters). A line
    is strings one after another: the value and a tab, every word and a space (the last a tab, or a newline
    when there is no backoff: `words` holds the vocabulary followed by each), the backoff and a newline.
    Each function formats its own values, each distinct one once (`value_strings`, `_float_strings`)."""
    for at in range(0, len(g), WRITE_ROWS):
        yield partial(_block_lines, g, at, min(at + WRITE_ROWS, len(g)) - at, values, backoffs, words, value_strings)


def _block_lines(g, at: int, m: int, values: np.ndarray, backoffs: np.ndarray | None, words: list[_Heads],
                 value_strings: Callable) -> np.ndarray:
    """Lines at..at+m of a section (see `_section_blocks`).  # [bytes] uint8"""
    ids = g[at:at + m]                                                       # [m, k]
    k = ids.shape[1]
    strings, rows = value_strings(values[at:at + m], b"\t")
    columns = [(_Heads(strings), rows)]
    columns += [(words[0] if j < k - 1 else words[1 if backoffs is not None else 2], ids[:, j]) for j in range(k)]
    if backoffs is not None:
        strings, rows = _float_strings(backoffs[at:at + m], b"\n")
        columns.append((_Heads(strings), rows))
    return _lines(columns)


def _in_order(blocks: Iterable[Callable[[], np.ndarray]], threads: int) -> Iterator[np.ndarray]:
    """Each block's result, in order; made by `threads` threads (a few blocks ahead) when more than one."""
    if threads <= 1:
        yield from (block() for block in blocks)
        return
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(threads, thread_name_prefix="nlpkit-arpa") as pool:
        ahead: deque = deque()
        for block in blocks:
            ahead.append(pool.submit(block))
            if len(ahead) > 2 * threads:
                yield ahead.popleft().result()
        while ahead:
            yield ahead.popleft().result()


def write_model_file(path: str, kind: str, vocab: list[str], sizes: list[int], sections: Iterable[tuple],
                     options: dict[str, str], comments: Sequence[str] = (), threads: int = 1) -> None:
    """Write an ARPA file (kind "arpa") or a counts file ("counts"); `.gz` compresses.

    `sizes[k-1]` is the number of k-grams (the header comes first); `sections` yields, order by
    order, (rows, values, backoffs or None): `rows` [n_k, k] word ids in the order to write (an
    array, or anything whose slices are, such as `NgramRows`; the trainer's is lexicographic).
    Each section is written as it comes (the trainer estimates an order while the one below is
    written out); the lines are made from byte strings with numpy (`_section_blocks`), by `threads`
    threads.
    """
    encoded = [w.encode("utf-8", "surrogateescape") for w in vocab]
    words = [_Heads(_Strings.of([w + sep for w in encoded])) for sep in (b" ", b"\t", b"\n")]
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "wb") as out:
            head = [f"# {c}\n" for c in comments] + [f"{OPTION_PREFIX}{key}={value}\n" for key, value in options.items()]
            head.append("\\data\\\n" if kind == "arpa" else "\\counts\\\n")
            head += [f"ngram {k}={n}\n" for k, n in enumerate(sizes, 1)]
            out.write("".join(head).encode("utf-8", "surrogateescape") + b"\n")
            for k, (g, values, backoffs) in enumerate(sections, 1):
                out.write(f"\\{k}-grams:\n".encode())
                has_backoff = kind == "arpa" and k < len(sizes)
                value_strings = _float_strings if kind == "arpa" else _int_strings
                blocks = _section_blocks(g, values, backoffs if has_backoff else None, words, value_strings)
                for lines in _in_order(blocks, threads):
                    out.write(lines)
                out.write(b"\n")
            out.write(b"\\end\\\n")
    except OSError as e:
        raise NlpkitError(f"{path}: cannot write ({e.strerror or e})") from None


__all__ = ["RawModel", "read_model_file", "write_model_file", "sniff", "OPTION_PREFIX"]
