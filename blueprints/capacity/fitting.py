"""The capacity model's fitted constants, fitted to the published points, and the error measured on points no fit saw.

Every fitted constant (`CONSTANTS`) is named, bounded, physical and sourced. Its value lives where the model reads it
(`blueprints.core.defaults`, or a GPU's record in `catalog/gpus.yaml`); its `prior` is the value the model takes with
no published point to fit it to (a datasheet figure, a physical default, or no effect at all); `applies` says which
points it moves, and it is fitted on those of them not listed as known off.

`fit` starts every constant at its prior and runs a golden-section search on each in turn (`CONSTANTS` order, log
space within the bounds, or linear space where the lower bound is 0), `ROUNDS` times over, minimising the summed
|ln(predicted / published)| of its points (an L1 loss in log space: a point off by 2x weighs the same high or low, and
one outlier cannot outweigh the rest); each result is rounded to 3 significant digits. The committed values are
`fit` over every point (`tests/test_sizing_calibration.py` holds them to it).

`cross_validate` leaves one source group out at a time (a blog post, one repository's benchmark file, one issue thread:
`CalibrationPoint.source_group`), fits every constant on the other groups, and predicts the group's points with those
values: the figures it gives (`Comparison.error` of every point, known-off ones included) are the error of the model
on measurements it was not fitted to. A constant whose only points are in the held-out group stays at its prior, so
a source that alone pins a constant shows what the model gets wrong without it.

Pure but for one thing: while a fit or a prediction runs, `applied` writes the constants' trial values into
`defaults` (and a copy of the catalog), and puts the committed ones back when it ends. Not thread-safe; fits run in
one thread (benchmarks/sizing.py, the test), never inside a plan.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from contextlib import contextmanager
from importlib import resources
from dataclasses import dataclass
from typing import Callable, Iterator

import yaml

from blueprints.capacity.calibration import CalibrationPoint, Comparison, figure, run_key, simulate_point
from blueprints.capacity.physics import engine_profile, replica_model
from blueprints.capacity.roofline import kernel_family
from blueprints.catalog import Catalog
from blueprints.core import defaults

#: Coordinate-descent passes over `CONSTANTS`.
ROUNDS = 2
#: Golden-section steps per search: the bracket shrinks to 0.618^14 = 0.12 % of its width.
GOLDEN_STEPS = 14
#: Loss of a point whose prediction is not finite and positive (a run that never finished): |ln| of a 20x miss.
MISS_LOSS = math.log(20.0)


@dataclass(frozen=True)
class PointFacts:
    """What decides which constants move a point: the point, the step source that times its replica (`measured` or
    `roofline`), its weights' kernel family (`roofline.kernel_family`) and whether its GPUs talk over NVLink."""

    point: CalibrationPoint
    step_source: str
    family: str
    nvlink: bool

    @property
    def profile(self) -> str:
        return self.point.engine_profile

    @property
    def gpu(self) -> str:
        return self.point.args.gpu


def point_facts(points: tuple[CalibrationPoint, ...], catalog: Catalog) -> tuple[PointFacts, ...]:
    """The facts of every point (its replica's step source is the one `physics.replica_model` picks for its engine
    profile's tables)."""
    out = []
    for p in points:
        a = p.args
        gpu = catalog.gpu(a.gpu)
        model = replica_model(p.architecture or catalog.model(a.model).architecture, gpu, precision=a.precision,
                              quantization=a.quantization, tensor_parallel_size=a.tensor_parallel,
                              kv_cache_fp8=a.kv_cache_dtype == "fp8", engine=engine_profile(p.engine_profile))
        out.append(PointFacts(p, model.source.kind, kernel_family(a.precision, a.quantization),
                              gpu.interconnect.value == "nvlink"))
    return tuple(out)


