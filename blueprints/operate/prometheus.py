"""The platform's Prometheus, read through its HTTP API (prometheus.io/docs/prometheus/latest/querying/api/):
`GET /api/v1/query` (instant queries), `/api/v1/rules?type=alert` (loaded alerting rules) and `/api/v1/alerts`.

How `verify` reaches the in-cluster Service: the Kubernetes API server's service proxy
(`/api/v1/namespaces/<ns>/services/<scheme>:<name>:<port>/proxy/<path>`), with the same kubeconfig and TLS as every
other Kubernetes call. No local port, no child process to start and stop, and it works wherever the API server is
reachable (a private cluster's runner included); a port-forward would need a local listener and a stream kept open
for the whole run. It needs RBAC `get` on `services/proxy` in the monitoring namespace (cluster admins have it).
`--prometheus-url` takes a Prometheus reachable directly instead (a port-forward you run, a test's local server).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, Callable

from blueprints.core.errors import DeployedStackError
from blueprints.core.yamlio import load_json

#: Seconds one Prometheus request may take.
REQUEST_TIMEOUT_S = 20
#: Largest response read, bytes (a rules listing of a whole cluster is a few MB).
MAX_RESPONSE_BYTES = 32 * 1024 * 1024

#: `get(path, params) -> body`: one GET of the Prometheus HTTP API; raises `PrometheusUnavailable`.
Transport = Callable[[str, list[tuple[str, str]]], bytes]


class PrometheusUnavailable(Exception):
    """Prometheus did not answer, or answered with an error (the message says which)."""


@dataclass(frozen=True)
class Sample:
    """One series of an instant vector: its labels and value."""

    labels: dict[str, str]
    value: float


class PrometheusApi:
    """The three reads `verify` makes. Every call raises `PrometheusUnavailable` on a transport or API error."""

    def __init__(self, transport: Transport, *, where: str) -> None:
        self._get = transport
        self.where = where

    def _data(self, path: str, params: list[tuple[str, str]]) -> Any:
        body = self._get(path, params)
        try:
            reply = load_json(body if isinstance(body, str) else body.decode("utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise PrometheusUnavailable(f"{self.where}{path}: not a Prometheus API reply ({body[:80]!r})") from None
        if not isinstance(reply, dict) or reply.get("status") != "success":
            error = reply.get("error") if isinstance(reply, dict) else None
            raise PrometheusUnavailable(f"{self.where}{path}: {error or 'not a Prometheus API reply'}")
        return reply.get("data")

    def query(self, expr: str) -> list[Sample]:
        """An instant query at the server's now; the samples of a vector, or of a scalar as one unlabelled sample."""
        data = self._data("/api/v1/query", [("query", expr)])
        kind, result = data.get("resultType"), data.get("result")
        if kind == "vector":
            return [Sample(labels=dict(s.get("metric", {})), value=float(s["value"][1])) for s in result]
        if kind == "scalar":
            return [Sample(labels={}, value=float(result[1]))]
        raise PrometheusUnavailable(f"{self.where}: query returned a {kind}, not an instant vector: {expr}")

    def alerting_rules(self) -> dict[str, list[dict[str, Any]]]:
        """Loaded rule group name -> its alerting rules (`name`, `query`, `state`, `health`, `lastError`)."""
        data = self._data("/api/v1/rules", [("type", "alert")])
        return {g["name"]: list(g.get("rules", [])) for g in data.get("groups", [])}

    def alerts(self) -> list[dict[str, Any]]:
        """Active alerts (`labels`, `state`: pending or firing)."""
        return list(self._data("/api/v1/alerts", []).get("alerts", []))


def http_transport(base_url: str) -> Transport:
    """GETs to a Prometheus reachable at `base_url` (e.g. `http://127.0.0.1:9090`)."""
    base = base_url.rstrip("/")

    def get(path: str, params: list[tuple[str, str]]) -> bytes:
        url = f"{base}{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
        try:
            with urllib.request.urlopen(url, timeout=REQUEST_TIMEOUT_S) as reply:  # noqa: S310 (an operator's URL)
                return reply.read(MAX_RESPONSE_BYTES)
        except urllib.error.HTTPError as exc:
            return exc.read(MAX_RESPONSE_BYTES)  # the API's error body names the problem
        except (urllib.error.URLError, OSError) as exc:
            raise PrometheusUnavailable(f"{base}: {getattr(exc, 'reason', exc)}") from None

    return get


def service_from_url(url: str) -> tuple[str, str, int, str]:
    """(namespace, service, port, scheme) of an in-cluster Service URL such as
    `http://kube-prometheus-stack-prometheus.monitoring.svc:9090` (what KEDA's trigger queries)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    labels = host.split(".")
    if len(labels) < 2 or (len(labels) > 2 and labels[2] != "svc"):
        raise ValueError(f"{url!r} is not an in-cluster Service URL (<service>.<namespace>.svc:<port>)")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return labels[1], labels[0], port, parts.scheme or "http"


def service_proxy_transport(api_client: Any, url: str) -> Transport:
    """GETs to an in-cluster Service through the Kubernetes API server's service proxy (`api_client`: a
    `kubernetes.client.ApiClient`), for the Service at `url`."""
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError as Urllib3Error

    namespace, service, port, scheme = service_from_url(url)
    prefix = f"/api/v1/namespaces/{namespace}/services/{scheme}:{service}:{port}/proxy"

    def get(path: str, params: list[tuple[str, str]]) -> bytes:
        try:
            reply = api_client.call_api(f"{prefix}{path}", "GET", {}, params, {"Accept": "application/json"},
                                        auth_settings=["BearerToken"], _return_http_data_only=True,
                                        _preload_content=False, _request_timeout=REQUEST_TIMEOUT_S)
            return reply.data[:MAX_RESPONSE_BYTES]
        except ApiException as exc:
            if exc.status in (401, 403):
                raise DeployedStackError(f"the Kubernetes API refused the service proxy to {service}.{namespace} "
                                         f"({exc.status} {exc.reason}): verify needs `get` on services/proxy in "
                                         f"{namespace}, or --prometheus-url (e.g. `kubectl -n {namespace} "
                                         f"port-forward svc/{service} 9090:{port}`)") from None
            if exc.body:
                return exc.body if isinstance(exc.body, bytes) else str(exc.body).encode()
            raise PrometheusUnavailable(f"{service}.{namespace} via the API server: {exc.status} {exc.reason}") \
                from None
        except (OSError, Urllib3Error) as exc:
            raise PrometheusUnavailable(f"{service}.{namespace} via the API server: {exc}") from None

    return get
