"""Published measurements against the capacity model: load the points, predict each the way it was measured.

The points live in `blueprints/catalog/calibration-points.yaml` (each with its source, the engine it ran on and how
the figure is defined). A prediction runs the closed-loop simulation at the point's concurrency with fixed lengths,
on the point's engine profile, and converts it to the published definition:
- `offline-speed` (Qwen2.5 speed benchmark): output tokens / wall time of the generate() call;
- `llmperf`: ITL = request latency / counted output tokens, throughput = counted tokens/s, prompts and outputs
  counted with the Llama-2 tokenizer (`tokenizer_inflation` more tokens than the model's own);
- `mean`: the simulation's mean TTFT, ITL or output tokens/s.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from blueprints.capacity.physics import engine_profile, replica_model
from blueprints.capacity.runs import closed_loop, scheduler_config
from blueprints.capacity.workload import LengthModel
from blueprints.catalog import Architecture, Catalog
from blueprints.core.errors import CatalogError, format_validation_error
from blueprints.requirements.model import Precision, Quantization

#: The band every point must fall within unless it carries a `known_off` reason, and the median the set must hold.
POINT_TOLERANCE = 0.35
MEDIAN_TOLERANCE = 0.12


class _Closed(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PointArgs(_Closed):
    model: str
    precision: Precision
    quantization: Quantization | None = None
    gpu: str
    tensor_parallel: int = Field(ge=1)
    concurrency: int = Field(ge=1)
    input_tokens: int = Field(ge=1)
    output_tokens: int = Field(ge=1)
    input_tokens_p95: int | None = Field(default=None, ge=1)
    output_tokens_p95: int | None = Field(default=None, ge=1)
    max_model_len: int | None = Field(default=None, ge=1)


class CalibrationPoint(_Closed):
    """One published figure and the setup it was measured on."""

    id: str
    source: str
    engine_profile: str
    measurement: Literal["offline-speed", "llmperf", "mean"]
    tokenizer_inflation: float = Field(default=1.0, ge=1.0, le=2.0)
    args: PointArgs
    metric: Literal["ttft_ms", "itl_ms", "output_tokens_per_s"]
    value: float = Field(gt=0)
    stat: str
    engine: str
    note: str = ""
    architecture: Architecture | None = None
    architecture_source: str | None = None
    known_off: str | None = None


class _PointFile(_Closed):
    schema_version: int
    points: list[CalibrationPoint]


@lru_cache(maxsize=1)
def load_points() -> tuple[CalibrationPoint, ...]:
    """The bundled calibration points (validated)."""
    text = resources.files("blueprints.catalog").joinpath("calibration-points.yaml").read_text(encoding="utf-8")
    try:
        return tuple(_PointFile.model_validate(yaml.safe_load(text)).points)
    except ValidationError as exc:
        raise CatalogError(format_validation_error(exc, source="calibration-points.yaml")) from None


def predict(point: CalibrationPoint, catalog: Catalog) -> float:
    """The model's figure for `point`, in the point's own metric and definition."""
    a = point.args
    arch = point.architecture or catalog.model(a.model).architecture
    gpu = catalog.gpu(a.gpu)
    inflation = point.tokenizer_inflation
    prompt = round(a.input_tokens / inflation)  # tokens the server saw
    prompt_p95 = round((a.input_tokens_p95 or a.input_tokens) / inflation)
    out = a.output_tokens  # max_tokens: the server's own tokens
    max_len = a.max_model_len or prompt + out
    model = replica_model(arch, gpu, precision=a.precision, quantization=a.quantization,
                          tensor_parallel_size=a.tensor_parallel, engine=engine_profile(point.engine_profile))
    config = scheduler_config(model, gpu, max_model_len=max_len)
    run = closed_loop(model, config, concurrency=a.concurrency, inputs=LengthModel(prompt, prompt_p95),
                      outputs=LengthModel(out, a.output_tokens_p95 or out), max_model_len=max_len)
    if point.measurement == "offline-speed":
        from blueprints.core import defaults

        return out / ((run.e2e_ms.mean - defaults.SERVER_OVERHEAD_MS) / 1e3)
    if point.metric == "ttft_ms":
        return run.ttft_ms.mean
    if point.metric == "itl_ms":
        return run.e2e_ms.mean / (out * inflation) if point.measurement == "llmperf" else run.itl_ms.mean
    return run.output_tokens_per_s * inflation


@dataclass(frozen=True)
class Comparison:
    """A point, the model's figure and the signed relative error (predicted / published - 1)."""

    point: CalibrationPoint
    predicted: float

    @property
    def error(self) -> float:
        return self.predicted / self.point.value - 1.0


def compare(catalog: Catalog, points: tuple[CalibrationPoint, ...] | None = None) -> list[Comparison]:
    """Predict every point (the bundled ones by default)."""
    return [Comparison(p, predict(p, catalog)) for p in (points if points is not None else load_points())]


def median_abs_error(comparisons: list[Comparison]) -> float:
    """Median of |error| over the comparisons."""
    return statistics.median(abs(c.error) for c in comparisons)
