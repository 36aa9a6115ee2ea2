"""A loaded n-gram model: numpy arrays, vectorized scoring and next-word distributions.

Each order k keeps one sorted int64 key per n-gram, (row of its first k-1 words in order k-1) * V
+ last word, with float32 log10 probability and backoff beside it; unigram rows are word ids.
A lookup is a `np.searchsorted`, for all positions of a batch of sentences at once.

Backoff models (ARPA) score as KenLM's ``query`` does: the longest n-gram of the history and the
word that the model has, plus the backoffs of the longer history contexts it has:

    log10 p(w | h) = log10 p(w | h[-L+1:]) + sum over j >= L of backoff(h[-j:])

Counts models (nlpkit's `mle` / `add-k`) use the full history (at most order-1 words, fewer at
the start of a sentence): p(w | h) = (C(h w) + k) / (sum_v C(h v) + k |V|), k = 0 for MLE, |V|
counting every word, <s>, </s> and <unk> (as NLTK's ``Vocabulary`` does); MLE gives 0 to an
unseen event and to a history never seen (NLTK's ``MLE`` too).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from dataclasses import dataclass, field

import numpy as np

from nlpkit.errors import NlpkitError
from nlpkit.lm.ngram.hashing import HashIndex
from nlpkit.lm.ngram.ngram_counts import ngram_keys

LOG10_ZERO = -np.inf


@dataclass
class NgramModel:
    """An n-gram language model ready to score (see the module docstring)."""

    kind: str                       # "arpa" (backoff form) or "counts" (mle / add-k)
    vocab: list[str]
    keys: list[np.ndarray]          # per order, sorted
    logprob: list[np.ndarray]       # per order, float32 log10 (arpa)
    backoff: list[np.ndarray]       # per order, float32 log10 (arpa)
    counts: list[np.ndarray] = field(default_factory=list)       # per order (counts models)
    context_total: list[np.ndarray] = field(default_factory=list)  # per order k: sum_v C(row v) (counts)
    options: dict[str, str] = field(default_factory=dict)
    source: str = ""
    smoothing: str = "backoff"
    k: float = 0.0
    word_id: dict[str, int] = field(default_factory=dict)
    key_index: list = field(default_factory=list, repr=False)    # per order k >= 2: a HashIndex of keys[k - 1]
    cache: str = field(default="", compare=False)  # what the prepared-model cache did at load (`Prepared.cache`)

    def __post_init__(self) -> None:
        if not self.word_id:
            self.word_id = {w: i for i, w in enumerate(self.vocab)}
        self.unk_id = self.word_id.get("<unk>", -1)
        self.bos_id = self.word_id.get("<s>", -1)
        self.eos_id = self.word_id.get("</s>", -1)
        # per order k >= 2, a hash table over its keys (KenLM's "probing" structure): a lookup is a
        # probe or two, where a binary search over millions of sorted keys misses the cache ~20 times
        if not self.key_index:
            self.key_index = [None] + [HashIndex(k) for k in self.keys[1:]]

    def word_id_with_break(self, sep: str = "\n") -> dict[str, int]:
        """`word_id` plus `sep` -> -2 (a line break, never a word), for scoring a batch of lines at once."""
        cache = self.__dict__.setdefault("_with_break", {})
        d = cache.get(sep)
        if d is None:
            d = cache[sep] = {**self.word_id, sep: -2}
        return d

    def word_index(self):
        """A `lookup.WordIndex` of the vocabulary (built once), None if two words share a 64-bit hash."""
        if "_word_index" not in self.__dict__:
            from nlpkit.lm.ngram.lookup import WordIndex

            index = WordIndex(self.vocab)
            self.__dict__["_word_index"] = index if index.index is not None else None
        return self.__dict__["_word_index"]

    @property
    def order(self) -> int:
        return len(self.keys)

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    @property
    def name(self) -> str:
        return os.path.basename(self.source.rstrip("/")) or "ngram"

    # ------------------------------------------------------------------ words
    def lookup(self, words: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Word ids (OOV -> <unk>) and the OOV mask (a literal ``<unk>`` included, as query counts it)."""
        get = self.word_id.get
        ids = np.fromiter((get(w, -1) for w in words), dtype=np.int64, count=len(words))
        ids[ids < 0] = self.unk_id
        return ids, ids == self.unk_id

    def _find(self, k: int, prefix: np.ndarray, last: np.ndarray) -> np.ndarray:
        """Row of the k-gram (prefix row of order k-1, last word) in order k, -1 where absent."""
        keys = self.keys[k - 1]
        out = np.full(len(last), -1, dtype=np.int64)
        ok = np.flatnonzero(prefix >= 0)                # only these can be there (few, for long n-grams)
        if len(keys) == 0 or len(ok) == 0:
            return out
        out[ok] = self.key_index[k - 1].find(ngram_keys(prefix[ok], last[ok], self.vocab_size))
        return out

    # ------------------------------------------------------------------ scoring
    def score_sequence(self, seq: np.ndarray, offset: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """log10 p and n-gram length used for every position with offset >= 1 (not <s>).

        `seq` holds sentences ``<s> w1 .. wn </s>`` back to back; `offset` is each position's
        place in its sentence (see `counting.sentences_array`).  # [T], [T] -> [P], [P]
        """
        seq = seq.astype(np.int64, copy=False)
        if self.kind == "counts":
            return self._score_counts_sequence(seq, offset)
        pos = np.flatnonzero(offset >= 1)
        first = np.flatnonzero(offset.take(pos) == 1)                 # each sentence's first scored word
        return self.score_sentences(seq.take(pos), first, seq.take(pos.take(first) - 1))

    def score_sentences(self, tokens: np.ndarray, first: np.ndarray, history: np.ndarray | None = None
                        ) -> tuple[np.ndarray, np.ndarray]:
        """log10 p and n-gram length of each token of sentences laid end to end (their words and </s>,
        no <s>): sentence i starts at tokens[first[i]] (first[0] = 0, ascending) after the word
        history[i] (<s> when not given).  # [P], [S] -> [P] float64, [P] int64

        Backoff models score as KenLM's ``query``: the longest n-gram the model has for the word, plus
        the backoffs of the history's n-grams at least as long as that n-gram (see the module docstring)."""
        tokens = tokens.astype(np.int64, copy=False)
        if history is None:
            history = np.full(len(first), self.bos_id, dtype=np.int64)
        if self.kind == "counts":
            lengths = np.diff(first, append=len(tokens)) + 1               # <s> w1 .. </s>
            seq = np.empty(len(tokens) + len(first), dtype=np.int64)
            starts = first + np.arange(len(first))
            seq[starts] = history
            keep = np.ones(len(seq), dtype=bool)
            keep[starts] = False
            seq[keep] = tokens
            return self._score_counts_sequence(seq, np.arange(len(seq)) - np.repeat(starts, lengths))
        return self._score_backoff(tokens, first, history)

    def _score_backoff(self, tok: np.ndarray, first: np.ndarray, history: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray]:  # [P], [S], [S] -> [P], [P]
        P, N, V = len(tok), self.order, self.vocab_size
        result = self.logprob[0].take(tok).astype(np.float64)          # the unigram's, until a longer one is found
        length = np.ones(P, dtype=np.int64)
        if P == 0 or N == 1:
            return result, length
        last = np.zeros(P, dtype=bool)                                  # a sentence's last token: none extends it
        last[first[1:] - 1] = True
        last[-1] = True
        context = np.empty(P, dtype=np.int64)                           # the word before each token
        context[1:] = tok[:-1]
        context[first] = history
        # backoffs[j - 1, p]: backoff of the j-gram ending just before p (a context of p), 0 where the
        # model lacks it; row N - 1 stays 0 (an N-gram has no longer context)
        backoffs = np.zeros((N, P), dtype=np.float64)
        backoffs[0] = self.backoff[0].take(context)
        # A j-gram ending at p is the (j-1)-gram ending at p - 1 (its row: the prefix) and the word at p;
        # only the extensions of found n-grams are probed (cand: their positions, keys: the j-grams).
        keys = ngram_keys(context, tok, V)                              # every token's bigram
        for j in range(2, N + 1):
            r = self.key_index[j - 1].find(keys)
            hit = np.flatnonzero(r >= 0)
            at = hit if j == 2 else cand.take(hit)
            rows = r.take(hit)
            length[at] = j                                              # the longest n-gram the model has
            result[at] = self.logprob[j - 1].take(rows)
            if j == N:
                break
            ext = np.flatnonzero(~last.take(at))
            cand, rows = at.take(ext), rows.take(ext)
            cand += 1
            backoffs[j - 1][cand] = self.backoff[j - 1].take(rows)
            keys = ngram_keys(rows, tok.take(cand), V)
        # the backoffs of the contexts at least as long as the n-gram used, added longest first (as query)
        for j in range(N - 2, 0, -1):
            backoffs[j - 1] += backoffs[j]
        length_row = length - 1
        length_row *= P
        length_row += np.arange(P)
        result += backoffs.ravel().take(length_row)
        return result, length

    def _score_counts_sequence(self, seq: np.ndarray, offset: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        T, N = len(seq), self.order
        # ends[j][p]: row of the j-gram seq[p-j+1:p+1] in order j, -1 when absent or crossing <s>.
        ends = [None, seq]
        for j in range(2, N):
            e = np.full(T, -1, dtype=np.int64)
            e[1:] = self._find(j, ends[j - 1][:-1], seq[1:])
            e[offset < j - 1] = -1
            ends.append(e)
        pos = np.flatnonzero(offset >= 1)
        ctx = [None]
        for j in range(1, N):                      # ctx[j][p]: row of the j words before p
            c = np.full(T, -1, dtype=np.int64)
            c[1:] = ends[j][:-1]
            c[offset < j] = -1
            ctx.append(c)
        return self._score_counts(ctx, pos, seq[pos], offset)

    def _score_counts(self, ctx, pos, w, offset) -> tuple[np.ndarray, np.ndarray]:
        N, V = self.order, self.vocab_size
        h = np.minimum(offset[pos], N - 1)                # history length used at each position
        num = np.zeros(len(pos), dtype=np.float64)
        den = np.zeros(len(pos), dtype=np.float64)
        for j in range(0, N):
            sel = h == j
            if not sel.any():
                continue
            if j == 0:
                num[sel] = self.counts[0][w[sel]]
                den[sel] = self.context_total[0][0]
                continue
            c = ctx[j][pos[sel]]
            num[sel] = _at(self.counts[j], self._find(j + 1, c, w[sel]))
            den[sel] = _at(self.context_total[j], c)
        kk = self.k
        with np.errstate(divide="ignore", invalid="ignore"):
            p = (num + kk) / (den + kk * V)
            p = np.where(den + kk * V > 0, p, 0.0)
            logp = np.log10(p)
        return logp, h + 1

    # ------------------------------------------------------------------ distributions
    def next_log10(self, history: list[int]) -> np.ndarray:
        """log10 p(w | history) for every word id (history: ids after <s>, <s> first), in float64.  # [V]

        As KenLM (and `score_sequence`): each word takes the longest n-gram the model has for it, plus
        the backoffs of the history's suffixes longer than that n-gram's context. A suffix the model
        lacks (a "blank": ``would consider`` absent while ``also would consider`` is there) adds no
        backoff and supplies no n-grams, but the longer suffixes beyond it still count."""
        N, V = self.order, self.vocab_size
        hist = [int(x) for x in history][-(N - 1):] if N > 1 else []
        rows = [None] + [int(walk_rows(self.key_index, np.array([hist[-j:]]), V)[0])   # rows[j]: the last j words
                         for j in range(1, len(hist) + 1)]
        if self.kind == "counts":
            return self._next_counts(hist, rows)
        bo = np.array([float(self.backoff[j - 1][rows[j]]) if rows[j] >= 0 else 0.0 for j in range(1, len(rows))],
                      dtype=np.float64)                 # bo[j - 1]: backoff of the last j words (0 if absent)
        longer = np.cumsum(bo[::-1])[::-1] if len(bo) else bo       # longer[j - 1]: sum of bo[j - 1:]
        out = self.logprob[0].astype(np.float64) + (float(longer[0]) if len(bo) else 0.0)
        for j in range(1, len(rows)):                  # longer contexts override shorter ones
            if rows[j] < 0:
                continue                               # a blank: no n-grams, no backoff; longer ones may exist
            lo, hi = np.searchsorted(self.keys[j], [rows[j] * V, rows[j] * V + V])
            words = (self.keys[j][lo:hi] - rows[j] * V).astype(np.int64)
            suffix = float(longer[j]) if j < len(bo) else 0.0
            out[words] = self.logprob[j][lo:hi].astype(np.float64) + suffix
        return out

    def _next_counts(self, hist: list[int], rows: list) -> np.ndarray:
        V, j = self.vocab_size, len(hist)
        num = np.zeros(V, dtype=np.float64)
        if j == 0:
            num[:] = self.counts[0]
            den = float(self.context_total[0][0])
        else:
            r = rows[j]
            den = float(self.context_total[j][r]) if r >= 0 else 0.0
            if r >= 0:
                lo, hi = np.searchsorted(self.keys[j], [r * V, r * V + V])
                num[(self.keys[j][lo:hi] - r * V).astype(np.int64)] = self.counts[j][lo:hi]
        with np.errstate(divide="ignore", invalid="ignore"):
            denom = den + self.k * V
            p = (num + self.k) / denom if denom > 0 else np.zeros(V)
            return np.log10(p)


def _at(values: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """values[rows], 0 where a row is -1 (absent); `values` may be empty (an order without n-grams)."""
    out = np.zeros(len(rows), dtype=values.dtype)
    ok = np.flatnonzero(rows >= 0)
    out[ok] = values[rows[ok]]
    return out


# ---------------------------------------------------------------------- building models

def walk_rows(index: list, grams: np.ndarray, V: int) -> np.ndarray:
    """Row of each n-gram of `grams` [m, j] in order j, -1 where absent: its words walked up the
    orders' hash tables (`index[i]` over order i + 1's keys), j - 1 lookups of exact integer keys.
    A -1 stays -1: its next key is negative, never found.  # [m, j] -> [m] int64"""
    rows = grams[:, 0].astype(np.int64)
    for j in range(1, grams.shape[1]):
        rows = index[j].find(ngram_keys(rows, grams[:, j], V))
    return rows


def _sort_order(raw_ngrams: list[np.ndarray], V: int, path: str, first_line: list[int], vocab: list[str]):
    """Sorted keys per order, the permutation from file order, and each order's `HashIndex` (as the
    model keeps them); a missing prefix or a repeat is an error. `raw_ngrams` is emptied as it goes.

    An n-gram's prefix row is found by `walk_rows` over the orders already indexed."""
    keys, perms, index = [np.arange(len(raw_ngrams[0]), dtype=np.int64)], [np.arange(len(raw_ngrams[0]))], [None]
    for k in range(2, len(raw_ngrams) + 1):
        g = raw_ngrams[k - 1]
        prefix = walk_rows(index, g[:, :-1], V)
        if (prefix < 0).any():
            i = int(np.flatnonzero(prefix < 0)[0])
            words = " ".join(vocab[x] for x in g[i])
            raise NlpkitError(f"{path}, line {first_line[k - 1] + i}: the {k}-gram {words!r} has no "
                              f"{k - 1}-gram {' '.join(vocab[x] for x in g[i, :-1])!r} in the model")
        key = ngram_keys(prefix, g[:, -1], V)
        if len(key) < 2 or bool((key[1:] > key[:-1]).all()):        # written sorted (as nlpkit writes)
            perm = np.arange(len(key))
        else:
            perm = np.argsort(key)
            key = key[perm]
        dup = np.flatnonzero(key[1:] == key[:-1])
        if len(dup):
            i = int(max(perm[dup[0]], perm[dup[0] + 1]))          # the later of the two lines
            raise NlpkitError(f"{path}, line {first_line[k - 1] + i}: the {k}-gram "
                              f"{' '.join(vocab[x] for x in g[i])!r} appears twice")
        keys.append(key)
        perms.append(perm)
        index.append(HashIndex(key))
        raw_ngrams[k - 1] = g = None              # the file-order words are done with: let them go
    return keys, perms, index


CACHE_KIND = "ngram"  # the prepared-model cache entry of an n-gram model ...
_MADE_BY = ("arpa.py", "ngram_counts.py", "hashing.py", "ngram_model.py")  # ... made by these modules (their digest)


def load_ngram_model(path: str | os.PathLike, warn=None, *, use_cache: bool | None = None) -> NgramModel:
    """Read an ARPA file (KenLM, SRILM, nlpkit; .gz too) or an nlpkit counts file.

    The sorted keys, values and hash tables are kept in the prepared-model cache (`nlpkit.lm.prepared`):
    loading the same unchanged file again maps them instead of parsing it (use_cache=False: parse, write
    nothing; None: unless $NLPKIT_NO_CACHE). Warnings are given again from the cached entry."""
    from nlpkit.lm.prepared import code_version, load_prepared

    path = str(path)
    def build():
        warnings: list[str] = []
        prepared = to_prepared(_parse_model(path, warnings.append))
        prepared.meta["warnings"] = warnings
        return prepared

    here = Path(__file__).parent
    entry = load_prepared([Path(path)], CACHE_KIND, build, version=code_version(*(here / f for f in _MADE_BY)),
                          use_cache=use_cache)
    for message in entry.meta["warnings"] if warn is not None else ():
        warn(message)
    model = from_prepared(entry, path)
    model.cache = entry.cache
    return model


def to_prepared(model: NgramModel):
    """The model as named arrays and JSON metadata for the prepared-model cache."""
    from nlpkit.lm.prepared import Prepared

    arrays = {}
    for k in range(model.order):
        arrays[f"keys.{k}"] = model.keys[k]
        for name in ("logprob", "backoff", "counts", "context_total"):
            values = getattr(model, name)
            if values:
                arrays[f"{name}.{k}"] = values[k]
        if k and model.key_index[k] is not None:
            arrays[f"hash.{k}"] = model.key_index[k].vals
    text = "\n".join(model.vocab)
    plain = text.count("\n") == len(model.vocab) - 1
    arrays["vocab"] = np.frombuffer(text.encode("utf-8", "surrogatepass"), np.uint8)
    if not plain:  # a word with a line break in it: split by character offsets instead
        arrays["vocab_ends"] = np.cumsum([len(w) + 1 for w in model.vocab], dtype=np.int64)
    meta = {"kind": model.kind, "options": model.options, "smoothing": model.smoothing, "k": model.k,
            "order": model.order}
    return Prepared(arrays, meta)


def from_prepared(entry, path: str) -> NgramModel:
    """The model back from its prepared arrays (mapped from the cache, or just built)."""
    a, m = entry.arrays, entry.meta
    text = a["vocab"].tobytes().decode("utf-8", "surrogatepass")
    if "vocab_ends" in a:
        ends = a["vocab_ends"].tolist()
        vocab = [text[s:e - 1] for s, e in zip([0] + ends[:-1], ends)]
    else:
        vocab = text.split("\n")
    order = m["order"]
    keys = [a[f"keys.{k}"] for k in range(order)]

    def per_order(name: str) -> list:
        return [a[f"{name}.{k}"] for k in range(order)] if f"{name}.0" in a else []

    index = [None] + [HashIndex.from_table(keys[k], a[f"hash.{k}"]) if f"hash.{k}" in a else HashIndex(keys[k])
                      for k in range(1, order)]
    return NgramModel(kind=m["kind"], vocab=vocab, keys=keys, logprob=per_order("logprob"),
                      backoff=per_order("backoff"), counts=per_order("counts"),
                      context_total=per_order("context_total"), options=m["options"], source=path,
                      smoothing=m["smoothing"], k=m["k"], key_index=index)


def _parse_model(path: str, warn) -> NgramModel:
    """Parse and index a model file (what the cache keeps)."""
    from nlpkit.lm.ngram.arpa import read_model_file

    raw = read_model_file(path)
    vocab = raw.vocab
    V = len(vocab)
    keys, perms, index = _sort_order(raw.ngrams, V, path, raw.first_line, vocab)
    opts = raw.options
    if raw.kind == "arpa":
        logprob, backoff = [], []
        for k in range(len(keys)):                    # each file-order array let go once permuted
            logprob.append(raw.values[k][perms[k]].astype(np.float32))
            backoff.append(raw.backoffs[k][perms[k]].astype(np.float32))
            raw.values[k] = raw.backoffs[k] = None
        if "<unk>" not in vocab:                      # as KenLM: an <unk> with log10 p = -100
            warn(f"{path}: the model has no <unk>; unknown words get log10 probability -100 (as KenLM)")
            vocab = vocab + ["<unk>"]
            logprob[0] = np.append(logprob[0], np.float32(-100.0))
            backoff[0] = np.append(backoff[0], np.float32(0.0))
            keys[0] = np.arange(len(vocab), dtype=np.int64)
            keys = [keys[0]] + [_rekey(keys[k], V, V + 1) for k in range(1, len(keys))]
            index = []                                # rebuilt over the new keys
        for name in ("<s>", "</s>"):
            if name not in vocab:
                raise NlpkitError(f"{path}: the model has no {name} unigram")
        return NgramModel(kind="arpa", vocab=vocab, keys=keys, logprob=logprob, backoff=backoff, options=opts,
                          source=path, key_index=index)
    counts = [raw.values[k][perms[k]].astype(np.int64) for k in range(len(keys))]
    # context_total[j][r]: sum over v of C(h v) for the history h in row r of order j (j = 0: all words)
    totals = [np.array([counts[0].sum()], dtype=np.int64)]
    for j in range(1, len(keys)):
        totals.append(np.bincount(keys[j] // V, weights=counts[j], minlength=len(keys[j - 1])).astype(np.int64))
    smoothing = opts.get("smoothing", "mle")
    kk = float(opts.get("k", "0")) if smoothing == "add-k" else 0.0
    for name in ("<unk>", "<s>", "</s>"):
        if name not in vocab:
            raise NlpkitError(f"{path}: the counts model has no {name} unigram")
    return NgramModel(kind="counts", vocab=vocab, keys=keys, logprob=[], backoff=[], counts=counts,
                      context_total=totals, options=opts, source=path, smoothing=smoothing, k=kk, key_index=index)


def _rekey(keys: np.ndarray, old_v: int, new_v: int) -> np.ndarray:
    return (keys // old_v) * new_v + keys % old_v


def log10_to_nats(x: np.ndarray | float):
    return np.asarray(x, dtype=np.float64) * math.log(10.0)


__all__ = ["NgramModel", "load_ngram_model", "walk_rows"]
