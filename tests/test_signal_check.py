"""The offline signal check: every query parses, names real metrics of its engine version, and compares its target in
its query's unit; a misspelt metric, a unit mismatch or a scale-to-zero stack that cannot wake fails the preview."""

from __future__ import annotations

import shutil
from dataclasses import replace

import pytest
import yaml
from typer.testing import CliRunner

from blueprints.cli import app
from blueprints.review.signals import check_signals
from blueprints.catalog.signals import SIGNALS, planned_target
from blueprints.catalog.units import parse_unit
from tests.conftest import ROOT
from tests.bundled import bundled_review

STACKS = ROOT / "stacks"


@pytest.fixture(scope="module")
def chat_prod_report():
    return bundled_review("chat-assistant-prod")


@pytest.fixture(scope="module")
def search_prod_report():
    return bundled_review("search-relevance-prod")


def _with_record(report, record_type: str, change):
    """`report` with the first record of `record_type` changed by `change(inputs) -> inputs`."""
    records = []
    done = False
    for r in report.resources:
        if r.type == record_type and not done:
            r = replace(r, inputs=change(r.inputs))
            done = True
        records.append(r)
    assert done
    return replace(report, resources=records)


def _trigger(query: str, threshold: str, metric_type: str = "AverageValue"):
    def change(inputs):
        spec = dict(inputs["spec"])
        [trigger] = [t for t in spec["triggers"] if t["type"] == "prometheus"]
        spec["triggers"] = [{**trigger, "metricType": metric_type,
                             "metadata": {**trigger["metadata"], "query": query, "threshold": threshold}}]
        return {**inputs, "spec": spec}
    return change


@pytest.mark.parametrize("stack", ["chat-assistant-dev", "chat-assistant-prod", "search-relevance-staging",
                                   "search-relevance-prod", "regulated-assistant-prod", "prototype-summarizer-pilot",
                                   "edge-classifier-prod", "support-sentiment-prod"])
def test_every_bundled_stack_passes_the_signal_check(stack):
    assert check_signals(bundled_review(stack), stacks_dir=STACKS) == []


def test_the_old_triton_trigger_is_a_unit_mismatch(search_prod_report):
    """Old config: mean queue time (microseconds per request, `Value`) against a target read as pending requests."""
    old = ('sum(rate(nv_inference_queue_duration_us{namespace="search-relevance"}[1m])) / '
           'clamp_min(sum(rate(nv_inference_request_success{namespace="search-relevance"}[1m])), 1)')
    report = _with_record(search_prod_report, "kubernetes:keda.sh/v1alpha1:ScaledObject", _trigger(old, "64", "Value"))
    findings = check_signals(report, stacks_dir=STACKS)
    assert [f.check for f in findings] == ["signal-unknown"]  # queue time is no scaling signal of the table
    pending = 'sum(nv_inference_pending_request_count{namespace="search-relevance"})'
    report = _with_record(search_prod_report, "kubernetes:keda.sh/v1alpha1:ScaledObject",
                          _trigger(pending, "64", "Value"))
    [finding] = check_signals(report, stacks_dir=STACKS)
    assert finding.check == "unit-mismatch" and "requests/replica" in finding.message


def test_the_new_triton_trigger_scales_on_pending_requests_per_replica(search_prod_report):
    [so] = [r for r in search_prod_report.resources if r.type == "kubernetes:keda.sh/v1alpha1:ScaledObject"]
    [trigger] = so.inputs["spec"]["triggers"]
    assert trigger["metricType"] == "AverageValue"
    assert trigger["metadata"]["query"].startswith("sum(avg_over_time(nv_inference_pending_request_count{")
    assert float(trigger["metadata"]["threshold"]) == search_prod_report.blueprint.autoscaling.target < 64


def test_a_misspelt_metric_is_named_with_its_close_match(chat_prod_report):
    report = _with_record(chat_prod_report, "kubernetes:keda.sh/v1alpha1:ScaledObject",
                          _trigger('sum(vllm:num_request_running{namespace="x"})', "11.8"))
    [finding] = check_signals(report, stacks_dir=STACKS)
    assert finding.check == "metric-unknown"
    assert "'vllm:num_request_running'" in finding.message and "did you mean 'vllm:num_requests_running'" in \
        finding.message


