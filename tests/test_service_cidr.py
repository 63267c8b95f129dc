"""The cluster's Service CIDR: platform.yaml's `service_cidr` (bounded where it enters), EKS's own choice by default,
set on the cluster only where that cannot replace a cluster, and exported for the services' NetworkPolicies."""

from __future__ import annotations

import pytest
import yaml
from typer.testing import CliRunner

from blueprints.catalog.cluster_network import eks_default_service_cidr, service_cidr_problem
from blueprints.cli import app
from blueprints.contracts.platform import planned_outputs
from blueprints.contracts.stackconfig import read_platform_config
from tests.conftest import ROOT

runner = CliRunner()
EKS_CLUSTER = "aws:eks/cluster:Cluster"


@pytest.mark.parametrize(("vpc", "expected"), [
    (["10.30.0.0/16"], "172.20.0.0/16"), (["192.168.0.0/16"], "10.100.0.0/16"), (["172.20.0.0/16"], "10.100.0.0/16"),
    # any block of the VPC in 10.0.0.0/8 (amazon-eks-ami bootstrap.sh counts every vpc-ipv4-cidr-block)
    (["192.168.0.0/16", "10.1.0.0/16"], "172.20.0.0/16"),
])
def test_ekss_default_service_cidr_follows_the_vpcs_cidr_blocks(vpc, expected):
    assert eks_default_service_cidr(vpc) == expected


@pytest.mark.parametrize(("cidr", "problem"), [
    ("172.20.0.0/16", None), ("10.96.0.0/12", None), ("192.168.4.0/24", None),
    ("10.0.0.0/8", "/12 to /24"), ("10.100.0.0/25", "/12 to /24"), ("100.64.0.0/16", "RFC 1918"),
    ("172.32.0.0/16", "RFC 1918"),
])
def test_an_explicit_service_cidr_is_bounded_as_eks_bounds_it(cidr, problem):
    found = service_cidr_problem(cidr)
    assert (found is None) if problem is None else (problem in found)


def test_bundled_platforms_set_the_service_cidr_eks_would_choose_and_existing_vpcs_leave_it_to_eks():
    found = {p.name: read_platform_config(p) for p in (ROOT / "stacks").glob("Pulumi.platform-*.yaml")}
    new = {name: cfg for name, cfg in found.items() if cfg.network.existing_vpc is None and cfg.kind.value == "eks"}
    existing = {name: cfg for name, cfg in found.items() if cfg.network.existing_vpc is not None}
    assert new and existing
    for cfg in new.values():  # 10.x VPCs: EKS's 172.20.0.0/16, set explicitly (the value a cluster has already)
        assert cfg.network.service_cidr == eks_default_service_cidr([cfg.network.vpc_cidr]) == "172.20.0.0/16"
    for cfg in existing.values():  # unknown VPC blocks: no cluster input, EKS chooses and the platform exports it
        assert cfg.network.service_cidr is None
        assert planned_outputs(cfg).service_cidr == cfg.network.planned_service_cidr


@pytest.mark.parametrize("platform", ["platform-prod-us-east-1", "platform-prod-eu-central-1"])
def test_the_cluster_gets_the_planned_service_cidr_and_the_platform_exports_what_eks_reports(bundled_previews,
                                                                                            platform):
    report = bundled_previews[platform]
    cfg = report.subject
    [cluster] = [r for r in report.resources if r.type == EKS_CLUSTER]
    given = (cluster.inputs.get("kubernetesNetworkConfig") or {}).get("serviceIpv4Cidr")
    assert given == cfg.network.service_cidr
    # The mocks report the input, else EKS's choice for the existing VPC's block (10.20.0.0/16: 172.20.0.0/16).
    assert report.outputs["service_cidr"] == (given or "172.20.0.0/16")


def _plan_with(project, edit) -> str:
    path = project / "stacks" / "requirements" / "platform.yaml"
    data = yaml.safe_load(path.read_text())
    edit(data["platforms"]["prod-us-east-1"])
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    result = runner.invoke(app, ["plan", "stacks/requirements/chat-assistant.yaml", "--as-of", "2026-12-01"])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    return " ".join(result.output.split())


def test_a_service_cidr_overlapping_the_vpc_exits_2_naming_both_ranges_and_the_field(project):
    out = _plan_with(project, lambda p: p.update(service_cidr="10.30.128.0/20"))
    assert "platform.yaml" in out and "platforms.prod-us-east-1" in out
    assert "service_cidr 10.30.128.0/20 overlaps vpc_cidr 10.30.0.0/16" in out


def test_a_default_service_cidr_overlapping_a_peered_network_exits_2_naming_both(project):
    out = _plan_with(project, lambda p: p.update(peered_cidrs=["172.20.8.0/21"]))
    assert "the default service_cidr 172.20.0.0/16 (what EKS chooses for VPC 10.30.0.0/16) overlaps peered_cidrs " \
           "172.20.8.0/21" in out
    assert "set service_cidr to an RFC 1918 /12-/24 range outside 10.30.0.0/16, 172.20.8.0/21" in out


@pytest.mark.parametrize(("peered", "message"), [
    ("0.0.0.0/0", "peered_cidrs 0.0.0.0/0 is wider than /8"),
    ("10.30.0.0/16", "peered_cidrs 10.30.0.0/16 overlaps the platform's own VPC 10.30.0.0/16"),
    ("10.30.4.0/24", "peered_cidrs 10.30.4.0/24 overlaps the platform's own VPC 10.30.0.0/16"),
])
def test_a_peered_network_that_cannot_be_one_exits_2(project, peered, message):
    assert message in _plan_with(project, lambda p: p.update(peered_cidrs=[peered]))


@pytest.mark.parametrize(("value", "message"), [
    ("100.64.0.0/16", "RFC 1918"), ("10.0.0.0/8", "/12 to /24"), ("172.20.0.1/16", "host bits"),
])
def test_a_service_cidr_eks_refuses_exits_2(project, value, message):
    out = _plan_with(project, lambda p: p.update(service_cidr=value))
    assert "service_cidr" in out and message in out


def test_a_service_cidr_appearing_on_a_cluster_is_reviewed_as_a_replacement_unless_eks_already_chose_it():
    from blueprints.review.changes import resource_replacements
    from blueprints.review.diff import ResourceChange, SettingChange

    change = ResourceChange(EKS_CLUSTER, "platform-prod-us-east-1-cluster-eks", [
        SettingChange("kubernetesNetworkConfig.serviceIpv4Cidr", None, "172.20.0.0/16")])
    [found] = resource_replacements([change], [], None, None)
    assert found.effect.value == "replace" and found.change == "Service CIDR"
    assert "unless the cluster already reports this Service CIDR" in found.consequence
    assert "aws eks describe-cluster" in found.consequence
