"""Why an option search found nothing, as one sentence a platform engineer can act on: the constraint the cheapest
option meeting the SLO breaks (and the least any option needs), or, when nothing meets the SLO at all, the nearest
feasible alternative (memory, ITL and TTFT floors, load, latency budget, an edge cluster's nodes) and what to relax.

Pure. The searches are `blueprints.plan.options.llm` and `blueprints.plan.options.nongen`; each explanation re-runs them
without the quantity constraints (`relaxed`) to name the one that binds.
"""

from __future__ import annotations

import math
from dataclasses import replace

from blueprints.core import defaults
from blueprints.core.errors import Fix, SizingError
from blueprints.catalog import Catalog, Gpu, InstanceType
from blueprints.contracts.placement import serving_pod_fits
from blueprints.contracts.consistency import cpu_replica_memory_gib, stored_weights_gib
from blueprints.plan.owned_nodes import OwnedNodeShape, edge_capacity_problem, edge_count_fix, edge_nodes_needed
from blueprints.plan.guardrails import Breach, SearchLimits
from blueprints.plan.options.search import (
    ResolvedModel, cpu_instances, edge_nodes, gflops_per_vcpu, gpu_instances, peak_rps, replicas_floor,
)
from blueprints.plan.options.llm import (
    describe_option, latency_targets, llm_option_on, llm_search, screen_candidates, tp_degrees, traffic_shape,
)
from blueprints.plan.options.nongen import (
    NongenOption, cpu_replica_shapes, latency_target_ms, nongen_breach, request_work, search_nongen_options,
)
from blueprints.requirements.service import Requirements
from blueprints.requirements.model import Precision
from blueprints.requirements.hosting import Accelerator
from blueprints.contracts.lora import lora_slots
from blueprints.contracts.memory import kv_cache_tokens
from blueprints.capacity.physics import replica_model
from blueprints.capacity.planning import LatencyTargets, engine_limits, idle_itl_ms, idle_ttft_ms, run_at_rate, screen
from blueprints.capacity.sizing import cpu_request_ms, gpu_batch_ms, weights_gib


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



def goal(req: Requirements) -> str:
    """What an option must do, in the requirements' terms: meet the SLO, or (a batch, `traffic.batch`) finish the
    day's work by its deadline."""
    return "meeting the SLO" if req.batch is None else "finishing traffic.batch by its deadline_hours"


def load_relief(req: Requirements, env: str) -> str:
    """How the requirements ask for less load, in their own fields: the peak rate and the SLO for interactive
    traffic; a batch's daily volume, its deadline (within its window) and the environment's share of it."""
    if req.batch is None:
        return f"lower environments.{env}.traffic_scale (or traffic.peak_requests_per_s), or relax the SLO"
    batch, hours = req.batch, req.batch.window.hours  # type: ignore[union-attr]
    later = (f", or raise traffic.batch.deadline_hours (up to the window's {hours} h)" if batch.deadline_hours < hours
             else ", or lengthen traffic.batch.window and raise deadline_hours with it" if hours < 24 else "")
    return (f"lower traffic.batch.requests_per_day (or tokens_per_day) or environments.{env}.traffic_scale{later}")


def explain_breach(req: Requirements, env: str, cheapest: str, monthly_usd: float, breach: Breach, *,
                   least: tuple[int, str, float] | None = None) -> SizingError:
    """The refusal when the cheapest option meeting the SLO breaks a constraint and no option within the
    constraints meets it: name the binding constraint, what the cheapest needs, the least any option needs
    (`least`: amount, option, monthly USD; when below the cheapest's) and the fix. Its fixes (`SizingError.fixes`)
    are the least need, then the cheapest option's, as alternatives for the same words (`blueprints.plan.hints`
    proves them: the least may plan an option over budget)."""
    fewest = ""
    needed = breach.needed
    if least is not None and least[0] < breach.needed:
        needed = least[0]
        fewest = f"; the least any option {goal(req)} needs is {least[0]} ({least[1]}, ${least[2]:,.0f}/month)"
    words = breach.fix_for(env, needed)
    field = breach.field_for(env)
    fixes = () if field is None else tuple(
        Fix(field, value, breach.fix_for(env, value), slot=words) for value in dict.fromkeys((needed, breach.needed)))
    return SizingError(f"environments.{env}: no option {goal(req)} stays within {breach.constraint}: the cheapest, "
                       f"{cheapest} (${monthly_usd:,.0f}/month), {breach.why}{fewest}; {words}, "
                       f"{load_relief(req, env)}", fixes=fixes)


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
                cands = screen_candidates(model, gpu, tp, kv_cache_fp8=fp8, req=req, env=env, managed=managed)
                if cands:
                    bound = max(c.rate_bound_rps for c in cands)
                    replicas = max(floor, math.ceil(peak / bound - 1e-9))
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
            least = (need, describe_option(o.instance, tp, o.replicas, o.nodes), usd)
    return least



