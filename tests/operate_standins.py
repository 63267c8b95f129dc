"""Local stand-ins of a deployed stack for `verify` and `benchmark` tests, all on loopback, each started and stopped
by the test (context managers), every wait bounded:

- `FakeOpenAIEndpoint`: an OpenAI-compatible `/v1/models` behind a bearer key (or, `open=True`, answering without
  one, as a misconfigured endpoint would);
- `Redirector`: a 302 to another origin (or to its own `/moved` path), recording each request's Authorization;
- `EngineExporter`: `/metrics` in the Prometheus text format with the engine's real metric names, read from the
  metric catalog (`blueprints/catalog/metrics.yaml`: the names of the pinned vLLM and kube-state-metrics), minus any
  the test leaves out;
- `LocalPrometheus`: the real Prometheus server (Debian package `prometheus`) scraping the exporter every second,
  loading the stack's rule groups, with a temp config and data dir, stopped (terminate, then kill) on exit;
- `ColdStartedPod`: a serving pod that started cold on a node Karpenter launched for it, as the Kubernetes API
  serves its Pod, Node and Events (camelCase JSON) and as vLLM 0.24.0 logs its start.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from blueprints.catalog.metrics import load_metric_catalog

COLD_START_AT = dt.datetime(2026, 12, 3, 9, 0, 0, tzinfo=dt.timezone.utc)

#: Seconds a stand-in may take to become ready (Prometheus: start and first scrapes).
READY_TIMEOUT_S = 40


def require_prometheus() -> str:
    """The `prometheus` binary; the test fails under CI (env CI set) and is skipped elsewhere when it is absent."""
    found = shutil.which("prometheus")
    if found is None:
        message = ("Prometheus is not installed: `apt-get install -y prometheus` (Debian package; CI installs it in "
                   ".ci/run) runs verify's queries against a real Prometheus")
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()
        self.server_close()
        self.thread.join(timeout=5)


class _Quiet(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        return

    def reply(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class FakeOpenAIEndpoint(_Server):
    """`GET /v1/models` listing `model`, only with `Authorization: Bearer <key>` (unless `open`); 404 elsewhere.
    `url` + `/v1` is what a stack's `endpoint` output looks like."""

    def __init__(self, *, model: str, key: str, open: bool = False) -> None:  # noqa: A002
        self.model, self.key, self.open = model, key, open
        self.requests: list[tuple[str, str | None]] = []
        endpoint = self

        class Handler(_Quiet):
            def do_GET(self) -> None:  # noqa: N802
                auth = self.headers.get("Authorization")
                endpoint.requests.append((self.path, auth))
                if self.path != "/v1/models":
                    self.reply(404, b"not found\n", "text/plain")
                elif auth != f"Bearer {endpoint.key}" and not endpoint.open:
                    self.reply(401, b"missing or invalid API key\n", "text/plain")
                else:
                    self.reply(200, json.dumps({"object": "list", "data": [
                        {"id": endpoint.model, "object": "model", "owned_by": "vllm"}]}).encode())

        super().__init__(Handler)


class Redirector(_Server):
    """Answers every GET with `302 Location: <to><path>` and records (path, Authorization): a load balancer or proxy
    sending verify elsewhere. `to` is another origin (another port on loopback is one) or this server's own."""

    def __init__(self, to: str | None = None) -> None:
        self.to = to
        self.requests: list[tuple[str, str | None]] = []
        server = self

        class Handler(_Quiet):
            def do_GET(self) -> None:  # noqa: N802
                server.requests.append((self.path, self.headers.get("Authorization")))
                if server.to is None and self.path.startswith("/moved"):  # same origin: the endpoint's new path
                    self.reply(200, json.dumps({"object": "list", "data": []}).encode())
                    return
                self.send_response(302)
                self.send_header("Location", f"{server.to}{self.path}" if server.to else f"/moved{self.path}")
                self.send_header("Content-Length", "0")
                self.end_headers()

        super().__init__(Handler)


