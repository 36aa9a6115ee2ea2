"""Shard planning and task grouping for --dask, checked without a cluster (issue 18)."""

from __future__ import annotations

import gzip
import random

import numpy as np
import pytest

from nlpkit.shards import SHARD_BYTES, auto_shard_bytes, group_shards, parse_size, plan_shards, shard_size
from nlpkit.stats import pmi, pmi_shards
from nlpkit.text import WordTokenizer


@pytest.fixture()
def files(tmp_path):
    rng = random.Random(7)
    words = "the cat sat on a mat dog ran. big red house! tree river stone? light dark".split()
    out = []
    for i, n in enumerate([400, 3, 250, 1]):
        p = tmp_path / f"f{i}.txt"
        p.write_text("\n".join(" ".join(rng.choice(words) for _ in range(rng.randint(0, 12)))
                               for _ in range(n)) + "\n", encoding="utf-8")
        out.append(str(p))
    g = tmp_path / "g.txt.gz"
    with gzip.open(g, "wt", encoding="utf-8") as f:
        f.write("a cat. the dog\nsat on the mat\n" * 20)
    out.append(str(g))
    return out


def test_parse_size_auto():
    assert parse_size("auto") is None and parse_size(None) is None
    assert parse_size("64M") == 64 << 20


def test_group_shards_keeps_order_and_packs_small_shards(files):
    shards = plan_shards(files, 1000)
    groups = group_shards(shards, 3000)
    assert [s for g in groups for s in g] == shards               # a partition, in input order
    assert len(groups) < len(shards)
    for g in groups:
        assert len(g) == 1 or sum(map(shard_size, g)) <= 3000       # only a lone shard may be larger
    assert group_shards(shards, 1) == [[s] for s in shards]


