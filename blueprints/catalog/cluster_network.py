"""Cluster network catalog (`cluster_network.yaml`, with sources): the Service CIDR EKS gives a cluster and its
bounds, the in-cluster Services pods call by ClusterIP (the API server, cluster DNS) and where their addresses lie.

`load_cluster_network()` reads it once per process; `eks_default_service_cidr`, `service_cidr_problem` and
`cluster_service_ip` are the one rule the planner, the program and the preview's checks use.
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from blueprints.catalog.files import read_catalog_file


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ServiceCidrRule(_Record):
    """EKS's Service CIDR: its default by the VPC's CIDR blocks and the bounds of an explicit one."""

    default_in_ten_range: str
    default_otherwise: str
    ten_range: str
    allowed_ranges: list[str] = Field(min_length=1)
    min_prefix: int = Field(ge=1, le=32)
    max_prefix: int = Field(ge=1, le=32)
    source: str


class ServicePort(_Record):
    port: int = Field(ge=1, le=65535)
    protocol: Literal["TCP", "UDP", "SCTP"]
    target_port: int = Field(ge=1, le=65535)


class ClusterService(_Record):
    """A Service every cluster runs, which pods call by its ClusterIP."""

    id: str = Field(pattern=r"^[a-z0-9-]+$")
    namespace: str
    name: str
    selector: dict[str, str] = Field(description="spec.selector; empty: none (endpoints kept by their owner)")
    address_index: int = Field(ge=1, description="the ClusterIP's offset in the Service CIDR")
    ports: list[ServicePort] = Field(min_length=1)
    source: str


class PolicyAgent(_Record):
    judges: Literal["pre-dnat"]
    source: str


class ClusterNetwork(_Record):
    schema_version: int
    service_cidr: ServiceCidrRule
    cluster_services: list[ClusterService] = Field(min_length=1)
    network_policy_agent: PolicyAgent

    def service(self, service_id: str) -> ClusterService:
        return next(s for s in self.cluster_services if s.id == service_id)


@lru_cache(maxsize=1)
def load_cluster_network() -> ClusterNetwork:
    """`cluster_network.yaml`. Raises `CatalogError` when it is malformed."""
    return read_catalog_file("cluster_network.yaml", ClusterNetwork)


#: The API server's Service and the cluster DNS Service (ids in `cluster_network.yaml`).
KUBERNETES_API = "kubernetes-api"
CLUSTER_DNS = "cluster-dns"


def eks_default_service_cidr(vpc_cidrs: list[str]) -> str:
    """The Service CIDR EKS chooses for a cluster created without one: 172.20.0.0/16 when any of its VPC's CIDR
    blocks lies in 10.0.0.0/8, else 10.100.0.0/16 (`cluster_network.yaml` service_cidr, with its sources)."""
    rule = load_cluster_network().service_cidr
    ten = ipaddress.ip_network(rule.ten_range)
    in_ten = any(ipaddress.ip_network(c, strict=False).subnet_of(ten) for c in vpc_cidrs)
    return rule.default_in_ten_range if in_ten else rule.default_otherwise


def service_cidr_problem(cidr: str) -> str | None:
    """Why EKS refuses `cidr` as a cluster's serviceIpv4Cidr, or None: an IPv4 network (host bits zero) of /12 to
    /24 inside 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16."""
    rule = load_cluster_network().service_cidr
    try:
        network = ipaddress.IPv4Network(cidr)
    except ValueError as exc:
        return f"{cidr!r} is not an IPv4 network address ({exc})"
    if not rule.min_prefix <= network.prefixlen <= rule.max_prefix:
        return f"{cidr} is a /{network.prefixlen}; EKS takes a Service CIDR of /{rule.min_prefix} to /{rule.max_prefix}"
    if not any(network.subnet_of(ipaddress.IPv4Network(r)) for r in rule.allowed_ranges):
        return f"{cidr} is not private; EKS takes a Service CIDR inside {', '.join(rule.allowed_ranges)} (RFC 1918)"
    return None


def overlapping(cidr: str, others: list[str]) -> list[str]:
    """The networks of `others` that share an address with `cidr`."""
    network = ipaddress.ip_network(cidr, strict=False)
    return [o for o in others if network.overlaps(ipaddress.ip_network(o, strict=False))]


def cluster_service_ip(service_cidr: str, service_id: str) -> str:
    """The ClusterIP of a cluster Service (`KUBERNETES_API`: the first address; `CLUSTER_DNS`: the tenth) in
    `service_cidr`."""
    service = load_cluster_network().service(service_id)
    return str(ipaddress.IPv4Network(service_cidr)[service.address_index])
