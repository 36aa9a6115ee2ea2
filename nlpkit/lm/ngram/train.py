"""`train_ngram`: count a corpus and write a model file (the work of ``nlpkit ngram-train``).

``kneser-ney`` writes an ARPA file equal to ``lmplz -o N`` (with ``--discount_fallback`` when the
counts of counts call for it); ``mle`` and ``add-k`` write nlpkit's counts format, which holds
the counts the estimates come from (see `arpa`). The options that shape the words (lowercasing,
a BPE tokenizer) are recorded as ``# nlpkit: key=value`` lines before ``\\data\\`` and applied
again when the model scores text (`text_transform`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable, Sequence

from nlpkit.errors import NlpkitError, UsageError
from nlpkit.lm.ngram.arpa import FORMAT_VERSION
from nlpkit.lm.ngram.heap import small_pages
from nlpkit.lm.ngram.ngram_counts import count_ngrams

SMOOTHINGS = ("kneser-ney", "mle", "add-k")


@dataclass
class TrainResult:
    path: str
    order: int
    smoothing: str
    sentences: int
    tokens: int
    vocab_size: int
    ngrams: list[int]
    discounts: list[tuple[float, float, float]] = field(default_factory=list)
    fallback_orders: list[int] = field(default_factory=list)
    skipped_symbols: int = 0


def text_transform(lowercase: bool, tokenizer_path: str | None) -> Callable[[str], str] | None:
    """The rewrite applied to text before splitting on whitespace: lowercase, then BPE pieces
    joined by single spaces, line by line (newlines kept). None when there is nothing to do."""
    tok = load_piece_tokenizer(tokenizer_path) if tokenizer_path else None
    if not lowercase and tok is None:
        return None

    def apply(text: str) -> str:
        if lowercase:
            text = text.lower()
        if tok is not None:
            text = "\n".join(" ".join(tok(line)) for line in text.split("\n"))
        return text
    return apply


def tokenizer_digest(path: str) -> str:
    """sha256 of what defines a tokenizer: the file itself, or a directory's tokenizer.json (else its
    vocab.json + merges.txt). Recorded by ngram-train, checked when the model scores or samples."""
    import hashlib

    h = hashlib.sha256()
    if os.path.isdir(path):
        names = ["tokenizer.json"] if os.path.isfile(os.path.join(path, "tokenizer.json")) else \
            ["vocab.json", "merges.txt"]
        files = [os.path.join(path, n) for n in names if os.path.isfile(os.path.join(path, n))]
    else:
        files = [path]
    for f in files:
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def recorded_tokenizer(options: dict[str, str], model_path: str) -> str | None:
    """The tokenizer a model was trained with: its recorded path, else a file or directory of the same
    name beside the model (a model copied with its tokenizer); it must be the same tokenizer (sha256)."""
    path = options.get("tokenizer") or None
    if path is None:
        return None
    beside = os.path.join(os.path.dirname(os.path.abspath(model_path)), os.path.basename(path.rstrip("/")))
    where = path if os.path.exists(path) else beside if os.path.exists(beside) else None
    if where is None:
        also = f", nor beside the model ({beside})" if os.path.abspath(beside) != os.path.abspath(path) else ""
        raise NlpkitError(f"{model_path}: the tokenizer it was trained with ({path}) is not there{also}: put it "
                          "back, or copy it next to the model")
    want = options.get("tokenizer_sha256")
    if want and tokenizer_digest(where) != want:
        raise NlpkitError(f"{model_path}: {where} is not the tokenizer the model was trained with (its sha256 "
                          "differs from the one recorded); scores would be meaningless")
    return where


def load_bpe(path: str):
    """The BPE `Tokenizer` at `path`: a tokenizer.json, a directory holding one (or vocab.json +
    merges.txt), or a GGUF file's vocabulary, as `nlpkit tokenize --tokenizer` reads them."""
    from nlpkit.bpe.tokenizer import Tokenizer

    if not os.path.exists(path):
        raise NlpkitError(f"`tokenizer` {path}: no such file or directory")
    return Tokenizer.load(path)


def load_piece_tokenizer(path: str) -> Callable[[str], list[str]]:
    """A BPE tokenizer as text -> its token strings (the words an n-gram model sees)."""
    tok = load_bpe(path)

    def split(line: str) -> list[str]:
        return [tok.id_to_token(i) for i in tok.encode(line)]
    return split


