"""Where a client's request goes, hop by hop, as the real proxies route it: the KEDA HTTP add-on's interceptor (a
service that scales to zero), the Ingress or the Service in front of the pods, and the pods' Envoy.

- Envoy: the bootstrap is first parsed strictly as Envoy's v3 `Bootstrap` by xds-protos (Envoy's data-plane-api as
  Python protobufs, in the tools virtualenv: `tests/test_proxy_config.py`) and printed back in canonical form, so a
  field Envoy does not have fails here; then the route table is walked as Envoy's router does (envoyproxy/envoy
  api/envoy/config/route/v3/route_components.proto `RouteMatch`, `HeaderMatcher`; api/envoy/type/matcher/v3/
  string.proto `StringMatcher`): first matching route wins; `path` is exact, `prefix` a string prefix,
  `path_separated_prefix` the prefix alone or followed by `/`, `safe_regex` must match the whole path (without the
  query); every header matcher must match; `ignore_case` applies to exact/prefix/suffix/contains and not to
  `safe_regex`. A match field this module does not know fails the test instead of being skipped. The regexes are
  evaluated with Python's `re`, on patterns in the RE2 subset both engines read alike (no backreferences or
  look-arounds, which RE2 refuses).
- KEDA HTTP add-on v0.15.0 (kedacore/http-add-on pkg/routing/table.go L187-200 `Route`: the Host header without its
  port; key.go L27-40 `NewKey` `<host>/<path trimmed of />/`, L70-98 `newKeysFromRoutingRule`: no hosts -> catch-all
  `*`, no paths -> the root; tablememory.go L59-82: the longest key prefix for the exact host, then the wildcard
  hosts from the most specific, then the catch-all; interceptor/handler/upstream.go L113-116 and
  middleware/routing.go L118-133: it forwards the path unchanged, Host kept, to `<service>.<namespace>:<port>`).
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass

from tests.test_proxy_config import tools_python

CANONICAL = """
import json, sys
from google.protobuf import json_format
from envoy.config.bootstrap.v3 import bootstrap_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import http_connection_manager_pb2
from envoy.extensions.filters.http.router.v3 import router_pb2  # noqa: F401
from envoy.extensions.access_loggers.stream.v3 import stream_pb2  # noqa: F401
from envoy.extensions.upstreams.http.v3 import http_protocol_options_pb2  # noqa: F401
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2  # noqa: F401
out = {}
for name, config in json.load(sys.stdin).items():
    bootstrap = json_format.ParseDict(config, bootstrap_pb2.Bootstrap())  # raises on an unknown field or enum value
    manager = http_connection_manager_pb2.HttpConnectionManager()
    bootstrap.static_resources.listeners[0].filter_chains[0].filters[0].typed_config.Unpack(manager)
    out[name] = json_format.MessageToDict(manager, preserving_proto_field_name=True)
