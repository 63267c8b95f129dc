"""Fitting the capacity model's correction factors (`physics.Correction`) to benchmark runs of a deployed replica.

Each measured run (one request rate of `vllm bench serve`) is replayed through the very replica model the planner
sizes with: the same step times, scheduler limits and frontend, the run's own request count, an open loop at its
rate (Poisson arrivals, the client's `--burstiness` 1) or every request at once (`--request-rate inf`), and its
prompt and output lengths drawn integer-uniform in [len(1 - r), len(1 + r)] as vLLM's random dataset draws them
(vLLM v0.24.0 vllm/benchmarks/datasets/datasets.py:557-563, `RandomDataset`). A prefix every prompt shares
(`--random-prefix-len`) is not replayed: as the planner models vLLM's prefix cache (`capacity.planning.traffic_shape`),
cached tokens cost no prefill, so a run's prompt is its random part (`MeasuredRun.input_len`). Every request is
measured (a benchmark has no warm-up in its statistics) and nothing stops an overloaded run.

Three figures per run are compared with the client's: median TTFT and median ITL (`median_ttft_ms`,
`median_itl_ms`) always, output tokens/s (`output_throughput`) only for a run the server held back (completed
requests/s below `SATURATED_SHARE` of the rate asked): below that, throughput measures the client's random arrivals,
not the replica. The factors minimise the sum over runs and figures of |ln(predicted /
measured)| (an L1 loss in log space: a figure off by 2x weighs the same high or low, and one saturated run cannot
outweigh the rest): golden-section searches on ln(step_time) and ln(ttft_floor) in turn, `ROUNDS` times, within
`STEP_TIME_RANGE` and `TTFT_FLOOR_RANGE` (the floor first on a grid, `FLOOR_GRID_POINTS`); a floor the runs do not
pin (`FLOOR_MIN_EFFECT`) stays x1 and the fit says so (`Fit.unpinned`). The step-time factor scales every step's
kernels (ITL, prefill, hence throughput and queueing), the TTFT-floor factor the frontend's latency and serial work. A fit that stops at a bound
(`Fit.at_bound`) or leaves more than `MAX_RESIDUAL_AFTER_FIT` of error is reported here and refused by
`blueprint calibrate` (`blueprints.operate.calibrate`).

Pure: the same runs give the same factors (the workload is seeded).
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass
from functools import lru_cache

from blueprints.capacity.physics import Correction, replica_model
from blueprints.capacity.simulator import SchedulerConfig, SimulationResult, simulate
from blueprints.capacity.workload import Requests, arrival_times
from blueprints.catalog import Architecture, Gpu
from blueprints.core import defaults
from blueprints.requirements.model import Precision, Quantization

#: The figures each run is fitted on: (name, the client's field).
FIGURES = (("output_tokens_per_s", "output_throughput"), ("median_ttft_ms", "median_ttft_ms"),
           ("median_itl_ms", "median_itl_ms"))
#: A run is saturated (its throughput is the replica's) when it completed fewer requests/s than this share of its
#: rate.
SATURATED_SHARE = 0.9
#: The factors a fit may return: beyond these the model is wrong for this replica in more than scale (a correction
#: would hide it); the fit stops at the bound and says so (`Fit.at_bound`), and `blueprint calibrate` refuses it.
STEP_TIME_RANGE = (0.2, 5.0)
TTFT_FLOOR_RANGE = (0.2, 10.0)
#: The most error a fit may leave: the median over the fitted figures (every run's median TTFT and median ITL, and the
#: output tokens/s of a run the replica held back) of |predicted after the fit / measured - 1|
#: (`Fit.median_abs_error(after=True)`). Beyond it two factors do not explain the runs, and `blueprint calibrate`
#: refuses the fit, as it refuses one stopped at a bound of `STEP_TIME_RANGE` or `TTFT_FLOOR_RANGE`.
MAX_RESIDUAL_AFTER_FIT = 0.25
#: Alternating searches (step time, then TTFT floor) and golden-section steps per search: the bracket of ln(factor)
#: shrinks by 0.618 a step, 18 steps leave 1/5,700 of it (~0.06 % of the factor on STEP_TIME_RANGE).
ROUNDS = 2
GOLDEN_STEPS = 18
#: Points of ln(ttft_floor) over TTFT_FLOOR_RANGE tried at the first step-time fit before the alternating searches,
#: which then search the floor between the best point's neighbours: the loss in the floor is flat and not unimodal
#: where the frontend is a small part of the TTFT (the median TTFT of a finite run moves in steps), and a golden
#: section over the whole range settled on a far local minimum (x1.61 for x1.4 on noise-free runs of an L40S).
FLOOR_GRID_POINTS = 9
#: The runs pin the TTFT floor when x1.25 on it moves their median TTFTs (the median over runs) by at least this
#: share at the fitted step time [assumption: a quarter of the factor must show beyond the runs' noise]; otherwise
#: the floor stays x1 (`Fit.unpinned`): a factor the runs cannot see would be noise written down as a measurement.
FLOOR_MIN_EFFECT = 0.03
#: The replay's seed (common random numbers for every factor tried).
SEED = defaults.SIMULATION_SEED


@dataclass(frozen=True)
class ReplicaSetup:
    """The deployed replica the runs measured: model shape, GPU, weights, parallelism and the engine flags."""

    arch: Architecture
    gpu: Gpu
    precision: Precision
    quantization: Quantization | None
    tensor_parallel_size: int
    kv_cache_fp8: bool
    gpu_memory_utilization: float
    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int
    chat: bool = False


@dataclass(frozen=True)
class MeasuredRun:
    """One benchmark run: how it was driven and what the client measured.

    Attributes:
        label: where it comes from, e.g. `benchmarks/results/chat-assistant-prod/2026-12-03.json runs[2]`.
        request_rate: requests/s asked for (Poisson), or None for `inf` (every request at once).
        num_prompts: requests sent.
        input_len, output_len: the random dataset's mean lengths, tokens (the prompt's random part: a shared prefix
            sent before it is cached, not prefilled).
        range_ratio: lengths uniform in [len(1 - r), len(1 + r)].
        output_tokens_per_s, median_ttft_ms, median_itl_ms: the client's figures.
        saturated: the replica held the run back (its throughput is fitted).
    """

    label: str
    request_rate: float | None
    num_prompts: int
    input_len: int
    output_len: int
    range_ratio: float
    output_tokens_per_s: float
    median_ttft_ms: float
    median_itl_ms: float
    saturated: bool = True

    def figures(self) -> tuple[str, ...]:
        """The figures this run is fitted on (`FIGURES`; throughput only when saturated)."""
        return tuple(name for name, _ in FIGURES if self.saturated or name != "output_tokens_per_s")

    def measured(self, figure: str) -> float:
        return float(getattr(self, figure))


@dataclass(frozen=True)
class Residual:
    """One run's figure: measured, and predicted before (identity) and after the fit."""

    run: str
    figure: str
    measured: float
    before: float
    after: float

    @property
    def error_before(self) -> float:
        """Signed relative error of the uncorrected model (predicted / measured - 1)."""
        return self.before / self.measured - 1.0

    @property
    def error_after(self) -> float:
        return self.after / self.measured - 1.0


