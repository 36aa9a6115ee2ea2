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
import os
import re
from dataclasses import dataclass, field
from typing import IO

import numpy as np

from nlpkit.errors import NlpkitError

OPTION_PREFIX = "# nlpkit: "
_ARPA_SPACES = re.compile(rb"[\t\r ]+")


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


def _open_read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            head = f.read(2)
            f.seek(0)
            if head == b"\x1f\x8b":
                with gzip.open(f) as g:
                    return g.read()
            return f.read()
    except FileNotFoundError:
        raise NlpkitError(f"{path}: no such file") from None
    except (OSError, EOFError) as e:
        raise NlpkitError(f"{path}: cannot read ({getattr(e, 'strerror', None) or e})") from None


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


class _Lines:
    """The file's lines with their 1-based numbers, read forward."""

    def __init__(self, data: bytes, path: str) -> None:
        self.lines = data.split(b"\n")
        if self.lines and self.lines[-1] == b"":
            self.lines.pop()
        self.i = 0
        self.path = path

    def error(self, lineno: int, msg: str) -> NlpkitError:
        return NlpkitError(f"{self.path}, line {lineno}: {msg}")

    def next_nonblank(self) -> tuple[int, bytes] | None:
        while self.i < len(self.lines):
            line = self.lines[self.i].rstrip(b"\r")
            self.i += 1
            if line.strip():
                return self.i, line
        return None


def read_model_file(path: str | os.PathLike) -> RawModel:
    """Parse an ARPA or counts file into arrays; errors name the file and line."""
    path = str(path)
    data = _open_read(path)
    src = _Lines(data, path)
    options: dict[str, str] = {}
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
    header_line = lineno
    declared: list[int] = []
    declared_at: list[int] = []
    while True:
        if src.i >= len(src.lines):
            raise src.error(src.i, "the file ends inside the \\data\\ header")
        line = src.lines[src.i].rstrip(b"\r")
        src.i += 1
        if not line.strip():
            if declared:
                break
            continue
        parts = line.split(b"=")
        head = parts[0].split()
        if len(parts) != 2 or len(head) != 2 or head[0] != b"ngram" or not head[1].isdigit() \
                or not parts[1].strip().isdigit():
            raise src.error(src.i, f"expected 'ngram N=COUNT' in the header, got {_show(line)}")
        k = int(head[1])
        if k != len(declared) + 1:
            raise src.error(src.i, f"the n-gram orders must go 1, 2, 3, ... without a gap; "
                                   f"got order {k} after {len(declared)}")
        declared.append(int(parts[1]))
        declared_at.append(src.i)
    if not declared:
        raise src.error(header_line, "no 'ngram N=COUNT' lines after \\data\\")

    vocab: list[str] = []
    word_id: dict[bytes, int] = {}
    ngrams, values, backoffs, first = [], [], [], []
    for k, n in enumerate(declared, 1):
        got = src.next_nonblank()
        want = f"\\{k}-grams:".encode()
        if got is None or got[1].strip() != want:
            where = got[0] if got else src.i
            saw = _show(got[1]) if got else "the end of the file"
            raise src.error(where, f"expected the section header {want.decode()}, got {saw}")
        start = src.i                                  # index of the first entry line
        end = start + n                                # the declared count, checked in O(1) first
        if not (end <= len(src.lines) and (n == 0 or _is_entry(src.lines[end - 1]))
                and (end == len(src.lines) or not _is_entry(src.lines[end]))):
            end = start
            while end < len(src.lines) and _is_entry(src.lines[end]):
                end += 1
        if end - start != n:
            raise src.error(start, f"the \\{k}-grams: section has {end - start} entries (lines {start + 1}-{end}) "
                                   f"but line {declared_at[k - 1]} declares {n}")
        grams, vals, bos = _parse_section(src, start, end, k, kind, vocab, word_id)
        ngrams.append(grams)
        values.append(vals)
        backoffs.append(bos)
        first.append(start + 1)
        src.i = end
    got = src.next_nonblank()
    if got is None or got[1].strip() != b"\\end\\":
        where = got[0] if got else src.i
        raise src.error(where, f"expected \\end\\ after the {len(declared)}-grams, got "
                               f"{_show(got[1]) if got else 'the end of the file'}")
    return RawModel(kind=kind, vocab=vocab, ngrams=ngrams, values=values, backoffs=backoffs,
                    options=options, first_line=first)


