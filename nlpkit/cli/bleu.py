"""`nlpkit bleu`: BLEU / chrF / TER of one or many systems with sacrebleu, signed and at full precision."""

from __future__ import annotations

import sys

import click

from nlpkit.cli.options import Count, Seed, complete_choices, file_type, jobs_option
from nlpkit.cli.common import (FiniteFloat, common_options, input_paths, named_flags, open_writer, progress,
                               resolve_format, warn)

METRICS = ("bleu", "chrf", "ter")
SMOOTH_METHODS = ("exp", "floor", "add-k", "none")
TOKENIZERS = ("13a", "intl", "zh", "char", "none", "ja-mecab", "ko-mecab", "flores101", "flores200", "spBLEU-1K")
TOKENIZERS_HELP = ", ".join(TOKENIZERS)
BLEU_COLUMNS = ["counts", "totals", "precisions", "bp", "ratio", "sys_len", "ref_len"]
CHRF_COLUMNS = ["char_order", "word_order", "beta"]
TER_COLUMNS = ["num_edits", "ref_length"]

MAX_ORDER = 100           # n-gram orders: sacrebleu loops over every order of every segment
MAX_RESAMPLES = 100_000   # bootstrap / randomization samples: each one re-scores the corpus


def _parse_metrics(ctx: click.Context, param: click.Parameter, value: str) -> tuple[str, ...]:
    names = [m.strip().lower() for m in value.split(",") if m.strip()]
    bad = [m for m in names if m not in METRICS]
    if bad or not names:
        raise click.BadParameter(f"unknown metric {', '.join(map(repr, bad)) or repr(value)} "
                                 f"(choose from {', '.join(METRICS)}, comma-separated)")
    return tuple(dict.fromkeys(names))


def _bleu_details(r: dict) -> str:
    """sacrebleu's verbose BLEU line: '86.1/68.9/55.7/44.7 (BP = 1.000 ratio = ...)'."""
    if "precisions" not in r:
        return ""
    prec = "/".join(f"{p:.1f}" for p in r["precisions"])
    return (f"{prec} (BP = {r['bp']:.3f} ratio = {r['ratio']:.3f} hyp_len = {r['sys_len']:d} "
            f"ref_len = {r['ref_len']:d})")


def _install_warning_handler(quiet: bool) -> None:
    """sacrebleu's logger -> 'nlpkit: warning: sacrebleu: ...' on stderr (or nothing with --quiet)."""
    import logging

    from nlpkit.mt.bleu import quiet_sacrebleu

    logger = logging.getLogger("sacrebleu")
    if any(getattr(h, "_nlpkit", False) for h in logger.handlers):
        quiet_sacrebleu(quiet)
        return
    handler = logging.StreamHandler(sys.stderr)
    handler._nlpkit = True  # type: ignore[attr-defined]
    handler.setFormatter(logging.Formatter("nlpkit: warning: sacrebleu: %(message)s"))
    logger.addHandler(handler)
    logger.propagate = False
    quiet_sacrebleu(quiet)


@click.command("bleu")
@click.argument("hyps", nargs=-1, metavar="[HYP]...", type=file_type())
@click.option("-r", "--reference", "refs", multiple=True, metavar="FILE", type=file_type(),
              help="Reference file, one segment per line (repeat for several references).")
@click.option("--refs-tsv", metavar="FILE", type=file_type(), help="References as a TSV, one column per reference.")
@click.option("-m", "--metrics", default="bleu", show_default=True, metavar="LIST", callback=_parse_metrics,
              help="Comma-separated metrics: bleu, chrf, ter.")
@click.option("--tokenize", default=None, metavar="NAME", shell_complete=complete_choices(TOKENIZERS),
              help=f"BLEU tokenizer [default: 13a]: {TOKENIZERS_HELP} (some need extra packages).")
@click.option("--lowercase", is_flag=True, help="Case-insensitive BLEU (sacrebleu -lc).")
@click.option("--smooth-method", type=click.Choice(SMOOTH_METHODS), default="exp", show_default=True,
              help="BLEU smoothing.")
@click.option("--smooth-value", type=FiniteFloat(min=0), default=None,
              help="Smoothing value for floor (default 0.1) and add-k (default 1).")
