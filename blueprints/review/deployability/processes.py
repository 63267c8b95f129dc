"""The process checks of `blueprint preview` (`blueprints.review.deployability.checks`): every container against how its
image's process really runs (`blueprints/catalog/processes.yaml`, per image and version).

- `probe-reachable`: no probe targets a port its process listens on at 127.0.0.1 only, by default or through its
  address option's value (SGLang's --host; the kubelet probes the pod IP: such a probe never passes, and a sidecar's
  startup probe then holds every later container for ever);
- `drain-before-sigterm`: every container of a served pod (a Service selects it) keeps serving until the requests it
  may still receive are done: a process that stops at once on SIGTERM sleeps in its preStop hook for the drain window
  (`blueprints.contracts.proxy.drain_window_s`), one that drains waits at least as long as a request may take, and
  the grace period covers both;
- `probe-kill-drain`: a liveness or startup probe that kills a container with a preStop hook does not wait out a
  long hook first (the kubelet runs preStop before a probe kill, for the probe's `terminationGracePeriodSeconds`, else
  the pod's): the wait is at most `defaults.EXIT_MARGIN_S` (`defaults.PROBE_KILL_GRACE_S` has the kubelet's source);
- `proxy-timeouts`: the authenticating proxy waits for a response as long as the plan's longest one (route timeout
  and stream-idle timeout) and drops an idle connection to the engine before the engine does (its keep-alive);
- `writable-paths`: a container with a read-only root filesystem writes only where a volume is mounted;
- `scratch-caches`: no cache an image fills on its own (hf_xet's chunk cache) lands on a size-limited volume.
A container whose image the catalog does not know is a finding: its behaviour cannot be proven.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from blueprints.catalog.processes import LOOPBACK, Listener, ProcessFacts, process_facts
from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.proxy import drain_window_s, proxy_config, request_timeout_s
from blueprints.core import defaults
from blueprints.review.preview import DeployabilityFinding, RegisteredResource
from blueprints.review.deployability.context import (
    CheckContext, containers_of, get_in, list_of, named, pod_spec,
)

PROBES = ("startupProbe", "readinessProbe", "livenessProbe")
SERVICE = "kubernetes:core/v1:Service"
DURATION = re.compile(r"^(\d+(?:\.\d+)?)s$")


def _flag(args: list[str], flag: str) -> str | None:
    """The value `args` give `flag` (`--flag=v` or `--flag v`), or None."""
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            return str(args[i + 1])
        if arg.startswith(f"{flag}="):
            return arg.split("=", 1)[1]
    return None


def _env(container: Mapping[str, Any]) -> dict[str, str]:
    return {e["name"]: str(e["value"]) for e in list_of(container.get("env")) if "value" in e}


def _resolve(path: str, env: Mapping[str, str]) -> str | None:
    """`$VAR/rest` with the container's environment; None when the variable is unset."""
    if not path.startswith("$"):
        return path
    var, _, rest = path[1:].partition("/")
    base = env.get(var)
    return None if base is None else f"{base.rstrip('/')}/{rest}".rstrip("/")


def _mounted(path: str, container: Mapping[str, Any]) -> str | None:
    """The volume mounted at or above `path`, or None."""
    best = None
    for mount in list_of(container.get("volumeMounts")):
        root = str(mount.get("mountPath", "")).rstrip("/") or "/"
        if (path == root or path.startswith(root + "/")) and (best is None or len(root) > len(best[0])):
            best = (root, mount.get("name"))
    return best[1] if best else None


def _loopback_listeners(container: Mapping[str, Any], facts: ProcessFacts) -> list[Listener]:
    """The listeners that bind 127.0.0.1 with this container's args (an address option moves them, e.g. --host)."""
    args = [str(a) for a in list_of(container.get("args"))]
    return [listener for listener in facts.listens if listener.address_given(
        _flag(args, listener.address_flag) if listener.address_flag else None) == LOOPBACK]


def _loopback_ports(container: Mapping[str, Any], facts: ProcessFacts) -> set[int]:
    ports = set()
    for listener in _loopback_listeners(container, facts):
        if listener.port is not None:
            value = _flag([str(a) for a in list_of(container.get("args"))], listener.flag)
            ports.add(int(value) if value and value.isdigit() else listener.port)
    return ports


