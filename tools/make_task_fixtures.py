"""Write tests/fixtures/tasks/: a suite of small task files in lm-evaluation-harness's format (our own YAML, hooks and
data, exercising include, !function, process_docs, process_results, group with aggregate_metric_list, tag,
multiple_choice, loglikelihood, loglikelihood_rolling, generate_until with filters, default and first_n samplers,
fewshot_split, description, target_delimiter, gen_prefix, repeats, multiple_input), then run lm-evaluation-harness
0.4.13 itself (its CLI, hf backend, float32, batch size 1) on the tiny checkpoints of tests/fixtures/score/models and
keep its results_*.json and samples_*.jsonl files (tests/fixtures/tasks/lmeval/<run>/<model>/).

Run from the repository root (the task files name their data relative to it, as datasets reads data_files):
    python tools/make_task_fixtures.py
lm-eval's hf backend needs `accelerate` (PYTHONPATH=/path/to/accelerate works).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "fixtures" / "tasks"
SUITE = OUT / "suite"
DATA = "tests/fixtures/tasks/suite/data"
MODELS = {"gpt2-bpe": "tests/fixtures/score/models/gpt2-bpe", "llama-spm": "tests/fixtures/score/models/llama-spm"}

QA = [
    ("colours", "What colour is the sky on a clear day?", ["blue", "green", "red", "black"], 0, "blue"),
    ("colours", "What colour is fresh grass?", ["purple", "green", "white", "orange"], 1, "green"),
    ("animals", "Which animal barks?", ["cat", "cow", "dog", "fish"], 2, "dog"),
    ("animals", "Which animal has a trunk?", ["elephant", "mouse", "horse", "bee"], 0, "elephant"),
    ("numbers", "What is two plus two?", ["three", "five", "six", "four"], 3, "four"),
    ("numbers", "What is ten minus one?", ["nine", "eight", "seven", "ten"], 0, "nine"),
    ("places", "What is the capital of France?", ["Berlin", "Madrid", "Paris", "Rome"], 2, "Paris"),
    ("places", "Caf\u00e9 au lait comes from which language?", ["German", "French", "Dutch", "Greek"], 1, "French"),
    ("weather", "What falls from clouds when it rains?", ["sand", "water", "stones", "leaves"], 1, "water"),
    ("weather", "Is snow hot or cold?", ["cold", "hot", "warm", "burning"], 0, "cold"),
]
TRAIN = [
    ("colours", "What colour is a ripe banana?", ["yellow", "blue", "grey", "pink"], 0, "yellow"),
    ("animals", "Which animal says moo?", ["duck", "cow", "sheep", "owl"], 1, "cow"),
    ("numbers", "What is one plus one?", ["two", "three", "zero", "one"], 0, "two"),
    ("places", "What is the capital of Italy?", ["Lisbon", "Rome", "Vienna", "Oslo"], 1, "Rome"),
    ("weather", "What do you need when it rains?", ["umbrella", "sunglasses", "skis", "kite"], 0, "umbrella"),
    ("animals", "Which bird cannot fly?", ["eagle", "sparrow", "penguin", "crow"], 2, "penguin"),
]
ARITH = [("What is 3 + 4?", "7"), ("What is 10 - 6?", "4"), ("What is 2 x 5?", "10"), ("What is 9 + 9?", "18"),
         ("What is 12 / 3?", "4"), ("What is 1 + 1?", "2"), ("What is 7 x 3?", "21"), ("What is 100 - 1?", "99")]
TEXTS = [
    "It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in want of "
    "a wife. However little known the feelings or views of such a man may be on his first entering a neighbourhood, "
    "this truth is so well fixed in the minds of the surrounding families.",
    "The sky is blue.",
    "Caf\u00e9 au lait est tr\u00e8s bon, and so is tea \U0001F600 with milk.",
    "Call me Ishmael.  Some years ago - never mind how long precisely - having little or no money in my purse, "
    "and nothing particular to interest me on shore, I thought I would sail about a little and see the watery part "
    "of the world.",
]
WINO = [
    ("The trophy does not fit in the suitcase because the _ is too small.", "trophy", "suitcase", "2"),
    ("The man could not lift his son because the _ was so weak.", "man", "son", "1"),
    ("The city council refused the demonstrators a permit because the _ feared violence.", "council",
     "demonstrators", "1"),
    ("Anna did a lot better than her friend Lucy on the test because _ had studied hard.", "Anna", "Lucy", "1"),
    ("The ball broke the window because the _ was fragile.", "ball", "window", "2"),
    ("Sam took French classes from Adam, because _ was eager to speak it fluently.", "Sam", "Adam", "1"),
]

UTILS_PY = '''"""Hooks of the nlpkit task-file test suite (written by tools/make_task_fixtures.py)."""


def process_docs(dataset):
    def one(doc):
        return {**doc, "query": "Q: " + doc["question"].strip(), "gold": int(doc["label"])}
    return dataset.map(one)


def doc_to_text(doc):
    return doc["query"] + "\\nA:"


def doc_to_choice(doc):
    return [c.capitalize() for c in doc["choices"]]


def doc_to_target(doc):
    return doc["gold"]


def wino_index(doc):
    return {"1": 0, "2": 1}[doc["answer"]]


def wino_contexts(doc):
    cut = doc["sentence"].index("_")
    return [doc["sentence"][:cut] + opt for opt in (doc["option1"], doc["option2"])]


def wino_target(doc):
    cut = doc["sentence"].index("_") + 1
    return doc["sentence"][cut:].strip()


def process_results(doc, results):
    lls = [ll for ll, _ in results]
    best = max(range(len(lls)), key=lambda i: lls[i])
    return {"picked_gold": float(best == doc["label"]), "best_ll": max(lls), "spread": max(lls) - min(lls)}
'''

YAMLS = {
    "_mc_template.yaml": f"""dataset_path: json
