"""Requirements -> one `Blueprint` per environment: choose the archetype, size it, price it, explain it.

One way through: `resolve_models` -> `select_archetype` (blueprints.plan.selection) -> the archetype's builder
(`blueprints.plan.builders.llm` for vllm-gpu, `blueprints.plan.builders.sagemaker`, `blueprints.plan.builders.nongen` for
triton-multi-model and onnx-cpu), which takes the cheapest option from the option search (`blueprints.plan.options.llm`,
`blueprints.plan.options.nongen`), prices it (`blueprints.plan.builders.cost`), checks the budget and writes the blueprint; then
each is landed on its platform and finished (`blueprints.plan.scaling`).
Pure: the same `Requirements` and `Catalog` always give the same blueprints (no clock, network or environment).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import replace
from typing import Callable

from blueprints.core import defaults
from blueprints.contracts.sections import Archetype
from blueprints.contracts.blueprint import Blueprint
from blueprints.catalog import Catalog
from blueprints.catalog.addons import load_platform_catalog
from blueprints.plan.compound.parts import service_parts
from blueprints.requirements.platform_file import AlertingSpec
from blueprints.contracts.platform import PlatformConfig
from blueprints.contracts.calibration_file import Calibrations
from blueprints.plan.guardrails import Guardrails
from blueprints.core.errors import BlueprintError, Fix, RequirementsError, SizingError
from blueprints.plan.options.search import ResolvedModel, resolve_models
from blueprints.requirements.service import Requirements
from blueprints.contracts.images import image_problems
from blueprints.plan.kubernetes_features import feature_problems
from blueprints.plan.hints import apply_fixes, policy_field, prove
from blueprints.plan.node_fit import node_fit_problem
from blueprints.plan.quota import gpus_at_full_scale
from blueprints.plan.scaling import finish
from blueprints.plan.selection import Selection, pinned_selection, select_archetype
from blueprints.plan.stability import Hardware
from blueprints.contracts.weights import with_weights_reason
from blueprints.plan.builders.context import PlanContext
from blueprints.plan.builders.llm import plan_vllm
from blueprints.plan.builders.nongen import plan_nongen
from blueprints.plan.builders.sagemaker import plan_sagemaker


#: `maxGpus` standing for "no quota" when `quota_raises` plans without one: above any fleet the bounds allow
#: (`bounds.MAX_REPLICAS` replicas of the largest GPU node).
UNCAPPED_GPUS = 1_000_000


_BUILDERS: dict[Archetype, Callable[[Requirements, str, list[ResolvedModel], Catalog, Selection, PlanContext],
                                    Blueprint]] = {
    Archetype.VLLM_GPU: plan_vllm,
    Archetype.SAGEMAKER_ENDPOINT: plan_sagemaker,
    Archetype.TRITON_MULTI_MODEL: plan_nongen,
    Archetype.ONNX_CPU: plan_nongen,
}


def _land(bp: Blueprint, ctx: PlanContext, req: Requirements) -> Blueprint:
    """Name the shared platform and its cost in the service's predictions and rationale."""
    platform = ctx.platform(req, bp.environment, managed=bp.archetype is Archetype.SAGEMAKER_ENDPOINT)
    if platform is None:
        return bp
    what = "cluster" if bp.platform.kind == "eks" else "VPC"
    # Not how many services share it: that fact is the platform's (its stack config's `services`), and a service's
    # stack config changes only with its own requirements and its platform's settings, never with another service.
    note = (f"lands on the shared platform {platform.stack} ({what}, ${platform.monthly_cost_usd:,.0f}/month, shared "
            "by the services on it, not included in this service's cost)")
    predictions = bp.predictions.model_copy(update={"platform_monthly_cost_usd": platform.monthly_cost_usd})
    return bp.model_copy(update={"predictions": predictions, "rationale": [*bp.rationale, note]})


