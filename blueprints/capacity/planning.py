"""Sizing one replica for the planner: engine limits, the highest arrival rate that meets the SLO, and predictions.

For one candidate (GPU, tensor parallel, KV-cache dtype) and the requirements' traffic:
1-2. `--max-num-seqs` and `--max-num-batched-tokens` (`engine_limits`): with an ITL target, the token budget (vLLM's
   default for the GPU or a power of two below it) and the largest batch whose full step (the batch decoding plus a
   prompt chunk filling the rest of the budget) keeps a token gap within the target, the pair the mean-value model
   saturates highest; the sequences within what the KV cache holds of mean-length requests (at most
   `defaults.MAX_NUM_SEQS_CAP`).
3. `screen`: an optimistic analytic bound on the rate (`LLM_MAX_UTILIZATION` x the saturated rate), for ranking;
   it drops a candidate whose idle replica misses the tightest TTFT or ITL target (p95, or p99 where only it is
   set) and ranks engine limits on the rate every TTFT target (p95 and p99) allows.
4. `size_replica`: the highest per-replica arrival rate at which the simulated TTFT p95, ITL p95 and (when bounded)
   request-latency p95 meet the targets: bisection over the rate on common random numbers, at most the screen's bound
   (`run_meeting`: a rate's run stops as soon as its TTFT or request-latency p95 must miss); `size_replica_until`
   stops it once what the caller asks of the rate (the replicas for a peak) is known.
Results are cached per input (the same candidate is sized once per process across environments and archetypes).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from blueprints.requirements.reuse import sequences_held
from blueprints.core import defaults
from blueprints.capacity.analytic import saturation_rps
from blueprints.capacity.physics import Correction, EngineProfile, ReplicaModel, default_batch_limits, replica_model
from blueprints.capacity.runs import open_loop
from blueprints.capacity.simulator import SchedulerConfig, SimulationResult
from blueprints.capacity.workload import Z95, LengthModel, length_model, simulation_requests
from blueprints.catalog import Architecture, Gpu
from blueprints.contracts.memory import LoraSlots
from blueprints.requirements.model import Precision, Quantization


@dataclass(frozen=True)
class TrafficShape:
    """What one replica sees, besides the rate: request lengths, the arrival pattern and the context limit."""

    inputs: LengthModel
    outputs: LengthModel
    pattern: str
    max_model_len: int
    cached_tokens: int = 0  # mean prompt tokens per request served by the prefix cache (excluded from `inputs`)
    shared_tokens: int = 0  # of which every request shares these (their KV blocks are held once)

    def sequences_held(self, kv_cache_tokens: int) -> int:
        """Mean-length requests a KV cache holds at once: each its prompt (cached history included) and output, the
        shared prefix once (`blueprints.requirements.reuse.sequences_held`)."""
        return sequences_held(kv_cache_tokens, request_tokens=self.inputs.mean + self.cached_tokens + self.outputs.mean,
                              shared_prefix_tokens=self.shared_tokens)


@dataclass(frozen=True)
class LatencyTargets:
    """p95 targets and optional p99 targets, ms (None: no target)."""

    ttft_p95_ms: float | None
    itl_p95_ms: float | None
    e2e_p95_ms: float | None = None
    ttft_p99_ms: float | None = None
    itl_p99_ms: float | None = None

    def tightest(self, metric: str) -> tuple[str, float] | None:
        """The tightest target of `metric` ("ttft" or "itl"): (its SLO field, ms), the p95's when set (a p99 target
        is never below it: `slo.<metric>_p99_ms` >= `<metric>_p95_ms`), else the p99's; None when neither is set.
        What a single request on an idle replica (TTFT of a mean prompt, a full step's token gap) must meet: it is
        at most every percentile of the metric."""
        for field in (f"{metric}_p95_ms", f"{metric}_p99_ms"):
            value = getattr(self, field)
            if value is not None:
                return field, value
        return None

    def ttft_tails(self) -> tuple[tuple[float, float, float], ...]:
        """Each TTFT target as (target ms, queue-wait percentile / mean, standard-normal quantile of the prompt
        length at that percentile): the p95's (`WAIT_P95_FACTOR`, z 1.645) and the p99's (`WAIT_P99_FACTOR`, z 2.326)
        where set; () without a TTFT target."""
        return tuple(t for t in ((self.ttft_p95_ms, WAIT_P95_FACTOR, Z95), (self.ttft_p99_ms, WAIT_P99_FACTOR, Z99))
                     if t[0] is not None)

    def met_by(self, run: SimulationResult) -> bool:
        """The run was stable and every given p95 and p99 is within its target."""
        return (run.stable
                and (self.ttft_p95_ms is None or run.ttft_ms.p95 <= self.ttft_p95_ms)
                and (self.itl_p95_ms is None or run.itl_ms.p95 <= self.itl_p95_ms)
                and (self.e2e_p95_ms is None or run.e2e_ms.p95 <= self.e2e_p95_ms)
                and (self.ttft_p99_ms is None or run.ttft_ms.p99 <= self.ttft_p99_ms)
                and (self.itl_p99_ms is None or run.itl_ms.p99 <= self.itl_p99_ms))


@dataclass(frozen=True)
class Candidate:
    """One replica shape with its engine limits and the analytic screen."""

    model: ReplicaModel
    gpu: Gpu
    tensor_parallel_size: int
    kv_cache_fp8: bool
    config: SchedulerConfig
    saturation_rps: float

    @property
    def max_num_seqs(self) -> int:
        return self.config.max_num_seqs

    @property
    def max_num_batched_tokens(self) -> int:
        return self.config.max_num_batched_tokens

    @property
    def rate_bound_rps(self) -> float:
        """Optimistic per-replica rate: `LLM_MAX_UTILIZATION` of the saturated rate (the simulation never plans
        above it)."""
        return defaults.LLM_MAX_UTILIZATION * self.saturation_rps


@dataclass(frozen=True)
class ReplicaSizing:
    """A simulated candidate: the highest per-replica rate that meets the targets and the run at that rate."""

    candidate: Candidate
    max_rps: float
    at_max: SimulationResult

    def run_at(self, shape: TrafficShape, rate_per_s: float) -> SimulationResult:
        """The candidate at another rate, on the same simulated requests as the search (common random numbers)."""
        return run_at_rate(self.candidate, shape, rate_per_s)


def _context(shape: TrafficShape) -> float:
    """Mean context a decoding sequence holds, tokens (its prompt and half its output)."""
    return shape.inputs.mean + shape.outputs.mean / 2


#: Damped fixed-point iterations for the decoders running beside a prompt chunk at a budget's rate (`_budget_rate`).
RUNNING_ITERATIONS = 6
#: The smallest `--max-num-batched-tokens` the planner sets: below it a prompt takes more steps than the chunked
#: prefill saves in token gaps [assumption].
MIN_BATCHED_TOKENS = 64
#: p95 of a queueing wait / its mean when choosing the token budget (an exponential-like tail; as
#: `blueprints.capacity.replica.WAIT_P95_FACTOR`) [assumption].
WAIT_P95_FACTOR = 3.0
#: p99 of a queueing wait / its mean: the same exponential-like tail at the 99th percentile, ln(100) ~ 4.6
#: [assumption].
WAIT_P99_FACTOR = math.log(100)
#: Standard-normal quantile at the 99th percentile (the p99 prompt length of a lognormal `LengthModel`).
Z99 = 2.3263478740408408


def _largest(fits, ceiling: int) -> int:
    """The largest batch in [1, ceiling] for which `fits` holds (it holds for every smaller one), or 0."""
    if ceiling < 1 or not fits(1):
        return 0
    lo, hi = 1, ceiling
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def engine_limits(model: ReplicaModel, gpu: Gpu, shape: TrafficShape, targets: LatencyTargets, *,
                  tune_batched_tokens: bool = True) -> SchedulerConfig | None:
    """`--max-num-seqs` and `--max-num-batched-tokens` for this replica (the first of `engine_limit_choices`), or
    None when the KV cache cannot hold one `max_model_len` sequence or one sequence's step misses the ITL target."""
    choices = engine_limit_choices(model, gpu, shape, targets, tune_batched_tokens=tune_batched_tokens)
    return choices[0] if choices else None


def engine_limit_choices(model: ReplicaModel, gpu: Gpu, shape: TrafficShape, targets: LatencyTargets, *,
                         tune_batched_tokens: bool = True) -> tuple[SchedulerConfig, ...]:
    """The engine limits worth simulating for this replica, best first by the mean-value model (at most
    `ENGINE_LIMIT_CHOICES`, one per token budget), or () when the KV cache cannot hold one `max_model_len` sequence
    or one sequence's step misses the ITL target. The mean-value model ranks them; the simulation, which sizes the
    replicas, settles which serves the most (`blueprints.plan.options.llm`): the two disagree near a tie.

    An engine whose prefill steps run alone (`EngineProfile.chunked_prefill` off: SGLang's default) gets one choice:
    as many sequences as a decode step allows, and a token budget holding a whole prompt of the context.

    Without an ITL target (or `tune_batched_tokens` off): vLLM's token budget for the GPU, and as many sequences as
    the KV cache holds of mean-length requests (at most `MAX_NUM_SEQS_CAP`; with an ITL target, as many as a pure
    decode step keeps within it). With one: each budget from vLLM's default down to `MIN_BATCHED_TOKENS` (halving)
    with the largest batch whose full step (the batch decoding plus a prompt chunk filling the rest of the budget)
    stays within the target, and with a TTFT target the best smaller batch too (`_best_batch`); of these the pair
    with the highest rate (`_budget_rate`: the mean-value saturated rate with room for the queue for a sequence slot,
    and with a TTFT target the rate at which prompts queueing for their chunks still meet it): decode slots and prompt
    chunks share every step's time, so the most sequences a decode step allows leave no room for prompts, and small
    budgets take many steps per prompt.
    """
    if model.kv_cache_tokens < shape.max_model_len:
        return ()
    held = shape.sequences_held(model.kv_cache_tokens)
    ceiling = min(defaults.MAX_NUM_SEQS_CAP, held)
    ctx = _context(shape)
    itl = targets.tightest("itl")  # a full step's gap is the longest: within it, every ITL percentile is
    itl_s = itl[1] / 1e3 if itl is not None else math.inf
    if ceiling < 1 or model.step_s(1, ctx) > itl_s:
        return ()
    blocks = model.kv_cache_tokens // defaults.KV_BLOCK_TOKENS
    default_tokens = default_batch_limits(gpu)[0]
    decode_only = _largest(lambda b: model.step_s(b, b * ctx) <= itl_s, ceiling)
    if not model.engine.chunked_prefill:  # prefill steps run alone (SGLang's default scheduler): whole prompts, up to
        # the context, each a step of its own that the decoding sequences wait through (the simulation counts it)
        return (SchedulerConfig(max_num_seqs=decode_only, max_num_batched_tokens=max(
            shape.max_model_len, default_batch_limits(gpu, model.engine)[0]), kv_cache_blocks=blocks),)
    if not tune_batched_tokens or not math.isfinite(itl_s):
        return (SchedulerConfig(max_num_seqs=decode_only, max_num_batched_tokens=default_tokens,
                                kv_cache_blocks=blocks),)
    weighed: list[tuple[float, int, int]] = []  # (mean-value rate, batch, budget)
    budget = default_tokens
    while budget >= MIN_BATCHED_TOKENS:
        pairs_per_token = shape.inputs.mean / 2

        def fits(b: int, budget: int = budget) -> bool:
            chunk = budget - b
            return model.step_s(b, b * ctx, chunk, chunk * pairs_per_token) <= itl_s

        largest = _largest(fits, min(ceiling, budget - 1))
        if largest:
            weighed.append(_best_batch(lambda n, budget=budget: _budget_rate(model, shape, targets, seqs=n,
                                                                                budget=budget),
                                       largest, tune=bool(targets.ttft_tails())) + (budget,))
        budget //= 2
    if not weighed:  # no budget leaves room for a chunk within the target: the smallest; chunks stretch gaps
        return (SchedulerConfig(max_num_seqs=decode_only, max_num_batched_tokens=max(decode_only, MIN_BATCHED_TOKENS),
                                kv_cache_blocks=blocks),)
    # the highest rate first; at a tie the larger batch, then the larger budget
    return tuple(SchedulerConfig(max_num_seqs=seqs, max_num_batched_tokens=budget, kv_cache_blocks=blocks)
                 for _, seqs, budget in sorted(weighed, reverse=True)[:ENGINE_LIMIT_CHOICES])


#: Engine limits (one per token budget) the planner simulates for a replica, best first by the mean-value model.
ENGINE_LIMIT_CHOICES = 3
#: The batches (`--max-num-seqs`) weighed first below the largest a token budget fits (`_best_batch`), before the
#: search narrows between the best one's neighbours.
BATCH_GRID = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768)
#: Halfin-Whitt square-root staffing: with `n` sequence slots and Poisson arrivals, a request waits for a free slot
#: with probability ~5 % when the slots run at (n - beta sqrt(n)) / n of their saturated rate, beta = 1.75 (P(wait)
#: = 1 / (1 + beta Phi(beta) / phi(beta)); Halfin & Whitt 1981, Operations Research 29(3)). The mean-value model
#: counts no queue for a slot, which a small batch near its saturated rate builds (the simulation, which sizes the
#: replicas, sees it): `_budget_rate` caps the saturated rate at this share.
SLOT_QUEUE_BETA = 1.75


