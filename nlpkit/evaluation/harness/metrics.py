"""Per-document metrics, their aggregation and standard errors, as lm-evaluation-harness 0.4.13 computes them.

- `TaskMetrics.of(config)`: the task's metrics (its `metric_list`, else the output type's defaults), each with its
  aggregation, `higher_is_better` and keyword options (`exact_match`'s ignore_case, ignore_punctuation,
  ignore_numbers, regexes_to_ignore); a metric or aggregation lm-eval would compute by a library nlpkit does not
  carry (HF evaluate, brier_score) is refused by name.
- `process_results(task, doc, results)`: lm-eval's per output type (acc, acc_norm, acc_bytes, acc_mutual_info,
  exact_match and likelihood of multiple choice; perplexity and acc of loglikelihood; word/byte perplexity and
  bits_per_byte of rolling loglikelihood; exact_match, bleu/chrf/ter pairs and hook metrics of generate_until), or
  the task's `process_results` hook.
- `aggregate` / `stderr`: mean, median, nanmean, perplexity, weighted_perplexity, bits_per_byte, corpus
  bleu/chrf/chrf++/ter (sacrebleu), f1 and matthews_corrcoef (sklearn's binary f1 and MCC, computed here from the
  confusion counts: integers, so the same float64 numbers); the standard error of a mean is sd/sqrt(n); where lm-eval bootstraps (median,
  perplexity, nanmean, f1, matthews_corrcoef: 100,000 resamples; bleu/chrf/ter: 100) nlpkit draws the same resamples (`random.Random(i)` per
  chunk of 1,000, `choices`) and gets its numbers; weighted perplexities and bits per byte have none ("N/A").
- `group_metrics`: a group's `aggregate_metric_list` (size-weighted or plain mean, pooled standard error).
"""

from __future__ import annotations

import math
import random
import re
import string
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from nlpkit.errors import NlpkitError
from nlpkit.evaluation.harness.hooks import call_hook

# metric -> (aggregation, higher_is_better)
METRICS = {
    "acc": ("mean", True), "acc_norm": ("mean", True), "acc_mutual_info": ("mean", True),
    "acc_bytes": ("mean", True), "exact_match": ("mean", True), "perplexity": ("perplexity", False),
    "likelihood": ("mean", True), "word_perplexity": ("weighted_perplexity", False),
    "byte_perplexity": ("weighted_perplexity", False), "bits_per_byte": ("bits_per_byte", False),
    "bleu": ("bleu", True), "chrf": ("chrf", True), "chrf++": ("chrf++", True), "ter": ("ter", False),
    "f1": ("f1", True), "mcc": ("matthews_corrcoef", True),
}
DEFAULT_METRICS = {"loglikelihood": ["perplexity", "acc"],
                   "loglikelihood_rolling": ["word_perplexity", "byte_perplexity", "bits_per_byte"],
                   "multiple_choice": ["acc", "acc_norm"], "generate_until": ["exact_match"]}
REFUSED = {"brier_score": "its passthrough", "bypass": "predict-only",
           "acc_all": "its SuperGLUE grouping"}
PASSTHROUGH_PAIRS = ("bleu", "chrf", "chrf++", "ter")
BOOTSTRAP_ITERS = 100_000


