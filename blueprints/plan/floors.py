"""What a stack must meet, from outside it: the requirements file it was planned from and its environment's policy
config. The preview judges a stack config against these floors, never against the compliance record the stack
config carries (an edit of both would pass), and so does a platform against the services landing on it.

`floor_problems` lists every field of a service's blueprint below its floors (each `FieldProblem` names the
blueprint field); `platform_floor_problems` every posture setting of a platform below what one of its services' own
requirements need (`blueprints.plan.platforms.unmet_compliance`, the check that refuses such a service at plan time).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from blueprints.catalog.addons import load_platform_catalog
from blueprints.catalog.images import load_image_catalog
from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.platform import PlatformConfig, PlatformKind
from blueprints.contracts.sections import CapacityType, SageMakerEngine
from blueprints.core.errors import FieldProblem
from blueprints.plan.guardrails import Guardrails
from blueprints.plan.builders.context import attainment_pct
from blueprints.plan.options.search import replicas_floor
from blueprints.plan.platforms import Posture, private_endpoints, unmet_compliance
from blueprints.requirements.exposure import Exposure
from blueprints.requirements.service import Requirements

#: The exposure fields that decide who can reach an endpoint: a stack keeps its requirements' values.
EXPOSURE_FLOOR_FIELDS = ("scope", "allowed_cidrs", "acknowledge_open_internet", "tls_certificate_arn",
                         "tls_secret_name")


@dataclass(frozen=True)
class Floors:
    """One service environment's floors.

    Attributes:
        source: the requirements file (named in every problem).
        environment: the environment.
        requirements: the requirements (its compliance, exposure and environments).
        production: the environment is production: the requirements' `environments.<env>.production` (default: a
            name starting with `prod`), which the policy config's `compliance-production` `production` must match.
        private_only: the requirements' compliance.private_only, or the policy config's privateOnly.
        audit_logging: the requirements' compliance.audit_logging, or the policy config's cluster-audit-logs.
        customer_managed_kms: the requirements' compliance.customer_managed_kms.
        regions_allowed: the regions both the requirements and the policy config allow (empty: any).
        namespace: the service's own namespace (its stack's service name).
        policy_source: the policy config (None: none).
    """

    source: str
    environment: str
    requirements: Requirements
    production: bool
    private_only: bool
    customer_managed_kms: bool
    audit_logging: bool
    regions_allowed: tuple[str, ...]
    namespace: str
    policy_source: str | None = None


def stack_floors(req: Requirements, env: str, *, service: str, source: str,
                 guardrails: Guardrails | None) -> Floors:
    """The floors of stack `<service>-<env>` planned from `req` (a compound service's part: `service` is the part's),
    within the environment's `guardrails` (None: no policy config)."""
    allowed = tuple(req.compliance.regions_allowed)
    if guardrails is not None and guardrails.allowed_regions is not None:
        allowed = tuple(r for r in (allowed or guardrails.allowed_regions) if r in guardrails.allowed_regions)
    return Floors(source=source, environment=env, requirements=req, production=req.is_production(env),
                  private_only=req.compliance.private_only or bool(guardrails and guardrails.private_only),
                  customer_managed_kms=req.compliance.customer_managed_kms,
                  audit_logging=req.compliance.audit_logging, regions_allowed=allowed, namespace=service,
                  policy_source=guardrails.source if guardrails is not None else None)


def _below(field: str, value: object, floor: str, fix: str) -> FieldProblem:
    return FieldProblem(field, f"is {value!r} but {floor}; {fix}")


