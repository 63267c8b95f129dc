"""Pilots (`blueprint pilot`): the finalists of an LLM plan, each as a stack to deploy and benchmark before production.

Every guide ends the same way: do not trust predicted or vendor figures, measure the finalists on your workload. The
finalists are the `count` cheapest DISTINCT candidates at the reference environment's peak
(`selection.reference_environment`, the one the plan compares costs on): each (archetype, engine, instance type,
tensor parallel degree, KV-cache dtype) once, self-hosted from the LLM search (`options.llm.llm_search`: its
simulated options of the chosen engine and each engine's best) and SageMaker's LMI from the managed search where
the requirements allow it (`selection.llm_archetypes`), ranked by monthly cost (nodes plus the stack's fixed items).

Each pilot is planned by the planner itself (`planner.plan` with `pinned` hardware: the same builders, finish,
guardrails of its environment, platform landing) in `env`, with its peak set to what ONE replica of the finalist
carries within the SLO there (`sizing.max_rps`, as `env`'s plan sizes it) and at least one replica: `blueprint
benchmark` sends its sweep (0.25x-1.5x the per-replica peak, `operate.benchmark.DEFAULT_RATE_FRACTIONS`) to one pod
directly, so one replica carries the benchmark's top rate, and the sweep runs up to and past the finalist's own
capacity (a production environment keeps 2 warm replicas for availability: each planned at that capacity). Then it
becomes a pilot: stack `<service>-pilot-<k>`, its own namespace and NodePool beside the environment's stack on the
same platform, and `servingblueprints.io/expires` on every tagged resource.
Pure: the clock (`expires`) is an input.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

from blueprints.catalog import Catalog
from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.calibration_file import Calibrations
from blueprints.contracts.platform import PlatformConfig
from blueprints.contracts.sections import (
    MAX_PILOT_FINALISTS, PILOT_EXPIRES_FORMAT, PILOT_EXPIRES_TAG, PILOT_HOURS_RANGE, Archetype, PilotRecord,
)
from pydantic import ValidationError

from blueprints.core.errors import BlueprintError, RequirementsError, format_validation_error
from blueprints.plan.builders.context import PlanContext
from blueprints.plan.compound.parts import service_parts
from blueprints.plan.guardrails import Guardrails
from blueprints.plan.options.llm import complete_sizing, llm_option_on, llm_search, predict_at_peak
from blueprints.plan.options.search import (
    ResolvedModel, gpu_instances, replicas_floor, resolve_models, service_fixed_monthly_usd,
)
from blueprints.plan.selection import llm_archetypes, reference_environment
from blueprints.plan.stability import Hardware
from blueprints.requirements.platform_file import AlertingSpec
from blueprints.requirements.service import Requirements

#: Finalists deployed when `--finalists` is not given.
DEFAULT_FINALISTS = 3
#: A pilot's lifetime when `--hours` is not given: a working day, time for the sweeps of every finalist.
DEFAULT_HOURS = 8


@dataclass(frozen=True)
class Finalist:
    """One distinct candidate, priced as the plan would at the reference environment's peak.

    Attributes:
        hardware: archetype, instance type, tensor parallel degree, KV-cache dtype and engine.
        monthly_usd: nodes (or instances) for the peak plus the stack's fixed items, USD/month.
        replicas: replicas for that peak.
    """

    hardware: Hardware
    monthly_usd: float
    replicas: int


@dataclass(frozen=True)
class Pilot:
    """A finalist's pilot stack and what it costs for its hours (nodes x price x hours, fixed items pro rata)."""

    finalist: Finalist
    blueprint: Blueprint
    cost_usd: float
    most_usd: float


@dataclass(frozen=True)
class PilotPlan:
    """The pilots of one requirements file, the environment they land in, and the finalists left out and why."""

    environment: str
    reference_environment: str
    pilots: list[Pilot]
    left_out: list[str]