@dataclass(frozen=True)
class FittedConstant:
    """One fitted constant.

    Attributes:
        name: where it lives, e.g. `ENGINE_PROFILES['vllm-0.24'].step_overhead_ms` or `gpus['a10g'].prefill_mfu`.
        unit: its unit (`ms`, `us`, `fraction`, `factor`).
        bounds: the physical range a fit may return (inclusive).
        prior: its value with no point to fit it to.
        meaning: what it stands for, physically.
        source: where the prior and the bounds come from.
        applies: the points it moves (it is fitted on those not listed as known off).
        path: (`defaults` attribute, key...) or ("gpus", field, GPU name...): GPUs of one silicon share a value.
    """

    name: str
    unit: str
    bounds: tuple[float, float]
    prior: float
    meaning: str
    source: str
    applies: Callable[[PointFacts], bool]
    path: tuple[str, ...]

    def get(self, catalog: Catalog) -> float:
        """The committed value."""
        if self.path[0] == "gpus":
            value = getattr(catalog.gpus[self.path[2]], self.path[1])
            return self.prior if value is None else value
        node = getattr(defaults, self.path[0])
        for key in self.path[1:]:
            node = node[key]
        return float(node)

    def _set(self, catalog: Catalog, value: float) -> Catalog:
        if self.path[0] == "gpus":
            gpus = dict(catalog.gpus)
            for name in self.path[2:]:
                gpus[name] = gpus[name].model_copy(update={self.path[1]: value})
            return catalog.model_copy(update={"gpus": gpus})
        if len(self.path) == 1:
            setattr(defaults, self.path[0], value)
            return catalog
        node = getattr(defaults, self.path[0])
        for key in self.path[1:-1]:
            node = node[key]
        node[self.path[-1]] = value
        return catalog


def _profile(profile: str, key: str, unit: str, bounds: tuple[float, float], prior: float, meaning: str,
             source: str) -> FittedConstant:
    return FittedConstant(f"ENGINE_PROFILES['{profile}'].{key}", unit, bounds, prior, meaning, source,
                          lambda f: f.profile == profile, ("ENGINE_PROFILES", profile, key))


def _roofline(f: PointFacts) -> bool:
    return f.step_source == "roofline"


