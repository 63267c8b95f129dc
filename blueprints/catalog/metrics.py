"""Metric catalog: the metric names each engine and exporter version exposes, with type and unit
(`metrics.yaml` beside this module, each entry with its source), and SageMaker's CloudWatch metrics.

The offline signal check (`blueprints.review.signals`) reads it to prove that every query names real metrics in the
units its threshold assumes.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from blueprints.catalog.addons import _read
from blueprints.catalog.units import Unit, parse_unit

#: Suffixes a histogram family exposes, and what each series is.
HISTOGRAM_SERIES = {"_bucket": "bucket", "_sum": "sum", "_count": "count"}
SUMMARY_SERIES = {"_sum": "sum", "_count": "count"}


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


def _valid_unit(value: str) -> str:
    parse_unit(value)
    return value


class MetricRecord(_Record):
    name: str = Field(pattern=r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
    type: Literal["gauge", "counter", "histogram", "summary", "info"]
    unit: str
    buckets: tuple[float, ...] | None = Field(default=None, min_length=1, max_length=100, description=(
        "a histogram's bucket upper bounds (`le`), ascending, in `unit` (+Inf implied); None: not recorded"))
    observes: str | None = Field(default=None, description="histograms and summaries: what one observation is, the "
                                 "unit of the `_count` series (e.g. requests); none: a plain number")

    @field_validator("unit", "observes")
    @classmethod
    def _known_unit(cls, value: str | None) -> str | None:
        return None if value is None else _valid_unit(value)

    @model_validator(mode="after")
    def _buckets(self) -> MetricRecord:
        if self.buckets is not None and (self.type != "histogram" or any(
                b <= a for a, b in zip(self.buckets, self.buckets[1:])) or self.buckets[0] <= 0):
            raise ValueError(f"{self.name}: buckets are a histogram's positive, strictly ascending upper bounds, got "
                             f"{self.type} {list(self.buckets)}")
        return self

    def bracket(self, value: float) -> tuple[float, float] | None:
        """The bucket bounds (lower, upper) strictly around `value` (lower 0 below the first bound), or None when
        `value` is a bound, beyond the last one, or no buckets are recorded: where `histogram_quantile` can only
        interpolate linearly between the two."""
        if self.buckets is None or any(math.isclose(value, b, rel_tol=1e-9) for b in self.buckets):
            return None
        lower = 0.0
        for bound in self.buckets:
            if value < bound:
                return lower, bound
            lower = bound
        return None

    @property
    def unit_of(self) -> Unit:
        return parse_unit(self.unit)

    @property
    def count_unit(self) -> Unit:
        """The unit of a histogram's or summary's `_count` series: what it observes, else dimensionless."""
        return parse_unit(self.observes or "1")


class Exporter(_Record):
    exporter: str = Field(pattern=r"^[a-z0-9-]+$")
    version: str
    images: list[str] = Field(default_factory=list)
    addon: str | None = None
    job: str | None = Field(default=None, description="the `job` label its add-on's own scrape gives its series")
    present_at_zero: bool
    source: str
    metrics: list[MetricRecord] = Field(min_length=1)


class CloudWatchMetric(_Record):
    """A CloudWatch metric; `published_by`: the SageMaker endpoint kinds that publish it (an asynchronous endpoint
    publishes no `Invocations`, `InvocationsPerInstance` or `OverheadLatency`; its queue's metrics only it does)."""

    name: str
    unit: str
    published_by: list[Literal["real-time", "asynchronous"]] = Field(min_length=1)

    @field_validator("unit")
    @classmethod
    def _known_unit(cls, value: str) -> str:
        return _valid_unit(value)


class CloudWatchNamespace(_Record):
    namespace: str
    source: str
    metrics: list[CloudWatchMetric] = Field(min_length=1)


class _MetricsFile(_Record):
    schema_version: int
    exporters: list[Exporter]
    cloudwatch: list[CloudWatchNamespace]


class Series(_Record):
    """One series name as Prometheus stores it: the family record, the exporter, and which series of the family
    (`value` for gauges/counters; `bucket`, `sum` or `count` of a histogram or summary)."""

    metric: MetricRecord
    exporter: Exporter
    part: Literal["value", "bucket", "sum", "count"]


class MetricCatalog(_Record):
    exporters: list[Exporter]
    cloudwatch: list[CloudWatchNamespace]

    def engine_for_image(self, image: str) -> Exporter | None:
        """The engine exporter whose metrics a pinned image exposes, or None when the catalog does not know it."""
        return next((e for e in self.exporters if image in e.images), None)

    def series(self, name: str, exporters: list[Exporter]) -> Series | None:
        """Resolve a series name against `exporters` (a histogram's `_bucket`/`_sum`/`_count` included)."""
        for exporter in exporters:
            for m in exporter.metrics:
                if m.name == name:
                    return Series(metric=m, exporter=exporter, part="value")
                suffixes = HISTOGRAM_SERIES if m.type == "histogram" else SUMMARY_SERIES if m.type == "summary" else {}
                for suffix, part in suffixes.items():
                    if name == m.name + suffix:
                        return Series(metric=m, exporter=exporter, part=part)  # type: ignore[arg-type]
        return None

    def series_names(self, exporters: list[Exporter]) -> list[str]:
        """Every series name `exporters` expose (for close-match suggestions)."""
        names = []
        for exporter in exporters:
            for m in exporter.metrics:
                suffixes = HISTOGRAM_SERIES if m.type == "histogram" else SUMMARY_SERIES if m.type == "summary" else {}
                names += [m.name + s for s in suffixes] if suffixes else [m.name]
        return names

    def cloudwatch_metric(self, namespace: str, name: str) -> CloudWatchMetric | None:
        for ns in self.cloudwatch:
            if ns.namespace == namespace:
                return next((m for m in ns.metrics if m.name == name), None)
        return None


@lru_cache(maxsize=1)
def load_metric_catalog() -> MetricCatalog:
    """Load `metrics.yaml` (once per process). Raises `CatalogError` when it is malformed."""
    data = _read("metrics.yaml", _MetricsFile)
    return MetricCatalog(exporters=data.exporters, cloudwatch=data.cloudwatch)
