"""`blueprint plan --check` and `blueprint preview`'s source comparison (on top of `blueprints.workspace`): the
committed stack configs against what their requirements plan.

Stack configs are generated: each records the requirements file it was planned from, the plan date and the digest of
the values the plan wrote (`servingblueprints:planned`). The check re-plans the requirements files into memory as of
that date, over the committed configs (whose hardware a re-plan keeps within the switch threshold, as `blueprint plan`
does), renders each stack config as `blueprint plan` would write it, and compares field by field. A difference is a
*hand edit* when the committed values no longer match their recorded digest (someone changed the generated file), else
*stale*: the file is what the plan wrote, but an input changed since (the requirements file, another service's plan,
the platform file, the policy config, the tool): re-plan it. Each names the requirements field to change instead, and
shows the differing words. An intended deviation from the plan lives in the requirements' `overrides:` section, never
only in a generated file.

Pilot stack configs (`Pulumi.<service>-pilot-<k>.yaml`, `blueprint pilot`) are not a plan's output: their hardware is
a finalist's, not the plan's choice, and they live for hours. The check does not re-plan them and does not report them
as files no requirements file plans while their service's requirements file exists (without it they are reported as
such, to delete); `blueprint preview` reviews them like any stack (policy, deployability, signals).
"""

from __future__ import annotations

import datetime as dt
import difflib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from blueprints.core.errors import StackConfigError, read_text_file
from blueprints.core.project import ProjectPaths, project_relative, project_root
from blueprints.core.yamlio import load_yaml
from blueprints.contracts.platform import PlatformConfig
from blueprints.contracts.stackconfig import (
    BLUEPRINT_KEY, PLAN_KEY, PLATFORM_KEY, plan_digest, plan_record_of, render_stack_config, stack_config_entries,
    stack_config_path,
)
from blueprints.requirements.overrides import DERIVED, OVERRIDABLE, source_field
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


#: Why a stack config differs from its plan (`Drift.cause`): its planned values were edited after the plan wrote them;
#: they were not, but an input changed since; the file records no digest to tell; the file itself is missing or
#: planned by nothing.
CAUSES = ("hand edit", "stale", "unknown", "file")
#: Values up to this many characters (as JSON) are shown whole; longer ones by their differing words.
SHORT_VALUE_CHARS = 40
#: Unchanged words kept on each side of a change in a word diff.
WORD_CONTEXT = 4
#: A changed run of words longer than this many characters is cut.
MAX_CHANGED_CHARS = 160


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
        cause: one of `CAUSES`.
    """

    stack: str
    field: str
    committed: Any
    planned: Any
    fix: str
    cause: str = "file"

    def message(self) -> str:
        if self.field == "(file)":
            return f"{self.stack}: {self.fix}"
        return f"{self.stack}: {self.field} {describe_difference(self.committed, self.planned)}; {self.fix}"

    def to_json(self) -> dict[str, Any]:
        return {"stack": self.stack, "field": self.field, "committed": self.committed, "planned": self.planned,
                "cause": self.cause, "words": word_diff(_text(self.committed), _text(self.planned)),
                "fix": self.fix}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _clip(words: list[str]) -> str:
    text = " ".join(words)
    return text if len(text) <= MAX_CHANGED_CHARS else f"{text[:MAX_CHANGED_CHARS]}... ({len(text):,} characters)"


def word_diff(before: str, after: str, *, context: int = WORD_CONTEXT) -> str:
    """The words that differ between two texts, as `git diff --word-diff=plain` shows them: `[-removed-]{+added+}`,
    with up to `context` unchanged words either side of each change and `...` for the unchanged words left out.

    `word_diff("shared by 5 stacks in us-east-1", "shared by 6 stacks in us-east-1")` ->
    `shared by [-5-]{+6+} stacks in us-east-1`.
    """
    a, b = before.split(), after.split()
    if a == b:
        return "" if before == after else f"(only the whitespace differs: {json.dumps(before)} -> {json.dumps(after)})"
    opcodes = difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes()
    parts: list[str] = []
    for n, (tag, i1, i2, j1, j2) in enumerate(opcodes):
        if tag == "equal":
            words = a[i1:i2]
            head = words[:context] if n > 0 else []
            tail = words[-context:] if n < len(opcodes) - 1 else []
            if len(head) + len(tail) >= len(words):
                parts += words
            else:
                parts += [*head, "...", *tail]
            continue
        parts.append((f"[-{_clip(a[i1:i2])}-]" if i2 > i1 else "") + (f"{{+{_clip(b[j1:j2])}+}}" if j2 > j1 else ""))
    return " ".join(parts).strip()


def describe_difference(committed: Any, planned: Any) -> str:
    """`is <committed> but the plan gives <planned>` for short values and an absent side (None), else the differing
    words (`word_diff`)."""
    a, b = json.dumps(committed, ensure_ascii=False), json.dumps(planned, ensure_ascii=False)
    if len(a) <= SHORT_VALUE_CHARS and len(b) <= SHORT_VALUE_CHARS:
        return f"is {a} but the plan gives {b}"
    if committed is None or planned is None:
        return f"is {_clip([a])} but the plan gives {_clip([b])}"
    return f"differs from the plan in these words: {word_diff(_text(committed), _text(planned))}"


def _source_field(key: str, path: str, *, env: str | None = None, platform: str | None = None,
                  batch: bool = False) -> str:
    """The requirements (or platform.yaml) field behind one field of a stack config's `key` value (`batch`: a batch
    service's blueprint)."""
    if key != PLATFORM_KEY:
        return source_field(path, env=env, batch=batch)
    for prefix, where in PLATFORM_SOURCES:
        if path == prefix or path.startswith((prefix + ".", prefix + "[")):
            return where.format(name=platform or "<name>")
    return DERIVED


