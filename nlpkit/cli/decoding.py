"""Decoding options shared by `generate`, `sample` (and, next, `score`): the option decorators, one
`DecodingOptions` value they resolve into, and the steps every decoding command takes with it (load
the model, the sampling settings, the seed, the prompt, the signature, the --stats line).

As ripgrep does: flags are parsed into low-level arguments once and resolved into one options value the
command reads; no command module imports another's.
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass, fields

import click

from nlpkit.cli.options import Count, FiniteFloat, Seed, file_type

from nlpkit.cli.common import refuse_inapplicable, warn


MAX_FACTOR = 1e6   # --temperature, --repetition-penalty: the logits are float32; 1e300 overflowed the cast


def _seed(ctx, param, value):
    """--seed: None or -1 = a random seed (as llama.cpp); other negatives are a usage error."""
    if value is not None and value < -1:
        raise click.BadParameter(f"must be >= 0, or -1 for a random seed; got {value}", ctx=ctx, param=param)
    return None if value == -1 else value


def _stops(ctx, param, value):
    """--stop "" would stop nowhere (an empty string is in every text): a usage error."""
    if any(v == "" for v in value):
        raise click.BadParameter("an empty stop string matches everywhere; give some text", param=param)
    return value


@dataclass
class DecodingOptions:
    """What the decoding options say, resolved once (see `decoding_options`)."""

    max_new_tokens: int = 128
    temperature: float | None = None
    top_k: int | None = None
    top_p: float | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    seed: int | None = None
    stops: tuple[str, ...] = ()
    no_kv_cache: bool = False
    sliding: bool = False
    stats: bool = False
    truncate_prompt: bool = False
    ignore_eos: bool = False

    def drawn_seed(self) -> int:
        """The --seed, or a fresh random one (drawn here only; shown by --stats and in the signature, so
        a run can be repeated)."""
        if self.seed is None:
            import secrets

            self.seed = secrets.randbelow(2**31)
        return self.seed

    def decode_kwargs(self, cfg) -> dict:
        """The keyword arguments of `nlpkit.lm.generation`'s front ends."""
        return dict(max_new_tokens=self.max_new_tokens, sampling=cfg, seed=self.drawn_seed(), stop=self.stops,
                    use_cache=not self.no_kv_cache, sliding=self.sliding, ignore_eos=self.ignore_eos)


_NAMES = [f.name for f in fields(DecodingOptions)]


def decoding_options(f):
    """--max-new-tokens, the sampling knobs, --seed, --stop, --no-kv-cache, --sliding, --stats,
    --truncate-prompt, --ignore-eos; the command receives them as one `decoding: DecodingOptions`."""
    dflt = "[default: the model's generation_config.json, else llama.cpp's %s; an n-gram model: %s]"
    opts = [
        click.option("--max-new-tokens", type=Count(0), default=128, show_default=True,
                     help="Stop after this many new tokens."),
        click.option("--temperature", type=FiniteFloat(min=0, max=MAX_FACTOR), default=None,
                     help="Divide the logits by T; 0 = greedy (always the most likely token). " + dflt % ("0.8", "1")),
        click.option("--top-k", type=Count(0), default=None,
                     help="Keep the K most likely tokens (ties at the boundary kept); 0 = disabled. "
                          + dflt % ("40", "0")),
        click.option("--top-p", type=FiniteFloat(min=0, max=1, min_open=True), default=None,
                     help="Nucleus: keep the most likely tokens whose probabilities reach P; in (0, 1], "
                          "1 = disabled. " + dflt % ("0.95", "1")),
        click.option("--min-p", type=FiniteFloat(min=0, max=1), default=None,
                     help="Drop tokens below P x the top token's probability; 0 = disabled. " + dflt % ("0.05", "0")),
        click.option("--repetition-penalty", type=FiniteFloat(min=0, max=MAX_FACTOR, min_open=True), default=None,
                     help="Divide (positive) or multiply (negative) the logits of tokens already seen; 1 = off. "
                          + dflt % ("1", "1")),
        click.option("--seed", type=Seed(min=-1), default=None, callback=_seed, metavar="N",
                     help="Random seed: the same seed gives the same text [default: a random seed, "
                          "shown by --stats and in the signature; -1 = random]."),
        click.option("--stop", "stops", multiple=True, metavar="STR", callback=_stops,
                     help="Stop when the text contains STR (not printed). Repeatable."),
        click.option("--no-kv-cache", is_flag=True,
                     help="Recompute the whole sequence every step (slow; for comparison)."),
        click.option("--sliding", is_flag=True,
                     help="When the context is full, forget the oldest quarter and continue (default: stop)."),
        click.option("--stats", is_flag=True,
                     help="Print warm-up, prefill and decode tokens/s, and the seed, on stderr."),
        click.option("--truncate-prompt", is_flag=True,
                     help="Drop the start of a too-long prompt (leaving room for --max-new-tokens) instead of failing."),
        click.option("--ignore-eos", is_flag=True, help="Keep generating after the end-of-sequence token."),
    ]

    @functools.wraps(f)
    def command(*args, **kwargs):
        kwargs["decoding"] = DecodingOptions(**{name: kwargs.pop(name) for name in _NAMES})
        _warn_options(kwargs["decoding"], kwargs.get("quiet", False))
        return f(*args, **kwargs)

    for deco in reversed(opts):
        command = deco(command)
    return command


