"""Levenshtein-family edit distances between two sequences, numbers equal to rapidfuzz's.

Every function takes two sequences: strings (compared by character) or lists of
hashable tokens (compared by token, e.g. ``"a b c".split()`` for a WER-style
word distance). The unweighted metrics run bit-parallel on Python integers
(Hyyrö's algorithms: one integer operation per column instead of a DP row), so a
pair of 200-character lines costs a few hundred integer operations.

>>> levenshtein("kitten", "sitting")
3
>>> levenshtein("lewenstein", "levenshtein", weights=(1, 1, 2))
3
>>> normalized_distance("kitten", "sitting", "levenshtein")
0.42857142857142855

Normalization follows rapidfuzz: ``distance / maximum`` where the maximum is the
largest distance the metric can give for these lengths (and weights), 0.0 when
that maximum is 0. Batch work (many pairs, a dictionary scan) lives in
`nlpkit.edit.batch` and `nlpkit.edit.spell`; alignments in `nlpkit.edit.align`.
"""

from __future__ import annotations

from typing import Hashable, Sequence

from nlpkit.errors import NlpkitError, UsageError

Seq = Sequence[Hashable]
Weights = tuple[int, int, int]

METRICS = ("levenshtein", "osa", "damerau", "indel", "hamming", "lcs")
WEIGHTED_METRICS = ("levenshtein",)  # rapidfuzz takes (ins, del, sub) weights for Levenshtein only
UNIT: Weights = (1, 1, 1)


def check_weights(weights: Sequence[int] | None) -> Weights:
    """(ins, del, sub) as a tuple of three non-negative ints; None -> (1, 1, 1)."""
    if weights is None:
        return UNIT
    w = tuple(weights)
    if len(w) != 3 or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in w):
        raise UsageError(f"weights must be three non-negative integers INS,DEL,SUB, got {weights!r}")
    return w  # type: ignore[return-value]


def match_masks(a: Seq) -> dict:
    """Bit i of mask[c] is set where a[i] == c: ``"abca" -> {'a': 0b1001, 'b': 0b10, 'c': 0b100}``."""
    masks: dict = {}
    bit = 1
    for c in a:
        masks[c] = masks.get(c, 0) | bit
        bit <<= 1
    return masks


def strip_affix(a: Seq, b: Seq) -> tuple[Seq, Seq]:
    """Drop the common prefix and suffix (they never change Levenshtein, Indel or LCS distances)."""
    n = min(len(a), len(b))
    p = 0
    while p < n and a[p] == b[p]:
        p += 1
    s = 0
    while s < n - p and a[len(a) - 1 - s] == b[len(b) - 1 - s]:
        s += 1
    return a[p:len(a) - s], b[p:len(b) - s]


# ------------------------------------------------------------------ bit-parallel kernels

def _levenshtein_bits(a: Seq, b: Seq, transpositions: bool = False) -> int:
    """Unit-cost Levenshtein (Myers/Hyyrö), or OSA with ``transpositions`` (Hyyrö 2003)."""
    m = len(a)
    if m == 0:
        return len(b)
    masks = match_masks(a)
    get = masks.get
    full = (1 << m) - 1
    top = 1 << (m - 1)
    vp, vn, d0, pm_prev, dist = full, 0, 0, 0, m
    for c in b:
        pm = get(c, 0)
        x = pm | vn
        if transpositions:
            x |= ((~d0 & pm) << 1) & pm_prev
            pm_prev = pm
        d0 = ((((pm & vp) + vp) & full) ^ vp) | x
        hp = vn | ~(d0 | vp)
        hn = d0 & vp
        if hp & top:
            dist += 1
        elif hn & top:
            dist -= 1
        hp = ((hp << 1) | 1) & full
        hn = (hn << 1) & full
        vp = hn | (~(d0 | hp) & full)
        vn = hp & d0
    return dist


def lcs_length(a: Seq, b: Seq) -> int:
    """Length of the longest common subsequence (bit-parallel, Hyyrö 2004): ``("abcd", "acbd") -> 3``."""
    whole = len(a)
    a, b = strip_affix(a, b)
    common = whole - len(a)  # the stripped prefix and suffix are part of every LCS
    if len(a) > len(b):      # the shorter one is the bit pattern
        a, b = b, a
    m = len(a)
    if m == 0 or not b:
        return common
    masks = match_masks(a)
    get = masks.get
    full = (1 << m) - 1
    s = full
    for c in b:
        u = s & get(c, 0)
        s = ((s + u) | (s - u)) & full
    return common + m - bin(s).count("1")


# ------------------------------------------------------------------------ DP kernels

def _levenshtein_weighted(a: Seq, b: Seq, ins: int, dele: int, sub: int) -> int:
    """Weighted Levenshtein by the row-by-row DP (only used when no shortcut applies)."""
    row = [i * dele for i in range(len(a) + 1)]
    for cb in b:
        diag = row[0]
        row[0] += ins
        for i, ca in enumerate(a, 1):
            best = diag if ca == cb else min(diag + sub, row[i - 1] + dele, row[i] + ins)
            diag = row[i]
            row[i] = best
    return row[-1]