#: The fitted constants, in the order `fit` searches them: the engine profiles (each on its own engine's points),
#: then the roofline's (on the points it times).
CONSTANTS: tuple[FittedConstant, ...] = (
    _profile("vllm-0.24", "step_overhead_ms", "ms", (0.0, 5.0), 0.0,
             "time every step of the V1 engine adds to its kernels: launches CUDA graphs do not hide, input "
             "preparation, sampling", "no overhead without a measured point"),
    _profile("vllm-0.24", "step_us_per_sequence", "us", (0.0, 300.0), 0.0,
             "host time per scheduled sequence per step in series with the GPU (the engine core's scheduler and "
             "output handling between steps)", "no host term without a point"),
    _profile("vllm-0.24", "frontend_latency_ms", "ms", (0.0, 100.0), 2.0,
             "latency before the scheduler sees a request (HTTP, the API server, the engine's IPC)",
             "[assumption] a few ms of HTTP and IPC"),
    FittedConstant("ENGINE_PROFILES['vllm-0.24'].frontend_chat_serial_ms", "ms", (0.0, 100.0), 0.0,
                   "what the chat endpoint adds to the API server's serial work per request: rendering the chat "
                   "template", "no chat cost without a point",
                   lambda f: f.profile == "vllm-0.24" and f.point.args.endpoint == "chat",
                   ("ENGINE_PROFILES", "vllm-0.24", "frontend_chat_serial_ms")),
    _profile("vllm-0.24", "frontend_serial_ms", "ms", (0.0, 10.0), 0.5,
             "the API server's serial work per request (parsing, chat template, tokenisation set-up): requests "
             "sent together reach the scheduler one after another", "[assumption] half a millisecond; at most 10 ms: "
             "it is part of every TTFT at one client, which published points put at 27-60 ms with the prefill "
             "(k8s-llm-inference-platform L4, GPUStack H100, quantized-llm-serving L40S)"),
    _profile("vllm-0.6.0", "prefill_kernel_factor", "factor", (0.8, 2.5), 1.0,
             "vLLM 0.6.0's prefill kernels relative to the measured 0.14/0.24 ones", "the measured kernels"),
    _profile("vllm-0.6.0", "host_us_per_sequence", "us", (0.0, 400.0), 0.0,
             "vLLM 0.6.0's output processing per running sequence per step (overlapped)", "no host term"),
    _profile("vllm-0.6.3-offline", "step_overhead_ms", "ms", (0.0, 6.0), 0.0,
             "vLLM 0.6.3's offline step overhead (sampling over the vocabulary)", "no overhead"),
    _profile("vllm-0.4.3", "step_overhead_ms", "ms", (0.0, 10.0), 0.0,
             "vLLM 0.4.3's step overhead (V0, no CUDA-graph capture of sampling)", "no overhead"),
    FittedConstant("MBU_SINGLE_GPU_16BIT", "fraction", (0.4, 0.95), 0.75,
                   "memory-bandwidth utilisation of a decode step streaming 16-bit weights",
                   "sizing-facts.md: 0.7-0.77 in public runs", _roofline, ("MBU_SINGLE_GPU_16BIT",)),
    FittedConstant("MFU", "fraction", (0.2, 0.9), 0.5,
                   "prefill FLOPs utilisation of the dense tensor TFLOPS (GPUs without a prefill_mfu of their own)",
                   "sizing-facts.md: 0.3-0.7 in public runs",
                   lambda f: _roofline(f) and f.gpu not in ("a10g", "a100-40gb", "a100-80gb"), ("MFU",)),
    FittedConstant("gpus['a100'].prefill_mfu", "fraction", (0.2, 0.95), 0.5,
                   "A100 prefill FLOPs utilisation (one value for the 40 and 80 GB parts: the same silicon)",
                   "defaults.MFU's prior",
                   lambda f: _roofline(f) and f.gpu in ("a100-40gb", "a100-80gb"),
                   ("gpus", "prefill_mfu", "a100-40gb", "a100-80gb")),
    FittedConstant("gpus['a10g'].prefill_mfu", "fraction", (0.2, 1.0), 0.5,
                   "A10G prefill FLOPs utilisation against its listed ~70 dense TFLOPS", "defaults.MFU's prior",
                   lambda f: _roofline(f) and f.gpu == "a10g", ("gpus", "prefill_mfu", "a10g")),
    FittedConstant("ALLREDUCE_HOP_US['nvlink']", "us", (1.0, 40.0), 10.0,
                   "latency of one all-reduce step over NVLink", "[assumption] NCCL's ~10 us per hop",
                   lambda f: _roofline(f) and f.nvlink and f.point.args.tensor_parallel > 1,
                   ("ALLREDUCE_HOP_US", "nvlink")),
    FittedConstant("WEIGHT_BANDWIDTH_FACTOR['fp8']", "factor", (0.4, 1.3), 1.0,
                   "FP8 weight kernels' decode bandwidth relative to 16-bit ones", "the 16-bit kernels",
                   lambda f: _roofline(f) and f.family == "fp8", ("WEIGHT_BANDWIDTH_FACTOR", "fp8")),
    FittedConstant("WEIGHT_BANDWIDTH_FACTOR['awq']", "factor", (0.2, 1.3), 1.0,
                   "AWQ 4-bit kernels' decode bandwidth relative to 16-bit ones (dequantising on the fly)",
                   "the 16-bit kernels", lambda f: _roofline(f) and f.family == "awq",
                   ("WEIGHT_BANDWIDTH_FACTOR", "awq")),
    FittedConstant("WEIGHT_BANDWIDTH_FACTOR['gptq-int4']", "factor", (0.2, 1.3), 1.0,
                   "GPTQ 4-bit kernels' decode bandwidth relative to 16-bit ones", "the 16-bit kernels",
                   lambda f: _roofline(f) and f.family == "gptq-int4", ("WEIGHT_BANDWIDTH_FACTOR", "gptq-int4")),
    FittedConstant("WEIGHT_BANDWIDTH_FACTOR['gptq-int8']", "factor", (0.2, 1.3), 1.0,
                   "GPTQ 8-bit kernels' decode bandwidth relative to 16-bit ones", "the 16-bit kernels",
                   lambda f: _roofline(f) and f.family == "gptq-int8", ("WEIGHT_BANDWIDTH_FACTOR", "gptq-int8")),
    FittedConstant("QUANTIZED_PREFILL_FACTOR['awq']", "factor", (0.2, 1.3), 1.0,
                   "AWQ kernels' prefill compute efficiency relative to 16-bit GEMMs", "the 16-bit GEMMs",
                   lambda f: _roofline(f) and f.family == "awq", ("QUANTIZED_PREFILL_FACTOR", "awq")),
)