def _labels(labels: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}" if labels else ""


def exposition(metrics: list[tuple[str, str]], series: list[dict[str, str]], *, value: float = 1.0) -> str:
    """The Prometheus text format 0.0.4 (prometheus.io/docs/instrumenting/exposition_formats) of (name, type) pairs,
    one `# TYPE` line each and one series per labels of `series` (histograms: buckets, `_sum`, `_count`; summaries:
    a quantile, `_sum`, `_count`)."""
    lines = []
    for name, kind in metrics:
        lines.append(f"# TYPE {name} {'gauge' if kind == 'info' else kind}")
        for labels in series:
            if kind == "histogram":
                for le in ("0.05", "0.5", "5.0", "+Inf"):
                    lines.append(f"{name}_bucket{_labels({**labels, 'le': le})} {value}")
                lines += [f"{name}_sum{_labels(labels)} {value}", f"{name}_count{_labels(labels)} {value}"]
            elif kind == "summary":
                lines.append(f"{name}{_labels({**labels, 'quantile': '0.5'})} {value}")
                lines += [f"{name}_sum{_labels(labels)} {value}", f"{name}_count{_labels(labels)} {value}"]
            else:
                lines.append(f"{name}{_labels(labels)} {value}")
    return "\n".join(lines) + "\n"


class EngineExporter(_Server):
    """`/metrics` of the pinned engine (every metric the catalog lists for `engine_image`, labels `model_name` and
    `engine`; `http_requests_total` per status class) and of kube-state-metrics for the stack's pods and Deployment
    (`/kube-state-metrics`), minus `leave_out`. With `restarting`, the pods' restart counter grows at each scrape."""

    def __init__(self, *, engine_image: str, model: str, namespace: str, deployment: str,
                 leave_out: tuple[str, ...] = (), restarting: bool = False) -> None:
        catalog = load_metric_catalog()
        engine = catalog.engine_for_image(engine_image)
        assert engine is not None, engine_image
        ksm = next(e for e in catalog.exporters if e.exporter == "kube-state-metrics")
        self.engine_metrics = [(m.name, m.type) for m in engine.metrics if m.name not in leave_out]
        self.ksm_metrics = [(m.name, m.type) for m in ksm.metrics if m.name not in leave_out]
        self.scrapes = 0
        exporter = self

        class Handler(_Quiet):
            def do_GET(self) -> None:  # noqa: N802
                exporter.scrapes += 1
                if self.path == "/metrics":
                    http = [m for m in exporter.engine_metrics if m[0] == "http_requests_total"]
                    other = [m for m in exporter.engine_metrics if m[0] != "http_requests_total"]
                    text = exposition(other, [{"model_name": model, "engine": "0"}]) + exposition(
                        http, [{"handler": "/v1/completions", "method": "POST", "status": s} for s in ("2xx", "5xx")])
                elif self.path == "/kube-state-metrics":
                    restarts = float(exporter.scrapes) if restarting else 0.0
                    pods = [m for m in exporter.ksm_metrics if m[0].startswith("kube_pod")]
                    deployments = [m for m in exporter.ksm_metrics if not m[0].startswith("kube_pod")]
                    text = exposition(pods, [{"namespace": namespace, "pod": f"{deployment}-7d9f8-abcde",
                                              "container": "vllm"}], value=restarts) + exposition(
                        deployments, [{"namespace": namespace, "deployment": deployment}], value=6.0)
                else:
                    self.reply(404, b"not found\n", "text/plain")
                    return
                self.reply(200, text.encode(), "text/plain; version=0.0.4")

        super().__init__(Handler)


