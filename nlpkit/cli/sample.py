"""`nlpkit sample [PROMPT] -n N`: N continuations in one batch, as records with their log-probabilities;
`--dist` prints the next-token distribution after the filters instead (core: nlpkit/lm/generation/__init__.py);
`--prompts FILE`: N continuations of every prompt, decoded together (core: nlpkit/lm/generation/batch_sampling.py;
options shared with `generate`: nlpkit/cli/decoding.py)."""

from __future__ import annotations

import click

from nlpkit.cli.common import common_options, model_options, open_writer
from nlpkit.cli.decoding import (chat_options, check_chat, check_prompts, decoding_options, decoding_signature,
                                 load_for_decoding, make_prompt, print_batch_stats, print_stats, prompts_options,
                                 read_prompt, read_prompts, sampling_config, was_cut)
from nlpkit.cli.model_line import verbose_option
from nlpkit.cli.options import Count

MAX_BATCH = 4096   # continuations decoded together: each row holds a KV cache


@click.command("sample")
@click.argument("prompt", required=False)
@click.option("-n", "n", type=Count(1, MAX_BATCH), default=4, show_default=True,
              help="Number of continuations (of each prompt with --prompts), decoded together in one batch.")
@click.option("--dist", is_flag=True,
              help="Print the next-token distribution after the filters (token, id, probability, cumulative).")
@prompts_options("One prompt per line ('-' = stdin): N continuations of each, records in input order.",
                 "--prompts: decode up to N continuations together (every prompt's -n), one forward per step for "
                 "all (a finished one's place goes to the next); the draws do not depend on it [32, fewer while their KV caches would take over a quarter of the free memory].")
@model_options
@verbose_option
@decoding_options
@chat_options
@common_options
def command(prompt, n, dist, prompts_file, field, batch_size, model, verbose, decoding, fmt,
            no_signature, quiet, encoding_errors, chat=False, system=None, messages_file=None):
    """Draw N continuations of PROMPT (argument, or stdin) in one batch: the prompt is prefilled once and
    its KV cache shared by the N rows. Each record has the text, its token count, and its total
    log-probability under the model (logprob) and under the filtered distribution it was drawn from
    (logprob_filtered); the count and both log-probabilities include the EOS token when one ended
    the text (`generate`'s count leaves it out); JSON/JSONL records also carry the token ids. No
    prompt: start from BOS. Sampling defaults and the seed work as in `nlpkit generate`
    (generation_config.json, else llama.cpp's; an n-gram model unfiltered at temperature 1; a random
    seed unless --seed, shown by --stats and in the signature).

    No PROMPT with empty stdin is an error (PROMPT '' starts from the BOS token).

    --prompts FILE: N continuations of every line's prompt (an empty line starts from BOS; with
    --field NAME the file is JSONL, the prompt each record's field NAME), all decoded together, up
    to --batch-size continuations at once; each record carries prompt_index (0-based, in file
    order) and the record's id with --field. Continuation j of a prompt draws as row j of
    `nlpkit sample PROMPT -n N --seed S` does: each prompt's continuations are the ones it gets
    alone, whatever the batch size and the other prompts. An empty FILE is an error; --dist shows
    one prompt's distribution: not with --prompts.

    \b
    Examples:
      nlpkit sample "The weather today" -n 8 --temperature 0.8 --top-k 40 --seed 1
      nlpkit sample "The weather today" --dist --top-p 0.9
      nlpkit sample --prompts prompts.txt -n 4 --seed 1 --format jsonl
      nlpkit sample -m SmolLM2-135M-Instruct.Q4_1.gguf -n 4 \\
          --chat "Name a fruit." --system "Answer in one word."
    """
    from nlpkit.lm.generation import GenerationStats, next_token_distribution, sample_batch

    check_prompts(prompt, prompts_file, field, batch_size, decoding, messages_file)
    if dist and prompts_file is not None:
        raise click.UsageError("--dist shows one prompt's next-token distribution: not with --prompts")
    check_chat(chat, system, messages_file)
    lines = read_prompts(prompts_file, encoding_errors, field) if prompts_file is not None else None
    opts = decoding
    lm = load_for_decoding(model, quiet, verbose)
    cfg = sampling_config(lm, opts)
    seed = opts.drawn_seed() if not dist else None  # a distribution draws nothing: no seed to record
    if lines is not None:
        _prompts(lm, lines, field, n, batch_size, opts, cfg, seed, fmt, no_signature, quiet, chat, system,
                 messages_file)
        return
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
    cut = {"truncated": was_cut(p)} if opts.truncate_prompt else {}   # --truncate-prompt: whether it cut
    with open_writer(_COLUMNS + [*cut], fmt, sig, no_signature) as out:
        for s in samples:
            out.write({**_record(s), **cut})
    if any(s.finish == "context" for s in samples):
        st.finish = "context"
    print_stats(lm, st, quiet, opts.stats, seed, warm)


