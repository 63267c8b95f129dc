"""The KEDA HTTP interceptor speaks HTTP/2 to a Triton that serves gRPC (check `interceptor-protocol`): since 0.15 it
picks the backend transport from the target Service port's `appProtocol` (`addons.yaml` keda-http-add-on
`backend_h2c_app_protocol`), HTTP/1.1 to a cleartext port otherwise, which gRPC refuses."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from blueprints.catalog.addons import load_platform_catalog
from blueprints.contracts.proxy import service_app_protocol
from blueprints.review.deployability.checks import check_deployability
from blueprints.review.deployability.load_balancers import INTERCEPTOR_ROUTE
from blueprints.review.preview import PreviewReport
from tests.conftest import ROOT
from tests.bundled import bundled_review

STACKS = ROOT / "stacks"
H2C = "kubernetes.io/h2c"


@pytest.fixture(scope="module")
def triton_dev() -> PreviewReport:
    """rag-assistant-retrieval-dev: Triton (HTTP and gRPC behind the proxy) scaled to zero behind the interceptor."""
    return bundled_review("rag-assistant-retrieval-dev")


def _findings(report: PreviewReport) -> list[str]:
    return [f.message for f in check_deployability(report, stacks_dir=STACKS) if f.check == "interceptor-protocol"]


def _target_service(report: PreviewReport):
    [route] = [r for r in report.resources if r.type == INTERCEPTOR_ROUTE]
    name = route.inputs["spec"]["target"]["service"]
    return next(r for r in report.resources if r.type == "kubernetes:core/v1:Service"
                and r.inputs["metadata"]["name"] == name), route.inputs["spec"]["target"]["port"]


def test_the_catalog_records_the_add_on_s_h2c_app_protocol():
    assert load_platform_catalog().addon("keda-http-add-on").backend_h2c_app_protocol == H2C


def test_a_scaled_to_zero_triton_s_service_port_speaks_h2c_to_the_interceptor(triton_dev):
    service, port = _target_service(triton_dev)
    [target] = [p for p in service.inputs["spec"]["ports"] if p["port"] == port]
    assert target["appProtocol"] == H2C
    assert _findings(triton_dev) == []


def test_only_a_grpc_backend_behind_the_interceptor_gets_it(triton_dev):
    bp = triton_dev.blueprint
    assert service_app_protocol(bp, H2C) == H2C
    always_up = bp.model_copy(update={"autoscaling": bp.autoscaling.model_copy(update={"min_replicas": 1})})
    assert service_app_protocol(always_up, H2C) is None  # no interceptor in front
    chat = bundled_review("chat-assistant-dev")  # vLLM behind the interceptor: HTTP/1.1 only
    assert service_app_protocol(chat.blueprint, H2C) is None and _findings(chat) == []


def test_the_port_without_it_is_a_finding(triton_dev):
    """What the program registered before: the proxy port without appProtocol."""
    service, _ = _target_service(triton_dev)
    inputs = copy.deepcopy(service.inputs)
    for port in inputs["spec"]["ports"]:
        port.pop("appProtocol", None)
    new = dataclasses.replace(service, inputs=inputs)
    report = dataclasses.replace(triton_dev, resources=[new if r.urn == service.urn else r
                                                        for r in triton_dev.resources])
    [message] = _findings(report)
    assert "speaks HTTP/1.1" in message and f"set appProtocol: {H2C}" in message
