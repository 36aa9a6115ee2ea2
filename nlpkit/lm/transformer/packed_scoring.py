"""Log-likelihoods of continuations given a context, as lm-evaluation-harness's Hugging Face backend computes them.

Tokenization (`encode_pair`, lm-evaluation-harness `TemplateLM.loglikelihood` + `_encode_pair`): trailing whitespace
of the context (`str.rstrip`) moves to the front of the continuation; context and context + continuation are encoded
separately with the model's own tokenizer (BOS first when it adds one) and the continuation's tokens are the tail of
the whole encoding after the context's tokens. An empty context is the model's prefix token (BOS, else EOS) --
unless the continuation itself starts with that token, which then becomes the context.

Scoring (`PackedScorer.score_requests`): many requests at once. The continuations of one context (in one request
or several) form a segment (in runs of `BRANCH_TOKENS` continuation tokens, or the context's length, when there are
more): the context, then each continuation's tokens but its last as a branch that sees the context and itself only
(`packing.tree`): each continuation is computed as if it followed the context alone, the context once for all (as a
KV cache shared by a batch, `sample -n N`). The segments of a batch are packed end to end into forwards of about
`PACK_TOKENS` tokens (`Model.forward(packing=)`: attention stays inside each segment, and a branch attends to the
context's keys and its own only), so each weight product is one gemm of ~1000 rows instead of a few dozen per item,
and the output projection runs only at the rows whose log-probabilities are read. A continuation's numbers are the
bits it gets scored alone, whatever else shares its segment or forward (`tests/lm/test_determinism.py`); the same
(context, continuation) twice in a batch is computed once. A continuation whose context + continuation exceeds the
window (`window + 1` tokens) is cut from the left as lm-evaluation-harness does, (context + continuation)[-(window +
1):][:-1] as input, and is a segment of its own. Log-probabilities are float64 log-softmax of the float32 logits; a
continuation is greedy when each of its tokens is the argmax of its row.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Sequence

import numpy as np

from nlpkit.errors import NlpkitError
from nlpkit.lm.continuations import ContinuationScore
from nlpkit.lm.transformer.conventions import prefix_token
from nlpkit.lm.transformer.window_forward import row_log_normalizers
from nlpkit.lm.transformer.packing import pack, segment_residues, tree
from nlpkit.lm.transformer.products import ROW_ALIGN


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


def chat_renderer(model, system: str | None = None) -> Callable[[str], str]:
    """A context -> the model's chat template rendered around it as the user's turn, with the generation prompt
    (as lm-evaluation-harness's apply_chat_template and `generate --chat`): the continuation is the reply."""
    from nlpkit.lm.chat import ChatTemplate, conversation, special_token_variables

    template = ChatTemplate.for_tokenizer(model.require_tokenizer(), model.source or "model")
    variables = special_token_variables(model.tokenizer)
    return lambda text: template.render(conversation(text, system, None), variables)




PACK_TOKENS = 1024  # tokens per packed forward: gemms of ~1000 rows, logits of at most as many rows (~200 MB)
TASK_PACK_TOKENS = 2048  # `score --tasks`' forwards (`HarnessModel`): half the forwards' fixed costs (30 layers of
# thread hand-offs and attention stacks) and fewer padding slots than at PACK_TOKENS, 3-8% faster on lm-eval's
# 0-shot task files, for ~200 MB more (logits of up to 2048 rows); the same bits (a forward's size changes none)
BRANCH_TOKENS = 256  # continuation tokens in one segment, or the context's length when that is longer
# A packed forward of fewer tokens gets a filler segment, and fewer rows read get filler rows, so that an item scored
# alone runs matrix products of as many rows as in a block and gets the same bits (model.ROW_MIN: OpenBLAS gives a
# product of one row, or of a few, other bits).
FLOOR_TOKENS = 64
FLOOR_ROWS = 8


def _branch_runs(members: list, most: int) -> list[list]:
    """A context's continuations in runs of at most `most` tokens (one longer continuation alone): attention in a
    segment costs its length squared, so continuations beyond the context's own length (many items' choices after
    an empty context, for `--mutual-info`) gain nothing from sharing a segment."""
    runs: list[list] = [[]]
    size = 0
    for member in members:
        if runs[-1] and size + len(member[1]) > most:
            runs.append([])
            size = 0
        runs[-1].append(member)
        size += len(member[1])
    return runs


@dataclass
class _Segment:
    """One segment of a packed forward: its tokens (a prefix, then branches: `packing.tree`) and, per continuation
    scored in it, where its result goes (request, continuation), the segment rows whose logits predict its tokens,
    and those tokens."""

    tokens: list[int]
    positions: np.ndarray  # [n]
    mask: np.ndarray  # [n, n]
    scored: list[tuple[tuple[int, int], list[int], list[int], tuple[int, ...], bool]]  # (where, rows, targets,
    #                                                                                      ctx, truncated)
    prefix: int = 0  # the tokens every branch sees (`packing.Packing.prefixes`); 0: no branches


def _shared_segment(ctx: list[int], conts: list[list[int]], where: list[tuple[int, int]]) -> _Segment:
    """The context, then each continuation's tokens but its last as a branch: each continuation is computed as if it
    followed the context alone (see the module docstring). Tokens the continuations share stay in their branches:
    in the prefix, a continuation's bits would depend on which others share the segment."""
    common = 0
    prefix = list(ctx) + list(conts[0][:common])
    rests = [c[common:] for c in conts]
    positions, mask = tree(len(prefix), [len(r) - 1 for r in rests])
    tokens, scored, start = list(prefix), [], len(prefix)
    for w, cont, rest in zip(where, conts, rests):
        rows = list(range(len(ctx) - 1, len(prefix))) + list(range(start, start + len(rest) - 1))  # [len(cont)]
        scored.append((w, rows, list(cont), tuple(ctx), False))
        tokens += rest[:-1]
        start += len(rest) - 1
    return _Segment(tokens, positions, mask, scored, len(prefix))


def _split_segments(prefix: list[int], contexts: dict[tuple[int, ...], list]) -> list[_Segment]:
    """Contexts that begin with `prefix` (a document's: `score_pairs`'s `splits`), each with its continuations
    [(where, continuation ids)]: the prefix, then per context its rest (its tokens after the prefix, at least one)
    and each continuation's tokens but its last as a branch -- the rest alone, read at its last row, for the
    single-token continuations. A continuation's bits are a function of (prefix, rest, continuation) alone: a branch
    sees the prefix and itself only (`packing.tree`), whatever other branches share the segment. In runs of at most
    max(BRANCH_TOKENS, prefix) branch tokens, the prefix in each."""
    branches = []  # (tokens, [(where, rows in the branch, continuation, context)])
    for ctx, members in contexts.items():
        rest = list(ctx[len(prefix):])
        single = [(w, [len(rest) - 1], cont, ctx) for w, cont in members if len(cont) == 1]
        if single:
            branches.append((rest, single))
        branches += [(rest + list(cont[:-1]), [(w, [len(rest) - 1 + i for i in range(len(cont))], cont, ctx)])
                     for w, cont in members if len(cont) > 1]
    out = []
    for run in _branch_runs([(b, b[0]) for b in branches], max(BRANCH_TOKENS, len(prefix))):
        positions, mask = tree(len(prefix), [len(toks) for (toks, _), _ in run])
        tokens, scored, start = list(prefix), [], len(prefix)
        for (toks, members), _ in run:
            scored += [(w, [start + r for r in rows], list(cont), tuple(ctx), False) for w, rows, cont, ctx in members]
            tokens += toks
            start += len(toks)
        out.append(_Segment(tokens, positions, mask, scored, len(prefix)))
    return out


def _truncated_segment(ctx: list[int], cont: list[int], window: int, where: tuple[int, int]) -> _Segment:
    """lm-evaluation-harness's left truncation: input (ctx + cont)[-(window + 1):][:-1], the last len(cont) rows."""
    inp = (list(ctx) + list(cont))[-(window + 1):][:-1]
    positions, mask = tree(len(inp), [])
    rows = list(range(len(inp) - len(cont), len(inp)))
    return _Segment(inp, positions, mask, [(where, rows, list(cont), tuple(ctx), True)])


def _forward_groups(sizes: list[int], budget: int) -> list[list[int]]:
    """Consecutive segments (by size) cut into forwards of at most `budget` tokens (a larger segment alone), as even
    as the cut allows."""
    total = sum(sizes)
    target = total / max(1, -(-total // budget))
    groups: list[list[int]] = [[]]
    acc = 0
    for i, n in enumerate(sizes):
        if groups[-1] and acc + n > budget:
            groups.append([])
            acc = 0
        groups[-1].append(i)
        acc += n
        if acc >= target:
            groups.append([])
            acc = 0
    return [g for g in groups if g]


def _balanced_groups(segments: list[_Segment], budget: int) -> list[list[int]]:
    """Segments into forwards of at most `budget` tokens (a larger segment alone) whose rows fill their slots: a
    forward's products run ROW_ALIGN x (its most frequent residue's count) rows (`packing.Packing.slots`: a row at
    a slot of its residue), so a forward whose residues are uneven runs padding rows (15% with short items packed
    in order). Largest first, each segment to the forward where it adds the fewest padding rows (then the one
    with the fewest tokens), as many forwards as the budget needs, one more when none has room. Which segments
    share a forward changes no bit of theirs."""
    sizes = [len(s.tokens) for s in segments]
    hists = [np.bincount(segment_residues(s.tokens, s.positions, s.prefix), minlength=ROW_ALIGN) for s in segments]
    n_forwards = max(1, -(-sum(sizes) // budget))
    groups: list[list[int]] = [[] for _ in range(n_forwards)]
    counts = [np.zeros(ROW_ALIGN, np.int64) for _ in range(n_forwards)]
    tokens = [0] * n_forwards
    for i in sorted(range(len(segments)), key=lambda i: -sizes[i]):
        best, best_key = None, None
        for f in range(len(groups)):
            if groups[f] and tokens[f] + sizes[i] > budget:
                continue
            key = (int((counts[f] + hists[i]).max() - counts[f].max()) * ROW_ALIGN - sizes[i], tokens[f])
            if best_key is None or key < best_key:
                best, best_key = f, key
        if best is None:
            groups.append([])
            counts.append(np.zeros(ROW_ALIGN, np.int64))
            tokens.append(0)
            best = len(groups) - 1
        groups[best].append(i)
        counts[best] += hists[i]
        tokens[best] += sizes[i]
    return [sorted(g) for g in groups if g]


class PackedScorer:
    """Scores continuations of contexts on one model, many requests per packed forward (see the module docstring):
    a `nlpkit.lm.continuations.ContinuationScorer`."""

    batched = True   # one call packs all its requests into as few forwards as fit

    def __init__(self, model, window: int | None = None, render: Callable[[str], str] | None = None,
                 pack_tokens: int = PACK_TOKENS, share: bool = True):
        self.model = model
        self.template = render  # a context -> the text the model sees (a chat template's user turn), or None
        self.window = int(window or model.config.max_seq_len)
        self.pack_tokens = pack_tokens
        self.share = share  # False: every continuation runs its context again (lm-eval's way; the savings report)
        self.tokens = 0  # tokens run through the model, for the savings report

    def render(self, context: str) -> str:
        """The context as the model sees it: the chat template's user turn (``--chat``), else itself."""
        return self.template(context) if self.template is not None else context

    def score_requests(self, requests: Sequence[tuple[str, Sequence[str]]]) -> list[list[ContinuationScore]]:
        """Each request's (context, continuations) scores, all requests packed into as few forwards as fit (text
        in, lm-evaluation-harness's encoding: `encode_pair`)."""
        return self.score_pairs([[encode_pair(self.model, context, c) for c in conts] for context, conts in requests])

    def check(self, context: str, continuations: Sequence[str]) -> list[tuple[list[int], list[int]]]:
        """The (context ids, continuation ids) this request is scored on, or the NlpkitError scoring it would raise
        (a context or continuation without tokens, a continuation longer than the window, no token to condition
        an empty context on), without scoring it: an evaluation checks every item before it scores any."""
        pairs = [encode_pair(self.model, context, c) for c in continuations]
        for context_ids, cont in pairs:
            self._check_pair(context_ids, cont)
        return pairs

    def _check_pair(self, ctx: list[int], cont: list[int]) -> None:
        if not cont:
            raise NlpkitError("the continuation has no tokens: nothing to score")
        if not ctx:
            raise NlpkitError("the context encodes to no tokens: there is nothing to condition on")
        if len(cont) > self.window:
            raise NlpkitError(f"the continuation is {len(cont)} tokens, longer than the window of "
                              f"{self.window} tokens")

    def score_pairs(self, requests: list[list[tuple[list[int], list[int]]]], top: int = 0,
                    splits: Sequence[int] | None = None) -> list[list[ContinuationScore]]:
        """Each request's (context ids, continuation ids) pairs scored: continuations of one context (within and
        across requests) share a segment, each one's bits those it gets alone (`model.packed_attention`); one whose
        context + continuation exceeds the window is cut from the left and scored alone. `top` > 0: each
        position's `top` most likely tokens too (`ContinuationScore.top`). `splits`: per request, 0 or the length
        of its context's first tokens run as a prefix, the rest of the context a branch (`_split_segments`: a
        document's contexts that differ after a common start, `prefix_scoring.document_split`)."""
        groups: dict[tuple[int, ...], list[tuple[tuple[int, int], list[int]]]] = {}
        split_groups: dict[tuple[int, ...], dict[tuple[int, ...], list]] = {}  # prefix -> context -> members
        segments: list[_Segment] = []
        first: dict[tuple[tuple[int, ...], tuple[int, ...]], tuple[int, int]] = {}  # a pair -> where it is scored
        copies: list[tuple[tuple[int, int], tuple[int, int]]] = []
        for r, pairs in enumerate(requests):
            for j, (ctx, cont) in enumerate(pairs):
                self._check_pair(ctx, cont)
                key = (tuple(ctx), tuple(cont))
                if key in first:  # the same pair again (a choice after an empty context, twice): the same numbers
                    copies.append(((r, j), first[key]))
                    continue
                first[key] = (r, j)
                if len(ctx) + len(cont) > self.window + 1:
                    segments.append(_truncated_segment(ctx, cont, self.window, (r, j)))
                elif not self.share:
                    segments.append(_shared_segment(list(ctx), [cont], [(r, j)]))
                elif splits and 0 < splits[r] < len(ctx):
                    split_groups.setdefault(tuple(ctx[:splits[r]]), {}).setdefault(tuple(ctx), []).append(
                        ((r, j), cont))
                else:
                    groups.setdefault(tuple(ctx), []).append(((r, j), cont))
        for ctx, members in groups.items():
            for part in _branch_runs(members, max(BRANCH_TOKENS, len(ctx))):
                segments.append(_shared_segment(list(ctx), [c for _, c in part], [w for w, _ in part]))
        for prefix, by_ctx in split_groups.items():
            segments += _split_segments(list(prefix), by_ctx)
        out: list[list[ContinuationScore | None]] = [[None] * len(pairs) for pairs in requests]
        limit = self.rope_limit()
        for s in segments:  # RoPE tables that depend on a sequence's length: such a sequence has its forward alone
            if len(s.positions) and int(s.positions.max()) + 1 > limit:
                self.run_forward([s], out, top)
        packed = [s for s in segments if not (len(s.positions) and int(s.positions.max()) + 1 > limit)]
        for group in _balanced_groups(packed, self.pack_tokens):
            self.run_forward([packed[i] for i in group], out, top)
        for (r, j), (r0, j0) in copies:
            out[r][j] = replace(out[r0][j0], ids=list(out[r0][j0].ids))
        return out  # type: ignore[return-value]

    def rope_limit(self) -> float:
        """The sequence length past which the model's RoPE tables change for the whole sequence (longrope's long
        factors, dynamic NTK scaling); infinite when they never do."""
        rope = self.model.rope
        if rope is None:
            return float("inf")
        if rope.long is not None:
            return float(rope.long_after)
        return float(rope.max_seq_len) if rope.dynamic else float("inf")

    def run_forward(self, segments: list[_Segment], out: list[list[ContinuationScore | None]], top: int = 0) -> None:
        """One packed forward of `segments`: logits at the rows something is scored from, log-softmax per row (and
        the `top` best tokens of each row scored)."""
        tokens = np.asarray([t for s in segments for t in s.tokens], dtype=np.int64)  # [T]
        starts = np.cumsum([0] + [len(s.tokens) for s in segments])
        wanted = [(start + np.asarray(rows, dtype=np.int64), np.asarray(targets, dtype=np.int64))
                  for s, start in zip(segments, starts) for _, rows, targets, _, _ in s.scored]
        rows = np.unique(np.concatenate([r for r, _ in wanted]))  # [R] packed rows, sorted
        layout = [(s.positions, s.mask, s.prefix) for s in segments]
        if len(tokens) < FLOOR_TOKENS:  # a filler segment (see FLOOR_TOKENS); its rows are never read
            layout.append(tree(FLOOR_TOKENS - len(tokens), []))
            tokens = np.concatenate([tokens, np.full(FLOOR_TOKENS - len(tokens), tokens[0])])
        if len(rows) < FLOOR_ROWS:
            spare = np.setdiff1d(np.arange(len(tokens)), rows)[:FLOOR_ROWS - len(rows)]
            rows = np.union1d(rows, spare)
        packing = pack(layout)
        logits = self.model.forward(tokens[None, :], None, packing=packing, rows=rows)[0]  # [R, V]
        self.tokens += len(tokens)
        m, logsum = row_log_normalizers(logits)
        scored = [sc for s in segments for sc in s.scored]
        for (where, _, cont, ctx, truncated), (prow, target) in zip(scored, wanted):
            i = np.searchsorted(rows, prow)  # [m] rows of `logits`
            x = logits[i, target]  # [m] float32
            lp = (x.astype(np.float64) - m[i]) - logsum[i]
            greedy = bool(np.all(x == m[i])) and all(int(np.argmax(logits[k])) == t for k, t in zip(i, target))
            best = _top_tokens(logits[i], m[i], logsum[i], top) if top > 0 else ()
            out[where[0]][where[1]] = ContinuationScore(float(lp.sum()), list(cont), greedy, truncated, ctx,
                                                        tuple(lp.tolist()), best)


def _top_tokens(rows: np.ndarray, m: np.ndarray, logsum: np.ndarray, k: int) -> tuple:  # [m, V] -> m x (ids, lps)
    """Each row's `k` most likely tokens and their log-probabilities (the scored tokens' arithmetic: a row's argmax
    has the log-probability its token gets when it is the one scored), best first, ties by id. Whole rows at a time
    (an echoed prompt asks for every row's top: a per-row numpy call cost more than the forward's output projection);
    k = 1 (lm-evaluation-harness's `logprobs: 1`) is each row's argmax, the lowest id among equal maxima."""
    k = min(k, rows.shape[1])
    if not len(rows):
        return ()
    if k == 1:
        ids = rows.argmax(axis=1)[:, None]  # [m, 1]: the first maximum, the lowest id (ties by id)
    else:
        ids = np.argpartition(-rows, k - 1, axis=1)[:, :k] if k < rows.shape[1] else \
            np.broadcast_to(np.arange(rows.shape[1]), rows.shape)  # [m, k]
        vals = np.take_along_axis(rows, ids, axis=1)
        ids = np.stack([i[np.lexsort((i, -v))] for i, v in zip(ids, vals)])  # best first, ties by id
    lps = (np.take_along_axis(rows, ids, axis=1).astype(np.float64) - m[:, None]) - logsum[:, None]  # [m, k]
    return tuple(zip(map(tuple, ids.tolist()), map(tuple, lps.tolist())))


# The pieces `nlpkit.lm.transformer.prefix_scoring` builds its segments from (contexts sharing a token prefix), and
# those `prompt_scoring` (a server's echoed prompts) packs and reads its forwards with.
Segment = _Segment
forward_groups = _forward_groups
balanced_groups = _balanced_groups
top_tokens = _top_tokens