def check_pilot_args(req: Requirements, models: list[ResolvedModel], *, env: str | None, finalists: int,
                     hours: int, compound: bool = False) -> str:
    """The environment the pilots land in (`env`, default the first non-production one), after refusing bad input.

    Raises:
        RequirementsError: `--finalists` outside 1-5, `--hours` outside 1-168, an `--env` the requirements do not
            declare (or none non-production to default to), a service other than one text-generation model, or an
            environment whose stack name a pilot would take (`pilot-<k>`); the message names the flag or field.
    """
    if not 1 <= finalists <= MAX_PILOT_FINALISTS:
        raise RequirementsError(f"--finalists {finalists}: deploy 1-{MAX_PILOT_FINALISTS} finalists (each is a GPU "
                                "stack billed while it runs)")
    low, high = PILOT_HOURS_RANGE
    if not low <= hours <= high:
        raise RequirementsError(f"--hours {hours}: a pilot lives {low}-{high} hours (its expiry tag; destroy it "
                                "after the benchmarks)")
    if compound or len(models) != 1 or not models[0].task.generative:
        what = ", ".join(f"{m.spec.served_name} ({m.task.value})" for m in models)
        raise RequirementsError(f"{req.service} serves {what}: pilots compare the finalists of one text-generation "
                                "model (engines, instance types, tensor parallel, KV-cache dtype, SageMaker), which "
                                "`blueprint benchmark` measures; a compound service's generator or a non-generative "
                                "model is not piloted here (measure a Triton or ONNX Runtime stack with perf_analyzer)")
    if env is None:
        env = next((e for e in req.environments if not req.is_production(e)), None)
        if env is None:
            raise RequirementsError(f"--env: {req.service} declares only production environments "
                                    f"({', '.join(req.environments)}); pass --env to pilot in one of them")
    elif env not in req.environments:
        raise RequirementsError(f"--env {env}: not in the requirements' environments ({', '.join(req.environments)})")
    taken = [e for e in req.environments if e in {f"pilot-{k}" for k in range(1, finalists + 1)}]
    if taken:
        raise RequirementsError(f"environments.{taken[0]}: its stack {req.service}-{taken[0]} is a pilot's name; "
                                "rename the environment")
    return env


