"""A fleet simulation for people: a plot (SVG or PNG: traffic, replicas, predicted p95 against the SLO) and a Mermaid
`xychart-beta` for plan.md. Pure rendering of a `SimulationResult`; deterministic (SVG metadata and hash salt fixed).
"""

from __future__ import annotations

from pathlib import Path

from blueprints.core import charts
from blueprints.core.errors import BlueprintError
from blueprints.simulate.fleet import SimulationResult

#: Points per series in the Mermaid chart (the minutes are averaged into this many buckets).
MERMAID_POINTS = 48


def _buckets(values: list[float], count: int) -> list[float]:
    size = max(1, len(values) // count)
    return [sum(values[i:i + size]) / len(values[i:i + size]) for i in range(0, len(values), size)][:count]


def mermaid_xychart(result: SimulationResult) -> str:
    """A Mermaid xychart of replicas (bars) and traffic (line) over the simulated period."""
    rps = _buckets(result.minutes["rps"], MERMAID_POINTS)
    replicas = _buckets(result.minutes["replicas"], MERMAID_POINTS)
    hours = len(result.minutes["rps"]) / 60
    top = max([*rps, *replicas, 1.0]) * 1.1
    return "\n".join([
        "xychart-beta",
        f'  title "{result.stack}: replicas (bars) and requests/s (line) over {hours:g} h"',
        f'  x-axis "hour" 0 --> {hours:g}',
        f'  y-axis "replicas, requests/s" 0 --> {top:.3g}',
        "  bar [" + ", ".join(f"{v:.2f}" for v in replicas) + "]",
        "  line [" + ", ".join(f"{v:.2f}" for v in rps) + "]",
    ])


def summary_markdown(result: SimulationResult) -> str:
    """plan.md's simulation section: the violations first (when any), the figures and the Mermaid chart."""
    head = f"**{'SLO violated' if result.violations() else 'SLO'}**: {result.slo_words()}\n\n"
    return (f"{head}| SLO attainment | expected monthly | peak-provisioned monthly | replica-hours | cold starts | "
            f"worst queue (requests) |\n"
            f"|---|---|---|---|---|---|\n"
            f"| {result.slo_attainment:.1%} | ${result.expected_monthly_usd:,.0f} | ${result.peak_monthly_usd:,.0f} | "
            f"{result.replica_hours:,.1f} | {result.cold_starts} (max {result.cold_start_max_s:.0f} s) | "
            f"{result.worst_queue_requests:,.0f} |\n\n```mermaid\n{mermaid_xychart(result)}\n```\n")


def write_plot(result: SimulationResult, path: Path) -> None:
    """Write the plot as SVG or PNG (by the file suffix).

    Raises:
        BlueprintError: another suffix, or the file cannot be written.
    """
    if path.suffix not in (".svg", ".png"):
        raise BlueprintError(f"{path}: the plot is written as .svg or .png")
    plt = charts.pyplot()

    minutes = result.minutes
    hours = [m / 60 for m in range(len(minutes["rps"]))]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    top.plot(hours, minutes["rps"], color="tab:blue", linewidth=0.8, label="requests/s")
    top.set_ylabel("requests/s")
    right = top.twinx()
    right.step(hours, minutes["replicas"], color="tab:orange", where="post", linewidth=1.0, label="replicas")
    right.set_ylabel("replicas")
    missed = (f"{result.over_target} in {result.slo_violation_minutes:,} minutes (longest run "
              f"{result.slo_longest_violation_minutes:,})" if result.slo_violation_minutes else "every minute in SLO")
    top.set_title(f"{result.stack}: {missed}, "
                  rf"\${result.expected_monthly_usd:,.0f}/month expected vs \${result.peak_monthly_usd:,.0f} at peak")
    p95 = [v if v >= 0 else float("nan") for v in minutes["p95_ms"]]
    bottom.plot(hours, p95, color="tab:green", linewidth=0.8, label="predicted p95")
    bottom.plot(hours, minutes["slo_ms"], color="tab:red", linestyle="--", linewidth=1.0, label="SLO")
    bottom.set_ylabel("p95, ms")
    bottom.set_xlabel("hour")
    bottom.legend(loc="upper right")
    fig.tight_layout()
    charts.save(fig, path, what="plot")
