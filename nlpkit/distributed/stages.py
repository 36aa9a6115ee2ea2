"""Each subcommand's counting stage as a map over shards plus a tree reduction.

A wing declares its stage in a shard module of its own (``stats/pmi_shards.py``,
``retrieval/bm25_shards.py``, ...): ``COUNTING = CountingStage(count_shard, merge)``, where
``count_shard(shards, settings)`` is the one signature of a stage's map function
(`nlpkit.shards.CountShards`) and ``settings`` the wing's ``CountSettings``. The wings know
shards, not Dask: this package imports them, never the reverse. This
module only plans shards, submits them (`count_on`) and finishes on the driver. Every function
takes a connected `distributed.Client` (`nlpkit.distributed.cluster.connect`).
"""

from __future__ import annotations

from typing import Callable, Iterator

from nlpkit.distributed.cluster import broadcast, map_reduce
from nlpkit.shards import (SHARD_BYTES, TASKS_PER_WORKER, CountingStage, auto_shard_bytes, group_shards,
                           plan_shards)


def n_workers(client) -> int:
    """Workers connected now (at least 1)."""
    return max(1, len(client.scheduler_info().get("workers", {})))


def plan(client, paths: list[str], shard_bytes: int | None, split: str = "line"):
    """Shards of `paths` (`plan_shards`) and the task size used: `shard_bytes`, or for None
    (``--shard-size auto``) two tasks per worker, at most 64 MB (`auto_shard_bytes`)."""
    size = shard_bytes or auto_shard_bytes(paths, n_workers(client))
    return plan_shards(paths, size, split), size


def count_tasks(client, paths: list[str], shard_bytes: int | None) -> list:
    """Counting tasks: runs of line shards of about the task size each (small files grouped:
    fewer partial counts to pickle and merge). With ``--shard-size auto`` and one worker, all of
    them are one task: that worker would only merge its own partial tables again (three 64 MB
    pmi tasks cost 1.38x the local CPU, one task 0.98x), and it holds the whole table either way."""
    shards, size = plan(client, paths, shard_bytes)
    if shard_bytes is None and n_workers(client) == 1:
        return [shards]
    return group_shards(shards, size)


def count_on(client, stage: CountingStage, tasks: list, settings, progress: Callable[..., None] | None = None):
    """`stage.count(task, settings)` for every task (a list of shards) on the cluster: merged by
    `stage.merge` in input order, or, for a stage without one, the futures of the parts (they
    stay on the workers)."""
    if stage.merge is None:
        return client.map(stage.count, tasks, [settings] * len(tasks), pure=False)
    return map_reduce(client, stage.count, tasks, stage.merge, progress, args=(settings,))


def pmi_counts(client, paths: list[str], tokenizer, window: int = 2, ngram: int = 2,
               cross_lines: bool = False, cross_sentences: bool = False, errors: str = "strict",
               shard_bytes: int | None = None, progress: Callable[..., None] | None = None):
    """`nlpkit.stats.pmi.count_cooccurrences` over a cluster: the same `Cooccurrence` numbers."""
    from nlpkit.stats import pmi_shards

    settings = pmi_shards.CountSettings(tokenizer, window, ngram, cross_lines, cross_sentences, errors)
    tasks = count_tasks(client, paths, shard_bytes)
    return pmi_shards.add_boundaries(count_on(client, pmi_shards.COUNTING, tasks, settings, progress))


def bpe_counts(client, paths: list[str], pretok, errors: str = "strict", shard_bytes: int | None = None,
               progress: Callable[..., None] | None = None):
    """`nlpkit.bpe.trainer.count_pieces` over a cluster: the same counts in the same key order."""
    from nlpkit.bpe import trainer_shards

    return count_on(client, trainer_shards.COUNTING, count_tasks(client, paths, shard_bytes),
                    trainer_shards.CountSettings(pretok, errors), progress)


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