def _damerau_lowrance_wagner(a: Seq, b: Seq) -> int:
    """Unrestricted Damerau-Levenshtein (transpositions of non-adjacent edits allowed)."""
    m, n = len(a), len(b)
    big = m + n
    last_row: dict = {}  # character -> last row (1-based) of a where it occurred
    d = [[big] * (n + 2)] + [[big] + list(range(n + 1))]
    for i in range(1, m + 1):
        d.append([big, i] + [0] * n)
        last_col = 0  # last column (1-based) of b in this row where b[j] == a[i]
        for j in range(1, n + 1):
            k = last_row.get(b[j - 1], 0)
            l_ = last_col
            if a[i - 1] == b[j - 1]:
                cost = 0
                last_col = j
            else:
                cost = 1
            d[i + 1][j + 1] = min(d[i][j] + cost, d[i + 1][j] + 1, d[i][j + 1] + 1,
                                  d[k][l_] + (i - k - 1) + 1 + (j - l_ - 1))
        last_row[a[i - 1]] = i
    return d[m + 1][n + 1]


# ------------------------------------------------------------------- public distances

def levenshtein(a: Seq, b: Seq, weights: Sequence[int] | None = None) -> int:
    """Minimum total cost of insertions, deletions, substitutions turning a into b.

    ``weights=(ins, del, sub)``, as in rapidfuzz; ``("kitten", "sitting") -> 3``.
    """
    ins, dele, sub = check_weights(weights)
    a, b = strip_affix(a, b)
    if ins == dele == sub:
        return ins * _levenshtein_bits(a, b) if ins else 0
    if ins == dele and sub >= ins + dele:  # substitution never beats delete + insert
        return ins * indel(a, b)
    return _levenshtein_weighted(a, b, ins, dele, sub)


def osa(a: Seq, b: Seq) -> int:
    """Optimal string alignment: Levenshtein plus adjacent transpositions, no substring edited twice."""
    if len(a) > len(b):  # symmetric; the shorter one is the bit pattern
        a, b = b, a
    return _levenshtein_bits(a, b, transpositions=True)


def damerau_levenshtein(a: Seq, b: Seq) -> int:
    """Unrestricted Damerau-Levenshtein: ``("CA", "ABC") -> 2`` (OSA gives 3)."""
    return _damerau_lowrance_wagner(a, b)


def indel(a: Seq, b: Seq) -> int:
    """Insertions and deletions only: ``len(a) + len(b) - 2 * lcs``."""
    return len(a) + len(b) - 2 * lcs_length(a, b)


def lcs_seq(a: Seq, b: Seq) -> int:
    """rapidfuzz's LCSseq distance: ``max(len(a), len(b)) - lcs``."""
    return max(len(a), len(b)) - lcs_length(a, b)


def hamming(a: Seq, b: Seq, pad: bool = True) -> int:
    """Positions that differ; with ``pad`` (rapidfuzz's default) the length difference counts too."""
    if not pad and len(a) != len(b):
        raise NlpkitError(f"hamming distance needs equal lengths without padding ({len(a)} != {len(b)})")
    return sum(x != y for x, y in zip(a, b)) + abs(len(a) - len(b))


def maximum(metric: str, len_a: int, len_b: int, weights: Sequence[int] | None = None) -> int:
    """The largest distance `metric` can give for these lengths: the normalization denominator."""
    if metric == "levenshtein":
        ins, dele, sub = check_weights(weights)
        most = len_a * dele + len_b * ins
        if len_a >= len_b:
            return min(most, len_b * sub + (len_a - len_b) * dele)
        return min(most, len_a * sub + (len_b - len_a) * ins)
    if metric == "indel":
        return len_a + len_b
    return max(len_a, len_b)


_FUNCTIONS = {"levenshtein": levenshtein, "osa": osa, "damerau": damerau_levenshtein,
              "indel": indel, "hamming": hamming, "lcs": lcs_seq}


def check_metric(metric: str, weights: Sequence[int] | None = None) -> Weights:
    """Validate a metric name and its weights; returns the weights as a tuple."""
    if metric not in _FUNCTIONS:
        raise UsageError(f"unknown metric {metric!r} (choose from {', '.join(METRICS)})")
    w = check_weights(weights)
    if w != UNIT and metric not in WEIGHTED_METRICS:
        raise UsageError(f"weights apply to levenshtein only, not {metric} (as in rapidfuzz)")
    return w


def distance(a: Seq, b: Seq, metric: str = "levenshtein", weights: Sequence[int] | None = None) -> int:
    """Any metric by name: ``distance("ca", "abc", "damerau") -> 2``."""
    w = check_metric(metric, weights)
    if metric == "levenshtein":
        return levenshtein(a, b, w)
    return _FUNCTIONS[metric](a, b)


def normalized_distance(a: Seq, b: Seq, metric: str = "levenshtein",
                        weights: Sequence[int] | None = None) -> float:
    """``distance / maximum`` in [0, 1], 0.0 when both are empty (rapidfuzz's normalized_distance)."""
    most = maximum(metric, len(a), len(b), weights)
    dist = distance(a, b, metric, weights)
    return dist / most if most else 0.0


def split_level(text: str, level: str) -> Seq:
    """The units a distance counts: the string itself (``char``) or its whitespace tokens (``word``)."""
    if level == "char":
        return text
    if level == "word":
        return text.split()
    raise UsageError(f"unknown level {level!r} (choose from char, word)")
