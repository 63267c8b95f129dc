"""Autoscaling: the KEDA trigger reads the plan's signal per replica; cooldowns outlast cold starts; prod never hits
zero; a scale-to-zero stack wakes through the KEDA HTTP add-on; SageMaker deploys the plan's target as planned and
deregisters its scalable target around an instance-type change."""

from __future__ import annotations

from blueprints.catalog.signals import planned_target

from blueprints.contracts.blueprint import Blueprint
from blueprints.review.manifests import validate_manifest
from blueprints.contracts.observability import scaling_signal
from blueprints.review.preview import manifest, run_under_mocks
from components.autoscaling import (
    EndpointScaler,
    EndpointScalerArgs,
    KubernetesScaler,
    KubernetesScalerArgs,
    instance_type_gate,
)
from tests.conftest import plan_env, requirements_with

PROM = "http://prometheus.monitoring.svc:9090"


def scaler_run(bp: Blueprint):
    return run_under_mocks(lambda: KubernetesScaler("s", KubernetesScalerArgs(
        blueprint=bp, deployment_name="chat-assistant-vllm", namespace="serving", prometheus_url=PROM)),
        stack=bp.stack)


def scale(bp: Blueprint):
    return scaler_run(bp).one("kubernetes:keda.sh/v1alpha1:ScaledObject").inputs


def test_vllm_scales_on_requests_running_per_replica_with_the_planned_threshold(chat_prod):
    spec = scale(chat_prod)["spec"]
    [trigger] = spec["triggers"]
    assert trigger["type"] == "prometheus" and trigger["metricType"] == "AverageValue"
    assert trigger["metadata"]["query"] == scaling_signal(chat_prod).query == (
        'sum(avg_over_time(vllm:num_requests_running{namespace="chat-assistant", model_name="llama-3-1-8b"}[1m]))')
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
    from tests.blueprint_builders import onnx_blueprint

    bp = onnx_blueprint(base, cpu=4.0)
    return bp.model_copy(update={"autoscaling": bp.autoscaling.model_copy(update={"metric": "cpu", "target": 65})})


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


def test_sagemaker_target_tracking_deploys_the_planned_target_as_planned():
    """One rounding rule: the plan's target (invocations per instance per minute at its share of the planned peak,
    rounded up) is what the policy gets; the old component floored its own recomputation while the plan rounded."""
    bp = plan_env(requirements_with("prototype-summarizer"), "pilot")
    run = run_under_mocks(lambda: EndpointScaler("e", EndpointScalerArgs(
        blueprint=bp, endpoint_name="chat-ep", variant_name="primary")), stack=bp.stack)
    target = run.one("aws:appautoscaling/target:Target").inputs
    assert target["resourceId"] == "endpoint/chat-ep/variant/primary"
    assert target["scalableDimension"] == "sagemaker:variant:DesiredInstanceCount"
    assert (target["minCapacity"], target["maxCapacity"]) == (1, bp.autoscaling.max_replicas)
    policy = run.one("aws:appautoscaling/policy:Policy").inputs["targetTrackingScalingPolicyConfiguration"]
    assert policy["predefinedMetricSpecification"]["predefinedMetricType"] == "SageMakerVariantInvocationsPerInstance"
    per_instance = bp.model.traffic.peak_requests_per_s / bp.compute.replicas
    assert policy["targetValue"] == bp.autoscaling.target == planned_target(per_instance * 60)
    assert policy["scaleInCooldown"] == bp.autoscaling.cooldown_s


def test_an_instance_type_change_deregisters_the_scalable_target_before_the_endpoint_updates(chat_prod):
    """The gate is replaced (delete first) exactly when the instance type changes; the target and its policy are
    replaced with it, so Pulumi deletes them (deregisters) before the endpoint update, and registers them after."""
    import pulumi

    def body():
        gate = instance_type_gate("e", chat_prod, pulumi.ResourceOptions())
        EndpointScaler("e", EndpointScalerArgs(blueprint=chat_prod, endpoint_name="chat-ep", variant_name="primary",
                                                instance_type_gate=gate))

    run = run_under_mocks(body, stack=chat_prod.stack)
    gate = run.one("random:index/randomId:RandomId")
    assert gate.inputs["keepers"] == {"instance_type": chat_prod.compute.instance_type}
    assert gate.delete_before_replace is True
    for kind in ("aws:appautoscaling/target:Target", "aws:appautoscaling/policy:Policy"):
        assert run.one(kind).replace_with == (gate.urn,)


def test_without_the_gate_nothing_is_replaced_with_it(chat_prod):
    run = run_under_mocks(lambda: EndpointScaler("e", EndpointScalerArgs(
        blueprint=chat_prod, endpoint_name="chat-ep", variant_name="primary")), stack=chat_prod.stack)
    assert run.one("aws:appautoscaling/target:Target").replace_with == ()


