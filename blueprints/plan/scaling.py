"""The last step of planning a stack: its scaling targets, scale-to-zero wake path, zone spread, where its alerts go,
and the fleet simulation's expected cost and SLO attainment beside the peak cost.

Targets follow one rule (`blueprints.catalog.signals.planned_target`) and one idea: at the planned peak the autoscaler holds
the planned replicas, and it scales out before a replica passes the highest rate that meets the SLO (the target
sits the HPA's tolerance below the signal there). vLLM: the requests a replica runs at its share of the peak; Triton: the requests pending in its
scheduler then (`blueprints.capacity.replica`); SageMaker: invocations per instance per minute at the documented
safety factor; ONNX Runtime: the CPU utilisation the plan loads a replica to.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from blueprints.core import defaults
from blueprints.core.errors import RequirementsError
from blueprints.contracts.sections import FIXED_REPLICAS, Alerting, Archetype
from blueprints.contracts.blueprint import Blueprint
from blueprints.requirements.platform_file import AlertingSpec
from blueprints.contracts.platform import PlatformConfig
from blueprints.capacity.replica import replica_model
from blueprints.catalog.signals import MIN_SCALING_TARGET, planned_target

if TYPE_CHECKING:
    from blueprints.simulate.fleet import SimulationResult


def _peak_per_replica(bp: Blueprint) -> float:
    peak = sum(m.traffic.peak_requests_per_s for m in bp.models if m.traffic)
    return peak / max(1, bp.compute.replicas)


def scaling_targets(bp: Blueprint) -> Blueprint:
    """`autoscaling.target` (and on a scale-to-zero stack the interceptor's concurrency target and the cold start)
    for a KEDA-scaled blueprint; other archetypes are returned as they are (their targets are set when built)."""
    if bp.archetype not in (Archetype.VLLM_GPU, Archetype.TRITON_MULTI_MODEL) or bp.autoscaling.metric == FIXED_REPLICAS:
        return bp
    model = replica_model(bp)
    point = model.at(_peak_per_replica(bp))
    # The HPA does not scale up while the signal is within its tolerance above the target, so the target sits that
    # far below the signal at the highest per-replica rate that meets the SLO (the plan's capacity per replica).
    edge = model.at(bp.predictions.requests_per_s_capacity / max(1, bp.compute.replicas))
    signal = (lambda p: p.running) if bp.archetype is Archetype.VLLM_GPU else (lambda p: p.pending)
    value = min(signal(point), signal(edge) / (1 + defaults.HPA_TOLERANCE)) if signal(edge) > 0 else signal(point)
    # At a trickle of traffic the signal rounds to nothing: vLLM's running requests count whole requests, and a
    # replica always runs one, so one request in flight must not read as several times the target (at least 1);
    # Triton's pending requests keep the smallest target a scaler takes.
    value = max(value, 1.0 if bp.archetype is Archetype.VLLM_GPU else MIN_SCALING_TARGET)
    update: dict = {"target": planned_target(value)}
    if bp.autoscaling.min_replicas == 0:
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
    if bp.archetype is Archetype.VLLM_GPU:
        why.append(f"KEDA scales on requests running per replica (vllm:num_requests_running), target {a.target:g}: "
                   f"what a replica runs at its share of the peak, so the peak holds {bp.compute.replicas} "
                   "replica(s), and at most the HPA's 10 % tolerance below what it runs at the highest rate that "
                   "meets the SLO, so it scales out before a replica passes that rate; requests waiting alone would read 0 whenever capacity suffices and let the "
                   "autoscaler fall to the minimum")
    elif bp.archetype is Archetype.TRITON_MULTI_MODEL:
        why.append(f"KEDA scales on requests pending per replica (nv_inference_pending_request_count, AverageValue), "
                   f"target {a.target:g}: what waits for a batch at the peak share of each replica")
    if a.min_replicas == 0:
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
                   f"{bp.platform.zones} zones (check with `aws ec2 describe-instance-type-offerings "
                   "--location-type availability-zone`)")
    if bp.platform.zones:
        why.append(f"NodePool limit {bp.node_pool_max_nodes} node(s): {a.max_replicas} replicas plus a rollout surge "
                   f"of {defaults.SURGE_REPLICAS}, {bp.compute.replicas_per_node} per node, spread over "
                   f"{bp.platform.zones} zones")
    return why


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


def _with_floor(bp: Blueprint, floor: int) -> Blueprint:
    return bp.model_copy(update={"autoscaling": bp.autoscaling.model_copy(update={"min_replicas": floor})})


def warm_floor(bp: Blueprint) -> tuple[Blueprint, SimulationResult, str | None]:
    """The lowest minimum replica count whose simulated planned day meets the p95 targets in at least
    `defaults.SLO_ATTAINMENT_GOAL` of its minutes, between the planned floor and the peak replicas.

    A reactive autoscaler cannot add capacity faster than a node starts, so bursts that outpace the startup budget
    are met only by replicas already warm. Attainment rises with the floor (more capacity in every minute), so the
    floor is found by bisection. Returns the blueprint (floor raised or not), its simulation and the plan's sentence
    when the floor was raised or could not help.
    """
    from blueprints.simulate.fleet import simulate

    base = simulate(bp, days=1)
    low, high = bp.autoscaling.min_replicas, bp.compute.replicas
    goal = defaults.SLO_ATTAINMENT_GOAL
    if base.slo_attainment >= goal or low >= high or low == 0:
        return bp, base, None
    top = simulate(_with_floor(bp, high), days=1)
    if top.slo_attainment < goal:
        return bp, base, (f"the simulated day meets the p95 targets in {base.slo_attainment:.1%} of minutes, below "
                          f"the {goal:.0%} goal, and even {high} warm replicas reach only {top.slo_attainment:.1%}: "
                          "the peak share per replica, not the autoscaler, misses")
    best = (high, top)
    while high - low > 1:  # attainment(low) < goal <= attainment(high)
        mid = (low + high) // 2
        run = simulate(_with_floor(bp, mid), days=1)
        if run.slo_attainment >= goal:
            high, best = mid, (mid, run)
        else:
            low = mid
    floor, run = best
    extra = run.expected_monthly_usd - base.expected_monthly_usd
    note = (f"minimum replicas {floor}, not {bp.autoscaling.min_replicas}: bursts outpace a new replica's "
            f"{bp.startup.total_s} s start, so with {bp.autoscaling.min_replicas} warm the simulated day meets the p95 "
            f"targets in {base.slo_attainment:.1%} of minutes; {floor} meet them in {run.slo_attainment:.1%} (goal "
            f"{goal:.0%}) for about ${extra:,.0f}/month more expected (set environments.{bp.environment}.min_replicas "
            "to choose otherwise)")
    return _with_floor(bp, floor), run, note


def simulation_predictions(bp: Blueprint, result: SimulationResult) -> Blueprint:
    """The fleet simulation of one planned day (`blueprints.simulate.fleet`) in the plan: expected monthly cost and SLO
    attainment."""
    predictions = bp.predictions.model_copy(update={
        "expected_monthly_cost_usd": round(result.expected_monthly_usd, 2),
        "slo_attainment": round(result.slo_attainment, 4)})
    note = (f"fleet simulation of a planned day ({bp.model.traffic.pattern if bp.model.traffic else 'planned'} "
            f"traffic): about ${result.expected_monthly_usd:,.0f}/month expected against "
            f"${bp.predictions.monthly_cost_usd:,.0f}/month provisioned for the peak, p95 targets met in "
            f"{result.slo_attainment:.1%} of minutes")
    if result.expected_monthly_usd > bp.predictions.monthly_cost_usd:
        note += (f"; above the peak-provisioned cost because bursts scale the fleet past the peak's "
                 f"{bp.compute.replicas} replica(s) (up to {bp.autoscaling.max_replicas}) and each added replica stays "
                 f"for the {bp.autoscaling.cooldown_s} s cooldown")
    return bp.model_copy(update={"predictions": predictions, "rationale": [*bp.rationale, note]})


def finish(bp: Blueprint, platform: PlatformConfig | None, alerting: AlertingSpec, *,
           floor_is_set: bool = False, alerts_required: bool = False) -> Blueprint:
    """Targets, the warm floor, reasons, alerting and simulation for one planned blueprint. `floor_is_set`: the
    requirements set this environment's min_replicas (the simulation then reports on it and does not raise it)."""
    from blueprints.simulate.fleet import simulate

    bp = scaling_targets(bp)
    if floor_is_set:
        result, floor_note = simulate(bp, days=1), None
    else:
        bp, result, floor_note = warm_floor(bp)
    where, note = alerting_for(bp, platform, alerting, required=alerts_required)
    reasons = [*scaling_reasons(bp, platform), *([floor_note] if floor_note else []), note]
    bp = bp.model_copy(update={"alerting": where, "rationale": [*bp.rationale, *reasons]})
    return simulation_predictions(bp, result)


def zones_of(platform: PlatformConfig | None) -> int | None:
    """The zones a platform's subnets span (its NodePools launch nodes there)."""
    return platform.network.az_count if platform is not None and platform.kind.value == "eks" else None