def _best_batch(rate, largest: int, *, tune: bool) -> tuple[float, int]:
    """(rate, batch) of the batch in [1, `largest`] with the highest `rate(batch)` (at a tie the larger), or of
    `largest` alone without `tune`. The saturated rate rises with the batch but the prompt chunk beside it shrinks,
    so under a TTFT target the best can lie below the largest batch: `BATCH_GRID` (and `largest`) first, then a
    ternary search between the best one's neighbours."""
    if not tune:
        return rate(largest), largest
    known: dict[int, float] = {}

    def at(n: int) -> float:
        if n not in known:
            known[n] = rate(n)
        return known[n]

    grid = sorted({*(b for b in BATCH_GRID if b < largest), largest})
    best = max(grid, key=lambda n: (at(n), n))
    i = grid.index(best)
    lo, hi = grid[max(0, i - 1)], grid[min(len(grid) - 1, i + 1)]
    while hi - lo > 2:
        m1, m2 = lo + (hi - lo) // 3, hi - (hi - lo) // 3
        if at(m1) > at(m2):
            hi = m2
        else:
            lo = m1
    n = max(range(lo, hi + 1), key=lambda k: (at(k), k))
    return max((at(n), n), (at(best), best))


def _budget_rate(model: ReplicaModel, shape: TrafficShape, targets: LatencyTargets, *, seqs: int, budget: int) -> float:
    """The rate (requests/s) a token budget allows by the mean-value model: the saturated rate at `seqs` running, and
    with TTFT targets at most the rate at which prompts, prefilled one after another in chunks of what the budget
    leaves the decoders (vLLM V1 runs one partial prefill at a time), still meet each of them: an M/D/1 queue of
    prefills whose p95 wait (`WAIT_P95_FACTOR` x the mean) plus a p95-length prompt's own chunks and the frontend fit
    the p95 target, and likewise at the 99th percentile (`WAIT_P99_FACTOR`, a p99-length prompt) the p99 target.
    With a TTFT target the saturated rate is capped where requests rarely wait for a sequence slot
    (`SLOT_QUEUE_BETA`). The decoders beside a chunk are those running at that rate (Little's law: the rate x the
    steps of a mean output, at most `seqs`), found by a few damped iterations from `seqs`: a cap above what the rate
    keeps busy costs the chunks nothing."""
    mean_in, out = shape.inputs.mean, shape.outputs.mean
    saturated = saturation_rps(model, running=seqs, input_tokens=mean_in, output_tokens=out,
                               max_num_batched_tokens=budget)
    tails = targets.ttft_tails()
    if not tails:
        return saturated
    saturated *= max(0.0, 1 - SLOT_QUEUE_BETA / math.sqrt(seqs))  # requests rarely wait for a slot
    ctx = _context(shape)
    running, rate = float(seqs), 0.0
    for _ in range(RUNNING_ITERATIONS):
        decoders = max(1, min(seqs, round(running)))
        chunk = max(1, budget - decoders)
        step = model.step_s(decoders, decoders * ctx, chunk, chunk * mean_in / 2)
        service = math.ceil(mean_in / chunk) * step
        rate = saturated
        for target_ms, wait_factor, z in tails:
            prompt = shape.inputs.p95 if z == Z95 else shape.inputs.draw(z, limit=shape.max_model_len)
            tail = math.ceil(prompt / chunk) * step + sum(model.frontend_s(prompt))
            room = target_ms / 1e3 - tail
            x = room / wait_factor / service  # the mean wait allowed, in prefill services
            rate = min(rate, 2 * x / (1 + 2 * x) / service) if room > 0 else 0.0  # M/D/1: rho / (2 (1 - rho))
        running = (running + min(seqs, rate * out * step)) / 2
    return rate


