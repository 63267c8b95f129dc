"""Requirements -> one `Blueprint` per environment: choose the archetype, size it, price it, explain it.

One way through: `resolve_models` -> `select_archetype` (blueprints.selection) -> the archetype's builder below,
which takes the cheapest option from `blueprints.options`, prices it, checks the budget and writes the blueprint.
Pure: the same `Requirements` and `Catalog` always give the same blueprints (no clock, network or environment).
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import Callable

from blueprints import bounds, defaults
from blueprints.blueprint import (
    Archetype,
    Autoscaling,
    Blueprint,
    CapacityType,
    ComplianceRecord,
    Compute,
    CostLine,
    ModelLatency,
    ModelTraffic,
    Network,
    OnnxRuntimeEngine,
    PlatformSpec,
    Predictions,
    SageMakerEngine,
    ServedModel,
    SloTargets,
    StartupBudget,
    Storage,
    TritonEngine,
    TritonModelConfig,
    VllmEngine,
)
from blueprints.catalog import Catalog
from blueprints.consistency import stored_weights_gib, vllm_host_memory_gib
from blueprints.consistency_serving import TRITON_BACKEND, vllm_dtype
from blueprints.catalog.addons import load_platform_catalog
from blueprints.compound import service_parts
from blueprints.platform import AlertingSpec, PlatformConfig
from blueprints.platform_landing import landing_platform
from blueprints.guardrails import Guardrails, SearchLimits
from blueprints.errors import RequirementsError, SizingError
from blueprints.capacity.simulator import SimulationResult
from blueprints.options import (
    ResolvedModel,
    service_fixed_monthly_usd,
    fixed_cost_items,
    peak_rps,
    replicas_floor,
    resolve_models,
)
from blueprints.options_llm import (
    LlmOption,
    LlmSearch,
    complete_sizing,
    llm_option_on,
    llm_search,
    size_twin,
    traffic_shape,
)
from blueprints.options_nongen import NongenOption, latency_target_ms, search_nongen_options
from blueprints.options_infeasible import explain_infeasible_nongen, explain_no_llm_option
from blueprints.requirements import (
    Accelerator,
    CpuArch,
    Exposure,
    ExposureScope,
    ExposureVia,
    ModelFormat,
    Platform as PlatformKind,
    Requirements,
)
from blueprints.cluster_exposure import AWS_LOAD_BALANCER_CONTROLLER, resolve_exposure
from blueprints.edge import OwnedNodeShape
from blueprints.edge_plan import (
    bounded_ceiling,
    edge_autoscaling,
    edge_reasons,
    exposure_words,
    monitored,
    reach_words,
    owned_cost_lines,
    roles_anywhere_spec,
)
from blueprints.images import image_problems
from blueprints.kubernetes_features import feature_problems
from blueprints.scaling_plan import finish, zones_of
from blueprints.selection import Selection, sagemaker_engine, select_archetype
from blueprints.signals import planned_target
from blueprints.stability import Hardware, decide
from blueprints.startup import startup_budget
from blueprints.weights import replica_ephemeral_gib, with_weights_reason


def _tags(req: Requirements, env: str) -> dict[str, str]:
    return {"service": req.service, "environment": env, "owner": req.owner, "cost-center": req.cost_center,
            "managed-by": "servingblueprints"}


def _served_model(m: ResolvedModel, req: Requirements, env: str) -> ServedModel:
    traffic = ModelTraffic(peak_requests_per_s=round(peak_rps(req, env, m), 6), pattern=m.traffic.pattern.value,
                           mean_input_tokens=m.traffic.mean_input_tokens,
                           mean_output_tokens=m.traffic.mean_output_tokens,
                           input_tokens_p95=m.traffic.input_tokens_p95, output_tokens_p95=m.traffic.output_tokens_p95)
    return ServedModel(name=m.spec.served_name, catalog_id=m.spec.id, task=m.task, format=m.spec.format,
                       precision=m.spec.precision, quantization=m.spec.quantization_method,
                       source_uri=m.spec.weights_uri, sha256=m.spec.sha256,
                       source_kms_key_arn=m.spec.weights_kms_key_arn, params_b=m.architecture.params_b,
                       weights_gib=stored_weights_gib(m.weights_gib), max_context_tokens=m.max_context_tokens,
                       architecture=m.spec.architecture, traffic=traffic)


def _line(item: str, quantity: float, usd_per_hour: float, catalog: Catalog) -> CostLine:
    return CostLine(item=item, quantity=quantity, usd_per_hour=round(usd_per_hour, 4),
                    monthly_usd=round(quantity * usd_per_hour * catalog.hours_per_month, 2))


def _cost_lines(req: Requirements, env: str, catalog: Catalog, *, what: str, instance_type: str, nodes: int,
                usd_per_hour: float, managed: bool) -> list[CostLine]:
    """The nodes (or SageMaker instances), then the service's fixed items (`options.fixed_cost_items`: load balancer,
    keys; their sum is `options.service_fixed_monthly_usd`). The shared platform's cost is its own stack's."""
    spot = ", spot" if req.environments[env].spot and not managed else ""
    lines = [_line(f"{what} ({instance_type}{spot})", nodes, usd_per_hour, catalog)]
    lines += [_line(item, qty, usd, catalog) for item, qty, usd in fixed_cost_items(req, env, catalog, managed=managed)]
    return lines


def check_budget(req: Requirements, env: str, catalog: Catalog, *, lines: list[CostLine], what: str, replicas: int,
                 replicas_per_node: int, node_usd_per_hour: float, managed: bool) -> None:
    """Raise when the cheapest plan meeting the SLO costs more than budget.max_monthly_usd.

    The message says by how much, and what the budget would buy: how many replicas, serving what share of the peak.

    Raises:
        SizingError: over budget.
    """
    budget = req.budget.max_monthly_usd
    monthly = sum(line.monthly_usd for line in lines)
    if budget is None or monthly <= budget:
        return
    fixed = service_fixed_monthly_usd(req, env, catalog, managed=managed)
    node_monthly = node_usd_per_hour * catalog.hours_per_month
    affordable = max(0, math.floor((budget - fixed) / node_monthly)) * replicas_per_node
    head = (f"environments.{env}: the cheapest plan meeting the SLO ({what}) costs ${monthly:,.0f}/month, "
            f"${monthly - budget:,.0f} over budget.max_monthly_usd={budget:g}")
    floor = replicas_floor(req, env)
    if affordable >= floor:
        share = affordable / replicas
        raise SizingError(f"{head}. The budget pays for {affordable} of the {replicas} replicas, about {share:.0%} of "
                          f"this environment's peak load: raise budget.max_monthly_usd to >= {math.ceil(monthly)}, "
                          f"or lower environments.{env}.traffic_scale (or traffic.peak_requests_per_s) to "
                          f"<= {share:.0%} of today's, or relax the SLO")
    min_nodes = math.ceil(floor / replicas_per_node)
    raise SizingError(f"{head}. It does not pay for the minimum of {floor} replica(s): {min_nodes} node(s) at "
                      f"${node_monthly:,.0f}/month each ({replicas_per_node} replica(s) per node) plus ${fixed:,.0f}/month "
                      f"of load balancer and keys: raise budget.max_monthly_usd to >= "
                      f"{math.ceil(min_nodes * node_monthly + fixed)}, allow cheaper hardware, or relax the SLO")


def _autoscaling_bounds(req: Requirements, env: str, replicas: int, *, can_scale_to_zero: bool,
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


def _cooldown_s(startup: StartupBudget) -> int:
    return max(defaults.SCALE_IN_COOLDOWN_MIN_S, startup.total_s + 60)


def _fmt(value: float | None) -> str:
    return "(no target)" if value is None else f"<= {value:g} ms"


@dataclass(frozen=True)
class PlanContext:
    """What every environment's plan shares: the plan date, the platforms services land on, each environment's
    guardrails (and the rationale of the choices they made, `notes`), and the hardware of the existing stack configs
    by stack name with the tolerance for keeping it."""

    as_of: dt.date
    platforms: Mapping[str, PlatformConfig]
    guardrails: Mapping[str, Guardrails] = field(default_factory=dict)
    existing: Mapping[str, Hardware] = field(default_factory=dict)
    switch_threshold_pct: float = defaults.SWITCH_THRESHOLD_PCT
    notes: Mapping[str, list[str]] = field(default_factory=dict)

    def limits(self, req: Requirements, env: str, *, managed: bool) -> SearchLimits:
        """The environment's search constraints: its policy's instance types and GPU quota (counted over the
        platform's zones) and its max_replicas."""
        return SearchLimits(guardrails=self.guardrails.get(env),
                            zones=zones_of(self.platform(req, env, managed=managed)) or 1,
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
    """Who reaches the service and through what (`blueprints.cluster_exposure`); SageMaker endpoints have no
    Kubernetes exposure."""
    if managed:
        return Network(private_only=req.compliance.private_only, load_balancer_idle_timeout_s=idle_timeout_s,
                       exposure=Exposure())
    resolved = resolve_exposure(req.operations, req.exposure)
    return Network(private_only=req.compliance.private_only, load_balancer_idle_timeout_s=idle_timeout_s,
                   exposure=resolved.exposure(req.exposure), exposed_by=resolved.exposed_by)


def _common(req: Requirements, env: str, ctx: PlanContext, *, managed: bool, idle_timeout_s: int) -> dict:
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
                       latency_p95_ms=req.slo.latency_p95_ms, latency_p99_ms=req.slo.latency_p99_ms,
                       availability_pct=req.slo.availability_pct),
    )


