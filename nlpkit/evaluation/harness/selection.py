"""`--tasks NAME[,NAME]` -> the task configs to run and the groups over them, as lm-evaluation-harness 0.4.13's
`TaskManager.load` builds them (`TaskFactory`): a name is a task, a group (its `task` list: names, tags, groups,
dicts of a task with overrides, inline subgroups `parent::child`; the group's non-group keys override its
members'), a tag (its tasks, sorted), or a path to a YAML file.
"""

from __future__ import annotations

from copy import deepcopy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nlpkit.errors import NlpkitError
from nlpkit.evaluation.harness.config import TaskConfig
from nlpkit.evaluation.harness.task_files import Entry, TaskFileError, TaskRegistry, category_of, load_yaml

GROUP_FIELDS = ("group", "group_alias", "task", "aggregate_metric_list", "metadata")


@dataclass
class AggMetric:
    metric: str
    filter_list: list | None = None
    aggregation: Any = "mean"
    weight_by_size: bool = True


@dataclass
class Group:
    """A group: its children (task names and subgroups, in order) and what it aggregates."""

    name: str
    alias: str | None = None
    aggregate_metric_list: list[AggMetric] | None = None
    metadata: dict | None = None
    children: list = field(default_factory=list)  # str (task name) | Group
    config: dict | None = None

    @property
    def child_names(self) -> list[str]:
        return [c.name if isinstance(c, Group) else c for c in self.children]

    def leaf_tasks(self) -> list[str]:
        out = []
        for c in self.children:
            out += c.leaf_tasks() if isinstance(c, Group) else [c]
        return out

    @property
    def version(self) -> str:
        return "N/A" if not self.metadata else str(self.metadata.get("version", "N/A"))


@dataclass
class Selection:
    """What a run evaluates: leaf task configs by name (in load order) and the groups over them."""

    tasks: dict[str, TaskConfig] = field(default_factory=dict)
    groups: dict[str, Group] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)  # task -> its YAML file (error messages)

    def top_down(self) -> list[str]:
        """Group names in lm-eval's order of its loaded groups: each top-level group, then its subgroups depth-first
        (lm-eval fills a group's n-shot and higher_is_better from its children in this order, in one pass, so a
        group above a subgroup gets none)."""
        children = {c.name for g in self.groups.values() for c in g.children if isinstance(c, Group)}
        order: dict[str, None] = {}

        def visit(g: Group) -> None:
            for c in g.children:
                if isinstance(c, Group):
                    order.setdefault(c.name)
                    visit(c)

        for name, g in self.groups.items():
            if name not in children:
                order.setdefault(name)
                visit(g)
        return list(order)

    def bottom_up(self) -> list[str]:
        """Group names, children before parents (lm-eval aggregates subgroups first)."""
        children = {c.name for g in self.groups.values() for c in g.children if isinstance(c, Group)}
        order: list[str] = []

        def visit(g: Group) -> None:
            if g.name in order:
                return
            for c in g.children:
                if isinstance(c, Group):
                    visit(c)
            order.append(g.name)

        for name, g in self.groups.items():
            if name not in children:
                visit(g)
        return order


def select(names: list[str], registry: TaskRegistry, meta: dict | None = None) -> Selection:
    """Build every task and group `names` asks for (each one line of error when it cannot)."""
    sel = Selection()
    b = _Builder(registry, meta or {}, sel)
    for spec in names:
        entry = registry.lookup(spec)
        if entry is None and (spec.endswith((".yaml", ".yml")) or Path(spec).is_file()):
            entry = _entry_from_path(Path(spec))
        if entry is None:
            raise registry.unknown(spec)
        b.build_top(entry)
    return sel


def _entry_from_path(path: Path) -> Entry:
    cfg = load_yaml(path, resolve=False)
    category = category_of(cfg)
    name = cfg.get("task") if category != "group" else cfg.get("group")
    if category == "unknown" or not isinstance(name, str):
        raise TaskFileError(f"{path}: neither a task (task: NAME) nor a group (group: NAME)")
    return Entry(name, category, path.resolve(), cfg)


def _unsafe(task: str, where: str) -> NlpkitError:
    return NlpkitError(f"{where}: task {task} executes the model's generated code (unsafe_code: true, which "
                       "lm-eval runs only when confirmed): nlpkit does not run such tasks")