def _probe_port(probe: Mapping[str, Any], container: Mapping[str, Any]) -> int | None:
    for kind in ("tcpSocket", "httpGet", "grpc"):
        port = get_in(probe, kind, "port")
        if isinstance(port, str):
            named_port = next((p for p in list_of(container.get("ports")) if p.get("name") == port), None)
            return int(named_port["containerPort"]) if named_port else None
        if port is not None:
            return int(port)
    return None


def _unknown(record: RegisteredResource, container: Mapping[str, Any]) -> DeployabilityFinding:
    return DeployabilityFinding("drain-before-sigterm", record.urn, (
        f"{named(record)}: container {container.get('name')!r} runs {container.get('image')}, whose process "
        "blueprints/catalog/processes.yaml does not describe (its listen addresses, SIGTERM behaviour, writable paths): "
        "its shutdown cannot be proven; add its row with sources"))


def _probe_findings(record: RegisteredResource, spec: Mapping[str, Any]) -> list[DeployabilityFinding]:
    findings = []
    for container in containers_of(spec):
        facts = process_facts(str(container.get("image", "")))
        if facts is None:
            continue
        loopback = _loopback_ports(container, facts)
        loopback_only = bool(facts.listens) and len(_loopback_listeners(container, facts)) == len(facts.listens)
        for kind in PROBES:
            probe = container.get(kind)
            if not isinstance(probe, Mapping) or "exec" in probe:
                continue
            port = _probe_port(probe, container)
            if loopback_only or port in loopback:
                findings.append(DeployabilityFinding("probe-reachable", record.urn, (
                    f"{named(record)}: container {container.get('name')!r}'s {kind} connects to port {port} on the "
                    f"pod IP, but {container.get('image')} listens on {LOOPBACK} only ({facts.source.split(';')[0]}): "
                    "the probe never passes (a sidecar's startup probe then holds every later container); drop it and "
                    "let the containers that use it wait for it")))
    return findings


def _served(ctx: CheckContext) -> list[RegisteredResource]:
    """Deployments a Service of the stack selects: their containers are in a request path."""
    selectors = [get_in(r.inputs, "spec", "selector") or {} for r in ctx.report.resources if r.type == SERVICE]
    served = []
    for r in ctx.report.resources:
        labels = get_in(r.inputs, "spec", "template", "metadata", "labels") or {}
        if r.type == "kubernetes:apps/v1:Deployment" and any(s and s.items() <= labels.items() for s in selectors):
            served.append(r)
    return served


def _drain_findings(record: RegisteredResource, spec: Mapping[str, Any], bp: Blueprint) -> list[DeployabilityFinding]:
    window, longest = drain_window_s(bp), request_timeout_s(bp)
    grace = int(spec.get("terminationGracePeriodSeconds", 30))
    findings = []
    for container in containers_of(spec, "containers"):
        facts = process_facts(str(container.get("image", "")))
        if facts is None:
            findings.append(_unknown(record, container))
            continue
        sleep = get_in(container, "lifecycle", "preStop", "sleep", "seconds")
        sleep = int(sleep) if sleep is not None else 0
        name = f"{named(record)}: container {container.get('name')!r} ({container.get('image')})"
        drain = 0
        if facts.sigterm == "drains":
            value = _flag([str(a) for a in list_of(container.get("args"))], str(facts.drain_flag))
            drain = int(value) if value and value.isdigit() else int(facts.drain_default_s or 0)
        # Up for the whole window in preStop, or up for the deregistration and then draining the longest request.
        drained = sleep >= window or (drain >= longest and sleep >= defaults.DEREGISTRATION_S)
        if not drained:
            how = (f"stops at once on SIGTERM ({facts.source.split(';')[0]})" if facts.sigterm == "aborts" else
                   f"drains on SIGTERM for {drain} s ({facts.drain_flag}), less than the longest request")
            findings.append(DeployabilityFinding("drain-before-sigterm", record.urn, (
                f"{name} {how} and sleeps {sleep} s in preStop: every rollout, scale-in and node expiry cuts its "
                f"in-flight requests while the load balancer may still route to it; sleep the drain window, "
                f"{window} s ({defaults.DEREGISTRATION_S} s of deregistration plus the longest request, {longest} s), "
                "in its preStop hook" + (f", or sleep {defaults.DEREGISTRATION_S} s and drain {longest} s"
                                         if facts.sigterm == "drains" else ""))))
        elif grace < sleep + (drain if sleep < window else 0):
            findings.append(DeployabilityFinding("drain-before-sigterm", record.urn, (
                f"{name}: terminationGracePeriodSeconds {grace} is below its preStop sleep and drain "
                f"({sleep + drain} s): the kubelet kills it first; raise the grace period")))
    return findings


