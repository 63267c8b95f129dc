"""The `listener-attributes` check of `blueprint preview` (`blueprints.review.deployability.checks`): every NLB listener
attribute a Service's annotations set reaches a listener, as the AWS Load Balancer Controller reads them.

The controller builds the key from the listener's protocol and port (`...listener-attributes.<protocol>-<port>`,
[LBC] v3.5.0 pkg/service/model_build_listener.go L96-127, L376-390): `TLS` for a port in `ssl-ports` (every port
when unset) of a Service with a certificate (`ssl-cert`), else the port's own protocol. A key for another protocol is
ignored (`TCP-443` on a TLS listener keeps the 350 s default), and a TLS listener's idle timeout cannot be modified
("fixed at 350 seconds", docs.aws.amazon.com/elasticloadbalancing/latest/network/update-idle-timeout.html).
"""

from __future__ import annotations

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