def _chat(profile: str, source: str) -> FittedConstant:
    return FittedConstant(f"ENGINE_PROFILES['{profile}'].frontend_chat_serial_ms", "ms", (0.0, 100.0), 31.7,
                          "what the chat endpoint adds to the API server's serial work per request (rendering the "
                          "chat template, its tokeniser hand-off)", source,
                          lambda f: f.profile == profile and f.point.args.endpoint == "chat",
                          ("ENGINE_PROFILES", profile, "frontend_chat_serial_ms"))


#: Each other engine's constants, fitted on that engine's own points alone with vLLM's constants fixed
#: (`engine_fits`), on `ENGINE_GRID`. Only the chat endpoint's serial cost: vLLM's 31.7 ms caps a replica at ~31
#: chat requests/s, where GPUStack's SGLang Qwen3-14B burst of 128-token chats reached 128/s; the host constants of
#: the step, fitted the same way, did not lower either engine's held-out error (SGLang 25.7 to 28.9 %, TensorRT-LLM
#: 24.1 to 24.7 %) and stay vLLM's.
ENGINE_CONSTANTS: tuple[FittedConstant, ...] = (
    _chat("sglang-0.5", "vllm-0.24's fitted value (SGLang's tokenizer manager renders the template in its own process)"),
    _chat("trtllm-1.x", "vllm-0.24's fitted value (trtllm-serve's OpenAI server renders it)"),
)
#: The values each engine constant is searched on (every combination): none, doublings from 2 ms, and the prior.
ENGINE_GRID: dict[str, tuple[float, ...]] = {c.name: (0.0, 2.0, 5.0, 10.0, 20.0, 31.7) for c in ENGINE_CONSTANTS}


def committed(catalog: Catalog, constants: tuple[FittedConstant, ...] = CONSTANTS) -> dict[str, float]:
    """Every constant's committed value (`CONSTANTS`, or `ENGINE_CONSTANTS`)."""
    return {c.name: c.get(catalog) for c in constants}


@contextmanager
def applied(values: dict[str, float], catalog: Catalog) -> Iterator[Catalog]:
    """Write `values` (constant name -> value, of `CONSTANTS` or `ENGINE_CONSTANTS`) where the model reads them;
    yield the catalog to predict with; put the committed values back at the end."""
    every = CONSTANTS + ENGINE_CONSTANTS
    saved = committed(catalog, every)
    changed = catalog
    try:
        for c in every:
            if c.name in values:
                changed = c._set(changed, values[c.name])
        yield changed
    finally:
        for c in every:
            if c.path[0] != "gpus":
                c._set(catalog, saved[c.name])


def _round3(value: float) -> float:
    return float(f"{value:.3g}") if value else 0.0


def predictions(facts: tuple[PointFacts, ...], catalog: Catalog, values: dict[str, float]) -> list[float]:
    """The model's figure for each point with the constants at `values` (each benchmark run simulated once)."""
    with applied(values, catalog) as cat:
        runs: dict[tuple, object] = {}
        out = []
        for f in facts:
            key = run_key(f.point)
            if key not in runs:
                runs[key] = simulate_point(f.point, cat)
            out.append(figure(f.point, runs[key]))  # type: ignore[arg-type]
    return out


