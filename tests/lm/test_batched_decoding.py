"""Batched decoding (nlpkit/lm/transformer/batch_decoding.py, nlpkit/lm/generation/batch_generation.py): many sequences of
different lengths advanced in one forward per step give what one-sequence-at-a-time decoding gives."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import FIXTURES

from nlpkit.lm.generation.batch_generation import Request, generate_batched
from nlpkit.lm.generation import GenerationStats, generate_ids
from nlpkit.lm.interface import Prompt
from nlpkit.lm.generation.sampling import SamplingConfig
from nlpkit.lm.transformer.transformer_lm import TransformerLM, last_logits
from nlpkit.lm.transformer.batch_decoding import DecodingBatch
from nlpkit.lm.transformer.loaders import load_model

MODELS = ["gpt2-bpe", "llama-spm"]


@pytest.fixture(scope="module", params=MODELS)
def model(request):
    from nlpkit.lm.transformer.batch_decoding import supports_batching

    m = load_model(FIXTURES / "score" / "models" / request.param)
    assert supports_batching(m)  # float32 or native weights alike (only longrope decodes one state per sequence)
    return m


def prompts(model, n: int = 7, seed: int = 0) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return [list(map(int, rng.integers(3, model.config.vocab_size, size=k)))
            for k in rng.integers(1, 30, size=n)]


def one_at_a_time(model, prompt, steps):  # -> (greedy ids, logits before each of them and after the last)
    cache = model.new_cache(1, len(prompt) + steps + 1)
    logits = [last_logits(model, np.array([prompt]), cache)[0]]
    ids = []
    for _ in range(steps):
        ids.append(int(np.argmax(logits[-1])))
        logits.append(last_logits(model, np.array([[ids[-1]]]), cache)[0])
    return ids, logits


def test_a_step_of_many_sequences_gives_each_its_own_logits(model):
    """Every row of a batched step against the same sequence decoded alone (tiny models: bit-identical; the
    kernels BLAS picks for one row and for many may differ in their last bits on wider matrices)."""
    ps = prompts(model)
    steps = 6
    ref = [one_at_a_time(model, p, steps) for p in ps]
    batch = DecodingBatch(model)
    logits = {i: batch.join(i, p, steps + 1) for i, p in enumerate(ps)}
    for s in range(steps):
        feed = [int(np.argmax(logits[k])) for k in batch.keys]
        assert feed == [ref[k][0][s] for k in batch.keys]
        for k, row in zip(batch.keys, batch.step(feed)):
            logits[k] = row
            np.testing.assert_allclose(row, ref[k][1][s + 1], rtol=0, atol=1e-4)


def test_prompts_joining_together_are_prefilled_as_each_alone(model):
    """`join_many` (one packed forward for all the prompts) gives each prompt the logits and the keys/values its own
    prefill gives, and the sequences then decode as if they had joined one at a time."""
    ps = prompts(model, 6, seed=3) + [[5]]  # a one-token prompt too
    alone, packed = DecodingBatch(model), DecodingBatch(model)
    ref = [alone.join(i, p, 4) for i, p in enumerate(ps)]
    got = packed.join_many([(i, p, 4) for i, p in enumerate(ps)])
    assert packed.keys == alone.keys
    for r, g in zip(ref, got):
        np.testing.assert_allclose(g, r, rtol=0, atol=1e-5)
    for a, b in zip(alone.seqs, packed.seqs):
        assert (a.cache.length, a.cache.max_len) == (b.cache.length, b.cache.max_len)
        assert a.cache.tokens.tolist() == b.cache.tokens.tolist()
        for ka, kb in zip(a.cache.k + a.cache.v, b.cache.k + b.cache.v):
            np.testing.assert_allclose(kb, ka, rtol=0, atol=1e-5)
    feed = [int(np.argmax(r)) for r in ref]
    np.testing.assert_allclose(packed.step(feed), alone.step(feed), rtol=0, atol=1e-5)


def test_sequences_join_and_leave_between_steps(model):
    ps = prompts(model, 4, seed=1)
    ref = [one_at_a_time(model, p, 5)[0] for p in ps]
    batch = DecodingBatch(model)
    got = {0: [], 2: []}
    logits = {0: batch.join(0, ps[0], 6), 2: batch.join(2, ps[2], 6)}
    for s in range(5):
        if s == 2:  # a sequence joins mid-way; another leaves
            logits[1] = batch.join(1, ps[1], 6)
            got[1] = []
            batch.leave(2)
        feed = []
        for k in batch.keys:
            got[k].append(int(np.argmax(logits[k])))
            feed.append(got[k][-1])
        for k, row in zip(batch.keys, batch.step(feed)):
            logits[k] = row
    assert got[0] == ref[0]
    assert got[2] == ref[2][:2]
    assert got[1] == ref[1][:3]


def test_greedy_batched_equals_one_at_a_time_whatever_the_batch_size(model):
    lm = TransformerLM(model)
    ps = prompts(model, 9, seed=2)
    ref = [list(generate_ids(lm, p, max_new_tokens=8 + i, sampling=SamplingConfig(temperature=0)))
           for i, p in enumerate(ps)]
    for size in (1, 3, 16):
        got = list(generate_batched(lm, [Request(Prompt(p), 8 + i) for i, p in enumerate(ps)], batch_size=size,
                                    sampling=SamplingConfig(temperature=0)))
        assert [g.index for g in got] == list(range(len(ps)))  # input order
        assert [g.ids for g in got] == ref
        assert all(g.finish in ("eos", "length") for g in got)


def test_seeded_sampling_draws_the_same_tokens_whatever_the_batch_size(model):
    lm = TransformerLM(model)
    ps = prompts(model, 6, seed=3)
    cfg = SamplingConfig(temperature=1.0, top_k=50, top_p=0.9)
    ref = [list(generate_ids(lm, p, max_new_tokens=10, sampling=cfg, seed=7)) for p in ps]
    for size in (1, 4):
        got = generate_batched(lm, [Request(Prompt(p), 10) for p in ps], batch_size=size, sampling=cfg, seed=7)
        assert [g.ids for g in got] == ref


def test_sequences_finish_at_different_steps_by_their_own_stop_test(model):
    lm = TransformerLM(model)
    ps = prompts(model, 5, seed=4)
    greedy = SamplingConfig(temperature=0)
    ref = [list(generate_ids(lm, p, max_new_tokens=12, sampling=greedy, ignore_eos=True)) for p in ps]
    stops = [2, 5, 1, 12, 3]  # stop after this many tokens

    def stopper(n):
        seen = []
        return lambda tid: seen.append(tid) or len(seen) >= n

    got = list(generate_batched(lm, [Request(Prompt(p), 12, stopper(n)) for p, n in zip(ps, stops)], batch_size=3,
                                sampling=greedy, ignore_eos=True))
    assert [g.ids for g in got] == [r[:n] for r, n in zip(ref, stops)]
    assert [g.finish for g in got] == ["stop", "stop", "stop", "stop", "stop"]


def test_a_sequence_that_fills_the_context_ends_there_the_others_go_on(model):
    lm = TransformerLM(model)
    ctx = model.config.positions
    long = list(range(3, 3 + ctx - 2))  # room for two tokens
    short = prompts(model, 1, seed=5)[0]
    got = list(generate_batched(lm, [Request(Prompt(long), 10), Request(Prompt(short), 10)], batch_size=2,
                                sampling=SamplingConfig(temperature=0), ignore_eos=True))
    st = GenerationStats()
    ref = list(generate_ids(lm, long, max_new_tokens=10, sampling=SamplingConfig(temperature=0), ignore_eos=True,
                            stats=st))
    assert got[0].ids == ref and got[0].finish == st.finish == "context"
    assert len(got[1].ids) == 10 and got[1].finish == "length"


def test_a_prompt_longer_than_the_window_is_an_error_naming_both_lengths(model):
    lm = TransformerLM(model)
    ctx = model.config.positions
    with pytest.raises(Exception, match=f"{ctx + 5} tokens but the context is {ctx}"):
        list(generate_batched(lm, [Request(Prompt([3] * (ctx + 5)), 4)]))


def test_zero_new_tokens_and_bad_batch_size():
    from nlpkit.errors import UsageError

    model = load_model(FIXTURES / "score" / "models" / "gpt2-bpe")
    lm = TransformerLM(model)
    got = list(generate_batched(lm, [Request(Prompt([5, 6]), 0), Request(Prompt([5]), 2)]))
    assert got[0].ids == [] and got[0].finish == "length" and len(got[1].ids) <= 2
    with pytest.raises(UsageError, match="batch_size"):
        list(generate_batched(lm, [Request(Prompt([5]), 2)], batch_size=0))


def test_ngram_models_decode_one_state_per_sequence():
    from nlpkit.lm.load import load_language_model

    lm = load_language_model(str(FIXTURES / "ngram" / "tiny-3.arpa"))
    p = lm.prompt("the")
    cfg = SamplingConfig(temperature=1.0)
    ref = list(generate_ids(lm, p, max_new_tokens=6, sampling=cfg, seed=3))
    got = list(generate_batched(lm, [Request(p, 6), Request(p, 6)], batch_size=2, sampling=cfg, seed=3))
    assert got[0].ids == ref and got[1].ids == ref


def test_a_forked_sequence_continues_as_its_source_and_bad_forks_are_named(model):
    """`fork` copies a live sequence's first positions: the fork's next steps give the source's logits; a key
    already live or more positions than the source holds are errors."""
    prompt = prompts(model, 1, seed=4)[0] + [5, 6, 7]
    batch = DecodingBatch(model)
    first = batch.join("a", prompt, 4)
    batch.fork("a", "b", len(prompt), 4)
    tok = int(np.argmax(first))
    a, b = batch.step([tok, tok])
    np.testing.assert_array_equal(a, b)
    with pytest.raises(Exception, match="already in the batch"):
        batch.fork("a", "b", len(prompt), 4)
    with pytest.raises(Exception, match="cannot fork 99 positions"):
        batch.fork("a", "c", 99, 4)


def test_the_kv_budget_admits_what_fits_and_the_results_stay_the_same(model, monkeypatch):
    """A batch size larger than the memory allows: sequences join only while their KV caches fit the budget
    (the first always does), later ones wait for a place, and every continuation is what it is unbounded."""
    from nlpkit.lm.generation.batch_generation import BatchStats

    lm = TransformerLM(model)
    ps = prompts(model, 7, seed=6)
    reqs = lambda: [Request(Prompt(p), 6) for p in ps]  # noqa: E731
    greedy = SamplingConfig(temperature=0)
    free = [g.ids for g in generate_batched(lm, reqs(), batch_size=16, sampling=greedy)]
    per_position = DecodingBatch(model).bytes_per_position
    longest = max(len(p) for p in ps) + 6
    for room, most in ((0, 1), (2 * longest, 2)):
        monkeypatch.setattr(DecodingBatch, "__init__", _with_budget(room * per_position))
        st = BatchStats()
        got = list(generate_batched(lm, reqs(), batch_size=16, sampling=greedy, stats=st))
        assert [g.ids for g in got] == free
        assert 1 <= st.most_live <= most


def _with_budget(budget):
    init = DecodingBatch.__init__

    def patched(self, model, context=None, kv_budget=-1):
        init(self, model, context, kv_budget=budget)
    return patched


def test_unpadded_products_stay_unpadded_on_every_threads_share(model, monkeypatch):
    """`pad=False` (a batched decode step's products) is an argument passed down to each row share, not a flag of
    the calling thread: a layer split over two threads never pads a share's rows, and gives the rows the same
    values as on one thread."""
    from nlpkit.lm.threads import RowPool, SERIAL
    from nlpkit.lm.transformer import products
    from nlpkit.lm.transformer.layer_loop import ROW_MIN, run_layers

    n = 2 * ROW_MIN + 8  # rows enough for two shares
    x = np.random.default_rng(0).standard_normal((1, n, model.config.dim)).astype(np.float32)
    one = run_layers(model, x, _NoAttention(model, n), SERIAL, pad=False)
    asked = []
    monkeypatch.setattr(products, "padded_rows", lambda *a: asked.append(a) or a[0])
    two = run_layers(model, x, _NoAttention(model, n), RowPool(2), pad=False)
    assert asked == []
    np.testing.assert_allclose(two, one, rtol=0, atol=1e-5)


class _NoAttention:
    """Attention that returns the values as they are (the rows' products alone matter here)."""

    def __init__(self, model, n):
        self.c = model.config
        self.cs = model.rope.cos_sin(0, n) if self.c.uses_rope else None

    def tables(self, li):
        return self.cs

    def keys_values(self, li, b, t):
        return tuple(np.empty((b, self.c.n_kv_heads, t, self.c.head_dim), np.float32) for _ in range(2))

    def attend(self, li, q, k, v, keep):
        return np.broadcast_to(v[:, :, None], q.shape)[:, :, :, keep:]


def test_the_kv_pool_moves_the_last_sequence_into_a_freed_slot_and_grows_keeping_every_cache():
    """`KVPool`: caches are views of their slots; a sequence that leaves hands its slot to the last one (its keys and
    values moved with it), a freed slot reads as zeros again, and growing (more slots, a longer capacity) keeps what
    every live cache holds."""
    from nlpkit.lm.transformer.kv_pool import CAP_STEP, KVPool

    pool = KVPool(n_layers=2, n_kv_heads=2, head_dim=4)
    caches = [pool.take(5 + i) for i in range(3)]
    for i, c in enumerate(caches):
        for layer, (k, v) in enumerate(zip(c.k, c.v)):
            k[0, :, :3] = 10 * i + layer
            v[0, :, :3] = -(10 * i + layer)
        c.advance(3)
    pool.give_back(caches[0])
    assert pool.users == [caches[2], caches[1]] and pool.slot_of(caches[1:]).tolist() == [1, 0]
    assert caches[2].k[1].shape == (1, 2, 7, 4) and (caches[2].k[1][0, :, :3] == 21).all()
    assert (pool.k[0][2] == 0).all()  # the vacated slot
    more = [pool.take(CAP_STEP + 1) for _ in range(8)]  # more slots than there were, and a longer capacity
    assert pool.slots >= 10 and pool.cap == 2 * CAP_STEP
    assert (caches[1].v[0][0, :, :3] == -10).all() and (caches[2].k[1][0, :, :3] == 21).all()
    assert more[-1].k[0].shape == (1, 2, CAP_STEP + 1, 4)
