"""Print the plan time of each bundled example (stacks/requirements/*.yaml), after imports and catalog load.

Usage: .venv/bin/python benchmarks/plan.py [--repeat N]
Target: under 1 s per example (every environment, within its policy guardrails, as `blueprint plan` runs it): LLM
plans simulate their replica candidates (blueprints/capacity). Each run starts from a cold cache, as a fresh
`blueprint plan` does. Informational only: no test fails on wall time.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from blueprints.capacity.planning import clear_caches
from blueprints.catalog import load_catalog
from blueprints.planner import plan
from blueprints.requirements import load_requirements
from blueprints.review import environment_guardrails

ROOT = Path(__file__).resolve().parent.parent
TARGET_S = 1.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per example; the median is reported. Default 5.")
    args = parser.parse_args()
    catalog = load_catalog()
    print(f"{'example':<28} {'archetype':<20} {'envs':>4} {'median s':>9} {'max s':>7}  target < {TARGET_S} s")
    for path in sorted((ROOT / "stacks" / "requirements").glob("*.yaml")):
        req = load_requirements(path)
        limits = environment_guardrails(req, ROOT / "policies" / "config")
        times = []
        for _ in range(args.repeat):
            clear_caches()
            start = time.perf_counter()
            blueprints = plan(req, catalog, guardrails=limits)
            times.append(time.perf_counter() - start)
        median = statistics.median(times)
        flag = "" if median < TARGET_S else "  SLOWER THAN TARGET"
        print(f"{path.stem:<28} {blueprints[0].archetype.value:<20} {len(blueprints):>4} {median:>9.3f} "
              f"{max(times):>7.3f}{flag}")


if __name__ == "__main__":
    main()