def _fix(field: str, *, source: str, cause: str, env: str | None, platform: str | None, batch: bool = False) -> str:
    if cause == "stale":
        replan = f"a service landing on {platform} (`blueprint plan <its requirements file>`)" if platform else source
        return (f"stale: re-plan {replan} (the file is what its plan wrote; an input changed since: its requirements "
                "file, another service's plan, the platform file, the policy config or the tool)")
    why = ("hand edit (its planned values no longer match the digest its plan recorded)" if cause == "hand edit" else
           f"a hand edit or stale (the file records no digest of its planned values, {PLAN_KEY}.digest)")
    key, _, path = field.partition(".")
    if key in (BLUEPRINT_KEY, PLATFORM_KEY) and path:
        where = _source_field(key, path, env=env, platform=platform, batch=batch)
        if where == DERIVED and key == BLUEPRINT_KEY and path in OVERRIDABLE:
            return (f"{why}: {where}; re-plan {source}, and put an intended value in its `overrides:` section with the "
                    "reason")
        if where == DERIVED:  # a prediction or another figure no requirement sets: only a re-plan changes it
            return f"{why}: {where}; re-plan {source}"
        return f"{why}: change {where} in {source} instead and re-plan"
    return f"{why}: re-plan with `blueprint plan` ({source})"


def _cause(committed: dict) -> str:
    """`hand edit` when a committed stack config's planned values differ from the digest its plan recorded, `stale`
    when they match it, `unknown` when it records none."""
    config = committed.get("config") or {}
    record = config.get(PLAN_KEY)
    digest = record.get("digest") if isinstance(record, dict) else None
    if digest is None:
        return "unknown"
    return "stale" if plan_digest(config) == digest else "hand edit"


