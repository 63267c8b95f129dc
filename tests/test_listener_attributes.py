"""NLB listener attributes as the AWS Load Balancer Controller reads them (check `listener-attributes`): the key is
`<protocol>-<port>` of the listener (`TLS` where the Service has a certificate), and a TLS listener's idle timeout is
fixed at 350 s, so only TCP listeners get one."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from blueprints.review.deployability.checks import check_deployability
from blueprints.review.deployability.load_balancers import ATTRIBUTES, PREFIX, listeners
from blueprints.review.preview import PreviewReport
from components.exposure import NLB_TLS_IDLE_TIMEOUT_S
from tests.conftest import ROOT
from tests.bundled import bundled_review

STACKS = ROOT / "stacks"


@pytest.fixture(scope="module")
def tls() -> PreviewReport:
    return bundled_review("partner-api-prod")


@pytest.fixture(scope="module")
def tcp() -> PreviewReport:
    return bundled_review("chat-assistant-prod")


def _findings(report: PreviewReport) -> list[str]:
    return [f.message for f in check_deployability(report, stacks_dir=STACKS) if f.check == "listener-attributes"]


def _exposed(report: PreviewReport):
    return next(r for r in report.resources if r.type == "kubernetes:core/v1:Service"
                and (r.inputs.get("metadata", {}).get("annotations") or {}).get(f"{PREFIX}type"))


def _with_annotations(report: PreviewReport, edit) -> PreviewReport:
    record = _exposed(report)
    inputs = copy.deepcopy(record.inputs)
    edit(inputs["metadata"]["annotations"])
    new = dataclasses.replace(record, inputs=inputs)
    return dataclasses.replace(report, resources=[new if r.urn == record.urn else r for r in report.resources])


def test_the_controller_derives_tls_for_a_certificate_port_and_the_port_protocol_otherwise():
    ports = [{"name": "https", "port": 443, "protocol": "TCP"}, {"name": "metrics", "port": 9090, "protocol": "TCP"}]
    cert = {f"{PREFIX}ssl-cert": "arn:aws:acm:eu-west-1:111111111111:certificate/x"}
    assert listeners(cert, ports) == {"TLS-443": "TLS", "TLS-9090": "TLS"}  # every port without ssl-ports
    assert listeners({**cert, f"{PREFIX}ssl-ports": "443"}, ports) == {"TLS-443": "TLS", "TCP-9090": "TCP"}
    assert listeners({}, ports) == {"TCP-443": "TCP", "TCP-9090": "TCP"}


def test_a_tls_listener_gets_no_idle_timeout_and_a_tcp_listener_its_own(tls, tcp):
    tls_annotations = _exposed(tls).inputs["metadata"]["annotations"]
    assert f"{PREFIX}ssl-cert" in tls_annotations
    assert not [k for k in tls_annotations if k.startswith(ATTRIBUTES)]  # fixed at 350 s
    assert NLB_TLS_IDLE_TIMEOUT_S == 350
    tcp_annotations = _exposed(tcp).inputs["metadata"]["annotations"]
    [key] = [k for k in tcp_annotations if k.startswith(ATTRIBUTES)]
    assert key == f"{ATTRIBUTES}TCP-80" and tcp_annotations[key].startswith("tcp.idle_timeout.seconds=")
    assert _findings(tls) == [] and _findings(tcp) == []


def test_the_old_tcp_key_on_a_tls_listener_is_a_finding(tls):
    """What the program set before: `listener-attributes.TCP-443` on a TLS listener, which the controller ignores."""
    def old(annotations):
        annotations[f"{ATTRIBUTES}TCP-443"] = "tcp.idle_timeout.seconds=454"
    [message] = _findings(_with_annotations(tls, old))
    assert "TCP-443" in message and "TLS-443" in message and "ignores it" in message


def test_an_idle_timeout_on_a_tls_listener_is_a_finding(tls):
    def keyed_right(annotations):
        annotations[f"{ATTRIBUTES}TLS-443"] = "tcp.idle_timeout.seconds=454"
    [message] = _findings(_with_annotations(tls, keyed_right))
    assert "fixed at 350 s" in message
