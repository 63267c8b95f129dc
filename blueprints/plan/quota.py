"""Service quotas a stack needs at full scale, and checking them against an account (`blueprint preflight`).

Fresh AWS accounts start with G and P vCPU quotas of 0 in most Regions: a plan that is right still fails at `pulumi up`
until the quotas are raised. Each plan states what it needs (`quota_needs`); `blueprint preflight` reads the account's
quotas with the Service Quotas API when AWS credentials are present, and otherwise prints what to check and the
commands to request an increase. Quota codes are catalog data (`blueprints/catalog/quotas.yaml`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field

from blueprints.contracts.sections import Archetype, CapacityType
from blueprints.contracts.blueprint import Blueprint
from blueprints.catalog import load_catalog
from blueprints.contracts.platform import PlatformConfig, PlatformKind


class _Ec2Group(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    group: str
    prefixes: list[str] = Field(min_length=1)
    on_demand: str = Field(pattern=r"^L-[0-9A-F]{8}$")
    spot: str = Field(pattern=r"^L-[0-9A-F]{8}$")
    aws_default: float = Field(ge=0)
    name: str


class _QuotaFile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int
    source: str
    ec2: list[_Ec2Group]
    sagemaker: dict[str, str]


@lru_cache(maxsize=1)
def _quotas() -> _QuotaFile:
    text = resources.files("blueprints.catalog").joinpath("quotas.yaml").read_text(encoding="utf-8")
    return _QuotaFile.model_validate(yaml.safe_load(text))


@dataclass(frozen=True)
class QuotaNeed:
    """One quota a stack needs: service and quota code, what it counts, how many at full scale, and why."""

    service_code: str
    quota_code: str
    quota_name: str
    region: str
    needed: float
    unit: str
    why: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def get_command(self) -> str:
        return (f"aws service-quotas get-service-quota --service-code {self.service_code} --quota-code "
                f"{self.quota_code} --region {self.region} --query Quota.Value")

    def request_command(self) -> str:
        return (f"aws service-quotas request-service-quota-increase --service-code {self.service_code} --quota-code "
                f"{self.quota_code} --desired-value {math.ceil(self.needed)} --region {self.region}")


def ec2_group(instance_type: str) -> _Ec2Group:
    """The vCPU quota group of an EC2 type: the group whose family prefix is the longest match (`p5` before `p`)."""
    family = instance_type.split(".")[0]
    best = max(((len(p), g) for g in _quotas().ec2 for p in g.prefixes if family.startswith(p)),
               key=lambda pair: pair[0], default=None)
    if best is None:
        raise KeyError(f"no EC2 vCPU quota group covers {instance_type} (blueprints/catalog/quotas.yaml)")
    return best[1]


def _ec2_need(instance_type: str, nodes: int, *, spot: bool, region: str, why: str) -> QuotaNeed:
    group = ec2_group(instance_type)
    vcpus = load_catalog().instance(instance_type).vcpus
    name = group.name if not spot else f"{group.group} Spot Instance Requests (vCPUs)"
    return QuotaNeed("ec2", group.spot if spot else group.on_demand, name, region, float(nodes * vcpus), "vCPUs",
                     f"{why}: {nodes} x {instance_type} ({vcpus} vCPUs each)")


def quota_needs(subject: Blueprint | PlatformConfig) -> list[QuotaNeed]:
    """The quotas a service or platform stack needs at full scale, in its region.

    A Kubernetes service: its NodePool's maximum nodes (autoscaler maximum plus the rollout surge) x vCPUs, against
    the On-Demand or Spot quota of the family's group. A SageMaker endpoint: its maximum instances against the
    `<type> for endpoint usage` quota. A platform: its system node group at its maximum size. Quotas are per account
    and Region: stacks in one Region add up.
    """
    if isinstance(subject, PlatformConfig):
        if subject.kind is not PlatformKind.EKS:
            return []
        return [_ec2_need(subject.system_nodes.instance_type, subject.system_nodes.count + 1, spot=False,
                          region=subject.region, why="system node group at its maximum size")]
    bp = subject
    if bp.archetype is Archetype.SAGEMAKER_ENDPOINT:
        code = _quotas().sagemaker.get(bp.compute.instance_type)
        if code is None:
            return []
        # A blue/green update runs the new fleet beside the old one until traffic has shifted.
        return [QuotaNeed("sagemaker", code, f"{bp.compute.instance_type} for endpoint usage", bp.region,
                          float(2 * bp.autoscaling.max_replicas), "instances",
                          f"autoscaling maximum {bp.autoscaling.max_replicas}, twice during a blue/green update")]
    if bp.platform.kind in ("existing-cluster", "edge-cluster"):
        return []  # its nodes are not ours to launch (an edge cluster's are owned)
    return [_ec2_need(bp.compute.instance_type, bp.node_pool_max_nodes,
                      spot=bp.compute.capacity_type is CapacityType.SPOT, region=bp.region,
                      why="node pool at its limit (autoscaling maximum plus the rollout surge)")]


def gpus_at_full_scale(bp: Blueprint) -> int:
    """GPUs a service stack's node pool may reach (`node_pool_max_nodes` x GPUs per node), as the `gpu-quota` policy
    counts its NodePool's `limits['nvidia.com/gpu']`; 0 for SageMaker (its own quotas), CPU instances and owned
    edge nodes (no instance type: not launched in an account)."""
    if bp.archetype is Archetype.SAGEMAKER_ENDPOINT or bp.compute.instance_type is None:
        return 0
    return bp.node_pool_max_nodes * load_catalog().instance(bp.compute.instance_type).gpu_count


def summed_needs(needs: list[tuple[str, QuotaNeed]]) -> list[QuotaNeed]:
    """(stack, need) pairs with needs of the same quota in the same Region added up: quotas are per account and
    Region. Each `why` names its stack; in the order first met."""
    merged: dict[tuple[str, str, str], QuotaNeed] = {}
    for stack, need in needs:
        need = QuotaNeed(need.service_code, need.quota_code, need.quota_name, need.region, need.needed, need.unit,
                         f"{stack}: {need.why}")
        key = (need.service_code, need.quota_code, need.region)
        if key in merged:
            first = merged[key]
            need = QuotaNeed(first.service_code, first.quota_code, first.quota_name, first.region,
                             first.needed + need.needed, first.unit, f"{first.why}; {need.why}")
        merged[key] = need
    return list(merged.values())


@dataclass(frozen=True)
class QuotaCheck:
    """A need against the account's applied (or default) value; `value` None when it could not be read."""

    need: QuotaNeed
    value: float | None
    source: str

    @property
    def ok(self) -> bool | None:
        return None if self.value is None else self.value >= self.need.needed

    def to_json(self) -> dict[str, Any]:
        return {**self.need.to_json(), "value": self.value, "source": self.source, "ok": self.ok}