def test_a_scale_to_zero_stack_wakes_through_the_http_add_on():
    """The old ScaledObject had only the vLLM queue trigger, absent at zero pods: the stack never woke."""
    dev = plan_env(requirements_with(), "dev")
    assert dev.autoscaling.min_replicas == 0
    run = scaler_run(dev)
    route = run.one("kubernetes:http.keda.sh/v1beta1:InterceptorRoute")
    scaled = run.one("kubernetes:keda.sh/v1alpha1:ScaledObject")
    assert route.urn in scaled.dependencies  # the scaler must know the route before KEDA asks for its metric spec
    push = [t for t in scaled.inputs["spec"]["triggers"] if t["type"] == "external-push"]
    assert push == [{"type": "external-push", "metadata": {
        "scalerAddress": "keda-add-ons-http-external-scaler.keda:9090", "interceptorRoute": "chat-assistant-vllm"}}]
    spec = route.inputs["spec"]
    assert spec["target"] == {"service": "chat-assistant-vllm", "port": 80}  # the authenticating proxy's port
    assert spec["scalingMetric"] == {"concurrency": {"targetValue": dev.autoscaling.interceptor_concurrency_target}}
    assert "chat-assistant-vllm-proxy.chat-assistant.svc.cluster.local" in spec["rules"][0]["hosts"]
    proxy = [r for r in run.of_type("kubernetes:core/v1:Service")][0].inputs["spec"]
    assert proxy == {"externalName": "keda-add-ons-http-interceptor-proxy.keda.svc.cluster.local", "ports": [
        {"name": "http", "port": 8080, "protocol": "TCP"}], "type": "ExternalName"}
    assert validate_manifest(manifest(route)) == [] and validate_manifest(manifest(scaled)) == []


def test_a_stack_with_a_minimum_keeps_no_interceptor(chat_prod):
    run = scaler_run(chat_prod)
    assert run.of_type("kubernetes:http.keda.sh/v1beta1:InterceptorRoute") == []
    assert [t["type"] for t in run.one("kubernetes:keda.sh/v1alpha1:ScaledObject").inputs["spec"]["triggers"]] == [
        "prometheus"]


def test_a_model_given_by_its_architecture_scales_like_the_same_catalog_model(chat_prod):
    """Found in a new-user trial: the replica model knew catalog ids only, so a model described by `architecture`
    fell back to the non-generative load curve (KEDA target 11.5 against 35.5 running, 5 warm replicas, not 4)."""
    from blueprints.catalog import load_catalog

    shape = load_catalog().model("llama-3.1-8b").architecture.model_dump(exclude_none=True)
    req = requirements_with(model={"id": None, "name": "llama-custom", "task": "text-generation", "architecture": shape,
                                   "weights_uri": "s3://models/llama-custom/"})
    bp = plan_env(req, "prod")
    assert bp.models[0].catalog_id is None and bp.models[0].architecture is not None
    assert (bp.compute.instance_type, bp.compute.replicas) == (chat_prod.compute.instance_type,
                                                             chat_prod.compute.replicas)
    assert bp.autoscaling.target == chat_prod.autoscaling.target
    assert bp.autoscaling.min_replicas == chat_prod.autoscaling.min_replicas
    assert bp.predictions.expected_monthly_cost_usd == chat_prod.predictions.expected_monthly_cost_usd


def test_a_rounded_up_target_never_passes_what_one_replica_reaches():
    """Found by the planner's property test: a CPU Triton estate whose replica holds one request at a time read 1.03
    pending requests at its share of the peak; rounded up, the target passed what a replica ever reaches (1) and the
    stack config refused it. The target stops at that bound."""
    from blueprints.contracts.consistency import reachable_target
    from blueprints.requirements.service import Requirements
    from tests.conftest import plan_env

    models = [{"id": m, "weights_uri": "s3://bucket-name/m/", "format": "onnx",
               "traffic": {"peak_requests_per_s": rps, "mean_input_tokens": 16, "pattern": "steady"}}
              for m, rps in (("bge-large-en-v1.5", 1.0), ("bge-reranker-large", 8.0))]
    req = Requirements.model_validate({
        "service": "svc", "owner": "team", "cost_center": "cc-1", "models": models, "slo": {"availability_pct": 99.0},
        "hardware": {"accelerators": ["cpu"], "allowed_instance_families": []},
        "operations": {"preference": "any", "platform": "eks"}, "budget": {"max_monthly_usd": None},
        "environments": {"prod": {"region": "us-east-1"}}})
    for bp in [plan_env(req, "prod")]:
        most = reachable_target(bp)
        assert most is None or bp.autoscaling.target <= most, (bp.stack, bp.autoscaling)
