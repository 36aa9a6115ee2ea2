"""`prompt_scoring.score_prompts` (what `nlpkit serve` echoes): prompts that begin alike share their prefix, and each
prompt's numbers are the same bits alone, among others, in any order and on any thread count; the rows after the cut
are `PackedScorer.score_pairs`'s for (the prefix, the rest) bit for bit, and every row is within float32 rounding of
the prompt scored from its first token (the layout before sharing)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from conftest import FIXTURES

MODELS = ["gpt2-bpe", "llama-spm"]   # byte-level BPE without BOS; SentencePiece whose tokenizer adds BOS


@pytest.fixture(scope="module", params=MODELS)
def scorer(request):
    from nlpkit.lm.load import load_language_model

    lm = load_language_model(str(FIXTURES / "score" / "models" / request.param))
    return lm.continuation_scorer(int(lm.context_length))


def item_prompts(scorer, n_items: int = 6, seed: int = 3) -> list[list[int]]:
    """Four prompts per item, lm-evaluation-harness's way: one context (of 10 to 70 tokens, within the model's
    context) + each choice."""
    rng = random.Random(seed)
    v = scorer.model.config.vocab_size
    sizes = [n for n in (10, 25, 40, 70) if n + 10 <= scorer.window]
    out = []
    for _ in range(n_items):
        ctx = [rng.randrange(3, v) for _ in range(rng.choice(sizes))]
        out += [ctx + [rng.randrange(3, v) for _ in range(rng.randint(1, 9))] for _ in range(4)]
    return out


def test_prompt_cut_is_a_multiple_of_the_step_well_before_the_end():
    from nlpkit.lm.transformer.prompt_scoring import SHARE_MARGIN, SHARE_STEP, prompt_cut

    for fed in range(1, 300):
        cut = prompt_cut(fed)
        assert cut == 1 or (cut % SHARE_STEP == 0 and cut <= fed - SHARE_MARGIN < cut + SHARE_STEP)


@pytest.mark.parametrize("nxt", [False, True])
def test_a_prompt_scores_the_same_bits_alone_and_among_prompts_sharing_its_prefix(scorer, nxt):
    from nlpkit.lm.transformer.prompt_scoring import score_prompts

    prompts = item_prompts(scorer)
    together = score_prompts(scorer, [(p, nxt) for p in prompts], top=2)
    shuffled = list(range(len(prompts)))
    random.Random(1).shuffle(shuffled)
    again = score_prompts(scorer, [(prompts[k], nxt) for k in shuffled[:9]], top=2)
    for k, s in zip(shuffled[:9], again):
        assert s.token_logprobs == together[k].token_logprobs and s.top == together[k].top
    for k in (0, 5, 13, 22):
        [alone] = score_prompts(scorer, [(prompts[k], nxt)], top=2)
        assert alone.token_logprobs == together[k].token_logprobs and alone.top == together[k].top
        assert len(alone.token_logprobs) == len(prompts[k]) - 1 + nxt and len(alone.top) == len(alone.token_logprobs)


def test_a_prompt_scores_the_same_bits_on_1_2_and_4_threads(scorer, monkeypatch):
    from nlpkit.lm.transformer.prompt_scoring import score_prompts

    prompts = [(p, True) for p in item_prompts(scorer, 3)]
    outs = []
    for n in ("1", "2", "4"):
        monkeypatch.setenv("NLPKIT_LM_THREADS", n)
        outs.append([(s.token_logprobs, s.top) for s in score_prompts(scorer, prompts, top=1)])
    assert outs[0] == outs[1] == outs[2]


def test_the_rows_after_the_cut_are_score_pairs_bit_for_bit_and_all_within_rounding_of_the_first_token_layout(scorer):
    from nlpkit.lm.transformer.prompt_scoring import prompt_cut, score_prompts

    prompts = item_prompts(scorer)
    got = score_prompts(scorer, [(p, False) for p in prompts])
    for p, s in zip(prompts, got):
        cut = prompt_cut(len(p) - 1)
        [[ref]] = scorer.score_pairs([[(p[:cut], p[cut:])]])
        assert s.token_logprobs[cut - 1:] == ref.token_logprobs
        [[first]] = scorer.score_pairs([[(p[:1], p[1:])]])
        assert np.allclose(s.token_logprobs, first.token_logprobs, rtol=0, atol=1e-5)


def test_a_shared_prefix_runs_once(scorer):
    from nlpkit.lm.transformer.prompt_scoring import prompt_cut, score_prompts

    prompts = item_prompts(scorer)
    before = scorer.tokens
    score_prompts(scorer, [(p, False) for p in prompts])
    ran = scorer.tokens - before
    cuts = {tuple(p[:prompt_cut(len(p) - 1)]) for p in prompts}
    assert ran < sum(len(p) - 1 for p in prompts)
    assert ran >= sum(len(c) for c in cuts) + sum(len(p) - 1 - prompt_cut(len(p) - 1) for p in prompts)


def test_the_same_prompt_twice_gets_the_same_numbers_and_a_one_token_prompt_reads_the_next_row(scorer):
    from nlpkit.lm.transformer.prompt_scoring import score_prompts

    p = item_prompts(scorer, 1)[0]
    a, b, one = score_prompts(scorer, [(p, True), (p, True), (p[:1], True)], top=3)
    assert a.token_logprobs == b.token_logprobs and a.top == b.top
    assert len(one.token_logprobs) == 1 and len(one.top) == 1 and len(one.top[0][0]) == 3


@pytest.mark.parametrize("top", [0, 1, 3])
def test_a_kept_prefix_gives_the_bits_computing_it_again_gives(scorer, top):
    """lm-evaluation-harness's order (longest first): an item's choices arrive in different calls; with a
    `PrefixStore` the later ones reuse the prefix the first computed, and every number is the bits of the prompts
    scored all at once without a store."""
    from nlpkit.lm.transformer.prompt_scoring import PrefixStore, score_prompts

    prompts = item_prompts(scorer, 8, seed=5)
    want = score_prompts(scorer, [(p, True) for p in prompts], top=top)
    order = sorted(range(len(prompts)), key=lambda k: (-len(prompts[k]), tuple(prompts[k])))
    store = PrefixStore()
    before = scorer.tokens
    got = {}
    for a in range(0, len(order), 5):
        chunk = order[a:a + 5]
        for k, s in zip(chunk, score_prompts(scorer, [(prompts[k], True) for k in chunk], top=top, store=store)):
            got[k] = s
    assert store.hits > 0 and store.entries
    assert scorer.tokens - before < sum(len(p) for p in prompts)
    for k, s in enumerate(want):
        assert got[k].token_logprobs == s.token_logprobs and got[k].top == s.top, k


def test_a_prefix_store_drops_the_least_recently_used_past_its_bound(scorer):
    from nlpkit.lm.transformer.prompt_scoring import PrefixStore, score_prompts

    prompts = [p for p in item_prompts(scorer, 8, seed=5) if len(p) > 24][::4]
    store = PrefixStore()
    score_prompts(scorer, [(prompts[0], False)], store=store)
    one = store.bytes
    store = PrefixStore(max_bytes=2 * one + one // 2)
    for p in prompts[:4]:
        score_prompts(scorer, [(p, False)], store=store)
    assert len(store.entries) == 2 and store.bytes <= store.max_bytes
    assert list(store.entries)[-1][0] == tuple(prompts[3][:len(list(store.entries)[-1][0])])
