"""Scaling signals, SLO alerts and dashboards, derived from one `Blueprint`.

The autoscaler's query and the alert rules are written here, together, from the same selectors: an HPA/KEDA
trigger can never look for a metric the alerts (and the server) name differently. Every metric, its unit and the
unit of each threshold are rows of `blueprints.catalog.signals` (engine versions and sources in
`blueprints/catalog/metrics.yaml`); `blueprints.review.signals` proves each rendered expression against them offline.
The LLM engines' metric names are their catalog signals (`blueprints/catalog/engines.yaml`); vLLM labels its series
`model_name` (each engine's `model_label`), Triton `model`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from blueprints.contracts.sections import CRON_SCHEDULE, Archetype
from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.router import router_metrics_service_name, router_workload_name
from blueprints.catalog.engines import engine_facts
from blueprints.catalog.signals import planned_target, scaling_signal_row

#: Multi-window burn rate for a fast error-budget burn alert (Google SRE workbook, "Alerting on SLOs": 14.4x
#: spends 2 % of a 30-day budget in one hour).
FAST_BURN_RATE = 14.4


@dataclass(frozen=True)
class ScalingSignal:
    """A Prometheus query the autoscaler scales on, and its target.

    `metric_type` follows KEDA/HPA: `AverageValue` divides the query result by the replica count before comparing
    with `threshold`; `Value` compares it directly.
    """

    query: str
    threshold: float
    metric_type: str
    description: str


@dataclass(frozen=True)
class AlertRule:
    """One Prometheus alerting rule."""

    name: str
    expr: str
    for_: str
    severity: str
    summary: str


def _selector(bp: Blueprint, *matchers: str) -> str:
    """`{namespace="serving", <matchers>}`; each matcher is PromQL, e.g. `model_name="x"` or `pod=~"x-.*"`."""
    return "{" + ", ".join([f'namespace="{bp.platform.namespace}"', *matchers]) + "}"


#: Archetypes served by Triton (its metrics, labelled `model`): ONNX Runtime runs in Triton's onnxruntime backend.
TRITON_SERVED = (Archetype.TRITON_MULTI_MODEL, Archetype.ONNX_CPU)
#: Triton's flag turning on its latency summaries (`nv_inference_request_summary_us{quantile=...}`: 0.5, 0.9, 0.95,
#: 0.99 and 0.999 over a sliding window; off by default; server docs user_guide/metrics.md "Summaries", since 23.04).
TRITON_SUMMARY_FLAG = "--metrics-config=summary_latencies=true"


def _model_selector(bp: Blueprint, *matchers: str) -> str:
    if bp.archetype is Archetype.VLLM_GPU:
        # The router's gauges reuse vLLM's names (`vllm:num_requests_waiting{server=...}`): with a router, every
        # engine query also names the engine's scrape job.
        job = (f'job="{bp.metrics_service_name}"',) if bp.router is not None else ()
        label = engine_facts(bp.engine.kind).model_label
        return _selector(bp, f'{label}="{bp.model.name}"', *job, *matchers)
    if bp.archetype in TRITON_SERVED:
        return _selector(bp, f'model=~"{"|".join(m.name for m in bp.models)}"', *matchers)
    return _selector(bp, *matchers)


def scaling_signal(bp: Blueprint) -> ScalingSignal | None:
    """What KEDA scales a Kubernetes archetype on; None for archetypes scaled otherwise (CPU HPA, SageMaker) and for
    a batch on its cron schedule (`CRON_SCHEDULE`: the clock, no Prometheus query).

    The plan's `autoscaling.metric` (a gauge of the engine, a row of `blueprints.catalog.signals`), averaged over a minute and
    summed over the replicas, against `autoscaling.target` per replica (`AverageValue`: KEDA divides the sum by the
    replica count). vLLM: requests running per replica; Triton: requests pending per replica. Both are proportional
    to load, so at the planned peak the autoscaler holds the planned replicas (a queue-only signal reads 0 whenever
    capacity suffices, and the HPA would scale in to the minimum and flap).
    """
    if bp.archetype not in (Archetype.VLLM_GPU, Archetype.TRITON_MULTI_MODEL):
        return None
    if bp.autoscaling.metric == CRON_SCHEDULE:
        return None
    sel = _model_selector(bp)
    row = scaling_signal_row(bp.autoscaling.metric)
    return ScalingSignal(query=f"sum(avg_over_time({bp.autoscaling.metric}{sel}[1m]))",
                         threshold=bp.autoscaling.target, metric_type="AverageValue",
                         description=row.meaning if row else bp.autoscaling.metric)


def queue_alert_threshold(bp: Blueprint) -> float:
    """Requests waiting (vLLM) or pending (Triton) per replica beyond which a new request's latency leaves its SLO:
    the SLO's margin over the predicted p95, times a replica's throughput (a request waits for those ahead of it).
    At least 1."""
    per_replica_rps = bp.predictions.requests_per_s_capacity / max(1, bp.compute.replicas)
    if bp.archetype is Archetype.VLLM_GPU:
        target, predicted = bp.slo.ttft_p95_ms, bp.predictions.ttft_p95_ms
    else:
        target, predicted = bp.slo.latency_p95_ms or bp.slo.latency_p99_ms, bp.predictions.latency_p95_ms
    if target is None or predicted is None:
        return 1.0
    return planned_target(max(1.0, (target - predicted) / 1e3 * per_replica_rps))


def _quantile(metric: str, sel: str, q: float = 0.95, window: str = "5m") -> str:
    return f"histogram_quantile({q}, sum by (le) (rate({metric}_bucket{sel}[{window}])))"


def slo_alerts(bp: Blueprint) -> list[AlertRule]:
    """Alerts whose thresholds are the requirements' SLOs (and the plan's queue target), per archetype.

    Kubernetes archetypes only; SageMaker endpoints get CloudWatch alarms from `cloudwatch_alarm_specs`.
    """
    sel = _model_selector(bp)
    name = bp.workload_name
    slo = bp.slo
    rules: list[AlertRule] = []
    if bp.archetype is Archetype.VLLM_GPU:
        engine = engine_facts(bp.engine.kind)
        signal = engine.signal
        # Each latency target the SLO sets, on the engine's own histogram at its quantile.
        for alert, role, what, q, target_ms in (
                ("TTFTP95AboveSLO", "ttft_seconds", "TTFT p95", 0.95, slo.ttft_p95_ms),
                ("ITLP95AboveSLO", "itl_seconds", "Inter-token latency p95", 0.95, slo.itl_p95_ms),
                ("TTFTP99AboveSLO", "ttft_seconds", "TTFT p99", 0.99, slo.ttft_p99_ms),
                ("ITLP99AboveSLO", "itl_seconds", "Inter-token latency p99", 0.99, slo.itl_p99_ms)):
            if target_ms:
                rules.append(AlertRule(alert, f"{_quantile(signal(role), sel, q)} > {target_ms / 1000:g}", "10m",
                                       "page", f"{what} of {bp.model.name} is above the {target_ms:g} ms SLO"))
        rules.append(AlertRule("QueueBuildingUp", f"avg({signal('waiting')}{sel}) > "
                               f"{queue_alert_threshold(bp):g}", "10m", "ticket",
                               "Requests wait per replica beyond what keeps TTFT within its SLO: the autoscaler is "
                               "at its maximum or nodes cannot be added"))
        rules.append(AlertRule("KVCacheNearlyFull", f"max({signal('kv_cache_usage')}{sel}) > 0.9", "5m", "ticket",
                               f"KV cache above 90 %: {engine.display} will preempt or hold back sequences; lower "
                               "max_num_seqs or add replicas"))
        errors = total = ""
        if engine.http_requests:  # the engine's own HTTP counter (vLLM's instrumentator), by status class
            # prometheus-operator sets `job` to the scraped Service's name (the metrics Service), not the workload's.
            job, status_5xx = f'job="{bp.metrics_service_name}"', 'status="5xx"'
            errors = f"sum(rate({engine.http_requests}{_selector(bp, job, status_5xx)}[5m]))"
            total = f"clamp_min(sum(rate({engine.http_requests}{_selector(bp, job)}[5m])), 1e-9)"
    elif bp.archetype in TRITON_SERVED:
        quantile, latency_ms = (0.95, slo.latency_p95_ms) if slo.latency_p95_ms else (0.99, slo.latency_p99_ms)
        if latency_ms:
            # Triton's summaries are per pod: the slowest pod's quantile against the target (a p95 against the p95
            # target; the mean would page while the p95 holds, or stay silent while it is broken).
            quantiles = _model_selector(bp, f'quantile="{quantile:g}"')
            rules.append(AlertRule("LatencyAboveSLO", f"max by (model) (nv_inference_request_summary_us{quantiles}) > "
                                   f"{latency_ms * 1000:g}", "10m", "page",
                                   f"p{quantile * 100:g} request latency of a model is above its {latency_ms:g} ms "
                                   "SLO on at least one replica"))
        rules.append(AlertRule("QueueBuildingUp", f"avg(nv_inference_pending_request_count{sel}) > "
                               f"{queue_alert_threshold(bp):g}", "10m", "ticket",
                               "Requests pending per replica beyond what keeps latency within its SLO: the autoscaler "
                               "is at its maximum or nodes cannot be added"))
        errors = f"sum(rate(nv_inference_request_failure{sel}[5m]))"
        total = (f"clamp_min(sum(rate(nv_inference_request_success{sel}[5m])) + "
                 f"sum(rate(nv_inference_request_failure{sel}[5m])), 1e-9)")
    else:
        errors = total = ""
    if errors:
        budget = 1 - slo.availability_pct / 100
        rules.append(AlertRule("ErrorBudgetFastBurn", f"({errors}) / ({total}) > {FAST_BURN_RATE * budget:.6g}", "5m",
                               "page", f"Errors spend the {slo.availability_pct:g} % availability budget "
                               f"{FAST_BURN_RATE:g}x too fast"))
    pods = _selector(bp, f'pod=~"{name}-.*"')
    deployment = _selector(bp, f'deployment="{name}"')
    rules.append(AlertRule("ServingPodRestarting", f"increase(kube_pod_container_status_restarts_total{pods}[15m]) > 0",
                           "0m", "ticket", "A serving container restarted: check OOM kills and probe failures"))
    # A batch on its cron schedule has minimum 0 (none outside it), as a scaled-to-zero stack has none while idle.
    if bp.autoscaling.min_replicas >= 1:
        rules.append(AlertRule("ServingReplicasUnavailable",
                               f"kube_deployment_status_replicas_available{deployment} < "
                               f"{bp.autoscaling.min_replicas}", "15m", "page",
                               "Fewer replicas available than the autoscaling minimum"))
    else:  # scaled to zero is the normal idle state: page only when replicas asked for do not come up
        wait_min = math.ceil(bp.startup.total_s * 1.5 / 60)
        rules.append(AlertRule("ServingReplicasUnavailable",
                               f"kube_deployment_spec_replicas{deployment} - "
                               f"kube_deployment_status_replicas_available{deployment} > 0", f"{wait_min}m", "page",
                               "Replicas asked for by the autoscaler are not available after 1.5 cold starts (the "
                               "minimum is 0, so no replica at all is normal while idle or outside a batch's "
                               "schedule)"))
    return [*rules, *router_alerts(bp)]


#: `RouterHasNoEngines` fires when the router forwards less than this share of its incoming requests to an engine.
ROUTER_FORWARDED_MIN_FRACTION = 0.01


def router_alerts(bp: Blueprint) -> list[AlertRule]:
    """The router's alerts (`blueprints.contracts.router`). From kube-state-metrics on its Deployment: no router pod
    available is an outage of the endpoint (every request goes through it: page); fewer than planned is a lost
    spare (ticket). From the router's own series (job `<service>-router-metrics`): requests come in and (almost) none
    reaches an engine, as when its pod watcher cannot list the engine pods: every request gets 404 "Model not found"
    while /health stays 200 (catalog router.yaml), so no probe and no availability alert sees it (page). None
    without a router."""
    if bp.router is None:
        return []
    deployment = _selector(bp, f'deployment="{router_workload_name(bp.service)}"')
    available = f"kube_deployment_status_replicas_available{deployment}"
    router = _selector(bp, f'job="{router_metrics_service_name(bp.service)}"')
    forwarded = (f"(sum(rate(vllm:request_latency_seconds_count{router}[5m])) or vector(0)) / "
                 f"sum(rate(vllm:num_incoming_requests_total{router}[5m]))")
    return [AlertRule("RouterDown", f"{available} < 1", "2m", "page",
                      "No router pod is available: the router fronts every request, so the endpoint is down"),
            AlertRule("RouterDegraded", f"{available} < {bp.router.replicas}", "15m", "ticket",
                      f"Fewer than the {bp.router.replicas} planned router pods are available: one more failure "
                      "takes the endpoint down"),
            AlertRule("RouterHasNoEngines", f"{forwarded} < {ROUTER_FORWARDED_MIN_FRACTION:g}", "5m", "page",
                      "Requests reach the router but it forwards almost none to an engine (answers 404 'Model not "
                      "found'): its pod watcher lists no engine pod; check the router's logs for 'K8s watcher error' "
                      "and its NetworkPolicy's egress to the API server")]


@dataclass(frozen=True)
class Panel:
    """One dashboard panel: a PromQL expression, its unit (Grafana unit id) and an optional SLO threshold line."""

    title: str
    expr: str
    unit: str
    threshold: float | None = None


def dashboard_panels(bp: Blueprint) -> list[Panel]:
    """The serving dashboard: latency against the SLO, throughput, queue, cache and the hardware, per archetype."""
    sel = _model_selector(bp)
    pods = _selector(bp, f'pod=~"{bp.workload_name}-.*"')
    slo = bp.slo
    panels: list[Panel] = []
    if bp.archetype is Archetype.VLLM_GPU:
        signal = engine_facts(bp.engine.kind).signal
        panels += [
            Panel("TTFT p95", _quantile(signal("ttft_seconds"), sel, window="1m"), "s",
                  slo.ttft_p95_ms / 1000 if slo.ttft_p95_ms else None),
            Panel("ITL p95", _quantile(signal("itl_seconds"), sel, window="1m"), "s",
                  slo.itl_p95_ms / 1000 if slo.itl_p95_ms else None),
            Panel("Output tokens/s", f"sum(rate({signal('generation_tokens')}{sel}[1m]))", "short"),
            Panel("Requests waiting", f"sum({signal('waiting')}{sel})", "short"),
            Panel("Requests running", f"sum({signal('running')}{sel})", "short"),
            Panel("KV cache usage (max)", f"max({signal('kv_cache_usage')}{sel})", "percentunit", 0.9),
        ]
    elif bp.archetype in TRITON_SERVED:
        p95 = _model_selector(bp, 'quantile="0.95"')
        panels += [
            Panel("p95 latency by model (slowest replica)",
                  f"max by (model) (nv_inference_request_summary_us{p95}) / 1000", "ms", slo.latency_p95_ms),
            Panel("Requests pending", f"sum(nv_inference_pending_request_count{sel})", "short"),
            Panel("Mean queue time", f"sum(rate(nv_inference_queue_duration_us{sel}[1m])) / "
                  f"clamp_min(sum(rate(nv_inference_request_success{sel}[1m])), 1e-9) / 1000", "ms"),
            Panel("Inferences/s by model", f"sum by (model) (rate(nv_inference_count{sel}[1m]))", "short"),
        ]
    if bp.archetype is Archetype.ONNX_CPU:
        panels.append(Panel("CPU cores used", f"sum(rate(container_cpu_usage_seconds_total{pods}[1m]))", "short"))
    deployment = _selector(bp, f'deployment="{bp.workload_name}"')
    panels.append(Panel("Available replicas", f"kube_deployment_status_replicas_available{deployment}", "short"))
    if bp.compute.gpus_per_replica:
        panels += [Panel("GPU utilisation", f"avg(DCGM_FI_DEV_GPU_UTIL{pods})", "percent"),
                   Panel("GPU memory used", f"sum(DCGM_FI_DEV_FB_USED{pods})", "decmbytes")]
    return panels


def grafana_dashboard(bp: Blueprint) -> dict:
    """A Grafana dashboard (JSON model, schemaVersion 39) of `dashboard_panels`, two panels per row."""
    panels = []
    for index, panel in enumerate(dashboard_panels(bp)):
        field_config: dict = {"defaults": {"unit": panel.unit}, "overrides": []}
        if panel.threshold is not None:
            field_config["defaults"]["thresholds"] = {"mode": "absolute", "steps": [
                {"color": "green", "value": None}, {"color": "red", "value": panel.threshold}]}
            field_config["defaults"]["custom"] = {"thresholdsStyle": {"mode": "line"}}
        panels.append({"id": index + 1, "type": "timeseries", "title": panel.title,
                       "gridPos": {"h": 8, "w": 12, "x": 12 * (index % 2), "y": 8 * (index // 2)},
                       "datasource": {"type": "prometheus", "uid": "${datasource}"},
                       "targets": [{"refId": "A", "expr": panel.expr}], "fieldConfig": field_config})
    return {
        "title": f"{bp.stack} serving", "uid": bp.stack[:40], "schemaVersion": 39, "editable": False,
        "tags": ["servingblueprints", bp.archetype.value], "time": {"from": "now-6h", "to": "now"},
        "templating": {"list": [{"name": "datasource", "type": "datasource", "query": "prometheus"}]},
        "panels": panels,
    }


#: A rollback alarm's threshold is at least this multiple of the metric's steady state. [assumption] 10 % for noise.
ROLLBACK_MARGIN = 1.1


@dataclass(frozen=True)
class CloudWatchAlarmSpec:
    """A CloudWatch alarm on a SageMaker endpoint variant (AWS/SageMaker metrics, dimensions EndpointName and
    VariantName; instance metrics in /aws/sagemaker/Endpoints).

    `steady_state` is the value the metric is expected to hold at the planned peak (None when unknown); an alarm
    rolls a deployment back (`rollback`) only when its threshold lies at least `ROLLBACK_MARGIN` above its steady
    state, so a healthy green fleet cannot trip it.
    """

    name: str
    namespace: str
    metric_name: str
    statistic: str
    threshold: float
    comparison: str
    period_s: int
    evaluation_periods: int
    description: str
    steady_state: float | None = None

    @property
    def rollback(self) -> bool:
        return self.steady_state is not None and self.steady_state * ROLLBACK_MARGIN <= self.threshold


#: Whole-request latency alarm of a generative endpoint: predicted p95 x this (headroom over the steady state).
LLM_LATENCY_ALARM_FACTOR = 1.5


def cloudwatch_alarm_specs(bp: Blueprint) -> list[CloudWatchAlarmSpec]:
    """SageMaker alarms from the SLOs: ModelLatency p95 (microseconds) against the latency target, ModelLatency p99
    against `slo.latency_p99_ms` when set (CloudWatch's extended statistic `p99`; not a rollback alarm: the plan
    predicts no p99 for a non-generative model, so its steady state is unknown), 5XX errors, and on GPU instances
    serving non-generative models GPU memory above 90 %. A generative model's `ttft_p99_ms` / `itl_p99_ms` get no
    alarm here: SageMaker publishes a whole-request latency (ModelLatency), not TTFT or token gaps. Generative engines
    (LMI's vLLM) preallocate `gpu_memory_utilization` of GPU memory at start, so GPU memory there sits near 90 % when
    healthy: no alarm. A batch's asynchronous endpoint also alarms on any expired request (ExpiredRequests, Sum) and
    on failed invocations (InvocationFailures, Sum). Source: docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch.html,
    awsdocs amazon-sagemaker-developer-guide doc_source/async-inference-monitor.md.
    """
    specs = []
    latency_ms = bp.slo.latency_p95_ms
    predicted = bp.predictions.latency_p95_ms
    if latency_ms is None and bp.slo.ttft_p95_ms is not None and predicted is not None:
        latency_ms = predicted * LLM_LATENCY_ALARM_FACTOR  # generative: whole-request latency, with headroom
    if latency_ms is not None:
        specs.append(CloudWatchAlarmSpec("model-latency-p95", "AWS/SageMaker", "ModelLatency", "p95",
                                         latency_ms * 1000, "GreaterThanThreshold", 60, 5,
                                         f"ModelLatency p95 above {latency_ms:g} ms",
                                         steady_state=predicted * 1000 if predicted is not None else None))
    if bp.slo.latency_p99_ms is not None and not bp.model.task.generative:
        p99_ms = bp.slo.latency_p99_ms
        specs.append(CloudWatchAlarmSpec("model-latency-p99", "AWS/SageMaker", "ModelLatency", "p99", p99_ms * 1000,
                                         "GreaterThanThreshold", 60, 5, f"ModelLatency p99 above {p99_ms:g} ms"))
    specs.append(CloudWatchAlarmSpec("invocation-5xx", "AWS/SageMaker", "Invocation5XXErrors", "Sum", 0,
                                     "GreaterThanThreshold", 60, 5, "The model container returned 5xx errors",
                                     steady_state=0.0))
    if bp.batch is not None and bp.batch.async_inference is not None:  # a batch's asynchronous endpoint
        specs += [CloudWatchAlarmSpec("expired-requests", "AWS/SageMaker", "ExpiredRequests", "Sum", 0,
                                      "GreaterThanThreshold", 60, 1, "Queued requests expired (RequestTTLSeconds) "
                                      "before an instance took them: the batch was not served in time"),
                  CloudWatchAlarmSpec("invocation-failures", "AWS/SageMaker", "InvocationFailures", "Sum", 0,
                                      "GreaterThanThreshold", 60, 5, "Asynchronous invocations failed (results "
                                      "under the batch's failed/ prefix)")]
    if bp.compute.gpu is not None and not bp.model.task.generative:
        specs.append(CloudWatchAlarmSpec("gpu-memory", "/aws/sagemaker/Endpoints", "GPUMemoryUtilization", "Average",
                                         90, "GreaterThanThreshold", 60, 10, "GPU memory above 90 %"))
    return specs


def rollback_alarm_names(bp: Blueprint, name_of) -> list[str]:
    """Names (`name_of(spec)`) of the alarms a blue/green deployment rolls back on: those above their steady state."""
    return [name_of(spec) for spec in cloudwatch_alarm_specs(bp) if spec.rollback]
