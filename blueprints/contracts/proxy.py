"""The authenticating proxy's Envoy bootstrap, derived from one `Blueprint`: what the program writes into the proxy's
Secret (`components.access.ApiKey`) and what the offline checks judge (`blueprints.review.deployability.processes`).

vLLM's own key check guards only `/v1/*` and Triton has none, so the load balancer reaches Envoy in the same pod,
which passes the engine's client paths only with `Authorization: Bearer <key>` (the scheme in any case, as vLLM
accepts it: `api_key_matchers`), the health path without, and answers everything else itself (401 for a client path
without the key, 404 for any other path). Built as a typed dict of
Envoy's v3 API (envoyproxy/envoy api/envoy/config/bootstrap/v3, route/v3 `RouteMatch`/`HeaderMatcher`,
`DirectResponseAction`, HttpConnectionManager) and serialised to JSON.

Timeouts follow the request path (`blueprints/catalog/processes.yaml`, Envoy 1.37 defaults): each route waits as long
as the longest planned response (`request_timeout_s`; Envoy's default route timeout is 15 s), a stream may stay quiet
as long (`stream_idle_timeout`, default 300 s, would reset a long non-streamed answer), and an idle upstream
connection is closed before the engine closes it (`upstream_idle_timeout_s`; Envoy keeps one for 1 h by default while
vLLM closes it after 5 s, so a reused one fails with 503).
"""

from __future__ import annotations

from dataclasses import dataclass

from blueprints.catalog.processes import process_facts
from blueprints.core import defaults
from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.sections import OnnxRuntimeEngine, TritonEngine, VllmEngine

#: The field of the API-key Secret (`<service>-api-key`, `components.access.ApiKey`) holding the key clients send as
#: `Authorization: Bearer <key>`; the Secret's `envoy.json` (the proxy's config, mounted by the proxy) embeds the same.
API_KEY_FIELD = "api-key"
#: The Secret's field holding the proxy's Envoy config, mounted by the proxy as a file of that name.
PROXY_CONFIG_FIELD = "envoy.json"
#: Where the proxy reads the exposure's kubernetes.io/tls Secret when it terminates TLS itself (a NodePort or a
#: MetalLB LoadBalancer: no NLB or Ingress in front to do it).
PROXY_TLS_DIR = "/etc/envoy-tls"
#: The proxy's idle upstream connections are closed this long before the engine's keep-alive would close them, s.
KEEP_ALIVE_MARGIN_S = 1
#: Upstream idle timeout for an engine whose keep-alive the catalog does not know (Triton's), s: below every
#: keep-alive the catalog knows (vLLM's 5 s). [assumption]
UNKNOWN_KEEP_ALIVE_IDLE_S = 4


def request_timeout_s(bp: Blueprint) -> int:
    """How long one request may take end to end, s: the blueprint's longest expected response plus headroom, within
    the NLB's 60-6000 s idle timeout (the proxy's route and stream-idle timeouts, the NLB's TCP idle timeout)."""
    return min(defaults.NLB_TCP_IDLE_TIMEOUT_MAX_S,
               bp.network.load_balancer_idle_timeout_s + defaults.LB_IDLE_TIMEOUT_HEADROOM_S)


def drain_window_s(bp: Blueprint) -> int:
    """How long a terminating serving pod must keep its request path up, s: the deregistration of its endpoints and
    load-balancer targets (`defaults.DEREGISTRATION_S`), then the longest request one may still have started
    (`request_timeout_s`). Envoy and the pinned engines stop at once on SIGTERM (`processes.yaml`), so every container
    of the request path sleeps this long in its preStop hook before SIGTERM reaches it."""
    return defaults.DEREGISTRATION_S + request_timeout_s(bp)


