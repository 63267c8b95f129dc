"""Who can reach a workload: public load balancers only with TLS, source ranges and an authenticating proxy in front
of the engine; every workload selected by a NetworkPolicy for ingress and egress.

Load balancer annotations are the AWS Load Balancer Controller's (docs/guide/service/annotations.md): its scheme
default is `internal`; a LoadBalancer Service the controller does not own (no `aws-load-balancer-type: external`,
no NLB target type, no `service.k8s.aws/nlb` class) falls to the in-tree cloud provider, whose default is
internet-facing, unless it records its planned scope (`servingblueprints.io/exposure-scope`: a MetalLB Service, whose
address pool only the cluster knows). A NodePort Service or an Ingress is judged by that annotation: `public` ones must
serve TLS (an Ingress's `spec.tls`, or the proxy's TLS Secret mounted in the pods it reaches), admit only listed
client CIDRs (the Ingress controller's source-range annotation; a NodePort keeping clients' addresses,
`externalTrafficPolicy: Local`, for the pods' NetworkPolicy) and reach only the authenticating proxy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from blueprints.contracts.sections import EXPOSURE_SCOPE_ANNOTATION, TLS_SECRET_ANNOTATION
from policies.resources import POD_TEMPLATE_PATHS, UNKNOWN, Finding, Res, get, items, mapping, pod_template
from policies.workloads import image_registry

SERVICE: Final = "kubernetes:core/v1:Service"
INGRESS: Final = "kubernetes:networking.k8s.io/v1:Ingress"
NETWORK_POLICY: Final = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
_LB: Final = "service.beta.kubernetes.io/aws-load-balancer-"
SCHEME: Final = f"{_LB}scheme"
SSL_CERT: Final = f"{_LB}ssl-cert"
SSL_PORTS: Final = f"{_LB}ssl-ports"
SOURCE_RANGES_ANNOTATION: Final = "service.beta.kubernetes.io/load-balancer-source-ranges"


def is_internet_facing(res: Res) -> bool | None:
    """Whether a Service or Ingress is reachable from the internet; None when it is not exposed (a ClusterIP
    Service), when a NodePort or Ingress records no scope, or when its annotations are unknown yet."""
    kind = get(res.props, "spec", "type") if res.type == SERVICE else "Ingress" if res.type == INGRESS else None
    if kind not in ("LoadBalancer", "NodePort", "Ingress"):
        return None
    annotations = get(res.props, "metadata", "annotations")
    if annotations is UNKNOWN or UNKNOWN in mapping(annotations).values():
        return None
    ann = mapping(annotations)
    if kind == "LoadBalancer" and SCHEME in ann:
        return ann[SCHEME] == "internet-facing"
    if kind == "LoadBalancer" and ann.get(f"{_LB}internal") == "true":
        return False
    if EXPOSURE_SCOPE_ANNOTATION in ann:
        return ann[EXPOSURE_SCOPE_ANNOTATION] == "public"
    if kind != "LoadBalancer":
        return None
    controller_owned = (ann.get(f"{_LB}type") == "external" or f"{_LB}nlb-target-type" in ann
                        or get(res.props, "spec", "loadBalancerClass") == "service.k8s.aws/nlb")
    return not controller_owned


def off_aws(res: Res) -> bool:
    """A Service exposed without a cloud load balancer: a NodePort, or a LoadBalancer recording its planned scope (a
    MetalLB address). A LoadBalancer without it is the cloud's (the controller's NLB, or the in-tree provider's)."""
    annotations = mapping(get(res.props, "metadata", "annotations"))
    return get(res.props, "spec", "type") == "NodePort" or (
        EXPOSURE_SCOPE_ANNOTATION in annotations and not any(str(k).startswith(_LB) for k in annotations))


def _selects(selector: Any, labels: Mapping[str, Any]) -> bool | None:
    """Whether a label selector (`matchLabels`, `matchExpressions`) selects `labels`; None when unknown."""
    if selector is UNKNOWN:
        return None
    selector = mapping(selector)
    if any(labels.get(k) != v for k, v in mapping(selector.get("matchLabels")).items()):
        return False
    for expr in items(selector.get("matchExpressions")):
        key, op, values = get(expr, "key"), get(expr, "operator"), items(get(expr, "values"))
        ok = {"In": labels.get(key) in values, "NotIn": labels.get(key) not in values,
              "Exists": key in labels, "DoesNotExist": key not in labels}.get(op)
        if not ok:
            return False
    return True


