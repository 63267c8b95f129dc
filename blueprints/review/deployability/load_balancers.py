"""The proxies in front of a serving Service, as they really pick their protocol (`blueprints.review.deployability.checks`).

`listener-attributes`: every NLB listener attribute a Service's annotations set reaches a listener, as the AWS Load
Balancer Controller reads them.
The controller builds the key from the listener's protocol and port (`...listener-attributes.<protocol>-<port>`,
[LBC] v3.5.0 pkg/service/model_build_listener.go L96-127, L376-390): `TLS` for a port in `ssl-ports` (every port
when unset) of a Service with a certificate (`ssl-cert`), else the port's own protocol. A key for another protocol is
ignored (`TCP-443` on a TLS listener keeps the 350 s default), and a TLS listener's idle timeout cannot be modified
("fixed at 350 seconds", docs.aws.amazon.com/elasticloadbalancing/latest/network/update-idle-timeout.html).

`interceptor-protocol`: the KEDA HTTP add-on's interceptor speaks HTTP/2 to a backend that serves gRPC. Since 0.15 it
picks the transport from the target Service port's `appProtocol`, not the client's: HTTP/1.1 to a cleartext port unless
it is `kubernetes.io/h2c` (`addons.yaml` `backend_h2c_app_protocol`), ALPN to a TLS one. gRPC needs HTTP/2, so a
scaled-to-zero Triton's gRPC clients failed through it.
"""

from __future__ import annotations

from blueprints.contracts.proxy import serves_grpc
from blueprints.review.preview import DeployabilityFinding
from blueprints.review.deployability.context import CheckContext, get_in, list_of, named

PREFIX = "service.beta.kubernetes.io/aws-load-balancer-"
ATTRIBUTES = f"{PREFIX}listener-attributes."


def listeners(annotations: dict, ports: list[dict]) -> dict[str, str]:
    """`{"<protocol>-<port>": protocol}` of a Service's NLB listeners, as the controller derives them."""
    cert = annotations.get(f"{PREFIX}ssl-cert")
    ssl = annotations.get(f"{PREFIX}ssl-ports")
    ssl_ports = {p.strip() for p in str(ssl).split(",")} if ssl else None
    found = {}
    for port in ports:
        number, name = str(port.get("port")), str(port.get("name", ""))
        tls = bool(cert) and (ssl_ports is None or number in ssl_ports or name in ssl_ports)
        protocol = "TLS" if tls else str(port.get("protocol", "TCP"))
        found[f"{protocol}-{number}"] = protocol
    return found


def check_listener_attributes(ctx: CheckContext) -> list[DeployabilityFinding]:
    findings = []
    for record in ctx.report.resources:
        if record.type != "kubernetes:core/v1:Service":
            continue
        annotations = get_in(record.inputs, "metadata", "annotations") or {}
        attributes = {k.removeprefix(ATTRIBUTES): v for k, v in annotations.items() if k.startswith(ATTRIBUTES)}
        if not attributes:
            continue
        known = listeners(annotations, list_of(get_in(record.inputs, "spec", "ports")))
        for listener, value in attributes.items():
            if listener not in known:
                findings.append(DeployabilityFinding("listener-attributes", record.urn, (
                    f"{named(record)} sets {ATTRIBUTES}{listener} ({value}), but its NLB's listeners are "
                    f"{', '.join(sorted(known))}: the controller ignores it (it reads <protocol>-<port>, TLS for a port "
                    "with a certificate); key it by the listener's protocol")))
            elif known[listener] == "TLS" and "tcp.idle_timeout.seconds" in str(value):
                findings.append(DeployabilityFinding("listener-attributes", record.urn, (
                    f"{named(record)} sets tcp.idle_timeout.seconds on TLS listener {listener}, whose idle timeout is "
                    "fixed at 350 s and cannot be modified: drop it (responses behind a TLS listener must not be "
                    "silent for 350 s: stream them)")))
    return findings


INTERCEPTOR_ROUTE = "kubernetes:http.keda.sh/v1beta1:InterceptorRoute"
HTTP_ADD_ON = "keda-http-add-on"


def check_interceptor_protocol(ctx: CheckContext) -> list[DeployabilityFinding]:
    routes = [r for r in ctx.report.resources if r.type == INTERCEPTOR_ROUTE]
    if not routes or ctx.report.is_platform:
        return []
    bp = ctx.report.blueprint
    if not serves_grpc(bp) or bp.proxy_terminates_tls:  # HTTP/1.1 suffices; a TLS backend negotiates by ALPN
        return []
    h2c = ctx.pcat.addon(HTTP_ADD_ON).backend_h2c_app_protocol
    services = {get_in(r.inputs, "metadata", "name"): r for r in ctx.report.resources
                if r.type == "kubernetes:core/v1:Service"}
    findings = []
    for route in routes:
        target = get_in(route.inputs, "spec", "target") or {}
        service = services.get(target.get("service"))
        ports = list_of(get_in(service.inputs, "spec", "ports")) if service else []
        port = next((p for p in ports if target.get("port") in (p.get("port"), p.get("name"))
                     or target.get("portName") == p.get("name")), None)
        if port is None or port.get("appProtocol") != h2c:
            findings.append(DeployabilityFinding("interceptor-protocol", route.urn, (
                f"{named(route)} sends requests to Service {target.get('service')!r} port {target.get('port')}, "
                f"whose pods serve gRPC, but the port's appProtocol is {(port or {}).get('appProtocol')!r}: the "
                "KEDA HTTP interceptor speaks HTTP/1.1 to a cleartext backend unless it is "
                f"{h2c!r}, and gRPC needs HTTP/2; set appProtocol: {h2c} on that Service port")))
    return findings
