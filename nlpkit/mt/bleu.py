"""MT evaluation with sacrebleu as the scoring engine: BLEU, chrF(++) and TER.

nlpkit adds what an evaluation pipeline needs around sacrebleu: validated
inputs (line counts, empty files, undecodable bytes, each named), several
systems and references scored in one process (reference statistics are
computed once per metric), full-precision records with the components, and
sacrebleu's own bootstrap and paired tests with an explicit seed.

Every number is computed by sacrebleu itself, so it equals the `sacrebleu`
command's for the same options:

>>> opts = EvalOptions(metrics=("bleu", "chrf"))
>>> refs = [["The cat sat on the mat."]]
>>> [r["score"] for r in corpus_scores([("sys", ["The cat sat on the mat."])], refs, opts)]
[100.00000000000004, 100.0]

Inputs are read the way sacrebleu's command reads them: lines split on "\\n"
only, each line ``rstrip()``-ed (all trailing whitespace), a BOM kept.
"""

from __future__ import annotations

import logging
import os
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

from nlpkit.errors import NlpkitError, UsageError
from nlpkit.io import display_name, iter_lines

METRIC_NAMES = ("bleu", "chrf", "ter")
DEFAULT_SEED = 12345  # sacrebleu's default SACREBLEU_SEED

Progress = Callable[..., None]
System = tuple[str, list[str]]  # (name, one hypothesis per segment)


@dataclass(frozen=True)
class EvalOptions:
    """The sacrebleu settings; field names follow sacrebleu's CLI (``--chrf-beta`` -> chrf_beta).

    ``lowercase`` is BLEU's (sacrebleu ``-lc``); chrF and TER have their own case options.
    ``max_ngram_order`` is an API-only BLEU setting that sacrebleu's signature does not record.
    """

    metrics: tuple[str, ...] = ("bleu",)
    tokenize: str | None = None          # None -> sacrebleu's default, 13a
    lowercase: bool = False
    smooth_method: str = "exp"
    smooth_value: float | None = None
    max_ngram_order: int = 4
    effective_order: bool = False
    chrf_char_order: int = 6
    chrf_word_order: int = 0              # 2 = chrF++
    chrf_beta: int = 2
    chrf_lowercase: bool = False
    chrf_whitespace: bool = False
    chrf_eps_smoothing: bool = False
    ter_case_sensitive: bool = False
    ter_normalized: bool = False
    ter_no_punct: bool = False
    ter_asian_support: bool = False
    short_signature: bool = False


# ---------------------------------------------------------------------------- inputs

def read_segments(path: str, errors: str = "strict", role: str = "") -> list[str]:
    """One segment per line, as sacrebleu's CLI reads them (``line.rstrip()``, BOM kept).

    An empty file is an error; an empty line is a legal (empty) segment. ``role``
    ('reference', 'hypothesis') starts the error messages.
    """
    prefix = f"{role} " if role else ""
    try:
        lines = [line.rstrip() for line in iter_lines(path, errors=errors, strip_bom=False)]
    except NlpkitError as e:
        raise type(e)(f"{prefix}{e}") from None
    if not lines:
        raise NlpkitError(f"{prefix}{display_name(path)}: empty file (expected one segment per line)")
    return lines


def read_refs_tsv(path: str, errors: str = "strict") -> list[list[str]]:
    """A TSV of references, one column per reference -> one stream per column.

    'a1<TAB>a2\\nb1<TAB>b2' -> [['a1', 'b1'], ['a2', 'b2']]. Every line must have
    as many fields as the first; each field is ``rstrip()``-ed like a reference line.
    """
    streams: list[list[str]] = []
    lines = iter_lines(path, errors=errors, strip_bom=False)
    for lineno, line in enumerate(lines, 1):
        fields = line.split("\t")
        if lineno == 1:
            streams = [[] for _ in fields]
        elif len(fields) != len(streams):
            raise NlpkitError(f"{display_name(path)}, line {lineno}: {len(fields)} tab-separated "
                              f"references, but line 1 has {len(streams)}")
        for stream, field in zip(streams, fields):
            stream.append(field.rstrip())
    if not streams:
        raise NlpkitError(f"{display_name(path)}: empty file (expected one TSV row of "
                          "references per segment)")
    return streams


