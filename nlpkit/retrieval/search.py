"""The bm25 subcommand's work as plain functions: text in, index or TREC run out.

The index remembers its tokenizer (pattern, lowercasing, the stopword list itself), so
queries and added documents are always tokenized the way the corpus was.

>>> idx = index_texts([("d1", "The cat sat."), ("d2", "A dog ran.")], stopwords="english")
>>> search_texts(idx, [("q1", "the cat")], k=5)
{'q1': [('d1', 0.27725887298583984)]}
"""

from __future__ import annotations

from typing import Callable, Sequence

from nlpkit.retrieval.bm25 import (DEFAULTS, NONOCC_VARIANTS, BM25Index, add_documents, build_index,
                                   gc_paused)
from nlpkit.retrieval.runs import Run
from nlpkit.signature import make_signature
from nlpkit.text import WordTokenizer


def tokenizer_settings(pattern: str | None = None, lowercase: bool = True,
                       stopwords: str | None = None) -> dict:
    """What an index stores about its tokenizer (the stopword words themselves, not a path)."""
    tok = WordTokenizer(pattern, lowercase, stopwords)
    return {"name": tok.signature, "pattern": tok.pattern, "lowercase": tok.lowercase,
            "stopwords": tok.stopwords_name, "stopword_list": sorted(tok.stopwords)}


def make_tokenizer(settings: dict) -> WordTokenizer:
    """The tokenizer an index was built with."""
    return WordTokenizer(settings.get("pattern"), settings.get("lowercase", True),
                         settings.get("stopword_list") or None)


def signature(index_or_params: BM25Index | dict) -> str:
    """``bm25|variant:lucene|k1:1.2|b:0.75|tok:word-lower|stop:none|v:...`` (delta for bm25l/bm25+)."""
    p = index_or_params
    get = p.get if isinstance(p, dict) else (lambda k, d=None: getattr(p, k, d))
    tok = get("tokenizer") or {}
    settings = {"variant": get("variant"), "k1": get("k1"), "b": get("b")}
    if get("variant") in NONOCC_VARIANTS:
        settings["delta"] = get("delta")
    settings["tok"] = tok.get("name", "word-lower")
    settings["stop"] = tok.get("stopwords", "none")
    return make_signature("bm25", **settings)


def index_texts(records: Sequence[tuple[str, str]], variant: str = "lucene",
                k1: float = DEFAULTS["k1"], b: float = DEFAULTS["b"], delta: float = DEFAULTS["delta"],
                pattern: str | None = None, lowercase: bool = True, stopwords: str | None = None,
                progress: Callable[..., None] | None = None) -> BM25Index:
    """Tokenize (id, text) records and build an index."""
    settings = tokenizer_settings(pattern, lowercase, stopwords)
    tok = make_tokenizer(settings)
    tokens = []
    with gc_paused():
        for i, (_, text) in enumerate(records, 1):
            tokens.append(tok.tokenize(text))
            if progress and i % 4096 == 0:
                progress(i, len(records))
    return build_index(tokens, [rid for rid, _ in records], variant=variant, k1=k1, b=b,
                       delta=delta, tokenizer=settings, progress=progress)


def add_texts(index: BM25Index, records: Sequence[tuple[str, str]]) -> BM25Index:
    """The index with these (id, text) records appended (tokenized as the index was)."""
    tok = make_tokenizer(index.tokenizer)
    return add_documents(index, [tok.tokenize(text) for _, text in records],
                         [rid for rid, _ in records])


def search_texts(index: BM25Index, queries: Sequence[tuple[str, str]], k: int = 10,
                 progress: Callable[..., None] | None = None) -> Run:
    """{qid: [(docid, score), ...]} for (qid, text) queries; an empty query has no results.
    Queries are searched in blocks (`batched.search_many`): the results of one at a time."""
    from nlpkit.retrieval.batched import search_many

    tok = make_tokenizer(index.tokenizer)
    hits = search_many(index, [tok.tokenize(text) for _, text in queries], k, progress)
    ids = index.doc_ids
    return {qid: [(ids[d], s) for d, s in zip(docs.tolist(), scores.tolist())]
            for (qid, _), (docs, scores) in zip(queries, hits)}
