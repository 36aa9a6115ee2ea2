"""Evaluating language models on items (`nlpkit score`): item files, per-item scores and their statistics.

- `items`: reading JSONL items (the task from the fields present), with the checks and messages a user can act on.
- `tasks`: per-item records and metrics of the three tasks (loglikelihood, multiple-choice, preference), and the
  check of an item with a model before anything is scored.
- `models`: a model path -> its continuation scorer; the check of every path before any model loads.
- `evaluate`: one run: every item checked, then scored in blocks; summaries and paired comparisons.
- `significance`: mean, standard error, 95% interval; paired bootstrap (sacrebleu's procedure); McNemar's exact test.
- `corpus_stats`: corpus BLEU / chrF of generated answers: sacrebleu's bootstrap interval and paired bootstrap.
"""
