"""Autoscaling for each archetype, from the blueprint and the one scaling signal in `blueprints.contracts.observability`.

- A batch service (`Blueprint.batch`): a KEDA `ScaledObject` whose one `cron` trigger holds the planned replicas from
  the window's start to the deadline and none outside (minReplicaCount 0); always on when that is the whole day.
- vLLM / Triton: a KEDA `ScaledObject` on the Prometheus signal (requests running / pending per replica), scale-in
  stabilised for longer than a cold start. A stack planned to scale to zero (never in production) also gets the KEDA
  HTTP add-on's path (0.15: an `InterceptorRoute` and an `external-push` trigger, the non-deprecated API; the
  deprecated `HTTPScaledObject` is not used): the engine's own metrics vanish with its last pod, so only the
  interceptor, which holds requests while a replica starts, can wake it. Clients reach it through `<workload>-proxy`
  (an ExternalName Service to the interceptor proxy).
- ONNX Runtime on CPU: an `autoscaling/v2` HorizontalPodAutoscaler on CPU utilisation (the plan's target, %;
  requests == limits, so 100 % is the whole limit).
- SageMaker: Application Auto Scaling target tracking on invocations per instance at the plan's target, scale-in
  cooldown from the startup budget; the scalable target is deregistered around an instance-type change
  (`instance_type_gate`). A batch's asynchronous endpoint (`batch.async_inference`) scales from zero on its queue:
  minimum 0, target tracking on the customized `ApproximateBacklogSizePerInstance` (AWS/SageMaker, EndpointName,
  Average), and a step policy that a `HasBacklogWithoutCapacity` alarm fires to start the planned instances from
  zero (awsdocs amazon-sagemaker-developer-guide doc_source/async-inference-autoscale.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s
import pulumi_random as random

from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.sections import BACKLOG_PER_INSTANCE, CRON_SCHEDULE, KedaCron
from blueprints.catalog.addons import load_platform_catalog
from blueprints.contracts.client_api import api_base_path
from blueprints.contracts.observability import scaling_signal
from components.labels import recommended_labels
from components.rollout import progress_deadline_s

#: KEDA's polling interval, s (its default is 30; 15 halves the reaction time to a burst).
KEDA_POLLING_INTERVAL_S = 15
#: The KEDA HTTP add-on's catalog id (its endpoints: the interceptor proxy and the external scaler).
HTTP_ADD_ON = "keda-http-add-on"


@dataclass
class KubernetesScalerArgs:
    """Inputs of `KubernetesScaler`.

    Args:
        blueprint: the planned stack.
        deployment_name: the Deployment to scale.
        namespace: its namespace.
        prometheus_url: Prometheus server address KEDA queries (vLLM/Triton).
        service_name: the serving Service the interceptor forwards to (scale to zero). Defaults to the blueprint's
            workload name.
    """

    blueprint: Blueprint
    deployment_name: pulumi.Input[str]
    namespace: pulumi.Input[str]
    prometheus_url: pulumi.Input[str]
    service_name: pulumi.Input[str] | None = None


def proxy_service_name(bp: Blueprint) -> str:
    """The in-cluster name clients of a scaled-to-zero service call (an ExternalName Service to the interceptor)."""
    return f"{bp.workload_name}-proxy"


def interceptor_hosts(bp: Blueprint) -> list[str]:
    """Host headers the interceptor routes to this service: the proxy Service's in-cluster names."""
    proxy, ns = proxy_service_name(bp), bp.platform.namespace
    return [proxy, f"{proxy}.{ns}", f"{proxy}.{ns}.svc", f"{proxy}.{ns}.svc.cluster.local"]


def interceptor_route_spec(bp: Blueprint, service_name: str) -> dict:
    """InterceptorRoute (http.keda.sh/v1beta1) spec: route the proxy names to the serving Service, scale on
    in-flight requests per replica, hold a cold request for up to the progress deadline (a cold start on a new node,
    x1.5) and wait for response headers as long as the longest planned response."""
    return {
        "target": {"service": service_name, "port": bp.serving_port},
        "rules": [{"hosts": interceptor_hosts(bp)}],
        "scalingMetric": {"concurrency": {"targetValue": bp.autoscaling.interceptor_concurrency_target}},
        "timeouts": {"readiness": f"{progress_deadline_s(bp)}s",
                     "responseHeader": f"{bp.network.load_balancer_idle_timeout_s}s"},
    }