def _tfidf_weighted(client, paths, mode, tokenizer, weighting, ngram_range, min_df, max_df, field, id_field,
                    fields, errors, shard_bytes, tick):
    """The shared first part of the tfidf stages: (kept terms, df, idf, futures of each shard's
    weighted `TfidfMatrix` (they stay on the workers), futures of their (documents, entries)).

    Map: count each shard's documents (`tfidf_shards.COUNTING`); the matrices stay on the
    workers. Reduce: sorted terms and document frequencies. Driver: min/max-df and idf.
    Map again: weigh each shard with the corpus idf (`tfidf_shards.weigh_task`).
    """
    from nlpkit.distributed.cluster import broadcast, map_reduce
    from nlpkit.stats import tfidf, tfidf_shards

    shards, _ = plan(client, paths, shard_bytes, SPLIT[mode])
    settings = tfidf_shards.CountSettings(mode, tokenizer, ngram_range, field, id_field, errors, fields,
                                          name_files=len(paths) > 1)
    parts = count_on(client, tfidf_shards.COUNTING, [[s] for s in shards], settings)
    terms, df, n_docs, _ = map_reduce(client, tfidf_shards.shard_summary, parts, tfidf_shards.merge_df,
                                      ticker=tick)
    info = client.gather(client.map(tfidf_shards.shard_info, parts, pure=False))
    offsets = _offsets(shards, [u for _, u in info], mode == "paragraphs")
    tfidf.check_corpus(n_docs, len(terms), tokenizer)
    keep = tfidf.df_mask(df, n_docs, min_df, max_df)
    terms = [t for t, k in zip(terms, keep.tolist()) if k]
    df = df[keep]
    w = weighting
    idf = tfidf.idf_weights(df, n_docs, w.idf, w.log_base, w.idf_offset)
    terms_f, df_f, idf_f = broadcast(client, [terms, df, idf])
    n = len(parts)
    weighted = client.map(tfidf_shards.weigh_task, list(zip(parts, offsets)), [terms_f] * n, [df_f] * n,
                          [idf_f] * n, [weighting] * n, pure=False)
    del parts
    return terms, df, idf, weighted


def tfidf_top_terms(client, paths: list[str], mode: str, tokenizer, weighting, ngram_range=(1, 1),
                    min_df: float = 1, max_df: float = 1.0, top: int = 10, field: str = "text",
                    id_field: str | None = None, fields: str = "T,W", errors: str = "strict",
                    shard_bytes: int | None = None, progress: Callable[..., None] | None = None):
    """`nlpkit tfidf` top terms over a cluster: (number of terms, iterator of
    (doc, rank, term, weight) rows in document order), each shard's rows fetched in order."""
    from nlpkit.distributed.cluster import Ticker, map_ordered
    from nlpkit.stats import tfidf_shards

    tick = Ticker(progress, 0)
    terms, _, _, weighted = _tfidf_weighted(client, paths, mode, tokenizer, weighting, ngram_range, min_df,
                                            max_df, field, id_field, fields, errors, shard_bytes, tick)

    def rows():
        for part in map_ordered(client, tfidf_shards.top_term_records, weighted, ticker=tick, args=(top,)):
            yield from part

    return len(terms), rows()


def tfidf_matrix(client, paths: list[str], mode: str, tokenizer, weighting, ngram_range=(1, 1),
                 min_df: float = 1, max_df: float = 1.0, field: str = "text", id_field: str | None = None,
                 fields: str = "T,W", errors: str = "strict", shard_bytes: int | None = None,
                 progress: Callable[..., None] | None = None, signature: str | None = None,
                 vocab_in_header: bool = True):
    """`tfidf --matrix` over a cluster: (kept terms, iterator of the MatrixMarket text of
    `tfidf.write_matrix_market`). The header needs the entry count first: the weighted shards
    stay on the workers, their counts come first, then names and entries stream in order."""
    from nlpkit.distributed.cluster import Ticker, map_ordered
    from nlpkit.stats import tfidf, tfidf_shards

    tick = Ticker(progress, 0)
    terms, _, _, weighted = _tfidf_weighted(client, paths, mode, tokenizer, weighting, ngram_range, min_df,
                                            max_df, field, id_field, fields, errors, shard_bytes, tick)
    info = client.gather(client.map(tfidf_shards.matrix_info, weighted, pure=False))
    firsts = [0]
    for n, _ in info:
        firsts.append(firsts[-1] + n)

    def text():
        yield tfidf.matrix_market_banner(signature)
        if vocab_in_header:
            for s in range(0, len(terms), 1 << 16):
                yield tfidf.matrix_market_names("term", terms[s:s + (1 << 16)], s + 1)
            for first, names in zip(firsts, map_ordered(client, tfidf_shards.doc_names, weighted, ticker=tick)):
                yield tfidf.matrix_market_names("doc", names, first + 1)
        yield f"{firsts[-1]} {len(terms)} {sum(e for _, e in info)}\n"
        yield from map_ordered(client, tfidf_shards.entries_task, list(zip(weighted, firsts)), ticker=tick)

    return terms, text()


