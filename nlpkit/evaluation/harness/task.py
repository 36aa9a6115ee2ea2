"""One lm-evaluation-harness task on its data: documents, prompts and few-shot contexts, as lm-eval 0.4.13's
`ConfigurableTask` builds them.

- documents: the evaluated split is `test_split`, else `validation_split`; `process_docs` hooks get the real
  `Dataset`; few-shot examples come from `fewshot_config.split`/`fewshot_split`, `fewshot_config.samples`, else the
  training, validation, test split (the first the task names);
- `doc_to_text` / `doc_to_target` / `doc_to_choice`: a column name, a Jinja template (a text of digits becomes an int
  when the task has choices; a target "[...]" a list), a literal list or int, or a hook;
- `fewshot_context`: description (and `--system`), the shots (each question + target delimiter + answer + few-shot
  delimiter), the question; `multiple_input` tasks (winogrande: doc_to_text gives the index of the right choice)
  get one context per choice; with a chat template, the same turns rendered as messages.
"""

from __future__ import annotations

import ast
from functools import partial
from typing import Any, Callable

from nlpkit.errors import NlpkitError
from nlpkit.evaluation.harness.config import TaskConfig
from nlpkit.evaluation.harness.data import load_task_dataset, split_of
from nlpkit.evaluation.harness.hooks import call_hook
from nlpkit.evaluation.harness.prompts import (SAMPLERS, Message, apply_template, maybe_delimit,
                                               multiturn_to_singleturn, requires_delimiter)

FEWSHOT_SEED = 1234  # lm-eval's fewshot_random_seed default


