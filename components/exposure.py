"""Exposure: how clients reach the serving Service (`network.exposure.via`, `network.exposed_by`).

Off AWS load balancers (an existing or edge cluster, `blueprints.requirements.cluster_exposure`):
- `node-port`: a NodePort Service on the proxy's port (the plan's `node_port`, or one Kubernetes assigns);
- `load-balancer` with MetalLB: a plain LoadBalancer Service (MetalLB assigns an address from its pool);
- `ingress`: a ClusterIP Service behind an `networking.k8s.io/v1` Ingress of the declared controller's class, TLS with
  the exposure's Secret (`spec.tls`), source CIDRs through the controller's annotation when it has one.
A NodePort with allowed CIDRs and a MetalLB Service keep `externalTrafficPolicy: Local`, so the pods see clients' own
addresses and their NetworkPolicy admits only the allowed ones (kube-proxy also enforces
`loadBalancerSourceRanges` on a LoadBalancer). These objects carry `servingblueprints.io/exposure-scope` and, with
TLS, `servingblueprints.io/tls-secret`, which the policy pack reads.

On EKS, a Service of type LoadBalancer reconciled by the AWS Load Balancer Controller as a Network Load Balancer.

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
- The NLB's TCP idle timeout (350 s by default) is set per TCP listener above the blueprint's longest expected
  streamed response, so long generations are not cut; a TLS listener's is fixed at 350 s (`NLB_TLS_IDLE_TIMEOUT_S`)
  and gets no attribute.
"""

from __future__ import annotations

import pulumi

from blueprints.core import defaults
from blueprints.contracts.sections import EXPOSURE_SCOPE_ANNOTATION, TLS_SECRET_ANNOTATION
from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.proxy import request_timeout_s
from blueprints.catalog.addons import load_platform_catalog
from blueprints.requirements.exposure import ExposureScope, ExposureVia

LB_TYPE = "service.beta.kubernetes.io/aws-load-balancer-type"
LB_TARGET_TYPE = "service.beta.kubernetes.io/aws-load-balancer-nlb-target-type"
LB_SCHEME = "service.beta.kubernetes.io/aws-load-balancer-scheme"
#: Listener attributes by `<protocol>-<port>`: the controller builds the key from the listener's protocol, `TLS` for a
#: port in `ssl-ports` with a certificate, else the Service port's `TCP` ([LBC] v3.5.0 pkg/service/
#: model_build_listener.go L96-127, L376-390): a `TCP-443` key on a TLS listener is ignored.
LB_LISTENER_ATTRIBUTES = "service.beta.kubernetes.io/aws-load-balancer-listener-attributes.{protocol}-{port}"
#: A TLS listener's idle timeout, s: fixed ("The connection idle timeout for TLS listeners is 350 seconds and can't be
#: modified", docs.aws.amazon.com/elasticloadbalancing/latest/network/update-idle-timeout.html): a response silent for
#: longer is cut, so long answers behind a TLS NLB must stream.
NLB_TLS_IDLE_TIMEOUT_S = 350
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


def client_url(bp: Blueprint, host: pulumi.Input[str], path: str, *,
               port: pulumi.Input[str] | None = None) -> pulumi.Output[str]:
    """The URL clients use: `https://<hostname or the load balancer's / Ingress's address>[:<port>]/<path>` (http
    without TLS)."""
    exposure = bp.network.exposure
    protocol = "https" if exposure.tls else "http"
    return pulumi.Output.concat(f"{protocol}://", exposure.hostname or host, *([":", port] if port else []), path)


def client_ip_preserved(bp: Blueprint) -> bool:
    """`externalTrafficPolicy: Local` (the pods see clients' own addresses): a MetalLB LoadBalancer, and a NodePort
    with allowed CIDRs (which the pods' NetworkPolicy must check); an NLB preserves them its own way."""
    via = bp.network.exposure.via
    if via is ExposureVia.LOAD_BALANCER:
        return not bp.network.aws_load_balancer
    return via is ExposureVia.NODE_PORT and bool(bp.network.exposure.allowed_cidrs)


def client_cidrs(bp: Blueprint, vpc_cidrs: pulumi.Input[list[str]]) -> pulumi.Output[list[str]]:
    """The addresses the pods' NetworkPolicy admits to the proxy's port: an NLB's source ranges plus the VPC (its
    own addresses); off AWS load balancers the allowed CIDRs, else the private networks (a NodePort's traffic
    arrives source-NATed from the nodes' addresses); none behind an Ingress (its controller's namespace instead)."""
    exposure = bp.network.exposure
    if exposure.via is ExposureVia.INGRESS:
        return pulumi.Output.from_input([])
    if bp.network.aws_load_balancer or exposure.via is None:
        return pulumi.Output.all(source_ranges(bp, vpc_cidrs), vpc_cidrs).apply(lambda both: [*both[0], *both[1]])
    allowed = list(exposure.allowed_cidrs)
    return pulumi.Output.from_input(vpc_cidrs).apply(lambda vpc: sorted(set(allowed or vpc)))


