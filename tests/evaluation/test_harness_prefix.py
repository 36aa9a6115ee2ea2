"""Contexts that share a long token prefix (few-shot examples) computed once (`prefix_scoring.score_shared`): every
continuation's log-probability within 1e-5 of scoring it after its whole context, the same tokens and is_greedy,
fewer tokens through the model; pairs too long for the window and contexts without a rest go the usual way."""

from __future__ import annotations

import math

from nlpkit.lm.load import load_language_model
from nlpkit.lm.transformer.prefix_scoring import score_shared

SHOTS = ("The following are questions about colours and animals.\n\n"
         "Q: What colour is the sky?\nA: blue\n\nQ: Which animal barks?\nA: dog\n\n"
         "Q: What colour is grass?\nA: green\n\nQ: Which animal says moo?\nA: cow\n\n")
QUESTIONS = ["Q: What colour is snow?\nA:", "Q: Which animal purrs?\nA:", "Q: What colour is coal?\nA:",
             "Q: Which bird hoots?\nA:"]
CHOICES = [" A", " B", " white", " a small black cat", " owl"]


def _requests():
    return [(SHOTS + q, CHOICES) for q in QUESTIONS] + [(SHOTS.rstrip(), [" Q"]), ("Short.", [" yes", " no"])]


def test_shared_prefix_scores_equal_whole_context_scores():
    lm = load_language_model(None)  # the shipped model
    scorer = lm.continuation_scorer(None)
    ref = scorer.score_requests(_requests())
    before = scorer.tokens
    got = score_shared(scorer, _requests())
    shared_tokens = scorer.tokens - before
    assert [[s.ids for s in r] for r in got] == [[s.ids for s in r] for r in ref]
    assert [[s.is_greedy for s in r] for r in got] == [[s.is_greedy for s in r] for r in ref]
    for r, g in zip(ref, got):
        for a, b in zip(r, g):
            assert math.isclose(a.logprob, b.logprob, rel_tol=1e-5, abs_tol=1e-5), (a.logprob, b.logprob)
    scorer.tokens = 0
    scorer.score_requests(_requests())
    assert shared_tokens < scorer.tokens


def test_a_five_shot_first_n_task_is_the_same_bits_on_1_2_and_4_threads(tmp_path):
    """One tree segment (the shots once, each document's rest a branch): its branches' attention spreads over the
    threads, each computed the same whichever thread runs it."""
    import json

    from click.testing import CliRunner

    from nlpkit.cli.main import cli

    words = "the cat sat on a mat while red birds sang over green hills near the cold river".split()
    docs = [{"question": " ".join(words[i % 7:i % 7 + 4 + i % 5]), "choices": [w for w in words[i % 9:i % 9 + 4]],
             "answer": i % 4} for i in range(24)]
    for name, rows in (("dev.jsonl", docs[:5]), ("test.jsonl", docs[5:])):
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (tmp_path / "five.yaml").write_text(
        "task: five_shot\ndataset_path: json\ndataset_kwargs:\n  data_files:\n"
        f"    dev: {tmp_path / 'dev.jsonl'}\n    test: {tmp_path / 'test.jsonl'}\n"
        "test_split: test\nfewshot_split: dev\nfewshot_config:\n  sampler: first_n\nnum_fewshot: 5\n"
        "description: \"The following are multiple choice questions (with answers) about cats and birds.\\n\\n\"\n"
        "output_type: multiple_choice\n"
        "doc_to_text: \"{{question}}\\nA. {{choices[0]}}\\nB. {{choices[1]}}\\nC. {{choices[2]}}\\n"
        "D. {{choices[3]}}\\nAnswer:\"\n"
        "doc_to_choice: [\"A\", \"B\", \"C\", \"D\"]\ndoc_to_target: answer\nmetric_list:\n  - metric: acc\n",
        encoding="utf-8")
    outs = {}
    for threads in ("1", "2", "4"):
        out = tmp_path / f"out{threads}"
        r = CliRunner().invoke(cli, ["score", "--tasks", "five_shot", "--include-path", str(tmp_path), "--output-path",
                                     str(out), "--log-samples", "--format", "jsonl", "-q"],
                               env={"NLPKIT_LM_THREADS": threads})
        assert r.exit_code == 0, r.output
        (samples,) = out.glob("*/samples_five_shot_*.jsonl")
        outs[threads] = samples.read_text(encoding="utf-8")
    assert outs["1"].count("\n") == 19
    assert outs["2"] == outs["1"] and outs["4"] == outs["1"]
