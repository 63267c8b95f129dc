"""Exposure: a Service of type LoadBalancer reconciled by the AWS Load Balancer Controller as a Network Load Balancer.

Annotation names from the controller's Service annotation reference (kubernetes-sigs.github.io/
aws-load-balancer-controller/latest/guide/service/annotations/); listener attributes need controller >= v2.9.0.
The NLB's TCP idle timeout (350 s by default) is set per listener above the blueprint's longest expected streamed
response, so long generations are not cut.
"""

from __future__ import annotations

import pulumi

from blueprints import defaults
from blueprints.blueprint import Blueprint

LB_TYPE = "service.beta.kubernetes.io/aws-load-balancer-type"
LB_TARGET_TYPE = "service.beta.kubernetes.io/aws-load-balancer-nlb-target-type"
LB_SCHEME = "service.beta.kubernetes.io/aws-load-balancer-scheme"
LB_LISTENER_ATTRIBUTES = "service.beta.kubernetes.io/aws-load-balancer-listener-attributes.TCP-{port}"
LB_TAGS = "service.beta.kubernetes.io/aws-load-balancer-additional-resource-tags"
#: Explicit subnets (ids) instead of tag-based discovery: a platform's existing VPC may not carry the role tags.
LB_SUBNETS = "service.beta.kubernetes.io/aws-load-balancer-subnets"


def idle_timeout_s(bp: Blueprint) -> int:
    """NLB TCP idle timeout: the blueprint's longest stream plus headroom, within the NLB's 60-6000 s range."""
    return min(defaults.NLB_TCP_IDLE_TIMEOUT_MAX_S,
               bp.network.load_balancer_idle_timeout_s + defaults.LB_IDLE_TIMEOUT_HEADROOM_S)


def load_balancer_annotations(bp: Blueprint, ports: list[int], *,
                              subnet_ids: pulumi.Input[list[str]] | None = None) -> dict[str, pulumi.Input[str]]:
    """Service annotations: an NLB with IP targets, internal when `private_only`, idle timeout on every listener,
    the blueprint's tags on the load balancer and, when given, its subnets by id."""
    bad = {k: v for k, v in bp.tags.items() if any(c in k + v for c in ",=")}
    if bad:
        raise ValueError(f"tags {bad} contain ',' or '=', which the load balancer tag annotation cannot carry")
    annotations = {
        LB_TYPE: "external",
        LB_TARGET_TYPE: "ip",
        LB_SCHEME: "internal" if bp.network.private_only else "internet-facing",
        LB_TAGS: ",".join(f"{k}={v}" for k, v in sorted(bp.tags.items())),
    }
    for port in ports:
        annotations[LB_LISTENER_ATTRIBUTES.format(port=port)] = f"tcp.idle_timeout.seconds={idle_timeout_s(bp)}"
    result: dict[str, pulumi.Input[str]] = dict(annotations)
    if subnet_ids is not None:
        result[LB_SUBNETS] = pulumi.Output.from_input(subnet_ids).apply(lambda ids: ",".join(ids))
    return result
