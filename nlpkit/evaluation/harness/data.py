"""A task's data through Hugging Face `datasets` (the library lm-evaluation-harness reads it with), offline always:
`dataset_path` json/csv/parquet/arrow/text with `dataset_kwargs.data_files`, or a hub dataset from the local datasets
cache only (HF_DATASETS_OFFLINE / HF_HUB_OFFLINE semantics: nothing is downloaded). A dataset that is not there is one
line naming it and how to point `data_files` at local copies.
"""

from __future__ import annotations

import os
from typing import Any

from nlpkit.errors import NlpkitError

LOCAL_BUILDERS = ("json", "csv", "parquet", "arrow", "text", "pandas")


def offline_datasets():
    """The `datasets` module, set offline (before or after its first import)."""
    os.environ["HF_DATASETS_OFFLINE"] = "1"
    os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        import datasets
    except ImportError:
        raise NlpkitError("lm-evaluation-harness tasks need Hugging Face datasets: pip install 'nlpkit[tasks]'") \
            from None
    try:  # progress bars and info logs of datasets are not ours to print
        datasets.utils.logging.disable_progress_bar()
        datasets.utils.logging.set_verbosity_error()
    except AttributeError:
        pass
    cfg = datasets.config
    for name in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE"):
        if hasattr(cfg, name):
            setattr(cfg, name, True)
    try:
        import huggingface_hub.constants as hc
        hc.HF_HUB_OFFLINE = True
    except ImportError:
        pass
    return datasets


def load_task_dataset(task: str, path: str | None, name: str | None, kwargs: dict | None,
                      rows_only: bool = False) -> Any:
    """`datasets.load_dataset(path, name, **kwargs)` offline: the DatasetDict of a task's splits. `rows_only` (no
    hook needs a real `Dataset`): plain local JSON Lines whose rows `datasets` gives back unchanged are read without
    it (`json_rows`: the same rows, without importing datasets)."""
    if path is None:
        raise NlpkitError(f"task {task}: no dataset_path (nlpkit reads a task's data through datasets)")
    kwargs = dict(kwargs or {})
    kwargs.pop("trust_remote_code", None)  # datasets 4 dropped loading scripts (lm-eval pops it too)
    if rows_only:
        from nlpkit.evaluation.harness.json_rows import plain_json_splits

        plain = plain_json_splits(path, name, kwargs)
        if plain is not None:
            return plain
    datasets = offline_datasets()
    what = path + (f" ({name})" if name else "")
    try:
        return datasets.load_dataset(path=path, name=name, **kwargs)
    except FileNotFoundError as e:
        if path in LOCAL_BUILDERS:
            raise NlpkitError(f"task {task}: data file not found: {_first_line(e)}") from None
        raise NlpkitError(_not_cached(task, what)) from None
    except (ConnectionError, OSError) as e:
        raise NlpkitError(_not_cached(task, what) if path not in LOCAL_BUILDERS else
                          f"task {task}: dataset {what}: {_first_line(e)}") from None
    except Exception as e:  # datasets raises many types (ValueError, DatasetNotFoundError, ...)
        msg = _first_line(e)
        if path not in LOCAL_BUILDERS and ("offline" in msg.lower() or "not found" in msg.lower()
                                           or "couldn't" in msg.lower() or "doesn't exist" in msg.lower()):
            raise NlpkitError(_not_cached(task, what)) from None
        raise NlpkitError(f"task {task}: dataset {what} could not be read: {type(e).__name__}: {msg}") from None


def _not_cached(task: str, what: str) -> str:
    return (f"task {task}: dataset {what} is not in the local datasets cache and nlpkit never downloads: load it "
            "once where there is a network (datasets.load_dataset), or point the task at local files "
            "(dataset_path: json, dataset_name: null, dataset_kwargs: {data_files: {test: FILE}})")


def _first_line(e: BaseException) -> str:
    s = str(e).strip().splitlines()
    return s[0] if s else type(e).__name__


def split_of(task: str, dataset, split: str):
    try:
        return dataset[split]
    except KeyError:
        have = ", ".join(dataset.keys()) if hasattr(dataset, "keys") else "?"
        raise NlpkitError(f"task {task}: split {split!r} is not in its dataset (splits: {have})") from None
