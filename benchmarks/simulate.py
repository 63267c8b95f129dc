"""Print the time of one simulated day at one-minute steps (the autoscaler polls every 15 s within each minute) per
bundled service stack, with its SLO attainment and expected vs peak-provisioned monthly cost.

Run: `.venv/bin/python benchmarks/simulate.py` (or `make bench`). Target: under 1 s per stack. Figures only; no test
fails on wall time.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from blueprints.contracts.blueprint import Blueprint  # noqa: E402
from blueprints.simulate.fleet import simulate  # noqa: E402
from blueprints.contracts.stackconfig import read_config  # noqa: E402

REPEATS = 3


def main() -> None:
    print(f"{'stack':<30} {'seconds':>8} {'SLO met':>8} {'expected $/mo':>14} {'peak $/mo':>10} {'replica-h':>10}")
    for path in sorted((ROOT / "stacks").glob("Pulumi.*.yaml")):
        subject = read_config(path)
        if not isinstance(subject, Blueprint):
            continue
        times = []
        for _ in range(REPEATS):
            start = time.perf_counter()
            result = simulate(subject, days=1)
            times.append(time.perf_counter() - start)
        print(f"{subject.stack:<30} {statistics.median(times):>8.3f} {result.slo_attainment:>8.1%} "
              f"{result.expected_monthly_usd:>14,.0f} {result.peak_monthly_usd:>10,.0f} {result.replica_hours:>10.1f}")


if __name__ == "__main__":
    main()
