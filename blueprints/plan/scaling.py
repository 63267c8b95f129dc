"""The last step of planning a stack: its scaling targets, scale-to-zero wake path, zone spread, where its alerts go,
and the fleet simulation's expected cost and SLO attainment beside the peak cost.

Targets follow one rule (`blueprints.catalog.signals.planned_target`, rounded up) and one idea: each is the signal of
one replica at its share of the planned peak, from the same per-replica capacity the plan sized the replicas with
(`blueprints.capacity.replica`), so at the planned peak load the autoscaler asks for exactly the planned replicas
(`implied_replicas`). vLLM: the requests a replica runs then; Triton: the requests pending in its scheduler then;
SageMaker: invocations per instance per minute then (`blueprints.plan.builders.sagemaker`); ONNX Runtime: the CPU
utilisation the plan loads a replica to (its replicas are the peak's work over that utilisation,
`blueprints.plan.builders.nongen`).
"""

from __future__ import annotations

import copy
import math
from typing import TYPE_CHECKING, Callable

from blueprints.core import defaults
from blueprints.core.errors import RequirementsError
from blueprints.core.memo import remembered
from blueprints.contracts.sections import FIXED_REPLICAS, Alerting, Archetype
from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.consistency import reachable_target
from blueprints.requirements.platform_file import AlertingSpec
from blueprints.contracts.platform import PlatformConfig
from blueprints.capacity.replica import replica_model
from blueprints.catalog import load_catalog
from blueprints.plan.engines import with_token_prices
from blueprints.plan.unit_costs import unit_costs
from blueprints.catalog.signals import MIN_SCALING_TARGET, planned_target

if TYPE_CHECKING:
    from blueprints.simulate.fleet import SimulationResult


def _peak_per_replica(bp: Blueprint) -> float:
    peak = sum(m.traffic.peak_requests_per_s for m in bp.models if m.traffic)
    return peak / max(1, bp.compute.replicas)


def reachable_planned_target(bp: Blueprint, value: float) -> float:
    """`planned_target(value)` (rounded up to 3 significant figures), at most what one replica ever reaches
    (`contracts.consistency.reachable_target`): rounded up, a target can pass it (Triton's pending requests with one
    in flight at a time: 1.03 of 1; SageMaker invocations at a replica's capacity: 24.5 of 24.477 a minute), and the
    scaler would then never scale out. The one rule for every archetype's target (`target_within`)."""
    return target_within(value, reachable_target(bp))


def target_within(value: float, most: float | None) -> float:
    """`planned_target(value)`, at most `most` (what one replica reaches; None: no bound): the rule of
    `reachable_planned_target`, for a builder that knows the bound before its blueprint exists."""
    return planned_target(value) if most is None else min(planned_target(value), most)


def scaling_targets(bp: Blueprint) -> Blueprint:
    """`autoscaling.target` (and on a scale-to-zero stack the interceptor's concurrency target and the cold start)
    for a KEDA-scaled blueprint; other archetypes are returned as they are (their targets are set when built)."""
    if bp.archetype not in (Archetype.VLLM_GPU, Archetype.TRITON_MULTI_MODEL) or bp.autoscaling.metric == FIXED_REPLICAS:
        return bp
    model = replica_model(bp)
    point = model.at(_peak_per_replica(bp))
    value = point.running if bp.archetype is Archetype.VLLM_GPU else point.pending
    # At a trickle of traffic the signal rounds to nothing: vLLM's running requests count whole requests, and a
    # replica always runs one, so one request in flight must not read as several times the target (at least 1);
    # Triton's pending requests keep the smallest target a scaler takes. The replica floor then holds the plan.
    value = max(value, 1.0 if bp.archetype is Archetype.VLLM_GPU else MIN_SCALING_TARGET)
    update: dict = {"target": reachable_planned_target(bp, value)}
    if bp.wakes_on_request:
        update.update(cold_start_s=bp.startup.total_s,
                      interceptor_concurrency_target=int(planned_target(max(1.0, point.running + point.pending),
                                                                          whole=True)))
    return bp.model_copy(update={"autoscaling": bp.autoscaling.model_copy(update=update)})