dataset_kwargs:
  data_files:
    train: {DATA}/train.jsonl
    test: {DATA}/qa.jsonl
training_split: train
test_split: test
output_type: multiple_choice
doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: label
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
  - metric: acc_norm
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
""",
    "mc_default.yaml": """include: _mc_template.yaml
task: suite_mc
tag: suite_tag
description: "Questions about {{topic}}.\\n\\n"
num_fewshot: 2
""",
    "mc_first_n.yaml": """include: _mc_template.yaml
task: suite_mc_first_n
tag:
  - suite_tag
fewshot_split: train
fewshot_config:
  sampler: first_n
num_fewshot: 3
target_delimiter: ": "
fewshot_delimiter: "\\n###\\n"
doc_to_text: "{{question.strip()}}\\nA. {{choices[0]}}\\nB. {{choices[1]}}\\nC. {{choices[2]}}\\nD. {{choices[3]}}\\nAnswer"
doc_to_choice: ["A", "B", "C", "D"]
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
  - metric: acc_norm
    aggregation: mean
    higher_is_better: true
  - metric: acc_bytes
    aggregation: mean
    higher_is_better: true
""",
    "mc_hooks.yaml": f"""task: suite_hooks
dataset_path: json
dataset_kwargs:
  data_files:
    test: {DATA}/qa.jsonl
test_split: test
fewshot_split: test
num_fewshot: 1
output_type: multiple_choice
process_docs: !function utils.process_docs
doc_to_text: !function utils.doc_to_text
doc_to_choice: !function utils.doc_to_choice
doc_to_target: !function utils.doc_to_target
metric_list:
  - metric: acc
  - metric: acc_norm
  - metric: acc_mutual_info
metadata:
  version: 3
""",
    "ll.yaml": f"""task: suite_ll
dataset_path: json
dataset_kwargs:
  data_files:
    test: {DATA}/qa.jsonl
test_split: test
output_type: loglikelihood
doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
doc_to_target: " {{{{answer}}}}"
""",
    "rolling.yaml": f"""task: suite_rolling
dataset_path: json
dataset_kwargs:
  data_files:
    test: {DATA}/texts.jsonl
test_split: test
output_type: loglikelihood_rolling
doc_to_text: ""
doc_to_target: "{{{{text}}}}"
""",
    "gen.yaml": f"""task: suite_gen
