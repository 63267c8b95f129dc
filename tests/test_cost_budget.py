"""Monthly cost per environment, spot estimates and the budget ceiling (unit costs: test_unit_costs.py)."""

from __future__ import annotations

import math
import re

import pytest

from blueprints.catalog import load_catalog
from blueprints.core.errors import SizingError
from blueprints.plan.planner import plan
from tests.conftest import PLAN_DATE, plan_env, platforms_for, requirements_with


def test_monthly_cost_is_instances_times_730_hours_plus_the_services_own_load_balancer(catalog):
    bp = plan_env(requirements_with(), "prod")
    nodes = bp.predictions.cost_lines[0]
    price = catalog.instance(bp.compute.instance_type).usd_per_hour
    assert nodes.monthly_usd == pytest.approx(nodes.quantity * price * 730, abs=0.01)
    assert [line.item for line in bp.predictions.cost_lines[1:]] == ["network load balancer"]
    assert bp.predictions.monthly_cost_usd == pytest.approx(sum(line.monthly_usd for line in bp.predictions.cost_lines))


def test_the_shared_platform_is_named_with_its_cost_but_not_charged_to_the_service():
    bp = plan_env(requirements_with(), "prod")
    assert bp.platform.stack == "platform-prod-us-east-1"
    assert bp.predictions.platform_monthly_cost_usd == pytest.approx(465.89)  # control plane, 2 system nodes, 3 NATs
    assert not any("EKS" in line.item or "NAT" in line.item for line in bp.predictions.cost_lines)
    assert any(r.startswith("lands on the shared platform platform-prod-us-east-1 (cluster, $466/month")
               for r in bp.rationale)


def test_a_customer_managed_key_is_the_services_own_line():
    bp = plan_env(requirements_with("regulated-assistant"), "prod")
    assert [line.item for line in bp.predictions.cost_lines[1:]] == [
        "network load balancer", "KMS key (model store, customer-managed)"]


def test_spot_environments_are_priced_at_the_spot_factor_and_flagged_as_estimates(catalog):
    bp = plan_env(requirements_with(), "dev")
    nodes = bp.predictions.cost_lines[0]
    assert bp.predictions.cost_is_estimate is True
    assert ", spot)" in nodes.item
    assert nodes.usd_per_hour == pytest.approx(catalog.instance(bp.compute.instance_type).usd_per_hour * 0.4, abs=1e-4)
    assert any("spot capacity: prices are estimates" in r for r in bp.rationale)


def test_on_demand_environments_are_not_estimates():
    assert plan_env(requirements_with(), "prod").predictions.cost_is_estimate is False


def test_sagemaker_has_no_cluster_cost_and_ignores_spot():
    bp = plan_env(requirements_with("prototype-summarizer", environments={
        "pilot": {"region": "us-east-1", "spot": True}}), "pilot")
    assert [line.item for line in bp.predictions.cost_lines] == ["SageMaker instances (ml.g6e.2xlarge)"]
    assert bp.compute.capacity_type.value == "on-demand" and bp.predictions.cost_is_estimate is False
    assert "environments.pilot.spot is ignored: SageMaker real-time endpoints run on-demand only" in bp.rationale


def test_an_existing_cluster_adds_no_cluster_cost():
    bp = plan_env(requirements_with("support-sentiment"), "prod")
    assert [line.item for line in bp.predictions.cost_lines] == ["CPU nodes (c7g.4xlarge)"]


def test_over_budget_is_an_error_naming_the_overrun_and_what_the_budget_buys():
    busy = {"dev": {"region": "us-west-2"}, "prod": {"region": "us-east-1", "traffic_scale": 4}}
    free = plan_env(requirements_with(environments=busy, budget={"max_monthly_usd": None}), "prod")
    replicas, monthly = free.compute.replicas, free.planned_monthly_usd  # the planned peak, before any burst
    assert free.placement.per_new_node == 1
    node_monthly = free.predictions.cost_lines[0].usd_per_hour * 730  # one replica per node
    budget = math.ceil(monthly - 2 * node_monthly)  # pays for two nodes fewer (and not a cent less)
    with pytest.raises(SizingError) as exc:
        plan_env(requirements_with(environments=busy, budget={"max_monthly_usd": budget}), "prod")
    msg = str(exc.value)
    assert msg.startswith(f"environments.prod: the cheapest plan meeting the SLO (vllm-gpu, {replicas}x "
                          f"{free.compute.instance_type}) costs ${monthly:,.0f}/month, ${monthly - budget:,.0f} over "
                          f"budget.max_monthly_usd={budget}")
    bought = re.search(rf"The budget pays for (\d+) of the {replicas} replicas, about (\d+)% of this environment's "
                       "peak load", msg)
    assert bought and int(bought.group(1)) == replicas - 2
    assert int(bought.group(2)) == round(int(bought.group(1)) / replicas * 100)
    assert f"raise budget.max_monthly_usd to >= {math.ceil(monthly)}" in msg