def upstream_idle_timeout_s(bp: Blueprint) -> int:
    """How long the proxy keeps an idle connection to the engine, s: below the engine image's HTTP keep-alive
    (`processes.yaml`: vLLM closes idle connections after 5 s, `VLLM_HTTP_TIMEOUT_KEEP_ALIVE`), so it never reuses one
    the engine has closed."""
    facts = process_facts(bp.engine.image)
    if facts is None or facts.keep_alive_s is None:
        return UNKNOWN_KEEP_ALIVE_IDLE_S
    return max(1, facts.keep_alive_s - KEEP_ALIVE_MARGIN_S)


#: Triton's gRPC inference service (KServe v2 gRPC protocol, grpc_service.proto) and the methods clients need;
#: repository (load/unload), configuration, statistics, shared-memory, trace and log methods never pass.
TRITON_GRPC_SERVICE = "inference.GRPCInferenceService"
TRITON_GRPC_METHODS = ("ServerLive", "ServerReady", "ModelReady", "ServerMetadata", "ModelMetadata", "ModelInfer",
                       "ModelStreamInfer")
#: KServe v2 HTTP paths clients use: model metadata, readiness and inference (optionally of one version); RE2.
KSERVE_MODEL_PATHS = r"^/v2/models/[a-z0-9][-a-z0-9]*(/versions/[0-9]+)?(/ready|/infer)?$"
KSERVE_HEALTH_PATHS = ("/v2/health/ready", "/v2/health/live")
#: OpenAI-compatible paths of vLLM's server that clients use (v0.24.0: openai/chat_completion/api_router.py:41,
#: openai/completion/api_router.py:35, pooling/embed/api_router.py:26, openai/models/api_router.py:20; /health:
#: serve/instrumentator/health.py:22).
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


def serves_grpc(bp: Blueprint) -> bool:
    """Whether the proxy routes gRPC to the engine (Triton's GRPCInferenceService): its clients speak HTTP/2."""
    return isinstance(bp.engine, TritonEngine) and upstream(bp).grpc_port is not None


def service_app_protocol(bp: Blueprint, h2c: str | None) -> str | None:
    """The serving Service port's `appProtocol`: `h2c` (the KEDA HTTP add-on's value for HTTP/2 cleartext,
    `addons.yaml` `backend_h2c_app_protocol`) when the add-on's interceptor fronts the Service (scale to zero) and the
    proxy serves gRPC in cleartext: the interceptor speaks HTTP/1.1 to a cleartext backend otherwise, which gRPC
    refuses. Envoy's listener takes HTTP/1.1 and h2c alike (codec AUTO); a TLS proxy offers h2 by ALPN."""
    fronted = bp.wakes_on_request
    return h2c if fronted and serves_grpc(bp) and not bp.proxy_terminates_tls else None


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


def _cluster(name: str, port: int, *, http2: bool, idle_timeout_s: int) -> dict:
    """A loopback cluster to the engine (HTTP/1.1 or, for gRPC, HTTP/2) whose idle connections close after
    `idle_timeout_s`."""
    protocol = {"http2_protocol_options": {}} if http2 else {"http_protocol_options": {}}
    return {"name": name, "type": "STATIC", "connect_timeout": "2s",
            "load_assignment": {"cluster_name": name, "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {
                "socket_address": {"address": "127.0.0.1", "port_value": port}}}}]}]},
            "typed_extension_protocol_options": {"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                "common_http_protocol_options": {"idle_timeout": f"{idle_timeout_s}s"},
                "explicit_http_config": protocol}}}


#: The `Authorization` value's shape vLLM accepts (v0.24.0 vllm/entrypoints/serve/utils/server_utils.py:60-74
#: `verify_token`: `scheme, _, param = value.partition(" ")`, `scheme.lower() != "bearer"` refuses, then `param` must
#: equal a key): the scheme in any case, one space, then the token. RE2, matched against the whole value (Envoy
#: api/envoy/type/matcher/v3/string.proto `safe_regex`; `ignore_case` has no effect on it); a fixed pattern: its RE2
#: program size is 22 (google-re2 1.1 `programsize`), under Envoy's default `re2.max_program_size.error_level` of 100
#: (api/envoy/type/matcher/v3/regex.proto `GoogleRE2`), whatever the key's length.
BEARER_CREDENTIALS = r"(?i:bearer) \S+"


