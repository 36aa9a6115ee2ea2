"""An n-gram model (ARPA or nlpkit counts file) as the --model of perplexity, sample and generate.

The commands call `ngram_model_path` first; when it names an n-gram model they hand over to the
functions here (core: nlpkit/lm/ngram/), which print the same kinds of records.
"""

from __future__ import annotations

import os
from typing import Iterator

import click

from nlpkit.cli.common import open_writer, progress, stream_line, warn

TOTAL = "(total)"  # the file cell of the corpus total row, as `nlpkit perplexity` writes it for neural models

SUMMARY = ["file", "sentences", "tokens", "oov", "zero_prob", "log10_prob", "ppl", "ppl_no_oov", "mean_nll",
           "bits_per_byte", "bytes"]
PER_LINE = ["file", "line", "tokens", "oov", "zero_prob", "log10_prob", "ppl", "ppl_no_oov", "mean_nll",
            "bits_per_byte"]
PER_TOKEN = ["file", "line", "position", "token", "id", "ngram", "log10_prob", "logprob", "oov"]
NEURAL_ONLY = ("mode", "context", "stride", "add_bos", "rope_scaling", "rope_factor", "no_kv_cache", "sliding",
               "truncate_prompt", "chat", "system", "messages_file")


def ngram_model_path(model_path: str | None) -> str | None:
    """The model path when it is an n-gram model file (--model, else $NLPKIT_MODEL), else None."""
    from nlpkit.lm.ngram import is_ngram_model

    path = model_path or os.environ.get("NLPKIT_MODEL") or None
    return path if path and is_ngram_model(path) else None


def refuse_neural_options(ctx: click.Context) -> None:
    """--mode/--context/--stride (and other options of neural models) mean nothing for an n-gram model."""
    from click.core import ParameterSource

    for name in NEURAL_ONLY:
        if name in ctx.params and ctx.get_parameter_source(name) not in (ParameterSource.DEFAULT, None):
            opt = "--" + name.replace("_", "-")
            if name == "add_bos":
                opt = "--add-bos/--no-add-bos"
            if name == "messages_file":
                opt = "--messages"
            raise click.UsageError(f"{opt} does not apply to an n-gram model ({_WHY.get(name, _WHY_DEFAULT)})")


_WHY_DEFAULT = "each line is scored whole, as one sentence <s> ... </s>, as KenLM's query scores it"
_WHY = {"rope_scaling": "it has no positions to scale", "rope_factor": "it has no positions to scale",
        "no_kv_cache": "it keeps no cache: each step looks up the last words", "sliding": "it has no context "
        "window: it sees the last n-1 words", "truncate_prompt": "it reads only the last n-1 words of a prompt",
        "chat": "it has no chat template", "system": "it has no chat template",
        "messages_file": "it has no chat template"}


def load(path: str, quiet: bool):
    from nlpkit.lm.ngram import load_ngram_model

    return load_ngram_model(path, warn=lambda m: warn(m, quiet))


def _signature(name: str, model, **extra) -> str:
    from nlpkit.signature import make_signature

    o = model.options
    return make_signature(name, model=model.name, ngram=f"{model.order}-{model.smoothing if model.kind == 'counts' else 'arpa'}",
                          lower=o.get("lowercase", "false") == "true",
                          tok="bpe" if o.get("tokenizer") else "whitespace", **extra)


def _record(p) -> dict:
    return {"sentences": p.sentences, "tokens": p.tokens, "oov": p.oov, "zero_prob": p.zero_prob,
            "log10_prob": p.log10_total, "ppl": p.perplexity, "ppl_no_oov": p.perplexity_no_oov,
            "mean_nll": p.mean_nll, "bits_per_byte": p.bits_per_byte, "bytes": p.bytes}