def test_a_budget_below_the_minimum_replicas_says_it_pays_for_nothing():
    # The availability floor's 2 replicas need 2 nodes of the planned type (today 2 p5.4xlarge at $5,022.40) plus the
    # $16.43 network load balancer; the planned peak (today 3 of them) costs more still.
    from blueprints.plan.options.search import replicas_floor

    free = plan_env(requirements_with(budget={"max_monthly_usd": None}), "prod")
    minimum = replicas_floor(requirements_with(), "prod")
    assert minimum == 2 and free.placement.per_new_node == 1
    node = free.predictions.cost_lines[0].usd_per_hour * 730
    fixed = sum(line.monthly_usd for line in free.predictions.cost_lines[1:])
    assert 1000 < minimum * node + fixed < free.planned_monthly_usd
    with pytest.raises(SizingError, match=re.escape(
            f"does not pay for the minimum of 2 replica(s): 2 node(s) at ${node:,.0f}/month each (1 replica(s) per "
            f"node) plus ${fixed:,.0f}/month of load balancer and keys: raise budget.max_monthly_usd to >= "
            f"{math.ceil(free.planned_monthly_usd)} for the planned peak (>= {math.ceil(minimum * node + fixed)} "
            "for that minimum alone)")):
        plan_env(requirements_with(budget={"max_monthly_usd": 1000}), "prod")


def test_a_budget_below_the_autoscalers_maximum_caps_it_at_what_the_budget_pays_and_says_so():
    """The budget applies to the most the autoscaler can run: a budget that holds the planned peak but not the
    maximum (twice the peak's replicas) caps the maximum at the replicas it pays for, and the plan says so."""
    free = plan_env(requirements_with(budget={"max_monthly_usd": None}), "prod")
    node = free.predictions.cost_lines[0].usd_per_hour * 730
    fixed = sum(line.monthly_usd for line in free.predictions.cost_lines[1:])
    assert free.autoscaling.max_replicas == 2 * free.compute.replicas
    budget = math.floor(free.planned_monthly_usd + 2.5 * node)  # pays for 2 replicas above the peak
    capped = plan_env(requirements_with(budget={"max_monthly_usd": budget}), "prod")
    assert capped.autoscaling.max_replicas == free.compute.replicas + 2
    assert capped.predictions.max_monthly_cost_usd == pytest.approx((free.compute.replicas + 2) * node + fixed,
                                                                    abs=0.02)
    assert capped.predictions.monthly_cost_usd <= capped.predictions.max_monthly_cost_usd <= budget
    assert capped.node_pool_max_nodes == capped.placement.nodes(free.compute.replicas + 2 + 1)
    [note] = [r for r in capped.rationale if r.startswith("autoscaling max capped")]
    assert note.startswith(f"autoscaling max capped at {free.compute.replicas + 2} replica(s) (from "
                           f"{free.autoscaling.max_replicas}): budget.max_monthly_usd={budget}")


def test_a_plan_exactly_within_budget_passes_and_the_budget_is_per_environment():
    free = plan_env(requirements_with(budget={"max_monthly_usd": None}), "prod").predictions.max_monthly_cost_usd
    exact = math.ceil(free)
    req = requirements_with(budget={"max_monthly_usd": exact})
    planned = plan_env(req, "prod").predictions
    assert planned.max_monthly_cost_usd == free <= exact and planned.monthly_cost_usd <= exact
    assert plan_env(req, "dev").predictions.max_monthly_cost_usd <= exact


def test_the_peak_is_never_below_the_expected_cost_and_the_maximum_never_below_the_peak():
    """Expected (simulated) <= peak <= the autoscaler's maximum; a peak above the planned fleet's cost is the fleet
    the simulated autoscaler ran after a burst, and the plan says so."""
    for base, env in (("chat-assistant", "dev"), ("chat-assistant", "prod"), ("rag-assistant", "dev")):
        for bp in plan(requirements_with(base), load_catalog(), as_of=PLAN_DATE, environments=[env],
                       platforms=platforms_for(requirements_with(base))):
            p = bp.predictions
            assert p.expected_monthly_cost_usd <= p.monthly_cost_usd <= p.max_monthly_cost_usd, bp.stack
            if p.cost_lines[0].quantity > bp.planned_nodes:
                assert any(f"the peak is {p.cost_lines[0].quantity:g} nodes, not the planned {bp.planned_nodes}" in r
                           for r in bp.rationale), bp.stack


def test_over_budget_applies_to_every_archetype():
    with pytest.raises(SizingError, match=r"\(onnx-cpu, 1x c7g.4xlarge\) costs \$423/month, \$323 over"):
        plan_env(requirements_with("support-sentiment", budget={"max_monthly_usd": 100}), "prod")
    with pytest.raises(SizingError, match=r"\(sagemaker-endpoint, 1x ml.g6e.2xlarge\) costs \$2,044/month"):
        plan_env(requirements_with("prototype-summarizer", budget={"max_monthly_usd": 1000}), "pilot")
    with pytest.raises(SizingError, match=r"\(triton-multi-model, 2x g6.xlarge\) costs \$1,191/month"):
        plan_env(requirements_with("search-relevance", budget={"max_monthly_usd": 500}), "prod")


def test_plans_outside_the_price_region_say_their_cost_uses_us_east_1_prices():
    note = ("costs use the catalog's us-east-1 list prices; eu-central-1 prices differ, so check them before relying "
            "on the budget")
    assert note in plan_env(requirements_with("regulated-assistant"), "prod").rationale
    assert not any(r.startswith("costs use") for r in plan_env(requirements_with(), "prod").rationale)