def finalists(req: Requirements, model: ResolvedModel, catalog: Catalog,
              ctx: PlanContext) -> tuple[str, list[Finalist]]:
    """The reference environment and its distinct candidates cheapest first (as many as the searches reached: their
    simulated options and each engine's best), each predicted at that peak as the plan predicts it
    (`predict_at_peak`); ties keep a 16-bit KV cache first, then the catalog's engine order, then self-hosted, then
    the name."""
    env = reference_environment(req)
    allowed = llm_archetypes(req, [model], catalog)
    found: dict[Hardware, Finalist] = {}
    for archetype in (Archetype.VLLM_GPU, Archetype.SAGEMAKER_ENDPOINT):
        if allowed[archetype]:
            continue
        managed = archetype is Archetype.SAGEMAKER_ENDPOINT
        limits = ctx.limits(req, env, managed=managed)
        search = llm_search(req, env, model, catalog, managed=managed, limits=limits)
        options = [*search.options, *(e.best[0] for e in search.engines if e.best is not None)]
        fixed = service_fixed_monthly_usd(req, env, catalog, managed=managed)
        for option in options:
            hardware = Hardware(archetype, option.instance.instance_type, option.tensor_parallel_size,
                                None if managed else option.kv_cache_dtype, engine=None if managed else option.engine)
            option = predict_at_peak(option, model, req, env, managed=managed, limits=limits)[0]
            if limits.breach(option.instance, replicas=option.replicas, managed=managed,
                             per_node=option.instance.gpu_count // option.tensor_parallel_size) is not None:
                continue
            monthly = option.monthly_node_usd_per_hour * catalog.hours_per_month + fixed
            if hardware not in found or monthly < found[hardware].monthly_usd:
                found[hardware] = Finalist(hardware, monthly, option.replicas)
    engines = ("vllm", "sglang", "tensorrt-llm")
    ranked = sorted(found.values(), key=lambda f: (
        round(f.monthly_usd, 2), f.hardware.kv_cache_dtype == "fp8", engines.index(f.hardware.engine or "vllm"),
        f.hardware.archetype is Archetype.SAGEMAKER_ENDPOINT, f.hardware.instance_type,
        f.hardware.tensor_parallel_size))
    return env, ranked


def replica_capacity_rps(req: Requirements, env: str, hardware: Hardware, model: ResolvedModel, catalog: Catalog,
                         ctx: PlanContext) -> float | str:
    """Requests/s one replica on `hardware` serves within the SLO in `env` (`sizing.max_rps`, as the plan of `env`
    sizes it: `llm_option_on`, `complete_sizing`), or why it cannot serve there (a sentence)."""
    managed = hardware.archetype is Archetype.SAGEMAKER_ENDPOINT
    limits = ctx.limits(req, env, managed=managed)
    if hardware.instance_type not in {i.instance_type for i in gpu_instances(req, catalog, managed=managed,
                                                                            limits=limits)}:
        return (f"{hardware.instance_type} is outside the instance types {env} allows (its policy config's, "
                "hardware.allowed_instance_families, its Region's)")
    found = llm_option_on(req, env, model, catalog, instance_type=hardware.instance_type,
                          tensor_parallel_size=hardware.tensor_parallel_size or 0,
                          kv_cache_fp8=hardware.kv_cache_dtype == "fp8", managed=managed,
                          limits=limits, engine=hardware.engine or "vllm")
    if isinstance(found, str):
        return found
    return complete_sizing(found[0], model, req, env, managed=managed).sizing.max_rps  # type: ignore[union-attr]


def pilot_requirements(req: Requirements, env: str, rate_rps: float, model: ResolvedModel) -> Requirements:
    """`req` with `env` at the fewest replicas it keeps warm (`replicas_floor`: 1, or 2 in a production environment
    at >= 99.9 % availability; never 0: the benchmark needs a Ready pod) and a peak of `rate_rps` (one replica's
    capacity within the SLO) per replica, so the benchmark's per-replica peak is that capacity."""
    spec = req.environments[env]
    warm = spec.model_copy(update={"min_replicas": spec.min_replicas or None})
    replicas = replicas_floor(req.model_copy(update={"environments": {**req.environments, env: warm}}), env)
    scale = replicas * rate_rps / model.traffic.peak_requests_per_s
    pilot_env = warm.model_copy(update={"traffic_scale": scale})
    return req.model_copy(update={"environments": {**req.environments, env: pilot_env}})


def expiry(now: dt.datetime, hours: int) -> str:
    """`now` (UTC) plus `hours`, rounded up to the minute, as the expiry tag writes it (`PILOT_EXPIRES_FORMAT`)."""
    at = now.astimezone(dt.timezone.utc) + dt.timedelta(hours=hours)
    if at.second or at.microsecond:
        at = at.replace(second=0, microsecond=0) + dt.timedelta(minutes=1)
    return at.strftime(PILOT_EXPIRES_FORMAT)


def plan_pilots(req: Requirements, catalog: Catalog, *, env: str | None, count: int = DEFAULT_FINALISTS,
                hours: int = DEFAULT_HOURS, now: dt.datetime, platforms: Mapping[str, PlatformConfig],
                guardrails: Mapping[str, Guardrails] | None = None, alerting: AlertingSpec | None = None,
                calibrations: Calibrations | None = None) -> PilotPlan:
    """The pilot stacks of `count` finalists in `env`, planned as of `now`'s date.

    Args:
        req: validated requirements of one text-generation model.
        catalog: from `load_catalog()`.
        env: the environment whose platform and policy the pilots take (`--env`); None: the first non-production.
        count: finalists, 1-5 (`--finalists`).
        hours: each pilot's lifetime, 1-168 h (`--hours`): its expiry tag and its cost.
        now: the time the pilots are written (UTC); their expiry is `now + hours`.
        platforms: the planned platforms by name (`blueprints.plan.platforms.plan_platforms`).
        guardrails: each environment's policy limits (the reference environment's rank the finalists, `env`'s
            plan the pilots).
        alerting: platform.yaml's `alerting`.
        calibrations: the project's calibrations.

    Returns:
        A `PilotPlan`: the pilots in rank order (k = 1 is the cheapest finalist; fewer than `count` when the searches
        reached fewer distinct candidates) and the candidates `env` cannot take (its policy or region rules them
        out), each with why: the next one takes its place.

    Raises:
        RequirementsError: bad flags (`check_pilot_args`), or no finalist meets the SLO.
    """
    from blueprints.plan.planner import plan

    # sized as the plan sizes them: with the project's calibrations (`planner._plan_sized`)
    models = [replace(m, calibrations=calibrations or Calibrations()) for m in resolve_models(req, catalog)]
    env = check_pilot_args(req, models, env=env, finalists=count, hours=hours,
                           compound=len(service_parts(req, catalog)) > 1)
    model = models[0]
    ctx = PlanContext(as_of=now.date(), platforms=platforms, guardrails=guardrails or {},
                      calibrations=calibrations or Calibrations())
    reference, ranked = finalists(req, model, catalog, ctx)
    if not ranked:
        raise RequirementsError(f"no candidate meets the SLO in {reference} within its constraints: `blueprint plan` "
                                "names the binding one")
    expires = expiry(now, hours)
    planned, left_out = [], []
    for rank, finalist in enumerate(ranked, 1):
        if len(planned) == count:
            break
        what = f"{finalist.hardware.describe()} ({finalist.hardware.archetype.value})"
        rate = replica_capacity_rps(req, env, finalist.hardware, model, catalog, ctx)
        if isinstance(rate, str):
            left_out.append(f"{what}: {rate}")
            continue
        try:
            [bp] = plan(pilot_requirements(req, env, rate, model), catalog, as_of=now.date(), environments=[env],
                        guardrails=guardrails, platforms=platforms, alerting=alerting, prove_hints=False,
                        calibrations=calibrations, pinned=finalist.hardware)
        except BlueprintError as exc:
            left_out.append(f"{what}: {exc}")
            continue
        except ValidationError as exc:  # the planner wrote a blueprint its own contract refuses: said, never written
            left_out.append(f"{what}: its plan fails "
                            f"the Blueprint's checks ({format_validation_error(exc, source='the pilot plan')}); "
                            "a planner defect, not piloted")
            continue
        planned.append((rank, finalist, bp))
    if not planned:
        raise RequirementsError(f"--env {env}: no finalist can be piloted there: " + "; ".join(left_out))
    pilots = [_as_pilot(bp, finalist, k=k, rank=rank, finalists=len(planned), hours=hours, expires=expires,
                        reference=reference, catalog=catalog) for k, (rank, finalist, bp) in enumerate(planned, 1)]
    return PilotPlan(env, reference, pilots, left_out)


def _as_pilot(bp: Blueprint, finalist: Finalist, *, k: int, rank: int, finalists: int, hours: int, expires: str,
              reference: str, catalog: Catalog) -> Pilot:
    """The planned blueprint as pilot `k` (the `rank`-th cheapest candidate; earlier ones `env` could not take):
    its stack name and namespace, the expiry tag, the rationale."""
    record = PilotRecord(candidate=k, finalists=finalists, hours=hours, expires=expires)
    data = bp.model_dump(mode="json")
    data["pilot"] = record.model_dump(mode="json")
    data["tags"] = {**bp.tags, PILOT_EXPIRES_TAG: expires}
    data["platform"]["namespace"] = f"{bp.service}-pilot-{k}"
    hw = finalist.hardware
    data["rationale"] = [
        f"pilot {k} of {finalists}: the cheapest distinct candidate no. {rank} at {reference}'s peak, "
        f"{hw.archetype.value} on {hw.describe()}: {finalist.replicas} replica(s), "
        f"${finalist.monthly_usd:,.0f}/month there; deployed on {bp.environment}'s platform to be measured "
        "(`blueprint benchmark`), not served from",
        f"sized to be benchmarked: its peak per replica is what one replica serves within the SLO in "
        f"{bp.environment} ({bp.model.traffic.peak_requests_per_s / bp.compute.replicas:.3g} requests/s), so "
        "`blueprint benchmark`'s sweep (to 1.5x the per-replica peak, at one pod) runs up to and past the finalist's "
        f"own capacity; {bp.compute.replicas} replica(s), the fewest the environment keeps warm",
        f"expires {expires} (tag {PILOT_EXPIRES_TAG} on every tagged resource): destroy it then "
        f"(`pulumi destroy --stack {bp.service}-pilot-{k}`)",
        *bp.rationale]
    pilot = Blueprint.model_validate(data)
    month = catalog.hours_per_month
    return Pilot(finalist, pilot, cost_usd=pilot.planned_monthly_usd * hours / month,
                 most_usd=pilot.max_monthly_usd * hours / month)