def ngram_perplexity(model_path: str, paths: list[str], per_line: bool, per_token: bool, fmt, no_signature: bool,
                     quiet: bool, encoding_errors: str, dask: str | None = None, shard_size: str | None = None) -> None:
    """`nlpkit perplexity --model lm.arpa`: KenLM query's figures plus NLL and bits per byte; with
    several files a corpus total row follows, as for a neural model. Per-token records always name
    their line (each line is a sentence, positions count from its first word). With --dask the
    workers score line shards (`scoring.score_shard`): the same records, digit for digit."""
    from contextlib import ExitStack

    from nlpkit.errors import NlpkitError
    from nlpkit.io import display_name
    from nlpkit.lm.ngram.line_scoring import NgramPerplexity, line_transform, score_source

    model = load(model_path, quiet)
    sig = _signature("perplexity", model)
    columns = PER_TOKEN if per_token else PER_LINE if per_line else SUMMARY
    several = len(paths) > 1 and not per_line and not per_token
    corpus = NgramPerplexity()
    with ExitStack() as stack:
        out = stack.enter_context(open_writer(columns, fmt, sig, no_signature, digits=6))
        tick = stack.enter_context(progress("tasks" if dask else "scoring", quiet=quiet))
        if dask:
            from nlpkit.distributed.cluster import connect
            from nlpkit.distributed.shards import parse_size
            from nlpkit.distributed.stages import ngram_perplexity_shards

            client = stack.enter_context(connect(dask, quiet))
            results = ngram_perplexity_shards(client, paths, os.path.abspath(model_path), encoding_errors,
                                              per_token, per_line, parse_size(shard_size), tick)
        else:
            transform = line_transform(model)
            results = ((k, b if per_token else b.line_sums(per_line)) for k, path in enumerate(paths)
                       for b in score_source(model, path, encoding_errors, transform))
        pending = next(results, None)
        for k, path in enumerate(paths):
            name = display_name(path)
            total = NgramPerplexity()
            lineno = 0
            while pending is not None and pending[0] == k:
                item = pending[1]
                if per_token:
                    total.add_batch(item)
                    for lineno, s in enumerate(item.lines(), lineno + 1):
                        out.write_many({"file": name, "line": lineno, "position": i, "token": w, "id": int(t),
                                        "ngram": int(n), "log10_prob": float(lp),
                                        "logprob": float(lp) * 2.302585092994046, "oov": bool(o)}
                                       for i, (w, t, n, lp, o)
                                       in enumerate(zip(s.words, s.ids.tolist(), s.ngram.tolist(), s.log10.tolist(),
                                                        s.oov.tolist())))
                else:
                    total.add_sums(item)
                    if per_line:
                        for lineno, one in enumerate(item.lines(), lineno + 1):
                            rec = _record(one)
                            rec.pop("sentences"), rec.pop("bytes")
                            out.write({"file": name, "line": lineno, **rec})
                pending = next(results, None)
            if total.sentences == 0 and not per_line:
                raise NlpkitError(f"{name}: empty text, nothing to score")
            if not per_line and not per_token:
                out.write({"file": name, **_record(total), **({"total": False} if several else {})})
                corpus.merge(total)
        if several:
            out.write({"file": TOTAL, **_record(corpus), "total": True})


def ngram_sampling(temperature, top_k, top_p, min_p, repetition_penalty, seed):
    """The sampling knobs (unset ones leave the distribution alone) and the seed (a fresh one if unset)."""
    from nlpkit.lm.sampling import SamplingConfig

    cfg = SamplingConfig(temperature=1.0 if temperature is None else temperature, top_k=top_k or 0,
                         top_p=1.0 if top_p is None else top_p, min_p=min_p or 0.0,
                         repetition_penalty=1.0 if repetition_penalty is None else repetition_penalty).validate()
    if seed is None:
        import secrets

        seed = secrets.randbelow(2**31)
    return cfg, seed


def _decoding(model_path: str, prompt_text: str, quiet: bool):
    """(model, the prompt's history, the BPE detokenizer or None, the model's text rewrite)."""
    from nlpkit.lm.ngram.sampling import prompt_history
    from nlpkit.lm.ngram.line_scoring import line_transform
    from nlpkit.lm.ngram.train import piece_detokenizer, recorded_tokenizer

    model = load(model_path, quiet)
    tok = recorded_tokenizer(model.options, model.source)        # found (and its sha256 checked) once
    transform = line_transform(model, tok)
    detok = piece_detokenizer(tok) if tok else None
    return model, prompt_history(model, prompt_text, transform), detok, transform


def _stats_line(st, show: bool) -> None:
    import sys

    if show:
        tps = st.new_tokens / st.decode_seconds if st.decode_seconds > 0 else float("inf")
        rows = f" x {st.batch} rows" if st.batch > 1 else ""
        sys.stderr.write(f"prompt: {st.prompt_tokens} words; decode: {st.new_tokens}{rows} words in "
                         f"{st.decode_seconds:.3f} s ({tps:.1f} words/s); finish: {st.finish}\n")


