"""Log-likelihoods of continuations given a context, as lm-evaluation-harness's Hugging Face backend computes them.

Tokenization (`encode_pair`, lm-evaluation-harness `TemplateLM.loglikelihood` + `_encode_pair`): trailing whitespace
of the context (`str.rstrip`) moves to the front of the continuation; context and context + continuation are encoded
separately with the model's own tokenizer (BOS first when it adds one) and the continuation's tokens are the tail of
the whole encoding after the context's tokens. An empty context is the model's prefix token (BOS, else EOS) --
unless the continuation itself starts with that token, which then becomes the context.

Scoring (`ContinuationScorer`): the context is prefilled once with batch 1, together with the tokens every
continuation shares (their longest common prefix, leaving each at least one token of its own); its KV cache is then
copied to one row per continuation and the continuations' own tokens run as one right-padded batch (padding after a
row's last token cannot change that row's earlier positions: attention is causal), as `sample -n N` shares a prompt's
cache. A later call with the same prefix reuses the prefill. A continuation whose context + continuation exceeds the
window (`window + 1` tokens) is cut from the left as lm-evaluation-harness does, (context + continuation)[-(window +
1):][:-1] as input, and scored on its own. Log-probabilities are float64 log-softmax of the float32 logits; a
continuation is greedy when each of its tokens is the argmax of its row.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from nlpkit.errors import NlpkitError
from nlpkit.lm.continuations import ContinuationScore, score_grouped
from nlpkit.lm.perplexity import log_softmax_at, prefix_token
from nlpkit.lm.transformer.cache import KVCache


def tok_encode(model, text: str) -> list[int]:
    """The model tokenizer's encoding with its own special tokens (lm-evaluation-harness `tok_encode`): BOS first
    when the tokenizer adds one, unless the text already starts with the prefix token's text."""
    tok = model.require_tokenizer()
    ids = list(tok.encode(text)) if text else []
    bos = model.config.bos_id
    if model.config.add_bos and bos is not None and (not ids or ids[0] != bos):
        if not text.startswith(tok.decode_bytes([bos]).decode("utf-8", errors="replace")):
            ids = [bos] + ids
    return ids


def encode_pair(model, context: str, continuation: str) -> tuple[list[int], list[int]]:
    """(context ids, continuation ids), lm-evaluation-harness's way (see the module docstring).

    >>> encode_pair(model, "The sky is ", "blue")   # doctest: +SKIP  ('The sky is' | ' blue')
    """
    if context == "":
        tok = model.require_tokenizer()
        cont = list(tok.encode(continuation))
        prefix = prefix_token(model.config)
        if prefix is None:
            raise NlpkitError("an empty context needs the model's BOS or EOS token to condition on; "
                              "this model defines neither")
        if cont and cont[0] == prefix:
            return cont[:1], cont[1:]
        return [prefix], cont
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces:
        context, continuation = context[:-n_spaces], context[-n_spaces:] + continuation
    whole = tok_encode(model, context + continuation)
    ctx = tok_encode(model, context)
    return ctx, whole[len(ctx):]


def _common_prefix(seqs: Sequence[Sequence[int]]) -> int:
    """Length of the longest common prefix of token lists."""
    n = min(len(s) for s in seqs)
    for i in range(n):
        if any(s[i] != seqs[0][i] for s in seqs[1:]):
            return i
    return n


def _rows(cache: KVCache, n: int, max_len: int) -> KVCache:
    """n copies of a batch-1 cache, with room for max_len positions.  # [1, kv, L, hd] -> [n, kv, max_len, hd]"""
    _, n_kv, _, hd = cache.k[0].shape
    out = KVCache(len(cache.k), n, n_kv, max_len, hd)
    L = cache.length
    for dst, src in zip(out.k + out.v, cache.k + cache.v):
        dst[:, :, :L] = src[:, :, :L]
    out.tokens[:, :L] = cache.tokens[:, :L]
    out.length, out.offset = L, cache.offset
    return out


def chat_renderer(model, system: str | None = None) -> Callable[[str], str]:
    """A context -> the model's chat template rendered around it as the user's turn, with the generation prompt
    (as lm-evaluation-harness's apply_chat_template and `generate --chat`): the continuation is the reply."""
    from nlpkit.lm.chat import ChatTemplate, conversation, special_token_variables

    template = ChatTemplate.for_tokenizer(model.require_tokenizer(), model.source or "model")
    variables = special_token_variables(model.tokenizer)
    return lambda text: template.render(conversation(text, system, None), variables)