def _scalars(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and not any(isinstance(v, (dict, list)) for v in value)


def differences(before: Any, after: Any, prefix: str = "") -> list[tuple[str, Any, Any]]:
    """`(field, before, after)` for every leaf that differs (fields as `blueprints.review.diff.flatten` names them;
    None: absent). Two lists of scalars (a rationale, CIDRs) are aligned by content (`difflib.SequenceMatcher`), so
    one inserted or removed line is one difference, not every later line shifted by one index."""
    if before == after:
        return []
    if isinstance(before, dict) and isinstance(after, dict) and before and after:
        found = []
        for key in sorted(set(before) | set(after), key=str):
            path = f"{prefix}.{key}" if prefix else str(key)
            if key not in before:
                found += [(f, None, v) for f, v in flatten(after[key], path).items()]
            elif key not in after:
                found += [(f, v, None) for f, v in flatten(before[key], path).items()]
            else:
                found += differences(before[key], after[key], path)
        return found
    if _scalars(before) and _scalars(after):
        found = []
        matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                continue
            for n in range(max(i2 - i1, j2 - j1)):
                i, j = i1 + n, j1 + n
                found.append((f"{prefix}[{i if i < i2 else j}]", before[i] if i < i2 else None,
                              after[j] if j < j2 else None))
        return found
    old, new = flatten(before, prefix), flatten(after, prefix)
    return [(f, old.get(f), new.get(f)) for f in sorted(set(old) | set(new)) if old.get(f) != new.get(f)]


def compare(stack: str, committed: dict, planned: dict, *, source: str, env: str | None = None,
            platform: str | None = None) -> list[Drift]:
    """Every leaf field where a committed stack file's settings differ from what the plan renders (comments and
    formatting aside; lists of scalars aligned by content, `differences`), each with its cause (`CAUSES`) and the
    requirements field to change instead."""
    cause = _cause(committed)
    batch = isinstance(blueprint := (planned.get("config") or {}).get(BLUEPRINT_KEY), dict) and "batch" in blueprint
    digest = f"config.{PLAN_KEY}.digest"
    found = sorted((d for d in differences(committed, planned)
                    # the digests differ exactly when another planned value does: that one is shown
                    if not (d[0] == digest and cause != "unknown")), key=lambda d: d[0])
    return [Drift(stack, field.removeprefix("config."), before, after,
                  _fix(field.removeprefix("config."), source=source, cause=cause, env=env, platform=platform,
                       batch=batch), cause)
            for field, before, after in found]


def _committed(path: Path) -> dict:
    try:
        text = read_text_file(path, StackConfigError, "stack config")
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


def check_plans(files: list[Path] | None, project: ProjectPaths, *, use_policy: bool = True,
                only: set[str] | None = None) -> list[Drift]:
    """Re-plan `files` (default: every requirements file of the project) into memory and compare with the committed
    stack configs, each stack as of its recorded plan date.

    Args:
        files: requirements files in the project's requirements folder; None checks all of them, every platform,
            and that no committed stack config is left that no requirements file plans.
        project: the project's paths (stack configs, requirements folder, policy configs).
        use_policy: plan within the policy configs' guardrails (as `blueprint plan` does without `--no-policy`).
        only: compare these stacks alone (services `files` plan, platforms), planned exactly as for all; None: every
            stack `files` plan and the platforms they land on.

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
    services: set[str] = set()
    landed: set[str] = set()
    for path in files:
        source = project_relative(path)
        req = load_requirements(path)
        services.add(req.service)
        dates: dict[dt.date, list[str]] = {}
        for part in service_parts(req, load_catalog()):
            for env in req.environments:
                stack = f"{part.requirements.service}-{env}"
                planned_stacks.add(stack)
                config = stack_config_path(stacks_dir, stack)
                if not config.exists():
                    if only is not None and stack not in only:
                        continue
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
                if not config.exists() or (only is not None and bp.stack not in only):
                    continue
                data = _committed(config)
                if _date(config, data) != as_of:
                    continue
                text = render_stack_config(bp, source=source, existing=data, as_of=as_of,
                                           cluster_addons=planned.cluster_addons.get(bp.stack))
                drifts += compare(bp.stack, data, load_yaml(text), source=source, env=bp.environment)
                if bp.platform.stack:
                    landed.add(bp.platform.stack)
    if only is not None:
        landed = {s for s in only if PLATFORM_KEY in (_committed(stack_config_path(stacks_dir, s)).get("config") or {})}
    drifts += _check_platforms(project, landed if not checking_all else None, policy_dir=policy_dir)
    if checking_all and only is None:
        for config in sorted(stacks_dir.glob("Pulumi.*.yaml")):
            stack = config.name[len("Pulumi."):-len(".yaml")]
            data = _committed(config)
            if _pilot_of(data) in services:  # written by `blueprint pilot`, not by a plan: not re-planned
                continue
            if BLUEPRINT_KEY in (data.get("config") or {}) and stack not in planned_stacks:
                drifts.append(Drift(stack, "(file)", str(config), None, f"no requirements file in "
                                    f"{project_relative(folder)} plans {stack}: delete {config} (its stack is "
                                    "destroyed on merge) or restore its requirements"))
    return drifts


def _pilot_of(data: dict) -> str | None:
    """The service a pilot stack config (`blueprint pilot`: its blueprint has `pilot`) belongs to; None otherwise."""
    value = (data.get("config") or {}).get(BLUEPRINT_KEY)
    if isinstance(value, dict) and isinstance(value.get("pilot"), dict) and isinstance(value.get("service"), str):
        return value["service"]
    return None


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


def check_stacks(stacks: list[str], project: ProjectPaths, *,
                 use_policy: bool = True) -> tuple[list[Drift], str | None]:
    """`check_plans` for the stacks one `blueprint preview` reviews (a service stack, a compound service's part
    stacks, or a platform stack): the same re-plan and comparison as `blueprint plan --check`, so an edit fails both
    or neither.

    The requirements file each stack's plan record names is looked up in `project.requirements_dir` (a platform's:
    the folder itself).

    Returns:
        The differences, and None; or no differences and why the comparison was skipped (stack configs outside any
        project, a stack config that records no plan, or a requirements folder or file that is not there: a stack
        config reviewed alone).

    Raises:
        BlueprintError: a stack config, requirements file or policy config cannot be read or planned (exit 2).
    """
    folder = project.requirements_dir
    if project_root(project.stacks_dir) is None:
        return [], (f"{project.stacks_dir} is in no project (no Pulumi.yaml at or above it), and a plan record's "
                    "paths are relative to one; `blueprint plan --check` in the project compares it")
    files: set[Path] = set()
    for stack in stacks:
        config = stack_config_path(project.stacks_dir, stack)
        committed = _committed(config)
        if _pilot_of(committed) is not None:
            return [], (f"{config} is a pilot stack (`blueprint pilot`): not a plan's output, so `blueprint plan "
                        "--check` does not re-plan it")
        data = committed.get("config") or {}
        record = plan_record_of(data, source=str(config))
        if record is None:
            return [], f"{config} records no plan ({PLAN_KEY}), so there is nothing to re-plan it from"
        named = folder if PLATFORM_KEY in data else folder / Path(record.requirements).name
        if not folder.is_dir() or not named.exists():
            return [], (f"{PLAN_KEY}.requirements of {config} names {record.requirements}, but {named} is not there "
                        "(a stack config reviewed without its requirements folder); `blueprint plan --check` in the "
                        "project compares it")
        if PLATFORM_KEY not in data:
            files.add(named)
    return check_plans(sorted(files), project, use_policy=use_policy, only=set(stacks)), None
