"""A stack's review: the offline preview plus the policy pack's verdicts, as `blueprint preview` reports it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from blueprints.contracts.blueprint import Blueprint
from blueprints.review.changes import Review, review_changes
from blueprints.review.diff import PlanDiff
from blueprints.core.errors import BlueprintError
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

    Raises:
        StackConfigError: as `run_preview`.
        BlueprintError: the policy config is missing, not JSON, or breaks a policy's config schema.
    """
    from blueprints.review.policy_pack import evaluate_preview, read_policy_config

    from blueprints.review.deployability.checks import check_deployability, check_kubernetes_upgrade
    from blueprints.review.signals import check_signals

    report = run_preview(stack, stacks_dir=stacks_dir, program=program)
    subject = report.subject
    path = policy_config or policy_config_for(subject.environment, production=subject.production,
                                              config_dir=policy_dir)
    config = read_policy_config(path)
    report.policy_verdicts = evaluate_preview(report, stack_policy_config(config, subject))
    report.deployability = check_deployability(report, stacks_dir=stacks_dir)
    if baseline is not None:
        report.deployability += check_kubernetes_upgrade(report, baseline)
    report.signals = check_signals(report, stacks_dir=stacks_dir)
    return report


def stack_policy_config(config: dict, subject: Blueprint | PlatformConfig) -> dict:
    """The environment's policy config, tightened by what the stack itself records: a stack whose requirements are
    private-only (its recorded `compliance.private_only`, not the derived `network.private_only` a hand edit could
    flip; or a platform with a private API endpoint) is checked as private-only whatever the environment's file
    says. The other recorded requirements are checked by the pack's `compliance-*` rules."""
    private = subject.network.private_endpoint if isinstance(subject, PlatformConfig) else \
        subject.compliance.private_only
    if not private:
        return config
    entry = config.get("private-endpoints")
    entry = {"enforcementLevel": entry} if isinstance(entry, str) else dict(entry or {})
    return {**config, "private-endpoints": {**entry, "privateOnly": True}}


def baseline_review(report: PreviewReport, base: dict, diff: PlanDiff) -> Review:
    """What changed against the base branch's report of the same stack (`blueprint preview --baseline`): the
    blueprint recorded in `base` (when it records one) against this stack config's, the predictions, and the
    replacements the resources' input changes bring (`blueprints.review.changes.review_changes`)."""
    before = base.get("blueprint")
    return review_changes(report.stack, before if isinstance(before, dict) else None,
                          None if report.is_platform else report.blueprint,
                          before_predictions=base.get("predictions") if isinstance(base.get("predictions"), dict)
                          else None, resource_changes=diff.changed)
