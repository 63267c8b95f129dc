"""Kubernetes version rules: an EKS version out of support fails (mandatory); one in extended support is flagged
(advisory, it costs six times the standard control-plane price)."""

from __future__ import annotations

from test_policy_support import resource_violations

CLUSTER = "aws:eks/cluster:Cluster"


def cluster(version: str | None) -> dict:
    return {"name": "platform-prod-us-east-1", **({"version": version} if version else {})}


def test_a_version_in_standard_support_passes_both_rules():
    for rule in ("kubernetes-version-supported", "kubernetes-version-extended-support"):
        assert resource_violations(rule, CLUSTER, cluster("1.35"), config={"asOf": "2026-12-01"}) == []


def test_a_version_past_extended_support_fails_naming_the_end_date():
    assert resource_violations("kubernetes-version-supported", CLUSTER, cluster("1.31"), name="eks",
                               config={"asOf": "2026-12-01"}) == [
        "Cluster 'eks' runs Kubernetes 1.31, out of EKS extended support since 2026-11-26 (judged on 2026-12-01): EKS "
        "upgrades it automatically; plan the upgrade (kubernetes_version in platform.yaml, or re-plan for the "
        "default)"]


def test_the_day_standard_support_ends_is_the_day_extended_support_is_flagged():
    assert resource_violations("kubernetes-version-extended-support", CLUSTER, cluster("1.34"),
                               config={"asOf": "2026-12-02"}) == []
    [message] = resource_violations("kubernetes-version-extended-support", CLUSTER, cluster("1.34"),
                                    config={"asOf": "2026-12-03"})
    assert "in EKS extended support since 2026-12-02" in message and "$0.60/hour" in message
    assert resource_violations("kubernetes-version-supported", CLUSTER, cluster("1.34"),
                               config={"asOf": "2026-12-03"}) == []


def test_a_version_missing_from_the_catalog_fails_and_an_unset_one_is_left_to_eks():
    [message] = resource_violations("kubernetes-version-supported", CLUSTER, cluster("1.29"), name="eks")
    assert "1.29, which is not in blueprints/catalog/kubernetes.yaml" in message
    assert resource_violations("kubernetes-version-supported", CLUSTER, cluster(None)) == []
