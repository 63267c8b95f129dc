"""The table of every scaling signal and alert: engine and version, metric, its unit, what it means, and the unit its
target (a scaler's threshold, an alert's threshold) is in. One row per signal; `blueprints.contracts.observability` writes the
queries and alert expressions from these metric names, and `blueprints.review.signals` proves each rendered query and
threshold against this table and the metric catalog (`blueprints/catalog/metrics.yaml`).

Also the one rounding rule every planned target follows (`planned_target`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from blueprints.catalog.engines import load_engine_catalog
from blueprints.catalog.units import Unit, parse_unit

#: Engine versions the rows were written for: the pinned images' metric catalog entries.
VLLM = ("vllm", "0.24.0")
TRITON = ("triton", "2.62.0")
KUBERNETES = ("kubernetes", "kube-state-metrics (kube-prometheus-stack 88.5.3)")
SAGEMAKER = ("sagemaker", "CloudWatch AWS/SageMaker")
HTTP_ADD_ON = ("keda-http-add-on", "0.15.0")
#: The production-stack router in front of vLLM (its alerts are the vLLM archetype's).
ROUTER = ("vllm", "production-stack router 4d750c9a")
METRICS_SERVER = ("onnxruntime", "metrics-server 3.13.1 (resource metrics API)")

#: A scaler's threshold must be a number its API takes: KEDA thresholds (Kubernetes quantities, milli precision) and
#: SageMaker target values are decimals, HPA utilisation and the HTTP add-on's targetValue are integers. The rule:
#: round UP to `TARGET_SIGNIFICANT_DIGITS` significant digits, to a whole number for integer fields, never below
#: 0.001 (or 1). Targets are the signal at the planned peak share of one replica, so at the planned peak the
#: autoscaler asks for ceil(replicas x signal / target) = exactly the planned replicas: rounded down, a signal a hair
#: above the target asks for one more (relative precision, so small targets such as 0.17 pending requests keep their
#: meaning). The plan stores the rounded value and every component deploys it as is.
TARGET_SIGNIFICANT_DIGITS = 3
#: The smallest target any scaler here takes (KEDA's milli precision).
MIN_SCALING_TARGET = 0.001


def planned_target(value: float, *, whole: bool = False) -> float:
    """The one rounding rule for every scaling target (see `TARGET_SIGNIFICANT_DIGITS`): up to 3 significant digits.
    Examples: 66.96 -> 67.0; 0.1687 -> 0.169; 11.84 -> 11.9; 80 -> 80; with `whole`, 18.2 -> 19."""
    if value <= 0:
        raise ValueError(f"a scaling target must be positive, got {value}")
    step = 10.0 ** (math.floor(math.log10(value)) - TARGET_SIGNIFICANT_DIGITS + 1)
    if whole:
        step = max(1.0, step)
    rounded = math.ceil(value / step - 1e-9) * step
    return max(1.0 if whole else MIN_SCALING_TARGET, round(rounded, 6))


@dataclass(frozen=True)
class Signal:
    """One scaling signal or alert.

    Attributes:
        name: the scaling metric as `Autoscaling.metric` names it, or the alert / alarm name.
        kind: `scaling` (a scaler's target) or `alert` (an alert rule's or alarm's threshold).
        engine, engine_version: what exposes the metric.
        metric: the metric (or metrics) it reads.
        unit: the metric's unit.
        meaning: what it says, in a reviewer's words.
        target_unit: the unit its target or threshold is in (for a scaler with `AverageValue`, per replica).
    """

    name: str
    kind: Literal["scaling", "alert"]
    engine: str
    engine_version: str
    metric: str
    unit: str
    meaning: str
    target_unit: str

    @property
    def target(self) -> Unit:
        return parse_unit(self.target_unit)


def _row(name: str, kind: Literal["scaling", "alert"], engine: tuple[str, str], metric: str, unit: str, meaning: str,
         target_unit: str) -> Signal:
    return Signal(name, kind, engine[0], engine[1], metric, unit, meaning, target_unit)


SIGNALS: tuple[Signal, ...] = (
    # --- scaling -------------------------------------------------------------------------------------------------
    _row("vllm:num_requests_running", "scaling", VLLM, "vllm:num_requests_running", "requests",
         "sequences in vLLM's running batch, averaged over 1 min: proportional to load up to max_num_seqs, then "
         "pinned there while requests wait (so the autoscaler keeps adding replicas while saturated)",
         "requests/replica"),
    _row("nv_inference_pending_request_count", "scaling", TRITON, "nv_inference_pending_request_count", "requests",
         "requests in Triton's scheduler queue awaiting execution (dynamic batching included), averaged over 1 min",
         "requests/replica"),
    _row("interceptor-concurrency", "scaling", HTTP_ADD_ON, "in-flight requests at the KEDA HTTP interceptor "
         "(external-push trigger)", "requests", "requests the interceptor holds or forwards; exists at zero "
         "replicas, so it wakes a scaled-to-zero service", "requests/replica"),
    _row("cpu", "scaling", METRICS_SERVER, "resource cpu", "percent",
         "CPU used as a share of the request (= limit) per pod", "percent"),
    _row("SageMakerVariantInvocationsPerInstance", "scaling", SAGEMAKER, "InvocationsPerInstance",
         "invocations/instance", "invocations per instance per minute (target tracking's predefined metric)",
         "invocations/instance"),
    _row("ApproximateBacklogSizePerInstance", "scaling", SAGEMAKER, "ApproximateBacklogSizePerInstance",
         "requests/instance", "an asynchronous endpoint's queued and in-process requests per instance (EndpointName, "
         "Average; a customized target-tracking metric: it publishes no InvocationsPerInstance)", "requests/instance"),
    # --- alerts: vLLM ----------------------------------------------------------------------------------------------
    _row("TTFTP95AboveSLO", "alert", VLLM, "vllm:time_to_first_token_seconds", "seconds",
         "p95 time to first token over 5 min", "seconds"),
    _row("ITLP95AboveSLO", "alert", VLLM, "vllm:inter_token_latency_seconds", "seconds",
         "p95 inter-token latency over 5 min", "seconds"),
    _row("TTFTP99AboveSLO", "alert", VLLM, "vllm:time_to_first_token_seconds", "seconds",
         "p99 time to first token over 5 min (when slo.ttft_p99_ms is set)", "seconds"),
    _row("ITLP99AboveSLO", "alert", VLLM, "vllm:inter_token_latency_seconds", "seconds",
         "p99 inter-token latency over 5 min (when slo.itl_p99_ms is set)", "seconds"),
    _row("QueueBuildingUp", "alert", VLLM, "vllm:num_requests_waiting", "requests",
         "requests waiting per replica (mean over replicas)", "requests"),
    _row("KVCacheNearlyFull", "alert", VLLM, "vllm:kv_cache_usage_perc", "fraction",
         "the fullest replica's KV-cache usage (1 = full)", "fraction"),
    _row("ErrorBudgetFastBurn", "alert", VLLM, "http_requests_total", "requests",
         "share of requests answered 5xx over 5 min", "1"),
    # --- alerts: Triton --------------------------------------------------------------------------------------------
    _row("LatencyAboveSLO", "alert", TRITON, "nv_inference_request_summary_us", "microseconds",
         "the slowest replica's p95 (or p99, the SLO's percentile) request latency per model, from Triton's latency "
         "summary over its sliding window", "microseconds"),
    _row("QueueBuildingUp", "alert", TRITON, "nv_inference_pending_request_count", "requests",
         "requests pending per replica (mean over replicas)", "requests"),
    _row("ErrorBudgetFastBurn", "alert", TRITON, "nv_inference_request_failure, nv_inference_request_success",
         "requests", "share of failed inference requests over 5 min", "1"),
    # --- alerts: every Kubernetes archetype ---------------------------------------------------------------------------
    _row("ServingPodRestarting", "alert", KUBERNETES, "kube_pod_container_status_restarts_total", "restarts",
         "container restarts over 15 min", "restarts"),
    _row("ServingReplicasUnavailable", "alert", KUBERNETES,
         "kube_deployment_status_replicas_available, kube_deployment_spec_replicas", "replicas",
         "replicas available below the minimum (or, when the minimum is 0, below the replicas asked for, for "
         "longer than a cold start)", "replicas"),
    _row("RouterDown", "alert", KUBERNETES, "kube_deployment_status_replicas_available", "replicas",
         "router pods available (the prefix/session-aware router in front of vLLM): none is an outage", "replicas"),
    _row("RouterDegraded", "alert", KUBERNETES, "kube_deployment_status_replicas_available", "replicas",
         "router pods available below the planned count for 15 min", "replicas"),
    _row("RouterHasNoEngines", "alert", ROUTER, "vllm:request_latency_seconds, vllm:num_incoming_requests_total",
         "requests", "share of the router's incoming requests it forwarded to an engine over 5 min (a router that "
         "lists no engine pod answers every request 404 while its /health stays 200)", "fraction"),
    # --- alarms: SageMaker (CloudWatch) -------------------------------------------------------------------------------
    _row("model-latency-p95", "alert", SAGEMAKER, "ModelLatency", "microseconds", "p95 model latency per minute",
         "microseconds"),
    _row("model-latency-p99", "alert", SAGEMAKER, "ModelLatency", "microseconds", "p99 model latency per minute",
         "microseconds"),
    _row("invocation-5xx", "alert", SAGEMAKER, "Invocation5XXErrors", "errors", "5xx errors per minute", "errors"),
    _row("expired-requests", "alert", SAGEMAKER, "ExpiredRequests", "requests", "an asynchronous endpoint's queued "
         "requests that expired (RequestTTLSeconds) per minute", "requests"),
    _row("invocation-failures", "alert", SAGEMAKER, "InvocationFailures", "requests", "an asynchronous endpoint's "
         "failed invocations per minute", "requests"),
    _row("backlog-without-capacity", "alert", SAGEMAKER, "HasBacklogWithoutCapacity", "1", "1 while an "
         "asynchronous endpoint has queued requests and no instance (its scale-from-zero alarm, Average)", "1"),
    _row("gpu-memory", "alert", SAGEMAKER, "GPUMemoryUtilization", "percent",
         "GPU memory in use (non-generative models: engines that do not preallocate)", "percent"),
)

def _llm_engine_rows() -> tuple[Signal, ...]:
    """The scaling signal and alerts of every LLM engine other than vLLM (whose rows are written out above), from
    their catalog signals (`blueprints/catalog/engines.yaml`): the same roles, the engine's own metric names."""
    rows = []
    for e in load_engine_catalog().values():
        if e.name == "vllm":
            continue
        engine = (e.name, e.version)
        rows += [
            _row(e.signal("running"), "scaling", engine, e.signal("running"), "requests",
                 f"requests running in {e.display}'s batch, averaged over 1 min: proportional to load up to its "
                 "running-request cap (max_num_seqs), then pinned there while requests wait", "requests/replica"),
            _row("TTFTP95AboveSLO", "alert", engine, e.signal("ttft_seconds"), "seconds",
                 "p95 time to first token over 5 min", "seconds"),
            _row("ITLP95AboveSLO", "alert", engine, e.signal("itl_seconds"), "seconds",
                 "p95 inter-token latency (or time per output token) over 5 min", "seconds"),
            _row("TTFTP99AboveSLO", "alert", engine, e.signal("ttft_seconds"), "seconds",
                 "p99 time to first token over 5 min", "seconds"),
            _row("ITLP99AboveSLO", "alert", engine, e.signal("itl_seconds"), "seconds",
                 "p99 inter-token latency (or time per output token) over 5 min", "seconds"),
            _row("QueueBuildingUp", "alert", engine, e.signal("waiting"), "requests",
                 "requests waiting per replica (mean over replicas)", "requests"),
            _row("KVCacheNearlyFull", "alert", engine, e.signal("kv_cache_usage"), "fraction",
                 "the fullest replica's KV-cache usage (1 = full)", "fraction"),
        ]
        if e.http_requests:
            rows.append(_row("ErrorBudgetFastBurn", "alert", engine, e.http_requests, "requests",
                             "share of requests answered 5xx over 5 min", "1"))
    return tuple(rows)


SIGNALS = SIGNALS + _llm_engine_rows()

#: Which table rows apply to which engine (Kubernetes-wide rows apply to every Kubernetes archetype); a self-hosted
#: LLM's rows are its engine's (`engine_of`).
ENGINE_OF_ARCHETYPE = {"vllm-gpu": "vllm", "triton-multi-model": "triton", "onnx-cpu": "onnxruntime",
                       "sagemaker-endpoint": "sagemaker"}


def engine_of(archetype: str, engine_kind: str | None = None) -> str:
    """The engine whose table rows apply to a stack: a self-hosted LLM's `engine.kind`, else the archetype's."""
    if archetype == "vllm-gpu" and engine_kind:
        return engine_kind
    return ENGINE_OF_ARCHETYPE[archetype]


def scaling_signal_row(metric: str) -> Signal | None:
    """The table row of a scaling metric (`Autoscaling.metric`), or None for a metric that is not a scaling signal."""
    return next((s for s in SIGNALS if s.kind == "scaling" and s.name == metric), None)


#: Engines whose alerts are another server's: ONNX Runtime runs in Triton's onnxruntime backend (Triton's metrics).
SERVED_BY = {"onnxruntime": TRITON[0]}


def alert_row(engine: str, name: str) -> Signal | None:
    """The table row of an alert of `engine` (an engine's own row first, then the server it runs in, then the
    Kubernetes-wide one)."""
    for owner in (engine, SERVED_BY.get(engine)):
        own = next((s for s in SIGNALS if s.kind == "alert" and s.engine == owner and s.name == name), None)
        if own is not None:
            return own
    if engine == "sagemaker":
        return None
    return next((s for s in SIGNALS if s.kind == "alert" and s.engine == KUBERNETES[0] and s.name == name), None)


def signals_markdown() -> str:
    """The table as markdown (docs/concepts/review.md, put in by tools/docs/reference.py)."""
    rows = ["| signal | kind | engine | metric | unit | target in | meaning |", "|---|---|---|---|---|---|---|"]
    for s in SIGNALS:
        rows.append(f"| `{s.name}` | {s.kind} | {s.engine} {s.engine_version} | `{s.metric}` | {s.unit} | "
                    f"{s.target_unit} | {s.meaning} |")
    return "\n".join(rows)