def batch_trigger(cron: KedaCron) -> dict:
    """A batch's KEDA `cron` trigger: `desiredReplicas` from `start` to `end` in `timezone` (KEDA 2.20.2
    pkg/scalers/cron_scaler.go L30-36, every key required and a string as trigger metadata is; the catalog's keda
    `cron_scaler` facts), so the ScaledObject runs the planned fleet only then, none outside."""
    return {"type": "cron", "metadata": {"timezone": cron.timezone, "start": cron.start, "end": cron.end,
                                         "desiredReplicas": str(cron.desired_replicas)}}


class KubernetesScaler(pulumi.ComponentResource):
    """A KEDA ScaledObject (the plan's signal; with scale to zero also the HTTP add-on's InterceptorRoute and proxy
    Service) or, for CPU archetypes, an HPA on CPU. Outputs: `kind`, `endpoint` (the proxy URL, ending in the API's base
    path, when scaled to zero; else None)."""

    def __init__(self, name: str, args: KubernetesScalerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("servingblueprints:index:KubernetesScaler", name, None, opts)
        bp = args.blueprint
        a = bp.autoscaling
        child = pulumi.ResourceOptions(parent=self)
        labels = recommended_labels(name=bp.engine.kind, instance=bp.stack, component="autoscaler")
        metadata = {"name": bp.workload_name, "namespace": args.namespace, "labels": labels}
        behavior = {"scaleDown": {"stabilizationWindowSeconds": a.cooldown_s,
                                  "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}]},
                    "scaleUp": {"stabilizationWindowSeconds": 0,
                                "policies": [{"type": "Pods", "value": 2, "periodSeconds": 60}]}}
        signal = scaling_signal(bp)
        self.endpoint: pulumi.Input[str] | None = None
        # A batch's autoscaling states its schedule (`BatchPlan.scaling`): the cron scaler, 0 outside its run; or
        # pinned at its replicas all day (its queue would otherwise hold the signal above target).
        cron = bp.batch.keda_cron if bp.batch is not None and a.metric == CRON_SCHEDULE else None
        if signal is not None or cron is not None:
            route = []
            if cron is not None:  # a batch: its fleet from the window's start to the deadline, none outside
                triggers = [batch_trigger(cron)]
                # Every replica at once at the window's start (the replay starts them together).
                behavior["scaleUp"]["policies"] = [{"type": "Pods", "value": max(2, cron.desired_replicas),
                                                    "periodSeconds": 60}]
            else:
                assert signal is not None
                triggers = [{"type": "prometheus", "metricType": signal.metric_type, "metadata": {
                    "serverAddress": args.prometheus_url, "query": signal.query,
                    "threshold": f"{signal.threshold:g}", "ignoreNullValues": "true"}}]
                if bp.wakes_on_request:
                    route, trigger = self._wake_path(name, bp, args, labels, child)
                    triggers.append(trigger)
            spec = {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": args.deployment_name},
                "pollingInterval": KEDA_POLLING_INTERVAL_S,
                # Scale to zero only after a quiet period longer than a cold start; KEDA applies it to 1 -> 0.
                "cooldownPeriod": a.cooldown_s,
                # No scale-in during the first cold start (KEDA >= 2.13).
                "initialCooldownPeriod": bp.startup.total_s,
                "minReplicaCount": a.min_replicas,
                "maxReplicaCount": a.max_replicas,
                "advanced": {"horizontalPodAutoscalerConfig": {"behavior": behavior}},
                "triggers": triggers,
            }
            # After its InterceptorRoute: the add-on's scaler returns an empty metric spec for a route it does not
            # know, and KEDA then falls back to a CPU metric (keda-docs http-add-on/0.15 autoscale-an-app.md).
            self.scaler = k8s.apiextensions.CustomResource(
                f"{name}-scaledobject", api_version="keda.sh/v1alpha1", kind="ScaledObject",
                metadata=metadata, spec=spec, opts=pulumi.ResourceOptions(parent=self, depends_on=route))
            self.kind = "ScaledObject"
        else:
            self.scaler = k8s.autoscaling.v2.HorizontalPodAutoscaler(
                f"{name}-hpa", metadata=metadata,
                spec={"scale_target_ref": {"api_version": "apps/v1", "kind": "Deployment",
                                           "name": args.deployment_name},
                      "min_replicas": max(1, a.min_replicas), "max_replicas": a.max_replicas,
                      "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
                          "type": "Utilization", "average_utilization": int(a.target)}}}],
                      "behavior": {"scale_down": {"stabilization_window_seconds": a.cooldown_s,
                                                  "policies": [{"type": "Pods", "value": 1, "period_seconds": 60}]},
                                   "scale_up": {"stabilization_window_seconds": 0,
                                                "policies": [{"type": "Pods", "value": 2, "period_seconds": 60}]}}},
                opts=child)
            self.kind = "HorizontalPodAutoscaler"
        self.register_outputs({"kind": self.kind, "endpoint": self.endpoint})

    def _wake_path(self, name: str, bp: Blueprint, args: KubernetesScalerArgs, labels: dict[str, str],
                   child: pulumi.ResourceOptions) -> tuple[list[pulumi.Resource], dict]:
        """The HTTP add-on's InterceptorRoute, the `<workload>-proxy` ExternalName Service clients call, and the
        ScaledObject trigger that reads the interceptor (it reports activity while requests are held at zero)."""
        addon = load_platform_catalog().addon(HTTP_ADD_ON)
        proxy_host, proxy_port = addon.endpoints["interceptor-proxy"].rsplit(":", 1)
        route = k8s.apiextensions.CustomResource(
            f"{name}-interceptorroute", api_version="http.keda.sh/v1beta1", kind="InterceptorRoute",
            metadata={"name": bp.workload_name, "namespace": args.namespace, "labels": labels},
            spec=pulumi.Output.from_input(args.service_name or bp.workload_name).apply(
                lambda service: interceptor_route_spec(bp, service)),
            opts=child)
        proxy = k8s.core.v1.Service(
            f"{name}-proxy", metadata={"name": proxy_service_name(bp), "namespace": args.namespace, "labels": labels},
            spec={"type": "ExternalName", "external_name": proxy_host,
                  "ports": [{"name": "http", "port": int(proxy_port), "protocol": "TCP"}]},
            opts=child)
        # The interceptor routes by Host (port stripped) and forwards the path unchanged: the URL keeps the API's base.
        self.endpoint = pulumi.Output.concat("http://", proxy.metadata.name, ".", args.namespace,
                                             f".svc.cluster.local:{proxy_port}{api_base_path(bp)}")
        trigger = {"type": "external-push", "metadata": {"scalerAddress": addon.endpoints["external-scaler"],
                                                         "interceptorRoute": bp.workload_name}}
        return [route], trigger