def piece_detokenizer(path: str) -> Callable[[list[str]], str]:
    """Token strings (and "\\n" line ends) back to text with the BPE tokenizer at `path`."""
    tok = load_bpe(path)

    def join(pieces: list[str]) -> str:
        lines, cur = [], []
        for p in pieces:
            if p == "\n":
                lines.append(cur)
                cur = []
            else:
                cur.append(p)
        lines.append(cur)
        return "\n".join(tok.decode([i for i in map(tok.token_to_id, ln) if i is not None]) for ln in lines)
    return join


def writer_threads(jobs: int | None) -> int:
    """Threads that make the model file's lines: `jobs` when given, else 2 on a multi-core machine (numpy
    gathers, which let go of the GIL: more gain little, the file is written by one)."""
    from nlpkit.workers import available_cpus

    return max(1, jobs) if jobs else min(2, available_cpus())


def train_ngram(paths: Sequence[str], output: str, *, order: int = 3, smoothing: str = "kneser-ney",
                k: float = 1.0, lowercase: bool = False, tokenizer: str | None = None, errors: str = "strict",
                jobs: int | None = None, progress=None, warn=None, counts=None) -> TrainResult:
    """Count `paths` and write the model to `output` (ARPA for kneser-ney, counts for mle / add-k)."""
    from nlpkit.lm.ngram.arpa import write_model_file

    if order < 1:
        raise UsageError(f"`order` must be at least 1, got {order}")
    if smoothing not in SMOOTHINGS:
        raise UsageError(f"`smoothing` must be one of {', '.join(SMOOTHINGS)}, got {smoothing!r}")
    if smoothing == "add-k" and not k > 0:
        raise UsageError(f"`k` must be > 0 for add-k smoothing, got {k}")
    tok_path = os.path.abspath(tokenizer) if tokenizer else None
    transform = text_transform(False, tok_path)

    def symbols(n: int) -> None:
        if warn is not None:
            warn(f"dropped {n} occurrence(s) of <s>, </s> or <unk> in the text (reserved words; `lmplz --skip_symbols`)")

    with small_pages():                       # (see `heap`)
        if counts is None:          # else counted already (nlpkit.distributed.stages.ngram_counts)
            counts = count_ngrams(paths, order, lowercase=lowercase, transform=transform, errors=errors,
                                  jobs=jobs, progress=progress, on_symbol=symbols)
        elif counts.skipped_symbols:
            symbols(counts.skipped_symbols)
        if counts.tokens == 0:
            raise NlpkitError(f"{', '.join('<stdin>' if p == '-' else p for p in paths)}: empty corpus, "
                              "no words to count")
        options = {"format": FORMAT_VERSION, "order": str(order), "smoothing": smoothing,
                   "lowercase": "true" if lowercase else "false"}
        if smoothing == "add-k":
            options["k"] = repr(float(k))
        if tok_path:
            options["tokenizer"] = tok_path
            options["tokenizer_sha256"] = tokenizer_digest(tok_path)
        sizes = counts.sizes()
        result = TrainResult(path=output, order=order, smoothing=smoothing, sentences=counts.sentences,
                             tokens=counts.tokens, vocab_size=len(counts.vocab), ngrams=sizes,
                             skipped_symbols=counts.skipped_symbols)
        rows = [counts.rows(j) for j in range(1, order + 1)]
        if smoothing == "kneser-ney":
            from nlpkit.lm.ngram.kneser_ney import estimate_discounts, kneser_ney_orders

            result.discounts, result.fallback_orders = estimate_discounts(counts, warn=warn)
            comments = ["nlpkit ngram-train: interpolated modified Kneser-Ney (as KenLM lmplz)",
                        "discounts D1 D2 D3+ per order: " + "; ".join(" ".join(f"{d:.6g}" for d in ds)
                                                                  for ds in result.discounts)]
            orders = kneser_ney_orders(counts, result.discounts, release=True)      # counts is spent as it goes
            sections = ((g, lp, bo) for g, (lp, bo) in zip(rows, orders))
            write_model_file(output, "arpa", counts.vocab, sizes, sections, options, comments, writer_threads(jobs))
        else:
            what = "maximum likelihood" if smoothing == "mle" else f"add-{k:g}"
            comments = [f"nlpkit ngram-train: n-gram counts for {what} estimates (nlpkit counts format, not ARPA)",
                        "p(w|h) = (C(h w) + k) / (sum_v C(h v) + k |V|); |V| = unigram lines (words, <s>, </s>, <unk>)"]
            write_model_file(output, "counts", counts.vocab, sizes, zip(rows, counts.counts, [None] * order), options,
                             comments, writer_threads(jobs))
        return result


__all__ = ["train_ngram", "TrainResult", "text_transform", "writer_threads", "SMOOTHINGS"]