def explain_no_llm_option(req: Requirements, env: str, model: ResolvedModel, catalog: Catalog, *, managed: bool,
                          limits: SearchLimits) -> SizingError:
    """Why `llm_search` found nothing: the constraint the cheapest option meeting the SLO breaks, or (when nothing
    meets the SLO at all) `explain_infeasible_llm`."""
    free = llm_search(req, env, model, catalog, managed=managed, limits=relaxed(limits))
    if free.best is None:
        return explain_infeasible_llm(req, env, model, catalog, managed=managed, limits=limits)
    best = free.best
    breach = limits.breach(best.instance, replicas=best.replicas, per_node=best.instance.gpu_count //
                           best.tensor_parallel_size, managed=managed)
    assert breach is not None, "the constrained search missed an option within every constraint"
    least = _least_llm(req, env, model, catalog, managed=managed, limits=limits, constraint=breach.constraint)
    return explain_breach(req, env,
                          describe_option(best.instance, best.tensor_parallel_size, best.replicas, best.nodes),
                          best.monthly_node_usd_per_hour * catalog.hours_per_month, breach, least=least)


def explain_infeasible_llm(req: Requirements, env: str, model: ResolvedModel, catalog: Catalog, *,
                           managed: bool = False, limits: SearchLimits = SearchLimits()) -> SizingError:
    """Why no option meets the SLO, and the nearest feasible alternative (which constraint to relax, by how much);
    each "raise slo.<target> to >= N" is a fix to prove (`SizingError.fixes`)."""
    name = model.spec.served_name
    where = "SageMaker hosting" if managed else "GPU"
    candidates = gpu_instances(req, catalog, managed=managed, limits=limits)
    if not candidates:
        table = catalog.sagemaker if managed else catalog.ec2
        return SizingError(f"no {where} instance type in the catalog matches hardware.allowed_instance_families="
                           f"{req.hardware.allowed_instance_families}{_policy_families(limits, ' and')}; allow one "
                           f"of {sorted({i.family for i in table.values() if i.gpu_count})}")
    shape = traffic_shape(model)
    fitting = []  # (instance, tp, TTFT ms and ITL ms of an idle replica), for options that fit in memory
    for inst in candidates:
        gpu = catalog.gpu(inst.gpu)  # type: ignore[arg-type]
        for tp in tp_degrees(inst.gpu_count, model.architecture, managed=managed):
            replica = replica_model(model.architecture, gpu, precision=model.spec.precision,
                                    quantization=model.spec.quantization_method, tensor_parallel_size=tp,
                                    correction=model.correction(gpu, tp, managed=managed,
                                                                production=req.is_production(env)),
                                    lora=lora_slots(model.spec.adapters), chat=model.traffic.api == "chat")
            config = engine_limits(replica, gpu, shape, LatencyTargets(None, None))
            if config is not None:
                fitting.append((inst, tp, idle_ttft_ms(replica, config, shape), idle_itl_ms(replica, shape)))
    if not fitting:
        return SizingError(_explain_memory(req, model, catalog, candidates, managed=managed, limits=limits))
    best_itl = min(fitting, key=lambda f: (f[3], f[0].instance_type))
    best_ttft = min(fitting, key=lambda f: (f[2], f[0].instance_type))
    parts, fixes = [], []
    targets = latency_targets(req, model, managed=managed)  # the screen's: the tightest target of each metric
    itl, ttft = targets.tightest("itl"), targets.tightest("ttft")
    if itl is not None and best_itl[3] > itl[1]:
        inst, tp = best_itl[0], best_itl[1]
        gpu = catalog.gpu(inst.gpu)  # type: ignore[arg-type]
        floor_ms = model.weights_gib * 1024**3 / (tp * gpu.bandwidth_gb_per_s * 1e9) * 1e3
        physics = (f"; physically, reading {model.weights_gib:.0f} GiB of weights per token at the full "
                   f"{tp * gpu.bandwidth_gb_per_s:,.0f} GB/s of {tp}x {gpu.model} takes {floor_ms:.1f} ms"
                   if itl[1] < floor_ms else "")
        fixes.append(_raise(f"slo.{itl[0]}", math.ceil(best_itl[3])))
        parts.append(f"the lowest ITL any allowed option reaches, with one request and nothing else running, is "
                     f"{best_itl[3]:.1f} ms ({inst.instance_type}, tensor_parallel_size={tp}) against "
                     f"slo.{itl[0]}={itl[1]:g}{physics}: {fixes[-1].text}, "
                     "lower model.precision, or allow faster GPUs")
    if ttft is not None and best_ttft[2] > ttft[1]:
        fixes.append(_raise(f"slo.{ttft[0]}", math.ceil(best_ttft[2])))
        parts.append(f"the lowest TTFT of a mean-length prompt on an idle replica is {best_ttft[2]:.0f} ms "
                     f"({best_ttft[0].instance_type}, tensor_parallel_size={best_ttft[1]}) against "
                     f"slo.{ttft[0]}={ttft[1]:g}: {fixes[-1].text}, shorten "
                     "prompts, or allow faster GPUs")
    if not parts and managed and model.traffic.batch is not None:
        parts.append(f"at p95 one request takes longer than SageMaker asynchronous inference's "
                     f"{defaults.SAGEMAKER_ASYNC_INVOCATION_TIMEOUT_S:,} s InvocationTimeoutSeconds; lower "
                     "traffic.mean_output_tokens or traffic.mean_input_tokens, or set operations.preference: "
                     "self-hosted")
    elif not parts and managed and not model.traffic.streaming:
        limit_s = defaults.SAGEMAKER_INVOCATION_TIMEOUT_S
        parts.append(f"at p95 a non-streamed response takes longer than SageMaker's {limit_s} s "
                     "invocation limit; set traffic.streaming: true or lower mean_output_tokens")
    if not parts:
        text, more = _explain_under_load(req, env, model, catalog, fitting, managed=managed)
        parts.append(text)
        fixes += more
    return SizingError(f"no allowed {where} option serves {name} within the SLO: " + "; ".join(parts),
                       fixes=tuple(fixes))