@dataclass
class TaskMetrics:
    """The metrics a task computes: name -> (hook or None), kwargs, aggregation name or hook, higher_is_better."""

    fns: dict[str, Any] = field(default_factory=dict)
    kwargs: dict[str, dict] = field(default_factory=dict)
    aggregation: dict[str, Any] = field(default_factory=dict)
    higher_is_better: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, config) -> "TaskMetrics":
        tm = cls()
        task = config.task
        if config.metric_list is None:
            for name in DEFAULT_METRICS[config.output_type]:
                tm.fns[name], tm.kwargs[name] = None, {}
                tm.aggregation[name], tm.higher_is_better[name] = METRICS[name]
            return tm
        for mc in config.metric_list:
            if "metric" not in mc:
                raise NlpkitError(f"task {task}: a metric_list entry has no 'metric' key")
            name = mc["metric"]
            if mc.get("hf_evaluate"):
                raise NlpkitError(f"task {task}: metric {name!r} from HF evaluate is not supported")
            kwargs = {k: v for k, v in mc.items() if k not in ("metric", "aggregation", "higher_is_better",
                                                                "hf_evaluate")}
            fn = None
            if callable(name):
                fn, name = name, name.__name__
            elif config.process_results is None:
                if name in REFUSED:
                    raise NlpkitError(f"task {task}: metric {name!r} is not supported (lm-eval computes it with "
                                      f"{REFUSED[name]})")
                if name not in METRICS:
                    raise NlpkitError(f"task {task}: metric {name!r} is not supported (supported: "
                                      f"{', '.join(METRICS)}, a !function metric, or a process_results hook)")
            tm.fns[name], tm.kwargs[name] = fn, kwargs if fn is not None or config.process_results is None else {}
            agg = mc.get("aggregation", METRICS.get(name, (None,))[0])
            if agg is None:
                raise NlpkitError(f"task {task}: metric {name!r} needs an aggregation (mean, median, perplexity, ...)")
            if isinstance(agg, str) and agg not in AGGREGATIONS:
                raise NlpkitError(f"task {task}: aggregation {agg!r} of metric {name!r} is not supported "
                                  f"({', '.join(AGGREGATIONS)})")
            tm.aggregation[name] = agg
            tm.higher_is_better[name] = mc.get("higher_is_better", METRICS.get(name, (None, None))[1])
        return tm


# ---------------------------------------------------------------------------- per document
def exact_match_hf(predictions, references, regexes_to_ignore=None, ignore_case=False, ignore_punctuation=False,
                   ignore_numbers=False):
    """lm-eval's exact_match (HF evaluate's): the mean of prediction == reference after the options."""
    if regexes_to_ignore is not None:
        for s in regexes_to_ignore:
            predictions = np.array([re.sub(s, "", x) for x in predictions])
            references = np.array([re.sub(s, "", x) for x in references])
    else:
        predictions, references = np.asarray(predictions), np.asarray(references)
    if ignore_case:
        predictions, references = np.char.lower(predictions), np.char.lower(references)
    if ignore_punctuation:
        table = string.punctuation.maketrans("", "", string.punctuation)
        predictions = np.char.translate(predictions, table=table)
        references = np.char.translate(references, table=table)
    if ignore_numbers:
        table = string.digits.maketrans("", "", string.digits)
        predictions = np.char.translate(predictions, table=table)
        references = np.char.translate(references, table=table)
    return {"exact_match": np.mean(predictions == references)}


def _generate_metric(name: str, fn, kwargs: dict, gold, result):
    if name == "exact_match" and fn is None:
        return exact_match_hf(references=[gold], predictions=[result], **kwargs)
    if fn is None:  # bleu, chrf, ter: passthrough of (reference, prediction) for the corpus aggregation
        return [gold, result]
    try:
        return fn(references=[gold], predictions=[result], **kwargs)
    except TypeError:
        return fn([gold, result])


def process_results(task, metrics: TaskMetrics, doc: dict, results: list) -> dict:
    cfg = task.config
    if callable(cfg.process_results):
        return call_hook(task.name, "process_results", cfg.process_results, doc, results)
    use = list(metrics.fns)
    out = cfg.output_type
    if out == "loglikelihood":
        ll, is_greedy = results[0]
        return {**({"perplexity": ll} if "perplexity" in use else {}),
                **({"acc": int(is_greedy)} if "acc" in use else {})}
    if out == "loglikelihood_rolling":
        (ll,) = results
        text = task.doc_to_target(doc)
        words, nbytes = len(re.split(r"\s+", text)), len(text.encode("utf-8"))
        return {**({"word_perplexity": (ll, words)} if "word_perplexity" in use else {}),
                **({"byte_perplexity": (ll, nbytes)} if "byte_perplexity" in use else {}),
                **({"bits_per_byte": (ll, nbytes)} if "bits_per_byte" in use else {})}
    if out == "multiple_choice":
        return _multiple_choice(task, use, doc, results)
    return _generate_until(task, metrics, doc, results)


