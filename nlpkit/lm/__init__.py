"""Language models: the interface, how a model is loaded, the tasks built on it, and two backends.

    interface.py      `LanguageModel` (identity, tokens, logprobs, continuation scoring) and the `Capability`s a
                      backend declares (windows, logits, sentences, decoding, RoPE, weights layout, chat, ...)
    spec.py           `LoadSpec` (how to load a model: the CLI builds it), `cached_model` (the one model cache)
    model_files.py    `model_format`: what a model path is, decided in one place
    load.py           `load_language_model(spec)`: the backend that reads it
    continuations.py  `ContinuationScore` and the `ContinuationScorer` protocol `nlpkit score` is written on
    decoding.py       `StateBatch`, `StreamStops`: decoding adapters any backend can return
    chat.py           chat templates
    threads.py        row-parallel numpy, BLAS held to one thread; a Dask worker's BLAS threads as the driver's
    uncertainty.py    llama.cpp's standard errors
    prepared.py       the prepared-model cache
    perplexity/       perplexity over windows chosen the way three references do; `--compare` (KLD, top tokens)
    generation/       sampling, prefill, decode step by step, stop, detokenize; many prompts together
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
