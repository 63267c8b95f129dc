"""The calibration file: `stacks/calibration/<model>-<gpu>-<engine>-tp<N>-<precision>.yaml`, the contract between
`blueprint calibrate` (`blueprints.operate.calibrate`, which writes it) and `blueprint plan` (which reads every file
of the folder and applies the one matching a replica: `Calibrations.find`).

One file per (catalog model, GPU, engine image, tensor parallel degree, weight precision): the correction factors of
the capacity model (`blueprints.capacity.physics.Correction`) fitted to benchmark runs of a deployed stack, with their
provenance: the result files (path, stack, date, measured or constructed), the runs used and left out and why, each
figure before and after, and the residual error before -> after; and, when the result files recorded the measured
pod's cold start, the startup model's correction (`startup`: a factor per part, measured over predicted). A new
calibration of the same key replaces the file
(git keeps the old one). Every field is bounded; a file is refused (CalibrationError, exit 2) naming file and field.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import Field, ValidationError, model_validator

from blueprints.core.errors import CalibrationError, format_validation_error, read_text_file
from blueprints.core.jsontypes import ClosedModel
from blueprints.core.yamlio import load_yaml
from blueprints.requirements.model import Precision

#: This format's version.
CALIBRATION_SCHEMA_VERSION = 1
#: Where calibrations live, relative to the project's stack config folder (`stacks/`).
CALIBRATION_SUBDIR = "calibration"
#: Largest calibration file read, bytes (a file lists at most MAX_FIGURES rows of ~150 bytes).
MAX_CALIBRATION_FILE_BYTES = 512 * 1024
#: Most calibration files a folder holds (one per replica shape measured).
MAX_CALIBRATION_FILES = 500
MAX_SOURCES = 20
MAX_FIGURES = 3 * 32 * MAX_SOURCES
#: The factors a calibration may carry (`blueprints.capacity.correction.STEP_TIME_RANGE` / `TTFT_FLOOR_RANGE`).
STEP_TIME_BOUNDS = (0.2, 5.0)
TTFT_FLOOR_BOUNDS = (0.2, 10.0)
#: A startup part's factor (measured / the startup model's): outside it the measurement or the model is broken.
STARTUP_FACTOR_BOUNDS = (0.2, 5.0)
StartupPart = Literal["node_provisioning_s", "image_pull_s", "weights_download_s", "model_load_s"]


class CalibrationKey(ClosedModel):
    """What a calibration applies to: one replica shape on one engine release."""

    model: str = Field(max_length=100, pattern=r"^[a-z0-9][-a-z0-9.]*$", description="catalog model id, e.g. "
                       "llama-3.1-8b")
    gpu: str = Field(max_length=40, pattern=r"^[a-z0-9][-a-z0-9]*$", description="catalog GPU id, e.g. l40s")
    engine_image: str = Field(max_length=300, description="the serving engine's image the runs measured, e.g. "
                              "vllm/vllm-openai:v0.24.0")
    tensor_parallel_size: int = Field(ge=1, le=64)
    precision: Precision

    def file_name(self) -> str:
        """`<model>-<gpu>-<engine tag>-tp<N>-<precision>.yaml`, e.g. `llama-3.1-8b-l40s-v0.24.0-tp1-bf16.yaml`."""
        tag = self.engine_image.rsplit(":", 1)[-1] if ":" in self.engine_image else "untagged"
        return f"{self.model}-{self.gpu}-{tag}-tp{self.tensor_parallel_size}-{self.precision.value}.yaml"


class CalibrationSource(ClosedModel):
    """One result file the fit read."""

    file: str = Field(max_length=500, description="path relative to the project root")
    stack: str = Field(max_length=120, pattern=r"^[a-z0-9][-a-z0-9]*$")
    date: dt.date = Field(description="the benchmark's date")
    measured: bool = Field(description="false for a file constructed by hand (test data)")
    format: Literal["benchmark-result", "vllm-bench-serve"]
    runs_used: int = Field(ge=0, le=32)
    left_out: list[Annotated[str, Field(max_length=600)]] = Field(default_factory=list, max_length=32,
                                                                  description="runs not fitted, each with why")


class MeasuredWith(ClosedModel):
    """The engine flags of the measured replica (a calibration transfers to other flags through the model)."""

    max_num_seqs: int = Field(ge=1, le=1_000_000)
    max_num_batched_tokens: int = Field(ge=1, le=10_000_000)
    max_model_len: int = Field(ge=1, le=10_000_000)
    kv_cache_dtype: Literal["auto", "fp8"]
    gpu_memory_utilization: float = Field(gt=0, le=1)


class FigureRow(ClosedModel):
    """One run's figure: what the client measured and the model's replay before (identity) and after the fit."""

    run: str = Field(max_length=600)
    figure: Literal["output_tokens_per_s", "median_ttft_ms", "median_itl_ms"]
    measured: float = Field(gt=0, le=1e9)
    before: float = Field(ge=0, le=1e9)
    after: float = Field(ge=0, le=1e9)


class ResidualError(ClosedModel):
    """|predicted / measured - 1| over every figure fitted (0.1 = 10 %)."""

    median: float = Field(ge=0, le=1e6)
    max: float = Field(ge=0, le=1e6)


class StartupPartFit(ClosedModel):
    """One part of the cold start: the startup model's prediction for the measured stack, the median measured, and
    the factor the next plan multiplies that part by."""

    part: StartupPart
    predicted_s: int = Field(ge=1, le=86_400, description="the uncalibrated startup model's, s")
    measured_s: float = Field(gt=0, le=7200, description="the median over the samples, s")
    factor: float = Field(ge=STARTUP_FACTOR_BOUNDS[0], le=STARTUP_FACTOR_BOUNDS[1], description="measured / "
                          "predicted, the median of the samples' ratios")
    samples: int = Field(ge=1, le=MAX_SOURCES, description="result files that measured this part")


class StartupCorrection(ClosedModel):
    """The startup model's correction (`blueprints.plan.startup.calibrated`): each measured part's factor."""

    weights_streamed: bool = Field(description="the measured pods streamed their weights; the weights and load "
                                   "factors apply only to a plan whose pods read them the same way")
    parts: list[StartupPartFit] = Field(min_length=1, max_length=4)
    predicted_total_s: int = Field(ge=1, le=4 * 86_400)
    measured_total_s: float = Field(gt=0, le=7200, description="the median measured pod creation -> Ready, s")
    samples: int = Field(ge=1, le=MAX_SOURCES, description="pods measured (one per result file)")
    dates: list[dt.date] = Field(min_length=1, max_length=MAX_SOURCES, description="the measurements' dates")

    @model_validator(mode="after")
    def _one_row_per_part(self) -> "StartupCorrection":
        names = [p.part for p in self.parts]
        if len(set(names)) != len(names):
            raise ValueError(f"parts: each part once, got {names}")
        return self

    def factor(self, part: str, *, weights_streamed: bool) -> float:
        """The factor on `part` for a replica that streams its weights or not (1: not measured or not comparable)."""
        if part in ("weights_download_s", "model_load_s") and weights_streamed != self.weights_streamed:
            return 1.0
        return next((p.factor for p in self.parts if p.part == part), 1.0)

    def words(self) -> str:
        """e.g. `2026-12-03 cold start of 1 pod: predicted 260 s, measured 370 s`."""
        dates = ", ".join(d.isoformat() for d in sorted(set(self.dates)))
        return (f"{dates} cold start of {self.samples} pod(s): predicted {self.predicted_total_s} s, measured "
                f"{self.measured_total_s:.0f} s")


class AcceptedShift(ClosedModel):
    """A calibration that moves a production stack's capacity by more than its band, written because the user passed
    `--accept-shift` (a reviewed decision: the next review shows it first)."""

    stack: str = Field(max_length=120, pattern=r"^[a-z0-9][-a-z0-9]*$", description="the production stack measured")
    planned_rps: float = Field(gt=0, le=1e9, description="one replica's capacity within the SLO as planned, "
                               "requests/s")
    calibrated_rps: float = Field(ge=0, le=1e9, description="the same on the calibrated model, requests/s")
    band: float = Field(ge=0, le=1, description="the plan's capacity band it moves beyond (0.14 = 14 %)")

    def words(self) -> str:
        """e.g. `accepted with --accept-shift: chat-assistant-prod's capacity per replica 3.4 -> 1.2 requests/s
        (-65 %), beyond its band of 14 %`."""
        moved = self.calibrated_rps / self.planned_rps - 1
        return (f"accepted with --accept-shift: {self.stack}'s capacity per replica {self.planned_rps:.3g} -> "
                f"{self.calibrated_rps:.3g} requests/s ({moved:+.0%}), beyond its band of {self.band:.0%}")


class CalibrationFile(ClosedModel):
    """`stacks/calibration/<key>.yaml`.

    Example (abridged): `{"schema_version": 1, "key": {"model": "llama-3.1-8b", "gpu": "l40s", "engine_image":
    "vllm/vllm-openai:v0.24.0", "tensor_parallel_size": 1, "precision": "bf16"}, "step_time": 1.21,
    "ttft_floor": 0.95, "sources": [...], "residual_before": {"median": 0.18, "max": 0.9}, ...}`.
    """

    schema_version: Literal[1] = CALIBRATION_SCHEMA_VERSION
    key: CalibrationKey
    step_time: float = Field(ge=STEP_TIME_BOUNDS[0], le=STEP_TIME_BOUNDS[1], description="factor on every step's "
                             "kernel time")
    ttft_floor: float = Field(ge=TTFT_FLOOR_BOUNDS[0], le=TTFT_FLOOR_BOUNDS[1], description="factor on the "
                              "frontend's latency and serial work (the TTFT floor)")
    at_bound: list[Literal["step_time", "ttft_floor"]] = Field(default_factory=list, max_length=2, description=
                                                               "factors the fit stopped at a bound of their range")
    unpinned: list[Literal["ttft_floor"]] = Field(default_factory=list, max_length=1, description=
                                                  "factors the runs do not pin (x1.25 on it moves their median TTFTs "
                                                  "by under 3 %), kept at x1 rather than fitted to noise")
    sources: list[CalibrationSource] = Field(min_length=1, max_length=MAX_SOURCES)
    measured_with: MeasuredWith
    fitted_on: str = Field(max_length=300, description="the figures and the loss, in words")
    residual_before: ResidualError
    residual_after: ResidualError
    figures: list[FigureRow] = Field(min_length=1, max_length=MAX_FIGURES)
    startup: StartupCorrection | None = Field(default=None, description="the startup model's correction, when the "
                                              "result files recorded a measured cold start")
    accepted_shift: AcceptedShift | None = Field(default=None, description="set when the fit moves a production "
                                                 "stack's capacity beyond its band and `--accept-shift` was given")

    @property
    def measured(self) -> bool:
        """Every source was measured (none constructed)."""
        return all(s.measured for s in self.sources)

    def runs_words(self) -> str:
        """e.g. `2026-12-03 runs of chat-assistant-prod` (dates and stacks of the sources, sorted)."""
        dates = ", ".join(sorted({s.date.isoformat() for s in self.sources}))
        stacks = ", ".join(sorted({s.stack for s in self.sources}))
        return f"{dates} runs of {stacks}" + ("" if self.measured else " (constructed, not measured)")


@dataclass(frozen=True)
class Calibration:
    """A loaded calibration: its file (relative to the project root) and content."""

    path: str
    file: CalibrationFile


@dataclass(frozen=True)
class Calibrations:
    """Every calibration of a project, by key (`find`). Empty: the planner uses the uncorrected model."""

    entries: tuple[Calibration, ...] = ()

    def find(self, *, model: str | None, gpu: str, engine_image: str, tensor_parallel_size: int,
             precision: Precision) -> Calibration | None:
        """The calibration of exactly this replica shape and engine, or None."""
        for c in self.entries:
            k = c.file.key
            if (k.model, k.gpu, k.engine_image, k.tensor_parallel_size, k.precision) == (
                    model, gpu, engine_image, tensor_parallel_size, precision):
                return c
        return None


def calibration_dir(stacks_dir: Path) -> Path:
    """`<stacks>/calibration`."""
    return stacks_dir / CALIBRATION_SUBDIR


def parse_calibration(text: str, *, source: str) -> CalibrationFile:
    """A calibration file's content.

    Raises:
        CalibrationError: not YAML, or a field missing, unknown or out of its bounds (the message names the file and
            the field).
    """
    try:
        data = load_yaml(text)
    except yaml.YAMLError as exc:
        raise CalibrationError(f"{source}: not valid YAML ({str(exc).splitlines()[0]})") from None
    try:
        return CalibrationFile.model_validate(data)
    except ValidationError as exc:
        raise CalibrationError(format_validation_error(exc, source=source, data=data, model=CalibrationFile)
                               + "\n(rewrite it with `blueprint calibrate`, or delete it)") from None


def load_calibrations(folder: Path, *, relative_to: Path | None = None) -> Calibrations:
    """Every `*.yaml` of `folder` (none when it does not exist), each named as its key says.

    Raises:
        CalibrationError: a file is too large, invalid (see `parse_calibration`), not named after its key, or two
            files hold one key; more than `MAX_CALIBRATION_FILES` files.
    """
    if not folder.is_dir():
        return Calibrations()
    paths = sorted(p for p in folder.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
    if len(paths) > MAX_CALIBRATION_FILES:
        raise CalibrationError(f"{folder}: {len(paths)} calibration files, at most {MAX_CALIBRATION_FILES}")
    entries = []
    for path in paths:
        size = path.stat().st_size
        if size > MAX_CALIBRATION_FILE_BYTES:
            raise CalibrationError(f"{path}: {size:,} bytes; a calibration file is at most "
                                   f"{MAX_CALIBRATION_FILE_BYTES:,} (rewrite it with `blueprint calibrate`)")
        file = parse_calibration(read_text_file(path, CalibrationError, "calibration file"), source=str(path))
        if path.name != file.key.file_name():
            raise CalibrationError(f"{path}: its key says it is {file.key.file_name()}; rename it (one file per "
                                   "model, GPU, engine image, tensor parallel degree and precision)")
        shown = path.relative_to(relative_to).as_posix() if relative_to is not None else path.as_posix()
        entries.append(Calibration(shown, file))
    return Calibrations(tuple(entries))


def calibration_yaml(file: CalibrationFile) -> str:
    """The file's YAML (keys in the model's order; no `startup` key without a measured cold start, no
    `accepted_shift` unless one was accepted)."""
    data = file.model_dump(mode="json")
    for optional in ("startup", "accepted_shift"):
        if getattr(file, optional) is None:
            data.pop(optional)
    return yaml.safe_dump(data, sort_keys=False, width=120)
