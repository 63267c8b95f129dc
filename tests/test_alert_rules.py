"""Alerts that fire exactly when they should: every alert the program generates, run by Prometheus's own rule-unit
tests (`promtool test rules`) on series labelled as prometheus-operator labels the stack's scrapes
(`tests/alert_scenarios.py`): it fires when its SLO is broken and stays quiet while it holds. Also the review's
`scrape-job` check (every `job` matcher names a scraped Service) and the EKS-hidden components of
kube-prometheus-stack (`scrapes-hidden-components`)."""

from __future__ import annotations

import copy
import dataclasses
import subprocess
from pathlib import Path

import pytest
import yaml

from blueprints.review.deployability.checks import check_deployability
from blueprints.review.preview import PreviewReport, RegisteredResource
from blueprints.review.signals import check_signals
from tests.alert_scenarios import EVAL_TIME, Scenario, scenarios
from tests.cli_tools import tool
from tests.conftest import ROOT
from tests.bundled import bundled_review

STACKS = ROOT / "stacks"
RULE = "kubernetes:monitoring.coreos.com/v1:PrometheusRule"
#: One stack per alert set: vLLM with a minimum, vLLM scaled to zero, vLLM behind the router, Triton, ONNX Runtime
#: (in Triton's backend).
ROUTED = "rag-assistant-generator-prod"
MONITORED = ["chat-assistant-prod", "chat-assistant-dev", ROUTED, "search-relevance-prod", "support-sentiment-prod"]


@pytest.fixture(scope="module")
def reports() -> dict[str, PreviewReport]:
    return {stack: bundled_review(stack) for stack in MONITORED}


def _rule_record(report: PreviewReport) -> RegisteredResource:
    [record] = [r for r in report.resources if r.type == RULE]
    return record


def _rules(report: PreviewReport) -> list[dict]:
    return [rule for group in _rule_record(report).inputs["spec"]["groups"] for rule in group["rules"]]


