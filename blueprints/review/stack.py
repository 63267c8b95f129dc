"""A stack's review: the offline preview plus the policy pack's verdicts, as `blueprint preview` reports it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from blueprints.contracts.blueprint import Blueprint
from blueprints.review.changes import Review, platform_tenants, review_changes
from blueprints.review.diff import PlanDiff
from blueprints.core.errors import BlueprintError, FieldProblem, StackConfigError
from blueprints.contracts.stackconfig import (
    BLUEPRINT_KEY, PLAN_KEY, PLATFORM_KEY, read_config, read_platform_config, read_stack_config, stack_config_path,
)
from blueprints.plan.floors import Floors, stack_floors
from blueprints.plan.guardrails import Guardrails
from blueprints.contracts.platform import PlatformConfig
from blueprints.review.preview import PreviewReport, run_preview
from blueprints.requirements.service import Requirements

#: Per-environment policy configs in the Pulumi policy-config format (the same files `pulumi preview
#: --policy-pack-config` takes).
POLICY_CONFIG_DIR = Path("policies/config")


def policy_config_for(environment: str, *, production: bool, config_dir: Path = POLICY_CONFIG_DIR) -> Path:
    """`<config_dir>/<environment>.json` when it exists, else `prod.json` for production stacks, `dev.json` otherwise."""
    own = config_dir / f"{environment}.json"
    return own if own.exists() else config_dir / ("prod.json" if production else "dev.json")


def policy_guardrails(environment: str, *, production: bool,
                      config_dir: Path = POLICY_CONFIG_DIR) -> Guardrails | None:
    """The planning limits of one environment's policy config (`policy_config_for`), named relative to its project
    (`blueprints.core.project.project_relative`); None when it has none. Raises `BlueprintError` for an invalid policy
    config."""
    from blueprints.core.project import project_relative
    from blueprints.review.policy_pack import guardrails, read_policy_config

    path = policy_config_for(environment, production=production, config_dir=config_dir)
    return guardrails(read_policy_config(path), source=project_relative(path)) if path.exists() else None


def environment_guardrails(req: Requirements, config_dir: Path = POLICY_CONFIG_DIR) -> dict[str, Guardrails]:
    """Each environment's planning limits from its policy config (`policy_guardrails`); none when `config_dir` is
    absent (a project without the policy pack).

    Raises:
        BlueprintError: a policy config is invalid, or `config_dir` has none for an environment (neither
            `<env>.json` nor its fallback): its stacks would be planned without guardrails, then fail their preview.
    """
    if not config_dir.is_dir():
        return {}
    limits = {}
    for env in req.environments:
        found = policy_guardrails(env, production=req.is_production(env), config_dir=config_dir)
        if found is None:
            path = policy_config_for(env, production=req.is_production(env), config_dir=config_dir)
            raise BlueprintError(
                f"{config_dir}: no policy config for environment {env!r}: neither {env}.json nor its fallback "
                f"{path.name} ({'production' if req.is_production(env) else 'non-production'}) exists; add "
                f"{config_dir / (env + '.json')} (e.g. a copy of {path.name} from the project's policies/config), "
                "or plan without guardrails with --no-policy")
        limits[env] = found
    return limits


def review_stack(stack: str, *, stacks_dir: Path = Path("stacks"), program: Path = Path("__main__.py"),
                 policy_config: Path | None = None, policy_dir: Path = POLICY_CONFIG_DIR,
                 baseline: Mapping[str, Any] | None = None) -> PreviewReport:
    """Run the program offline and evaluate every policy of the pack over what it registered.

    Args:
        stack: the stack name.
        stacks_dir: folder of stack configs.
        program: the Pulumi program.
        policy_config: a policy-config JSON file; defaults to `policy_config_for` of the stack's environment in
            `policy_dir` (default `policies/config`).
        baseline: the base branch's report of the stack (`plan.json`): the change must be one a real `pulumi up`
            can make (`blueprints.review.deployability.checks.check_kubernetes_upgrade`).

    Returns:
        The `PreviewReport` with `policy_verdicts` filled in.

    The stack is judged against floors from outside it (`blueprints.plan.floors`): a service against the
    requirements file its stack config names and the environment's policy config, a platform against the
    requirements of every service on it; a stack config below them is refused before the program runs.

    Raises:
        StackConfigError: as `run_preview`; or the stack config is below its floors (each field named), names no
            readable requirements file in the project's requirements folder, or shares a namespace.
        BlueprintError: the policy config is missing, not JSON, or breaks a policy's config schema.
    """
    from blueprints.core.project import project_relative
    from blueprints.review.policy_pack import evaluate_preview, guardrails, read_policy_config

    from blueprints.review.deployability.checks import check_deployability, check_kubernetes_upgrade
    from blueprints.review.signals import bucket_warnings, check_signals

    config_path = stack_config_path(stacks_dir, stack)
    subject = read_config(config_path) if config_path.exists() else None
    floors: list[Floors] = []
    if subject is not None:
        path = policy_config or policy_config_for(subject.environment, production=subject.production,
                                                  config_dir=policy_dir)
        config = read_policy_config(path)
        floors = judge_floors(subject, config_path, stacks_dir=stacks_dir, policy_dir=policy_dir,
                              guardrails=guardrails(config, source=project_relative(path)))
    report = run_preview(stack, stacks_dir=stacks_dir, program=program)
    subject = report.subject
    path = policy_config or policy_config_for(subject.environment, production=subject.production,
                                              config_dir=policy_dir)
    config = read_policy_config(path)
    report.policy_verdicts = evaluate_preview(report, stack_policy_config(config, floors))
    report.deployability = check_deployability(report, stacks_dir=stacks_dir)
    if baseline is not None:
        report.deployability += check_kubernetes_upgrade(report, baseline)
    report.signals = check_signals(report, stacks_dir=stacks_dir)
    report.warnings += bucket_warnings(report, stacks_dir=stacks_dir)
    return report


def stack_policy_config(config: dict, floors: Sequence[Floors]) -> dict:
    """The environment's policy config, tightened by the floors of the stack's requirements (a service's own; a
    platform's: every service on it): private-only (`private-endpoints` privateOnly and `compliance-private-only`),
    customer-managed keys, audit logs, the allowed regions and production, whatever the stack's own compliance
    record says (a hand edit could change that record; it cannot change the requirements file)."""

    def tightened(config: dict, name: str, **values: Any) -> dict:
        entry = config.get(name)
        entry = {"enforcementLevel": entry} if isinstance(entry, str) else dict(entry or {})
        return {**config, name: {**entry, **values}}

    if any(f.private_only for f in floors):
        config = tightened(config, "private-endpoints", privateOnly=True)
        config = tightened(config, "compliance-private-only", privateOnly=True)
    if any(f.customer_managed_kms for f in floors):
        config = tightened(config, "compliance-customer-managed-kms", customerManagedKms=True)
    if any(f.audit_logging for f in floors):
        config = tightened(config, "compliance-audit-logging", auditLogging=True)
    if any(f.production for f in floors):
        config = tightened(config, "compliance-production", production=True)
    regions = [f.regions_allowed for f in floors if f.regions_allowed]
    if len(floors) == 1 and regions:
        config = tightened(config, "compliance-regions", regionsAllowed=list(regions[0]))
    return config


def requirements_of(bp: Blueprint, config_path: Path, *, stacks_dir: Path) -> tuple[Requirements, str]:
    """The requirements a service stack was planned from: the file its plan record names (`servingblueprints:planned`),
    else the file of the requirements folder declaring its service; with its project-relative path.

    Raises:
        StackConfigError: the file is outside the project's requirements folder (`<stacks>/requirements`), missing,
            or does not declare this stack's service and environment; the message names both files and the fix.
    """
    from blueprints.contracts.stackconfig import plan_record_of
    from blueprints.core.project import project_relative, project_root
    from blueprints.core.errors import StackConfigError, read_text_file
    from blueprints.core.yamlio import load_yaml
    from blueprints.requirements.service import load_requirements
    from blueprints.requirements.folder import requirements_files

    service = bp.pipeline.service if bp.pipeline is not None else bp.service
    folder = stacks_dir / "requirements"
    record = plan_record_of((load_yaml(read_text_file(config_path, StackConfigError, "stack config")) or {}).get(
        "config") or {},
                            source=str(config_path))
    if record is not None:
        # The record is project-relative (`stacks/requirements/<file>`); the folder judged is this stack folder's.
        path = folder / PurePosixPath(record.requirements).name
        root = project_root(stacks_dir)
        if root is not None and PurePosixPath(record.requirements).parent.as_posix() != project_relative(folder):
            raise StackConfigError(f"{config_path}: {PLAN_KEY}.requirements names {record.requirements}, outside the "
                                   f"requirements folder {project_relative(folder)}; a stack is judged against the "
                                   "requirements file it was planned from there: re-plan it from that folder")
        if not path.exists():
            raise StackConfigError(f"{config_path}: {PLAN_KEY}.requirements names {record.requirements}, which does "
                                   f"not exist in {folder}: restore it, or delete the stack config (its stack is "
                                   "destroyed)")
    else:
        declaring = [p for p in requirements_files(folder) if _declares(p, service)] if folder.is_dir() else []
        if not declaring:
            raise StackConfigError(f"{config_path}: no requirements file in {folder} declares service {service!r}: "
                                   "a stack is judged against the requirements it was planned from (the preview "
                                   "never trusts the compliance a stack config records); plan it with `blueprint "
                                   "plan` from that folder")
        path = declaring[0]
    req = load_requirements(path)
    if req.service != service or bp.environment not in req.environments:
        raise StackConfigError(f"{config_path}: holds service {service!r} environment {bp.environment!r}, but "
                               f"{project_relative(path)} declares service {req.service!r} with environments "
                               f"{', '.join(req.environments)}; re-plan the stack from its own requirements file")
    return req, project_relative(path)


def _declares(path: Path, service: str) -> bool:
    from blueprints.core.errors import RequirementsError, read_text_file
    from blueprints.core.yamlio import load_yaml

    try:
        data = load_yaml(read_text_file(path, RequirementsError, "requirements file"))
    except Exception:  # noqa: BLE001 - an unreadable file declares nothing; planning it names its error
        return False
    return isinstance(data, dict) and data.get("service") == service


def service_floors(bp: Blueprint, config_path: Path, *, stacks_dir: Path, policy_dir: Path = POLICY_CONFIG_DIR,
                   guardrails: Guardrails | None = None) -> Floors:
    """A service stack's floors: its requirements file and its environment's policy config (`guardrails`, else read
    from `policy_dir`)."""
    req, source = requirements_of(bp, config_path, stacks_dir=stacks_dir)
    if guardrails is None:
        guardrails = policy_guardrails(bp.environment, production=req.is_production(bp.environment),
                                       config_dir=policy_dir)
    return stack_floors(req, bp.environment, service=bp.service, source=source, guardrails=guardrails)


def judge_floors(subject: Blueprint | PlatformConfig, config_path: Path, *, stacks_dir: Path,
                 guardrails: Guardrails | None, policy_dir: Path = POLICY_CONFIG_DIR) -> list[Floors]:
    """The floors a stack is judged against (a service: its own; a platform: each of its services'), after refusing
    a stack config below them.

    Raises:
        StackConfigError: naming the stack config, each field below its floor (or a namespace two services of a
            platform share) and the fix.
    """
    from blueprints.plan.floors import floor_problems, platform_floor_problems

    if isinstance(subject, PlatformConfig):
        services = []
        for stack in subject.services:
            path = stack_config_path(stacks_dir, stack)
            if not path.exists():
                continue  # `blueprint stacks` refuses a platform's missing service; its preview names its own
            bp = read_stack_config(path)
            services.append((stack, bp, service_floors(bp, path, stacks_dir=stacks_dir, policy_dir=policy_dir)))
        problems = platform_floor_problems(subject, [(stack, floors) for stack, _, floors in services])
        problems += _shared_namespaces([(stack, bp) for stack, bp, _ in services])
        _refuse(config_path, PLATFORM_KEY, problems)
        return [floors for _, _, floors in services]
    floors = service_floors(subject, config_path, stacks_dir=stacks_dir, guardrails=guardrails, policy_dir=policy_dir)
    problems = floor_problems(subject, floors, policy_production=guardrails.production if guardrails else None)
    if subject.platform.stack is not None:
        platform_path = stack_config_path(stacks_dir, subject.platform.stack)
        if platform_path.exists():
            platform = read_platform_config(platform_path)
            others = [(s, read_stack_config(stack_config_path(stacks_dir, s))) for s in platform.services
                      if s != subject.stack and stack_config_path(stacks_dir, s).exists()]
            problems += _shared_namespaces([(subject.stack, subject), *others], only=subject.stack)
    _refuse(config_path, BLUEPRINT_KEY, problems)
    return [floors]


def _shared_namespaces(services: Sequence[tuple[str, Blueprint]], *, only: str | None = None) -> list[FieldProblem]:
    """A namespace two services of one platform share: both stacks own the Namespace object, so destroying one
    deletes the other's workloads."""
    owners: dict[str, list[str]] = {}
    for stack, bp in services:
        owners.setdefault(bp.platform.namespace, []).append(stack)
    return [FieldProblem("platform.namespace" if only else "services",
                         f"namespace {ns!r} is used by {', '.join(stacks)}: a namespace belongs to one service (its "
                         "stack owns the Namespace object; destroying one would delete the other's workloads); "
                         "re-plan, each service gets its own")
            for ns, stacks in owners.items() if len(stacks) > 1 and (only is None or only in stacks)]


def _refuse(config_path: Path, key: str, problems: list[FieldProblem]) -> None:
    if problems:
        lines = [f"{key}.{'.'.join(str(p) for p in problem.loc)}: {problem.message}" for problem in problems]
        raise StackConfigError(f"{config_path}: below what its requirements and policy config demand: "
                               + "; ".join(lines))


def baseline_review(report: PreviewReport, base: dict, diff: PlanDiff, *,
                    stacks_dir: Path | None = None) -> Review:
    """What changed against the base branch's report of the same stack (`blueprint preview --baseline`): the
    blueprint recorded in `base` (when it records one) against this stack config's, the predictions, and the
    replacements the resources' input changes bring (`blueprints.review.changes.review_changes`). With `stacks_dir`,
    a move to another platform knows who else each platform serves (`platform_tenants`: the platform it lands on as
    its stack config records it, the one it left likewise without this stack)."""
    before = base.get("blueprint")
    before = before if isinstance(before, dict) else None
    tenants = None
    if stacks_dir is not None and not report.is_platform:
        tenants = platform_tenants([report.platform] if report.platform is not None else [], [report.blueprint],
                                   {report.stack: before}, stacks_dir)
    return review_changes(report.stack, before, None if report.is_platform else report.blueprint,
                          before_predictions=base.get("predictions") if isinstance(base.get("predictions"), dict)
                          else None, resource_changes=diff.changed, tenants=tenants)
