"""Retrieval: BM25 indexes (bm25), rank fusion (fusion), TREC runs and qrels (runs), IR metrics (metrics).

Every subcommand's work is a plain function here, e.g. `nlpkit.retrieval.bm25.build_index`.
"""