def access_reasons(req: Requirements, *, managed: bool) -> list[str]:
    """Who can reach the endpoint, in plain words (the plan's rationale)."""
    if managed:
        notes = ["access: a SageMaker endpoint is IAM-authorised: callers sign requests (SigV4) with a role allowed "
                 "sagemaker:InvokeEndpoint on it" + (", from inside the platform's VPC (private_only)"
                                                     if req.compliance.private_only else "")]
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


def _capacity(req: Requirements, env: str, *, managed: bool) -> CapacityType:
    return CapacityType.SPOT if req.environments[env].spot and not managed else CapacityType.ON_DEMAND


def _cost_notes(req: Requirements, env: str, catalog: Catalog, *, managed: bool) -> list[str]:
    """Caveats on the cost: prices quoted for another region, spot estimates, spot not offered (none for an edge
    cluster's owned hardware, which has no list price)."""
    if req.hardware.edge_nodes is not None and not managed:
        return []
    region = req.environments[env].region
    notes = [] if region == catalog.price_region else [
        f"costs use the catalog's {catalog.price_region} list prices; {region} prices differ, so "
        "check them before relying on the budget"]
    return notes + _spot_notes(req, env, managed=managed)


def _spot_notes(req: Requirements, env: str, *, managed: bool) -> list[str]:
    if not req.environments[env].spot:
        return []
    if managed:
        return ["environments.{}.spot is ignored: SageMaker real-time endpoints run on-demand only".format(env)]
    return ["spot capacity: prices are estimates (on-demand x catalog spot_price_factor) and nodes can be reclaimed"]


# --- LLMs ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _LlmPlan:
    """The chosen LLM option, the search behind it, its simulated run at this environment's peak, and the
    reasons."""

    best: LlmOption
    search: LlmSearch
    at_peak: SimulationResult
    reasons: list[str]


def _llm_hardware(option: LlmOption, *, managed: bool) -> Hardware:
    return Hardware(archetype=Archetype.SAGEMAKER_ENDPOINT if managed else Archetype.VLLM_GPU,
                    instance_type=option.instance.instance_type, tensor_parallel_size=option.tensor_parallel_size,
                    kv_cache_dtype=None if managed else option.kv_cache_dtype)


def _llm_plan(req: Requirements, env: str, model: ResolvedModel, catalog: Catalog, ctx: PlanContext, *,
              managed: bool) -> _LlmPlan:
    """The cheapest option within the SLO and the environment's constraints, or the existing stack config's hardware
    while it stays within `ctx.switch_threshold_pct` of it (`blueprints.stability`).

    Raises:
        SizingError: no option meets the SLO within the constraints; the message names the binding one.
    """
    limits = ctx.limits(req, env, managed=managed)
    search = llm_search(req, env, model, catalog, managed=managed, limits=limits)
    if search.best is None:
        raise SizingError(explain_no_llm_option(req, env, model, catalog, managed=managed, limits=limits))
    best, at_peak = search.best, search.at_peak
    headline = None
    previous = ctx.existing.get(f"{req.service}-{env}")
    if previous is not None and previous.archetype is (Archetype.SAGEMAKER_ENDPOINT if managed else Archetype.VLLM_GPU):
        fixed = service_fixed_monthly_usd(req, env, catalog, managed=managed)
        month = catalog.hours_per_month
        kept = llm_option_on(req, env, model, catalog, instance_type=previous.instance_type,
                             tensor_parallel_size=previous.tensor_parallel_size or 0,
                             kv_cache_fp8=previous.kv_cache_dtype == "fp8", managed=managed, limits=limits)
        keep, headline = decide(
            previous, _llm_hardware(best, managed=managed),
            cheapest_usd=best.monthly_node_usd_per_hour * month + fixed,
            previous_usd=None if isinstance(kept, str) else kept[0].monthly_node_usd_per_hour * month + fixed,
            unavailable=kept if isinstance(kept, str) else None, threshold_pct=ctx.switch_threshold_pct)
        if keep:
            best, at_peak = kept  # type: ignore[misc]
    best = complete_sizing(best, model, req, env, managed=managed)
    return _LlmPlan(best, search, at_peak, _llm_reasons(req, env, model, best, search, at_peak, catalog,
                                                         managed=managed, headline=headline))


