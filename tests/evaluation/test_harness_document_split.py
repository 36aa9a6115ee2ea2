"""A document's own contexts (winogrande's `multiple_input`: the sentence up to the blank with each option, one
continuation) run their common token start once (`prefix_scoring.document_split`, `score_shared(splits=)`): every
continuation within 1e-5 of scoring it after its whole context, fewer tokens through the model, and the same bits
whether the document's contexts are scored together, one alone, or among other documents in any order."""

from __future__ import annotations

import math

import pytest

from nlpkit.evaluation.harness.requests import Instance
from nlpkit.evaluation.harness.run import with_siblings
from nlpkit.lm.load import load_language_model
from nlpkit.lm.transformer.prefix_scoring import MIN_SPLIT, document_split, score_shared
from nlpkit.lm.transformer.packed_scoring import encode_pair

DOCS = [("The trophy would not fit in the brown suitcase because the", ["trophy", "suitcase"], " was too big."),
        ("Sarah was a much better surgeon than Maria so", ["Sarah", "Maria"], " always got the harder cases."),
        ("The city councilmen refused the demonstrators a permit because the", ["councilmen", "demonstrators"],
         " feared violence.")]


@pytest.fixture(scope="module")
def scorer():
    return load_language_model(None).continuation_scorer(None)  # the shipped model


def _doc(i):
    start, options, cont = DOCS[i]
    contexts = [f"{start} {o}" for o in options]
    return [(c, [cont]) for c in contexts], contexts


def _scores(scorer, docs):
    """score_shared of the documents' requests together, each with its document's split: [[logprob]] per request."""
    requests, splits = [], []
    for i in docs:
        reqs, contexts = _doc(i)
        requests += reqs
        splits += [document_split(scorer, c, contexts) for c, _ in reqs]
    return [[s.logprob for s in r] for r in score_shared(scorer, requests, splits=splits)]


def test_document_split_is_the_common_token_start_of_the_documents_contexts(scorer):
    for i in range(len(DOCS)):
        _, contexts = _doc(i)
        ids = [encode_pair(scorer.model, c, " x")[0] for c in contexts]
        split = document_split(scorer, contexts[0], contexts)
        assert split >= MIN_SPLIT and split == document_split(scorer, contexts[1], contexts[::-1])
        assert ids[0][:split] == ids[1][:split] and all(len(x) > split for x in ids)
        assert ids[0][split] != ids[1][split] or min(map(len, ids)) == split + 1
    assert document_split(scorer, "Hi there", ["Hi there", "Bye"]) == 0  # under MIN_SPLIT tokens in common
    assert document_split(scorer, contexts[0], contexts[:1]) == 0  # no other context: nothing to share


def test_a_documents_contexts_share_their_start_within_1e_5_of_whole_contexts_with_fewer_tokens(scorer):
    requests = [r for i in range(len(DOCS)) for r in _doc(i)[0]]
    ref = scorer.score_requests(requests)
    whole_tokens = scorer.tokens
    scorer.tokens = 0
    got = score_shared(scorer, requests, splits=[document_split(scorer, c, _doc(i // 2)[1])
                                                 for i, (c, _) in enumerate(requests)])
    assert scorer.tokens < whole_tokens
    for r, g in zip(ref, got):
        for a, b in zip(r, g):
            assert a.ids == b.ids and a.is_greedy == b.is_greedy
            assert math.isclose(a.logprob, b.logprob, rel_tol=1e-5, abs_tol=1e-5), (a.logprob, b.logprob)


def test_a_documents_contexts_get_the_same_bits_together_alone_or_among_other_documents(scorer):
    together = _scores(scorer, [0])
    assert _scores(scorer, [2, 0, 1])[2:4] == together
    assert _scores(scorer, [1, 0])[2:4] == together
    for j in range(2):  # one context alone, with its document's split
        req, contexts = _doc(0)
        alone = score_shared(scorer, [req[j]], splits=[document_split(scorer, req[j][0], contexts)])
        assert [s.logprob for s in alone[0]] == together[j]


def test_with_siblings_gives_each_request_its_documents_contexts_when_there_are_several():
    doc, other = {"s": 1}, {"s": 2}
    insts = [Instance("loglikelihood", doc, ("A b", " c"), 0, 0), Instance("loglikelihood", doc, ("A d", " c"), 1, 0),
             Instance("loglikelihood", doc, ("", " c"), 2, 0),  # acc_mutual_info's unconditional request
             Instance("loglikelihood", other, ("Q", " x"), 0, 1), Instance("loglikelihood", other, ("Q", " y"), 1, 1)]
    assert with_siblings(insts) == [("A b", " c", ("A b", "A d")), ("A d", " c", ("A b", "A d")), ("", " c"),
                                    ("Q", " x"), ("Q", " y")]


def test_task_runs_pack_larger_forwards_with_the_same_bits():
    """`HarnessModel` packs forwards of TASK_PACK_TOKENS tokens (fewer forwards' fixed costs): every number the same
    bits as forwards of PACK_TOKENS, the document splits included."""
    from nlpkit.evaluation.harness.model_adapter import HarnessModel
    from nlpkit.lm.spec import LoadSpec
    from nlpkit.lm.transformer.packed_scoring import PACK_TOKENS, TASK_PACK_TOKENS

    model = HarnessModel(LoadSpec(None))
    assert model.scorer.pack_tokens == TASK_PACK_TOKENS > PACK_TOKENS
    requests = [("Q: What colour is snow?\nA:", " white"), ("Q: What colour is snow?\nA:", " cold and white")]
    for k in range(12):  # 36 documents of two contexts each
        for i in range(len(DOCS)):
            reqs, contexts = _doc(i)
            contexts = tuple(f"Story {k}: {c}" for c in contexts)
            requests += [(c, cont, contexts) for c, ((_, (cont,))) in zip(contexts, reqs)]
    model.scorer.pack_tokens = 64  # many small forwards
    small = model.loglikelihood(requests)
    model.scorer.pack_tokens = TASK_PACK_TOKENS
    assert model.loglikelihood(requests) == small
