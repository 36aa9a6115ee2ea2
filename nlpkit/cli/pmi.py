"""`nlpkit pmi`: pointwise mutual information of co-occurring words (NLTK's numbers)."""

from __future__ import annotations

import click

from nlpkit.cli.options import ChoiceOrFile, Count, STOPWORD_LISTS, jobs_option
from nlpkit.cli.common import (common_options, dask_for, dask_options, input_paths, named_flags, open_writer,
                               progress, warn)


@click.command("pmi")
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False, allow_dash=True))
@click.option("-w", "--window", type=Count(), default=None,
              help="Count pairs of words up to WINDOW-1 apart (2 = adjacent), as NLTK's window_size "
                   "[default: 2, or 3 with --ngram 3].")
@click.option("--ngram", type=click.Choice(["2", "3"]), default="2", show_default=True,
              help="2 = word pairs, 3 = word triples: log p(x,y,z)/(p(x)p(y)p(z)).")
@click.option("-m", "--measure", type=click.Choice(["pmi", "npmi", "ppmi"]), default="pmi",
              show_default=True, help="pmi; npmi = pmi / -log p(x,y) in [-1,1], p(x,y) as pmi takes it (with --window W, NLTK's "
                   "count / (W - 1) over N); ppmi = max(pmi, 0).")
@click.option("--min-count", type=Count(), default=1, show_default=True,
              help="Keep n-grams seen at least this often (NLTK's apply_freq_filter).")
@click.option("-k", "--top", type=Count(0), metavar="N", default=20, show_default=True,
              help="Print the K best n-grams (0 = all); with --matrix, the K most frequent words.")
@click.option("--log-base", type=click.Choice(["2", "e", "10"]), default="2", show_default=True,
              help="Logarithm base of pmi/ppmi (npmi does not depend on it).")
@click.option("--stopwords", default="none", show_default=True, type=ChoiceOrFile(STOPWORD_LISTS), metavar="english|sklearn|lucene|none|FILE",
              help="Drop these words before counting (english = NLTK's list, sklearn = scikit-learn's).")
@click.option("--token-pattern", default=None, metavar="REGEX",
              help=r"Token regex [default: (?u)\b\w\w+\b, words of 2+ characters, as scikit-learn].")
@click.option("--lowercase/--no-lowercase", default=True, show_default=True, help="Lowercase the text first.")
@click.option("--cross-lines", is_flag=True, help="Let n-grams span line ends.")
@click.option("--cross-sentences", is_flag=True,
              help="Let n-grams span sentence ends (. ! ?). With --cross-lines: one stream, as NLTK from_words.")
@click.option("--pair", "pairs", nargs=2, multiple=True, metavar="X Y",
              help="Report these pairs only (repeatable), whatever their count.")
@click.option("--matrix", is_flag=True,
              help="Print the forward co-occurrence count matrix of the top words (TSV/table: a row per word, "
                   "columns '->WORD'; JSON: {word, counts}).")
@jobs_option("Tokenizer worker processes, at most the CPUs available [2 for 8 MB or more of files on a "
             "multi-core machine, else 1].")