def _multiple_choice(task, use: list[str], doc: dict, results: list) -> dict:
    lls, is_greedy = zip(*results)
    choices = task.doc_to_choice(doc)
    completion_len = np.array([float(len(i)) for i in choices])
    byte_length = np.array([float(len(i.encode("utf-8"))) for i in choices])
    if 2 * len(choices) == len(lls) and "acc_mutual_info" in use:
        lls_unconditional = lls[len(choices):]
        lls = lls[:len(choices)]
    with np.errstate(divide="ignore", invalid="ignore"):
        pred = np.argmax(lls)
        pred_norm = np.argmax(lls / completion_len)
        pred_byte = np.argmax(lls / byte_length)
    gold = task.doc_to_text(doc) if task.multiple_input else task.doc_to_target(doc)
    if isinstance(gold, list):
        gold = [i if i < len(choices) else -100 for i in gold]
    elif isinstance(gold, int):
        gold = gold if gold < len(choices) else -100
    elif isinstance(gold, str):
        gold = choices.index(gold) if gold in choices else -100
    if task.multiple_target:
        acc, acc_norm, acc_bytes = (1.0 if p in gold else 0.0 for p in (pred, pred_norm, pred_byte))
        exact = int(any(is_greedy[i] if i != -100 else 0 for i in gold))
    else:
        acc, acc_norm, acc_bytes = (1.0 if p == gold else 0.0 for p in (pred, pred_norm, pred_byte))
        exact = int(is_greedy[gold]) if gold != -100 else 0
    res = {**({"acc": acc} if "acc" in use else {}),
           **({"f1": (gold, pred)} if "f1" in use else {}),
           **({"mcc": (gold, pred)} if "mcc" in use else {}),
           **({"acc_norm": acc_norm} if "acc_norm" in use else {}),
           **({"acc_bytes": acc_bytes} if "acc_bytes" in use else {}),
           **({"exact_match": exact} if "exact_match" in use else {}),
           **({"likelihood": (gold, lls)} if "likelihood" in use else {})}
    if "acc_mutual_info" in use:
        mi = [c - u for c, u in zip(lls, lls_unconditional)]
        res["acc_mutual_info"] = 1.0 if np.argmax(mi) == gold else 0.0
    return res


def _generate_until(task, metrics: TaskMetrics, doc: dict, results: list) -> dict:
    gold = task.doc_to_target(doc)
    result = results[0]
    if task.config.doc_to_choice is not None:
        gold = task.doc_to_choice(doc)[gold]
    elif task.multiple_target:
        gold = list(gold)
    elif type(gold) is not type(result) and not isinstance(result, list):
        gold = type(result)(gold)
    out: dict = {}
    for name, fn in metrics.fns.items():
        kwargs = metrics.kwargs[name]
        if task.multiple_target:
            golds = gold if isinstance(gold, list) else [gold]
            if name == "exact_match" and fn is None:
                score = exact_match_hf(references=golds, predictions=[result] * len(golds), **kwargs)["exact_match"]
                value = 1.0 if score > 0.0 else 0.0
            else:
                scores = []
                for g in golds:
                    s = _generate_metric(name, fn, kwargs, g, result)
                    scores.append(s[name] if isinstance(s, dict) else s)
                value = 1.0 if any(scores) else 0.0
        else:
            value = _generate_metric(name, fn, kwargs, gold, result)
        if isinstance(value, dict):
            out.update(value)
        else:
            out[name] = value
    return out


# ---------------------------------------------------------------------------- aggregation
def mean(arr):
    return sum(arr) / len(arr)


