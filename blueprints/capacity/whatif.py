"""`blueprint estimate`: one replica's memory fit and latency in one of the three experiments benchmarks run (the same
model the planner sizes with, and with the same engine settings the same numbers).

- Closed loop (`concurrency`, the default): the simulation run as a benchmark runs it, every client sending a request
  at once and the next when its last completes, every request at the given lengths (so the clients stay in step and
  their prompts keep arriving together); the figures are its means after warm-up (throughput by Little's law).
  Clients beyond what the KV cache or `--max-num-seqs` holds queue, as they would on vLLM.
- Burst (`burst`, `vllm bench serve --request-rate inf --num-prompts N`): N requests sent at time 0, or with
  `max_concurrency` (`--max-concurrency C`) at most C in flight, the next sent as one completes; every request is
  measured and throughput is requests (tokens) over the makespan, ramp, drain and preemption included: what the
  benchmark prints as its throughput.
- Open loop (`arrival_rate`): requests/s arriving with the traffic pattern's burstiness and the length distribution
  (the requirements' p95s, else `defaults.TOKENS_P95_TO_MEAN`), simulated exactly as the planner simulates a
  candidate at a rate (`planning.run_at_rate`): with the plan's `--max-num-seqs`, `--max-num-batched-tokens` and
  `--max-model-len` the percentiles are the plan's predictions. With `num_prompts` it is a benchmark's run instead
  (`--request-rate R --num-prompts N`): Poisson arrivals, the given lengths, every request measured. An overloaded
  run's latencies keep growing with the rate; the CLI warns.
The means (`ttft_ms`, `itl_ms`, `tpot_ms`, `output_tokens_per_s`, `requests_per_s`) always describe the experiment
asked for. Engine limits are vLLM's defaults for the GPU unless given. The replica fits when its KV cache holds one
request at `max_model_len` (vLLM refuses to start otherwise); everything else is a question of queueing, not of fit.
"""

from __future__ import annotations

from dataclasses import dataclass

from blueprints.catalog.engines import engine_facts
from blueprints.core import defaults
from blueprints.contracts.memory import kv_cache_tokens, tensor_parallel_problems
from blueprints.capacity.physics import engine_profile, replica_model
from blueprints.capacity.planning import candidate, run_at_rate, traffic_shape
from blueprints.capacity.runs import burst, closed_loop, open_loop, scheduler_config
from blueprints.capacity.simulator import SimulationResult
from blueprints.capacity.uncertainty import FAMILIES, band_for, interval
from blueprints.capacity.workload import LengthModel
from blueprints.catalog import Architecture, Gpu
from blueprints.requirements.model import Precision, Quantization


@dataclass(frozen=True)
class WhatIf:
    """A resolved `estimate` question.

    Attributes:
        arch: model shape.
        gpu: GPU record.
        node_gpus: GPUs of the largest catalog node with this GPU (the highest tensor-parallel degree within a node).
        precision, quantization: weights.
        tensor_parallel_size: GPUs per replica.
        concurrency: closed-loop requests in flight (the experiment unless `burst` or `arrival_rate` is given).
        input_tokens, output_tokens: mean lengths, tokens; *_p95: their 95th percentiles (open loop).
        max_model_len: longest sequence that must fit, tokens.
        kv_cache_fp8: FP8 KV cache.
        max_num_seqs: `--max-num-seqs`, or None for vLLM's default (and no cap on `max_concurrency`).
        arrival_rate: requests/s of an open loop, or None.
        burst: requests of a burst sent at time 0, or None.
        max_concurrency: a burst's cap on requests in flight, or None.
        num_prompts: an open loop's requests, every one measured (a benchmark's run), or None (the planner's run).
        chat: the requests call the chat endpoint (the chat template's serial work adds to every TTFT).
        pattern: arrival pattern of the open loop (`steady` unless the requirements say otherwise).
        max_num_batched_tokens: `--max-num-batched-tokens`, or None for vLLM's default for the GPU.
        gpu_memory_utilization: `--gpu-memory-utilization` (the planner's `defaults.GPU_MEMORY_UTILIZATION` unless
            given), in vLLM's sense (`physics.memory_share`).
        engine: the serving engine (engines.yaml name): its scheduling profile, step tables and band.
    """

    arch: Architecture
    gpu: Gpu
    node_gpus: int
    precision: Precision
    quantization: Quantization | None
    tensor_parallel_size: int
    concurrency: int
    input_tokens: int
    output_tokens: int
    input_tokens_p95: int | None
    output_tokens_p95: int | None
    max_model_len: int
    kv_cache_fp8: bool
    max_num_seqs: int | None
    arrival_rate: float | None
    pattern: str = "steady"
    max_num_batched_tokens: int | None = None
    gpu_memory_utilization: float = defaults.GPU_MEMORY_UTILIZATION
    burst: int | None = None
    max_concurrency: int | None = None
    num_prompts: int | None = None
    chat: bool = False

    @property
    def regime(self) -> str:
        """`burst`, `open-loop` or `closed-loop`: the experiment the figures describe."""
        return "burst" if self.burst is not None else "open-loop" if self.arrival_rate is not None else "closed-loop"
    engine: str = "vllm"


def _holds(w: WhatIf, tp: int) -> tuple[int, int]:
    """(KV-cache tokens, requests of mean length they hold, capped by `max_num_seqs`) at tensor parallel `tp`."""
    kv = kv_cache_tokens(w.arch, w.gpu, precision=w.precision, tensor_parallel_size=tp, kv_cache_fp8=w.kv_cache_fp8,
                         gpu_memory_utilization=w.gpu_memory_utilization)
    held = kv // (w.input_tokens + w.output_tokens)
    return kv, min(held, w.max_num_seqs) if w.max_num_seqs else held


