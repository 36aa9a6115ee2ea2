"""`nlpkit generate [PROMPT]`: stream one continuation of a prompt to stdout (core: nlpkit/lm/generation/__init__.py;
options shared with `sample`: nlpkit/cli/decoding.py)."""

from __future__ import annotations

import click

from nlpkit.cli.common import common_options, model_options, open_writer, stream_line
from nlpkit.cli.decoding import (chat_options, check_chat, check_prompts, decoding_options, decoding_signature,
                                 load_for_decoding, make_prompt, print_batch_stats, print_stats, prompts_options,
                                 read_prompt, read_prompts, sampling_config, was_cut)
from nlpkit.cli.model_line import verbose_option


@click.command("generate")
@click.argument("prompt", required=False)
@prompts_options("One prompt per line ('-' = stdin): one record per prompt instead of streaming.",
                 "--prompts: decode up to N prompts together, one forward per step for all (a finished prompt's "
                 "place goes to the next); records still come in input order [32, fewer while their KV caches would take over a quarter of the free memory].")
@click.option("--echo/--no-echo", default=None,
              help="Print the prompt before the continuation [default: on a terminal].")
@model_options
@verbose_option
@decoding_options
@chat_options
@common_options
def command(prompt, prompts_file, field, batch_size, echo, model, verbose, decoding, fmt,
            no_signature, quiet, encoding_errors, chat=False, system=None, messages_file=None):
    """Stream one continuation of PROMPT (argument, or piped stdin) to stdout as it is generated.

    No PROMPT with empty stdin is an error (PROMPT '' starts from the BOS token); so is a --prompts
    FILE without a prompt (empty, or blank lines only with --field), as in `sample`. With --field NAME
    the --prompts file is JSONL: the prompt is each record's field NAME, and its `id` is carried to
    the record. A --prompts line too long for the context is an error naming its file and line; with
    --truncate-prompt it is cut (a warning names the line) and the records carry `truncated`.

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

    check_prompts(prompt, prompts_file, field, batch_size, decoding, messages_file)
    check_chat(chat, system, messages_file)
    prompts = read_prompts(prompts_file, encoding_errors, field) if prompts_file is not None else None
    opts = decoding
    lm = load_for_decoding(model, quiet, verbose)
    cfg = sampling_config(lm, opts)
    seed = opts.drawn_seed()
    warm = lm.warm_up() if opts.stats else None
    kwargs = opts.decode_kwargs(cfg)
    sig = decoding_signature("generate", lm, cfg, seed=seed, max_new_tokens=opts.max_new_tokens, stops=opts.stops,
                             sliding=opts.sliding, **({"chat": True} if chat else {}))

    def encode(text: str, where: str | None = None):
        return make_prompt(lm, text, opts, chat, system, messages_file, quiet, where)

    if prompts is not None or fmt is not None:
        if prompts is None:
            prompts = [(None, prompt if messages_file == "-"
                        else read_prompt(prompt, encoding_errors, messages_file is None), None)]
        ids = ["id"] if field is not None else []
        cut = ["truncated"] if opts.truncate_prompt else []   # --truncate-prompt: each record says whether it cut
        with open_writer(["index", *ids, "prompt", "text", "tokens", "finish", *cut], fmt, sig, no_signature) as out:
            if prompts_file is not None and not opts.no_kv_cache and not opts.sliding:
                _batched(lm, prompts, encode, opts, kwargs, batch_size, out, quiet, seed, warm, bool(ids))
                return
            for i, (pid, line, where) in enumerate(prompts):
                st = GenerationStats()
                p = encode(line, where)
                text = "".join(generate(lm, p, stats=st, **kwargs))
                out.write({"index": i, **({"id": pid} if ids else {}), "prompt": line, "text": text,
                           "tokens": st.new_tokens - (st.finish == "eos"), "finish": st.finish,
                           **({"truncated": was_cut(p)} if cut else {})})
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


def _batched(lm, prompts, encode, opts, kwargs, batch_size, out, quiet, seed, warm, with_ids) -> None:
    """--prompts decoded together (`nlpkit.lm.generation.batch_generation`): each record written as soon as it and the ones
    before it are done; with --stats one line for the whole run."""
    from nlpkit.cli.common import warn
    from nlpkit.lm.generation.batch_generation import DEFAULT_BATCH, BatchStats, Request, generate_batched

    lines: dict[int, tuple] = {}
    streams: dict[int, object] = {}

    def requests():
        for i, (pid, line, where) in enumerate(prompts):
            p = encode(line, where)
            lines[i] = pid, line, was_cut(p)
            stream = streams[i] = lm.text_stream(p, kwargs["stop"])

            def on_token(tid, stream=stream):
                stream.push(tid)
                return stream.stopped

            yield Request(p, kwargs["max_new_tokens"], on_token)

    st = BatchStats()
    for g in generate_batched(lm, requests(), batch_size=batch_size or DEFAULT_BATCH, sampling=kwargs["sampling"],
                              seed=kwargs["seed"], ignore_eos=kwargs["ignore_eos"], stats=st):
        stream = streams.pop(g.index)
        pid, line, cut = lines.pop(g.index)
        out.write({"index": g.index, **({"id": pid} if with_ids else {}), "prompt": line, "text": stream.text(),
                   "tokens": len(g.ids), "finish": g.finish, **({"truncated": cut} if opts.truncate_prompt else {})})
        if g.finish == "context":
            warn(f"prompt {g.index}: the context is full ({g.prompt_tokens} prompt + {len(g.ids)} new tokens): "
                 "stopped (use a shorter prompt)", quiet)
    print_batch_stats(lm, st, opts.stats, seed, warm)