def api_key_matchers(api_key: str) -> list[dict]:
    """Envoy `HeaderMatcher`s (all must match) that admit `Authorization: <scheme> <api_key>` exactly as vLLM does:
    `Bearer`, `bearer`, `BEARER`..., one space, the key (case-sensitive). The value is the bearer shape
    (`BEARER_CREDENTIALS`: no whitespace after the one space) and ends in a space and the key; a key holds no
    whitespace (`components.access.checked_api_key`), so the token is exactly the key. The key stays a literal
    (a suffix), never part of a regex."""
    return [{"name": "authorization", "string_match": {"safe_regex": {"regex": BEARER_CREDENTIALS}}},
            {"name": "authorization", "string_match": {"suffix": f" {api_key}"}}]


def proxy_routes(bp: Blueprint, api_key: str) -> list[dict]:
    """Envoy routes, first match wins: health (open), the client API with the key, the client API without it (401),
    anything else (404). Triton's authenticated requests carry its restricted-API header."""
    open_paths, keyed_paths = _path_matchers(bp)
    grpc_paths = _grpc_matchers(bp)
    key_headers = api_key_matchers(api_key)
    timeout = f"{request_timeout_s(bp)}s"  # the longest planned response; Envoy's default route timeout is 15 s
    triton = isinstance(bp.engine, TritonEngine) or isinstance(bp.engine, OnnxRuntimeEngine)

    def forward(cluster: str, restricted_header: str | None) -> dict:
        route: dict = {"route": {"cluster": cluster, "timeout": timeout}}
        if triton and restricted_header:
            route["request_headers_to_add"] = [{"header": {"key": restricted_header, "value": api_key},
                                                "append_action": "OVERWRITE_IF_EXISTS_OR_ADD"}]
        return route

    header = defaults.TRITON_RESTRICTED_HEADER
    routes = [{"match": m, **forward("engine", None)} for m in open_paths]
    routes += [{"match": {**m, "headers": key_headers}, **forward("engine", header)} for m in keyed_paths]
    routes += [{"match": {**m, "headers": key_headers}, **forward("engine-grpc", f"triton-grpc-protocol-{header}")}
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
    interface, access log to stdout, the engine as loopback clusters; timeouts as the module docstring says."""
    ports = upstream(bp)
    manager = {
        "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3."
                 "HttpConnectionManager",
        "stat_prefix": "api", "codec_type": "AUTO", "normalize_path": True, "merge_slashes": True,
        "stream_idle_timeout": f"{request_timeout_s(bp)}s",
        "path_with_escaped_slashes_action": "REJECT_REQUEST",
        "access_log": [{"name": "envoy.access_loggers.stdout", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog"}}],
        "route_config": {"name": "api", "virtual_hosts": [{"name": "api", "domains": ["*"],
                                                           "routes": proxy_routes(bp, api_key)}]},
        "http_filters": [{"name": "envoy.filters.http.router", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}],
    }
    idle = upstream_idle_timeout_s(bp)
    clusters = [_cluster("engine", ports.http_port, http2=False, idle_timeout_s=idle)]
    if ports.grpc_port is not None and isinstance(bp.engine, TritonEngine):
        clusters.append(_cluster("engine-grpc", ports.grpc_port, http2=True, idle_timeout_s=idle))
    chain: dict = {"filters": [{"name": "envoy.filters.network.http_connection_manager", "typed_config": manager}]}
    if bp.proxy_terminates_tls:
        chain["transport_socket"] = downstream_tls()
    return {"static_resources": {
        "listeners": [{"name": "api", "address": {"socket_address": {"address": "0.0.0.0",
                                                                      "port_value": defaults.PROXY_PORT}},
                       "filter_chains": [chain]}],
        "clusters": clusters}}
