"""Proven hints: before a refusal says "raise X to >= N", the plan is run again with X = N and must succeed;
otherwise the message names every change that must move together, or says that none named suffices.

A refusal (`SizingError`) carries the changes it proposes (`Fix`: a requirements field or a policy limit, the value,
and the words of the message that propose it). `prove` re-plans with each (`Replan`: the planner's own path over
every environment asked for), keeps those that plan, and for one that does not, adds the change the new refusal
proposes for another field and tries both together. The words of each fix in the message are replaced by what was
proven. A change beyond its field's bound (the requirements model's, e.g. slo.latency_p95_ms <= 600000) is never
proposed: the message says the field cannot go far enough. Any other refusal of a re-plan (`BlueprintError`) counts
as "does not plan": the search never raises. Pure: the re-plans are the planner's own, deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from pydantic import ValidationError

from blueprints.core.errors import BlueprintError, Fix, RequirementsError, SizingError, problem_lines
from blueprints.plan.guardrails import Guardrails
from blueprints.requirements.service import Requirements

#: Re-plans with the given changes applied, raising SizingError when the plan still fails.
Replan = Callable[[Sequence[Fix]], object]

#: Re-plans one alternative may take when each refusal asks more of the same field (an idle floor that load raises).
MAX_STEPS = 3

#: `Fix.field` of a policy limit: `policy:<env>:maxGpus` (the environment's policy config, gpu-quota).
POLICY_PREFIX = "policy:"


class BeyondBound(RequirementsError):
    """Raised by `apply_fixes` when a proposed change breaks its field's bound; `problem`: the field and the bound."""

    def __init__(self, fix: Fix, problem: str) -> None:
        super().__init__(f"{fix.field}={_say(fix.value)} is beyond its bound ({problem})")
        self.fix, self.problem = fix, problem


def _say(value: float) -> str:
    """A proposed value as the message writes it: 13,872,663 or 0.5."""
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


def policy_field(env: str, key: str) -> str:
    """The `Fix.field` naming an environment's policy limit, e.g. `policy:prod:maxGpus`."""
    return f"{POLICY_PREFIX}{env}:{key}"


def budget_fix(monthly_usd: float) -> Fix:
    """The fix "raise budget.max_monthly_usd to >= <the planned peak's cost>"."""
    value = math.ceil(monthly_usd)
    return Fix("budget.max_monthly_usd", value, f"raise budget.max_monthly_usd to >= {value}")


def apply_fixes(req: Requirements, guardrails: Mapping[str, Guardrails],
                fixes: Sequence[Fix]) -> tuple[Requirements, dict[str, Guardrails]]:
    """`req` and the environments' guardrails with `fixes` applied: a requirements field by its dotted path
    (`budget.max_monthly_usd`, `slo.ttft_p95_ms`, `environments.prod.max_replicas`, `hardware.edge_nodes.count`), a
    policy limit by `policy_field` (`maxGpus`).

    Raises:
        BeyondBound: a change puts its field out of the requirements model's bounds (the first such change named).
    """
    data = req.model_dump(mode="json")
    limits = dict(guardrails)
    for fix in fixes:
        if fix.field.startswith(POLICY_PREFIX):
            env, key = fix.field[len(POLICY_PREFIX):].split(":")
            assert key == "maxGpus", f"no policy fix for {key}"
            limits[env] = replace(limits[env], max_gpus=int(fix.value))
            continue
        *path, last = fix.field.split(".")
        node = data
        for key in path:
            if node.get(key) is None:
                node[key] = {}
            node = node[key]
        node[last] = int(fix.value) if float(fix.value).is_integer() else fix.value
    try:
        return Requirements.model_validate(data), limits
    except ValidationError as exc:
        lines = problem_lines(exc, data=data)
        named = [(where, msg) for where, msg, _ in lines for fix in fixes if where == fix.field]
        where, msg = named[0] if named else lines[0][:2]
        raise BeyondBound(next((f for f in fixes if f.field == where), fixes[-1]), f"{where}: {msg}") from None


