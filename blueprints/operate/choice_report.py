"""`blueprint choose`'s report: the finalists' table (rich, for the terminal and a pull request), `choice.md` and the
chart (`choice.png`, `choice.svg`: per finalist its cost per 1M tokens, and its TTFT and ITL p95 at the planned load
against the SLO)."""

from __future__ import annotations

from pathlib import Path

from rich.table import Table

from blueprints.core import charts
from blueprints.core.errors import ChoiceError
from blueprints.operate.choose import Comparison
from blueprints.requirements.choice import MeasuredFinalist

#: The table's columns: header, and the cell of one finalist.
COLUMNS = ("finalist", "candidate", "verdict", "goodput/replica", "fleet at peak", "USD/month", "USD/1M tok (in/out)",
           "USD/1k req", "TTFT p50/p95/p99 ms", "ITL p50/p95/p99 ms", "failed", "cold start")


def _n(value: float | None, fmt: str = "{:,.4g}") -> str:
    return "-" if value is None else fmt.format(value)


def _pcts(p) -> str:
    return "-" if p is None else "/".join(_n(v, "{:,.0f}") if v is not None and v >= 10 else _n(v, "{:.3g}")
                                          for v in (p.p50, p.p95, p.p99))


def row(f: MeasuredFinalist, *, short: bool = False) -> list[str]:
    """One finalist's cells, in `COLUMNS` order (`short`: the candidate as `ChosenCandidate.short`, for a terminal)."""
    return [f.stack, f.candidate.short() if short else f.candidate.words(), f.verdict, _n(f.goodput_rps_per_replica, "{:.3g} req/s"),
            _n(f.replicas_at_peak, "{} replica(s)"), _n(f.monthly_usd, "${:,.0f}"),
            "-" if f.usd_per_million_tokens is None else (
                f"${f.usd_per_million_tokens:g} (${f.usd_per_million_input_tokens:g}/${f.usd_per_million_output_tokens:g})"),
            _n(f.usd_per_1k_requests, "${:g}"), _pcts(f.ttft_ms), _pcts(f.itl_ms), f"{f.failed_pct:g} %",
            _n(f.cold_start_s, "{:.0f} s")]


def table(c: Comparison, service: str) -> Table:
    """The finalists' table."""
    t = Table(title=f"choose {service}: finalists at {c.environment}'s planned peak, SLO TTFT p95 <= {c.slo[0]:g} ms, "
              f"ITL p95 <= {c.slo[1]:g} ms")
    for name in COLUMNS:
        t.add_column(name, no_wrap=name == "finalist")
    for f in c.finalists:
        t.add_row(*row(f, short=True), style="bold green" if f.verdict == "chosen" else ("red" if f.verdict == "failed" else None))
    return t


def markdown(c: Comparison, service: str, *, chart: str) -> str:
    """`choice.md`: what was chosen and why, the table, the chart and each result file with its sha256."""
    lines = [f"# Choice for {service}", ""]
    if c.choice is not None:
        [chosen] = [f for f in c.finalists if f.verdict == "chosen"]
        lines += [f"Chosen by measurement on {c.choice.decided}: **{chosen.stack}**, {chosen.candidate.words()}: the "
                  f"cheapest finalist meeting TTFT p95 <= {c.slo[0]:g} ms and ITL p95 <= {c.slo[1]:g} ms "
                  f"({chosen.goodput_rps_per_replica:g} requests/s per replica, {chosen.replicas_at_peak} replica(s) "
                  f"at {c.environment}'s planned peak, ${chosen.monthly_usd:,.0f}/month).", ""]
    else:
        lines += [f"Nothing chosen: {c.refusal}", ""]
    lines += ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row(f)) + " |" for f in c.finalists]
    lines += ["", f"![cost per 1M tokens, TTFT and ITL p95 against the SLO per finalist]({chart})", "",
              "Evidence (result files, sha256):", ""]
    lines += [f"- {f.stack}: `{e.file}` ({e.date}) sha256 `{e.sha256}`" for f in c.finalists for e in f.results]
    lines += [f"- {note}" for note in c.notes]
    return "\n".join(lines) + "\n"


def write_chart(c: Comparison, path: Path) -> None:
    """The chart as SVG or PNG (by suffix): per finalist, cost per 1M tokens, and TTFT and ITL p95 with the SLO.

    Raises:
        ChoiceError: the file cannot be written.
    """
    plt = charts.pyplot()

    names = [f.stack.rsplit("-", 2)[-2] + "-" + f.stack.rsplit("-", 1)[-1] for f in c.finalists]
    colors = ["tab:green" if f.verdict == "chosen" else "tab:red" if f.verdict == "failed" else "tab:blue"
              for f in c.finalists]
    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    panels = (("USD per 1M tokens", [f.usd_per_million_tokens or 0 for f in c.finalists], None),
              ("TTFT p95 at the planned load, ms", [(f.ttft_ms.p95 or 0) if f.ttft_ms else 0 for f in c.finalists],
               c.slo[0]),
              ("ITL p95 at the planned load, ms", [(f.itl_ms.p95 or 0) if f.itl_ms else 0 for f in c.finalists],
               c.slo[1]))
    for ax, (title, values, target) in zip(axes, panels):
        ax.bar(names, values, color=colors)
        if target is not None:
            ax.axhline(target, color="tab:red", linestyle="--", linewidth=1.0, label="SLO")
            ax.legend(loc="upper right")
        ax.set_title(title)
    fig.suptitle(f"finalists at {c.environment}'s planned peak (green: chosen, red: failed)")
    fig.tight_layout()
    charts.save(fig, path, what="chart", error=ChoiceError)


def write_report(c: Comparison, service: str, out_dir: Path) -> list[Path]:
    """`choice.md`, `choice.png` and `choice.svg` in `out_dir`; the paths written."""
    paths = [out_dir / "choice.png", out_dir / "choice.svg"]
    for p in paths:
        write_chart(c, p)
    md = out_dir / "choice.md"
    try:
        md.write_text(markdown(c, service, chart="choice.svg"), encoding="utf-8")
    except OSError as exc:
        raise ChoiceError(f"{md}: cannot write the report ({exc.strerror})") from None
    return [md, *paths]
