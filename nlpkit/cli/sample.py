"""`nlpkit sample [PROMPT] -n N`: N continuations in one batch, as records with their log-probabilities;
`--dist` prints the next-token distribution after the filters instead."""

from __future__ import annotations

import click

from nlpkit.cli.common import common_options, model_options, open_writer
from nlpkit.cli.generate import (chat_ids, chat_options, chat_prompt, decoding_options, decoding_signature,
                                 load_for_decoding, print_stats, prompt_ids, read_prompt, resolve_seed,
                                 sampling_config, warm_up)


def token_text(tokenizer, token_id: int) -> str:
    """How one token reads: its bytes as UTF-8, with a partial character shown as \\xNN escapes."""
    return tokenizer.decode_bytes([token_id]).decode("utf-8", errors="backslashreplace")


@click.command("sample")
@click.argument("prompt", required=False)
@click.option("-n", "n", type=click.IntRange(min=1), default=4, show_default=True,
              help="Number of continuations, decoded together in one batch.")
@click.option("--dist", is_flag=True,
              help="Print the next-token distribution after the filters (token, id, probability, cumulative).")
@model_options
@decoding_options
@chat_options
@common_options
def command(prompt, n, dist, model_path, rope_scaling, rope_factor, max_new_tokens, temperature, top_k, top_p, min_p, repetition_penalty,
            seed, stops, no_kv_cache, sliding, stats, truncate_prompt, ignore_eos,
            fmt, no_signature, quiet, encoding_errors, chat=False, system=None, messages_file=None):
    """Draw N continuations of PROMPT (argument, or stdin) in one batch: the prompt is prefilled once and
    its KV cache shared by the N rows. Each record has the text, its token count, and its total
    log-probability under the model (logprob) and under the filtered distribution it was drawn from
    (logprob_filtered); the count and both log-probabilities include the EOS token when one ended
    the text (`generate`'s count leaves it out); JSON/JSONL records also carry the token ids. No
    prompt: start from BOS. Sampling defaults and the seed work as in `nlpkit generate`
    (generation_config.json, else llama.cpp's; an n-gram model unfiltered at temperature 1; a random
    seed unless --seed, shown by --stats and in the signature).

    \b
    Examples:
      nlpkit sample "The weather today" -n 8 --temperature 0.8 --top-k 40 --seed 1
      nlpkit sample "The weather today" --dist --top-p 0.9
      nlpkit sample -m SmolLM2-135M-Instruct.Q4_1.gguf --chat "Name a fruit." --system "Answer in one word." -n 4
    """
    from nlpkit.cli.ngram import ngram_model_path
    from nlpkit.lm.generation import GenerationStats, next_token_distribution, sample_batch

    if ngram_model_path(model_path):  # an ARPA / counts file (nlpkit/cli/ngram.py)
        from nlpkit.cli.ngram import ngram_sample, ngram_sampling, refuse_neural_options
        refuse_neural_options(click.get_current_context())
        cfg, seed = ngram_sampling(temperature, top_k, top_p, min_p, repetition_penalty, seed)
        return ngram_sample(ngram_model_path(model_path), read_prompt(prompt, encoding_errors), n, dist, cfg,
                            max_new_tokens, seed, stops, ignore_eos, stats, fmt, no_signature, quiet)
    model = load_for_decoding(model_path, rope_scaling, rope_factor)
    cfg = sampling_config(model, temperature, top_k, top_p, min_p, repetition_penalty)
    seed = resolve_seed(seed)
    text = prompt if messages_file == "-" else read_prompt(prompt, encoding_errors)
    text, end_ids = chat_prompt(model, text, chat, system, messages_file)
    ids = chat_ids(model, text, max_new_tokens, truncate_prompt, quiet) if chat else \
        prompt_ids(model, text, max_new_tokens, truncate_prompt, quiet)
    chat_sig = {"chat": True} if chat else {}

    if dist:
        sig = decoding_signature("sample-dist", model, cfg, seed=seed, max_new_tokens=0, stops=(), sliding=False,
                                 **chat_sig)
        with open_writer(["token", "id", "probability", "cumulative"], fmt, sig, no_signature, digits=6) as out:
            cum = 0.0
            for tid, p in next_token_distribution(model, ids, cfg):
                cum += p
                out.write({"token": token_text(model.tokenizer, tid), "id": tid, "probability": p,
                           "cumulative": cum})
        return

    warm = warm_up(model) if stats else None
    st = GenerationStats()
    samples = sample_batch(model, ids, n, max_new_tokens=max_new_tokens, sampling=cfg, seed=seed, stop=stops,
                           use_cache=not no_kv_cache, sliding=sliding, ignore_eos=ignore_eos, stats=st,
                           eos_ids=end_ids)
    sig = decoding_signature("sample", model, cfg, seed=seed, max_new_tokens=max_new_tokens, stops=stops,
                             sliding=sliding, n=n, **chat_sig)
    with open_writer(["index", "text", "tokens", "logprob", "logprob_filtered", "finish"], fmt, sig,
                     no_signature) as out:
        for s in samples:
            out.write({"index": s.index, "text": s.text, "tokens": len(s.ids), "logprob": s.logprob,
                       "logprob_filtered": s.logprob_filtered, "finish": s.finish,
                       "ids": s.ids})  # json/jsonl only: lets anyone recompute the log-probabilities
    if any(s.finish == "context" for s in samples):
        st.finish = "context"
    print_stats(st, quiet, stats, seed, warm)