@lru_cache(maxsize=1024)
def screen(arch: Architecture, gpu: Gpu, *, precision: Precision, quantization: Quantization | None,
           tensor_parallel_size: int, kv_cache_fp8: bool, shape: TrafficShape, targets: LatencyTargets,
           tune_batched_tokens: bool = True, correction: Correction = Correction(),
           lora: LoraSlots | None = None, chat: bool = True,
           engine: EngineProfile | None = None,
           gpu_memory_utilization: float = defaults.GPU_MEMORY_UTILIZATION) -> tuple[Candidate, ...]:
    """The candidate with each of its engine-limit choices (`engine_limit_choices`, best first by the mean-value
    model) and its analytic bound, or () when it cannot serve one request within the targets (memory, ITL at batch 1,
    or TTFT of an unloaded replica, each against the tightest target of its metric, `LatencyTargets.tightest`: a p99
    target screens where no p95 target is set); `correction`: a calibration's factors; `lora`: the LoRA slots whose
    memory leaves the KV cache; `chat`: requests come through the chat endpoint; `engine`: the serving engine's
    profile (its scheduling and step tables; the pinned vLLM by default); `gpu_memory_utilization` the share of memory
    the engine's KV cache is sized in (`physics.planned_memory_utilization`). Remembered by its arguments (all
    values): one plan screens the same replicas in every search it runs (the band's edges, the hints' re-plans)."""
    model = replica_model(arch, gpu, precision=precision, quantization=quantization,
                          tensor_parallel_size=tensor_parallel_size, kv_cache_fp8=kv_cache_fp8, correction=correction,
                          lora=lora, chat=chat, engine=engine, gpu_memory_utilization=gpu_memory_utilization)
    configs = engine_limit_choices(model, gpu, shape, targets, tune_batched_tokens=tune_batched_tokens)
    ttft = targets.tightest("ttft")
    return tuple(candidate(model, gpu, tensor_parallel_size, kv_cache_fp8, config, shape) for config in configs
                 if ttft is None or idle_ttft_ms(model, config, shape) <= ttft[1])