@dataclass(frozen=True)
class Fit:
    """The fitted factors, each figure before and after, which factors stopped at a bound of their range, and which
    the runs do not pin (kept at x1: `FLOOR_MIN_EFFECT`)."""

    correction: Correction
    residuals: tuple[Residual, ...]
    at_bound: tuple[str, ...]
    unpinned: tuple[str, ...] = ()

    def median_abs_error(self, *, after: bool) -> float:
        return statistics.median(abs(r.error_after if after else r.error_before) for r in self.residuals)

    def max_abs_error(self, *, after: bool) -> float:
        return max(abs(r.error_after if after else r.error_before) for r in self.residuals)


@lru_cache(maxsize=64)
def uniform_requests(input_len: int, output_len: int, range_ratio: float, *, count: int, max_model_len: int,
                     seed: int = SEED) -> Requests:
    """`count` (prompt, output) lengths integer-uniform in [floor(len(1 - r)), ceil(len(1 + r))] (at least 1 token),
    each request within `max_model_len`: vLLM's random dataset (datasets.py `RandomDataset`). Remembered by its
    arguments: a fit replays each run hundreds of times with the same seeded draws."""
    rng = random.Random(seed)

    def bounds(length: int) -> tuple[int, int]:
        return max(1, math.floor(length * (1 - range_ratio))), max(1, math.ceil(length * (1 + range_ratio)))

    (i_lo, i_hi), (o_lo, o_hi) = bounds(input_len), bounds(output_len)
    prompts, outputs = [], []
    for _ in range(count):
        p = min(rng.randint(i_lo, i_hi), max_model_len - 1)
        prompts.append(p)
        outputs.append(max(1, min(rng.randint(o_lo, o_hi), max_model_len - p)))
    return Requests(tuple(prompts), tuple(outputs))