def tfidf_query(client, paths: list[str], mode: str, tokenizer, weighting, tokens: list[str], top: int = 10,
                ngram_range=(1, 1), min_df: float = 1, max_df: float = 1.0, field: str = "text",
                id_field: str | None = None, fields: str = "T,W", errors: str = "strict",
                shard_bytes: int | None = None, progress: Callable[..., None] | None = None):
    """`tfidf --query` over a cluster: [(doc name, cosine)] best first, as `tfidf.rank_by_cosine`
    ranks the whole matrix (ties: the earlier document). Each shard returns its best `top`."""
    import numpy as np

    from nlpkit.distributed.cluster import Ticker, map_ordered
    from nlpkit.stats import tfidf, tfidf_shards
    from nlpkit.stats.documents import DocNames

    tick = Ticker(progress, 0)
    terms, df, idf, weighted = _tfidf_weighted(client, paths, mode, tokenizer, weighting, ngram_range, min_df,
                                               max_df, field, id_field, fields, errors, shard_bytes, tick)
    empty = tfidf.TfidfMatrix(np.zeros(1, np.int64), np.zeros(0, np.int32), np.zeros(0), terms, DocNames(),
                              df, idf, weighting)
    q = tfidf.unit_query(empty, tokens)
    if q is None:
        return []
    info = client.gather(client.map(tfidf_shards.matrix_info, weighted, pure=False))
    firsts = np.concatenate([[0], np.cumsum([n for n, _ in info])]).tolist()
    (q_f,) = broadcast(client, [q])
    hits = [h for part in map_ordered(client, tfidf_shards.query_task, list(zip(weighted, firsts)), ticker=tick,
                                      args=(q_f, top))
            for h in part]
    hits.sort(key=lambda h: (-h[2], h[0]))
    return [(name, cos) for _, name, cos in (hits[:top] if top else hits)]


def bm25_add(client, index, paths: list[str], fmt: str, id_field: str | None = "id", field: str = "text",
             fields: str = "T,W", errors: str = "strict", shard_bytes: int | None = None,
             progress: Callable[..., None] | None = None) -> tuple[list, list[str]]:
    """The counting of `nlpkit bm25 add` over a cluster: the new documents of `paths` (in order) tokenized
    with `index`'s tokenizer and counted per shard on the workers (`bm25_shards.count_shard`); returns the
    shards' postings in corpus order and the new documents' ids (numbered on from the index's where the format
    has none), for `bm25.add_shards`, which merges and rescores on the driver as the local path does."""
    from nlpkit.retrieval import bm25_shards
    from nlpkit.retrieval.search import make_tokenizer
    from nlpkit.stats.documents import detect_format, one_format

    fmt = one_format(paths, fmt)
    if fmt == "auto":                       # as iter_records: the first non-blank line decides
        from nlpkit.io import iter_lines

        fmt = detect_format(iter_lines(paths[0], errors="replace"), default="lines")
    shards, _ = plan(client, paths, shard_bytes, SPLIT[fmt])
    settings = bm25_shards.CountSettings(fmt, make_tokenizer(index.tokenizer), id_field, field, fields, errors)
    futures = count_on(client, bm25_shards.COUNTING, [[s] for s in shards], settings)
    parts, ids = [], []
    for k, p in enumerate(client.gather(futures)):          # in corpus order
        first = index.n_docs + len(ids) + 1
        ids.extend(p.ids if p.ids is not None else map(str, range(first, first + p.n_docs)))
        parts.append(p)
        if progress is not None:
            progress(k + 1, len(futures))
    return parts, ids


