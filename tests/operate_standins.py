"""Local stand-ins of a deployed stack for `verify` and `benchmark` tests, all on loopback, each started and stopped
by the test (context managers), every wait bounded:

- `FakeOpenAIEndpoint`: an OpenAI-compatible `/v1/models` behind a bearer key (or, `open=True`, answering without
  one, as a misconfigured endpoint would);
- `EngineExporter`: `/metrics` in the Prometheus text format with the engine's real metric names, read from the
  metric catalog (`blueprints/catalog/metrics.yaml`: the names of the pinned vLLM and kube-state-metrics), minus any
  the test leaves out;
- `LocalPrometheus`: the real Prometheus server (Debian package `prometheus`) scraping the exporter every second,
  loading the stack's rule groups, with a temp config and data dir, stopped (terminate, then kill) on exit.
"""

from __future__ import annotations

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
    """A real Prometheus on loopback: scrapes `exporter` every second as the platform's scrape would label it (job =
    the serving Service's name, `namespace`), kube-state-metrics with its own labels (`honor_labels`), evaluates
    `rule_groups` (a PrometheusRule's `spec.groups`: the Prometheus rule file format) every second."""

    def __init__(self, tmp: Path, exporter: EngineExporter, *, job: str, namespace: str,
                 rule_groups: list[dict[str, Any]] | None) -> None:
        self.binary = require_prometheus()
        self.tmp, self.port = tmp, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        host = exporter.url.removeprefix("http://")
        config: dict[str, Any] = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
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

