"""`nlpkit score` on generation items: the command line of the generate task (its options, records, summaries,
comparisons and errors), against lm-evaluation-harness's own outputs where there are any (test_generate_task_lmeval.py
pins the numbers through the Python API; here the same through the command)."""

from __future__ import annotations

import json

import pytest

from conftest import FIXTURES

FIX = FIXTURES / "score"
GPT2 = str(FIX / "models" / "gpt2-bpe")
LLAMA = str(FIX / "models" / "llama-spm")


def fixture(name: str) -> dict:
    return json.loads((FIX / f"lmeval-gen-{name}.json").read_text(encoding="utf-8"))


def task_args(fix: dict, task: str) -> list[str]:
    if task == "score_gen_a":
        g = fix["gen_a"]
        args = ["--max-gen-toks", str(g["max_gen_toks"]), "--extract", g["regex"], "--extract-group",
                str(g["group_select"]), "--ignore-case", "--ignore-punctuation"]
        for r in g["regexes_to_ignore"]:
            args += ["--ignore-regex", r]
    else:
        g = fix["gen_b"]
        args = ["--max-gen-toks", str(g["max_gen_toks"])]
    for u in g["until"]:
        args += ["--until", u]
    return args


def run_json(cli, *args: str) -> dict:
    r = cli("score", *args, "--format", "json")
    assert r.returncode == 0, r.stderr.decode()
    return json.loads(r.stdout)


def model_args(name: str) -> list[str]:
    if name == "smollm2":  # the GGUF lm-eval's float32 directory was converted from; lm-eval's max_length 128
        from test_score_lmeval import smollm2_gguf

        return ["-m", str(smollm2_gguf()), "--context", "128"]
    return ["-m", str(FIX / "models" / name)]


@pytest.mark.parametrize("task", ["score_gen_a", "score_gen_b"])
@pytest.mark.parametrize("name", ["gpt2-bpe", "llama-spm", "smollm2"])
def test_score_generate_records_equal_lm_eval(cli, name, task):
    fix = fixture(name)
    path = FIX / f"gen-{task[-1]}-{name}.jsonl"
    doc = run_json(cli, *model_args(name), str(path), *task_args(fix, task), "--batch-size", "3")
    samples = fix[task]["samples"]
    assert [r["generation"] for r in doc["items"]] == [s["resps"][0] for s in samples]
    assert [r["answer"] for r in doc["items"]] == [s["filtered_resps"][0] for s in samples]
    assert [r["exact_match"] for r in doc["items"]] == [s["exact_match"] for s in samples]
    assert [r["id"] for r in doc["items"]] == [f"q{n}" for n in range(len(samples))]
    assert all(r["finish"] in ("stop", "eos", "length") for r in doc["items"])
    key = next(k for k in fix[task]["results"] if k.startswith("exact_match,"))
    (summary,) = [s for s in doc["summary"] if s["metric"] == "exact_match"]
    assert summary["value"] == pytest.approx(fix[task]["results"][key], abs=1e-12)
    assert summary["stderr"] == pytest.approx(fix[task]["results"]["exact_match_stderr," + key.split(",")[1]],
                                              rel=1e-9)


def test_task_generate_is_detected_from_a_target_field(cli, tmp_path):
    p = tmp_path / "items.jsonl"
    p.write_text('{"question": "The sky is", "answer": "blue"}\n')
    doc = run_json(cli, "-m", GPT2, str(p), "--field", "context=question", "--field", "target=answer",
                   "--max-gen-toks", "4")
    assert set(doc["items"][0]) >= {"generation", "answer", "target", "exact_match", "tokens", "finish"}
    assert doc["summary"][0]["metric"] == "exact_match"