def scaling_reasons(bp: Blueprint, platform: PlatformConfig | None) -> list[str]:
    """Why the fleet scales and spreads the way it does, in a reviewer's words."""
    a = bp.autoscaling
    why = []
    if a.metric == FIXED_REPLICAS:
        return why  # the edge plan says why it has no autoscaler
    if bp.batch is not None:
        pass  # a batch's schedule is its own reason (`blueprints.plan.batch`), its signal unread
    elif bp.archetype is Archetype.VLLM_GPU:
        why.append(f"KEDA scales on requests running per replica ({a.metric}), target {a.target:g}: "
                   "what a replica runs at its share of the planned peak (rounded up), from the capacity the "
                   f"replicas were sized with, so at the peak the autoscaler asks for exactly {bp.compute.replicas} "
                   "replica(s); requests waiting alone would read 0 whenever capacity suffices and let the "
                   "autoscaler fall to the minimum")
    elif bp.archetype is Archetype.TRITON_MULTI_MODEL:
        why.append(f"KEDA scales on requests pending per replica (nv_inference_pending_request_count, AverageValue), "
                   f"target {a.target:g}: what waits for a batch at each replica's share of the planned peak "
                   f"(rounded up), so at the peak the autoscaler asks for exactly {bp.compute.replicas} replica(s)")
    elif bp.archetype is Archetype.SAGEMAKER_ENDPOINT:
        why.append(f"target tracking on SageMakerVariantInvocationsPerInstance, target {a.target:g} invocations per "
                   "instance per minute: an instance's share of the planned peak (rounded up), from the capacity the "
                   f"instances were sized with, so at the peak it holds exactly {bp.compute.replicas} instance(s) "
                   f"({a.target:g} x {bp.compute.replicas} >= the peak's "
                   f"{sum(m.traffic.peak_requests_per_s for m in bp.models if m.traffic) * 60:g} a minute)")
    if bp.wakes_on_request:
        why.append(f"scales to zero: requests go through the KEDA HTTP add-on's interceptor "
                   f"({bp.workload_name}-proxy.{bp.platform.namespace}), which holds them while a replica starts; "
                   f"the first request after an idle period waits about {a.cold_start_s} s (a cold start on a new "
                   "node) and the stack has no load balancer of its own (one in front of zero pods resets "
                   "connections)")
    if bp.strict_zone_spread and bp.platform.zones:
        why.append(f"availability {bp.slo.availability_pct:g} %: at least {max(2, a.min_replicas)} replicas on "
                   f">= {defaults.MIN_ZONES_FOR_HIGH_AVAILABILITY} nodes in >= "
                   f"{defaults.MIN_ZONES_FOR_HIGH_AVAILABILITY} zones (topology spread, minDomains), so a node drain "
                   f"evicts one replica, which its PodDisruptionBudget allows; the catalog does not know which zones "
                   f"of {bp.region} offer {bp.compute.instance_type}, so the NodePool spans the platform's "
                   f"{bp.platform.zones} zones (`blueprint preflight {bp.stack}` checks with AWS credentials "
                   "that enough of them offer it)")
    if bp.platform.zones:
        why.append(f"NodePool limit {bp.node_pool_max_nodes} node(s): {a.max_replicas} replicas plus a rollout surge "
                   f"of {defaults.SURGE_REPLICAS}, {bp.compute.replicas_per_node} per node, spread over "
                   f"{bp.platform.zones} zones")
    return why


def implied_replicas(bp: Blueprint, load_rps: float) -> int:
    """The replicas the autoscaler asks for when the planned replicas serve a steady `load_rps` (requests/s, all
    models): the signal summed over them, from the same replica model the targets come from, over the target, rounded
    up, within min and max replicas (`desired = ceil(total / target)`, the HPA's and target tracking's rule; a fixed
    replica count is its replicas). At the planned peak it is the planned replicas."""
    a, replicas = bp.autoscaling, max(1, bp.compute.replicas)
    if a.metric == FIXED_REPLICAS:
        return a.max_replicas
    model = replica_model(bp)
    point = model.at(load_rps / replicas)
    if bp.archetype is Archetype.SAGEMAKER_ENDPOINT:
        total = load_rps * 60
    elif a.metric == "cpu":
        total = load_rps / model.capacity_rps * 100
    elif bp.archetype is Archetype.VLLM_GPU:
        total = replicas * point.running
    else:
        total = replicas * point.pending
    return max(max(1, a.min_replicas), min(a.max_replicas, math.ceil(total / a.target - 1e-9)))