def _warn_options(opts: DecodingOptions, quiet: bool) -> None:
    """Warnings on options that do not do what they seem to: a --stop holding a literal backslash sequence (a shell
    passes "\\n" as two characters), sampling filters under --temperature 0 (greedy: they change nothing)."""
    from nlpkit.cli.generate_checks import escape_warnings, greedy_ignored

    for message in escape_warnings(opts.stops, stop_flag="--stop"):
        warn(message, quiet)
    if opts.temperature is not None:  # without it the model's defaults decide, and they may sample
        ignored = greedy_ignored({"temperature": opts.temperature, "top_k": opts.top_k, "top_p": opts.top_p,
                                  "min_p": opts.min_p})
        if ignored is not None:
            warn(ignored, quiet)


_CHAT_HELP = ("Treat PROMPT as a user message: render the model's chat template (with the generation prompt) and "
              "stop at its end-of-turn token.")
_MESSAGES_HELP = ("--chat conversation: a JSON list of {\"role\": ..., \"content\": ...} ('-' = stdin); a PROMPT is "
                  "added as the last user message.")


def chat_options(f=None, *, chat_help: str = _CHAT_HELP, messages_help: str = _MESSAGES_HELP):
    """--chat, --system, --messages: render the model's chat template around the prompt. Use as
    ``@chat_options``, or ``@chat_options(chat_help=..., messages_help=...)`` where the input differs
    (tokenize)."""
    def decorate(f):
        opts = [
            click.option("--chat", is_flag=True, help=chat_help),
            click.option("--system", default=None, metavar="TEXT", help="System message for --chat."),
            click.option("--messages", "messages_file", default=None, metavar="FILE", type=file_type(),
                         help=messages_help),
        ]
        for deco in reversed(opts):
            f = deco(f)
        return f
    return decorate if f is None else decorate(f)


def check_chat(chat: bool, system: str | None, messages_file: str | None) -> None:
    if not chat and (system is not None or messages_file is not None):
        raise click.UsageError("--system and --messages need --chat")


_FIELD_HELP = ("--prompts FILE is JSONL: each line's prompt is its field NAME, its `id` (when it has one) goes to its "
               "records; blank lines are skipped.")


def prompts_options(prompts_help: str, batch_help: str):
    """--prompts FILE, --field NAME, --batch-size N: many prompts read by `prompt_lines` and decoded together
    (`check_prompts` refuses the combinations that mean nothing); the same names and meaning in `generate` and
    `sample`."""
    def decorate(f):
        opts = [
            click.option("--prompts", "prompts_file", metavar="FILE", default=None, type=file_type(), help=prompts_help),
            click.option("--field", default=None, metavar="NAME", help=_FIELD_HELP),
            click.option("--batch-size", type=Count(1), default=None, metavar="N", help=batch_help),
        ]
        for deco in reversed(opts):
            f = deco(f)
        return f
    return decorate


