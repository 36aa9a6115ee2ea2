"""Evaluating language models on items (`nlpkit score`): item files, per-item scores and their statistics.

- `items`: reading JSONL items (the task from the fields present), with the checks and messages a user can act on.
- `tasks`: per-item records and metrics of the three tasks (loglikelihood, multiple-choice, preference).
- `significance`: mean, standard error, 95% interval; paired bootstrap (sacrebleu's procedure); McNemar's exact test.
"""