def plan(req: Requirements, catalog: Catalog, *, as_of: dt.date, environments: list[str] | None = None,
         guardrails: Mapping[str, Guardrails] | None = None,
         platforms: Mapping[str, PlatformConfig] | None = None,
         alerting: AlertingSpec | None = None, existing: Mapping[str, Hardware] | None = None,
         switch_threshold_pct: float = defaults.SWITCH_THRESHOLD_PCT, prove_hints: bool = True,
         calibrations: Calibrations | None = None, pinned: Hardware | None = None,
         pinned_by: str | None = None, pinned_rps: float | None = None) -> list[Blueprint]:
    """Plan every (or the named) environment of a requirements file.

    Args:
        req: validated requirements.
        catalog: from `load_catalog()`.
        as_of: the plan date (Kubernetes versions and their prices, support-window warnings).
        environments: names to plan; all of `req.environments` (in file order) when omitted.
        guardrails: per environment, the policy pack's limits to plan within (`blueprints.plan.guardrails`): constraints
            of the search (instance types, GPU quota with the surge), choices (on-demand where spot is forbidden)
            and refusals (regions, private endpoints, tags).
        platforms: the planned platforms by name (`blueprints.plan.platforms.plan_platforms` over every requirements
            file); when omitted, planned from this file alone (`standalone_platform_file`).
        alerting: platform.yaml's `alerting` (SNS topics of SageMaker alarms); default: none.
        existing: per stack name (`<service>-<env>`, or a compound service's `<service>-<part>-<env>`), the hardware
            of its existing stack config (`blueprints.plan.stability.hardware_of`), kept while it stays within
            `switch_threshold_pct` % of the cheapest option.
        switch_threshold_pct: that tolerance, % (0-100).
        prove_hints: before a refusal proposes "raise X to >= N", plan again with it (`blueprints.plan.hints.prove`):
            the message keeps only changes that plan, alone or together. Defaults to True (off in those re-plans).
        calibrations: the project's calibrations (`blueprints.contracts.calibration_file`); a replica shape one
            matches is sized on the corrected capacity model, and the plan says so. None: the uncorrected model.
        pinned: plan on this archetype and hardware whatever it costs (a pilot's candidate, `blueprints.plan.pilot`;
            an LLM's only); None: the selection and the cheapest option.
        pinned_by: why `pinned` is pinned when it is not a pilot's finalist (the requirements' `choice`,
            `blueprints.plan.choice`), said first in the rationale.
        pinned_rps: the chosen candidate's measured goodput per replica within the SLO, requests/s: no environment
            gets fewer replicas than it needs at its peak.

    Returns:
        One `Blueprint` per environment, in the order planned; for a compound service (`blueprints.plan.compound.parts`) one
        per part and environment, generator first.

    Raises:
        RequirementsError: an environment name is not in the file, the requirements contradict every archetype, or
            they break an environment's policy whatever the plan chooses.
        CatalogError: a model id is unknown.
        SizingError: nothing meets the requirements within the constraints, or the cheapest plan is over budget; the
            message names the binding constraint and by how much to relax it, proven: each change it proposes plans
            (alone, or with the others it names together), or it says none suffices.
    """
    def planned(limits: Mapping[str, Guardrails] | None, fixed: Requirements = req, *,
                proving: bool = False) -> list[Blueprint]:
        return _plan_within_account(fixed, catalog, as_of=as_of, environments=environments, guardrails=limits,
                                    platforms=platforms, alerting=alerting, existing=existing,
                                    switch_threshold_pct=switch_threshold_pct, calibrations=calibrations,
                                    pinned=pinned, pinned_by=pinned_by, pinned_rps=pinned_rps, proving=proving)

    try:
        return planned(guardrails)
    except SizingError as exc:
        if not prove_hints or not exc.fixes:
            raise

        def replan(fixes) -> list[Blueprint]:
            fixed, limits = apply_fixes(req, guardrails or {}, fixes)
            return planned(limits, fixed, proving=True)

        raise prove(exc, replan, unnamed=lambda: quota_raises(guardrails or {}, replan)) from None


