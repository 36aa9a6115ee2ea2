"""`bm25 index` and `bm25 add` in shards: each shard's postings counted, scored and written as part files.

The map and merge functions `nlpkit.distributed.stages` runs on a cluster (`COUNTING`, `shard_summary`,
`merge_summaries`, `write_part`, `merge_parts`); they know shards (`nlpkit.shards`), not Dask. The
driver's part, idf and the index arrays, is `nlpkit.retrieval.bm25`'s, as on the local path.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from nlpkit.errors import NlpkitError
from nlpkit.retrieval.bm25 import count_postings, gc_paused, pack_postings, posting_scores
from nlpkit.shards import CountingStage, Shard
from nlpkit.stats.codes import run_starts
from nlpkit.text import WordTokenizer


@dataclass
class ShardPostings:
    """One shard's postings with shard-local term ids (first occurrence) and doc numbers from 0."""

    vocab: list[str]
    term: np.ndarray        # [P] int64, term-major
    doc: np.ndarray         # [P] int64
    tf: np.ndarray          # [P] int64
    doclen: np.ndarray      # [n] float64
    ids: list[str] | None   # explicit document ids; None when documents are numbered
    n_docs: int


@dataclass(frozen=True)
class CountSettings:
    """How `count_shard` reads records (`iter_records`' options, a resolved `fmt`) and the index's
    tokenizer (`search.make_tokenizer`)."""

    fmt: str
    tokenizer: WordTokenizer
    id_field: str | None = "id"
    field: str = "text"
    fields: str = "T,W"
    errors: str = "strict"


def count_shard(shards: Sequence[Shard | str], settings: CountSettings) -> ShardPostings:
    """Tokenize the records of shards (`iter_records`, in order) and count their postings as
    `build_index` does."""
    from nlpkit.stats.documents import iter_records

    s = settings
    ids, tokens = [], []
    with gc_paused():
        for shard in shards:
            for rid, text in iter_records(shard, s.fmt, s.id_field, s.field, s.errors, "corpus", s.fields):
                ids.append(rid)
                tokens.append(s.tokenizer.tokenize(text))
    vocab: dict[str, int] = {}
    term, doc, tf = count_postings(tokens, vocab, 0)
    doclen = np.bincount(doc, weights=tf, minlength=len(tokens))
    numbered = s.fmt in ("lines", "paragraphs") or (s.fmt == "jsonl" and s.id_field is None)
    return ShardPostings(list(vocab), term, doc, tf, doclen, None if numbered else ids, len(tokens))


COUNTING = CountingStage(count_shard)   # the parts stay on the workers: `shard_summary`, `write_part`


def shard_summary(p: ShardPostings) -> tuple[list[str], np.ndarray, int, float, int]:
    """(vocabulary, df, documents, total length, largest tf) of a shard."""
    return (p.vocab, np.bincount(p.term, minlength=len(p.vocab)), p.n_docs, float(p.doclen.sum()),
            int(p.tf.max()) if len(p.tf) else 0)


def merge_summaries(parts: list[tuple]) -> tuple[list[str], np.ndarray, int, float, int]:
    """Vocabulary in first-occurrence order over the parts in order; df, sizes summed."""
    vocab: dict[str, int] = {}
    luts = [np.fromiter((vocab.setdefault(w, len(vocab)) for w in p[0]), dtype=np.int64, count=len(p[0]))
            for p in parts]
    df = np.zeros(len(vocab), dtype=np.int64)
    for p, lut in zip(parts, luts):
        df[lut] += p[1]
    return (list(vocab), df, sum(p[2] for p in parts), sum(p[3] for p in parts),
            max(p[4] for p in parts))


def shard_ids(p: ShardPostings) -> tuple[int, list[str] | None]:
    return p.n_docs, p.ids


PART_ARRAYS = ("terms", "ends", "postings", "scores", "tf_extra")


