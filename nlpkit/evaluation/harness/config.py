"""A task's configuration, as lm-evaluation-harness 0.4.13's `TaskConfig` and `FewshotConfig` hold it: the same fields
in the same order (the results file's `configs` are their dump), the same defaults (`generation_kwargs` of a
generate_until task, few-shot settings inherited from the task's unless `fewshot_config` overrides them).

A key lm-eval's TaskConfig does not have is an error naming it and the task file.
"""

from __future__ import annotations

import inspect
from dataclasses import asdict, dataclass, fields
from typing import Any, Callable

from nlpkit.errors import NlpkitError

OUTPUT_TYPES = ("loglikelihood", "multiple_choice", "loglikelihood_rolling", "generate_until")
DEFAULT_MAX_GEN_TOKS = 256


@dataclass
class FewshotConfig:
    sampler: str = "default"
    split: str | None = None
    process_docs: Callable | None = None
    fewshot_indices: list | None = None
    samples: Any = None
    doc_to_text: Any = None
    doc_to_choice: Any = None
    doc_to_target: Any = None
    gen_prefix: str | None = None
    fewshot_delimiter: str | None = None
    target_delimiter: str | None = None


@dataclass
class TaskConfig:
    task: str | None = None
    task_alias: str | None = None
    tag: Any = None
    custom_dataset: Callable | None = None
    dataset_path: str | None = None
    dataset_name: str | None = None
    dataset_kwargs: dict | None = None
    training_split: str | None = None
    validation_split: str | None = None
    test_split: str | None = None
    fewshot_split: str | None = None
    process_docs: Callable | None = None
    doc_to_text: Any = None
    doc_to_target: Any = None
    doc_to_image: Any = None
    doc_to_audio: Any = None
    unsafe_code: bool = False
    doc_to_choice: Any = None
    process_results: Any = None
    use_prompt: str | None = None
    description: str = ""
    target_delimiter: str = " "
    fewshot_delimiter: str = "\n\n"
    fewshot_config: Any = None
    num_fewshot: int | None = None
    metric_list: list | None = None
    output_type: str = "generate_until"
    generation_kwargs: dict | None = None
    repeats: int = 1
    filter_list: Any = None
    should_decontaminate: bool = False
    doc_to_decontamination_query: str | None = None
    gen_prefix: str | None = None
    metadata: dict | None = None

    def __post_init__(self) -> None:
        if self.generation_kwargs is not None:
            if "temperature" in self.generation_kwargs:
                self.generation_kwargs["temperature"] = float(self.generation_kwargs["temperature"])
            if "until" not in self.generation_kwargs:
                self.generation_kwargs["until"] = [self.fewshot_delimiter]
        elif self.output_type == "generate_until":
            until = self.fewshot_delimiter
            self.generation_kwargs = {"temperature": 0.0, "do_sample": False, "max_gen_toks": DEFAULT_MAX_GEN_TOKS,
                                      "until": [until] if isinstance(until, str) else (until or [])}
        if isinstance(self.fewshot_config, dict) or self.fewshot_config is None:
            inherited = {"split": self.fewshot_split, "process_docs": self.process_docs,
                         "fewshot_delimiter": self.fewshot_delimiter, "target_delimiter": self.target_delimiter,
                         "gen_prefix": self.gen_prefix, "doc_to_text": self.doc_to_text,
                         "doc_to_choice": self.doc_to_choice, "doc_to_target": self.doc_to_target}
            given = dict(self.fewshot_config or {})
            unknown = set(given) - {f.name for f in fields(FewshotConfig)}
            if unknown:
                raise NlpkitError(f"task {self.task}: fewshot_config has no key {sorted(unknown)[0]!r}")
            merged = {**inherited, **given}
            merged.setdefault("sampler", "default")
            self.fewshot_config = FewshotConfig(**merged)

    @classmethod
    def from_dict(cls, cfg: dict, where: str) -> "TaskConfig":
        known = {f.name for f in fields(cls)}
        unknown = [k for k in cfg if k not in known]
        if unknown:
            raise NlpkitError(f"{where}: task {cfg.get('task')!r}: unknown key {unknown[0]!r} (not an lm-evaluation-"
                              "harness task setting)")
        return cls(**cfg)

    def to_dict(self) -> dict:
        """lm-eval's `TaskConfig.to_dict()`: None fields left out, hooks as their source."""
        out = asdict(self)
        for k, v in list(out.items()):
            if v is None:
                out.pop(k)
            elif k == "metric_list":
                for m in v:
                    for mk, mv in m.items():
                        if callable(mv):
                            m[mk] = _source(mv)
            elif callable(v):
                out[k] = _source(v)
        return out


def _source(fn) -> str:
    try:
        return inspect.getsource(fn)
    except (TypeError, OSError):
        return str(fn)
