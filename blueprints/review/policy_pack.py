"""Run the policy pack's rules offline over what the mock engine recorded (`blueprint preview`).

The same `policies.rules` check functions that CrossGuard runs, over `RegisteredResource` records (type, name, parent,
inputs in engine camelCase), with a policy config in the Pulumi policy-config format
(`{"<policy-name>": {"enforcementLevel": "...", <config keys>}}`, e.g. `policies/config/prod.json`).

The region: records carry inputs only and the mock engine registers no default provider, so every `aws:` record gets
a provider whose `region` is the stack's `aws:region` (passed in; for a `PreviewReport`, the blueprint's `region`,
which `blueprint plan` writes to `aws:region`). A resource's own `region` input still wins, as under CrossGuard.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pulumi_policy import EnforcementLevel

from blueprints.plan.guardrails import Guardrails
from blueprints.review.preview import PolicyVerdict, PreviewReport, RegisteredResource
import policies
from policies.rules import RULES, RULES_BY_NAME, Res

#: Per-environment policy configs: `policies/config/<env>.json`.
CONFIG_DIR = Path(policies.__file__).resolve().parent / "config"


#: One violation: policy, effective level (`mandatory`/`advisory`), resource URN (or the stack name for a
#: stack-wide finding) and message. The preview report's own type, so verdicts go into it unchanged.
Verdict = PolicyVerdict


def policy_config_problems(policy_config: Any) -> list[str]:
    """Everything wrong with a policy-config document: unknown policy names (with close matches), entries that are
    not an enforcement level or an object, and values that break a policy's config schema. Empty when valid."""
    import difflib

    import jsonschema

    if not isinstance(policy_config, Mapping):
        return ["a policy config is an object of policy name -> settings"]
    rules = RULES_BY_NAME
    problems = []
    for name, entry in policy_config.items():
        rule = rules.get(name)
        if rule is None:
            close = difflib.get_close_matches(name, rules, n=1)
            problems.append(f"{name}: no such policy" + (f"; did you mean {close[0]}?" if close else
                                                        f"; known: {', '.join(rules)}"))
            continue
        levels = [e.value for e in EnforcementLevel]
        if isinstance(entry, str):
            if entry not in levels:
                problems.append(f"{name}: {entry!r} is not an enforcement level ({', '.join(levels)})")
            continue
        for error in jsonschema.Draft202012Validator(rule.config_json_schema()).iter_errors(entry):
            where = ".".join(str(p) for p in error.path)
            problems.append(f"{name}{'.' + where if where else ''}: {error.message}")
    return problems


def read_policy_config(path: Path) -> dict[str, Any]:
    """A policy-config file, validated (`policy_config_problems`).

    Raises:
        BlueprintError: the file is missing, not UTF-8 JSON, or breaks a policy's config schema; the message names
            the file and each problem.
    """
    from blueprints.core.errors import BlueprintError, read_text_file
    from blueprints.core.yamlio import load_json

    text = read_text_file(path, BlueprintError, "policy config", hint="; pass --policy-config")
    try:
        config = load_json(text)
    except json.JSONDecodeError as exc:
        raise BlueprintError(f"{path}: policy config is not JSON ({exc.msg} at line {exc.lineno})") from None
    problems = policy_config_problems(config)
    if problems:
        raise BlueprintError(f"{path}: " + "; ".join(problems))
    return config


