"""Requirements -> one `Blueprint` per environment: choose the archetype, size it, price it, explain it.

Pure: the same `Requirements` and `Catalog` always give the same blueprints (no clock, network or environment).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from blueprints import defaults
from blueprints.blueprint import (
    Archetype,
    Autoscaling,
    Blueprint,
    CapacityType,
    Compute,
    CostLine,
    Network,
    PlatformSpec,
    Predictions,
    ServedModel,
    SloTargets,
    Storage,
    VllmEngine,
)
from blueprints.catalog import Architecture, Catalog, Gpu, InstanceType, Task
from blueprints.errors import RequirementsError, SizingError
from blueprints.requirements import Accelerator, CpuArch, ModelSpec, Precision, Requirements, Traffic
from blueprints.sizing import LlmEstimate, estimate_llm, weights_gib
from blueprints.startup import startup_budget


@dataclass(frozen=True)
class ResolvedModel:
    """A requirements model entry joined with its catalog record."""

    spec: ModelSpec
    traffic: Traffic
    architecture: Architecture
    task: Task
    max_context_tokens: int


def resolve_models(req: Requirements, catalog: Catalog) -> list[ResolvedModel]:
    """Join each requested model with the catalog. Raises `CatalogError` for an unknown id."""
    out = []
    for spec, traffic in req.served_models():
        record = catalog.model(spec.id) if spec.id else None
        arch = spec.architecture or record.architecture  # type: ignore[union-attr]
        task = spec.task or record.task  # type: ignore[union-attr]
        limit = record.max_context_tokens if record else (spec.max_context_tokens or defaults.DEFAULT_MAX_MODEL_LEN)
        wanted = spec.max_context_tokens or min(limit, defaults.DEFAULT_MAX_MODEL_LEN)
        if wanted > limit:
            raise SizingError(f"model.max_context_tokens={wanted} exceeds {spec.id}'s limit of {limit} tokens; "
                              f"lower it to <= {limit}")
        out.append(ResolvedModel(spec, traffic, arch, task, wanted))
    return out


def select_archetype(req: Requirements, models: list[ResolvedModel]) -> tuple[Archetype, list[str]]:
    """Choose the archetype and say why, in plain words.

    Raises:
        SizingError: no archetype serves these requirements yet (the message says which input to change).
    """
    if len(models) == 1 and models[0].task.generative:
        if Accelerator.NVIDIA_GPU not in req.hardware.accelerators:
            raise SizingError("hardware.accelerators excludes nvidia-gpu, but text generation with "
                              f"{models[0].spec.served_name} needs GPUs; add nvidia-gpu")
        return Archetype.VLLM_GPU, [
            f"{models[0].spec.served_name} is a generative model: served token by token by vLLM "
            "(continuous batching, paged KV cache) on GPU nodes",
            f"operations.preference={req.operations.preference.value}: self-hosted on "
            f"{req.operations.platform.value}",
        ]
    raise SizingError("this version plans single generative models (vLLM on GPU); "
                      f"tasks {[m.task.value for m in models]} are not supported yet")


@dataclass(frozen=True)
class LlmOption:
    """One candidate deployment of an LLM: instance type, tensor parallel, per-replica concurrency, replicas."""

    instance: InstanceType
    gpu: Gpu
    tensor_parallel_size: int
    concurrency: int
    estimate: LlmEstimate
    ttft_p95_ms: float
    itl_p95_ms: float
    replicas: int
    nodes: int
    node_usd_per_hour: float


def _candidate_instances(req: Requirements, catalog: Catalog) -> list[InstanceType]:
    families = set(req.hardware.allowed_instance_families)
    return [i for i in catalog.ec2.values() if i.gpu_count and (not families or i.family in families)]


def _tp_degrees(gpus_per_node: int) -> list[int]:
    """Powers of two that divide the node's GPU count (tensor parallel stays within one node)."""
    return [2**k for k in range(0, 4) if 2**k <= gpus_per_node and gpus_per_node % 2**k == 0]


def _p95(est: LlmEstimate) -> tuple[float, float]:
    return est.ttft_ms * defaults.TTFT_P95_FACTOR, est.itl_ms * defaults.ITL_P95_FACTOR


