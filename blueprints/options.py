"""Candidate deployments per archetype, sized and priced: the search the selection and the planner share.

Pure: the same `Requirements` and `Catalog` always give the same options in the same order (cheapest first; ties
break on latency, then instance type name). Sizing physics lives in `blueprints.sizing`; this module decides which
instance types, parallel degrees, batch sizes and replica counts to try, and what each costs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from blueprints import defaults
from blueprints.catalog import Architecture, Catalog, Gpu, InstanceType, Task
from blueprints.errors import CatalogError, RequirementsError, SizingError
from blueprints.requirements import Accelerator, ModelSpec, Platform, Precision, Requirements, Traffic
from blueprints.sizing import (
    LlmEstimate,
    cpu_request_ms,
    encoder_gflops_per_request,
    estimate_llm,
    gflops_from_cpu_latency,
    gflops_from_gpu_latency,
    gpu_batch_ms,
    tensor_parallel_problems,
    weights_gib,
)


@dataclass(frozen=True)
class ResolvedModel:
    """A requirements model entry joined with its catalog record."""

    spec: ModelSpec
    traffic: Traffic
    architecture: Architecture
    task: Task
    max_context_tokens: int
    catalog_gflops_per_request: float | None = None

    @property
    def weights_gib(self) -> float:
        return weights_gib(self.architecture, self.spec.precision)


def resolve_models(req: Requirements, catalog: Catalog) -> list[ResolvedModel]:
    """Join each requested model with the catalog.

    Raises:
        CatalogError: an unknown model id or measured_instance_type.
        RequirementsError: a generative model's mean request (input + output) is longer than max_context_tokens.
        SizingError: max_context_tokens above the model's limit.
    """
    out = []
    for index, (spec, traffic) in enumerate(req.served_models()):
        field = "model.id" if req.model is not None else f"models.{index}.id"
        try:
            record = catalog.model(spec.id) if spec.id else None
        except CatalogError as exc:
            raise CatalogError(f"{field}: {exc}") from None
        arch = spec.architecture or record.architecture  # type: ignore[union-attr]
        task = spec.task or record.task  # type: ignore[union-attr]
        limit = record.max_context_tokens if record else (spec.max_context_tokens or defaults.DEFAULT_MAX_MODEL_LEN)
        wanted = spec.max_context_tokens or min(limit, defaults.DEFAULT_MAX_MODEL_LEN)
        if wanted > limit:
            raise SizingError(f"model.max_context_tokens={wanted} exceeds {spec.id}'s limit of {limit} tokens; "
                              f"lower it to <= {limit}")
        if task.generative and traffic.mean_input_tokens + traffic.mean_output_tokens > wanted:
            raise RequirementsError(
                f"model {spec.served_name}: traffic.mean_input_tokens + mean_output_tokens = "
                f"{traffic.mean_input_tokens + traffic.mean_output_tokens} exceeds max_context_tokens={wanted}, so "
                f"the mean request would be rejected; raise model.max_context_tokens (<= {limit}) or shorten requests")
        if spec.measured_instance_type is not None:
            catalog.instance(spec.measured_instance_type)
        out.append(ResolvedModel(spec, traffic, arch, task, wanted,
                                 record.gflops_per_request if record and spec.architecture is None else None))
    return out


# --- shared helpers ------------------------------------------------------------------------------------------------


def peak_rps(req: Requirements, env: str, model: ResolvedModel) -> float:
    """This environment's peak request rate for `model`, requests/s."""
    return model.traffic.peak_requests_per_s * req.environments[env].traffic_scale


def replicas_floor(req: Requirements, env: str) -> int:
    """Fewest replicas an environment runs: its min_replicas (at least 1), 2 in production at >= 99.9 %, else 1."""
    spec = req.environments[env]
    if spec.min_replicas is not None:
        return max(1, spec.min_replicas)
    if req.is_production(env) and req.slo.availability_pct >= defaults.HIGH_AVAILABILITY_PCT:
        return defaults.MIN_REPLICAS_FOR_HIGH_AVAILABILITY
    return 1


def price_factor(req: Requirements, env: str, catalog: Catalog, *, managed: bool) -> float:
    """On-demand = 1; spot (never on SageMaker real-time endpoints) = the catalog's estimated spot factor."""
    return catalog.spot_price_factor if req.environments[env].spot and not managed else 1.0