def ngram_sample(model_path: str, prompt_text: str, n: int, dist: bool, cfg, max_new_tokens: int, seed: int,
                 stops, ignore_eos: bool, stats: bool, fmt, no_signature: bool, quiet: bool) -> None:
    """`nlpkit sample --model lm.arpa`: N drawn continuations, or the next-word distribution."""
    from nlpkit.lm.generation import GenerationStats
    from nlpkit.lm.ngram.sampling import next_word_distribution, prompt_lead, sample_ngram

    model, history, detok, _ = _decoding(model_path, prompt_text, quiet)
    sampled = not cfg.greedy
    common = dict(temp=cfg.temperature, top_k=cfg.top_k if sampled else "none",
                  top_p=cfg.top_p if sampled else "none", min_p=cfg.min_p if sampled else "none",
                  rep=cfg.repetition_penalty, seed=seed if sampled else "none")
    if dist:
        sig = _signature("sample-dist", model, **common)
        with open_writer(["token", "id", "probability", "cumulative"], fmt, sig, no_signature, digits=6) as out:
            cum = 0.0
            for tid, p in next_word_distribution(model, history, cfg):
                cum += p
                out.write({"token": model.vocab[tid], "id": tid, "probability": p, "cumulative": cum})
        return
    st = GenerationStats()
    samples = sample_ngram(model, history, n, max_new_tokens=max_new_tokens, sampling=cfg, seed=seed, stop=stops,
                           ignore_eos=ignore_eos, lead=prompt_lead(prompt_text, detok), detok=detok, stats=st)
    sig = _signature("sample", model, **common, max_new=max_new_tokens, stop=len(stops), n=n)
    with open_writer(["index", "text", "tokens", "logprob", "logprob_filtered", "finish"], fmt, sig,
                     no_signature) as out:
        for s in samples:
            out.write({"index": s.index, "text": s.text, "tokens": len(s.ids), "logprob": s.logprob,
                       "logprob_filtered": s.logprob_filtered, "finish": s.finish, "ids": s.ids})
    _stats_line(st, stats)


def ngram_generate(model_path: str, prompt_text: str | None, prompts: list[str] | None, echo: bool | None, cfg,
                   max_new_tokens: int, seed: int, stops, ignore_eos: bool, stats: bool, fmt, no_signature: bool,
                   quiet: bool) -> None:
    """`nlpkit generate --model lm.arpa`: one continuation streamed word by word, as the neural path
    streams it (the prompt echoed on a terminal, a final newline); records with --format or --prompts."""
    from nlpkit.io import stdout_is_terminal
    from nlpkit.lm.generation import GenerationStats
    from nlpkit.lm.ngram.sampling import generate_ngram, prompt_history, prompt_lead

    model, history, detok, transform = _decoding(model_path, prompt_text or "", quiet)

    def run(text: str, hist: list[int], st) -> Iterator[str]:
        return generate_ngram(model, hist, max_new_tokens=max_new_tokens, sampling=cfg, seed=seed, stop=stops,
                              ignore_eos=ignore_eos, lead=prompt_lead(text, detok), detok=detok, stats=st)

    if prompts is not None or fmt is not None:
        sampled = not cfg.greedy
        sig = _signature("generate", model, temp=cfg.temperature, top_k=cfg.top_k if sampled else "none",
                         top_p=cfg.top_p if sampled else "none", min_p=cfg.min_p if sampled else "none",
                         rep=cfg.repetition_penalty, seed=seed if sampled else "none", max_new=max_new_tokens,
                         stop=len(stops))
        with open_writer(["index", "prompt", "text", "tokens", "finish"], fmt, sig, no_signature) as out:
            for i, line in enumerate(prompts if prompts is not None else [prompt_text or ""]):
                st = GenerationStats(prompt_tokens=len(history))
                text = "".join(run(line, prompt_history(model, line, transform), st))
                out.write({"index": i, "prompt": line, "text": text,
                           "tokens": st.new_tokens - (st.finish == "eos"), "finish": st.finish})
                _stats_line(st, stats)
        return
    if echo is None:
        echo = stdout_is_terminal()
    st = GenerationStats(prompt_tokens=len(history))
    if not stream_line(run(prompt_text or "", history, st), prompt_text if echo and prompt_text else ""):
        return
    _stats_line(st, stats)