@click.option("--max-ngram-order", type=Count(1, MAX_ORDER), default=4, show_default=True,
              help="BLEU n-gram order (not recorded in sacrebleu's signature).")
@click.option("--effective-order", is_flag=True, help="BLEU: skip orders with no n-grams.")
@click.option("--chrf-char-order", type=Count(1, MAX_ORDER), default=6, show_default=True,
              help="chrF character n-gram order (at least 1).")
@click.option("--chrf-word-order", type=Count(0, MAX_ORDER), default=0, show_default=True,
              help="Word n-gram order; 2 gives chrF++.")
@click.option("--chrf-beta", type=Count(0), default=2, show_default=True,
              help="chrF recall weight (chrF2 = beta 2).")
@click.option("--chrf-lowercase", is_flag=True, help="Case-insensitive chrF.")
@click.option("--chrf-whitespace", is_flag=True, help="Keep whitespace in chrF character n-grams.")
@click.option("--chrf-eps-smoothing", is_flag=True, help="chrF epsilon smoothing (chrF++.py, NLTK).")
@click.option("--ter-case-sensitive", is_flag=True, help="Case-sensitive TER.")
@click.option("--ter-normalized", is_flag=True, help="TER: basic normalization and tokenization.")
@click.option("--ter-no-punct", is_flag=True, help="TER: remove punctuation.")
@click.option("--ter-asian-support", is_flag=True, help="TER: split Asian characters.")
@click.option("--sentence", is_flag=True, help="One row per segment (line, 1-based) and metric.")
@click.option("--confidence", is_flag=True,
              help="Bootstrap mean and 95% interval half-width (ci95), each system on its own.")
@click.option("--confidence-n", type=Count(2, MAX_RESAMPLES), default=1000, show_default=True,
              help="Bootstrap resamples for --confidence.")
@click.option("--paired-bs", is_flag=True, help="Paired bootstrap test of each system against the first.")
@click.option("--paired-ar", is_flag=True, help="Paired approximate-randomization test against the first.")
@click.option("--paired-n", type=Count(1, MAX_RESAMPLES), default=None,
              help="Resamples (bs, default 1000) or trials (ar, default 10000).")
@click.option("--seed", type=Seed(min=1), default=12345, show_default=True,
              help="Seed of the bootstrap / randomization (sacrebleu's SACREBLEU_SEED; "
                   "0 is refused: sacrebleu's paired tests treat it as unseeded).")
@jobs_option("Score systems in N worker processes (same numbers; helps with TER; at most the CPUs "
             "available).", default=1)
