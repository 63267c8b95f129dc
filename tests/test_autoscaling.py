"""Autoscaling: the KEDA trigger and the alerts share one query; cooldowns outlast cold starts; prod never hits zero."""

from __future__ import annotations

from blueprints.blueprint import Blueprint
from blueprints.manifests import validate_manifest
from blueprints.observability import scaling_signal
from blueprints.preview import manifest, run_under_mocks
from components.autoscaling import (
    EndpointScaler,
    EndpointScalerArgs,
    KubernetesScaler,
    KubernetesScalerArgs,
    invocations_per_instance_target,
)
from tests.conftest import plan_env, requirements_with

PROM = "http://prometheus.monitoring.svc:9090"


def scale(bp: Blueprint):
    run = run_under_mocks(lambda: KubernetesScaler("s", KubernetesScalerArgs(
        blueprint=bp, deployment_name="chat-assistant-vllm", namespace="serving", prometheus_url=PROM)),
        stack=bp.stack)
    return run.one("kubernetes:keda.sh/v1alpha1:ScaledObject").inputs


def test_vllm_scales_on_queue_depth_with_the_planned_threshold(chat_prod):
    spec = scale(chat_prod)["spec"]
    [trigger] = spec["triggers"]
    assert trigger["type"] == "prometheus" and trigger["metricType"] == "AverageValue"
    assert trigger["metadata"]["query"] == scaling_signal(chat_prod).query
    assert 'vllm:num_requests_waiting{namespace="chat-assistant", model_name="llama-3-1-8b"}' in \
        trigger["metadata"]["query"]
    assert trigger["metadata"]["threshold"] == f"{chat_prod.autoscaling.target:g}"
    assert trigger["metadata"]["serverAddress"] == PROM
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (chat_prod.autoscaling.min_replicas,
                                                                  chat_prod.autoscaling.max_replicas)


def test_scale_in_waits_longer_than_a_cold_start(chat_prod):
    spec = scale(chat_prod)["spec"]
    window = spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"]
    assert window == chat_prod.autoscaling.cooldown_s > chat_prod.startup.total_s
    assert spec["cooldownPeriod"] > chat_prod.startup.total_s
    assert spec["initialCooldownPeriod"] == chat_prod.startup.total_s


def test_prod_never_scales_to_zero_but_dev_may():
    req = requirements_with()
    assert scale(plan_env(req, "prod"))["spec"]["minReplicaCount"] >= 1
    assert scale(plan_env(req, "dev"))["spec"]["minReplicaCount"] == 0


def test_scaled_object_manifest_matches_the_crd_structure(chat_prod):
    run = run_under_mocks(lambda: KubernetesScaler("s", KubernetesScalerArgs(
        blueprint=chat_prod, deployment_name="d", namespace="serving", prometheus_url=PROM)), stack=chat_prod.stack)
    assert validate_manifest(manifest(run.one("kubernetes:keda.sh/v1alpha1:ScaledObject"))) == []


def _cpu_blueprint(base: Blueprint) -> Blueprint:
    data = base.model_dump(mode="json")
    data.update(archetype="onnx-cpu", engine={"kind": "onnxruntime", "image": "mcr.microsoft.com/onnxruntime/server:v1",
                                              "intra_op_threads": 4})
    data["autoscaling"].update(metric="cpu", target=65)
    data["compute"].update(accelerator="cpu", instance_type="c7i.2xlarge", gpu=None, gpus_per_node=0,
                           gpus_per_replica=0, cpu_per_replica=4)
    return Blueprint.model_validate(data)


def test_cpu_archetype_gets_an_hpa_on_cpu_and_no_keda(chat_prod):
    bp = _cpu_blueprint(chat_prod)
    run = run_under_mocks(lambda: KubernetesScaler("s", KubernetesScalerArgs(
        blueprint=bp, deployment_name="d", namespace="serving", prometheus_url=PROM)), stack=bp.stack)
    assert run.of_type("kubernetes:keda.sh/v1alpha1:ScaledObject") == []
    hpa = run.one("kubernetes:autoscaling/v2:HorizontalPodAutoscaler")
    [metric] = hpa.inputs["spec"]["metrics"]
    assert metric["resource"]["name"] == "cpu"
    assert metric["resource"]["target"]["averageUtilization"] == bp.autoscaling.target == 65
    assert hpa.inputs["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == bp.autoscaling.cooldown_s
    assert validate_manifest(manifest(hpa)) == []


def test_sagemaker_target_tracking_uses_invocations_per_instance_and_cooldown(chat_prod):
    run = run_under_mocks(lambda: EndpointScaler("e", EndpointScalerArgs(
        blueprint=chat_prod, endpoint_name="chat-ep", variant_name="primary")), stack=chat_prod.stack)
    target = run.one("aws:appautoscaling/target:Target").inputs
    assert target["resourceId"] == "endpoint/chat-ep/variant/primary"
    assert target["scalableDimension"] == "sagemaker:variant:DesiredInstanceCount"
    assert (target["minCapacity"], target["maxCapacity"]) == (2, chat_prod.autoscaling.max_replicas)
    policy = run.one("aws:appautoscaling/policy:Policy").inputs["targetTrackingScalingPolicyConfiguration"]
    assert policy["predefinedMetricSpecification"]["predefinedMetricType"] == "SageMakerVariantInvocationsPerInstance"
    per_instance = chat_prod.predictions.requests_per_s_capacity / chat_prod.compute.replicas
    assert policy["targetValue"] == invocations_per_instance_target(chat_prod) == int(per_instance * 0.5 * 60)
    assert policy["scaleInCooldown"] == chat_prod.autoscaling.cooldown_s
