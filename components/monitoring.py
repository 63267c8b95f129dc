"""Monitoring from the SLOs: Prometheus scraping, alert rules and a Grafana dashboard on Kubernetes; CloudWatch
alarms and a dashboard for SageMaker endpoints. Every expression comes from `blueprints.contracts.observability`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from blueprints.catalog.engines import engine_facts
from blueprints.contracts.sections import Archetype
from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.observability import (
    CloudWatchAlarmSpec, cloudwatch_alarm_specs, grafana_dashboard, rollback_alarm_names, slo_alerts,
)
from blueprints.contracts.router import router_workload_name
from components.labels import recommended_labels, router_labels, selector_labels


@dataclass
class KubernetesMonitoringArgs:
    """Inputs of `KubernetesMonitoring`.

    Args:
        blueprint: the planned stack.
        namespace: the serving namespace.
        selector: labels of the serving Service to scrape.
        metrics_port: the Service port name that serves /metrics.
        prometheus_release: the `release` label kube-prometheus-stack selects ServiceMonitors and rules by.
            Defaults to `kube-prometheus-stack`.
    """

    blueprint: Blueprint
    namespace: pulumi.Input[str]
    selector: dict[str, str]
    metrics_port: str
    prometheus_release: str = "kube-prometheus-stack"


def metrics_path(bp: Blueprint) -> str:
    """Where the serving container serves Prometheus text: a self-hosted LLM engine's own path (engines.yaml
    `metrics.path`; TensorRT-LLM's /metrics is JSON, its Prometheus text is /prometheus/metrics), else /metrics."""
    if bp.archetype is Archetype.VLLM_GPU:
        return engine_facts(bp.engine.kind).metrics.path
    return "/metrics"


