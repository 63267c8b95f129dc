"""One replica under load: its capacity, its p95 latency at an arrival rate, and the value of the autoscaler's signal.

This is the narrow interface between the capacity model and its two consumers here, the planner's scaling targets
and the fleet simulation (`blueprints.simulation`). It reads the capacity model through exactly two functions, so a
new capacity model changes only this file:

- `blueprints.sizing.estimate_llm(arch, gpu, precision=, tensor_parallel_size=, concurrency=, input_tokens=,
  output_tokens=, max_model_len=)` -> `requests_per_s`, `ttft_ms`, `itl_ms` of one replica at a concurrency;
- `blueprints.options.p95(estimate)` -> (TTFT p95 ms, ITL p95 ms) of that estimate.

LLMs: the estimate is evaluated at every concurrency 1..max_num_seqs once, giving a curve of throughput and p95
latency; an arrival rate maps to the concurrency whose throughput serves it (Little's law). Non-generative models
(and an LLM whose architecture the catalog does not know) use the plan's own figures: capacity = planned requests/s
per replica, and a p95 that grows with the M/D/1 queueing wait as utilisation rises [assumption].

Queueing rules, documented once here and used by both the planner and the simulation:
- vLLM's `vllm:num_requests_running` per replica = the concurrency serving the arrival rate (capped at
  max_num_seqs); arrivals beyond saturation wait (`vllm:num_requests_waiting`).
- Triton's `nv_inference_pending_request_count` per replica = requests waiting for their batch to form (each model:
  a request waits on average half its `max_queue_delay`, or half the time to fill `max_batch_size`, whichever is
  shorter) plus the M/D/1 wait for a busy instance, times the arrival rate (Little's law).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from functools import lru_cache

from blueprints.blueprint import Blueprint, SageMakerEngine, TritonEngine, VllmEngine
from blueprints.catalog import load_catalog
from blueprints.errors import CatalogError

#: p95 of a queueing wait / its mean (exponential-like tail: ln(20) ~ 3). [assumption]
WAIT_P95_FACTOR = 3.0
#: Utilisation at which the M/D/1 wait is evaluated at most (it diverges at 1; beyond, the backlog is simulated).
MAX_UTILISATION = 0.98


@dataclass(frozen=True)
class LoadPoint:
    """One replica at one arrival rate: p95 latencies (ms, keyed like the SLO fields) and its signal values."""

    p95_ms: dict[str, float]
    running: float
    pending: float


@dataclass(frozen=True)
class ReplicaModel:
    """Capacity and latency of one replica of a blueprint (see the module docstring)."""

    capacity_rps: float
    #: LLM curve: throughput (requests/s), TTFT p95 and ITL p95 (ms) at concurrency 1..len.
    rates: tuple[float, ...] = ()
    ttft_p95_ms: tuple[float, ...] = ()
    itl_p95_ms: tuple[float, ...] = ()
    #: Non-generative: planned p95 (ms) at planned utilisation, and the Triton batching figures per model.
    planned_p95_ms: float = 0.0
    planned_utilisation: float = 0.0
    batching: tuple[tuple[float, float, int], ...] = ()  # (share of arrivals, max queue delay s, max batch size)
    request_s: float = 0.0  # mean service time of one request on an idle replica, s (non-generative)

    @property
    def generative(self) -> bool:
        return bool(self.rates)

    def at(self, rate_rps: float) -> LoadPoint:
        """The replica at `rate_rps` arrivals (capped at its capacity; beyond it the caller queues the rest)."""
        rate = max(0.0, min(rate_rps, self.capacity_rps))
        if self.generative:
            k = _concurrency_for(self.rates, rate)
            i = max(0, min(len(self.rates) - 1, int(round(k)) - 1))
            return LoadPoint({"ttft_p95_ms": self.ttft_p95_ms[i], "itl_p95_ms": self.itl_p95_ms[i]}, running=k,
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


def _concurrency_for(rates: tuple[float, ...], rate: float) -> float:
    """The (fractional) concurrency whose throughput is `rate`, interpolated on the curve; 0 at rate 0."""
    if rate <= 0:
        return 0.0
    i = bisect.bisect_left(rates, rate)
    if i == 0:
        return rate / rates[0]
    if i >= len(rates):
        return float(len(rates))
    low, high = rates[i - 1], rates[i]
    return i + (rate - low) / (high - low) if high > low else float(i + 1)


def replica_model(bp: Blueprint) -> ReplicaModel:
    """The replica model of a planned blueprint (cached per blueprint)."""
    return _model(bp.model_dump_json())


@lru_cache(maxsize=64)
def _model(blueprint_json: str) -> ReplicaModel:
    bp = Blueprint.model_validate_json(blueprint_json)
    curve = _llm_curve(bp)
    if curve is not None:
        rates, ttfts, itls = curve
        return ReplicaModel(capacity_rps=max(rates), rates=_monotone(rates), ttft_p95_ms=ttfts, itl_p95_ms=itls)
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


def _monotone(rates: tuple[float, ...]) -> tuple[float, ...]:
    """Throughput never falls as concurrency rises (the bisection needs a sorted curve)."""
    out, best = [], 0.0
    for r in rates:
        best = max(best, r)
        out.append(best)
    return tuple(out)


def _llm_curve(bp: Blueprint) -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]] | None:
    """(requests/s, TTFT p95 ms, ITL p95 ms) at concurrency 1..max sequences, from the capacity model; None for a
    non-generative blueprint or a model the catalog cannot describe."""
    from blueprints.options import p95
    from blueprints.sizing import estimate_llm

    engine = bp.engine
    model = bp.model
    if not model.task.generative or model.catalog_id is None or model.traffic is None or bp.compute.gpu is None:
        return None
    if isinstance(engine, VllmEngine):
        tp, max_seqs, max_len = engine.tensor_parallel_size, engine.max_num_seqs, engine.max_model_len
    elif isinstance(engine, SageMakerEngine) and engine.max_rolling_batch_size:
        tp, max_seqs = engine.tensor_parallel_degree or bp.compute.gpus_per_replica, engine.max_rolling_batch_size
        max_len = engine.max_model_len or model.max_context_tokens
    else:
        return None
    catalog = load_catalog()
    try:
        arch, gpu = catalog.model(model.catalog_id).architecture, catalog.gpu(bp.compute.gpu)
    except CatalogError:
        return None
    rates, ttfts, itls = [], [], []
    for k in range(1, max_seqs + 1):
        est = estimate_llm(arch, gpu, precision=model.precision, tensor_parallel_size=tp, concurrency=k,
                           input_tokens=model.traffic.mean_input_tokens,
                           output_tokens=model.traffic.mean_output_tokens, max_model_len=max_len)
        ttft, itl = p95(est)
        rates.append(est.requests_per_s)
        ttfts.append(ttft)
        itls.append(itl)
    return tuple(rates), tuple(ttfts), tuple(itls)
