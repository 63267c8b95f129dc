"""Compare two preview reports (plan.json from the base branch vs this branch): what a reviewer reads first."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from blueprints.core.errors import BlueprintError, read_text_file
from blueprints.core.yamlio import load_json


@dataclass(frozen=True)
class SettingChange:
    path: str
    before: Any
    after: Any


@dataclass(frozen=True)
class ResourceChange:
    type: str
    name: str
    settings: list[SettingChange]


@dataclass
class PlanDiff:
    """Compliance changes (listed first: a weaker record is what a reviewer must not miss), resources added, removed
    and changed (with the changed settings), and the monthly cost delta in USD."""

    compliance: list[SettingChange] = field(default_factory=list)
    added: list[tuple[str, str]] = field(default_factory=list)
    removed: list[tuple[str, str]] = field(default_factory=list)
    changed: list[ResourceChange] = field(default_factory=list)
    cost_before_usd: float = 0.0
    cost_after_usd: float = 0.0

    @property
    def cost_delta_usd(self) -> float:
        return round(self.cost_after_usd - self.cost_before_usd, 2)

    @property
    def empty(self) -> bool:
        return not (self.compliance or self.added or self.removed or self.changed) and self.cost_delta_usd == 0

    def to_json(self) -> dict[str, Any]:
        return {
            "compliance": [{"path": s.path, "before": s.before, "after": s.after} for s in self.compliance],
            "added": [{"type": t, "name": n} for t, n in self.added],
            "removed": [{"type": t, "name": n} for t, n in self.removed],
            "changed": [{"type": c.type, "name": c.name,
                         "settings": [{"path": s.path, "before": s.before, "after": s.after} for s in c.settings]}
                        for c in self.changed],
            "monthly_cost_usd": {"before": self.cost_before_usd, "after": self.cost_after_usd,
                                 "delta": self.cost_delta_usd},
        }


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """`{"a": {"b": [1]}}` -> `{"a.b[0]": 1}`; empty containers are kept as leaves."""
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key in sorted(value):
            out.update(flatten(value[key], f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(value, list) and value:
        out = {}
        for i, item in enumerate(value):
            out.update(flatten(item, f"{prefix}[{i}]"))
        return out
    return {prefix: value}


def diff_reports(base: dict[str, Any], head: dict[str, Any]) -> PlanDiff:
    """Diff two `PreviewReport.to_json()` documents by resource (type, name) and setting path."""
    before = {(r["type"], r["name"]): r for r in base.get("resources", [])}
    after = {(r["type"], r["name"]): r for r in head.get("resources", [])}
    old_rules, new_rules = flatten(base.get("compliance") or {}), flatten(head.get("compliance") or {})
    result = PlanDiff(compliance=[SettingChange(p, old_rules.get(p), new_rules.get(p))
                                  for p in sorted(old_rules.keys() | new_rules.keys())
                                  if old_rules.get(p) != new_rules.get(p)],
                      added=sorted(after.keys() - before.keys()), removed=sorted(before.keys() - after.keys()),
                      cost_before_usd=_cost(base), cost_after_usd=_cost(head))
    for key in sorted(before.keys() & after.keys()):
        old, new = flatten(before[key]["inputs"]), flatten(after[key]["inputs"])
        settings = [SettingChange(p, old.get(p), new.get(p)) for p in sorted(old.keys() | new.keys())
                    if old.get(p) != new.get(p)]
        if settings:
            result.changed.append(ResourceChange(key[0], key[1], settings))
    return result


def _cost(report: dict[str, Any]) -> float:
    return float(report.get("predictions", {}).get("monthly_cost_usd", 0.0))


def load_baseline(path: Path, *, stack: str) -> dict[str, Any]:
    """Read a baseline `plan.json` of `stack`. Raises `BlueprintError` if it is missing, not a preview report, or a
    report of another stack."""
    text = read_text_file(path, BlueprintError, "baseline report")
    try:
        data = load_json(text)
    except json.JSONDecodeError as exc:
        raise BlueprintError(f"{path}: baseline is not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, dict) or not isinstance(data.get("resources"), list):
        raise BlueprintError(f"{path}: not a preview report; pass a plan.json written by `blueprint preview --out`")
    if data.get("stack") != stack:
        raise BlueprintError(f"{path}: baseline is a report of stack {data.get('stack')!r}, not {stack!r}; pass the "
                             f"base branch's plan.json of {stack}")
    return data