def fixed_cost_items(req: Requirements, env: str, catalog: Catalog, *, managed: bool) -> list[tuple[str, float, float]]:
    """What a service stack pays besides its serving nodes, as (item, quantity, USD/hour per unit): the load balancer
    of a Kubernetes archetype on a shared EKS platform, and its model store's customer-managed KMS key. The cluster,
    its system nodes, NAT gateways and VPC endpoints belong to the shared platform stack, whose cost the plan reports
    beside (`blueprints.platform_plan`). Usage-based charges (data processed, LCUs, requests, S3 storage) are not
    included."""
    items: list[tuple[str, float, float]] = []
    if not managed and req.operations.platform is Platform.EKS:  # an existing cluster provisions its own
        items.append(("network load balancer", 1, catalog.network_load_balancer_usd_per_hour))
    if req.compliance.customer_managed_kms:
        items.append(("KMS key (model store, customer-managed)", 1,
                      catalog.kms_key_usd_per_month / catalog.hours_per_month))
    return items


def service_fixed_monthly_usd(req: Requirements, env: str, catalog: Catalog, *, managed: bool) -> float:
    """Monthly sum of `fixed_cost_items`: what the service costs before its first serving node."""
    return sum(qty * usd for _, qty, usd in fixed_cost_items(req, env, catalog, managed=managed)) \
        * catalog.hours_per_month


def _families_ok(req: Requirements, inst: InstanceType) -> bool:
    families = set(req.hardware.allowed_instance_families)
    return not families or inst.family in families


def gpu_instances(req: Requirements, catalog: Catalog, *, managed: bool) -> list[InstanceType]:
    """GPU instance types allowed by hardware.accelerators and allowed_instance_families (SageMaker's if managed)."""
    if Accelerator.NVIDIA_GPU not in req.hardware.accelerators:
        return []
    table = catalog.sagemaker if managed else catalog.ec2
    return [i for i in table.values() if i.gpu_count and _families_ok(req, i)]


def cpu_instances(req: Requirements, catalog: Catalog) -> list[InstanceType]:
    """CPU-only EC2 types allowed by accelerators, families and cpu_arch (none if `cpu` is not an accelerator)."""
    if Accelerator.CPU not in req.hardware.accelerators:
        return []
    arch = req.hardware.cpu_arch
    return [i for i in catalog.ec2.values() if not i.gpu_count and _families_ok(req, i)
            and (arch is None or i.cpu_arch == arch.value)]


# --- LLMs (vllm-gpu, sagemaker-endpoint) ---------------------------------------------------------------------------


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


def tp_degrees(gpus_per_node: int, arch: Architecture, *, managed: bool) -> list[int]:
    """Tensor-parallel degrees to try: powers of two dividing the node's GPUs (within one node) that vLLM can shard
    the model over (`sizing.tensor_parallel_problems`). A SageMaker LMI endpoint runs one model copy across all GPUs
    of its instance."""
    degrees = [gpus_per_node] if managed else [2**k for k in range(0, 4)
                                               if 2**k <= gpus_per_node and gpus_per_node % 2**k == 0]
    return [tp for tp in degrees if not tensor_parallel_problems(arch, tp)]


def p95(est: LlmEstimate) -> tuple[float, float]:
    """(TTFT p95, ITL p95) in ms from a modelled estimate (see defaults.TTFT_P95_FACTOR, ITL_P95_FACTOR)."""
    return est.ttft_ms * defaults.TTFT_P95_FACTOR, est.itl_ms * defaults.ITL_P95_FACTOR


def llm_estimate(model: ResolvedModel, gpu: Gpu, tp: int, *, concurrency: int) -> LlmEstimate:
    """`estimate_llm` at this model's precision, mean traffic shape and max_context_tokens."""
    return estimate_llm(model.architecture, gpu, precision=model.spec.precision, tensor_parallel_size=tp,
                        concurrency=concurrency, input_tokens=model.traffic.mean_input_tokens,
                        output_tokens=model.traffic.mean_output_tokens, max_model_len=model.max_context_tokens)


def _within_invocation_limit(model: ResolvedModel, est: LlmEstimate, *, managed: bool) -> bool:
    """A non-streamed SageMaker response must complete within the real-time invocation limit."""
    if not managed or model.traffic.streaming:
        return True
    ttft, itl = p95(est)
    return (ttft + model.traffic.mean_output_tokens * itl) / 1e3 <= defaults.SAGEMAKER_INVOCATION_TIMEOUT_S