def test_bleu_and_chrf_are_corpus_metrics_in_the_summary(cli, tmp_path):
    p = tmp_path / "items.jsonl"
    p.write_text("".join(json.dumps({"context": c, "target": t}) + "\n" for c, t in
                         [("a", "the cat"), ("b", "a dog"), ("c", ["x", "y"])]))
    doc = run_json(cli, "-m", GPT2, str(p), "--max-gen-toks", "4", "--metric", "exact_match,bleu,chrf")
    import sacrebleu

    answers = [r["answer"] for r in doc["items"]]
    refs = [["the cat", "a dog", "x"], ["the cat", "a dog", "y"]]
    got = {s["metric"]: s for s in doc["summary"]}
    assert got["bleu"]["value"] == pytest.approx(sacrebleu.corpus_bleu(answers, refs).score, abs=1e-9)
    assert got["chrf"]["value"] == pytest.approx(sacrebleu.corpus_chrf(answers, refs).score, abs=1e-9)


def test_two_models_compare_on_exact_match_and_fail_if_worse(cli):
    path = FIX / "gen-b-gpt2-bpe.jsonl"
    r = cli("score", "-m", GPT2, "-m", LLAMA, str(path), "--until", "ZZ", "--max-gen-toks", "10", "--format", "json",
            "--fail-if-worse", "0.5", "--bootstrap", "200")
    doc = json.loads(r.stdout)
    (cmp,) = doc["comparisons"]
    assert cmp["metric"] == "exact_match" and "mcnemar_p" in cmp
    # a right/wrong metric is gated on McNemar's exact p-value; a failed gate exits 3
    assert r.returncode == (3 if cmp["difference"] < 0 and cmp["mcnemar_p"] < 0.5 else 0), r.stderr.decode()
    assert [v["metric"] for v in doc["verdicts"]] == ["exact_match"]


def test_seeded_sampling_repeats_and_does_not_depend_on_the_batch_size(cli):
    path = str(FIX / "gen-b-gpt2-bpe.jsonl")
    args = ["-m", GPT2, path, "--max-gen-toks", "6", "--temperature", "1", "--seed", "3"]
    one = run_json(cli, *args, "--batch-size", "1")["items"]
    many = run_json(cli, *args, "--batch-size", "5")["items"]
    assert [r["generation"] for r in one] == [r["generation"] for r in many]


@pytest.mark.parametrize("args, message", [
    (["--extract", "(\\d+"], "--extract '(\\\\d+' is not a valid regular expression"),
    (["--ignore-regex", "["], "--ignore-regex '[' is not a valid regular expression"),
    (["--max-gen-toks", "0"], "--max-gen-toks"),
    (["--max-gen-toks", "64"], "--max-gen-toks 64 leaves no room for a context in the 64-token window"),
    (["--until", ""], "--until"),
    (["--metric", "rouge"], "--metric"),
])
def test_bad_generate_options_are_usage_errors(cli, args, message):
    r = cli("score", "-m", GPT2, str(FIX / "gen-b-gpt2-bpe.jsonl"), *args)
    assert r.returncode == 2, r.stderr.decode()
    assert message in r.stderr.decode()


def test_an_item_with_target_and_choices_is_an_error_naming_it(cli, tmp_path):
    p = tmp_path / "items.jsonl"
    p.write_text('{"context": "a", "target": "b"}\n{"context": "a", "target": "b", "choices": ["x"], "gold": 0}\n')
    r = cli("score", "-m", GPT2, str(p), "--max-gen-toks", "2")
    assert r.returncode == 1
    assert "items.jsonl, line 2" in r.stderr.decode() and "target" in r.stderr.decode()


def test_mixed_item_kinds_are_an_error_naming_the_line(cli, tmp_path):
    p = tmp_path / "items.jsonl"
    p.write_text('{"context": "a", "target": "b"}\n{"context": "a", "continuation": " b"}\n')
    r = cli("score", "-m", GPT2, str(p), "--max-gen-toks", "2")
    assert r.returncode == 1 and "line 2" in r.stderr.decode()


def test_generate_options_on_another_task_are_usage_errors(cli):
    r = cli("score", "-m", GPT2, str(FIX / "ll.jsonl"), "--until", "x")
    assert r.returncode == 2 and "--until applies to the generate task" in r.stderr.decode()
