"""Who may call a self-hosted endpoint: the per-stack API key and the authenticating proxy in front of the engine.

vLLM's own key check guards only `/v1/*` (its `/invocations`, `/metrics`, `/tokenize`, `/pooling`, `/score` and
`/rerank` stay open on the same port), and Triton has no key check at all, so the load balancer never reaches an
engine: it reaches Envoy in the same pod, which passes the engine's client paths only with `Authorization: Bearer
<key>`, the health path without, and answers everything else itself (401 for a client path without the key, 404 for
any other path). The engine port is then reachable only from inside the pod and from the monitoring namespace
(`components.network_policy`).

The key is a Pulumi secret: `servingblueprints:apiKey` when set, else a pulumi-random password. It lives in one
Kubernetes Secret (`<service>-api-key`: `api-key`, and the proxy's configuration `envoy.json`, which embeds it:
Envoy's route header matchers take literal values) and is exported only as the secret stack output `api_key`.

Envoy's configuration is built as a typed dict of its v3 API (envoyproxy/envoy api/envoy/config/bootstrap/v3,
route/v3 `RouteMatch`/`HeaderMatcher`, `DirectResponseAction`, HttpConnectionManager) and serialised to JSON.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random

from blueprints.core import defaults
from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.sections import OnnxRuntimeEngine, TritonEngine, VllmEngine
from components.exposure import idle_timeout_s

API_KEY_FIELD = "api-key"
PROXY_CONFIG_FIELD = "envoy.json"
PROXY_CONFIG_DIR = "/etc/envoy"
#: Where the proxy reads the exposure's kubernetes.io/tls Secret when it terminates TLS itself (a NodePort or a
#: MetalLB LoadBalancer: no NLB or Ingress in front to do it).
PROXY_TLS_DIR = "/etc/envoy-tls"
PROXY_PORT_NAME = "api"
#: Triton's gRPC inference service (KServe v2 gRPC protocol, grpc_service.proto) and the methods clients need;
#: repository (load/unload), configuration, statistics, shared-memory, trace and log methods never pass.
TRITON_GRPC_SERVICE = "inference.GRPCInferenceService"
TRITON_GRPC_METHODS = ("ServerLive", "ServerReady", "ModelReady", "ServerMetadata", "ModelMetadata", "ModelInfer",
                       "ModelStreamInfer")
#: KServe v2 HTTP paths clients use: model metadata, readiness and inference (optionally of one version); RE2.
KSERVE_MODEL_PATHS = r"^/v2/models/[a-z0-9][-a-z0-9]*(/versions/[0-9]+)?(/ready|/infer)?$"
KSERVE_HEALTH_PATHS = ("/v2/health/ready", "/v2/health/live")
#: OpenAI-compatible paths of vLLM's server (vllm/entrypoints/openai/api_server.py, v0.11.0) that clients use.
OPENAI_PATHS = ("/v1/chat/completions", "/v1/completions", "/v1/embeddings")
OPENAI_PREFIXES = ("/v1/models",)
VLLM_HEALTH_PATH = "/health"


@dataclass(frozen=True)
class Upstream:
    """Where the proxy sends authenticated requests: the engine's HTTP port, and its gRPC port (Triton) or None."""

    http_port: int
    grpc_port: int | None = None


def upstream(bp: Blueprint) -> Upstream:
    """The engine ports behind the proxy (loopback: the engine shares the pod's network namespace)."""
    engine = bp.engine
    if isinstance(engine, VllmEngine):
        return Upstream(http_port=engine.port)
    if isinstance(engine, TritonEngine):
        return Upstream(http_port=engine.http_port, grpc_port=engine.grpc_port)
    if isinstance(engine, OnnxRuntimeEngine):
        return Upstream(http_port=engine.port)
    raise ValueError(f"archetype {bp.archetype.value} has no authenticating proxy (SageMaker is IAM-authorised)")


def _path_matchers(bp: Blueprint) -> tuple[list[dict], list[dict]]:
    """(open matchers: health; keyed matchers: the client API) as Envoy `RouteMatch` path specifiers."""
    if isinstance(bp.engine, VllmEngine):
        return ([{"path": VLLM_HEALTH_PATH}],
                [*({"path": p} for p in OPENAI_PATHS), *({"path_separated_prefix": p} for p in OPENAI_PREFIXES)])
    keyed = [{"safe_regex": {"regex": KSERVE_MODEL_PATHS}}]
    return [{"path": p} for p in KSERVE_HEALTH_PATHS], keyed


def _grpc_matchers(bp: Blueprint) -> list[dict]:
    if not isinstance(bp.engine, TritonEngine):
        return []
    return [{"path": f"/{TRITON_GRPC_SERVICE}/{method}", "grpc": {}} for method in TRITON_GRPC_METHODS]


