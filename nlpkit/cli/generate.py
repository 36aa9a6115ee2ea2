"""`nlpkit generate [PROMPT]`: stream one continuation of a prompt to stdout.

Options shared with `nlpkit sample` live here (`decoding_options`, `load_for_decoding`,
`decoding_signature`, `read_prompt`, `print_stats`); the work is `nlpkit.lm.generation`.
"""

from __future__ import annotations

import sys

import click

from nlpkit.cli.common import (common_options, model_name, model_options, open_writer, rope_label,
                               warn)


def decoding_options(f):
    """--max-new-tokens, the sampling knobs, --seed, --stop, --no-kv-cache, --sliding, --stats,
    --truncate-prompt, --ignore-eos (in that order of parameters)."""
    opts = [
        click.option("--max-new-tokens", type=click.IntRange(min=0), default=128, show_default=True,
                     help="Stop after this many new tokens."),
        click.option("--temperature", type=float, default=1.0, show_default=True,
                     help="Divide the logits by T; 0 = greedy (always the most likely token)."),
        click.option("--top-k", type=int, default=0, show_default=True,
                     help="Keep the K most likely tokens (ties at the boundary kept); 0 = disabled."),
        click.option("--top-p", type=float, default=1.0, show_default=True,
                     help="Nucleus: keep the most likely tokens whose probabilities reach P; in (0, 1], 1 = disabled."),
        click.option("--min-p", type=float, default=0.0, show_default=True,
                     help="Drop tokens below P x the top token's probability; 0 = disabled."),
        click.option("--repetition-penalty", type=float, default=1.0, show_default=True,
                     help="Divide (positive) or multiply (negative) the logits of tokens already seen; 1 = off."),
        click.option("--seed", type=int, default=0, show_default=True,
                     help="Random seed: the same seed gives the same text."),
        click.option("--stop", "stops", multiple=True, metavar="STR",
                     help="Stop when the text contains STR (not printed). Repeatable."),
        click.option("--no-kv-cache", is_flag=True,
                     help="Recompute the whole sequence every step (slow; for comparison)."),
        click.option("--sliding", is_flag=True,
                     help="When the context is full, forget the oldest quarter and continue (default: stop)."),
        click.option("--stats", is_flag=True, help="Print prefill and decode tokens/s on stderr."),
        click.option("--truncate-prompt", is_flag=True,
                     help="Drop the start of a too-long prompt (leaving room for --max-new-tokens) instead of failing."),
        click.option("--ignore-eos", is_flag=True, help="Keep generating after the end-of-sequence token."),
    ]
    for deco in reversed(opts):
        f = deco(f)
    return f


def sampling_config(temperature: float, top_k: int, top_p: float, min_p: float, repetition_penalty: float):
    from nlpkit.lm.sampling import SamplingConfig

    return SamplingConfig(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p,
                          repetition_penalty=repetition_penalty).validate()


def load_for_decoding(model_path: str | None, rope_scaling: str | None = None,
                      rope_factor: float | None = None):
    from nlpkit.errors import NlpkitError
    from nlpkit.lm.loaders import load_model

    model = load_model(model_path, rope_scaling=rope_scaling, rope_factor=rope_factor)
    if model.tokenizer is None:
        raise NlpkitError(f"model {model.source}: no tokenizer found (tokenizer.json, or vocab.json + merges.txt)")
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


def prompt_ids(model, text: str, max_new_tokens: int, truncate: bool) -> list[int]:
    from nlpkit.lm.generation import encode_prompt, prepare_prompt

    return prepare_prompt(model, encode_prompt(model, text), max_new_tokens=max_new_tokens, truncate=truncate)


