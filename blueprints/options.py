"""Candidate deployments per archetype, sized and priced: the search the selection and the planner share.

Pure: the same `Requirements` and `Catalog` always give the same options in the same order (cheapest first; ties
break on latency, then instance type name). Sizing physics lives in `blueprints.sizing`; this module decides which
instance types, parallel degrees, batch sizes and replica counts to try, and what each costs.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, replace

from blueprints import bounds, defaults
from blueprints.catalog import Architecture, Catalog, Gpu, InstanceType, Task
from blueprints.consistency import cpu_replica_memory_gib, stored_weights_gib
from blueprints.errors import SizingError
from blueprints.edge import OwnedNodeShape, edge_capacity_problem, owned_node_shape
from blueprints.guardrails import Breach, SearchLimits
from blueprints.requirements import Accelerator, ModelSpec, Platform, Precision, Requirements, Traffic, context_tokens
from blueprints.capacity.physics import kv_cache_tokens, replica_model
from blueprints.capacity.planning import (
    Candidate,
    LatencyTargets,
    ReplicaSizing,
    TrafficShape,
    engine_limits,
    idle_itl_ms,
    idle_ttft_ms,
    meets_at,
    run_at_rate,
    screen,
    size_replica,
    size_replica_at_least,
)
from blueprints.capacity.planning import traffic_shape as planning_shape
from blueprints.capacity.simulator import SimulationResult
from blueprints.sizing import (
    GIB,
    RequestWork,
    cpu_request_ms,
    encoder_gflops_per_request,
    gflops_from_cpu_latency,
    gpu_batch_ms,
    work_from_gpu_latency,
    tensor_parallel_problems,
    weights_gib,
)


@dataclass(frozen=True)
class ResolvedModel:
    """A requirements model entry joined with its catalog record; `path` is where it is in the file (`model`, or
    `models[1] (reranker)`), for messages."""

    spec: ModelSpec
    traffic: Traffic
    architecture: Architecture
    task: Task
    max_context_tokens: int
    catalog_gflops_per_request: float | None = None
    catalog_decoder_params_b: float | None = None
    path: str = "model"

    @property
    def weights_gib(self) -> float:
        return weights_gib(self.architecture, self.spec.precision)


def resolve_models(req: Requirements, catalog: Catalog) -> list[ResolvedModel]:
    """Join each requested model with the catalog. `Requirements` has already checked each against the catalog (ids,
    context limits, the requests a context holds: `blueprints.input_rules`)."""
    out = []
    for index, (spec, traffic) in enumerate(req.served_models()):
        record = catalog.model(spec.id) if spec.id else None
        arch = spec.architecture or record.architecture  # type: ignore[union-attr]
        task = spec.task or record.task  # type: ignore[union-attr]
        wanted, _ = context_tokens(spec)
        from_catalog = record is not None and spec.architecture is None
        out.append(ResolvedModel(spec, traffic, arch, task, wanted,
                                 record.gflops_per_request if from_catalog else None,  # type: ignore[union-attr]
                                 record.decoder_params_b if from_catalog else None,  # type: ignore[union-attr]
                                 path=req.model_path(index)))
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


def edge_nodes(req: Requirements, catalog: Catalog) -> OwnedNodeShape | None:
    """The edge cluster's owned node shape (`blueprints.edge`), or None off an edge cluster."""
    nodes = req.hardware.edge_nodes
    if req.operations.platform is not Platform.EDGE_CLUSTER or nodes is None:
        return None
    return owned_node_shape(nodes, hours_per_month=catalog.hours_per_month)


def gflops_per_vcpu(inst: InstanceType, catalog: Catalog) -> float:
    """Effective FP32 GFLOP/s per vCPU: the edge nodes' own figure, else the catalog's for the instance family."""
    return inst.gflops_per_vcpu if isinstance(inst, OwnedNodeShape) else catalog.cpu_gflops(inst)


def gpu_instances(req: Requirements, catalog: Catalog, *, managed: bool,
                  limits: SearchLimits = SearchLimits()) -> list[InstanceType]:
    """GPU instance types allowed by hardware.accelerators, allowed_instance_families and the environment's policy
    (`limits`; SageMaker's types if managed); none on an edge cluster (its owned nodes are CPU nodes)."""
    if Accelerator.NVIDIA_GPU not in req.hardware.accelerators or edge_nodes(req, catalog) is not None:
        return []
    table = catalog.sagemaker if managed else catalog.ec2
    return [i for i in table.values() if i.gpu_count and _families_ok(req, i) and limits.allows(i)]


def cpu_instances(req: Requirements, catalog: Catalog, *, limits: SearchLimits = SearchLimits()) -> list[InstanceType]:
    """CPU-only EC2 types allowed by accelerators, families, cpu_arch and the environment's policy (none if `cpu` is
    not an accelerator); on an edge cluster, its owned node shape (no instance type to allow)."""
    if Accelerator.CPU not in req.hardware.accelerators:
        return []
    owned = edge_nodes(req, catalog)
    if owned is not None:
        return [owned]
    arch = req.hardware.cpu_arch
    return [i for i in catalog.ec2.values() if not i.gpu_count and _families_ok(req, i) and limits.allows(i)
            and (arch is None or i.cpu_arch == arch.value)]


# --- LLMs (vllm-gpu, sagemaker-endpoint) ---------------------------------------------------------------------------