def smallest_fitting_tp(w: WhatIf) -> int | None:
    """The smallest tensor-parallel degree (within the largest node, one vLLM can shard the model over) at which the
    weights and one max_model_len sequence fit; None if none does."""
    tp = 1
    while tp <= w.node_gpus:
        if not tensor_parallel_problems(w.arch, tp) and _holds(w, tp)[0] >= w.max_model_len:
            return tp
        tp *= 2
    return None


def _means(run: SimulationResult, *, over_makespan: bool) -> dict:
    """The run's mean TTFT, ITL and TPOT (ms) and its throughput: over the makespan (every request measured, as a
    benchmark divides), or the steady-state rate of a closed loop."""
    if over_makespan and run.duration_s > 0:
        rps, tokens = run.measured / run.duration_s, run.output_tokens / run.duration_s
    else:
        rps, tokens = run.requests_per_s, run.output_tokens_per_s
    return {"ttft_ms": round(run.ttft_ms.mean, 2), "itl_ms": round(run.itl_ms.mean, 2),
            "tpot_ms": round(run.tpot_ms.mean, 2), "output_tokens_per_s": round(tokens, 3),
            "requests_per_s": round(rps, 4)}


def estimate(w: WhatIf) -> tuple[dict, SimulationResult | None]:
    """The `estimate` JSON: fit, memory, what the step times rest on, the experiment's means (null when it does not
    fit), an open loop's percentiles, a burst's makespan, and the smallest fitting tensor parallel when it does not
    fit.

    Returns:
        (result, the open-loop run or None): the run tells the caller whether the rate overloads the replica.
    """
    model = replica_model(w.arch, w.gpu, precision=w.precision, quantization=w.quantization,
                          tensor_parallel_size=w.tensor_parallel_size, kv_cache_fp8=w.kv_cache_fp8,
                          gpu_memory_utilization=w.gpu_memory_utilization, chat=w.chat,
                          engine=engine_profile(engine_facts(w.engine).profile))
    kv, held = _holds(w, w.tensor_parallel_size)
    fits = kv >= w.max_model_len
    result: dict = {"fits": fits, "weights_gib": round(model.weights_gib, 2), "kv_cache_tokens": kv,
                    "max_concurrency": held, "capacity_source": model.source.describe(), "regime": w.regime,
                    "ttft_ms": None, "itl_ms": None, "tpot_ms": None, "output_tokens_per_s": None,
                    "requests_per_s": None}
    run = None
    if fits:
        config = scheduler_config(model, w.gpu, max_model_len=w.max_model_len, max_num_seqs=w.max_num_seqs,
                                  max_num_batched_tokens=w.max_num_batched_tokens)
        fixed_in, fixed_out = LengthModel(w.input_tokens, w.input_tokens), LengthModel(w.output_tokens,
                                                                                       w.output_tokens)
        if w.burst is not None:
            done = burst(model, config, count=w.burst, inputs=fixed_in, outputs=fixed_out,
                         max_model_len=w.max_model_len, max_concurrency=w.max_concurrency)
            result.update(_means(done, over_makespan=True), makespan_s=round(done.duration_s, 3))
        elif w.arrival_rate is not None and w.num_prompts is not None:
            run = open_loop(model, config, rate_per_s=w.arrival_rate, pattern="steady", inputs=fixed_in,
                            outputs=fixed_out, max_model_len=w.max_model_len, requests=w.num_prompts, warmup=0,
                            stop_when_overloaded=False)
            result.update(_means(run, over_makespan=True))
        elif w.arrival_rate is not None:
            shape = traffic_shape(w.input_tokens, w.input_tokens_p95, w.output_tokens, w.output_tokens_p95,
                                  pattern=w.pattern, max_model_len=w.max_model_len)
            cand = candidate(model, w.gpu, w.tensor_parallel_size, w.kv_cache_fp8, config, shape)
            run = run_at_rate(cand, shape, w.arrival_rate)
            result.update(_means(run, over_makespan=False))
        else:
            closed = closed_loop(model, config, concurrency=w.concurrency, inputs=fixed_in, outputs=fixed_out,
                                 max_model_len=w.max_model_len)
            result.update(_means(closed, over_makespan=False))
    if w.arrival_rate is not None:
        result.update(
            ttft_p50_ms=round(run.ttft_ms.p50, 1) if run else None,
            ttft_p95_ms=round(run.ttft_ms.p95, 1) if run else None,
            itl_p50_ms=round(run.itl_ms.p50, 2) if run else None,
            itl_p95_ms=round(run.itl_ms.p95, 2) if run else None,
            e2e_p95_ms=round(run.e2e_ms.p95, 1) if run else None)
    if not fits:
        result["min_tensor_parallel"] = smallest_fitting_tp(w)
    result["uncertainty"] = _band(result, model.source.kind, w.engine)
    return result, run


def _band(result: dict, source: str, engine: str = "vllm") -> dict:
    """[low, high] of each predicted mean and percentile: where the measured value lies when the model is off by its
    step source's cross-validated p75 |error| for that metric family (`uncertainty.band_for`; the roofline's band is
    wider). Null where the prediction is."""
    band = band_for(source, engine)
    out = {}
    for key, value in result.items():
        family = FAMILIES.get(key.replace("_p50", "").replace("_p95", ""))
        if family is not None and value is not None:
            low, high = interval(value, getattr(band, family))
            out[key] = [round(low, 2), round(high, 2)]
    return out
