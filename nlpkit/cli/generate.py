"""`nlpkit generate [PROMPT]`: stream one continuation of a prompt to stdout.

Options shared with `nlpkit sample` live here (`decoding_options`, `load_for_decoding`,
`decoding_signature`, `read_prompt`, `print_stats`); the work is `nlpkit.lm.generation`.
"""

from __future__ import annotations

import sys

import click

from nlpkit.cli.common import (common_options, model_name, model_options, open_writer, rope_label,
                               stream_line, warn)


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


def decoding_options(f):
    """--max-new-tokens, the sampling knobs, --seed, --stop, --no-kv-cache, --sliding, --stats,
    --truncate-prompt, --ignore-eos (in that order of parameters)."""
    dflt = "[default: the model's generation_config.json, else llama.cpp's %s; an n-gram model: %s]"
    opts = [
        click.option("--max-new-tokens", type=click.IntRange(min=0), default=128, show_default=True,
                     help="Stop after this many new tokens."),
        click.option("--temperature", type=float, default=None,
                     help="Divide the logits by T; 0 = greedy (always the most likely token). " + dflt % ("0.8", "1")),
        click.option("--top-k", type=int, default=None,
                     help="Keep the K most likely tokens (ties at the boundary kept); 0 = disabled. "
                          + dflt % ("40", "0")),
        click.option("--top-p", type=float, default=None,
                     help="Nucleus: keep the most likely tokens whose probabilities reach P; in (0, 1], "
                          "1 = disabled. " + dflt % ("0.95", "1")),
        click.option("--min-p", type=float, default=None,
                     help="Drop tokens below P x the top token's probability; 0 = disabled. " + dflt % ("0.05", "0")),
        click.option("--repetition-penalty", type=float, default=None,
                     help="Divide (positive) or multiply (negative) the logits of tokens already seen; 1 = off. "
                          + dflt % ("1", "1")),
        click.option("--seed", type=int, default=None, callback=_seed, metavar="N",
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
    for deco in reversed(opts):
        f = deco(f)
    return f


def generation_config(model) -> dict:
    """The model's generation_config.json ({} when it has none, e.g. a GGUF file)."""
    import json
    from pathlib import Path

    from nlpkit.errors import NlpkitError

    path = Path(model.source) / "generation_config.json" if model.source else None
    if path is None or not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise NlpkitError(f"{path}: not readable JSON ({e})") from None
    return data if isinstance(data, dict) else {}


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
            click.option("--messages", "messages_file", default=None, metavar="FILE", help=messages_help),
        ]
        for deco in reversed(opts):
            f = deco(f)
        return f
    return decorate if f is None else decorate(f)


def chat_prompt(model, text: str | None, chat: bool, system: str | None, messages_file: str | None):
    """(prompt text, extra end ids): the rendered chat prompt and its end-of-turn ids with --chat, else
    (text, ()). The rendered text already holds the template's special tokens (BOS included, if any)."""
    if not chat:
        if system is not None or messages_file is not None:
            raise click.UsageError("--system and --messages need --chat")
        return text, ()
    from nlpkit.lm.chat import ChatTemplate, conversation, end_of_turn_ids, special_token_variables

    template = ChatTemplate.for_tokenizer(model.tokenizer, model.source or "model")
    if messages_file is not None:
        messages = conversation(None, system, messages_file)
        if text:
            messages.append({"role": "user", "content": text})
    else:
        messages = conversation(text, system, None)
    rendered = template.render(messages, special_token_variables(model.tokenizer))
    return rendered, end_of_turn_ids(model.tokenizer, getattr(model.config, "eos_ids", ()))


def chat_ids(model, rendered: str, max_new_tokens: int, truncate: bool, quiet: bool = False) -> list[int]:
    """Ids of a rendered chat prompt: its special tokens recognised, no BOS added again."""
    from nlpkit.lm.generation import prepare_prompt

    full = model.tokenizer.encode(rendered, allowed_special="all", add_special=False)
    ids = prepare_prompt(model, full, max_new_tokens=max_new_tokens, truncate=truncate)
    if truncate and len(ids) < len(full):
        warn(f"--truncate-prompt: the chat prompt was cut from {len(full)} to its last {len(ids)} tokens "
             f"(context {model.config.positions}, --max-new-tokens {max_new_tokens})", quiet)
    return ids


def sampling_config(model, temperature, top_k, top_p, min_p, repetition_penalty):
    """The sampling knobs: the options given, the rest from the model's defaults (`sampling_defaults`)."""
    from nlpkit.lm.sampling import SamplingConfig, sampling_defaults

    base, _ = sampling_defaults(generation_config(model))
    given = {"temperature": temperature, "top_k": top_k, "top_p": top_p, "min_p": min_p,
             "repetition_penalty": repetition_penalty}
    # the model's own values first: a bad one is its file's fault, not an option's
    SamplingConfig(**{k: base[k] for k, v in given.items() if v is None}).validate(
        source=f"{model.source}/generation_config.json")
    values = {k: (base[k] if v is None else v) for k, v in given.items()}
    return SamplingConfig(**values).validate()


def resolve_seed(seed: int | None) -> int:
    """The --seed, or a fresh random one (shown by --stats and in the signature, so a run can be repeated)."""
    if seed is not None:
        return seed
    import secrets

    return secrets.randbelow(2**31)


def load_for_decoding(model_path: str | None, rope_scaling: str | None = None,
                      rope_factor: float | None = None):
    from nlpkit.lm.transformer.loaders import load_model

    model = load_model(model_path, rope_scaling=rope_scaling, rope_factor=rope_factor)
    model.require_tokenizer()
    return model


def decoding_signature(name: str, model, cfg, *, seed: int, max_new_tokens: int, stops, sliding: bool,
                       **extra) -> str:
    from nlpkit.signature import make_signature

    sampled = not cfg.greedy
    return make_signature(name, model=model_name(model), temp=cfg.temperature,
                          top_k=cfg.top_k if sampled else "none", top_p=cfg.top_p if sampled else "none",
                          min_p=cfg.min_p if sampled else "none", rep=cfg.repetition_penalty,
                          seed=seed if sampled else "none", max_new=max_new_tokens,
                          stop=len(stops), sliding=sliding, rope=rope_label(model), **extra)


def read_prompt(prompt: str | None, errors: str = "strict") -> str:
    """The PROMPT argument; else stdin when piped (one trailing newline dropped); else '' (start from BOS)."""
    if prompt is not None:
        return prompt
    try:
        piped = not sys.stdin.isatty()
    except (AttributeError, ValueError):
        piped = False
    if not piped:
        return ""
    from nlpkit.io import read_text

    text = read_text("-", errors=errors)
    return text[:-1] if text.endswith("\n") else text


def prompt_ids(model, text: str, max_new_tokens: int, truncate: bool, quiet: bool = False) -> list[int]:
    from nlpkit.lm.generation import encode_prompt, prepare_prompt

    full = encode_prompt(model, text)
    ids = prepare_prompt(model, full, max_new_tokens=max_new_tokens, truncate=truncate)
    if truncate and len(ids) < len(full):
        warn(f"--truncate-prompt: the prompt was cut from {len(full)} to its last {len(ids)} tokens "
             f"(context {model.config.positions}, --max-new-tokens {max_new_tokens})", quiet)
    return ids


def warm_up(model) -> float:
    """One throwaway 1-token forward pass (touches every weight: page-ins, thread pools), timed, so
    --stats does not count start-up work as prefill."""
    import time

    import numpy as np

    t0 = time.perf_counter()
    start = model.config.bos_id if model.config.bos_id is not None else 0
    model.forward(np.array([[start]], dtype=np.int64), model.new_cache(1, 8), last_only=True)
    return time.perf_counter() - t0


def print_stats(stats, quiet: bool = False, show: bool = False, seed: int | None = None,
                warm_seconds: float | None = None) -> None:
    """--stats line on stderr; the context-full notice unless --quiet."""
    if stats.finish == "context":
        warn(f"the context is full ({stats.prompt_tokens} prompt + {stats.new_tokens} new tokens): stopped "
             "(use --sliding to keep going, or a shorter prompt)", quiet)
    if show:
        rows = f" x {stats.batch} rows" if stats.batch > 1 else ""
        warm = f"warm-up: {warm_seconds:.3f} s; " if warm_seconds is not None else ""
        sys.stderr.write(
            f"{warm}prefill: {stats.prompt_tokens} tokens in {stats.prefill_seconds:.3f} s "
            f"({stats.prefill_tps:.1f} tok/s); "
            f"decode: {stats.new_tokens}{rows} tokens in {stats.decode_seconds:.3f} s ({stats.decode_tps:.1f} tok/s); "
            f"finish: {stats.finish}" + (f"; seed: {seed}" if seed is not None else "") + "\n")


@click.command("generate")
@click.argument("prompt", required=False)
@click.option("--prompts", "prompts_file", metavar="FILE", default=None,
              help="One prompt per line ('-' = stdin): one record per prompt instead of streaming.")
@click.option("--echo/--no-echo", default=None,
              help="Print the prompt before the continuation [default: on a terminal].")
@model_options
@decoding_options
@chat_options
@common_options
def command(prompt, prompts_file, echo, model_path, rope_scaling, rope_factor, max_new_tokens, temperature, top_k, top_p, min_p,
            repetition_penalty, seed, stops, no_kv_cache, sliding, stats, truncate_prompt, ignore_eos,
            fmt, no_signature, quiet, encoding_errors, chat=False, system=None, messages_file=None):
    """Stream one continuation of PROMPT (argument, or piped stdin) to stdout as it is generated.

    The text goes to stdout as plain text, ended by a newline; on a terminal the prompt is printed
    first (--echo/--no-echo). --format asks for records instead (prompt, text, tokens, finish,
    signature); --prompts FILE gives one record per line of FILE (table on a terminal, TSV
    otherwise, like every command). With no prompt at all, generation starts from the BOS token.

    Sampling defaults come from the model's generation_config.json when it sets them, else
    llama.cpp's: temperature 0.8, top-k 40, top-p 0.95, min-p 0.05 (an n-gram model samples its own
    distribution unfiltered, temperature 1, as NLTK's generate). --temperature 0 is greedy;
    --top-k 0, --top-p 1, --min-p 0 and --repetition-penalty 1 disable those filters, applied in
    transformers' order: repetition penalty, temperature, top-k, top-p, min-p. The seed is random
    unless --seed N is given; --stats and the signature show it.

    With --chat, PROMPT is a user message (after --system, or after the --messages conversation):
    the model's own chat template renders it, with the generation prompt, and generation stops at
    the template's end-of-turn token.

    \b
    Examples:
      nlpkit generate "Once upon a time" --max-new-tokens 50 --temperature 0.7 --top-p 0.9
      nlpkit generate --prompts prompts.txt --temperature 0 --format jsonl
      nlpkit generate -m SmolLM2-135M-Instruct.Q4_1.gguf --chat "What is the capital of France?" --temperature 0
    """
    from nlpkit.io import stdout_is_terminal
    from nlpkit.lm.generation import GenerationStats, generate

    if prompt is not None and prompts_file is not None:
        raise click.UsageError("give a PROMPT or --prompts FILE, not both")
    if not chat and (system is not None or messages_file is not None):
        raise click.UsageError("--system and --messages need --chat")
    from nlpkit.cli.ngram import ngram_model_path
    if ngram_model_path(model_path):  # an ARPA / counts file (nlpkit/cli/ngram.py)
        from nlpkit.cli.ngram import ngram_generate, ngram_sampling, refuse_neural_options
        refuse_neural_options(click.get_current_context())
        cfg, seed = ngram_sampling(temperature, top_k, top_p, min_p, repetition_penalty, seed)
        if prompts_file is not None:
            from nlpkit.io import iter_lines

            prompts = list(iter_lines(prompts_file, errors=encoding_errors))
            return ngram_generate(ngram_model_path(model_path), None, prompts, echo, cfg, max_new_tokens, seed,
                                  stops, ignore_eos, stats, fmt, no_signature, quiet)
        return ngram_generate(ngram_model_path(model_path), read_prompt(prompt, encoding_errors), None, echo, cfg,
                              max_new_tokens, seed, stops, ignore_eos, stats, fmt, no_signature, quiet)
    model = load_for_decoding(model_path, rope_scaling, rope_factor)
    cfg = sampling_config(model, temperature, top_k, top_p, min_p, repetition_penalty)
    seed = resolve_seed(seed)
    warm = warm_up(model) if stats else None
    kwargs = dict(max_new_tokens=max_new_tokens, sampling=cfg, seed=seed, stop=stops, use_cache=not no_kv_cache,
                  sliding=sliding, ignore_eos=ignore_eos)
    sig = decoding_signature("generate", model, cfg, seed=seed, max_new_tokens=max_new_tokens, stops=stops,
                             sliding=sliding, **({"chat": True} if chat else {}))

    def encode(text: str) -> list[int]:
        """The prompt's ids; with --chat, the rendered conversation's (and its end-of-turn ids set)."""
        if not chat:
            return prompt_ids(model, text, max_new_tokens, truncate_prompt, quiet)
        rendered, kwargs["eos_ids"] = chat_prompt(model, text, chat, system, messages_file)
        return chat_ids(model, rendered, max_new_tokens, truncate_prompt, quiet)

    if prompts_file is not None or fmt is not None:
        if prompts_file is not None:
            from nlpkit.io import iter_lines

            prompts = iter_lines(prompts_file, errors=encoding_errors)
        else:
            prompts = [prompt if messages_file == "-" else read_prompt(prompt, encoding_errors)]
        with open_writer(["index", "prompt", "text", "tokens", "finish"], fmt, sig, no_signature) as out:
            for i, line in enumerate(prompts):
                st = GenerationStats()
                ids = encode(line)
                text = "".join(generate(model, ids, stats=st, **kwargs))
                out.write({"index": i, "prompt": line, "text": text, "tokens": st.new_tokens - (st.finish == "eos"),
                           "finish": st.finish})
                print_stats(st, quiet, stats, seed, warm)
                warm = None
        return

    text = prompt if messages_file == "-" else read_prompt(prompt, encoding_errors)
    ids = encode(text)
    if echo is None:
        echo = stdout_is_terminal()
    if chat and echo:
        text = model.tokenizer.decode(ids)  # echo what the model sees: the rendered conversation
    st = GenerationStats()
    if not stream_line(generate(model, ids, stats=st, **kwargs), (text or "") if echo else ""):
        return
    print_stats(st, quiet, stats, seed, warm)
