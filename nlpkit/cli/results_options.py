"""`--results-cache DIR` ($NLPKIT_RESULTS_CACHE) of `score` and `perplexity`: the option, opening the cache with the
CLI's warnings, and the summary line on stderr (core: `nlpkit.evaluation.results_cache`)."""

from __future__ import annotations

import sys

import click

from nlpkit.cli.common import warn


def results_cache_option(f):
    """--results-cache DIR: each request's result kept in DIR under a key of the model's content and settings."""
    return click.option("--results-cache", "results_cache", default=None, metavar="DIR", envvar="NLPKIT_RESULTS_CACHE",
                        type=click.Path(file_okay=False),
                        help="Keep each request's result in DIR, keyed by the model's content (not its path), "
                             "weights layout, the BLAS kernel, the request and every setting that changes it: a rerun prints the "
                             "same bytes, computes only what is missing and loads no model when nothing is; a "
                             "killed run resumes where it stopped. Corrupt entries are ignored with a warning "
                             "[$NLPKIT_RESULTS_CACHE; see docs/evaluation.md].")(f)


def open_results_cache(directory: str | None, quiet: bool):
    """The `ResultsCache` in `directory` (None: no cache), its warnings on stderr."""
    if not directory:
        return None
    from nlpkit.evaluation.results_cache import ResultsCache

    return ResultsCache(directory, warn=lambda m: warn(m, quiet))


def say_results_cache(cache, quiet: bool) -> None:
    """`nlpkit: results cache DIR: H of N results from the cache, C computed` on stderr (unless --quiet)."""
    if cache is not None and not quiet:
        sys.stderr.write(f"nlpkit: {cache.summary()}\n")