class LocalPrometheus:
    """A real Prometheus on loopback: scrapes `exporter` every 200 ms as the platform's scrape would label it (job =
    the serving Service's name, `namespace`), kube-state-metrics with its own labels (`honor_labels`), evaluates
    `rule_groups` (a PrometheusRule's `spec.groups`: the Prometheus rule file format) every 200 ms (the checks wait
    for scrapes and evaluations, not for a span of time)."""

    def __init__(self, tmp: Path, exporter: EngineExporter, *, job: str, namespace: str,
                 rule_groups: list[dict[str, Any]] | None) -> None:
        self.binary = require_prometheus()
        self.tmp, self.port = tmp, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        host = exporter.url.removeprefix("http://")
        config: dict[str, Any] = {
            "global": {"scrape_interval": "200ms", "evaluation_interval": "200ms"},
            "scrape_configs": [
                {"job_name": job, "static_configs": [{"targets": [host], "labels": {"namespace": namespace}}]},
                {"job_name": "kube-state-metrics", "honor_labels": True, "metrics_path": "/kube-state-metrics",
                 "static_configs": [{"targets": [host]}]}]}
        if rule_groups is not None:
            (tmp / "rules.yml").write_text(yaml.safe_dump({"groups": rule_groups}))
            config["rule_files"] = [str(tmp / "rules.yml")]
        (tmp / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> "LocalPrometheus":
        self.process = subprocess.Popen(
            [self.binary, f"--config.file={self.tmp / 'prometheus.yml'}", f"--storage.tsdb.path={self.tmp / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--storage.tsdb.retention.time=1h"],
            stdout=subprocess.DEVNULL, stderr=(self.tmp / "prometheus.log").open("w"))
        try:
            self.wait_for("count(up == 1)", lambda v: v >= 2)
        except BaseException:
            self.__exit__()
            raise
        return self

    def query(self, expr: str) -> list[dict[str, Any]]:
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=5) as reply:
            return json.loads(reply.read())["data"]["result"]

    def wait_for(self, expr: str, ok, *, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Until `expr`'s first value satisfies `ok` (bounded by `timeout_s`)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.process is not None and self.process.poll() is None, \
                (self.tmp / "prometheus.log").read_text()[-2000:]
            try:
                result = self.query(expr)
                if result and ok(float(result[0]["value"][1])):
                    return
            except (urllib.error.URLError, OSError, KeyError, ValueError):
                pass
            time.sleep(0.25)
        raise AssertionError(f"Prometheus: {expr} not satisfied within {timeout_s} s; log: "
                             + (self.tmp / "prometheus.log").read_text()[-2000:])

    def __exit__(self, *exc: Any) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)