def replay(setup: ReplicaSetup, run: MeasuredRun, correction: Correction = Correction()) -> SimulationResult:
    """The simulated run of `run`'s benchmark on the replica model with `correction`."""
    model = replica_model(setup.arch, setup.gpu, precision=setup.precision, quantization=setup.quantization,
                          tensor_parallel_size=setup.tensor_parallel_size, kv_cache_fp8=setup.kv_cache_fp8,
                          gpu_memory_utilization=setup.gpu_memory_utilization, correction=correction,
                          chat=setup.chat)
    config = SchedulerConfig(max_num_seqs=setup.max_num_seqs, max_num_batched_tokens=setup.max_num_batched_tokens,
                             kv_cache_blocks=model.kv_cache_tokens // defaults.KV_BLOCK_TOKENS)
    shapes = uniform_requests(run.input_len, run.output_len, run.range_ratio, count=run.num_prompts,
                              max_model_len=setup.max_model_len)
    arrivals = ([0.0] * run.num_prompts if run.request_rate is None
                else arrival_times("steady", run.request_rate, run.num_prompts, seed=SEED))
    return simulate(model, config, shapes, arrivals=arrivals, warmup=0)


def predicted(result: SimulationResult, figure: str) -> float:
    """The replayed run's figure, defined as the client defines it (output tokens over the run's wall time)."""
    if figure == "output_tokens_per_s":
        return result.output_tokens / result.duration_s if result.duration_s > 0 else 0.0
    return result.ttft_ms.p50 if figure == "median_ttft_ms" else result.itl_ms.p50


def _figures(setup: ReplicaSetup, runs: tuple[MeasuredRun, ...], correction: Correction) -> list[tuple[str, str, float, float]]:
    """(run, figure, measured, predicted) for every run and figure."""
    out = []
    for run in runs:
        result = replay(setup, run, correction)
        out += [(run.label, name, run.measured(name), predicted(result, name)) for name in run.figures()]
    return out


def _loss(rows: list[tuple[str, str, float, float]]) -> float:
    return sum(abs(math.log(max(pred, 1e-12) / meas)) for _, _, meas, pred in rows)


def _grid_then_golden(f, lo: float, hi: float) -> float:
    """The minimiser of a rough `f` on [lo, hi]: the best of `FLOOR_GRID_POINTS` points, then a golden section
    between its neighbours."""
    grid = [lo + i * (hi - lo) / (FLOOR_GRID_POINTS - 1) for i in range(FLOOR_GRID_POINTS)]
    i = min(range(FLOOR_GRID_POINTS), key=lambda k: (f(grid[k]), abs(grid[k])))
    return _golden(f, grid[max(0, i - 1)], grid[min(FLOOR_GRID_POINTS - 1, i + 1)])


def _golden(f, lo: float, hi: float) -> float:
    """The minimiser of a unimodal `f` on [lo, hi] (golden-section search, `GOLDEN_STEPS` steps)."""
    g = (math.sqrt(5) - 1) / 2
    a, b = lo, hi
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(GOLDEN_STEPS):
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = f(d)
    return (a + b) / 2


def fit(setup: ReplicaSetup, runs: tuple[MeasuredRun, ...]) -> Fit:
    """The step-time and TTFT-floor factors that bring the replayed runs closest to the measured ones.

    Args:
        setup: the replica the runs measured.
        runs: at least one run, each with positive measured figures.

    Returns:
        The `Fit`: factors rounded to 3 decimals, every figure before (identity) and after. Remembered per process by
        the content of its inputs and `FLOOR_MIN_EFFECT` (a fit is pure and takes hundreds of replays).
    """
    return _fit(setup, runs, FLOOR_MIN_EFFECT)


@lru_cache(maxsize=16)
def _fit(setup: ReplicaSetup, runs: tuple[MeasuredRun, ...], floor_min_effect: float) -> Fit:
    """`fit` with the threshold it reads as an argument (part of what it is remembered by)."""
    cache: dict[tuple[float, float], float] = {}

    def loss(step: float, floor: float) -> float:
        key = (round(step, 6), round(floor, 6))
        if key not in cache:
            cache[key] = _loss(_figures(setup, runs, Correction(math.exp(key[0]), math.exp(key[1]))))
        return cache[key]

    (s_lo, s_hi), (f_lo, f_hi) = (tuple(math.log(v) for v in r) for r in (STEP_TIME_RANGE, TTFT_FLOOR_RANGE))
    step = _golden(lambda s: loss(s, 0.0), s_lo, s_hi)
    if _floor_effect(setup, runs, math.exp(step)) < floor_min_effect:
        floor, unpinned = 0.0, ("ttft_floor",)
    else:
        unpinned = ()
        grid = [f_lo + i * (f_hi - f_lo) / (FLOOR_GRID_POINTS - 1) for i in range(FLOOR_GRID_POINTS)]
        i = min(range(FLOOR_GRID_POINTS), key=lambda k: (loss(step, grid[k]), abs(grid[k])))
        lo, hi = grid[max(0, i - 1)], grid[min(FLOOR_GRID_POINTS - 1, i + 1)]
        floor = grid[i]
        for _ in range(ROUNDS):
            step = _golden(lambda s: loss(s, floor), s_lo, s_hi)
            floor = _grid_then_golden(lambda f: loss(step, f), lo, hi)
    correction = Correction(round(math.exp(step), 3), round(math.exp(floor), 3))
    before = _figures(setup, runs, Correction())
    after = _figures(setup, runs, correction)
    residuals = tuple(Residual(run, name, meas, b, a) for (run, name, meas, b), (_, _, _, a) in zip(before, after))
    at_bound = tuple(name for name, value, (lo, hi) in (("step_time", correction.step_time, STEP_TIME_RANGE),
                                                          ("ttft_floor", correction.ttft_floor, TTFT_FLOOR_RANGE))
                     if value <= lo * 1.01 or value >= hi / 1.01)
    return Fit(correction, residuals, at_bound, unpinned)


def _floor_effect(setup: ReplicaSetup, runs: tuple[MeasuredRun, ...], step_time: float) -> float:
    """The median over runs of how much x1.25 on the TTFT floor moves a run's median TTFT (relative), at
    `step_time`."""
    base, raised = (_figures(setup, runs, Correction(step_time, floor)) for floor in (1.0, 1.25))
    return statistics.median(abs(r[3] / b[3] - 1) for b, r in zip(base, raised) if b[1] == "median_ttft_ms")
