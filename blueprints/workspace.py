"""Planning a requirements file in its project: the other services' files and `platform.yaml` beside it, the
policy configs of the project root, and the stack configs it writes (its services' and its platforms').

`blueprint plan` is a thin shell over `plan_requirements_file`; the test that keeps the committed stack configs
current calls the same function.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from blueprints.core import defaults
from blueprints.contracts.blueprint import Blueprint
from blueprints.catalog import Catalog, load_catalog
from blueprints.catalog.addons import load_platform_catalog
from blueprints.core.errors import BlueprintError, RequirementsError
from blueprints.requirements.platform_file import PLATFORM_FILE, load_platform_requirements
from blueprints.contracts.platform import PlatformConfig
from blueprints.plan.platforms import ServiceFile, plan_platforms
from blueprints.requirements.choice import Choice
from blueprints.requirements.service import Requirements, load_requirements
from blueprints.plan.stability import Hardware, hardware_of
from blueprints.plan.choice import REOPENED, chosen_hardware, chosen_rps
from blueprints.contracts.stackconfig import recorded_blueprint, recorded_platform, stack_config_path
from blueprints.core.project import project_paths, project_relative
from blueprints.requirements.folder import PLATFORM_FILES, requirements_files
from blueprints.contracts.calibration_file import Calibrations, calibration_dir, load_calibrations

def default_policy_dir(requirements: Path) -> Path | None:
    """`<project root>/policies/config`, the root found from the requirements file, else the working directory."""
    paths = project_paths(requirements)
    return paths.policy_dir if paths.root else None


@dataclass(frozen=True)
class PlannedFile:
    """What planning one requirements file gives: its services' blueprints and the platforms they land on."""

    blueprints: list[Blueprint]
    platforms: list[PlatformConfig]
    cluster_addons: dict[str, list[str]]
    warnings: tuple[str, ...] = ()

    @property
    def subjects(self) -> list[Blueprint | PlatformConfig]:
        """Everything to write: the platforms first, then the services (deploy order)."""
        return [*self.platforms, *self.blueprints]


def plan_platform_set(folder: Path, *, as_of: dt.date, policy_dir: Path | None = None,
                      planning: Path | None = None) -> list[PlatformConfig]:
    """Every platform the requirements files of `folder` land on, from `folder/platform.yaml` and all of them, each
    within its environment's policy config in `policy_dir` (none without). `planning`, the file being planned, is
    refused where a platform's posture does not meet its compliance; other such files are left off that platform
    (`blueprints.plan.platforms.plan_platforms`).

    Raises:
        BlueprintError: a requirements file or the platform file is invalid (the message names it) or conflicts
            (e.g. two files declare the same service).
    """
    catalog = load_catalog()
    services = []
    files = requirements_files(folder) if folder.is_dir() else []
    for path in files:
        try:
            services.append(ServiceFile(path, load_requirements(path)))
        except BlueprintError as exc:
            raise type(exc)(f"{exc}\n(every requirements file in {folder} shapes the shared platforms; fix or move "
                            "this one)") from None
    platform_file = folder / PLATFORM_FILE
    policy_for = None
    if policy_dir is not None:
        from blueprints.review.stack import policy_guardrails

        def policy_for(environment: str, production: bool):
            return policy_guardrails(environment, production=production, config_dir=policy_dir)

    return plan_platforms(services, load_platform_requirements(platform_file), catalog=catalog,
                          pcat=load_platform_catalog(), as_of=as_of, platform_file=project_relative(platform_file),
                          policy_for=policy_for, complete=folder.is_dir(), planning=planning)