@dataclass
class EndpointScalerArgs:
    """Inputs of `EndpointScaler`: the blueprint, the SageMaker endpoint/variant names and the instance-type gate
    (`instance_type_gate`, registered before the endpoint; None: no gate)."""

    blueprint: Blueprint
    endpoint_name: pulumi.Input[str]
    variant_name: str
    instance_type_gate: pulumi.Resource | None = None


def instance_type_gate(name: str, bp: Blueprint, opts: pulumi.ResourceOptions) -> random.RandomId:
    """A resource replaced, delete-before-replace, exactly when the variant's instance type changes. The endpoint
    depends on it; the scalable target and its policy are `replace_with` it. Pulumi deletes the resources that
    `replace_with` a delete-before-replace resource before deleting it (engine step_generator
    `findDependentCascadeReplacements`), so on an instance-type change the target is deregistered first, the
    endpoint updates, and the target and policy are registered again after it (they read the endpoint's name).
    SageMaker refuses to change the instance type of a variant registered for autoscaling
    (docs.aws.amazon.com/sagemaker/latest/dg/endpoint-scaling-update.html)."""
    return random.RandomId(f"{name}-instance-type", byte_length=4,
                           keepers={"instance_type": bp.compute.instance_type},
                           opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(delete_before_replace=True)))


#: The scale-from-zero alarm of an asynchronous endpoint, as async-inference-autoscale.md sets it: HasBacklogWithoutCapacity
#: Average >= 1 in 2 of 2 periods of 60 s (what `defaults.SAGEMAKER_ASYNC_SCALE_FROM_ZERO_S` counts).
BACKLOG_ALARM_PERIOD_S = 60
BACKLOG_ALARM_PERIODS = 2


def backlog_alarm_name(bp: Blueprint) -> str:
    """`<stack>-backlog-without-capacity`: the scale-from-zero alarm (a row of `blueprints.catalog.signals`)."""
    return f"{bp.stack}-backlog-without-capacity"