def load_references(paths: Sequence[str], refs_tsv: str | None = None,
                    errors: str = "strict") -> tuple[list[str], list[list[str]]]:
    """Reference streams from files and/or a TSV -> (names, streams), all of one length."""
    names: list[str] = []
    streams: list[list[str]] = []
    for p in paths:
        names.append(display_name(p))
        streams.append(read_segments(p, errors, role="reference"))
    if refs_tsv is not None:
        cols = read_refs_tsv(refs_tsv, errors)
        names += [f"{display_name(refs_tsv)}[{i + 1}]" for i in range(len(cols))]
        streams += cols
    if not streams:
        raise UsageError("no references: give `paths` FILE (repeatable) or `refs_tsv` FILE")
    for name, stream in zip(names[1:], streams[1:]):
        if len(stream) != len(streams[0]):
            raise NlpkitError(f"references differ in length: {names[0]} has {len(streams[0])} "
                              f"lines, {name} has {len(stream)}")
    return names, streams


def check_lengths(name: str, hyps: Sequence[str], ref_name: str, refs: Sequence[Sequence[str]]) -> None:
    """A hypothesis file must have one line per reference line; the error names both counts."""
    if len(hyps) != len(refs[0]):
        raise NlpkitError(f"line-count mismatch: hypothesis {name} has {len(hyps)} lines, "
                          f"reference {ref_name} has {len(refs[0])}")


# --------------------------------------------------------------------------- metrics

def _metric_kwargs(name: str, o: EvalOptions) -> dict[str, Any]:
    if name == "bleu":
        return dict(lowercase=o.lowercase, tokenize=o.tokenize, smooth_method=o.smooth_method,
                    smooth_value=o.smooth_value, max_ngram_order=o.max_ngram_order,
                    effective_order=o.effective_order)
    if name == "chrf":
        return dict(char_order=o.chrf_char_order, word_order=o.chrf_word_order, beta=o.chrf_beta,
                    lowercase=o.chrf_lowercase, whitespace=o.chrf_whitespace,
                    eps_smoothing=o.chrf_eps_smoothing)
    if name == "ter":
        return dict(case_sensitive=o.ter_case_sensitive, normalized=o.ter_normalized,
                    no_punct=o.ter_no_punct, asian_support=o.ter_asian_support)
    raise UsageError(f"unknown metric {name!r} (choose from {', '.join(METRIC_NAMES)})")


def build_metrics(options: EvalOptions, references: Sequence[Sequence[str]] | None) -> dict:
    """{'bleu': sacrebleu.BLEU(...), ...}; with references, their statistics are cached once."""
    from sacrebleu.metrics import BLEU, CHRF, TER

    classes = {"bleu": BLEU, "chrf": CHRF, "ter": TER}
    if options.tokenize is not None and options.tokenize not in BLEU.TOKENIZERS:
        raise UsageError(f"unknown tokenizer {options.tokenize!r} (sacrebleu offers: "
                         f"{', '.join(BLEU.TOKENIZERS)})")
    if options.smooth_method not in BLEU.SMOOTH_DEFAULTS:
        raise UsageError(f"unknown smoothing method {options.smooth_method!r} (choose from "
                         f"{', '.join(BLEU.SMOOTH_DEFAULTS)})")
    metrics = {}
    for name in options.metrics:
        kwargs = _metric_kwargs(name, options)
        try:
            metrics[name] = classes[name](references=references, **kwargs)
        except (ImportError, RuntimeError, OSError) as e:  # tokenizer extras / model download
            hint = " ".join(str(e).split())
            raise NlpkitError(f"cannot build {name} with tokenizer {options.tokenize!r}: {hint}") from None
    return metrics


def signature(metric: Any, options: EvalOptions) -> str:
    """sacrebleu's signature string of a metric (full form, or short with short_signature)."""
    return metric.get_signature().format(options.short_signature)


def score_fields(score: Any) -> dict[str, Any]:
    """A sacrebleu Score -> its name, score and components (full precision)."""
    rec: dict[str, Any] = {"metric": score.name, "score": float(score.score)}
    if hasattr(score, "precisions"):  # BLEU
        rec.update(counts=[int(c) for c in score.counts], totals=[int(t) for t in score.totals],
                   precisions=[float(p) for p in score.precisions], bp=float(score.bp),
                   ratio=float(score.ratio), sys_len=int(score.sys_len), ref_len=int(score.ref_len))
    elif hasattr(score, "char_order"):  # chrF
        rec.update(char_order=score.char_order, word_order=score.word_order, beta=score.beta)
    elif hasattr(score, "num_edits"):  # TER
        rec.update(num_edits=score.num_edits, ref_length=float(score.ref_length))
    return rec


@contextmanager
def sacrebleu_seed(seed: int | None) -> Iterator[None]:
    """sacrebleu reads its RNG seed from $SACREBLEU_SEED; set it for the block, then restore.

    ``None`` means "not fixed" (sacrebleu's 'none'): the OS supplies entropy.
    """
    old = os.environ.get("SACREBLEU_SEED")
    os.environ["SACREBLEU_SEED"] = "none" if seed is None else str(int(seed))
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("SACREBLEU_SEED", None)
        else:
            os.environ["SACREBLEU_SEED"] = old


