"""The `eks-zones` check of `blueprint preview` (`blueprints.review.deployability.checks`): an EKS platform's new subnets
are placed by Availability Zone ID, never in a zone where EKS refuses cluster subnets (`eks_refused_zone_ids` in
`blueprints/catalog/kubernetes.yaml`: us-east-1 `use1-az3`, ...). A zone name maps to a different physical zone in each
account of an older region, so a subnet placed by name may land in a refused zone in one account and not another.
An existing VPC's subnets are its owner's (platform.yaml `existing_vpc`): their zones are not known offline.
"""

from __future__ import annotations

from blueprints.contracts.platform import PlatformConfig, PlatformKind
from blueprints.review.preview import DeployabilityFinding
from blueprints.review.deployability.context import CheckContext, named

SUBNET = "aws:ec2/subnet:Subnet"


def check_eks_zones(ctx: CheckContext) -> list[DeployabilityFinding]:
    cfg = ctx.report.subject
    if not isinstance(cfg, PlatformConfig) or cfg.kind is not PlatformKind.EKS:
        return []
    refused = set(ctx.pcat.eks_refused_zone_ids.get(cfg.region, ()))
    findings = []
    for record in (r for r in ctx.report.resources if r.type == SUBNET):
        zone_id, zone = record.inputs.get("availabilityZoneId"), record.inputs.get("availabilityZone")
        if zone_id in refused:
            findings.append(DeployabilityFinding("eks-zones", record.urn, (
                f"{named(record)} is in {zone_id}, where EKS refuses cluster subnets (EKS user guide, network-reqs.adoc: "
                f"{', '.join(sorted(refused))} in {cfg.region}): creating the cluster fails; choose another zone ID")))
        elif zone_id is None and zone is not None:
            findings.append(DeployabilityFinding("eks-zones", record.urn, (
                f"{named(record)} is placed by zone name {zone!r}, which maps to a different physical zone per account "
                f"in older regions (one where EKS refuses cluster subnets: {', '.join(sorted(refused)) or 'none here'}): "
                "place it by availabilityZoneId")))
    return findings
