"""Render a `Review` (`blueprints.review.changes`): the markdown plan.md leads with, and the brief lines the terminal prints
after `blueprint plan` and `blueprint preview --baseline`."""

from __future__ import annotations

from tabulate import tabulate

from blueprints.catalog.replacements import Effect
from blueprints.review.changes import FieldChange, PredictionChange, Replacement, Review, show

#: At most this many field changes per group in the terminal (the rest are counted); plan.md lists them all.
TERMINAL_FIELDS = 6


def value(p: PredictionChange, number: float | None) -> str:
    """A prediction in its unit: `$2,733.49`, `415.1 ms`, `6.97 requests/s`."""
    if number is None:
        return "-"
    if p.unit == "USD":
        return f"${_usd(number)}"
    if p.unit == "ms":
        return f"{number:,.1f} ms"
    return f"{number:,.3g} {p.unit}"


def _usd(amount: float) -> str:
    """Dollars to the cent, or to four significant figures below a dollar (a unit cost: `0.003501`)."""
    return f"{amount:,.2f}" if abs(amount) >= 1 else f"{amount:.4g}"


def delta(p: PredictionChange) -> str:
    """`+733.49 USD (+36.7 %)`, `=` when unchanged, `-` when a side is missing."""
    if p.delta is None:
        return "-"
    if p.delta == 0:
        return "="
    pct = f" ({p.delta / p.before:+.1%})" if p.before else ""
    amount = f"{'+' if p.delta > 0 else '-'}{_usd(abs(p.delta))} USD" if p.unit == "USD" else f"{p.delta:+,.4g} {p.unit}"
    return amount + pct


def _field_rows(changes: list[FieldChange]) -> list[list[str]]:
    return [[f"`{c.path}`" if c.label == c.path else f"{c.label} (`{c.path}`)", show(c.before), show(c.after)]
            for c in changes]


def _table(rows: list[list[str]], headers: list[str]) -> str:
    return tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True)


def _blocks(replacements: list[Replacement]) -> list[str]:
    warn = [r for r in replacements if r.effect is not Effect.ROLLOUT]
    roll = [r for r in replacements if r.effect is Effect.ROLLOUT]
    out = []
    if warn:
        out.append("> [!WARNING]\n> **This change replaces resources** (`blueprints/catalog/replacements.yaml`):\n"
                   + "\n".join(f"> - **{r.effect.value}**: {r.message}" for r in warn) + "\n")
    if roll:
        out.append("> [!NOTE]\n> Rolling updates:\n" + "\n".join(f"> - {r.message}" for r in roll) + "\n")
    if not replacements:
        out.append("No change replaces a resource.\n")
    return out


def _restart_why(restart: Replacement) -> str:
    """Why a traffic change rolls the pods: the pod template inputs it changed, before -> after."""
    shown = ", ".join(f"{p} {show(b)} -> {show(a)}" for p, (b, a) in zip(restart.paths, restart.values))
    return (f"{restart.resource_name}'s pod template carries values derived from the traffic ({shown}), so every "
            "replica is replaced, one surge at a time")


def review_markdown(review: Review) -> str:
    """`### What changed`: requirements and plan field by field, the predictions before -> after with their delta,
    and a warning listing every change that replaces a resource."""
    parts = ["### What changed\n"]
    if review.capacity_shift is not None:
        parts.append(f"> [!IMPORTANT]\n> **A calibration moves the capacity beyond the plan's band**: "
                     f"{review.capacity_shift}\n")
    if review.move is not None:
        parts.append(f"> [!CAUTION]\n> **`pulumi up` replaces the whole service**: {review.move.message}\n")
    whole = review.platform_replacement
    if whole is not None:
        parts.append(f"> [!CAUTION]\n> **`pulumi up` replaces the {whole.what} and everything on it**: "
                     f"{whole.message}\n")
    restart = review.traffic_restart
    if restart is not None:
        parts.append(f"> [!WARNING]\n> **This traffic-only change restarts every pod**: {_restart_why(restart)}\n")
    if review.adapters is not None:
        parts.append(f"> [!NOTE]\n> **{review.adapters.message}**\n")
    if review.platform:  # a platform's settings are its resources: the resource diff lists them
        parts.append("A platform's settings are its resources: see the changes against the base branch below.\n")
    elif not review.blueprint_known:
        parts.append("The baseline records no blueprint (a report of an older version): requirement and plan changes "
                     "are not known; predictions and resources are compared.\n")
    else:
        parts.append("**Requirements** (as the stack config records them):\n\n" + (
            _table(_field_rows(review.requirements), ["field", "before", "after"]) if review.requirements
            else "No requirement changed.") + "\n")
        parts.append("**Plan**:\n\n" + (_table(_field_rows(review.plan), ["field", "before", "after"])
                                        if review.plan else "No planned setting changed.") + "\n")
    if review.predictions:
        parts.append("**Predictions** (at this environment's peak; expected cost from the fleet simulation):\n\n"
                     + _table([[p.label, value(p, p.before), value(p, p.after), delta(p)] for p in review.predictions],
                              ["prediction", "before", "after", "change"]) + "\n")
    parts += _blocks(review.replacements)
    return "\n".join(parts)


def _brief(changes: list[FieldChange]) -> str:
    shown = "; ".join(f"{c.label} {show(c.before)} -> {show(c.after)}" for c in changes[:TERMINAL_FIELDS])
    more = len(changes) - TERMINAL_FIELDS
    return shown + (f"; +{more} more" if more > 0 else "")


def review_lines(review: Review) -> list[tuple[str, str]]:
    """The review in a few (kind, text) lines for a terminal: kind is `info`, `warning` (a replacement) or `note`
    (a rolling update). Empty when nothing changed."""
    lines: list[tuple[str, str]] = []
    if review.capacity_shift is not None:
        lines.append(("warning", f"a calibration moves the capacity beyond the plan's band: {review.capacity_shift}"))
    if review.move is not None:
        lines.append(("warning", f"pulumi up replaces the whole service: {review.move.summary}"))
    whole = review.platform_replacement
    if whole is not None:
        lines.append(("warning", f"pulumi up replaces the {whole.what} and everything on it: {whole.summary}"))
    if review.traffic_restart is not None:
        lines.append(("warning", f"this traffic-only change restarts every pod: {_restart_why(review.traffic_restart)}"))
    if review.adapters is not None:
        lines.append(("note", review.adapters.message))
    if review.requirements:
        lines.append(("info", f"requirements: {_brief(review.requirements)}"))
    if review.plan:
        lines.append(("info", f"plan: {_brief(review.plan)}"))
    changed = review.changed_predictions
    if changed:
        lines.append(("info", "predictions: " + "; ".join(
            f"{p.label} {value(p, p.before)} -> {value(p, p.after)} ({delta(p)})" for p in changed)))
    for r in review.replacements:
        if r is review.move or r is whole:
            continue
        lines.append(("note" if r.effect is Effect.ROLLOUT else "warning", r.summary))
    return lines
