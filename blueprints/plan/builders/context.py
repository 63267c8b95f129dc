"""What every archetype's builder shares: the plan's context (`PlanContext`: date, platforms, guardrails,
existing hardware), the `Blueprint` fields every archetype fills the same way (tags, served models, network, platform,
SLO), who can reach the endpoint, the capacity type, and the autoscaling bounds within max_replicas and the GPU quota.
Pure.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from collections.abc import Mapping

from blueprints.core import bounds, defaults
from blueprints.contracts.sections import (
    CapacityType, ComplianceRecord, ModelTraffic, Network, PlatformSpec, ServedModel, SloTargets, StartupBudget,
    Storage,
)
from blueprints.contracts.consistency import stored_weights_gib
from blueprints.catalog.addons import load_platform_catalog
from blueprints.contracts.platform import PlatformConfig
from blueprints.contracts.calibration_file import Calibrations
from blueprints.plan.landing import landing_platform
from blueprints.plan.guardrails import Guardrails, SearchLimits
from blueprints.plan.options.search import ResolvedModel, peak_rps, replicas_floor, strict_zone_spread
from blueprints.requirements.service import Requirements
from blueprints.requirements.hosting import Platform as PlatformKind
from blueprints.requirements.exposure import Exposure, ExposureScope, ExposureVia
from blueprints.requirements.cluster_exposure import AWS_LOAD_BALANCER_CONTROLLER, resolve_exposure
from blueprints.plan.edge import exposure_words, monitored, reach_words, roles_anywhere_spec
from blueprints.plan.scaling import zones_of
from blueprints.plan.stability import Hardware


def _tags(req: Requirements, env: str) -> dict[str, str]:
    return {"service": req.service, "environment": env, "owner": req.owner, "cost-center": req.cost_center,
            "managed-by": "servingblueprints"}


def served_model(m: ResolvedModel, req: Requirements, env: str) -> ServedModel:
    traffic = ModelTraffic(peak_requests_per_s=round(peak_rps(req, env, m), 6), pattern=m.traffic.pattern.value,
                           mean_input_tokens=m.traffic.mean_input_tokens,
                           mean_output_tokens=m.traffic.mean_output_tokens,
                           input_tokens_p95=m.traffic.input_tokens_p95, output_tokens_p95=m.traffic.output_tokens_p95,
                           shared_prefix_tokens=m.traffic.shared_prefix_tokens,
                           session_turns=m.traffic.sessions.turns if m.traffic.sessions else None, api=m.traffic.api,
                           daily=m.traffic.daily, weekly=m.traffic.weekly)
    return ServedModel(name=m.spec.served_name, catalog_id=m.spec.id, task=m.task, format=m.spec.format,
                       precision=m.spec.precision, quantization=m.spec.quantization_method,
                       source_uri=m.spec.weights_uri, sha256=m.spec.sha256,
                       source_kms_key_arn=m.spec.weights_kms_key_arn, params_b=m.architecture.params_b,
                       weights_gib=stored_weights_gib(m.weights_gib), max_context_tokens=m.max_context_tokens,
                       architecture=m.spec.architecture, traffic=traffic)


def autoscaling_bounds(req: Requirements, env: str, replicas: int, *, can_scale_to_zero: bool,
                        quota_cap: int | None = None, quota_source: str = "") -> tuple[int, int, list[str]]:
    """(min, max) replicas and the rationale of a capped maximum. Scale to zero needs KEDA (vLLM, Triton); a
    SageMaker real-time endpoint and a CPU HPA (ONNX Runtime) keep at least one replica. The maximum (max_replicas,
    default twice the peak's replicas) is lowered to `quota_cap`, the most the GPU quota holds with the surge; the
    search kept the peak's replicas within both."""
    spec = req.environments[env]
    floor = spec.min_replicas if spec.min_replicas is not None else replicas_floor(req, env)
    if not can_scale_to_zero:
        floor = max(1, floor)
    ceiling = spec.max_replicas if spec.max_replicas is not None else min(
        bounds.MAX_REPLICAS, max(2 * replicas, floor, 1))
    notes = []
    if quota_cap is not None and ceiling > quota_cap:
        ceiling = quota_cap
        notes.append(f"autoscaling max capped at {quota_cap} replicas so the GPU node pool stays within {quota_source}")
    assert floor <= replicas <= ceiling, "the search keeps the peak's replicas within max_replicas and the quota"
    return floor, ceiling, notes


def cooldown_s(startup: StartupBudget) -> int:
    return max(defaults.SCALE_IN_COOLDOWN_MIN_S, startup.total_s + 60)


@dataclass(frozen=True)
class PlanContext:
    """What every environment's plan shares: the plan date, the platforms services land on, each environment's
    guardrails (and the rationale of the choices they made, `notes`), and the hardware of the existing stack configs
    by stack name with the tolerance for keeping it, and the project's calibrations (`stacks/calibration/`).
    `pinned`: a pilot's candidate (`blueprints.plan.pilot`): every environment is planned on that archetype and
    hardware at whatever it costs, or refused (SizingError) where it cannot serve. `pinned_by`: why, when it is not a
    pilot's (the requirements' `choice`, `blueprints.plan.choice.choice_words`), said first in the rationale;
    `pinned_rps`: its measured goodput per replica within the SLO, requests/s (no environment gets fewer replicas
    than that needs at its peak). `proving`: a re-plan that proves a refusal's hint (`blueprints.plan.hints`), which
    asks only whether the plan succeeds: a production plan's central estimate is not searched for what a calibration
    could save (`blueprints.plan.builders.llm_band.plan_band`)."""

    as_of: dt.date
    platforms: Mapping[str, PlatformConfig]
    guardrails: Mapping[str, Guardrails] = field(default_factory=dict)
    existing: Mapping[str, Hardware] = field(default_factory=dict)
    switch_threshold_pct: float = defaults.SWITCH_THRESHOLD_PCT
    notes: Mapping[str, list[str]] = field(default_factory=dict)
    calibrations: Calibrations = field(default_factory=Calibrations)
    pinned: Hardware | None = None
    pinned_by: str | None = None
    pinned_rps: float | None = None
    proving: bool = False

    def limits(self, req: Requirements, env: str, *, managed: bool) -> SearchLimits:
        """The environment's search constraints: its policy's instance types and GPU quota (counted over the
        platform's zones), how its replicas spread (`blueprints.contracts.placement`) and its max_replicas."""
        return SearchLimits(guardrails=self.guardrails.get(env),
                            zones=zones_of(self.platform(req, env, managed=managed)) or 1,
                            strict_zone_spread=not managed and strict_zone_spread(req, env),
                            max_replicas=req.environments[env].max_replicas)

    def platform(self, req: Requirements, env: str, *, managed: bool) -> PlatformConfig | None:
        """The platform this environment uses: its cluster (self-hosted on EKS) or its VPC (private SageMaker); none
        for a self-hosted archetype on an existing or edge cluster (a private `preference: any` service lands on a
        platform only should it be planned onto SageMaker)."""
        name = landing_platform(req, env)
        if name is None or (managed and not req.compliance.private_only):
            return None
        if not managed and req.operations.platform is not PlatformKind.EKS:
            return None
        return self.platforms[name]

    def kubernetes_version(self, req: Requirements, env: str, *, managed: bool) -> str:
        platform = self.platform(req, env, managed=managed)
        if platform is not None:
            return platform.kubernetes_version
        if req.operations.kubernetes_version is not None:
            return req.operations.kubernetes_version
        return default_kubernetes_version(self.as_of)


def _network(req: Requirements, *, managed: bool, idle_timeout_s: int) -> Network:
    """Who reaches the service and through what (`blueprints.requirements.cluster_exposure`); SageMaker endpoints have no
    Kubernetes exposure."""
    if managed:
        return Network(private_only=req.compliance.private_only, load_balancer_idle_timeout_s=idle_timeout_s,
                       exposure=Exposure())
    resolved = resolve_exposure(req.operations, req.exposure)
    return Network(private_only=req.compliance.private_only, load_balancer_idle_timeout_s=idle_timeout_s,
                   exposure=resolved.exposure(req.exposure), exposed_by=resolved.exposed_by)


def common_fields(req: Requirements, env: str, ctx: PlanContext, *, managed: bool, idle_timeout_s: int) -> dict:
    """Blueprint fields every archetype fills the same way."""
    platform = ctx.platform(req, env, managed=managed)
    edge = req.operations.platform is PlatformKind.EDGE_CLUSTER and not managed
    return dict(
        service=req.service, environment=env, production=req.is_production(env),
        region=req.environments[env].region, tags=_tags(req, env),
        compliance=ComplianceRecord(**req.compliance.model_dump(), production=req.is_production(env)),
        storage=None if edge else Storage(customer_managed_kms=req.compliance.customer_managed_kms,
                                          retain_on_delete=req.is_production(env)),
        network=_network(req, managed=managed, idle_timeout_s=idle_timeout_s),
        roles_anywhere=roles_anywhere_spec(req, env) if edge else None, monitored=monitored(req),
        platform=PlatformSpec(kind="sagemaker" if managed else req.operations.platform,
                              kubernetes_version=ctx.kubernetes_version(req, env, managed=managed),
                              namespace=req.service, stack=platform.stack if platform else None,
                              zones=zones_of(platform)),
        slo=SloTargets(ttft_p95_ms=req.slo.ttft_p95_ms, itl_p95_ms=req.slo.itl_p95_ms,
                       ttft_p99_ms=req.slo.ttft_p99_ms, itl_p99_ms=req.slo.itl_p99_ms,
                       latency_p95_ms=req.slo.latency_p95_ms, latency_p99_ms=req.slo.latency_p99_ms,
                       availability_pct=req.slo.availability_pct, attainment_pct=attainment_pct(req, env),
                       longest_violation_minutes=req.slo.longest_violation_minutes),
    )


def attainment_pct(req: Requirements, env: str) -> float:
    """The SLO attainment `env` is planned for, %: `slo.attainment_pct`, else the environment's default."""
    if req.slo.attainment_pct is not None:
        return req.slo.attainment_pct
    return defaults.SLO_ATTAINMENT_PCT["production" if req.is_production(env) else "other"]


def access_reasons(req: Requirements, *, managed: bool) -> list[str]:
    """Who can reach the endpoint, in plain words (the plan's rationale)."""
    if managed:
        action = ("sagemaker:InvokeEndpointAsync on it and s3:PutObject on its requests' prefix in the model store"
                  if req.batch is not None else "sagemaker:InvokeEndpoint on it")
        notes = ["access: a SageMaker endpoint is IAM-authorised: callers sign requests (SigV4) with a role allowed "
                 + action + (", from inside the platform's VPC (private_only)" if req.compliance.private_only else "")]
        if req.exposure != Exposure():
            notes.append("exposure settings apply to self-hosted endpoints only; a SageMaker endpoint ignores them")
        return notes
    exposure = req.exposure
    key = ("every request needs the stack's API key (`Authorization: Bearer <key>`; stack output `api_key`, a "
           "secret), checked by the authenticating proxy in each pod")
    resolved = resolve_exposure(req.operations, exposure)
    if resolved.exposed_by != AWS_LOAD_BALANCER_CONTROLLER:
        how = exposure_words(resolved.via, resolved.exposed_by, ingress_class=resolved.ingress_class_name,
                             node_port=exposure.node_port, hostname=exposure.hostname)
        tls = (f"TLS with Secret {exposure.tls_secret_name} ("
               + ("the Ingress terminates it)" if resolved.via is ExposureVia.INGRESS else "the proxy terminates it)")
               if exposure.tls_secret_name else "plain HTTP (no exposure.tls_secret_name)")
        return [f"access: {how}, {tls}, exposure.scope {exposure.scope.value}: {reach_words(resolved, exposure)}; "
                f"{key}"]
    if exposure.scope is ExposureScope.PUBLIC:
        where = ("the whole internet (acknowledged)" if exposure.acknowledge_open_internet and "0.0.0.0/0" in
                 exposure.allowed_cidrs else ", ".join(exposure.allowed_cidrs))
        return [f"access: an internet-facing load balancer with TLS ({exposure.tls_certificate_arn}) at "
                f"https://{exposure.hostname or '<load balancer DNS name>'}, reachable from {where} only; {key}"]
    extra = f" and {', '.join(exposure.allowed_cidrs)}" if exposure.allowed_cidrs else ""
    return [f"access: an internal load balancer (exposure.scope internal), reachable from the platform's VPC{extra} "
            f"(and networks peered with it) only, never from the internet; {key}"]


def capacity_type_of(req: Requirements, env: str, *, managed: bool) -> CapacityType:
    """Spot where the environment asks for it on self-hosted nodes; on-demand otherwise (SageMaker real-time
    endpoints run on-demand only)."""
    return CapacityType.SPOT if req.environments[env].spot and not managed else CapacityType.ON_DEMAND


def quota_cap(ctx: PlanContext, req: Requirements, env: str, *, per_node: int, gpus_per_node: int) -> dict:
    """`autoscaling_bounds`' keywords for the GPU quota of a self-hosted environment."""
    limits = ctx.limits(req, env, managed=False)
    cap = limits.autoscaling_cap(per_node=per_node, gpus_per_node=gpus_per_node)
    return {} if cap is None else {"quota_cap": cap, "quota_source": limits.quota_source()}


def default_kubernetes_version(as_of: dt.date) -> str:
    """The newest EKS version in standard support on `as_of` that every pinned add-on supports (as a platform's)."""
    from blueprints.plan.platforms import BASE_ADDONS, GPU_ADDONS, choose_kubernetes_version

    version, _, _ = choose_kubernetes_version(load_platform_catalog(), [*BASE_ADDONS, *GPU_ADDONS], as_of, wanted=None,
                                              source="blueprints/catalog")
    return version