def alerting_for(bp: Blueprint, platform: PlatformConfig | None, spec: AlertingSpec, *,
                 required: bool = False) -> tuple[Alerting, str]:
    """Where the stack's alerts go, and the plan's sentence about it (saying so when they reach nobody).

    Raises:
        RequirementsError: `required` (planned with the project's platform.yaml) and a production SageMaker
            endpoint's region has no SNS topic there.
    """
    if bp.archetype is Archetype.SAGEMAKER_ENDPOINT:
        topic = spec.sns_topic_arns.get(bp.region)
        if topic is None and bp.production and required:
            raise RequirementsError(f"environments.{bp.environment} is production but platform.yaml's "
                                    f"alerting.sns_topic_arns has no topic for {bp.region}: its CloudWatch alarms "
                                    f"would notify nobody; add alerting.sns_topic_arns.{bp.region}",
                                    rule="platform-settings")
        if topic is None:
            return Alerting(), (f"alerts reach nobody: no SNS topic for {bp.region} (set alerting.sns_topic_arns in "
                                "platform.yaml, or servingblueprints:alarmTopicArn)")
        return Alerting(sns_topic_arn=topic), f"CloudWatch alarms notify SNS topic {topic}"
    if not bp.monitored:
        return Alerting(), ("alerts reach nobody: the cluster declares no kube-prometheus-stack, so the stack renders "
                            "no PrometheusRule")
    if platform is None:
        return Alerting(), (f"alerts go to the {bp.platform.kind.replace('-', ' ')}'s Alertmanager, whose receivers "
                            "this project does not manage")
    receiver = platform.alerting.receiver
    if receiver is None:
        return Alerting(), (f"alerts reach nobody: {platform.stack} has no Alertmanager receiver (set "
                            "alerting.receiver in platform.yaml)")
    return Alerting(receiver=receiver.value), f"alerts page through {platform.stack}'s {receiver.value} receiver"


#: Simulated days remembered in this process (`simulated_day`); beyond this many the memo starts again.
DAYS_REMEMBERED = 128
_days: dict[str, SimulationResult] = {}


def simulated_day(bp: Blueprint) -> SimulationResult:
    """The fleet simulation of `bp`'s planned day (`blueprints.simulate.fleet.simulate(bp, days=1)`), remembered in
    this process by the blueprint's content (the replay is deterministic in it), as a copy (a caller may change what
    it gets). The planner replays the same day again wherever a re-plan leaves an environment as it was: the hints'
    proofs, a compound service's parts at other targets."""
    from blueprints.simulate.fleet import simulate

    return copy.deepcopy(remembered(_days, bp.model_dump_json(), lambda: simulate(bp, days=1), kept=DAYS_REMEMBERED))


def forget_days() -> None:
    """Forget the days `simulated_day` remembers (a cold start, as a fresh process)."""
    _days.clear()


def _with_floor(bp: Blueprint, floor: int) -> Blueprint:
    return bp.model_copy(update={"autoscaling": bp.autoscaling.model_copy(update={"min_replicas": floor})})


def _meets(run: SimulationResult, attainment_pct: float, longest_minutes: int | None) -> bool:
    """Whether a simulated day meets an attainment (%) and, when set, a longest run of missed minutes."""
    return (run.slo_attainment * 100 >= attainment_pct - 1e-9
            and (longest_minutes is None or run.slo_longest_violation_minutes <= longest_minutes))


