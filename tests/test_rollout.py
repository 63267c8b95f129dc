"""Rollout rules shared by every Kubernetes workload: surge capacity, deadlines from the startup budget, drain,
zone spread for high availability, and the disruption budget."""

from __future__ import annotations

from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.proxy import drain_window_s, request_timeout_s
from blueprints.core import defaults
from components.rollout import (
    SURGE_REPLICAS,
    deployment_rollout,
    disruption_budget_spec,
    node_pool_max_nodes,
    pod_rollout,
    progress_deadline_s,
    termination_grace_period_s,
)
from tests.conftest import plan_env, requirements_with, vllm_blueprint

SELECTOR = {"app.kubernetes.io/name": "vllm"}


def with_model_size(bp: Blueprint, weights_gib: float) -> Blueprint:
    from blueprints.plan.startup import startup_estimate

    model = bp.model.model_copy(update={"weights_gib": weights_gib})
    return bp.model_copy(update={"models": [model], "startup": startup_estimate(
        weights_gib=weights_gib, engine_kind="vllm", gpu=True, streamed=True, params_b=weights_gib / 2).budget})


def test_rolling_update_never_drops_below_capacity(chat_prod):
    rollout = deployment_rollout(chat_prod)
    assert rollout["strategy"]["rolling_update"] == {"max_surge": 1, "max_unavailable": 0}


def test_node_pool_covers_autoscaler_max_plus_surge_spread_over_the_zones(chat_prod):
    for tp in (1, 2, 4, 8):
        bp = vllm_blueprint(tp, base=chat_prod)
        per_node, zones = bp.compute.replicas_per_node, bp.platform.zones
        pods = bp.autoscaling.max_replicas + SURGE_REPLICAS
        nodes = node_pool_max_nodes(bp)
        assert nodes * bp.compute.gpus_per_node >= pods * bp.compute.gpus_per_replica
        # Zones hold pods // zones (+1 for the first pods % zones); each zone rounds up to whole nodes.
        split = [pods // zones + (1 if z < pods % zones else 0) for z in range(zones)]
        assert nodes == sum(-(-n // per_node) for n in split)


def test_the_node_pool_limit_is_the_placement_of_the_maximum_plus_the_surge(chat_prod):
    """9 pods (8 replicas + 1 surge) at 2 per node over 3 zones need 6 nodes, not 5: 3 per zone, 2 nodes each; a pool
    limited to 5 would leave the rollout's surge Pending. The NodePool limit is that placement's count."""
    from blueprints.core.defaults import SURGE_REPLICAS
    from tests.blueprint_builders import derive

    bp = derive(vllm_blueprint(4, base=chat_prod), autoscaling={"max_replicas": 8})
    assert bp.compute.replicas_per_node == 2 and bp.platform.zones == 3
    assert bp.placement.nodes(9) == 6 and bp.placement.nodes(7) == 4 and bp.placement.nodes(1) == 1
    assert bp.autoscaling.max_replicas + SURGE_REPLICAS == 9 and node_pool_max_nodes(bp) == 6


def test_bigger_model_gets_longer_deadline_and_startup_budget(chat_prod):
    small, large = with_model_size(chat_prod, 15), with_model_size(chat_prod, 131)
    assert large.startup.total_s > small.startup.total_s
    assert progress_deadline_s(large) > progress_deadline_s(small)
    assert progress_deadline_s(small) >= small.startup.total_s * 1.5


def test_grace_period_covers_the_deregistration_the_longest_request_and_the_exit(chat_prod):
    assert drain_window_s(chat_prod) == defaults.DEREGISTRATION_S + request_timeout_s(chat_prod)
    assert termination_grace_period_s(chat_prod) == drain_window_s(chat_prod) + defaults.EXIT_MARGIN_S


def test_high_availability_prod_spreads_over_at_least_two_zones_with_min_domains():
    prod = plan_env(requirements_with(), "prod")  # availability_pct 99.9
    [zone, host] = pod_rollout(prod, SELECTOR)["topology_spread_constraints"]
    assert (zone["topology_key"], zone["when_unsatisfiable"]) == ("topology.kubernetes.io/zone", "DoNotSchedule")
    assert zone["min_domains"] == 2  # without it, one zone alone satisfies maxSkew and both replicas may share it
    assert (host["topology_key"], host["when_unsatisfiable"]) == ("kubernetes.io/hostname", "ScheduleAnyway")
    assert host["max_skew"] == prod.compute.replicas_per_node


def test_two_replicas_sharing_a_node_type_are_on_two_nodes_in_two_zones_with_a_drainable_budget(chat_prod):
    """Two replicas fit one 8-GPU node at tensor parallel 4, but the zone spread (maxSkew 1 over >= 2 zones) puts
    them in two zones, so on two nodes, and the plan bills both; a drain of one node evicts one replica, which
    maxUnavailable 1 allows (the old plan put them on one node and its PDB blocked the drain)."""
    from tests.blueprint_builders import derive

    prod = derive(vllm_blueprint(4, base=chat_prod), compute={"replicas": 2}, autoscaling={"min_replicas": 2})
    assert prod.compute.replicas_per_node == 2 and prod.strict_zone_spread
    [zone, host] = pod_rollout(prod, SELECTOR)["topology_spread_constraints"]
    assert (zone["when_unsatisfiable"], zone["max_skew"], zone["min_domains"]) == ("DoNotSchedule", 1, 2)
    assert host["max_skew"] == 2  # Karpenter may pack a node as full as the plan bills it, no fuller
    assert prod.planned_nodes == 2 and prod.predictions.cost_lines[0].quantity == 2
    assert disruption_budget_spec(prod, SELECTOR)["max_unavailable"] == 1


def test_lower_availability_or_dev_spreads_best_effort():
    dev = plan_env(requirements_with(), "dev")
    assert pod_rollout(dev, SELECTOR)["topology_spread_constraints"][0]["when_unsatisfiable"] == "ScheduleAnyway"
    relaxed = plan_env(requirements_with(slo={"availability_pct": 99.5}), "prod")
    zone = pod_rollout(relaxed, SELECTOR)["topology_spread_constraints"][0]
    assert zone["when_unsatisfiable"] == "ScheduleAnyway" and "min_domains" not in zone


def test_disruption_budget_only_with_two_or_more_replicas():
    prod = plan_env(requirements_with(), "prod")
    assert disruption_budget_spec(prod, SELECTOR) == {"max_unavailable": 1, "selector": {"match_labels": SELECTOR}}
    assert disruption_budget_spec(plan_env(requirements_with(), "dev"), SELECTOR) is None


def test_the_readiness_gate_label_is_on_the_namespace_before_any_serving_pod():
    """The load balancer controller injects readiness gates at pod creation in namespaces carrying the label, so the
    namespace (created with the label) must come before the Deployment."""
    from components.serving import READINESS_GATE_LABEL
    from tests.blueprint_builders import run_program

    run = run_program(plan_env(requirements_with(), "prod"))
    namespace = run.one("kubernetes:core/v1:Namespace")
    assert namespace.inputs["metadata"]["labels"][READINESS_GATE_LABEL] == "enabled"
    assert namespace.urn in run.one("kubernetes:apps/v1:Deployment").dependencies
