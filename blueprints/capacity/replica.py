"""One replica under load: its capacity, its p95 (and LLM p99) latencies at an arrival rate, and the value of the
autoscaler's signal.

This is the narrow interface between the capacity model and its two consumers here, the planner's scaling targets
and the fleet simulation (`blueprints.simulate.fleet`). It reads the capacity model through two functions, so a new
capacity model changes only this file:

- `blueprints.capacity.planning.run_at_rate(candidate, shape, rate)` -> the simulated replica (TTFT and ITL p95 and
  p99, the mean of sequences running) under open-loop arrivals at `rate` with the traffic pattern's second-scale bursts;
- `blueprints.capacity.runs.closed_loop(...)` at max_num_seqs -> its saturated throughput.

LLMs: capacity is the simulated replica's throughput with its batch full (a closed loop at max_num_seqs: the rate
beyond which arrivals queue without bound); the replica is simulated under open-loop arrivals at `LOAD_CURVE_FRACTIONS`
of it and at the planned per-replica peak (so the target at the peak is exactly the planner's run there), each grid
point when first read (`LoadCurve`); a rate between grid points is interpolated. Non-generative models (and an LLM whose architecture the catalog does not know) use the
plan's own figures: capacity = planned requests/s per replica, and a p95 that grows with the M/D/1 queueing wait as
utilisation rises [assumption].

Queueing rules, documented once here and used by both the planner and the simulation:
- vLLM's `vllm:num_requests_running` per replica = the simulated mean of sequences running at the arrival rate
  (at most max_num_seqs); arrivals beyond its capacity wait (`vllm:num_requests_waiting`).
- Triton's `nv_inference_pending_request_count` per replica = requests waiting for their batch to form (each model:
  a request waits on average half its `max_queue_delay`, or half the time to fill `max_batch_size`, whichever is
  shorter) plus the M/D/1 wait for a busy instance, times the arrival rate (Little's law).
"""

from __future__ import annotations

import bisect
import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from blueprints.core import defaults
from blueprints.core.memo import remembered
from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.sections import SageMakerEngine, TritonEngine, VllmEngine
from blueprints.catalog import load_catalog
from blueprints.core.errors import CatalogError

if TYPE_CHECKING:
    from blueprints.capacity.physics import Correction
    from blueprints.capacity.planning import Candidate, TrafficShape
    from blueprints.capacity.simulator import SimulationResult

#: p95 of a queueing wait / its mean (exponential-like tail: ln(20) ~ 3). [assumption]
WAIT_P95_FACTOR = 3.0
#: Utilisation at which the M/D/1 wait is evaluated at most (it diverges at 1; beyond, the backlog is simulated).
MAX_UTILISATION = 0.98
#: Where an LLM replica's load curve is simulated: shares of its saturated throughput.
LOAD_CURVE_FRACTIONS = (0.05, 0.15, 0.3, 0.45, 0.6, 0.75, 0.9, 1.0)
#: The latencies of an LLM's load curve, keyed like the SLO fields (`LoadPoint.latency_ms`).
CURVE_LATENCIES = ("ttft_p95_ms", "itl_p95_ms", "ttft_p99_ms", "itl_p99_ms")
#: Most load points one replica model remembers (`ReplicaModel.at`); beyond it the memo starts again.
_POINTS_SIZE = 4096


@dataclass(frozen=True)
class LoadPoint:
    """One replica at one arrival rate: its latencies (ms, keyed like the SLO fields they are judged against: an
    LLM's `ttft_p95_ms`, `itl_p95_ms`, `ttft_p99_ms`, `itl_p99_ms`; otherwise `latency_p95_ms`) and its signal
    values."""

    latency_ms: dict[str, float]
    running: float
    pending: float


@dataclass(frozen=True)
class CurvePoint:
    """The simulated replica at one rate of its load curve: TTFT and ITL p95 and p99 (ms), mean sequences running."""

    ttft_p95_ms: float
    itl_p95_ms: float
    running: float
    ttft_p99_ms: float
    itl_p99_ms: float