class KubernetesMonitoring(pulumi.ComponentResource):
    """ServiceMonitor, PrometheusRule (SLO alerts) and a Grafana dashboard ConfigMap (`grafana_dashboard: "1"`).
    GPU metrics come from the platform's DCGM exporter. Outputs: `alert_names`."""

    def __init__(self, name: str, args: KubernetesMonitoringArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("servingblueprints:index:KubernetesMonitoring", name, None, opts)
        bp = args.blueprint
        child = pulumi.ResourceOptions(parent=self)
        labels = {**recommended_labels(name=bp.engine.kind, instance=bp.stack, component="monitoring"),
                  "release": args.prometheus_release}
        base = bp.workload_name
        self.service_monitor = k8s.apiextensions.CustomResource(
            f"{name}-servicemonitor", api_version="monitoring.coreos.com/v1", kind="ServiceMonitor",
            metadata={"name": base, "namespace": args.namespace, "labels": labels},
            spec={"selector": {"matchLabels": args.selector},
                  "endpoints": [{"port": args.metrics_port, "path": metrics_path(bp), "interval": "15s"}]},
            opts=child)
        # The router (prompt reuse over several replicas) is scraped through its own metrics Service: its series
        # carry that Service's name as `job`, apart from the engine's.
        self.router_monitor = k8s.apiextensions.CustomResource(
            f"{name}-router-servicemonitor", api_version="monitoring.coreos.com/v1", kind="ServiceMonitor",
            metadata={"name": router_workload_name(bp.service), "namespace": args.namespace, "labels": labels},
            spec={"selector": {"matchLabels": selector_labels(router_labels(bp.stack, bp.router.image))},
                  "endpoints": [{"port": "metrics", "path": "/metrics", "interval": "15s"}]},
            opts=child) if bp.router is not None else None
        rules = slo_alerts(bp)
        self.rules = k8s.apiextensions.CustomResource(
            f"{name}-rules", api_version="monitoring.coreos.com/v1", kind="PrometheusRule",
            metadata={"name": f"{base}-slo", "namespace": args.namespace, "labels": labels},
            spec={"groups": [{"name": f"{bp.stack}-slo", "rules": [
                {"alert": r.name, "expr": r.expr, "for": r.for_,
                 "labels": {"severity": r.severity, "service": bp.service, "environment": bp.environment},
                 "annotations": {"summary": r.summary}} for r in rules]}]},
            opts=child)
        self.dashboard = k8s.core.v1.ConfigMap(
            f"{name}-dashboard",
            metadata={"name": f"{base}-dashboard", "namespace": args.namespace,
                      "labels": {**labels, "grafana_dashboard": "1"}},
            data={f"{bp.stack}.json": json.dumps(grafana_dashboard(bp), sort_keys=True)},
            opts=child)
        self.alert_names = [r.name for r in rules]
        self.register_outputs({"alert_names": self.alert_names})


@dataclass
class EndpointMonitoringArgs:
    """Inputs of `EndpointMonitoring`: the blueprint, the endpoint and variant names, and SNS topics to notify."""

    blueprint: Blueprint
    endpoint_name: pulumi.Input[str]
    variant_name: str
    alarm_actions: list[pulumi.Input[str]] = field(default_factory=list)


def alarm_name(bp: Blueprint, spec: CloudWatchAlarmSpec) -> str:
    """`<stack>-<alarm>`: fixed, so the endpoint's rollback configuration can list alarms by name."""
    return f"{bp.stack}-{spec.name}"


class EndpointMonitoring(pulumi.ComponentResource):
    """CloudWatch alarms from the SLOs and a CloudWatch dashboard for a SageMaker endpoint.

    Outputs: `alarm_arns`, `alarm_names`, `rollback_alarm_names` (the alarms above their steady state, which the
    endpoint's blue/green auto-rollback watches), `dashboard_name`.
    """

    def __init__(self, name: str, args: EndpointMonitoringArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("servingblueprints:index:EndpointMonitoring", name, None, opts)
        bp = args.blueprint
        child = pulumi.ResourceOptions(parent=self)
        dims = {"EndpointName": args.endpoint_name, "VariantName": args.variant_name}
        self.alarms = []
        for spec in cloudwatch_alarm_specs(bp):
            stat = {"extended_statistic": spec.statistic} if spec.statistic.startswith("p") else \
                {"statistic": spec.statistic}
            self.alarms.append(aws.cloudwatch.MetricAlarm(
                f"{name}-{spec.name}", name=alarm_name(bp, spec), namespace=spec.namespace, metric_name=spec.metric_name, dimensions=dims,
                period=spec.period_s, evaluation_periods=spec.evaluation_periods, threshold=spec.threshold,
                comparison_operator=spec.comparison, treat_missing_data="notBreaching",
                alarm_description=spec.description, alarm_actions=args.alarm_actions, tags=bp.tags, **stat,
                opts=child))
        body = pulumi.Output.from_input(args.endpoint_name).apply(lambda endpoint: json.dumps({"widgets": [
            {"type": "metric", "width": 12, "height": 6, "x": 12 * (i % 2), "y": 6 * (i // 2),
             "properties": {"title": s.metric_name, "region": bp.region, "view": "timeSeries",
                            "stat": s.statistic,
                            "metrics": [[s.namespace, s.metric_name, "EndpointName", endpoint,
                                         "VariantName", args.variant_name]],
                            "annotations": {"horizontal": [{"value": s.threshold, "label": "threshold"}]}}}
            for i, s in enumerate(cloudwatch_alarm_specs(bp))]}, sort_keys=True))
        self.dashboard = aws.cloudwatch.Dashboard(f"{name}-dashboard", dashboard_name=f"{bp.stack}-serving",
                                                  dashboard_body=body, opts=child)
        self.alarm_arns = [a.arn for a in self.alarms]
        self.alarm_names = [alarm_name(bp, spec) for spec in cloudwatch_alarm_specs(bp)]
        self.rollback_alarm_names = rollback_alarm_names(bp, lambda spec: alarm_name(bp, spec))
        self.dashboard_name = self.dashboard.dashboard_name
        self.register_outputs({"alarm_arns": self.alarm_arns, "dashboard_name": self.dashboard_name})