def _ruled_out(search: LlmSearch, catalog: Catalog) -> list[str]:
    """The cheapest option each constraint ruled out, when it was cheaper than the plan (what the guardrail costs)."""
    chosen = search.best.monthly_node_usd_per_hour * catalog.hours_per_month if search.best is not None else math.inf
    seen, out = set(), []
    for r in search.rejected:
        if r.breach.constraint in seen or r.monthly_usd >= chosen:
            continue
        seen.add(r.breach.constraint)
        out.append(f"ruled out by {r.breach.constraint}: {r.what}, "
                   f"{'' if r.simulated else 'at least '}${r.monthly_usd:,.0f}/month for nodes, {r.breach.why}")
    return out


def _lengths(model: ResolvedModel) -> str:
    shape = traffic_shape(model)
    return (f"prompts {shape.inputs.mean} tokens (p95 {shape.inputs.p95}), outputs {shape.outputs.mean} "
            f"(p95 {shape.outputs.p95})")


def _llm_reasons(req: Requirements, env: str, model: ResolvedModel, best: LlmOption, search: LlmSearch,
                 at_peak: SimulationResult, catalog: Catalog, *, managed: bool, headline: str | None) -> list[str]:
    """Why this option: what the search compared (and what it ruled out), its engine limits, its simulated p95s, the
    KV-cache dtype and the runner-up; `headline` (kept or switched hardware, `blueprints.stability`) goes first."""
    inst, tp, sizing = best.instance, best.tensor_parallel_size, best.sizing
    cand = best.candidate
    peak = peak_rps(req, env, model)
    cheapest = search.best is not None and _llm_hardware(best, managed=managed) == _llm_hardware(search.best,
                                                                                                 managed=managed)
    why = [] if headline is None else [headline]
    why += [
        f"{inst.instance_type} ({inst.gpu_count}x {best.gpu.model}) with tensor_parallel_size={tp}: "
        f"{'cheapest' if cheapest else 'kept'} of {len(search.options)} option(s) meeting TTFT p95 "
        f"{_fmt(req.slo.ttft_p95_ms)} and ITL p95 {_fmt(req.slo.itl_p95_ms)} within the constraints "
        f"({search.screened} candidates screened analytically, the {search.simulated} that could be cheapest "
        "simulated)",
        f"each replica runs at most {cand.max_num_seqs} sequences (max_num_seqs: the largest batch whose decode "
        "step keeps token gaps within the ITL target and whose mean-length requests its "
        f"{cand.model.kv_cache_tokens:,} KV-cache tokens hold)"
        + ("" if managed else f" and computes at most {cand.max_num_batched_tokens} tokens a step "
           "(max_num_batched_tokens: a prompt chunk never stretches a token gap past the ITL target)"),
        f"simulated with {model.traffic.pattern.value} arrivals and {_lengths(model)}: one replica meets the SLO up "
        f"to {sizing.max_rps:.2f} requests/s (saturates near {cand.saturation_rps:.2f})",
        f"{best.replicas} replica(s) for {peak:g} requests/s at peak, {peak / best.replicas:.2f} each: TTFT p50/p95 "
        f"{at_peak.ttft_ms.p50:.0f}/{at_peak.ttft_ms.p95:.0f} ms, ITL p50/p95 {at_peak.itl_ms.p50:.1f}/"
        f"{at_peak.itl_ms.p95:.1f} ms, request latency p95 {at_peak.e2e_ms.p95 / 1e3:.1f} s, "
        f"{at_peak.mean_running:.1f} sequences running on average",
    ]
    if not managed and best.gpu.supports_fp8:
        twin = size_twin(best, model, req, env, catalog, kv_cache_fp8=best.kv_cache_dtype != "fp8")
        month = catalog.hours_per_month
        if best.kv_cache_dtype == "fp8":
            other = (f"a 16-bit cache would need {twin.replicas} replica(s), "
                     f"${twin.monthly_node_usd_per_hour * month:,.0f}/month for nodes against "
                     f"${best.monthly_node_usd_per_hour * month:,.0f}" if twin else
                     "a 16-bit cache cannot meet the SLO on it")
            why.append(f"FP8 KV cache (kv_cache_dtype fp8, supported on {best.gpu.model}): it holds twice the tokens "
                       f"of a 16-bit cache and reads half the bytes per step; on {inst.instance_type} {other}. "
                       "FP8 KV (E4M3, per-tensor scales) costs little accuracy (vLLM docs, quantized KV cache)")
        elif twin is not None and twin.monthly_node_usd_per_hour < best.monthly_node_usd_per_hour - 1e-9:
            why.append(f"16-bit KV cache, as the existing stack config has it: FP8 (supported on {best.gpu.model}) "
                       f"would need {twin.replicas} replica(s), ${twin.monthly_node_usd_per_hour * month:,.0f}/month "
                       "for nodes")
        else:
            why.append(f"16-bit KV cache: FP8 (supported on {best.gpu.model}) would not lower the cost here")
    why += _ruled_out(search, catalog)
    runner_up = next((o for o in search.options if o.instance.instance_type != inst.instance_type), None)
    if runner_up:
        why.append(f"next cheapest: {runner_up.instance.instance_type} at "
                   f"${runner_up.monthly_node_usd_per_hour * catalog.hours_per_month:,.0f}/month for "
                   f"{'instances' if inst.instance_type.startswith('ml.') else 'GPU nodes'}")
    return why


