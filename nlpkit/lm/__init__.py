"""The numpy language-model engine: config, forward pass, KV cache, RoPE, loaders, scoring.

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
