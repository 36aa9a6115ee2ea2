"""The one place the harness meets nlpkit's models: a model path -> lm-evaluation-harness's three request types
answered by nlpkit's engines, through today's public entry points (`nlpkit.lm.load.load_language_model`, a
`LanguageModel`'s `continuation_scorer`, `nlpkit.lm.perplexity.text_perplexity.text_perplexity`,
`nlpkit.evaluation.generation_task.Generator`). When model loading changes (a load spec), only `load_model` here
changes.

- loglikelihood: (context, continuation) -> (log-probability, is_greedy), lm-eval's HF encoding; requests that share
  a context are handed to the packed scorer together (the context runs once, its choices as branches), and contexts
  that share a long token prefix (few-shot examples, a description) compute it once
  (`nlpkit.lm.transformer.prefix_scoring`);
- loglikelihood_rolling: a text -> its log-likelihood over lm-eval's disjoint windows of the model's positions
  (`--context` of perplexity, mode disjoint), the first token predicted from the prefix token, the text encoded as
  lm-eval's HF backend encodes it (`rolling_ids`: with the BOS a Llama-style tokenizer adds, scored too);
- generate_until: (context, generation_kwargs) -> the generation, cut at `until` (and the end-of-sequence text), at
  most `max_gen_toks` tokens, greedy unless `do_sample`;
- the chat template as lm-eval's `apply_chat_template` (`continue_final_message` when a gen_prefix opens the reply;
  a template that refuses a system turn gets none).

The window is the model's trained positions, as lm-eval's HF backend's `max_length`.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Callable, Sequence

import numpy as np

from nlpkit.errors import NlpkitError
from nlpkit.lm.interface import Capability
from nlpkit.lm.spec import LoadSpec


def load_model(spec: LoadSpec, warn: Callable[[str], None] | None = None):
    """The `LanguageModel` `spec` names (the command's `LoadSpec`: path, weights layout, cache)."""
    from nlpkit.lm.load import load_language_model

    return load_language_model(spec, warn=warn)


def _by_context(requests: Sequence[tuple]) -> tuple[list, "OrderedDict[tuple, list[int]]"]:
    """(context, [continuations]) in first-seen order, and each (context, its document's contexts) key's request
    indices. A request is (context, continuation), or (context, continuation, its document's contexts) when the
    document has several (`run.answer`: winogrande's `multiple_input`)."""
    groups: "OrderedDict[tuple, list[int]]" = OrderedDict()
    for i, r in enumerate(requests):
        groups.setdefault((r[0], tuple(r[2]) if len(r) > 2 else None), []).append(i)
    return [(key[0], [requests[i][1] for i in idx]) for key, idx in groups.items()], groups


class HarnessModel:
    """lm-eval's `LM` interface over one nlpkit model."""

    def __init__(self, spec: LoadSpec, warn: Callable[[str], None] | None = None, lm=None):
        from nlpkit.evaluation.models import check_model_path

        if lm is None:
            check_model_path(spec.path)
            lm = load_model(spec, warn)
        self.lm = lm
        self.path = spec.path
        self.template_source: str | None = None  # the chat template's text once `chat_template` is asked
        # lm-eval's HF backend: the model's trained positions (an n-gram model: its own window, if any)
        self.window = (lm.context_length if Capability.CONTEXT_WINDOW in lm.capabilities else
                       lm.window_context(None) if Capability.WINDOWS in lm.capabilities else None)
        self.scorer = lm.continuation_scorer(self.window)
        from nlpkit.lm.transformer.packed_scoring import TASK_PACK_TOKENS, PackedScorer

        if isinstance(self.scorer, PackedScorer):  # forwards of TASK_PACK_TOKENS (the same bits)
            self.scorer.pack_tokens = TASK_PACK_TOKENS

    # ------------------------------------------------------------------ requests
    def loglikelihood(self, requests: Sequence[tuple],
                      prefixes: dict | None = None) -> list[tuple[float, bool]]:
        """`prefixes`: the shared prefixes of the whole call when these requests are a part of it (`--dask`:
        `prefix_scoring.merge_prefix_summaries` of each part's `prefix_summary`). A request is (context,
        continuation), or (context, continuation, its document's contexts): a document's contexts run their common
        token prefix once (`prefix_scoring.document_split`)."""
        from nlpkit.lm.transformer.prefix_scoring import document_split, score_shared

        batch, groups = _by_context(requests)
        splits = [document_split(self.scorer, ctx, siblings) if siblings else 0 for ctx, siblings in groups]
        # contexts sharing few-shot examples compute them once; a document's contexts their common start
        scores = score_shared(self.scorer, batch, prefixes, splits)
        out: list = [None] * len(requests)
        for (ctx, idx), ss in zip(groups.items(), scores):
            for i, s in zip(idx, ss):
                out[i] = (float(s.logprob), bool(s.is_greedy))
        return out

    def prefix_summary(self, requests: Sequence[tuple[str, str]]) -> dict:
        """What `prefix_scoring.merge_prefix_summaries` needs of these requests (a part of a call)."""
        from nlpkit.lm.transformer.prefix_scoring import prefix_summary

        return prefix_summary(self.scorer, _by_context(requests)[0])

    def prefix_plan(self, requests: Sequence[tuple[str, str]]) -> dict:
        """The shared prefixes of a whole call (`loglikelihood`'s `prefixes` for a part of it)."""
        from nlpkit.lm.transformer.prefix_scoring import merge_prefix_summaries

        return merge_prefix_summaries([self.prefix_summary(requests)])

    def check_rolling(self, task: str) -> None:
        """A loglikelihood_rolling task needs token windows: a model without a window (an n-gram model) is refused."""
        if self.window is None:
            raise NlpkitError(f"task {task}: loglikelihood_rolling scores lm-evaluation-harness's token windows, which "
                              f"{self.path} (a model without a context window: an n-gram model) has not")

    def loglikelihood_rolling(self, texts: Sequence[str]) -> list[float]:
        from nlpkit.lm.perplexity.window_scoring import score_windows
        from nlpkit.lm.perplexity.windows import check_window, window_plan

        check_window("disjoint", self.window, None)
        prefix = self.lm.prefix_id
        if prefix is None:
            raise NlpkitError(f"{self.path}: loglikelihood_rolling predicts a text's first token from the model's BOS "
                              "or EOS token; this model defines neither")
        out = []
        for text in texts:
            if not text:
                out.append(0.0)
                continue
            seq, windows = window_plan(self.rolling_ids(text), prefix, mode="disjoint", context=self.window,
                                       stride=None)
            out.append(float(np.sum(np.asarray(score_windows(self.lm, seq, windows).logprobs, dtype=np.float64))))
        return out

    def rolling_ids(self, text: str) -> list[int]:
        """A rolling text's tokens as lm-eval 0.4.13's HF backend encodes them (`tok_encode` with the tokenizer's own
        special tokens): a tokenizer that adds BOS (Llama, Mistral, Gemma) puts one first unless the text starts
        with it, and that BOS is scored after the prefix BOS as part of the text (lm-eval issue #3333); GPT-2-style
        tokenizers add none."""
        if Capability.LOGITS in self.lm.capabilities:  # a transformer: its tokenizer's vocabulary
            from nlpkit.lm.transformer.packed_scoring import tok_encode

            return tok_encode(self.lm.model, text)
        return list(self.lm.encode(text))

    def generate_until(self, requests: Sequence[tuple[str, dict]], chat: bool = False, seed: int = 1234,
                       batch_size: int | None = None) -> list[str]:
        from nlpkit.evaluation.generation_task import GenerationOptions, Generator
        from nlpkit.lm.generation.batch_generation import DEFAULT_BATCH
        from nlpkit.lm.generation.sampling import SamplingConfig

        gen = Generator(self.lm, self.window, None, chat)
        out: list = [None] * len(requests)
        groups: dict = {}
        for i, (_, kw) in enumerate(requests):
            groups.setdefault(repr(sorted(kw.items())), []).append(i)
        for idx in groups.values():
            kw = dict(requests[idx[0]][1])
            until = kw.pop("until", None)
            until = [until] if isinstance(until, str) else list(until or [])
            max_gen = kw.pop("max_gen_toks", None) or kw.pop("max_new_tokens", None) or kw.pop("max_tokens", None) \
                or 256
            do_sample = kw.pop("do_sample", None)
            temperature = float(kw.pop("temperature", 0.0) or 0.0)
            sampling = None
            if do_sample and temperature > 0:
                sampling = SamplingConfig(temperature=temperature, top_k=int(kw.pop("top_k", 0) or 0),
                                          top_p=float(kw.pop("top_p", 1.0) or 1.0)).validate()
            opts = GenerationOptions(until=tuple(u for u in until if u), max_gen_toks=int(max_gen), sampling=sampling,
                                     seed=seed, batch_size=batch_size or DEFAULT_BATCH).validate()
            gens = gen.generate([requests[i][0] for i in idx], opts)
            for i, g in zip(idx, gens):
                out[i] = g.generation
        return out

    # ------------------------------------------------------------------ chat
    def chat_template(self, system: str | None = None) -> Callable[..., str]:
        """lm-eval's `apply_chat_template(chat_history, add_generation_prompt)` with the model's template."""
        from nlpkit.lm.chat import ChatTemplate, special_token_variables

        if Capability.CHAT not in self.lm.capabilities:
            raise NlpkitError(f"{self.path}: `chat` needs a model with a tokenizer and a chat template")
        inner = self.lm.model
        tok = inner.require_tokenizer()
        template = ChatTemplate.for_tokenizer(tok, inner.source or "model")
        variables = special_token_variables(inner.tokenizer)

        def render(messages: list[dict], add_generation_prompt: bool = True) -> str:
            try:
                text = template.render(messages, variables, add_generation_prompt)
            except NlpkitError:
                text = template.render([m for m in messages if m["role"] != "system"], variables,
                                       add_generation_prompt)
            if not add_generation_prompt:  # transformers' continue_final_message: cut after the last message
                final = messages[-1]["content"].strip()
                at = text.rfind(final)
                if at >= 0:
                    text = text[:at + len(final)]
            return text

        self.template_source = template.source
        return render

    def describe(self) -> dict:
        """What the results file's `config` records of the model."""
        return {"model": "nlpkit", "model_args": {"pretrained": self.path}, "max_length": self.window}