def _llm_predictions(req: Requirements, env: str, model: ResolvedModel, plan_: _LlmPlan, lines: list[CostLine],
                     catalog: Catalog, *, managed: bool) -> Predictions:
    best, run = plan_.best, plan_.at_peak
    monthly = round(sum(line.monthly_usd for line in lines), 2)
    tokens_per_month = peak_rps(req, env, model) * model.traffic.mean_output_tokens * 3600 * catalog.hours_per_month
    capacity_rps = best.sizing.max_rps * best.replicas
    return Predictions(
        ttft_p95_ms=round(run.ttft_ms.p95, 1), itl_p95_ms=round(run.itl_ms.p95, 2),
        latency_p95_ms=round(run.e2e_ms.p95, 1),
        output_tokens_per_s=round(capacity_rps * model.traffic.mean_output_tokens, 1),
        requests_per_s_capacity=round(capacity_rps, 3),
        concurrency_per_replica=best.concurrency, monthly_cost_usd=monthly, cost_lines=lines,
        cost_is_estimate=_capacity(req, env, managed=managed) is CapacityType.SPOT,
        usd_per_million_output_tokens=round(monthly / tokens_per_month * 1e6, 3))


def _llm_compute(req: Requirements, env: str, best: LlmOption, served: ServedModel, *, managed: bool) -> Compute:
    inst, tp = best.instance, best.tensor_parallel_size
    share = tp / inst.gpu_count  # this replica's share of the node
    shm_gib = defaults.SHM_GIB_PER_TP_RANK * tp
    return Compute(
        accelerator=Accelerator.NVIDIA_GPU, instance_type=inst.instance_type, gpu=best.gpu.name,
        gpus_per_node=inst.gpu_count, gpus_per_replica=tp, vcpus_per_node=inst.vcpus,
        memory_gib_per_node=inst.memory_gib,
        cpu_per_replica=max(1, math.floor(inst.vcpus * share * defaults.NODE_ALLOCATABLE_CPU_FRACTION)),
        memory_gib_per_replica=max(math.floor(inst.memory_gib * share * 0.8), vllm_host_memory_gib(shm_gib)),
        ephemeral_storage_gib_per_replica=replica_ephemeral_gib([served.weights_gib]),
        replicas=best.replicas, capacity_type=_capacity(req, env, managed=managed), cpu_arch=CpuArch(inst.cpu_arch))


def _plan_vllm(req: Requirements, env: str, models: list[ResolvedModel], catalog: Catalog,
               selection: Selection, ctx: PlanContext) -> Blueprint:
    model = models[0]
    llm = _llm_plan(req, env, model, catalog, ctx, managed=False)
    best, run = llm.best, llm.at_peak
    inst, tp, cand = best.instance, best.tensor_parallel_size, best.candidate
    dtype, quantization = vllm_dtype(model.spec.precision, model.spec.quantization_method, best.gpu)
    served = _served_model(model, req, env)
    startup = startup_budget(weights_gib=served.weights_gib, engine_kind="vllm", gpu=True)
    lines = _cost_lines(req, env, catalog, what="GPU nodes", instance_type=inst.instance_type, nodes=best.nodes,
                        usd_per_hour=best.node_usd_per_hour, managed=False)
    check_budget(req, env, catalog, lines=lines, what=f"vllm-gpu, {best.nodes}x {inst.instance_type}",
                 replicas=best.replicas, replicas_per_node=inst.gpu_count // tp,
                 node_usd_per_hour=best.node_usd_per_hour, managed=False)
    floor, ceiling, capped = _autoscaling_bounds(req, env, best.replicas, can_scale_to_zero=True,
                                                 **_quota_cap(ctx, req, env, per_node=inst.gpu_count // tp,
                                                              gpus_per_node=inst.gpu_count))
    longest_s = (run.ttft_ms.p95 + (model.max_context_tokens - model.traffic.mean_input_tokens)
                 * run.itl_ms.p95) / 1e3
    return Blueprint(
        **_common(req, env, ctx, managed=False,
                  idle_timeout_s=min(4000, max(defaults.AWS_LB_DEFAULT_IDLE_TIMEOUT_S, math.ceil(longest_s)))),
        archetype=Archetype.VLLM_GPU, models=[served],
        compute=_llm_compute(req, env, best, served, managed=False),
        engine=VllmEngine(image=defaults.VLLM_IMAGE, tensor_parallel_size=tp,
                          gpu_memory_utilization=defaults.GPU_MEMORY_UTILIZATION,
                          max_model_len=model.max_context_tokens, max_num_seqs=cand.max_num_seqs,
                          max_num_batched_tokens=cand.max_num_batched_tokens, dtype=dtype,
                          quantization=quantization, kv_cache_dtype=best.kv_cache_dtype,  # type: ignore[arg-type]
                          shm_size_gib=defaults.SHM_GIB_PER_TP_RANK * tp),
        startup=startup,
        # The target is set from the replica model once the blueprint exists (`scaling_plan.scaling_targets`).
        autoscaling=Autoscaling(min_replicas=floor, max_replicas=ceiling, metric="vllm:num_requests_running",
                                target=1.0, cooldown_s=_cooldown_s(startup)),
        predictions=_llm_predictions(req, env, model, llm, lines, catalog, managed=False),
        rationale=[*selection.reasons, *llm.reasons, *capped, *access_reasons(req, managed=False),
                   *_cost_notes(req, env, catalog, managed=False)],
    )


# --- SageMaker -------------------------------------------------------------------------------------------------------


def sagemaker_timers(model_names: str, weights: float) -> tuple[StartupBudget, int, int, int]:
    """The startup budget and the SageMaker timers derived from it: (budget, startup health-check timeout, download
    timeout, volume GiB). Raises SizingError when a timer exceeds SageMaker's limits."""
    startup = startup_budget(weights_gib=weights, engine_kind="sagemaker", gpu=True)
    low, high = defaults.SAGEMAKER_TIMEOUT_RANGE_S
    health = math.ceil(defaults.SAGEMAKER_TIMEOUT_SAFETY_FACTOR * startup.pod_start_s)
    download = math.ceil(defaults.SAGEMAKER_TIMEOUT_SAFETY_FACTOR * startup.weights_download_s)
    volume = math.ceil(weights * defaults.SAGEMAKER_VOLUME_WEIGHTS_FACTOR + defaults.SAGEMAKER_VOLUME_SCRATCH_GIB)
    if max(health, download) > high or volume > defaults.SAGEMAKER_MAX_VOLUME_GIB:
        raise SizingError(f"{model_names}: {weights:.0f} GiB of weights need a {health} s startup health check and "
                          f"{volume} GiB of volume, beyond SageMaker's {high} s / {defaults.SAGEMAKER_MAX_VOLUME_GIB} GiB "
                          "limits; set operations.preference: self-hosted (vllm-gpu) or lower model.precision")
    return startup, max(low, health), max(low, download), volume


