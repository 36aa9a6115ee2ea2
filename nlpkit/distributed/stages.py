"""Each subcommand's counting stage as a map over shards plus a tree reduction.

The map functions are the local path's own (`nlpkit.stats.pmi.count_shard`, ...); this
module only plans shards, submits them and finishes on the driver. Every function takes a
connected `distributed.Client` (`nlpkit.distributed.cluster.connect`).
"""

from __future__ import annotations

from typing import Callable

from nlpkit.distributed.cluster import map_reduce
from nlpkit.distributed.shards import SHARD_BYTES, plan_shards


def pmi_counts(client, paths: list[str], tokenizer, window: int = 2, ngram: int = 2,
               cross_lines: bool = False, cross_sentences: bool = False, errors: str = "strict",
               shard_bytes: int = SHARD_BYTES, progress: Callable[..., None] | None = None):
    """`nlpkit.stats.pmi.count_cooccurrences` over a cluster: the same `Cooccurrence` numbers."""
    from nlpkit.stats import pmi

    shards = plan_shards(paths, shard_bytes, "line")
    part = map_reduce(client, pmi.count_shard, shards, pmi.merge_cooccurrences, progress,
                      args=(tokenizer, window, ngram, cross_lines, cross_sentences, errors))
    return pmi.add_boundaries(part)


def bpe_counts(client, paths: list[str], pretok, errors: str = "strict", shard_bytes: int = SHARD_BYTES,
               progress: Callable[..., None] | None = None):
    """`nlpkit.bpe.trainer.count_pieces` over a cluster: the same counts in the same key order."""
    from nlpkit.bpe import trainer

    shards = plan_shards(paths, shard_bytes, "line")
    return map_reduce(client, trainer.count_shard, shards, trainer.merge_counts, progress,
                      args=(pretok, errors))


SPLIT = {"lines": "line", "tsv": "line", "jsonl": "line", "paragraphs": "paragraph", "smart": "smart",
         "files": "file", "auto": "file"}


def _offsets(shards, units: list[int], across_files: bool = False) -> list[int]:
    """Numbering offset of each shard: the lines (or paragraphs) of the file's earlier shards
    (paragraph numbers run on across files, as `iter_documents` numbers them)."""
    out, run, current = [], 0, None
    for s, u in zip(shards, units):
        if s.file_index != current and not across_files:
            current, run = s.file_index, 0
        out.append(run)
        run += u
    return out


def tfidf_top_terms(client, paths: list[str], mode: str, tokenizer, weighting, ngram_range=(1, 1),
                    min_df: float = 1, max_df: float = 1.0, top: int = 10, field: str = "text",
                    id_field: str | None = None, fields: str = "T,W", errors: str = "strict",
                    shard_bytes: int = SHARD_BYTES, progress: Callable[..., None] | None = None):
    """`nlpkit tfidf` top terms over a cluster: (number of terms, iterator of
    (doc, rank, term, weight) rows in document order).

    Map: count each shard's documents (`tfidf.count_shard`); the matrices stay on the
    workers. Reduce: sorted terms and document frequencies. Driver: min/max-df and idf.
    Map again: weigh each shard with the corpus idf and return its rows, fetched in order.
    """
    from nlpkit.distributed.cluster import Ticker, map_ordered
    from nlpkit.errors import NlpkitError, UsageError
    from nlpkit.stats import tfidf

    shards = plan_shards(paths, shard_bytes, SPLIT[mode])
    multi = len(paths) > 1
    prefixes = [f"{s.path}:" if multi else "" for s in shards]
    tick = Ticker(progress, 0)
    parts = client.map(tfidf.count_shard, shards, [mode] * len(shards), [tokenizer] * len(shards),
                       [ngram_range] * len(shards), [field] * len(shards), [id_field] * len(shards),
                       [errors] * len(shards), [fields] * len(shards), prefixes, pure=False)
    terms, df, n_docs, _ = map_reduce(client, tfidf.shard_summary, parts, tfidf.merge_df, ticker=tick)
    info = client.gather(client.map(tfidf.shard_info, parts, pure=False))
    offsets = _offsets(shards, [u for _, u in info], mode == "paragraphs")
    if n_docs == 0:
        raise NlpkitError("empty corpus: no documents")
    if not terms:
        raise NlpkitError("empty vocabulary: the documents have no words"
                          + (" other than stopwords" if tokenizer.stopwords else ""))
    max_docs = max_df if isinstance(max_df, int) else max_df * n_docs
    min_docs = min_df if isinstance(min_df, int) else min_df * n_docs
    if max_docs < min_docs:
        raise UsageError("--max-df leaves fewer documents than --min-df")
    keep = (df >= min_docs) & (df <= max_docs)
    if not keep.any():
        raise NlpkitError("after --min-df/--max-df no terms remain; lower --min-df or raise --max-df")
    terms = [t for t, k in zip(terms, keep.tolist()) if k]
    df = df[keep]
    w = weighting
    idf = tfidf.idf_weights(df, n_docs, w.idf, w.log_base, w.idf_offset)
    terms_f, df_f, idf_f = client.scatter([terms, df, idf], broadcast=True)

    def rows():
        for part in map_ordered(client, tfidf.top_terms_task, list(zip(parts, offsets)), ticker=tick,
                                args=(terms_f, df_f, idf_f, weighting, top)):
            yield from part

    return len(terms), rows()
