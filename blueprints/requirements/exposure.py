"""Who can reach a self-hosted endpoint: the `exposure` section (internal or public, through a load balancer, an
Ingress or a NodePort, with TLS and the client CIDRs allowed), and the IPv4 CIDR field it checks sources with.
"""

from __future__ import annotations

import ipaddress
import re
from enum import Enum
from typing import Annotated

from pydantic import AfterValidator, ConfigDict, Field, model_validator

from blueprints.core.errors import FieldProblem, describe_pattern, raise_problems
from blueprints.requirements.fields import (
    DNS_1123_LABEL, DNS_1123_SUBDOMAIN, Section, UNIQUE, UNIQUE_ITEMS, given, is_const, when,
)


#: An ACM certificate ARN (commercial, China and GovCloud partitions): `arn:aws:acm:<region>:<account>:certificate/<id>`
#: (AWS General Reference, "Amazon Resource Names", ACM resource type `certificate/<certificate-id>`).
ACM_CERTIFICATE_ARN = describe_pattern(
    r"^arn:aws(-cn|-us-gov)?:acm:([a-z]{2}(-gov)?-[a-z]+-[0-9]):[0-9]{12}:certificate/[0-9a-f-]{36}$",
    "an ACM certificate ARN, arn:aws:acm:<region>:<account>:certificate/<id>")


#: A DNS host name (RFC 1123): dot-separated labels of letters, digits and hyphens, at most 253 characters.
HOSTNAME = describe_pattern(r"^([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)+$",
                            "a lowercase DNS name with at least two labels, e.g. api.example.com")


#: The open internet, as an IPv4 CIDR.
OPEN_INTERNET = "0.0.0.0/0"


#: At most this many source CIDRs: the load balancer controller writes one security-group rule per CIDR and port,
#: and a security group holds 60 inbound rules by default (Amazon VPC quotas, "Inbound or outbound rules per security
#: group").
MAX_ALLOWED_CIDRS = 20


class ExposureScope(str, Enum):
    INTERNAL = "internal"
    PUBLIC = "public"


_OCTET = r"(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"


#: An IPv4 CIDR as written: four decimal octets without leading zeros and a prefix length 0-32.
IPV4_CIDR = describe_pattern(rf"^{_OCTET}(\.{_OCTET}){{3}}/(3[0-2]|[12]?[0-9])$",
                             "an IPv4 CIDR such as 203.0.113.0/24 (no leading zeros)")


class ExposureVia(str, Enum):
    """How clients reach the serving Service: a Service of type LoadBalancer (an NLB through the AWS Load Balancer
    Controller, or MetalLB on an edge cluster), an Ingress of the cluster's ingress controller, or a NodePort on
    every node. The serving Service itself is ClusterIP behind an Ingress."""

    LOAD_BALANCER = "load-balancer"
    INGRESS = "ingress"
    NODE_PORT = "node-port"


#: The NodePort range of a default kube-apiserver (`--service-node-port-range` 30000-32767).
NODE_PORT_RANGE = (30000, 32767)


def ipv4_cidr(value: str) -> str:
    """An IPv4 network in CIDR notation with no host bits set (`10.0.0.0/8`, not `10.0.0.1/8`)."""
    try:
        network = ipaddress.IPv4Network(value, strict=True)
    except ValueError as exc:
        try:
            fix = f"write its network address, {ipaddress.IPv4Network(value, strict=False).with_prefixlen}"
        except ValueError:
            fix = "e.g. 203.0.113.0/24"
        raise FieldProblem((), f"{value!r} is not an IPv4 network with its host bits zero ({exc}): {fix}",
                           rule="cidr-network-address") from None
    return network.with_prefixlen


Cidr = Annotated[str, Field(max_length=18, pattern=IPV4_CIDR), AfterValidator(ipv4_cidr)]


