"""The `endpoint` output is what clients call: on every bundled service stack, the endpoint plus each path a client
adds (`blueprint verify`'s request, the example request of the outputs and plan.md, every path of
`blueprints.contracts.client_api.client_paths`) is carried hop by hop, as the real proxies route it
(`tests.request_routing`): the KEDA HTTP interceptor's InterceptorRoute (a service that scales to zero), the
Ingress or the serving Service, and the pods' Envoy, whose route table (parsed by Envoy's own protobufs) must forward
it to the engine with the key and refuse it (401) without. No Service reaches an engine's port directly (the port it
targets is Envoy's in every pod, `_proxy_behind`), so there is no proxy-less path to walk through the engine's own
routes; a SageMaker endpoint is the runtime's invocation URL (`blueprint verify` signs its requests)."""

from __future__ import annotations

import re
import shlex

import pytest

from blueprints.catalog.addons import load_platform_catalog
from blueprints.contracts.client_api import client_paths, request_url
from blueprints.contracts.proxy import proxy_config
from blueprints.contracts.sections import Archetype
from blueprints.operate.endpoint import probe_url
from blueprints.requirements.exposure import ExposureVia
from blueprints.review.preview import PreviewReport
from components.autoscaling import HTTP_ADD_ON
from tests.conftest import ROOT
from tests.request_routing import Request, envoy_managers, envoy_route, interceptor_route

KEY = "k" * 40
SERVICE_STACKS = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in (ROOT / "stacks").glob("Pulumi.*.yaml")
                        if not p.name.startswith("Pulumi.platform-"))


@pytest.fixture(scope="module")
def managers(bundled_previews) -> dict[str, dict]:
    """Each self-hosted service stack's Envoy connection manager, as `envoy.json` holds it (`proxy_config`, which
    the API-key Secret serialises), parsed by Envoy's protobufs."""
    return envoy_managers({stack: proxy_config(report.blueprint, KEY) for stack, report in bundled_previews.items()
                           if stack in SERVICE_STACKS
                           and report.blueprint.archetype is not Archetype.SAGEMAKER_ENDPOINT})


def _of(report: PreviewReport, kind: str) -> list[dict]:
    return [m for m in report.manifests if m["kind"] == kind]


def _service(report: PreviewReport, namespace: str, name: str) -> dict:
    found = [m for m in _of(report, "Service")
             if m["metadata"]["name"] == name and m["metadata"].get("namespace") == namespace]
    assert len(found) == 1, f"{report.stack}: no Service {namespace}/{name}"
    return found[0]


def _split(url: str) -> tuple[str, str, str, str]:
    """(scheme, host:port as sent in the Host header, host, path)."""
    found = re.fullmatch(r"(https?)://([^/]+)(/.*)?", url)
    assert found, f"not an http(s) URL: {url}"
    scheme, netloc, path = found.group(1), found.group(2), found.group(3) or "/"
    host = netloc.rsplit(":", 1)[0] if re.search(r":[^:]*$", netloc) else netloc
    return scheme, netloc, host, path


def _port(netloc: str, scheme: str) -> str:
    return netloc.rsplit(":", 1)[1] if ":" in netloc else ("443" if scheme == "https" else "80")


def _prefix_match(prefix: str, path: str) -> bool:
    """Kubernetes Ingress `pathType: Prefix`: element-wise by `/`."""
    prefix = prefix.rstrip("/")
    return not prefix or path == prefix or path.startswith(prefix + "/")


def serving_service(report: PreviewReport, url: str, headers: dict[str, str]) -> tuple[dict, Request]:
    """The first hops of `url`: the serving Service it reaches (through the KEDA interceptor, an Ingress, a load
    balancer or a NodePort) and the request as that Service's pods receive it."""
    bp = report.blueprint
    scheme, netloc, host, path = _split(url)
    request = Request(host=netloc, path=path, headers=headers)
    if host.endswith(".svc.cluster.local"):
        name, namespace = host.split(".")[:2]
        service = _service(report, namespace, name)
        assert int(_port(netloc, scheme)) in [p["port"] for p in service["spec"]["ports"]], url
        if service["spec"]["type"] != "ExternalName":
            return service, request
        proxy = load_platform_catalog().addon(HTTP_ADD_ON).endpoints["interceptor-proxy"]
        assert f"{service['spec']['externalName']}:{_port(netloc, scheme)}" == proxy, url
        route = interceptor_route(_of(report, "InterceptorRoute"), request)
        assert route is not None, f"{report.stack}: the KEDA interceptor routes no InterceptorRoute to {url}"
        target = _service(report, route["metadata"]["namespace"], route["spec"]["target"]["service"])
        assert route["spec"]["target"]["port"] in [p["port"] for p in target["spec"]["ports"]]
        return target, request  # path unchanged, Host kept
    if bp.network.exposure.via is ExposureVia.INGRESS:
        (ingress,) = _of(report, "Ingress")
        for rule in ingress["spec"]["rules"]:
            if rule.get("host") in (None, host):
                for candidate in rule["http"]["paths"]:
                    if _prefix_match(candidate["path"], path):
                        backend = candidate["backend"]["service"]["name"]
                        return _service(report, ingress["metadata"]["namespace"], backend), request
        raise AssertionError(f"{report.stack}: the Ingress routes nothing to {url}")
    exposed = [m for m in _of(report, "Service") if m["spec"]["type"] in ("LoadBalancer", "NodePort")]
    assert len(exposed) == 1, f"{report.stack}: {len(exposed)} exposed Services"
    service = exposed[0]
    port = _port(netloc, scheme)
    field = "nodePort" if service["spec"]["type"] == "NodePort" else "port"
    if port.isdigit():
        assert int(port) in [p.get(field) for p in service["spec"]["ports"]], url
    return service, request