def _lowest_floor(bp: Blueprint, runs: dict[int, SimulationResult], low: int, high: int, attainment_pct: float,
                  longest_minutes: int | None) -> int | None:
    """The lowest floor in (low, high] whose simulated day meets the goal (None: not even `high`), by bisection:
    attainment rises with the floor. `runs` caches the simulated day per floor."""
    def run(floor: int) -> SimulationResult:
        if floor not in runs:
            runs[floor] = simulated_day(_with_floor(bp, floor))
        return runs[floor]

    if not _meets(run(high), attainment_pct, longest_minutes):
        return None
    while high - low > 1:  # low misses, high meets
        mid = (low + high) // 2
        low, high = (low, mid) if _meets(run(mid), attainment_pct, longest_minutes) else (mid, high)
    return high


def warm_floor(bp: Blueprint, *, goal_is_set: bool = False) -> tuple[Blueprint, SimulationResult, str | None]:
    """The lowest minimum replica count whose simulated planned day meets the latency targets (p95s, and p99s where
    the SLO sets them: `blueprints.simulate.fleet.slo_targets`) in at least
    `slo.attainment_pct` of its minutes (and, when set, with no run of missed minutes longer than
    `slo.longest_violation_minutes`), between the planned floor and the peak replicas.

    A reactive autoscaler cannot add capacity faster than a node starts, so bursts that outpace the startup budget
    are met only by replicas already warm. Attainment rises with the floor (more capacity in every minute), so the
    floor is found by bisection. Returns the blueprint (floor raised or not), its simulation and the plan's sentence:
    the floor raised, or out of reach, and what each higher attainment (`defaults.SLO_ATTAINMENT_STEPS_PCT`) would
    cost.

    Raises:
        RequirementsError: `goal_is_set` (the requirements set the attainment or the longest run) and no floor up to
            the peak's replicas meets it, or the environment scales to zero and its cold starts miss it.
    """
    slo, env = bp.slo, bp.environment
    goal, longest = slo.attainment_pct, slo.longest_violation_minutes
    base = simulated_day(bp)
    low, high = bp.autoscaling.min_replicas, bp.compute.replicas
    runs = {low: base}
    goal_text = f"{goal:g} % of minutes" + (f" with no miss longer than {longest} minute(s)" if longest is not None
                                            else "")
    fields = "slo.attainment_pct" + (" and slo.longest_violation_minutes" if longest is not None else "")
    if _meets(base, goal, longest):
        return bp, base, _step_prices(bp, runs, low, high, base, longest)
    if low == 0 or low >= high:
        if goal_is_set:
            fix = (f"set environments.{env}.min_replicas >= 1 (it scales to zero: a request after an idle period "
                   "waits for a cold start)" if low == 0 else
                   f"the floor is already the peak's {high} replica(s)")
            raise RequirementsError(f"{fields}: the simulated day of environments.{env} meets the {base.percentiles} "
                                    "targets in "
                                    f"{base.slo_attainment:.1%} of minutes (longest run missed "
                                    f"{base.slo_longest_violation_minutes} minutes), not {goal_text}; {fix}, or lower "
                                    f"{fields}", rule="slo-attainment-reachable")
        return bp, base, None
    floor = _lowest_floor(bp, runs, low, high, goal, longest)
    if floor is None:
        top = runs[high]
        if goal_is_set:
            raise RequirementsError(f"{fields}: even the peak's {high} replicas kept warm meet the {top.percentiles} "
                                    "targets of "
                                    f"environments.{env} in {top.slo_attainment:.1%} of minutes (longest run missed "
                                    f"{top.slo_longest_violation_minutes} minutes), not {goal_text}: the peak share "
                                    f"per replica, not the autoscaler, misses; lower {fields}, or loosen the "
                                    f"{top.percentiles} targets the misses are against",
                                    rule="slo-attainment-reachable")
        return bp, base, (f"the simulated day meets the {base.percentiles} targets in {base.slo_attainment:.1%} of "
                          "minutes, below "
                          f"the {goal:g} % goal, and even {high} warm replicas reach only {top.slo_attainment:.1%}: "
                          "the peak share per replica, not the autoscaler, misses")
    run = runs[floor]
    extra = run.expected_monthly_usd - base.expected_monthly_usd
    note = (f"minimum replicas {floor}, not {low}: bursts outpace a new replica's {bp.startup.total_s} s start, so "
            f"with {low} warm the simulated day meets the {base.percentiles} targets in {base.slo_attainment:.1%} of "
            "minutes; "
            f"{floor} meet them in {run.slo_attainment:.1%} (goal {goal_text}, slo.attainment_pct) for about "
            f"${extra:,.0f}/month more expected (set environments.{env}.min_replicas to choose otherwise)")
    steps = _step_prices(bp, runs, floor, high, run, longest)
    return _with_floor(bp, floor), run, note + (f"; {steps}" if steps else "")


