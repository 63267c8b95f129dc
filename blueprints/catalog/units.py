"""Units of measure for metrics, scaling targets and alert thresholds: a small algebra the signal check uses to prove
that a threshold is in its expression's unit (`blueprints.review.signals`).

A unit is a scale (relative to its base units) and integer powers of base dimensions: `microseconds/request` is
scale 1e-6 with `{s: 1, request: -1}`. Counted things are dimensions of their own (`request`, `token`, `replica`), so
requests per replica and tokens per second never compare equal by accident; `1` is dimensionless (a ratio, a
fraction), `percent` is dimensionless at scale 0.01.

Written as text: products with `*`, one `/` for the denominator, `1` for dimensionless, e.g.
`requests/replica`, `microseconds/request`, `cpu_seconds/second`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

#: Named units: (scale, dimensions). Plurals and singulars both parse.
_BASE: dict[str, tuple[float, dict[str, int]]] = {
    "1": (1.0, {}),
    "fraction": (1.0, {}),
    "ratio": (1.0, {}),
    "percent": (0.01, {}),
    "second": (1.0, {"s": 1}),
    "millisecond": (1e-3, {"s": 1}),
    "microsecond": (1e-6, {"s": 1}),
    "minute": (60.0, {"s": 1}),
    "byte": (1.0, {"byte": 1}),
    "mebibyte": (2.0**20, {"byte": 1}),
    "request": (1.0, {"request": 1}),
    "invocation": (1.0, {"request": 1}),
    "error": (1.0, {"request": 1}),
    "token": (1.0, {"token": 1}),
    "inference": (1.0, {"inference": 1}),
    "execution": (1.0, {"execution": 1}),
    "preemption": (1.0, {"preemption": 1}),
    "restart": (1.0, {"restart": 1}),
    "replica": (1.0, {"replica": 1}),
    "instance": (1.0, {"replica": 1}),  # a SageMaker instance serves one model copy: a replica
    "series": (1.0, {}),  # count() of series: a plain number
    "cpu_second": (1.0, {"cpu": 1, "s": 1}),
    "core": (1.0, {"cpu": 1}),
    "megahertz": (1e6, {"hz": 1}),
    "celsius": (1.0, {"celsius": 1}),
    "watt": (1.0, {"watt": 1}),
    "millijoule": (1e-3, {"joule": 1}),
}


@dataclass(frozen=True)
class Unit:
    """`scale` x the product of base dimensions raised to their powers."""

    scale: float = 1.0
    dims: tuple[tuple[str, int], ...] = field(default=())

    @staticmethod
    def of(scale: float, dims: dict[str, int]) -> Unit:
        return Unit(scale, tuple(sorted((k, v) for k, v in dims.items() if v)))

    def _dims(self) -> dict[str, int]:
        return dict(self.dims)

    def __mul__(self, other: Unit) -> Unit:
        dims = self._dims()
        for k, v in other.dims:
            dims[k] = dims.get(k, 0) + v
        return Unit.of(self.scale * other.scale, dims)

    def __truediv__(self, other: Unit) -> Unit:
        dims = self._dims()
        for k, v in other.dims:
            dims[k] = dims.get(k, 0) - v
        return Unit.of(self.scale / other.scale, dims)

    def scaled(self, factor: float) -> Unit:
        return Unit(self.scale * factor, self.dims)

    def same_as(self, other: Unit) -> bool:
        """Equal dimensions and scale (within rounding)."""
        return self.dims == other.dims and math.isclose(self.scale, other.scale, rel_tol=1e-9)

    def same_dimension(self, other: Unit) -> bool:
        return self.dims == other.dims

    def __str__(self) -> str:
        return describe(self)


DIMENSIONLESS = Unit()
PER_SECOND = Unit.of(1.0, {"s": -1})
REPLICA = Unit.of(1.0, {"replica": 1})


def _singular(word: str) -> str:
    if word in _BASE:
        return word
    if word.endswith("s") and word[:-1] in _BASE:
        return word[:-1]
    raise ValueError(f"unknown unit {word!r}; known: {', '.join(sorted(_BASE))}")


def parse_unit(text: str) -> Unit:
    """`requests/replica` -> Unit. Raises ValueError naming an unknown word."""
    numerator, _, denominator = text.strip().partition("/")
    unit = DIMENSIONLESS
    for word in filter(None, (w.strip() for w in numerator.split("*"))):
        scale, dims = _BASE[_singular(word)]
        unit = unit * Unit.of(scale, dims)
    for word in filter(None, (w.strip() for w in denominator.split("*"))):
        scale, dims = _BASE[_singular(word)]
        unit = unit / Unit.of(scale, dims)
    return unit


def describe(unit: Unit) -> str:
    """Readable form: a known name when one matches exactly, else scale x dimensions."""
    for name in ("microseconds", "milliseconds", "seconds", "percent", "mebibytes"):
        if unit.same_as(parse_unit(name)):
            return name
    num = [f"{k}^{v}" if v > 1 else k for k, v in unit.dims if v > 0]
    den = [f"{k}^{-v}" if v < -1 else k for k, v in unit.dims if v < 0]
    text = "*".join(num) or "1"
    if den:
        text += "/" + "*".join(den)
    return text if math.isclose(unit.scale, 1.0) else f"{unit.scale:g} {text}"