def _stamp(seconds: float) -> str:
    """An API timestamp `seconds` after `COLD_START_AT`, whole seconds as the API serves them (RFC 3339, `Z`)."""
    return (COLD_START_AT + dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


class ColdStartedPod:
    """A serving pod created at `COLD_START_AT` whose start took, s: `node_s` until scheduled (on a node created 2 s
    after the pod, unless `node_existed`), `pull` the kubelet's pull duration string (Go `time.Duration`, e.g.
    `1m19.842s`; None: "already present on machine"), `gap_s` from the pull to the container start,
    `weights_s` in vLLM's "Model loading took" line (streamed) or the `fetch-weights` init container (copied),
    `init_engine_s` in vLLM's "init engine" line, `ready_s` from the container start to Ready; `restarts` of the
    engine container."""

    def __init__(self, *, container: str = "vllm", image: str = "vllm/vllm-openai:v0.24.0", node_s: int = 180,
                 pull: str | None = "1m19.842s", gap_s: int = 2, weights_s: float = 20.031,
                 init_engine_s: float = 61.2, ready_s: int = 108, streamed: bool = True, node_existed: bool = False,
                 restarts: int = 0) -> None:
        name, node = "llama-3-1-8b-vllm-7d9f8-abcde", "ip-10-0-12-34.ec2.internal"
        pulled = go_seconds(pull) if pull else 0.0
        start = node_s + pulled + gap_s + (0 if streamed else weights_s)
        self.pod: dict[str, Any] = {
            "metadata": {"name": name, "namespace": "chat-assistant", "creationTimestamp": _stamp(0)},
            "spec": {"nodeName": node},
            "status": {
                "phase": "Running",
                "conditions": [
                    {"type": "PodReadyToStartContainers", "status": "True", "lastTransitionTime": _stamp(node_s + 1)},
                    {"type": "Initialized", "status": "True", "lastTransitionTime": _stamp(start - 1)},
                    {"type": "Ready", "status": "True", "lastTransitionTime": _stamp(start + ready_s)},
                    {"type": "ContainersReady", "status": "True", "lastTransitionTime": _stamp(start + ready_s)},
                    {"type": "PodScheduled", "status": "True", "lastTransitionTime": _stamp(node_s)}],
                "containerStatuses": [
                    {"name": container, "image": image, "ready": True, "restartCount": restarts, "started": True,
                     "state": {"running": {"startedAt": _stamp(start)}}},
                    {"name": "auth-proxy", "ready": True, "restartCount": 0, "started": True,
                     "state": {"running": {"startedAt": _stamp(start)}}}],
                **({} if streamed else {"initContainerStatuses": [
                    {"name": "fetch-weights", "ready": True, "restartCount": 0, "state": {"terminated": {
                        "exitCode": 0, "reason": "Completed", "startedAt": _stamp(node_s + pulled + gap_s),
                        "finishedAt": _stamp(node_s + pulled + gap_s + weights_s)}}}]})}}
        self.node: dict[str, Any] = {"metadata": {"name": node, "creationTimestamp": _stamp(-86_400 if node_existed
                                                                                            else 2)}}
        ref = {"kind": "Pod", "name": name, "namespace": "chat-assistant",
               "fieldPath": f"spec.containers{{{container}}}"}
        message = (f'Successfully pulled image "{image}" in {pull} ({pull} including waiting). Image size: '
                   "9400000000 bytes." if pull else f'Container image "{image}" already present on machine')
        self.events: list[dict[str, Any]] = [
            {"reason": "Scheduled", "type": "Normal", "involvedObject": {**ref, "fieldPath": None},
             "message": f"Successfully assigned chat-assistant/{name} to {node}"},
            {"reason": "Pulling", "type": "Normal", "involvedObject": ref, "message": f'Pulling image "{image}"'},
            {"reason": "Pulled", "type": "Normal", "involvedObject": ref, "message": message},
            {"reason": "Started", "type": "Normal", "involvedObject": ref, "message": f"Started container {container}"}]
        self.log = "\n".join([
            "INFO 12-03 09:04:30 [api_server.py:1351] vLLM API server version 0.24.0",
            "(EngineCore_DP0 pid=312) INFO 12-03 09:04:41 [default_loader.py:431] Loading weights took 5.10 seconds",
            f"(EngineCore_DP0 pid=312) INFO 12-03 09:04:42 [gpu_model_runner.py:5256] Model loading took 14.99 GiB "
            f"memory and {weights_s:.6f} seconds",
            "(EngineCore_DP0 pid=312) INFO 12-03 09:05:40 [gpu_model_runner.py:6657] Graph capturing finished in 9 "
            "secs, took 0.52 GiB",
            f"(EngineCore_DP0 pid=312) INFO 12-03 09:05:43 [core.py:338] init engine (profile, create kv cache, "
            f"warmup model) took {init_engine_s:.2f} s (compilation: 30.10 s)",
            "INFO 12-03 09:06:05 [launcher.py:46] Route: /v1/completions, Methods: POST", ""])


def go_seconds(text: str) -> float:
    """`1m19.842s` -> 79.842 (minutes and seconds only: what the stand-in writes)."""
    minutes, _, seconds = text.rstrip("s").rpartition("m")
    return float(minutes or 0) * 60 + float(seconds)