@dataclass(frozen=True)
class LlmOption:
    """One candidate deployment of an LLM: instance type, tensor parallel, KV-cache dtype, engine limits and the
    replicas that serve the peak within the SLO (`blueprints.capacity.planning`).

    Attributes:
        candidate: the replica shape and its engine limits.
        replicas: replicas for this environment's peak.
        nodes: nodes holding them.
        node_usd_per_hour: price of one node (spot-adjusted).
        check: the simulated run that decided the replica count (at the peak share of the minimum replicas, or at
            the highest rate meeting the SLO).
        sizing: the highest per-replica rate meeting the SLO and the run there; None until needed (an option that
            already meets the SLO at its minimum replica count is priced without the search; `complete_sizing`
            fills it for the chosen one).
    """

    instance: InstanceType
    gpu: Gpu
    candidate: Candidate
    replicas: int
    nodes: int
    node_usd_per_hour: float
    check: SimulationResult
    sizing: ReplicaSizing | None = None

    @property
    def tensor_parallel_size(self) -> int:
        return self.candidate.tensor_parallel_size

    @property
    def kv_cache_dtype(self) -> str:
        """`fp8` or `auto` (the model's 16-bit dtype): vLLM's --kv-cache-dtype."""
        return "fp8" if self.candidate.kv_cache_fp8 else "auto"

    @property
    def concurrency(self) -> int:
        """Sequences one replica runs at most: vLLM's --max-num-seqs."""
        return self.candidate.max_num_seqs

    @property
    def monthly_node_usd_per_hour(self) -> float:
        """All its nodes' price per hour, USD."""
        return self.nodes * self.node_usd_per_hour


@dataclass(frozen=True)
class Rejection:
    """An option the SLO allows but a constraint of the search rules out (`guardrails.SearchLimits.breach`).

    Attributes:
        what: the option, e.g. `9x p4d.24xlarge (70 replicas, tensor_parallel_size=1)`.
        monthly_usd: its nodes' monthly cost (a lower bound when `simulated` is False).
        breach: the constraint it breaks and what it needs.
        simulated: False when ruled out on its analytic bound (its replicas only grow once simulated).
    """

    what: str
    monthly_usd: float
    breach: Breach
    simulated: bool


@dataclass(frozen=True)
class LlmSearch:
    """The LLM search: the cheapest option within the SLO and every constraint, the others it simulated, what the
    constraints ruled out, and how many candidates were screened and simulated.

    Attributes:
        best: the cheapest option meeting the SLO within the constraints (None when there is none).
        at_peak: `best`'s simulated run at this environment's peak share per replica.
        options: every simulated option meeting the SLO within the constraints, cheapest first (priced at the
            replicas the search found; `best` may hold more after `predict_at_peak`).
        rejected: options ruled out by a constraint, cheapest first.
    """

    best: LlmOption | None
    at_peak: SimulationResult | None
    options: list[LlmOption]
    rejected: list[Rejection]
    screened: int
    simulated: int


def tp_degrees(gpus_per_node: int, arch: Architecture, *, managed: bool) -> list[int]:
    """Tensor-parallel degrees to try: powers of two dividing the node's GPUs (within one node) that vLLM can shard
    the model over (`sizing.tensor_parallel_problems`). A SageMaker LMI endpoint runs one model copy across all GPUs
    of its instance."""
    degrees = [gpus_per_node] if managed else [2**k for k in range(0, 4)
                                               if 2**k <= gpus_per_node and gpus_per_node % 2**k == 0]
    return [tp for tp in degrees if not tensor_parallel_problems(arch, tp)]


def traffic_shape(model: ResolvedModel) -> TrafficShape:
    """The request lengths (mean and p95), arrival pattern and context limit one replica of `model` sees."""
    t = model.traffic
    return planning_shape(t.mean_input_tokens, t.input_tokens_p95, t.mean_output_tokens, t.output_tokens_p95,
                          pattern=t.pattern.value, max_model_len=model.max_context_tokens)


def latency_targets(req: Requirements, model: ResolvedModel, *, managed: bool) -> LatencyTargets:
    """The SLO's TTFT and ITL p95, and on SageMaker without streaming the real-time invocation limit on the whole
    request (`defaults.SAGEMAKER_INVOCATION_TIMEOUT_S`)."""
    e2e = defaults.SAGEMAKER_INVOCATION_TIMEOUT_S * 1e3 if managed and not model.traffic.streaming else None
    return LatencyTargets(req.slo.ttft_p95_ms, req.slo.itl_p95_ms, e2e)


def screen_candidate(model: ResolvedModel, gpu: Gpu, tp: int, *, kv_cache_fp8: bool, req: Requirements,
                     managed: bool) -> Candidate | None:
    """`planning.screen` for this model, GPU and degree (SageMaker's LMI keeps vLLM's default token budget)."""
    return screen(model.architecture, gpu, precision=model.spec.precision,
                  quantization=model.spec.quantization_method, tensor_parallel_size=tp, kv_cache_fp8=kv_cache_fp8,
                  shape=traffic_shape(model), targets=latency_targets(req, model, managed=managed),
                  tune_batched_tokens=not managed)


def _priced_option(inst: InstanceType, gpu: Gpu, cand: Candidate, *, peak: float, floor: int, factor: float,
                   shape: TrafficShape, targets: LatencyTargets) -> LlmOption | None:
    """The replicas (and nodes) a screened candidate needs for `peak`, or None when it cannot meet the targets.

    When the minimum replica count already meets the targets at its share of the peak, that is the count (one
    simulated run); otherwise the highest rate meeting them is searched (`planning.size_replica`)."""
    per_node = inst.gpu_count // cand.tensor_parallel_size
    need = peak / floor
    if meets_at(cand, shape, targets, need):
        return LlmOption(inst, gpu, cand, floor, math.ceil(floor / per_node), inst.usd_per_hour * factor,
                         run_at_rate(cand, shape, need))
    sizing = size_replica(cand, shape, targets)
    if sizing is None:
        return None
    replicas = max(floor, math.ceil(peak / sizing.max_rps - 1e-9))
    return LlmOption(inst, gpu, cand, replicas, math.ceil(replicas / per_node), inst.usd_per_hour * factor,
                     sizing.at_max, sizing)


