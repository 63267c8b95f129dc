"""Rollout rules shared by every Kubernetes workload: surge capacity, deadlines from the startup budget, drain,
zone spread for high availability, and the disruption budget."""

from __future__ import annotations

from blueprints.blueprint import Blueprint
from components.rollout import (
    PRESTOP_SLEEP_S,
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
    from blueprints.startup import startup_budget

    model = bp.model.model_copy(update={"weights_gib": weights_gib})
    return bp.model_copy(update={"models": [model], "startup": startup_budget(
        weights_gib=weights_gib, engine_kind="vllm", gpu=True)})


def test_rolling_update_never_drops_below_capacity(chat_prod):
    rollout = deployment_rollout(chat_prod)
    assert rollout["strategy"]["rolling_update"] == {"max_surge": 1, "max_unavailable": 0}


def test_node_pool_covers_autoscaler_max_plus_surge(chat_prod):
    for tp in (1, 2, 4, 8):
        bp = vllm_blueprint(tp, base=chat_prod)
        nodes = node_pool_max_nodes(bp)
        need = (bp.autoscaling.max_replicas + SURGE_REPLICAS) * bp.compute.gpus_per_replica
        assert nodes * bp.compute.gpus_per_node >= need
        assert (nodes - 1) * bp.compute.gpus_per_node < need  # and no more than that


def test_bigger_model_gets_longer_deadline_and_startup_budget(chat_prod):
    small, large = with_model_size(chat_prod, 15), with_model_size(chat_prod, 131)
    assert large.startup.total_s > small.startup.total_s
    assert progress_deadline_s(large) > progress_deadline_s(small)
    assert progress_deadline_s(small) >= small.startup.total_s * 1.5


def test_grace_period_covers_the_longest_request_after_prestop(chat_prod):
    assert termination_grace_period_s(chat_prod) == PRESTOP_SLEEP_S + chat_prod.network.load_balancer_idle_timeout_s


def test_high_availability_prod_spreads_over_zones_strictly():
    prod = plan_env(requirements_with(), "prod")  # availability_pct 99.9
    [zone, host] = pod_rollout(prod, SELECTOR)["topology_spread_constraints"]
    assert (zone["topology_key"], zone["when_unsatisfiable"]) == ("topology.kubernetes.io/zone", "DoNotSchedule")
    assert host["when_unsatisfiable"] == "ScheduleAnyway"


def test_lower_availability_or_dev_spreads_best_effort():
    dev = plan_env(requirements_with(), "dev")
    assert pod_rollout(dev, SELECTOR)["topology_spread_constraints"][0]["when_unsatisfiable"] == "ScheduleAnyway"
    relaxed = plan_env(requirements_with(slo={"availability_pct": 99.5}), "prod")
    assert pod_rollout(relaxed, SELECTOR)["topology_spread_constraints"][0]["when_unsatisfiable"] == "ScheduleAnyway"


def test_disruption_budget_only_with_two_or_more_replicas():
    prod = plan_env(requirements_with(), "prod")
    assert disruption_budget_spec(prod, SELECTOR) == {"max_unavailable": 1, "selector": {"match_labels": SELECTOR}}
    assert disruption_budget_spec(plan_env(requirements_with(), "dev"), SELECTOR) is None