def check_prompts(prompt: str | None, prompts_file: str | None, field: str | None, batch_size: int | None,
                  opts: DecodingOptions, messages_file: str | None = None) -> None:
    """Usage errors of the --prompts options (exit 2)."""
    if prompt is not None and prompts_file is not None:
        raise click.UsageError("give a PROMPT or --prompts FILE, not both")
    if prompts_file == "-" and messages_file == "-":
        raise click.UsageError("--prompts - and --messages - would both read stdin: give one of them a file")
    if field is not None and not field.strip():
        raise click.UsageError("--field needs the NAME of the JSONL field that holds each prompt, not an empty name")
    if prompts_file is None:
        for flag, value in (("--batch-size", batch_size), ("--field", field)):
            if value is not None:
                raise click.UsageError(f"{flag} applies to --prompts FILE")
    if batch_size is not None and (opts.no_kv_cache or opts.sliding):
        raise click.UsageError("--batch-size decodes with the KV cache and stops at a full context: not with "
                               "--no-kv-cache or --sliding")


def prompt_lines(path: str, errors: str = "strict", field: str | None = None):  # -> Iterator[(id, text, where)]
    """The prompts of a --prompts FILE as (id, text, where), streamed: one per line (an empty line is the empty
    prompt, which starts from BOS; id None); with `field` (--field), one JSON object per line, the prompt its `field`,
    the id its `id` or None (blank lines skipped). `where` (``file, line N``) locates the prompt in messages.
    Undecodable bytes are an error naming the line (see --encoding-errors)."""
    from nlpkit.io import display_name, iter_lines, json_record

    name = display_name(path)
    for lineno, line in enumerate(iter_lines(path, errors=errors), 1):
        where = f"{name}, line {lineno}"
        if field is None:
            yield None, line, where
        elif line.strip():
            yield (*json_record(line, where, field, "id", id_required=False), where)


def read_prompts(path: str, errors: str = "strict", field: str | None = None):  # -> Iterator[(id, text, where)]
    """`prompt_lines`, after checking that the FILE holds a prompt: no prompt at all (an empty file or stdin, blank
    JSONL) is an error before the model loads, in `generate` and `sample` alike (a job that forgot its input must
    not pass)."""
    from itertools import chain

    from nlpkit.errors import NlpkitError
    from nlpkit.io import display_name

    lines = prompt_lines(path, errors, field)
    first = next(lines, None)
    if first is None:
        raise NlpkitError(f"{display_name(path)}: no prompts" + (" (blank lines only)" if field else ""))
    return chain([first], lines)


def load_for_decoding(spec, quiet: bool = False, verbose: bool = False):
    """The model `spec` (a `nlpkit.lm.spec.LoadSpec`) names, as a `LanguageModel`, after refusing the options that
    mean nothing for its kind; with `verbose` (-v) the model line on stderr (`model_line.say_loaded`), as perplexity
    and score say it."""
    from nlpkit.lm.load import backend_class, load_language_model

    refuse_inapplicable(click.get_current_context(), backend_class(spec.path))
    lm = load_language_model(spec, warn=lambda m: warn(m, quiet))
    lm.require_tokenizer()
    if verbose:
        from nlpkit.cli.model_line import say_loaded

        say_loaded(lm)
    return lm


def sampling_config(lm, opts: DecodingOptions):
    """The sampling knobs: the options given, the rest from the model's defaults (its
    generation_config.json, else llama.cpp's; an n-gram model's own distribution)."""
    from nlpkit.lm.generation.sampling import SamplingConfig

    base, source = lm.sampling_defaults()
    given = {"temperature": opts.temperature, "top_k": opts.top_k, "top_p": opts.top_p, "min_p": opts.min_p,
             "repetition_penalty": opts.repetition_penalty}
    if source is not None:  # the model's own values first: a bad one is its file's fault, not an option's
        SamplingConfig(**{k: base[k] for k, v in given.items() if v is None}).validate(source=source)
    return SamplingConfig(**{k: (base[k] if v is None else v) for k, v in given.items()}).validate()