def quiet_sacrebleu(quiet: bool = True) -> None:
    """Silence sacrebleu's logger (its warnings and info lines) or let warnings through."""
    logging.getLogger("sacrebleu").setLevel(logging.ERROR if quiet else logging.WARNING)


# ---------------------------------------------------------------------------- scoring

def _validate(systems: Sequence[System], references: Sequence[Sequence[str]],
              ref_name: str) -> None:
    if not systems:
        raise UsageError("no hypotheses to score")
    for name, hyps in systems:
        check_lengths(name, hyps, ref_name, references)


# Worker state for --jobs: set in the parent, inherited by forked workers (never pickled).
_WORK: dict[str, Any] = {}


def _map_systems(fn: Callable[[int], Any], n: int, jobs: int,
                 progress: Progress | None) -> list[Any]:
    """[fn(0), ..., fn(n-1)] in order, over `jobs` forked processes when the platform can fork.

    Each worker inherits the metrics with their cached reference statistics, so a
    system costs the same as in one process and the numbers are identical.
    """
    results: list[Any] = []
    if jobs > 1 and n > 1:
        import multiprocessing as mp

        if "fork" not in mp.get_all_start_methods():
            jobs = 1
    if jobs > 1 and n > 1:
        from nlpkit.workers import process_pool

        with process_pool(min(jobs, n)) as pool:
            for r in pool.imap(fn, range(n)):
                results.append(r)
                if progress:
                    progress(len(results), n)
        return results
    for i in range(n):
        results.append(fn(i))
        if progress:
            progress(len(results), n)
    return results


def segment_statistics(metric: Any, hypotheses: Sequence[str]) -> list[list]:
    """Each hypothesis's sufficient statistics (n-gram matches, character n-grams, edits) against the
    references `metric` cached when it was built (`build_metrics`): sacrebleu's `_extract_corpus_statistics`.
    This function and `score_of_totals` are the only places nlpkit reaches into sacrebleu's private API."""
    return metric._extract_corpus_statistics(hypotheses, None)


def score_of_totals(metric: Any, totals: Sequence[Any]) -> Any:
    """The corpus score (a sacrebleu `Score`) of statistics summed over segments: sacrebleu's
    `_compute_score_from_stats`. A corpus score is this of the segments' summed `segment_statistics`."""
    return metric._compute_score_from_stats(list(totals))


def _score_system(i: int) -> list[dict]:
    """Corpus records of system i for every metric (sacrebleu's corpus_score, bootstrap included)."""
    name, hyps = _WORK["systems"][i]
    options, confidence_n = _WORK["options"], _WORK["confidence_n"]
    records = []
    for metric in _WORK["metrics"].values():
        score = metric.corpus_score(hyps, None, n_bootstrap=max(confidence_n, 1))
        rec = {"system": name, **score_fields(score)}
        if confidence_n > 1:
            rec["mean"], rec["ci95"] = float(score._mean), float(score._ci)
        rec["signature"] = signature(metric, options)
        records.append(rec)
    return records


def _system_statistics(i: int) -> dict[str, tuple[Any, dict]]:
    """Per-segment statistics of system i and its corpus score fields, for every metric."""
    from sacrebleu.utils import sum_of_lists

    hyps = _WORK["systems"][i][1]
    out = {}
    for name, metric in _WORK["metrics"].items():
        stats = segment_statistics(metric, hyps)
        out[name] = (stats, score_fields(score_of_totals(metric, sum_of_lists(stats))))  # sacrebleu's sum
    return out


def corpus_scores(systems: Sequence[System], references: Sequence[Sequence[str]],
                  options: EvalOptions, confidence_n: int = 0, seed: int | None = DEFAULT_SEED,
                  ref_name: str = "ref", progress: Progress | None = None,
                  jobs: int = 1) -> list[dict]:
    """Corpus scores of each system for each metric, as records (system, metric, score, ...).

    With ``confidence_n`` > 1 each score carries sacrebleu's bootstrap estimate
    (``mean``, ``ci95`` = half-width of the 95% interval), seeded per system exactly
    as ``sacrebleu --confidence`` run on that system alone. ``jobs`` > 1 scores
    systems in parallel worker processes (same numbers).
    """
    _validate(systems, references, ref_name)
    metrics = build_metrics(options, references)
    _WORK.update(systems=list(systems), metrics=metrics, options=options, confidence_n=confidence_n)
    try:
        with sacrebleu_seed(seed):
            per_system = _map_systems(_score_system, len(systems), jobs, progress)
    finally:
        _WORK.clear()
    return [rec for recs in per_system for rec in recs]


