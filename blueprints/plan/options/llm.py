"""The LLM option search (vllm-gpu, sagemaker-endpoint): the cheapest instance type, tensor parallel degree and
KV-cache dtype whose replicas meet the SLO at the peak, within the environment's constraints.

Pure: the same `Requirements` and `Catalog` always give the same options in the same order (cheapest first; ties
break on a 16-bit KV cache, then ITL, then instance type name). Each candidate is screened and simulated by
`blueprints.capacity.planning`; shared helpers are in `blueprints.plan.options.search`; why no option exists is
`blueprints.plan.options.infeasible`.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, replace

from blueprints.contracts.lora import lora_slots
from blueprints.catalog.processes import process_facts
from blueprints.core import bounds, defaults
from blueprints.catalog import Architecture, Catalog, Gpu, InstanceType
from blueprints.plan.guardrails import Breach, SearchLimits
from blueprints.plan.options.search import ResolvedModel, gpu_instances, peak_rps, price_factor, replicas_floor
from blueprints.requirements.model import Traffic
from blueprints.requirements.service import Requirements
from blueprints.capacity.measured import covered_gpus, measures_fp8_kv
from blueprints.capacity.physics import engine_profile, planned_memory_utilization
from blueprints.contracts.memory import weights_gib
from blueprints.catalog.engines import engine_facts
from blueprints.capacity.prefix_cache import requested_reuse, shared_cached_tokens, sizing_cached_tokens
from blueprints.capacity.planning import (
    Candidate,
    LatencyTargets,
    ReplicaSizing,
    TrafficShape,
    meets_at,
    run_at_rate,
    screen,
    size_replica,
    size_replica_at_least,
    size_replica_until,
)
from blueprints.capacity.planning import traffic_shape as planning_shape
from blueprints.capacity.simulator import SimulationResult
from blueprints.capacity.sizing import tensor_parallel_problems


@dataclass(frozen=True)
class LlmOption:
    """One candidate deployment of an LLM: instance type, tensor parallel, KV-cache dtype, engine limits and the
    replicas that serve the peak within the SLO (`blueprints.capacity.planning`).

    Attributes:
        candidate: the replica shape and its engine limits.
        replicas: replicas for this environment's peak.
        nodes: nodes holding them, placed as the scheduler places them (`SearchLimits.nodes`: zone spread,
            replicas per node).
        node_usd_per_hour: price of one node (spot-adjusted).
        check: the simulated run that decided the replica count (at the peak share of the minimum replicas, or at
            the highest rate found meeting the SLO).
        sizing: the highest per-replica rate meeting the SLO and the run there; None until needed (an option that
            already meets the SLO at its minimum replica count is priced without the search, and the search stops
            once the replica count is known; `complete_sizing` fills it for the chosen one).
        rate_searched: the replicas came from the rate search (`planning.size_replica_until`), which
            `complete_sizing` runs to its end.
    """

    instance: InstanceType
    gpu: Gpu
    candidate: Candidate
    replicas: int
    nodes: int
    node_usd_per_hour: float
    check: SimulationResult
    sizing: ReplicaSizing | None = None
    rate_searched: bool = False

    @property
    def tensor_parallel_size(self) -> int:
        return self.candidate.tensor_parallel_size

    @property
    def engine(self) -> str:
        """The serving engine (engines.yaml name) whose profile and step tables sized it."""
        return self.candidate.model.engine.tables

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
        engines: each engine considered, in the catalog's order (vLLM first), with its cheapest option (or None and
            why not): the plan's engine table.
    """

    best: LlmOption | None
    at_peak: SimulationResult | None
    options: list[LlmOption]
    rejected: list[Rejection]
    screened: int
    simulated: int
    engines: tuple[EngineResult, ...] = ()


@dataclass(frozen=True)
class EngineResult:
    """One engine's row of the engine table.

    Attributes:
        engine: its engines.yaml name.
        best: its cheapest option meeting the SLO within the constraints, with its run at peak (None: see `why_not`).
        why_not: why it has no option (not allowed, cannot serve the model, or nothing within the search's reach).
        bound: without `best`, its cheapest candidate on the analytic bound (a lower bound of its cost: simulated,
            its replicas only grow), when it has one.
    """

    engine: str
    best: tuple[LlmOption, SimulationResult] | None
    why_not: str = ""
    bound: LlmOption | None = None