@dataclass(frozen=True, eq=False)
class LoadCurve:
    """An LLM replica's load curve: open-loop runs at `rates` (requests/s, ascending), each simulated the first time
    it is read. A fleet simulation reads only the points around the per-replica rates its day reaches (most plans: the
    few below the planned peak), so the others are never simulated; every point read is the run a full curve has.

    Attributes:
        rates: the grid, requests/s, ascending.
        run: the replica's run at a rate (`blueprints.capacity.planning.run_at_rate`, common random numbers).
        max_running: `--max-num-seqs` (the mean running is at most it).
    """

    rates: tuple[float, ...]
    run: Callable[[float], SimulationResult] = field(repr=False)
    max_running: int
    _points: dict = field(default_factory=dict, repr=False)

    def point(self, i: int) -> CurvePoint:
        """The point at rates[i], simulated on first read."""
        found = self._points.get(i)
        if found is None:
            r = self.run(self.rates[i])
            found = self._points[i] = CurvePoint(r.ttft_ms.p95, r.itl_ms.p95, min(self.max_running, r.mean_running),
                                                 ttft_p99_ms=r.ttft_ms.p99, itl_p99_ms=r.itl_ms.p99)
        return found

    @property
    def points(self) -> tuple[CurvePoint, ...]:
        """Every point, in the order of `rates` (simulating those not yet read)."""
        return tuple(self.point(i) for i in range(len(self.rates)))

    def __eq__(self, other: object) -> bool:
        """The same grid and the same simulated values at every point."""
        if not isinstance(other, LoadCurve):
            return NotImplemented
        return self.rates == other.rates and self.points == other.points

    def __hash__(self) -> int:
        return hash(self.rates)


@dataclass(frozen=True)
class ReplicaModel:
    """Capacity and latency of one replica of a blueprint (see the module docstring)."""

    capacity_rps: float
    #: LLM load curve: arrival rates (requests/s, ascending), each simulated when first read.
    curve: LoadCurve | None = None
    #: Non-generative: planned p95 (ms) at planned utilisation, and the Triton batching figures per model.
    planned_p95_ms: float = 0.0
    planned_utilisation: float = 0.0
    batching: tuple[tuple[float, float, int], ...] = ()  # (share of arrivals, max queue delay s, max batch size)
    request_s: float = 0.0  # mean service time of one request on an idle replica, s (non-generative)
    #: Points already read, by rate: a fleet simulation asks for the same per-replica rate minute after minute.
    _points: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def generative(self) -> bool:
        return self.curve is not None

    @property
    def rates(self) -> tuple[float, ...]:
        """The load curve's arrival rates, requests/s, ascending (none: not generative)."""
        return self.curve.rates if self.curve else ()

    @property
    def ttft_p95_ms(self) -> tuple[float, ...]:
        """TTFT p95 at each of `rates`, ms (simulates every point not yet read)."""
        return tuple(p.ttft_p95_ms for p in self.curve.points) if self.curve else ()

    @property
    def itl_p95_ms(self) -> tuple[float, ...]:
        """ITL p95 at each of `rates`, ms."""
        return tuple(p.itl_p95_ms for p in self.curve.points) if self.curve else ()

    @property
    def running(self) -> tuple[float, ...]:
        """Mean sequences running at each of `rates` (at most max_num_seqs)."""
        return tuple(p.running for p in self.curve.points) if self.curve else ()

    def at(self, rate_rps: float) -> LoadPoint:
        """The replica at `rate_rps` arrivals (capped at its capacity; beyond it the caller queues the rest)."""
        return remembered(self._points, rate_rps, lambda: self._point(rate_rps), kept=_POINTS_SIZE)

    def _point(self, rate_rps: float) -> LoadPoint:
        rate = max(0.0, min(rate_rps, self.capacity_rps))
        curve = self.curve
        if curve is not None:  # only the grid points around `rate` are read (and simulated, when not yet)
            return LoadPoint({key: _interpolate(curve.rates, lambda i, key=key: getattr(curve.point(i), key), rate)
                              for key in CURVE_LATENCIES},
                             running=_interpolate((0.0, *curve.rates),
                                                  lambda i: curve.point(i - 1).running if i else 0.0, rate),
                             pending=0.0)
        rho = min(MAX_UTILISATION, rate / self.capacity_rps)
        wait_s = _md1_wait_s(rho, self.capacity_rps)
        planned_wait_s = _md1_wait_s(min(MAX_UTILISATION, self.planned_utilisation), self.capacity_rps)
        p95 = max(self.request_s * 1e3, self.planned_p95_ms + WAIT_P95_FACTOR * (wait_s - planned_wait_s) * 1e3)
        batching = sum(min(rate * share * delay_s, batch) / 2 for share, delay_s, batch in self.batching)
        return LoadPoint({"latency_p95_ms": p95}, running=rate * (self.request_s + wait_s),
                         pending=batching + rate * wait_s)