def write_part(item: tuple[ShardPostings, int, int], part_dir: str, term_id: dict[str, int],
               term_idf: np.ndarray, nonocc64: np.ndarray | None, avgdl: float, variant: str, k1: float,
               b: float, delta: float, doc_bits: int) -> int:
    """Score a shard (`score_shard`) and write its postings to ``part_dir/part-K.<array>.npy``,
    term-major: ``terms`` (the shard's distinct terms, ascending), ``ends`` (where each term's
    postings end), ``postings`` and ``tf_extra`` (`pack_postings`: no ``tf_extra`` when packed),
    and ``scores`` (float32). The driver merges the parts by term ranges
    (`merge_parts`); `part_dir` must be a directory the driver reads at the same path (the index's
    parent directory: local, or on a shared filesystem for a cluster). Returns the postings."""
    p, first_doc, k = item
    term, doc, tf, sc = score_shard((p, first_doc), term_id, term_idf, nonocc64, avgdl, variant, k1, b, delta)
    starts = run_starts(term)
    postings, tf_extra = pack_postings(doc, tf, doc_bits)
    arrays = {"terms": term[starts], "ends": np.append(starts[1:], len(term)).astype(np.int64),
              "postings": postings, "scores": sc}
    if tf_extra is not None:
        arrays["tf_extra"] = tf_extra
    try:
        for name, arr in arrays.items():
            np.save(os.path.join(part_dir, f"part-{k}.{name}.npy"), arr, allow_pickle=False)
    except OSError as e:
        raise NlpkitError(f"bm25 index `address`: a worker cannot write its postings to {part_dir} ({e}); "
                          "the index's parent directory must be on a filesystem every worker shares, "
                          "at the same path") from None
    return len(term)


def merge_parts(part_dir: str, n_parts: int, indptr: np.ndarray, outputs: dict[str, np.ndarray],
                chunk: int = 1 << 23, progress=None) -> None:
    """Fill `outputs` (postings, scores, tf_extra: [P] arrays, memory-mapped) from the part files of
    `write_part` in order, one range of terms of about `chunk` postings at a time: every part's
    slice for those terms is read (memory-mapped) and scattered after the earlier parts' postings
    of the same terms. Memory: one chunk, not the postings."""
    parts = []
    for k in range(n_parts):
        def load(name, k=k):
            return np.load(os.path.join(part_dir, f"part-{k}.{name}.npy"), mmap_mode="r")
        parts.append({name: load(name) for name in PART_ARRAYS if name != "tf_extra" or "tf_extra" in outputs})
        parts[-1]["terms"] = np.asarray(parts[-1]["terms"])
        parts[-1]["ends"] = np.asarray(parts[-1]["ends"])
    n_terms = len(indptr) - 1
    t0 = 0
    while t0 < n_terms:
        t1 = int(np.searchsorted(indptr, indptr[t0] + chunk, side="right")) - 1
        t1 = min(n_terms, max(t1, t0 + 1))
        base = int(indptr[t0])
        cursor = indptr[t0:t1].copy()                    # next free slot of each term in the range
        bufs = {name: np.empty(int(indptr[t1]) - base, dtype=out.dtype) for name, out in outputs.items()}
        for part in parts:
            terms, ends = part["terms"], part["ends"]
            lo, hi = np.searchsorted(terms, [t0, t1])
            if lo == hi:
                continue
            a = int(ends[lo - 1]) if lo else 0
            z = int(ends[hi - 1])
            t = terms[lo:hi] - t0
            counts = np.diff(np.concatenate(([a], ends[lo:hi])))
            pos = np.repeat(cursor[t] - base - (np.concatenate(([a], ends[lo:hi - 1])) - a), counts) \
                + np.arange(z - a)
            for name, buf in bufs.items():
                buf[pos] = part[name][a:z]
            cursor[t] += counts
        for name, out in outputs.items():
            out[base:int(indptr[t1])] = bufs[name]
        del bufs
        if progress is not None:
            progress()
        t0 = t1


def score_shard(item: tuple[ShardPostings, int], term_id: dict[str, int], term_idf: np.ndarray,
                nonocc64: np.ndarray | None, avgdl: float, variant: str, k1: float, b: float,
                delta: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A shard's postings with corpus term ids and doc numbers (``item`` = (postings, first doc)),
    sorted by term (docs ascending within), and their scores as `_assemble` computes them."""
    p, first_doc = item
    lut = np.fromiter(map(term_id.__getitem__, p.vocab), dtype=np.int64, count=len(p.vocab))
    term = lut[p.term]
    order = np.argsort(term, kind="stable")
    term, doc, tf = term[order], p.doc[order], p.tf[order]
    scores = posting_scores(variant, term, tf, p.doclen[doc], avgdl, term_idf, nonocc64, k1, b, delta)
    return term, doc + first_doc, tf, scores.astype(np.float32)