def _describe(inst: InstanceType, tp: int, replicas: int, nodes: int) -> str:
    return f"{nodes}x {inst.instance_type} ({replicas} replicas, tensor_parallel_size={tp})"


def llm_search(req: Requirements, env: str, model: ResolvedModel, catalog: Catalog, *,
               managed: bool = False, limits: SearchLimits = SearchLimits()) -> LlmSearch:
    """The cheapest (instance type, tensor parallel, KV-cache dtype) meeting the SLO within `limits`.

    Every allowed candidate is screened analytically (`planning.screen`), which bounds its cost from below (its
    optimistic rate needs the fewest replicas). A best-first search then refines the cheapest bound: simulate it
    (`_priced_option`: the replicas meeting the SLO at peak), then predict it at its peak share
    (`predict_at_peak`, which may add a replica); each step only raises the cost, so the first option whose final
    cost is the lowest in the queue is the cheapest of all. A candidate is dropped only when proven out: its bound
    exceeds the best final cost (dominated), or even its bound breaks a constraint (replicas only grow). So adding
    instance families can never make the search fail or cost more.

    Ties at the lowest cost break on a 16-bit KV cache before FP8 (FP8 only where it is cheaper), then the lower ITL
    p95 at peak, then instance type name and degree, so the result is deterministic. An FP8 KV cache is tried where
    the GPU has FP8 support (not on SageMaker, whose engine settings here have no KV-cache dtype).
    """
    peak = peak_rps(req, env, model)
    floor = replicas_floor(req, env)
    factor = price_factor(req, env, catalog, managed=managed)
    shape = traffic_shape(model)
    targets = latency_targets(req, model, managed=managed)
    queue: list[tuple] = []  # (cost $/h, fp8, instance type, degree, stage, payload)
    rejected: list[Rejection] = []
    screened = 0
    for inst in gpu_instances(req, catalog, managed=managed, limits=limits):
        gpu = catalog.gpu(inst.gpu)  # type: ignore[arg-type]
        for tp in tp_degrees(inst.gpu_count, model.architecture, managed=managed):
            for fp8 in ((False, True) if gpu.supports_fp8 and not managed else (False,)):
                cand = screen_candidate(model, gpu, tp, kv_cache_fp8=fp8, req=req, managed=managed)
                if cand is None:
                    continue
                screened += 1
                per_node = inst.gpu_count // tp
                replicas = max(floor, math.ceil(peak / cand.rate_bound_rps - 1e-9))
                nodes = math.ceil(replicas / per_node)
                cost = nodes * inst.usd_per_hour * factor
                breach = limits.breach(inst, replicas=replicas, per_node=per_node, managed=managed)
                if breach is not None:
                    rejected.append(Rejection(_describe(inst, tp, replicas, nodes),
                                              cost * catalog.hours_per_month, breach, simulated=False))
                    continue
                heapq.heappush(queue, (cost, fp8, inst.instance_type, tp, 0, (inst, gpu, cand)))
    options: list[LlmOption] = []
    finals: list[tuple[LlmOption, SimulationResult]] = []
    simulated = 0
    while queue and not (finals and queue[0][0] > finals[0][0].monthly_node_usd_per_hour + 1e-9):
        _, fp8, name, tp, stage, payload = heapq.heappop(queue)
        if stage == 0:  # screened: simulate the replicas meeting the SLO at peak
            inst, gpu, cand = payload
            simulated += 1
            option = _priced_option(inst, gpu, cand, peak=peak, floor=floor, factor=factor, shape=shape,
                                    targets=targets)
            if option is not None:
                options.append(option)
                heapq.heappush(queue, (option.monthly_node_usd_per_hour, fp8, name, tp, 1, option))
        elif stage == 1:  # simulated: predict it at its peak share, within the constraints
            option, run = predict_at_peak(payload, model, req, env, managed=managed)
            per_node = option.instance.gpu_count // tp
            breach = limits.breach(option.instance, replicas=option.replicas, per_node=per_node, managed=managed)
            if breach is not None:
                rejected.append(Rejection(_describe(option.instance, tp, option.replicas, option.nodes),
                                          option.monthly_node_usd_per_hour * catalog.hours_per_month, breach,
                                          simulated=True))
                continue
            heapq.heappush(queue, (option.monthly_node_usd_per_hour, fp8, name, tp, 2, (option, run)))
        else:
            finals.append(payload)
    options = sorted((o for o in options if limits.breach(
        o.instance, replicas=o.replicas, per_node=o.instance.gpu_count // o.tensor_parallel_size,
        managed=managed) is None), key=_option_order)
    best, at_peak = min(finals, key=lambda f: (_option_order(f[0])[:2], f[1].itl_ms.p95, _option_order(f[0])[2:])) \
        if finals else (None, None)
    rejected.sort(key=lambda r: (r.monthly_usd, r.what))
    return LlmSearch(best, at_peak, options, rejected, screened, simulated)


def _option_order(o: LlmOption) -> tuple:
    """Cheapest first; a 16-bit KV cache before FP8 at the same cost; then instance type name and degree."""
    return (round(o.monthly_node_usd_per_hour, 9), o.kv_cache_dtype == "fp8", o.instance.instance_type,
            o.tensor_parallel_size)