def guardrails(policy_config: Mapping[str, Any], *, source: str) -> Guardrails:
    """The planning limits a mandatory policy of a policy config sets, with each policy's schema defaults: allowed
    instance families and types, the GPU quota, allowed regions, required audit logs, no spot, private endpoints,
    required tags and whether the environment is production. A policy below mandatory (advisory or disabled) sets none: it cannot fail a preview."""

    def settings(name: str) -> dict[str, Any] | None:
        rule, entry = RULES_BY_NAME[name], policy_config.get(name)
        if _level(rule.enforcement_level, entry) is not EnforcementLevel.MANDATORY:
            return None
        return rule.with_defaults(entry if isinstance(entry, Mapping) else None)

    families, quota = settings("instance-types-allowed"), settings("gpu-quota")
    regions, audit = settings("region-allowed"), settings("cluster-audit-logs")
    private, tags = settings("private-endpoints"), settings("required-tags")
    engines = settings("engines-allowed")
    # Declared in the file, not defaulted: an environment whose policy config says nothing constrains nothing.
    declared = policy_config.get("compliance-production")
    production = declared.get("production") if isinstance(declared, Mapping) and settings("compliance-production") \
        is not None else None
    return Guardrails(source=source,
                      allowed_instance_families=tuple(families["allowedInstanceFamilies"]) if families else None,
                      allowed_instance_types=tuple(families["allowedInstanceTypes"]) if families else (),
                      max_gpus=int(quota["maxGpus"]) if quota else None,
                      allowed_regions=tuple(regions["allowedRegions"]) if regions else None,
                      audit_logs_required=bool(audit and audit["auditLoggingRequired"]),
                      spot_forbidden=settings("no-spot-capacity") is not None,
                      private_only=bool(private and private["privateOnly"]),
                      required_tags=tuple(tags["requiredTags"]) if tags else (),
                      allowed_engines=tuple(engines["allowedEngines"]) if engines else None,
                      production=production if isinstance(production, bool) else None)


def load_policy_config(environment: str, *, config_dir: Path = CONFIG_DIR) -> dict[str, Any]:
    """`read_policy_config` of `policies/config/<environment>.json`; FileNotFoundError names the known
    environments."""
    path = config_dir / f"{environment}.json"
    if not path.exists():
        known = sorted(p.stem for p in config_dir.glob("*.json"))
        raise FileNotFoundError(f"{path}: no policy config for environment {environment!r}; known: {known}")
    return read_policy_config(path)


def _level(default: EnforcementLevel, entry: Any) -> EnforcementLevel:
    """The configured level (a bare level string or an object's `enforcementLevel`); remediate counts as mandatory."""
    value = entry if isinstance(entry, str) else (entry or {}).get("enforcementLevel")
    level = EnforcementLevel(value) if value else default
    return EnforcementLevel.MANDATORY if level is EnforcementLevel.REMEDIATE else level


def _res(record: RegisteredResource, aws_region: str | None) -> Res:
    provider = {"region": aws_region} if record.type.startswith("aws:") and aws_region else None
    return Res(type=record.type, name=record.name, props=record.inputs, urn=record.urn, parent=record.parent,
               provider=provider)


def evaluate(records: Sequence[RegisteredResource], policy_config: Mapping[str, Any], *,
             aws_region: str | None, stack: str = "stack") -> list[Verdict]:
    """Every rule over the recorded resources, as CrossGuard would run it with `policy_config`.

    Args:
        records: what the program registered (`PreviewReport.resources` or `MockRun.records`).
        policy_config: the policy-config file's content; policies it omits run at their default level with their
            schema defaults; `enforcementLevel: disabled` skips a policy.
        aws_region: the stack's `aws:region` (the default AWS provider's region); None leaves the region of
            resources without their own `region` input unjudged.
        stack: the name used as `resource` for stack-wide findings.

    Returns:
        One `Verdict` per violation, in `RULES` order, then resource order.
    """
    resources = [_res(r, aws_region) for r in records]
    verdicts = []
    for rule in RULES:
        entry = policy_config.get(rule.name)
        level = _level(rule.enforcement_level, entry)
        if level is EnforcementLevel.DISABLED:
            continue
        config = rule.with_defaults(entry if isinstance(entry, Mapping) else None)
        verdicts += [Verdict(rule.name, level.value, res.urn if res is not None else stack, message)
                     for res, message in rule.findings(resources, config)]
    return verdicts


def evaluate_preview(report: PreviewReport, policy_config: Mapping[str, Any]) -> list[Verdict]:
    """`evaluate` over an offline preview, with the blueprint's region as `aws:region`.

    Example:
        report = run_preview("chat-assistant-prod")
        verdicts = evaluate_preview(report, load_policy_config(report.blueprint.environment))
    """
    return evaluate(report.resources, policy_config, aws_region=report.region, stack=report.stack)
