"""Print the LLM capacity model against published measurements: predicted vs published, error, median, worst.

Usage: .venv/bin/python benchmarks/sizing.py [--fit]

The points are blueprints/catalog/calibration-points.yaml (each with its source, its engine and how the figure is
defined; see that file's header for the measurement biases corrected). `--fit` refits, one at a time and in the
order below, the constants documented as fitted, each on the points named beside it (least squares on log error,
the others held at their current values), and prints current vs fitted values: the numbers in
blueprints/core/defaults.py and catalog/gpus.yaml come from this. Informational: nothing is written.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from blueprints.core import defaults  # noqa: E402
from blueprints.capacity.calibration import (  # noqa: E402
    MEDIAN_TOLERANCE,
    POINT_TOLERANCE,
    compare,
    load_points,
    median_abs_error,
    predict,
)
from blueprints.catalog import Catalog, load_catalog  # noqa: E402


def report(catalog: Catalog) -> None:
    start = time.perf_counter()
    rows = compare(catalog)
    elapsed = time.perf_counter() - start
    print(f"{'point':<40} {'metric':<20} {'engine':<19} {'predicted':>10} {'published':>10} {'error':>8}")
    for c in rows:
        flag = ""
        if abs(c.error) > POINT_TOLERANCE:
            flag = "  KNOWN OFF (see known_off)" if c.point.known_off else "  OUTSIDE +-35 %"
        print(f"{c.point.id:<40} {c.point.metric:<20} {c.point.engine_profile:<19} {c.predicted:>10.2f} "
              f"{c.point.value:>10.2f} {c.error:>+8.1%}{flag}")
    worst = max(rows, key=lambda c: abs(c.error))
    inside = [c for c in rows if not c.point.known_off]
    worst_in = max(inside, key=lambda c: abs(c.error))
    print()
    print(f"points: {len(rows)} ({len(rows) - len(inside)} listed as known off); "
          f"median |error| {median_abs_error(rows):.1%} (target <= {MEDIAN_TOLERANCE:.0%}); "
          f"worst {abs(worst.error):.1%} ({worst.point.id})")
    print(f"without the known-off points: median |error| {median_abs_error(inside):.1%}, worst "
          f"{abs(worst_in.error):.1%} ({worst_in.point.id}; band +-{POINT_TOLERANCE:.0%})")
    fitted = {pid for *_, ids in FITS for pid in ids}
    held_out = [c for c in inside if c.point.id not in fitted]
    print(f"{len(fitted)} points fix the fitted constants (see --fit), so their errors are in-sample; on the "
          f"{len(held_out)} points no constant was fitted to: median |error| {median_abs_error(held_out):.1%}, worst "
          f"{max(abs(c.error) for c in held_out):.1%}")
    for c in rows:
        if c.point.known_off:
            print(f"  known off: {c.point.id}: {c.point.known_off}")
    print(f"({elapsed:.2f} s)")


# --- fitting --------------------------------------------------------------------------------------------------------

def _gpu_setter(names: tuple[str, ...]) -> Callable[[Catalog, float], Catalog]:
    def set_mfu(catalog: Catalog, value: float) -> Catalog:
        gpus = dict(catalog.gpus)
        for name in names:
            gpus[name] = gpus[name].model_copy(update={"prefill_mfu": value})
        return catalog.model_copy(update={"gpus": gpus})
    return set_mfu


def _dict_setter(table: dict, key: str, sub: str | None = None) -> Callable[[Catalog, float], Catalog]:
    def set_value(catalog: Catalog, value: float) -> Catalog:
        if sub is None:
            table[key] = value
        else:
            table[key][sub] = value
        return catalog
    return set_value


def _attr_setter(name: str) -> Callable[[Catalog, float], Catalog]:
    def set_value(catalog: Catalog, value: float) -> Catalog:
        setattr(defaults, name, value)
        return catalog
    return set_value


#: (constant, setter, current-value getter, search range, the points it is fitted to).
FITS = [
    ("SERVER_OVERHEAD_MS", _attr_setter("SERVER_OVERHEAD_MS"), lambda c: defaults.SERVER_OVERHEAD_MS, (1.0, 20.0),
     ["facts2-llama31-8b-h100-c1-ttft"]),
    ("ENGINE_PROFILES['vllm-0.11'].step_overhead_ms",
     _dict_setter(defaults.ENGINE_PROFILES, "vllm-0.11", "step_overhead_ms"),
     lambda c: defaults.ENGINE_PROFILES["vllm-0.11"]["step_overhead_ms"], (0.0, 3.0),
     ["facts1-llama31-8b-a100-40gb-c1-itl", "facts2-llama31-8b-h100-c1-itl"]),
    ("ENGINE_PROFILES['vllm-0.11'].host_ms_per_sequence",
     _dict_setter(defaults.ENGINE_PROFILES, "vllm-0.11", "host_ms_per_sequence"),
     lambda c: defaults.ENGINE_PROFILES["vllm-0.11"]["host_ms_per_sequence"], (0.1, 2.0),
     ["facts2-llama31-8b-h100-c16-itl"]),
    ("ENGINE_PROFILES['vllm-0.6.3-offline'].step_overhead_ms",
     _dict_setter(defaults.ENGINE_PROFILES, "vllm-0.6.3-offline", "step_overhead_ms"),
     lambda c: defaults.ENGINE_PROFILES["vllm-0.6.3-offline"]["step_overhead_ms"], (0.0, 6.0),
     ["qwen25-7b-bf16-a100-c1-in1"]),
    ("ALLREDUCE_HOP_US['nvlink']", _dict_setter(defaults.ALLREDUCE_HOP_US, "nvlink"),
     lambda c: defaults.ALLREDUCE_HOP_US["nvlink"], (0.5, 30.0), ["qwen25-72b-bf16-a100x4-c1-in1"]),
    ("gpus a100-40gb/a100-80gb prefill_mfu", _gpu_setter(("a100-40gb", "a100-80gb")),
     lambda c: c.gpus["a100-80gb"].prefill_mfu, (0.3, 1.0),
     ["qwen25-7b-bf16-a100-c1-in6k", "qwen25-7b-bf16-a100-c1-in14k", "qwen25-7b-bf16-a100-c1-in30k",
      "qwen25-72b-bf16-a100x4-c1-in30k", "qwen25-32b-bf16-a100x2-c1-in30k"]),
    ("WEIGHT_BANDWIDTH_FACTOR['awq']", _dict_setter(defaults.WEIGHT_BANDWIDTH_FACTOR, "awq"),
     lambda c: defaults.WEIGHT_BANDWIDTH_FACTOR["awq"], (0.2, 1.2),
     ["qwen25-7b-awq-a100-c1-in1", "qwen25-32b-awq-a100-c1-in1", "qwen25-72b-awq-a100x2-c1-in1"]),
    ("WEIGHT_BANDWIDTH_FACTOR['gptq-int4']", _dict_setter(defaults.WEIGHT_BANDWIDTH_FACTOR, "gptq-int4"),
     lambda c: defaults.WEIGHT_BANDWIDTH_FACTOR["gptq-int4"], (0.2, 1.2), ["qwen25-72b-gptq4-a100x1-c1-in1"]),
    ("WEIGHT_BANDWIDTH_FACTOR['gptq-int8']", _dict_setter(defaults.WEIGHT_BANDWIDTH_FACTOR, "gptq-int8"),
     lambda c: defaults.WEIGHT_BANDWIDTH_FACTOR["gptq-int8"], (0.2, 1.2),
     ["qwen25-7b-gptq8-a100-c1-in1", "qwen25-72b-gptq8-a100x2-c1-in1"]),
    ("WEIGHT_BANDWIDTH_FACTOR['fp8']", _dict_setter(defaults.WEIGHT_BANDWIDTH_FACTOR, "fp8"),
     lambda c: defaults.WEIGHT_BANDWIDTH_FACTOR["fp8"], (0.2, 1.2), ["facts3-llama33-70b-fp8-h100x2-c1-itl"]),
    ("QUANTIZED_PREFILL_FACTOR['awq']", _dict_setter(defaults.QUANTIZED_PREFILL_FACTOR, "awq"),
     lambda c: defaults.QUANTIZED_PREFILL_FACTOR["awq"], (0.2, 1.2),
     ["qwen25-7b-awq-a100-c1-in30k", "qwen25-72b-awq-a100x2-c1-in14k"]),
    ("MFU", _attr_setter("MFU"), lambda c: defaults.MFU, (0.2, 1.0), ["facts3-llama33-70b-fp8-h100x2-c1-ttft"]),
    ("gpus a10g prefill_mfu", _gpu_setter(("a10g",)), lambda c: c.gpus["a10g"].prefill_mfu, (0.2, 1.0),
     ["a10g-llama3-8b-c1-ttft"]),
]


def _loss(catalog: Catalog, ids: list[str]) -> float:
    points = [p for p in load_points() if p.id in ids]
    return sum(math.log(predict(p, catalog) / p.value) ** 2 for p in points)


def fit(catalog: Catalog, rounds: int = 2) -> None:
    """Golden-section search per constant, in FITS order, `rounds` times over."""
    current = {name: getter(catalog) for name, _, getter, _, _ in FITS}
    for _ in range(rounds):
        for name, setter, getter, (lo, hi), ids in FITS:
            ratio = (math.sqrt(5) - 1) / 2

            def loss(value: float) -> float:
                return _loss(setter(catalog, value), ids)

            a, b = lo, hi
            c, d = b - ratio * (b - a), a + ratio * (b - a)
            fc, fd = loss(c), loss(d)
            for _ in range(40):
                if fc < fd:
                    b, d, fd = d, c, fc
                    c = b - ratio * (b - a)
                    fc = loss(c)
                else:
                    a, c, fc = c, d, fd
                    d = a + ratio * (b - a)
                    fd = loss(d)
            best = round((a + b) / 2, 3)
            catalog = setter(catalog, best)
    print(f"{'constant':<58} {'current':>9} {'fitted':>9}  fitted to")
    for name, _, getter, _, ids in FITS:
        print(f"{name:<58} {current[name]:>9.3f} {getter(catalog):>9.3f}  {', '.join(ids)}")
    print()
    print("with the fitted values:")
    rows = compare(catalog)
    print(f"median |error| {statistics.median(abs(c.error) for c in rows):.1%}, worst "
          f"{max(abs(c.error) for c in rows):.1%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fit", action="store_true", help="refit the fitted constants and print them")
    args = parser.parse_args()
    catalog = load_catalog()
    if args.fit:
        fit(catalog)
    else:
        report(catalog)


if __name__ == "__main__":
    main()