#: How far above the cheapest option the search keeps looking for other engines' best (their rows in the engine
#: table); beyond it an engine is reported as "more than 25 % above the cheapest" on its analytic bound.
ENGINE_TABLE_REACH = 1.25


def tp_degrees(gpus_per_node: int, arch: Architecture, *, managed: bool) -> list[int]:
    """Tensor-parallel degrees to try: powers of two dividing the node's GPUs (within one node) that vLLM can shard
    the model over (`blueprints.contracts.memory.tensor_parallel_problems`). A SageMaker LMI endpoint runs one model copy across all GPUs
    of its instance."""
    degrees = [gpus_per_node] if managed else [2**k for k in range(0, 4)
                                               if 2**k <= gpus_per_node and gpus_per_node % 2**k == 0]
    return [tp for tp in degrees if not tensor_parallel_problems(arch, tp)]


def traffic_shape(model: ResolvedModel) -> TrafficShape:
    """The request lengths (mean and p95), arrival pattern and context limit one replica of `model` sees."""
    t = model.traffic
    # Reuse over several replicas is planned with the router (session or prefix-aware routing), so cache hits are
    # counted as routed (`blueprints.capacity.prefix_cache`); one replica hits the same without it.
    reuse = requested_reuse(t)
    return planning_shape(t.mean_input_tokens, t.input_tokens_p95, t.mean_output_tokens, t.output_tokens_p95,
                          pattern=t.pattern.value, max_model_len=model.max_context_tokens,
                          cached_tokens=sizing_cached_tokens(reuse),
                          shared_tokens=shared_cached_tokens(reuse))


def sagemaker_invocation_limit_s(traffic: Traffic) -> int:
    """The most one SageMaker request may take, s: a batch's asynchronous invocation timeout
    (`defaults.SAGEMAKER_ASYNC_INVOCATION_TIMEOUT_S`), else the real-time invocation limit."""
    return (defaults.SAGEMAKER_ASYNC_INVOCATION_TIMEOUT_S if traffic.batch is not None
            else defaults.SAGEMAKER_INVOCATION_TIMEOUT_S)


def latency_targets(req: Requirements, model: ResolvedModel, *, managed: bool) -> LatencyTargets:
    """The SLO's TTFT and ITL p95 (and p99s when given), and on SageMaker without streaming its invocation limit on
    the whole request (`sagemaker_invocation_limit_s`: real-time, or a batch's asynchronous one)."""
    t = model.traffic
    e2e = sagemaker_invocation_limit_s(t) * 1e3 if managed and not t.streaming else None
    return LatencyTargets(req.slo.ttft_p95_ms, req.slo.itl_p95_ms, e2e, ttft_p99_ms=req.slo.ttft_p99_ms,
                          itl_p99_ms=req.slo.itl_p99_ms)


def fp8_kv_cache_planned(gpu: Gpu, *, managed: bool, engine: str = "vllm") -> bool:
    """Whether the search tries an FP8 KV cache on `gpu`: the GPU has FP8, the engine is self-hosted vLLM, and the
    capacity model has step times for the attention the pinned image runs with it there: either the image keeps its
    default attention backend with an FP8 cache on this compute capability (`processes.yaml`
    `fp8_kv_default_attention_from`: below SM 9.0 vLLM leaves FlashAttention for another backend), or the measured
    kernel tables of the pinned vLLM hold FP8-KV attention timed on this GPU (`measured.measures_fp8_kv`: the L40S
    at vLLM 0.24.0). The roofline GPUs below SM 9.0 (L4, A10G) never get one: no point measures their backend."""
    if not gpu.supports_fp8 or managed:
        return False
    if engine != "vllm":  # another engine: where its measured tables time FP8-KV attention on this GPU
        facts_e = engine_facts(engine)
        return "fp8" in facts_e.features.kv_cache_dtypes and measures_fp8_kv(gpu, engine, facts_e.version)
    facts = process_facts(defaults.VLLM_IMAGE)
    floor = facts.fp8_kv_default_attention_from if facts is not None else None
    if floor is None or gpu.compute_capability >= floor:
        return True
    return measures_fp8_kv(gpu, "vllm", defaults.VLLM_IMAGE.rsplit(":v", 1)[1])