def plan_requirements_file(path: Path, *, as_of: dt.date, environments: list[str] | None = None,
                           policy_dir: Path | None, use_policy: bool = True,
                           requirements_dir: Path | None = None, stacks_dir: Path | None = None,
                           switch_threshold_pct: float = defaults.SWITCH_THRESHOLD_PCT,
                           calibrations: Calibrations | None = None) -> PlannedFile:
    """Plan one requirements file within its project.

    Args:
        path: the service's requirements file.
        as_of: the plan date.
        environments: the environments to plan (all when omitted).
        policy_dir: folder of per-environment policy configs; each environment is planned within its guardrails.
        use_policy: False plans without guardrails (`--no-policy`).
        requirements_dir: the project's requirements folder, whose files (and `platform.yaml`) shape the platforms
            with this one; defaults to the file's own folder. A file outside it is refused (it would land on a
            platform that the next plan of another service, which reads the folder only, drops it from).
        stacks_dir: the stack config folder the plan is written to: the hardware of an existing
            `Pulumi.<service>-<env>.yaml` there is kept while within `switch_threshold_pct` % of the cheapest
            (`blueprints.plan.stability`). None plans afresh.
        switch_threshold_pct: that tolerance, % (0-100).
        calibrations: the capacity model's corrections; defaults to the project's (`project_calibrations`).

    Returns:
        The service's blueprints, the platforms its planned environments land on (and those its stacks left, whose
        stack configs still list them), and the clusterAddons of its existing-cluster stacks.

    Raises:
        RequirementsError: `path` is outside `requirements_dir` (rule requirements-in-folder), or invalid.
        BlueprintError: invalid input anywhere it depends on; the message names the file, the field and the fix.
    """
    inputs = planning_inputs(path, as_of=as_of, policy_dir=policy_dir, use_policy=use_policy,
                             requirements_dir=requirements_dir, stacks_dir=stacks_dir)
    req, platforms = inputs.requirements, inputs.platforms
    existing = existing_hardware(req, stacks_dir) if stacks_dir is not None else {}
    pinned, why = chosen_hardware(req)
    if pinned is not None and req.choice is not None:
        changed = changed_evidence(req.choice, project_paths(path).root)
        if changed is not None:
            pinned, why = None, f"{REOPENED}: {changed}"
    warnings = [why] if pinned is None and why is not None else []

    def planned(pin: Hardware | None) -> list[Blueprint]:
        return remembered_plan(req, as_of=as_of, environments=environments, guardrails=inputs.guardrails,
                               platforms=platforms, alerting=inputs.alerting, existing=existing,
                               switch_threshold_pct=switch_threshold_pct, pinned=pin, pinned_by=why if pin else None,
                               pinned_rps=chosen_rps(req.choice) if pin and req.choice else None,
                               calibrations=calibrations if calibrations is not None
                               else project_calibrations(path))

    try:
        try:
            blueprints = planned(pinned)
        except BlueprintError as exc:
            if pinned is None:
                raise
            # the chosen candidate cannot serve now (an environment's policy, the SLO, the budget): re-opened
            warnings.append(f"{REOPENED}: {exc}; this plan chooses as if there were no choice")
            blueprints = planned(None)
    except BlueprintError as exc:  # planner messages name the field; add the file they come from
        raise type(exc)(f"{path}: {exc}") from None
    landed = {bp.platform.stack for bp in blueprints if bp.platform.stack}
    # A platform one of these stacks left (a Region or platform move) is rewritten too: its stack config still lists
    # the stack among its services, which only this plan knows it no longer serves.
    ours = {bp.stack for bp in blueprints}
    left = {p.stack for p in platforms.values() if p.stack not in landed and stacks_dir is not None
            and (old := recorded_platform(stack_config_path(stacks_dir, p.stack))) is not None
            and ours & set(old.services)}
    addons = req.operations.declared_addons
    return PlannedFile(
        blueprints=blueprints, platforms=[p for p in platforms.values() if p.stack in landed | left],
        cluster_addons={bp.stack: list(addons) for bp in blueprints
                        if addons is not None and bp.platform.kind in ("existing-cluster", "edge-cluster")},
        warnings=tuple(f"{path}: {w}" for w in warnings))