def _plan_sagemaker(req: Requirements, env: str, models: list[ResolvedModel], catalog: Catalog,
                    selection: Selection, ctx: PlanContext) -> Blueprint:
    model = models[0]
    served = _served_model(model, req, env)
    image = catalog.sagemaker_image(sagemaker_engine(models)).uri(req.environments[env].region)
    startup, health_s, download_s, volume = sagemaker_timers(served.name, served.weights_gib)
    timers = (f"startup health check {health_s} s and model download {download_s} s "
              f"({defaults.SAGEMAKER_TIMEOUT_SAFETY_FACTOR:g}x the {startup.pod_start_s} s predicted download + load), "
              f"{volume} GiB volume")
    if model.task.generative:
        llm = _llm_plan(req, env, model, catalog, ctx, managed=True)
        best = llm.best
        inst, replicas, rps_per_instance = best.instance, best.replicas, best.sizing.max_rps
        compute = _llm_compute(req, env, best, served, managed=True)
        engine = SageMakerEngine(image=image, initial_instance_count=replicas,
                                 container_startup_health_check_timeout_s=health_s,
                                 model_data_download_timeout_s=download_s, volume_size_gib=volume,
                                 tensor_parallel_degree=best.tensor_parallel_size,
                                 max_model_len=model.max_context_tokens, max_rolling_batch_size=best.concurrency)
        sized = llm.reasons
    else:
        option, sized = _nongen_option(req, env, models, catalog, ctx, archetype=Archetype.SAGEMAKER_ENDPOINT,
                                       accelerator=Accelerator.NVIDIA_GPU)
        inst, replicas = option.instance, option.replicas
        rps_per_instance = option.requests_per_s_capacity / replicas
        compute = _nongen_compute(req, env, option, [served], managed=True)
        engine = SageMakerEngine(image=image, initial_instance_count=replicas,
                                 container_startup_health_check_timeout_s=health_s,
                                 model_data_download_timeout_s=download_s, volume_size_gib=volume)
    lines = _cost_lines(req, env, catalog, what="SageMaker instances", instance_type=inst.instance_type, nodes=replicas,
                        usd_per_hour=inst.usd_per_hour, managed=True)
    check_budget(req, env, catalog, lines=lines, what=f"sagemaker-endpoint, {replicas}x {inst.instance_type}",
                 replicas=replicas, replicas_per_node=1, node_usd_per_hour=inst.usd_per_hour, managed=True)
    floor, ceiling, _ = _autoscaling_bounds(req, env, replicas, can_scale_to_zero=False)
    notes = _cost_notes(req, env, catalog, managed=True)
    if req.environments[env].min_replicas == 0:
        notes.append(f"environments.{env}.min_replicas=0 raised to 1: a SageMaker real-time endpoint keeps one "
                     "instance")
    if model.task.generative:
        predictions = _llm_predictions(req, env, model, llm, lines, catalog, managed=True)
    else:
        predictions = _nongen_predictions(req, env, option, lines)
    return Blueprint(
        **_common(req, env, ctx, managed=True, idle_timeout_s=defaults.AWS_LB_DEFAULT_IDLE_TIMEOUT_S),
        archetype=Archetype.SAGEMAKER_ENDPOINT, models=[served], compute=compute, engine=engine, startup=startup,
        autoscaling=Autoscaling(
            min_replicas=floor, max_replicas=ceiling, metric="SageMakerVariantInvocationsPerInstance",
            target=planned_target(rps_per_instance * defaults.SAGEMAKER_INVOCATIONS_SAFETY_FACTOR * 60),
            cooldown_s=_cooldown_s(startup)),
        predictions=predictions,
        rationale=[*selection.reasons, *sized, f"SageMaker timers from one startup budget: {timers}",
                   *access_reasons(req, managed=True), *notes],
    )


# --- Non-generative: Triton and ONNX Runtime --------------------------------------------------------------------------

#: Triton's python backend runs `<model>/<version>/model.py` in the server's own Python, which in the pinned image has
#: no PyTorch or transformers: they come as the model's execution environment (a conda-pack archive named by the
#: `EXECUTION_ENV_PATH` parameter). Source: triton-inference-server/python_backend README, "Usage" and "Creating
#: Custom Execution Environments".
PYTHON_BACKEND_NOTE = ("Triton's python backend runs the model.py shipped with the weights (the source prefix lands in "
                       "models/{name}/1/) in the server's own Python; the pinned image has no PyTorch or "
                       "transformers, so ship them as an execution environment archive (python_backend "
                       "EXECUTION_ENV_PATH)")


def _triton_backend(model: ResolvedModel, accelerator: Accelerator) -> str:
    """The Triton backend serving `model`'s format; a python-backend model must come from an `s3://` prefix that
    holds its model.py (a Hugging Face download keeps weights, configs and tokenizer files only)."""
    if TRITON_BACKEND.get(model.spec.format) == "python" and model.spec.weights_uri.startswith("hf://"):
        raise RequirementsError(
            f"{model.path}.weights_uri: format {model.spec.format.value} on Triton runs the python backend, which "
            f"loads a model.py from the model's folder; {model.spec.weights_uri} is a Hugging Face download without "
            "one: give an s3:// weights_uri holding model.py beside the weights, or export the model to ONNX "
            "(format: onnx)", rule="servable-format")
    backend = TRITON_BACKEND.get(model.spec.format)
    if backend is None or (backend == "tensorrt" and accelerator is Accelerator.CPU):
        allowed = [f.value for f in TRITON_BACKEND
                   if accelerator is Accelerator.NVIDIA_GPU or f is not ModelFormat.TENSORRT]
        raise RequirementsError(f"{model.path}.format={model.spec.format.value}: Triton on "
                                f"{'GPU' if accelerator is Accelerator.NVIDIA_GPU else 'CPU'} serves {allowed}; "
                                "export the model to one of them (ONNX is the most portable)", rule="servable-format")
    return backend


def _nongen_hardware(option: NongenOption, archetype: Archetype) -> Hardware:
    return Hardware(archetype=archetype, instance_type=option.instance.instance_type,
                    cpu_per_replica=None if option.gpu else option.cpu_per_replica)


