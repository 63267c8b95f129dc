"""`verify`'s report: a table for the terminal (rich), markdown for a pull request (tabulate's GitHub format), and
JSON (`VerifyReport.to_json`)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from tabulate import tabulate

from blueprints.operate.verify import VerifyReport


def render_terminal(report: VerifyReport, console: Console) -> None:
    """One row per check, failures in red, then the verdict."""
    table = Table(title=f"verify {report.stack} ({report.archetype})", show_lines=False)
    for column in ("", "check", "subject", "detail"):
        table.add_column(column, overflow="fold")
    for c in report.checks:
        table.add_row("[green]ok[/]" if c.ok else "[red]FAIL[/]", c.check, escape(c.subject), escape(c.detail))
    console.print(table)
    if report.ok:
        console.print(f"[green]{report.stack}: all {len(report.checks)} checks pass[/]")
    else:
        console.print(f"[red]{report.stack}: {len(report.failures)} of {len(report.checks)} checks fail[/]")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(report: VerifyReport) -> str:
    """A pull-request comment: the verdict, the failures first, then every check."""
    verdict = (f"**{report.stack}**: all {len(report.checks)} checks pass" if report.ok else
               f"**{report.stack}**: {len(report.failures)} of {len(report.checks)} checks fail")
    rows = [("ok" if c.ok else "**FAIL**", c.check, _cell(c.subject), _cell(c.detail))
            for c in sorted(report.checks, key=lambda c: c.ok)]
    table = tabulate(rows, headers=["", "check", "subject", "detail"], tablefmt="github")
    return f"### `blueprint verify {report.stack}` ({report.archetype})\n\n{verdict}\n\n{table}\n"