def check_quotas(needs: list[QuotaNeed], client_for) -> list[QuotaCheck]:
    """Read each quota with the Service Quotas API: the applied value, else the AWS default (GetServiceQuota raises
    NoSuchResourceException for a quota never changed; aws/aws-cli#6629).

    Args:
        needs: from `quota_needs`.
        client_for: region -> a boto3 `service-quotas` client.
    """
    checks = []
    for need in needs:
        client = client_for(need.region)
        try:
            value = client.get_service_quota(ServiceCode=need.service_code, QuotaCode=need.quota_code)["Quota"]["Value"]
            source = "applied"
        except client.exceptions.NoSuchResourceException:
            value = client.get_aws_default_service_quota(ServiceCode=need.service_code,
                                                         QuotaCode=need.quota_code)["Quota"]["Value"]
            source = "AWS default"
        checks.append(QuotaCheck(need, float(value), source))
    return checks


def quota_note(subject: Blueprint | PlatformConfig) -> str | None:
    """The plan's sentence about the quotas it needs (None when it needs none we know of)."""
    needs = quota_needs(subject)
    if not needs:
        return None
    parts = [f"{n.service_code} {n.quota_code} ({n.quota_name}) >= {n.needed:g} {n.unit}" for n in needs]
    return (f"needs service quotas in {needs[0].region} (fresh accounts start at 0 for G and P instances): "
            f"{'; '.join(parts)}; `blueprint preflight {subject.stack}` checks them")
