"""Per-item records and metrics of the three tasks, from continuation scores (any model: `scorer.score_requests(
[(context, continuations)])` -> `ContinuationScore`s; the transformer engine and n-gram models both provide it).

- loglikelihood: the continuation's log-probability (nats), tokens, `is_greedy`, characters and UTF-8 bytes; metrics
  `logprob` (mean per item) and `is_greedy` (lm-evaluation-harness's `acc` of a loglikelihood task).
- multiple-choice (lm-evaluation-harness `process_results`): each choice scored as `delimiter + choice`;
  `acc` argmax of the log-likelihoods, `acc_norm` of log-likelihood / the choice's characters, `acc_bytes` / its
  UTF-8 bytes (both without the delimiter, as there), `acc_tokens` / its tokens (llama.cpp's HellaSwag mean per
  token); with `mutual_info`, `acc_mutual_info`: argmax of log p(choice | context) - log p(choice | empty context).
  Ties go to the first choice (numpy argmax). Right when the prediction is any gold index. An empty choice has 0
  characters and bytes: as in lm-evaluation-harness (`lls / completion_len`), its log-likelihood (the delimiter's,
  negative) divided by 0 is -inf, so acc_norm and acc_bytes never pick it unless every choice is empty (IEEE
  division, without a warning).
- preference (DPO, Rafailov et al. 2023): log p(chosen | prompt), log p(rejected | prompt), `margin` and `accuracy`
  (margin > 0); with a reference model, the implicit rewards r = beta (log p - log p_ref), `reward_margin` and
  `reward_accuracy` (r(chosen) > r(rejected)).
- generate (lm-evaluation-harness `generate_until`): the model's answer to the context against the target(s),
  `exact_match` (`generation_task.py`; the scorer is a `generation_task.Generator`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from nlpkit.errors import NlpkitError, UsageError
from nlpkit.evaluation.generation_task import GenerationOptions, generate_items
from nlpkit.evaluation.items import Item
from nlpkit.lm.continuations import score_requests

MC_METRICS = ("acc", "acc_norm", "acc_bytes", "acc_tokens")
DIFFERENT_TOKENIZER = ("the reference model tokenizes this item differently from the model: a reference must share "
                       "the model's tokenizer")


@dataclass(frozen=True)
class TaskOptions:
    """How items are scored: the multiple-choice delimiter, mutual information, DPO's beta, the generate task's
    options (`generation_task.GenerationOptions`)."""

    delimiter: str = " "
    mutual_info: bool = False
    beta: float = 0.1
    generation: GenerationOptions = field(default_factory=GenerationOptions)

    def validate(self) -> "TaskOptions":
        if not np.isfinite(self.beta) or self.beta <= 0:
            raise UsageError(f"beta must be a positive finite number, got {self.beta}")
        self.generation.validate()
        return self


def metric_names(task: str, options: TaskOptions, reference: bool = False) -> tuple[str, ...]:
    """The summary metrics of a task, in output order."""
    if task == "loglikelihood":
        return ("logprob", "is_greedy")
    if task == "multiple-choice":
        return MC_METRICS + (("acc_mutual_info",) if options.mutual_info else ())
    if task == "generate":  # per item; corpus BLEU / chrF are summaries only (`generation_task.corpus_metrics`)
        return ("exact_match",)
    return ("margin", "accuracy") + (("reward_margin", "reward_accuracy") if reference else ())


def is_accuracy(metric: str) -> bool:
    """Right/wrong per item (McNemar applies) rather than a real-valued score."""
    return metric.startswith("acc") or metric in ("is_greedy", "accuracy", "reward_accuracy", "exact_match")


def _context(scorer, text: str) -> str:
    """The context as the model sees it: rendered as a user turn by the model's chat template when the scorer has
    one (`--chat`; lm-evaluation-harness's apply_chat_template), else as given."""
    return scorer.render(text)


def _argmax(values: np.ndarray) -> int:
    with np.errstate(divide="ignore", invalid="ignore"):
        return int(np.argmax(values))


def check_item(scorer, task: str, item: Item, options: TaskOptions, reference=None) -> None:
    """Raise, naming the item's file and line, what scoring it would raise (a continuation without tokens, one
    longer than the window, a reference model that tokenizes it differently, ...): an evaluation checks every item
    with every model before it scores any, so scoring itself never fails on an item."""
    if task == "generate":  # any context can be answered (a long one loses its left end, as lm-evaluation-harness's)
        return
    try:
        pairs = [scorer.check(context, conts) for context, conts in requests(scorer, task, item, options)]
        if reference is not None and task == "preference":
            if reference.check(_context(reference, item.context), list(item.continuations)) != pairs[0]:
                raise NlpkitError(DIFFERENT_TOKENIZER)
    except NlpkitError as e:
        raise type(e)(f"{item.where}: {e}") from None


def score_items(scorer, task: str, items: list[Item], options: TaskOptions, reference=None) -> list[tuple[dict, dict]]:
    """(record, metrics) of each item: the record as output (`file`, `index`, `id` first), the per-item metric
    values; all the items' requests scored in one batch (`score_requests`: the engine packs them into few
    forwards). The items are checked (`check_item`)."""
    if task == "generate":
        return generate_items(scorer, items, options.generation)
    reqs = [requests(scorer, task, item, options) for item in items]
    flat = [r for rs in reqs for r in rs]
    scores = score_requests(scorer, flat)
    ref_scores = None
    if reference is not None and task == "preference":
        ref_scores = score_requests(reference, [(_context(reference, it.context), list(it.continuations))
                                                for it in items])
    out, k = [], 0
    for n, (item, rs) in enumerate(zip(items, reqs)):
        mine = scores[k:k + len(rs)]
        k += len(rs)
        if task == "loglikelihood":
            out.append(_loglikelihood(item, mine[0][0]))
        elif task == "multiple-choice":
            out.append(_multiple_choice(item, mine))
        else:
            out.append(_preference(item, options, mine[0], ref_scores[n] if ref_scores is not None else None))
    return out


def requests(scorer, task: str, item: Item, options: TaskOptions) -> list[tuple[str, list[str]]]:
    """The (context, continuations) requests an item needs scored: multiple-choice choices follow the delimiter
    and, with `mutual_info`, are also scored after an empty context (lm-eval: ("", choice), never rendered)."""
    context = _context(scorer, item.context)
    if task != "multiple-choice":
        return [(context, list(item.continuations))]
    conts = [options.delimiter + c for c in item.continuations]
    return [(context, conts)] + ([("", conts)] if options.mutual_info else [])


def _loglikelihood(item: Item, s) -> tuple[dict, dict]:
    cont = item.continuations[0]
    rec = {**item.key(), "logprob": s.logprob, "tokens": s.tokens, "is_greedy": s.is_greedy,
           "chars": len(cont), "bytes": len(cont.encode("utf-8")), "truncated": s.truncated}
    return rec, {"logprob": s.logprob, "is_greedy": float(s.is_greedy)}


def _multiple_choice(item: Item, results: list[list]) -> tuple[dict, dict]:
    scores = results[0]
    lls = np.array([s.logprob for s in scores])  # [k]
    chars = np.array([float(len(c)) for c in item.continuations])
    nbytes = np.array([float(len(c.encode("utf-8"))) for c in item.continuations])
    ntok = np.array([float(s.tokens) for s in scores])
    with np.errstate(divide="ignore", invalid="ignore"):   # an empty choice: -inf per character (module doc)
        per_char, per_byte, per_token = lls / chars, lls / nbytes, lls / ntok
    preds = {"acc": _argmax(lls), "acc_norm": _argmax(per_char), "acc_bytes": _argmax(per_byte),
             "acc_tokens": _argmax(per_token)}
    rec = {**item.key(), "logprobs": lls.tolist(), "tokens": [s.tokens for s in scores],
           "is_greedy": [s.is_greedy for s in scores], "gold": list(item.gold)}
    if len(results) > 1:  # mutual information: the choices after an empty context
        uncond = np.array([s.logprob for s in results[1]])
        rec["logprobs_unconditional"] = uncond.tolist()
        preds["acc_mutual_info"] = _argmax(lls - uncond)
    metrics = {}
    for name, pred in preds.items():
        rec["pred" + name[3:]] = pred
        metrics[name] = float(pred in item.gold)
    rec.update(metrics)
    rec["truncated"] = any(s.truncated for s in scores)
    return rec, metrics


def _preference(item: Item, options: TaskOptions, scores: list, ref_scores: list | None) -> tuple[dict, dict]:
    chosen, rejected = scores
    margin = chosen.logprob - rejected.logprob
    rec = {**item.key(), "logprob_chosen": chosen.logprob, "logprob_rejected": rejected.logprob,
           "margin": margin, "tokens_chosen": chosen.tokens, "tokens_rejected": rejected.tokens}
    metrics = {"margin": margin, "accuracy": float(margin > 0)}
    if ref_scores is not None:
        ref_c, ref_r = ref_scores
        for mine, ref in ((chosen, ref_c), (rejected, ref_r)):
            if mine.ids != ref.ids or mine.context_ids != ref.context_ids:
                raise NlpkitError(f"{item.where}: {DIFFERENT_TOKENIZER}")
        r_c = options.beta * (chosen.logprob - ref_c.logprob)
        r_r = options.beta * (rejected.logprob - ref_r.logprob)
        rec.update({"ref_logprob_chosen": ref_c.logprob, "ref_logprob_rejected": ref_r.logprob,
                    "reward_chosen": r_c, "reward_rejected": r_r, "reward_margin": r_c - r_r})
        metrics.update({"reward_margin": r_c - r_r, "reward_accuracy": float(r_c > r_r)})
    rec.update({"accuracy": metrics["accuracy"]})
    if ref_scores is not None:
        rec["reward_accuracy"] = metrics["reward_accuracy"]
    rec["truncated"] = chosen.truncated or rejected.truncated
    return rec, metrics
