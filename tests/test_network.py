"""Network: VPC over the region's zones, NAT per environment, routes, security groups, private endpoints."""

from __future__ import annotations

import ipaddress

import pytest

from blueprints.review.preview import run_under_mocks
from blueprints.requirements.platform_file import ExistingVpc
from components.network import Network, NetworkArgs, subnet_cidrs

TAGS = {"service": "chat", "environment": "prod"}


def run_network(**kwargs):
    args = NetworkArgs(region="us-east-1", tags=TAGS, **kwargs)
    return run_under_mocks(lambda: {"private": Network("net", args).private_subnet_ids}, stack="chat-prod",
                           config={"aws:region": "us-east-1"})


def test_subnets_span_up_to_three_zones_chosen_by_zone_id():
    run = run_network()  # the mock's four zones: names a-d are zone IDs az3, az1, az4, az2
    zones = {r.inputs["availabilityZoneId"] for r in run.of_type("aws:ec2/subnet:Subnet")}
    assert zones == {"use1-az1", "use1-az2", "use1-az3"}
    assert all("availabilityZone" not in r.inputs for r in run.of_type("aws:ec2/subnet:Subnet"))
    assert len(run.of_type("aws:ec2/subnet:Subnet")) == 6
    assert len(run.outputs["private"]) == 3


def test_zones_eks_refuses_are_skipped_whatever_their_name():
    run = run_network(excluded_zone_ids=["use1-az3"])  # this account's us-east-1a
    zones = {r.inputs["availabilityZoneId"] for r in run.of_type("aws:ec2/subnet:Subnet")}
    assert zones == {"use1-az1", "use1-az2", "use1-az4"}


def test_production_gets_one_nat_gateway_per_zone_and_routes_each_private_subnet_to_its_own():
    run = run_network(nat_per_az=True)
    nats = run.of_type("aws:ec2/natGateway:NatGateway")
    assert len(nats) == 3
    routes = [r for r in run.of_type("aws:ec2/route:Route") if "natGatewayId" in r.inputs]
    assert len({r.inputs["natGatewayId"] for r in routes}) == 3


def test_non_production_shares_one_nat_gateway():
    run = run_network(nat_per_az=False)
    assert len(run.of_type("aws:ec2/natGateway:NatGateway")) == 1
    routes = [r for r in run.of_type("aws:ec2/route:Route") if "natGatewayId" in r.inputs]
    assert len(routes) == 3 and len({r.inputs["natGatewayId"] for r in routes}) == 1


PRIVATE = ["ecr.api", "ecr.dkr", "sts", "sagemaker.runtime"]


def test_a_private_network_gets_its_interface_endpoints_and_an_s3_gateway_in_a_new_vpc():
    run = run_network(interface_endpoints=PRIVATE)
    endpoints = {r.inputs["serviceName"]: r.inputs for r in run.of_type("aws:ec2/vpcEndpoint:VpcEndpoint")}
    assert set(endpoints) == {f"com.amazonaws.us-east-1.{s}" for s in ("s3", *PRIVATE)}
    assert endpoints["com.amazonaws.us-east-1.s3"]["vpcEndpointType"] == "Gateway"
    assert len(endpoints["com.amazonaws.us-east-1.s3"]["routeTableIds"]) == 3
    ecr = endpoints["com.amazonaws.us-east-1.ecr.dkr"]
    assert ecr["vpcEndpointType"] == "Interface" and ecr["privateDnsEnabled"] is True
    assert len(ecr["subnetIds"]) == 3


def test_without_interface_endpoints_no_endpoints_are_created():
    run = run_network()
    assert run.of_type("aws:ec2/vpcEndpoint:VpcEndpoint") == []
    assert len(run.of_type("aws:ec2/securityGroup:SecurityGroup")) == 1


def test_endpoint_security_group_admits_only_https_from_the_vpc():
    run = run_network(interface_endpoints=PRIVATE)
    [rule] = [r for r in run.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
              if r.name == "net-endpoints-https"]
    assert (rule.inputs["fromPort"], rule.inputs["toPort"], rule.inputs["ipProtocol"]) == (443, 443, "tcp")
    assert rule.inputs["cidrIpv4"] == "10.0.0.0/16"


def test_subnets_do_not_overlap_and_fit_the_vpc():
    public, private = subnet_cidrs("10.0.0.0/16", 3)
    nets = [ipaddress.ip_network(c) for c in public + private]
    assert all(n.subnet_of(ipaddress.ip_network("10.0.0.0/16")) for n in nets)
    assert not any(a.overlaps(b) for i, a in enumerate(nets) for b in nets[i + 1:])


def test_subnets_are_tagged_for_load_balancer_discovery_and_every_taggable_child_has_the_tags():
    run = run_network()
    for r in run.records:
        if r.custom and "tags" in r.inputs:
            assert TAGS.items() <= r.inputs["tags"].items(), r.name
    roles = {r.name: r.inputs["tags"] for r in run.of_type("aws:ec2/subnet:Subnet")}
    assert roles["net-public-0"]["kubernetes.io/role/elb"] == "1"
    assert roles["net-private-0"]["kubernetes.io/role/internal-elb"] == "1"
    untagged = {r.type for r in run.records if r.custom and "tags" not in r.inputs}
    assert untagged <= {"aws:ec2/route:Route", "aws:ec2/routeTableAssociation:RouteTableAssociation"}


def test_an_existing_vpc_creates_no_vpc_subnets_or_nat_only_security_groups():
    existing = ExistingVpc(vpc_id="vpc-0abc12345", private_subnet_ids=["subnet-0aaa11111", "subnet-0aaa22222"],
                           public_subnet_ids=["subnet-0aaa33333"])
    run = run_network(existing=existing)
    assert run.of_type("aws:ec2/vpc:Vpc") == [] and run.of_type("aws:ec2/subnet:Subnet") == []
    assert run.of_type("aws:ec2/natGateway:NatGateway") == []
    assert run.one("aws:ec2/securityGroup:SecurityGroup").inputs["vpcId"] == "vpc-0abc12345"
    assert run.outputs["private"] == ["subnet-0aaa11111", "subnet-0aaa22222"]


def test_existing_vpc_config_rejects_a_single_subnet():
    with pytest.raises(ValueError, match="private_subnet_ids"):
        ExistingVpc.model_validate({"vpc_id": "vpc-0abc12345", "private_subnet_ids": ["subnet-0aaa11111"]})


def test_an_existing_vpc_reaches_s3_through_an_interface_endpoint_resolving_for_every_resolver():
    existing = ExistingVpc(vpc_id="vpc-0abc12345", private_subnet_ids=["subnet-0aaa11111", "subnet-0aaa22222"])
    run = run_network(existing=existing, interface_endpoints=["s3", "eks-auth"])
    endpoints = {r.inputs["serviceName"]: r.inputs for r in run.of_type("aws:ec2/vpcEndpoint:VpcEndpoint")}
    assert set(endpoints) == {"com.amazonaws.us-east-1.s3", "com.amazonaws.us-east-1.eks-auth"}
    s3 = endpoints["com.amazonaws.us-east-1.s3"]
    assert s3["vpcEndpointType"] == "Interface" and s3["privateDnsEnabled"] is True
    # Private DNS only for inbound resolvers would need a gateway endpoint, which an existing VPC's route tables lack.
    assert s3["dnsOptions"] == {"privateDnsOnlyForInboundResolverEndpoint": False}
    assert "dnsOptions" not in endpoints["com.amazonaws.us-east-1.eks-auth"]