def bm25_index(client, paths: str | list[str], out_dir: str, fmt: str, variant: str, k1: float, b: float, delta: float,
               tokenizer_settings: dict, id_field: str | None = "id", field: str = "text",
               fields: str = "T,W", errors: str = "strict", shard_bytes: int | None = None,
               progress: Callable[..., None] | None = None) -> dict:
    """`nlpkit bm25 index` over a cluster; writes the same index directory as the local path.

    `paths`: the corpus, one file or several (plain or compressed) read in order, documents numbered
    on across files as `documents.read_corpus` numbers them locally.

    Map: tokenize and count each shard's postings (they stay on the workers). Reduce:
    vocabulary in first-occurrence order, df, N, total length. Driver: idf, avgdl, the
    postings pointers. Map again: each worker scores its shards with global term ids and
    document numbers and writes them as part files into a work directory next to the index
    (`bm25_shards.write_part`; on a cluster that directory must be on a filesystem the workers
    share). The driver merges the parts by streaming (`bm25_shards.merge_parts`: one range of terms
    at a time, parts memory-mapped) into the index arrays, which are then moved into place: postings
    never cross the network and never sit in the driver's memory. Returns the summary record.
    """
    import os
    import shutil

    import numpy as np

    from distributed import as_completed

    from nlpkit.distributed.cluster import Ticker
    from nlpkit.errors import NlpkitError
    from nlpkit.retrieval import bm25, bm25_shards, store
    from nlpkit.stats.documents import check_unique_ids, detect_format, one_format

    bm25.check_params(variant, k1, b, delta)
    paths = [paths] if isinstance(paths, str) else list(paths)
    fmt = one_format(paths, fmt)
    if fmt == "auto":                       # as iter_records: the first non-blank line decides
        from nlpkit.io import iter_lines

        fmt = detect_format(iter_lines(paths[0], errors="replace"), default="lines")
    shards, _ = plan(client, paths, shard_bytes, SPLIT[fmt])
    tick = Ticker(progress, 0)
    n = len(shards)
    from nlpkit.retrieval.search import make_tokenizer

    settings = bm25_shards.CountSettings(fmt, make_tokenizer(tokenizer_settings), id_field, field, fields,
                                         errors)
    parts = count_on(client, bm25_shards.COUNTING, [[s] for s in shards], settings)
    vocab, df, n_docs, total_len, max_tf = map_reduce(client, bm25_shards.shard_summary, parts,
                                                      bm25_shards.merge_summaries, ticker=tick)
    if n_docs == 0:
        raise NlpkitError("empty corpus: there are no documents to index")
    doc_ids, firsts = _bm25_doc_ids(client, parts, tick)
    check_unique_ids(doc_ids, paths[0] if len(paths) == 1 else "the corpus")
    avgdl = total_len / n_docs if total_len > 0 else 1.0
    term_idf = bm25.idf(variant, np.maximum(df, 1), n_docs)
    nonocc64 = bm25.nonocc_scores(variant, term_idf, k1, b, delta)
    indptr = np.zeros(len(vocab) + 1, dtype=np.int64)
    np.cumsum(df, out=indptr[1:])
    n_post = int(indptr[-1])
    doc_bits = bm25.doc_bits_for(n_docs, max_tf)
    packed = doc_bits < 32
    work = _work_dir_beside(out_dir)
    try:
        term_id = {t: i for i, t in enumerate(vocab)}
        args = broadcast(client, [term_id, term_idf, nonocc64])
        futures = client.map(bm25_shards.write_part,
                             [(p, f, k) for k, (p, f) in enumerate(zip(parts, firsts))],
                             [work] * n, *[[a] * n for a in (*args, avgdl, variant, k1, b, delta, doc_bits)],
                             pure=False)
        tick.add(n)
        for fut in as_completed(futures):
            fut.result()                     # a worker's error is raised here
            tick()
        del futures, parts, args
        outputs = _merged_postings(work, n, indptr, packed)
        postings, scores, tf_extra = outputs["postings"], outputs["scores"], outputs.get("tf_extra")
        index = bm25.BM25Index(variant=variant, k1=k1, b=b, delta=delta, vocab=vocab, doc_ids=doc_ids,
                               indptr=indptr, postings=postings, scores=scores,
                               nonocc=bm25.stored_nonocc(nonocc64),
                               doc_bits=doc_bits, tf_extra=tf_extra, tokenizer=dict(tokenizer_settings))
        store.save_index(index, out_dir, files={name: os.path.join(work, f"{name}.npy") for name in outputs})
        del index, postings, scores, tf_extra, outputs
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {"documents": n_docs, "terms": len(vocab), "postings": n_post,
            "avgdl": total_len / n_docs, "bytes": store.index_size(out_dir)}