def _estimate(model: ResolvedModel, gpu: Gpu, tp: int, *, concurrency: int,
              precision: Precision | None = None) -> LlmEstimate:
    return estimate_llm(model.architecture, gpu, precision=precision or model.spec.precision, tensor_parallel_size=tp,
                        concurrency=concurrency, input_tokens=model.traffic.mean_input_tokens,
                        output_tokens=model.traffic.mean_output_tokens, max_model_len=model.max_context_tokens)


def _best_concurrency(model: ResolvedModel, gpu: Gpu, tp: int, slo_ttft: float | None, slo_itl: float | None,
                      precision: Precision) -> tuple[int, LlmEstimate] | None:
    """Largest concurrency whose p95 TTFT and ITL meet the SLO (latency grows with concurrency: bisection).

    Returns None when the model does not fit, or even one sequence misses the SLO.
    """

    def at(c: int) -> LlmEstimate:
        return _estimate(model, gpu, tp, concurrency=c, precision=precision)

    def ok(est: LlmEstimate) -> bool:
        ttft, itl = _p95(est)
        return (slo_ttft is None or ttft <= slo_ttft) and (slo_itl is None or itl <= slo_itl)

    first = at(1)
    if not first.fits or first.max_concurrency < 1 or not ok(first):
        return None
    lo, hi = 1, first.max_concurrency
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(at(mid)):
            lo = mid
        else:
            hi = mid - 1
    return lo, at(lo)


def _replicas_floor(req: Requirements, env: str) -> int:
    spec = req.environments[env]
    if spec.min_replicas is not None:
        return max(1, spec.min_replicas)
    if req.is_production(env) and req.slo.availability_pct >= defaults.HIGH_AVAILABILITY_PCT:
        return defaults.MIN_REPLICAS_FOR_HIGH_AVAILABILITY
    return 1


