"""One capacity, everywhere: each autoscaler's target comes from the same per-replica capacity the plan sized the
replicas with, so at the planned peak it asks for exactly the planned replicas; the budget applies to the most the
autoscaler can run; the peak is the largest fleet it runs and never below the expected (simulated) cost."""

from __future__ import annotations

import pytest

from blueprints.catalog.engines import load_engine_catalog
from blueprints.contracts.sections import FIXED_REPLICAS, Archetype
from blueprints.plan.scaling import implied_replicas
from blueprints.simulate.fleet import simulate
from tests.conftest import plan_env, requirements_with


def _peak(bp) -> float:
    return sum(m.traffic.peak_requests_per_s for m in bp.models if m.traffic)


def _services(previews):
    return [r.blueprint for r in previews.values() if not r.is_platform]


def test_every_bundled_autoscaler_asks_for_exactly_the_planned_replicas_at_the_planned_peak(bundled_previews):
    """vLLM (requests running), Triton (requests pending), ONNX Runtime (CPU) and SageMaker (invocations per
    instance): the target at the planned peak load implies the planned replicas, no more and no fewer."""
    kinds = set()
    for bp in _services(bundled_previews):
        if bp.autoscaling.metric == FIXED_REPLICAS:
            continue
        assert implied_replicas(bp, _peak(bp)) == bp.compute.replicas, bp.stack
        kinds.add(bp.autoscaling.metric)
    llm = {e.signal("running") for e in load_engine_catalog().values()}  # each engine's running requests
    assert kinds - llm == {"nv_inference_pending_request_count", "cpu", "SageMakerVariantInvocationsPerInstance"}
    assert "vllm:num_requests_running" in kinds


def test_sagemakers_target_times_the_planned_instances_covers_the_peak_within_one_instance(bundled_previews):
    """Checked by: target x planned instances >= the peak's invocations a minute > target x (instances - 1)."""
    sagemaker = [bp for bp in _services(bundled_previews) if bp.archetype is Archetype.SAGEMAKER_ENDPOINT]
    issue = plan_env(requirements_with("prototype-summarizer", traffic={"peak_requests_per_s": 3},
                                       budget={"max_monthly_usd": 12000}), "pilot")
    for bp in [*sagemaker, issue]:
        a, per_minute = bp.autoscaling, _peak(bp) * 60
        assert a.target * bp.compute.replicas >= per_minute > a.target * (bp.compute.replicas - 1), bp.stack
        assert a.target * 60 <= bp.predictions.requests_per_s_capacity / bp.compute.replicas * 3600  # within SLO rate


def test_a_sagemaker_endpoint_holds_its_four_planned_instances_at_the_peak_and_its_budget_caps_the_maximum():
    """The issue's case: Mistral-7B on ml.g6e.2xlarge at 3 requests/s plans 4 instances ($8,176/month). A target at
    half an instance's capacity ran 7 at the peak (about $14.3k, over the $12k budget); the target at an instance's
    peak share holds 4, and the $12k budget caps the maximum at the 5 instances it pays for."""
    bp = plan_env(requirements_with("prototype-summarizer", traffic={"peak_requests_per_s": 3},
                                    budget={"max_monthly_usd": 12000}), "pilot")
    assert (bp.compute.replicas, bp.autoscaling.max_replicas) == (4, 5)
    assert bp.predictions.monthly_cost_usd == pytest.approx(4 * 2044.0, abs=1)
    assert bp.predictions.max_monthly_cost_usd == pytest.approx(5 * 2044.0, abs=1)
    assert bp.predictions.max_monthly_cost_usd <= 12000
    steady = simulate(bp, trace=[3.0] * 120)  # two hours at the peak
    assert max(steady.minutes["replicas"]) == 4 and steady.most_nodes == 4
    assert any(r.startswith("autoscaling max capped at 5 replica(s) (from 8): budget.max_monthly_usd=12000")
               for r in bp.rationale)


def test_expected_is_never_above_the_peak_on_every_stack(bundled_previews):
    """Checked by: the simulated expected cost <= the peak <= the autoscaler's maximum, on every bundled stack."""
    for bp in _services(bundled_previews):
        p = bp.predictions
        assert p.expected_monthly_cost_usd <= p.monthly_cost_usd + 0.005, bp.stack
        assert p.monthly_cost_usd <= p.max_monthly_cost_usd + 0.005, bp.stack


def test_the_triton_target_is_what_waits_at_a_replicas_peak_share_and_the_cpu_one_the_planned_utilisation():
    from blueprints.capacity.replica import replica_model
    from blueprints.core.defaults import TARGET_UTILIZATION

    triton = plan_env(requirements_with("search-relevance"), "prod")
    pending = replica_model(triton).at(_peak(triton) / triton.compute.replicas).pending
    assert pending <= triton.autoscaling.target < pending * 1.01
    onnx = plan_env(requirements_with("support-sentiment", budget={"max_monthly_usd": None}), "prod")
    assert onnx.autoscaling.target == TARGET_UTILIZATION[onnx.model.traffic.pattern] * 100
    assert implied_replicas(onnx, _peak(onnx) * 3) > onnx.compute.replicas  # scales out past the planned load


def test_a_target_rounded_up_never_passes_what_one_replica_reaches():
    """A SageMaker endpoint sized at its instances' capacity: 24.477 invocations a minute per instance rounded up to
    3 significant figures is 24.5, which one instance never reaches (the planner property test's example); the target
    stops at 24.477. Below it, the rounded-up target stands."""
    from blueprints.contracts.consistency import reachable_target
    from blueprints.contracts.stackconfig import read_config
    from blueprints.plan.scaling import reachable_planned_target
    from tests.conftest import ROOT

    bp = read_config(ROOT / "stacks" / "Pulumi.prototype-summarizer-pilot.yaml")
    n = bp.engine.initial_instance_count
    bp = bp.model_copy(update={"predictions": bp.predictions.model_copy(
        update={"requests_per_s_capacity": 24.477 * n / 60})})
    assert reachable_target(bp) == 24.477
    assert reachable_planned_target(bp, 24.4769) == 24.477
    assert reachable_planned_target(bp, 24.3) == 24.3
    assert reachable_planned_target(bp, 24.31) == 24.4  # rounded up to 3 significant figures, still reachable