def decoding_signature(name: str, lm, cfg, *, seed: int, max_new_tokens: int, stops, sliding: bool,
                       **extra) -> str:
    """The signature of a decoding run; the stop strings hashed as `score` hashes --until (`--stop X` and
    `--stop Y` stop at different places, so they sign differently)."""
    from nlpkit.signature import text_hash

    sampled = not cfg.greedy
    return lm.signature(name, {"temp": cfg.temperature, "top_k": cfg.top_k if sampled else "none",
                               "top_p": cfg.top_p if sampled else "none", "min_p": cfg.min_p if sampled else "none",
                               "rep": cfg.repetition_penalty, "seed": seed if sampled else "none",
                               "max_new": max_new_tokens, "stop": text_hash(stops) if stops else 0,
                               "sliding": sliding}, extra)


def read_prompt(prompt: str | None, errors: str = "strict", required: bool = True) -> str:
    """The PROMPT argument; else stdin when piped (one trailing newline dropped; empty stdin is an
    error unless not `required`, as with --messages: a job that forgot its input must not pass);
    else '' (start from BOS)."""
    if prompt is not None:
        return prompt
    from nlpkit.cli.common import stdin_is_empty, stdin_is_piped

    if not stdin_is_piped():
        return ""
    if stdin_is_empty():
        if not required:
            return ""
        from nlpkit.errors import NlpkitError

        raise NlpkitError("no input (no PROMPT given, and stdin is empty; PROMPT '' starts from the BOS token)")
    from nlpkit.io import read_text

    text = read_text("-", errors=errors)
    return text[:-1] if text.endswith("\n") else text


def make_prompt(lm, text: str, opts: DecodingOptions, chat: bool = False, system: str | None = None,
                messages_file: str | None = None, quiet: bool = False, where: str | None = None):
    """The model's `Prompt` for `text` (with --chat, the rendered conversation), warning when
    --truncate-prompt cut it (`was_cut`). `where` (``file, line N`` of a --prompts FILE) starts the messages
    about this prompt: a too-long prompt's error, the cut's warning."""
    from nlpkit.errors import NlpkitError

    try:
        p = lm.prompt(text, max_new_tokens=opts.max_new_tokens, truncate=opts.truncate_prompt,
                      chat=(system, messages_file) if chat else None)
    except NlpkitError as e:
        if where is not None:
            e.args = (f"{where}: {e}", *e.args[1:])
        raise
    if opts.truncate_prompt and was_cut(p):
        what = "the chat prompt" if chat else "the prompt"
        warn(f"{where + ': ' if where else ''}--truncate-prompt: {what} was cut from {p.full_length} to its last "
             f"{len(p.ids)} tokens (context {lm.context_length}, --max-new-tokens {opts.max_new_tokens})", quiet)
    return p


def was_cut(p) -> bool:
    """Whether --truncate-prompt dropped the start of the `Prompt` `p` (its records say so: `truncated`)."""
    return bool(p.full_length) and len(p.ids) < p.full_length


def print_stats(lm, stats, quiet: bool = False, show: bool = False, seed: int | None = None,
                warm_seconds: float | None = None) -> None:
    """--stats line on stderr; the context-full notice unless --quiet."""
    if stats.finish == "context":
        warn(f"the context is full ({stats.prompt_tokens} prompt + {stats.new_tokens} new tokens): stopped "
             "(use --sliding to keep going, or a shorter prompt)", quiet)
    if show:
        from nlpkit.cli.model_line import weights_note
        from nlpkit.cli.stats_line import stats_line

        sys.stderr.write(stats_line(lm.token_unit, stats, seed, warm_seconds, weights_note(lm)) + "\n")


def print_batch_stats(lm, stats, show: bool, seed: int | None, warm_seconds: float | None = None) -> None:
    """--stats line of a batched run (`batch_generation.BatchStats`) on stderr: totals over every sequence."""
    if not show:
        return
    from nlpkit.cli.model_line import weights_note
    from nlpkit.cli.stats_line import batch_stats_line

    sys.stderr.write(batch_stats_line(lm.token_unit, stats, seed, warm_seconds, weights_note(lm)) + "\n")