def _bm25_doc_ids(client, parts, tick) -> tuple[list[str], list[int]]:
    """Every document's id in corpus order (its number from 1 where the corpus has no ids), and each shard's first
    document number."""
    from nlpkit.distributed.cluster import map_ordered
    from nlpkit.retrieval import bm25_shards

    doc_ids: list[str] = []
    firsts = []
    for count, ids in map_ordered(client, bm25_shards.shard_ids, parts, ticker=tick):
        firsts.append(len(doc_ids))
        doc_ids.extend(ids if ids is not None else map(str, range(len(doc_ids) + 1, len(doc_ids) + count + 1)))
    return doc_ids, firsts


def _work_dir_beside(out_dir: str) -> str:
    """A new work directory next to `out_dir` (on its filesystem, so the finished arrays move into place)."""
    import os
    import tempfile

    from nlpkit.errors import NlpkitError

    parent = os.path.dirname(os.path.abspath(out_dir)) or "."
    try:
        os.makedirs(parent, exist_ok=True)
        return tempfile.mkdtemp(prefix=".nlpkit-bm25-", dir=parent)
    except OSError as e:
        raise NlpkitError(f"{out_dir}: cannot write the index next to it ({e.strerror or e})") from None


def _merged_postings(work: str, n_parts: int, indptr, packed: bool) -> dict:
    """The index arrays (`postings`, `scores`, and `tf_extra` unless `packed`) as .npy files in `work`, merged
    from the workers' part files by streaming (`bm25_shards.merge_parts`) and flushed; name -> memmap."""
    import os

    import numpy as np

    from nlpkit.retrieval import bm25_shards

    n_post = int(indptr[-1])
    fmt_ = np.lib.format
    outputs = {"postings": fmt_.open_memmap(os.path.join(work, "postings.npy"), "w+", np.uint32, (n_post,)),
               "scores": fmt_.open_memmap(os.path.join(work, "scores.npy"), "w+", np.float32, (n_post,))}
    if not packed:
        outputs["tf_extra"] = fmt_.open_memmap(os.path.join(work, "tf_extra.npy"), "w+", np.uint32, (n_post,))
    bm25_shards.merge_parts(work, n_parts, indptr, outputs)
    for arr in outputs.values():
        arr.flush()
    return outputs


def perplexity_lines(client, shard_bytes: int | None = None, progress: Callable[..., None] | None = None) -> Callable:
    """A `map_lines` for `nlpkit.lm.perplexity.perplexity_run` (``perplexity --per-line``, and an n-gram model's
    sentences): `map_lines(paths, task, args)` splits the files into line shards, runs `task(shard, *args)` on the
    workers (a model loaded once per worker: the task's own cache) and yields (file index, path, result) per shard
    in input order; the driver holds only the shards finished ahead of the one it is writing."""
    from nlpkit.distributed.cluster import map_ordered

    def run(paths: list[str], task: Callable, args: tuple) -> Iterator[tuple[int, str, object]]:
        shards, _ = plan(client, paths, shard_bytes)
        for shard, result in zip(shards, map_ordered(client, task, shards, progress, args=args)):
            yield shard.file_index, shard.path, result

    return run


def ngram_counts(client, paths: list[str], order: int, lowercase: bool = False, transform=None,
                 errors: str = "strict", shard_bytes: int | None = None,
                 progress: Callable[..., None] | None = None):
    """`nlpkit.lm.ngram.ngram_counts.count_ngrams` over a cluster (lines are sentences: shards are
    independent); the driver estimates the model from the merged counts."""
    from nlpkit.lm.ngram import ngram_count_shards

    return count_on(client, ngram_count_shards.COUNTING, count_tasks(client, paths, shard_bytes),
                    ngram_count_shards.CountSettings(order, lowercase, transform, errors), progress)


def score_items(client, score_chunk: Callable, args: tuple, shard_bytes: int | None = None,
                progress: Callable[..., None] | None = None, block: int = 1) -> Callable:
    """A `map_items` for `nlpkit.evaluation.evaluate.Evaluation.run` (``score --dask``): the driver reads and checks
    the items, the workers score chunks of consecutive items, `score_chunk(chunk, *args, blas_threads)`
    (`evaluate.score_chunk`: each worker loads the models once), and the results come back in input order. A chunk
    holds about `shard_bytes` of item text, or for None (``--shard-size auto``) a share of the items giving
    `TASKS_PER_WORKER` tasks per worker; in whole blocks of `block` items, the runs the local scorer batches, so
    that a worker computes each item exactly as the local run does."""
    from nlpkit.distributed.cluster import map_ordered
    from nlpkit.lm import threads

    def run(items):
        items = list(items)
        chunks = chunk_items(items, shard_bytes, n_workers(client), block)
        results = map_ordered(client, score_chunk, chunks, progress, args=(*args, threads.blas_threads()))
        for chunk, result in zip(chunks, results):
            yield from zip(chunk, result)

    return run