def _pod_labels(res: Res) -> Mapping[str, Any] | None:
    path = POD_TEMPLATE_PATHS.get(res.type)
    if path is None:
        return None
    labels = get(get(res.props, *path) if path else res.props, "metadata", "labels")
    return None if labels is UNKNOWN else mapping(labels)


def _namespace(res: Res) -> Any:
    return get(res.props, "metadata", "namespace") or "default"


def check_workloads_have_network_policy(resources: Sequence[Res], config: Mapping[str, Any]) -> list[Finding]:
    """Every workload's pods are selected by NetworkPolicies of their namespace that restrict both ingress and egress
    (a default deny plus what is allowed); without one, any pod in the cluster reaches the engine's ports."""
    policies = [r for r in resources if r.type == NETWORK_POLICY]
    findings: list[Finding] = []
    for res in resources:
        labels = _pod_labels(res)
        if labels is None or _namespace(res) is UNKNOWN or get(res.props, "spec") is UNKNOWN:
            continue
        covered: set[str] = set()
        for policy in (p for p in policies if _namespace(p) == _namespace(res)):
            spec = get(policy.props, "spec")
            if spec is UNKNOWN:
                covered |= {"Ingress", "Egress"}  # judged at `pulumi up`
                continue
            selected = _selects(get(spec, "podSelector"), labels)
            if selected is not False:
                types = items(get(spec, "policyTypes")) or (["Ingress"] + (["Egress"] if get(spec, "egress") else []))
                covered |= set(types)
        missing = [t for t in ("Ingress", "Egress") if t not in covered]
        if missing:
            findings.append((res, f"{res.label}: no NetworkPolicy in namespace {_namespace(res)!r} restricts its pods' "
                                  f"{' and '.join(m.lower() for m in missing)}, so any pod in the cluster can reach "
                                  "(or be reached from) them; add a default-deny policy and policies for the traffic "
                                  "it needs (components.network_policy)"))
    return findings