def _md1_wait_s(rho: float, mu: float) -> float:
    """Mean wait in an M/D/1 queue: rho / (2 mu (1 - rho))."""
    return rho / (2 * mu * (1 - rho)) if rho > 0 else 0.0


def _interpolate(xs: tuple[float, ...], y: Callable[[int], float], x: float) -> float:
    """The value at x, linear between the points of ascending xs (`y(i)`: the value at xs[i]; only the two around x
    are read), held flat beyond either end."""
    i = bisect.bisect_left(xs, x)
    if i == 0:
        return y(0)
    if i >= len(xs):
        return y(len(xs) - 1)
    x0, x1 = xs[i - 1], xs[i]
    y0, y1 = y(i - 1), y(i)
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0) if x1 > x0 else y1


#: The blueprint fields a replica model reads: its cache key. A warm-floor search (`blueprints.plan.scaling`) varies
#: the autoscaling and the reasons only, so each of its fleet simulations finds the load curve already simulated.
_READS = {"engine": True, "model": True, "models": True, "compute": True,
          "predictions": {"requests_per_s_capacity", "latency_p95_ms", "capacity_correction", "capacity_margin"}}
_CACHE_SIZE = 64
_models: dict[str, ReplicaModel] = {}


def replica_model(bp: Blueprint) -> ReplicaModel:
    """The replica model of a planned blueprint (cached per engine, model, compute, planned capacity and the
    calibration it was sized with: the fields it reads)."""
    return remembered(_models, bp.model_dump_json(include=_READS), lambda: _model(bp), kept=_CACHE_SIZE)


def clear_cache() -> None:
    """Forget every replica model (a cold start, as a fresh process)."""
    _models.clear()


def _model(bp: Blueprint) -> ReplicaModel:
    llm = _llm_model(bp)
    if llm is not None:
        return llm
    per_replica = bp.predictions.requests_per_s_capacity / max(1, bp.compute.replicas)
    peak = sum(m.traffic.peak_requests_per_s for m in bp.models if m.traffic) or per_replica * bp.compute.replicas
    batching: tuple[tuple[float, float, int], ...] = ()
    if isinstance(bp.engine, TritonEngine):
        rates = {m.name: (m.traffic.peak_requests_per_s if m.traffic else 0.0) for m in bp.models}
        total = sum(rates.values()) or 1.0
        batching = tuple((rates.get(c.name, 0.0) / total, c.max_queue_delay_microseconds / 1e6, max(1, c.max_batch_size))
                         for c in bp.engine.models)
    latency = bp.predictions.latency_p95_ms or 0.0
    return ReplicaModel(capacity_rps=per_replica, planned_p95_ms=latency,
                        planned_utilisation=min(MAX_UTILISATION, peak / bp.compute.replicas / per_replica),
                        batching=batching, request_s=1.0 / per_replica)


def sized_correction(bp: Blueprint) -> Correction:
    """The correction a planned blueprint was sized with: its calibration, else a production plan's margin, else the
    identity."""
    from blueprints.capacity.physics import Correction

    recorded = bp.predictions.capacity_correction
    margin = bp.predictions.capacity_margin
    return (Correction(recorded.step_time, recorded.ttft_floor) if recorded else
            Correction(margin.step_time, margin.ttft_floor) if margin else Correction())