def _nongen_option(req: Requirements, env: str, models: list[ResolvedModel], catalog: Catalog, ctx: PlanContext, *,
                   archetype: Archetype, accelerator: Accelerator) -> tuple[NongenOption, list[str]]:
    """The cheapest option within the latency budget and the environment's constraints (or the existing stack
    config's hardware while it stays within `ctx.switch_threshold_pct` of it), and why.

    Raises:
        SizingError: no option meets the budget within the constraints; the message names the binding one.
    """
    managed = archetype is Archetype.SAGEMAKER_ENDPOINT
    limits = ctx.limits(req, env, managed=managed)
    options = search_nongen_options(req, env, models, catalog, accelerator=accelerator, managed=managed, limits=limits)
    if not options:
        raise SizingError(explain_infeasible_nongen(req, models, catalog, accelerator=accelerator, managed=managed,
                                                    env=env, limits=limits))
    best, headline = options[0], None
    previous = ctx.existing.get(f"{req.service}-{env}")
    if previous is not None and previous.archetype is archetype:
        fixed = service_fixed_monthly_usd(req, env, catalog, managed=managed)
        month = catalog.hours_per_month
        kept = next((o for o in options if _nongen_hardware(o, archetype) == previous), None)
        keep, headline = decide(
            previous, _nongen_hardware(best, archetype),
            cheapest_usd=best.nodes * best.node_usd_per_hour * month + fixed,
            previous_usd=kept.nodes * kept.node_usd_per_hour * month + fixed if kept else None,
            unavailable=None if kept else "it no longer meets the latency budget within the constraints",
            threshold_pct=ctx.switch_threshold_pct)
        if keep:
            best = kept  # type: ignore[assignment]
    return best, [*([headline] if headline else []),
                  *_nongen_reasons(req, env, best, catalog, cheapest=best is options[0])]


def _quota_cap(ctx: PlanContext, req: Requirements, env: str, *, per_node: int, gpus_per_node: int) -> dict:
    """`_autoscaling_bounds`' keywords for the GPU quota of a self-hosted environment."""
    limits = ctx.limits(req, env, managed=False)
    cap = limits.autoscaling_cap(per_node=per_node, gpus_per_node=gpus_per_node)
    return {} if cap is None else {"quota_cap": cap, "quota_source": f"maxGpus={limits.max_gpus} "
                                   f"({limits.guardrails.source}, gpu-quota)"}  # type: ignore[union-attr]


def _nongen_compute(req: Requirements, env: str, option: NongenOption, served: list[ServedModel], *,
                    managed: bool = False) -> Compute:
    inst = option.instance
    owned = inst if isinstance(inst, OwnedNodeShape) else None
    return Compute(
        accelerator=Accelerator.NVIDIA_GPU if option.gpu else Accelerator.CPU,
        instance_type=None if owned else inst.instance_type, owned_nodes=owned.count if owned else None,
        gpu=option.gpu.name if option.gpu else None, gpus_per_node=inst.gpu_count,
        gpus_per_replica=option.gpus_per_replica, vcpus_per_node=inst.vcpus, memory_gib_per_node=inst.memory_gib,
        cpu_per_replica=option.cpu_per_replica, memory_gib_per_replica=option.memory_gib_per_replica,
        ephemeral_storage_gib_per_replica=replica_ephemeral_gib(s.weights_gib for s in served),
        replicas=option.replicas, capacity_type=_capacity(req, env, managed=managed), cpu_arch=CpuArch(inst.cpu_arch))


def _nongen_reasons(req: Requirements, env: str, option: NongenOption, catalog: Catalog, *,
                    cheapest: bool = True) -> list[str]:
    inst = option.instance
    if isinstance(inst, OwnedNodeShape):
        source = ("hardware.edge_nodes.gflops_per_vcpu" if req.hardware.edge_nodes
                  and req.hardware.edge_nodes.gflops_per_vcpu else f"{inst.cpu_arch} default [assumption]")
        shape = f"{option.cpu_per_replica} vCPU ({inst.gflops_per_vcpu:g} GFLOP/s per vCPU, {source})"
    else:
        shape = (f"{option.gpus_per_replica} GPU ({option.gpu.model})" if option.gpu
                 else f"{option.cpu_per_replica} vCPU ({inst.family}, {catalog.cpu_gflops(inst):g} GFLOP/s per vCPU "
                      "[unverified])")
    choice = ("the replica shape using the fewest owned nodes" if isinstance(inst, OwnedNodeShape)
              else "the cheapest option" if cheapest else "the kept option")
    why = [f"{inst.instance_type}, {shape} per replica: {choice} meeting a p95 request latency of "
           f"{latency_target_ms(req):g} ms"
           + ("" if req.slo.latency_p95_ms or req.slo.latency_p99_ms else " (default budget; set slo.latency_p95_ms)")]
    for ld in option.loads:
        source = "measured latency" if ld.model.spec.measured_latency_ms else "catalog FLOPs"
        if ld.model.task.autoregressive:
            source += (f"; an encoder pass and {ld.model.traffic.mean_output_tokens} decode steps, each reading the "
                       "decoder's weights, so it scales between GPUs with memory bandwidth")
        batching = (f"max_batch_size {ld.max_batch_size}, max_queue_delay {ld.max_queue_delay_ms:.1f} ms, "
                    if option.gpu else "")
        why.append(f"{ld.model.spec.served_name}: {ld.gflops_per_request:.1f} GFLOP per request ({source}); "
                   f"{batching}{ld.batch_ms:.1f} ms per {'batch' if option.gpu else 'request'}, p95 "
                   f"{ld.latency_p95_ms:.0f} ms, {ld.requests_per_s_per_replica:,.0f} requests/s per replica "
                   f"at full load, {peak_rps(req, env, ld.model):g} requests/s at peak")
    why.append(f"{option.replicas} replica(s) on {option.nodes} node(s) ({option.replicas_per_node} per node) keep "
               "each replica under its target utilisation")
    return why


def _nongen_predictions(req: Requirements, env: str, option: NongenOption, lines: list[CostLine]) -> Predictions:
    instances = defaults.TRITON_GPU_INSTANCES if option.gpu else 1
    return Predictions(
        models=[ModelLatency(name=ld.model.spec.served_name, latency_p95_ms=round(ld.latency_p95_ms, 1),
                             batch_ms=round(ld.batch_ms, 2), concurrent_requests=ld.max_batch_size * instances)
                for ld in option.loads],
        latency_p95_ms=round(option.latency_p95_ms, 1),
        requests_per_s_capacity=round(option.requests_per_s_capacity, 3),
        concurrency_per_replica=max(ld.max_batch_size for ld in option.loads) * instances,
        monthly_cost_usd=round(sum(line.monthly_usd for line in lines), 2), cost_lines=lines,
        cost_is_estimate=_capacity(req, env, managed=False) is CapacityType.SPOT)


