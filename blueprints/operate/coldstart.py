"""A serving pod's measured cold start, part by part in the startup model's terms (`StartupBudget`), for the
benchmark result file (`ColdStartRecord`), which `blueprint calibrate` turns into the startup model's correction.

Sources (Kubernetes core/v1 field names as the API serves them; vLLM 0.24.0 log lines checked in the PyPI sdist):
- the Pod: `metadata.creationTimestamp`, `spec.nodeName`, `status.conditions[]` (`type` `PodScheduled` / `Ready`,
  `status`, `lastTransitionTime`), `status.containerStatuses[]` (`name`, `restartCount`, `state.running.startedAt`),
  `status.initContainerStatuses[]` (`state.terminated.startedAt` / `finishedAt`);
- the Node: `metadata.creationTimestamp` (after the pod's: Karpenter launched it for the pod);
- the pod's Events: `reason` `Pulled`, `involvedObject.fieldPath` `spec.containers{<name>}`, the kubelet's message
  `Successfully pulled image "<image>" in <go duration> (<go duration> including waiting). Image size: <n> bytes.`
  (kubernetes pkg/kubelet/images/image_manager.go); an image already present says "already present on machine";
- the engine container's log from its start: `Model loading took <GiB> GiB memory and <s> seconds`
  (vllm/v1/worker/gpu_model_runner.py:5256; `... GiB and <s> seconds` in vllm/v1/worker/gpu/model_runner.py:303),
  and `init engine (profile, create kv cache, warmup model) took <s> s` (vllm/v1/engine/core.py:328-346).

A pod whose engine container restarted, or that is not Ready, gives no record (the reason instead): its Ready
transition is not its first start.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from pydantic import ValidationError

from blueprints.contracts.benchmark_result import ColdStartRecord
from blueprints.core.errors import BenchmarkError
from blueprints.operate.manifests import StackManifests

#: Bytes of the engine log read from its start: the startup lines come first (a day's request log is not read).
LOG_BYTES = 4 * 1024 * 1024
#: The init container that copies the weights to node-local disk (`components/weights_delivery.py`).
WEIGHTS_INIT_CONTAINER = "fetch-weights"

_GO_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ns": 1e-9}
_GO_DURATION = re.compile(r"^(?:\d+(?:\.\d+)?(?:h|ms|m|s|us|µs|μs|ns))+$")
_GO_PART = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|μs|ns)")
_PULLED = re.compile(r'^Successfully pulled image "[^"]*" in (\S+) \(')
_MODEL_LOADING = re.compile(r"Model loading took \S+ GiB (?:memory )?and (\d+(?:\.\d+)?) seconds")
_INIT_ENGINE = re.compile(r"init engine \(profile, create kv cache, warmup model\) took (\d+(?:\.\d+)?) s")


def go_duration_s(text: str) -> float | None:
    """A Go `time.Duration` string (`39.553s`, `2m10.813s`, `850ms`) in seconds; None when it is not one."""
    if not _GO_DURATION.match(text):
        return None
    return sum(float(n) * _GO_UNITS[unit] for n, unit in _GO_PART.findall(text))


def _time(value: Any) -> dt.datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _condition(pod: dict[str, Any], kind: str) -> dt.datetime | None:
    for c in pod.get("status", {}).get("conditions") or []:
        if c.get("type") == kind and c.get("status") == "True":
            return _time(c.get("lastTransitionTime"))
    return None


def _status(pod: dict[str, Any], key: str, name: str) -> dict[str, Any] | None:
    return next((s for s in pod.get("status", {}).get(key) or [] if s.get("name") == name), None)


def _image_pull_s(events: list[dict[str, Any]], container: str) -> float | None:
    """The kubelet's pull time of `container`'s image (its `Pulled` event), None when not pulled or expired."""
    path = f"spec.containers{{{container}}}"
    for event in events:
        if event.get("reason") == "Pulled" and (event.get("involvedObject") or {}).get("fieldPath") == path:
            found = _PULLED.match(event.get("message") or "")
            return go_duration_s(found.group(1)) if found else None
    return None


def _last(pattern: re.Pattern[str], log: str) -> float | None:
    """The largest value of `pattern` in the log (one line per tensor-parallel worker; the slowest holds the start)."""
    values = [float(v) for v in pattern.findall(log)]
    return max(values) if values else None


def measure_cold_start(pod: dict[str, Any], node: dict[str, Any] | None, events: list[dict[str, Any]], log: str,
                       *, container: str) -> ColdStartRecord | str:
    """The pod's cold start from its API objects (as the API serves them, camelCase) and the engine's log.

    Args:
        pod: the serving Pod; node: its Node (None: not readable, so no node part); events: the pod's Events;
        log: the engine container's log from its start; container: the engine container's name.

    Returns:
        The record, or why the pod gives none (not Ready, restarted, a field missing or out of its bounds).
    """
    name = pod.get("metadata", {}).get("name", "?")
    created, ready = _time(pod.get("metadata", {}).get("creationTimestamp")), _condition(pod, "Ready")
    status = _status(pod, "containerStatuses", container)
    if created is None or ready is None or status is None:
        return f"pod {name}: not Ready (or no creationTimestamp / {container} status): no cold start to read"
    if status.get("restartCount"):
        return (f"pod {name}: {container} restarted {status['restartCount']} time(s); its Ready transition is not "
                "its cold start")
    started = _time((status.get("state") or {}).get("running", {}).get("startedAt"))
    node_created = _time((node or {}).get("metadata", {}).get("creationTimestamp"))
    launched = node_created is not None and node_created >= created
    scheduled = _condition(pod, "PodScheduled")
    init = _status(pod, "initContainerStatuses", WEIGHTS_INIT_CONTAINER)
    streamed = init is None
    weights = engine = None
    loading = _last(_MODEL_LOADING, log)
    if streamed:
        weights = loading
        if started is not None and loading is not None:  # without vLLM's line the two are not told apart
            engine = max(0.0, (ready - started).total_seconds() - loading)
    else:
        done = (init.get("state") or {}).get("terminated") or {}
        begin, end = _time(done.get("startedAt")), _time(done.get("finishedAt"))
        weights = (end - begin).total_seconds() if begin and end else None
        engine = (ready - started).total_seconds() if started is not None else None
    try:
        return ColdStartRecord(
            pod=name, node=pod.get("spec", {}).get("nodeName") or "?", pod_created=created, ready_at=ready,
            node_launched_for_pod=launched, weights_streamed=streamed,
            node_provisioning_s=(scheduled - created).total_seconds() if launched and scheduled else None,
            image_pull_s=_image_pull_s(events, container), weights_download_s=weights, model_load_s=engine,
            engine_init_s=_last(_INIT_ENGINE, log), total_s=(ready - created).total_seconds())
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(map(str, first["loc"]))
        return f"pod {name}: cold start not recorded ({where + ': ' if where else ''}{first['msg']})"


def read_cold_start(api: Any, sm: StackManifests, pod_name: str) -> ColdStartRecord | str:
    """The cold start of serving pod `pod_name`, read through the Kubernetes API (pod, node, events, the engine's
    log); the reason instead when a read is refused or the pod gives none (the benchmark goes on without it)."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    core, ns = client.CoreV1Api(api), sm.namespace
    container = sm.engine_container["name"]
    try:
        pod = api.sanitize_for_serialization(core.read_namespaced_pod(pod_name, ns, _request_timeout=30))
        events = api.sanitize_for_serialization(core.list_namespaced_event(
            ns, field_selector=f"involvedObject.name={pod_name}", _request_timeout=30)).get("items") or []
        log = core.read_namespaced_pod_log(pod_name, ns, container=container, limit_bytes=LOG_BYTES,
                                           _request_timeout=60)
    except ApiException as exc:
        return f"pod {pod_name}: cold start not read ({exc.status} {exc.reason})"
    node = None
    try:
        node = api.sanitize_for_serialization(core.read_node(pod["spec"]["nodeName"], _request_timeout=30))
    except (ApiException, KeyError):
        pass  # without `get nodes` the node part stays unmeasured
    return measure_cold_start(pod, node, events, log if isinstance(log, str) else "", container=container)


def read_ready_cold_start(api: Any, sm: StackManifests) -> ColdStartRecord | str:
    """The cold start of the Ready serving pod `blueprint benchmark` would measure (`jobs.ready_pod`), or why none."""
    from kubernetes.client.exceptions import ApiException

    from blueprints.operate.jobs import ready_pod

    try:
        name, _ = ready_pod(api, sm)
    except BenchmarkError as exc:
        return str(exc)
    except ApiException as exc:
        return f"the serving pods were not listed ({exc.status} {exc.reason})"
    return read_cold_start(api, sm, name)
