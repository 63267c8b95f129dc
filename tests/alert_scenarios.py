"""Input series for `promtool test rules`: for every alert the program generates, the series of a stack whose SLO is
broken (the alert must fire, with these labels) and of one whose SLO holds (it must stay quiet).

Series carry the labels prometheus-operator gives a ServiceMonitor's targets (`job` = the scraped Service's name,
`namespace`, `service`, `pod`, `endpoint` = the port name, `instance`, `container`) beside the engine's own labels
(vLLM `model_name`, `engine`; Triton `model`, `version`); kube-state-metrics series carry its job and the object's
namespace (its ServiceMonitor honours the exporter's labels). Values use promtool's expanding notation (`0+10x40`:
0, 10, 20, ... every minute).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from blueprints.catalog.engines import engine_facts
from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.observability import queue_alert_threshold
from blueprints.contracts.router import router_metrics_service_name, router_workload_name
from blueprints.contracts.sections import Archetype, TritonEngine

#: Minutes of input, and when each alert is evaluated (past every `for:` of the rules, 0-17 min).
SAMPLES = 45
EVAL_TIME = "40m"


@dataclass
class Scenario:
    """`broken` and `holding` input series (`{"series": ..., "values": ...}`), and the labels the firing alert carries
    besides its rule's own (those the expression keeps)."""

    broken: list[dict[str, str]]
    holding: list[dict[str, str]]
    labels: dict[str, str] = field(default_factory=dict)


def _series(metric: str, labels: dict[str, str], values: str) -> dict[str, str]:
    body = ", ".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{metric}{{{body}}}", "values": values}


def target_labels(bp: Blueprint) -> dict[str, str]:
    """What prometheus-operator attaches to a series it scrapes from the engine's metrics Service."""
    port = bp.engine.metrics_port if isinstance(bp.engine, TritonEngine) else 8002 if \
        bp.archetype is Archetype.ONNX_CPU else bp.engine.port
    return {"namespace": bp.platform.namespace, "job": bp.metrics_service_name, "service": bp.metrics_service_name,
            "endpoint": "metrics", "pod": f"{bp.workload_name}-6f9c8d7b5-x2k7q", "instance": f"10.0.12.34:{port}",
            "container": bp.engine.kind}


def engine_labels(bp: Blueprint) -> dict[str, str]:
    if bp.archetype is Archetype.VLLM_GPU:  # the model label its engine names (engines.yaml model_label)
        return {**target_labels(bp), engine_facts(bp.engine.kind).model_label: bp.model.name, "engine": "0"}
    return {**target_labels(bp), "model": bp.models[0].name, "version": "1"}


def kube_state_labels(bp: Blueprint, **extra: str) -> dict[str, str]:
    return {"job": "kube-state-metrics", "namespace": bp.platform.namespace, "service":
            "kube-prometheus-stack-kube-state-metrics", "endpoint": "http", "instance": "10.0.1.5:8080", **extra}


def _histogram(metric: str, labels: dict[str, str], target_s: float, *, above: bool) -> list[dict[str, str]]:
    """Buckets at target/2, 2 x target and +Inf, 10 observations a minute: all above target/2 (p95 1.9 x target),
    or all below it (p95 0.48 x target)."""
    low, high = f"{target_s / 2:g}", f"{target_s * 2:g}"
    return [_series(f"{metric}_bucket", {**labels, "le": low}, "0x45" if above else "0+10x45"),
            _series(f"{metric}_bucket", {**labels, "le": high}, "0+10x45"),
            _series(f"{metric}_bucket", {**labels, "le": "+Inf"}, "0+10x45")]