#: The kubelet's pod-level default `terminationGracePeriodSeconds`, s (core/v1 PodSpec).
POD_GRACE_DEFAULT_S = 30


def _probe_kill_findings(record: RegisteredResource, spec: Mapping[str, Any]) -> list[DeployabilityFinding]:
    """How long a probe kill waits on each container's preStop hook before SIGTERM: the probe's grace period (the
    pod's when unset), or the hook's sleep if shorter (kubelet `killContainer`, `executePreStopHook`)."""
    pod_grace = int(spec.get("terminationGracePeriodSeconds", POD_GRACE_DEFAULT_S))
    findings = []
    for container in containers_of(spec, "containers"):
        hook = get_in(container, "lifecycle", "preStop")
        if not hook:
            continue
        sleep = get_in(hook, "sleep", "seconds")
        for probe in ("livenessProbe", "startupProbe"):
            if not container.get(probe):
                continue
            grace = get_in(container, probe, "terminationGracePeriodSeconds")
            wait = int(grace if grace is not None else pod_grace)
            wait = min(wait, int(sleep)) if sleep is not None else wait
            if wait > defaults.EXIT_MARGIN_S:
                findings.append(DeployabilityFinding("probe-kill-drain", record.urn, (
                    f"{named(record)}: container {container.get('name')!r}: a {probe} failure runs its preStop hook "
                    f"first and waits {wait} s before SIGTERM (the kubelet gives a probe kill "
                    + ("the pod's grace period" if grace is None else f"the probe's {grace} s") + "): a hung "
                    f"process restarts that late; set {probe}.terminationGracePeriodSeconds to "
                    f"{defaults.PROBE_KILL_GRACE_S} (deletion keeps the pod's grace period and its drain)")))
    return findings


def _seconds(value: Any, default: int) -> float:
    match = DURATION.match(str(value)) if value is not None else None
    return float(match.group(1)) if match else float(default)


