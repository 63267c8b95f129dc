"""Ready-made simulation runs: a closed loop at a fixed concurrency, and an open loop at an arrival rate."""

from __future__ import annotations

from blueprints.core import defaults
from blueprints.capacity.analytic import mean_values
from blueprints.capacity.physics import ReplicaModel, default_batch_limits
from blueprints.capacity.simulator import SchedulerConfig, SimulationResult, simulate
from blueprints.capacity.workload import LengthModel, arrival_times, request_shapes, simulation_requests
from blueprints.catalog import Gpu


def scheduler_config(model: ReplicaModel, gpu: Gpu, *, max_model_len: int, max_num_seqs: int | None = None,
                     max_num_batched_tokens: int | None = None) -> SchedulerConfig:
    """The scheduler limits of a replica: the given flags, else the engine's defaults (`default_batch_limits`:
    vLLM V1's, SGLang's, TensorRT-LLM's per-GPU defaults; vLLM V0 engines: max(max_model_len, 2048) tokens and 256
    sequences)."""
    default_tokens, default_seqs = default_batch_limits(gpu, model.engine)
    if model.engine.tables == "sglang":  # chunks prompts within its chunked_prefill_size, each chunk a step alone
        default_tokens = max(default_tokens, max_model_len)  # [simplified: the chunk limit as the step's budget]
    elif not model.engine.chunked_prefill:
        default_tokens, default_seqs = max(max_model_len, defaults.V0_MIN_BATCHED_TOKENS), 256
    return SchedulerConfig(max_num_seqs=max_num_seqs or default_seqs,
                           max_num_batched_tokens=max_num_batched_tokens or default_tokens,
                           kv_cache_blocks=model.kv_cache_tokens // defaults.KV_BLOCK_TOKENS)


def closed_loop(model: ReplicaModel, config: SchedulerConfig, *, concurrency: int, inputs: LengthModel,
                outputs: LengthModel, max_model_len: int, seed: int = defaults.SIMULATION_SEED,
                staggered: bool = False) -> SimulationResult:
    """`concurrency` clients each keeping one request in flight, as a benchmark runs them: every client sends its
    first request at once and its next one when the last completes (the API server takes them one at a time). With
    fixed lengths the clients stay in step, so their prompts keep arriving together; length spread desynchronises
    them. `staggered`: the clients start one after another, spread over the time one request takes at this
    concurrency (the mean-value model's), as a harness that ramps its users up does, so they never fall in step. The
    first 2 x concurrency requests are warm-up."""
    warmup = 2 * concurrency
    count = warmup + max(40, 6 * concurrency)
    shapes = request_shapes(inputs, outputs, count=count, max_model_len=max_model_len, seed=seed)
    starts = None
    if staggered and concurrency > 1:
        request_s = mean_values(model, running=min(concurrency, config.max_num_seqs), input_tokens=inputs.mean,
                                output_tokens=outputs.mean,
                                max_num_batched_tokens=config.max_num_batched_tokens).request_s
        starts = [request_s * k / concurrency for k in range(concurrency)]
    return simulate(model, config, shapes, concurrency=concurrency, warmup=warmup, starts=starts)


def open_loop(model: ReplicaModel, config: SchedulerConfig, *, rate_per_s: float, pattern: str, inputs: LengthModel,
              outputs: LengthModel, max_model_len: int, requests: int | None = None, warmup: int | None = None,
              seed: int = defaults.SIMULATION_SEED, stop_when_overloaded: bool = True,
              stop_above_ms: tuple[float | None, float | None] = (None, None)) -> SimulationResult:
    """Requests arriving at `rate_per_s` (mean) with the traffic pattern's burstiness.

    Args:
        requests: how many to simulate; defaults to `workload.simulation_requests(rate_per_s)`. Pass the same
            number for runs at different rates to compare them on common random numbers.
        warmup: requests left out of the statistics; defaults to `SIMULATION_WARMUP_FRACTION` of them (0: measure
            every one, as a benchmark run does).
        stop_when_overloaded: stop (unstable) once the queue grows past what the replica could ever drain, which
            saves time in a search; otherwise every request is served, so an overloaded run's latencies keep growing
            with the rate.
        stop_above_ms: (TTFT, request latency) p95 targets, ms, to stop at once the run must miss
            (`simulator.simulate`).
    """
    count = requests or simulation_requests(rate_per_s)
    shapes = request_shapes(inputs, outputs, count=count, max_model_len=max_model_len, seed=seed)
    arrivals = arrival_times(pattern, rate_per_s, count, seed=seed)
    if warmup is None:
        warmup = int(count * defaults.SIMULATION_WARMUP_FRACTION)
    limit = max(64, 2 * config.max_num_seqs, count // 4) if stop_when_overloaded else None
    return simulate(model, config, shapes, arrivals=arrivals, warmup=warmup, queue_limit=limit,
                    stop_above_ms=stop_above_ms)


def burst(model: ReplicaModel, config: SchedulerConfig, *, count: int, inputs: LengthModel, outputs: LengthModel,
          max_model_len: int, max_concurrency: int | None = None,
          seed: int = defaults.SIMULATION_SEED) -> SimulationResult:
    """`count` requests all sent at time 0 (a benchmark at `--request-rate inf`), every one served and measured: its
    requests (or tokens) / `duration_s`, the makespan, is what the benchmark reports as throughput, ramp and drain
    included. With `max_concurrency` (`--max-concurrency`) the client keeps at most that many in flight and sends the
    next as one completes."""
    shapes = request_shapes(inputs, outputs, count=count, max_model_len=max_model_len, seed=seed)
    if max_concurrency is not None and max_concurrency < count:
        return simulate(model, config, shapes, concurrency=max_concurrency)
    return simulate(model, config, shapes, arrivals=[0.0] * count)