def search_llm_options(req: Requirements, env: str, model: ResolvedModel, catalog: Catalog) -> list[LlmOption]:
    """Every (instance type, tensor parallel) that fits the model and meets the SLO, cheapest first.

    Ties break on lower ITL, then instance type name, so the order is deterministic.
    """
    spec = req.environments[env]
    peak_rps = model.traffic.peak_requests_per_s * spec.traffic_scale
    utilization = defaults.TARGET_UTILIZATION[model.traffic.pattern.value]
    price_factor = catalog.spot_price_factor if spec.spot else 1.0
    options = []
    for inst in _candidate_instances(req, catalog):
        gpu = catalog.gpu(inst.gpu)  # type: ignore[arg-type]
        for tp in _tp_degrees(inst.gpu_count):
            found = _best_concurrency(model, gpu, tp, req.slo.ttft_p95_ms, req.slo.itl_p95_ms, model.spec.precision)
            if found is None:
                continue
            conc, est = found
            replicas = max(_replicas_floor(req, env), math.ceil(peak_rps / (est.requests_per_s * utilization)))
            nodes = math.ceil(replicas / (inst.gpu_count // tp))
            ttft, itl = _p95(est)
            options.append(LlmOption(inst, gpu, tp, conc, est, ttft, itl, replicas, nodes,
                                     inst.usd_per_hour * price_factor))
    options.sort(key=lambda o: (o.nodes * o.node_usd_per_hour, o.itl_p95_ms, o.instance.instance_type,
                                o.tensor_parallel_size))
    return options


def explain_infeasible_llm(req: Requirements, model: ResolvedModel, catalog: Catalog) -> str:
    """Why no option exists, and the nearest feasible alternative (which constraint to relax, by how much)."""
    name = model.spec.served_name
    candidates = _candidate_instances(req, catalog)
    if not candidates:
        return (f"no GPU instance type in the catalog matches hardware.allowed_instance_families="
                f"{req.hardware.allowed_instance_families}; allow one of "
                f"{sorted({i.family for i in catalog.ec2.values() if i.gpu_count})}")
    fitting = []  # (instance, tp, ttft p95 ms, itl p95 ms) at concurrency 1, for options that fit in memory
    for inst in candidates:
        gpu = catalog.gpu(inst.gpu)  # type: ignore[arg-type]
        for tp in _tp_degrees(inst.gpu_count):
            est = _estimate(model, gpu, tp, concurrency=1)
            if est.fits and est.max_concurrency >= 1:
                fitting.append((inst, tp, *_p95(est)))
    if not fitting:
        need = weights_gib(model.architecture, model.spec.precision)
        largest = max(candidates, key=lambda i: i.gpu_count * catalog.gpu(i.gpu).memory_gib)  # type: ignore[arg-type]
        have = largest.gpu_count * catalog.gpu(largest.gpu).memory_gib  # type: ignore[arg-type]
        return (f"{name} needs {need:.0f} GiB of weights at {model.spec.precision.value} plus KV cache for "
                f"max_context_tokens={model.max_context_tokens}, but the largest allowed node ({largest.instance_type}) "
                f"has {have:.0f} GiB of GPU memory; allow a larger family (e.g. p5, p4de) in "
                f"hardware.allowed_instance_families, lower model.precision (fp8, int4) or lower max_context_tokens")
    best_itl = min(fitting, key=lambda f: f[3])
    best_ttft = min(fitting, key=lambda f: f[2])
    parts = []
    if req.slo.itl_p95_ms is not None and best_itl[3] > req.slo.itl_p95_ms:
        parts.append(f"the lowest ITL p95 any allowed option reaches is {best_itl[3]:.1f} ms "
                     f"({best_itl[0].instance_type}, tensor_parallel_size={best_itl[1]}) against slo.itl_p95_ms="
                     f"{req.slo.itl_p95_ms:g}: raise it to >= {math.ceil(best_itl[3])} or allow faster GPUs")
    if req.slo.ttft_p95_ms is not None and best_ttft[2] > req.slo.ttft_p95_ms:
        parts.append(f"the lowest TTFT p95 is {best_ttft[2]:.0f} ms ({best_ttft[0].instance_type}, "
                     f"tensor_parallel_size={best_ttft[1]}) against slo.ttft_p95_ms={req.slo.ttft_p95_ms:g}: raise it "
                     f"to >= {math.ceil(best_ttft[2])}, shorten prompts, or allow faster GPUs")
    if not parts:
        parts.append("the ITL and TTFT targets cannot be met together on one option; relax either")
    return f"no allowed option serves {name} within the SLO: " + "; ".join(parts)


def _vllm_dtype(precision: Precision, gpu: Gpu) -> tuple[str, str | None]:
    """(--dtype, --quantization) for a weight precision. FP8 uses vLLM's fp8 quantization; INT4/INT8 expect
    pre-quantised AWQ/GPTQ checkpoints. GPUs without BF16 (T4) run BF16 checkpoints as float16."""
    if precision is Precision.FP32:
        return "float32", None
    if precision is Precision.FP16 or (precision is Precision.BF16 and not gpu.supports_bf16):
        return "float16", None
    if precision is Precision.BF16:
        return "bfloat16", None
    return "auto", {"fp8": "fp8", "int8": "gptq", "int4": "awq"}[precision.value]


def _tags(req: Requirements, env: str) -> dict[str, str]:
    return {"service": req.service, "environment": env, "owner": req.owner, "cost-center": req.cost_center,
            "managed-by": "servingblueprints"}


def _served_model(m: ResolvedModel) -> ServedModel:
    return ServedModel(name=m.spec.served_name, catalog_id=m.spec.id, task=m.task, format=m.spec.format,
                       precision=m.spec.precision, source_uri=m.spec.weights_uri, params_b=m.architecture.params_b,
                       weights_gib=round(weights_gib(m.architecture, m.spec.precision), 2),
                       max_context_tokens=m.max_context_tokens)


def _cluster_cost_lines(req: Requirements, catalog: Catalog) -> list[CostLine]:
    """Fixed cost of an EKS cluster we create: control plane and the system node group."""
    if req.operations.platform.value != "eks":
        return []
    system = catalog.instance(defaults.SYSTEM_NODE_INSTANCE_TYPE)
    return [
        _line("EKS control plane", 1, catalog.eks_control_plane_usd_per_hour, catalog),
        _line(f"system nodes ({system.instance_type})", defaults.SYSTEM_NODE_COUNT, system.usd_per_hour, catalog),
    ]


def _line(item: str, quantity: float, usd_per_hour: float, catalog: Catalog) -> CostLine:
    return CostLine(item=item, quantity=quantity, usd_per_hour=round(usd_per_hour, 4),
                    monthly_usd=round(quantity * usd_per_hour * catalog.hours_per_month, 2))


def _autoscaling_bounds(req: Requirements, env: str, replicas: int) -> tuple[int, int]:
    spec = req.environments[env]
    floor = spec.min_replicas if spec.min_replicas is not None else _replicas_floor(req, env)
    ceiling = spec.max_replicas if spec.max_replicas is not None else max(2 * replicas, floor, 1)
    if ceiling < replicas:
        raise SizingError(f"environments.{env}.max_replicas={ceiling} is below the {replicas} replicas the peak load "
                          f"needs; raise max_replicas to >= {replicas} or lower traffic_scale")
    return floor, ceiling


def _plan_vllm(req: Requirements, env: str, model: ResolvedModel, catalog: Catalog, reasons: list[str]) -> Blueprint:
    options = search_llm_options(req, env, model, catalog)
    if not options:
        raise SizingError(explain_infeasible_llm(req, model, catalog))
    best = options[0]
    spec = req.environments[env]
    inst, tp, est = best.instance, best.tensor_parallel_size, best.estimate
    dtype, quantization = _vllm_dtype(model.spec.precision, best.gpu)
    served = _served_model(model)
    startup = startup_budget(weights_gib=served.weights_gib, engine_kind="vllm", gpu=True)
    share = tp / inst.gpu_count  # this replica's share of the node
    shm_gib = defaults.SHM_GIB_PER_TP_RANK * tp
    lines = [_line(f"GPU nodes ({inst.instance_type}{', spot' if spec.spot else ''})", best.nodes,
                   best.node_usd_per_hour, catalog), *_cluster_cost_lines(req, catalog)]
    monthly = round(sum(line.monthly_usd for line in lines), 2)
    peak_rps = model.traffic.peak_requests_per_s * spec.traffic_scale
    tokens_per_month = peak_rps * model.traffic.mean_output_tokens * 3600 * catalog.hours_per_month
    floor, ceiling = _autoscaling_bounds(req, env, best.replicas)
    request_s = est.ttft_ms / 1e3 + model.traffic.mean_output_tokens * est.itl_ms / 1e3
    queue_target = 1.0
    if req.slo.ttft_p95_ms is not None:  # waiting requests that still leave TTFT within its SLO
        queue_target = max(1.0, math.floor((req.slo.ttft_p95_ms - best.ttft_p95_ms) / 1e3 / (request_s / best.concurrency)))
    longest_s = best.ttft_p95_ms / 1e3 + (model.max_context_tokens - model.traffic.mean_input_tokens) * best.itl_p95_ms / 1e3
    runner_up = next((o for o in options if o.instance.instance_type != inst.instance_type), None)
    why = [
        *reasons,
        f"{inst.instance_type} ({inst.gpu_count}x {best.gpu.model}) with tensor_parallel_size={tp}: cheapest of "
        f"{len(options)} options meeting TTFT p95 {_fmt(req.slo.ttft_p95_ms)} and ITL p95 {_fmt(req.slo.itl_p95_ms)}",
        f"predicted at {best.concurrency} concurrent sequences per replica: TTFT p95 {best.ttft_p95_ms:.0f} ms, "
        f"ITL p95 {best.itl_p95_ms:.1f} ms, {est.requests_per_s:.2f} requests/s per replica",
        f"{best.replicas} replica(s) for {peak_rps:g} requests/s at peak ({model.traffic.pattern.value} traffic, "
        f"{defaults.TARGET_UTILIZATION[model.traffic.pattern.value]:.0%} target utilisation)",
    ]
    if runner_up:
        why.append(f"next cheapest: {runner_up.instance.instance_type} at "
                   f"${runner_up.nodes * runner_up.node_usd_per_hour * catalog.hours_per_month:,.0f}/month for GPU nodes")
    if spec.spot:
        why.append("spot capacity: prices are estimates (on-demand x catalog spot_price_factor) and nodes can be reclaimed")
    return Blueprint(
        service=req.service, environment=env, production=req.is_production(env), region=spec.region,
        archetype=Archetype.VLLM_GPU, tags=_tags(req, env), models=[served],
        compute=Compute(
            accelerator=Accelerator.NVIDIA_GPU, instance_type=inst.instance_type, gpu=best.gpu.name,
            gpus_per_node=inst.gpu_count, gpus_per_replica=tp, vcpus_per_node=inst.vcpus,
            memory_gib_per_node=inst.memory_gib,
            cpu_per_replica=max(1, math.floor(inst.vcpus * share * 0.75)),
            memory_gib_per_replica=max(math.floor(inst.memory_gib * share * 0.8), math.ceil(shm_gib + 4)),
            ephemeral_storage_gib_per_replica=math.ceil(served.weights_gib * 1.1 + 10),
            replicas=best.replicas, capacity_type=CapacityType.SPOT if spec.spot else CapacityType.ON_DEMAND,
            cpu_arch=CpuArch(inst.cpu_arch)),
        engine=VllmEngine(image=defaults.VLLM_IMAGE, tensor_parallel_size=tp,
                          gpu_memory_utilization=defaults.GPU_MEMORY_UTILIZATION,
                          max_model_len=model.max_context_tokens, max_num_seqs=best.concurrency, dtype=dtype,
                          quantization=quantization, kv_cache_dtype="auto", shm_size_gib=shm_gib),
        storage=Storage(customer_managed_kms=req.compliance.customer_managed_kms,
                        retain_on_delete=req.is_production(env)),
        network=Network(private_only=req.compliance.private_only,
                        load_balancer_idle_timeout_s=min(4000, max(defaults.AWS_LB_DEFAULT_IDLE_TIMEOUT_S,
                                                                   math.ceil(longest_s)))),
        platform=PlatformSpec(kind=req.operations.platform, kubernetes_version=req.operations.kubernetes_version,
                              namespace=defaults.NAMESPACE, audit_logging=req.compliance.audit_logging),
        startup=startup,
        autoscaling=Autoscaling(min_replicas=floor, max_replicas=ceiling, metric="vllm:num_requests_waiting",
                                target=queue_target, cooldown_s=max(360, startup.total_s + 60)),
        slo=SloTargets(ttft_p95_ms=req.slo.ttft_p95_ms, itl_p95_ms=req.slo.itl_p95_ms,
                       availability_pct=req.slo.availability_pct),
        predictions=Predictions(
            ttft_p95_ms=round(best.ttft_p95_ms, 1), itl_p95_ms=round(best.itl_p95_ms, 2),
            output_tokens_per_s=round(est.output_tokens_per_s * best.replicas, 1),
            requests_per_s_capacity=round(est.requests_per_s * best.replicas, 3),
            concurrency_per_replica=best.concurrency, monthly_cost_usd=monthly, cost_lines=lines,
            cost_is_estimate=spec.spot,
            usd_per_million_output_tokens=round(monthly / tokens_per_month * 1e6, 3)),
        rationale=why,
    )


def _fmt(value: float | None) -> str:
    return "(no target)" if value is None else f"<= {value:g} ms"


def plan(req: Requirements, catalog: Catalog, *, environments: list[str] | None = None) -> list[Blueprint]:
    """Plan every (or the named) environment of a requirements file.

    Args:
        req: validated requirements.
        catalog: from `load_catalog()`.
        environments: names to plan; all of `req.environments` (in file order) when omitted.

    Returns:
        One `Blueprint` per environment, in the order planned.

    Raises:
        RequirementsError: an environment name is not in the file.
        CatalogError: a model id is unknown.
        SizingError: nothing meets the requirements; the message names the constraint to relax.
    """
    names = environments or list(req.environments)
    unknown = [n for n in names if n not in req.environments]
    if unknown:
        raise RequirementsError(f"--env {', '.join(unknown)}: not in the requirements' environments "
                                f"({', '.join(req.environments)})")
    models = resolve_models(req, catalog)
    archetype, reasons = select_archetype(req, models)
    return [_plan_vllm(req, env, models[0], catalog, reasons) for env in names]