def floor_problems(bp: Blueprint, floors: Floors, *, policy_production: bool | None = None) -> list[FieldProblem]:
    """Every field of `bp` below its floors, each naming the blueprint field, the requirements (or policy) field it
    falls short of and the fix (re-plan; the requirements are where an intended change goes). Empty when none is.

    Args:
        bp: the stack config's blueprint.
        floors: `stack_floors` of its requirements and policy config.
        policy_production: what the environment's policy config declares (`compliance-production` `production`);
            None when it declares nothing.
    """
    src, env = floors.source, floors.environment
    replan = f"re-plan from {src} (`blueprint plan`), where an intended change goes"
    problems: list[FieldProblem] = []
    if policy_production is not None and floors.production != policy_production:
        problems.append(FieldProblem("production", f"{src} environments.{env} is "
                                     f"{'production' if floors.production else 'not production'} but "
                                     f"{floors.policy_source} declares production: {str(policy_production).lower()} "
                                     f"(compliance-production); set environments.{env}.production to match"))
    if bp.production != floors.production:
        problems.append(_below("production", bp.production, f"{src} environments.{env} is "
                               f"{'production' if floors.production else 'not production'}", replan))
    record = bp.compliance
    for flag in ("private_only", "customer_managed_kms", "audit_logging"):
        if getattr(floors, flag) and not getattr(record, flag):
            problems.append(_below(f"compliance.{flag}", False, f"{src} compliance.{flag} (or the policy config) "
                                   "requires it", replan))
    if record.production != floors.production:
        problems.append(_below("compliance.production", record.production, f"{src} environments.{env} says "
                               f"{str(floors.production).lower()}", replan))
    wider = [r for r in record.regions_allowed if floors.regions_allowed and r not in floors.regions_allowed]
    if wider:
        problems.append(_below("compliance.regions_allowed", list(record.regions_allowed), f"{src} and the policy "
                               f"config allow {list(floors.regions_allowed)} only", replan))
    if floors.regions_allowed and bp.region not in floors.regions_allowed:
        problems.append(_below("region", bp.region, f"{src} and the policy config allow "
                               f"{list(floors.regions_allowed)} only", replan))
    if floors.private_only and not bp.network.private_only:
        problems.append(_below("network.private_only", False, f"{src} compliance.private_only requires it", replan))
    if not isinstance(bp.engine, SageMakerEngine):
        wanted: Exposure = floors.requirements.exposure
        problems += [_below(f"network.exposure.{f}", getattr(bp.network.exposure, f), f"{src} exposure.{f} is "
                            f"{getattr(wanted, f)!r}", replan)
                     for f in EXPOSURE_FLOOR_FIELDS if getattr(bp.network.exposure, f) != getattr(wanted, f)]
        if bp.engine.image not in load_image_catalog():
            problems.append(_below("engine.image", bp.engine.image, "a stack runs the engine image the catalog pins "
                                   "(blueprints/catalog/images.yaml)", replan))
    if bp.storage is not None and floors.customer_managed_kms and not bp.storage.customer_managed_kms:
        problems.append(_below("storage.customer_managed_kms", False, f"{src} compliance.customer_managed_kms "
                               "requires it", replan))
    problems += _slo_and_replica_floors(bp, floors, replan)
    problems += _batch_floors(bp, floors, replan)
    # A pilot (`blueprint pilot`) has its own beside the environment's stack: `<service>-pilot-<k>`.
    own = floors.namespace if bp.pilot is None else f"{floors.namespace}-pilot-{bp.pilot.candidate}"
    if bp.platform.namespace != own:
        problems.append(_below("platform.namespace", bp.platform.namespace, f"the service's own namespace is "
                               f"{own!r} (a namespace belongs to one service: destroying its stack "
                               "deletes everything in it)", replan))
    if floors.production:
        production = f"{src} environments.{env} is production"
        if bp.storage is not None and not bp.storage.retain_on_delete:
            problems.append(_below("storage.retain_on_delete", False, f"{production} (a destroy would delete the "
                                   "weights bucket)", replan))
        if bp.autoscaling.min_replicas < 1 and floors.requirements.batch is None:  # a batch's zero: its schedule
            problems.append(_below("autoscaling.min_replicas", bp.autoscaling.min_replicas,
                                   f"{production} (never scales to zero)", replan))
        if bp.compute.capacity_type is CapacityType.SPOT:
            problems.append(_below("compute.capacity_type", "spot", f"{production} (on-demand only)", replan))
        if not bp.monitored:
            problems.append(_below("monitored", False, f"{production} (its alerts must exist)", replan))
        if bp.platform.kind == "eks" and bp.alerting.receiver is None:
            problems.append(_below("alerting.receiver", None, f"{production} (its alerts page someone: "
                                   "platform.yaml alerting.receiver)", replan))
        if bp.platform.kind == "sagemaker" and bp.alerting.sns_topic_arn is None:
            problems.append(_below("alerting.sns_topic_arn", None, f"{production} (its alarms notify someone: "
                                   f"platform.yaml alerting.sns_topic_arns.{bp.region})", replan))
    return problems


#: The SLO latency targets a stack keeps from its requirements (its alerts, autoscaling and sizing follow them).
SLO_FLOOR_FIELDS = ("ttft_p95_ms", "itl_p95_ms", "ttft_p99_ms", "itl_p99_ms", "latency_p95_ms", "latency_p99_ms")