def candidate(model: ReplicaModel, gpu: Gpu, tensor_parallel_size: int, kv_cache_fp8: bool, config: SchedulerConfig,
              shape: TrafficShape) -> Candidate:
    """A replica with given engine limits, and its analytic saturated rate (requests/s) under `shape`."""
    sat = saturation_rps(model, running=config.max_num_seqs, input_tokens=shape.inputs.mean,
                         output_tokens=shape.outputs.mean, max_num_batched_tokens=config.max_num_batched_tokens)
    return Candidate(model, gpu, tensor_parallel_size, kv_cache_fp8, config, sat)


def traffic_shape(mean_input: int, input_p95: int | None, mean_output: int, output_p95: int | None, *,
                  pattern: str, max_model_len: int, cached_tokens: int = 0, shared_tokens: int = 0) -> TrafficShape:
    """The shape of a traffic description: lengths from the mean and p95 (`workload.length_model`), its pattern.

    `cached_tokens` (mean per request, `blueprints.capacity.prefix_cache.cached_prompt_tokens`) come from vLLM's
    prefix cache: the replica prefills only the rest, so the prompt's mean and p95 both shift down by them (the one
    place the capacity model shortens prompts); `shared_tokens` of them are the prefix every request shares."""
    inputs = length_model(mean_input, input_p95)
    if cached_tokens:
        inputs = length_model(inputs.mean - cached_tokens, max(inputs.mean, inputs.p95) - cached_tokens)
    return TrafficShape(inputs=inputs, outputs=length_model(mean_output, output_p95), pattern=pattern,
                        max_model_len=max_model_len, cached_tokens=cached_tokens, shared_tokens=shared_tokens)


