"""The generate task of `nlpkit score` (lm-evaluation-harness `generate_until`): generate an answer to each item's
context, cut it at stop strings, extract it with a regex, and compare it with the item's target(s).

As lm-evaluation-harness's Hugging Face backend (`HFLM.generate_until`, `_model_generate`, `MultiTokenEOSCriteria`;
the model's side is `LanguageModel.generation_prompt` and `until_stream`, the transformer's in
`nlpkit/lm/transformer/stop_strings.py`):

- the context is encoded with the model's own tokenizer (BOS first when it adds one, unless the text starts with
  it) and keeps its last `window - max_gen_toks` tokens (`max_ctx_len`); decoding is greedy unless sampling is asked;
- decoding stops at the model's end-of-sequence token (and a chat template's end of turn), after `max_gen_toks`
  tokens, or once the decoded tail of the generation -- its last (tokens of the stop string + 2) tokens, decoded with
  their special tokens -- contains a stop string; the end-of-sequence token's text is a stop string too;
- the generated tokens are decoded without special tokens and cut before the first occurrence of each stop string
  in turn (`generation`); the `regex` filter then take-first gives the `answer` (`answer_filters.RegexFilter`; none:
  the generation itself); `exact_match` compares it with the target (a list of targets: right when any is).

An n-gram model generates words, as `nlpkit generate` does: its word stream stops at a stop string and joins the
words with spaces (no tokenizer tail to decode).

Corpus BLEU and chrF of the answers against the targets (`--metric bleu,chrf`) are sacrebleu's, as `nlpkit bleu`
computes them (`nlpkit.mt.bleu`; lm-evaluation-harness's `bleu`/`chrf` aggregations call sacrebleu's defaults too);
their interval is sacrebleu's bootstrap, and several models are compared by sacrebleu's paired bootstrap
(`corpus_stats`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

from nlpkit.errors import NlpkitError, UsageError
from nlpkit.evaluation.answer_filters import MatchOptions, RegexFilter, compile_regex, exact_match
from nlpkit.evaluation.corpus_stats import CORPUS_METRICS  # noqa: F401 (one number over all items: bleu, chrf)
from nlpkit.lm.generation.batch_generation import DEFAULT_BATCH

GENERATE_METRICS = ("exact_match", "bleu", "chrf")
DEFAULT_MAX_GEN_TOKS = 256  # lm-evaluation-harness's HFLM max_gen_toks


@dataclass(frozen=True)
class GenerationOptions:
    """How generation items are answered and scored (lm-evaluation-harness's names)."""

    until: tuple[str, ...] = ()
    max_gen_toks: int = DEFAULT_MAX_GEN_TOKS
    extract: str | None = None
    extract_group: int = 0
    match: MatchOptions = field(default_factory=MatchOptions)
    metrics: tuple[str, ...] = ("exact_match",)
    sampling: object | None = None  # a SamplingConfig; None: greedy (lm-evaluation-harness do_sample: false)
    seed: int | None = None
    batch_size: int = DEFAULT_BATCH

    def validate(self) -> "GenerationOptions":
        if any(s == "" for s in self.until):
            raise UsageError("`until` holds an empty stop string, which would stop everywhere; give some text")
        if isinstance(self.max_gen_toks, bool) or not isinstance(self.max_gen_toks, int) or self.max_gen_toks < 1:
            raise UsageError(f"`max_gen_toks` must be at least 1, got {self.max_gen_toks}")
        if self.extract is not None:
            compile_regex(self.extract, "extract")
        self.match.validate()
        bad = [m for m in self.metrics if m not in GENERATE_METRICS]
        if bad or not self.metrics:
            raise UsageError(f"`metric` {','.join(bad) or '(none)'}: choose from {', '.join(GENERATE_METRICS)}")
        if self.batch_size < 1:
            raise UsageError(f"`batch_size` must be at least 1, got {self.batch_size}")
        return self

    def answer_filter(self) -> RegexFilter | None:
        return RegexFilter(self.extract, self.extract_group) if self.extract is not None else None


@dataclass
class Generation:
    """One item's result: the generation (cut), the answer (filtered), tokens generated and why it ended."""

    generation: str
    answer: str
    tokens: int
    finish: str
    truncated: int = 0  # the context's tokens when it lost its left end to the window (0: whole)


class Generator:
    """Answers generation items with one model (any `LanguageModel`: its `generation_prompt` and `until_stream`,
    decoded by `nlpkit.lm.generation.batch_generation.generate_batched`). `window` is lm-evaluation-harness's max_length [the
    model's context]; `render` the chat template around a context (`chat`), or None."""

    def __init__(self, lm, window: int | None = None, render: Callable[[str], str] | None = None,
                 chat: bool = False):
        self.lm, self.render, self.chat = lm, render, chat
        self.window = window or lm.context_length

    def check(self, options: GenerationOptions) -> None:
        if self.window is not None and options.max_gen_toks >= self.window:
            raise UsageError(f"`max_gen_toks` {options.max_gen_toks} leaves no room for a context in the "
                             f"{self.window}-token window of {self.lm.name}")

    def request(self, context: str, options: GenerationOptions):
        """(Request, finish) for one context: `finish(Generated)` -> `Generation`."""
        from nlpkit.lm.generation.batch_generation import Request

        text = self.render(context) if self.render is not None else context
        prompt = self.lm.generation_prompt(text, options.max_gen_toks, self.window, self.chat)
        until = self.lm.until_stream(prompt, options.until)
        filt = options.answer_filter()

        def finish(g) -> Generation:
            generation = until.text(g.ids)
            return Generation(generation, filt.apply(generation) if filt is not None else generation, len(g.ids),
                              g.finish, prompt.full_length)

        return Request(prompt, options.max_gen_toks, until.push), finish

    def generate(self, contexts: Sequence[str], options: GenerationOptions, stats=None) -> list[Generation]:
        """The `Generation` of each context, decoded `options.batch_size` at a time, in order."""
        from nlpkit.lm.generation.batch_generation import generate_batched
        from nlpkit.lm.generation.sampling import SamplingConfig

        self.check(options)
        pairs = [self.request(c, options) for c in contexts]
        out = generate_batched(self.lm, [r for r, _ in pairs], batch_size=options.batch_size,
                               sampling=options.sampling or SamplingConfig(temperature=0.0), seed=options.seed,
                               context=self.window, stats=stats)
        return [pairs[g.index][1](g) for g in out]


def targets_of(value, key: str, where: str) -> list[str]:
    """An item's target(s) as a list of strings: a string (an integer is read as its digits, as lm-evaluation-
    harness casts a target to the answer's type), or a non-empty list of them (any of them right)."""
    def one(v):
        if isinstance(v, str):
            return v
        if isinstance(v, int) and not isinstance(v, bool):
            return str(v)
        return None

    values = value if isinstance(value, list) else [value]
    out = [one(v) for v in values]
    if not values or any(v is None for v in out):
        raise NlpkitError(f"{where}: field {key!r} must be a string or a non-empty list of strings (any of them "
                          "right)")
    return out


def generate_items(generator: "Generator", items: Sequence, options: GenerationOptions) -> list[tuple[dict, dict]]:
    """(record, metrics) of each generation item (`score`'s records: `file`, `index`, `id` first), the items'
    contexts decoded together (`Generator.generate`)."""
    gens = generator.generate([item.context for item in items], options)
    out = []
    for item, gen in zip(items, gens):
        rec, metrics = score_generation(gen, item.continuations, options)
        out.append(({**item.key(), **rec}, metrics))
    return out


def score_generation(gen: Generation, targets: Sequence[str], options: GenerationOptions) -> tuple[dict, dict]:
    """(record fields, per-item metrics) of one answered item."""
    em = exact_match(gen.answer, targets, options.match)
    rec = {"generation": gen.generation, "answer": gen.answer,
           "target": targets[0] if len(targets) == 1 else list(targets), "exact_match": em,
           "tokens": gen.tokens, "finish": gen.finish, "truncated": bool(gen.truncated)}
    return rec, {"exact_match": em}


def corpus_metrics(answers: Sequence[str], targets: Sequence[Sequence[str]], metrics: Sequence[str],
                   n_bootstrap: int = 1000, seed: int | None = 12345) -> dict[str, dict]:
    """metric -> {value, stderr, low, high, n} of corpus BLEU / chrF of the answers against the targets, by
    sacrebleu with its defaults (lm-evaluation-harness's aggregations call `sacrebleu.corpus_bleu` / `corpus_chrf`):
    the interval is sacrebleu's bootstrap (`corpus_stats.corpus_summary`: the 2.5/97.5 percentiles of
    `n_bootstrap` resampled corpus scores, inside [0, 100])."""
    from nlpkit.evaluation.corpus_stats import corpus_scorers, corpus_summary
    from nlpkit.evaluation.significance import resample_indices

    scorers = corpus_scorers(targets, metrics)
    if not scorers or not answers:
        return {}
    n = len(answers)
    idx = resample_indices(n, n_bootstrap, seed) if n > 1 else None  # [B, n]
    return {name: corpus_summary(scorer, answers, idx) for name, scorer in scorers.items()}
