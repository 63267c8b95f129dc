"""Who can reach what (`api-reachable`, `aws-apis-reachable`; `blueprints/catalog/endpoints.yaml`): a private
platform's API admits the deploy runner's network, and every node, add-on and pod reaches every AWS API it calls
through a VPC endpoint (a private platform) or a NAT route; what has no endpoint is never called."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from blueprints.catalog.endpoints import load_endpoint_catalog
from blueprints.review.deployability.checks import check_deployability
from blueprints.review.preview import PreviewReport, RegisteredResource
from tests.conftest import ROOT
from tests.bundled import bundled_review

STACKS = ROOT / "stacks"
PRIVATE = "platform-prod-eu-central-1"   # an existing VPC, a private API endpoint
PUBLIC = "platform-dev-us-west-2"        # a new VPC with NAT


@pytest.fixture(scope="module")
def private() -> PreviewReport:
    return bundled_review(PRIVATE)


@pytest.fixture(scope="module")
def public() -> PreviewReport:
    return bundled_review(PUBLIC)


def _findings(report: PreviewReport, check: str) -> list[str]:
    return [f.message for f in check_deployability(report, stacks_dir=STACKS) if f.check == check]


def _without(report: PreviewReport, keep) -> PreviewReport:
    return dataclasses.replace(report, resources=[r for r in report.resources if keep(r)])


def _edited(report: PreviewReport, record: RegisteredResource, edit) -> PreviewReport:
    inputs = copy.deepcopy(record.inputs)
    edit(inputs)
    new = dataclasses.replace(record, inputs=inputs)
    return dataclasses.replace(report, resources=[new if r.urn == record.urn else r for r in report.resources])


def _one(report: PreviewReport, type_token: str, name_part: str = "") -> RegisteredResource:
    [record] = [r for r in report.resources if r.type == type_token and name_part in r.name]
    return record


def test_the_private_clusters_api_admits_https_from_the_runners_network(private):
    cluster = _one(private, "aws:eks/cluster:Cluster")
    assert cluster.inputs["vpcConfig"]["endpointPublicAccess"] is False
    api = _one(private, "aws:ec2/securityGroup:SecurityGroup", "api-sg")
    assert api.resource_id in cluster.inputs["vpcConfig"]["securityGroupIds"]
    rule = _one(private, "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", "api-https")
    assert rule.inputs["securityGroupId"] == api.resource_id
    assert (rule.inputs["ipProtocol"], rule.inputs["fromPort"], rule.inputs["toPort"]) == ("tcp", 443, 443)
    assert rule.inputs["cidrIpv4"] == private.outputs["vpc_cidr"]  # the runner lives in the platform's VPC
    assert _findings(private, "api-reachable") == []


def test_a_private_cluster_without_a_rule_for_the_runner_is_a_finding(private):
    cluster = _one(private, "aws:eks/cluster:Cluster")
    api = _one(private, "aws:ec2/securityGroup:SecurityGroup", "api-sg")
    unreachable = _edited(private, cluster, lambda i: i["vpcConfig"]["securityGroupIds"].remove(api.resource_id))
    [message] = _findings(unreachable, "api-reachable")
    assert "no public endpoint" in message and "tcp/443" in message and private.outputs["vpc_cidr"] in message
    narrow = _edited(private, _one(private, "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", "api-https"),
                     lambda i: i.update(fromPort=22, toPort=22))
    assert len(_findings(narrow, "api-reachable")) == 1


def test_a_public_cluster_needs_no_runner_rule(public):
    assert _one(public, "aws:eks/cluster:Cluster").inputs["vpcConfig"]["endpointPublicAccess"] is True
    assert not [r for r in public.resources if r.name.endswith("-api-sg")]
    assert _findings(public, "api-reachable") == []


def test_a_private_platform_has_an_endpoint_for_every_api_its_callers_call(private):
    endpoints = {r.inputs["serviceName"].removeprefix("com.amazonaws.eu-central-1.")
                 for r in private.resources if r.type == "aws:ec2/vpcEndpoint:VpcEndpoint"}
    ecat = load_endpoint_catalog()
    needed = {s for caller in ("nodes", "eks:vpc-cni", "eks:eks-pod-identity-agent", "eks:aws-ebs-csi-driver",
                               "helm:karpenter", "helm:aws-load-balancer-controller", "service")
              for s in ecat.calls(caller)}
    assert needed == endpoints == set(private.subject.network.interface_endpoints)
    assert _findings(private, "aws-apis-reachable") == []


def test_a_missing_endpoint_names_every_caller_of_that_api(private):
    gone = _without(private, lambda r: not (r.type == "aws:ec2/vpcEndpoint:VpcEndpoint"
                                           and r.inputs["serviceName"].endswith(".eks-auth")))
    messages = _findings(gone, "aws-apis-reachable")
    assert messages and all("com.amazonaws.eu-central-1.eks-auth" in m for m in messages)
    callers = " ".join(messages)
    for who in ("pod-identity-agent", "ebs-csi", "karpenter", "aws-load-balancer-controller", "services' pods"):
        assert who in callers, who


def test_what_has_no_endpoint_is_never_called_on_a_private_platform(private):
    karpenter = next(r for r in private.resources if r.inputs.get("name") == "karpenter"
                     and r.type == "kubernetes:helm.sh/v3:Release")
    assert karpenter.inputs["values"]["settings"]["isolatedVPC"] is True
    [message] = _findings(_edited(private, karpenter, lambda i: i["values"]["settings"].pop("isolatedVPC")),
                          "aws-apis-reachable")
    assert "Price List" in message and "isolatedVPC: true" in message
    lbc = next(r for r in private.resources if r.inputs.get("name") == "aws-load-balancer-controller")
    [message] = _findings(_edited(private, lbc, lambda i: i["values"].pop("enableWafv2")), "aws-apis-reachable")
    assert "enableWafv2" in message
    node_class = next(r for r in private.resources if r.type == "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass")
    assert "role" not in node_class.inputs["spec"] and node_class.inputs["spec"]["instanceProfile"]

    def by_role(inputs):
        inputs["spec"]["role"] = inputs["spec"].pop("instanceProfile")
    [message] = _findings(_edited(private, node_class, by_role), "aws-apis-reachable")
    assert "spec.role" in message and "IAM" in message


def test_a_public_platform_reaches_aws_through_its_nat_routes(public):
    assert not [r for r in public.resources if r.type == "aws:ec2/vpcEndpoint:VpcEndpoint"]
    assert _findings(public, "aws-apis-reachable") == []
    no_nat = _without(public, lambda r: r.type != "aws:ec2/route:Route" or "natGatewayId" not in r.inputs)
    messages = _findings(no_nat, "aws-apis-reachable")
    assert any("system-nodes" in m and "calls ec2" in m for m in messages)
    assert any("isolatedVPC" in m for m in messages)


def test_a_service_on_a_private_platform_without_its_apis_is_a_finding():
    report = bundled_review("regulated-assistant-prod")
    assert _findings(report, "aws-apis-reachable") == []
    network = report.platform.network.model_copy(update={"interface_endpoints": ["ecr.api"]})
    platform = report.platform.model_copy(update={"network": network})
    messages = _findings(dataclasses.replace(report, platform=platform), "aws-apis-reachable")
    assert len(messages) == 2
    assert any("calls s3" in m for m in messages) and any("calls eks-auth" in m for m in messages)


def test_every_caller_calls_only_services_the_catalog_lists():
    ecat = load_endpoint_catalog()
    known = {s.name for s in ecat.services}
    for caller, entry in ecat.callers.items():
        assert set(entry.calls) <= known and entry.source, caller
    assert {e.name for e in ecat.no_endpoint} == {"iam", "pricing", "wafv2"}