def _step_prices(bp: Blueprint, runs: dict[int, SimulationResult], floor: int, high: int, run: SimulationResult,
                 longest: int | None) -> str | None:
    """What each attainment above the planned one (`defaults.SLO_ATTAINMENT_STEPS_PCT`) costs in warm replicas and
    expected USD/month, from the planned floor; None when none is above it or the floor cannot move (fixed at the
    peak, or scaling to zero)."""
    steps = [pct for pct in defaults.SLO_ATTAINMENT_STEPS_PCT if pct > run.slo_attainment * 100 + 1e-9]
    if not steps or floor == 0 or floor >= high:
        return None
    parts = []
    while steps:
        pct = steps[0]
        found = _lowest_floor(bp, runs, floor, high, pct, longest)
        if found is None:
            parts.append(f"{pct:g} % out of reach (the peak's {high} replicas warm: "
                         f"{runs[high].slo_attainment:.1%})")
            break
        reached = runs[found]
        covered = [s for s in steps if s <= reached.slo_attainment * 100 + 1e-9]  # this floor meets them all
        label = f"{pct:g}" if len(covered) == 1 else f"{pct:g}-{covered[-1]:g}"
        parts.append(f"{label} % of minutes +${reached.expected_monthly_usd - run.expected_monthly_usd:,.0f}/month "
                     f"({found} warm)")
        steps = steps[len(covered):]
    return "each step up (slo.attainment_pct): " + ", ".join(parts)


def simulation_predictions(bp: Blueprint, result: SimulationResult) -> Blueprint:
    """The fleet simulation of one planned day (`blueprints.simulate.fleet`) in the plan: expected monthly cost and SLO
    attainment, and the peak: when the autoscaler runs more nodes than the planned peak's (after a burst, for a
    cooldown), that fleet is the peak the plan states (its first cost line), so the peak is never below the
    expected cost."""
    p = bp.predictions
    update: dict = {"expected_monthly_cost_usd": round(result.expected_monthly_usd, 2),
                    "slo_attainment": round(result.slo_attainment, 4)}
    first, planned = p.cost_lines[0], p.cost_lines[0].quantity
    beyond = result.most_nodes > planned
    if beyond:
        hours = load_catalog().hours_per_month
        line = first.model_copy(update={"quantity": result.most_nodes,
                                        "monthly_usd": round(result.most_nodes * first.unit_monthly_usd(hours), 2)})
        lines = [line, *p.cost_lines[1:]]
        monthly = round(sum(x.monthly_usd for x in lines), 2)
        update.update(cost_lines=lines, monthly_cost_usd=monthly)
    predictions = p.model_copy(update=update)
    costs = unit_costs(bp.model_copy(update={"predictions": predictions}), mean_rps=result.mean_rps,
                       expected_monthly_usd=result.expected_monthly_usd, hours_per_month=load_catalog().hours_per_month)
    predictions = predictions.model_copy(update={"unit_costs": costs,
                                                 "engines": with_token_prices(predictions.engines, costs)})
    unit = "instances" if bp.archetype is Archetype.SAGEMAKER_ENDPOINT else "nodes"
    missed = result.violations()
    traffic = bp.model.traffic
    daily = traffic.daily if traffic else None
    swing = (f", {daily.peak_to_trough:g}x daily swing, peak {daily.peak_hours[0]:02d}:00-{daily.peak_hours[1]:02d}:00 "
             f"{daily.timezone}" if daily else "")
    weekly = traffic.weekly if traffic else None
    week = (f", weighted over a week with {', '.join(weekly.weekend_days)} at {weekly.weekend_factor:.0%} of a working "
            f"day's traffic" if weekly is not None and result.working_day_monthly_usd is not None else "")
    working = (f" (a working day alone: ${result.working_day_monthly_usd:,.0f}/month)" if week else "")
    note = (f"fleet simulation of a planned day ({traffic.pattern if traffic else 'planned'}{swing} "
            f"traffic){week}: {missed + '; ' if missed else ''}about ${result.expected_monthly_usd:,.0f}/month "
            f"expected{working} against "
            f"${predictions.monthly_cost_usd:,.0f}/month provisioned for the peak, {result.percentiles} targets met in "
            f"{result.slo_attainment:.1%} of minutes")
    if beyond:
        note += (f"; the peak is {result.most_nodes} {unit}, not the planned {planned:g}: bursts outpace the "
                 f"autoscaler, which then runs more than the peak's {bp.compute.replicas} replica(s) (up to "
                 f"{bp.autoscaling.max_replicas}) until the {bp.autoscaling.cooldown_s} s cooldown ends")
    if predictions.max_monthly_cost_usd is not None:
        note += (f"; at most ${predictions.max_monthly_cost_usd:,.0f}/month at the autoscaler's maximum of "
                 f"{bp.autoscaling.max_replicas} replica(s)")
    return bp.model_copy(update={"predictions": predictions, "rationale": [*bp.rationale, note]})