class HarnessTask:
    """A task's documents and prompts (`config`: its `TaskConfig`, `num_fewshot` already resolved)."""

    def __init__(self, config: TaskConfig, fewshot_seed: int | None = FEWSHOT_SEED):
        self.config = config
        self.name = config.task
        self.version = (config.metadata or {}).get("version", "Yaml") if isinstance(config.metadata, dict) else "Yaml"
        for key in ("doc_to_image", "doc_to_audio"):
            if getattr(config, key):
                raise NlpkitError(f"task {self.name}: {key} (a multimodal task) is not supported")
        if config.use_prompt is not None:
            raise NlpkitError(f"task {self.name}: use_prompt (promptsource) is not supported")
        if config.custom_dataset is not None:
            raise NlpkitError(f"task {self.name}: custom_dataset is not supported (give dataset_path)")
        self.fewshot_cfg = config.fewshot_config
        rows_only = config.process_docs is None and self.fewshot_cfg.process_docs is None  # else hooks get a Dataset
        self.dataset = load_task_dataset(self.name, config.dataset_path, config.dataset_name, config.dataset_kwargs,
                                         rows_only)
        self.eval_docs = self._eval_docs()
        self.features = list(self.eval_docs.features.keys()) if hasattr(self.eval_docs, "features") else \
            list(self.eval_docs[0].keys()) if len(self.eval_docs) else []
        pool = self._fewshot_docs()
        sampler = self.fewshot_cfg.sampler
        if not isinstance(sampler, str) or sampler not in SAMPLERS:
            raise NlpkitError(f"task {self.name}: few-shot sampler {sampler!r} is not supported (default, first_n)")
        self.sampler = SAMPLERS[sampler](list(pool) if pool is not None else [], seed=fewshot_seed)
        self.multiple_input = 0
        self.multiple_target = 0
        if len(self.eval_docs) == 0:
            raise NlpkitError(f"task {self.name}: the evaluated split has no documents")
        test_doc = self.eval_docs[0]
        test_text = self.doc_to_text(test_doc)
        test_target = self.doc_to_target(test_doc)
        if config.doc_to_choice is not None:
            choices = self.doc_to_choice(test_doc)
            if isinstance(test_text, int):
                self.multiple_input = len(choices)
        if isinstance(test_target, list):
            self.multiple_target = len(test_target)

    # ------------------------------------------------------------------ documents
    def _split(self, split: str):
        docs = split_of(self.name, self.dataset, split)
        if self.config.process_docs is not None:
            return call_hook(self.name, "process_docs", self.config.process_docs, docs)
        return docs

    def _eval_docs(self):
        if self.config.test_split is not None:
            return self._split(self.config.test_split)
        if self.config.validation_split is not None:
            return self._split(self.config.validation_split)
        raise NlpkitError(f"task {self.name}: needs a test_split or validation_split")

    def _fewshot_docs(self):
        fs = self.fewshot_cfg
        if fs.split is not None:
            docs = split_of(self.name, self.dataset, fs.split)
            return call_hook(self.name, "process_docs", fs.process_docs, docs) if fs.process_docs else docs
        if fs.samples is not None:
            if isinstance(fs.samples, list):
                return fs.samples
            if callable(fs.samples):
                return call_hook(self.name, "fewshot samples", fs.samples)
            raise NlpkitError(f"task {self.name}: fewshot_config.samples must be a list or a hook")
        for split in (self.config.training_split, self.config.validation_split, self.config.test_split):
            if split is not None:
                return self._split(split)
        return None

    def docs(self, limit: int | None = None) -> list[tuple[int, dict]]:
        """(doc_id, document) of the evaluated split, the first `limit` (lm-eval's --limit; < 1: a fraction)."""
        n = len(self.eval_docs)
        if limit is not None:
            import math
            limit = int(math.ceil(n * limit)) if limit < 1.0 else int(limit)
        return [(i, self.eval_docs[i]) for i in range(n if limit is None else min(limit, n))]

    # ------------------------------------------------------------------ fields
    def _hook(self, what: str, fn: Callable, doc):
        return call_hook(self.name, what, fn, doc)

    def _template(self, what: str, template: str, doc: dict) -> str:
        try:
            return apply_template(template, doc)
        except Exception as e:  # jinja2's UndefinedError, TemplateSyntaxError, ...
            raise NlpkitError(f"task {self.name}: {what} template {template!r}: {type(e).__name__}: {e}") from None

    def doc_to_text(self, doc: dict, spec: Any = None):
        spec = self.config.doc_to_text if spec is None else spec
        if isinstance(spec, int):
            return spec
        if isinstance(spec, str):
            if spec in self.features:
                return doc[spec]
            text = self._template("doc_to_text", spec, doc)
            return ast.literal_eval(text) if text.isdigit() and self.config.doc_to_choice is not None else text
        if callable(spec):
            return self._hook("doc_to_text", spec, doc)
        raise NlpkitError(f"task {self.name}: doc_to_text must be a column, a template or a hook, got {spec!r}")

    def doc_to_target(self, doc: dict, spec: Any = None):
        spec = self.config.doc_to_target if spec is None else spec
        if isinstance(spec, int):
            return spec
        if isinstance(spec, str):
            if spec in self.features:
                return doc[spec]
            text = self._template("doc_to_target", spec, doc)
            if text.isdigit() and self.config.doc_to_choice is not None:
                return ast.literal_eval(text)
            if len(text) >= 2 and text[0] == "[" and text[-1] == "]":
                try:
                    return ast.literal_eval(text)
                except (SyntaxError, ValueError):
                    return text
            return text
        if isinstance(spec, list):
            return spec
        if callable(spec):
            return self._hook("doc_to_target", spec, doc)
        raise NlpkitError(f"task {self.name}: doc_to_target must be a column, a template or a hook, got {spec!r}")

    def doc_to_choice(self, doc: dict, spec: Any = None) -> list:
        spec = self.config.doc_to_choice if spec is None else spec
        if spec is None:
            raise NlpkitError(f"task {self.name}: doc_to_choice is not set")
        if isinstance(spec, str):
            if spec in self.features:
                return doc[spec]
            text = self._template("doc_to_choice", spec, doc)
            try:
                return ast.literal_eval(text)
            except (SyntaxError, ValueError):
                raise NlpkitError(f"task {self.name}: doc_to_choice {spec!r} rendered {text!r}, not a list") from None
        if isinstance(spec, list):
            return spec
        if isinstance(spec, dict):
            return list(spec.values())
        if callable(spec):
            return self._hook("doc_to_choice", spec, doc)
        raise NlpkitError(f"task {self.name}: doc_to_choice must be a column, a template, a list or a hook")

    def doc_to_prefix(self, doc: dict) -> str | None:
        gp = self.config.gen_prefix
        if gp is None:
            return None
        return doc[gp] if gp in self.features else self._template("gen_prefix", gp, doc)

    def resolve_field(self, doc: dict, spec: str | None):
        if spec:
            return doc[spec] if spec in doc else self._template("field", spec, doc)
        return None

    # ------------------------------------------------------------------ contexts
    def fewshot_context(self, doc: dict, num_fewshot: int, system_instruction: str | None = None,
                        chat_template: Callable[..., str] | None = None, fewshot_as_multiturn: bool = False,
                        gen_prefix: str | None = None):
        """The prompt of `doc`: a string, or one per choice for a multiple-input task (lm-eval's fewshot_context)."""
        cfg, fs = self.config, self.fewshot_cfg
        template = partial(chat_template, add_generation_prompt=not gen_prefix) if chat_template else None
        messages: list[Message] = []
        description = self.resolve_field(doc, cfg.description) or ""
        system_prompt = maybe_delimit(system_instruction, description, cfg.fewshot_delimiter)
        if system_prompt:
            messages.append(Message("system", system_prompt))
        if num_fewshot > 0:
            try:
                shots = self.sampler.sample(num_fewshot, eval_doc=doc if fs.split == cfg.test_split else None)
            except ValueError as e:
                raise NlpkitError(f"task {self.name}: {num_fewshot}-shot: {e}") from None
            for fs_doc in shots:
                q = self.doc_to_text(fs_doc, fs.doc_to_text)
                c = self.doc_to_choice(fs_doc, fs.doc_to_choice) if fs.doc_to_choice else None
                a = self.doc_to_target(fs_doc, fs.doc_to_target)
                fs_prefix = self.resolve_field(fs_doc, fs.gen_prefix)
                if self.multiple_input:
                    q, c = c[q], None
                messages += self.build_qa_turn(q=q, c=c, a=a, gen_prefix=fs_prefix, tgt_delim=fs.target_delimiter,
                                               few_delim=fs.fewshot_delimiter)
        q = self.doc_to_text(doc)
        c = self.doc_to_choice(doc) if cfg.doc_to_choice else None
        if self.multiple_input:
            return [self._render(messages + self.build_qa_turn(q=ctx, gen_prefix=gen_prefix, tgt_delim=""),
                                 template, fewshot_as_multiturn) for ctx in c]
        messages += self.build_qa_turn(q=q, c=c, gen_prefix=gen_prefix, tgt_delim=cfg.target_delimiter,
                                       few_delim="")
        return self._render(messages, template, fewshot_as_multiturn)

    @staticmethod
    def _render(messages: list[Message], template, fewshot_as_multiturn: bool) -> str:
        if template is not None:
            msgs = [Message(m.role, m.content, m.delimiter) for m in messages]
            turns = [m.to_dict() for m in msgs] if fewshot_as_multiturn else multiturn_to_singleturn(msgs)
            return template(turns)
        return "".join(m.to_text() for m in messages)

    def build_qa_turn(self, *, q=None, c=None, a=None, gen_prefix=None, tgt_delim=" ", few_delim="\n\n"):
        if not isinstance(q, str):
            raise NlpkitError(f"task {self.name}: the question is not a string: {q!r} (doc_to_text)")
        has_answer = a is not None and a != ""
        delim = tgt_delim if has_answer and not gen_prefix else \
            tgt_delim if gen_prefix and requires_delimiter(q, gen_prefix) else ""
        msgs = [Message("user", q, delim)]
        if has_answer:
            answer = c[a] if (c and isinstance(a, int)) else a[0] if isinstance(a, list) else a
            if not isinstance(answer, str):
                raise NlpkitError(f"task {self.name}: the few-shot answer is not a string: {a!r} (doc_to_target)")
            msgs.append(Message("assistant", maybe_delimit(gen_prefix, answer, " "), few_delim))
        elif gen_prefix:
            msgs.append(Message("assistant", gen_prefix))
        return msgs
