"""Language models: the transformer engine (`transformer/`) and n-gram models (`ngram/`), and what serves both.

    interface.py      `LanguageModel`: what a model is (tokens, logprobs, logits, decoding state)
    load.py           `load_language_model`: sniff a path, return its backend
    perplexity.py     perplexity over windows chosen the way three references do; `perplexity_run`'s records
    comparison.py     `perplexity --compare` (divergence.py: KLD, top-token agreement)
    continuations.py  `ContinuationScore` and the `ContinuationScorer` protocol `nlpkit score` is written on
    sampling.py       logits processors and token selection
    generation.py     prefill, decode step by step, stop, detokenize
    chat.py           chat templates
    threads.py        row-parallel numpy, BLAS held to one thread; a Dask worker's BLAS threads as the driver's
    transformer/      the numpy engine (`transformer_lm.TransformerLM`): config, model, cache, rope, loaders/
    ngram/            n-gram models (`ngram_lm.NgramLM`): counting, Kneser-Ney, ARPA, scoring, sampling, training
    default/          the model shipped with nlpkit

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
