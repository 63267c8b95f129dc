"""`blueprint verify` against local stand-ins: a fake OpenAI-compatible endpoint on loopback, a real Prometheus
scraping an exporter of the engine's real metric names and loading the stack's own rules, and the Kubernetes objects
as the API returns them. The queries are the stack's rendered ones (the offline preview of chat-assistant-prod)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from blueprints.cli import app
from blueprints.contracts.stackconfig import read_stack_config
from blueprints.operate import run as operate_run
from blueprints.operate.manifests import StackManifests
from blueprints.operate.prometheus import PrometheusApi, http_transport
from blueprints.operate.coldstart import measure_cold_start
from blueprints.operate.verify import (
    check_cold_start, check_nodes, check_rules, check_scaler, selectors, verify_kubernetes, verify_sagemaker,
)
from tests.conftest import ROOT
from tests.bundled import bundled_preview
from tests.operate_standins import (
    ColdStartedPod, EngineExporter, FakeOpenAIEndpoint, LocalPrometheus, Redirector,
)

STACK = "chat-assistant-prod"
KEY = "test-key-0123456789"


@pytest.fixture(scope="module")
def manifests() -> StackManifests:
    bp = read_stack_config(ROOT / "stacks" / f"Pulumi.{STACK}.yaml")
    report = bundled_preview(STACK)
    return StackManifests(bp, tuple(report.manifests))


def cluster_objects(sm: StackManifests, *, hpa_value: str = "31500m", node_ready: str = "True") -> dict:
    """The live objects as the Kubernetes API returns them (sanitised dicts): the ScaledObject Ready, its HPA
    ScalingActive with a current external metric, the NodePool Ready and its nodes."""
    so = sm.scaled_object["metadata"]["name"]
    pool = sm.node_pool["metadata"]["name"]
    ready = {"type": "Ready", "status": "True", "reason": "ScaledObjectReady"}
    return {
        ("scaledobjects", so): {**sm.scaled_object, "status": {"conditions": [
            ready, {"type": "Active", "status": "True"}, {"type": "Fallback", "status": "False"}]}},
        ("horizontalpodautoscalers", f"keda-hpa-{so}"): {"metadata": {"name": f"keda-hpa-{so}"}, "status": {
            "currentReplicas": 6, "desiredReplicas": 6,
            "currentMetrics": [{"type": "External", "external": {
                "metric": {"name": "s0-prometheus"}, "current": {"averageValue": hpa_value}}}],
            "conditions": [{"type": "AbleToScale", "status": "True"},
                           {"type": "ScalingActive", "status": "True", "reason": "ValidMetricFound"}]}},
        ("nodepools", pool): {**sm.node_pool, "status": {"conditions": [{"type": "Ready", "status": "True"}]}},
        "nodes": [{"metadata": {"name": f"ip-10-0-{i}-7.ec2.internal", "labels": {"karpenter.sh/nodepool": pool}},
                   "status": {"conditions": [{"type": "Ready", "status": node_ready if i == 2 else "True"}]}}
                  for i in range(1, 4)],
    }


def readers(objects: dict):
    def read(group, version, plural, namespace, name):
        try:
            return objects[(plural, name)]
        except KeyError:
            raise LookupError(name) from None

    return read, lambda selector: [n for n in objects["nodes"]
                                   if selector == f"karpenter.sh/nodepool={n['metadata']['labels']['karpenter.sh/nodepool']}"]


def failed(report) -> list[tuple[str, str]]:
    return sorted((c.check, c.subject) for c in report.failures)


def test_selectors_are_the_series_of_the_deployed_expression_verbatim():
    expr = ('(sum(rate(http_requests_total{namespace="a", job="a-vllm", status="5xx"}[5m]))) / '
            '(clamp_min(sum(rate(http_requests_total{namespace="a", job="a-vllm"}[5m])), 1e-9)) > 0.0144')
    assert selectors(expr) == ['http_requests_total{namespace="a",job="a-vllm",status="5xx"}',
                               'http_requests_total{namespace="a",job="a-vllm"}']
    with pytest.raises(ValueError, match="does not parse"):
        selectors("sum(rate(x[5m])")


def test_verify_passes_against_a_working_stand_in(manifests, tmp_path):
    bp = manifests.blueprint
    rule_groups = manifests.prometheus_rules[0]["spec"]["groups"]
    with FakeOpenAIEndpoint(model=bp.model.name, key=KEY) as endpoint, \
            EngineExporter(engine_image=bp.engine.image, model=bp.model.name, namespace=manifests.namespace,
                           deployment=bp.workload_name) as exporter, \
            LocalPrometheus(tmp_path, exporter, job=bp.metrics_service_name, namespace=manifests.namespace,
                            rule_groups=rule_groups) as prometheus:
        read, list_nodes = readers(cluster_objects(manifests))
        report = verify_kubernetes(manifests, {"endpoint": f"{endpoint.url}/v1", "api_key": KEY},
                                   prom=PrometheusApi(http_transport(prometheus.url), where=prometheus.url),
                                   read=read, list_nodes=list_nodes)
    assert failed(report) == []
    assert report.ok
    checks = {c.check for c in report.checks}
    assert checks == {"endpoint-authenticated", "endpoint-unauthenticated", "endpoint-tls", "metric-series",
                      "scaler-ready", "scaler-value", "rules-loaded", "alerts-quiet", "nodes-ready"}
    # every selector of the trigger and of the seven alerts was counted in Prometheus itself
    series = [c for c in report.checks if c.check == "metric-series"]
    assert len(series) == len([s for q in manifests.queries() for s in selectors(q.expr)])
    assert any("vllm:num_requests_running" in c.subject and c.subject.startswith("ScaledObject") for c in series)
    assert endpoint.requests == [("/v1/models", f"Bearer {KEY}"), ("/v1/models", None)]


def test_verify_reports_a_missing_metric_and_an_unauthenticated_success_as_failures(manifests, tmp_path):
    bp = manifests.blueprint
    with FakeOpenAIEndpoint(model=bp.model.name, key=KEY, open=True) as endpoint, \
            EngineExporter(engine_image=bp.engine.image, model=bp.model.name, namespace=manifests.namespace,
                           deployment=bp.workload_name, leave_out=("vllm:kv_cache_usage_perc",)) as exporter, \
            LocalPrometheus(tmp_path, exporter, job=bp.metrics_service_name, namespace=manifests.namespace,
                            rule_groups=manifests.prometheus_rules[0]["spec"]["groups"]) as prometheus:
        read, list_nodes = readers(cluster_objects(manifests))
        report = verify_kubernetes(manifests, {"endpoint": f"{endpoint.url}/v1", "api_key": KEY},
                                   prom=PrometheusApi(http_transport(prometheus.url), where=prometheus.url),
                                   read=read, list_nodes=list_nodes)
    assert failed(report) == [
        ("endpoint-unauthenticated", f"{endpoint.url}/v1/models"),
        ("metric-series", 'PrometheusRule chat-assistant-vllm-slo alert KVCacheNearlyFull: '
                          'vllm:kv_cache_usage_perc{namespace="chat-assistant",model_name="llama-3-1-8b"}'),
    ]
    open_check = next(c for c in report.failures if c.check == "endpoint-unauthenticated")
    assert "200 WITHOUT the API key" in open_check.detail
    assert not report.ok


def test_verify_reports_a_firing_slo_alert(manifests, tmp_path):
    bp = manifests.blueprint
    with EngineExporter(engine_image=bp.engine.image, model=bp.model.name, namespace=manifests.namespace,
                        deployment=bp.workload_name, restarting=True) as exporter, \
            LocalPrometheus(tmp_path, exporter, job=bp.metrics_service_name, namespace=manifests.namespace,
                            rule_groups=manifests.prometheus_rules[0]["spec"]["groups"]) as prometheus:
        # ServingPodRestarting (`for: 0m`) fires once the restart counter has grown between two scrapes
        prometheus.wait_for('count(ALERTS{alertname="ServingPodRestarting", alertstate="firing"})', lambda v: v >= 1)
        checks = check_rules(manifests, PrometheusApi(http_transport(prometheus.url), where=prometheus.url))
    quiet = next(c for c in checks if c.check == "alerts-quiet")
    assert not quiet.ok and quiet.detail == "firing: ServingPodRestarting"
    assert [c.ok for c in checks if c.check == "rules-loaded"] == [True]


def test_rules_not_loaded_fail_naming_the_group(manifests):
    replies = {"/api/v1/rules": {"status": "success", "data": {"groups": []}},
               "/api/v1/alerts": {"status": "success", "data": {"alerts": []}}}
    prom = PrometheusApi(lambda path, params: json.dumps(replies[path]).encode(), where="stand-in")
    checks = check_rules(manifests, prom)
    assert [(c.check, c.subject, c.ok) for c in checks] == [
        ("rules-loaded", "chat-assistant-prod-slo", False), ("alerts-quiet", STACK, True)]
    assert "release" in checks[0].detail


@pytest.mark.parametrize(("value", "ok"), [("31500m", True), ("max", True), ("0", True), ("3500", False),
                                           ("-1", False)])
def test_the_scalers_current_value_must_be_in_its_targets_unit_range(manifests, value, ok):
    max_num_seqs = manifests.blueprint.engine.max_num_seqs  # the range a replica's running requests can reach
    assert 31.5 < max_num_seqs < 3500
    read, _ = readers(cluster_objects(manifests, hpa_value=str(max_num_seqs) if value == "max" else value))
    checks = {c.check: c for c in check_scaler(manifests, read)}
    assert checks["scaler-value"].ok is ok
    assert f"max_num_seqs {max_num_seqs}" in checks["scaler-value"].detail
    if not ok:
        assert "different units" in checks["scaler-value"].detail


def test_a_scaler_that_cannot_read_its_metric_fails(manifests):
    objects = cluster_objects(manifests)
    hpa = objects[("horizontalpodautoscalers", "keda-hpa-chat-assistant-vllm")]
    hpa["status"]["conditions"][1] = {"type": "ScalingActive", "status": "False", "reason": "FailedGetExternalMetric",
                                      "message": "unable to get external metric"}
    hpa["status"]["currentMetrics"] = None
    read, _ = readers(objects)
    checks = [(c.check, c.ok) for c in check_scaler(manifests, read)]
    assert checks == [("scaler-ready", True), ("scaler-ready", False), ("scaler-value", False)]


def test_a_node_that_is_not_ready_fails(manifests):
    read, list_nodes = readers(cluster_objects(manifests, node_ready="False"))
    checks = check_nodes(manifests, read, list_nodes)
    assert [c.ok for c in checks] == [True, False]
    assert checks[1].detail == "not Ready: ip-10-0-2-7.ec2.internal"


def test_sagemaker_checks_in_service_alarms_and_signed_requests():
    from botocore.stub import Stubber
    import boto3

    from blueprints.operate.endpoint import Reply

    bp = read_stack_config(ROOT / "stacks" / "Pulumi.prototype-summarizer-pilot.yaml")
    session = boto3.Session(aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret", region_name=bp.region)
    sagemaker, cloudwatch = session.client("sagemaker"), session.client("cloudwatch")
    outputs = {"endpoint_name": "prototype-summarizer-pilot", "alarms": ["a-5xx", "a-latency"]}
    with Stubber(sagemaker) as sm_stub, Stubber(cloudwatch) as cw_stub:
        sm_stub.add_response("describe_endpoint", {
            "EndpointName": "prototype-summarizer-pilot", "EndpointArn": "arn:aws:sagemaker:us-east-1:1:endpoint/p",
            "EndpointConfigName": "c", "EndpointStatus": "InService", "CreationTime": "2026-12-01",
            "LastModifiedTime": "2026-12-01"}, {"EndpointName": "prototype-summarizer-pilot"})
        cw_stub.add_response("describe_alarms", {"MetricAlarms": [
            {"AlarmName": "a-5xx", "StateValue": "OK"},
            {"AlarmName": "a-latency", "StateValue": "ALARM", "StateReason": "Threshold Crossed"}]},
            {"AlarmNames": ["a-5xx", "a-latency"]})
        url = "https://runtime.sagemaker.us-east-1.amazonaws.com/endpoints/prototype-summarizer-pilot/invocations"
        report = verify_sagemaker(bp, outputs, sagemaker=sagemaker, cloudwatch=cloudwatch,
                                  invoke=lambda signed: Reply(url, 200 if signed else 403))
    assert [(c.check, c.subject, c.ok) for c in report.checks] == [
        ("endpoint-in-service", "prototype-summarizer-pilot", True), ("alarms-ok", "a-5xx", True),
        ("alarms-ok", "a-latency", False), ("endpoint-authenticated", url, True),
        ("endpoint-unauthenticated", url, True), ("endpoint-tls", url, True)]
    assert "Threshold Crossed" in report.failures[0].detail


def test_an_asynchronous_batch_endpoint_is_checked_for_its_output_path_and_never_invoked():
    from botocore.stub import Stubber
    import boto3

    from blueprints.contracts.sections import AsyncInference, BatchPlan

    bp = read_stack_config(ROOT / "stacks" / "Pulumi.prototype-summarizer-pilot.yaml")
    queue = AsyncInference(max_concurrent_invocations_per_instance=8, backlog_target=8,
                           output_prefix=f"async/{bp.stack}/", instance_hours_per_day=2)
    bp = bp.model_copy(update={"batch": BatchPlan(
        requests_per_day=1000, deadline_hours=6, window_start_hour=22, window_hours=8, timezone="UTC", run_hours=6,
        replicas=1, requests_per_s_per_replica=1, start_s=600, request_latency_s=10, completion_hours=1,
        monthly_cost_usd=100, async_inference=queue)})
    session = boto3.Session(aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret", region_name=bp.region)
    outputs = {"endpoint_name": bp.stack, "alarms": [], "weights_bucket": "store"}
    sent = []
    for path, ok in ((f"s3://store/async/{bp.stack}/out/", True), ("s3://elsewhere/out/", False)):
        sagemaker = session.client("sagemaker")
        with Stubber(sagemaker) as stub:
            stub.add_response("describe_endpoint", {
                "EndpointName": bp.stack, "EndpointArn": "arn:aws:sagemaker:us-east-1:1:endpoint/p",
                "EndpointConfigName": "c", "EndpointStatus": "InService", "CreationTime": "2026-12-01",
                "LastModifiedTime": "2026-12-01", "AsyncInferenceConfig": {"OutputConfig": {"S3OutputPath": path}}},
                {"EndpointName": bp.stack})
            report = verify_sagemaker(bp, outputs, sagemaker=sagemaker, cloudwatch=session.client("cloudwatch"),
                                      invoke=lambda signed: sent.append(signed))
        assert [(c.check, c.ok) for c in report.checks] == [("endpoint-in-service", True),
                                                            ("endpoint-asynchronous", ok)]
    assert sent == []  # a request would start the planned instances


# --- The command -----------------------------------------------------------------------------------------------------

def no_credentials_env(tmp_path: Path) -> dict[str, str]:
    """An environment without the Pulumi CLI on PATH and without AWS credentials (no instance metadata either)."""
    return {"PATH": str(tmp_path), "AWS_CONFIG_FILE": str(tmp_path / "none"),
            "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"), "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "", "AWS_PROFILE": ""}


@pytest.fixture
def bare_env(tmp_path, monkeypatch):
    for key, value in no_credentials_env(tmp_path).items():
        if value:
            monkeypatch.setenv(key, value)
        else:
            monkeypatch.delenv(key, raising=False)
    monkeypatch.chdir(ROOT)


def test_verify_without_the_pulumi_cli_exits_2_saying_what_it_needs(bare_env):
    result = CliRunner().invoke(app, ["verify", STACK])
    assert result.exit_code == 2, result.output
    assert "Pulumi CLI is not on PATH" in result.stderr and "--outputs FILE" in result.stderr
    assert "Traceback" not in result.output


def test_verify_without_cluster_access_exits_2_saying_what_it_needs(bare_env, tmp_path):
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps({"endpoint": "http://127.0.0.1:9/v1", "api_key": KEY}))
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:9"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": "t"}}]}))
    result = CliRunner().invoke(app, ["verify", STACK, "--outputs", str(outputs), "--kubeconfig", str(kubeconfig)])
    assert result.exit_code == 2, result.output
    assert "cannot reach the Kubernetes API" in result.stderr and "credentials it accepts" in result.stderr


def test_verify_of_a_sagemaker_stack_without_aws_credentials_exits_2(bare_env, tmp_path):
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps({"endpoint": "https://runtime.sagemaker.us-east-1.amazonaws.com/endpoints/p/"
                                               "invocations", "endpoint_name": "p", "alarms": []}))
    result = CliRunner().invoke(app, ["verify", "prototype-summarizer-pilot", "--outputs", str(outputs)])
    assert result.exit_code == 2, result.output
    assert "no AWS credentials" in result.stderr and "sagemaker:InvokeEndpoint" in result.stderr


def test_verify_of_an_undeployed_stack_exits_2(bare_env, tmp_path):
    outputs = tmp_path / "outputs.json"
    outputs.write_text("{}")
    result = CliRunner().invoke(app, ["verify", STACK, "--outputs", str(outputs)])
    assert result.exit_code == 2 and "has no outputs: deploy it first" in result.stderr


def test_the_command_exits_1_with_json_and_markdown_naming_the_failures(manifests, tmp_path, monkeypatch):
    bp = manifests.blueprint
    read, list_nodes = readers(cluster_objects(manifests))
    monkeypatch.setattr(operate_run, "kube_api_client", lambda *a, **k: object())
    monkeypatch.setattr(operate_run, "object_reader", lambda api: read)
    monkeypatch.setattr(operate_run, "node_lister", lambda api: list_nodes)
    fit = ColdStartedPod(pull="40s", weights_s=10, ready_s=60, init_engine_s=40)  # within the planned timers
    monkeypatch.setattr(operate_run, "read_ready_cold_start", lambda api, sm: measure_cold_start(
        fit.pod, fit.node, fit.events, fit.log, container="vllm"))
    monkeypatch.chdir(ROOT)
    with FakeOpenAIEndpoint(model=bp.model.name, key=KEY, open=True) as endpoint, \
            EngineExporter(engine_image=bp.engine.image, model=bp.model.name, namespace=manifests.namespace,
                           deployment=bp.workload_name, leave_out=("vllm:num_requests_running",)) as exporter, \
            LocalPrometheus(tmp_path, exporter, job=bp.metrics_service_name, namespace=manifests.namespace,
                            rule_groups=manifests.prometheus_rules[0]["spec"]["groups"]) as prometheus:
        outputs = tmp_path / "outputs.json"
        outputs.write_text(json.dumps({"endpoint": f"{endpoint.url}/v1", "api_key": KEY}))
        markdown = tmp_path / "verify.md"
        result = CliRunner().invoke(app, ["verify", STACK, "--outputs", str(outputs), "--prometheus-url",
                                          prometheus.url, "--json", "--markdown", str(markdown)])
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)
    assert data["ok"] is False
    assert sorted({c["check"] for c in data["checks"] if not c["ok"]}) == ["endpoint-unauthenticated",
                                                                          "metric-series"]
    (cold,) = [c for c in data["checks"] if c["check"] == "cold-start"]
    assert cold["ok"] and cold["detail"].startswith("pod llama-3-1-8b-vllm-7d9f8-abcde: 282 s to Ready, planned 310 s")
    missing = [c["subject"] for c in data["checks"] if c["check"] == "metric-series" and not c["ok"]]
    assert missing == ['ScaledObject chat-assistant-vllm trigger 0: '
                       'vllm:num_requests_running{namespace="chat-assistant",model_name="llama-3-1-8b"}']
    text = markdown.read_text()
    assert text.startswith(f"### `blueprint verify {STACK}` (vllm-gpu)")
    assert "2 of " in text and "| **FAIL** | endpoint-unauthenticated" in text


def _cold(**kw):
    pod = ColdStartedPod(**kw)
    return measure_cold_start(pod.pod, pod.node, pod.events, pod.log, container="vllm")


def test_a_cold_start_past_the_deployed_timers_fails_and_says_how_to_calibrate(manifests):
    deadline = manifests.deployment["spec"]["progressDeadlineSeconds"]
    probe = manifests.engine_container["startupProbe"]
    assert (deadline, probe["failureThreshold"] * probe["periodSeconds"]) == (465, 200)  # 1.5 x 310 s; 2 x 100 s
    (slow,) = check_cold_start(manifests, _cold(node_s=240, ready_s=250))  # 240 + 79.8 + 2 + 250 s
    assert not slow.ok
    assert "creation -> Ready 571 s is past progressDeadlineSeconds 465" in slow.detail
    assert "container start -> Ready 250 s is past the startupProbe's 200 s" in slow.detail
    assert "`blueprint calibrate` corrects the plan with it" in slow.detail
    (fits,) = check_cold_start(manifests, _cold(pull="40s", weights_s=10, ready_s=60, init_engine_s=40))
    assert fits.ok and "calibrate" not in fits.detail  # 282 s against 310 s planned: within 25 %
    (none,) = check_cold_start(manifests, _cold(restarts=1))
    assert none.ok and none.detail.startswith("not measured: pod llama-3-1-8b-vllm-7d9f8-abcde: vllm restarted")


def test_verify_never_sends_the_api_key_to_another_host_a_redirect_names(manifests):
    """A 302 to another origin (found by a break-it pass: urllib forwarded `Authorization` to it): not followed, the
    key never reaches the other host, and the check fails naming where the redirect pointed. A redirect within the
    endpoint's own origin is followed with the key."""
    from blueprints.operate.verify import check_endpoint

    bp = manifests.blueprint
    with FakeOpenAIEndpoint(model=bp.model.name, key=KEY) as elsewhere, Redirector(to=elsewhere.url) as proxy:
        checks = {c.check: c for c in check_endpoint(bp, f"{proxy.url}/v1", KEY)}
    assert elsewhere.requests == []  # nothing reached the other host, with or without the key
    assert proxy.requests == [("/v1/models", f"Bearer {KEY}"), ("/v1/models", None)]
    keyed = checks["endpoint-authenticated"]
    assert not keyed.ok and f"redirected to {elsewhere.url}/v1/models, another origin: not followed" in keyed.detail
    with Redirector() as moved:
        check_endpoint(bp, f"{moved.url}/v1", KEY)
    assert moved.requests[:2] == [("/v1/models", f"Bearer {KEY}"), ("/moved/v1/models", f"Bearer {KEY}")]