def exposure_annotations(bp: Blueprint) -> dict[str, str]:
    """The planned scope and the TLS Secret, on a Service or Ingress exposed without an AWS load balancer."""
    annotations = {EXPOSURE_SCOPE_ANNOTATION: bp.network.exposure.scope.value}
    if bp.network.exposure.tls_secret_name:
        annotations[TLS_SECRET_ANNOTATION] = bp.network.exposure.tls_secret_name
    return annotations


def service_exposure(bp: Blueprint, port: int, *, vpc_cidrs: pulumi.Input[list[str]],
                     subnet_ids: pulumi.Input[list[str]] | None) -> tuple[dict, dict[str, pulumi.Input[str]]]:
    """(the serving Service's type-specific spec fields, its annotations) for an exposed service: an NLB, a MetalLB
    LoadBalancer, a NodePort, or a ClusterIP behind an Ingress."""
    exposure = bp.network.exposure
    via = exposure.via or ExposureVia.LOAD_BALANCER
    if via is ExposureVia.INGRESS:
        return {"type": "ClusterIP"}, {}
    if via is ExposureVia.LOAD_BALANCER and bp.network.aws_load_balancer:
        return ({"type": "LoadBalancer", "loadBalancerSourceRanges": source_ranges(bp, vpc_cidrs)},
                load_balancer_annotations(bp, [port], subnet_ids=subnet_ids))
    spec: dict = {"type": "NodePort" if via is ExposureVia.NODE_PORT else "LoadBalancer",
                  "externalTrafficPolicy": "Local" if client_ip_preserved(bp) else "Cluster"}
    if via is ExposureVia.LOAD_BALANCER:
        spec["loadBalancerSourceRanges"] = client_cidrs(bp, vpc_cidrs)
    return spec, dict(exposure_annotations(bp))


def ingress_spec(bp: Blueprint, service_name: pulumi.Input[str], port_name: str) -> tuple[dict, dict[str, str]]:
    """(the Ingress spec, its annotations): the declared controller's class, the plan's host, TLS with the exposure's
    Secret, every path to the serving Service's proxy port (the proxy decides what passes), and the controller's
    source-range annotation with the allowed CIDRs."""
    exposure = bp.network.exposure
    backend = {"service": {"name": service_name, "port": {"name": port_name}}}
    rule: dict = {"http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": backend}]}}
    if exposure.hostname:
        rule["host"] = exposure.hostname
    spec: dict = {"ingressClassName": exposure.ingress_class_name, "rules": [rule]}
    if exposure.tls_secret_name:
        spec["tls"] = [{"secretName": exposure.tls_secret_name,
                        **({"hosts": [exposure.hostname]} if exposure.hostname else {})}]
    annotations = exposure_annotations(bp)
    if exposure.allowed_cidrs:
        controller = load_platform_catalog().addon(bp.network.exposed_by or "")
        if controller.source_range_annotation is None:
            raise ValueError(f"{bp.stack}: {controller.id} cannot restrict an Ingress to source CIDRs; re-plan")
        annotations[controller.source_range_annotation] = ",".join(exposure.allowed_cidrs)
    return spec, annotations


def source_ranges(bp: Blueprint, vpc_cidrs: pulumi.Input[list[str]]) -> pulumi.Output[list[str]]:
    """Who may connect: the exposure's allowed CIDRs; for an internal exposure without any, the VPC's CIDR(s)."""
    allowed = list(bp.network.exposure.allowed_cidrs)
    return pulumi.Output.from_input(vpc_cidrs).apply(lambda vpc: sorted(set(allowed or vpc)))


def idle_timeout_s(bp: Blueprint) -> int:
    """NLB TCP idle timeout: the blueprint's longest stream plus headroom, within the NLB's 60-6000 s range (the
    proxy's request timeout, `blueprints.contracts.proxy.request_timeout_s`)."""
    return request_timeout_s(bp)


def listener_protocol(bp: Blueprint, port: int) -> str:
    """The NLB listener protocol of a Service port, as the controller derives it: `TLS` on the exposure's TLS port
    with its certificate (the annotations list it in `ssl-ports`), else `TCP`."""
    return "TLS" if bp.network.exposure.tls_certificate_arn and port == listener_port(bp) else "TCP"


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
        if listener_protocol(bp, port) == "TCP":  # a TLS listener's idle timeout cannot be modified
            annotations[LB_LISTENER_ATTRIBUTES.format(protocol="TCP", port=port)] = \
                f"tcp.idle_timeout.seconds={idle_timeout_s(bp)}"
    result: dict[str, pulumi.Input[str]] = dict(annotations)
    if subnet_ids is not None:
        result[LB_SUBNETS] = pulumi.Output.from_input(subnet_ids).apply(lambda ids: ",".join(ids))
    return result