def llm_option_on(req: Requirements, env: str, model: ResolvedModel, catalog: Catalog, *, instance_type: str,
                  tensor_parallel_size: int, kv_cache_fp8: bool, managed: bool,
                  limits: SearchLimits = SearchLimits()) -> tuple[LlmOption, SimulationResult] | str:
    """The option on given hardware (an existing stack config's), priced and predicted as the search does, or why
    that hardware cannot serve now (a sentence)."""
    table = catalog.sagemaker if managed else catalog.ec2
    inst = table.get(instance_type)
    if inst is None or inst not in gpu_instances(req, catalog, managed=managed, limits=limits):
        return f"{instance_type} is no longer allowed (hardware.allowed_instance_families or the environment's policy)"
    gpu = catalog.gpu(inst.gpu)  # type: ignore[arg-type]
    if tensor_parallel_size not in tp_degrees(inst.gpu_count, model.architecture, managed=managed) or (
            kv_cache_fp8 and (managed or not gpu.supports_fp8)):
        return f"tensor_parallel_size={tensor_parallel_size} or its KV-cache dtype no longer applies there"
    cand = screen_candidate(model, gpu, tensor_parallel_size, kv_cache_fp8=kv_cache_fp8, req=req, managed=managed)
    priced = cand and _priced_option(inst, gpu, cand, peak=peak_rps(req, env, model), floor=replicas_floor(req, env),
                                     factor=price_factor(req, env, catalog, managed=managed),
                                     shape=traffic_shape(model), targets=latency_targets(req, model, managed=managed))
    if not priced:
        return "it no longer meets the SLO"
    option, run = predict_at_peak(priced, model, req, env, managed=managed)
    breach = limits.breach(inst, replicas=option.replicas, per_node=inst.gpu_count // tensor_parallel_size,
                           managed=managed)
    return f"it {breach.why}" if breach else (option, run)


def explain_breach(env: str, cheapest: str, monthly_usd: float, breach: Breach, *,
                   least: tuple[int, str, float] | None = None) -> str:
    """The refusal when the cheapest option meeting the SLO breaks a constraint and no option within the
    constraints meets it: name the binding constraint, what the cheapest needs, the least any option needs
    (`least`: amount, option, monthly USD; when below the cheapest's) and the fix."""
    fewest = ""
    needed = breach.needed
    if least is not None and least[0] < breach.needed:
        needed = least[0]
        fewest = f"; the least any option meeting the SLO needs is {least[0]} ({least[1]}, ${least[2]:,.0f}/month)"
    return (f"environments.{env}: no option meeting the SLO stays within {breach.constraint}: the cheapest, "
            f"{cheapest} (${monthly_usd:,.0f}/month), {breach.why}{fewest}; {breach.fix_for(env, needed)}, lower "
            f"environments.{env}.traffic_scale (or traffic.peak_requests_per_s), or relax the SLO")


