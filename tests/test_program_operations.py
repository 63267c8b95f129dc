"""Every bundled stack is operated: scaled on the plan's signal, watched against its SLOs, rolled out safely."""

from __future__ import annotations

import pytest

from blueprints.contracts.observability import scaling_signal
from blueprints.contracts.stackconfig import read_stack_config
from components.rollout import node_pool_max_nodes
from tests.conftest import ROOT
from tests.bundled import bundled_preview

STACKS = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in (ROOT / "stacks").glob("Pulumi.*.yaml")
                if not p.name.startswith("Pulumi.platform-"))
KUBERNETES = [s for s in STACKS if read_stack_config(ROOT / "stacks" / f"Pulumi.{s}.yaml").platform.kind != "sagemaker"]
SAGEMAKER = [s for s in STACKS if s not in KUBERNETES]


def preview(stack: str):
    return bundled_preview(stack)


def of_type(report, type_token: str) -> list:
    return [r for r in report.resources if r.type == type_token]


def test_bundled_examples_cover_both_platforms():
    assert KUBERNETES and SAGEMAKER


@pytest.mark.parametrize("stack", KUBERNETES)
def test_kubernetes_stacks_scale_on_their_signal_and_alert_on_their_slos(stack):
    report = preview(stack)
    bp = report.blueprint
    signal = scaling_signal(bp)
    if signal is None:
        [hpa] = of_type(report, "kubernetes:autoscaling/v2:HorizontalPodAutoscaler")
        assert hpa.inputs["spec"]["scaleTargetRef"]["name"] == bp.workload_name
    else:
        [scaled] = of_type(report, "kubernetes:keda.sh/v1alpha1:ScaledObject")
        assert scaled.inputs["spec"]["triggers"][0]["metadata"]["query"] == signal.query
        assert scaled.inputs["spec"]["scaleTargetRef"]["name"] == bp.workload_name
        assert scaled.inputs["spec"]["minReplicaCount"] == bp.autoscaling.min_replicas
    if not bp.monitored:  # an edge cluster without kube-prometheus-stack: no monitoring objects at all
        assert not [r for r in report.resources if r.type.startswith("kubernetes:monitoring.coreos.com/")]
        assert report.outputs["alerts"] == []
        return
    [monitor] = [r for r in of_type(report, "kubernetes:monitoring.coreos.com/v1:ServiceMonitor")
                 if r.inputs["metadata"]["name"] == bp.workload_name]  # beside it, a router's (test_prompt_reuse)
    # With a router the serving Service selects the router's pods; the metrics Service the engine's.
    engine_service = bp.workload_name if bp.router is None else bp.metrics_service_name
    [service] = [m for m in report.manifests if m["kind"] == "Service" and m["metadata"]["name"] == engine_service]
    assert monitor.inputs["spec"]["selector"]["matchLabels"].items() <= service["spec"]["selector"].items()
    port_names = {p["name"] for s in report.manifests if s["kind"] == "Service" for p in s["spec"]["ports"]}
    assert monitor.inputs["spec"]["endpoints"][0]["port"] in port_names
    [rules] = of_type(report, "kubernetes:monitoring.coreos.com/v1:PrometheusRule")
    assert len(rules.inputs["spec"]["groups"][0]["rules"]) >= 2
    if bp.production:
        assert bp.autoscaling.min_replicas >= 1


@pytest.mark.parametrize("stack", [s for s in KUBERNETES
                                   if read_stack_config(ROOT / "stacks" / f"Pulumi.{s}.yaml").platform.kind == "eks"])
def test_node_pool_grows_to_cover_the_autoscaler_and_a_surge(stack):
    report = preview(stack)
    bp = report.blueprint
    [pool] = of_type(report, "kubernetes:karpenter.sh/v1:NodePool")
    requirements = {r["key"]: r["values"] for r in pool.inputs["spec"]["template"]["spec"]["requirements"]}
    assert requirements["node.kubernetes.io/instance-type"] == [bp.compute.instance_type]
    limits = pool.inputs["spec"]["limits"]
    if bp.compute.gpus_per_replica:
        assert limits["nvidia.com/gpu"] == node_pool_max_nodes(bp) * bp.compute.gpus_per_node
        assert limits["nvidia.com/gpu"] >= (bp.autoscaling.max_replicas + 1) * bp.compute.gpus_per_replica
    else:
        assert limits["cpu"] == node_pool_max_nodes(bp) * bp.compute.vcpus_per_node
    disruption = pool.inputs["spec"]["disruption"]
    # Only empty nodes are consolidated, and never within the autoscaler's cooldown.
    assert disruption == {"consolidationPolicy": "WhenEmpty", "consolidateAfter": f"{bp.autoscaling.cooldown_s}s",
                          "budgets": [{"nodes": "1"}]}