class Exposure(Section):
    """Who can reach the serving endpoint (self-hosted archetypes; SageMaker endpoints are IAM-authorised).

    `internal` (default): an internal Network Load Balancer, reachable from the VPC and networks peered or connected
    with it. `public`: an internet-facing one, which needs a TLS certificate and the client CIDRs allowed to connect.
    """

    model_config = ConfigDict(json_schema_extra={"allOf": [
        when(is_const("scope", "public"),  # public-needs-tls-and-cidrs
             {"required": ["allowed_cidrs"], "properties": {"allowed_cidrs": {"minItems": 1}},
              "anyOf": [given({"tls_certificate_arn": "string"}), given({"tls_secret_name": "string"})]}),
        when({"required": ["allowed_cidrs"], "properties": {"allowed_cidrs": {"contains": {"const": OPEN_INTERNET}}}},
             is_const("acknowledge_open_internet", True)),  # open-internet-acknowledged
    ]})

    scope: ExposureScope = Field(default=ExposureScope.INTERNAL, description="internal (default) or public")
    allowed_cidrs: Annotated[list[Cidr], UNIQUE, UNIQUE_ITEMS] = Field(
        default=[], max_length=MAX_ALLOWED_CIDRS, description="IPv4 CIDRs allowed to connect (the load balancer's "
        "source ranges); required for public, where 0.0.0.0/0 also needs acknowledge_open_internet. Internal default: "
        "the VPC's CIDR")
    acknowledge_open_internet: bool = Field(default=False, description="confirm that 0.0.0.0/0 in allowed_cidrs is "
                                            "meant: the whole internet may try the API key")
    tls_certificate_arn: str | None = Field(
        default=None, pattern=ACM_CERTIFICATE_ARN, description="ACM certificate ARN in the environments' region; "
        "required for public: the load balancer's listener terminates TLS with it")
    hostname: str | None = Field(default=None, pattern=HOSTNAME, max_length=253, description="the DNS name clients use (its record "
                                 "points at the load balancer; managed outside this stack); default: the load "
                                 "balancer's own DNS name")
    via: ExposureVia | None = Field(default=None, description="load-balancer, ingress or node-port. Default: "
                                    "load-balancer on eks and existing clusters; on an edge cluster an Ingress when "
                                    "operations.cluster_addons declares an ingress controller, else a NodePort")
    ingress_class_name: str | None = Field(default=None, pattern=DNS_1123_SUBDOMAIN, max_length=253, description="via "
                                           "ingress: the IngressClass; default: the one of the declared controller "
                                           "(ingress-nginx: nginx, traefik: traefik)")
    ingress_namespace: str | None = Field(default=None, pattern=DNS_1123_LABEL, max_length=63, description="via "
                                          "ingress: the namespace the ingress controller's pods run in (the "
                                          "NetworkPolicy admits it to the proxy); default: the catalog's (k3s runs "
                                          "traefik in kube-system)")
    node_port: int | None = Field(default=None, ge=NODE_PORT_RANGE[0], le=NODE_PORT_RANGE[1], description="via "
                                  "node-port: the port on every node (30000-32767); default: one Kubernetes assigns")
    tls_secret_name: str | None = Field(default=None, pattern=DNS_1123_SUBDOMAIN, max_length=253, description="a "
                                        "kubernetes.io/tls Secret you provide in the service's namespace (tls.crt, "
                                        "tls.key): the Ingress terminates TLS with it, or (node-port, metallb) the "
                                        "authenticating proxy does. For clusters without AWS load balancers; on "
                                        "an NLB use tls_certificate_arn")

    @property
    def tls(self) -> bool:
        """Clients connect over TLS (an ACM certificate on an NLB, or a Kubernetes TLS Secret)."""
        return bool(self.tls_certificate_arn or self.tls_secret_name)

    @model_validator(mode="after")
    def _public_needs_tls_and_ranges(self) -> Exposure:
        problems = []
        if OPEN_INTERNET in self.allowed_cidrs and not self.acknowledge_open_internet:
            problems.append(FieldProblem("acknowledge_open_internet", f"allowed_cidrs contains {OPEN_INTERNET} (the "
                                         "whole internet); list your clients' CIDRs instead, or set "
                                         "acknowledge_open_internet: true if that is really meant",
                                         rule="open-internet-acknowledged"))
        if self.tls_certificate_arn and self.tls_secret_name:
            problems.append(FieldProblem("tls_secret_name", "give one of tls_certificate_arn (an NLB terminates TLS) "
                                         "and tls_secret_name (an Ingress or the pod's proxy terminates TLS), not "
                                         "both", rule="one-tls-source"))
        if self.scope is ExposureScope.PUBLIC:
            problems += [FieldProblem(f, f"scope public needs {what}: an internet-facing endpoint is served only over "
                                      "TLS (an ACM certificate ARN on an NLB, a Kubernetes TLS Secret elsewhere) and "
                                      "only to the client CIDRs you list; add it or use scope: internal",
                                      rule="public-needs-tls-and-cidrs")
                         for f, what, ok in (("tls_certificate_arn", "tls_certificate_arn or tls_secret_name",
                                              self.tls), ("allowed_cidrs", "allowed_cidrs", self.allowed_cidrs))
                         if not ok]
        problems += [FieldProblem(f, f"{f} configures exposure via {via.value}, but via is "
                                  f"{self.via.value if self.via else 'unset'}; set `via` or remove it",
                                  rule="exposure-settings-match-via")
                     for f, via in (("node_port", ExposureVia.NODE_PORT), ("ingress_class_name", ExposureVia.INGRESS),
                                    ("ingress_namespace", ExposureVia.INGRESS))
                     if getattr(self, f) is not None and self.via is not via]
        if self.via is ExposureVia.INGRESS and self.tls_secret_name and not self.hostname:
            problems.append(FieldProblem("hostname", "via ingress with tls_secret_name needs `hostname`: the Ingress "
                                         "serves its certificate for that host (TLS SNI); add the name your "
                                         "certificate is issued for", rule="exposure-settings-match-via"))
        if self.via is ExposureVia.INGRESS and self.tls_certificate_arn:
            problems.append(FieldProblem("tls_certificate_arn", "tls_certificate_arn is for the NLB of via "
                                         "load-balancer; an Ingress terminates TLS with tls_secret_name",
                                         rule="exposure-settings-match-via"))
        raise_problems(problems)
        return self

    @property
    def certificate_region(self) -> str | None:
        """The region of `tls_certificate_arn` (ACM certificates are regional)."""
        match = re.match(ACM_CERTIFICATE_ARN, self.tls_certificate_arn or "")
        return match.group(2) if match else None