def _slo_and_replica_floors(bp: Blueprint, floors: Floors, replan: str) -> list[FieldProblem]:
    """The stack's SLO no looser than its requirements' (a latency target no higher, the availability no lower; a
    compound part keeps the targets of its kind only, `blueprints.plan.compound.parts`, and may be given tighter
    ones), and its minimum replicas at least the environment's floor (`environments.<env>.min_replicas`, else in
    production `replicas_floor`: 2 at >= 99.9 % availability, else 1)."""
    src, env, req = floors.source, floors.environment, floors.requirements
    problems = []
    for name in SLO_FLOOR_FIELDS:
        wanted, value = getattr(req.slo, name), getattr(bp.slo, name)
        if wanted is None or (value is None and bp.pipeline is not None):
            continue
        if value is None or value > wanted:
            problems.append(_below(f"slo.{name}", value, f"{src} slo.{name} is {wanted:g} ms (the stack's alerts, "
                                   "autoscaling and replicas follow its SLO)", replan))
    if bp.slo.availability_pct < req.slo.availability_pct:
        problems.append(_below("slo.availability_pct", bp.slo.availability_pct, f"{src} slo.availability_pct is "
                               f"{req.slo.availability_pct:g}", replan))
    wanted = attainment_pct(req, env)
    if bp.slo.attainment_pct < wanted:
        problems.append(_below("slo.attainment_pct", bp.slo.attainment_pct, f"{src} plans environments.{env} for "
                               f"{wanted:g} % of minutes (slo.attainment_pct or the environment's default)", replan))
    longest = req.slo.longest_violation_minutes
    if longest is not None and (bp.slo.longest_violation_minutes is None or bp.slo.longest_violation_minutes > longest):
        problems.append(_below("slo.longest_violation_minutes", bp.slo.longest_violation_minutes, f"{src} "
                               f"slo.longest_violation_minutes is {longest}", replan))
    spec = req.environments[env]
    if req.batch is not None:
        return problems  # a batch's replicas are its run's (`_batch_floors`), none outside it
    least = spec.min_replicas if spec.min_replicas is not None else replicas_floor(req, env) if floors.production else 0
    if bp.autoscaling.min_replicas < least:
        why = (f"environments.{env}.min_replicas is {least}" if spec.min_replicas is not None else
               f"environments.{env} is production at slo.availability_pct {req.slo.availability_pct:g}, which keeps "
               f"at least {least} replica(s) warm")
        problems.append(_below("autoscaling.min_replicas", bp.autoscaling.min_replicas, f"{src} {why}", replan))
    return problems


def _batch_floors(bp: Blueprint, floors: Floors, replan: str) -> list[FieldProblem]:
    """A batch stack's run (`Blueprint.batch`) as its requirements' `traffic.batch` asks: the environment's
    requests a day (x traffic_scale), the deadline and the window (start, length, time zone); a stack with a batch
    run exactly when the requirements have one. Its schedule, replicas and `autoscaling` follow the batch section
    (`blueprints.contracts.consistency`)."""
    src, env, req = floors.source, floors.environment, floors.requirements
    wanted, b = req.batch, bp.batch
    if wanted is None or b is None:
        if (wanted is None) != (b is None):
            return [_below("batch", "a batch run" if b is not None else None, f"{src} "
                           + ("has no traffic.batch (interactive traffic)" if wanted is None else
                              "plans a batch (traffic.batch)"), replan)]
        return []
    window = wanted.window
    assert window is not None  # validated: a batch has a window
    requests = req.model_entries()[0][1].batch_requests_per_day * req.environments[env].traffic_scale
    asked = {"requests_per_day": (round(requests, 3), "traffic.batch.requests_per_day (or tokens_per_day) x "
                                  f"environments.{env}.traffic_scale"),
             "deadline_hours": (wanted.deadline_hours, "traffic.batch.deadline_hours"),
             "window_start_hour": (window.start_hour, "traffic.batch.window.start_hour"),
             "window_hours": (window.hours, "traffic.batch.window (its length)"),
             "timezone": (window.timezone, "traffic.batch.window.timezone")}
    return [_below(f"batch.{name}", getattr(b, name), f"{src} {field} gives {value!r}", replan)
            for name, (value, field) in asked.items()
            if (abs(getattr(b, name) - value) > 1e-3 * max(1.0, abs(value)) if isinstance(value, float)
                else getattr(b, name) != value)]


def posture_of(platform: PlatformConfig) -> Posture:
    """What a planned platform's config guarantees its services. A network-only platform has no Kubernetes API
    (`network.private_endpoint` is an EKS setting, false there): it is private when its VPC has every interface endpoint
    the planner gives a private SageMaker endpoint's VPC (`private_endpoints`), the one posture its services ask of it
    (`unmet_compliance`)."""
    private = platform.network.private_endpoint
    if platform.kind is PlatformKind.NETWORK:
        needed = private_endpoints((), load_platform_catalog(), eks=False, sagemaker=True,
                                   existing_vpc=platform.network.existing_vpc is not None)
        private = set(needed) <= set(platform.network.interface_endpoints)
    return Posture(private_endpoint=private, secrets_kms=platform.secrets_kms, audit_logging=platform.audit_logging,
                   why="")


#: Platform config fields by the posture attribute they record.
POSTURE_FIELDS = {"private_endpoint": "network.private_endpoint", "secrets_kms": "secrets_kms",
                  "audit_logging": "audit_logging"}


def platform_floor_problems(platform: PlatformConfig, services: Sequence[tuple[str, Floors]]) -> list[FieldProblem]:
    """Every posture setting of `platform` below what a service on it needs by its own requirements, naming the
    platform field, the service stack and its requirements field; and namespaces two services share."""
    problems = []
    posture = posture_of(platform)
    for stack, floors in services:
        for compliance, key, what in unmet_compliance(posture, floors.requirements):
            field = POSTURE_FIELDS[key]
            problems.append(FieldProblem(field, f"is false but {stack} ({floors.source}) needs {what} "
                                         f"(compliance.{compliance}); set platforms.{platform.name}.{key}: true in "
                                         "platform.yaml and re-plan", rule="platform-posture-meets-service"))
    return problems