def _loss(facts: tuple[PointFacts, ...], catalog: Catalog, values: dict[str, float]) -> float:
    total = 0.0
    for f, pred in zip(facts, predictions(facts, catalog, values)):
        total += abs(math.log(pred / f.point.value)) if pred > 0 and math.isfinite(pred) else MISS_LOSS
    return total


def _golden(loss: Callable[[float], float], lo: float, hi: float, *, log: bool, steps: int = GOLDEN_STEPS) -> float:
    """The minimiser of `loss` on [lo, hi] by golden-section search (in log space when `log`)."""
    to, back = (math.log, math.exp) if log else ((lambda x: x), (lambda x: x))
    g = (math.sqrt(5) - 1) / 2
    a, b = to(lo), to(hi)
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = loss(back(c)), loss(back(d))
    for _ in range(steps):
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = loss(back(c))
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = loss(back(d))
    return back((a + b) / 2)


#: A warm-started search's first bracket: [start / 1.3, start x 1.3] (log space; +-0.3 around the start where the
#: range starts at 0, in units of the upper bound x 0.05), widened by the same factor while the minimum is at an edge.
WARM_BRACKET = 1.3
WARM_STEPS = 9


def _search(loss: Callable[[float], float], c: FittedConstant, start: float | None) -> float:
    """The minimiser of `loss` within `c.bounds`: over the whole range, or from `start` outwards."""
    lo, hi = c.bounds
    log = lo > 0
    if start is None:
        return _golden(loss, lo, hi, log=log)
    width = 1
    while True:
        if log:
            a, b = max(lo, start / WARM_BRACKET ** width), min(hi, start * WARM_BRACKET ** width)
        else:
            step = 0.05 * hi * width
            a, b = max(lo, start - step), min(hi, start + step)
        found = _golden(loss, a, b, log=log, steps=WARM_STEPS)
        edge = (b - a) * 0.02
        if (found - a > edge or a <= lo) and (b - found > edge or b >= hi):
            return found
        width *= 2


class Fitter:
    """Fits the constants to subsets of one set of points, remembering each search by what decides it (the constant,
    the points it is fitted on, and the values of the constants that move the same points), so the folds of a
    cross-validation search again only where the held-out group changes something."""

    def __init__(self, points: tuple[CalibrationPoint, ...], catalog: Catalog) -> None:
        self.catalog = catalog
        self.facts = point_facts(points, catalog)
        self.moved = {c.name: tuple(f for f in self.facts if c.applies(f)) for c in CONSTANTS}
        ids = {name: {f.point.id for f in fs} for name, fs in self.moved.items()}
        #: The constants moving a point that constant c is fitted on: its search depends on their values.
        self.coupled = {c.name: tuple(o.name for o in CONSTANTS if o.name != c.name and ids[c.name] & ids[o.name])
                        for c in CONSTANTS}
        self._memo: dict[tuple, float] = {}
        self.searches = 0

    def fit(self, *, leave_out: str | None = None, start: dict[str, float] | None = None) -> dict[str, float]:
        """Every constant fitted on the points not listed as known off (and not of source group `leave_out`).

        From the priors: `ROUNDS` passes of golden-section searches over each constant's whole range. From `start`
        (a fold warm-started at the fit on every point): one pass, each search within `WARM_BRACKET` of its start
        value, widened while the minimum falls on the bracket's edge; the values found minimise the fold's own
        points' loss, the start only saves searches. A constant with no point to fit it to keeps its prior."""
        values = {c.name: c.prior for c in CONSTANTS} if start is None else dict(start)
        for _ in range(ROUNDS if start is None else 1):
            for c in CONSTANTS:
                train = tuple(f for f in self.moved[c.name]
                              if not f.point.known_off and f.point.source_group != leave_out)
                if not train:
                    values[c.name] = c.prior
                    continue
                key = (c.name, tuple(f.point.id for f in train), tuple(values[o] for o in self.coupled[c.name]),
                       None if start is None else values[c.name])
                if key not in self._memo:
                    self.searches += 1

                    def loss(v: float, c: FittedConstant = c, train: tuple = train) -> float:
                        return _loss(train, self.catalog, {**values, c.name: v})

                    self._memo[key] = _round3(_search(loss, c, None if start is None else values[c.name]))
                values[c.name] = self._memo[key]
        return values