def _cluster(name: str, port: int, *, http2: bool) -> dict:
    cluster = {"name": name, "type": "STATIC", "connect_timeout": "2s",
               "load_assignment": {"cluster_name": name, "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {
                   "socket_address": {"address": "127.0.0.1", "port_value": port}}}}]}]}}
    if http2:
        cluster["typed_extension_protocol_options"] = {"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
            "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
            "explicit_http_config": {"http2_protocol_options": {}}}}
    return cluster


def proxy_routes(bp: Blueprint, api_key: str) -> list[dict]:
    """Envoy routes, first match wins: health (open), the client API with the key, the client API without it (401),
    anything else (404). Triton's authenticated requests carry its restricted-API header."""
    open_paths, keyed_paths = _path_matchers(bp)
    grpc_paths = _grpc_matchers(bp)
    key_header = {"name": "authorization", "string_match": {"exact": f"Bearer {api_key}"}}
    timeout = f"{idle_timeout_s(bp)}s"  # the longest streamed response; Envoy's default route timeout is 15 s
    triton = isinstance(bp.engine, TritonEngine) or isinstance(bp.engine, OnnxRuntimeEngine)

    def forward(cluster: str, restricted_header: str | None) -> dict:
        route: dict = {"route": {"cluster": cluster, "timeout": timeout}}
        if triton and restricted_header:
            route["request_headers_to_add"] = [{"header": {"key": restricted_header, "value": api_key},
                                                "append_action": "OVERWRITE_IF_EXISTS_OR_ADD"}]
        return route

    header = defaults.TRITON_RESTRICTED_HEADER
    routes = [{"match": m, **forward("engine", None)} for m in open_paths]
    routes += [{"match": {**m, "headers": [key_header]}, **forward("engine", header)} for m in keyed_paths]
    routes += [{"match": {**m, "headers": [key_header]}, **forward("engine-grpc", f"triton-grpc-protocol-{header}")}
               for m in grpc_paths]
    unauthorized = {"direct_response": {"status": 401, "body": {"inline_string": "missing or invalid API key\n"}},
                    "response_headers_to_add": [{"header": {"key": "www-authenticate", "value": "Bearer"}}]}
    routes += [{"match": m, **unauthorized} for m in [*keyed_paths, *grpc_paths]]
    routes.append({"match": {"prefix": "/"},
                   "direct_response": {"status": 404, "body": {"inline_string": "not found\n"}}})
    return routes


def downstream_tls() -> dict:
    """The listener's TLS (Envoy v3 `DownstreamTlsContext`, transport socket `envoy.transport_sockets.tls`): TLS 1.2
    or newer, the certificate and key of the mounted kubernetes.io/tls Secret (`tls.crt`, `tls.key`), HTTP/2 and
    HTTP/1.1 by ALPN. Envoy reads the files at start: a renewed certificate takes a rollout."""
    return {"name": "envoy.transport_sockets.tls", "typed_config": {
        "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext",
        "common_tls_context": {
            "tls_params": {"tls_minimum_protocol_version": "TLSv1_2"},
            "tls_certificates": [{"certificate_chain": {"filename": f"{PROXY_TLS_DIR}/tls.crt"},
                                  "private_key": {"filename": f"{PROXY_TLS_DIR}/tls.key"}}],
            "alpn_protocols": ["h2", "http/1.1"]}}}