def _proxy_behind(report: PreviewReport, service: dict) -> None:
    """The Service's pods answer its port with the authenticating proxy (Envoy), not the engine."""
    selector = service["spec"]["selector"]
    port = service["spec"]["ports"][0]["targetPort"]
    pods = [d["spec"]["template"] for d in _of(report, "Deployment")
            if selector.items() <= d["spec"]["template"]["metadata"]["labels"].items()]
    assert pods, f"{report.stack}: no Deployment behind Service {service['metadata']['name']}"
    for pod in pods:
        owners = [c["name"] for c in pod["spec"]["containers"]
                  if any(p.get("name") == port for p in c.get("ports", []))]
        assert owners == ["auth-proxy"], f"{report.stack}: port {port} is served by {owners}"


def _example_urls(report: PreviewReport) -> list[str]:
    """The URLs of the example request (the output `example_request`, as plan.md shows it), the endpoint output
    substituted for its `$(pulumi stack output endpoint ...)`."""
    placeholder = f"$(pulumi stack output endpoint --stack {report.stack})"
    urls = [a[len(placeholder):] for a in shlex.split(report.outputs["example_request"], comments=True) if a.startswith(placeholder)]
    assert urls, report.outputs["example_request"]
    return [report.outputs["endpoint"] + url for url in urls]


def client_urls(report: PreviewReport) -> list[str]:
    """Every URL a client builds from the endpoint output: verify's request, the example's, every client path."""
    bp, endpoint = report.blueprint, report.outputs["endpoint"]
    return [probe_url(bp, endpoint), *_example_urls(report), *(request_url(endpoint, p) for p in client_paths(bp))]


@pytest.mark.parametrize("stack", SERVICE_STACKS)
def test_the_endpoint_and_every_path_clients_add_reach_the_engine_through_the_stacks_own_proxies(
        stack, bundled_previews, managers):
    report = bundled_previews[stack]
    bp = report.blueprint
    if bp.archetype is Archetype.SAGEMAKER_ENDPOINT:  # the runtime's own API, signed (verify's signed check)
        assert re.fullmatch(rf"https://runtime\.sagemaker\.{bp.region}\.amazonaws\.com/endpoints/[^/]+/invocations",
                            report.outputs["endpoint"])
        return
    keyed = {"authorization": f"Bearer {KEY}", "content-type": "application/json"}
    for url in client_urls(report):
        service, request = serving_service(report, url, keyed)
        _proxy_behind(report, service)
        route = envoy_route(managers[stack], request)
        assert route is not None and route.get("route", {}).get("cluster") == "engine", \
            f"{stack}: {url} -> Envoy {route and route.get('direct_response')}"
        anonymous = envoy_route(managers[stack], Request(request.host, request.path, {}))
        assert anonymous is not None and anonymous["direct_response"]["status"] == 401, f"{stack}: {url} without key"


def test_the_envoy_walk_refuses_what_the_route_table_refuses(managers):
    """The walk itself: a path the engine does not serve is 404 (the model named twice, the base path lost, the
    model repository API); a keyed path without the key is 401."""
    manager = managers["support-sentiment-prod"]
    keyed = {"authorization": f"Bearer {KEY}"}
    for path in ("/v2/models/x/models/x", "/models/x", "/v2/repository/index"):
        assert envoy_route(manager, Request("h", path, keyed))["direct_response"]["status"] == 404, path
    assert envoy_route(manager, Request("h", "/v2/models/x/infer", keyed))["route"]["cluster"] == "engine"
    assert envoy_route(manager, Request("h", "/v2/models/x/infer", {}))["direct_response"]["status"] == 401


def _ir(name: str, hosts: list[str], paths: list[str] | None = None) -> dict:
    rule: dict = {"hosts": hosts}
    if paths:
        rule["paths"] = [{"value": p} for p in paths]
    return {"metadata": {"name": name}, "spec": {"rules": [rule]}}


@pytest.mark.parametrize(("stored", "host", "path", "want"), [
    # kedacore/http-add-on v0.15.0 pkg/routing/tablememory_test.go TestRoute, TestRouteWildcardPrecedence
    ([_ir("test", ["example.com"])], "other.com", "/", None),
    ([_ir("test", ["example.com"])], "example.com", "/any/path", "test"),
    ([_ir("api", ["example.com"], ["/api/"])], "example.com", "/api/v1/users", "api"),
    ([_ir("api", ["example.com"], ["/api/"])], "example.com", "/other/path", None),
    ([_ir("root", ["example.com"], ["/"]), _ir("api", ["example.com"], ["/api/"])], "example.com", "/api/v1", "api"),
    ([_ir("w", ["*.example.com"]), _ir("exact", ["foo.example.com"])], "foo.example.com", "/", "exact"),
    ([_ir("w", ["*.example.com"]), _ir("wb", ["*.bar.example.com"])], "foo.bar.example.com", "/", "wb"),
    ([_ir("w", ["*.example.com"]), _ir("wb", ["*.bar.example.com"])], "foo.baz.example.com", "/", "w"),
    ([_ir("all", ["*"]), _ir("w", ["*.example.com"])], "bar.other.com", "/", "all"),
    # table.go Route: the Host header's port is stripped before the look-up
    ([_ir("test", ["example.com"])], "example.com:8080", "/v1/models", "test"),
])
def test_the_interceptor_walk_follows_the_add_ons_own_cases(stored, host, path, want):
    route = interceptor_route(stored, Request(host, path, {}))
    assert (route["metadata"]["name"] if route else None) == want
