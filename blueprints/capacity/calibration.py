"""Published measurements against the capacity model: load the points, predict each the way it was measured, and the
error per regime.

The points live in `blueprints/catalog/calibration-points*.yaml` (each with its source, the engine it ran on, its regime
and how the figure is defined; see that file's header). A prediction runs the simulation on the point's engine profile
the way the benchmark ran: a closed loop at the point's concurrency (steady state), Poisson arrivals at its rate for
its number of prompts, or every prompt at once (a burst), and converts the run to the published definition:
- `offline-speed` (Qwen2.5 speed benchmark): output tokens / wall time of the generate() call;
- `llmperf`: ITL = request latency / counted output tokens, throughput = counted tokens/s, prompts and outputs
  counted with the Llama-2 tokenizer (`tokenizer_inflation` more tokens than the model's own);
- `serving`: the serving benchmark's statistic (mean, median or p99) of TTFT, TPOT or ITL, and its throughput: the
  steady-state rate of a closed loop, requests or output tokens / the wall time of an open-loop run or a burst.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from blueprints.capacity.measured import lookup
from blueprints.capacity.physics import default_memory_utilization, engine_profile, replica_model
from blueprints.contracts.memory import weights_gib
from blueprints.capacity.runs import burst, closed_loop, open_loop, scheduler_config
from blueprints.capacity.simulator import Percentiles, SimulationResult
from blueprints.capacity.workload import LengthModel
from blueprints.catalog import Architecture, Catalog
from blueprints.core import defaults
from blueprints.core.errors import CatalogError, format_validation_error, read_text_file
from blueprints.core.yamlio import load_yaml
from blueprints.requirements.model import Precision, Quantization

Regime = Literal["closed-loop", "open-loop", "burst"]
REGIMES: tuple[Regime, ...] = ("closed-loop", "open-loop", "burst")
#: The band every point must fall within unless it carries a `known_off` reason.
POINT_TOLERANCE = 0.35


class _Closed(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PointArgs(_Closed):
    """The setting a figure was measured in (lengths in the model's own tokens unless `tokenizer_inflation`)."""

    model: str = Field(min_length=1, max_length=80, description="catalog model id of the published model's shape")
    precision: Precision
    quantization: Quantization | None = None
    gpu: str = Field(min_length=1, max_length=40, description="catalog GPU name")
    tensor_parallel: int = Field(ge=1, le=64)
    kv_cache_dtype: Literal["auto", "fp8"] = "auto"
    concurrency: int | None = Field(default=None, ge=1, le=100_000, description="closed loop: clients")
    request_rate: float | None = Field(default=None, gt=0, le=100_000, description="open loop: requests/s")
    num_prompts: int | None = Field(default=None, ge=1, le=100_000, description="open loop and burst: requests")
    input_tokens: int = Field(ge=1, le=10_000_000)
    output_tokens: int = Field(ge=1, le=10_000_000)
    input_tokens_p95: int | None = Field(default=None, ge=1, le=10_000_000)
    output_tokens_p95: int | None = Field(default=None, ge=1, le=10_000_000)
    max_model_len: int | None = Field(default=None, ge=1, le=10_000_000)
    gpu_memory_utilization: float | None = Field(default=None, ge=0.05, le=1.0,
                                                 description="`--gpu-memory-utilization` of the run; default the "
                                                 "planner's (defaults.GPU_MEMORY_UTILIZATION)")
    max_num_seqs: int | None = Field(default=None, ge=1, le=100_000, description="`--max-num-seqs` when the run set "
                                     "it; default the engine's for the GPU")
    max_num_batched_tokens: int | None = Field(default=None, ge=1, le=10_000_000,
                                               description="`--max-num-batched-tokens` when the run set it")
    endpoint: Literal["completions", "chat"] = Field(default="completions", description="the API the client called: "
                                                     "/v1/completions (`vllm bench serve`'s default backend) or "
                                                     "/v1/chat/completions (the server renders the chat template)")
    staggered: bool = Field(default=False, description="closed loop: the clients started spread out rather than all "
                            "at once (a harness's ramp), so their requests never arrive in step")


class CalibrationPoint(_Closed):
    """One published figure and the setup it was measured on."""

    id: str = Field(min_length=1, max_length=80)
    source: str = Field(min_length=10, max_length=2000)
    source_group: str = Field(min_length=3, max_length=80, pattern=r"^[a-z0-9][a-z0-9.-]*$",
                              description="the publication the point comes from (a blog post, one repository's "
                              "benchmark file, one issue thread): cross-validation holds out a whole group at once")
    engine: str = Field(min_length=1, max_length=200, description="the engine release as the source states it")
    engine_profile: str = Field(description="defaults.ENGINE_PROFILES key the point runs on")
    regime: Regime
    measurement: Literal["offline-speed", "llmperf", "serving"]
    tokenizer_inflation: float = Field(default=1.0, ge=1.0, le=2.0)
    args: PointArgs
    metric: Literal["ttft_ms", "itl_ms", "tpot_ms", "e2e_ms", "output_tokens_per_s", "total_tokens_per_s",
                    "requests_per_s"]
    value: float = Field(gt=0, le=1e9)
    stat: Literal["mean", "median", "p99"]
    note: str = Field(default="", max_length=4000)
    architecture: Architecture | None = None
    architecture_source: str | None = Field(default=None, max_length=2000)
    known_off: str | None = Field(default=None, min_length=40, max_length=2000,
                                  description="why the point is outside the band: a reason a reader can check (it "
                                  "stays in every error figure, and no constant is fitted to it)")
    ambiguous: str | None = Field(default=None, min_length=10, max_length=2000,
                                  description="what is uncertain in how the figure was measured, as the collector "
                                  "read it")

    @model_validator(mode="after")
    def _consistent(self) -> CalibrationPoint:
        a = self.args
        if self.engine_profile not in defaults.ENGINE_PROFILES:
            raise ValueError(f"engine_profile {self.engine_profile!r} is not one of "
                             f"{sorted(defaults.ENGINE_PROFILES)} (blueprints/core/defaults.py ENGINE_PROFILES)")
        need = {"closed-loop": ("concurrency",), "open-loop": ("request_rate", "num_prompts"),
                "burst": ("num_prompts",)}[self.regime]
        missing = [f"args.{f}" for f in need if getattr(a, f) is None]
        if missing:
            raise ValueError(f"regime {self.regime} needs {', '.join(missing)}")
        # A burst may cap the requests in flight (`--max-concurrency`): args.concurrency.
        allowed = need + (("concurrency",) if self.regime == "burst" else ())
        extra = [f"args.{f}" for f in ("concurrency", "request_rate") if f not in allowed and getattr(a, f) is not None]
        if extra:
            raise ValueError(f"regime {self.regime} takes no {', '.join(extra)}")
        if self.measurement != "serving" and self.regime != "closed-loop":
            raise ValueError(f"measurement {self.measurement} is a closed loop (regime closed-loop)")
        return self


class _PointFile(_Closed):
    schema_version: Literal[2]
    points: list[CalibrationPoint] = Field(min_length=1, max_length=10_000)


def parse_points(text: str, *, source: str, catalog: Catalog) -> tuple[CalibrationPoint, ...]:
    """The points of a calibration file's text.

    Raises:
        CatalogError: malformed YAML, a point missing or mistyping a field, an unknown model or GPU, or two points
            with one id: the message names the file, the point (index and id) and the field.
    """
    try:
        data = load_yaml(text)
    except yaml.YAMLError as exc:
        raise CatalogError(f"{source}: not valid YAML ({str(exc).splitlines()[0]})") from None
    try:
        points = _PointFile.model_validate(data).points
    except ValidationError as exc:
        raise CatalogError(format_validation_error(exc, source=source, data=data)) from None
    problems = []
    seen: set[str] = set()
    for i, p in enumerate(points):
        where = f"points[{i}] ({p.id})"
        if p.id in seen:
            problems.append(f"{where}.id: another point has this id")
        seen.add(p.id)
        if p.architecture is None and p.args.model not in catalog.models:
            problems.append(f"{where}.args.model: {p.args.model!r} is not a catalog model; give `architecture`")
        if p.args.gpu not in catalog.gpus:
            problems.append(f"{where}.args.gpu: {p.args.gpu!r} is not one of {sorted(catalog.gpus)}")
    if problems:
        raise CatalogError(f"{source}: {len(problems)} problem(s)\n" + "\n".join(f"  {p}" for p in problems))
    return tuple(points)


def load_points_file(path: Path, catalog: Catalog) -> tuple[CalibrationPoint, ...]:
    """The points of the calibration file at `path` (see `parse_points` for the errors)."""
    return parse_points(read_text_file(path, CatalogError, "calibration file"), source=str(path), catalog=catalog)


@lru_cache(maxsize=1)
def _bundled_texts() -> tuple[tuple[str, str], ...]:
    """(file name, text) of every bundled points file, `calibration-points*.yaml` in name order."""
    folder = resources.files("blueprints.catalog")
    names = sorted(p.name for p in folder.iterdir() if p.name.startswith("calibration-points")
                   and p.name.endswith(".yaml"))
    return tuple((name, folder.joinpath(name).read_text(encoding="utf-8")) for name in names)


def load_points(catalog: Catalog) -> tuple[CalibrationPoint, ...]:
    """The bundled calibration points of every file (validated; an id used in two files is refused)."""
    points: list[CalibrationPoint] = []
    where: dict[str, str] = {}
    for name, text in _bundled_texts():
        for p in parse_points(text, source=f"blueprints/catalog/{name}", catalog=catalog):
            if p.id in where:
                raise CatalogError(f"blueprints/catalog/{name}: point {p.id!r} has the id of one in {where[p.id]}")
            where[p.id] = name
            points.append(p)
    return tuple(points)


def simulate_point(point: CalibrationPoint, catalog: Catalog, *, step_source: str = "auto") -> SimulationResult:
    """The simulated run of `point`'s benchmark, on its engine profile (`step_source` as `physics.replica_model`)."""
    a = point.args
    arch = point.architecture or catalog.model(a.model).architecture
    gpu = catalog.gpu(a.gpu)
    inflation = point.tokenizer_inflation
    prompt = round(a.input_tokens / inflation)  # tokens the server saw
    prompt_p95 = round((a.input_tokens_p95 or a.input_tokens) / inflation)
    out = a.output_tokens  # max_tokens: the server's own tokens
    max_len = a.max_model_len or prompt + out
    engine = engine_profile(point.engine_profile)
    memory = a.gpu_memory_utilization or default_memory_utilization(
        engine, gpu, weights_gib_per_gpu=weights_gib(arch, a.precision) / a.tensor_parallel,
        tensor_parallel_size=a.tensor_parallel)
    model = replica_model(arch, gpu, precision=a.precision, quantization=a.quantization,
                          tensor_parallel_size=a.tensor_parallel, kv_cache_fp8=a.kv_cache_dtype == "fp8",
                          gpu_memory_utilization=memory, engine=engine, chat=a.endpoint == "chat",
                          step_source=step_source)  # type: ignore[arg-type]
    config = scheduler_config(model, gpu, max_model_len=max_len, max_num_seqs=a.max_num_seqs,
                              max_num_batched_tokens=a.max_num_batched_tokens)
    inputs, outputs = LengthModel(prompt, prompt_p95), LengthModel(out, a.output_tokens_p95 or out)
    if point.regime == "closed-loop":
        return closed_loop(model, config, concurrency=a.concurrency, inputs=inputs, outputs=outputs,  # type: ignore
                           max_model_len=max_len, staggered=a.staggered)
    if point.regime == "open-loop":
        return open_loop(model, config, rate_per_s=a.request_rate, pattern="steady", inputs=inputs,  # type: ignore
                         outputs=outputs, max_model_len=max_len, requests=a.num_prompts, warmup=0,
                         stop_when_overloaded=False)
    return burst(model, config, count=a.num_prompts, inputs=inputs, outputs=outputs,  # type: ignore[arg-type]
                 max_model_len=max_len, max_concurrency=a.concurrency)


def _stat(p: Percentiles, stat: str) -> float:
    return {"mean": p.mean, "median": p.p50, "p99": p.p99}[stat]


def run_key(point: CalibrationPoint) -> tuple:
    """What decides `point`'s simulated run: points with the same key (the figures of one benchmark run) share it."""
    return (point.engine_profile, point.regime, point.tokenizer_inflation, point.args,
            point.architecture.model_dump_json() if point.architecture else None)


def predict(point: CalibrationPoint, catalog: Catalog, *, step_source: str = "auto") -> float:
    """The model's figure for `point`, in the point's own metric and definition."""
    return figure(point, simulate_point(point, catalog, step_source=step_source))


def figure(point: CalibrationPoint, run: SimulationResult) -> float:
    """`point`'s metric read off its simulated run (`simulate_point`), as the benchmark defines it."""
    inflation = point.tokenizer_inflation
    out = point.args.output_tokens
    if point.measurement == "offline-speed":
        return out / (run.e2e_ms.mean / 1e3)
    if point.measurement == "llmperf":
        if point.metric == "ttft_ms":
            return run.ttft_ms.mean
        if point.metric == "itl_ms":
            return run.e2e_ms.mean / (out * inflation)
        return run.output_tokens_per_s * inflation
    if point.metric in ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms"):
        return _stat(getattr(run, point.metric), point.stat)
    if point.regime == "closed-loop":
        rate = {"output_tokens_per_s": run.output_tokens_per_s, "requests_per_s": run.requests_per_s,
                "total_tokens_per_s": run.requests_per_s * (run.input_tokens + run.output_tokens) / run.measured}
        return rate[point.metric]
    count = {"output_tokens_per_s": run.output_tokens, "requests_per_s": run.measured,
             "total_tokens_per_s": run.input_tokens + run.output_tokens}[point.metric]
    return count / run.duration_s


@dataclass(frozen=True)
class Comparison:
    """A point, the model's figure and the signed relative error (predicted / published - 1)."""

    point: CalibrationPoint
    predicted: float

    @property
    def error(self) -> float:
        return self.predicted / self.point.value - 1.0


def compare(catalog: Catalog, points: tuple[CalibrationPoint, ...] | None = None, *,
            step_source: str = "auto") -> list[Comparison]:
    """Predict every point (the bundled ones by default), simulating each benchmark run once (`run_key`)."""
    runs: dict[tuple, SimulationResult] = {}
    out = []
    for p in (points if points is not None else load_points(catalog)):
        key = run_key(p)
        if key not in runs:
            runs[key] = simulate_point(p, catalog, step_source=step_source)
        out.append(Comparison(p, figure(p, runs[key])))
    return out


def median_abs_error(comparisons: list[Comparison]) -> float:
    """Median of |error| over the comparisons."""
    return statistics.median(abs(c.error) for c in comparisons)


def p90_abs_error(comparisons: list[Comparison]) -> float:
    """90th percentile of |error| over the comparisons (nearest rank: the value 90 % of them are at or below)."""
    errors = sorted(abs(c.error) for c in comparisons)
    return errors[max(0, math.ceil(0.9 * len(errors)) - 1)]


@dataclass(frozen=True)
class RegimeError:
    """|error| statistics of one regime's points (or of all of them: regime `all`)."""

    regime: str
    points: int
    median: float
    p90: float
    worst: Comparison


def errors_by_regime(comparisons: list[Comparison], *, known_off: bool = True) -> list[RegimeError]:
    """Median, p90 and worst |error| of each regime's points, then of all points: every point, or (`known_off`
    False) only those not listed as known off."""
    kept = [c for c in comparisons if known_off or not c.point.known_off]
    groups = [(r, [c for c in kept if c.point.regime == r]) for r in REGIMES] + [("all", kept)]
    return [RegimeError(r, len(cs), median_abs_error(cs), p90_abs_error(cs), max(cs, key=lambda c: abs(c.error)))
            for r, cs in groups if cs]


def source_errors(catalog: Catalog, points: tuple[CalibrationPoint, ...], gpu: str, *,
                  fitted: frozenset[str]) -> tuple[int, dict[str, tuple[float, float]]]:
    """(how many, and the (median, p90) |error| of each step source, `measured` and `roofline`, over them) of `gpu`'s
    held-out points whose replica the measured tables cover: those no constant is fitted to (`fitted`: their ids)
    and not listed as known off. No errors when there are none."""
    held = []
    for p in points:
        a = p.args
        if a.gpu != gpu or p.id in fitted or p.known_off:
            continue
        arch = p.architecture or catalog.model(a.model).architecture
        steps, _ = lookup(arch, catalog.gpu(gpu), precision=a.precision, quantization=a.quantization,
                          tensor_parallel_size=a.tensor_parallel, kv_cache_fp8=a.kv_cache_dtype == "fp8")
        if steps is not None:
            held.append(p)
    out: dict[str, tuple[float, float]] = {}
    for source in ("measured", "roofline") if held else ():
        rows = compare(catalog, tuple(held), step_source=source)
        out[source] = (median_abs_error(rows), p90_abs_error(rows))
    return len(held), out


def better_source(errors: dict[str, tuple[float, float]]) -> str:
    """The source with the lower median + p90 |error| (`measured` on a tie, and where no point tells them apart):
    the rule `defaults.MEASURED_STEP_GPUS` follows."""
    if not errors:
        return "measured"
    return min(("measured", "roofline"), key=lambda s: sum(errors[s]))