def prove(exc: SizingError, replan: Replan, *, unnamed: Callable[[], Sequence[Fix]] | None = None) -> SizingError:
    """`exc` with each fix it proposes proven by a re-plan (see the module docstring): a fix that plans keeps its
    words; one that does not is replaced by itself and the next change it needs together when that pair plans, else
    flagged as not enough on its own. When none plans, `unnamed` gives changes the refusal did not name (the
    `maxGpus` a GPU quota that held the plan back needs, `blueprints.plan.planner.quota_raises`), proposed together
    when they plan. Returns a refusal whose `fixes` are the proven ones (each a tuple of changes to make together)."""
    if not exc.fixes:
        return exc
    message, proven = str(exc), []
    for alternatives in _grouped(exc.fixes):
        words = alternatives[0].slot or alternatives[0].text
        outcome = _first_that_plans(alternatives, replan)
        if isinstance(outcome, BeyondBound):
            message = message.replace(words, f"{outcome.fix.field} cannot go far enough: it would need >= "
                                             f"{_say(outcome.fix.value)}, beyond its bound ({outcome.problem})")
            continue
        if outcome is None:
            message = message.replace(words, f"{words} is not enough on its own (the plan still fails, and no "
                                             "other single change it then needs makes it plan)")
            continue
        proven.append(outcome)
        message = message.replace(words, " and ".join(f.text for f in outcome) + (" together" if len(outcome) > 1
                                                                                    else ""))
    if not proven:
        extra = tuple(unnamed()) if unnamed is not None else ()
        if extra and _plans(replan, extra):
            proven.append(extra)
            message += (". No change named here plans, but the GPU quota held the plan back: "
                        + " and ".join(f.text for f in extra) + (" together" if len(extra) > 1 else "") + " plans")
        else:
            message += ". No change named here plans on its own or with the next one it needs"
    return SizingError(message, rule=exc.rule, fixes=tuple(f for group in proven for f in group),
                       groups=tuple(proven))


def _plans(replan: Replan, fixes: Sequence[Fix]) -> bool:
    try:
        replan(list(fixes))
    except BlueprintError:
        return False
    return True


def _grouped(fixes: Sequence[Fix]) -> list[list[Fix]]:
    """The fixes by their words in the message: alternatives for one slot (e.g. the least and the cheapest option's
    GPUs) share `text` of the first, in the order tried."""
    groups: dict[str, list[Fix]] = {}
    for fix in fixes:
        groups.setdefault(fix.slot or fix.text, []).append(fix)
    return list(groups.values())


def _first_that_plans(alternatives: Sequence[Fix], replan: Replan) -> tuple[Fix, ...] | BeyondBound | None:
    """The first alternative that plans alone (or at the higher value its own refusal then asks of the same field,
    `MAX_STEPS` times at most), else, of the alternatives that plan with the one change their own refusal then
    proposes for another field, the pair asking least of that change; else the bound the first alternative breaks
    when every alternative breaks one on its own (`BeyondBound`); None otherwise."""
    refusals: list[tuple[Fix, BlueprintError]] = []
    beyond: list[BeyondBound] = []
    for fix in alternatives:
        lower: tuple[Fix, BlueprintError] | None = None  # the step before, when its refusal asked for more
        for _ in range(MAX_STEPS):
            try:
                replan([fix])
                return (fix,)
            except BeyondBound as out:  # the step before is the most this field can give
                if lower is None:
                    beyond.append(out)
                else:
                    refusals.append(lower)
                break
            except BlueprintError as again:
                higher = next((f for f in getattr(again, "fixes", ()) if f.field == fix.field and f.value > fix.value),
                              None)
                if higher is None:
                    refusals.append((fix, again))
                    break
                lower, fix = (fix, again), higher
    pairs = []
    for fix, again in refusals:
        more = next((f for f in getattr(again, "fixes", ()) if f.field != fix.field), None)
        if more is None:
            continue
        try:
            replan([fix, more])
            pairs.append((fix, more))
        except BlueprintError:
            continue
    # Of the pairs that plan, the one asking least of the change it adds (e.g. the smaller budget).
    best = min(pairs, key=lambda p: (p[1].field, p[1].value), default=None)
    return best if best is not None or len(beyond) < len(alternatives) else beyond[0]