dataset_path: json
dataset_kwargs:
  data_files:
    train: {DATA}/arith.jsonl
    test: {DATA}/arith.jsonl
training_split: train
test_split: test
output_type: generate_until
num_fewshot: 1
doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
doc_to_target: " #### {{{{answer}}}}"
generation_kwargs:
  until: ["\\n\\n", "Question:"]
  max_gen_toks: 8
  do_sample: false
filter_list:
  - name: strict-match
    filter:
      - function: regex
        regex_pattern: "#### (\\\\-?[0-9\\\\.\\\\,]+)"
      - function: take_first
  - name: flexible-extract
    filter:
      - function: regex
        group_select: -1
        regex_pattern: "(-?[$0-9.,]{{2,}})|(-?[0-9]+)|([a-z]+)"
      - function: take_first
  - name: tidy
    filter:
      - function: lowercase
      - function: remove_whitespace
      - function: take_first
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
    ignore_case: true
    ignore_punctuation: false
    regexes_to_ignore:
      - ","
      - "\\\\$"
      - "(?s).*#### "
      - "\\\\.$"
""",
    "gen_prefix.yaml": f"""task: suite_gen_prefix
dataset_path: json
dataset_kwargs:
  data_files:
    test: {DATA}/qa.jsonl
test_split: test
output_type: generate_until
doc_to_text: "{{{{question}}}}"
doc_to_target: "{{{{answer}}}}"
gen_prefix: "Answer:"
repeats: 2
generation_kwargs:
  until: ["."]
  max_gen_toks: 6
filter_list:
  - name: vote
    filter:
      - function: uppercase
      - function: majority_vote
      - function: take_first
metric_list:
  - metric: exact_match
  - metric: bleu
  - metric: chrf
""",
    "wino.yaml": f"""task: suite_wino
dataset_path: json
dataset_kwargs:
  data_files:
    train: {DATA}/wino.jsonl
    validation: {DATA}/wino.jsonl
training_split: train
validation_split: validation
num_fewshot: 1
output_type: multiple_choice
doc_to_text: !function utils.wino_index
doc_to_target: !function utils.wino_target
doc_to_choice: !function utils.wino_contexts
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
""",
    "proc.yaml": f"""task: suite_proc
dataset_path: json
dataset_kwargs:
  data_files:
    test: {DATA}/qa.jsonl
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{question}}}}"
doc_to_choice: choices
doc_to_target: label
process_results: !function utils.process_results
metric_list:
  - metric: picked_gold
    aggregation: mean
    higher_is_better: true
  - metric: best_ll
    aggregation: median
    higher_is_better: true
  - metric: spread
    aggregation: mean
    higher_is_better: false
""",
    "ll_perplexity.yaml": f"""task: suite_ll_ppl
dataset_path: json
dataset_kwargs:
  data_files:
    test: {DATA}/qa.jsonl
test_split: test
output_type: loglikelihood
doc_to_text: "{{{{question}}}}"
doc_to_target: " {{{{answer}}}}"
metric_list:
  - metric: perplexity
    aggregation: perplexity
    higher_is_better: false
  - metric: acc
""",
    "group.yaml": """group: suite_group
task:
  - suite_mc
  - suite_mc_first_n
  - suite_hooks
aggregate_metric_list:
  - metric: acc
    weight_by_size: true
  - metric: acc_norm
    weight_by_size: false
metadata:
  version: 2