def scenarios(bp: Blueprint) -> dict[str, Scenario]:
    """Every alert the program can generate for `bp`'s archetype, by name."""
    slo, engine = bp.slo, engine_labels(bp)
    found: dict[str, Scenario] = {}
    threshold = queue_alert_threshold(bp)
    if bp.archetype is Archetype.VLLM_GPU:
        facts = engine_facts(bp.engine.kind)
        signal = facts.signal
        # All observations between target/2 and 2 x target put both the p95 and the p99 above the target, all below
        # target/2 both below it.
        for name, metric, target_ms in (("TTFTP95AboveSLO", signal("ttft_seconds"), slo.ttft_p95_ms),
                                        ("ITLP95AboveSLO", signal("itl_seconds"), slo.itl_p95_ms),
                                        ("TTFTP99AboveSLO", signal("ttft_seconds"), slo.ttft_p99_ms),
                                        ("ITLP99AboveSLO", signal("itl_seconds"), slo.itl_p99_ms)):
            if target_ms:
                found[name] = Scenario(_histogram(metric, engine, target_ms / 1000, above=True),
                                       _histogram(metric, engine, target_ms / 1000, above=False))
        waiting, kv = signal("waiting"), signal("kv_cache_usage")
        found["QueueBuildingUp"] = Scenario([_series(waiting, engine, f"{threshold * 2 + 1:g}x45")],
                                            [_series(waiting, engine, "0x45")])
        found["KVCacheNearlyFull"] = Scenario([_series(kv, engine, "0.95x45")], [_series(kv, engine, "0.5x45")])
        if facts.http_requests:
            http = {**target_labels(bp), "handler": "/v1/chat/completions", "method": "POST"}
            ok = _series(facts.http_requests, {**http, "status": "2xx"}, "0+100x45")
            found["ErrorBudgetFastBurn"] = Scenario(
                [ok, _series(facts.http_requests, {**http, "status": "5xx"}, "0+20x45")],
                [ok, _series(facts.http_requests, {**http, "status": "5xx"}, "0x45")])
    else:
        target_ms, quantile = (slo.latency_p95_ms, "0.95") if slo.latency_p95_ms else (slo.latency_p99_ms, "0.99")
        if target_ms:
            summary = {**engine, "quantile": quantile}
            found["LatencyAboveSLO"] = Scenario(
                [_series("nv_inference_request_summary_us", summary, f"{target_ms * 2000:g}x45")],
                [_series("nv_inference_request_summary_us", summary, f"{target_ms * 500:g}x45")],
                labels={"model": engine["model"]})
        found["QueueBuildingUp"] = Scenario(
            [_series("nv_inference_pending_request_count", engine, f"{threshold * 2 + 1:g}x45")],
            [_series("nv_inference_pending_request_count", engine, "0x45")])
        ok = _series("nv_inference_request_success", engine, "0+100x45")
        found["ErrorBudgetFastBurn"] = Scenario([ok, _series("nv_inference_request_failure", engine, "0+20x45")],
                                                [ok, _series("nv_inference_request_failure", engine, "0x45")])
    restarts = kube_state_labels(bp, pod=engine["pod"], container=bp.engine.kind, uid="4f1c")
    found["ServingPodRestarting"] = Scenario(
        [_series("kube_pod_container_status_restarts_total", restarts, "0+1x45")],
        [_series("kube_pod_container_status_restarts_total", restarts, "0x45")], labels=restarts)
    deployment = kube_state_labels(bp, deployment=bp.workload_name)
    minimum = bp.autoscaling.min_replicas
    if minimum >= 1:
        found["ServingReplicasUnavailable"] = Scenario(
            [_series("kube_deployment_status_replicas_available", deployment, f"{minimum - 1}x45")],
            [_series("kube_deployment_status_replicas_available", deployment, f"{minimum}x45")], labels=deployment)
    else:  # scaled to zero is normal: only replicas asked for and not available page
        asked = _series("kube_deployment_spec_replicas", deployment, "1x45")
        found["ServingReplicasUnavailable"] = Scenario(
            [asked, _series("kube_deployment_status_replicas_available", deployment, "0x45")],
            [asked, _series("kube_deployment_status_replicas_available", deployment, "1x45")], labels=deployment)
    if bp.router is not None:
        router = kube_state_labels(bp, deployment=router_workload_name(bp.service))
        found["RouterDown"] = Scenario([_series("kube_deployment_status_replicas_available", router, "0x45")],
                                       [_series("kube_deployment_status_replicas_available", router, "1x45")],
                                       labels=router)
        found["RouterDegraded"] = Scenario(
            [_series("kube_deployment_status_replicas_available", router, f"{bp.router.replicas - 1}x45")],
            [_series("kube_deployment_status_replicas_available", router, f"{bp.router.replicas}x45")],
            labels=router)
        # 60 requests a minute come in; a router whose watcher lists no engine pod forwards none (its latency
        # histogram never gets a series), a working one forwards them all.
        scraped = router_target_labels(bp)
        incoming = _series("vllm:num_incoming_requests_total", {**scraped, "model": bp.model.name}, "0+60x45")
        forwarded = _series("vllm:request_latency_seconds_count", {**scraped, "server": "http://10.0.12.34:8080",
                                                                    "model": bp.model.name, "status": "success"},
                            "0+60x45")
        found["RouterHasNoEngines"] = Scenario([incoming], [incoming, forwarded])
    return found


def router_target_labels(bp: Blueprint) -> dict[str, str]:
    """What prometheus-operator attaches to a series it scrapes from the router's metrics Service."""
    service = router_metrics_service_name(bp.service)
    return {"namespace": bp.platform.namespace, "job": service, "service": service, "endpoint": "metrics",
            "pod": f"{router_workload_name(bp.service)}-7d4b9c6f8-q8w2e", "instance": "10.0.12.40:8001",
            "container": "router"}