def _plan_within_account(req: Requirements, catalog: Catalog, *, guardrails: Mapping[str, Guardrails] | None,
                         **kwargs) -> list[Blueprint]:
    """`_plan`, first as if the account's other stacks held no GPUs (`Guardrails.gpus_in_use` 0): when that plan
    fits `maxGpus` with them (`gpus_at_full_scale` per environment), it is the plan, so a service's stack configs
    name no other stack, nor count the options the others' GPUs rule out, while the shared quota does not bind
    (adding a service never rewrites another's). Otherwise the plan within what the others leave.
    """
    limits = dict(guardrails or {})
    alone = {env: replace(g, gpus_in_use=0, gpus_in_use_by=()) for env, g in limits.items()}
    if alone != limits:
        try:
            planned = _plan(req, catalog, guardrails=alone, **kwargs)
        except SizingError:
            planned = None
        if planned is not None and all(
                g.max_gpus is None or g.gpus_in_use + sum(gpus_at_full_scale(bp) for bp in planned
                                                          if bp.environment == env) <= g.max_gpus
                for env, g in limits.items()):
            return planned
    return _plan(req, catalog, guardrails=limits, **kwargs)


def quota_raises(guardrails: Mapping[str, Guardrails], replan: Callable[[list[Fix]], list[Blueprint]]
                 ) -> tuple[Fix, ...]:
    """The `maxGpus` each capped environment needs for the plan the quota did not hold back: planned with every
    `maxGpus` lifted (`UNCAPPED_GPUS`), the GPUs it reaches at full scale with the account's other stacks, for each
    environment where that is above its `maxGpus`. Empty when the lifted plan fails too (the quota is not the only
    obstacle) or no quota binds. For `blueprints.plan.hints.prove`, which tries these when no named change plans."""
    capped = {env: g for env, g in guardrails.items() if g.max_gpus is not None}
    if not capped:
        return ()
    try:
        lifted = replan([Fix(policy_field(env, "maxGpus"), UNCAPPED_GPUS, "") for env in capped])
    except BlueprintError:
        return ()
    fixes = []
    for env, g in capped.items():
        need = g.gpus_in_use + sum(gpus_at_full_scale(bp) for bp in lifted if bp.environment == env)
        if need > g.max_gpus:
            fixes.append(Fix(policy_field(env, "maxGpus"), need, f"raise maxGpus in {g.source} to >= {need}"))
    return tuple(fixes)