def proxy_config(bp: Blueprint, api_key: str) -> dict:
    """Envoy's bootstrap: one listener on `defaults.PROXY_PORT` (HTTP/1.1 and h2c; TLS when the proxy terminates it,
    `Blueprint.proxy_terminates_tls`), normalised paths (no `..` or `//` tricks past the route table), no admin
    interface, access log to stdout, the engine as loopback clusters."""
    ports = upstream(bp)
    manager = {
        "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3."
                 "HttpConnectionManager",
        "stat_prefix": "api", "codec_type": "AUTO", "normalize_path": True, "merge_slashes": True,
        "path_with_escaped_slashes_action": "REJECT_REQUEST",
        "access_log": [{"name": "envoy.access_loggers.stdout", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog"}}],
        "route_config": {"name": "api", "virtual_hosts": [{"name": "api", "domains": ["*"],
                                                           "routes": proxy_routes(bp, api_key)}]},
        "http_filters": [{"name": "envoy.filters.http.router", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}],
    }
    clusters = [_cluster("engine", ports.http_port, http2=False)]
    if ports.grpc_port is not None and isinstance(bp.engine, TritonEngine):
        clusters.append(_cluster("engine-grpc", ports.grpc_port, http2=True))
    chain: dict = {"filters": [{"name": "envoy.filters.network.http_connection_manager", "typed_config": manager}]}
    if bp.proxy_terminates_tls:
        chain["transport_socket"] = downstream_tls()
    return {"static_resources": {
        "listeners": [{"name": "api", "address": {"socket_address": {"address": "0.0.0.0",
                                                                      "port_value": defaults.PROXY_PORT}},
                       "filter_chains": [chain]}],
        "clusters": clusters}}


def proxy_container(secret_name: pulumi.Input[str], *, pod_start_s: int,
                    tls_secret: str | None = None) -> tuple[dict, list[dict]]:
    """(the proxy container, its volumes): Envoy reading `envoy.json` from the API-key Secret (and, with
    `tls_secret`, the kubernetes.io/tls Secret it serves TLS with at `PROXY_TLS_DIR`). Its UID and the rest of its
    hardening come from `components.hardening`. Its startup probe allows the pod's whole start budget
    (`pod_start_s`, the engine's download and load), like every container of a serving pod."""
    resources = dict(defaults.PROXY_RESOURCES)
    container = {
        "name": "auth-proxy",
        "image": defaults.ENVOY_IMAGE,
        "command": ["/usr/local/bin/envoy"],
        "args": ["--config-path", f"{PROXY_CONFIG_DIR}/{PROXY_CONFIG_FIELD}", "--disable-hot-restart",
                 "--log-level", "warn"],
        "ports": [{"name": PROXY_PORT_NAME, "containerPort": defaults.PROXY_PORT, "protocol": "TCP"}],
        "resources": {"requests": resources, "limits": resources},
        "startupProbe": {"tcpSocket": {"port": PROXY_PORT_NAME}, "periodSeconds": 10,
                         "failureThreshold": max(3, math.ceil(pod_start_s / 10))},
        "readinessProbe": {"tcpSocket": {"port": PROXY_PORT_NAME}, "periodSeconds": 5},
        "livenessProbe": {"tcpSocket": {"port": PROXY_PORT_NAME}, "periodSeconds": 15, "failureThreshold": 4},
        "volumeMounts": [{"name": "proxy-config", "mountPath": PROXY_CONFIG_DIR, "readOnly": True}],
    }
    volumes = [{"name": "proxy-config", "secret": {"secretName": secret_name, "defaultMode": 0o440,
                                                   "items": [{"key": PROXY_CONFIG_FIELD, "path": PROXY_CONFIG_FIELD}]}}]
    if tls_secret is not None:
        container["volumeMounts"].append({"name": "proxy-tls", "mountPath": PROXY_TLS_DIR, "readOnly": True})
        volumes.append({"name": "proxy-tls", "secret": {"secretName": tls_secret, "defaultMode": 0o440,
                                                        "items": [{"key": "tls.crt", "path": "tls.crt"},
                                                                  {"key": "tls.key", "path": "tls.key"}]}})
    return container, volumes


def api_key_env(secret_name: pulumi.Input[str], env_name: str = "API_KEY") -> dict:
    """An environment variable holding the key, from the Secret (for an engine that checks it itself: Triton)."""
    return {"name": env_name, "valueFrom": {"secretKeyRef": {"name": secret_name, "key": API_KEY_FIELD}}}


@dataclass
class ApiKeyArgs:
    """Inputs of `ApiKey`.

    Args:
        blueprint: a self-hosted blueprint (vLLM, Triton or ONNX Runtime).
        namespace: the service's namespace.
        value: the key (a Pulumi secret, `servingblueprints:apiKey`). Defaults to a generated one.
    """

    blueprint: Blueprint
    namespace: pulumi.Input[str]
    value: pulumi.Input[str] | None = None


class ApiKey(pulumi.ComponentResource):
    """The stack's API key (given, or a pulumi-random password) and the Secret holding it with the proxy's config.

    Outputs: `secret_name`, `api_key` (secret).
    """

    def __init__(self, name: str, args: ApiKeyArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("servingblueprints:index:ApiKey", name, None, opts)
        bp = args.blueprint
        child = pulumi.ResourceOptions(parent=self)
        self.generated = None
        if args.value is None:
            self.generated = random.RandomPassword(f"{name}-value", length=defaults.API_KEY_LENGTH, special=False,
                                                   opts=child)
            key = self.generated.result
        else:
            key = args.value
        self.api_key = pulumi.Output.secret(key)
        config = self.api_key.apply(lambda k: json.dumps(proxy_config(bp, k), sort_keys=True))
        from components.labels import recommended_labels

        self.secret = k8s.core.v1.Secret(
            f"{name}-secret",
            metadata={"name": f"{bp.service}-api-key", "namespace": args.namespace,
                      "labels": recommended_labels(name="auth-proxy", instance=bp.stack, component="api-key")},
            type="Opaque", string_data={API_KEY_FIELD: self.api_key, PROXY_CONFIG_FIELD: pulumi.Output.secret(config)},
            opts=child)
        self.secret_name = self.secret.metadata.name
        self.register_outputs({"secret_name": self.secret_name, "api_key": self.api_key})
