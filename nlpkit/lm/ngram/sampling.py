"""Sampling from an n-gram model with the same filters as the neural models (nlpkit.lm.sampling).

The prompt is the start of a sentence: ``<s>`` then its words (after the model's lowercasing /
tokenizer). Each step turns log10 p(w | history) over the vocabulary into logits (natural log),
applies repetition penalty -> temperature -> top-k -> top-p -> min-p and draws with one uniform
number per row from ``np.random.default_rng(seed)``, as `nlpkit.lm.generation` does. ``<s>`` and
``<unk>`` are never drawn; ``</s>`` ends the text (finish "eos"), or with `ignore_eos` ends the line
and starts a new sentence. Words are joined by single spaces. Where an MLE model never saw the
history (every word has probability 0), the history is shortened from the left until it was seen,
as NLTK's ``generate`` does.
"""

from __future__ import annotations

import math
import time
from typing import Callable, Iterator, Sequence

import numpy as np

from nlpkit.errors import UsageError
from nlpkit.lm.generation import GenerationStats, Sample
from nlpkit.lm.ngram.ngram_model import NgramModel
from nlpkit.lm.ngram.line_scoring import query_words
from nlpkit.lm.sampling import SamplingConfig, draw, probabilities, process_logits, token_logprobs

LN10 = math.log(10.0)


def prompt_history(model: NgramModel, text: str, transform: Callable[[str], str] | None = None) -> list[int]:
    """``<s>`` and the ids of the prompt's words (OOV -> <unk>)."""
    words = query_words(transform(text) if transform else text)
    ids, _ = model.lookup(words)
    return [model.bos_id] + ids.tolist()


def _logits(model: NgramModel, histories: list[list[int]]) -> np.ndarray:  # n histories -> [n, V]
    return np.stack([_next_logits(model, h) for h in histories])


def _next_logits(model: NgramModel, history: list[int]) -> np.ndarray:  # -> [V] float64
    """Natural-log scores of the next word, <s> and <unk> excluded. A history an MLE model never saw
    gives every word probability 0: its oldest word is dropped until one is left that was seen (the
    unigrams at the end), as NLTK's ``LanguageModel.generate`` backs off."""
    hist = list(history)[-(model.order - 1):] if model.order > 1 else []
    while True:
        out = model.next_log10(hist) * LN10             # float64: the filters keep it (process_logits)
        out[model.bos_id] = -np.inf
        if model.unk_id >= 0:
            out[model.unk_id] = -np.inf
        if not hist or np.isfinite(out).any():
            return out
        hist = hist[1:]


def next_word_distribution(model: NgramModel, history: list[int], cfg: SamplingConfig) -> list[tuple[int, float]]:
    """(id, probability) of every word left after the filters, most likely first."""
    logits = _logits(model, [history])
    seen = np.zeros(logits.shape, dtype=bool)
    seen[0, history] = True
    probs = probabilities(process_logits(logits, seen, cfg), cfg)[0]
    order = np.argsort(-probs, kind="stable")
    order = order[probs[order] > 0]
    return [(int(i), float(probs[i])) for i in order]


def sample_ngram(model: NgramModel, history: list[int], n: int, *, max_new_tokens: int, sampling: SamplingConfig,
                 seed: int | None, stop: Sequence[str] = (), ignore_eos: bool = False, joiner: str = " ",
                 lead: str = "", detok: Callable[[list[str]], str] | None = None,
                 stats: GenerationStats | None = None) -> list[Sample]:
    """N continuations drawn together (one [n, V] array of logits per step); `lead` goes before a
    text's first word, as in `generate_ngram` (so a sample's text is what generate prints)."""
    if n < 1:
        raise UsageError(f"-n must be at least 1, got {n}")
    stats = stats if stats is not None else GenerationStats()
    stats.prompt_tokens, stats.batch = len(history), n
    samples = [Sample(i) for i in range(n)]
    hists = [list(history) for _ in range(n)]
    words: list[list[str]] = [[] for _ in range(n)]
    active = np.ones(n, dtype=bool)
    if max_new_tokens <= 0:
        for s in samples:
            s.finish = "length"
        return samples
    for lp, lpf in stream_steps(model, hists, active, sampling, seed, stats):
        for i in np.flatnonzero(active):
            s, tid = samples[i], hists[i][-1]
            s.ids.append(tid)
            s.logprob += float(lp[i])
            s.logprob_filtered += float(lpf[i])
            if tid == model.eos_id:
                if not ignore_eos:
                    s.finish, active[i] = "eos", False
                    hists[i].pop()
                    continue
                words[i].append("\n")
                hists[i] = [model.bos_id]
            else:
                words[i].append(model.vocab[tid])
            s.text = _lead(words[i], lead) + _join(words[i], joiner, detok)
            hit = next((t for t in stop if t and t in s.text), None)
            if hit is not None:
                s.text = s.text[:s.text.index(hit)]
                s.finish, active[i] = "stop", False
            elif len(s.ids) >= max_new_tokens:
                s.finish, active[i] = "length", False
        if not active.any():
            break
    for i, s in enumerate(samples):
        if s.finish != "stop":
            s.text = _lead(words[i], lead) + _join(words[i], joiner, detok)
    stats.finish = samples[0].finish
    return samples


