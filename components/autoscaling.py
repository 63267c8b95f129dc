"""Autoscaling for each archetype, from the blueprint and the one scaling signal in `blueprints.observability`.

- vLLM / Triton: a KEDA `ScaledObject` on the Prometheus signal (queue depth / queue time), scale-in stabilised
  for longer than a cold start, scale-to-zero only outside production.
- ONNX Runtime on CPU: an `autoscaling/v2` HorizontalPodAutoscaler on CPU utilisation (the plan's target, %;
  requests == limits, so 100 % is the whole limit).
- SageMaker: Application Auto Scaling target tracking on invocations per instance, scale-in cooldown from the
  startup budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from blueprints.blueprint import Blueprint
from blueprints.observability import scaling_signal
from components.labels import recommended_labels

#: KEDA's polling interval, s (its default is 30; 15 halves the reaction time to a burst).
KEDA_POLLING_INTERVAL_S = 15
#: SageMaker target tracking: safety factor on the planned per-instance rate, as in the SageMaker docs' formula
#: "max RPS per instance x safety factor (0.5) x 60" (sizing-facts.md, serving-engine guidance).
SAGEMAKER_SAFETY_FACTOR = 0.5


@dataclass
class KubernetesScalerArgs:
    """Inputs of `KubernetesScaler`.

    Args:
        blueprint: the planned stack.
        deployment_name: the Deployment to scale.
        namespace: its namespace.
        prometheus_url: Prometheus server address KEDA queries (vLLM/Triton).
    """

    blueprint: Blueprint
    deployment_name: pulumi.Input[str]
    namespace: pulumi.Input[str]
    prometheus_url: str


class KubernetesScaler(pulumi.ComponentResource):
    """A KEDA ScaledObject (queue signal) or, for CPU archetypes, an HPA on CPU. Output: `kind`."""

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
        if signal is not None:
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
                "triggers": [{"type": "prometheus", "metricType": signal.metric_type, "metadata": {
                    "serverAddress": args.prometheus_url, "query": signal.query,
                    "threshold": f"{signal.threshold:g}", "ignoreNullValues": "true"}}],
            }
            self.scaler = k8s.apiextensions.CustomResource(
                f"{name}-scaledobject", api_version="keda.sh/v1alpha1", kind="ScaledObject",
                metadata=metadata, spec=spec, opts=child)
            self.kind = "ScaledObject"
        else:
            self.scaler = k8s.autoscaling.v2.HorizontalPodAutoscaler(
                f"{name}-hpa", metadata=metadata,
                spec={"scale_target_ref": {"api_version": "apps/v1", "kind": "Deployment",
                                           "name": args.deployment_name},
                      "min_replicas": max(1, a.min_replicas), "max_replicas": a.max_replicas,
                      "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
                          "type": "Utilization", "average_utilization": round(a.target)}}}],
                      "behavior": {"scale_down": {"stabilization_window_seconds": a.cooldown_s,
                                                  "policies": [{"type": "Pods", "value": 1, "period_seconds": 60}]},
                                   "scale_up": {"stabilization_window_seconds": 0,
                                                "policies": [{"type": "Pods", "value": 2, "period_seconds": 60}]}}},
                opts=child)
            self.kind = "HorizontalPodAutoscaler"
        self.register_outputs({"kind": self.kind})


@dataclass
class EndpointScalerArgs:
    """Inputs of `EndpointScaler`: the blueprint and the SageMaker endpoint/variant names."""

    blueprint: Blueprint
    endpoint_name: pulumi.Input[str]
    variant_name: str


def invocations_per_instance_target(bp: Blueprint) -> int:
    """SageMakerVariantInvocationsPerInstance target (invocations per instance per minute):
    planned requests/s per instance x `SAGEMAKER_SAFETY_FACTOR` x 60, at least 1."""
    per_instance_rps = bp.predictions.requests_per_s_capacity / max(1, bp.compute.replicas)
    return max(1, math.floor(per_instance_rps * SAGEMAKER_SAFETY_FACTOR * 60))


class EndpointScaler(pulumi.ComponentResource):
    """Application Auto Scaling for a SageMaker variant: a scalable target and a target-tracking policy."""

    def __init__(self, name: str, args: EndpointScalerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("servingblueprints:index:EndpointScaler", name, None, opts)
        bp = args.blueprint
        child = pulumi.ResourceOptions(parent=self)
        resource_id = pulumi.Output.concat("endpoint/", args.endpoint_name, f"/variant/{args.variant_name}")
        self.target = aws.appautoscaling.Target(
            f"{name}-target", service_namespace="sagemaker", scalable_dimension="sagemaker:variant:DesiredInstanceCount",
            resource_id=resource_id, min_capacity=max(1, bp.autoscaling.min_replicas),
            max_capacity=bp.autoscaling.max_replicas, tags=bp.tags, opts=child)
        self.policy = aws.appautoscaling.Policy(
            f"{name}-policy", policy_type="TargetTrackingScaling", service_namespace=self.target.service_namespace,
            scalable_dimension=self.target.scalable_dimension, resource_id=self.target.resource_id,
            target_tracking_scaling_policy_configuration={
                "predefined_metric_specification": {"predefined_metric_type": "SageMakerVariantInvocationsPerInstance"},
                "target_value": invocations_per_instance_target(bp),
                # Scale in only after a cold start's worth of quiet; scale out fast.
                "scale_in_cooldown": bp.autoscaling.cooldown_s,
                "scale_out_cooldown": 60,
            },
            opts=child)
        self.register_outputs({"resource_id": resource_id})