def engine_memory(model: ResolvedModel, gpu: Gpu, tp: int, engine: str) -> tuple[float, float]:
    """(`engine`'s memory flag value, the share the capacity model sizes its KV cache in) for `model` on `tp` GPUs
    (`physics.planned_memory_utilization`)."""
    return planned_memory_utilization(engine_profile(engine_facts(engine).profile), gpu,
                                      weights_gib_per_gpu=weights_gib(model.architecture, model.spec.precision) / tp,
                                      tensor_parallel_size=tp)


def screen_candidates(model: ResolvedModel, gpu: Gpu, tp: int, *, kv_cache_fp8: bool, req: Requirements, env: str,
                      managed: bool, central: bool = False, engine: str = "vllm") -> tuple[Candidate, ...]:
    """`planning.screen` for this model, GPU and degree (SageMaker's LMI keeps vLLM's default token budget), with
    the model's calibration for them when there is one, or in a production environment (unless `central`) the margin
    of the model's band (`ResolvedModel.correction`): one candidate per engine-limit choice, best first by the
    mean-value model, () when none can serve."""
    profile = engine_profile(engine_facts(engine).profile)
    return screen(model.architecture, gpu, precision=model.spec.precision,
                  quantization=model.spec.quantization_method, tensor_parallel_size=tp, kv_cache_fp8=kv_cache_fp8,
                  shape=traffic_shape(model), targets=latency_targets(req, model, managed=managed),
                  tune_batched_tokens=not managed,
                  correction=model.correction(gpu, tp, managed=managed,
                                              production=req.is_production(env) and not central,
                                              kv_cache_fp8=kv_cache_fp8, engine=engine),
                  lora=lora_slots(model.spec.adapters), chat=model.traffic.api == "chat",
                  engine=profile, gpu_memory_utilization=engine_memory(model, gpu, tp, engine)[1])


def replicas_for(peak_rps: float, per_replica_rps: float, floor: int) -> int:
    """Replicas that carry `peak_rps` requests/s at `per_replica_rps` each (the highest rate one replica serves within
    the SLO: simulated, bounded or measured, `blueprint choose`), and at least `floor`."""
    return max(floor, math.ceil(peak_rps / per_replica_rps - 1e-9))


def _priced_option(inst: InstanceType, gpu: Gpu, cand: Candidate, *, peak: float, floor: int, factor: float,
                   shape: TrafficShape, targets: LatencyTargets, limits: SearchLimits) -> LlmOption | None:
    """The replicas (and the nodes their placement takes, `SearchLimits.nodes`) a screened candidate needs for
    `peak`, or None when it cannot meet the targets.

    When the minimum replica count already meets the targets at its share of the peak, that is the count (one
    simulated run); otherwise the highest rate meeting them is searched (`planning.size_replica_until`), as far as
    the replica count it gives for `peak` is still open."""
    per_node = inst.gpu_count // cand.tensor_parallel_size
    need = peak / floor
    run = meets_at(cand, shape, targets, need)
    if run is not None:
        return LlmOption(inst, gpu, cand, floor, limits.nodes(floor, per_node=per_node), inst.usd_per_hour * factor,
                         run)
    sizing = size_replica_until(cand, shape, targets,
                                lambda rates: len({replicas_for(peak, rps, floor) for rps in rates}) == 1)
    if sizing is None:
        return None
    replicas = replicas_for(peak, sizing.max_rps, floor)
    return LlmOption(inst, gpu, cand, replicas, limits.nodes(replicas, per_node=per_node), inst.usd_per_hour * factor,
                     sizing.at_max, rate_searched=True)


