"""Print the plan time of each bundled example (stacks/requirements/*.yaml), after imports and catalog load.

Usage: .venv/bin/python benchmarks/plan.py [--repeat N] [--as-of YYYY-MM-DD]
Target: under 1 s per example (every environment and its platforms, within its policy guardrails and over the
committed stack configs, as `blueprint plan` runs it): LLM plans simulate their replica candidates
(blueprints/capacity); a compound service plans two parts per environment, and more when its end-to-end budget
tightens their targets (blueprints/plan/compound/planner.py). Each run starts from a cold cache, as a fresh
`blueprint plan` does; `cpu s` is the median process time (CPU of this process), steadier than wall time on a
shared machine. `runs` counts the replica simulations (`blueprints.capacity.simulator.simulate`: 300-800 requests each,
every vLLM step an event) and `in runs` their share of the CPU; `fleet` the simulated days of the fleet
(`blueprints.simulate.fleet`, a step per 15 s of the autoscaler). Informational only: no test fails on wall time.
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import time
from pathlib import Path

from blueprints.capacity import correction, planning, replica, runs, simulator
from blueprints.plan import scaling
from blueprints.simulate import fleet
from blueprints.workspace import forget_plans, plan_requirements_file, requirements_files

ROOT = Path(__file__).resolve().parent.parent
TARGET_S = 1.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per example; the median is reported. Default 5.")
    parser.add_argument("--as-of", type=dt.date.fromisoformat, default=dt.date.today(),
                        help="plan date (YYYY-MM-DD). Default today.")
    args = parser.parse_args()
    counted = _count_simulations()
    print(f"{'example':<28} {'archetype(s)':<30} {'stacks':>6} {'median s':>9} {'max s':>7} {'cpu s':>7} "
          f"{'runs':>5} {'in runs':>7} {'fleet':>5}  target < {TARGET_S} s")
    for path in requirements_files(ROOT / "stacks" / "requirements"):
        times, cpu = [], []
        for _ in range(args.repeat):
            planning.clear_caches()
            replica.clear_cache()
            scaling.forget_days()
            forget_plans()  # else every repeat after the first is the remembered plan (workspace.remembered_plan)
            counted.update(runs=0, runs_cpu=0.0, days=0)
            start, start_cpu = time.perf_counter(), time.process_time()
            blueprints = plan_requirements_file(path, as_of=args.as_of, policy_dir=ROOT / "policies" / "config",
                                                stacks_dir=ROOT / "stacks").blueprints
            times.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
        median = statistics.median(times)
        flag = "" if median < TARGET_S else "  SLOWER THAN TARGET"
        archetypes = "+".join(dict.fromkeys(bp.archetype.value for bp in blueprints))  # a compound service: both
        share = counted["runs_cpu"] / cpu[-1] if cpu[-1] > 0 else 0.0
        print(f"{path.stem:<28} {archetypes:<30} {len(blueprints):>6} {median:>9.3f} {max(times):>7.3f} "
              f"{statistics.median(cpu):>7.3f} {counted['runs']:>5} {share:>7.0%} {counted['days']:>5}{flag}")


def _count_simulations() -> dict:
    """Count the replica simulations (and their CPU) and the fleet's simulated days of each plan (the last run's)."""
    counted: dict = {"runs": 0, "runs_cpu": 0.0, "days": 0}
    replica_run, fleet_day = simulator.simulate, fleet.simulate

    def counting_run(*args, **kwargs):
        start = time.process_time()
        try:
            return replica_run(*args, **kwargs)
        finally:
            counted["runs"] += 1
            counted["runs_cpu"] += time.process_time() - start

    def counting_day(*args, **kwargs):
        counted["days"] += 1
        return fleet_day(*args, **kwargs)

    runs.simulate = correction.simulate = counting_run  # the modules that call the simulator
    fleet.simulate = counting_day
    return counted


if __name__ == "__main__":
    main()
