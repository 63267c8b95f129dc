"""`blueprint plan --check` (on top of `blueprints.workspace`): the committed stack configs against what their requirements plan.

Stack configs are generated: each records the requirements file it was planned from and the plan date
(`servingblueprints:planned`). The check re-plans every requirements file into memory as of that date, over the
committed configs (whose hardware a re-plan keeps within the switch threshold, as `blueprint plan` does), renders each
stack config as `blueprint plan` would write it, and compares field by field. Any difference is a hand edit (or a
requirements change nobody re-planned): each is named with the requirements field to change instead. An intended
deviation from the plan lives in the requirements' `overrides:` section, never only in a generated file.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from blueprints.core.errors import StackConfigError, excerpt
from blueprints.core.project import ProjectPaths, project_relative
from blueprints.core.yamlio import load_yaml
from blueprints.contracts.platform import PlatformConfig
from blueprints.contracts.stackconfig import (
    BLUEPRINT_KEY, PLAN_KEY, PLATFORM_KEY, plan_record_of, render_stack_config, stack_config_entries,
    stack_config_path,
)
from blueprints.requirements.overrides import DERIVED, source_field
from blueprints.review.diff import flatten

#: Platform config field prefixes -> the platform.yaml key that decides them (`{name}`: the platform's name).
PLATFORM_SOURCES: tuple[tuple[str, str], ...] = (
    ("network.private_endpoint", "platforms.{name}.private_endpoint"),
    ("network.public_access_cidrs", "platforms.{name}.public_access_cidrs"),
    ("network.vpc_cidr", "platforms.{name}.vpc_cidr"),
    ("network.service_cidr", "platforms.{name}.service_cidr (default: EKS's choice for vpc_cidr)"),
    ("network.existing_vpc", "platforms.{name}.existing_vpc"),
    ("secrets_kms", "platforms.{name}.secrets_kms"),
    ("audit_logging", "platforms.{name}.audit_logging"),
    ("audit_log_retention_days", "platforms.{name}.audit_log_retention_days"),
    ("kubernetes_version", "kubernetes_version"),
    ("system_nodes", "system_nodes"),
    ("addons", "addon_versions (and the services landing there)"),
    ("spot_allowed", "spot"),
    ("access", "access"),
    ("runner_label", "platforms.{name}.runner_label"),
    ("alerting", "alerting, platforms.{name}.alerting"),
    ("tags", "owner, cost_center"),
    ("services", "the services' environments.<env>.platform"),
)


@dataclass(frozen=True)
class Drift:
    """One difference between a committed stack config and its plan.

    Attributes:
        stack: the stack.
        field: the config path that differs (`servingblueprints:blueprint.network.exposure.allowed_cidrs`), or
            `(file)` for a stack config that is missing or that no requirements file plans.
        committed: the committed value (None: absent).
        planned: what the requirements plan (None: absent).
        fix: what to change instead, in which file.
    """

    stack: str
    field: str
    committed: Any
    planned: Any
    fix: str

    def message(self) -> str:
        return (f"{self.stack}: {self.field} is {excerpt(json.dumps(self.committed))} but the plan gives "
                f"{excerpt(json.dumps(self.planned))}; {self.fix}")

    def to_json(self) -> dict[str, Any]:
        return {"stack": self.stack, "field": self.field, "committed": self.committed, "planned": self.planned,
                "fix": self.fix}


def _source_field(key: str, path: str, *, env: str | None = None, platform: str | None = None) -> str:
    """The requirements (or platform.yaml) field behind one field of a stack config's `key` value."""
    if key != PLATFORM_KEY:
        return source_field(path, env=env)
    for prefix, where in PLATFORM_SOURCES:
        if path == prefix or path.startswith((prefix + ".", prefix + "[")):
            return where.format(name=platform or "<name>")
    return DERIVED


def _fix(field: str, *, source: str, env: str | None, platform: str | None) -> str:
    key, _, path = field.partition(".")
    if key in (BLUEPRINT_KEY, PLATFORM_KEY) and path:
        where = _source_field(key, path, env=env, platform=platform)
        if where == DERIVED:
            return (f"a hand edit of a generated file: {where}; re-plan {source}, and put an intended value in its "
                    "`overrides:` section with the reason")
        return f"a hand edit of a generated file: change {where} in {source} instead and re-plan"
    return f"a hand edit of a generated file: re-plan with `blueprint plan` ({source})"


def compare(stack: str, committed: dict, planned: dict, *, source: str, env: str | None = None,
            platform: str | None = None) -> list[Drift]:
    """Every leaf field where a committed stack file's settings differ from what the plan renders (comments and
    formatting aside), each with the requirements field to change instead."""
    before, after = flatten(committed), flatten(planned)
    return [Drift(stack, field.removeprefix("config."), before.get(field), after.get(field),
                  _fix(field.removeprefix("config."), source=source, env=env, platform=platform))
            for field in sorted(set(before) | set(after)) if before.get(field) != after.get(field)]


def _committed(path: Path) -> dict:
    try:
        text = path.read_text(encoding="utf-8")
        data = load_yaml(text)
    except Exception as exc:  # noqa: BLE001 - any unreadable file is reported as such
        raise StackConfigError(f"{path}: cannot be read as YAML ({exc})") from None
    if not isinstance(data, dict):
        raise StackConfigError(f"{path}: not a Pulumi stack settings file")
    stack_config_entries(data, path, text)  # keys `pulumi up` reads otherwise than the plan wrote them: exit 2, named
    return data