@dataclass(frozen=True)
class Fold:
    """One cross-validation fold: the held-out source group, the values fitted without it, its points' figures."""

    group: str
    values: dict[str, float]
    comparisons: tuple[Comparison, ...]


def _fold(args: tuple) -> Fold:
    fitter, group, start = args
    held = tuple(f for f in fitter.facts if f.point.source_group == group)
    values = fitter.fit(leave_out=group, start=start)
    preds = predictions(held, fitter.catalog, values)
    return Fold(group, values, tuple(Comparison(f.point, p) for f, p in zip(held, preds)))


def cross_validate(points: tuple[CalibrationPoint, ...], catalog: Catalog, *, full: dict[str, float],
                   workers: int = 1) -> list[Fold]:
    """Leave-one-source-group-out: for each group, fit on the others (warm-started at `full`, the fit on every
    point) and predict its points; folds run in `workers` processes."""
    fitter = Fitter(points, catalog)
    jobs = [(fitter, g, full) for g in sorted({p.source_group for p in points})]
    if workers <= 1:
        return [_fold(j) for j in jobs]
    import multiprocessing
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        return pool.map(_fold, jobs, chunksize=1)


def held_out_comparisons(folds: list[Fold]) -> list[Comparison]:
    """Every point's held-out figure, in the points' order within their groups."""
    return [c for fold in folds for c in fold.comparisons]


# --- the committed fit -------------------------------------------------------------------------------------------

#: The committed fit (`benchmarks/sizing.py --cross-validate --write`): the values on every point, each fold's values
#: and its held-out predictions, and the digest of what they were fitted from.
FIT_FILE = "capacity-fit.yaml"


#: A point's prose: what its reader needs, not what a fit reads (`known_off` counts by its presence).
_PROSE = {"source", "engine", "note", "ambiguous", "known_off", "architecture_source"}


def fitted_points(points: tuple[CalibrationPoint, ...]) -> tuple[CalibrationPoint, ...]:
    """The points the constants are fitted on and cross-validated against: vLLM's (every vLLM release's profile).
    SGLang's and TensorRT-LLM's points are predicted with the constants fitted on vLLM's alone, their own step
    tables and scheduling profiles: held out by construction (`engine_held_out`)."""
    return tuple(p for p in points if defaults.ENGINE_PROFILES[p.engine_profile]["tables"] == "vllm")


def engine_held_out(points: tuple[CalibrationPoint, ...], catalog: Catalog,
                    record: tuple[EngineFit, ...] | None = None) -> dict[str, list[Comparison]]:
    """Each other engine's points (`engines.yaml` name -> comparisons), predicted out of sample: with vLLM's
    committed constants, which no point of theirs moved, and the engine's `ENGINE_CONSTANTS` at the values its fit
    without the point's source group gave (`record`: default the committed one; each fold re-predicted here)."""
    others = tuple(p for p in points if p not in fitted_points(points))
    folds = {(f.profile, group): values for f in (load_engine_fits() if record is None else record)
             for group, values, _ in f.folds}
    found: dict[str, list[Comparison]] = {}
    for key in dict.fromkeys((p.engine_profile, p.source_group) for p in others):
        facts = point_facts(tuple(p for p in others if (p.engine_profile, p.source_group) == key), catalog)
        for f, value in zip(facts, predictions(facts, catalog, folds.get(key, {}))):
            found.setdefault(str(defaults.ENGINE_PROFILES[f.profile]["tables"]), []).append(Comparison(f.point, value))
    return found