def _plan(req: Requirements, catalog: Catalog, *, as_of: dt.date, environments: list[str] | None,
          guardrails: Mapping[str, Guardrails] | None, platforms: Mapping[str, PlatformConfig] | None,
          alerting: AlertingSpec | None, existing: Mapping[str, Hardware] | None,
          switch_threshold_pct: float, calibrations: Calibrations | None,
          pinned: Hardware | None = None, pinned_by: str | None = None,
          pinned_rps: float | None = None, proving: bool = False) -> list[Blueprint]:
    """`plan`, without proving its refusals' hints (`proving`: a re-plan that proves one, `PlanContext.proving`)."""
    names = environments or list(req.environments)
    unknown = [n for n in names if n not in req.environments]
    if unknown:
        raise RequirementsError(f"--env {', '.join(unknown)}: not in the requirements' environments "
                                f"({', '.join(req.environments)})")
    if not 0 <= switch_threshold_pct <= 100:
        raise RequirementsError(f"--switch-threshold {switch_threshold_pct:g}: a percentage from 0 to 100 (how much "
                                "more the existing hardware may cost than the cheapest and be kept)")
    limits = dict(guardrails or {})
    problems = [p for env in names if env in limits for p in limits[env].problems(req, env)]
    if problems:
        raise RequirementsError("; ".join(problems))
    notes: dict[str, list[str]] = {}
    for env in names:
        if env in limits:
            req, notes[env] = limits[env].apply(req, env)
    if platforms is None:
        from blueprints.plan.platforms import ServiceFile, plan_platforms, standalone_platform_file

        platforms = {p.name: p for p in plan_platforms([ServiceFile(None, req)], standalone_platform_file(req),
                                                       catalog=catalog, pcat=load_platform_catalog(), as_of=as_of,
                                                       policy_for=lambda env, production: limits.get(env))}
    ctx = PlanContext(as_of=as_of, platforms=platforms, guardrails=limits, existing=existing or {},
                      switch_threshold_pct=switch_threshold_pct, notes=notes,
                      calibrations=calibrations or Calibrations(), pinned=pinned, pinned_by=pinned_by,
                      pinned_rps=pinned_rps, proving=proving)
    from blueprints.plan.overrides import apply_overrides

    parts = service_parts(req, catalog)
    if len(parts) > 1:  # a compound service: one stack per part, an end-to-end budget over both
        from blueprints.plan.compound.planner import PartPlanner, plan_pipeline

        planner = PartPlanner(size=lambda part, env: _plan_sized(part, catalog, ctx, [env])[0],
                              finish=lambda part, bp: _finish_service(part, ctx, [bp], alerting=alerting)[0])
        planned = plan_pipeline(req, parts, names, catalog=catalog, plan_part=planner)
        _check_parts_gpus(planned, limits)
    elif req.batch is not None:  # a daily batch: the lowest cost finishing by its deadline (blueprints.plan.batch)
        from blueprints.plan.batch import plan_batch

        fresh = replace(ctx, existing={})
        planned = plan_batch(req, names, size=lambda fixed, env, keep: _plan_sized(fixed, catalog, ctx if keep else
                                                                                   fresh, [env])[0],
                             finish=lambda bp, predict: _finish_service(req, ctx, [bp], alerting=alerting,
                                                                        predict=predict)[0], as_of=ctx.as_of)
    else:
        planned = _plan_service(req, catalog, ctx, names, alerting=alerting)
    return apply_overrides(planned, req, guardrails=limits)


def _check_parts_gpus(planned: list[Blueprint], limits: Mapping[str, Guardrails]) -> None:
    """A compound service's parts share their account's GPU quota: each part was sized within `maxGpus` less the
    account's other stacks; together they must be too (`blueprints.plan.quota.gpus_at_full_scale`).

    Raises:
        SizingError: the parts' GPUs with the account's others exceed `maxGpus`, with the proven-able fix.
    """
    for env in dict.fromkeys(bp.environment for bp in planned):
        g = limits.get(env)
        parts = [(bp.stack, gpus_at_full_scale(bp)) for bp in planned if bp.environment == env]
        total = sum(n for _, n in parts) + (g.gpus_in_use if g else 0)
        if g is None or g.max_gpus is None or total <= g.max_gpus:
            continue
        text = f"raise maxGpus in {g.source} to >= {total}"
        raise SizingError(f"environments.{env}: the parts need {' + '.join(f'{n} ({s})' for s, n in parts)} GPUs "
                          f"with the rollout surge"
                          + (f" and the account's other stacks in the Region {g.gpus_in_use} "
                             f"({', '.join(g.gpus_in_use_by)})" if g.gpus_in_use else "")
                          + f": {total}, above maxGpus={g.max_gpus} ({g.source}, gpu-quota); {text}",
                          fixes=(Fix(policy_field(env, "maxGpus"), total, text),))


def _plan_service(req: Requirements, catalog: Catalog, ctx: PlanContext, names: list[str], *,
                  alerting: AlertingSpec | None) -> list[Blueprint]:
    """Plan the environments `names` of one stack-worth of requirements (a service, or a part of a compound one):
    within each environment's guardrails (`ctx`), finished (`blueprints.plan.scaling.finish`) and with its quota note."""
    return _finish_service(req, ctx, _plan_sized(req, catalog, ctx, names), alerting=alerting)