def idle_ttft_ms(model: ReplicaModel, config: SchedulerConfig, shape: TrafficShape) -> float:
    """TTFT of a mean-length prompt on an idle replica, ms: the frontend's latency and serial work plus its prefill
    chunks."""
    inp = shape.inputs.mean
    chunk = min(inp, config.max_num_batched_tokens)
    steps = math.ceil(inp / chunk)
    frontend = sum(model.frontend_s(inp))
    return (frontend + steps * model.step_s(0, 0.0, chunk, chunk * (inp - chunk / 2))) * 1e3


def idle_itl_ms(model: ReplicaModel, shape: TrafficShape) -> float:
    """Token gap of a single decoding sequence, ms (the floor of any ITL p95)."""
    return model.step_s(1, _context(shape)) * 1e3


def simulate_rate(candidate: Candidate, shape: TrafficShape, rate_per_s: float, *,
                  requests: int | None = None,
                  stop_above_ms: tuple[float | None, float | None] = (None, None)) -> SimulationResult:
    """The candidate under `rate_per_s` requests/s with the shape's arrivals and lengths (`stop_above_ms`: as
    `simulator.simulate`)."""
    return open_loop(candidate.model, candidate.config, rate_per_s=rate_per_s, pattern=shape.pattern,
                     inputs=shape.inputs, outputs=shape.outputs, max_model_len=shape.max_model_len,
                     requests=requests, stop_above_ms=stop_above_ms)