def finish(bp: Blueprint, platform: PlatformConfig | None, alerting: AlertingSpec, *,
           floor_is_set: bool = False, goal_is_set: bool = False, alerts_required: bool = False,
           predict: Callable[[Blueprint], Blueprint] | None = None) -> Blueprint:
    """Targets, the warm floor, reasons, alerting and simulation for one planned blueprint. `floor_is_set`: the
    requirements set this environment's min_replicas (the simulation then reports on it and does not raise it).
    `predict`: a batch service's predictions (`blueprints.plan.batch.batch_predictions`), in place of the warm floor
    and the simulated day."""
    bp = scaling_targets(bp)
    if predict is not None:
        bp = predict(bp)
        where, note = alerting_for(bp, platform, alerting, required=alerts_required)
        return bp.model_copy(update={"alerting": where,
                                     "rationale": [*bp.rationale, *scaling_reasons(bp, platform), note]})
    if floor_is_set:
        result, floor_note = simulated_day(bp), None
        slo = bp.slo
        if goal_is_set and not _meets(result, slo.attainment_pct, slo.longest_violation_minutes):
            longest = slo.longest_violation_minutes
            fields = "slo.attainment_pct" + (" and slo.longest_violation_minutes" if longest is not None else "")
            raise RequirementsError(
                f"{fields}: environments.{bp.environment}.min_replicas={bp.autoscaling.min_replicas} keeps the "
                f"simulated day within the {result.percentiles} targets in {result.slo_attainment:.1%} of minutes "
                f"(longest run missed "
                f"{result.slo_longest_violation_minutes} minutes), not {slo.attainment_pct:g} %"
                + (f" with no miss longer than {longest} minute(s)" if longest is not None else "")
                + f"; raise environments.{bp.environment}.min_replicas (or remove it: the plan then keeps as many "
                f"warm as the goal needs), or lower {fields}", rule="slo-attainment-reachable")
    else:
        bp, result, floor_note = warm_floor(bp, goal_is_set=goal_is_set)
    where, note = alerting_for(bp, platform, alerting, required=alerts_required)
    reasons = [*scaling_reasons(bp, platform), *([floor_note] if floor_note else []), note]
    bp = bp.model_copy(update={"alerting": where, "rationale": [*bp.rationale, *reasons]})
    return simulation_predictions(bp, result)


def zones_of(platform: PlatformConfig | None) -> int | None:
    """The zones a platform's subnets span (its NodePools launch nodes there)."""
    return platform.network.az_count if platform is not None and platform.kind.value == "eks" else None