@click.option("--short-signature", is_flag=True, help="sacrebleu's short signature form (-sh).")
@common_options
@named_flags(paths="-r/--reference")
def command(hyps, refs, refs_tsv, metrics, tokenize, lowercase, smooth_method, smooth_value,
            max_ngram_order, effective_order, chrf_char_order, chrf_word_order, chrf_beta,
            chrf_lowercase, chrf_whitespace, chrf_eps_smoothing, ter_case_sensitive, ter_normalized,
            ter_no_punct, ter_asian_support, sentence, confidence, confidence_n, paired_bs,
            paired_ar, paired_n, seed, jobs, short_signature, fmt, no_signature, quiet, encoding_errors):
    """Score HYP files against references with sacrebleu: BLEU, chrF(++), TER.

    No HYP with empty stdin, or an empty hypothesis or reference file, is an error.

    \b
      nlpkit bleu -r ref.de sys1.de sys2.de
      nlpkit bleu -r refA -r refB --metrics bleu,chrf,ter --format jsonl hyp.txt
      nlpkit bleu -r ref --paired-bs baseline.txt new.txt
      cat hyp.txt | nlpkit bleu -r ref --sentence

    Numbers equal the sacrebleu command's for the same options; each carries
    sacrebleu's signature. Lines are read as sacrebleu reads them (trailing
    whitespace stripped, a BOM kept). Hypotheses come from stdin when no HYP is given.
    """
    from nlpkit.mt import bleu as core
    from nlpkit.io import display_name

    if paired_bs and paired_ar:
        raise click.UsageError("--paired-bs and --paired-ar are mutually exclusive")
    paired = "bs" if paired_bs else "ar" if paired_ar else None
    if sentence and (confidence or paired):
        raise click.UsageError("--sentence cannot be combined with --confidence or paired tests")
    hyp_paths = input_paths(hyps, what="hypotheses", argument="HYP")
    if paired and len(hyp_paths) < 2:
        raise click.UsageError("--paired-bs/--paired-ar need two or more HYP files "
                               "(the first is the baseline)")
    if paired_n is not None and not paired:
        raise click.UsageError("--paired-n needs --paired-bs or --paired-ar")
    if [*hyp_paths, *refs, refs_tsv].count("-") > 1:
        raise click.UsageError("stdin ('-') can be read only once")
    seen: list[str] = []
    for p in hyp_paths:
        if p in seen:
            if paired and p == hyp_paths[0]:
                warn(f"{p}: skipped, it is also the baseline", quiet)
                continue
            raise click.UsageError(f"{p} given twice as a hypothesis")
        seen.append(p)

    if smooth_value is not None and smooth_method not in ("floor", "add-k"):
        warn(f"--smooth-value applies to --smooth-method floor or add-k; {smooth_method} ignores it", quiet)
    _install_warning_handler(quiet)
    options = core.EvalOptions(
        metrics=metrics, tokenize=tokenize, lowercase=lowercase, smooth_method=smooth_method,
        smooth_value=smooth_value, max_ngram_order=max_ngram_order, effective_order=effective_order,
        chrf_char_order=chrf_char_order, chrf_word_order=chrf_word_order, chrf_beta=chrf_beta,
        chrf_lowercase=chrf_lowercase, chrf_whitespace=chrf_whitespace,
        chrf_eps_smoothing=chrf_eps_smoothing, ter_case_sensitive=ter_case_sensitive,
        ter_normalized=ter_normalized, ter_no_punct=ter_no_punct,
        ter_asian_support=ter_asian_support, short_signature=short_signature)
    ref_names, references = core.load_references(refs, refs_tsv, encoding_errors)
    systems = [(display_name(p), core.read_segments(p, encoding_errors, "hypothesis")) for p in seen]
    for name, lines in systems:  # fail before any (slow) scoring
        core.check_lengths(name, lines, ref_names[0], references)

    fmt = resolve_format(fmt)
    machine = fmt != "table"
    columns = _columns(metrics, sentence, confidence, paired, machine, no_signature)

    if sentence:  # streamed, one record per segment and metric
        records = core.sentence_scores(systems, references, options, ref_names[0])
    else:
        with progress("scoring systems", quiet=quiet) as tick:
            if paired:
                records = core.paired_test(systems, references, options, paired, paired_n or 0,
                                              confidence_n if confidence else 0, seed,
                                              ref_names[0], progress=tick, jobs=jobs)
            else:
                records = core.corpus_scores(systems, references, options,
                                                confidence_n if confidence else 0, seed,
                                                ref_names[0], progress=tick, jobs=jobs)
    _write(records, columns, fmt, no_signature)


def _columns(metrics, sentence: bool, confidence: bool, paired: str | None, machine: bool,
             no_signature: bool) -> list[str]:
    """The output columns: the scores, then each metric's components and the signature (machine formats) or
    sacrebleu's verbose details (the table)."""
    columns = ["system"] + (["line"] if sentence else []) + ["metric", "score"]
    if confidence or paired == "bs":
        columns += ["mean", "ci95"]
    if paired:
        columns += ["baseline", "p_value"]
    if machine:
        for name, cols in (("bleu", BLEU_COLUMNS), ("chrf", CHRF_COLUMNS), ("ter", TER_COLUMNS)):
            if name in metrics:
                columns += cols
        if not no_signature:
            columns.append("signature")
    else:
        columns.append("details")
    return columns


def _write(records, columns: list[str], fmt: str, no_signature: bool) -> None:
    """Machine formats: each record with its signature (or none); the table: the signatures as its caption."""
    if fmt != "table":
        with open_writer(columns, fmt, None) as out:
            for r in records:
                if no_signature:
                    r.pop("signature", None)
                out.write(r)
    else:
        records = list(records)
        sigs = {r["metric"]: r["signature"] for r in records}
        caption = "\n".join(f"{m}: {s}" for m, s in sigs.items())
        with open_writer(columns, "table", caption, no_signature) as out:
            for r in records:
                out.write({**r, "details": _bleu_details(r)})