def _plan_nongen(req: Requirements, env: str, models: list[ResolvedModel], catalog: Catalog,
                 selection: Selection, ctx: PlanContext) -> Blueprint:
    """Triton (one or several models, GPU or CPU) or ONNX Runtime on CPU."""
    onnx = selection.archetype is Archetype.ONNX_CPU
    backends = [None if onnx else _triton_backend(m, selection.accelerator) for m in models]
    option, sized = _nongen_option(req, env, models, catalog, ctx, archetype=selection.archetype,
                                   accelerator=selection.accelerator)
    served = [_served_model(m, req, env) for m in models]
    inst = option.instance
    owned = inst if isinstance(inst, OwnedNodeShape) else None
    startup = startup_budget(weights_gib=sum(s.weights_gib for s in served),
                             engine_kind="onnxruntime" if onnx else "triton", gpu=option.gpu is not None,
                             owned_nodes=owned is not None)
    lines = (owned_cost_lines(owned, option.nodes, catalog) if owned is not None else
             _cost_lines(req, env, catalog, what="GPU nodes" if option.gpu else "CPU nodes",
                         instance_type=inst.instance_type, nodes=option.nodes,
                         usd_per_hour=option.node_usd_per_hour, managed=False))
    check_budget(req, env, catalog, lines=lines,
                 what=f"{selection.archetype.value}, {option.nodes}x {inst.instance_type}",
                 replicas=option.replicas, replicas_per_node=option.replicas_per_node,
                 node_usd_per_hour=option.node_usd_per_hour, managed=False)
    quota = _quota_cap(ctx, req, env, per_node=option.replicas_per_node, gpus_per_node=inst.gpu_count)
    floor, ceiling, capped = _autoscaling_bounds(req, env, option.replicas,
                                                 can_scale_to_zero=not onnx and owned is None, **quota)
    if owned is not None:
        ceiling = bounded_ceiling(req, env, ceiling=ceiling, owned=owned, per_node=option.replicas_per_node,
                                  replicas=option.replicas)
    utilization = min(defaults.TARGET_UTILIZATION[m.traffic.pattern.value] for m in models)
    cpu_target = planned_target(utilization * 100, whole=True)
    edge_scaling = None
    if owned is not None:
        edge_scaling = edge_autoscaling(req, selection.archetype, floor=floor, ceiling=ceiling,
                                        replicas=option.replicas, keda_metric="nv_inference_pending_request_count",
                                        cpu_target=cpu_target, cooldown_s=_cooldown_s(startup))
    if onnx:
        engine = OnnxRuntimeEngine(image=defaults.ONNXRUNTIME_IMAGE, intra_op_threads=option.cpu_per_replica)
        scaling = Autoscaling(min_replicas=floor, max_replicas=ceiling, metric="cpu",
                              target=cpu_target, cooldown_s=_cooldown_s(startup))
        engine_note = (f"ONNX Runtime intra_op_threads={option.cpu_per_replica} = the CPU limit (0 would start one "
                       "thread per host core and oversubscribe the node)")
    else:
        kind = "KIND_GPU" if option.gpu else "KIND_CPU"
        count = defaults.TRITON_GPU_INSTANCES if option.gpu else 1
        engine = TritonEngine(image=defaults.TRITON_IMAGE, models=[
            TritonModelConfig(name=s.name, backend=b, max_batch_size=ld.max_batch_size,  # type: ignore[arg-type]
                              max_queue_delay_microseconds=round(ld.max_queue_delay_ms * 1000), instance_kind=kind,
                              instance_count=count)
            for s, b, ld in zip(served, backends, option.loads)])
        # The target is set from the replica model once the blueprint exists (`scaling_plan.scaling_targets`).
        scaling = Autoscaling(min_replicas=floor, max_replicas=ceiling, metric="nv_inference_pending_request_count",
                              target=1.0, cooldown_s=_cooldown_s(startup))
        engine_note = (f"Triton instance_group {kind} x{count} per model"
                       + (": two instances overlap one batch's data transfer with the other's compute" if option.gpu
                          else "")
                       + "".join(f"; {s.name}: {PYTHON_BACKEND_NOTE.format(name=s.name)}"
                                 for s, b in zip(served, backends) if b == "python"))
    edge_notes: list[str] = []
    if owned is not None and edge_scaling is not None:
        scaling, scaling_note = edge_scaling
        edge_notes = edge_reasons(req, env, owned=owned, replicas=option.replicas, per_node=option.replicas_per_node,
                                  cpu=option.cpu_per_replica, nodes=option.nodes, ceiling=scaling.max_replicas,
                                  scaling_note=scaling_note, roles_anywhere=roles_anywhere_spec(req, env))
        if req.environments[env].min_replicas == 0:
            edge_notes.append(f"environments.{env}.min_replicas=0 raised to {scaling.min_replicas}: an edge cluster's "
                              "service does not scale to zero (no KEDA HTTP interceptor is planned there)")
    return Blueprint(
        **_common(req, env, ctx, managed=False, idle_timeout_s=defaults.AWS_LB_DEFAULT_IDLE_TIMEOUT_S),
        archetype=selection.archetype, models=served, compute=_nongen_compute(req, env, option, served),
        engine=engine, startup=startup, autoscaling=scaling,
        predictions=_nongen_predictions(req, env, option, lines),
        rationale=[*selection.reasons, *sized, engine_note, *capped, *edge_notes,
                   *access_reasons(req, managed=False), *_cost_notes(req, env, catalog, managed=False)],
    )


_BUILDERS: dict[Archetype, Callable[[Requirements, str, list[ResolvedModel], Catalog, Selection, PlanContext],
                                    Blueprint]] = {
    Archetype.VLLM_GPU: _plan_vllm,
    Archetype.SAGEMAKER_ENDPOINT: _plan_sagemaker,
    Archetype.TRITON_MULTI_MODEL: _plan_nongen,
    Archetype.ONNX_CPU: _plan_nongen,
}


def default_kubernetes_version(as_of: dt.date) -> str:
    """The newest EKS version in standard support on `as_of` that every pinned add-on supports (as a platform's)."""
    from blueprints.platform_plan import BASE_ADDONS, GPU_ADDONS, choose_kubernetes_version

    version, _, _ = choose_kubernetes_version(load_platform_catalog(), [*BASE_ADDONS, *GPU_ADDONS], as_of, wanted=None,
                                              source="blueprints/catalog")
    return version


def _land(bp: Blueprint, ctx: PlanContext, req: Requirements) -> Blueprint:
    """Name the shared platform and its cost in the service's predictions and rationale."""
    platform = ctx.platform(req, bp.environment, managed=bp.archetype is Archetype.SAGEMAKER_ENDPOINT)
    if platform is None:
        return bp
    what = "cluster" if bp.platform.kind == "eks" else "VPC"
    note = (f"lands on the shared platform {platform.stack} ({what}, ${platform.monthly_cost_usd:,.0f}/month, shared "
            f"by {len(platform.services)} stack(s), not included in this service's cost)")
    predictions = bp.predictions.model_copy(update={"platform_monthly_cost_usd": platform.monthly_cost_usd})
    return bp.model_copy(update={"predictions": predictions, "rationale": [*bp.rationale, note]})