def chunk_items(items: list, shard_bytes: int | None, workers: int, block: int = 1) -> list[list]:
    """Consecutive runs of (task, item) pairs: about `shard_bytes` of text each, or `TASKS_PER_WORKER` per worker;
    each a whole number of `block`s (but the last)."""
    if shard_bytes is None:
        per = max(1, -(-len(items) // (TASKS_PER_WORKER * max(workers, 1))))
        per = -(-per // block) * block
        return [items[i:i + per] for i in range(0, len(items), per)]
    chunks, current, size = [], [], 0
    for pair in items:
        item = pair[1]
        current.append(pair)
        size += len(item.context.encode("utf-8")) + sum(len(c.encode("utf-8")) for c in item.continuations)
        if size >= shard_bytes and len(current) % block == 0:
            chunks.append(current)
            current, size = [], 0
    if current:
        chunks.append(current)
    return chunks


WINDOW_TASK_TOKENS = 65536   # at most this many input tokens of windows per task (whole-text perplexity)


def perplexity_windows(client, shard_bytes: int | None = None, progress: Callable[..., None] | None = None) -> Callable:
    """A `map_windows` for `nlpkit.lm.perplexity.perplexity_run` and `nlpkit.lm.perplexity.comparison.compare_run`: the windows
    of a whole text, `map_windows(task, windows, args)` with `windows` a list of (window tokens, first scored),
    scored on the workers as `task(chunk, *args)` (each loads the model once) in tasks of consecutive windows
    holding about `shard_bytes / 4` input tokens (at most `WINDOW_TASK_TOKENS`, at least one window), each
    window's result yielded in order. Only the windows' token ids travel."""
    from nlpkit.distributed.cluster import Ticker, map_ordered

    tick = Ticker(progress, 0)

    def run(task: Callable, windows: list[tuple[list[int], int]], args: tuple) -> Iterator:
        budget = max(1, min((shard_bytes or SHARD_BYTES) // 4, WINDOW_TASK_TOKENS))
        tasks, group, size = [], [], 0
        for ids, first in windows:
            if group and size + len(ids) > budget:
                tasks.append(group)
                group, size = [], 0
            group.append((ids, first))
            size += len(ids)
        if group:
            tasks.append(group)
        for part in map_ordered(client, task, tasks, ticker=tick, args=args):
            yield from part

    return run


class ClusterMap:
    """The `TaskMap` of `score --tasks --dask` (`nlpkit.evaluation.harness.distributed_model`): `func(chunk, *args)`
    on the workers for every chunk, results yielded in order (`map_ordered`), each finished task counted on
    `progress(done, total)`; `plan(sizes, per_worker)` cuts units (the requests that share a context, of `sizes`
    bytes of text) into tasks of about `shard_bytes` each, or for None (``--shard-size auto``) `per_worker` tasks
    per worker (`TASKS_PER_WORKER`; generations: one, a worker decoding them all in one batch)."""

    def __init__(self, client, shard_bytes: int | None = None, progress: Callable[..., None] | None = None):
        from nlpkit.distributed.cluster import Ticker

        self.client, self.shard_bytes = client, shard_bytes
        self.tick = Ticker(progress, 0)

    def __call__(self, func: Callable, chunks: list, args: tuple = ()) -> Iterator:
        from nlpkit.distributed.cluster import map_ordered

        return map_ordered(self.client, func, chunks, args=args, ticker=self.tick)

    def plan(self, sizes, per_worker: int = TASKS_PER_WORKER) -> list[range]:
        n = len(sizes)
        if self.shard_bytes is None:
            per = max(1, -(-n // (per_worker * n_workers(self.client))))
            return [range(i, min(i + per, n)) for i in range(0, n, per)]
        out, start, size = [], 0, 0
        for i, s in enumerate(sizes):
            size += s
            if size >= self.shard_bytes:
                out.append(range(start, i + 1))
                start, size = i + 1, 0
        if start < n:
            out.append(range(start, n))
        return out