@dataclass(frozen=True)
class EngineFit:
    """One engine profile's `ENGINE_CONSTANTS`, fitted and cross-validated on its own points.

    Attributes:
        profile: the `defaults.ENGINE_PROFILES` key.
        digest: `engine_fit_digest` of its points, constants and grid.
        full: the values on every point (the committed ones).
        folds: per source group, the values fitted without it and its points' predictions with them (point id ->
            figure).
    """

    profile: str
    digest: str
    full: dict[str, float]
    folds: tuple[tuple[str, dict[str, float], dict[str, float]], ...]


def _engine_points(points: tuple[CalibrationPoint, ...], profile: str) -> tuple[CalibrationPoint, ...]:
    return tuple(p for p in points if p.engine_profile == profile)


def engine_fit_digest(points: tuple[CalibrationPoint, ...], profile: str) -> str:
    """SHA-256 of what `profile`'s engine fit depends on besides the code: its points' figures and settings (not
    their prose), its constants (name, bounds, prior) and their grid."""
    payload = {"points": [{**p.model_dump(mode="json", exclude=_PROSE), "known_off": p.known_off is not None}
                          for p in _engine_points(points, profile)],
               "constants": [(c.name, c.bounds, c.prior, ENGINE_GRID[c.name]) for c in ENGINE_CONSTANTS
                             if c.path[1] == profile]}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def engine_fits(points: tuple[CalibrationPoint, ...], catalog: Catalog) -> tuple[EngineFit, ...]:
    """Fit each profile's `ENGINE_CONSTANTS` on its own points (vLLM's constants as committed): every combination
    of `ENGINE_GRID` is simulated once per point, and the values are the combination with the least summed
    |ln(predicted / published)| over the points not listed as known off (the first on a tie, in grid order): over all
    of them (`full`), and over all but one source group's for each group in turn (that fold's values predict the
    group's points). A minute for both engines."""
    fits = []
    for profile in dict.fromkeys(c.path[1] for c in ENGINE_CONSTANTS):
        constants = [c for c in ENGINE_CONSTANTS if c.path[1] == profile]
        facts = point_facts(_engine_points(points, profile), catalog)
        combos = [dict(zip((c.name for c in constants), v))
                  for v in itertools.product(*(ENGINE_GRID[c.name] for c in constants))]
        runs = [predictions(facts, catalog, values) for values in combos]
        losses = [[abs(math.log(v / f.point.value)) if v > 0 and math.isfinite(v) else MISS_LOSS
                   for f, v in zip(facts, preds)] for preds in runs]

        def best(leave_out: str | None) -> int:
            return min(range(len(combos)), key=lambda j: sum(
                loss for f, loss in zip(facts, losses[j])
                if not f.point.known_off and f.point.source_group != leave_out))

        folds = []
        for group in sorted({f.point.source_group for f in facts}):
            j = best(group)
            folds.append((group, combos[j], {f.point.id: v for f, v in zip(facts, runs[j])
                                             if f.point.source_group == group}))
        fits.append(EngineFit(profile, engine_fit_digest(points, profile), combos[best(None)], tuple(folds)))
    return tuple(fits)


#: The committed engine fits (`benchmarks/sizing.py --cross-validate --write`), beside FIT_FILE.
ENGINE_FIT_FILE = "engine-fit.yaml"


def dump_engine_fits(fits: tuple[EngineFit, ...]) -> str:
    """The fits as the YAML committed in `blueprints/catalog/engine-fit.yaml`."""
    body = {"schema_version": 1, "engines": [
        {"profile": f.profile, "digest": f.digest, "full": dict(f.full),
         "folds": [{"group": g, "values": dict(values), "held_out": held} for g, values, held in f.folds]}
        for f in fits]}
    head = ("# Generated by `benchmarks/sizing.py --cross-validate --write` (blueprints/capacity/fitting.py engine_fits):\n"
            "# each other engine's ENGINE_CONSTANTS fitted on its own published points (`full`, the values in\n"
            "# blueprints/core/defaults.py ENGINE_PROFILES) and, per source group left out, the values fitted without it\n"
            "# and its points' predictions with them. tests/test_sizing_calibration.py re-predicts every held-out point.\n")
    return head + yaml.safe_dump(body, sort_keys=False, width=118)