def _least_llm(req: Requirements, env: str, model: ResolvedModel, catalog: Catalog, *, managed: bool,
               limits: SearchLimits, constraint: str) -> tuple[int, str, float] | None:
    """The option meeting the SLO that needs the least of `constraint` (replicas, or GPUs with the surge): each
    candidate's screen bounds its need from below (replicas only grow once simulated), so only candidates whose
    bound is within the least found are simulated."""
    peak, floor = peak_rps(req, env, model), replicas_floor(req, env)
    bounds = []
    for inst in gpu_instances(req, catalog, managed=managed, limits=limits):
        gpu = catalog.gpu(inst.gpu)  # type: ignore[arg-type]
        for tp in tp_degrees(inst.gpu_count, model.architecture, managed=managed):
            for fp8 in ((False, True) if gpu.supports_fp8 and not managed else (False,)):
                cand = screen_candidate(model, gpu, tp, kv_cache_fp8=fp8, req=req, managed=managed)
                if cand is not None:
                    replicas = max(floor, math.ceil(peak / cand.rate_bound_rps - 1e-9))
                    need = limits.need(constraint, inst, replicas=replicas, per_node=inst.gpu_count // tp)
                    bounds.append((need, inst.instance_type, tp, fp8))
    least: tuple[int, str, float] | None = None
    for bound, name, tp, fp8 in sorted(bounds):
        if least is not None and bound > least[0]:
            break
        found = llm_option_on(req, env, model, catalog, instance_type=name, tensor_parallel_size=tp,
                              kv_cache_fp8=fp8, managed=managed, limits=relaxed(limits))
        if isinstance(found, str):
            continue
        o = found[0]
        need = limits.need(constraint, o.instance, replicas=o.replicas, per_node=o.instance.gpu_count // tp)
        usd = o.monthly_node_usd_per_hour * catalog.hours_per_month
        if least is None or (need, usd) < least[::2]:
            least = (need, _describe(o.instance, tp, o.replicas, o.nodes), usd)
    return least


def complete_sizing(option: LlmOption, model: ResolvedModel, req: Requirements, env: str, *,
                    managed: bool) -> LlmOption:
    """The option with its `sizing` (the highest per-replica rate meeting the SLO), for the plan's capacity."""
    if option.sizing is not None:
        return option
    need = peak_rps(req, env, model) / option.replicas
    sizing = size_replica_at_least(option.candidate, traffic_shape(model), latency_targets(req, model, managed=managed),
                                   need)
    return replace(option, sizing=sizing)


def size_twin(option: LlmOption, model: ResolvedModel, req: Requirements, env: str, catalog: Catalog, *,
              kv_cache_fp8: bool) -> LlmOption | None:
    """The same instance type and degree with the other KV-cache dtype, priced the same way (None when it cannot
    meet the SLO), to say what FP8 KV changes."""
    cand = screen_candidate(model, option.gpu, option.tensor_parallel_size, kv_cache_fp8=kv_cache_fp8, req=req,
                            managed=False)
    if cand is None:
        return None
    return _priced_option(option.instance, option.gpu, cand, peak=peak_rps(req, env, model),
                          floor=replicas_floor(req, env), factor=option.node_usd_per_hour / option.instance.usd_per_hour,
                          shape=traffic_shape(model), targets=latency_targets(req, model, managed=False))


def predict_at_peak(option: LlmOption, model: ResolvedModel, req: Requirements, env: str, *,
                    managed: bool) -> tuple[LlmOption, SimulationResult]:
    """The simulated replica at this environment's peak share per replica (what the plan predicts).

    The rate is at most the option's `max_rps`, which met the targets; should the finite simulation miss them at the
    lower rate (the two runs draw the same requests but stretch them differently), a replica is added until it
    does, so a plan never predicts a p95 above its SLO. Returns the (possibly grown) option and its run.
    """
    targets = latency_targets(req, model, managed=managed)
    shape = traffic_shape(model)
    per_node = option.instance.gpu_count // option.tensor_parallel_size
    while True:
        run = run_at_rate(option.candidate, shape, peak_rps(req, env, model) / option.replicas)
        if targets.met_by(run):
            return option, run
        replicas = option.replicas + 1
        if replicas > bounds.MAX_REPLICAS:
            raise SizingError(f"environments.{env}: {model.path} needs more than {bounds.MAX_REPLICAS:,} replicas "
                              "of the cheapest option to meet the SLO at its peak; lower the peak or its "
                              "traffic_scale, relax the SLO, or allow faster GPUs")
        option = replace(option, replicas=replicas, nodes=math.ceil(replicas / per_node))


def _policy_families(limits: SearchLimits, joiner: str) -> str:
    """`<joiner> the environment's policy (<file>, instance-types-allowed [...])`, or nothing without one."""
    g = limits.guardrails
    if g is None or g.allowed_instance_families is None:
        return ""
    return (f"{joiner} the environment's policy ({g.source}, instance-types-allowed "
            f"{list(g.allowed_instance_families) + list(g.allowed_instance_types)})")


def relaxed(limits: SearchLimits) -> SearchLimits:
    """`limits` without its quantity constraints (GPU quota, max_replicas, the replica limit): what the SLO alone
    allows, to name the constraint that binds."""
    g = limits.guardrails
    return replace(limits, guardrails=replace(g, max_gpus=None) if g is not None else None, max_replicas=None,
                   replica_limit=None)


def explain_no_llm_option(req: Requirements, env: str, model: ResolvedModel, catalog: Catalog, *, managed: bool,
                          limits: SearchLimits) -> str:
    """Why `llm_search` found nothing: the constraint the cheapest option meeting the SLO breaks, or (when nothing
    meets the SLO at all) `explain_infeasible_llm`."""
    free = llm_search(req, env, model, catalog, managed=managed, limits=relaxed(limits))
    if free.best is None:
        return explain_infeasible_llm(req, model, catalog, managed=managed, limits=limits)
    best = free.best
    breach = limits.breach(best.instance, replicas=best.replicas, per_node=best.instance.gpu_count //
                           best.tensor_parallel_size, managed=managed)
    assert breach is not None, "the constrained search missed an option within every constraint"
    least = _least_llm(req, env, model, catalog, managed=managed, limits=limits, constraint=breach.constraint)
    return explain_breach(env, _describe(best.instance, best.tensor_parallel_size, best.replicas, best.nodes),
                          best.monthly_node_usd_per_hour * catalog.hours_per_month, breach, least=least)


def explain_infeasible_llm(req: Requirements, model: ResolvedModel, catalog: Catalog, *, managed: bool = False,
                           limits: SearchLimits = SearchLimits()) -> str:
    """Why no option meets the SLO, and the nearest feasible alternative (which constraint to relax, by how much)."""
    name = model.spec.served_name
    where = "SageMaker hosting" if managed else "GPU"
    candidates = gpu_instances(req, catalog, managed=managed, limits=limits)
    if not candidates:
        table = catalog.sagemaker if managed else catalog.ec2
        return (f"no {where} instance type in the catalog matches hardware.allowed_instance_families="
                f"{req.hardware.allowed_instance_families}{_policy_families(limits, ' and')}; allow one of "
                f"{sorted({i.family for i in table.values() if i.gpu_count})}")
    shape = traffic_shape(model)
    fitting = []  # (instance, tp, TTFT ms and ITL ms of an idle replica), for options that fit in memory
    for inst in candidates:
        gpu = catalog.gpu(inst.gpu)  # type: ignore[arg-type]
        for tp in tp_degrees(inst.gpu_count, model.architecture, managed=managed):
            replica = replica_model(model.architecture, gpu, precision=model.spec.precision,
                                    quantization=model.spec.quantization_method, tensor_parallel_size=tp)
            config = engine_limits(replica, gpu, shape, LatencyTargets(None, None))
            if config is not None:
                fitting.append((inst, tp, idle_ttft_ms(replica, config, shape), idle_itl_ms(replica, shape)))
    if not fitting:
        return _explain_memory(req, model, catalog, candidates, managed=managed, limits=limits)
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
        parts.append(f"the lowest ITL any allowed option reaches, with one request and nothing else running, is "
                     f"{best_itl[3]:.1f} ms ({inst.instance_type}, tensor_parallel_size={tp}) against "
                     f"slo.itl_p95_ms={req.slo.itl_p95_ms:g}{physics}: raise it to >= {math.ceil(best_itl[3])}, "
                     "lower model.precision, or allow faster GPUs")
    if req.slo.ttft_p95_ms is not None and best_ttft[2] > req.slo.ttft_p95_ms:
        parts.append(f"the lowest TTFT of a mean-length prompt on an idle replica is {best_ttft[2]:.0f} ms "
                     f"({best_ttft[0].instance_type}, tensor_parallel_size={best_ttft[1]}) against "
                     f"slo.ttft_p95_ms={req.slo.ttft_p95_ms:g}: raise it to >= {math.ceil(best_ttft[2])}, shorten "
                     "prompts, or allow faster GPUs")
    if not parts and managed and not model.traffic.streaming:
        limit_s = defaults.SAGEMAKER_INVOCATION_TIMEOUT_S
        parts.append(f"at p95 a non-streamed response takes longer than SageMaker's {limit_s} s "
                     "invocation limit; set traffic.streaming: true or lower mean_output_tokens")
    if not parts:
        parts.append(_explain_under_load(req, model, catalog, fitting, managed=managed))
    return f"no allowed {where} option serves {name} within the SLO: " + "; ".join(parts)


def _explain_under_load(req: Requirements, model: ResolvedModel, catalog: Catalog, fitting: list, *,
                        managed: bool) -> str:
    """Both targets are met on an idle replica but no option meets them at p95 even under light load (1/32 of its
    saturated rate): name the best p95s the fastest options reach there."""
    shape = traffic_shape(model)
    itl_only = LatencyTargets(None, req.slo.itl_p95_ms)
    runs = []
    for inst, tp, _, _ in sorted(fitting, key=lambda f: (f[2], f[0].instance_type))[:4]:
        cand = screen(model.architecture, catalog.gpu(inst.gpu), precision=model.spec.precision,  # type: ignore[arg-type]
                      quantization=model.spec.quantization_method, tensor_parallel_size=tp, kv_cache_fp8=False,
                      shape=shape, targets=itl_only, tune_batched_tokens=not managed)
        if cand is not None:
            runs.append((inst.instance_type, tp, run_at_rate(cand, shape, cand.rate_bound_rps / 32)))
    if not runs:
        return "no option keeps a token gap within slo.itl_p95_ms with a prompt chunk in the step; relax it"
    where, tp, run = min(runs, key=lambda r: (r[2].ttft_ms.p95, r[0]))
    fixes = [f"raise slo.{name} to >= {math.ceil(got)}" for name, got, want in (
        ("ttft_p95_ms", run.ttft_ms.p95, req.slo.ttft_p95_ms), ("itl_p95_ms", run.itl_ms.p95, req.slo.itl_p95_ms))
        if want is not None and got > want]
    fixes.append("relax the ITL target so prompts prefill in larger chunks" if req.slo.itl_p95_ms else
                 "allow faster GPUs")
    return (f"even at light load the best p95s are TTFT {run.ttft_ms.p95:.0f} ms and ITL {run.itl_ms.p95:.1f} ms "
            f"({where}, tensor_parallel_size={tp}), against slo.ttft_p95_ms={_slo(req.slo.ttft_p95_ms)} and "
            f"slo.itl_p95_ms={_slo(req.slo.itl_p95_ms)}: the 95th-percentile prompt ({shape.inputs.p95} tokens) "
            f"needs more prefill than the targets allow together; {', or '.join(fixes)}, or lower "
            "traffic.input_tokens_p95")


def _slo(value: float | None) -> str:
    return "none" if value is None else f"{value:g}"


def _explain_memory(req: Requirements, model: ResolvedModel, catalog: Catalog, candidates: list[InstanceType], *,
                    managed: bool, limits: SearchLimits) -> str:
    """The model does not fit any allowed node: name what would fit (shorter context, lower precision, a family)."""
    name, prec = model.spec.served_name, model.spec.precision
    largest = max(candidates, key=lambda i: (i.gpu_count * catalog.gpu(i.gpu).memory_gib, i.instance_type))  # type: ignore[arg-type]
    gpu = catalog.gpu(largest.gpu)  # type: ignore[arg-type]

    def kv_tokens(precision: Precision, g: Gpu, tp: int) -> int:
        return kv_cache_tokens(model.architecture, g, precision=precision, tensor_parallel_size=tp)

    fixes = []
    held = kv_tokens(prec, gpu, largest.gpu_count)
    if held >= 64:
        fixes.append(f"lower max_context_tokens from {model.max_context_tokens} to <= {held} "
                     f"(what {largest.instance_type} holds)")
    for lower in (Precision.FP8, Precision.INT4):
        if lower.bytes_per_param < prec.bytes_per_param:
            if kv_tokens(lower, gpu, largest.gpu_count) >= model.max_context_tokens:
                fixes.append(f"set model.precision: {lower.value} ({weights_gib(model.architecture, lower):.0f} GiB "
                             f"of weights)")
                break
    table = catalog.sagemaker if managed else catalog.ec2
    allowed = {i.family for i in candidates}
    others = sorted((i for i in table.values() if i.gpu_count and i.family not in allowed
                     and kv_tokens(prec, catalog.gpu(i.gpu), i.gpu_count) >= model.max_context_tokens),  # type: ignore[arg-type]
                    key=lambda i: (i.usd_per_hour, i.instance_type))
    if others:
        policy = "" if limits.allows(others[0]) else \
            f" and to allowedInstanceFamilies in {limits.guardrails.source}"  # type: ignore[union-attr]
        fixes.append(f"add {others[0].family!r} to hardware.allowed_instance_families{policy} "
                     f"({others[0].instance_type} fits at ${others[0].usd_per_hour:g}/h)")
    have = largest.gpu_count * gpu.memory_gib
    return (f"{name} needs {model.weights_gib:.0f} GiB of weights at {prec.value} plus KV cache for "
            f"max_context_tokens={model.max_context_tokens}, but the largest allowed node ({largest.instance_type}, "
            f"{largest.gpu_count}x {gpu.model}) has {have:.0f} GiB of GPU memory; "
            + ("; or ".join(fixes) if fixes else "no catalog option fits; serve a smaller model"))


# --- non-generative models (triton-multi-model, onnx-cpu, sagemaker-endpoint) -------------------------------------


def latency_target_ms(req: Requirements) -> float:
    """The request-latency budget batching is sized to: slo.latency_p95_ms, else latency_p99_ms, else the default."""
    return req.slo.latency_p95_ms or req.slo.latency_p99_ms or defaults.DEFAULT_NONGEN_LATENCY_P95_MS


def _estimated_work(model: ResolvedModel) -> RequestWork:
    """The catalog's (or the architecture's) work of one request: a vision model's catalog FLOPs; an autoregressive
    model's forward pass (the catalog's, else the encoder formula over the mean input) and `mean_output_tokens`
    decode steps, each reading the decoder's weights (`decoder_params_b`, else all of them) and computing 2 x those
    parameters; an encoder's FLOPs at the mean input length.

    Raises:
        SizingError: a vision or speech model outside the catalog without a measured latency.
    """
    spec = model.spec
    if model.task in (Task.VISION, Task.SPEECH_RECOGNITION) and model.catalog_gflops_per_request is None \
            and spec.measured_latency_ms is None:
        raise SizingError(f"models[{spec.served_name}]: a {model.task.value} model outside the catalog has no FLOPs "
                          "figure; set model.measured_latency_ms and model.measured_instance_type")
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
    """What one request asks of the hardware (`blueprints.sizing.RequestWork`): from a measured latency if given
    (`work_from_gpu_latency`: an autoregressive model's decode scales between GPUs with memory bandwidth, a one-pass
    model with TFLOPS; a CPU measurement is read as compute), else the catalog's or the architecture's estimate.

    Raises:
        SizingError: a vision or speech model outside the catalog without a measured latency.
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
            options.append(NongenOption(inst, gpu, per_replica, cpu, memory, per_node, loads, replicas,
                                        math.ceil(replicas / per_node), inst.usd_per_hour * factor))
    elif not managed:
        memory = cpu_replica_memory_gib(weights)
        for inst in cpu_instances(req, catalog, limits=limits):
            for per_node, vcpus in cpu_replica_shapes(inst):
                if per_node * memory > inst.memory_gib * defaults.NODE_ALLOCATABLE_CPU_FRACTION:
                    continue
                loads = _cpu_loads(models, works, vcpus, gflops_per_vcpu(inst, catalog), target)
                if loads is None:
                    continue
                replicas = _replicas_for_load(req, env, loads)
                options.append(NongenOption(inst, None, 0, vcpus, memory, per_node, loads, replicas,
                                            math.ceil(replicas / per_node), inst.usd_per_hour * factor))
    if within_owned_nodes:
        options = [o for o in options if fits_owned_nodes(o)]
    options = [o for o in options if nongen_breach(o, limits, managed=managed) is None]
    options.sort(key=lambda o: (o.nodes * o.node_usd_per_hour, not surge_room(o), o.nodes, o.latency_p95_ms,
                                o.instance.instance_type, o.cpu_per_replica))
    return options


def _describe_nongen(o: NongenOption) -> str:
    return f"{o.nodes}x {o.instance.instance_type} ({o.replicas} replicas)"


def nongen_breach(option: NongenOption, limits: SearchLimits, *, managed: bool) -> Breach | None:
    """The constraint a non-generative option breaks (`SearchLimits.breach`), None within all."""
    return limits.breach(option.instance, replicas=option.replicas, per_node=option.replicas_per_node, managed=managed)


def explain_infeasible_nongen(req: Requirements, models: list[ResolvedModel], catalog: Catalog, *,
                              accelerator: Accelerator, managed: bool = False, env: str | None = None,
                              limits: SearchLimits = SearchLimits()) -> str:
    """Why no non-generative option exists: the constraint the cheapest option meeting the latency budget breaks
    (`env` given), else what to relax (latency budget, hardware, or model size)."""
    names = ", ".join(m.spec.served_name for m in models)
    kind = "GPU" if accelerator is Accelerator.NVIDIA_GPU else "CPU"
    owned = edge_nodes(req, catalog)
    if owned is not None and not managed and accelerator is Accelerator.CPU:
        return _explain_edge(req, models, catalog, owned, [env] if env else _edge_environments(req))
    free = search_nongen_options(req, env, models, catalog, accelerator=accelerator, managed=managed,
                                 limits=relaxed(limits)) if env is not None else []
    if free:
        best = free[0]
        breach = nongen_breach(best, limits, managed=managed)
        assert breach is not None, "the constrained search missed an option within every constraint"

        def need(o: NongenOption) -> tuple[int, float]:
            return (limits.need(breach.constraint, o.instance, replicas=o.replicas, per_node=o.replicas_per_node),
                    o.nodes * o.node_usd_per_hour * catalog.hours_per_month)

        least = min(free, key=need)
        return explain_breach(env, _describe_nongen(best), need(best)[1], breach,  # type: ignore[arg-type]
                              least=(need(least)[0], _describe_nongen(least), need(least)[1]))
    candidates = (gpu_instances(req, catalog, managed=managed, limits=limits) if accelerator is Accelerator.NVIDIA_GPU
                  else [] if managed else cpu_instances(req, catalog, limits=limits))
    if not candidates:
        return (f"no {'SageMaker ' if managed else ''}{kind} instance type in the catalog matches hardware "
                f"(accelerators={[a.value for a in req.hardware.accelerators]}, allowed_instance_families="
                f"{req.hardware.allowed_instance_families}, cpu_arch="
                f"{req.hardware.cpu_arch.value if req.hardware.cpu_arch else 'any'}){_policy_families(limits, ',')}; "
                "widen hardware")
    works = [request_work(m, catalog) for m in models]
    gflops = [w.total_gflops for w in works]
    floors = []  # (p95 at batch 1 on the fastest replica shape, instance type)
    for inst in candidates:
        if accelerator is Accelerator.NVIDIA_GPU:
            gpu = catalog.gpu(inst.gpu)  # type: ignore[arg-type]
            need = defaults.TRITON_GPU_INSTANCES * sum(m.weights_gib + defaults.ENCODER_ACTIVATION_GIB for m in models)
            if need > gpu.memory_gib * defaults.GPU_MEMORY_UTILIZATION:
                continue
            times = [gpu_batch_ms(w, batch_size=1, gpu=gpu, precision=m.spec.precision) for m, w in zip(models, works)]
        else:
            vcpus = max(v for _, v in cpu_replica_shapes(inst))
            times = [cpu_request_ms(g, vcpus=vcpus, gflops_per_vcpu=gflops_per_vcpu(inst, catalog)) for g in gflops]
        floors.append((max(t + max(times) for t in times), inst.instance_type))
    if not floors:
        return (f"{names} need more GPU memory ({defaults.TRITON_GPU_INSTANCES} instances each) than any allowed GPU "
                "holds; allow a larger GPU family or lower model.precision")
    best, where = min(floors)
    return (f"no allowed {kind} option serves {names} within a p95 request latency of {latency_target_ms(req):g} ms "
            f"(slo.latency_p95_ms): the fastest, {where} at batch 1, predicts {best:.0f} ms "
            f"({sum(gflops):.1f} GFLOP per request across the models); raise slo.latency_p95_ms to >= "
            f"{math.ceil(best)}, shorten traffic.mean_input_tokens, or allow faster hardware")


def _explain_edge(req: Requirements, models: list[ResolvedModel], catalog: Catalog, owned: OwnedNodeShape,
                  envs: list[str]) -> str:
    """Why the edge cluster's nodes cannot serve the models: no whole vCPU per replica, not enough memory for one
    replica, a latency floor above the SLO on the whole node, or too few nodes for the peak (the shortfall)."""
    names = ", ".join(m.spec.served_name for m in models)
    shapes = cpu_replica_shapes(owned)
    if not shapes:
        least = next(v for v in range(owned.vcpus + 1, 4096) if cpu_replica_shapes(owned.model_copy(update={"vcpus": v})))
        return (f"hardware.edge_nodes.vcpus={owned.vcpus} leaves no whole vCPU for a replica after the node's own "
                f"share ({1 - defaults.NODE_ALLOCATABLE_CPU_FRACTION:.0%} for kubelet, the system and the proxy "
                f"sidecar): give nodes of at least {least} vCPUs")
    weights = sum(m.weights_gib for m in models)
    memory = weights * defaults.CPU_MEMORY_WEIGHTS_FACTOR + defaults.CPU_MEMORY_OVERHEAD_GIB
    usable = owned.memory_gib * defaults.NODE_ALLOCATABLE_CPU_FRACTION
    if memory > usable:
        return (f"hardware.edge_nodes.memory_gib={owned.memory_gib:g} cannot hold one replica of {names}: it needs "
                f"{memory:.1f} GiB ({weights:.2f} GiB of weights x {defaults.CPU_MEMORY_WEIGHTS_FACTOR:g} + "
                f"{defaults.CPU_MEMORY_OVERHEAD_GIB:g} GiB of runtime) within "
                f"{defaults.NODE_ALLOCATABLE_CPU_FRACTION:.0%} of the node's memory ({usable:.1f} GiB); give nodes "
                f"of at least {math.ceil(memory / defaults.NODE_ALLOCATABLE_CPU_FRACTION)} GiB, or serve the model "
                "at a lower precision")
    for env in envs:
        unconstrained = search_nongen_options(req, env, models, catalog, accelerator=Accelerator.CPU,
                                              within_owned_nodes=False)
        if unconstrained:
            best = min(unconstrained, key=lambda o: math.ceil(o.replicas / o.replicas_per_node))
            shortfall = edge_capacity_problem(env=env, nodes=owned, replicas=best.replicas,
                                              per_node=best.replicas_per_node, cpu=best.cpu_per_replica)
            if shortfall is not None:
                return shortfall
    gflops = [request_work(m, catalog).gflops for m in models]
    vcpus = max(v for _, v in shapes)
    times = [cpu_request_ms(g, vcpus=vcpus, gflops_per_vcpu=owned.gflops_per_vcpu) for g in gflops]
    floor = max(t + max(times) for t in times)
    return (f"{names} cannot meet a p95 request latency of {latency_target_ms(req):g} ms (slo.latency_p95_ms) on "
            f"hardware.edge_nodes: even one replica using {vcpus} of a node's {owned.vcpus} vCPUs at "
            f"{owned.gflops_per_vcpu:g} GFLOP/s per vCPU predicts {floor:.0f} ms ({sum(gflops):.1f} GFLOP per "
            f"request); raise slo.latency_p95_ms to >= {math.ceil(floor)}, give nodes with more or faster vCPUs "
            "(hardware.edge_nodes.vcpus, gflops_per_vcpu as measured), or shorten traffic.mean_input_tokens")


def _edge_environments(req: Requirements) -> list[str]:
    """Environments busiest first (the one short of nodes first)."""
    return sorted(req.environments, key=lambda e: -req.environments[e].traffic_scale)