def test_a_metric_hidden_in_the_pinned_vllm_is_unknown(chat_prod_report):
    """vllm:gpu_cache_usage_perc is gone from the pinned vLLM (renamed vllm:kv_cache_usage_perc; absent since 0.14.1)."""
    def change(inputs):
        spec = dict(inputs["spec"])
        group = dict(spec["groups"][0])
        group["rules"] = [{**group["rules"][0], "alert": "KVCacheNearlyFull",
                           "expr": 'max(vllm:gpu_cache_usage_perc{namespace="x"}) > 0.9'}]
        spec["groups"] = [group]
        return {**inputs, "spec": spec}
    report = _with_record(chat_prod_report, "kubernetes:monitoring.coreos.com/v1:PrometheusRule", change)
    [finding] = check_signals(report, stacks_dir=STACKS)
    assert finding.check == "metric-unknown" and "vllm:gpu_cache_usage_perc" in finding.message


def test_an_alert_threshold_in_the_wrong_unit_is_named(chat_prod_report):
    """TTFT is a histogram in seconds; a threshold written in milliseconds (1500) is caught by its row's unit only
    if the query is off by a scale: a query divided by 1000 is in kiloseconds."""
    def change(inputs):
        spec = dict(inputs["spec"])
        group = dict(spec["groups"][0])
        group["rules"] = [{"alert": "TTFTP95AboveSLO", "for": "10m", "expr":
                           'histogram_quantile(0.95, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket'
                           '{namespace="x"}[5m]))) * 1000 > 1500'}]
        spec["groups"] = [group]
        return {**inputs, "spec": spec}
    report = _with_record(chat_prod_report, "kubernetes:monitoring.coreos.com/v1:PrometheusRule", change)
    [finding] = check_signals(report, stacks_dir=STACKS)
    assert finding.check == "unit-mismatch" and "TTFTP95AboveSLO" in finding.message and "seconds" in finding.message


def test_a_counter_without_rate_is_a_misuse(chat_prod_report):
    report = _with_record(chat_prod_report, "kubernetes:keda.sh/v1alpha1:ScaledObject",
                          _trigger('sum(vllm:request_success_total{namespace="x"})', "5"))
    checks = {f.check for f in check_signals(report, stacks_dir=STACKS)}
    assert "metric-misuse" in checks


def test_a_query_that_does_not_parse_is_named(chat_prod_report):
    report = _with_record(chat_prod_report, "kubernetes:keda.sh/v1alpha1:ScaledObject",
                          _trigger('sum(rate(vllm:num_requests_running[1m]', "5"))
    [finding] = check_signals(report, stacks_dir=STACKS)
    assert finding.check == "promql-syntax"


def test_a_scale_to_zero_stack_without_the_interceptor_never_wakes():
    """The old dev ScaledObject: minReplicaCount 0 and only the vLLM queue trigger (absent at zero pods)."""
    report = bundled_review("chat-assistant-dev")

    def drop_push(inputs):
        spec = dict(inputs["spec"])
        spec["triggers"] = [t for t in spec["triggers"] if t["type"] != "external-push"]
        return {**inputs, "spec": spec}
    old = _with_record(report, "kubernetes:keda.sh/v1alpha1:ScaledObject", drop_push)
    [finding] = check_signals(old, stacks_dir=STACKS)
    assert finding.check == "activation-at-zero" and "never wakes" in finding.message


def test_a_sagemaker_alarm_on_an_unknown_metric_is_named():
    report = bundled_review("prototype-summarizer-pilot")
    old = _with_record(report, "aws:cloudwatch/metricAlarm:MetricAlarm",
                       lambda i: {**i, "metricName": "ModelLatancy"})
    [finding] = check_signals(old, stacks_dir=STACKS)
    assert finding.check == "metric-unknown" and "did you mean 'ModelLatency'" in finding.message


