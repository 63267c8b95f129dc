"""Exposure: a Service of type LoadBalancer reconciled by the AWS Load Balancer Controller as a Network Load Balancer.

Annotation names from the controller's Service annotation reference (kubernetes-sigs/aws-load-balancer-controller
docs/guide/service/annotations.md @00681b8b; kubernetes-sigs.github.io/aws-load-balancer-controller/latest/guide/
service/annotations/); listener attributes need controller >= v2.9.0.

- Scheme from `network.exposure.scope`: `internal` (the controller's own default, written explicitly) or
  `internet-facing`; a private-only stack is always internal.
- TLS: with a certificate, `aws-load-balancer-ssl-cert` (an ACM ARN) and `aws-load-balancer-ssl-ports` make the one
  listener (443) a TLS listener that terminates TLS at the NLB; the pod's proxy speaks plain HTTP behind it.
- Source ranges: `spec.loadBalancerSourceRanges` (the controller's recommendation over the annotation) holds the
  exposure's allowed CIDRs (default for an internal NLB: the VPC's CIDR). The controller enforces them on the NLB's
  security group only with client IP preservation on ("This annotation will be ignored in case preserve client IP is
  not enabled"; IP targets default to off), so the target group preserves client IPs
  (`preserve_client_ip.enabled=true`) and the pods' NetworkPolicy admits the same CIDRs.
- The NLB's TCP idle timeout (350 s by default) is set per listener above the blueprint's longest expected streamed
  response, so long generations are not cut.
"""

from __future__ import annotations

import pulumi

from blueprints import defaults
from blueprints.blueprint import Blueprint
from blueprints.requirements import ExposureScope

LB_TYPE = "service.beta.kubernetes.io/aws-load-balancer-type"
LB_TARGET_TYPE = "service.beta.kubernetes.io/aws-load-balancer-nlb-target-type"
LB_SCHEME = "service.beta.kubernetes.io/aws-load-balancer-scheme"
LB_LISTENER_ATTRIBUTES = "service.beta.kubernetes.io/aws-load-balancer-listener-attributes.TCP-{port}"
LB_TAGS = "service.beta.kubernetes.io/aws-load-balancer-additional-resource-tags"
#: Explicit subnets (ids) instead of tag-based discovery: a platform's existing VPC may not carry the role tags.
LB_SUBNETS = "service.beta.kubernetes.io/aws-load-balancer-subnets"
LB_SSL_CERT = "service.beta.kubernetes.io/aws-load-balancer-ssl-cert"
LB_SSL_PORTS = "service.beta.kubernetes.io/aws-load-balancer-ssl-ports"
#: TLS 1.2+ with forward secrecy (the NLB security policies, "TLS security policies for your Network Load Balancer").
LB_SSL_POLICY = "service.beta.kubernetes.io/aws-load-balancer-ssl-negotiation-policy"
TLS_POLICY = "ELBSecurityPolicy-TLS13-1-2-2021-06"
LB_TARGET_GROUP_ATTRIBUTES = "service.beta.kubernetes.io/aws-load-balancer-target-group-attributes"


def scheme(bp: Blueprint) -> str:
    """`internet-facing` for a public exposure (never with private_only), else `internal`."""
    public = bp.network.exposure.scope is ExposureScope.PUBLIC and not bp.network.private_only
    return "internet-facing" if public else "internal"


def listener_port(bp: Blueprint) -> int:
    """443 with a TLS certificate, 80 without (`Blueprint.serving_port`)."""
    port = bp.serving_port
    if port is None:
        raise ValueError(f"archetype {bp.archetype.value} has no serving Service")
    return port


def client_url(bp: Blueprint, load_balancer_host: pulumi.Input[str], path: str) -> pulumi.Output[str]:
    """The URL clients use: `https://<hostname or load balancer DNS name>/<path>` (http without TLS)."""
    exposure = bp.network.exposure
    protocol = "https" if exposure.tls_certificate_arn else "http"
    host = exposure.hostname or load_balancer_host
    return pulumi.Output.concat(f"{protocol}://", host, path)


def source_ranges(bp: Blueprint, vpc_cidrs: pulumi.Input[list[str]]) -> pulumi.Output[list[str]]:
    """Who may connect: the exposure's allowed CIDRs; for an internal exposure without any, the VPC's CIDR(s)."""
    allowed = list(bp.network.exposure.allowed_cidrs)
    return pulumi.Output.from_input(vpc_cidrs).apply(lambda vpc: sorted(set(allowed or vpc)))


def idle_timeout_s(bp: Blueprint) -> int:
    """NLB TCP idle timeout: the blueprint's longest stream plus headroom, within the NLB's 60-6000 s range."""
    return min(defaults.NLB_TCP_IDLE_TIMEOUT_MAX_S,
               bp.network.load_balancer_idle_timeout_s + defaults.LB_IDLE_TIMEOUT_HEADROOM_S)


def load_balancer_annotations(bp: Blueprint, ports: list[int], *,
                              subnet_ids: pulumi.Input[list[str]] | None = None) -> dict[str, pulumi.Input[str]]:
    """Service annotations: an NLB with IP targets and client IP preservation, its scheme (`scheme`), TLS with the
    exposure's certificate, idle timeout on every listener, the blueprint's tags on the load balancer and, when given,
    its subnets by id."""
    # Tag keys and values carry no ',' or '=' (`Blueprint.tags`), which this `k=v,k=v` annotation could not carry.
    annotations = {
        LB_TYPE: "external",
        LB_TARGET_TYPE: "ip",
        LB_SCHEME: scheme(bp),
        LB_TAGS: ",".join(f"{k}={v}" for k, v in sorted(bp.tags.items())),
        LB_TARGET_GROUP_ATTRIBUTES: "preserve_client_ip.enabled=true",
    }
    certificate = bp.network.exposure.tls_certificate_arn
    if certificate:
        annotations.update({LB_SSL_CERT: certificate, LB_SSL_PORTS: ",".join(str(p) for p in ports),
                            LB_SSL_POLICY: TLS_POLICY})
    for port in ports:
        annotations[LB_LISTENER_ATTRIBUTES.format(port=port)] = f"tcp.idle_timeout.seconds={idle_timeout_s(bp)}"
    result: dict[str, pulumi.Input[str]] = dict(annotations)
    if subnet_ids is not None:
        result[LB_SUBNETS] = pulumi.Output.from_input(subnet_ids).apply(lambda ids: ",".join(ids))
    return result
