"""Print offline-preview time per bundled stack (and per resource), to watch growth with resource count.

Run: `.venv/bin/python benchmarks/preview.py` (or `make bench`). Targets (issue 6): each example under 3 s.
Figures only; no test fails on wall time.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from blueprints.preview import run_preview  # noqa: E402

REPEATS = 3


def measure(stack: str, stacks_dir: Path) -> tuple[float, int]:
    """Median wall time of `REPEATS` previews of `stack`, seconds, and its resource count."""
    times, count = [], 0
    for _ in range(REPEATS):
        start = time.perf_counter()
        report = run_preview(stack, stacks_dir=stacks_dir, program=ROOT / "__main__.py")
        times.append(time.perf_counter() - start)
        count = len(report.resources)
    return statistics.median(times), count


def main() -> None:
    stacks_dir = ROOT / "stacks"
    run_preview(next(iter(sorted(stacks_dir.glob("Pulumi.*.yaml")))).name[7:-5], stacks_dir=stacks_dir,
                program=ROOT / "__main__.py")  # warm imports once, so the first stack is not charged for them
    print(f"{'stack':40} {'resources':>9} {'median s':>9} {'ms/resource':>12}")
    for path in sorted(stacks_dir.glob("Pulumi.*.yaml")):
        stack = path.name[len("Pulumi."):-len(".yaml")]
        seconds, count = measure(stack, stacks_dir)
        print(f"{stack:40} {count:9d} {seconds:9.3f} {1000 * seconds / max(count, 1):12.1f}")


if __name__ == "__main__":
    main()