def test_auto_shard_bytes(files):
    assert auto_shard_bytes(files, 1) == 1 << 20                  # small input: the 1 MB floor
    big = [files[0]] * 1000
    total = shard_size(plan_shards([files[0]])[0]) * 1000
    assert auto_shard_bytes(big, 1) == min(SHARD_BYTES, total)   # one worker: one task (<= 64 MB)
    assert auto_shard_bytes(big, 2) == -(-total // 4)             # two tasks per worker
    assert auto_shard_bytes(big * 100, 2) == SHARD_BYTES


@pytest.mark.parametrize("opts", [dict(), dict(cross_lines=True, window=4),
                                  dict(cross_lines=True, cross_sentences=True, window=3),
                                  dict(cross_lines=True, ngram=3, window=5)])
def test_grouped_shard_counts_equal_one_pass(files, opts):
    """Tasks holding several shards (of one file and of several) merge to the one-pass counts."""
    tok = WordTokenizer()
    want = pmi.count_cooccurrences(files, tok, **opts)
    for size, target in [(300, 1000), (300, 300), (200, 5000)]:
        groups = group_shards(plan_shards(files, size), target)
        settings = pmi_shards.CountSettings(tok, opts.get("window", 2), opts.get("ngram", 2),
                                            opts.get("cross_lines", False), opts.get("cross_sentences", False))
        parts = [pmi_shards.count_shard(g, settings) for g in groups]
        got = pmi_shards.add_boundaries(pmi_shards.merge_cooccurrences(parts))
        assert got.n_tokens == want.n_tokens
        lut = np.array([got.words.index(w) for w in want.words])
        assert np.array_equal(got.unigram[lut], want.unigram)
        ids = lut[want.ngram_ids()]
        assert [got.count_of(row) for row in ids.tolist()] == want.counts.tolist()
        assert len(got.keys) == len(want.keys)


def test_bm25_part_merge_is_independent_of_the_chunk(files, tmp_path):
    """`merge_parts` by small term ranges gives the arrays of one range (the --dask index test
    covers one range against the local index)."""
    from nlpkit.retrieval import bm25, bm25_shards
    from nlpkit.retrieval.search import make_tokenizer, tokenizer_settings

    tok = make_tokenizer(tokenizer_settings())
    shards = plan_shards([files[0]], 700)
    parts = [bm25_shards.count_shard([s], bm25_shards.CountSettings("lines", tok)) for s in shards]
    vocab, df, n_docs, total, max_tf = bm25_shards.merge_summaries([bm25_shards.shard_summary(p) for p in parts])
    term_id = {t: i for i, t in enumerate(vocab)}
    idf = bm25.idf("lucene", np.maximum(df, 1), n_docs)
    first = np.cumsum([0] + [p.n_docs for p in parts])
    for k, p in enumerate(parts):
        bm25_shards.write_part((p, int(first[k]), k), str(tmp_path), term_id, idf, None, total / n_docs,
                               "lucene", 1.5, 0.75, 0.5, 12)
    indptr = np.concatenate(([0], np.cumsum(df)))
    results = []
    for chunk in (1 << 23, 5, 1):
        out = {"postings": np.zeros(indptr[-1], np.uint32), "scores": np.zeros(indptr[-1], np.float32)}
        bm25_shards.merge_parts(str(tmp_path), len(parts), indptr, out, chunk=chunk)
        results.append(out)
    assert len(parts) > 3 and (results[0]["postings"] > 0).all()
    for r in results[1:]:
        assert np.array_equal(r["postings"], results[0]["postings"])
        assert np.array_equal(r["scores"], results[0]["scores"])
    docs = results[0]["postings"] & ((1 << 12) - 1)
    for t in range(len(vocab)):                       # each term's documents ascending
        assert (np.diff(docs[indptr[t]:indptr[t + 1]].astype(np.int64)) > 0).all()


class _FakeClient:
    def __init__(self, workers: int) -> None:
        self.workers = {f"w{i}": {} for i in range(workers)}

    def scheduler_info(self) -> dict:
        return {"workers": self.workers}


def test_one_worker_counts_in_one_task_with_auto_size(files):
    """--shard-size auto on one worker: one counting task (more would only be merged again on it)."""
    from nlpkit.distributed.stages import count_tasks

    big = [files[0]] * 300
    assert count_tasks(_FakeClient(1), big, None) == [plan_shards(big, SHARD_BYTES)]
    assert len(count_tasks(_FakeClient(2), big, None)) > 1
    assert len(count_tasks(_FakeClient(1), big, 1000)) > 1        # an explicit size is kept


def test_a_relative_path_is_opened_from_the_driver_directory_on_a_worker(tmp_path, monkeypatch):
    """Workers start in directories of their own: a shard keeps the path as given for its name and
    opens the absolute path the driver resolved (a stray file of that name elsewhere is not read)."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "b.txt").write_text("the real corpus\n" * 100)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "b.txt").write_text("stray\n")
    monkeypatch.chdir(tmp_path / "data")
    shards = plan_shards(["b.txt"], 64)
    assert str(shards[0]) == "b.txt" and len(shards) > 1
    monkeypatch.chdir(tmp_path / "elsewhere")            # as a worker would be
    assert b"".join(s.open().read() for s in shards) == b"the real corpus\n" * 100


def test_a_malformed_shard_size_is_a_usage_error_without_dask_too(cli, tmp_path):
    (tmp_path / "a.txt").write_text("the cat sat\n")
    r = cli("pmi", str(tmp_path / "a.txt"), "--shard-size", "1x")
    assert r.returncode == 2 and b"--shard-size" in r.stderr and b"64M" in r.stderr


def test_score_chunks_hold_whole_blocks_of_items():
    """`score --dask`: each chunk is a whole number of the blocks the local run scores together (but the last), so a
    worker packs exactly the forwards the local run packs; at least about `shard_bytes` of text each."""
    from nlpkit.distributed.stages import chunk_items
    from nlpkit.evaluation.items import Item

    items = [("loglikelihood", Item(i, f"line {i + 1}", "ctx", ["continuation"])) for i in range(23)]
    for shard_bytes, workers in ((1, 1), (40, 1), (10_000, 1), (None, 2), (None, 8)):
        chunks = chunk_items(items, shard_bytes, workers, block=4)
        assert [pair for chunk in chunks for pair in chunk] == items
        assert all(len(chunk) % 4 == 0 for chunk in chunks[:-1]), (shard_bytes, workers)
    assert [len(c) for c in chunk_items(items, 40, 1, block=4)] == [4, 4, 4, 4, 4, 3]
    assert [len(c) for c in chunk_items(items, 40, 1)] == [3] * 7 + [2]
