"""`score --tasks --chat [--system S] [--fewshot-as-multiturn]` renders every request as lm-evaluation-harness's
`--apply_chat_template [--system_instruction S] [--fewshot_as_multiturn]` does: the same messages (description and
system turn, few-shot examples collapsed into one user turn or kept as turns, gen_prefix continuing the reply,
multiple-input contexts, the choice delimiter dropped), rendered with the model's chat template as transformers'
`apply_chat_template` renders it. lm-eval builds its requests in-process from the suite's task files, with a
tokenizer that carries the same template as the tiny model nlpkit loads."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from nlpkit.lm.spec import LoadSpec

pytest.importorskip("datasets")
pytest.importorskip("yaml")
pytest.importorskip("lm_eval")
transformers = pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "tests" / "fixtures" / "tasks" / "suite"
# a ChatML template of our own (system turn optional)
CHATML = ("{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
          "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
TASKS = ["suite_mc", "suite_mc_first_n", "suite_gen_prefix", "suite_wino", "suite_hooks"]


@pytest.fixture(scope="module")
def chat_model(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("chat") / "gpt2-chat"
    shutil.copytree(ROOT / "tests" / "fixtures" / "score" / "models" / "gpt2-bpe", d)
    cfg = json.loads((d / "tokenizer_config.json").read_text())
    (d / "tokenizer_config.json").write_text(json.dumps({**cfg, "chat_template": CHATML}))
    return d


def _lmeval(chat_model: Path, system, multiturn) -> dict:
    from lm_eval.tasks import TaskManager

    tok = transformers.PreTrainedTokenizerFast(tokenizer_file=str(chat_model / "tokenizer.json"))
    tok.chat_template = CHATML

    def apply(history, add_generation_prompt=True):  # lm-eval's HFLM.apply_chat_template
        return tok.apply_chat_template(history, tokenize=False, add_generation_prompt=add_generation_prompt,
                                       continue_final_message=not add_generation_prompt)

    loaded = TaskManager(include_path=str(SUITE), include_defaults=False).load(TASKS)
    out = {}
    for name, task in loaded["tasks"].items():
        if task.get_config("num_fewshot") is None:
            task.set_config(key="num_fewshot", value=0)
        task.set_fewshot_seed(seed=1234)
        task.build_all_requests(system_instruction=system, apply_chat_template=True,
                                fewshot_as_multiturn=multiturn, chat_template=apply)
        for inst in task.instances:
            out[(name, inst.doc_id, inst.idx)] = json.loads(json.dumps(list(inst.args), default=str))
    return out


def _nlpkit(chat_model: Path, system, multiturn) -> dict:
    from nlpkit.evaluation.harness.model_adapter import HarnessModel
    from nlpkit.evaluation.harness.run import RunOptions, build_instances, prepare
    from nlpkit.evaluation.harness.selection import select
    from nlpkit.evaluation.harness.task_files import TaskRegistry

    options = RunOptions(chat=True, system=system, fewshot_as_multiturn=multiturn)
    model = HarnessModel(LoadSpec(str(chat_model)))
    template = model.chat_template(system)
    out = {}
    for name, p in prepare(select(TASKS, TaskRegistry([SUITE], lmeval_dir=False)), options).items():
        for insts in build_instances(p, options, template):
            for inst in insts:
                out[(name, inst.doc_id, inst.idx)] = json.loads(json.dumps(list(inst.arguments), default=str))
    return out


@pytest.mark.parametrize("system, multiturn", [(None, False), ("Be brief.", False), ("Be brief.", True)])
def test_chat_requests_are_lmevals(chat_model, monkeypatch, system, multiturn):
    monkeypatch.chdir(ROOT)  # the suite's data files are named relative to the repository root
    ref = _lmeval(chat_model, system, multiturn)
    got = _nlpkit(chat_model, system, multiturn)
    assert sorted(got) == sorted(ref)
    for key in ref:
        assert got[key] == ref[key], key
    rendered = [v[0] for v in got.values() if isinstance(v[0], str) and v[0]]  # ("", choice): never rendered
    assert rendered and all(c.startswith("<|im_start|>") for c in rendered)