def _raise(field: str, value: int) -> Fix:
    """The fix "raise <field> to >= <value>"."""
    return Fix(field, value, f"raise {field} to >= {value}")


def _explain_under_load(req: Requirements, env: str, model: ResolvedModel, catalog: Catalog, fitting: list, *,
                        managed: bool) -> tuple[str, list[Fix]]:
    """Both targets are met on an idle replica but no option meets them at p95 even under light load (1/32 of its
    saturated rate): name the best p95s the fastest options reach there, with the correction the search sized with
    (a production environment's margin included)."""
    shape = traffic_shape(model)
    itl_only = LatencyTargets(None, req.slo.itl_p95_ms, itl_p99_ms=req.slo.itl_p99_ms)
    runs = []
    for inst, tp, _, _ in sorted(fitting, key=lambda f: (f[2], f[0].instance_type))[:4]:
        gpu = catalog.gpu(inst.gpu)  # type: ignore[arg-type]
        cands = screen(model.architecture, gpu, precision=model.spec.precision,
                       quantization=model.spec.quantization_method, tensor_parallel_size=tp, kv_cache_fp8=False,
                       shape=shape, targets=itl_only, tune_batched_tokens=not managed,
                       correction=model.correction(gpu, tp, managed=managed, production=req.is_production(env)),
                       lora=lora_slots(model.spec.adapters), chat=model.traffic.api == "chat")
        runs += [(inst.instance_type, tp, run_at_rate(cand, shape, cand.rate_bound_rps / 32)) for cand in cands]
    if not runs:
        itl = itl_only.tightest("itl")
        return (f"no option keeps a token gap within slo.{itl[0] if itl else 'itl_p95_ms'} with a prompt chunk in the "
                "step; relax it"), []
    where, tp, run = min(runs, key=lambda r: (r[2].ttft_ms.p95, r[0]))
    fixes = [_raise(f"slo.{name}", math.ceil(got)) for name, got, want in (
        ("ttft_p95_ms", run.ttft_ms.p95, req.slo.ttft_p95_ms), ("itl_p95_ms", run.itl_ms.p95, req.slo.itl_p95_ms),
        ("ttft_p99_ms", run.ttft_ms.p99, req.slo.ttft_p99_ms), ("itl_p99_ms", run.itl_ms.p99, req.slo.itl_p99_ms))
        if want is not None and got > want]
    words = [f.text for f in fixes]
    words.append("relax the ITL target so prompts prefill in larger chunks" if req.slo.itl_p95_ms else
                 "allow faster GPUs")
    return (f"even at light load the best p95s are TTFT {run.ttft_ms.p95:.0f} ms and ITL {run.itl_ms.p95:.1f} ms "
            f"({where}, tensor_parallel_size={tp}), against slo.ttft_p95_ms={_slo(req.slo.ttft_p95_ms)} and "
            f"slo.itl_p95_ms={_slo(req.slo.itl_p95_ms)}: the 95th-percentile prompt ({shape.inputs.p95} tokens) "
            f"needs more prefill than the targets allow together; {', or '.join(words)}, or lower "
            "traffic.input_tokens_p95"), fixes