_COLUMNS = ["index", "text", "tokens", "logprob", "logprob_filtered", "finish"]


def _record(s) -> dict:
    """One continuation's record (`ids`: JSON/JSONL only; they let anyone recompute the log-probabilities)."""
    return {"index": s.index, "text": s.text, "tokens": len(s.ids), "logprob": s.logprob,
            "logprob_filtered": s.logprob_filtered, "finish": s.finish, "ids": s.ids}


def _prompts(lm, lines, field, n, batch_size, opts, cfg, seed, fmt, no_signature, quiet, chat, system,
             messages_file) -> None:
    """--prompts: every prompt's N continuations, decoded together (`batch_sampling.sample_prompts`; with
    --no-kv-cache or --sliding one prompt at a time, `sample_batch` as for a PROMPT), records in input order, each
    prompt's written as soon as it and every earlier one are done."""
    from nlpkit.cli.common import warn
    from nlpkit.lm.generation.batch_generation import DEFAULT_BATCH, BatchStats
    from nlpkit.lm.generation.batch_sampling import sample_prompts
    from nlpkit.lm.generation import GenerationStats, sample_batch

    warm = lm.warm_up() if opts.stats else None
    kwargs = opts.decode_kwargs(cfg)
    ids_col = ["id"] if field is not None else []
    sig = decoding_signature("sample", lm, cfg, seed=seed, max_new_tokens=opts.max_new_tokens, stops=opts.stops,
                             sliding=opts.sliding, n=n, **({"chat": True} if chat else {}))
    pids: dict[int, object] = {}
    prompt_tokens: dict[int, int] = {}
    cut = ["truncated"] if opts.truncate_prompt else []   # --truncate-prompt: each record says whether it cut
    cuts: dict[int, bool] = {}

    def prompts():
        for i, (pid, text, where) in enumerate(lines):
            p = make_prompt(lm, text, opts, chat, system, messages_file, quiet, where)
            pids[i], prompt_tokens[i], cuts[i] = pid, len(p.ids), was_cut(p)
            yield p

    with open_writer(["prompt_index", *ids_col, *_COLUMNS, *cut], fmt, sig, no_signature) as out:
        def write(i, samples):
            for s in samples:
                out.write({"prompt_index": i, **({"id": pids[i]} if ids_col else {}), **_record(s),
                           **({"truncated": cuts[i]} if cut else {})})
            del pids[i], cuts[i]

        if opts.no_kv_cache or opts.sliding:
            for i, p in enumerate(prompts()):
                del prompt_tokens[i]
                st = GenerationStats()
                samples = sample_batch(lm, p, n, stats=st, **kwargs)
                write(i, samples)
                if any(s.finish == "context" for s in samples):
                    st.finish = "context"
                print_stats(lm, st, quiet, opts.stats, seed, warm)
                warm = None
            return
        st = BatchStats()
        for i, samples in enumerate(sample_prompts(lm, prompts(), n, batch_size=batch_size or DEFAULT_BATCH,
                                                   max_new_tokens=kwargs["max_new_tokens"], sampling=cfg,
                                                   seed=seed, stop=kwargs["stop"], ignore_eos=kwargs["ignore_eos"],
                                                   stats=st)):
            write(i, samples)
            tokens = prompt_tokens.pop(i)
            if any(s.finish == "context" for s in samples):
                warn(f"prompt {i}: the context is full ({tokens} prompt + "
                     f"{max(len(s.ids) for s in samples)} new tokens): stopped (use a shorter prompt)", quiet)
    print_batch_stats(lm, st, opts.stats, seed, warm)