def load_engine_fits() -> tuple[EngineFit, ...]:
    """The committed engine fits (`ENGINE_FIT_FILE` in the catalog package)."""
    text = resources.files("blueprints.catalog").joinpath(ENGINE_FIT_FILE).read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    return tuple(EngineFit(e["profile"], e["digest"], {k: float(v) for k, v in e["full"].items()},
                           tuple((f["group"], {k: float(v) for k, v in f["values"].items()},
                                  {k: float(v) for k, v in f["held_out"].items()}) for f in e["folds"]))
                 for e in data["engines"])


def fit_digest(points: tuple[CalibrationPoint, ...]) -> str:
    """SHA-256 of what a fit depends on besides the model's code: every point's figure and setting (not its prose:
    whether it is known off, not why), and every constant's name, bounds, prior and the search settings. A held-out
    prediction that the code no longer reproduces is caught by re-predicting it (`tests/test_sizing_calibration.py`),
    not by this digest."""
    payload = {"points": [{**p.model_dump(mode="json", exclude=_PROSE), "known_off": p.known_off is not None}
                          for p in fitted_points(points)],
               "constants": [(c.name, c.bounds, c.prior) for c in CONSTANTS],
               "search": (ROUNDS, GOLDEN_STEPS, WARM_BRACKET, WARM_STEPS)}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class FitRecord:
    """A fit and its cross-validation, as committed.

    Attributes:
        digest: `fit_digest` of the points and constants it was fitted from.
        full: every constant fitted on every point (the committed values).
        folds: per source group, the values fitted without it and its points' predictions with them (point id ->
            the point's figure).
    """

    digest: str
    full: dict[str, float]
    folds: tuple[tuple[str, dict[str, float], dict[str, float]], ...]

    def held_out(self, points: tuple[CalibrationPoint, ...]) -> list[Comparison]:
        """Every point's held-out comparison, as recorded."""
        predicted = {pid: v for _, _, held in self.folds for pid, v in held.items()}
        return [Comparison(p, predicted[p.id]) for p in fitted_points(points)]


def fit_record(points: tuple[CalibrationPoint, ...], catalog: Catalog, *, workers: int = 1) -> FitRecord:
    """Fit on every point (`fitted_points`) from the priors, then cross-validate warm-started at that fit."""
    points = fitted_points(points)
    full = Fitter(points, catalog).fit()
    folds = cross_validate(points, catalog, full=full, workers=workers)
    return FitRecord(fit_digest(points), full,
                     tuple((f.group, f.values, {c.point.id: c.predicted for c in f.comparisons}) for f in folds))


def dump_fit_record(record: FitRecord) -> str:
    """The record as the YAML committed in `blueprints/catalog/capacity-fit.yaml`."""
    body = {"schema_version": 1, "digest": record.digest, "full": record.full,
            "folds": [{"group": g, "values": {k: v for k, v in values.items() if v != record.full[k]},
                       "held_out": held} for g, values, held in record.folds]}
    head = ("# Generated by `benchmarks/sizing.py --cross-validate --write` (blueprints/capacity/fitting.py): the fitted\n"
            "# constants on every published point (`full`, the values in blueprints/core/defaults.py and gpus.yaml) and,\n"
            "# per source group left out, the values fitted without it (those that differ from `full`) and its\n"
            "# points' predictions with them. tests/test_sizing_calibration.py re-predicts every held-out point.\n")
    return head + yaml.safe_dump(body, sort_keys=False, width=118)


def load_fit_record() -> FitRecord:
    """The committed record (`FIT_FILE` in the catalog package)."""
    text = resources.files("blueprints.catalog").joinpath(FIT_FILE).read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    full = {k: float(v) for k, v in data["full"].items()}
    folds = tuple((f["group"], {**full, **{k: float(v) for k, v in f["values"].items()}},
                   {k: float(v) for k, v in f["held_out"].items()}) for f in data["folds"])
    return FitRecord(data["digest"], full, folds)