def changed_evidence(choice: Choice, root: Path | None) -> str | None:
    """Why the result files a `choice` was made from no longer hold its evidence (one is missing from the project, or
    its bytes no longer have the sha256 recorded), naming the field; None when every one is as chosen, or outside a
    project (nothing to read them against)."""
    if root is None:
        return None
    for i, finalist in enumerate(choice.finalists):
        for j, result in enumerate(finalist.results):
            where, file = f"choice.finalists[{i}].results[{j}]", root / result.file
            if not file.is_file():
                return (f"{where}.file: {result.file} is not in the project: the evidence of the choice of "
                        f"{choice.decided} is gone; commit the result files with the choice, or choose again")
            if hashlib.sha256(file.read_bytes()).hexdigest() != result.sha256:
                return (f"{where}.sha256: {result.file} changed since the choice of {choice.decided} was made from "
                        "it; restore it, or choose again from the results as they are")
    return None


#: Plans remembered in this process (`remembered_plan`); beyond this many the memo starts again.
PLANS_REMEMBERED = 64
_plans: dict[str, tuple[Catalog, list[Blueprint]]] = {}


def remembered_plan(req: Requirements, **inputs: Any) -> list[Blueprint]:
    """`blueprints.plan.planner.plan(req, load_catalog(), **inputs)`, remembered in this process by the content of
    everything it reads: the requirements and every input as JSON (the catalog, the code and the package data are
    the process's own). A `blueprint plan --check` re-plans every requirements file of the project and a
    `blueprint preview` its stack's, over stack configs that each check reads afresh; inputs unchanged since an
    earlier plan in the process give that plan again (as copies: a caller may change what it gets) instead of
    planning it anew. The planner is pure (it reads no file, clock or environment: tests/test_planner_purity.py), so
    the same inputs plan the same blueprints. A refusal is not remembered.

    Raises:
        BlueprintError: as `plan`.
    """
    from blueprints.plan.planner import plan

    catalog = load_catalog()
    key = hashlib.sha256(json.dumps([req, inputs], default=_as_json, sort_keys=True).encode()).hexdigest()
    found = _plans.get(key)
    if found is None or found[0] is not catalog:
        found = (catalog, plan(req, catalog, **inputs))
        if len(_plans) >= PLANS_REMEMBERED:
            _plans.clear()
        _plans[key] = found
    return [bp.model_copy(deep=True) for bp in found[1]]


def forget_plans() -> None:
    """Forget the plans `remembered_plan` holds (the next plan of any inputs runs the planner)."""
    _plans.clear()


def _as_json(value: Any) -> Any:
    """A planning input JSON cannot write itself, as JSON tagged with its type: pydantic models (their JSON dump),
    dataclasses (their fields), enums, dates, sets (sorted)."""
    if isinstance(value, BaseModel):
        return {"type": type(value).__qualname__, "fields": value.model_dump(mode="json")}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"type": type(value).__qualname__,
                "fields": {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}}
    if isinstance(value, Enum):
        return {"type": type(value).__qualname__, "value": value.value}
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    raise TypeError(f"no JSON form for a planning input of type {type(value).__qualname__}")


@dataclass(frozen=True)
class PlanningInputs:
    """What planning a requirements file reads besides it: each environment's guardrails (with the account's other
    stacks' GPUs), the platforms of its folder, platform.yaml's alerting."""

    requirements: Requirements
    guardrails: dict
    platforms: dict[str, PlatformConfig]
    alerting: object