#: Bisection steps over the rate: the bracket shrinks to 1/2^6 of the screen's bound (~1.5 % of it).
_BISECTION_STEPS = 6


def size_replica(candidate: Candidate, shape: TrafficShape, targets: LatencyTargets) -> ReplicaSizing | None:
    """The highest per-replica arrival rate whose simulated p95s meet `targets`: the rate bound when it meets them,
    else a bisection between 1/32 of it and it; None when no rate tried meets them (the light load, 1/32 of the
    bound, is simulated only when every rate of the bisection missed)."""
    return _size_replica(candidate, shape, targets)


#: Most runs remembered (complete runs and misses each); beyond it the memo starts again.
_MEMO_SIZE = 4096
_runs: dict[tuple, SimulationResult] = {}  # (candidate, shape, rate) -> the complete run
_misses: dict[tuple, set[tuple[float | None, float | None]]] = {}  # (candidate, shape, rate) -> stops that missed


def run_at_rate(candidate: Candidate, shape: TrafficShape, rate_per_s: float) -> SimulationResult:
    """The candidate at `rate_per_s`, always on the same simulated requests (as many as
    `workload.simulation_requests` gives at its rate bound), so runs at different rates compare like with like.
    Remembered per (candidate, shape, rate)."""
    key = (candidate, shape, rate_per_s)
    run = _runs.get(key)
    if run is None:
        run = _remember(key, simulate_rate(candidate, shape, rate_per_s,
                                           requests=simulation_requests(candidate.rate_bound_rps)))
    return run


def run_meeting(candidate: Candidate, shape: TrafficShape, targets: LatencyTargets,
                rate_per_s: float) -> SimulationResult | None:
    """`run_at_rate`'s run when it meets `targets`, else None. The run stops as soon as its TTFT or request-latency
    p95 must miss (`simulator.simulate`'s `stop_above_ms`), so a search's failing rates cost only part of a run.

    Remembered per (candidate, shape, rate) for every target: a run reported stable never stopped (a stop reports
    `stable=False`, `SimulationResult.stable`), so it is the complete one, shared with `run_at_rate` and judged
    against any targets; a run reported unstable proves a miss of every target as tight as its stops (the complete
    run is unstable too, or its p95 exceeds the stop that ended it: `simulator.simulate`), so no run is simulated
    again for such targets."""
    key = (candidate, shape, rate_per_s)
    run = _runs.get(key)
    if run is not None:
        return run if targets.met_by(run) else None
    stops = (targets.ttft_p95_ms, targets.e2e_p95_ms)
    if any(_as_tight(stops, missed) for missed in _misses.get(key, ())):
        return None
    run = simulate_rate(candidate, shape, rate_per_s, requests=simulation_requests(candidate.rate_bound_rps),
                        stop_above_ms=stops)
    if run.stable or stops == (None, None):
        _remember(key, run)
        return run if targets.met_by(run) else None
    if len(_misses) >= _MEMO_SIZE:
        _misses.clear()
    _misses.setdefault(key, set()).add(stops)
    return None


