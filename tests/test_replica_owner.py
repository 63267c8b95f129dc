"""One owner per replica count: every Deployment an autoscaler targets leaves `spec.replicas` to it after creation
(Pulumi ignores the field), every other Deployment keeps applying its planned count, over every bundled stack."""

from __future__ import annotations

import dataclasses

import pytest

from blueprints.contracts.sections import FIXED_REPLICAS
from blueprints.core import defaults
from blueprints.review.deployability.context import check_context
from blueprints.review.deployability.replicas import SCALABLE, check_replica_owner, scaled_targets
from tests.conftest import ROOT
from tests.test_edge_planning import planned
from tests.test_edge_program import run_edge
from tests.test_edge_requirements import edge

PATH = defaults.AUTOSCALED_REPLICAS_PATH


def workloads(records) -> list:
    return [r for r in records if r.type in SCALABLE]


def owned_and_free(records) -> tuple[list, list]:
    """(Deployments an autoscaler targets, the others), matched by kind, namespace and name."""
    targets = scaled_targets(records)
    owned = [r for r in workloads(records)
             if (SCALABLE[r.type], r.inputs["metadata"].get("namespace"), r.inputs["metadata"]["name"]) in targets]
    return owned, [r for r in workloads(records) if r not in owned]


def test_every_autoscaled_deployment_is_ignored_and_every_fixed_one_keeps_its_replicas(bundled_previews):
    autoscaled_stacks = 0
    for stack, report in bundled_previews.items():
        owned, free = owned_and_free(report.resources)
        for record in owned:
            assert PATH in record.ignore_changes, (stack, record.name)
        for record in free:  # the router's fixed pair, platform workloads
            assert PATH not in record.ignore_changes, (stack, record.name)
            assert record.inputs["spec"]["replicas"] >= 1, (stack, record.name)
        assert [f for f in report.deployability if f.check == "replica-owner"] == [], stack
        if not report.is_platform and report.blueprint.platform.kind != "sagemaker":
            # every Kubernetes service is autoscaled here: its serving Deployment is the scaler's target
            assert [r.inputs["metadata"]["name"] for r in owned] == [report.blueprint.workload_name], stack
            autoscaled_stacks += 1
    assert autoscaled_stacks >= 10  # the test covers every archetype's bundled stacks, not none


def test_the_router_keeps_its_fixed_replicas(bundled_previews):
    report = bundled_previews["rag-assistant-generator-prod"]
    _, free = owned_and_free(report.resources)
    [router] = [r for r in free if r.inputs["metadata"]["name"] != report.blueprint.workload_name]
    assert router.inputs["spec"]["replicas"] == report.blueprint.router.replicas
    assert router.ignore_changes == ()


def test_a_fixed_replica_service_keeps_applying_its_count():
    fixed = planned(edge(operations={"platform": "edge-cluster", "cluster_addons": ["metrics-server"]}))
    assert fixed.autoscaling.metric == FIXED_REPLICAS  # the owned nodes hold no more: no autoscaler
    run = run_edge(fixed)
    assert not [r for r in run.records if r.type.endswith(("ScaledObject", "HorizontalPodAutoscaler"))]
    [deployment] = [r for r in workloads(run.records) if r.inputs["metadata"]["name"] == fixed.workload_name]
    assert deployment.inputs["spec"]["replicas"] == fixed.autoscaling.min_replicas
    assert PATH not in deployment.ignore_changes


@pytest.mark.parametrize("stack", ["chat-assistant-prod", "support-sentiment-prod"])  # KEDA, HPA
def test_an_autoscaled_deployment_that_applies_its_replicas_fails_the_preview(bundled_previews, stack):
    report = bundled_previews[stack]
    [owned], _ = owned_and_free(report.resources)
    broken = dataclasses.replace(report, resources=[dataclasses.replace(r, ignore_changes=()) if r is owned else r
                                                    for r in report.resources])
    [finding] = check_replica_owner(check_context(broken, ROOT / "stacks"))
    assert finding.resource == owned.urn and "spec.replicas" in finding.message and "pulumi up" in finding.message


def test_a_fixed_deployment_that_ignores_its_replicas_fails_the_preview(bundled_previews):
    report = bundled_previews["rag-assistant-generator-prod"]
    _, [router] = owned_and_free(report.resources)
    broken = dataclasses.replace(report, resources=[dataclasses.replace(r, ignore_changes=(PATH,)) if r is router
                                                    else r for r in report.resources])
    [finding] = check_replica_owner(check_context(broken, ROOT / "stacks"))
    assert finding.resource == router.urn and "never reaches the cluster" in finding.message