def _slo(value: float | None) -> str:
    return "none" if value is None else f"{value:g}"


def _explain_memory(req: Requirements, model: ResolvedModel, catalog: Catalog, candidates: list[InstanceType], *,
                    managed: bool, limits: SearchLimits) -> str:
    """The model does not fit any allowed node: name what would fit (shorter context, lower precision, a family)."""
    name, prec = model.spec.served_name, model.spec.precision
    largest = max(candidates, key=lambda i: (i.gpu_count * catalog.gpu(i.gpu).memory_gib, i.instance_type))  # type: ignore[arg-type]
    gpu = catalog.gpu(largest.gpu)  # type: ignore[arg-type]

    def kv_tokens(precision: Precision, g: Gpu, tp: int) -> int:
        return kv_cache_tokens(model.architecture, g, precision=precision, tensor_parallel_size=tp,
                               lora=lora_slots(model.spec.adapters))

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



def _describe_nongen(o: NongenOption) -> str:
    return f"{o.nodes}x {o.instance.instance_type} ({o.replicas} replicas)"



def explain_infeasible_nongen(req: Requirements, models: list[ResolvedModel], catalog: Catalog, *,
                              accelerator: Accelerator, managed: bool = False, env: str | None = None,
                              limits: SearchLimits = SearchLimits()) -> SizingError:
    """Why no non-generative option exists: the constraint the cheapest option meeting the latency budget breaks
    (`env` given), else what to relax (latency budget, hardware, or model size)."""
    names = ", ".join(m.spec.served_name for m in models)
    kind = "GPU" if accelerator is Accelerator.NVIDIA_GPU else "CPU"
    owned = edge_nodes(req, catalog)
    if owned is not None and not managed and accelerator is Accelerator.CPU:
        return _explain_edge(req, models, catalog, owned, [env] if env else _edge_environments(req))
    return _explain_nongen(req, models, catalog, accelerator=accelerator, managed=managed, env=env, limits=limits,
                           names=names, kind=kind)


def _explain_nongen(req: Requirements, models: list[ResolvedModel], catalog: Catalog, *, accelerator: Accelerator,
                    managed: bool, env: str | None, limits: SearchLimits, names: str, kind: str) -> SizingError:
    """`explain_infeasible_nongen` off an edge cluster."""
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
        return explain_breach(req, env, _describe_nongen(best), need(best)[1], breach,  # type: ignore[arg-type]
                              least=(need(least)[0], _describe_nongen(least), need(least)[1]))
    candidates = (gpu_instances(req, catalog, managed=managed, limits=limits) if accelerator is Accelerator.NVIDIA_GPU
                  else [] if managed else cpu_instances(req, catalog, limits=limits))
    if not candidates:
        return SizingError(f"no {'SageMaker ' if managed else ''}{kind} instance type in the catalog matches hardware "
                           f"(accelerators={[a.value for a in req.hardware.accelerators]}, allowed_instance_families="
                           f"{req.hardware.allowed_instance_families}, cpu_arch="
                           f"{req.hardware.cpu_arch.value if req.hardware.cpu_arch else 'any'})"
                           f"{_policy_families(limits, ',')}; widen hardware")
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
        return SizingError(f"{names} need more GPU memory ({defaults.TRITON_GPU_INSTANCES} instances each) than any "
                           "allowed GPU holds; allow a larger GPU family or lower model.precision")
    best, where = min(floors)
    fix = _raise("slo.latency_p95_ms", math.ceil(best))
    return SizingError(f"no allowed {kind} option serves {names} within a p95 request latency of "
                       f"{latency_target_ms(req):g} ms (slo.latency_p95_ms): the fastest, {where} at batch 1, predicts "
                       f"{best:.0f} ms ({sum(gflops):.1f} GFLOP per request across the models); {fix.text}, shorten "
                       "traffic.mean_input_tokens, or allow faster hardware", fixes=(fix,))


