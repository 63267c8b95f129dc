"""Apply the requirements' `overrides:` to planned blueprints: each entry sets one derived setting in the stacks it
names, is recorded with its reason (`Blueprint.overrides`, a rationale line, the review of the change) and is checked
like any stack config: the blueprint's own bounds and consistency, and the floors of its requirements and policy
config (`blueprints.plan.floors`), so an override never weakens what they demand.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import ValidationError

from blueprints.contracts.blueprint import Blueprint
from blueprints.core.errors import RequirementsError, format_validation_error
from blueprints.plan.floors import floor_problems, stack_floors
from blueprints.plan.guardrails import Guardrails
from blueprints.requirements.overrides import OVERRIDABLE
from blueprints.requirements.service import Requirements


def apply_overrides(blueprints: Sequence[Blueprint], req: Requirements, *,
                    guardrails: Mapping[str, Guardrails]) -> list[Blueprint]:
    """`blueprints` with every override of `req` that names their environment (and part) applied.

    Raises:
        RequirementsError: an override names a part of a service that has none, a setting its stack's archetype
            lacks, a fraction for an integer setting, or a value the blueprint's bounds or the stack's floors refuse
            (rule override-applies); the message names `overrides[i]`.
    """
    compound = any(bp.pipeline is not None for bp in blueprints)
    for i, override in enumerate(req.overrides):
        if override.part is not None and not compound:
            raise RequirementsError(f"overrides[{i}].part: {req.service} is not a compound service (no parts); "
                                    "remove `part`", rule="override-applies")
    return [_applied(bp, req, guardrails.get(bp.environment)) for bp in blueprints]


def _applied(bp: Blueprint, req: Requirements, guardrails: Guardrails | None) -> Blueprint:
    part = bp.pipeline.part.value if bp.pipeline is not None else None
    mine = [(i, o) for i, o in enumerate(req.overrides)
            if (not o.environments or bp.environment in o.environments) and (o.part is None or o.part == part)]
    if not mine:
        return bp
    data = bp.model_dump(mode="json")
    applied, notes = [], []
    for i, override in mine:
        section, name = override.field.split(".")
        if name not in (data.get(section) or {}):
            raise RequirementsError(f"overrides[{i}].field: {bp.stack} ({bp.archetype.value}) has no "
                                    f"{override.field}; limit the override to the stacks that have it "
                                    "(environments, part)", rule="override-applies")
        value = override.value
        if OVERRIDABLE[override.field] is int:
            if not float(value).is_integer():
                raise RequirementsError(f"overrides[{i}].value: {override.field} is a whole number, got {value:g}",
                                        rule="override-applies")
            value = int(value)
        planned = data[section][name]
        data[section][name] = value
        applied.append({"field": override.field, "value": value, "planned": planned, "reason": override.reason})
        notes.append(f"override {override.field} = {value:g} (planned {planned if planned is None else f'{planned:g}'}"
                     f"): {override.reason}; the predictions are the plan's")
    data["overrides"] = applied
    data["rationale"] = [*data["rationale"], *notes]
    try:
        result = Blueprint.model_validate(data)
    except ValidationError as exc:
        raise RequirementsError(f"overrides ({', '.join(f'overrides[{i}]' for i, _ in mine)}) for {bp.stack}: "
                                + format_validation_error(exc, source="the overridden plan", data=data),
                                rule="override-applies") from None
    floors = stack_floors(req, bp.environment, service=bp.service, source="the requirements", guardrails=guardrails)
    problems = floor_problems(result, floors, policy_production=guardrails.production if guardrails else None)
    if problems:
        raise RequirementsError(f"overrides for {bp.stack} would weaken what the compliance and the policy config "
                                "demand: " + "; ".join(f"{'.'.join(map(str, p.loc))} {p.message}" for p in problems),
                                rule="override-applies")
    return result