class ContinuationScorer:
    """Scores continuations of contexts on one model, keeping the last prefill for a context that repeats."""

    def __init__(self, model, window: int | None = None, render: Callable[[str], str] | None = None):
        self.model = model
        self.render = render  # a context -> the text the model sees (a chat template's user turn), or None
        self.window = int(window or model.config.max_seq_len)
        self._last: tuple[tuple[int, ...], KVCache, np.ndarray] | None = None  # (prefix ids, cache, logits rows)
        self.prefill_tokens = 0  # tokens run through the model, for the savings report
        self.batch_tokens = 0

    def score(self, context: str, continuations: Sequence[str]) -> list[ContinuationScore]:
        """Each continuation's score after `context` (text in, lm-evaluation-harness's encoding)."""
        pairs = [encode_pair(self.model, context, c) for c in continuations]
        return score_grouped(self, pairs)

    def score_ids(self, ctx: list[int], conts: list[list[int]]) -> list[ContinuationScore]:
        """Score token-id continuations of one context (see the module docstring)."""
        out: list[ContinuationScore | None] = [None] * len(conts)
        shared = []
        for j, cont in enumerate(conts):
            if not cont:
                raise NlpkitError("the continuation has no tokens: nothing to score")
            if len(cont) > self.window:
                raise NlpkitError(f"the continuation is {len(cont)} tokens, longer than the window of "
                                  f"{self.window} tokens")
            if len(ctx) + len(cont) > self.window + 1:
                out[j] = self._score_alone(ctx, cont)
            else:
                shared.append(j)
        if shared:
            for j, s in zip(shared, self._score_shared(ctx, [conts[j] for j in shared])):
                out[j] = s
        return out  # type: ignore[return-value]

    def _score_alone(self, ctx: list[int], cont: list[int]) -> ContinuationScore:
        """lm-evaluation-harness's left truncation: input (ctx + cont)[-(window + 1):][:-1], one pass."""
        inp = (ctx + cont)[-(self.window + 1):][:-1]
        m = len(cont)
        logits = self.model.forward(np.asarray([inp], dtype=np.int64), None, logits_from=len(inp) - m)[0]  # [m, V]
        self.prefill_tokens += len(inp)
        target = np.asarray(cont, dtype=np.int64)
        lp = log_softmax_at(logits, target)
        greedy = bool(np.all(np.argmax(logits, axis=-1) == target))
        return ContinuationScore(float(lp.sum()), list(cont), greedy, truncated=True)

    def _prefill(self, prefix: list[int], first: int) -> tuple[KVCache, np.ndarray]:
        """Batch-1 cache of `prefix` and its logits from row `first - 1` on (reused when the prefix repeats)."""
        key = tuple(prefix)
        if self._last is not None and self._last[0] == key:
            return self._last[1], self._last[2]
        cache = self.model.new_cache(1, max_len=len(prefix))
        logits = self.model.forward(np.asarray([prefix], dtype=np.int64), cache, logits_from=first - 1)[0]
        self.prefill_tokens += len(prefix)
        self._last = (key, cache, logits)  # [len(prefix) - first + 1, V]
        return cache, logits

    def _score_shared(self, ctx: list[int], conts: list[list[int]]) -> list[ContinuationScore]:
        k = len(conts)
        common = min(_common_prefix(conts), min(len(c) for c in conts) - 1)
        prefix = ctx + list(conts[0][:common])
        cache, head = self._prefill(prefix, len(ctx))  # head rows predict conts[:][:common] and the next token
        head_lp = log_softmax_at(head[:common], np.asarray(conts[0][:common], dtype=np.int64)) if common else []
        head_sum = float(np.sum(head_lp))
        head_greedy = bool(np.all(np.argmax(head[:common], axis=-1) == np.asarray(conts[0][:common]))) \
            if common else True
        last = head[common]  # [V]  predicts each continuation's first own token
        rest = [c[common:] for c in conts]
        M = max(len(r) for r in rest)
        if M > 1:
            batch = np.zeros((k, M - 1), dtype=np.int64)  # [k, M - 1] right-padded inputs
            for j, r in enumerate(rest):
                batch[j, :len(r) - 1] = r[:-1]
            rows = _rows(cache, k, len(prefix) + M - 1)
            logits = self.model.forward(batch, rows)  # [k, M - 1, V]
            self.batch_tokens += int(sum(len(r) - 1 for r in rest))
        scores = []
        last_lp = log_softmax_at(np.repeat(last[None, :], k, axis=0), np.asarray([r[0] for r in rest]))  # [k]
        last_arg = int(np.argmax(last))
        for j, r in enumerate(rest):
            lp = head_sum + float(last_lp[j])
            greedy = head_greedy and last_arg == r[0]
            if len(r) > 1:
                target = np.asarray(r[1:], dtype=np.int64)
                rows_j = logits[j, :len(r) - 1]  # [m - 1, V]
                lp += float(log_softmax_at(rows_j, target).sum())
                greedy = greedy and bool(np.all(np.argmax(rows_j, axis=-1) == target))
            scores.append(ContinuationScore(lp, list(conts[j]), greedy))
        return scores