def median(arr):
    return sorted(arr)[len(arr) // 2]


def nanmean(arr):
    if len(arr) == 0 or all(np.isnan(arr)):
        return np.nan
    return np.nanmean(arr)


def perplexity(items):
    return math.exp(-mean(items))


def weighted_mean(items):
    a, b = zip(*items)
    return sum(a) / sum(b)


def weighted_perplexity(items):
    return math.exp(-weighted_mean(items))


def bits_per_byte(items):
    return -weighted_mean(items) / math.log(2)


def _sacreformat(refs, preds):
    def non_str_iter(o):
        return hasattr(o, "__iter__") and not isinstance(o, str)
    refs = list(refs)
    if not non_str_iter(refs[0]):
        refs = [[r] for r in refs]
    refs = list(zip(*refs))
    preds = list(preds)
    if non_str_iter(preds[0]):
        preds = [p[0] for p in preds]
    return refs, preds


def _corpus(kind: str):
    def f(items):
        import sacrebleu

        refs, preds = _sacreformat(*list(zip(*items))[:2]) if items else ([], [])
        if kind == "bleu":
            return sacrebleu.corpus_bleu(preds, refs).score
        if kind == "chrf":
            return sacrebleu.corpus_chrf(preds, refs).score
        if kind == "chrf++":
            return sacrebleu.corpus_chrf(preds, refs, word_order=2).score
        return sacrebleu.corpus_ter(preds, refs).score
    f.__name__ = kind
    return f


def _label_pairs(items) -> tuple[np.ndarray, np.ndarray]:
    golds, preds = zip(*items)
    return np.asarray(golds), np.asarray(preds)


def _f1_from_pairs(golds: np.ndarray, preds: np.ndarray) -> np.ndarray:
    """sklearn's binary f1 (positive label 1, 0 where it divides by zero) of each row: 2 tp / (true + predicted),
    all integers until the one division, so sklearn's float64 number.  golds, preds: [rows, n] -> [rows]"""
    tp = ((golds == 1) & (preds == 1)).sum(axis=-1).astype(np.float64)
    denom = (golds == 1).sum(axis=-1).astype(np.float64) + (preds == 1).sum(axis=-1).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(denom == 0, 0.0, 2.0 * tp / denom)


def _mcc_from_pairs(golds: np.ndarray, preds: np.ndarray) -> np.ndarray:
    """sklearn's matthews_corrcoef of each row, from the confusion counts (integers until the last division and
    square root, so sklearn's float64 number; 0 where it is undefined).  golds, preds: [rows, n] -> [rows]"""
    n = np.float64(golds.shape[-1])
    labels = np.union1d(golds, preds)
    t = np.stack([(golds == c).sum(axis=-1) for c in labels], axis=-1).astype(np.float64)  # [rows, k]
    p = np.stack([(preds == c).sum(axis=-1) for c in labels], axis=-1).astype(np.float64)
    correct = (golds == preds).sum(axis=-1).astype(np.float64)
    cov_ytyp = correct * n - (t * p).sum(axis=-1)
    cov = (n ** 2 - (p * p).sum(axis=-1)) * (n ** 2 - (t * t).sum(axis=-1))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(cov == 0, 0.0, cov_ytyp / np.sqrt(cov))


def f1(items) -> float:
    """lm-eval's f1 aggregation (sklearn's `f1_score(golds, preds)`, binary); items: (gold, pred) pairs."""
    golds, preds = _label_pairs(items)
    present = set(golds.tolist()) | set(preds.tolist())
    if len(present) > 2 or (len(present) == 2 and 1 not in present):
        raise ValueError(f"lm-eval's f1 is sklearn's binary f1 (labels 0 and 1); these labels are {sorted(present)}")
    return float(_f1_from_pairs(golds, preds))


def matthews_corrcoef(items) -> float:
    """lm-eval's matthews_corrcoef aggregation (sklearn's); items: (gold, pred) pairs."""
    return float(_mcc_from_pairs(*_label_pairs(items)))


AGGREGATIONS: dict[str, Callable] = {
    "mean": mean, "median": median, "nanmean": nanmean, "perplexity": perplexity,
    "weighted_perplexity": weighted_perplexity, "bits_per_byte": bits_per_byte,
    "bleu": _corpus("bleu"), "chrf": _corpus("chrf"), "chrf++": _corpus("chrf++"), "ter": _corpus("ter"),
    "f1": f1, "matthews_corrcoef": matthews_corrcoef,
}
BOOTSTRAPPED = ("median", "perplexity", "bleu", "chrf", "chrf++", "ter", "nanmean", "f1", "matthews_corrcoef")


def sample_stddev(arr) -> float:
    mu = mean(arr)
    return math.sqrt(sum([(x - mu) ** 2 for x in arr]) / (len(arr) - 1))


def mean_stderr(arr) -> float:
    return sample_stddev(arr) / math.sqrt(len(arr))


def _resamples(seed: int, chunk: int, n: int) -> np.ndarray:
    """The item indices of `chunk` resamples of n items drawn as `random.Random(seed).choices(xs, k=n)` draws them
    (Python's Mersenne Twister state copied into numpy's; choices = floor(random() * n)).  # -> [chunk, n]"""
    state = random.Random(seed).getstate()[1]
    rs = np.random.RandomState()
    rs.set_state(("MT19937", np.array(state[:-1], dtype=np.uint32), state[-1]))
    return np.floor(rs.random_sample(chunk * n) * float(n)).astype(np.int64).reshape(chunk, n)


def bootstrap_stderr(agg: str, xs: Sequence, iters: int) -> float:
    """lm-eval's bootstrap_stderr: `iters` resamples in chunks of min(1000, iters), chunk i drawn by Random(i)."""
    chunk = min(1000, iters)
    n = len(xs)
    res: list[float] = []
    fn = AGGREGATIONS[agg]
    arr = np.asarray(xs, dtype=np.float64) if agg in ("perplexity", "median", "nanmean") else None
    pairs = _label_pairs(xs) if agg in ("f1", "matthews_corrcoef") else None
    if pairs is not None:
        fn(xs)  # refuses labels lm-eval's sklearn call would refuse
    for i in range(iters // chunk):
        idx = _resamples(i, chunk, n)  # [chunk, n]
        if agg == "perplexity":
            sums = np.cumsum(arr[idx], axis=1)[:, -1]  # left-to-right, as Python's sum
            res += [math.exp(-(s / n)) for s in sums.tolist()]
        elif agg == "median":
            res += np.sort(arr[idx], axis=1)[:, n // 2].tolist()
        elif agg == "nanmean":
            res += [float(nanmean(row)) for row in arr[idx]]
        elif pairs is not None:
            res += (_f1_from_pairs if agg == "f1" else _mcc_from_pairs)(pairs[0][idx], pairs[1][idx]).tolist()
        else:
            res += [fn([xs[j] for j in row]) for row in idx.tolist()]
    return sample_stddev(res)


def aggregate(agg, items: list):
    return agg(items) if callable(agg) else AGGREGATIONS[agg](items)


def stderr(agg, metric: str, items: list, bootstrap_iters: int = BOOTSTRAP_ITERS):
    """The standard error lm-eval reports for an aggregation ("N/A" where it has none)."""
    if bootstrap_iters <= 0 or len(items) <= 1 or callable(agg):
        return "N/A"
    if agg == "mean":
        return mean_stderr(items)
    if agg in BOOTSTRAPPED:
        iters = min(bootstrap_iters, 100) if metric in ("bleu", "chrf", "chrf++", "ter") else bootstrap_iters
        return bootstrap_stderr(agg, items, iters)
    return "N/A"


# ---------------------------------------------------------------------------- groups
def pooled_sample_stderr(stderrs: list[float], sizes: list[int]):
    var = sum((size - 1) * se ** 2 * size for size, se in zip(sizes, stderrs)) / (sum(sizes) - len(sizes))
    return np.sqrt(var / sum(sizes))


def unweighted_mean_stderr(stderrs: list[float]):
    return np.sqrt(sum(se ** 2 for se in stderrs)) / len(stderrs)


def aggregate_subtask_metrics(metrics, sizes, weight_by_size=True):
    if not weight_by_size:
        sizes = [1] * len(sizes)
    return sum(m * s for m, s in zip(metrics, sizes)) / sum(sizes)


def group_metrics(group, results: dict) -> dict:
    """lm-eval's `Group.aggregate` of `results` (task -> its metrics dict)."""
    out: dict[str, Any] = {"alias": group.alias or group.name, "name": group.name}
    if not group.aggregate_metric_list:
        return out
    leaves = group.leaf_tasks()
    out["sample_len"] = sum(results[t].get("sample_len", 0) for t in leaves if t in results)
    counts: dict[str, int] = {}
    for agg in group.aggregate_metric_list:
        filters = agg.filter_list
        if filters is None:
            found = set()
            for t in leaves:
                for key in results.get(t, {}):
                    if key.startswith(f"{agg.metric},") and "_stderr" not in key:
                        found.add(key[len(agg.metric) + 1:])
            filters = sorted(found)
        for f in filters:
            key, se_key = f"{agg.metric},{f}", f"{agg.metric}_stderr,{f}"
            values, ses, sizes = [], [], []
            for t in leaves:
                r = results.get(t)
                if r is not None and key in r:
                    values.append(r[key])
                    sizes.append(r.get("sample_len", 0))
                    if r.get(se_key) is not None:
                        ses.append(r[se_key])
            if not values:
                continue
            out[key] = aggregate_subtask_metrics(values, sizes, agg.weight_by_size)
            counts[key] = sum(sizes)
            if len(ses) == len(values) and "N/A" not in ses:
                out[se_key] = pooled_sample_stderr(ses, sizes) if agg.weight_by_size else unweighted_mean_stderr(ses)
            else:
                out[se_key] = "N/A"
    if counts:
        out["sample_count"] = counts
    return out
