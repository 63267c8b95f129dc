"""An LLM plan's uncertainty: the band of its predictions and, for a production plan sized at the band's pessimistic
edge (no calibration of its replica yet), the central estimate beside it and what a calibration could save
(`blueprints.capacity.uncertainty`). Pure.

The predictions a plan states (TTFT, ITL and request latency p95 at the peak) are the central estimate: the capacity
model as fitted (with the replica's calibration when there is one). Its band is each figure's [low, high] at the
step source's cross-validated p75 |error| (or the calibration's residual). A production plan without a calibration
is sized, simulated and autoscaled on the model at the band's pessimistic edge (`capacity_margin`), so its SLO holds
if the model is off by that much; its `requests_per_s_capacity` is that sized capacity, the one the autoscaler and the
alerts count on.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from blueprints.capacity.physics import Correction
from blueprints.capacity.planning import candidate, run_at_rate, size_replica
from blueprints.capacity.simulator import SimulationResult
from blueprints.capacity.uncertainty import Band, interval
from blueprints.catalog import Catalog
from blueprints.contracts.sections import CapacityMargin, Interval, PredictionBand
from blueprints.plan.guardrails import SearchLimits
from blueprints.plan.options.llm import LlmOption, describe_option, latency_targets, llm_search, traffic_shape
from blueprints.plan.options.search import ResolvedModel, peak_rps
from blueprints.requirements.service import Requirements


@dataclass(frozen=True)
class PlanBand:
    """The band of a plan's replica and its central estimate at the planned fleet.

    Attributes:
        band: the replica's band (`ResolvedModel.band`).
        margin: the correction the plan was sized with beyond its calibration (production without one), or None.
        central: the central model's run at the planned peak share per replica.
        central_rps: the central model's highest per-replica rate within the SLO, requests/s.
        planned_monthly_usd: the plan's serving nodes (or instances), USD/month.
        central_plan: what the search plans on the central estimate, e.g. `6x g6e.xlarge (6 replicas,
            tensor_parallel_size=1)`, and its nodes' USD/month (None when no margin applies, or when the central
            estimate finds no option either).
    """

    band: Band
    margin: Correction | None
    central: SimulationResult
    central_rps: float
    planned_monthly_usd: float
    central_plan: tuple[str, float] | None = None


def plan_band(best: LlmOption, at_peak: SimulationResult, model: ResolvedModel, req: Requirements, env: str,
              catalog: Catalog, *, managed: bool, limits: SearchLimits, search_central: bool = True) -> PlanBand:
    """The band of the chosen option, and when it was sized with a margin its central estimate and what the search
    plans on the central estimate (`search_central` False: a re-plan that only proves a hint, `PlanContext.proving`,
    names the option itself instead, so the plan is the same save for what a calibration could plan)."""
    tp, fp8 = best.tensor_parallel_size, best.kv_cache_dtype == "fp8"
    band = model.band(best.gpu, tp, managed=managed, kv_cache_fp8=fp8)
    central_correction = model.correction(best.gpu, tp, managed=managed, production=False, kv_cache_fp8=fp8)
    cand = best.candidate
    sized_rps = best.sizing.max_rps if best.sizing is not None else peak_rps(req, env, model) / best.replicas
    month = catalog.hours_per_month
    planned = best.monthly_node_usd_per_hour * month
    if cand.model.correction == central_correction:
        return PlanBand(band, None, at_peak, sized_rps, planned)
    shape = traffic_shape(model)
    central = candidate(replace(cand.model, correction=central_correction), cand.gpu, tp, cand.kv_cache_fp8,
                        cand.config, shape)
    run = run_at_rate(central, shape, peak_rps(req, env, model) / best.replicas)
    sizing = size_replica(central, shape, latency_targets(req, model, managed=managed))
    rps = sizing.max_rps if sizing is not None else sized_rps
    o = llm_search(req, env, model, catalog, managed=managed, limits=limits, central=True).best if search_central \
        else best
    central_plan = None if o is None else (describe_option(o.instance, o.tensor_parallel_size, o.replicas, o.nodes),
                                           round(o.monthly_node_usd_per_hour * month, 2))
    return PlanBand(band, cand.model.correction, run, rps, planned, central_plan)


def _interval(value: float, fraction: float, digits: int) -> Interval:
    low, high = interval(value, fraction)
    return Interval(low=round(low, digits), high=round(high, digits))


def band_predictions(pb: PlanBand, replicas: int) -> tuple[PredictionBand, CapacityMargin | None]:
    """The predictions' band (TTFT and ITL p95 of the central run, the central capacity of `replicas`) and the margin
    the plan was sized with."""
    b = pb.band
    bands = PredictionBand(ttft_p95_ms=_interval(pb.central.ttft_ms.p95, b.ttft, 1),
                           itl_p95_ms=_interval(pb.central.itl_ms.p95, b.itl, 2),
                           requests_per_s_capacity=_interval(pb.central_rps * replicas, b.throughput, 3))
    margin = None
    if pb.margin is not None and pb.central_plan is not None:
        margin = CapacityMargin(step_time=pb.margin.step_time, ttft_floor=pb.margin.ttft_floor,
                                central_plan=pb.central_plan[0], central_monthly_usd=pb.central_plan[1])
    return bands, margin


def band_source(pb: PlanBand, *, gpu_model: str, kind: str) -> str:
    """e.g. `open-loop predictions at peak; band: cross-validated p75 |error| of the 180 published points the measured
    vLLM kernel tables time (every regime), NVIDIA H100 80GB SXM; uncalibrated`."""
    state = "calibrated" if pb.band.calibrated else "uncalibrated"
    return (f"open-loop predictions at peak ({kind} step times, {gpu_model}); band: {pb.band.source}; {state}")


def band_reason(pb: PlanBand, replicas: int, *, production: bool) -> str:
    """The rationale's sentence: the central p95s with their band, and how the plan was sized against it."""
    bands, margin = band_predictions(pb, replicas)
    c, state = pb.central, "calibrated" if pb.band.calibrated else "uncalibrated"
    text = (f"uncertainty ({state}): TTFT p95 {c.ttft_ms.p95:,.0f} ms, {bands.ttft_p95_ms.low:,.0f}-"
            f"{bands.ttft_p95_ms.high:,.0f} ms; ITL p95 {c.itl_ms.p95:.1f} ms, {bands.itl_p95_ms.low:.1f}-"
            f"{bands.itl_p95_ms.high:.1f} ms ({pb.band.source})")
    if pb.margin is not None:
        planned = pb.planned_monthly_usd
        if margin is None:
            could = "the central estimate finds no option within the constraints either"
        elif margin.central_monthly_usd < planned - 0.5:
            could = (f"a calibration that confirms the central estimate could plan {margin.central_plan} at "
                     f"${margin.central_monthly_usd:,.0f}/month for nodes instead of ${planned:,.0f}")
        else:
            could = "the central estimate plans the same"
        return (f"{text}; production: sized so the SLO holds at the band's pessimistic edge (step time "
                f"x{pb.margin.step_time:g}, TTFT floor x{pb.margin.ttft_floor:g}) until `blueprint benchmark` and "
                f"`blueprint calibrate` measure this replica; {could}")
    if pb.band.calibrated:
        return f"{text}; sized on the calibrated model"
    return f"{text}; {'production' if production else 'not production'}: sized at the central estimate"
