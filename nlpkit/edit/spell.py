"""Nearest dictionary entries for a query: a numpy bit-parallel scan, usable as a spelling corrector.

The dictionary words are the bit patterns (one row each, sorted by length) and
the query is the text: one query character costs ~20 numpy operations over all
candidate words at once (`nlpkit.edit.bitparallel.bit_levenshtein`). Only words
whose length is close enough to the query can win (a distance is at least the
length difference), so the scan starts with lengths within 1 of the query and
widens only while a better or equal candidate could still exist.

Ranking: distance, then frequency (the dictionary's optional count column,
higher first), then dictionary order. With count_1w.txt that is the classic
"closest, then most common" corrector:

>>> d = Dictionary.from_entries(["cat", "car", "cart", "care", "cards", "cast"])
>>> [(m.word, m.distance) for m in nearest(d, "carr", top=2)]
[('car', 1), ('cart', 1)]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Hashable, Iterable, Sequence

import numpy as np

from nlpkit.edit import batch as bd
from nlpkit.edit import bitparallel as bp
from nlpkit.edit.distance import split_level
from nlpkit.errors import NlpkitError, UsageError
from nlpkit.io import display_name, read_text

DICT_METRICS = ("levenshtein", "osa", "indel", "lcs")


@dataclass
class Match:
    """One dictionary entry found for a query."""

    word: str
    distance: int
    count: float
    rank: int


@dataclass
class Dictionary:
    """Entries sorted by length; per-symbol match masks are built lazily and cached."""

    words: list[str]             # [N] entries, sorted by length (stable)
    counts: np.ndarray           # [N] float64 frequency (0 when absent)
    position: np.ndarray         # [N] line order in the source, for the last tie-break
    lengths: np.ndarray          # [N] int64, ascending
    codes: np.ndarray            # [N, width] int32 padded with -1
    width: int                   # bits per pattern: a power of two from 8
    level: str = "char"
    vocab: dict = field(default_factory=dict)
    _masks: dict = field(default_factory=dict)

    @classmethod
    def from_entries(cls, words: Sequence[str], counts: Sequence[float] | None = None,
                     level: str = "char") -> "Dictionary":
        """Build from words (and optional counts); empty words are dropped."""
        units = [split_level(w, level) for w in words]
        keep = [i for i, u in enumerate(units) if len(u)]
        if not keep:
            raise NlpkitError("the dictionary has no entries")
        lengths = np.array([len(units[i]) for i in keep], np.int64)
        order = np.argsort(lengths, kind="stable")
        kept = [keep[i] for i in order]
        vocab: dict = {}
        codes, lens = bd.encode([units[i] for i in kept], bd.PAD_A, vocab if level == "word" else None)
        width = int(bp.width_class(lens[-1:])[0])
        if width // 64 > bp.MAX_WORDS:
            raise NlpkitError(f"dictionary entry longer than {64 * bp.MAX_WORDS} units")
        cnt = np.zeros(len(kept)) if counts is None else np.asarray(counts, np.float64)[kept]
        return cls([words[i] for i in kept], cnt, np.asarray(kept), lens,
                   bd.widen(codes, width, bd.PAD_A)[:, :width], width, level, vocab)

    def symbol(self, unit: Hashable) -> int:
        """A query unit as a dictionary code (-3 when no entry contains it)."""
        if self.level == "word":
            return self.vocab.get(unit, -3)
        return ord(unit)

    def segments(self, lo: int, hi: int) -> list[tuple[int, int, int]]:
        """Split rows lo:hi where the pattern width class changes: [(lo, hi, width), ...].

        Entries are sorted by length, so each width class (8, 16, 32, 64, ... bits) is one
        contiguous run of rows and runs in its own lane type (short words in uint8)."""
        widths = bp.width_class(self.lengths[[lo, hi - 1]])
        if widths[0] == widths[1]:
            return [(lo, hi, int(widths[0]))]
        cuts = np.flatnonzero(np.diff(bp.width_class(self.lengths[lo:hi]))) + lo + 1
        bounds = [lo, *cuts.tolist(), hi]
        return [(a, b, int(bp.width_class(self.lengths[a:a + 1])[0])) for a, b in zip(bounds, bounds[1:])]

    def masks(self, code: int, width: int) -> np.ndarray:  # -> [W, rows of that width class] lanes
        """Bit i set where entry[i] == code, for the entries of one width class."""
        m = self._masks.get((code, width))
        if m is None:
            lo, hi = self.class_rows(width)
            dtype = np.dtype(bp.lane_dtype(width)).newbyteorder("<")
            m = self._masks[(code, width)] = bp.pack_lanes(self.codes[lo:hi, :width] == code, dtype)
        return m

    def low_bits(self, width: int) -> np.ndarray:  # -> [W, rows of that width class]
        """Each entry's length as its low bits set (the kernel's final mask), cached per class."""
        low = self._masks.get(("low", width))
        if low is None:
            lo, hi = self.class_rows(width)
            low = self._masks[("low", width)] = bp.low_bits(self.lengths[lo:hi], max(1, width // 64),
                                                             bp.lane_dtype(width))
        return low

    def class_rows(self, width: int) -> tuple[int, int]:
        """The rows of one width class."""
        rows = self._masks.get(("rows", width))
        if rows is None:
            classes = bp.width_class(self.lengths)
            rows = self._masks[("rows", width)] = (int(np.searchsorted(classes, width, "left")),
                                                   int(np.searchsorted(classes, width, "right")))
        return rows

    def span(self, lo_len: int, hi_len: int) -> tuple[int, int]:
        """Rows whose length lies in [lo_len, hi_len]."""
        return (int(np.searchsorted(self.lengths, lo_len, "left")),
                int(np.searchsorted(self.lengths, hi_len, "right")))


def load_dictionary(path: str, level: str = "char", errors: str = "strict",
                    warn: Callable[[str], None] | None = None) -> Dictionary:
    """Read ``word`` or ``word<TAB>count`` lines (blank lines skipped); first occurrence wins (a
    repeated word is reported through `warn`)."""
    words: list[str] = []
    counts: list[float] = []
    seen: set[str] = set()
    repeats: list[tuple[int, str]] = []
    for lineno, line in enumerate(read_text(path, errors=errors).split("\n"), 1):
        word, tab, rest = line.rstrip("\r").partition("\t")
        if not word.strip():
            continue
        count = 0.0
        if tab:
            try:
                count = float(rest.split("\t", 1)[0])
            except ValueError:
                raise NlpkitError(f"{display_name(path)}, line {lineno}: the count column "
                                  f"{rest!r} is not a number (expected word<TAB>count)") from None
        if word not in seen:
            seen.add(word)
            words.append(word)
            counts.append(count)
        else:
            repeats.append((lineno, word))
    if repeats and warn is not None:
        lineno, word = repeats[0]
        warn(f"{display_name(path)}: {len(repeats)} repeated word{'s' if len(repeats) > 1 else ''} (the first: "
             f"{word!r}, line {lineno}); each keeps its first line's count")
    if not words:
        raise NlpkitError(f"{display_name(path)}: the dictionary has no entries")
    return Dictionary.from_entries(words, counts, level)


def _scan(d: Dictionary, query: Sequence[Hashable], lo: int, hi: int, metric: str) -> np.ndarray:
    """Distances from `query` to entries lo:hi -> [hi - lo] int64."""
    codes = [d.symbol(u) for u in query]
    out = []
    for a, b, width in d.segments(lo, hi):
        first = a - d.class_rows(width)[0]
        m = d.lengths[a:b]
        n = np.full(b - a, len(codes), np.int64)
        words, dtype = max(1, width // 64), bp.lane_dtype(width)

        def pm_of(j: int, k: int, width=width, first=first) -> np.ndarray:
            return d.masks(codes[j], width)[:, first:first + k]

        if metric in ("levenshtein", "osa"):
            low = d.low_bits(width)[:, first:first + b - a]
            out.append(bp.bit_levenshtein(pm_of, m, n, words, metric == "osa", dtype, low))
        else:
            lcs = bp.bit_lcs(pm_of, n, words, dtype)
            out.append(m + n - 2 * lcs if metric == "indel" else np.maximum(m, n) - lcs)
    return np.concatenate(out)


def nearest(d: Dictionary, query: str, top: int = 1, max_distance: int | None = None,
            metric: str = "levenshtein", rank: str = "distance", edit_odds: float = 100.0) -> list[Match]:
    """The `top` entries closest to `query` (distance <= `max_distance` when given).

    ``rank="distance"``: distance, then count, then dictionary order.
    ``rank="channel"``: a noisy-channel score, count / edit_odds ** distance (each edit
    `edit_odds` times less likely than none), so a common word one edit away can beat
    a rare entry that equals the query; ties as above.
    """
    if rank == "channel":
        return _nearest_channel(d, query, top, max_distance, metric, edit_odds)
    if rank != "distance":
        raise UsageError(f"unknown ranking {rank!r} (choose from distance, channel)")
    if metric not in DICT_METRICS:
        raise UsageError(f"dictionary search supports {', '.join(DICT_METRICS)}, not {metric}")
    if top < 1:
        raise UsageError("top must be at least 1")
    q = split_level(query, d.level)
    lq = len(q)
    limit = np.inf if max_distance is None else max_distance
    if limit < 0:
        return []
    rows: list[np.ndarray] = []
    dists: list[np.ndarray] = []
    radius = int(min(1, limit))
    kth = None                                                   # top-th smallest distance so far
    done_lo = done_hi = d.span(lq - radius, lq + radius)[0]   # rows scanned so far: [done_lo, done_hi)
    while True:
        lo, hi = d.span(lq - radius, lq + radius)               # nested: contains the scanned rows
        for a, b in ((lo, done_lo), (done_hi, hi)):
            if b > a:
                dist = _scan(d, q, a, b, metric)
                cut = limit if kth is None else min(limit, kth)   # only possible top entries stay
                if len(dist) >= top:
                    cut = min(cut, np.partition(dist, top - 1)[top - 1])
                ok = np.flatnonzero(dist <= cut)
                rows.append(ok + a)
                dists.append(dist[ok])
        done_lo, done_hi = lo, hi
        found = np.concatenate(dists) if dists else np.zeros(0, np.int64)
        kth = np.partition(found, top - 1)[top - 1] if len(found) >= top else None
        if kth is not None and kth <= radius:
            break                      # unscanned entries differ in length by more than kth
        if radius >= limit or (lo == 0 and hi == len(d.words)):
            break
        radius = int(min(limit, kth if kth is not None else 2 * radius + 2))
        if kth is not None:            # keep only candidates that can still make the list
            keep = [dd <= kth for dd in dists]
            rows, dists = [r[k] for r, k in zip(rows, keep)], [dd[k] for dd, k in zip(dists, keep)]
    idx = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    dist = np.concatenate(dists) if dists else np.zeros(0, np.int64)
    best = np.lexsort((d.position[idx], -d.counts[idx], dist))[:top]
    return [Match(d.words[idx[i]], int(dist[i]), float(d.counts[idx[i]]), r)
            for r, i in enumerate(best, 1)]


def _nearest_channel(d: Dictionary, query: str, top: int, max_distance: int | None, metric: str,
                     edit_odds: float) -> list[Match]:
    if edit_odds <= 1:
        raise UsageError("edit odds must be greater than 1")
    first = nearest(d, query, 1, max_distance, metric)
    if not first:
        return []
    # An entry at distance D scores at most log(1 + max count) - D log(odds): scan out to the
    # distance where even the top count could no longer reach the top-th score found so far.
    log_odds, best_log = np.log(edit_odds), np.log1p(d.counts.max())
    widest = len(split_level(query, d.level)) + int(d.lengths[-1])  # no distance exceeds this
    cap = widest if max_distance is None else min(max_distance, widest)
    limit = min(cap, int(first[0].distance + (best_log - np.log1p(first[0].count)) / log_odds + 1e-9))
    while True:
        cands = nearest(d, query, len(d.words), limit, metric)
        score = [np.log1p(m.count) - m.distance * log_odds for m in cands]
        order = sorted(range(len(cands)), key=lambda i: (-score[i], cands[i].distance, cands[i].rank))
        if len(cands) >= top:
            need = int((best_log - score[order[top - 1]]) / log_odds + 1e-9)
        else:
            need = 2 * limit + 1
        if min(need, cap) <= limit:
            break
        limit = min(need, cap)
    return [Match(cands[i].word, cands[i].distance, cands[i].count, r)
            for r, i in enumerate(order[:top], 1)]


def nearest_many(d: Dictionary, queries: Iterable[str], top: int = 1, max_distance: int | None = None,
                 metric: str = "levenshtein", rank: str = "distance", edit_odds: float = 100.0,
                 progress: Callable | None = None) -> Iterable[tuple[str, list[Match]]]:
    """`nearest` for each query, streamed: yields (query, matches)."""
    for i, q in enumerate(queries, 1):
        yield q, nearest(d, q, top, max_distance, metric, rank, edit_odds)
        if progress is not None:
            progress(i)
