"""Monitoring: alert thresholds are the requirements' SLOs; scraping, dashboards and CloudWatch alarms exist."""

from __future__ import annotations

import json

import pytest

from blueprints.review.manifests import validate_manifest
from blueprints.contracts.observability import FAST_BURN_RATE, cloudwatch_alarm_specs, queue_alert_threshold, slo_alerts
from blueprints.review.preview import manifest, run_under_mocks
from components.monitoring import (
    EndpointMonitoring,
    EndpointMonitoringArgs,
    KubernetesMonitoring,
    KubernetesMonitoringArgs,
)
from tests.conftest import requirements_with, plan_env

SELECTOR = {"app.kubernetes.io/name": "vllm", "app.kubernetes.io/instance": "chat-assistant-prod"}


@pytest.fixture()
def k8s_run(chat_prod):
    return run_under_mocks(lambda: KubernetesMonitoring("m", KubernetesMonitoringArgs(
        blueprint=chat_prod, namespace="serving", selector=SELECTOR, metrics_port="http")), stack=chat_prod.stack)


def rules_by_name(run):
    rule = run.one("kubernetes:monitoring.coreos.com/v1:PrometheusRule").inputs
    return {r["alert"]: r for r in rule["spec"]["groups"][0]["rules"]}


def test_latency_alert_thresholds_equal_the_slos(k8s_run):
    rules = rules_by_name(k8s_run)
    assert rules["TTFTP95AboveSLO"]["expr"].endswith("> 1.5")  # ttft_p95_ms: 1500 in the requirements
    assert rules["ITLP95AboveSLO"]["expr"].endswith("> 0.05")  # itl_p95_ms: 50
    assert "vllm:time_to_first_token_seconds_bucket" in rules["TTFTP95AboveSLO"]["expr"]
    assert "vllm:inter_token_latency_seconds_bucket" in rules["ITLP95AboveSLO"]["expr"]


def test_changed_slo_moves_the_alert():
    bp = plan_env(requirements_with(slo={"ttft_p95_ms": 900, "itl_p95_ms": 80}), "prod")
    by_name = {r.name: r for r in slo_alerts(bp)}
    assert by_name["TTFTP95AboveSLO"].expr.endswith("> 0.9")
    assert by_name["ITLP95AboveSLO"].expr.endswith("> 0.08")


def test_error_budget_alert_follows_availability(k8s_run):
    expr = rules_by_name(k8s_run)["ErrorBudgetFastBurn"]["expr"]
    assert expr.endswith(f"> {FAST_BURN_RATE * 0.001:.6g}")  # availability_pct 99.9
    assert 'status="5xx"' in expr


def test_queue_kv_cache_and_restart_alerts_exist(k8s_run, chat_prod):
    rules = rules_by_name(k8s_run)
    assert rules["KVCacheNearlyFull"]["expr"].endswith("> 0.9")
    # Waiting requests per replica beyond which a new request's TTFT leaves the 1,500 ms SLO.
    per_replica = chat_prod.predictions.requests_per_s_capacity / chat_prod.compute.replicas
    margin_s = (1500 - chat_prod.predictions.ttft_p95_ms) / 1e3
    assert queue_alert_threshold(chat_prod) == pytest.approx(margin_s * per_replica, rel=0.01)
    assert rules["QueueBuildingUp"]["expr"] == ('avg(vllm:num_requests_waiting{namespace="chat-assistant", '
                                                f'model_name="llama-3-1-8b"}}) > {queue_alert_threshold(chat_prod):g}')
    assert "kube_pod_container_status_restarts_total" in rules["ServingPodRestarting"]["expr"]
    assert rules["ServingReplicasUnavailable"]["expr"].endswith(f"< {chat_prod.autoscaling.min_replicas}")


def test_service_monitor_scrapes_the_serving_service(k8s_run):
    [sm] = [r.inputs for r in k8s_run.of_type("kubernetes:monitoring.coreos.com/v1:ServiceMonitor")
            if r.inputs["metadata"]["name"] == "chat-assistant-vllm"]
    assert sm["spec"]["selector"]["matchLabels"] == SELECTOR
    assert sm["spec"]["endpoints"] == [{"interval": "15s", "path": "/metrics", "port": "http"}]
    assert sm["metadata"]["labels"]["release"] == "kube-prometheus-stack"


def test_dashboard_has_the_serving_panels(k8s_run):
    cm = k8s_run.one("kubernetes:core/v1:ConfigMap").inputs
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    [body] = cm["data"].values()
    titles = [p["title"] for p in json.loads(body)["panels"]]
    for title in ("TTFT p95", "ITL p95", "Output tokens/s", "Requests waiting", "KV cache usage (max)",
                  "GPU utilisation"):
        assert title in titles


def test_a_service_installs_no_gpu_exporter_of_its_own_the_platform_runs_it(k8s_run):
    assert k8s_run.of_type("kubernetes:helm.sh/v3:Release") == []


def test_monitoring_manifests_match_their_schemas(k8s_run):
    for record in k8s_run.records:
        if record.custom and record.type.startswith("kubernetes:") and "helm.sh" not in record.type:
            assert validate_manifest(manifest(record)) == [], record.type


def test_sagemaker_alarms_follow_the_slos(chat_prod):
    bp = chat_prod.model_copy(update={"slo": chat_prod.slo.model_copy(update={"latency_p95_ms": 2500})})
    run = run_under_mocks(lambda: EndpointMonitoring("e", EndpointMonitoringArgs(
        blueprint=bp, endpoint_name="chat-ep", variant_name="primary")), stack=bp.stack)
    alarms = {r.name: r.inputs for r in run.of_type("aws:cloudwatch/metricAlarm:MetricAlarm")}
    latency = alarms["e-model-latency-p95"]
    assert (latency["metricName"], latency["extendedStatistic"], latency["threshold"]) == ("ModelLatency", "p95",
                                                                                            2_500_000)
    assert latency["dimensions"] == {"EndpointName": "chat-ep", "VariantName": "primary"}
    assert alarms["e-invocation-5xx"]["metricName"] == "Invocation5XXErrors"
    # An LLM engine preallocates GPU memory (gpu_memory_utilization): a GPU-memory alarm would sit in ALARM.
    assert "e-gpu-memory" not in alarms
    body = json.loads(run.one("aws:cloudwatch/dashboard:Dashboard").inputs["dashboardBody"])
    assert len(body["widgets"]) == len(cloudwatch_alarm_specs(bp)) == 2
