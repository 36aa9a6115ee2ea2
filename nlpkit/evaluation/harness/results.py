"""lm-evaluation-harness 0.4.13's output files, written by nlpkit: `<output>/<model>/results_<time>.json` (results,
groups, group_subtasks, configs, versions, n-shot, higher_is_better, n-samples, config, task_hashes, ...) and, with
`--log-samples`, `samples_<task>_<time>.jsonl` (doc_id, doc, target, arguments, resps, filtered_resps, filter,
metrics, doc_hash, prompt_hash, target_hash, each metric's value) with lm-eval's serialisation (arguments as
`gen_args_i.arg_j`, responses as strings), so a script that reads lm-eval's files reads these unchanged.

Files are written whole or not at all: each to a temporary name beside it, then renamed, after the whole run.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np


def hash_string(s: str) -> str:
    return hashlib.sha256(s.encode("utf-8")).hexdigest()


def json_default(o):
    """lm-eval's handle_non_serializable."""
    if isinstance(o, np.bool_):
        return bool(o)
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, set):
        return list(o)
    return str(o)


def sanitize_list(sub):
    if isinstance(sub, list):
        return [sanitize_list(x) for x in sub]
    if isinstance(sub, tuple):
        return tuple(sanitize_list(x) for x in sub)
    return str(sub)


def sanitize_model_name(name: str) -> str:
    return re.sub(r"[\"<>:/|\\?*\[\]]+", "__", name)


def sample_line(sample: dict) -> str:
    """One samples_*.jsonl line as lm-eval's EvaluationTracker writes it."""
    s = dict(sample)
    s["arguments"] = {f"gen_args_{i}": {f"arg_{j}": a for j, a in enumerate(arg)}
                      for i, arg in enumerate(sample["arguments"])}
    s["resps"] = sanitize_list(sample["resps"])
    s["filtered_resps"] = sanitize_list(sample["filtered_resps"])
    s["target"] = str(sample["target"])
    return json.dumps(s, default=json_default, ensure_ascii=False) + "\n"


def run_config(model_info: dict, options, limit) -> dict:
    """The results file's `config`: lm-eval's fields, and the BLAS the products ran on (library, version, kernel,
    threads: the last bits of a number can differ on another kernel, so two runs are compared knowingly)."""
    config = {**model_info, "batch_size": options.batch_size, "batch_sizes": [], "device": "cpu",
              "use_cache": None, "limit": limit, "bootstrap_iters": options.bootstrap_iters, "gen_kwargs": None,
              "random_seed": 0, "numpy_seed": 1234, "torch_seed": 1234, "fewshot_seed": options.fewshot_seed}
    from nlpkit.lm.threads import blas_info

    config["blas"] = blas_info()
    return config


def results_document(run, selection, model_info: dict, options, start: float, chat_template: str | None) -> dict:
    """lm-eval's results dict for one model's run (`ModelRun`)."""
    groups = selection.groups
    versions = {n: p for n, p in ((n, c.metadata.get("version", "Yaml") if isinstance(c.metadata, dict) else "Yaml")
                                  for n, c in selection.tasks.items())}
    nshot = {n: run.configs[n].get("num_fewshot", 0) for n in selection.tasks}
    hib = dict(run.higher_is_better)
    for g in groups.values():
        versions[g.name] = g.version
    for g in (groups[n] for n in selection.top_down()):  # lm-eval's one pass, parents before their subgroups
        vals = {nshot[c] for c in g.child_names if c in nshot}
        if len(vals) == 1:
            nshot[g.name] = vals.pop()
        merged: dict = {}
        for c in g.child_names:
            for m, h in hib.get(c, {}).items():
                if m not in merged:
                    merged[m] = h
                elif merged[m] is not None and merged[m] != h:
                    merged[m] = None
        if merged:
            hib[g.name] = merged
    group_results = {n: dict(r) for n, r in run.results.items() if n in groups and groups[n].aggregate_metric_list}
    doc: dict[str, Any] = {"results": {n: dict(r) for n, r in run.results.items()}}
    if group_results:
        doc["groups"] = group_results
    doc.update({
        "group_subtasks": {n: groups[n].child_names for n in selection.top_down()},
        "configs": dict(sorted(run.configs.items())),
        "versions": dict(sorted(versions.items())),
        "n-shot": dict(sorted(nshot.items())),
        "higher_is_better": dict(sorted(hib.items())),
        "n-samples": dict(run.n_samples),
        "config": run_config(model_info, options, options.limit),
        "git_hash": None,
        "date": start,
    })
    from nlpkit import __version__ as nlpkit_version

    doc["nlpkit_version"] = nlpkit_version
    doc["task_hashes"] = {t: hash_string("".join(s["doc_hash"] + s["prompt_hash"] + s["target_hash"] for s in ss))
                          for t, ss in run.samples.items() if ss}
    name = str(model_info.get("model_args", {}).get("pretrained"))
    system = options.system
    doc.update({"model_source": "nlpkit", "model_name": name, "model_name_sanitized": sanitize_model_name(name),
                "system_instruction": system, "system_instruction_sha": hash_string(system) if system else None,
                "fewshot_as_multiturn": options.fewshot_as_multiturn if options.chat else None,
                "chat_template": chat_template, "chat_template_sha": hash_string(chat_template) if chat_template
                else None, "total_evaluation_time_seconds": str(time.time() - start)})
    return doc


def planned_files(output_path: str, model_name: str, tasks: list[str], log_samples: bool,
                  date_id: str | None = None) -> dict[str, Path]:
    """Where lm-eval writes: a folder -> <folder>/<model>/results_<date>.json; a path ending .json -> beside it."""
    date_id = date_id or datetime.now().isoformat().replace(":", "-")
    path = Path(output_path)
    if path.suffix == ".json":
        results = path.with_name(f"{path.stem}_{date_id}.json")
        folder = path.parent
    else:
        folder = path / sanitize_model_name(model_name)
        results = folder / f"results_{date_id}.json"
    out = {"results": results}
    if log_samples:
        for t in tasks:
            out[t] = folder / f"samples_{t}_{date_id}.jsonl"
    return out


def write_atomic(path: Path, text: str) -> None:
    """`text` to `path` whole: written to a temporary file beside it, then renamed over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_run(files: dict[str, Path], results: dict, samples: dict | None) -> None:
    """The samples files, then the results file (each whole)."""
    if samples is not None:
        for t, ss in samples.items():
            if t in files:
                write_atomic(files[t], "".join(sample_line(s) for s in ss))
    write_atomic(files["results"], json.dumps(results, indent=2, default=json_default, ensure_ascii=False))