def _cheapest_choice(inst: InstanceType, gpu: Gpu, cands: tuple[Candidate, ...], model: ResolvedModel,
                     req: Requirements, env: str, *, managed: bool, factor: float,
                     limits: SearchLimits) -> tuple[LlmOption, SimulationResult] | None:
    """The engine-limit choice of one (instance type, degree, KV-cache dtype) that the simulation sizes cheapest,
    predicted at its peak share as the search predicts it (the first choice at a tie), or None when none meets the
    SLO."""
    peak, floor = peak_rps(req, env, model), replicas_floor(req, env)
    shape, targets = traffic_shape(model), latency_targets(req, model, managed=managed)
    found = []
    for cand in cands:
        priced = _priced_option(inst, gpu, cand, peak=peak, floor=floor, factor=factor, shape=shape, targets=targets,
                                limits=limits)
        if priced is not None:
            found.append(predict_at_peak(priced, model, req, env, managed=managed, limits=limits))
    return min(found, key=lambda f: (round(f[0].monthly_node_usd_per_hour, 9), f[1].itl_ms.p95)) if found else None


def describe_option(inst: InstanceType, tp: int, replicas: int, nodes: int) -> str:
    return f"{nodes}x {inst.instance_type} ({replicas} replicas, tensor_parallel_size={tp})"


