"""`blueprint estimate`: one replica's memory fit and latency, in a closed loop at a concurrency and, optionally,
under an arrival rate (the same model the planner sizes with).

Closed loop (`--concurrency`): the simulation run as a benchmark runs it, every client sending a request at once and
the next when its last completes, every request at the given lengths (so the clients stay in step and their prompts
keep arriving together); `ttft_ms`, `itl_ms` and `output_tokens_per_s` are its means after warm-up. Open loop (`--arrival-rate`): requests/s arriving with the traffic
pattern's burstiness and the length distribution (the requirements' p95s, else `defaults.TOKENS_P95_TO_MEAN`); adds
the p50/p95 of TTFT and ITL and the p95 of the request latency, over the same `ESTIMATE_REQUESTS` requests at any
rate, every one served (an overloaded replica's latencies keep growing with the rate; the CLI warns). Engine limits are vLLM's defaults for the GPU unless
`--max-num-seqs` is given.
"""

from __future__ import annotations

from dataclasses import dataclass

from blueprints.core import defaults
from blueprints.contracts.memory import kv_cache_tokens, tensor_parallel_problems
from blueprints.capacity.physics import replica_model
from blueprints.capacity.runs import closed_loop, open_loop, scheduler_config
from blueprints.capacity.simulator import SimulationResult
from blueprints.capacity.workload import LengthModel, length_model
from blueprints.catalog import Architecture, Gpu
from blueprints.requirements.model import Precision, Quantization


#: Requests one `--arrival-rate` run simulates, whatever the rate: runs at different rates then draw the same requests
#: (common random numbers), so their percentiles compare like with like.
ESTIMATE_REQUESTS = defaults.SIMULATION_REQUESTS[1]


@dataclass(frozen=True)
class WhatIf:
    """A resolved `estimate` question.

    Attributes:
        arch: model shape.
        gpu: GPU record.
        node_gpus: GPUs of the largest catalog node with this GPU (the highest tensor-parallel degree within a node).
        precision, quantization: weights.
        tensor_parallel_size: GPUs per replica.
        concurrency: closed-loop requests in flight.
        input_tokens, output_tokens: mean lengths, tokens; *_p95: their 95th percentiles (open loop).
        max_model_len: longest sequence that must fit, tokens.
        kv_cache_fp8: FP8 KV cache.
        max_num_seqs: `--max-num-seqs`, or None for vLLM's default (and no cap on `max_concurrency`).
        arrival_rate: requests/s for the open-loop figures, or None.
        pattern: arrival pattern of the open loop (`steady` unless the requirements say otherwise).
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


def _holds(w: WhatIf, tp: int) -> tuple[int, int]:
    """(KV-cache tokens, requests of mean length they hold) at tensor parallel `tp`."""
    kv = kv_cache_tokens(w.arch, w.gpu, precision=w.precision, tensor_parallel_size=tp, kv_cache_fp8=w.kv_cache_fp8)
    held = kv // (w.input_tokens + w.output_tokens)
    return kv, min(held, w.max_num_seqs) if w.max_num_seqs else held


def smallest_fitting_tp(w: WhatIf) -> int | None:
    """The smallest tensor-parallel degree (within the largest node, one vLLM can shard the model over) at which the
    weights, one max_model_len sequence and `concurrency` mean-length requests fit; None if none does."""
    tp = 1
    while tp <= w.node_gpus:
        if not tensor_parallel_problems(w.arch, tp):
            kv, held = _holds(w, tp)
            if kv >= w.max_model_len and held >= w.concurrency:
                return tp
        tp *= 2
    return None


def estimate(w: WhatIf) -> tuple[dict, SimulationResult | None]:
    """The `estimate` JSON: fit, memory and closed-loop latency (null when it does not fit), the open-loop
    percentiles when an arrival rate is given, and the smallest fitting tensor parallel when it does not fit.

    Returns:
        (result, the open-loop run or None): the run tells the caller whether the rate overloads the replica.
    """
    model = replica_model(w.arch, w.gpu, precision=w.precision, quantization=w.quantization,
                          tensor_parallel_size=w.tensor_parallel_size, kv_cache_fp8=w.kv_cache_fp8)
    kv, held = _holds(w, w.tensor_parallel_size)
    fits = kv >= w.max_model_len and w.concurrency <= held
    result: dict = {"fits": fits, "weights_gib": round(model.weights_gib, 2), "kv_cache_tokens": kv,
                    "max_concurrency": held, "ttft_ms": None, "itl_ms": None, "output_tokens_per_s": None}
    run = None
    if fits:
        config = scheduler_config(model, w.gpu, max_model_len=w.max_model_len, max_num_seqs=w.max_num_seqs)
        closed = closed_loop(model, config, concurrency=w.concurrency,
                             inputs=LengthModel(w.input_tokens, w.input_tokens),
                             outputs=LengthModel(w.output_tokens, w.output_tokens), max_model_len=w.max_model_len)
        result.update(ttft_ms=round(closed.ttft_ms.mean, 2), itl_ms=round(closed.itl_ms.mean, 2),
                      output_tokens_per_s=round(closed.output_tokens_per_s, 3))
        if w.arrival_rate is not None:
            run = open_loop(model, config, rate_per_s=w.arrival_rate, pattern=w.pattern,
                            inputs=length_model(w.input_tokens, w.input_tokens_p95),
                            outputs=length_model(w.output_tokens, w.output_tokens_p95), max_model_len=w.max_model_len,
                            requests=ESTIMATE_REQUESTS, stop_when_overloaded=False)
    if w.arrival_rate is not None:
        result.update(
            ttft_p50_ms=round(run.ttft_ms.p50, 1) if run else None,
            ttft_p95_ms=round(run.ttft_ms.p95, 1) if run else None,
            itl_p50_ms=round(run.itl_ms.p50, 2) if run else None,
            itl_p95_ms=round(run.itl_ms.p95, 2) if run else None,
            e2e_p95_ms=round(run.e2e_ms.p95, 1) if run else None)
    if not fits:
        result["min_tensor_parallel"] = smallest_fitting_tp(w)
    return result, run