def planning_inputs(path: Path, *, as_of: dt.date, policy_dir: Path | None, use_policy: bool = True,
                    requirements_dir: Path | None = None, stacks_dir: Path | None = None) -> PlanningInputs:
    """The requirements file and what its plan reads in its project (`plan_requirements_file`'s Args).

    Raises:
        RequirementsError: `path` is the platform file, outside `requirements_dir`, or invalid.
        BlueprintError: no policy folder while `use_policy`, or invalid input it depends on.
    """
    from blueprints.review.stack import environment_guardrails

    if path.name in PLATFORM_FILES:
        raise RequirementsError(f"{path}: this is the platform team's file; plan a service's requirements file (the "
                                "platform stacks are written with every service that lands on them)")
    req = load_requirements(path)
    folder = requirements_dir if requirements_dir is not None else path.parent
    if path.resolve().parent != folder.resolve():
        raise RequirementsError(f"{path}: a requirements file lives in the requirements folder "
                                f"{project_relative(folder)} (every file there shapes the shared platforms, so a file "
                                "elsewhere would land on a platform the next plan of another service drops it from); "
                                f"move it into {project_relative(folder)} and plan it there",
                                rule="requirements-in-folder")
    limits = {}
    if use_policy:
        if policy_dir is None or not policy_dir.is_dir():
            raise BlueprintError(f"--policy-dir {policy_dir or '(none found)'}: no policy config folder; every "
                                 "environment is planned within its policy config's guardrails. Run from the project "
                                 "(the folder holding Pulumi.yaml), pass --policy-dir, or plan without guardrails with "
                                 "--no-policy")
        limits = environment_guardrails(req, policy_dir)
        if stacks_dir is not None:  # quotas are per account and Region: the account's other stacks count
            from blueprints.review.account import with_account_gpus

            limits = with_account_gpus(req, limits, stacks_dir, policy_dir=policy_dir)
    platforms = {p.name: p for p in plan_platform_set(folder, as_of=as_of, planning=path,
                                                      policy_dir=policy_dir if use_policy else None)}
    alerting = load_platform_requirements(folder / PLATFORM_FILE).alerting
    return PlanningInputs(req, limits, platforms, alerting)


def pilot_requirements_file(path: Path, *, now: dt.datetime, env: str | None, finalists: int, hours: int,
                            policy_dir: Path | None, use_policy: bool = True, requirements_dir: Path | None = None,
                            stacks_dir: Path | None = None):
    """`blueprint pilot`: the pilot stacks of a requirements file in its project (`blueprints.plan.pilot.plan_pilots`),
    within its environment's policy and on its platform, as `plan_requirements_file` plans.

    Raises:
        BlueprintError: bad flags or input (the message names the file, the flag or the field).
    """
    from blueprints.plan.pilot import plan_pilots

    inputs = planning_inputs(path, as_of=now.date(), policy_dir=policy_dir, use_policy=use_policy,
                             requirements_dir=requirements_dir, stacks_dir=stacks_dir)
    try:
        return plan_pilots(inputs.requirements, load_catalog(), env=env, count=finalists, hours=hours, now=now,
                           platforms=inputs.platforms, guardrails=inputs.guardrails, alerting=inputs.alerting,
                           calibrations=project_calibrations(path))
    except BlueprintError as exc:
        raise type(exc)(f"{path}: {exc}") from None


def project_calibrations(start: Path) -> Calibrations:
    """The calibrations of the project holding `start` (`<stacks>/calibration/*.yaml`, written by `blueprint
    calibrate`), named relative to its root; none outside a project.

    Raises:
        CalibrationError: a calibration file is invalid (the message names it and the field).
    """
    paths = project_paths(start)
    if paths.root is None:
        return Calibrations()
    return load_calibrations(calibration_dir(paths.stacks_dir), relative_to=paths.root)


def existing_hardware(req: Requirements, stacks_dir: Path) -> dict[str, Hardware]:
    """Per stack the file plans (each part's of a compound service), the hardware its existing stack config in
    `stacks_dir` records (`blueprints.plan.stability.hardware_of`); stacks without one (or whose blueprint records none readable) are
    planned afresh.

    Raises:
        StackConfigError: an existing stack config cannot be read as YAML (it may hold secrets: fix it first).
    """
    from blueprints.plan.compound.parts import service_parts

    found = {}
    for part in service_parts(req, load_catalog()):
        for env in req.environments:
            stack = f"{part.requirements.service}-{env}"
            value = recorded_blueprint(stack_config_path(stacks_dir, stack))
            hardware = hardware_of(value) if value is not None else None
            if hardware is not None:
                found[stack] = hardware
    return found
