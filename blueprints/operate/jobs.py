"""Running the benchmark Job in the cluster: pick the target pod, create the NetworkPolicies and the Job, wait for it
(bounded by its own deadline), read the client's JSON from the `results` container's log, delete what was created.
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable

from blueprints.core.errors import BenchmarkError, DeployedStackError
from blueprints.operate.manifests import StackManifests
from blueprints.contracts.benchmark_result import VllmBenchRun

#: Seconds between two reads of the Job's status.
POLL_S = 10
#: Seconds past the Job's activeDeadlineSeconds the wait gives up (Kubernetes marks it failed by then).
WAIT_SLACK_S = 120


def ready_pod(api: Any, sm: StackManifests) -> tuple[str, str]:
    """(name, IP) of one Ready serving pod (the first by name), which the sweep sends every request to."""
    from kubernetes import client

    selector = ",".join(f"{k}={v}" for k, v in sorted(sm.pod_selector.items()))
    pods = client.CoreV1Api(api).list_namespaced_pod(sm.namespace, label_selector=selector, _request_timeout=30)
    for pod in sorted(pods.items, key=lambda p: p.metadata.name):
        conditions = {c.type: c.status for c in (pod.status.conditions or [])}
        if conditions.get("Ready") == "True" and pod.status.pod_ip and not pod.metadata.deletion_timestamp:
            return pod.metadata.name, pod.status.pod_ip
    raise BenchmarkError(f"no Ready pod of {sm.blueprint.workload_name} in {sm.namespace}: the benchmark needs one "
                         "serving replica up (`blueprint verify` says why none is)")


def parse_runs(log: str, expected: int) -> list[VllmBenchRun]:
    """The runs the `results` container printed: `expected` JSON objects back to back (each file is one
    `json.dump` without a newline)."""
    decoder = json.JSONDecoder()
    runs, at, text = [], 0, log.strip()
    while at < len(text) and len(runs) < expected:
        try:
            data, end = decoder.raw_decode(text, at)
        except json.JSONDecodeError as exc:
            raise BenchmarkError(f"the results container printed no JSON at character {at}: {exc.msg}") from None
        runs.append(VllmBenchRun.model_validate(data))
        at = end
        while at < len(text) and text[at].isspace():
            at += 1
    if len(runs) != expected:
        raise BenchmarkError(f"the results container printed {len(runs)} run(s), expected {expected}")
    return runs


def run_job(api: Any, objects: list[dict[str, Any]], *, namespace: str, log: Callable[[str], None],
            sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic,
            observe: Callable[[int | None], None] | None = None) -> str:
    """Create `objects` (NetworkPolicies, the prompts ConfigMap, then the Job: the last), wait until the Job succeeds
    or fails (at most its `activeDeadlineSeconds` + `WAIT_SLACK_S`), return the `results` container's log, and delete
    them all. `observe(run)` is called at each poll with the run (rate) under way, 0-based (None: none yet, or
    between runs), read from the Job pod's init containers.

    Raises:
        BenchmarkError: the Job failed or timed out (the message names each run's container state).
        DeployedStackError: the Kubernetes API refused creating them.
    """
    from kubernetes import client, utils
    from kubernetes.client.exceptions import ApiException

    batch, core, net = client.BatchV1Api(api), client.CoreV1Api(api), client.NetworkingV1Api(api)
    job = objects[-1]
    name = job["metadata"]["name"]
    created: list[dict[str, Any]] = []
    try:
        for obj in objects:
            try:
                utils.create_from_dict(api, obj, namespace=namespace)
            except utils.FailToCreateError as exc:
                cause = exc.api_exceptions[0] if exc.api_exceptions else None
                raise DeployedStackError(f"cannot create {obj['kind']} {obj['metadata']['name']} in {namespace} "
                                         f"({getattr(cause, 'status', '')} {getattr(cause, 'reason', '')}): the "
                                         "benchmark needs create on jobs and networkpolicies there") from None
            created.append(obj)
        log(f"Job {namespace}/{name} created: {len(job['spec']['template']['spec']['initContainers']) - 1} run(s)")
        deadline = clock() + job["spec"]["activeDeadlineSeconds"] + WAIT_SLACK_S
        while True:
            if observe is not None:
                observe(_run_under_way(core, namespace, name))
            status = batch.read_namespaced_job_status(name, namespace, _request_timeout=30).status
            if status.succeeded:
                if observe is not None:
                    observe(None)
                break
            if status.failed or clock() > deadline:
                raise BenchmarkError(f"Job {namespace}/{name} failed: {_pod_states(core, namespace, name)}")
            sleep(POLL_S)
        pod = _job_pod(core, namespace, name)
        return core.read_namespaced_pod_log(pod, namespace, container="results", _request_timeout=60)
    finally:
        for obj in reversed(created):
            try:
                if obj["kind"] == "Job":
                    batch.delete_namespaced_job(obj["metadata"]["name"], namespace, propagation_policy="Background",
                                                _request_timeout=30)
                elif obj["kind"] == "ConfigMap":
                    core.delete_namespaced_config_map(obj["metadata"]["name"], namespace, _request_timeout=30)
                else:
                    net.delete_namespaced_network_policy(obj["metadata"]["name"], namespace, _request_timeout=30)
            except ApiException as exc:
                if exc.status != 404:
                    log(f"could not delete {obj['kind']} {obj['metadata']['name']} ({exc.status}): delete it by hand")


def _run_under_way(core: Any, namespace: str, job: str) -> int | None:
    """The sweep's run whose init container (`rate-NN`) is running in the Job's pod, or None."""
    pods = core.list_namespaced_pod(namespace, label_selector=f"job-name={job}", _request_timeout=30).items
    for c in (pods[0].status.init_container_statuses or []) if pods else []:
        if c.name.startswith("rate-") and c.state is not None and c.state.running:
            return int(c.name.removeprefix("rate-"))
    return None


def _job_pod(core: Any, namespace: str, job: str) -> str:
    pods = core.list_namespaced_pod(namespace, label_selector=f"job-name={job}", _request_timeout=30).items
    if not pods:
        raise BenchmarkError(f"Job {namespace}/{job} has no pod")
    return pods[0].metadata.name


def _pod_states(core: Any, namespace: str, job: str) -> str:
    """Each container's state of the Job's pod, for the error."""
    pods = core.list_namespaced_pod(namespace, label_selector=f"job-name={job}", _request_timeout=30).items
    if not pods:
        return "no pod was created (check `kubectl describe job`: quota, Pod Security, node selector)"
    states = []
    status = pods[0].status
    for c in [*(status.init_container_statuses or []), *(status.container_statuses or [])]:
        state = c.state
        if state.terminated:
            states.append(f"{c.name} exited {state.terminated.exit_code} ({state.terminated.reason})")
        elif state.waiting:
            states.append(f"{c.name} waiting ({state.waiting.reason})")
        elif state.running:
            states.append(f"{c.name} running")
    return "; ".join(states) or f"pod {pods[0].metadata.name} is {status.phase}"