def _target_containers(service: Res, workloads: Sequence[Res], port: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The containers a Service port reaches: those of the selected workloads exposing its `targetPort`."""
    target = port.get("targetPort", port.get("port"))
    selector = get(service.props, "spec", "selector")
    found = []
    for workload in workloads:
        labels = _pod_labels(workload)
        pod = pod_template(workload)
        if not labels or pod is None or not mapping(selector) or _namespace(workload) != _namespace(service):
            continue
        if any(labels.get(k) != v for k, v in mapping(selector).items()):
            continue
        found += [c for c in items(pod.spec.get("containers")) if isinstance(c, Mapping)
                  and any(get(p, "name") == target or get(p, "containerPort") == target for p in items(c.get("ports")))]
    return found


def _mounts_secret(workloads: Sequence[Res], service: Res, secret: Any) -> bool:
    """A pod the Service selects mounts the Secret `secret` (the proxy's TLS certificate)."""
    selector = mapping(get(service.props, "spec", "selector"))
    for workload in workloads:
        labels, pod = _pod_labels(workload), pod_template(workload)
        if not labels or pod is None or not selector or any(labels.get(k) != v for k, v in selector.items()):
            continue
        if any(get(v, "secret", "secretName") == secret for v in items(pod.spec.get("volumes"))):
            return True
    return False


def _proxy_problems(service: Res, ports: list[Mapping[str, Any]], workloads: Sequence[Res],
                    config: Mapping[str, Any]) -> list[str]:
    proxies = [image_registry(i) for i in config["authProxyImages"]]
    problems = []
    for port in ports:
        targets = _target_containers(service, workloads, port)
        if not targets:
            problems.append(f"port {port.get('port')} reaches no container of this stack, so no authenticating "
                            "proxy can be shown in front of it")
        unguarded = [c.get("name") for c in targets
                     if not (isinstance(c.get("image"), str) and image_registry(c["image"]) in proxies)]
        if unguarded:
            problems.append(f"port {port.get('port')} reaches container(s) {unguarded} directly, not an "
                            "authenticating proxy, so the engine's unauthenticated paths are on the internet")
    return problems


def _off_aws_problems(res: Res, resources: Sequence[Res], workloads: Sequence[Res],
                      config: Mapping[str, Any]) -> list[str]:
    """A public NodePort, MetalLB LoadBalancer or Ingress: TLS, source CIDRs, and only the proxy behind it."""
    ann = mapping(get(res.props, "metadata", "annotations"))
    problems = []
    if res.type == INGRESS:
        if not items(get(res.props, "spec", "tls")):
            problems.append("no TLS (spec.tls with a kubernetes.io/tls Secret), so requests and the API key cross "
                            "the internet in clear text")
        if not any("source-range" in str(k) for k in ann):
            problems.append("no source ranges (the ingress controller's source-range annotation), so the whole "
                            "internet may connect")
        for rule in items(get(res.props, "spec", "rules")):
            for path in items(get(rule, "http", "paths")):
                name, port = get(path, "backend", "service", "name"), get(path, "backend", "service", "port")
                service = next((r for r in resources if r.type == SERVICE and get(r.props, "metadata", "name") == name
                                and _namespace(r) == _namespace(res)), None)
                if service is None:
                    problems.append(f"backend Service {name!r} is not in this stack, so no authenticating proxy can "
                                    "be shown in front of it")
                    continue
                wanted = get(port, "name") or get(port, "number")
                ports = [p for p in items(get(service.props, "spec", "ports")) if isinstance(p, Mapping)
                         and wanted in (p.get("name"), p.get("port"))]
                problems += _proxy_problems(service, ports, workloads, config)
        return problems
    ports = [p for p in items(get(res.props, "spec", "ports")) if isinstance(p, Mapping)]
    secret = ann.get(TLS_SECRET_ANNOTATION)
    if not secret or not _mounts_secret(workloads, res, secret):
        problems.append(f"no TLS: no {TLS_SECRET_ANNOTATION} Secret mounted into the pods it reaches, so requests and "
                        "the API key cross the internet in clear text")
    if get(res.props, "spec", "externalTrafficPolicy") != "Local":
        problems.append("externalTrafficPolicy is not Local, so the pods see node addresses and their NetworkPolicy "
                        "cannot admit only the allowed client CIDRs")
    if get(res.props, "spec", "type") == "LoadBalancer" and not items(get(res.props, "spec",
                                                                           "loadBalancerSourceRanges")):
        problems.append("no source ranges (spec.loadBalancerSourceRanges), so the whole internet may connect")
    return problems + _proxy_problems(res, ports, workloads, config)


def check_public_endpoint_protected(resources: Sequence[Res], config: Mapping[str, Any]) -> list[Finding]:
    """An internet-facing load balancer terminates TLS on every port (`aws-load-balancer-ssl-cert`, and
    `aws-load-balancer-ssl-ports` covering each port), admits only listed source ranges, and reaches only an
    authenticating proxy (`authProxyImages`), never an engine port; off AWS load balancers, a public NodePort,
    MetalLB Service or Ingress does the same its own way (`_off_aws_problems`)."""
    workloads = [r for r in resources if pod_template(r) is not None]
    findings: list[Finding] = []
    for svc in (r for r in resources if is_internet_facing(r)):
        if svc.type == INGRESS or off_aws(svc):
            problems = _off_aws_problems(svc, resources, workloads, config)
            if problems:
                findings.append((svc, f"{svc.label} is internet-facing with " + "; ".join(problems) + "; set "
                                      "exposure.tls_secret_name and exposure.allowed_cidrs in the requirements (the "
                                      "proxy comes with every self-hosted archetype), or make it internal"))
            continue
        ann = mapping(get(svc.props, "metadata", "annotations"))
        ports = [p for p in items(get(svc.props, "spec", "ports")) if isinstance(p, Mapping)]
        problems = []
        tls_ports = {p.strip() for p in str(ann.get(SSL_PORTS, "")).split(",") if p.strip()}
        plain = [p for p in ports
                 if tls_ports and str(p.get("port")) not in tls_ports and p.get("name") not in tls_ports]
        if not ann.get(SSL_CERT):
            problems.append(f"no TLS certificate ({SSL_CERT}: an ACM certificate ARN), so requests and the API key "
                            "cross the internet in clear text")
        elif plain:
            problems.append(f"port(s) {[p.get('port') for p in plain]} are not TLS listeners ({SSL_PORTS})")
        ranges = get(svc.props, "spec", "loadBalancerSourceRanges")
        if ranges is not UNKNOWN and not items(ranges) and not ann.get(SOURCE_RANGES_ANNOTATION):
            problems.append("no source ranges (spec.loadBalancerSourceRanges), so the whole internet may connect")
        problems += _proxy_problems(svc, ports, workloads, config)
        if problems:
            findings.append((svc, f"{svc.label} is internet-facing with " + "; ".join(problems) + "; set "
                                  "exposure.tls_certificate_arn and exposure.allowed_cidrs in the requirements (the "
                                  "proxy comes with every self-hosted archetype), or make it internal"))
    return findings
