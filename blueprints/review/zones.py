"""Whether the zones a stack's node pool spans offer its instance type (`blueprint preflight`).

Not every Availability Zone offers every GPU type (p5 and p4de are in a few zones of a Region), and which zones a
Region has, and which offer a type, is per account: zone names map to different zones in each account, zone IDs do
not (AWS RAM user guide, "Availability Zone IDs for your AWS resources"). A Deployment whose topology spread has
`minDomains: N` with `whenUnsatisfiable: DoNotSchedule` (`blueprints.contracts.placement`) leaves replicas Pending
while fewer than N zones can hold a node, so such a stack needs N zones of its platform that offer the type; any
stack needs one. The plan cannot know the zones offline (the catalog has no per-account offerings); preflight reads
them with the EC2 API when AWS credentials are present:

- the platform's zones: a new VPC takes the first `az_count` available zone IDs in ID order, none EKS refuses
  (`components.network.Network._zones`: `DescribeAvailabilityZones` state `available`); an existing VPC's are its
  private subnets' `AvailabilityZoneId` (`DescribeSubnets`);
- the zones offering the type: `DescribeInstanceTypeOfferings` with `LocationType=availability-zone-id` and the
  filter `instance-type` (EC2 API reference; each offering's `Location` is a zone ID).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from blueprints.catalog.addons import load_platform_catalog
from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.placement import ZONE_KEY
from blueprints.contracts.platform import PlatformConfig, vpc_zone_ids
from blueprints.contracts.sections import Archetype
from blueprints.contracts.stackconfig import read_config, stack_config_path


@dataclass(frozen=True)
class ZoneCheck:
    """One stack's instance type against its platform's zones: the zone IDs the node pool spans (`zones`), those
    offering the type (`offered`), and how many it needs (`needed`: the zone spread's `minDomains`, else 1)."""

    stack: str
    instance_type: str
    region: str
    zones: tuple[str, ...]
    offered: tuple[str, ...]
    needed: int

    @property
    def ok(self) -> bool:
        return len(self.offered) >= self.needed

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}

    def command(self) -> str:
        """The AWS CLI command that lists the zones offering the type."""
        return (f"aws ec2 describe-instance-type-offerings --location-type availability-zone-id --filters "
                f"Name=instance-type,Values={self.instance_type} --region {self.region} "
                "--query 'InstanceTypeOfferings[].Location'")


def zones_needed(bp: Blueprint) -> int:
    """Zones offering the stack's type that its replicas need: the zone spread's `minDomains` (DoNotSchedule), else
    1."""
    zone = next((s for s in bp.placement.spreads if s.topology_key == ZONE_KEY), None)
    return zone.min_domains if zone is not None and zone.min_domains else 1


def platform_zone_ids(platform: PlatformConfig, ec2) -> tuple[str, ...]:
    """The zone IDs a platform's subnets are in, as `pulumi up` chooses them (module docstring).

    Args:
        platform: the platform stack config.
        ec2: a boto3 EC2 client in the platform's Region.
    """
    existing = platform.network.existing_vpc
    if existing is not None:
        subnets = ec2.describe_subnets(SubnetIds=list(existing.private_subnet_ids))["Subnets"]
        return tuple(sorted({s["AvailabilityZoneId"] for s in subnets}))
    refused = load_platform_catalog().eks_refused_zone_ids.get(platform.region, ())
    found = ec2.describe_availability_zones(Filters=[{"Name": "state", "Values": ["available"]}])
    return tuple(vpc_zone_ids([z["ZoneId"] for z in found["AvailabilityZones"]], refused, platform.network.az_count))


def offered_zone_ids(instance_type: str, ec2) -> set[str]:
    """The zone IDs of `ec2`'s Region that offer `instance_type` (every page)."""
    pages = ec2.get_paginator("describe_instance_type_offerings").paginate(
        LocationType="availability-zone-id", Filters=[{"Name": "instance-type", "Values": [instance_type]}])
    return {o["Location"] for page in pages for o in page["InstanceTypeOfferings"]}


def zone_checks(stacks: list[str], stacks_dir: Path, ec2_for) -> list[ZoneCheck]:
    """A `ZoneCheck` for each of `stacks` (one, or a compound service's parts) that launches nodes on a platform of
    ours: not SageMaker, not an existing or edge cluster (whose nodes are not ours to place).

    Args:
        stacks: stack names in `stacks_dir`.
        ec2_for: region -> a boto3 EC2 client.

    Raises:
        StackConfigError: a stack config, or its platform's, is missing or invalid.
    """
    checks = []
    for stack in stacks:
        bp = read_config(stack_config_path(stacks_dir, stack))
        if not isinstance(bp, Blueprint) or bp.archetype is Archetype.SAGEMAKER_ENDPOINT or not bp.platform.stack \
                or bp.compute.instance_type is None:
            continue
        platform = read_config(stack_config_path(stacks_dir, bp.platform.stack))
        if not isinstance(platform, PlatformConfig):
            continue
        ec2 = ec2_for(bp.region)
        zones = platform_zone_ids(platform, ec2)
        offered = offered_zone_ids(bp.compute.instance_type, ec2)
        checks.append(ZoneCheck(stack, bp.compute.instance_type, bp.region, zones,
                                tuple(z for z in zones if z in offered), zones_needed(bp)))
    return checks