def _show(line: bytes) -> str:
    text = line.decode("utf-8", "replace")
    return repr(text if len(text) <= 60 else text[:57] + "...")


def _is_entry(line: bytes) -> bool:
    return bool(line.strip()) and not line.startswith(b"\\")


def _parse_section_fast(blob: bytes, n: int, k: int, kind: str, word_id: dict[bytes, int]):
    """Every line with the same fields (all backoffs present, or none): columns by slicing one split.

    None when the section is not uniform (SRILM's missing backoffs) or something does not parse;
    the line-by-line parser then finds the line to blame."""
    if b"\x0b" in blob or b"\x0c" in blob:
        return None
    toks = blob.split()
    widths = (k + 1,) if kind == "counts" else (k + 2, k + 1)
    w = next((w for w in widths if len(toks) == n * w), None)
    if w is None or n == 0:
        return None
    tabs = blob.count(b"\t")
    if tabs and tabs != n * (w - k):                     # tab-separated: prob<TAB>words[<TAB>backoff]
        return None
    try:
        vals = np.array(toks[0::w], dtype="S").astype(np.float64)
        bo = np.array(toks[w - 1::w], dtype="S").astype(np.float64).astype(np.float32) if w == k + 2 \
            else np.zeros(n, dtype=np.float32)
        cols = [np.fromiter(map(word_id.__getitem__, toks[1 + j::w]), dtype=np.int32, count=n) for j in range(k)]
    except (ValueError, KeyError):
        return None
    if kind == "counts" and (vals < 0).any():
        return None
    return np.stack(cols, axis=1), vals, bo