def _as_tight(stops: tuple[float | None, float | None], missed: tuple[float | None, float | None]) -> bool:
    """Every target of `missed` (ms; None: none) is set in `stops` at or below it."""
    return all(m is None or (s is not None and s <= m) for s, m in zip(stops, missed))


def _remember(key: tuple, run: SimulationResult) -> SimulationResult:
    if len(_runs) >= _MEMO_SIZE:
        _runs.clear()
    _runs[key] = run
    return run


def meets_at(candidate: Candidate, shape: TrafficShape, targets: LatencyTargets,
             rate_per_s: float) -> SimulationResult | None:
    """The candidate's run at `rate_per_s` when it meets the targets there (never above its rate bound), else None."""
    if not rate_per_s <= candidate.rate_bound_rps:
        return None
    return run_meeting(candidate, shape, targets, rate_per_s)


@lru_cache(maxsize=512)
def _size_replica(candidate: Candidate, shape: TrafficShape, targets: LatencyTargets) -> ReplicaSizing | None:
    return _rate_search(candidate, shape, targets)


def size_replica_until(candidate: Candidate, shape: TrafficShape, targets: LatencyTargets,
                       settled: Callable[[set[float]], bool]) -> ReplicaSizing | None:
    """`size_replica`'s search, stopped once `settled(rates)` holds for every `max_rps` it could still end on (the
    highest rate met so far and each bisection midpoint still to come, as the search computes and rounds them): then
    the sizing at the highest rate met so far, which shares with the complete one whatever `settled` asks of them all
    (e.g. the replicas a peak needs). None exactly when `size_replica` is None. Its runs are remembered, so
    `size_replica` later goes on from where it stopped."""
    return _rate_search(candidate, shape, targets, settled)


def _rate_search(candidate: Candidate, shape: TrafficShape, targets: LatencyTargets,
                 settled: Callable[[set[float]], bool] | None = None) -> ReplicaSizing | None:
    hi = candidate.rate_bound_rps
    if not hi > 0:
        return None
    top = run_meeting(candidate, shape, targets, hi)
    if top is not None:
        return ReplicaSizing(candidate, hi, top)
    lo = hi / 32
    best: tuple[float, SimulationResult] | None = None
    a, b = lo, hi
    for step in range(_BISECTION_STEPS):
        if best is not None and settled is not None and settled(
                {round(r, 6) for r in (best[0], *_midpoints(a, b, _BISECTION_STEPS - step))}):
            break
        mid = (a + b) / 2
        run = run_meeting(candidate, shape, targets, mid)
        if run is not None:
            a, best = mid, (mid, run)
        else:
            b = mid
    if best is None:  # the light load last: a complete run, needed only when every higher rate missed
        low_run = run_meeting(candidate, shape, targets, lo)
        if low_run is None:
            return None
        best = (lo, low_run)
    return ReplicaSizing(candidate, round(best[0], 6), best[1])


def _midpoints(a: float, b: float, steps: int) -> list[float]:
    """Every rate a bisection of (a, b) may try in its next `steps` steps, computed as it computes them."""
    if steps <= 0:
        return []
    mid = (a + b) / 2
    return [mid, *_midpoints(a, mid, steps - 1), *_midpoints(mid, b, steps - 1)]


def size_replica_at_least(candidate: Candidate, shape: TrafficShape, targets: LatencyTargets,
                          rate_per_s: float) -> ReplicaSizing:
    """`size_replica` for a candidate already known to meet the targets at `rate_per_s`: the bisection's rate, or
    that rate should the bisection (a finite simulation, not perfectly monotone) land below it."""
    sizing = size_replica(candidate, shape, targets)
    if sizing is None or sizing.max_rps < rate_per_s:
        return ReplicaSizing(candidate, rate_per_s, run_at_rate(candidate, shape, rate_per_s))
    return sizing


def clear_caches() -> None:
    """Forget every screened and sized candidate and drawn workload (benchmarks time a cold start with it)."""
    from blueprints.capacity import workload

    screen.cache_clear()
    _size_replica.cache_clear()
    _runs.clear()
    _misses.clear()
    workload.request_shapes.cache_clear()
    workload._unit_draws.cache_clear()