def print_stats(stats, quiet: bool = False, show: bool = False) -> None:
    """--stats line on stderr; the context-full notice unless --quiet."""
    if stats.finish == "context":
        warn(f"the context is full ({stats.prompt_tokens} prompt + {stats.new_tokens} new tokens): stopped "
             "(use --sliding to keep going, or a shorter prompt)", quiet)
    if show:
        rows = f" x {stats.batch} rows" if stats.batch > 1 else ""
        sys.stderr.write(
            f"prefill: {stats.prompt_tokens} tokens in {stats.prefill_seconds:.3f} s ({stats.prefill_tps:.1f} tok/s); "
            f"decode: {stats.new_tokens}{rows} tokens in {stats.decode_seconds:.3f} s ({stats.decode_tps:.1f} tok/s); "
            f"finish: {stats.finish}\n")


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the final flush after a broken pipe cannot fail (click would exit 1)."""
    import os

    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


@click.command("generate")
@click.argument("prompt", required=False)
@click.option("--prompts", "prompts_file", metavar="FILE", default=None,
              help="One prompt per line ('-' = stdin): one JSONL record per prompt instead of streaming.")
@click.option("--echo", is_flag=True, help="Print the prompt before the continuation.")
@model_options
@decoding_options
@common_options
def command(prompt, prompts_file, echo, model_path, rope_scaling, rope_factor, max_new_tokens, temperature, top_k, top_p, min_p,
            repetition_penalty, seed, stops, no_kv_cache, sliding, stats, truncate_prompt, ignore_eos,
            fmt, no_signature, quiet, encoding_errors):
    """Stream one continuation of PROMPT (argument, or stdin) to stdout as it is generated.

    With no prompt at all, generation starts from the model's BOS token. The text goes to stdout
    as plain text; --format/--no-signature apply to the records of --prompts. --temperature 0 is greedy;
    --top-k 0, --top-p 1, --min-p 0 and --repetition-penalty 1 disable those filters (the defaults),
    applied in transformers' order: repetition penalty, temperature, top-k, top-p, min-p.

    \b
    Examples:
      nlpkit generate "Once upon a time" --max-new-tokens 50 --temperature 0.7 --top-p 0.9
      nlpkit generate --prompts prompts.txt --temperature 0 --format jsonl
    """
    from nlpkit.lm.generation import GenerationStats, generate

    if prompt is not None and prompts_file is not None:
        raise click.UsageError("give a PROMPT or --prompts FILE, not both")
    cfg = sampling_config(temperature, top_k, top_p, min_p, repetition_penalty)
    model = load_for_decoding(model_path, rope_scaling, rope_factor)
    kwargs = dict(max_new_tokens=max_new_tokens, sampling=cfg, seed=seed, stop=stops, use_cache=not no_kv_cache,
                  sliding=sliding, ignore_eos=ignore_eos)

    if prompts_file is not None:
        from nlpkit.io import iter_lines

        sig = decoding_signature("generate", model, cfg, seed=seed, max_new_tokens=max_new_tokens, stops=stops,
                                 sliding=sliding)
        with open_writer(["index", "prompt", "text", "tokens", "finish"], fmt or "jsonl", sig, no_signature) as out:
            for i, line in enumerate(iter_lines(prompts_file, errors=encoding_errors)):
                st = GenerationStats()
                ids = prompt_ids(model, line, max_new_tokens, truncate_prompt)
                text = "".join(generate(model, ids, stats=st, **kwargs))
                out.write({"index": i, "prompt": line, "text": text, "tokens": st.new_tokens - (st.finish == "eos"),
                           "finish": st.finish})
                print_stats(st, quiet, stats)
        return

    text = read_prompt(prompt, encoding_errors)
    ids = prompt_ids(model, text, max_new_tokens, truncate_prompt)
    st = GenerationStats()
    out = sys.stdout
    try:
        if echo and text:
            out.write(text)
            out.flush()
        last = ""
        for piece in generate(model, ids, stats=st, **kwargs):
            out.write(piece)
            out.flush()
            last = piece
        if out.isatty() and not last.endswith("\n"):
            out.write("\n")
        out.flush()
    except BrokenPipeError:  # `| head`: the reader has gone; stop quietly with status 0
        _silence_stdout()
        return
    print_stats(st, quiet, stats)
