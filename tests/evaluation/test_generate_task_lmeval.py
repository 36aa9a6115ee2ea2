"""The generate task of `nlpkit score` against lm-evaluation-harness's own `generate_until` (tests/fixtures/score/
lmeval-gen-<model>.json, tools/make_score_fixtures.py --generate-only): its HF backend, float32, batch size 1,
greedy, on two tiny random models (byte-level BPE without BOS, SentencePiece with BOS) and SmolLM2-135M (window 128)
when its fixture is there. Every raw generation (`resps`), filtered answer (`filtered_resps`), per-item exact_match
and the aggregate are equal."""

from __future__ import annotations

import json

import pytest

from conftest import FIXTURES

FIX = FIXTURES / "score"
MODELS = ["gpt2-bpe", "llama-spm", "smollm2"]


def fixture(name: str) -> dict:
    path = FIX / f"lmeval-gen-{name}.json"
    if not path.is_file():
        pytest.skip(f"no generate_until fixture for {name}")
    return json.loads(path.read_text(encoding="utf-8"))


def model_path(name: str):
    if name == "smollm2":
        from test_score_lmeval import smollm2_gguf

        return smollm2_gguf()
    return FIX / "models" / name


def items(name: str, task: str) -> list[dict]:
    path = FIX / f"gen-{task[-1]}-{name}.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def options(fix: dict, task: str):
    from nlpkit.evaluation.answer_filters import MatchOptions
    from nlpkit.evaluation.generation_task import GenerationOptions

    if task == "score_gen_a":
        g = fix["gen_a"]
        return GenerationOptions(until=tuple(g["until"]), max_gen_toks=g["max_gen_toks"], extract=g["regex"],
                                 extract_group=g["group_select"],
                                 match=MatchOptions(True, True, tuple(g["regexes_to_ignore"])), batch_size=4)
    g = fix["gen_b"]
    return GenerationOptions(until=tuple(g["until"]), max_gen_toks=g["max_gen_toks"], batch_size=4)


@pytest.fixture(scope="module")
def generators():
    from nlpkit.evaluation.generation_task import Generator
    from nlpkit.lm.transformer.transformer_lm import TransformerLM
    from nlpkit.lm.transformer.loaders import load_model

    made = {}

    def get(name: str):
        if name not in made:
            fix = fixture(name)
            made[name] = Generator(TransformerLM(load_model(model_path(name))), window=fix["max_length"])
        return made[name]

    return get


@pytest.mark.parametrize("task", ["score_gen_a", "score_gen_b"])
@pytest.mark.parametrize("name", MODELS)
def test_generations_answers_and_exact_match_equal_lm_eval(name, task, generators):
    from nlpkit.evaluation.generation_task import score_generation, targets_of

    fix = fixture(name)
    gen = generators(name)
    opts = options(fix, task).validate()
    its = items(name, task)
    samples = fix[task]["samples"]
    assert [s["arguments"][0] for s in samples] == [it["context"] for it in its]  # the contexts lm-eval saw
    got = gen.generate([it["context"] for it in its], opts)
    ems = []
    for it, s, g in zip(its, samples, got):
        assert g.generation == s["resps"][0], (s["doc_id"], g, s["resps"])
        assert g.answer == s["filtered_resps"][0], (s["doc_id"], g.answer, s["filtered_resps"])
        _, metrics = score_generation(g, targets_of(it["target"], "target", "x"), opts)
        assert metrics["exact_match"] == s["exact_match"], (s["doc_id"], g.answer, it["target"])
        ems.append(metrics["exact_match"])
    key = next(k for k in fix[task]["results"] if k.startswith("exact_match,"))
    assert sum(ems) / len(ems) == pytest.approx(fix[task]["results"][key], abs=1e-12)
    assert 0 < sum(ems) < len(ems)  # right and wrong answers both pinned


@pytest.mark.parametrize("task", ["score_gen_a", "score_gen_b"])
def test_chat_generations_equal_lm_eval_apply_chat_template(task):
    """`--chat`: each context rendered as a user turn by SmolLM2's chat template (lm-eval --apply_chat_template),
    the template's end of turn a stop."""
    from nlpkit.evaluation.generation_task import score_generation, targets_of
    from nlpkit.evaluation.models import ModelSpec, load_scorer

    path = FIX / "lmeval-gen-smollm2-chat.json"
    if not path.is_file():
        pytest.skip("no --apply_chat_template generate fixture")
    fix = json.loads(path.read_text(encoding="utf-8"))
    gen = load_scorer(ModelSpec(str(model_path("smollm2")), fix["max_length"], True, None, True))
    opts = options(fix, task).validate()
    its = items("smollm2", task)
    got = gen.generate([it["context"] for it in its], opts)
    for it, s, g in zip(its, fix[task]["samples"], got):
        assert g.generation == s["resps"][0], (s["doc_id"], g.generation, s["resps"])
        assert g.answer == s["filtered_resps"][0]
        assert score_generation(g, targets_of(it["target"], "target", "x"), opts)[1]["exact_match"] == s["exact_match"]
