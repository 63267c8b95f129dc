"""The non-generative option search (triton-multi-model, onnx-cpu, sagemaker-endpoint): node types, replica
shapes, dynamic batching and replica counts that hold the models and meet the request-latency budget.

Pure: the same `Requirements` and `Catalog` always give the same options in the same order (cheapest first). Each
option is sized analytically from the work of one request (`blueprints.capacity.sizing`); shared helpers are in
`blueprints.plan.options.search`; why no option exists is `blueprints.plan.options.infeasible`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from blueprints.core import defaults
from blueprints.catalog import Catalog, Gpu, InstanceType, Task
from blueprints.contracts.placement import serving_pod_fits
from blueprints.contracts.consistency import cpu_replica_memory_gib, stored_weights_gib
from blueprints.plan.owned_nodes import OwnedNodeShape
from blueprints.plan.guardrails import Breach, SearchLimits
from blueprints.plan.options.search import (
    ResolvedModel, cpu_instances, gflops_per_vcpu, gpu_instances, peak_rps, price_factor, replicas_floor,
)
from blueprints.requirements.service import Requirements
from blueprints.requirements.hosting import Accelerator
from blueprints.capacity.sizing import (
    GIB, RequestWork, cpu_request_ms, encoder_gflops_per_request, gflops_from_cpu_latency, gpu_batch_ms,
    work_from_gpu_latency,
)


def latency_target_ms(req: Requirements) -> float:
    """The request-latency budget batching is sized to: slo.latency_p95_ms, else latency_p99_ms, else the default."""
    return req.slo.latency_p95_ms or req.slo.latency_p99_ms or defaults.DEFAULT_NONGEN_LATENCY_P95_MS


def _estimated_work(model: ResolvedModel) -> RequestWork:
    """The catalog's (or the architecture's) work of one request: a vision model's catalog FLOPs; an autoregressive
    model's forward pass (the catalog's, else the encoder formula over the mean input) and `mean_output_tokens`
    decode steps, each reading the decoder's weights (`decoder_params_b`, else all of them) and computing 2 x those
    parameters; an encoder's FLOPs at the mean input length. A vision or speech model without the catalog's FLOPs
    comes with a measured latency (rule vision-needs-measurement, checked where `Requirements` loads)."""
    spec = model.spec
    tokens = min(model.traffic.mean_input_tokens, model.max_context_tokens)
    gflops = model.catalog_gflops_per_request
    if gflops is None:
        gflops = 0.0 if model.task is Task.VISION else encoder_gflops_per_request(model.architecture, tokens=tokens)
    if not model.task.autoregressive:
        return RequestWork(gflops=gflops, weights_gib=model.weights_gib)
    decoder_b = model.catalog_decoder_params_b or model.architecture.params_b
    return RequestWork(gflops=gflops, weights_gib=model.weights_gib, steps=model.traffic.mean_output_tokens,
                       step_gib=decoder_b * 1e9 * spec.precision.bytes_per_param / GIB, step_gflops=2 * decoder_b)


def request_work(model: ResolvedModel, catalog: Catalog) -> RequestWork:
    """What one request asks of the hardware (`blueprints.capacity.sizing.RequestWork`): from a measured latency if given
    (`work_from_gpu_latency`: an autoregressive model's decode scales between GPUs with memory bandwidth, a one-pass
    model with TFLOPS; a CPU measurement is read as compute), else the catalog's or the architecture's estimate.
    """
    spec = model.spec
    if spec.measured_latency_ms is not None and spec.measured_instance_type is not None:
        inst = catalog.instance(spec.measured_instance_type)
        if inst.gpu_count:
            return work_from_gpu_latency(spec.measured_latency_ms, estimate=_estimated_work(model),
                                         gpu=catalog.gpu(inst.gpu), precision=spec.precision,  # type: ignore[arg-type]
                                         autoregressive=model.task.autoregressive)
        return RequestWork(gflops=gflops_from_cpu_latency(spec.measured_latency_ms, vcpus=inst.vcpus,
                                                          gflops_per_vcpu=gflops_per_vcpu(inst, catalog)),
                           weights_gib=model.weights_gib)
    return _estimated_work(model)


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


def queue_delay_ms(batch_size: int, batch_ms: float, target_ms: float) -> float:
    """Triton's `max_queue_delay_microseconds` for a model, ms: how long the dynamic batcher may hold a request
    waiting for more to fill the batch, within what the budget leaves after NONGEN_P95_FACTOR batches, and at most
    one batch. None at `max_batch_size` 1: a batch of one never waits for company (Triton's dynamic batcher: "the
    delay ... to allow other requests to join the dynamic batch")."""
    if batch_size <= 1:
        return 0.0
    return max(0.0, min(target_ms - defaults.NONGEN_P95_FACTOR * batch_ms, batch_ms))


def _gpu_loads(models: list[ResolvedModel], works: list[RequestWork], gpu: Gpu, target_ms: float,
               gpus_per_replica: int) -> tuple[ModelLoad, ...] | None:
    """Batch sizes per model on a shared GPU so that every model's p95 meets `target_ms`, or None.

    Start each model at the largest power-of-two batch whose own p95 (queue delay + NONGEN_P95_FACTOR batches) fits
    the budget, then the smallest batch keeping BATCH_THROUGHPUT_FRACTION of its throughput; while some model's p95
    (its queue delay + its batch + the longest other batch in flight) misses,
    halve the batch of the model with the longest batch.
    """

    def batch_ms(i: int, b: int) -> float:
        return gpu_batch_ms(works[i], batch_size=b, gpu=gpu, precision=models[i].spec.precision)

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
        delays = [queue_delay_ms(b, t, target_ms) for b, t in zip(sizes, times)]
        p95s = [d + t + max(times) for d, t in zip(delays, times)]
        if all(p <= target_ms for p in p95s):
            return tuple(ModelLoad(m, w.total_gflops, b, d, t, b / t * 1e3 * gpus_per_replica, p)
                         for m, w, b, d, t, p in zip(models, works, sizes, delays, times, p95s))
        worst = max(range(len(models)), key=lambda i: (times[i], -i))
        if sizes[worst] == 1:
            return None
        sizes[worst] //= 2


def _cpu_loads(models: list[ResolvedModel], works: list[RequestWork], vcpus: int, gflops_per_vcpu: float,
               target_ms: float) -> tuple[ModelLoad, ...] | None:
    """One request at a time per replica, intra-op threads = `vcpus` (all of a request's FLOPs at the CPU's rate);
    None when a model's p95 misses the budget."""
    gflops = [w.total_gflops for w in works]
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


def nongen_nodes(inst: InstanceType, replicas: int, per_node: int, limits: SearchLimits) -> int:
    """Nodes an option's replicas take: placed over the platform's zones (`SearchLimits.nodes`), bin-packed on an
    edge cluster's owned nodes (no zones)."""
    if isinstance(inst, OwnedNodeShape):
        return math.ceil(replicas / per_node)
    return limits.nodes(replicas, per_node=per_node)


def fits_owned_nodes(option: NongenOption) -> bool:
    """An option on an edge cluster's owned nodes holds the peak replicas on its `count` nodes (always true for EC2
    options: their node pool grows)."""
    inst = option.instance
    if not isinstance(inst, OwnedNodeShape):
        return True
    return math.ceil(option.replicas / option.replicas_per_node) <= inst.count


def surge_room(option: NongenOption) -> bool:
    """The owned nodes have room for a rolling update's extra replica beside the peak (EC2 options always do)."""
    inst = option.instance
    return not isinstance(inst, OwnedNodeShape) or \
        inst.count * option.replicas_per_node >= option.replicas + defaults.SURGE_REPLICAS


def search_nongen_options(req: Requirements, env: str, models: list[ResolvedModel], catalog: Catalog, *,
                          accelerator: Accelerator, managed: bool = False,
                          within_owned_nodes: bool = True,
                          limits: SearchLimits = SearchLimits()) -> list[NongenOption]:
    """Every node type and replica shape that holds the models, meets the latency budget and stays within `limits`
    (instance types, GPU quota with the surge, max_replicas), cheapest first. Each is sized analytically, so every
    candidate is evaluated: none is pruned.

    On an edge cluster the one node shape is the declared owned node: shapes leaving room for a rolling update's
    extra replica come first, then those using the fewest nodes (owned hardware is paid for anyway; fewer nodes leave
    room for the site's other work), then latency.

    Args:
        accelerator: `nvidia-gpu` (Triton on GPUs; one GPU per replica, or one whole instance on SageMaker) or `cpu`
            (ONNX Runtime or Triton on CPU nodes; replicas of 1-16 vCPUs).
        managed: SageMaker hosting types (GPU only in the catalog) instead of EC2.
        within_owned_nodes: keep only options whose peak replicas fit an edge cluster's node count
            (`fits_owned_nodes`). Defaults to True; the infeasibility explanation turns it off to name the
            shortfall.
        limits: the environment's constraints (`guardrails.SearchLimits`).
    """
    target = latency_target_ms(req)
    works = [request_work(m, catalog) for m in models]
    weights = sum(stored_weights_gib(m.weights_gib) for m in models)  # as the stack config records them
    factor = price_factor(req, env, catalog, managed=managed)
    options = []
    if accelerator is Accelerator.NVIDIA_GPU:
        for inst in gpu_instances(req, catalog, managed=managed, limits=limits):
            gpu = catalog.gpu(inst.gpu)  # type: ignore[arg-type]
            need_gib = defaults.TRITON_GPU_INSTANCES * sum(m.weights_gib + defaults.ENCODER_ACTIVATION_GIB
                                                           for m in models)
            if need_gib > gpu.memory_gib * defaults.GPU_MEMORY_UTILIZATION:
                continue
            per_replica = inst.gpu_count if managed else 1
            loads = _gpu_loads(models, works, gpu, target, per_replica)
            if loads is None:
                continue
            share = per_replica / inst.gpu_count
            cpu = max(1, math.floor(inst.vcpus * share * defaults.NODE_ALLOCATABLE_CPU_FRACTION))
            memory = max(1.0, math.floor(inst.memory_gib * share * 0.8))
            replicas = _replicas_for_load(req, env, loads)
            per_node = inst.gpu_count // per_replica
            if not managed and not serving_pod_fits(inst, per_node=per_node, cpu=cpu, memory_gib=memory):
                continue  # its pods would stay Pending (the preview's `schedulable`)
            options.append(NongenOption(inst, gpu, per_replica, cpu, memory, per_node, loads, replicas,
                                        nongen_nodes(inst, replicas, per_node, limits), inst.usd_per_hour * factor))
    elif not managed:
        memory = cpu_replica_memory_gib(weights)
        for inst in cpu_instances(req, catalog, limits=limits):
            for per_node, vcpus in cpu_replica_shapes(inst):
                if not serving_pod_fits(inst, per_node=per_node, cpu=vcpus, memory_gib=memory,
                                        eks=not isinstance(inst, OwnedNodeShape)):
                    continue  # its pods would stay Pending (the preview's `schedulable`)
                loads = _cpu_loads(models, works, vcpus, gflops_per_vcpu(inst, catalog), target)
                if loads is None:
                    continue
                replicas = _replicas_for_load(req, env, loads)
                options.append(NongenOption(inst, None, 0, vcpus, memory, per_node, loads, replicas,
                                            nongen_nodes(inst, replicas, per_node, limits), inst.usd_per_hour * factor))
    if within_owned_nodes:
        options = [o for o in options if fits_owned_nodes(o)]
    options = [o for o in options if nongen_breach(o, limits, managed=managed) is None]
    options.sort(key=lambda o: (o.nodes * o.node_usd_per_hour, not surge_room(o), o.nodes, o.latency_p95_ms,
                                o.instance.instance_type, o.cpu_per_replica))
    return options



def nongen_breach(option: NongenOption, limits: SearchLimits, *, managed: bool) -> Breach | None:
    """The constraint a non-generative option breaks (`SearchLimits.breach`), None within all."""
    return limits.breach(option.instance, replicas=option.replicas, per_node=option.replicas_per_node, managed=managed)