def _finish_service(req: Requirements, ctx: PlanContext, planned: list[Blueprint], *,
                    alerting: AlertingSpec | None,
                    predict: Callable[[Blueprint], Blueprint] | None = None) -> list[Blueprint]:
    """`_plan_sized`'s blueprints finished: scaling targets, warm floor, alerting and the fleet simulation
    (`blueprints.plan.scaling.finish`; a batch service's `predict`, its replayed run, instead of the warm floor and
    the simulated day), the cluster's add-ons checked, the quota note."""
    from blueprints.plan.quota import quota_note
    from blueprints.plan.cluster_addons import cluster_addon_problems

    spec = alerting or AlertingSpec()
    finished = [finish(bp, ctx.platform(req, bp.environment, managed=bp.archetype is Archetype.SAGEMAKER_ENDPOINT),
                       spec, floor_is_set=req.environments[bp.environment].min_replicas is not None,
                       goal_is_set=req.slo.attainment_pct is not None or req.slo.longest_violation_minutes is not None,
                       alerts_required=alerting is not None, predict=predict)
                for bp in planned]
    # An existing cluster must run what the plan's objects need (`blueprints.plan.cluster_addons`).
    problems = cluster_addon_problems(finished, req.operations)
    if problems:
        raise RequirementsError("; ".join(problems))
    # Last: the service quotas the final plan needs at full scale (`blueprints.plan.quota`).
    return [bp.model_copy(update={"rationale": [*bp.rationale, note]}) if (note := quota_note(bp)) else bp
            for bp in finished]


def _plan_sized(req: Requirements, catalog: Catalog, ctx: PlanContext, names: list[str]) -> list[Blueprint]:
    """Select, size and price each environment (before targets, alerting and simulation: `blueprints.plan.scaling.finish`),
    and refuse a plan whose Kubernetes version lacks a feature its workloads use (`kubernetes_features`)."""
    models = [replace(m, calibrations=ctx.calibrations) for m in resolve_models(req, catalog)]
    selection = pinned_selection(req, models, ctx.pinned, ctx.pinned_by) if ctx.pinned is not None else select_archetype(
        req, models, catalog, limits_for=lambda env, managed: ctx.limits(req, env, managed=managed))
    build = _BUILDERS[selection.archetype]
    planned = [_land(with_weights_reason(build(req, env, models, catalog, selection, ctx)), ctx, req) for env in names]
    planned = [bp.model_copy(update={"rationale": [*bp.rationale, *ctx.notes[bp.environment]]})
               if ctx.notes.get(bp.environment) else bp for bp in planned]
    for bp in planned:  # every image its pods run must be built for its nodes' architecture
        problems = image_problems(bp)
        if problems:
            raise SizingError(f"environments.{bp.environment}: " + "; ".join(problems))
    for bp in planned:  # a node holds the replicas the plan packs (and bills) on it
        problem = node_fit_problem(bp, ctx.platform(req, bp.environment, managed=bp.archetype is
                                                    Archetype.SAGEMAKER_ENDPOINT),
                                   cluster_addons=list(req.operations.cluster_addons or []))
        if problem:
            raise SizingError(f"environments.{bp.environment}: {problem}")
    problems = [p for bp in planned for p in feature_problems(bp, source=_version_source(req, bp, ctx))]
    if problems:
        raise RequirementsError("; ".join(problems))
    return planned


def _version_source(req: Requirements, bp: Blueprint, ctx: PlanContext) -> str:
    """Where the stack's Kubernetes version comes from (named in a refusal)."""
    if bp.platform.stack:
        return f"the platform {bp.platform.stack} (kubernetes_version in platform.yaml)"
    if req.operations.kubernetes_version is not None:
        return "operations.kubernetes_version"
    return f"the default Kubernetes version on {ctx.as_of}"
