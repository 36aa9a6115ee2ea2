"""TREC runs and qrels: reading, writing, and the trec_eval ranking order.

A run maps a query id to its (docid, score) pairs: ``{"1": [("d7", 12.5), ("d3", 11.0)]}``.
On disk a TREC run has six fields per line, ``qid Q0 docid rank score tag``; a plain ranked
list has one document id per line (best first) and stands for a single query, id ``1``.

trec_eval ignores the rank column: it re-sorts each query's documents by score, descending,
and breaks ties by docid, descending (string order). `trec_order` does exactly that, and
every metric and fusion in nlpkit ranks documents that way.

Qrels formats (``--qrels-format``):
- ``trec``: ``qid iter docid rel`` (rel an integer; > 0 is relevant, the value is the nDCG gain);
- ``pairs``: ``qid docid ...``, every listed pair relevant with gain 1 (CISI.REL, CACM qrels.text);
- ``cranfield``: ``qid docid code`` with codes 1 (best) .. 4 mapped to gains 4 .. 1 (gain 5 - code)
  and -1 (judged not relevant) to 0;
- ``auto``: ``trec`` when the second field is ``0`` or ``Q0``, else ``pairs``.
"""

from __future__ import annotations

import math
from typing import IO, Iterable

from nlpkit.errors import NlpkitError
from nlpkit.io import display_name, iter_lines

Run = dict  # dict[str, list[tuple[str, float]]]
Qrels = dict  # dict[str, dict[str, int]]
QRELS_FORMATS = ("auto", "trec", "pairs", "cranfield")
PLAIN_QID = "1"


def trec_order(pairs: Iterable[tuple[str, float]], tie_break: str = "docid-desc") -> list[tuple[str, float]]:
    """Sort (docid, score) by score descending; ties by docid descending (trec_eval), ascending,
    or kept in input order (``input``).

    >>> trec_order([("a", 1.0), ("c", 2.0), ("b", 1.0)])
    [('c', 2.0), ('b', 1.0), ('a', 1.0)]
    """
    pairs = list(pairs)
    if tie_break == "docid-desc":
        return sorted(pairs, key=lambda p: (p[1], p[0]), reverse=True)
    if tie_break == "docid-asc":
        pairs.sort(key=lambda p: p[0])
    elif tie_break != "input":
        raise NlpkitError(f"unknown tie-break {tie_break!r} (docid-desc, docid-asc, input)")
    return sorted(pairs, key=lambda p: p[1], reverse=True)  # stable: ties keep the order above


def _parse_score(text: str, name: str, lineno: int) -> float:
    try:
        value = float(text)
    except ValueError:
        raise NlpkitError(f"{name}, line {lineno}: score {text!r} is not a number") from None
    if math.isnan(value):
        raise NlpkitError(f"{name}, line {lineno}: score is NaN")
    return value


def read_run(path: str, errors: str = "strict") -> Run:
    """Read a TREC run or a plain ranked list (decided by the first non-blank line).

    Errors name the file and line: a wrong number of fields, a bad score, or a document
    listed twice for one query; a file with no result line is an error.
    """
    name = display_name(path)
    run: Run = {}
    seen: dict[str, dict[str, int]] = {}
    plain: bool | None = None
    for lineno, line in enumerate(iter_lines(path, errors=errors), 1):
        fields = line.split()
        if not fields:
            continue
        if plain is None:
            plain = len(fields) == 1
        if plain:
            if len(fields) != 1:
                raise NlpkitError(f"{name}, line {lineno}: expected one document id per line "
                                  f"(a plain ranked list), found {len(fields)} fields")
            qid, docid = PLAIN_QID, fields[0]
            score = None
        else:
            if len(fields) != 6:
                raise NlpkitError(f"{name}, line {lineno}: expected 6 fields (qid Q0 docid rank score "
                                  f"tag), found {len(fields)}")
            qid, docid = fields[0], fields[2]
            score = _parse_score(fields[4], name, lineno)
        first = seen.setdefault(qid, {})
        if docid in first:
            raise NlpkitError(f"{name}, line {lineno}: document {docid!r} appears twice for query "
                              f"{qid!r} (first on line {first[docid]})")
        first[docid] = lineno
        run.setdefault(qid, []).append((docid, score))
    if not run:   # a run that forgot its input must not fuse or score as "nothing retrieved"
        raise NlpkitError(f"{name}: empty run (no result lines)")
    if plain:  # rank 1 gets the highest score so that re-sorting keeps the file order
        n = len(run.get(PLAIN_QID, []))
        run = {q: [(d, float(n - i)) for i, (d, _) in enumerate(pairs)] for q, pairs in run.items()}
    return run


