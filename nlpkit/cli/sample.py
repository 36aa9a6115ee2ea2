"""`nlpkit sample [PROMPT] -n N`: N continuations in one batch, as records with their log-probabilities;
`--dist` prints the next-token distribution after the filters instead (core: nlpkit/lm/generation.py;
options shared with `generate`: nlpkit/cli/decoding.py)."""

from __future__ import annotations

import click

from nlpkit.cli.common import common_options, model_options, open_writer
from nlpkit.cli.decoding import (chat_options, check_chat, decoding_options, decoding_signature, load_for_decoding,
                                 make_prompt, print_stats, read_prompt, sampling_config)
from nlpkit.cli.options import Count

MAX_BATCH = 4096   # continuations decoded together: each row holds a KV cache


@click.command("sample")
@click.argument("prompt", required=False)
@click.option("-n", "n", type=Count(1, MAX_BATCH), default=4, show_default=True,
              help="Number of continuations, decoded together in one batch.")
@click.option("--dist", is_flag=True,
              help="Print the next-token distribution after the filters (token, id, probability, cumulative).")
@model_options
@decoding_options
@chat_options
@common_options
def command(prompt, n, dist, model_path, rope_scaling, rope_factor, decoding, fmt, no_signature, quiet,
            encoding_errors, chat=False, system=None, messages_file=None):
    """Draw N continuations of PROMPT (argument, or stdin) in one batch: the prompt is prefilled once and
    its KV cache shared by the N rows. Each record has the text, its token count, and its total
    log-probability under the model (logprob) and under the filtered distribution it was drawn from
    (logprob_filtered); the count and both log-probabilities include the EOS token when one ended
    the text (`generate`'s count leaves it out); JSON/JSONL records also carry the token ids. No
    prompt: start from BOS. Sampling defaults and the seed work as in `nlpkit generate`
    (generation_config.json, else llama.cpp's; an n-gram model unfiltered at temperature 1; a random
    seed unless --seed, shown by --stats and in the signature).

    No PROMPT with empty stdin is an error (PROMPT '' starts from the BOS token).

    \b
    Examples:
      nlpkit sample "The weather today" -n 8 --temperature 0.8 --top-k 40 --seed 1
      nlpkit sample "The weather today" --dist --top-p 0.9
      nlpkit sample -m SmolLM2-135M-Instruct.Q4_1.gguf -n 4 \\
          --chat "Name a fruit." --system "Answer in one word."
    """
    from nlpkit.lm.generation import GenerationStats, next_token_distribution, sample_batch

    check_chat(chat, system, messages_file)
    opts = decoding
    lm = load_for_decoding(model_path, rope_scaling, rope_factor, quiet)
    cfg = sampling_config(lm, opts)
    seed = opts.drawn_seed()
    text = prompt if messages_file == "-" else read_prompt(prompt, encoding_errors, messages_file is None)
    p = make_prompt(lm, text, opts, chat, system, messages_file, quiet)
    chat_sig = {"chat": True} if chat else {}

    if dist:
        sig = decoding_signature("sample-dist", lm, cfg, seed=seed, max_new_tokens=0, stops=(), sliding=False,
                                 **chat_sig)
        with open_writer(["token", "id", "probability", "cumulative"], fmt, sig, no_signature, digits=6) as out:
            cum = 0.0
            for tid, prob in next_token_distribution(lm, p, cfg):
                cum += prob
                out.write({"token": lm.token_text(tid), "id": tid, "probability": prob, "cumulative": cum})
        return

    warm = lm.warm_up() if opts.stats else None
    st = GenerationStats()
    samples = sample_batch(lm, p, n, stats=st, **opts.decode_kwargs(cfg))
    sig = decoding_signature("sample", lm, cfg, seed=seed, max_new_tokens=opts.max_new_tokens, stops=opts.stops,
                             sliding=opts.sliding, n=n, **chat_sig)
    with open_writer(["index", "text", "tokens", "logprob", "logprob_filtered", "finish"], fmt, sig,
                     no_signature) as out:
        for s in samples:
            out.write({"index": s.index, "text": s.text, "tokens": len(s.ids), "logprob": s.logprob,
                       "logprob_filtered": s.logprob_filtered, "finish": s.finish,
                       "ids": s.ids})  # json/jsonl only: lets anyone recompute the log-probabilities
    if any(s.finish == "context" for s in samples):
        st.finish = "context"
    print_stats(lm, st, quiet, opts.stats, seed, warm)