def _explain_edge(req: Requirements, models: list[ResolvedModel], catalog: Catalog, owned: OwnedNodeShape,
                  envs: list[str]) -> SizingError:
    """Why the edge cluster's nodes cannot serve the models: no whole vCPU per replica, not enough memory for one
    replica, a latency floor above the SLO on the whole node, or too few nodes for the peak (the shortfall)."""
    names = ", ".join(m.spec.served_name for m in models)
    shapes = cpu_replica_shapes(owned)
    if not shapes:
        least = next(v for v in range(owned.vcpus + 1, 4096) if cpu_replica_shapes(owned.model_copy(update={"vcpus": v})))
        return SizingError(f"hardware.edge_nodes.vcpus={owned.vcpus} leaves no whole vCPU for a replica after the "
                           f"node's own share ({1 - defaults.NODE_ALLOCATABLE_CPU_FRACTION:.0%} for kubelet, the "
                           f"system and the proxy sidecar): give nodes of at least {least} vCPUs")
    weights = sum(stored_weights_gib(m.weights_gib) for m in models)  # as the option search sizes a replica
    memory = cpu_replica_memory_gib(weights)
    cpu = min(v for _, v in shapes)

    def holds(node: OwnedNodeShape) -> bool:
        return serving_pod_fits(node, per_node=1, cpu=cpu, memory_gib=memory, eks=False)

    if not holds(owned):
        least = next(g for g in range(math.ceil(owned.memory_gib), 1 << 16)
                     if holds(owned.model_copy(update={"memory_gib": float(g)})))
        return SizingError(f"hardware.edge_nodes.memory_gib={owned.memory_gib:g} cannot hold one replica of {names}: "
                           f"it needs {memory:.1f} GiB ({weights:.2f} GiB of weights x "
                           f"{defaults.CPU_MEMORY_WEIGHTS_FACTOR:g} + {defaults.CPU_MEMORY_OVERHEAD_GIB:g} GiB of "
                           "runtime), in whole GiB, with the proxy sidecar, beside kube-reserved, the eviction "
                           "threshold and the add-ons' DaemonSets (blueprints.contracts.placement); give nodes of at "
                           f"least {least} GiB, or serve the model at a lower precision")
    for env in envs:
        unconstrained = search_nongen_options(req, env, models, catalog, accelerator=Accelerator.CPU,
                                              within_owned_nodes=False)
        if unconstrained:
            best = min(unconstrained, key=lambda o: math.ceil(o.replicas / o.replicas_per_node))
            shortfall = edge_capacity_problem(env=env, nodes=owned, replicas=best.replicas,
                                              per_node=best.replicas_per_node, cpu=best.cpu_per_replica)
            if shortfall is not None:
                return SizingError(shortfall, fixes=(edge_count_fix(edge_nodes_needed(best.replicas,
                                                                                      best.replicas_per_node)),))
    gflops = [request_work(m, catalog).gflops for m in models]
    vcpus = max(v for _, v in shapes)
    times = [cpu_request_ms(g, vcpus=vcpus, gflops_per_vcpu=owned.gflops_per_vcpu) for g in gflops]
    floor = max(t + max(times) for t in times)
    fix = _raise("slo.latency_p95_ms", math.ceil(floor))
    return SizingError(f"{names} cannot meet a p95 request latency of {latency_target_ms(req):g} ms "
                       f"(slo.latency_p95_ms) on hardware.edge_nodes: even one replica using {vcpus} of a node's "
                       f"{owned.vcpus} vCPUs at {owned.gflops_per_vcpu:g} GFLOP/s per vCPU predicts {floor:.0f} ms "
                       f"({sum(gflops):.1f} GFLOP per request); {fix.text}, give nodes with more or faster vCPUs "
                       "(hardware.edge_nodes.vcpus, gflops_per_vcpu as measured), or shorten "
                       "traffic.mean_input_tokens", fixes=(fix,))


def _edge_environments(req: Requirements) -> list[str]:
    """Environments busiest first (the one short of nodes first)."""
    return sorted(req.environments, key=lambda e: -req.environments[e].traffic_scale)