def format_run(run: Run, tag: str = "nlpkit", sort: bool = True,
               tie_break: str = "docid-desc") -> Iterable[str]:
    """Lines ``qid Q0 docid rank score tag`` (ranks from 1, in trec_eval order when `sort`)."""
    tag = tag.replace(" ", "_") or "nlpkit"
    for qid, pairs in run.items():
        ranked = trec_order(pairs, tie_break) if sort else pairs
        for rank, (docid, score) in enumerate(ranked, 1):
            yield f"{qid} Q0 {docid} {rank} {float(score)!r} {tag}\n"


def write_run(run: Run, stream: IO[str], tag: str = "nlpkit", sort: bool = True,
              tie_break: str = "docid-desc") -> None:
    """Write `run` in TREC format to `stream`."""
    for line in format_run(run, tag, sort, tie_break):
        stream.write(line)


def _detect_qrels(fields: list[str]) -> str:
    if len(fields) == 4 and fields[1] in ("0", "Q0"):
        return "trec"
    if len(fields) == 3:
        raise NlpkitError("3-column qrels are ambiguous: use `fmt` cranfield "
                          "(qid docid code, Cranfield's codes) or convert to TREC 'qid 0 docid rel'")
    return "pairs"


def _parse_rel(text: str, name: str, lineno: int) -> int:
    try:
        value = float(text)
    except ValueError:
        raise NlpkitError(f"{name}, line {lineno}: relevance {text!r} is not a number") from None
    if value != int(value):
        raise NlpkitError(f"{name}, line {lineno}: relevance {text!r} is not an integer")
    return int(value)


def read_qrels(path: str, fmt: str = "auto", errors: str = "strict") -> Qrels:
    """Relevance judgements as {qid: {docid: gain}} (see the module docstring for formats)."""
    if fmt not in QRELS_FORMATS:
        raise NlpkitError(f"unknown qrels format {fmt!r} (choose from {', '.join(QRELS_FORMATS)})")
    name = display_name(path)
    qrels: Qrels = {}
    for lineno, line in enumerate(iter_lines(path, errors=errors), 1):
        fields = line.split()
        if not fields:
            continue
        if fmt == "auto":
            try:
                fmt = _detect_qrels(fields)
            except NlpkitError as e:
                raise NlpkitError(f"{name}, line {lineno}: {e}") from None
        if fmt == "trec":
            if len(fields) != 4:
                raise NlpkitError(f"{name}, line {lineno}: expected 4 fields (qid iter docid rel), "
                                  f"found {len(fields)}")
            qid, docid, rel = fields[0], fields[2], _parse_rel(fields[3], name, lineno)
        elif fmt == "pairs":
            if len(fields) < 2:
                raise NlpkitError(f"{name}, line {lineno}: expected 'qid docid', found 1 field")
            qid, docid, rel = fields[0], fields[1], 1
        else:
            if len(fields) != 3:
                raise NlpkitError(f"{name}, line {lineno}: expected 3 fields (qid docid code), "
                                  f"found {len(fields)}")
            code = _parse_rel(fields[2], name, lineno)
            if code not in (-1, 1, 2, 3, 4):
                raise NlpkitError(f"{name}, line {lineno}: Cranfield relevance code {code} is not "
                                  "one of 1, 2, 3, 4, -1")
            qid, docid, rel = fields[0], fields[1], (0 if code == -1 else 5 - code)
        qrels.setdefault(qid, {})[docid] = rel
    if not qrels:   # every metric would be 0.0
        raise NlpkitError(f"{name}: no relevance judgements (the qrels file is empty)")
    return qrels
