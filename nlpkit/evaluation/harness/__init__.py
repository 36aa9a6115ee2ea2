"""lm-evaluation-harness's own task files, run by nlpkit (`nlpkit score --tasks`): YAML, Jinja prompts, few-shot,
filters, metrics, groups, with lm-eval 0.4.13's results and samples files.

- `task_files`: finding task files (include paths, lm-eval's folder read as files) and reading them (`include`,
  `!function`); `hooks`: importing and calling `!function` hooks;
- `config`: a task's configuration (lm-eval's TaskConfig fields and defaults); `selection`: names -> tasks and
  groups (lm-eval's TaskManager.load);
- `data`: a task's dataset through HF `datasets`, offline always; `task`: documents, prompts, few-shot contexts;
  `prompts`: the Jinja environment, messages, samplers; `requests`: documents -> requests by output type;
- `model_adapter`: the three request types answered by an nlpkit model (the one place that loads models);
- `filters`, `metrics`: filter pipelines, per-document metrics, aggregations, standard errors, group aggregation;
- `run`: one run (prepare every task, then each model); `results`: lm-eval's results and samples files.
"""