print(json.dumps(out))
"""


def envoy_managers(bootstraps: dict[str, dict]) -> dict[str, dict]:
    """Each bootstrap's HTTP connection manager (its route table), parsed by Envoy's own protobufs and printed back
    in canonical form (proto field names)."""
    result = subprocess.run([str(tools_python()), "-c", CANONICAL], input=json.dumps(bootstraps),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@dataclass(frozen=True)
class Request:
    """One HTTP request as a hop sees it: the Host header, the path (with its query) and the headers (names lower
    case)."""

    host: str
    path: str
    headers: dict[str, str]


def envoy_path(manager: dict, path: str) -> str:
    """The path Envoy routes on: the query removed, `merge_slashes` and `normalize_path` (RFC 3986 dot segments)
    applied when the manager sets them."""
    path = path.split("?", 1)[0]
    if manager.get("merge_slashes"):
        path = re.sub(r"/{2,}", "/", path)
    if manager.get("normalize_path"):
        out: list[str] = []
        for segment in path.split("/")[1:]:
            if segment == "..":
                out = out[:-1]
            elif segment != ".":
                out.append(segment)
        path = "/" + "/".join(out)
    return path


def _string_match(matcher: dict, value: str) -> bool:
    known = {"exact", "prefix", "suffix", "contains", "safe_regex", "ignore_case"}
    assert set(matcher) <= known, f"StringMatcher fields not modelled: {set(matcher) - known}"
    fold = (lambda s: s.lower()) if matcher.get("ignore_case") else (lambda s: s)
    if "exact" in matcher:
        return fold(value) == fold(matcher["exact"])
    if "prefix" in matcher:
        return fold(value).startswith(fold(matcher["prefix"]))
    if "suffix" in matcher:
        return fold(value).endswith(fold(matcher["suffix"]))
    if "contains" in matcher:
        return fold(matcher["contains"]) in fold(value)
    return re.fullmatch(matcher["safe_regex"]["regex"], value) is not None  # ignore_case does not apply


def _header_match(matcher: dict, headers: dict[str, str]) -> bool:
    known = {"name", "string_match", "present_match", "invert_match"}
    assert set(matcher) <= known, f"HeaderMatcher fields not modelled: {set(matcher) - known}"
    value = headers.get(matcher["name"].lower())
    if "present_match" in matcher:
        found = (value is not None) == matcher["present_match"]
    else:
        found = value is not None and _string_match(matcher["string_match"], value)
    return found != bool(matcher.get("invert_match"))


def _route_match(match: dict, path: str, headers: dict[str, str]) -> bool:
    known = {"path", "prefix", "path_separated_prefix", "safe_regex", "headers", "grpc"}
    assert set(match) <= known, f"RouteMatch fields not modelled: {set(match) - known}"
    if "path" in match:
        hit = path == match["path"]
    elif "prefix" in match:
        hit = path.startswith(match["prefix"])
    elif "path_separated_prefix" in match:
        prefix = match["path_separated_prefix"]
        hit = path == prefix or path.startswith(prefix + "/")
    else:
        hit = re.fullmatch(match["safe_regex"]["regex"], path) is not None
    if "grpc" in match:
        hit = hit and headers.get("content-type", "").startswith("application/grpc")
    return hit and all(_header_match(h, headers) for h in match.get("headers", []))


def envoy_route(manager: dict, request: Request) -> dict | None:
    """The route Envoy picks for `request` in the manager's route table (first match of the virtual host whose
    domains take the Host header), or None."""
    hosts = manager["route_config"]["virtual_hosts"]
    assert all(vh["domains"] == ["*"] for vh in hosts), "only catch-all virtual hosts are modelled"
    path = envoy_path(manager, request.path)
    return next((route for route in hosts[0]["routes"] if _route_match(route["match"], path, request.headers)),
                None)


def strip_port(host: str) -> str:
    """Host without its port (Go's net.SplitHostPort, as the interceptor's `stripPort`)."""
    head, sep, tail = host.rpartition(":")
    return head if sep and tail.isdigit() and "]" not in tail else host


def _interceptor_key(host: str, path: str) -> str:
    path = path.strip("/")
    return f"{host}/{path}/" if path else f"{host}/"


def interceptor_route(routes: list[dict], request: Request) -> dict | None:
    """The InterceptorRoute (manifest) the KEDA HTTP add-on's interceptor picks for `request`, or None (it answers
    404 itself)."""
    table: dict[str, dict] = {}
    for route in routes:
        for rule in route["spec"]["rules"]:
            assert not rule.get("headers"), "header rules are not modelled"
            for host in rule.get("hosts") or ["*"]:
                host = strip_port(host) or "*"
                for path in rule.get("paths") or [{"value": ""}]:
                    table.setdefault(_interceptor_key(host, path["value"]), route)
    hostname = strip_port(request.host)
    path = request.path.split("?", 1)[0]
    labels = hostname.split(".")
    candidates = [hostname, *("*." + ".".join(labels[i:]) for i in range(1, len(labels))), "*"]
    for host in candidates:
        key = _interceptor_key(host, path)
        matches = [k for k in table if key.startswith(k)]
        if matches:
            return table[max(matches, key=len)]
    return None
