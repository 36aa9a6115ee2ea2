"""`nlpkit generate [PROMPT]`: stream one continuation of a prompt to stdout (core: nlpkit/lm/generation.py;
options shared with `sample`: nlpkit/cli/decoding.py)."""

from __future__ import annotations

import click

from nlpkit.cli.common import common_options, model_options, open_writer, stream_line
from nlpkit.cli.options import file_type
from nlpkit.cli.decoding import (chat_options, check_chat, decoding_options, decoding_signature, load_for_decoding,
                                 make_prompt, print_stats, read_prompt, sampling_config)


@click.command("generate")
@click.argument("prompt", required=False)
@click.option("--prompts", "prompts_file", metavar="FILE", default=None, type=file_type(),
              help="One prompt per line ('-' = stdin): one record per prompt instead of streaming.")
@click.option("--echo/--no-echo", default=None,
              help="Print the prompt before the continuation [default: on a terminal].")
@model_options
@decoding_options
@chat_options
@common_options
def command(prompt, prompts_file, echo, model_path, rope_scaling, rope_factor, decoding, fmt, no_signature, quiet,
            encoding_errors, chat=False, system=None, messages_file=None):
    """Stream one continuation of PROMPT (argument, or piped stdin) to stdout as it is generated.

    No PROMPT with empty stdin is an error (PROMPT '' starts from the BOS token); an empty
    --prompts file gives no rows.

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
      nlpkit generate "Once upon a time" --max-new-tokens 50 --top-p 0.9
      nlpkit generate --prompts prompts.txt --temperature 0 --format jsonl
      nlpkit generate -m SmolLM2-135M-Instruct.Q4_1.gguf --temperature 0 \\
          --chat "What is the capital of France?"
    """
    from nlpkit.io import stdout_is_terminal
    from nlpkit.lm.generation import GenerationStats, generate

    if prompt is not None and prompts_file is not None:
        raise click.UsageError("give a PROMPT or --prompts FILE, not both")
    check_chat(chat, system, messages_file)
    opts = decoding
    lm = load_for_decoding(model_path, rope_scaling, rope_factor, quiet)
    cfg = sampling_config(lm, opts)
    seed = opts.drawn_seed()
    warm = lm.warm_up() if opts.stats else None
    kwargs = opts.decode_kwargs(cfg)
    sig = decoding_signature("generate", lm, cfg, seed=seed, max_new_tokens=opts.max_new_tokens, stops=opts.stops,
                             sliding=opts.sliding, **({"chat": True} if chat else {}))

    def encode(text: str):
        return make_prompt(lm, text, opts, chat, system, messages_file, quiet)

    if prompts_file is not None or fmt is not None:
        if prompts_file is not None:
            from nlpkit.io import iter_lines

            prompts = iter_lines(prompts_file, errors=encoding_errors)
        else:
            prompts = [prompt if messages_file == "-" else read_prompt(prompt, encoding_errors, messages_file is None)]
        with open_writer(["index", "prompt", "text", "tokens", "finish"], fmt, sig, no_signature) as out:
            for i, line in enumerate(prompts):
                st = GenerationStats()
                text = "".join(generate(lm, encode(line), stats=st, **kwargs))
                out.write({"index": i, "prompt": line, "text": text, "tokens": st.new_tokens - (st.finish == "eos"),
                           "finish": st.finish})
                print_stats(lm, st, quiet, opts.stats, seed, warm)
                warm = None
        return

    p = encode(prompt if messages_file == "-" else read_prompt(prompt, encoding_errors, messages_file is None))
    if echo is None:
        echo = stdout_is_terminal()
    st = GenerationStats()
    if not stream_line(generate(lm, p, stats=st, **kwargs), (p.echo or "") if echo else ""):
        return
    print_stats(lm, st, quiet, opts.stats, seed, warm)
