"""Documents -> requests by the task's output type, as lm-evaluation-harness 0.4.13's `construct_requests`:

- loglikelihood: (context, target);
- loglikelihood_rolling: (target,), the whole text;
- multiple_choice: (context, target_delimiter + choice) per choice (a multiple-input task: (context_i, delimiter +
  target) per context), then ("", delimiter + choice) per choice when the task asks acc_mutual_info; with a chat
  template the delimiter is dropped unless a gen_prefix without trailing whitespace asks for it;
- generate_until: (context, generation_kwargs).

Each request is an `Instance` (its `resps` and `filtered_resps` filled in as lm-eval's are).
"""

from __future__ import annotations

from copy import deepcopy
from dataclasses import dataclass, field
from typing import Any

from nlpkit.evaluation.harness.prompts import ends_with_whitespace


@dataclass
class Instance:
    request_type: str
    doc: dict
    arguments: tuple
    idx: int
    doc_id: int
    repeats: int = 1
    resps: list = field(default_factory=list)
    filtered_resps: dict = field(default_factory=dict)


def construct_requests(task, doc: dict, doc_id: int, ctx: Any, mutual_info: bool, chat: bool) -> list[Instance]:
    cfg = task.config
    out = cfg.output_type
    if out == "loglikelihood":
        return [Instance(out, doc, (ctx, task.doc_to_target(doc)), 0, doc_id, cfg.repeats)]
    if out == "loglikelihood_rolling":
        return [Instance(out, doc, (task.doc_to_target(doc),), 0, doc_id, cfg.repeats)]
    if out == "generate_until":
        return [Instance(out, doc, (ctx, deepcopy(cfg.generation_kwargs)), 0, doc_id, cfg.repeats)]
    choices = task.doc_to_choice(doc)
    delim = cfg.target_delimiter
    if chat:
        delim = cfg.target_delimiter if cfg.gen_prefix and not ends_with_whitespace(cfg.gen_prefix) else ""
    if task.multiple_input:
        cont = task.doc_to_target(doc)
        args = [(c, f"{delim}{cont}") for c in ctx]
    else:
        args = [(ctx, f"{delim}{c}") for c in choices]
    if mutual_info:
        args += [("", f"{delim}{c}") for c in choices]
    return [Instance("loglikelihood", doc, a, i, doc_id, cfg.repeats) for i, a in enumerate(args)]