def tracking_metric(bp: Blueprint, endpoint_name: pulumi.Input[str]) -> dict:
    """Target tracking's metric: the predefined invocations per instance of a real-time variant, or an asynchronous
    endpoint's customized `ApproximateBacklogSizePerInstance` (EndpointName only, Average: it publishes no
    invocations per instance)."""
    if bp.autoscaling.metric == BACKLOG_PER_INSTANCE:
        return {"customized_metric_specification": {
            "metric_name": BACKLOG_PER_INSTANCE, "namespace": "AWS/SageMaker", "statistic": "Average",
            "dimensions": [{"name": "EndpointName", "value": endpoint_name}]}}
    return {"predefined_metric_specification": {"predefined_metric_type": "SageMakerVariantInvocationsPerInstance"}}


class EndpointScaler(pulumi.ComponentResource):
    """Application Auto Scaling for a SageMaker variant: a scalable target and a target-tracking policy; for an
    asynchronous endpoint also the step policy and alarm that start its planned instances from zero."""

    def __init__(self, name: str, args: EndpointScalerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("servingblueprints:index:EndpointScaler", name, None, opts)
        bp = args.blueprint
        gate = [args.instance_type_gate] if args.instance_type_gate is not None else None
        child = pulumi.ResourceOptions(parent=self, replace_with=gate)
        asynchronous = bp.autoscaling.metric == BACKLOG_PER_INSTANCE
        resource_id = pulumi.Output.concat("endpoint/", args.endpoint_name, f"/variant/{args.variant_name}")
        # A real-time endpoint keeps one instance; an asynchronous one holds its requests in its queue at zero.
        low = bp.autoscaling.min_replicas if asynchronous else max(1, bp.autoscaling.min_replicas)
        self.target = aws.appautoscaling.Target(
            f"{name}-target", service_namespace="sagemaker", scalable_dimension="sagemaker:variant:DesiredInstanceCount",
            resource_id=resource_id, min_capacity=low, max_capacity=bp.autoscaling.max_replicas, tags=bp.tags,
            opts=child)
        self.policy = aws.appautoscaling.Policy(
            f"{name}-policy", policy_type="TargetTrackingScaling", service_namespace=self.target.service_namespace,
            scalable_dimension=self.target.scalable_dimension, resource_id=self.target.resource_id,
            target_tracking_scaling_policy_configuration={
                **tracking_metric(bp, args.endpoint_name),
                # The plan's target as planned (`blueprints.catalog.signals.planned_target`): no second rounding here.
                "target_value": bp.autoscaling.target,
                # Scale in only after a cold start's worth of quiet; scale out fast.
                "scale_in_cooldown": bp.autoscaling.cooldown_s,
                "scale_out_cooldown": 60,
            },
            opts=child)
        if asynchronous:
            self._from_zero(name, bp, args, child)
        self.register_outputs({"resource_id": resource_id})

    def _from_zero(self, name: str, bp: Blueprint, args: EndpointScalerArgs, child: pulumi.ResourceOptions) -> None:
        """At zero instances the backlog per instance is undefined, so target tracking cannot start the endpoint: a
        step policy adds the planned instances at once (the batch's replay starts them together) when the
        HasBacklogWithoutCapacity alarm fires (1 while requests are queued and no instance runs); its cooldown is a
        cold start, so it does not fire again while they start."""
        self.from_zero = aws.appautoscaling.Policy(
            f"{name}-from-zero", policy_type="StepScaling", service_namespace=self.target.service_namespace,
            scalable_dimension=self.target.scalable_dimension, resource_id=self.target.resource_id,
            step_scaling_policy_configuration={
                "adjustment_type": "ChangeInCapacity", "metric_aggregation_type": "Average",
                "cooldown": bp.startup.total_s,
                "step_adjustments": [{"metric_interval_lower_bound": "0",
                                      "scaling_adjustment": bp.autoscaling.max_replicas}]},
            opts=child)
        self.from_zero_alarm = aws.cloudwatch.MetricAlarm(
            f"{name}-backlog-without-capacity", name=backlog_alarm_name(bp), namespace="AWS/SageMaker",
            metric_name="HasBacklogWithoutCapacity", dimensions={"EndpointName": args.endpoint_name},
            statistic="Average", period=BACKLOG_ALARM_PERIOD_S, evaluation_periods=BACKLOG_ALARM_PERIODS,
            datapoints_to_alarm=BACKLOG_ALARM_PERIODS, threshold=1, comparison_operator="GreaterThanOrEqualToThreshold",
            treat_missing_data="missing", alarm_actions=[self.from_zero.arn],
            alarm_description="requests queued and no instance running: start the planned instances", tags=bp.tags,
            opts=child)