def _parse_section(src: _Lines, start: int, end: int, k: int, kind: str, vocab: list[str],
                   word_id: dict[bytes, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    lines = src.lines[start:end]
    if k > 1:
        fast = _parse_section_fast(b"\n".join(lines), len(lines), k, kind, word_id)
        if fast is not None:
            grams, vals, bo = fast
            return grams, vals.astype(np.float64 if kind == "counts" else np.float32), bo
    if any(b"\x0b" in line or b"\x0c" in line for line in lines):   # ARPA splits on tab, CR, LF, space only
        fields = [[w for w in _ARPA_SPACES.split(line) if w] for line in lines]
    else:
        fields = [line.split() for line in lines]
    lens = np.fromiter(map(len, fields), dtype=np.int64, count=len(fields))
    max_fields = k + 1 if kind == "counts" else k + 2
    bad = np.flatnonzero((lens < k + 1) | (lens > max_fields))
    if len(bad):
        i = int(bad[0])
        form = "count words" if kind == "counts" else "log10-probability words [backoff]"
        raise src.error(start + i + 1, f"expected '{form}' with {k} word{'s' if k > 1 else ''}, "
                                       f"got {_show(lines[i])}")
    n = len(lines)
    vals_raw = np.array([f[0] for f in fields], dtype=object)
    try:
        vals = np.array(vals_raw.astype("S"), dtype=np.float64)
    except ValueError:
        vals = None
    if vals is None or (kind == "counts" and (vals < 0).any()):
        for i, f in enumerate(fields):
            try:
                v = float(f[0])
            except ValueError:
                v = None
            if v is None or (kind == "counts" and v < 0):
                what = "a count" if kind == "counts" else "a log10 probability"
                raise src.error(start + i + 1, f"expected {what} first, got {_show(f[0])}")
    bo = np.zeros(n, dtype=np.float32)
    has_bo = lens == k + 2
    if has_bo.any():
        rows = np.flatnonzero(has_bo)
        try:
            bo[rows] = np.array(np.array([fields[i][-1] for i in rows], dtype="S"), dtype=np.float64)
        except ValueError:
            for i in rows:
                try:
                    float(fields[i][-1])
                except ValueError:
                    raise src.error(start + i + 1, f"expected a log10 backoff last, got "
                                                   f"{_show(fields[i][-1])}") from None
    if k == 1:
        for i, f in enumerate(fields):
            w = f[1]
            if w in word_id:
                raise src.error(start + i + 1, f"the unigram {_show(w)} appears twice")
            word_id[w] = len(vocab)
            vocab.append(w.decode("utf-8", "surrogateescape"))
        grams = np.arange(n, dtype=np.int32)[:, None]
    else:
        flat = [w for f in fields for w in f[1:k + 1]]
        try:
            ids = np.fromiter(map(word_id.__getitem__, flat), dtype=np.int32, count=len(flat))
        except KeyError as e:
            word = e.args[0]
            i = next(i for i, f in enumerate(fields) if word in f[1:k + 1])
            raise src.error(start + i + 1, f"the word {_show(word)} is not among the unigrams") from None
        grams = ids.reshape(n, k)
    return grams, vals.astype(np.float64 if kind == "counts" else np.float32), bo


# ------------------------------------------------------------------------------ writing

def _fmt_float(x: np.ndarray) -> list[str]:
    """float32 values as the shortest of 7, 8 or 9 significant digits that reads back to the same
    float32 (lmplz prints the shortest round-trip form; this agrees with it to the last bit)."""
    x = np.asarray(x, dtype=np.float32)
    out = ["%.7g" % v for v in x.tolist()]
    for digits in (8, 9):
        back = np.array(out, dtype=np.float64).astype(np.float32) if out else x
        bad = np.flatnonzero(back != x)
        if not len(bad):
            break
        fmt = f"%.{digits}g"
        vals = x[bad].tolist()
        for i, v in zip(bad.tolist(), vals):
            out[i] = fmt % v
    return out


def _gram_strings(vocab: list[str], ngrams: list[np.ndarray], keys_prefix: list[np.ndarray]) -> list[list[str]]:
    """Each n-gram as "w1 w2 ...", built from its prefix's string."""
    out = [list(vocab)]
    for k in range(2, len(ngrams) + 1):
        prev = out[-1]
        last = ngrams[k - 1][:, -1].tolist()
        out.append([prev[p] + " " + vocab[w] for p, w in zip(keys_prefix[k - 1].tolist(), last)])
    return out


def write_model_file(path: str, kind: str, vocab: list[str], ngrams: list[np.ndarray], values: list[np.ndarray],
                     backoffs: list[np.ndarray] | None, options: dict[str, str], comments: list[str] = ()) -> None:
    """Write an ARPA file (kind "arpa") or a counts file ("counts"); `.gz` compresses.

    `ngrams[k-1]` must be sorted lexicographically with every prefix present (as the trainer gives).
    """
    from nlpkit.lm.ngram.kneser_ney import index_of, table_keys

    V = len(vocab)
    keys = table_keys(ngrams, V)
    prefix = [np.zeros(0, dtype=np.int64)] + [index_of(keys, ngrams[k - 1][:, :-1], V)
                                              for k in range(2, len(ngrams) + 1)]
    strings = _gram_strings(vocab, ngrams, prefix)
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "wt", encoding="utf-8", errors="surrogateescape", newline="\n") as out:
            for c in comments:
                out.write(f"# {c}\n")
            for key, value in options.items():
                out.write(f"{OPTION_PREFIX}{key}={value}\n")
            out.write("\\data\\\n" if kind == "arpa" else "\\counts\\\n")
            for k, g in enumerate(ngrams, 1):
                out.write(f"ngram {k}={len(g)}\n")
            out.write("\n")
            top = len(ngrams)
            for k in range(1, top + 1):
                out.write(f"\\{k}-grams:\n")
                if kind == "counts":
                    vals = [str(int(v)) for v in values[k - 1].tolist()]
                    out.write("".join(f"{v}\t{s}\n" for v, s in zip(vals, strings[k - 1])))
                elif k < top:
                    vals, bos = _fmt_float(values[k - 1]), _fmt_float(backoffs[k - 1])
                    out.write("".join(f"{v}\t{s}\t{b}\n" for v, s, b in zip(vals, strings[k - 1], bos)))
                else:
                    vals = _fmt_float(values[k - 1])
                    out.write("".join(f"{v}\t{s}\n" for v, s in zip(vals, strings[k - 1])))
                out.write("\n")
            out.write("\\end\\\n")
    except OSError as e:
        raise NlpkitError(f"{path}: cannot write ({e.strerror or e})") from None


__all__ = ["RawModel", "read_model_file", "write_model_file", "sniff", "OPTION_PREFIX"]
