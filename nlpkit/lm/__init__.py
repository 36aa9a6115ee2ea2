"""Language models: the transformer engine (`transformer/`) and n-gram models (`ngram/`), and what serves both.

    transformer/   the numpy engine: config, model, cache, rope, threads, loaders/
    ngram/         n-gram models: counting, Kneser-Ney, ARPA, scoring, sampling, training
    perplexity.py  perplexity over windows chosen the way three references do
    sampling.py    logits processors and token selection
    generation.py  prefill, decode step by step, stop, detokenize
    chat.py        chat templates
    default/       the model shipped with nlpkit

Threads: numpy's OpenBLAS keeps idle worker threads spinning between calls by default; a decode
step makes ~120 small BLAS calls, and on a shared machine the spinning threads starve each other
(measured here: 8x slower decode with two threads under load). Unless the user chose otherwise,
they go to sleep quickly instead (`OPENBLAS_THREAD_TIMEOUT`; read when numpy loads, so this only
applies when nlpkit.lm is imported first, as the CLI does). `OPENBLAS_NUM_THREADS=1` is the
fastest setting on a busy machine.
"""

import os as _os
import sys as _sys

if "numpy" not in _sys.modules:
    _os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