def llm_search(req: Requirements, env: str, model: ResolvedModel, catalog: Catalog, *,
               managed: bool = False, limits: SearchLimits = SearchLimits(), central: bool = False) -> LlmSearch:
    """The cheapest (instance type, tensor parallel, KV-cache dtype) meeting the SLO within `limits` (`central`: on the
    model's central estimate, without a production environment's margin: what a calibration could plan).

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
    engines, excluded = search_engines(req, model, managed=managed)
    rank = {e: i for i, e in enumerate(engines)}
    queue: list[tuple] = []  # (cost $/h, engine rank, fp8, instance type, degree, choice, stage, payload)
    rejected: list[Rejection] = []
    screened = 0
    bounds_by_engine: dict[str, float] = {}

    for engine in engines:
        for inst in gpu_instances(req, catalog, managed=managed, limits=limits):
            gpu = catalog.gpu(inst.gpu)  # type: ignore[arg-type]
            if not sized_on(engine, gpu):
                continue
            for tp in tp_degrees(inst.gpu_count, model.architecture, managed=managed):
                for fp8 in ((False, True) if fp8_kv_cache_planned(gpu, managed=managed, engine=engine) else (False,)):
                    cands = screen_candidates(model, gpu, tp, kv_cache_fp8=fp8, req=req, env=env, managed=managed,
                                              central=central, engine=engine)
                    if not cands:
                        continue
                    screened += 1
                    per_node = inst.gpu_count // tp
                    for choice, cand in enumerate(cands):  # each engine-limit choice, bounded by its analytic rate
                        replicas = replicas_for(peak, cand.rate_bound_rps, floor)
                        nodes = limits.nodes(replicas, per_node=per_node)
                        cost = nodes * inst.usd_per_hour * factor
                        breach = limits.breach(inst, replicas=replicas, per_node=per_node, managed=managed)
                        if breach is not None:
                            if choice == 0 and engine == engines[0]:
                                rejected.append(Rejection(describe_option(inst, tp, replicas, nodes),
                                                          cost * catalog.hours_per_month, breach, simulated=False))
                            continue
                        bounds_by_engine[engine] = min(bounds_by_engine.get(engine, math.inf), cost)
                        heapq.heappush(queue, (cost, rank[engine], fp8, inst.instance_type, tp, choice, 0,
                                               (inst, gpu, cand)))
    options: list[LlmOption] = []
    finals: dict[str, list[tuple[LlmOption, SimulationResult]]] = {}
    simulated = 0

    def first_cost(e: str) -> float:
        return finals[e][0][0].monthly_node_usd_per_hour

    def settled() -> bool:
        """Every engine's cheapest is found (with its ties), or the queue's head is beyond the engine table's
        reach."""
        if not finals:
            return False
        head = queue[0][0]
        if head <= max(first_cost(e) for e in finals) + 1e-9:
            return False
        waiting = [e for e in engines if e not in finals and e in bounds_by_engine]
        return not waiting or head > min(first_cost(e) for e in finals) * ENGINE_TABLE_REACH + 1e-9

    while queue and not settled():
        cost, r, fp8, name, tp, choice, stage, payload = heapq.heappop(queue)
        engine = engines[r]
        if engine in finals and cost > first_cost(engine) + 1e-9:  # its cheapest is known: steps only raise cost
            continue
        if stage == 0:  # screened: simulate the replicas meeting the SLO at peak
            inst, gpu, cand = payload
            simulated += 1
            option = _priced_option(inst, gpu, cand, peak=peak, floor=floor, factor=factor, shape=shape,
                                    targets=targets, limits=limits)
            if option is not None:
                options.append(option)
                heapq.heappush(queue, (option.monthly_node_usd_per_hour, r, fp8, name, tp, choice, 1, option))
        elif stage == 1:  # simulated: predict it at its peak share, within the constraints
            option, run = predict_at_peak(payload, model, req, env, managed=managed, limits=limits)
            per_node = option.instance.gpu_count // tp
            breach = limits.breach(option.instance, replicas=option.replicas, per_node=per_node, managed=managed)
            if breach is not None:
                if engine == engines[0]:
                    rejected.append(Rejection(describe_option(option.instance, tp, option.replicas, option.nodes),
                                              option.monthly_node_usd_per_hour * catalog.hours_per_month, breach,
                                              simulated=True))
                continue
            heapq.heappush(queue, (option.monthly_node_usd_per_hour, r, fp8, name, tp, choice, 2, (option, run)))
        else:
            finals.setdefault(engine, []).append(payload)
    per_engine = {e: min(found, key=lambda f: (_option_order(f[0])[:2], f[1].itl_ms.p95, _option_order(f[0])[2:]))
                  for e, found in finals.items()}
    chosen = choose_engine(per_engine, req)
    options = sorted((o for o in options if o.engine == chosen and limits.breach(
        o.instance, replicas=o.replicas, per_node=o.instance.gpu_count // o.tensor_parallel_size,
        managed=managed) is None), key=_option_order)
    best, at_peak = per_engine[chosen] if chosen else (None, None)
    rejected.sort(key=lambda r: (r.monthly_usd, r.what))
    waiting = {engines[entry[1]]: entry for entry in sorted(queue, reverse=True)}  # each engine's cheapest left
    table = tuple(EngineResult(e, per_engine.get(e), "" if e in per_engine else (
        excluded.get(e) or _why_no_option(e, bounds_by_engine, per_engine)),
        bound=_bound_option(waiting[e], peak=peak, floor=floor, factor=factor, limits=limits)
        if e not in per_engine and e in waiting else None) for e in (*engines, *excluded))
    return LlmSearch(best, at_peak, options, rejected, screened, simulated, table)


def _bound_option(entry: tuple, *, peak: float, floor: int, factor: float, limits: SearchLimits) -> LlmOption:
    """The option of a queue entry left when the search settled: a lower bound of what its engine costs (a screened
    candidate at its analytic rate, or a simulated option before its prediction at peak; both only grow)."""
    payload, stage = entry[-1], entry[-2]
    if stage == 0:
        inst, gpu, cand = payload
        per_node = inst.gpu_count // cand.tensor_parallel_size
        replicas = replicas_for(peak, cand.rate_bound_rps, floor)
        return LlmOption(inst, gpu, cand, replicas, limits.nodes(replicas, per_node=per_node),
                         inst.usd_per_hour * factor, None)  # type: ignore[arg-type]
    return payload if stage == 1 else payload[0]


def sized_on(engine: str, gpu: Gpu) -> bool:
    """Whether the capacity model can size `engine` on `gpu`: vLLM everywhere (its measured tables, else the roofline
    fitted on published vLLM points); another engine only where its own measured step tables exist (no published
    point of SGLang or TensorRT-LLM fits a roofline of theirs)."""
    return engine == "vllm" or gpu.name in covered_gpus(engine)


def search_engines(req: Requirements, model: ResolvedModel, *, managed: bool) -> tuple[list[str], dict[str, str]]:
    """The engines the search sizes (the requirements' `operations.engines` in the catalog's order; SageMaker's
    LMI container runs vLLM), and those left out with why: an engine that cannot serve the model's quantisation or
    its LoRA adapters, or cannot take the production-stack router where prompt reuse is declared (the capacity
    model counts routed cache hits)."""
    if managed:
        return ["vllm"], {}
    allowed = [e for e in ("vllm", "sglang", "tensorrt-llm") if e in req.operations.engines]
    excluded: dict[str, str] = {}
    method = model.spec.quantization_method
    for e in allowed:
        facts = engine_facts(e)
        if method is not None and method.value not in facts.features.quantizations:
            excluded[e] = (f"{facts.display} {facts.version} does not serve {method.value} checkpoints "
                           f"(it serves {', '.join(facts.features.quantizations) or 'none'})")
        elif model.spec.adapters and not facts.features.lora:
            excluded[e] = f"{facts.display} {facts.version} serves no LoRA adapters here"
        elif requested_reuse(model.traffic).declared and not facts.router.production_stack_router:
            excluded[e] = (f"prompt reuse is planned with the production-stack router, which cannot front "
                           f"{facts.display}: {facts.router.reason}")
    return [e for e in allowed if e not in excluded], excluded


def choose_engine(finals: dict[str, tuple[LlmOption, SimulationResult]], req: Requirements) -> str | None:
    """The engine planned: the cheapest engine's, unless vLLM's best is within `operations.engine_switch_threshold_pct`
    of it (the default engine's operational-simplicity premium); ties keep the catalog's order (vLLM first)."""
    if not finals:
        return None
    cheapest = min(finals, key=lambda e: (round(finals[e][0].monthly_node_usd_per_hour, 9), e != "vllm"))
    if "vllm" in finals and cheapest != "vllm":
        keep = 1 - req.operations.engine_switch_threshold_pct / 100
        if finals[cheapest][0].monthly_node_usd_per_hour >= finals["vllm"][0].monthly_node_usd_per_hour * keep - 1e-9:
            return "vllm"
    return cheapest


def _why_no_option(engine: str, bounds_by_engine: dict[str, float], finals: dict) -> str:
    if engine not in bounds_by_engine:
        return ("no candidate can serve the model within the SLO on the allowed GPUs with measured tables of it "
                f"({', '.join(covered_gpus(engine))}): memory, ITL at batch 1 or TTFT on an idle replica")
    if finals:
        return (f"its analytic bound is over {ENGINE_TABLE_REACH - 1:.0%} above the cheapest option: not simulated "
                "further")
    return "no candidate meets the SLO within the constraints"


def _option_order(o: LlmOption) -> tuple:
    """Cheapest first; a 16-bit KV cache before FP8 at the same cost; then instance type name and degree."""
    return (round(o.monthly_node_usd_per_hour, 9), o.kv_cache_dtype == "fp8", o.instance.instance_type,
            o.tensor_parallel_size)


def llm_option_on(req: Requirements, env: str, model: ResolvedModel, catalog: Catalog, *, instance_type: str,
                  tensor_parallel_size: int, kv_cache_fp8: bool, managed: bool,
                  limits: SearchLimits = SearchLimits(),
                  engine: str = "vllm") -> tuple[LlmOption, SimulationResult] | str:
    """The option on given hardware and engine (an existing stack config's), priced and predicted as the search
    does, or why that hardware cannot serve now (a sentence)."""
    table = catalog.sagemaker if managed else catalog.ec2
    inst = table.get(instance_type)
    if inst is None or inst not in gpu_instances(req, catalog, managed=managed, limits=limits):
        return f"{instance_type} is no longer allowed (hardware.allowed_instance_families or the environment's policy)"
    gpu = catalog.gpu(inst.gpu)  # type: ignore[arg-type]
    engines, excluded = search_engines(req, model, managed=managed)
    if engine not in engines or not sized_on(engine, gpu):
        return excluded.get(engine) or f"engine {engine} is no longer allowed there (operations.engines)"
    if tensor_parallel_size not in tp_degrees(inst.gpu_count, model.architecture, managed=managed) or (
            kv_cache_fp8 and not fp8_kv_cache_planned(gpu, managed=managed, engine=engine)):
        return f"tensor_parallel_size={tensor_parallel_size} or its KV-cache dtype no longer applies there"
    cands = screen_candidates(model, gpu, tensor_parallel_size, kv_cache_fp8=kv_cache_fp8, req=req, env=env,
                              managed=managed, engine=engine)
    found = _cheapest_choice(inst, gpu, cands, model, req, env, managed=managed,
                             factor=price_factor(req, env, catalog, managed=managed), limits=limits)
    if found is None:
        return "it no longer meets the SLO"
    option, run = found
    breach = limits.breach(inst, replicas=option.replicas, per_node=inst.gpu_count // tensor_parallel_size,
                           managed=managed)
    return f"it {breach.why}" if breach else (option, run)



def complete_sizing(option: LlmOption, model: ResolvedModel, req: Requirements, env: str, *,
                    managed: bool) -> LlmOption:
    """The option with its `sizing` (the highest per-replica rate meeting the SLO), for the plan's capacity."""
    if option.sizing is not None:
        return option
    if option.rate_searched:
        sizing = size_replica(option.candidate, traffic_shape(model), latency_targets(req, model, managed=managed))
        return replace(option, check=sizing.at_max, sizing=sizing)  # type: ignore[union-attr]
    need = peak_rps(req, env, model) / option.replicas
    sizing = size_replica_at_least(option.candidate, traffic_shape(model), latency_targets(req, model, managed=managed),
                                   need)
    return replace(option, sizing=sizing)


def size_twin(option: LlmOption, model: ResolvedModel, req: Requirements, env: str, catalog: Catalog, *,
              kv_cache_fp8: bool, limits: SearchLimits) -> LlmOption | None:
    """The same instance type and degree with the other KV-cache dtype, priced and predicted at its peak share the
    same way (None when it cannot meet the SLO), to say what FP8 KV changes."""
    cands = screen_candidates(model, option.gpu, option.tensor_parallel_size, kv_cache_fp8=kv_cache_fp8, req=req,
                              env=env, managed=False, engine=option.engine)
    found = _cheapest_choice(option.instance, option.gpu, cands, model, req, env, managed=False,
                             factor=option.node_usd_per_hour / option.instance.usd_per_hour, limits=limits)
    if found is None or limits.breach(option.instance, replicas=found[0].replicas, managed=False,
                                      per_node=option.instance.gpu_count // option.tensor_parallel_size):
        return None
    return found[0]


def predict_at_peak(option: LlmOption, model: ResolvedModel, req: Requirements, env: str, *,
                    managed: bool, limits: SearchLimits) -> tuple[LlmOption, SimulationResult]:
    """The simulated replica at this environment's peak share per replica (what the plan predicts).

    The rate is at most the option's `max_rps`, which met the targets; should the finite simulation miss them at the
    lower rate (the two runs draw the same requests but stretch them differently), a replica is added until it
    does, so a plan never predicts a p95 above its SLO. Returns the (possibly grown) option and its run; past
    `bounds.MAX_REPLICAS` the option with one replica more than that, which the replica limit
    (`SearchLimits.breach`) then rules out.
    """
    targets = latency_targets(req, model, managed=managed)
    shape = traffic_shape(model)
    per_node = option.instance.gpu_count // option.tensor_parallel_size
    while True:
        run = run_at_rate(option.candidate, shape, peak_rps(req, env, model) / option.replicas)
        if targets.met_by(run):
            return option, run
        replicas = option.replicas + 1
        option = replace(option, replicas=replicas, nodes=limits.nodes(replicas, per_node=per_node))
        if replicas > bounds.MAX_REPLICAS:
            return option, run