def promtool_suite(groups: list[dict], cases: dict[str, Scenario], rules_by_name: dict[str, dict],
                   folder: Path) -> subprocess.CompletedProcess:
    """Run `promtool test rules` over `groups` with a firing and a quiet test per alert of `cases`."""
    (folder / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    tests = []
    for name, case in cases.items():
        rule = rules_by_name[name]
        expected = [{"exp_labels": {**case.labels, **rule["labels"]}, "exp_annotations": rule["annotations"]}]
        for series, alerts in ((case.broken, expected), (case.holding, [])):
            tests.append({"interval": "1m", "input_series": series, "alert_rule_test": [
                {"eval_time": EVAL_TIME, "alertname": name, "exp_alerts": alerts}]})
    (folder / "test.yaml").write_text(yaml.safe_dump({"rule_files": ["rules.yaml"], "evaluation_interval": "1m",
                                                      "tests": tests}, sort_keys=False))
    return subprocess.run([tool("promtool"), "test", "rules", "test.yaml"], cwd=folder, capture_output=True,
                          text=True, timeout=120)


def assert_every_alert_fires_when_broken_and_stays_quiet(report: PreviewReport, folder: Path) -> None:
    """Every alert of `report`'s PrometheusRule has a scenario, and promtool passes a firing and a quiet test of each."""
    rules = {r["alert"]: r for r in _rules(report)}
    cases = scenarios(report.blueprint)
    assert set(rules) <= set(cases), f"alerts without a promtool test: {set(rules) - set(cases)}"
    result = promtool_suite(_rule_record(report).inputs["spec"]["groups"], {n: cases[n] for n in rules}, rules,
                            folder)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


@pytest.mark.parametrize("stack", MONITORED)
def test_every_alert_fires_when_its_slo_is_broken_and_stays_quiet_while_it_holds(stack, reports, tmp_path):
    assert_every_alert_fires_when_broken_and_stays_quiet(reports[stack], tmp_path)


def test_a_router_that_lists_no_engine_pages_while_every_router_pod_is_available(reports, tmp_path):
    # The router's watcher cannot reach the API server: both pods run and pass /health, every request gets 404.
    report = reports[ROUTED]
    rules = {r["alert"]: r for r in _rules(report)}
    cases = scenarios(report.blueprint)
    pods_up = cases["RouterDown"].holding
    watcher_down = Scenario([*pods_up, *cases["RouterHasNoEngines"].broken], [*pods_up, *cases["RouterHasNoEngines"]
                                                                              .holding])
    quiet = Scenario(cases["RouterDown"].broken, [*pods_up, *cases["RouterHasNoEngines"].broken],
                     labels=cases["RouterDown"].labels)
    result = promtool_suite(_rule_record(report).inputs["spec"]["groups"],
                            {"RouterHasNoEngines": watcher_down, "RouterDown": quiet}, rules, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert rules["RouterHasNoEngines"]["labels"]["severity"] == "page"
    assert 'vllm:num_incoming_requests_total{namespace="rag-assistant-generator", job="rag-assistant-generator-' \
           'router-metrics"}' in rules["RouterHasNoEngines"]["expr"]


def _replaced_expr(report: PreviewReport, alert: str, old: str, new: str) -> list[dict]:
    groups = copy.deepcopy(_rule_record(report).inputs["spec"]["groups"])
    rule = next(r for g in groups for r in g["rules"] if r["alert"] == alert)
    assert old in rule["expr"]
    rule["expr"] = rule["expr"].replace(old, new)
    return groups


def test_the_error_budget_page_filtering_the_workloads_job_never_fires(reports, tmp_path):
    report = reports["chat-assistant-prod"]
    bp = report.blueprint
    groups = _replaced_expr(report, "ErrorBudgetFastBurn", f'job="{bp.metrics_service_name}"',
                            f'job="{bp.workload_name}"')  # the job the alert filtered before
    rules = {r["alert"]: r for g in groups for r in g["rules"]}
    result = promtool_suite(groups, {"ErrorBudgetFastBurn": scenarios(bp)["ErrorBudgetFastBurn"]}, rules, tmp_path)
    assert result.returncode != 0 and "ErrorBudgetFastBurn" in result.stdout + result.stderr
    record = _rule_record(report)
    edited = dataclasses.replace(record, inputs={**record.inputs, "spec": {"groups": groups}})
    findings = check_signals(dataclasses.replace(report, resources=[edited if r.urn == record.urn else r
                                                                     for r in report.resources]), stacks_dir=STACKS)
    messages = [f.message for f in findings if f.check == "scrape-job"]
    assert len(messages) == 2  # the errors' selector and the total's
    assert all(f'job="{bp.workload_name}"' in m and bp.metrics_service_name in m for m in messages)


def test_the_router_alert_naming_the_counter_without_total_is_caught_and_never_fires(reports, tmp_path):
    # prometheus_client exposes Counter("vllm:num_incoming_requests") as vllm:num_incoming_requests_total.
    report = reports[ROUTED]
    groups = _replaced_expr(report, "RouterHasNoEngines", "vllm:num_incoming_requests_total",
                            "vllm:num_incoming_requests")
    rules = {r["alert"]: r for g in groups for r in g["rules"]}
    result = promtool_suite(groups, {"RouterHasNoEngines": scenarios(report.blueprint)["RouterHasNoEngines"]}, rules,
                            tmp_path)
    assert result.returncode != 0 and "RouterHasNoEngines" in result.stdout + result.stderr
    record = _rule_record(report)
    edited = dataclasses.replace(record, inputs={**record.inputs, "spec": {"groups": groups}})
    findings = check_signals(dataclasses.replace(report, resources=[edited if r.urn == record.urn else r
                                                                     for r in report.resources]), stacks_dir=STACKS)
    assert [f.check for f in findings] == ["metric-unknown"]
    assert "vllm:num_incoming_requests_total" in findings[0].message  # the close match


def test_a_mean_latency_alert_misses_a_broken_p95(reports, tmp_path):
    """Triton's old LatencyAboveSLO compared the mean with the p95 target: with a p95 twice the target and a mean a
    quarter of it, it never fired; the summary's p95 does."""
    report = reports["search-relevance-prod"]
    bp = report.blueprint
    target_us = bp.slo.latency_p95_ms * 1000
    mean = (f'sum by (model) (rate(nv_inference_request_duration_us{{namespace="{bp.platform.namespace}"}}[5m])) / '
            f'clamp_min(sum by (model) (rate(nv_inference_request_success{{namespace="{bp.platform.namespace}"}}[5m])),'
            f' 1e-9) > {target_us:g}')
    groups = copy.deepcopy(_rule_record(report).inputs["spec"]["groups"])
    rule = next(r for g in groups for r in g["rules"] if r["alert"] == "LatencyAboveSLO")
    rule["expr"] = mean
    case = scenarios(bp)["LatencyAboveSLO"]
    counters = [{"series": s["series"].replace("nv_inference_request_summary_us", name).replace(', quantile="0.95"', ""),
                 "values": values} for s in case.broken for name, values in
                (("nv_inference_request_duration_us", f"0+{target_us / 4 * 100:g}x45"),
                 ("nv_inference_request_success", "0+100x45"))]
    broken = Scenario(broken=[*case.broken, *counters], holding=case.holding, labels=case.labels)
    result = promtool_suite(groups, {"LatencyAboveSLO": broken}, {"LatencyAboveSLO": rule}, tmp_path)
    assert result.returncode != 0 and "LatencyAboveSLO" in result.stdout + result.stderr
    assert promtool_suite(_rule_record(report).inputs["spec"]["groups"], {"LatencyAboveSLO": broken},
                          {r["alert"]: r for r in _rules(report)}, tmp_path).returncode == 0


def test_triton_serves_the_latency_summary_its_alert_reads(reports):
    for stack in ("search-relevance-prod", "support-sentiment-prod"):
        deployment = next(r for r in reports[stack].resources if r.type == "kubernetes:apps/v1:Deployment")
        engine = deployment.inputs["spec"]["template"]["spec"]["containers"][0]
        assert "--metrics-config=summary_latencies=true" in engine["args"], stack


def test_kube_prometheus_stack_scrapes_nothing_eks_hides():
    report = bundled_review("platform-prod-us-east-1")
    release = next(r for r in report.resources if r.inputs.get("name") == "kube-prometheus-stack")
    for key in ("kubeControllerManager", "kubeScheduler", "kubeEtcd", "kubeProxy"):
        assert release.inputs["values"][key] == {"enabled": False}
    assert [f for f in check_deployability(report, stacks_dir=STACKS) if f.check == "scrapes-hidden-components"] == []
    values = {k: v for k, v in release.inputs["values"].items() if k != "kubeScheduler"}
    edited = dataclasses.replace(release, inputs={**release.inputs, "values": values})
    findings = check_deployability(dataclasses.replace(report, resources=[edited if r.urn == release.urn else r
                                                                          for r in report.resources]),
                                   stacks_dir=STACKS)
    [message] = [f.message for f in findings if f.check == "scrapes-hidden-components"]
    assert "kubeScheduler" in message and "kubeScheduler.enabled: false" in message


def test_p99_targets_get_their_own_alerts_that_fire_when_the_p99_is_broken_and_stay_quiet_while_it_holds(
        reports, tmp_path):
    """chat-assistant-prod with slo.ttft_p99_ms 3000 and itl_p99_ms 100: two more alerts at the 0.99 quantile of the
    same vLLM histograms, run by promtool beside the p95 ones; without p99 targets there are none."""
    from blueprints.contracts.observability import slo_alerts

    bp = reports["chat-assistant-prod"].blueprint
    assert not {r.name for r in slo_alerts(bp)} & {"TTFTP99AboveSLO", "ITLP99AboveSLO"}
    bp = bp.model_copy(update={"slo": bp.slo.model_copy(update={"ttft_p99_ms": 3000.0, "itl_p99_ms": 100.0})})
    alerts = slo_alerts(bp)
    rules = {r.name: {"alert": r.name, "expr": r.expr, "for": r.for_, "labels": {"severity": r.severity},
                      "annotations": {"summary": r.summary}} for r in alerts}  # as components/monitoring.py writes them
    assert rules["TTFTP99AboveSLO"]["expr"].startswith("histogram_quantile(0.99, ")
    assert rules["TTFTP99AboveSLO"]["expr"].endswith("> 3") and rules["ITLP99AboveSLO"]["expr"].endswith("> 0.1")
    cases = scenarios(bp)
    result = promtool_suite([{"name": "slo", "rules": list(rules.values())}],
                            {n: cases[n] for n in ("TTFTP99AboveSLO", "ITLP99AboveSLO", "TTFTP95AboveSLO")}, rules,
                            tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