class _Builder:
    def __init__(self, registry: TaskRegistry, meta: dict, sel: Selection):
        self.registry, self.meta, self.sel = registry, meta, sel

    def full_config(self, entry: Entry, overrides: dict | None) -> dict:
        try:
            cfg = deepcopy(load_yaml(entry.path, resolve=True)) if entry.path else deepcopy(entry.cfg or {})
        except TaskFileError:
            raise
        except NlpkitError as e:  # a hook module that cannot be imported: the task named too
            raise NlpkitError(f"{entry.category} {entry.name}: {e}") from None
        if overrides:
            cfg = {**cfg, **overrides}
        md = cfg.get("metadata", {})
        cfg["metadata"] = (md if isinstance(md, dict) else {"_metadata": md}) | self.meta
        cfg["metadata"]["config_source"] = str(entry.path) if entry.path else "inline"
        return cfg

    def build_top(self, entry: Entry):
        if entry.category == "tag":
            for name in sorted(entry.members):
                self.build_task(self.registry.lookup(name), None)
        elif entry.category == "group":
            self.build_group(entry.name, self.full_config(entry, None), None)
        else:
            self.build_task(entry, None)

    def build_task(self, entry: Entry, overrides: dict | None) -> str:
        if entry.category == "python":
            raise NlpkitError(f"{entry.path}: task {entry.name} is a Python class task (class: ...): nlpkit runs "
                              "YAML tasks only")
        if (entry.cfg or {}).get("unsafe_code") or (overrides or {}).get("unsafe_code"):  # before its hooks import
            raise _unsafe(entry.name, str(entry.path))
        cfg = self.full_config(entry, overrides)
        for key in ("tag", "group", "task_list"):
            cfg.pop(key, None)
        return self.add_task(cfg, str(entry.path))

    def add_task(self, cfg: dict, where: str) -> str:
        tc = TaskConfig.from_dict(cfg, where)
        if tc.unsafe_code:
            raise _unsafe(tc.task, where)
        if tc.output_type not in ("loglikelihood", "multiple_choice", "loglikelihood_rolling", "generate_until"):
            raise NlpkitError(f"{where}: task {tc.task}: output_type {tc.output_type!r} is not supported "
                              "(loglikelihood, multiple_choice, loglikelihood_rolling, generate_until)")
        self.sel.tasks[tc.task] = tc
        self.sel.sources[tc.task] = where
        return tc.task

    def build_group(self, name: str, raw: dict, overrides: dict | None) -> Group:
        gdict = {k: v for k, v in raw.items() if k in GROUP_FIELDS}
        md = (gdict.get("metadata") or {}) | self.meta
        aggs = gdict.get("aggregate_metric_list")
        if isinstance(aggs, dict):
            aggs = [aggs]
        agg_list = None
        if aggs is not None:
            agg_list = []
            for a in aggs:
                a = dict(a)
                if isinstance(a.get("filter_list"), str):
                    a["filter_list"] = [a["filter_list"]]
                if a.get("aggregation", "mean") != "mean" and not callable(a.get("aggregation")):
                    raise NlpkitError(f"group {name}: aggregate_metric_list aggregation {a['aggregation']!r}: only "
                                      "mean is defined (lm-evaluation-harness's rule)")
                agg_list.append(AggMetric(**a))
        group = Group(name, gdict.get("group_alias"), agg_list, md, config={**gdict, "group": name, "metadata": md})
        member_overrides = {**{k: v for k, v in raw.items() if k not in GROUP_FIELDS}, **(overrides or {})}
        members = raw.get("task")
        if isinstance(members, str):
            members = [members]
        for item in members or []:
            for child in self.members(item, name, member_overrides):
                if isinstance(child, Group) or child not in group.children:  # a task named twice counts once
                    group.children.append(child)
        self.sel.groups[name] = group
        return group

    def members(self, item, group_name: str, overrides: dict) -> list:
        if isinstance(item, dict) and "group" in item:
            sub = item["group"]
            entry = self.registry.lookup(sub)
            if entry is not None and entry.category == "group":
                merged = {**overrides, **{k: v for k, v in item.items() if k != "group"}}
                raw = self.full_config(entry, None)
                return [self.build_group(entry.name, raw, merged)]
            return [self.build_group(f"{group_name}::{sub}", item, overrides)]
        if isinstance(item, dict):
            if "task" not in item:
                raise NlpkitError(f"group {group_name}: a task entry needs a task or group key, got {sorted(item)}")
            base, item_overrides = item["task"], {**overrides, **item}
        elif isinstance(item, str):
            base, item_overrides = item, dict(overrides)
        else:
            raise NlpkitError(f"group {group_name}: unsupported task entry {item!r}")
        entry = self.registry.lookup(base)
        if entry is None:
            if isinstance(item, dict):  # an inline task
                cfg = {**item_overrides, "task": f"{group_name}::{base}"}
                cfg["metadata"] = cfg.get("metadata", {}) | self.meta
                return [self.add_task(cfg, f"group {group_name}")]
            raise self.registry.unknown(base)
        if entry.category == "group":
            return [self.build_group(entry.name, self.full_config(entry, None), item_overrides)]
        if entry.category == "tag":
            return [self.build_task(self.registry.lookup(t), {"task": t, **item_overrides})
                    for t in sorted(entry.members)]
        return [self.build_task(entry, {"task": base, **item_overrides})]