def plan(req: Requirements, catalog: Catalog, *, as_of: dt.date, environments: list[str] | None = None,
         guardrails: Mapping[str, Guardrails] | None = None,
         platforms: Mapping[str, PlatformConfig] | None = None,
         alerting: AlertingSpec | None = None, existing: Mapping[str, Hardware] | None = None,
         switch_threshold_pct: float = defaults.SWITCH_THRESHOLD_PCT) -> list[Blueprint]:
    """Plan every (or the named) environment of a requirements file.

    Args:
        req: validated requirements.
        catalog: from `load_catalog()`.
        as_of: the plan date (Kubernetes versions and their prices, support-window warnings).
        environments: names to plan; all of `req.environments` (in file order) when omitted.
        guardrails: per environment, the policy pack's limits to plan within (`blueprints.guardrails`): constraints
            of the search (instance types, GPU quota with the surge), choices (on-demand where spot is forbidden)
            and refusals (regions, private endpoints, tags).
        platforms: the planned platforms by name (`blueprints.platform_plan.plan_platforms` over every requirements
            file); when omitted, planned from this file alone with the platform team's defaults.
        alerting: platform.yaml's `alerting` (SNS topics of SageMaker alarms); default: none.
        existing: per stack name (`<service>-<env>`, or a compound service's `<service>-<part>-<env>`), the hardware
            of its existing stack config (`stability.hardware_of`), kept while it stays within
            `switch_threshold_pct` % of the cheapest option.
        switch_threshold_pct: that tolerance, % (0-100).

    Returns:
        One `Blueprint` per environment, in the order planned; for a compound service (`blueprints.compound`) one
        per part and environment, generator first.

    Raises:
        RequirementsError: an environment name is not in the file, the requirements contradict every archetype, or
            they break an environment's policy whatever the plan chooses.
        CatalogError: a model id is unknown.
        SizingError: nothing meets the requirements within the constraints, or the cheapest plan is over budget; the
            message names the binding constraint and by how much to relax it.
    """
    names = environments or list(req.environments)
    unknown = [n for n in names if n not in req.environments]
    if unknown:
        raise RequirementsError(f"--env {', '.join(unknown)}: not in the requirements' environments "
                                f"({', '.join(req.environments)})")
    if not 0 <= switch_threshold_pct <= 100:
        raise RequirementsError(f"--switch-threshold {switch_threshold_pct:g}: a percentage from 0 to 100 (how much "
                                "more the existing hardware may cost than the cheapest and be kept)")
    limits = dict(guardrails or {})
    problems = [p for env in names if env in limits for p in limits[env].problems(req, env)]
    if problems:
        raise RequirementsError("; ".join(problems))
    notes: dict[str, list[str]] = {}
    for env in names:
        if env in limits:
            req, notes[env] = limits[env].apply(req, env)
    if platforms is None:
        from blueprints.platform import PlatformRequirements
        from blueprints.platform_plan import ServiceFile, plan_platforms

        platforms = {p.name: p for p in plan_platforms([ServiceFile(None, req)], PlatformRequirements(),
                                                       catalog=catalog, pcat=load_platform_catalog(), as_of=as_of,
                                                       policy_for=lambda env, production: limits.get(env))}
    ctx = PlanContext(as_of=as_of, platforms=platforms, guardrails=limits, existing=existing or {},
                      switch_threshold_pct=switch_threshold_pct, notes=notes)
    parts = service_parts(req, catalog)
    if len(parts) > 1:  # a compound service: one stack per part, an end-to-end budget over both
        from blueprints.pipeline_plan import plan_pipeline

        return plan_pipeline(req, parts, names, catalog=catalog, plan_part=lambda part, env: _plan_service(
            part, catalog, ctx, [env], alerting=alerting)[0])
    return _plan_service(req, catalog, ctx, names, alerting=alerting)


def _plan_service(req: Requirements, catalog: Catalog, ctx: PlanContext, names: list[str], *,
                  alerting: AlertingSpec | None) -> list[Blueprint]:
    """Plan the environments `names` of one stack-worth of requirements (a service, or a part of a compound one):
    within each environment's guardrails (`ctx`), finished (`scaling_plan.finish`) and with its quota note."""
    planned = _plan_sized(req, catalog, ctx, names)
    from blueprints.quota import quota_note

    spec = alerting or AlertingSpec()
    finished = [finish(bp, ctx.platform(req, bp.environment, managed=bp.archetype is Archetype.SAGEMAKER_ENDPOINT),
                       spec, floor_is_set=req.environments[bp.environment].min_replicas is not None)
                for bp in planned]
    # Last: the service quotas the final plan needs at full scale (`blueprints.quota`).
    return [bp.model_copy(update={"rationale": [*bp.rationale, note]}) if (note := quota_note(bp)) else bp
            for bp in finished]


def _plan_sized(req: Requirements, catalog: Catalog, ctx: PlanContext, names: list[str]) -> list[Blueprint]:
    """Select, size and price each environment (before targets, alerting and simulation: `scaling_plan.finish`),
    and refuse a plan whose Kubernetes version lacks a feature its workloads use (`kubernetes_features`)."""
    models = resolve_models(req, catalog)
    selection = select_archetype(req, models, catalog,
                                 limits_for=lambda env, managed: ctx.limits(req, env, managed=managed))
    build = _BUILDERS[selection.archetype]
    planned = [_land(with_weights_reason(build(req, env, models, catalog, selection, ctx)), ctx, req) for env in names]
    planned = [bp.model_copy(update={"rationale": [*bp.rationale, *ctx.notes[bp.environment]]})
               if ctx.notes.get(bp.environment) else bp for bp in planned]
    for bp in planned:  # every image its pods run must be built for its nodes' architecture
        problems = image_problems(bp)
        if problems:
            raise SizingError(f"environments.{bp.environment}: " + "; ".join(problems))
    problems = [p for bp in planned for p in feature_problems(bp, source=_version_source(req, bp, ctx))]
    if problems:
        raise RequirementsError("; ".join(problems))
    return planned


def _version_source(req: Requirements, bp: Blueprint, ctx: PlanContext) -> str:
    """Where the stack's Kubernetes version comes from (named in a refusal)."""
    if bp.platform.stack:
        return f"the platform {bp.platform.stack} (kubernetes_version in platform.yaml)"
    if req.operations.kubernetes_version is not None:
        return "operations.kubernetes_version"
    return f"the default Kubernetes version on {ctx.as_of}"