def _proxy_findings(record: RegisteredResource, spec: Mapping[str, Any], bp: Blueprint) -> list[DeployabilityFinding]:
    """The proxy's timeouts (its bootstrap, `blueprints.contracts.proxy.proxy_config`) against the plan's longest
    request and the engine's keep-alive."""
    proxy = next((c for c in containers_of(spec, "containers") if "envoy" in str(c.get("image", ""))), None)
    facts = process_facts(str(proxy.get("image", ""))) if proxy else None
    if proxy is None or facts is None or facts.proxy_defaults is None:
        return []
    envoy = facts.proxy_defaults
    config = proxy_config(bp, "offline-check")
    longest = bp.network.load_balancer_idle_timeout_s
    findings = []
    for listener in get_in(config, "static_resources", "listeners") or []:
        for chain in list_of(listener.get("filter_chains")):
            for f in list_of(chain.get("filters")):
                manager = f.get("typed_config") or {}
                idle = _seconds(manager.get("stream_idle_timeout"), envoy.stream_idle_timeout_s)
                if 0 < idle < longest:
                    findings.append(DeployabilityFinding("proxy-timeouts", record.urn, (
                        f"{named(record)}: the proxy resets a stream quiet for {idle:g} s (stream_idle_timeout; "
                        f"Envoy's default {envoy.stream_idle_timeout_s} s), below the plan's longest response "
                        f"({longest} s): a long answer is cut; set it at least that long")))
                for host in get_in(manager, "route_config", "virtual_hosts") or []:
                    for route in list_of(host.get("routes")):
                        if "route" not in route:
                            continue
                        timeout = _seconds(get_in(route, "route", "timeout"), envoy.route_timeout_s)
                        if 0 < timeout < longest:
                            findings.append(DeployabilityFinding("proxy-timeouts", record.urn, (
                                f"{named(record)}: the proxy's route {route.get('match')} times out after {timeout:g} "
                                f"s, below the plan's longest response ({longest} s); raise its timeout")))
    engine = next((c for c in containers_of(spec, "containers") if c.get("image") == bp.engine.image), None)
    engine_facts = process_facts(bp.engine.image)
    if engine is None or engine_facts is None or engine_facts.keep_alive_s is None:
        return findings
    keep_alive = float(_env(engine).get(engine_facts.keep_alive_env or "", engine_facts.keep_alive_s))
    for cluster in get_in(config, "static_resources", "clusters") or []:
        options = (cluster.get("typed_extension_protocol_options") or {}).get(
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions") or {}
        idle = _seconds(get_in(options, "common_http_protocol_options", "idle_timeout"), envoy.upstream_idle_timeout_s)
        if idle == 0 or idle >= keep_alive:
            findings.append(DeployabilityFinding("proxy-timeouts", record.urn, (
                f"{named(record)}: the proxy keeps an idle connection to {cluster.get('name')} for "
                f"{'ever' if idle == 0 else f'{idle:g} s'} (Envoy's default {envoy.upstream_idle_timeout_s} s), but "
                f"{bp.engine.image} closes one after {keep_alive:g} s ({engine_facts.keep_alive_env}): a reused "
                "connection fails with 503; close idle upstream connections sooner than the engine does")))
    return findings


def _file_findings(record: RegisteredResource, spec: Mapping[str, Any]) -> list[DeployabilityFinding]:
    """Writable paths under a read-only root, and caches landing on size-limited volumes."""
    limited = {v.get("name") for v in list_of(spec.get("volumes")) if get_in(v, "emptyDir", "sizeLimit")}
    findings = []
    for container in containers_of(spec):
        facts = process_facts(str(container.get("image", "")))
        if facts is None:
            continue
        env = _env(container)
        if get_in(container, "securityContext", "readOnlyRootFilesystem"):
            for path in facts.writes:
                where = _resolve(path, env)
                if where is not None and _mounted(where, container) is None:
                    findings.append(DeployabilityFinding("writable-paths", record.urn, (
                        f"{named(record)}: container {container.get('name')!r} writes to {where} ({path}), but its "
                        "root filesystem is read-only and no volume is mounted there: it fails at its first write; "
                        "mount a writable volume there")))
        command = [str(c) for c in list_of(container.get("command"))]
        for cache in facts.caches:
            if not command or command[0].rsplit("/", 1)[-1] not in cache.commands:
                continue  # the process that fills it does not run here
            size = int(float(env.get(cache.env, cache.default_bytes)))
            where = _resolve(cache.path, env)
            volume = _mounted(where, container) if where else None
            if size > 0 and volume in limited:
                findings.append(DeployabilityFinding("scratch-caches", record.urn, (
                    f"{named(record)}: container {container.get('name')!r} fills a {size / 1e9:g} GB cache at {where} "
                    f"({cache.env} unset: the image's default) on volume {volume!r}, sized for what it was asked to "
                    f"write: the volume overflows and the pod is evicted; set {cache.env}=0 or give the cache its own "
                    "volume")))
    return findings


def check_processes(ctx: CheckContext) -> list[DeployabilityFinding]:
    findings = []
    bp = None if ctx.report.is_platform else ctx.report.blueprint
    served = {r.urn for r in _served(ctx)}
    for record in ctx.report.resources:
        spec = pod_spec(record)
        if spec is None or record.read:
            continue
        findings += _probe_findings(record, spec) + _probe_kill_findings(record, spec) + _file_findings(record, spec)
        if bp is not None and record.urn in served:
            findings += _drain_findings(record, spec, bp) + _proxy_findings(record, spec, bp)
    return findings