def test_a_sagemaker_alarm_on_a_metric_its_kind_of_endpoint_never_publishes_is_named():
    """An asynchronous endpoint's queue metrics never reach a real-time endpoint's alarm, and an asynchronous
    endpoint publishes no Invocations (metrics.yaml `published_by`, from async-inference-monitor.md)."""
    report = bundled_review("prototype-summarizer-pilot")
    alarms = [r for r in report.resources if r.type == "aws:cloudwatch/metricAlarm:MetricAlarm"]
    assert alarms and not check_signals(report, stacks_dir=STACKS)
    expired = _with_record(report, "aws:cloudwatch/metricAlarm:MetricAlarm",
                           lambda i: {**i, "metricName": "ExpiredRequests"})
    findings = [f for f in check_signals(expired, stacks_dir=STACKS) if f.check == "metric-unknown"]
    assert len(findings) == 1 and "AWS/SageMaker/ExpiredRequests is published by asynchronous endpoints only, " \
        "not this stack's real-time endpoint" in findings[0].message
    asynchronous = _with_record(
        _with_record(report, "aws:cloudwatch/metricAlarm:MetricAlarm", lambda i: {**i, "metricName": "Invocations"}),
        "aws:sagemaker/endpointConfiguration:EndpointConfiguration",
        lambda i: {**i, "asyncInferenceConfig": {"outputConfig": {"s3OutputPath": "s3://store/async/out/"}}})
    findings = [f for f in check_signals(asynchronous, stacks_dir=STACKS) if f.check == "metric-unknown"]
    assert len(findings) == 1 and "Invocations is published by real-time endpoints only, not this stack's " \
        "asynchronous endpoint" in findings[0].message


def test_a_stack_config_hand_edited_to_a_misspelt_metric_fails_the_preview_naming_it(tmp_path):
    stacks = tmp_path / "stacks"
    shutil.copytree(STACKS, stacks)
    path = stacks / "Pulumi.chat-assistant-prod.yaml"
    data = yaml.safe_load(path.read_text())
    data["config"]["servingblueprints:blueprint"]["autoscaling"]["metric"] = "vllm:num_request_running"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    result = CliRunner().invoke(app, ["preview", "chat-assistant-prod", "--stacks-dir", str(stacks),
                                      "--program", str(ROOT / "__main__.py")])
    # The Blueprint itself refuses a metric that is no scaling signal of its engine (blueprints.contracts.serving_flags),
    # before any query is rendered; a query naming a metric the engine lacks is the signal check's (tests above).
    assert result.exit_code == 2, result.output
    assert ("servingblueprints:blueprint.autoscaling.metric: 'vllm:num_request_running' is not a scaling signal of "
            "vllm-gpu (its engine vllm scales on vllm:num_requests_running)") in result.output


def test_every_table_row_has_a_known_unit_and_metric():
    from blueprints.catalog.metrics import load_metric_catalog

    catalog = load_metric_catalog()
    prometheus = catalog.exporters
    for row in SIGNALS:
        parse_unit(row.target_unit)
        for metric in (m.strip() for m in row.metric.split(",")):
            if row.engine in ("vllm", "triton", "kubernetes"):
                assert catalog.series(metric, prometheus) is not None, row
            elif row.engine == "sagemaker" and row.kind == "alert":
                assert any(catalog.cloudwatch_metric(ns.namespace, metric) for ns in catalog.cloudwatch), row


def test_the_pinned_images_have_metric_catalogs():
    from blueprints.core import defaults
    from blueprints.catalog.metrics import load_metric_catalog

    catalog = load_metric_catalog()
    assert catalog.engine_for_image(defaults.VLLM_IMAGE).version == "0.24.0"
    assert catalog.engine_for_image(defaults.TRITON_IMAGE).version == "2.62.0"


@pytest.mark.parametrize("value,whole,expected", [(66.96, False, 67.0), (0.1687, False, 0.169), (11.84, False, 11.9),
                                                  (18.2, True, 19.0), (80.0, True, 80.0), (0.4, True, 1.0),
                                                  (35.5, False, 35.5)])
def test_one_rounding_rule_rounds_every_target_up_so_the_peak_asks_for_the_planned_replicas(value, whole, expected):
    assert planned_target(value, whole=whole) == expected


def test_units_compare_scale_and_dimension():
    assert parse_unit("microseconds/request").same_as(parse_unit("seconds/request").scaled(1e-6))
    assert not parse_unit("requests/replica").same_as(parse_unit("requests"))
    assert parse_unit("percent").same_as(parse_unit("fraction").scaled(0.01))
    with pytest.raises(ValueError, match="unknown unit"):
        parse_unit("furlongs")


def test_platform_stacks_have_no_signal_findings():
    report = bundled_review("platform-prod-us-east-1")
    assert check_signals(report, stacks_dir=STACKS) == [] and report.signals == []