""",
}

RUNS = {  # run name -> (tasks, extra lm_eval arguments)
    "suite": ("suite_group,suite_ll,suite_ll_ppl,suite_rolling,suite_gen,suite_gen_prefix,suite_wino,suite_proc", []),
    "limit": ("suite_tag,suite_gen", ["--limit", "3", "--num_fewshot", "1"]),
    # lm-eval's own task files around our documents (tests/evaluation/real_task_data.py); gsm8k's 256 new tokens
    # do not fit the tiny models' 64 positions (its requests are tested without a model)
    "real": ("arc_easy,hellaswag,winogrande,mmlu_mini,lambada_openai,wikitext,truthfulqa_mc2,piqa", []),
    # more of lm-eval's files, other kinds: f1/mcc (mrpc, cola, cb's own aggregation hook), hook choices (copa, race,
    # mathqa), letter targets (commonsense_qa), a Jinja-built choice list (wsc273), list targets (webqs), a group
    "real2": ("glue_mini,cb,commonsense_qa,social_iqa,anli_r1,wsc273,mathqa,race,webqs", ["--num_fewshot", "1"]),
    # a sweep of other popular files, each at its own num_fewshot (real_task_data.REAL3_RUN; generations cut to GEN_TOKS)
    "real3": ("REAL3_RUN", []),
    "real4": ("REAL4_RUN", ["--num_fewshot", "1", "--limit", "2"]),
    # lm-eval's own mmlu group (four subgroups over tags of 57 subtasks), every subtask wrapped
    "real5": ("mmlu", ["--num_fewshot", "1", "--limit", "1"]),
    # the llama-spm model (a tokenizer that adds BOS: lm-eval scores that BOS in a rolling text too)
    "real_llama": ("LLAMA_RUN", []),
}
RUN_MODELS = {"real_llama": ["llama-spm"]}  # runs made with another model than --models
REAL_DIR = Path("/tmp/nlpkit-real-task-wrappers")  # the wrappers name lm-eval's installed files: not a fixture


def write_suite() -> None:
    if SUITE.exists():
        shutil.rmtree(SUITE)
    (SUITE / "data").mkdir(parents=True)

    def jsonl(name, rows):
        (SUITE / "data" / name).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                                           encoding="utf-8")

    qa = lambda rows: [{"topic": t, "question": q, "choices": c, "label": l, "answer": a} for t, q, c, l, a in rows]  # noqa
    jsonl("qa.jsonl", qa(QA))
    jsonl("train.jsonl", qa(TRAIN))
    jsonl("arith.jsonl", [{"question": q, "answer": a} for q, a in ARITH])
    jsonl("texts.jsonl", [{"text": t} for t in TEXTS])
    jsonl("wino.jsonl", [{"sentence": s, "option1": a, "option2": b, "answer": ans} for s, a, b, ans in WINO])
    (SUITE / "utils.py").write_text(UTILS_PY, encoding="utf-8")
    for name, text in YAMLS.items():
        (SUITE / name).write_text(text, encoding="utf-8")


def run_lmeval(run: str, model: str) -> None:
    tasks, extra = RUNS[run]
    out = OUT / "lmeval" / run
    include = str(SUITE.relative_to(ROOT))
    if run.startswith("real"):
        sys.path.insert(0, str(ROOT / "tests" / "evaluation"))
        from real_task_data import GEN_TOKS, LLAMA_RUN, REAL3_RUN, REAL4_RUN, write_wrappers

        tasks = {"REAL3_RUN": REAL3_RUN, "REAL4_RUN": REAL4_RUN, "LLAMA_RUN": LLAMA_RUN}.get(tasks, tasks)
        shutil.rmtree(REAL_DIR, ignore_errors=True)
        include = str(write_wrappers(REAL_DIR, max_gen_toks=GEN_TOKS))
    cmd = [sys.executable, "-m", "lm_eval", "--model", "hf", "--model_args",
           f"pretrained={MODELS[model]},dtype=float32", "--tasks", tasks, "--include_path", include,
           "--device", "cpu", "--batch_size", "1", "--output_path", str(out.relative_to(ROOT)), "--log_samples",
           *extra]
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    print(" ".join(cmd))
    subprocess.run(cmd, cwd=ROOT, env=env, check=True)


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="gpt2-bpe", help="comma-separated: " + ",".join(MODELS))
    ap.add_argument("--runs", default=",".join(RUNS))
    args = ap.parse_args()
    if "suite" in args.runs:
        write_suite()
    for run in args.runs.split(","):
        shutil.rmtree(OUT / "lmeval" / run, ignore_errors=True)
        for model in RUN_MODELS.get(run, args.models.split(",")):
            run_lmeval(run, model)
    for f in (OUT / "lmeval").rglob("results_*.json"):  # the machine's description is not a fixture
        doc = json.loads(f.read_text(encoding="utf-8"))
        doc.pop("pretty_env_info", None)
        f.write_text(json.dumps(doc, indent=2, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    main()
