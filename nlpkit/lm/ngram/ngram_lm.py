"""The n-gram model behind `nlpkit.lm.interface.LanguageModel`.

Tokens are the model's words (after its recorded lowercasing / BPE tokenizer, split on ASCII whitespace
as KenLM's query splits them); a prompt is the start of a sentence (``<s>`` then its words). Scoring a
window is the n-gram model's own: each token given at most the n-1 tokens before it. Decoding keeps one
word history per row (`NgramState`), ``</s>`` drawn with `ignore_eos` starting a new sentence, and the
words are joined into text by `WordStream`. Perplexity scores each line as one sentence and reports
KenLM query's figures (the columns `nlpkit perplexity --model lm.arpa` has always printed).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from nlpkit.lm.interface import Capability, PerplexityRun, Prompt
from nlpkit.lm.ngram.ngram_model import NgramModel, log10_to_nats
from nlpkit.lm.spec import LoadSpec, resolve_path


_SENTENCE = "each line is scored whole, as one sentence <s> ... </s>, as KenLM's query scores it"
_NO_POSITIONS = "it has no positions to scale"
_NO_TEMPLATE = "it has no chat template"

# Signature fields per command: an n-gram model's signatures name its order, smoothing and text rules,
# then the decoding settings that apply to it.
_DECODING = ("temp", "top_k", "top_p", "min_p", "rep", "seed", "max_new", "stop")
_SIGNATURE_FIELDS = {"perplexity": (), "sample-dist": _DECODING[:6], "sample": _DECODING, "generate": _DECODING}


class NgramState:
    """One word history per row; only the last n-1 words matter. ``</s>`` starts a new sentence
    (drawn only with `ignore_eos`; otherwise it ends the row, whose later draws are ignored)."""

    def __init__(self, model: NgramModel, prompt_ids: Sequence[int], rows: int, stats=None):
        self.model, self.rows = model, rows
        self.hists = [list(prompt_ids) for _ in range(rows)]
        if stats is not None:
            stats.prompt_tokens, stats.batch = len(prompt_ids), rows

    def logits(self) -> np.ndarray:  # -> [rows, V] float32
        from nlpkit.lm.ngram.ngram_sampling import next_logits

        return np.stack([next_logits(self.model, h) for h in self.hists])

    def advance(self, ids: np.ndarray) -> bool:  # [rows] -> True: an n-gram model has no context to fill
        eos, bos = self.model.eos_id, self.model.bos_id
        for h, t in zip(self.hists, ids.tolist()):
            if t == eos:
                h[:] = [bos]
            else:
                h.append(int(t))
        return True


class WordStream:
    """Word ids in, text out: words joined by single spaces (or by the recorded BPE tokenizer,
    `detok`), ``</s>`` as a line break, `lead` before the first word; text that could end in a stop
    string is held back (as many characters as the longest stop string)."""

    def __init__(self, model: NgramModel, lead: str, stop: Sequence[str], detok=None):
        self.model, self.lead, self.detok = model, lead, detok
        self.stop = list(stop)
        self.hold = max((len(s) for s in self.stop), default=0)
        self.words: list[str] = []
        self.printed = ""
        self.stopped = False
        self._final: str | None = None

    def _text(self) -> str:
        from nlpkit.lm.ngram.ngram_sampling import join_words

        return join_words(self.words, self.lead, self.detok)

    def push(self, token_id: int) -> str:
        if self.stopped:
            return ""
        self.words.append("\n" if token_id == self.model.eos_id else self.model.vocab[token_id])
        text = self._text()
        hit = next((t for t in self.stop if t and t in text), None)
        if hit is not None:
            text = self._final = text[:text.index(hit)]
            self.stopped = True
            return text[len(self.printed):] if len(text) > len(self.printed) else ""
        safe = len(text) - self.hold if self.hold else len(text)
        if safe > len(self.printed):
            out, self.printed = text[len(self.printed):safe], text[:safe]
            return out
        return ""

    def finish(self) -> str:
        if self.stopped:
            return ""
        text = self._text()
        out = text[len(self.printed):] if len(text) > len(self.printed) else ""
        self.printed = text
        return out

    def text(self) -> str:
        return self._final if self.stopped else self._text()


class NgramLM:
    """A loaded `NgramModel` (ARPA or nlpkit counts file) as a `LanguageModel`."""

    kind = "ngram"
    token_unit = "words"
    capabilities = frozenset({Capability.SENTENCES, Capability.GENERATE})
    why_not: Mapping[Capability, str] = {
        Capability.WINDOWS: _SENTENCE,
        Capability.POSITIONS: _NO_POSITIONS,
        Capability.KV_CACHE: "it keeps no cache: each step looks up the last words",
        Capability.CONTEXT_WINDOW: "it has no context window: it sees the last n-1 words",
        Capability.PROMPT_TRUNCATION: "it reads only the last n-1 words of a prompt",
        Capability.CHAT: _NO_TEMPLATE,
        Capability.LOGITS: "neural models only: an n-gram model's probabilities are over words, not over a token "
                           "vocabulary that two models share",
        Capability.WEIGHTS_LAYOUT: "its n-grams are held as read, it has no weights layout",
    }

    def __init__(self, model: NgramModel, spec: LoadSpec | None = None):
        from nlpkit.lm.ngram.line_scoring import line_transform
        from nlpkit.lm.ngram.train import piece_detokenizer, recorded_tokenizer

        self.model = model
        self.spec = spec if spec is not None else LoadSpec(model.source)   # how it was loaded
        tok = recorded_tokenizer(model.options, model.source)        # found (and its sha256 checked) once
        self.transform = line_transform(model, tok)
        self.detok = piece_detokenizer(tok) if tok else None

    described = "an n-gram model"
    context_length = None

    def continuation_scorer(self, window: int | None = None, chat: bool = False, system: str | None = None):
        """Continuation scoring (`nlpkit score`): words after `<s>` as KenLM's full_scores scores them
        (`continuations.NgramContinuationScorer`). `window` and `chat` do not apply (see `why_not`)."""
        from nlpkit.lm.ngram.ngram_continuations import NgramContinuationScorer

        return NgramContinuationScorer(self.model, self.transform)

    @classmethod
    def load(cls, spec: LoadSpec, *, warn: Callable[[str], None] | None = None) -> "NgramLM":
        """The n-gram model `spec` names ($NLPKIT_MODEL when it names none); its layout, purpose and RoPE options
        mean nothing here (the CLI refuses them when given)."""
        from nlpkit.lm.ngram import load_ngram_model

        return cls(load_ngram_model(resolve_path(spec.path), use_cache=spec.use_cache, warn=warn), spec)

    # ------------------------------------------------------------------ identity
    @property
    def name(self) -> str:
        return self.model.name

    def signature(self, command: str, settings: Mapping[str, Any], extra: Mapping[str, Any] = {}) -> str:
        from nlpkit.signature import make_signature

        m, o = self.model, self.model.options
        keep = _SIGNATURE_FIELDS.get(command, _DECODING)
        return make_signature(command, model=m.name, ngram=f"{m.order}-{m.smoothing if m.kind == 'counts' else 'arpa'}",
                              lower=o.get("lowercase", "false") == "true",
                              tok="bpe" if o.get("tokenizer") else "whitespace",
                              **{k: v for k, v in settings.items() if k in keep},
                              **{k: v for k, v in extra.items() if k != "chat"})

    def describe(self):
        """The model as `--verbose` names it: its order and smoothing (as signatures), its n-grams, the bytes of
        its arrays and what the prepared-model cache did (no layout, no threads: those are a transformer's)."""
        from nlpkit.lm.interface import ModelDescription

        m = self.model
        arrays = [*m.keys, *m.logprob, *m.backoff, *m.counts, *m.context_total]
        kind = m.smoothing if m.kind == "counts" else "arpa"
        return ModelDescription(self.name, f"{m.order}-gram {kind}", sum(len(k) for k in m.keys), "n-grams",
                                sum(int(a.nbytes) for a in arrays), cache=m.cache)

    # ------------------------------------------------------------------ tokens
    @property
    def vocab_size(self) -> int:
        return self.model.vocab_size

    @property
    def prefix_id(self) -> int:
        return self.model.bos_id

    def encode(self, text: str) -> list[int]:
        """The ids of the words of `text` (OOV -> <unk>), as a line is scored."""
        from nlpkit.lm.ngram.line_scoring import query_words

        ids, _ = self.model.lookup(query_words(self.transform(text) if self.transform else text))
        return ids.tolist()

    def token_text(self, token_id: int) -> str:
        return self.model.vocab[token_id]

    def token_bytes(self, token_id: int) -> bytes:
        return self.model.vocab[token_id].encode("utf-8")

    @property
    def worker_key(self) -> tuple:
        """How a Dask worker loads the same model (`nlpkit.lm.spec.cached_model(*worker_key)`): the loader and this
        model's `LoadSpec` with its absolute path."""
        import dataclasses
        import os

        return (NgramLM.load, dataclasses.replace(self.spec, path=os.path.abspath(self.model.source)))

    # ------------------------------------------------------------------ scoring
    def logprobs(self, ids: Sequence[int], first: int) -> np.ndarray:  # [t] -> [t - first]
        """log p(ids[j] | ids[j-n+1:j]) in nats for j = first..len-1 (ids[0] is context only)."""
        seq = np.asarray(ids, dtype=np.int64)
        log10, _ = self.model.score_sequence(seq, np.arange(len(seq), dtype=np.int64))
        return np.asarray(log10_to_nats(log10[max(first, 1) - 1:]), dtype=np.float64)

    def next_logits(self, prompt_ids: Sequence[int], context: int | None = None) -> np.ndarray:  # [P] -> [V]
        from nlpkit.lm.ngram.ngram_sampling import next_logits

        return next_logits(self.model, list(prompt_ids))

    # ------------------------------------------------------------------ decoding
    def require_tokenizer(self) -> None:
        """An n-gram model is its own tokenizer (its words)."""

    def sampling_defaults(self) -> tuple[dict, None]:
        """The model's own distribution, unfiltered at temperature 1 (as NLTK's generate)."""
        return {"temperature": 1.0, "top_k": 0, "top_p": 1.0, "min_p": 0.0, "repetition_penalty": 1.0}, None

    def warm_up(self) -> None:
        """Nothing to warm: the arrays are in memory once loaded."""

    def prompt(self, text: str, **_ignored) -> Prompt:
        """``<s>`` and the ids of the prompt's words; a space before the first word drawn unless the
        prompt ends in one (or BPE pieces are joined by their own tokenizer)."""
        from nlpkit.lm.ngram.ngram_sampling import prompt_history, prompt_lead

        return Prompt(prompt_history(self.model, text, self.transform), lead=prompt_lead(text, self.detok),
                      echo=text)

    def start(self, prompt_ids: Sequence[int], rows: int = 1, *, stats=None, **_ignored) -> NgramState:
        return NgramState(self.model, prompt_ids, rows, stats)

    def end_ids(self, ignore_eos: bool, extra: Sequence[int] = ()) -> frozenset[int]:
        return frozenset() if ignore_eos else frozenset({self.model.eos_id, *extra})

    def text_stream(self, prompt: Prompt | None = None, stop: Sequence[str] = ()) -> WordStream:
        return WordStream(self.model, prompt.lead if prompt is not None else "", stop, self.detok)

    def decoding_batch(self, context: int | None = None):
        """Sequences decoded together: one word history each (`nlpkit.lm.decoding.StateBatch`)."""
        from nlpkit.lm.decoding import StateBatch

        return StateBatch(self, context)

    def generation_prompt(self, text: str, max_new_tokens: int, window: int | None = None,
                          chat: bool = False) -> Prompt:
        """A generation task's prompt: the words of `text`, as `prompt` (no window: the history is n-1 words)."""
        return self.prompt(text)

    def until_stream(self, prompt: Prompt, until: Sequence[str] = ()):
        """A generation task's stop test and text: the word stream (`push` -> True at a stop string; `text` the
        words joined, cut before it)."""
        from nlpkit.lm.decoding import StreamStops

        return StreamStops(self.text_stream(prompt, until))

    # ------------------------------------------------------------------ perplexity
    def sentence_perplexity(self, paths: Sequence[str], *, per_line: bool = False, per_token: bool = False,
                            errors: str = "strict", **_windows) -> PerplexityRun:
        """KenLM query's figures plus NLL and bits per byte, per file (then a corpus total), per line or per token
        (`nlpkit.lm.ngram.ngram_perplexity`: the n-gram model's own way, each line one sentence)."""
        from nlpkit.lm.ngram.ngram_perplexity import sentence_perplexity_run

        return sentence_perplexity_run(self.model, self.transform, self.signature("perplexity", {}), paths,
                                       per_line=per_line, per_token=per_token, errors=errors,
                                       worker_key=self.worker_key)