class _MemoStats:
    """A metric whose per-segment statistics come from a memo (keyed by the hypothesis list).

    sacrebleu's PairedTest extracts each system's statistics itself; nlpkit extracts
    them once beforehand (to report the components), and this wrapper hands the same
    statistics to PairedTest instead of computing them a second time.
    """

    def __init__(self, metric: Any, memo: dict[int, Any]) -> None:
        self._metric, self._memo = metric, memo

    def _extract_corpus_statistics(self, hypotheses, references):
        return self._memo[id(hypotheses)]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._metric, name)


def paired_test(systems: Sequence[System], references: Sequence[Sequence[str]],
                options: EvalOptions, test: str = "bs", n_samples: int = 0,
                confidence_n: int = 0, seed: int | None = DEFAULT_SEED, ref_name: str = "ref",
                progress: Progress | None = None, jobs: int = 1) -> list[dict]:
    """Paired bootstrap (``bs``) or approximate-randomization (``ar``) test against systems[0].

    Runs sacrebleu's own `PairedTest`, so p-values, means and intervals equal
    ``sacrebleu --paired-bs/--paired-ar`` with the same seed. ``n_samples`` 0 means
    sacrebleu's default (1000 resamples for bs, 10000 trials for ar); ``confidence_n``
    adds bootstrap intervals to the ar test (the bs test always has them, from its own
    resamples, so there it is ignored). ``jobs`` > 1 extracts the systems' statistics
    in parallel worker processes. Records: the baseline first (no p_value).
    """
    from sacrebleu.significance import PairedTest

    if test not in ("bs", "ar"):
        raise UsageError(f"unknown paired test {test!r} (bs or ar)")
    if len(systems) < 2:
        raise UsageError("a paired test needs at least two hypothesis files (the first is the baseline)")
    _validate(systems, references, ref_name)
    metrics = build_metrics(options, references)
    _WORK.update(systems=list(systems), metrics=metrics)
    try:
        per_system = _map_systems(_system_statistics, len(systems), jobs, progress)
    finally:
        _WORK.clear()
    memo: dict[str, dict[int, Any]] = {name: {} for name in metrics}
    components: dict[tuple[int, str], dict] = {}
    for i, ((_, hyps), stats) in enumerate(zip(systems, per_system)):
        for name, (segment_stats, fields) in stats.items():
            memo[name][id(hyps)] = segment_stats
            components[i, name] = fields
    wrapped = {name: _MemoStats(m, memo[name]) for name, m in metrics.items()}
    with sacrebleu_seed(seed):
        ps = PairedTest([(n, h) for n, h in systems], wrapped, references=None, test_type=test,
                        n_samples=n_samples,
                        n_ar_confidence=confidence_n if test == "ar" and confidence_n > 0 else -1)
        sigs, results = ps()
    keys = list(metrics)  # PairedTest keys results by score name (BLEU, chrF2, TER) in this order
    records = []
    for i, (sys_name, _) in enumerate(systems):
        for key, score_name in zip(keys, [k for k in results if k != "System"]):
            res = results[score_name][i]
            rec = {"system": sys_name, "baseline": i == 0, **components[i, key]}
            rec["score"] = float(res.score)
            if res.mean is not None:
                rec["mean"], rec["ci95"] = float(res.mean), float(res.ci)
            rec["p_value"] = None if res.p_value is None else float(res.p_value)
            rec["signature"] = sigs[score_name].format(options.short_signature)
            records.append(rec)
    return records


def sentence_scores(systems: Sequence[System], references: Sequence[Sequence[str]],
                    options: EvalOptions, ref_name: str = "ref") -> Iterator[dict]:
    """Per-segment scores (records with ``line``, 1-based), streamed.

    Equal to sacrebleu's ``sentence_bleu`` / ``sentence_chrf`` / ``sentence_ter`` per line;
    BLEU uses effective order, as both those functions and ``sacrebleu -sl`` do.
    """
    from dataclasses import replace

    _validate(systems, references, ref_name)
    metrics = build_metrics(replace(options, effective_order=True), None)
    sigs: dict[str, str] = {}
    for name, hyps in systems:
        for i, hyp in enumerate(hyps):
            refs = [stream[i] for stream in references]
            for key, metric in metrics.items():
                score = metric.sentence_score(hyp, refs)
                if key not in sigs:
                    sigs[key] = signature(metric, options)
                yield {"system": name, "line": i + 1, **score_fields(score),
                       "signature": sigs[key]}