def prompt_lead(prompt: str | None, detok=None) -> str:
    """What goes between a prompt and the first word drawn: a space, unless the prompt ends in one
    (or BPE pieces are joined by their own tokenizer, `detok`)."""
    return " " if prompt and not prompt[-1].isspace() and detok is None else ""


def _lead(words: list[str], lead: str) -> str:
    return lead if words and words[0] != "\n" else ""


def _join(words: list[str], joiner: str, detok) -> str:
    if detok is not None:
        return detok(words)
    out = []
    for w in words:
        if w == "\n":
            out.append("\n")
        else:
            out.append(w if not out or out[-1] == "\n" else joiner + w)
    return "".join(out)


def stream_steps(model: NgramModel, hists: list[list[int]], active: np.ndarray, cfg: SamplingConfig,
                 seed: int | None, stats: GenerationStats) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Draw one word for every active row per step, appending it to its history; yields the drawn
    words' log-probabilities under the model and under the filtered distribution ([n], [n])."""
    cfg = cfg.validate()
    rng = np.random.default_rng(seed)
    n = len(hists)
    rows = np.arange(n)
    seen = np.zeros((n, model.vocab_size), dtype=bool)
    for i, h in enumerate(hists):
        seen[i, h] = True
    while True:
        t0 = time.perf_counter()
        logits = _logits(model, hists)
        filtered = process_logits(logits, seen, cfg)
        if cfg.greedy:
            ids, lpf = np.argmax(filtered, axis=-1), np.zeros(n)
        else:
            probs = probabilities(filtered, cfg)
            ids = draw(probs, rng)
            lpf = np.log(probs[rows, ids])
        lp = token_logprobs(logits, ids)
        seen[rows, ids] = True
        for i in np.flatnonzero(active):
            hists[i].append(int(ids[i]))
        stats.new_tokens += 1
        stats.decode_seconds += time.perf_counter() - t0
        yield lp, lpf


def generate_ngram(model: NgramModel, history: list[int], *, max_new_tokens: int, sampling: SamplingConfig,
                   seed: int | None, stop: Sequence[str] = (), ignore_eos: bool = False, lead: str = " ",
                   detok: Callable[[list[str]], str] | None = None,
                   stats: GenerationStats | None = None) -> Iterator[str]:
    """One continuation as text pieces, streamed word by word (`lead` goes before the first word)."""
    stats = stats if stats is not None else GenerationStats()
    sample = Sample(0)
    printed = ""
    hists = [list(history)]
    words: list[str] = []
    active = np.ones(1, dtype=bool)
    if max_new_tokens <= 0:
        stats.finish = "length"
        return
    hold = max((len(s) for s in stop), default=0)
    for _ in stream_steps(model, hists, active, sampling, seed, stats):
        tid = hists[0][-1]
        sample.ids.append(tid)
        if tid == model.eos_id and not ignore_eos:
            stats.finish = "eos"
            break
        if tid == model.eos_id:
            words.append("\n")
            hists[0] = [model.bos_id]
        else:
            words.append(model.vocab[tid])
        text = _lead(words, lead) + _join(words, " ", detok)
        hit = next((t for t in stop if t and t in text), None)
        if hit is not None:
            text = text[:text.index(hit)]
            if len(text) > len(printed):
                yield text[len(printed):]
            stats.finish = "stop"
            return
        safe = len(text) - hold if hold else len(text)
        if safe > len(printed):
            yield text[len(printed):safe]
            printed = text[:safe]
        if len(sample.ids) >= max_new_tokens:
            stats.finish = "length"
            break
    text = _lead(words, lead) + _join(words, " ", detok)
    if len(text) > len(printed):
        yield text[len(printed):]


__all__ = ["sample_ngram", "generate_ngram", "next_word_distribution", "prompt_history", "prompt_lead", "Sample"]
