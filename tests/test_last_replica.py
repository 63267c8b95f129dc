"""A production service's single replica survives voluntary node disruptions (check `last-replica-eviction`): Karpenter
drains an expired node (720 h, forceful: no replacement first), a drifted or consolidated one, and an operator drains
one, all through the Eviction API; without a budget the only replica went and the service was down for a cold start.
A `minAvailable: 1` budget holds the drain until a scale-out or a rollout (surge first) moves the pod."""

from __future__ import annotations

import dataclasses

import pytest

from blueprints.review.deployability.checks import check_deployability
from blueprints.review.deployability.disruption import NODE_POOL, PDB, keeps_one
from blueprints.review.preview import PreviewReport
from components.rollout import disruption_budget_spec
from tests.conftest import ROOT
from tests.bundled import bundled_review

STACKS = ROOT / "stacks"
SELECTOR = {"app.kubernetes.io/name": "vllm"}


@pytest.fixture(scope="module")
def partner() -> PreviewReport:
    """partner-api-prod: vLLM in production at one replica."""
    return bundled_review("partner-api-prod")


def _findings(report: PreviewReport) -> list[str]:
    return [f.message for f in check_deployability(report, stacks_dir=STACKS) if f.check == "last-replica-eviction"]


@pytest.mark.parametrize("stack", ["partner-api-prod", "support-sentiment-prod", "edge-classifier-prod"])
def test_every_single_replica_production_service_keeps_its_replica(stack):
    report = bundled_review(stack)
    assert report.blueprint.production and max(1, report.blueprint.autoscaling.min_replicas) == 1
    [budget] = [r.inputs for r in report.resources if r.type == PDB]
    assert budget["spec"]["minAvailable"] == 1 and keeps_one(budget)
    assert _findings(report) == []


def test_budgets_by_replicas_and_environment(partner):
    assert disruption_budget_spec(partner.blueprint, SELECTOR) == {"min_available": 1,
                                                                   "selector": {"match_labels": SELECTOR}}
    staging = bundled_review("regulated-assistant-staging").blueprint  # one replica, not production
    assert max(1, staging.autoscaling.min_replicas) == 1 and disruption_budget_spec(staging, SELECTOR) is None
    two = bundled_review("search-relevance-prod").blueprint
    assert disruption_budget_spec(two, SELECTOR)["max_unavailable"] == 1  # a drain may take one of two


def test_no_budget_is_a_finding(partner):
    """What the program registered before: no PodDisruptionBudget for a single replica."""
    report = dataclasses.replace(partner, resources=[r for r in partner.resources if r.type != PDB])
    [message] = _findings(report)
    assert "no PodDisruptionBudget keeping it" in message and "cold start" in message


def test_a_budget_that_lets_it_go_or_a_pool_that_deletes_it_anyway_is_a_finding(partner):
    [pdb] = [r for r in partner.resources if r.type == PDB]
    lax = dataclasses.replace(pdb, inputs={**pdb.inputs, "spec": {**pdb.inputs["spec"], "minAvailable": 0}})
    report = dataclasses.replace(partner, resources=[lax if r.urn == pdb.urn else r for r in partner.resources])
    assert len(_findings(report)) == 1
    [pool] = [r for r in partner.resources if r.type == NODE_POOL]
    spec = pool.inputs["spec"]
    graced = dataclasses.replace(pool, inputs={**pool.inputs, "spec": {**spec, "template": {
        **spec["template"], "spec": {**spec["template"]["spec"], "terminationGracePeriod": "1h"}}}})
    report = dataclasses.replace(partner, resources=[graced if r.urn == pool.urn else r for r in partner.resources])
    [message] = _findings(report)
    assert "terminationGracePeriod 1h" in message