@pytest.mark.parametrize("stack", SAGEMAKER)
def test_sagemaker_stacks_roll_back_on_their_alarms_and_track_a_target(stack):
    report = preview(stack)
    bp = report.blueprint
    alarms = {a.inputs["name"] for a in of_type(report, "aws:cloudwatch/metricAlarm:MetricAlarm")}
    [endpoint] = of_type(report, "aws:sagemaker/endpoint:Endpoint")
    rollback = {a["alarmName"] for a in endpoint.inputs["deploymentConfig"]["autoRollbackConfiguration"]["alarms"]}
    assert rollback == alarms and f"{bp.stack}-invocation-5xx" in alarms
    policy = endpoint.inputs["deploymentConfig"]["blueGreenUpdatePolicy"]
    assert policy["maximumExecutionTimeoutInSeconds"] >= bp.startup.total_s
    for alarm in of_type(report, "aws:cloudwatch/metricAlarm:MetricAlarm"):
        assert alarm.inputs["dimensions"]["EndpointName"] == endpoint.inputs["name"]
    [target] = of_type(report, "aws:appautoscaling/target:Target")
    assert target.inputs["resourceId"] == f"endpoint/{endpoint.inputs['name']}/variant/primary"
    [scaling] = of_type(report, "aws:appautoscaling/policy:Policy")
    assert scaling.inputs["targetTrackingScalingPolicyConfiguration"]["scaleInCooldown"] == bp.autoscaling.cooldown_s


def test_a_70b_model_gets_a_longer_startup_budget_and_every_timer_follows_it():
    small, large = preview("chat-assistant-prod"), preview("regulated-assistant-prod")  # Llama-3.1 8B vs 70B

    def timers(report):
        bp = report.blueprint
        [dep] = [m for m in report.manifests if m["kind"] == "Deployment" and m["metadata"]["name"] == bp.workload_name]
        probe = dep["spec"]["template"]["spec"]["containers"][0]["startupProbe"]
        [scaled] = of_type(report, "kubernetes:keda.sh/v1alpha1:ScaledObject")
        return {"budget": bp.startup.total_s, "cooldown": bp.autoscaling.cooldown_s,
                "scale_down_window": scaled.inputs["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"][
                    "scaleDown"]["stabilizationWindowSeconds"],
                "probe_s": probe["periodSeconds"] * probe["failureThreshold"],
                "progress_deadline": dep["spec"]["progressDeadlineSeconds"]}

    a, b = timers(small), timers(large)
    assert b["budget"] > a["budget"]
    for key in ("cooldown", "scale_down_window", "probe_s", "progress_deadline"):
        assert b[key] > a[key], key
    for t, report in ((a, small), (b, large)):
        assert t["cooldown"] > t["budget"] and t["progress_deadline"] >= t["budget"]
        assert t["probe_s"] >= report.blueprint.startup.pod_start_s


@pytest.mark.parametrize("stack", SAGEMAKER)
def test_a_sagemaker_llm_alarms_on_model_latency_above_its_predicted_request_time(stack):
    report = preview(stack)
    bp = report.blueprint
    assert bp.predictions.latency_p95_ms > bp.predictions.ttft_p95_ms + bp.predictions.itl_p95_ms
    [alarm] = [a for a in of_type(report, "aws:cloudwatch/metricAlarm:MetricAlarm") if a.name.endswith("latency-p95")]
    assert alarm.inputs["metricName"] == "ModelLatency" and alarm.inputs["extendedStatistic"] == "p95"
    assert alarm.inputs["threshold"] == pytest.approx(bp.predictions.latency_p95_ms * 1.5 * 1000, rel=1e-6)


def test_llm_request_latency_is_the_simulated_p95_of_whole_requests():
    from tests.conftest import plan_env, requirements_with

    p = plan_env(requirements_with(), "prod").predictions  # outputs: mean 300 tokens, p95 600 (the default 2x)
    # A p95 request is longer than a mean one at the median gap, and shorter than a p95 one at p95 gaps throughout.
    assert 300 * p.itl_p95_ms / 2 < p.latency_p95_ms < p.ttft_p95_ms + 600 * p.itl_p95_ms
