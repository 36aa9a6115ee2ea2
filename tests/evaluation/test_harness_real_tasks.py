"""lm-evaluation-harness's REAL task files (arc_easy, hellaswag, winogrande, gsm8k, an MMLU subtask group,
lambada_openai, wikitext, truthfulqa_mc2, piqa and the others of real_task_data.WRAPPED), read from the installed package and wrapped to read small local
data in each dataset's schema: the requests nlpkit builds (every argument: contexts with their few-shot examples,
continuations, generation settings) equal the ones lm-eval builds in-process from the same files. Skipped without
lm-eval (the files are read from its installation, never copied here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("datasets")
pytest.importorskip("yaml")
lm_eval = pytest.importorskip("lm_eval")

TASKS_DIR = Path(lm_eval.__file__).parent / "tasks"

from real_task_data import write_wrappers  # noqa: E402


@pytest.fixture(scope="module")
def task_dir(tmp_path_factory) -> Path:
    return write_wrappers(tmp_path_factory.mktemp("real_tasks"), TASKS_DIR)


def _lmeval_arguments(task_dir: Path, names: list[str], num_fewshot=None, limit=None) -> dict:
    import random

    import numpy as np
    from lm_eval.tasks import TaskManager

    random.seed(0)  # as lm-eval's simple_evaluate, before it loads the tasks (gpqa's hook shuffles)
    np.random.seed(1234)
    loaded = TaskManager(include_path=str(task_dir), include_defaults=False).load(names)
    out = {}
    for name, task in loaded["tasks"].items():
        if num_fewshot is not None:
            if task.get_config("num_fewshot") != 0:
                task.set_config(key="num_fewshot", value=num_fewshot)
        elif task.get_config("num_fewshot") is None:
            task.set_config(key="num_fewshot", value=0)
        task.set_fewshot_seed(seed=1234)
        task.build_all_requests(limit=limit)
        for inst in task.instances:
            out[(name, inst.doc_id, inst.idx)] = _plain(inst.args)
    return out


def _nlpkit_arguments(task_dir: Path, names: list[str], num_fewshot=None, limit=None) -> dict:
    from nlpkit.evaluation.harness.run import RunOptions, build_instances, prepare
    from nlpkit.evaluation.harness.selection import select
    from nlpkit.evaluation.harness.task_files import TaskRegistry

    options = RunOptions(num_fewshot=num_fewshot, limit=limit)
    sel = select(names, TaskRegistry([task_dir]))
    out = {}
    for name, p in prepare(sel, options).items():
        for insts in build_instances(p, options, None):
            for inst in insts:
                out[(name, inst.doc_id, inst.idx)] = _plain(inst.arguments)
    return out


def _plain(args):
    return json.loads(json.dumps(list(args), default=str))


@pytest.mark.parametrize("names, num_fewshot, limit", [
    (["arc_easy", "hellaswag", "winogrande", "piqa"], None, None),
    (["gsm8k", "lambada_openai", "wikitext", "truthfulqa_mc2"], None, None),
    (["mmlu_mini"], 5, None),
    (["arc_easy", "winogrande", "gsm8k"], 2, 3),
    (["copa", "commonsense_qa", "social_iqa", "race", "mathqa", "wsc273", "anli_r1", "cb", "mrpc"], 2, 2),
    # a sweep of other popular files: each at its own num_fewshot (YAML-listed shots of bbh, mmlu_pro's first_n
    # shots with their own hooks, multiple input, hook prompts, a Jinja map over a list of dicts), then 2-shot
    (["boolq", "openbookqa", "sciq", "arc_challenge", "lambada_standard", "logiqa", "triviaqa", "nq_open",
      "bbh_fewshot_boolean_expressions", "bbh_cot_fewshot_boolean_expressions", "mmlu_pro_biology",
      "mmlu_anatomy_generative", "mmlu_flan_n_shot_generative_anatomy", "wic", "rte", "sst2", "qnli",
      "blimp_adjunct_island", "arithmetic_2da", "xwinograd_en", "headqa_en", "pubmedqa", "lambada_openai_cloze_yaml",
      "asdiv", "bbh_zeroshot_snarks", "bbh_cot_zeroshot_snarks", "bbh_zeroshot_word_sorting",
      "bbh_zeroshot_sports_understanding", "bbh_zeroshot_multistep_arithmetic_two", "leaderboard_gpqa_main",
      "leaderboard_mmlu_pro", "leaderboard_bbh_snarks", "leaderboard_musr_murder_mysteries", "gsm8k_cot",
      "gsm8k_cot_zeroshot", "gsm8k_cot_llama", "arc_challenge_chat", "xnli_en", "xstorycloze_en", "paws_en", "swag",
      "prost", "toxigen", "crows_pairs_english", "wnli", "multirc", "lambada_openai_mt_en", "wmt16-de-en",
      "anagrams1", "ethics_cm", "mutual", "drop", "hendrycks_math_algebra", "truthfulqa_mc1", "truthfulqa_gen",
      "pile_10k", "c4", "paloma_c4_100_domains", "mgsm_direct_en", "mgsm_native_cot_en", "belebele_eng_Latn",
      "medmcqa", "medqa_4options", "agieval_sat_math"], None, None),
    (["boolq", "openbookqa", "sciq", "logiqa", "triviaqa", "nq_open", "mmlu_pro_biology", "wic", "rte", "qnli",
      "headqa_en", "pubmedqa", "xwinograd_en", "bbh_fewshot_boolean_expressions", "gsm8k_cot", "gsm8k_cot_zeroshot",
      "arc_challenge_chat", "xnli_en", "xstorycloze_en", "paws_en", "swag", "multirc", "wmt16-de-en", "ethics_cm",
      "leaderboard_mmlu_pro", "leaderboard_gpqa_main", "mgsm_direct_en", "mgsm_native_cot_en", "belebele_eng_Latn",
      "medmcqa", "medqa_4options"], 2, 3),
])
def test_real_task_files_render_lmevals_requests(task_dir, names, num_fewshot, limit):
    ref = _lmeval_arguments(task_dir, names, num_fewshot, limit)
    got = _nlpkit_arguments(task_dir, names, num_fewshot, limit)
    assert sorted(got) == sorted(ref)
    for key in ref:
        assert got[key] == ref[key], key


CHATML = ("{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
          "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
CHAT_TASKS = ["gsm8k_cot_llama", "arc_challenge_chat", "mmlu_pro_biology", "bbh_fewshot_boolean_expressions",
              "leaderboard_mmlu_pro", "xwinograd_en", "triviaqa", "wmt16-de-en", "crows_pairs_english",
              "mmlu_flan_n_shot_generative_anatomy"]


@pytest.fixture(scope="module")
def chat_model(tmp_path_factory) -> Path:
    import shutil

    d = tmp_path_factory.mktemp("chat") / "gpt2-chat"
    shutil.copytree(Path(__file__).resolve().parents[1] / "fixtures" / "score" / "models" / "gpt2-bpe", d)
    cfg = json.loads((d / "tokenizer_config.json").read_text())
    (d / "tokenizer_config.json").write_text(json.dumps({**cfg, "chat_template": CHATML}))
    return d


@pytest.mark.parametrize("system, multiturn, num_fewshot", [(None, False, None), ("Be brief.", True, None),
                                                            ("Be brief.", False, 2)])
def test_real_task_files_render_lmevals_chat_requests(task_dir, chat_model, system, multiturn, num_fewshot):
    """With a chat template (--chat, --system, --fewshot-as-multiturn): the real files' requests are the ones lm-eval
    builds with --apply_chat_template, --system_instruction, --fewshot_as_multiturn (YAML-listed shots, gen_prefix,
    multiple input, chat-style task files)."""
    transformers = pytest.importorskip("transformers")
    from lm_eval.tasks import TaskManager

    from nlpkit.evaluation.harness.model_adapter import HarnessModel
    from nlpkit.evaluation.harness.run import RunOptions, build_instances, prepare
    from nlpkit.evaluation.harness.selection import select
    from nlpkit.evaluation.harness.task_files import TaskRegistry
    from nlpkit.lm.spec import LoadSpec

    tok = transformers.PreTrainedTokenizerFast(tokenizer_file=str(chat_model / "tokenizer.json"))
    tok.chat_template = CHATML

    def apply(history, add_generation_prompt=True):  # lm-eval's HFLM.apply_chat_template
        return tok.apply_chat_template(history, tokenize=False, add_generation_prompt=add_generation_prompt,
                                       continue_final_message=not add_generation_prompt)

    ref = {}
    for name, task in TaskManager(include_path=str(task_dir), include_defaults=False).load(CHAT_TASKS)["tasks"].items():
        if num_fewshot is not None and task.get_config("num_fewshot") != 0:
            task.set_config(key="num_fewshot", value=num_fewshot)
        elif task.get_config("num_fewshot") is None:
            task.set_config(key="num_fewshot", value=0)
        task.set_fewshot_seed(seed=1234)
        task.build_all_requests(system_instruction=system, apply_chat_template=True, fewshot_as_multiturn=multiturn,
                                chat_template=apply)
        ref.update({(name, i.doc_id, i.idx): _plain(i.args) for i in task.instances})
    options = RunOptions(chat=True, system=system, fewshot_as_multiturn=multiturn, num_fewshot=num_fewshot)
    template = HarnessModel(LoadSpec(str(chat_model))).chat_template(system)
    got = {}
    for name, p in prepare(select(CHAT_TASKS, TaskRegistry([task_dir])), options).items():
        got.update({(name, i.doc_id, i.idx): _plain(i.arguments) for insts in build_instances(p, options, template)
                    for i in insts})
    assert sorted(got) == sorted(ref)
    for key in ref:
        assert got[key] == ref[key], key
