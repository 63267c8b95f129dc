"""The requirements' `choice` (`blueprint choose`) in the plan: the chosen candidate is kept while its evidence holds.

The evidence holds while the requirements still describe what it measured (`ChoiceBasis`): the same model, the same
workload (mean prompt and output lengths, shared prefix, sessions) and SLO targets no tighter than the goodput was
counted against (a looser target keeps it: what met the tighter one meets it), and while the candidate is still
allowed (its engine in `operations.engines`, its instance family in `hardware.allowed_instance_families`). Then the
plan pins its hardware (`planner.plan(..., pinned=, pinned_by=)`, as a pilot's finalist is pinned) and says so first
in the rationale, and gives no environment fewer replicas than the measured goodput per replica needs at its peak
(`pinned_rps`); otherwise it plans as if there were no choice, with a warning naming the changed field.
Pure: the requirements in, the pinned hardware (or the warning) out.
"""

from __future__ import annotations

from blueprints.catalog import Catalog
from blueprints.contracts.sections import Archetype
from blueprints.plan.builders.context import PlanContext
from blueprints.plan.options.llm import replicas_for
from blueprints.plan.options.search import (
    peak_rps, price_factor, replicas_floor, resolve_models, service_fixed_monthly_usd,
)
from blueprints.plan.stability import Hardware
from blueprints.requirements.choice import Choice
from blueprints.requirements.service import Requirements

#: How a warning that re-opens the choice starts (the plan output and the tests read it).
REOPENED = "choice re-opened"


def basis_changes(req: Requirements, choice: Choice) -> list[tuple[str, object, object]]:
    """The requirements fields that moved away from what the evidence measured: (field path, measured, now)."""
    spec, traffic, at, traffic_at = req.model_entries()[0]
    b = choice.basis
    model, lengths = ".".join(map(str, at)), ".".join(map(str, traffic_at))
    pairs = ((f"{model}.id", b.model, spec.id or spec.served_name),
             (f"{lengths}.mean_input_tokens", b.mean_input_tokens, traffic.mean_input_tokens),
             (f"{lengths}.mean_output_tokens", b.mean_output_tokens, traffic.mean_output_tokens),
             (f"{lengths}.shared_prefix_tokens", b.shared_prefix_tokens, traffic.shared_prefix_tokens),
             (f"{lengths}.sessions", b.sessions, traffic.sessions))
    changed = [(f, was, now) for f, was, now in pairs if was != now]
    for field, counted in (("ttft_p95_ms", b.ttft_p95_ms), ("itl_p95_ms", b.itl_p95_ms)):
        target = getattr(req.slo, field)
        if target is None or target < counted:  # tightened (or no longer a target the goodput can be counted against)
            changed.append((f"slo.{field}", counted, target))
    return changed


def disallowed(req: Requirements, choice: Choice) -> tuple[str, str] | None:
    """(field, why) when the requirements no longer allow the chosen candidate; None when they do."""
    c = choice.candidate
    if c.archetype == "vllm-gpu" and c.engine is not None and c.engine not in req.operations.engines:
        return "operations.engines", f"{c.engine} is not in {list(req.operations.engines)}"
    families = req.hardware.allowed_instance_families
    family = c.instance_type.removeprefix("ml.").split(".")[0]
    if families and family not in families:
        return "hardware.allowed_instance_families", f"{family} is not in {list(families)}"
    if c.archetype == "sagemaker-endpoint" and req.operations.preference.value == "self-hosted":
        return "operations.preference", "self-hosted excludes the chosen SageMaker endpoint"
    return None


def chosen_hardware(req: Requirements) -> tuple[Hardware | None, str | None]:
    """The hardware the plan pins for the requirements' `choice` and why (`choice_words`), or (None, None) without a
    choice, or (None, a warning starting with `REOPENED` naming the changed field) when its evidence no longer
    holds."""
    choice = req.choice
    if choice is None:
        return None, None
    changes = basis_changes(req, choice)
    if changes:
        field, was, now = changes[0]
        return None, (f"{REOPENED}: {field} changed since the finalists were measured on {choice.decided} ({was!r} "
                      f"measured, {now!r} now): the evidence no longer holds, so this plan chooses as if there were "
                      "no choice; pilot and choose again (`blueprint pilot`, `blueprint benchmark`, `blueprint "
                      "choose`)")
    refused = disallowed(req, choice)
    if refused is not None:
        return None, (f"{REOPENED}: {refused[0]}: {refused[1]}; the chosen candidate ({choice.candidate.words()}, "
                      f"measured on {choice.decided}) is no longer allowed, so this plan chooses as if there were no "
                      "choice")
    c = choice.candidate
    managed = c.archetype == "sagemaker-endpoint"
    return (Hardware(Archetype(c.archetype), c.instance_type, c.tensor_parallel_size,
                     None if managed else (c.kv_cache_dtype or "auto"), engine=None if managed else (c.engine or "vllm")),
            choice_words(choice))


def chosen_rps(choice: Choice) -> float | None:
    """The chosen finalist's measured goodput per replica within the SLO, requests/s (None when not recorded)."""
    return next(f.goodput_rps_per_replica for f in choice.finalists if f.verdict == "chosen")


def choice_words(choice: Choice) -> str:
    """The rationale's first words for a kept choice: `chosen by measurement on <date>: <candidate>, ...`."""
    [chosen] = [f for f in choice.finalists if f.verdict == "chosen"]
    others = len(choice.finalists) - 1
    goodput = (f"{chosen.goodput_rps_per_replica:.3g} requests/s per replica within the SLO"
               if chosen.goodput_rps_per_replica is not None else "the SLO met")
    cost = (f", ${chosen.usd_per_million_tokens:g} per 1M tokens at {choice.environment}'s peak"
            if chosen.usd_per_million_tokens is not None else "")
    return (f"chosen by measurement on {choice.decided}: {choice.candidate.words()}, {goodput}{cost}, the cheapest "
            f"of {others + 1} finalists measured ({', '.join(r.file for r in chosen.results)}; requirements `choice`)")


def measured_fleet(req: Requirements, env: str, hardware: Hardware, per_replica_rps: float, catalog: Catalog,
                   ctx: PlanContext) -> tuple[int, float, float]:
    """The fleet `env`'s planned peak needs at a measured `per_replica_rps` (requests/s one replica serves within the
    SLO), with the planner's own arithmetic: replicas (`replicas_for`, at least `replicas_floor`), the nodes their
    placement takes (`SearchLimits.nodes`), priced as the plan prices them (the catalog's price, the spot factor,
    the stack's fixed items); (replicas, USD/month, the peak in requests/s)."""
    model = resolve_models(req, catalog)[0]
    managed = hardware.archetype is Archetype.SAGEMAKER_ENDPOINT
    inst = (catalog.sagemaker if managed else catalog.ec2)[hardware.instance_type]
    peak = peak_rps(req, env, model)
    replicas = replicas_for(peak, per_replica_rps, replicas_floor(req, env))
    nodes = ctx.limits(req, env, managed=managed).nodes(
        replicas, per_node=inst.gpu_count // (hardware.tensor_parallel_size or 1))
    node_usd_per_hour = inst.usd_per_hour * price_factor(req, env, catalog, managed=managed)
    return replicas, nodes * node_usd_per_hour * catalog.hours_per_month + service_fixed_monthly_usd(
        req, env, catalog, managed=managed), peak
