"""How far a capacity prediction may be off: the cross-validated band every LLM prediction carries, and the margin a
production plan is sized with until a calibration narrows it.

The band of a step source (`measured` kernel tables or the `roofline`) and a metric family is the 75th percentile of
|error| over the published points that source times in the regimes a plan predicts (`BAND_REGIMES`: steady traffic,
a closed loop or an open loop; a burst's transient queue is not a regime a plan runs a replica in), each predicted
with constants fitted without its source group (`blueprints.capacity.fitting.cross_validate`), known-off points
included: `defaults.CAPACITY_UNCERTAINTY`, held to the committed fit by tests/test_sizing_calibration.py. The
families: `ttft` (time to first token), `itl` (token gaps: ITL and TPOT) and `throughput` (tokens/s and requests/s).

With |predicted / measured - 1| <= b, the measured value lies in [predicted / (1 + b), predicted / (1 - b)]: that is
`interval`. A production environment without a calibration of its replica is sized with `margin`: every step's kernel
time x max(1 / (1 - b_itl), 1 + b_throughput) and the frontend's floor x 1 / (1 - b_ttft), the band's pessimistic
edge, so its SLO holds if the model is off by as much as three published points in four. A calibration
(`blueprint calibrate`) replaces the band with its own residual (`from_residuals`) and the plan is sized on the
calibrated model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from blueprints.capacity.physics import band_cell, Correction
from blueprints.core import defaults

#: The metric family of each published metric (e2e latency mixes TTFT and token gaps: no family of its own).
FAMILIES = {"ttft_ms": "ttft", "itl_ms": "itl", "tpot_ms": "itl", "output_tokens_per_s": "throughput",
            "total_tokens_per_s": "throughput", "requests_per_s": "throughput"}
#: The regimes a plan's predictions are banded with: steady traffic.
BAND_REGIMES = ("closed-loop", "open-loop")
#: A band never reaches 100 %: [v / (1 + b), v / (1 - b)] needs b < 1.
MAX_BAND = 0.9
#: The share of points a band covers: its |error| percentile.
BAND_QUANTILE = 0.75


@dataclass(frozen=True)
class Band:
    """The p75 |error| of each metric family (fractions: 0.2 = 20 %) and where it comes from.

    Attributes:
        ttft, itl, throughput: per family.
        source: e.g. `cross-validated p75 |error| of the published points the measured vLLM kernel tables time` or
            `calibration stacks/calibration/...yaml, its residual after the fit`.
        calibrated: the band is a calibration's residual.
    """

    ttft: float
    itl: float
    throughput: float
    source: str
    calibrated: bool = False


def band_errors(comparisons: list, family: str) -> list[float]:
    """|error| of the comparisons (`calibration.Comparison`) of one metric family (`FAMILIES`) a band is read from:
    those in the steady-traffic regimes (`BAND_REGIMES`), or every regime's where no steady-traffic point measures
    that family (TensorRT-LLM's throughput is published from bursts only)."""
    same = [c for c in comparisons if FAMILIES.get(c.point.metric) == family]
    steady = [abs(c.error) for c in same if c.point.regime in BAND_REGIMES]
    return steady or [abs(c.error) for c in same]


def quantile(values: list[float], q: float = BAND_QUANTILE) -> float:
    """The nearest-rank q-quantile of `values` (the value q of them are at or below)."""
    data = sorted(values)
    return data[max(0, math.ceil(q * len(data)) - 1)] if data else 0.0


def band_for(step_source: str, engine: str = "vllm") -> Band:
    """The cross-validated band of a step source (`measured` or `roofline`) of `engine` (engines.yaml name),
    `defaults.CAPACITY_UNCERTAINTY`."""
    cell = defaults.CAPACITY_UNCERTAINTY[band_cell(engine, step_source)]
    what = ("measured vLLM kernel tables" if step_source == "measured" else "roofline") if engine == "vllm" \
        else f"measured {engine} kernel tables"
    return Band(cell["ttft"], cell["itl"], cell["throughput"],
                f"cross-validated p75 |error| of the {cell['points']} published points the {what} time "
                "(README, How far to trust the numbers)")


def from_residuals(ttft: list[float], itl: list[float], throughput: list[float], *, source: str) -> Band:
    """A calibration's band: the p75 |error| left after its fit, per family (a family it did not measure keeps the
    largest of the others)."""
    found = {k: quantile(v) for k, v in (("ttft", ttft), ("itl", itl), ("throughput", throughput)) if v}
    rest = max(found.values(), default=0.0)
    return Band(found.get("ttft", rest), found.get("itl", rest), found.get("throughput", rest), source,
                calibrated=True)


def interval(value: float, fraction: float) -> tuple[float, float]:
    """[value / (1 + b), value / (1 - b)]: where the measured value lies when the prediction is off by at most b."""
    b = min(fraction, MAX_BAND)
    return value / (1 + b), value / (1 - b)


def margin(band: Band) -> Correction:
    """The correction that sizes at the band's pessimistic edge: slower steps and a higher TTFT floor."""
    itl, thr, ttft = (min(x, MAX_BAND) for x in (band.itl, band.throughput, band.ttft))
    return Correction(step_time=round(max(1 / (1 - itl), 1 + thr), 3), ttft_floor=round(1 / (1 - ttft), 3))
