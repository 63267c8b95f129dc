"""The LLM builder (vllm-gpu) and the LLM plan SageMaker's LMI shares: the cheapest option from
`blueprints.plan.options.llm` (or the existing stack config's hardware while within the switch threshold,
`blueprints.plan.stability`), its compute, simulated predictions, and the reasons in plain words. Pure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from blueprints.capacity.prefix_cache import requested_reuse
from blueprints.plan.router import plan_router, reuse_reasons
from blueprints.core import defaults
from blueprints.contracts.sections import (
    Archetype, Autoscaling, CapacityCorrection, CapacityType, Compute, CostLine, Predictions, ServedModel, VllmEngine,
)
from blueprints.contracts.blueprint import Blueprint
from blueprints.catalog import Catalog
from blueprints.contracts.consistency import streamer_buffer_gib, vllm_host_memory_gib
from blueprints.contracts.serving_flags import vllm_dtype
from blueprints.capacity.analytic import prefill_time_share
from blueprints.capacity.physics import Correction
from blueprints.capacity.planning import candidate, size_replica
from blueprints.capacity.simulator import SimulationResult
from blueprints.plan.options.search import ResolvedModel, service_fixed_monthly_usd, peak_rps, replicas_floor
from blueprints.catalog.engines import engine_facts
from blueprints.plan.engines import engine_lines, engine_table
from blueprints.plan.options.llm import (
    engine_memory,
    LlmOption, LlmSearch, complete_sizing, fp8_kv_cache_planned, latency_targets, llm_option_on, llm_search,
    predict_at_peak, replicas_for, size_twin, traffic_shape,
)
from blueprints.plan.options.infeasible import explain_no_llm_option
from blueprints.plan.guardrails import SearchLimits
from blueprints.core.errors import SizingError
from blueprints.requirements.service import Requirements
from blueprints.requirements.hosting import Accelerator, CpuArch
from blueprints.plan.selection import Selection
from blueprints.plan.stability import Hardware, decide
from blueprints.plan.startup import calibrated, vllm_startup
from blueprints.contracts.weights import replica_ephemeral_gib, streams_format
from blueprints.contracts.lora import adapters_volume_gib, lora_engine, lora_reason
from blueprints.contracts.memory import GIB, lora_bytes_per_gpu
from blueprints.plan.builders.context import (
    PlanContext, access_reasons, autoscaling_bounds, capacity_type_of, common_fields, cooldown_s, quota_cap,
    served_model,
)
from blueprints.plan.builders.cost import budget_ceiling, cost_lines, cost_notes
from blueprints.plan.builders.llm_band import PlanBand, band_predictions, band_reason, band_source, plan_band


def _fmt(value: float | None) -> str:
    return "(no target)" if value is None else f"<= {value:g} ms"


def _p99_words(req: Requirements) -> str:
    """The p99 targets the search also met, when the SLO sets them: ", TTFT p99 <= 3000 ms"."""
    return "".join(f", {label} p99 <= {v:g} ms" for label, v in (("TTFT", req.slo.ttft_p99_ms),
                                                               ("ITL", req.slo.itl_p99_ms)) if v is not None)


@dataclass(frozen=True)
class LlmPlan:
    """The chosen LLM option, the search behind it, its simulated run at this environment's peak, the reasons, and
    the calibration its capacity model was corrected with (None: uncorrected)."""

    best: LlmOption
    search: LlmSearch
    at_peak: SimulationResult
    reasons: list[str]
    band: PlanBand
    correction: CapacityCorrection | None = None


def _llm_hardware(option: LlmOption, *, managed: bool) -> Hardware:
    return Hardware(archetype=Archetype.SAGEMAKER_ENDPOINT if managed else Archetype.VLLM_GPU,
                    instance_type=option.instance.instance_type, tensor_parallel_size=option.tensor_parallel_size,
                    kv_cache_dtype=None if managed else option.kv_cache_dtype,
                    engine=None if managed else option.engine)


def llm_plan(req: Requirements, env: str, model: ResolvedModel, catalog: Catalog, ctx: PlanContext, *,
              managed: bool) -> LlmPlan:
    """The cheapest option within the SLO and the environment's constraints, or the existing stack config's hardware
    while it stays within `ctx.switch_threshold_pct` of it (`blueprints.plan.stability`).

    Raises:
        SizingError: no option meets the SLO within the constraints; the message names the binding one.
    """
    limits = ctx.limits(req, env, managed=managed)
    search = llm_search(req, env, model, catalog, managed=managed, limits=limits)
    if search.best is None:
        raise explain_no_llm_option(req, env, model, catalog, managed=managed, limits=limits)
    best, at_peak = search.best, search.at_peak
    headline = None
    previous = ctx.pinned or ctx.existing.get(f"{req.service}-{env}")
    if previous is not None and previous.archetype is (Archetype.SAGEMAKER_ENDPOINT if managed else Archetype.VLLM_GPU):
        fixed = service_fixed_monthly_usd(req, env, catalog, managed=managed)
        month = catalog.hours_per_month
        kept = llm_option_on(req, env, model, catalog, instance_type=previous.instance_type,
                             tensor_parallel_size=previous.tensor_parallel_size or 0,
                             kv_cache_fp8=previous.kv_cache_dtype == "fp8", managed=managed, limits=limits,
                             engine=previous.engine or "vllm")
        if ctx.pinned is not None:  # a pilot's finalist or the chosen one: its hardware whatever it costs, or refused
            if isinstance(kept, str):
                whose = "the chosen candidate" if ctx.pinned_by else "the pilot's finalist"
                raise SizingError(f"environments.{env}: {whose} {previous.describe()} cannot serve there: {kept}")
            best, at_peak = kept
            measured = ""
            if ctx.pinned_rps is not None:  # the chosen candidate's measured goodput: never fewer replicas than it needs
                best, at_peak, measured = _at_least_measured(best, at_peak, ctx.pinned_rps, model, req, env,
                                                             managed=managed, limits=limits)
            cheapest = search.best.monthly_node_usd_per_hour * month + fixed
            what = ctx.pinned_by or f"pilot finalist {previous.describe()}"
            headline = (f"{what}: ${best.monthly_node_usd_per_hour * month + fixed:,.0f}/month at this environment's "
                        f"peak vs the cheapest {'predicted' if ctx.pinned_by else ''}".rstrip() + ", "
                        f"{_llm_hardware(search.best, managed=managed).describe()}, ${cheapest:,.0f}/month{measured}")
            previous = None
    if previous is not None and previous.archetype is (Archetype.SAGEMAKER_ENDPOINT if managed else Archetype.VLLM_GPU):
        keep, headline = decide(
            previous, _llm_hardware(best, managed=managed),
            cheapest_usd=best.monthly_node_usd_per_hour * month + fixed,
            previous_usd=None if isinstance(kept, str) else kept[0].monthly_node_usd_per_hour * month + fixed,
            unavailable=kept if isinstance(kept, str) else None, threshold_pct=ctx.switch_threshold_pct)
        if keep:
            best, at_peak = kept  # type: ignore[misc]
        elif headline is not None:
            headline = _switch_cause(headline, previous, kept, model, req, env, catalog, managed=managed)
    best = complete_sizing(best, model, req, env, managed=managed)
    correction = capacity_correction(best, model, req, managed=managed)
    band = plan_band(best, at_peak, model, req, env, catalog, managed=managed, limits=limits,
                     search_central=not ctx.proving)
    reasons = _llm_reasons(req, env, model, best, search, at_peak, catalog, managed=managed, headline=headline,
                            limits=limits)
    if correction is not None:  # after "step times: ...", what corrected them
        at = next(i for i, r in enumerate(reasons) if r.startswith("step times: ")) + 1
        reasons = [*reasons[:at], correction.summary, *reasons[at:]]
    at = next(i for i, r in enumerate(reasons) if " replica(s) for " in r) + 1  # after the fleet at peak
    reasons = [*reasons[:at], band_reason(band, best.replicas, production=req.is_production(env)), *reasons[at:]]
    return LlmPlan(best, search, at_peak, reasons, band, correction)


def _at_least_measured(best: LlmOption, at_peak: SimulationResult, measured_rps: float, model: ResolvedModel,
                       req: Requirements, env: str, *, managed: bool,
                       limits: SearchLimits) -> tuple[LlmOption, SimulationResult, str]:
    """The chosen candidate's option with at least the replicas its measured goodput per replica needs at this
    environment's peak (`replicas_for`): a measurement below the model's prediction grows the fleet here; one above it
    shrinks a fleet only through a calibration (`blueprint calibrate`, whose band check guards production). Returns
    the option, its run at the peak and the words for the rationale.

    Raises:
        SizingError: the fleet the measurement needs breaks a constraint (max_replicas, the GPU quota).
    """
    need = replicas_for(peak_rps(req, env, model), measured_rps, replicas_floor(req, env))
    words = (f"; measured {measured_rps:.3g} requests/s per replica within the SLO needs {need} replica(s) at this "
             f"peak, the model {best.replicas}")
    if need <= best.replicas:
        return best, at_peak, words
    per_node = best.instance.gpu_count // best.tensor_parallel_size
    grown, run = predict_at_peak(replace(best, replicas=need, nodes=limits.nodes(need, per_node=per_node)), model,
                                 req, env, managed=managed, limits=limits)
    breach = limits.breach(grown.instance, replicas=grown.replicas, per_node=per_node, managed=managed)
    if breach is not None:
        raise SizingError(f"environments.{env}: the chosen candidate's measured goodput ({measured_rps:.3g} "
                          f"requests/s per replica) needs {need} replica(s), and {breach.why}")
    return grown, run, words + " (sized on the measurement)"


def _switch_cause(headline: str, previous: Hardware, kept: tuple[LlmOption, SimulationResult] | str,
                  model: ResolvedModel, req: Requirements, env: str, catalog: Catalog, *, managed: bool) -> str:
    """The switch headline, and when a calibration re-sized the existing hardware, what it changed there."""
    if not isinstance(kept, str):
        was = capacity_correction(complete_sizing(kept[0], model, req, env, managed=managed), model, req,
                                  managed=managed)
        return f"{headline} ({previous.instance_type} {was.summary})" if was is not None else headline
    inst = (catalog.sagemaker if managed else catalog.ec2).get(previous.instance_type)
    found = model.calibration(inst.gpu, previous.tensor_parallel_size or 0, managed=managed) \
        if inst is not None and inst.gpu else None
    if found is None:
        return headline
    f = found.file
    return (f"{headline} (the calibration of {f.runs_words()} applies to {previous.instance_type}: step time "
            f"x{f.step_time:g}, TTFT floor x{f.ttft_floor:g} from {found.path})")


def capacity_correction(best: LlmOption, model: ResolvedModel, req: Requirements, *,
                        managed: bool) -> CapacityCorrection | None:
    """The calibration the chosen replica was sized with (`ResolvedModel.calibration`), and what it changed: the
    replica's capacity within the SLO (output tokens/s at the highest rate meeting it) on the uncorrected model ->
    on the corrected one, with the same engine limits. None without a calibration."""
    found = model.calibration(best.gpu.name, best.tensor_parallel_size, managed=managed)
    if found is None:
        return None
    cand, shape, out = best.candidate, traffic_shape(model), model.traffic.mean_output_tokens
    plain = candidate(replace(cand.model, correction=Correction()), cand.gpu, cand.tensor_parallel_size,
                      cand.kv_cache_fp8, cand.config, shape)
    before = size_replica(plain, shape, latency_targets(req, model, managed=managed))
    was = f"{before.max_rps * out:,.0f}" if before is not None else "none within the SLO"
    f = found.file
    summary = (f"calibrated on {f.runs_words()}: capacity per replica {was} -> "
               f"{best.sizing.max_rps * out:,.0f} tok/s within the SLO (step time x{f.step_time:g}, TTFT floor "  # type: ignore[union-attr]
               f"x{f.ttft_floor:g} from {found.path}; residual error median {f.residual_before.median:.0%} -> "
               f"{f.residual_after.median:.0%})")
    return CapacityCorrection(step_time=f.step_time, ttft_floor=f.ttft_floor, calibration=found.path,
                              summary=summary, accepted_shift=f.accepted_shift.words() if f.accepted_shift else None)


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
    cached = f" to prefill after {shape.cached_tokens} cached" if shape.cached_tokens else ""
    return (f"prompts {shape.inputs.mean} tokens{cached} (p95 {shape.inputs.p95}), outputs {shape.outputs.mean} "
            f"(p95 {shape.outputs.p95})")


def _llm_reasons(req: Requirements, env: str, model: ResolvedModel, best: LlmOption, search: LlmSearch,
                 at_peak: SimulationResult, catalog: Catalog, *, managed: bool, headline: str | None,
                 limits: SearchLimits) -> list[str]:
    """Why this option: what the search compared (and what it ruled out), its engine limits, its simulated p95s, the
    KV-cache dtype and the runner-up; `headline` (kept or switched hardware, `blueprints.plan.stability`) goes first."""
    inst, tp, sizing = best.instance, best.tensor_parallel_size, best.sizing
    cand = best.candidate
    peak = peak_rps(req, env, model)
    cheapest = search.best is not None and _llm_hardware(best, managed=managed) == _llm_hardware(search.best,
                                                                                                 managed=managed)
    why = [] if headline is None else [headline]
    why += [
        f"{inst.instance_type} ({inst.gpu_count}x {best.gpu.model}) with tensor_parallel_size={tp}: "
        f"{'cheapest' if cheapest else 'kept'} of {len(search.options)} option(s) meeting TTFT p95 "
        f"{_fmt(req.slo.ttft_p95_ms)} and ITL p95 {_fmt(req.slo.itl_p95_ms)}{_p99_words(req)} within the constraints "
        f"({search.screened} candidates screened analytically, the {search.simulated} that could be cheapest "
        "simulated)",
        f"each replica runs at most {cand.max_num_seqs} sequences (max_num_seqs, within what its "
        f"{cand.model.kv_cache_tokens:,} KV-cache tokens hold of mean-length requests)"
        + ("" if managed else f" and computes at most {cand.max_num_batched_tokens} tokens a step "
           "(max_num_batched_tokens): of the token budgets up to vLLM's default and the batches whose full step (the "
           "batch decoding and a prompt chunk) keeps token gaps within the ITL target, the pair serving the highest "
           "rate with prompts still meeting any TTFT target and requests rarely waiting for a sequence slot"),
        f"step times: {cand.model.source.summary()}",
        f"simulated with {model.traffic.pattern.value} arrivals and {_lengths(model)}: one replica meets the SLO up "
        f"to {sizing.max_rps:.2f} requests/s (saturates near {cand.saturation_rps:.2f})",
        f"{best.replicas} replica(s) for {peak:g} requests/s at peak, {peak / best.replicas:.2f} each: TTFT p50/p95 "
        f"{at_peak.ttft_ms.p50:.0f}/{at_peak.ttft_ms.p95:.0f} ms, ITL p50/p95 {at_peak.itl_ms.p50:.1f}/"
        f"{at_peak.itl_ms.p95:.1f} ms, request latency p95 {at_peak.e2e_ms.p95 / 1e3:.1f} s, "
        f"{at_peak.mean_running:.1f} sequences running on average"
        + "".join(f", {label} p99 {value:.1f} ms (target {target:g} ms)" for label, value, target in (
            ("TTFT", at_peak.ttft_ms.p99, req.slo.ttft_p99_ms), ("ITL", at_peak.itl_ms.p99, req.slo.itl_p99_ms))
                  if target is not None),
    ]
    if not managed and best.gpu.supports_fp8 and not fp8_kv_cache_planned(best.gpu, managed=managed):
        why.append(f"16-bit KV cache: an FP8 cache on {best.gpu.model} (compute capability "
                   f"{best.gpu.compute_capability}) moves {defaults.VLLM_IMAGE} to another attention backend, "
                   "whose step times the capacity model has not measured (processes.yaml "
                   "fp8_kv_default_attention_from), so it is not planned")
    elif not managed and best.gpu.supports_fp8:
        twin = size_twin(best, model, req, env, catalog, kv_cache_fp8=best.kv_cache_dtype != "fp8", limits=limits)
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
    if runner_up:  # priced as the plan would be: predicted at its peak share (which may add a replica)
        runner_up = predict_at_peak(runner_up, model, req, env, managed=managed, limits=limits)[0]
        why.append(f"next cheapest: {runner_up.instance.instance_type} at "
                   f"${runner_up.monthly_node_usd_per_hour * catalog.hours_per_month:,.0f}/month for "
                   f"{'instances' if inst.instance_type.startswith('ml.') else 'GPU nodes'}")
    return why


def llm_predictions(req: Requirements, env: str, model: ResolvedModel, plan_: LlmPlan, lines: list[CostLine], *,
                    managed: bool, max_monthly_usd: float) -> Predictions:
    """The central estimate at this environment's peak with its band (`llm_band`); the capacity the plan sized with
    (at the band's pessimistic edge in production without a calibration)."""
    best, run = plan_.best, plan_.band.central
    bands, margin = band_predictions(plan_.band, best.replicas)
    monthly = round(sum(line.monthly_usd for line in lines), 2)
    shape = traffic_shape(model)  # the prompt the replica prefills (its prefix-cache hits left out)
    prefill_share = prefill_time_share(best.candidate.model, running=max(1, round(run.mean_running)),
                                       input_tokens=shape.inputs.mean, output_tokens=shape.outputs.mean)
    capacity_rps = best.sizing.max_rps * best.replicas
    return Predictions(
        ttft_p95_ms=round(run.ttft_ms.p95, 1), itl_p95_ms=round(run.itl_ms.p95, 2),
        ttft_p99_ms=round(run.ttft_ms.p99, 1) if req.slo.ttft_p99_ms is not None else None,
        itl_p99_ms=round(run.itl_ms.p99, 2) if req.slo.itl_p99_ms is not None else None,
        latency_p95_ms=round(run.e2e_ms.p95, 1),
        output_tokens_per_s=round(capacity_rps * model.traffic.mean_output_tokens, 1),
        requests_per_s_capacity=round(capacity_rps, 3),
        concurrency_per_replica=best.concurrency, monthly_cost_usd=monthly, cost_lines=lines,
        max_monthly_cost_usd=max_monthly_usd,
        cost_is_estimate=capacity_type_of(req, env, managed=managed) is CapacityType.SPOT,
        prefill_time_share=round(prefill_share, 4),
        capacity_source=best.candidate.model.source.summary(), capacity_correction=plan_.correction,
        uncertainty=bands, capacity_margin=margin,
        uncertainty_source=band_source(plan_.band, gpu_model=best.gpu.model, kind=best.candidate.model.source.kind))


def llm_compute(req: Requirements, env: str, best: LlmOption, served: ServedModel, *, managed: bool,
                adapters_gib: int = 0) -> Compute:
    inst, tp = best.instance, best.tensor_parallel_size
    share = tp / inst.gpu_count  # this replica's share of the node
    shm_gib = defaults.SHM_GIB_PER_TP_RANK * tp
    streamed = not managed and streams_format(Archetype.VLLM_GPU, served.format, best.engine)
    buffers = streamer_buffer_gib(tp) if streamed else 0.0
    return Compute(
        accelerator=Accelerator.NVIDIA_GPU, instance_type=inst.instance_type, gpu=best.gpu.name,
        gpus_per_node=inst.gpu_count, gpus_per_replica=tp, vcpus_per_node=inst.vcpus,
        memory_gib_per_node=inst.memory_gib,
        cpu_per_replica=max(1, math.floor(inst.vcpus * share * defaults.NODE_ALLOCATABLE_CPU_FRACTION)),
        memory_gib_per_replica=max(math.floor(inst.memory_gib * share * 0.8),
                                   vllm_host_memory_gib(shm_gib, streamer_buffer_gib=buffers)),
        ephemeral_storage_gib_per_replica=replica_ephemeral_gib([served.weights_gib], streamed=streamed,
                                                                adapters_gib=adapters_gib),
        replicas=best.replicas, capacity_type=capacity_type_of(req, env, managed=managed),
        cpu_arch=CpuArch(inst.cpu_arch))


def longest_request_s(req: Requirements, model: ResolvedModel, run: SimulationResult) -> int:
    """The load balancer's idle timeout, s: the longest streamed response the SLO allows, a p95 first token and a
    whole context of further tokens at the p95 ITL (`slo.ttft_p95_ms` + `max_context_tokens` x `slo.itl_p95_ms`),
    within [the AWS default 350 s, 4,000 s]. The SLO's targets, not the predictions at peak, so that a traffic-only
    change leaves it, and the pod's grace period derived from it (`components.rollout`), as they are: no pod restarts
    for a traffic change. A target the SLO leaves unset is the prediction at peak."""
    ttft_ms = req.slo.ttft_p95_ms if req.slo.ttft_p95_ms is not None else run.ttft_ms.p95
    itl_ms = req.slo.itl_p95_ms if req.slo.itl_p95_ms is not None else run.itl_ms.p95
    longest_s = (ttft_ms + model.max_context_tokens * itl_ms) / 1e3
    return min(4000, max(defaults.AWS_LB_DEFAULT_IDLE_TIMEOUT_S, math.ceil(longest_s)))


def plan_vllm(req: Requirements, env: str, models: list[ResolvedModel], catalog: Catalog,
               selection: Selection, ctx: PlanContext) -> Blueprint:
    model = models[0]
    llm = llm_plan(req, env, model, catalog, ctx, managed=False)
    best, run = llm.best, llm.at_peak
    inst, tp, cand = best.instance, best.tensor_parallel_size, best.candidate
    dtype, quantization = vllm_dtype(model.spec.precision, model.spec.quantization_method, best.gpu)
    served = served_model(model, req, env)
    lora = lora_engine(model.spec.adapters)
    lora_notes = [lora_reason(lora, served.name, slot_gib_per_gpu=lora_bytes_per_gpu(
        model.architecture, lora.slots, precision=model.spec.precision, tensor_parallel_size=tp) / GIB)] if lora else []
    estimate = calibrated(vllm_startup(served, tensor_parallel_size=tp, gpus_per_node=inst.gpu_count,
                                       engine=best.engine),
                          model.calibration(best.gpu.name, tp, managed=False),
                          streamed=streams_format(Archetype.VLLM_GPU, served.format, best.engine))
    startup = estimate.budget
    lines = cost_lines(req, env, catalog, what="GPU nodes", instance_type=inst.instance_type, nodes=best.nodes,
                        usd_per_hour=best.node_usd_per_hour, managed=False)
    per_node, limits = inst.gpu_count // tp, ctx.limits(req, env, managed=False)
    floor, ceiling, capped = autoscaling_bounds(req, env, best.replicas, can_scale_to_zero=True,
                                                 **quota_cap(ctx, req, env, per_node=per_node,
                                                              gpus_per_node=inst.gpu_count))
    ceiling, most_usd, budget_notes = budget_ceiling(
        req, env, catalog, lines=lines, what=f"vllm-gpu, {best.nodes}x {inst.instance_type}", replicas=best.replicas,
        ceiling=ceiling, per_node=per_node, nodes_for=lambda n: limits.nodes(n, per_node=per_node))
    reuse = requested_reuse(model.traffic)
    facts = engine_facts(best.engine)
    engine = VllmEngine(kind=best.engine, image=facts.image, tensor_parallel_size=tp,
                        gpu_memory_utilization=engine_memory(model, best.gpu, tp, best.engine)[0],
                        max_model_len=model.max_context_tokens, max_num_seqs=cand.max_num_seqs,
                        max_num_batched_tokens=cand.max_num_batched_tokens, dtype=dtype,
                        quantization=quantization, kv_cache_dtype=best.kv_cache_dtype,  # type: ignore[arg-type]
                        shm_size_gib=defaults.SHM_GIB_PER_TP_RANK * tp, lora=lora,
                        enable_prefix_caching=reuse.declared)
    router = plan_router(reuse, min_replicas=floor, max_replicas=ceiling, port=engine.port) \
        if facts.router.production_stack_router else None
    table = engine_table(llm.search, best, fixed_monthly_usd=service_fixed_monthly_usd(req, env, catalog,
                                                                                        managed=False),
                         hours_per_month=catalog.hours_per_month,
                         threshold_pct=req.operations.engine_switch_threshold_pct)
    engine_notes = [f"engines compared ({', '.join(req.operations.engines)}; operations.engines), each sized with "
                    "its own step tables and scheduler profile, priced for the peak as the search sized them (before "
                    "the fleet simulation):", *(f"engine {line}" for line in engine_lines(table))] if table else []
    return Blueprint(
        **common_fields(req, env, ctx, managed=False, idle_timeout_s=longest_request_s(req, model, run)),
        archetype=Archetype.VLLM_GPU, models=[served], router=router,
        compute=llm_compute(req, env, best, served, managed=False,
                            adapters_gib=adapters_volume_gib(model.architecture, lora)),
        engine=engine,
        startup=startup,
        # The target is set from the replica model once the blueprint exists (`blueprints.plan.scaling.scaling_targets`).
        autoscaling=Autoscaling(min_replicas=floor, max_replicas=ceiling, metric=facts.signal("running"),
                                target=1.0, cooldown_s=cooldown_s(startup)),
        predictions=llm_predictions(req, env, model, llm, lines, managed=False, max_monthly_usd=most_usd).model_copy(
            update={"engines": table}),
        rationale=[*selection.reasons, *llm.reasons, *engine_notes, *lora_notes,
                   *reuse_reasons(reuse, router, max_replicas=ceiling),
                   estimate.reason, *capped, *budget_notes, *access_reasons(req, managed=False),
                   *cost_notes(req, env, catalog, managed=False)],
    )
