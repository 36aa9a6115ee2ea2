"""n-gram language models: training (MLE, add-k, modified Kneser-Ney as KenLM), ARPA files, scoring, sampling.

    ngram_counts.py  the corpus -> raw counts of every k-gram (streaming, numpy)
    kneser_ney.py    raw counts -> interpolated modified Kneser-Ney in backoff form (lmplz's estimate)
    arpa.py          ARPA and nlpkit counts files: read into arrays, write
    ngram_model.py   the loaded model: sorted n-gram keys, vectorized scoring, next-word distributions
    line_scoring.py  perplexity of lines as KenLM's query reports it, plus NLL and bits per byte
    train.py         train_ngram: count and write a model file (nlpkit ngram-train)
    ngram_lm.py      `NgramLM`: the model as a `LanguageModel`
    ngram_perplexity.py    what `perplexity` prints for an n-gram model (KenLM query's records)
    ngram_continuations.py continuation scoring (`nlpkit score`), as KenLM's full_scores
    ngram_sampling.py      sample and generate from an n-gram model
"""

from nlpkit.lm.ngram.arpa import sniff


def is_ngram_model(path) -> bool:
    """True for an ARPA file (\\data\\) or an nlpkit counts file (\\counts\\), plain or .gz."""
    return path is not None and sniff(path) is not None


def load_ngram_model(path, warn=None, *, use_cache=None):
    from nlpkit.lm.ngram.ngram_model import load_ngram_model as _load

    return _load(path, warn=warn, use_cache=use_cache)


def train_ngram(*args, **kwargs):
    from nlpkit.lm.ngram.train import train_ngram as _train

    return _train(*args, **kwargs)


__all__ = ["is_ngram_model", "load_ngram_model", "train_ngram"]
