"""Print offline-preview time per bundled stack and for generated Triton estates of 25/50/100 models, with time
per resource, to watch growth with resource count.

Run: `.venv/bin/python benchmarks/preview.py` (or `make bench`). Targets: each example under 3 s; the 100-model
estate under 5 s; time per resource roughly flat (linear growth). Figures only; no test fails on wall time.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from blueprints.contracts.blueprint import Blueprint  # noqa: E402
from blueprints.review.preview import run_preview  # noqa: E402
from blueprints.contracts.stackconfig import read_stack_config, write_stack_configs  # noqa: E402

ESTATE_SIZES = (25, 50, 100)

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


def estate_blueprint(models: int) -> Blueprint:
    """The bundled search-relevance prod blueprint with its three models repeated to `models` entries.

    Built directly rather than planned: the planner places every model on every GPU, which does not fit 100 models
    (see the planner's Triton sizing); this measures how the program and preview scale with resource count.
    """
    base = read_stack_config(ROOT / "stacks" / "Pulumi.search-relevance-prod.yaml")
    served, configs = [], []
    for i in range(models):
        model, config = base.models[i % len(base.models)], base.engine.models[i % len(base.models)]
        name = f"{model.name}-{i:03d}"
        served.append(model.model_copy(update={"name": name}))
        configs.append(config.model_copy(update={"name": name}))
    return base.model_copy(update={"models": served, "engine": base.engine.model_copy(update={"models": configs})})


def main() -> None:
    stacks_dir = ROOT / "stacks"
    run_preview(next(iter(sorted(stacks_dir.glob("Pulumi.*.yaml")))).name[7:-5], stacks_dir=stacks_dir,
                program=ROOT / "__main__.py")  # warm imports once, so the first stack is not charged for them
    print(f"{'stack':40} {'resources':>9} {'median s':>9} {'ms/resource':>12}")
    for path in sorted(stacks_dir.glob("Pulumi.*.yaml")):
        stack = path.name[len("Pulumi."):-len(".yaml")]
        seconds, count = measure(stack, stacks_dir)
        print(f"{stack:40} {count:9d} {seconds:9.3f} {1000 * seconds / max(count, 1):12.1f}")
    with tempfile.TemporaryDirectory() as tmp:
        for size in ESTATE_SIZES:
            bp = estate_blueprint(size)
            folder = Path(tmp) / str(size)
            write_stack_configs([bp], folder, source="generated estate")
            seconds, count = measure(bp.stack, folder)
            label = f"triton estate, {size} models ({bp.archetype.value})"
            print(f"{label:40} {count:9d} {seconds:9.3f} {1000 * seconds / max(count, 1):12.1f}")


if __name__ == "__main__":
    main()