@dask_options
@common_options
@named_flags(pattern="--token-pattern")
def command(files, window, ngram, measure, min_count, top, log_base, stopwords, token_pattern,
            lowercase, cross_lines, cross_sentences, pairs, matrix, jobs, dask, shard_size, fmt,
            no_signature, quiet, encoding_errors):
    """Score co-occurring words by pointwise mutual information.

    No FILES with empty stdin, or files with no words, is an error.

    Pairs (x, y) are counted where y follows x within WINDOW-1 words, not across
    sentence or line ends unless --cross-sentences/--cross-lines; scores equal
    NLTK's BigramAssocMeasures.pmi / TrigramAssocMeasures.pmi. Output is sorted by
    score, ties by the words.

    \b
    Example:
      nlpkit pmi --window 5 --min-count 5 --top 10 corpus.txt
    """
    from nlpkit.stats import pmi as core
    from nlpkit.stats.counting import auto_jobs
    from nlpkit.io import display_name
    from nlpkit.errors import NlpkitError, UsageError
    from nlpkit.signature import make_signature
    from nlpkit.text import WordTokenizer

    n = int(ngram)
    window = n if window is None else window
    core.check_settings(window, n)
    core.check_ranking(min_count, top)
    if pairs and n != 2:
        raise UsageError("--pair needs --ngram 2")
    if matrix and n != 2:
        raise UsageError("--matrix needs --ngram 2")
    tok = WordTokenizer(pattern=token_pattern, lowercase=lowercase, stopwords=stopwords)
    paths = input_paths(files)
    dask = dask_for(dask, paths)
    if dask:
        from nlpkit.distributed.cluster import connect
        from nlpkit.distributed.stages import pmi_counts
        from nlpkit.shards import parse_size

        size = parse_size(shard_size)
        with connect(dask, quiet) as client, progress("tasks", quiet=quiet) as tick:
            co = pmi_counts(client, paths, tok, window=window, ngram=n, cross_lines=cross_lines,
                            cross_sentences=cross_sentences, errors=encoding_errors, shard_bytes=size,
                            progress=tick)
    else:
        with progress("counting", quiet=quiet) as tick:
            co = core.count_cooccurrences(paths, tok, window=window, ngram=n, cross_lines=cross_lines,
                                          cross_sentences=cross_sentences, errors=encoding_errors,
                                          progress=tick, jobs=auto_jobs(paths, jobs))
    if co.n_tokens == 0:
        what = ("every word is a stopword" if any(w in tok.stopwords for w in co.words)
                else "no words found")
        raise NlpkitError(f"empty corpus: {what} in {', '.join(map(display_name, paths))}")
    bounds = ("none" if cross_lines and cross_sentences else "sentence" if cross_lines
              else "line" if cross_sentences else "sentence+line")
    sig = make_signature("pmi", measure=measure, ngram=n, window=window, min_count=min_count,
                         log=log_base, tok=tok.signature, stop=tok.stopwords_name, bounds=bounds)
    if matrix:
        _write_matrix(co, top, fmt, sig, no_signature)
    elif pairs:
        _write_pairs(co, tok, pairs, measure, log_base, fmt, sig, no_signature)
    else:
        ids, counts, scores = core.ranked(co, measure, log_base, min_count, top)
        if len(ids) == 0:
            warn(f"no {'pairs' if n == 2 else 'triples'} occur at least {min_count} "
                 f"time{'s' if min_count != 1 else ''}", quiet)
        cols = [f"word{j + 1}" for j in range(n)] + ["count"] + [f"freq{j + 1}" for j in range(n)]
        words, uni = co.words, co.unigram
        with open_writer(cols + [measure], fmt, sig, no_signature) as out:
            for row, c, s in zip(ids.tolist(), counts.tolist(), scores.tolist()):
                rec = {f"word{j + 1}": words[i] for j, i in enumerate(row)}
                rec["count"] = c
                rec.update({f"freq{j + 1}": int(uni[i]) for j, i in enumerate(row)})
                rec[measure] = s
                out.write(rec)


#: the prefix of a vocabulary word's column in the --matrix TSV/table header (never the start of
#: the writer's own columns, ``word`` and ``signature``)
MATRIX_COLUMN = "->"


def _write_matrix(co, top, fmt, sig, no_signature) -> None:
    """Rows of counts. JSON/JSONL: ``{"word": w, "counts": {column word: count}}`` (vocabulary
    words never meet field names); TSV/table: a column per word, labelled ``->WORD`` (the count of
    row word -> WORD), so no vocabulary column can be taken for the ``word`` or ``signature`` column."""
    from nlpkit.cli.common import resolve_format
    from nlpkit.stats import pmi as core

    ids = core.top_words(co, top)
    m = core.count_matrix(co, ids)
    names = [co.words[i] for i in ids.tolist()]
    title = "forward co-occurrence counts (row -> column)"
    fmt = resolve_format(fmt)
    if fmt in ("json", "jsonl"):
        with open_writer(["word", "counts"], fmt, sig, no_signature, title=title) as out:
            for name, row in zip(names, m.tolist()):
                out.write({"word": name, "counts": dict(zip(names, row))})
        return
    keys = ["word"] + [f"c{j}" for j in range(len(names))]    # positional keys, whatever the words
    labels = ["word"] + [MATRIX_COLUMN + w for w in names]
    with open_writer(keys, fmt, sig, no_signature, title=title, labels=labels) as out:
        for name, row in zip(names, m.tolist()):
            rec = {"word": name}
            rec.update(zip(keys[1:], row))
            out.write(rec)


def _write_pairs(co, tok, pairs, measure, log_base, fmt, sig, no_signature) -> None:
    import numpy as np

    from nlpkit.stats import pmi as core

    vocab = {w: i for i, w in enumerate(co.words)}
    cols = ["word1", "word2", "count", "freq1", "freq2", measure]
    with open_writer(cols, fmt, sig, no_signature) as out:
        for x, y in pairs:
            x, y = _normalize(tok, x), _normalize(tok, y)
            ix, iy = vocab.get(x), vocab.get(y)
            rec = {"word1": x, "word2": y, "count": 0,
                   "freq1": int(co.unigram[ix]) if ix is not None else 0,
                   "freq2": int(co.unigram[iy]) if iy is not None else 0, measure: None}
            if ix is not None and iy is not None:
                c = co.count_of([ix, iy])
                rec["count"] = c
                if c:
                    s = core.score(co, np.array([[ix, iy]]), np.array([c]), measure, log_base)
                    rec[measure] = float(s[0])
            out.write(rec)


def _normalize(tok, word: str) -> str:
    """A word as the corpus tokens are spelled: lowercased when the tokenizer lowercases."""
    return word.lower() if tok.lowercase else word