def planned_candidate(bp: Blueprint, correction: Correction | None = None) -> tuple[Candidate, TrafficShape] | None:
    """The replica of a planned vLLM (or SageMaker LMI) blueprint as the planner sized it, with its engine limits and
    the planned traffic's shape: for a catalog model or one given by its `architecture`, with `correction` (default
    `sized_correction`); None for a non-generative blueprint."""
    from blueprints.capacity.physics import default_batch_limits, engine_profile, memory_share
    from blueprints.capacity.physics import replica_model as physics_model
    from blueprints.catalog.engines import engine_facts
    from blueprints.contracts.memory import weights_gib
    from blueprints.capacity.prefix_cache import cached_prompt_tokens, planned_reuse, routing_for, shared_cached_tokens
    from blueprints.capacity.planning import candidate, traffic_shape
    from blueprints.capacity.simulator import SchedulerConfig

    from blueprints.contracts.consistency import model_architecture

    engine, model = bp.engine, bp.model
    if not model.task.generative or model.traffic is None or bp.compute.gpu is None:
        return None
    catalog = load_catalog()
    arch = model_architecture(model.catalog_id, model.architecture, catalog)  # the catalog's, or the recorded shape
    try:
        gpu = catalog.gpu(bp.compute.gpu)
    except CatalogError:
        return None
    if arch is None:
        return None
    profile = None
    if isinstance(engine, VllmEngine):  # the engine's own scheduling profile, step tables and memory share
        tp, max_len, fp8 = engine.tensor_parallel_size, engine.max_model_len, engine.kv_cache_dtype == "fp8"
        profile = engine_profile(engine_facts(engine.kind).profile)
        seqs, tokens = engine.max_num_seqs, engine.max_num_batched_tokens
        utilisation = memory_share(profile, engine.gpu_memory_utilization, gpu,
                                   weights_gib_per_gpu=weights_gib(arch, model.precision) / tp)
    elif isinstance(engine, SageMakerEngine) and engine.max_rolling_batch_size:
        tp, fp8 = engine.tensor_parallel_degree or bp.compute.gpus_per_replica, False
        max_len = engine.max_model_len or model.max_context_tokens
        seqs, tokens = engine.max_rolling_batch_size, default_batch_limits(gpu)[0]
        utilisation = defaults.GPU_MEMORY_UTILIZATION
    else:
        return None
    replica = physics_model(arch, gpu, precision=model.precision, quantization=model.quantization,
                            tensor_parallel_size=tp, kv_cache_fp8=fp8, gpu_memory_utilization=utilisation,
                            correction=correction if correction is not None else sized_correction(bp),
                            lora=engine.lora.slots if isinstance(engine, VllmEngine) and engine.lora else None,
                            chat=model.traffic.api == "chat", engine=profile)
    config = SchedulerConfig(max_num_seqs=seqs, max_num_batched_tokens=tokens,
                             kv_cache_blocks=replica.kv_cache_tokens // defaults.KV_BLOCK_TOKENS)
    t = model.traffic
    reuse = planned_reuse(t)
    cached = cached_prompt_tokens(reuse, routing=routing_for(reuse, routed=bp.router is not None),
                                  replicas=bp.compute.replicas)
    shape = traffic_shape(t.mean_input_tokens, t.input_tokens_p95, t.mean_output_tokens, t.output_tokens_p95,
                          pattern=t.pattern, max_model_len=max_len, cached_tokens=cached,
                          shared_tokens=shared_cached_tokens(reuse))
    return candidate(replica, gpu, tp, fp8, config, shape), shape


def _llm_model(bp: Blueprint) -> ReplicaModel | None:
    """The load curve of a vLLM (or SageMaker LMI) replica from the capacity model (`planned_candidate`); None for a
    non-generative blueprint."""
    from blueprints.capacity.planning import run_at_rate
    from blueprints.capacity.runs import closed_loop

    found = planned_candidate(bp)
    if found is None:
        return None
    cand, shape = found
    seqs = cand.config.max_num_seqs
    saturated = closed_loop(cand.model, cand.config, concurrency=seqs, inputs=shape.inputs, outputs=shape.outputs,
                            max_model_len=shape.max_model_len).requests_per_s
    if not saturated > 0:
        return None
    peak = sum(m.traffic.peak_requests_per_s for m in bp.models if m.traffic) / max(1, bp.compute.replicas)
    grid = sorted({*(round(saturated * f, 9) for f in LOAD_CURVE_FRACTIONS), *([peak] if peak < saturated else [])})
    return ReplicaModel(capacity_rps=saturated,
                        curve=LoadCurve(tuple(grid), functools.partial(run_at_rate, cand, shape), max_running=seqs))
