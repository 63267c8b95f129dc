"""The reachability checks of `blueprint preview` (`blueprints.review.deployability.checks`): who can reach what.

- `api-reachable`: a private EKS cluster (public endpoint off) admits HTTPS (443) from the deploy runner's network (the
  platform's VPC, where its self-hosted runner lives) through a security group on its control plane's ENIs: the
  cluster security group EKS creates admits only itself (EKS user guide, clusters/cluster-endpoint.adoc L228-251).
- `aws-apis-reachable`: every part of a stack reaches every AWS API it calls (`blueprints/catalog/endpoints.yaml`:
  nodes, EKS add-ons, Helm add-ons, a service's pods, a private SageMaker endpoint) through a VPC endpoint or a NAT
  route. A private platform's AWS traffic never relies on NAT: each API needs its endpoint, and what has none (IAM,
  the Price List, WAF and Shield) must not be called (Karpenter `isolatedVPC`, EC2NodeClass `instanceProfile`, the
  load balancer controller's WAF and Shield off). A platform stack is judged on what it registers; a service stack on
  its platform's planned network.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from typing import Any

from blueprints.catalog.endpoints import NODES, SAGEMAKER, SERVICE, EndpointCatalog, load_endpoint_catalog
from blueprints.contracts.platform import PlatformConfig, PlatformKind
from blueprints.review.preview import DeployabilityFinding, RegisteredResource
from blueprints.review.deployability.context import (
    CheckContext, NODE_CLASS, NODE_GROUP, RELEASE, get_in, list_of, named,
)

EKS_CLUSTER = "aws:eks/cluster:Cluster"
EKS_ADDON = "aws:eks/addon:Addon"
VPC_ENDPOINT = "aws:ec2/vpcEndpoint:VpcEndpoint"
ROUTE = "aws:ec2/route:Route"
SECURITY_GROUP = "aws:ec2/securityGroup:SecurityGroup"
INGRESS_RULE = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
HTTPS = 443


def _admits(rule: Mapping[str, Any], cidr: str, port: int) -> bool:
    """An ingress rule (a SecurityGroupIngressRule's inputs, or an inline `ingress` entry) admits TCP `port` from
    every address of `cidr`."""
    protocol = str(rule.get("ipProtocol", rule.get("protocol", "")))
    if protocol not in ("tcp", "6", "-1", "all"):
        return False
    if protocol not in ("-1", "all") and not int(rule.get("fromPort", -1)) <= port <= int(rule.get("toPort", -1)):
        return False
    sources = [rule.get("cidrIpv4"), *list_of(rule.get("cidrBlocks"))]
    try:
        network = ipaddress.ip_network(cidr)
        return any(s and network.subnet_of(ipaddress.ip_network(str(s))) for s in sources)
    except ValueError:
        return False


def check_api_reachable(ctx: CheckContext) -> list[DeployabilityFinding]:
    findings = []
    runner = ctx.report.outputs.get("vpc_cidr")
    for cluster in (r for r in ctx.report.resources if r.type == EKS_CLUSTER):
        vpc = cluster.inputs.get("vpcConfig") or {}
        if vpc.get("endpointPublicAccess") is not False:
            continue
        groups = set(list_of(vpc.get("securityGroupIds")))
        rules = [r.inputs for r in ctx.report.resources if r.type == INGRESS_RULE
                 and r.inputs.get("securityGroupId") in groups]
        rules += [entry for r in ctx.report.resources if r.type == SECURITY_GROUP and r.resource_id in groups
                  for entry in list_of(r.inputs.get("ingress"))]
        if not isinstance(runner, str) or not any(_admits(rule, runner, HTTPS) for rule in rules):
            findings.append(DeployabilityFinding("api-reachable", cluster.urn, (
                f"{named(cluster)} has no public endpoint, and none of its security groups "
                f"({', '.join(sorted(groups)) or 'none'}) admits HTTPS ({HTTPS}) from the deploy runner's network "
                f"({runner or 'the VPC CIDR: unknown'}): EKS's own cluster security group admits only itself, so "
                "`pulumi up` cannot reach the Kubernetes API (EKS user guide, cluster-endpoint.adoc, private access); "
                "attach a security group with an ingress rule for tcp/443 from that network")))
    return findings


def _private(cfg: PlatformConfig) -> bool:
    """The platform's AWS traffic stays off the internet: a private API endpoint or VPC endpoints planned."""
    return cfg.network.private_endpoint or bool(cfg.network.interface_endpoints)


def _unreached(callers: Iterable[tuple[str, str, str]], reached: set[str], ecat: EndpointCatalog, *, nat: bool,
               region: str, where: str) -> list[DeployabilityFinding]:
    """A finding per (caller, API) whose API has no endpoint in `reached` when there is no NAT route."""
    if nat:
        return []
    findings = []
    for caller, urn, what in callers:
        for service in ecat.calls(caller):
            if service not in reached:
                findings.append(DeployabilityFinding("aws-apis-reachable", urn, (
                    f"{what} calls {service} ({ecat.callers[caller].source}), but {where} has no VPC endpoint "
                    f"{ecat.service_name(region, service)} and its AWS traffic does not go through NAT: the calls "
                    "time out; add the endpoint (the platform plans the callers' endpoints from "
                    "blueprints/catalog/endpoints.yaml: re-plan)")))
    return findings


def _platform_callers(ctx: CheckContext) -> list[tuple[str, str, str]]:
    """(caller id, the resource that brings it, how a finding names it) for everything the platform runs."""
    callers = []
    for r in ctx.report.resources:
        if r.type == NODE_GROUP:
            callers.append((NODES, r.urn, f"{named(r)} (every node: image pulls, pod addresses)"))
        elif r.type == EKS_ADDON:
            callers.append((f"eks:{r.inputs.get('addonName')}", r.urn, named(r)))
        elif r.type == RELEASE:
            addon = next((a for a in ctx.pcat.helm.values() if a.release == r.inputs.get("name")), None)
            if addon is not None:
                callers.append((f"helm:{addon.id}", r.urn, named(r)))
    cfg = ctx.report.subject
    assert isinstance(cfg, PlatformConfig)
    stack = ctx.report.stack
    if cfg.kind is PlatformKind.EKS and cfg.services:
        callers.append((SERVICE, stack, "its services' pods (the weights sync Jobs and init containers)"))
    if cfg.kind is PlatformKind.NETWORK:
        callers.append((SAGEMAKER, stack, "its private SageMaker endpoints and their clients"))
    return callers


def _no_endpoint_findings(ctx: CheckContext) -> list[DeployabilityFinding]:
    """What a private platform must not call because it has no endpoint (endpoints.yaml `no_endpoint`)."""
    ecat = load_endpoint_catalog()
    avoided = {e.name: e for e in ecat.no_endpoint}
    findings = []
    for r in ctx.report.resources:
        values = r.inputs.get("values") or {}
        release = r.inputs.get("name")
        if r.type == RELEASE and release == ctx.pcat.helm["karpenter"].release and \
                get_in(values, "settings", "isolatedVPC") is not True:
            findings.append(DeployabilityFinding("aws-apis-reachable", r.urn, (
                f"{named(r)} looks up on-demand prices with the Price List API, which has no VPC endpoint: set "
                f"values settings.isolatedVPC: true ({avoided['pricing'].source})")))
        if r.type == RELEASE and release == ctx.pcat.helm["aws-load-balancer-controller"].release:
            on = [k for k in ("enableWaf", "enableWafv2", "enableShield") if values.get(k) is not False]
            if on:
                findings.append(DeployabilityFinding("aws-apis-reachable", r.urn, (
                    f"{named(r)} calls WAF and Shield, which have no VPC endpoint, unless {', '.join(on)} are false "
                    f"(the chart's default is on): set them false ({avoided['wafv2'].source})")))
        if r.type == NODE_CLASS and get_in(r.inputs, "spec", "role") is not None:
            findings.append(DeployabilityFinding("aws-apis-reachable", r.urn, (
                f"{named(r)} names spec.role, with which Karpenter creates instance profiles through IAM, which has "
                f"no VPC endpoint: name an instance profile the platform creates in spec.instanceProfile "
                f"({avoided['iam'].source})")))
    return findings


def _platform_findings(ctx: CheckContext) -> list[DeployabilityFinding]:
    cfg = ctx.report.subject
    assert isinstance(cfg, PlatformConfig)
    ecat = load_endpoint_catalog()
    reached = set()
    for r in ctx.report.resources:
        if r.type != VPC_ENDPOINT:
            continue
        service = str(r.inputs.get("serviceName", "")).removeprefix(f"com.amazonaws.{cfg.region}.")
        kind = r.inputs.get("vpcEndpointType")
        if (kind == "Interface" and r.inputs.get("privateDnsEnabled")) or (kind == "Gateway" and
                                                                           r.inputs.get("routeTableIds")):
            reached.add(service)
    private = _private(cfg)
    # A new VPC routes its private subnets through NAT; an existing one has outbound access by platform.yaml's
    # contract (README, platform.yaml: private_subnet_ids "with outbound access"). A private platform's AWS APIs
    # never count on either.
    nat = not private and (cfg.network.existing_vpc is not None or any(
        r.type == ROUTE and r.inputs.get("natGatewayId") and r.inputs.get("destinationCidrBlock") == "0.0.0.0/0"
        for r in ctx.report.resources))
    findings = _unreached(_platform_callers(ctx), reached, ecat, nat=nat, region=cfg.region,
                          where=f"the VPC of {cfg.stack}")
    return findings + (_no_endpoint_findings(ctx) if not nat else [])


def _service_findings(ctx: CheckContext) -> list[DeployabilityFinding]:
    platform = ctx.report.platform
    if platform is None or not _private(platform):
        return []  # an existing or edge cluster's network is its owner's; a public platform routes through NAT
    ecat = load_endpoint_catalog()
    reached = set(platform.network.interface_endpoints) | ({"s3"} if platform.network.existing_vpc is None else set())
    caller = SAGEMAKER if ctx.report.blueprint.archetype.value == "sagemaker-endpoint" else SERVICE
    return _unreached([(caller, ctx.report.stack, f"{ctx.report.stack}'s pods" if caller == SERVICE else
                        f"{ctx.report.stack}'s SageMaker endpoint")], reached, ecat, nat=False,
                      region=platform.region, where=f"its platform {platform.stack}")


def check_aws_apis_reachable(ctx: CheckContext) -> list[DeployabilityFinding]:
    return _platform_findings(ctx) if ctx.report.is_platform else _service_findings(ctx)