def _best_concurrency(req: Requirements, model: ResolvedModel, gpu: Gpu, tp: int, *,
                      managed: bool) -> tuple[int, LlmEstimate] | None:
    """Largest concurrency whose p95 TTFT and ITL meet the SLO (latency grows with concurrency: bisection).

    Returns None when the model does not fit, or even one sequence misses the SLO.
    """
    slo_ttft, slo_itl = req.slo.ttft_p95_ms, req.slo.itl_p95_ms

    def ok(est: LlmEstimate) -> bool:
        ttft, itl = p95(est)
        return ((slo_ttft is None or ttft <= slo_ttft) and (slo_itl is None or itl <= slo_itl)
                and _within_invocation_limit(model, est, managed=managed))

    first = llm_estimate(model, gpu, tp, concurrency=1)
    if not first.fits or first.max_concurrency < 1 or not ok(first):
        return None
    lo, hi = 1, first.max_concurrency
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(llm_estimate(model, gpu, tp, concurrency=mid)):
            lo = mid
        else:
            hi = mid - 1
    return lo, llm_estimate(model, gpu, tp, concurrency=lo)


def search_llm_options(req: Requirements, env: str, model: ResolvedModel, catalog: Catalog, *,
                       managed: bool = False) -> list[LlmOption]:
    """Every (instance type, tensor parallel) that fits the model and meets the SLO, cheapest first.

    Args:
        managed: search SageMaker hosting types (one model copy per instance) instead of EC2.

    Ties break on lower ITL, then instance type name, so the order is deterministic.
    """
    peak = peak_rps(req, env, model)
    utilization = defaults.TARGET_UTILIZATION[model.traffic.pattern.value]
    factor = price_factor(req, env, catalog, managed=managed)
    options = []
    for inst in gpu_instances(req, catalog, managed=managed):
        gpu = catalog.gpu(inst.gpu)  # type: ignore[arg-type]
        for tp in tp_degrees(inst.gpu_count, model.architecture, managed=managed):
            found = _best_concurrency(req, model, gpu, tp, managed=managed)
            if found is None:
                continue
            conc, est = found
            replicas = max(replicas_floor(req, env), math.ceil(peak / (est.requests_per_s * utilization)))
            nodes = math.ceil(replicas / (inst.gpu_count // tp))
            ttft, itl = p95(est)
            options.append(LlmOption(inst, gpu, tp, conc, est, ttft, itl, replicas, nodes, inst.usd_per_hour * factor))
    options.sort(key=lambda o: (o.nodes * o.node_usd_per_hour, o.itl_p95_ms, o.instance.instance_type,
                                o.tensor_parallel_size))
    return options


def explain_infeasible_llm(req: Requirements, model: ResolvedModel, catalog: Catalog, *, managed: bool = False) -> str:
    """Why no option exists, and the nearest feasible alternative (which constraint to relax, by how much)."""
    name = model.spec.served_name
    where = "SageMaker hosting" if managed else "GPU"
    candidates = gpu_instances(req, catalog, managed=managed)
    if not candidates:
        table = catalog.sagemaker if managed else catalog.ec2
        return (f"no {where} instance type in the catalog matches hardware.allowed_instance_families="
                f"{req.hardware.allowed_instance_families}; allow one of "
                f"{sorted({i.family for i in table.values() if i.gpu_count})}")
    fitting = []  # (instance, tp, ttft p95 ms, itl p95 ms) at concurrency 1, for options that fit in memory
    for inst in candidates:
        gpu = catalog.gpu(inst.gpu)  # type: ignore[arg-type]
        for tp in tp_degrees(inst.gpu_count, model.architecture, managed=managed):
            est = llm_estimate(model, gpu, tp, concurrency=1)
            if est.fits and est.max_concurrency >= 1:
                fitting.append((inst, tp, *p95(est)))
    if not fitting:
        return _explain_memory(req, model, catalog, candidates, managed=managed)
    best_itl = min(fitting, key=lambda f: (f[3], f[0].instance_type))
    best_ttft = min(fitting, key=lambda f: (f[2], f[0].instance_type))
    parts = []
    if req.slo.itl_p95_ms is not None and best_itl[3] > req.slo.itl_p95_ms:
        inst, tp = best_itl[0], best_itl[1]
        gpu = catalog.gpu(inst.gpu)  # type: ignore[arg-type]
        floor_ms = model.weights_gib * 1024**3 / (tp * gpu.bandwidth_gb_per_s * 1e9) * 1e3
        physics = (f"; physically, reading {model.weights_gib:.0f} GiB of weights per token at the full "
                   f"{tp * gpu.bandwidth_gb_per_s:,.0f} GB/s of {tp}x {gpu.model} takes {floor_ms:.1f} ms"
                   if req.slo.itl_p95_ms < floor_ms else "")
        parts.append(f"the lowest ITL p95 any allowed option reaches is {best_itl[3]:.1f} ms "
                     f"({inst.instance_type}, tensor_parallel_size={tp}) against slo.itl_p95_ms="
                     f"{req.slo.itl_p95_ms:g}{physics}: raise it to >= {math.ceil(best_itl[3])}, lower "
                     "model.precision, or allow faster GPUs")
    if req.slo.ttft_p95_ms is not None and best_ttft[2] > req.slo.ttft_p95_ms:
        parts.append(f"the lowest TTFT p95 is {best_ttft[2]:.0f} ms ({best_ttft[0].instance_type}, "
                     f"tensor_parallel_size={best_ttft[1]}) against slo.ttft_p95_ms={req.slo.ttft_p95_ms:g}: raise it "
                     f"to >= {math.ceil(best_ttft[2])}, shorten prompts, or allow faster GPUs")
    if not parts and managed and not model.traffic.streaming:
        limit_s = defaults.SAGEMAKER_INVOCATION_TIMEOUT_S
        parts.append(f"a non-streamed response takes longer than SageMaker's {limit_s} s "
                     "invocation limit; set traffic.streaming: true or lower mean_output_tokens")
    if not parts:
        parts.append("the ITL and TTFT targets cannot be met together on one option; relax either")
    return f"no allowed {where} option serves {name} within the SLO: " + "; ".join(parts)


def _explain_memory(req: Requirements, model: ResolvedModel, catalog: Catalog, candidates: list[InstanceType], *,
                    managed: bool) -> str:
    """The model does not fit any allowed node: name what would fit (shorter context, lower precision, a family)."""
    name, prec = model.spec.served_name, model.spec.precision
    largest = max(candidates, key=lambda i: (i.gpu_count * catalog.gpu(i.gpu).memory_gib, i.instance_type))  # type: ignore[arg-type]
    gpu = catalog.gpu(largest.gpu)  # type: ignore[arg-type]
    est = llm_estimate(model, gpu, largest.gpu_count, concurrency=1)
    fixes = []
    if est.kv_cache_tokens >= 64:
        fixes.append(f"lower max_context_tokens from {model.max_context_tokens} to <= {est.kv_cache_tokens} "
                     f"(what {largest.instance_type} holds)")
    for lower in (Precision.FP8, Precision.INT4):
        if lower.bytes_per_param < prec.bytes_per_param:
            smaller = ResolvedModel(model.spec.model_copy(update={"precision": lower}), model.traffic,
                                    model.architecture, model.task, model.max_context_tokens)
            if llm_estimate(smaller, gpu, largest.gpu_count, concurrency=1).fits:
                fixes.append(f"set model.precision: {lower.value} ({weights_gib(model.architecture, lower):.0f} GiB "
                             f"of weights)")
                break
    table = catalog.sagemaker if managed else catalog.ec2
    allowed = {i.family for i in candidates}
    others = sorted((i for i in table.values() if i.gpu_count and i.family not in allowed
                     and llm_estimate(model, catalog.gpu(i.gpu), i.gpu_count, concurrency=1).fits),  # type: ignore[arg-type]
                    key=lambda i: (i.usd_per_hour, i.instance_type))
    if others:
        fixes.append(f"add {others[0].family!r} to hardware.allowed_instance_families ({others[0].instance_type} "
                     f"fits at ${others[0].usd_per_hour:g}/h)")
    have = largest.gpu_count * gpu.memory_gib
    return (f"{name} needs {model.weights_gib:.0f} GiB of weights at {prec.value} plus KV cache for "
            f"max_context_tokens={model.max_context_tokens}, but the largest allowed node ({largest.instance_type}, "
            f"{largest.gpu_count}x {gpu.model}) has {have:.0f} GiB of GPU memory; "
            + ("; or ".join(fixes) if fixes else "no catalog option fits; serve a smaller model"))


# --- non-generative models (triton-multi-model, onnx-cpu, sagemaker-endpoint) -------------------------------------


def latency_target_ms(req: Requirements) -> float:
    """The request-latency budget batching is sized to: slo.latency_p95_ms, else latency_p99_ms, else the default."""
    return req.slo.latency_p95_ms or req.slo.latency_p99_ms or defaults.DEFAULT_NONGEN_LATENCY_P95_MS


def request_gflops(model: ResolvedModel, catalog: Catalog) -> float:
    """Compute per request, GFLOP: from a measured latency if given, else the catalog's vision FLOPs, else the
    encoder formula at the mean input length.

    Raises:
        SizingError: a model without catalog FLOPs or a transformer shape to derive them from.
    """
    spec = model.spec
    if spec.measured_latency_ms is not None and spec.measured_instance_type is not None:
        inst = catalog.instance(spec.measured_instance_type)
        if inst.gpu_count:
            return gflops_from_gpu_latency(spec.measured_latency_ms, weights_gib=model.weights_gib,
                                           gpu=catalog.gpu(inst.gpu), precision=spec.precision)  # type: ignore[arg-type]
        return gflops_from_cpu_latency(spec.measured_latency_ms, vcpus=inst.vcpus,
                                       gflops_per_vcpu=catalog.cpu_gflops(inst))
    if model.catalog_gflops_per_request is not None:
        return model.catalog_gflops_per_request
    if model.task is Task.VISION:
        raise SizingError(f"models[{spec.served_name}]: a vision model outside the catalog has no FLOPs figure; set "
                          "model.measured_latency_ms and model.measured_instance_type")
    tokens = min(model.traffic.mean_input_tokens, model.max_context_tokens)
    return encoder_gflops_per_request(model.architecture, tokens=tokens)


@dataclass(frozen=True)
class ModelLoad:
    """One model's serving settings and predictions on one replica of a non-generative option."""

    model: ResolvedModel
    gflops_per_request: float
    max_batch_size: int
    max_queue_delay_ms: float
    batch_ms: float
    requests_per_s_per_replica: float
    latency_p95_ms: float = 0.0


@dataclass(frozen=True)
class NongenOption:
    """One candidate deployment of non-generative models: node type, replica shape, batching, replicas, nodes."""

    instance: InstanceType
    gpu: Gpu | None
    gpus_per_replica: int
    cpu_per_replica: int
    memory_gib_per_replica: float
    replicas_per_node: int
    loads: tuple[ModelLoad, ...]
    replicas: int
    nodes: int
    node_usd_per_hour: float

    @property
    def latency_p95_ms(self) -> float:
        return max(load.latency_p95_ms for load in self.loads)

    @property
    def requests_per_s_capacity(self) -> float:
        """All replicas fully busy with the models' peak mix of requests, requests/s."""
        total = sum(ld.model.traffic.peak_requests_per_s for ld in self.loads)
        busy_s_per_request = sum(ld.model.traffic.peak_requests_per_s / total / ld.requests_per_s_per_replica
                                 for ld in self.loads)
        return self.replicas / busy_s_per_request


def _gpu_loads(models: list[ResolvedModel], gflops: list[float], gpu: Gpu, target_ms: float,
               gpus_per_replica: int) -> tuple[ModelLoad, ...] | None:
    """Batch sizes per model on a shared GPU so that every model's p95 meets `target_ms`, or None.

    Start each model at the largest power-of-two batch whose own p95 (queue delay + NONGEN_P95_FACTOR batches) fits
    the budget, then the smallest batch keeping BATCH_THROUGHPUT_FRACTION of its throughput; while some model's p95
    (its queue delay + its batch + the longest other batch in flight) misses,
    halve the batch of the model with the longest batch.
    """

    def batch_ms(i: int, b: int) -> float:
        return gpu_batch_ms(gflops[i], batch_size=b, weights_gib=models[i].weights_gib, gpu=gpu,
                            precision=models[i].spec.precision)

    sizes = []
    for i in range(len(models)):
        b = defaults.TRITON_MAX_BATCH_SIZE_CAP
        while b > 1 and defaults.NONGEN_P95_FACTOR * batch_ms(i, b) > target_ms:
            b //= 2
        best_rate = b / batch_ms(i, b)
        while b > 1 and (b // 2) / batch_ms(i, b // 2) >= defaults.BATCH_THROUGHPUT_FRACTION * best_rate:
            b //= 2  # a smaller batch that keeps nearly all the throughput has lower latency
        sizes.append(b)
    while True:
        times = [batch_ms(i, b) for i, b in enumerate(sizes)]
        delays = [max(0.0, min(target_ms - defaults.NONGEN_P95_FACTOR * t, t)) for t in times]
        p95s = [d + t + max(times) for d, t in zip(delays, times)]
        if all(p <= target_ms for p in p95s):
            return tuple(ModelLoad(m, g, b, d, t, b / t * 1e3 * gpus_per_replica, p)
                         for m, g, b, d, t, p in zip(models, gflops, sizes, delays, times, p95s))
        worst = max(range(len(models)), key=lambda i: (times[i], -i))
        if sizes[worst] == 1:
            return None
        sizes[worst] //= 2


def _cpu_loads(models: list[ResolvedModel], gflops: list[float], vcpus: int, gflops_per_vcpu: float,
               target_ms: float) -> tuple[ModelLoad, ...] | None:
    """One request at a time per replica, intra-op threads = `vcpus`; None when a model's p95 misses the budget."""
    times = [cpu_request_ms(g, vcpus=vcpus, gflops_per_vcpu=gflops_per_vcpu) for g in gflops]
    p95s = [t + max(times) for t in times]
    if any(p > target_ms for p in p95s):
        return None
    return tuple(ModelLoad(m, g, 1, 0.0, t, 1e3 / t, p) for m, g, t, p in zip(models, gflops, times, p95s))


def cpu_replica_shapes(inst: InstanceType) -> list[tuple[int, int]]:
    """(replicas per node, vCPUs per replica) for CPU replicas on `inst`.

    Each takes an equal share of the node's allocatable CPU (NODE_ALLOCATABLE_CPU_FRACTION), and only shapes where
    `Compute.replicas_per_node` (vCPUs // CPU per replica, what the node pool is sized with) counts the same number
    of replicas are kept, so the pool never plans more replicas per node than fit.
    Example: 16 vCPUs -> [(1, 12), (2, 6)].
    """
    shapes = []
    for per_node in defaults.CPU_REPLICAS_PER_NODE:
        vcpus = math.floor(inst.vcpus * defaults.NODE_ALLOCATABLE_CPU_FRACTION / per_node)
        if vcpus >= 1 and inst.vcpus // vcpus == per_node:
            shapes.append((per_node, vcpus))
    return shapes


def _replicas_for_load(req: Requirements, env: str, loads: tuple[ModelLoad, ...]) -> int:
    """Replicas so each replica's share of every model's peak keeps it under the target utilisation."""
    busy = sum(peak_rps(req, env, ld.model) / (ld.requests_per_s_per_replica
                                               * defaults.TARGET_UTILIZATION[ld.model.traffic.pattern.value])
               for ld in loads)
    return max(replicas_floor(req, env), math.ceil(busy - 1e-9))


def search_nongen_options(req: Requirements, env: str, models: list[ResolvedModel], catalog: Catalog, *,
                          accelerator: Accelerator, managed: bool = False) -> list[NongenOption]:
    """Every node type and replica shape that holds the models and meets the latency budget, cheapest first.

    Args:
        accelerator: `nvidia-gpu` (Triton on GPUs; one GPU per replica, or one whole instance on SageMaker) or `cpu`
            (ONNX Runtime or Triton on CPU nodes; replicas of 1-16 vCPUs).
        managed: SageMaker hosting types (GPU only in the catalog) instead of EC2.
    """
    target = latency_target_ms(req)
    gflops = [request_gflops(m, catalog) for m in models]
    weights = sum(m.weights_gib for m in models)
    factor = price_factor(req, env, catalog, managed=managed)
    options = []
    if accelerator is Accelerator.NVIDIA_GPU:
        for inst in gpu_instances(req, catalog, managed=managed):
            gpu = catalog.gpu(inst.gpu)  # type: ignore[arg-type]
            need_gib = defaults.TRITON_GPU_INSTANCES * sum(m.weights_gib + defaults.ENCODER_ACTIVATION_GIB
                                                           for m in models)
            if need_gib > gpu.memory_gib * defaults.GPU_MEMORY_UTILIZATION:
                continue
            per_replica = inst.gpu_count if managed else 1
            loads = _gpu_loads(models, gflops, gpu, target, per_replica)
            if loads is None:
                continue
            share = per_replica / inst.gpu_count
            cpu = max(1, math.floor(inst.vcpus * share * defaults.NODE_ALLOCATABLE_CPU_FRACTION))
            memory = max(1.0, math.floor(inst.memory_gib * share * 0.8))
            replicas = _replicas_for_load(req, env, loads)
            per_node = inst.gpu_count // per_replica
            options.append(NongenOption(inst, gpu, per_replica, cpu, memory, per_node, loads, replicas,
                                        math.ceil(replicas / per_node), inst.usd_per_hour * factor))
    elif not managed:
        memory = round(weights * defaults.CPU_MEMORY_WEIGHTS_FACTOR + defaults.CPU_MEMORY_OVERHEAD_GIB, 2)
        for inst in cpu_instances(req, catalog):
            for per_node, vcpus in cpu_replica_shapes(inst):
                if per_node * memory > inst.memory_gib * defaults.NODE_ALLOCATABLE_CPU_FRACTION:
                    continue
                loads = _cpu_loads(models, gflops, vcpus, catalog.cpu_gflops(inst), target)
                if loads is None:
                    continue
                replicas = _replicas_for_load(req, env, loads)
                options.append(NongenOption(inst, None, 0, vcpus, memory, per_node, loads, replicas,
                                            math.ceil(replicas / per_node), inst.usd_per_hour * factor))
    options.sort(key=lambda o: (o.nodes * o.node_usd_per_hour, o.latency_p95_ms, o.instance.instance_type,
                                o.cpu_per_replica))
    return options


def explain_infeasible_nongen(req: Requirements, models: list[ResolvedModel], catalog: Catalog, *,
                              accelerator: Accelerator, managed: bool = False) -> str:
    """Why no non-generative option exists, and what to relax (latency budget, hardware, or model size)."""
    names = ", ".join(m.spec.served_name for m in models)
    kind = "GPU" if accelerator is Accelerator.NVIDIA_GPU else "CPU"
    candidates = (gpu_instances(req, catalog, managed=managed) if accelerator is Accelerator.NVIDIA_GPU
                  else [] if managed else cpu_instances(req, catalog))
    if not candidates:
        return (f"no {'SageMaker ' if managed else ''}{kind} instance type in the catalog matches hardware "
                f"(accelerators={[a.value for a in req.hardware.accelerators]}, allowed_instance_families="
                f"{req.hardware.allowed_instance_families}, cpu_arch="
                f"{req.hardware.cpu_arch.value if req.hardware.cpu_arch else 'any'}); widen hardware")
    gflops = [request_gflops(m, catalog) for m in models]
    floors = []  # (p95 at batch 1 on the fastest replica shape, instance type)
    for inst in candidates:
        if accelerator is Accelerator.NVIDIA_GPU:
            gpu = catalog.gpu(inst.gpu)  # type: ignore[arg-type]
            need = defaults.TRITON_GPU_INSTANCES * sum(m.weights_gib + defaults.ENCODER_ACTIVATION_GIB for m in models)
            if need > gpu.memory_gib * defaults.GPU_MEMORY_UTILIZATION:
                continue
            times = [gpu_batch_ms(g, batch_size=1, weights_gib=m.weights_gib, gpu=gpu, precision=m.spec.precision)
                     for m, g in zip(models, gflops)]
        else:
            vcpus = max(v for _, v in cpu_replica_shapes(inst))
            times = [cpu_request_ms(g, vcpus=vcpus, gflops_per_vcpu=catalog.cpu_gflops(inst)) for g in gflops]
        floors.append((max(t + max(times) for t in times), inst.instance_type))
    if not floors:
        return (f"{names} need more GPU memory ({defaults.TRITON_GPU_INSTANCES} instances each) than any allowed GPU "
                "holds; allow a larger GPU family or lower model.precision")
    best, where = min(floors)
    return (f"no allowed {kind} option serves {names} within a p95 request latency of {latency_target_ms(req):g} ms "
            f"(slo.latency_p95_ms): the fastest, {where} at batch 1, predicts {best:.0f} ms "
            f"({sum(gflops):.1f} GFLOP per request across the models); raise slo.latency_p95_ms to >= "
            f"{math.ceil(best)}, shorten traffic.mean_input_tokens, or allow faster hardware")