def _date(path: Path, data: dict) -> dt.date:
    record = plan_record_of(data.get("config") or {}, source=str(path))
    if record is None:
        raise StackConfigError(f"{path}: records no plan ({PLAN_KEY}: requirements file and plan date), so it "
                               "cannot be re-planned as it was; re-plan it with `blueprint plan <requirements> "
                               "--as-of <date>`")
    return record.as_of


def check_plans(files: list[Path] | None, project: ProjectPaths, *, use_policy: bool = True) -> list[Drift]:
    """Re-plan `files` (default: every requirements file of the project) into memory and compare with the committed
    stack configs, each stack as of its recorded plan date.

    Args:
        files: requirements files in the project's requirements folder; None checks all of them, every platform,
            and that no committed stack config is left that no requirements file plans.
        project: the project's paths (stack configs, requirements folder, policy configs).
        use_policy: plan within the policy configs' guardrails (as `blueprint plan` does without `--no-policy`).

    Returns:
        Every difference, by stack and field; empty when the committed configs are what the requirements plan.

    Raises:
        BlueprintError: a requirements file or committed stack config cannot be read or planned (exit 2).
    """
    from blueprints.catalog import load_catalog
    from blueprints.plan.compound.parts import service_parts
    from blueprints.requirements.service import load_requirements
    from blueprints.requirements.folder import requirements_files
    from blueprints.workspace import plan_requirements_file

    stacks_dir, folder = project.stacks_dir, project.requirements_dir
    policy_dir = project.policy_dir if use_policy else None
    checking_all = files is None
    files = requirements_files(folder) if files is None else files
    drifts: list[Drift] = []
    planned_stacks: set[str] = set()
    landed: set[str] = set()
    for path in files:
        source = project_relative(path)
        req = load_requirements(path)
        dates: dict[dt.date, list[str]] = {}
        for part in service_parts(req, load_catalog()):
            for env in req.environments:
                stack = f"{part.requirements.service}-{env}"
                planned_stacks.add(stack)
                config = stack_config_path(stacks_dir, stack)
                if not config.exists():
                    drifts.append(Drift(stack, "(file)", None, str(config), f"not planned yet: run `blueprint plan "
                                        f"{source}` and commit {config}"))
                    continue
                envs = dates.setdefault(_date(config, _committed(config)), [])
                if env not in envs:
                    envs.append(env)
        for as_of, envs in sorted(dates.items()):
            planned = plan_requirements_file(path, as_of=as_of, environments=envs, policy_dir=policy_dir,
                                             use_policy=use_policy, requirements_dir=folder, stacks_dir=stacks_dir)
            for bp in planned.blueprints:
                config = stack_config_path(stacks_dir, bp.stack)
                if not config.exists():
                    continue
                data = _committed(config)
                if _date(config, data) != as_of:
                    continue
                text = render_stack_config(bp, source=source, existing=data, as_of=as_of,
                                           cluster_addons=planned.cluster_addons.get(bp.stack))
                drifts += compare(bp.stack, data, load_yaml(text), source=source, env=bp.environment)
                if bp.platform.stack:
                    landed.add(bp.platform.stack)
    drifts += _check_platforms(project, landed if not checking_all else None, policy_dir=policy_dir)
    if checking_all:
        for config in sorted(stacks_dir.glob("Pulumi.*.yaml")):
            stack = config.name[len("Pulumi."):-len(".yaml")]
            data = _committed(config)
            if BLUEPRINT_KEY in (data.get("config") or {}) and stack not in planned_stacks:
                drifts.append(Drift(stack, "(file)", str(config), None, f"no requirements file in "
                                    f"{project_relative(folder)} plans {stack}: delete {config} (its stack is "
                                    "destroyed on merge) or restore its requirements"))
    return drifts


def _check_platforms(project: ProjectPaths, stacks: set[str] | None, *, policy_dir: Path | None) -> list[Drift]:
    """The committed platform configs (those in `stacks`, else all) against the platform set each one's plan date
    gives; with `stacks` None also every planned platform without a committed config, and every committed one no
    service lands on."""
    from blueprints.workspace import plan_platform_set

    stacks_dir, folder = project.stacks_dir, project.requirements_dir
    source = project_relative(folder)
    committed: dict[str, tuple[Path, dict]] = {}
    for config in sorted(stacks_dir.glob("Pulumi.platform-*.yaml")):
        data = _committed(config)
        if PLATFORM_KEY in (data.get("config") or {}):
            committed[config.name[len("Pulumi."):-len(".yaml")]] = (config, data)
    wanted = set(committed) if stacks is None else stacks
    by_date: dict[dt.date, dict[str, PlatformConfig]] = {}
    drifts: list[Drift] = []
    for stack in sorted(wanted):
        if stack not in committed:
            drifts.append(Drift(stack, "(file)", None, str(stack_config_path(stacks_dir, stack)),
                                "not planned yet: plan any service landing on it and commit the file"))
            continue
        config, data = committed[stack]
        as_of = _date(config, data)
        if as_of not in by_date:
            by_date[as_of] = {p.stack: p for p in plan_platform_set(folder, as_of=as_of, policy_dir=policy_dir)}
        platform = by_date[as_of].get(stack)
        if platform is None:
            drifts.append(Drift(stack, "(file)", str(config), None, f"no service in {source} lands on {stack} any "
                                f"more: delete {config} (its stack is destroyed on merge)"))
            continue
        text = render_stack_config(platform, source=source, existing=data, as_of=as_of)
        drifts += compare(stack, data, load_yaml(text), source=f"{source}/platform.yaml", platform=platform.name)
    return drifts
