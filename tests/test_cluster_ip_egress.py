"""`cluster-ip-egress`: every pod's egress NetworkPolicies admit the in-cluster Services it calls by their ClusterIP,
as the VPC CNI's network policy agent judges egress (before kube-proxy's DNAT; blueprints/catalog/cluster_network.yaml).
"""

from __future__ import annotations

import copy
import dataclasses

import pytest
import yaml
from typer.testing import CliRunner

from blueprints.catalog.cluster_network import CLUSTER_DNS, KUBERNETES_API, cluster_service_ip, load_cluster_network
from blueprints.catalog.processes import load_process_catalog
from blueprints.review.deployability.checks import check_deployability
from blueprints.cli import app
from blueprints.review.deployability.cluster_ips import (
    NETWORK_POLICY, admitted, check_cluster_ip_egress, egress_policies, pod_calls, unreached_calls,
)
from blueprints.review.deployability.context import check_context, pod_spec
from blueprints.review.preview import PreviewReport, RegisteredResource
from tests.conftest import ROOT

ROUTED = "rag-assistant-generator-prod"   # vLLM behind the production-stack router, on platform-prod-us-east-1
ROUTER_POLICY = "rag-assistant-generator-router"
BENCHMARKED = "chat-assistant-prod"       # `blueprint benchmark` runs its Job there
DEPLOYMENT = "kubernetes:apps/v1:Deployment"


@pytest.fixture(scope="module")
def reports(bundled_previews) -> dict[str, PreviewReport]:
    return bundled_previews


def _policy(report: PreviewReport, name: str) -> RegisteredResource:
    [found] = [r for r in report.resources if r.type == NETWORK_POLICY and r.inputs["metadata"]["name"] == name]
    return found


def _with_egress(report: PreviewReport, name: str, edit) -> PreviewReport:
    """`report` with policy `name`'s egress rules replaced by `edit(rules)`."""
    record = _policy(report, name)
    inputs = copy.deepcopy(record.inputs)
    inputs["spec"]["egress"] = edit(inputs["spec"]["egress"])
    new = dataclasses.replace(record, inputs=inputs)
    return dataclasses.replace(report, resources=[new if r.urn == record.urn else r for r in report.resources])


def _findings(report: PreviewReport) -> list[str]:
    return [f.message for f in check_cluster_ip_egress(check_context(report, ROOT / "stacks"))]


def _router(report: PreviewReport) -> RegisteredResource:
    [found] = [r for r in report.resources if r.type == DEPLOYMENT and r.inputs["metadata"]["name"] == ROUTER_POLICY]
    return found


def _without_api_rule(rules: list[dict]) -> list[dict]:
    """The policy as it was before the fix: DNS, the Pod Identity agent, HTTPS to public addresses and the VPC, the
    engines' proxy port; no rule for the API server's ClusterIP."""
    kept = [r for r in rules if not any(p.get("ipBlock", {}).get("cidr", "").endswith("/32") and
                                        r["ports"] == [{"port": 443, "protocol": "TCP"}] for p in r["to"])]
    assert len(kept) == len(rules) - 1
    return kept


def test_the_router_policy_without_the_api_server_rule_fails_naming_pod_service_address_and_policy(reports):
    report = reports[ROUTED]
    api_ip = cluster_service_ip(report.platform.network.planned_service_cidr, KUBERNETES_API)
    assert api_ip == "172.20.0.1"  # the platform's VPC 10.30.0.0/16 is in 10.0.0.0/8: EKS's 172.20.0.0/16
    old = _with_egress(report, ROUTER_POLICY, _without_api_rule)
    [message] = _findings(old)
    assert f"Deployment '{ROUTER_POLICY}'" in message
    assert "Service default/kubernetes" in message and "172.20.0.1:443/TCP" in message
    assert f"NetworkPolicy '{ROUTER_POLICY}'" in message and "before kube-proxy's DNAT" in message
    # The whole preview fails on it.
    assert any(f.check == "cluster-ip-egress" for f in check_deployability(old, stacks_dir=ROOT / "stacks"))


def test_the_fixed_router_policy_admits_the_api_server_clusterip_and_cluster_dns(reports):
    report = reports[ROUTED]
    router = _router(report)
    spec = pod_spec(router)
    calls = pod_calls(spec, report.platform.network.planned_service_cidr)
    assert {(c.service.id, c.where) for c in calls} == {
        (KUBERNETES_API, "172.20.0.1:443/TCP"), (CLUSTER_DNS, "172.20.0.10:53/UDP"),
        (CLUSTER_DNS, "172.20.0.10:53/TCP")}
    mine = egress_policies([r.inputs for r in report.resources if r.type == NETWORK_POLICY],
                           router.inputs["metadata"]["namespace"], router.inputs["spec"]["template"]["metadata"]["labels"])
    assert {p["metadata"]["name"] for p in mine} == {"rag-assistant-generator-default-deny", ROUTER_POLICY}
    assert all(admitted(c, mine) for c in calls)
    assert _findings(report) == []


def test_every_bundled_stack_passes_and_every_pod_behind_a_policy_is_judged(reports):
    judged = 0
    for stack, report in reports.items():
        assert _findings(report) == [], stack
        policies = [r.inputs for r in report.resources if r.type == NETWORK_POLICY]
        for workload in (r for r in report.resources if r.type in (DEPLOYMENT, "kubernetes:batch/v1:Job")):
            labels = workload.inputs["spec"]["template"]["metadata"]["labels"]
            if egress_policies(policies, workload.inputs["metadata"]["namespace"], labels):
                judged += len(pod_calls(pod_spec(workload), None))
    assert judged >= 20  # every serving pod, sync Job and router behind a policy: DNS at least


def test_a_dns_rule_whose_pod_selector_is_narrower_than_the_services_selector_misses_its_clusterip(reports):
    # The controller adds a Service's ClusterIP only when the peer's podSelector matches the Service's own selector
    # ({k8s-app: kube-dns}) as a label set: one more label and the ClusterIP is not admitted, though the pods are.
    def narrower(rules):
        for rule in rules:
            for peer in rule["to"]:
                if "podSelector" in peer and "kube-dns" in str(peer):
                    peer["podSelector"]["matchLabels"]["eks.amazonaws.com/component"] = "coredns"
        return rules

    messages = _findings(_with_egress(reports[ROUTED], "rag-assistant-generator-vllm", narrower))
    assert messages and all("Service kube-system/kube-dns" in m and "172.20.0.10:53/" in m for m in messages)
    assert "pods {k8s-app: kube-dns} of namespace kube-system" in messages[0]


def test_an_ip_block_holding_the_dns_clusterip_admits_it_and_one_on_another_port_does_not(reports):
    def by_address(port):
        def edit(rules):
            dns = {"to": [{"ipBlock": {"cidr": "172.20.0.10/32"}}], "ports": [{"port": port, "protocol": "UDP"},
                                                                          {"port": port, "protocol": "TCP"}]}
            return [dns, *(r for r in rules if "kube-dns" not in str(r))]
        return edit

    assert _findings(_with_egress(reports[ROUTED], "rag-assistant-generator-vllm", by_address(53))) == []
    # The agent sees the Service's port (53), not an endpoint's: a rule on another port admits nothing.
    assert len(_findings(_with_egress(reports[ROUTED], "rag-assistant-generator-vllm", by_address(5353)))) == 2


def test_with_an_unknown_service_cidr_only_a_policy_admitting_the_whole_private_space_passes(reports):
    report = reports[ROUTED]
    unknown = dataclasses.replace(report, platform=None)
    [message] = _findings(unknown)
    assert "Service default/kubernetes" in message and "10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16:443/TCP" in message

    def private(rules):
        return [*rules, {"to": [{"ipBlock": {"cidr": c}} for c in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")],
                         "ports": [{"port": 443, "protocol": "TCP"}]}]

    assert _findings(_with_egress(unknown, ROUTER_POLICY, private)) == []


def test_a_pod_no_egress_policy_selects_is_not_restricted(reports):
    report = reports[ROUTED]
    no_policies = dataclasses.replace(report, resources=[r for r in report.resources if r.type != NETWORK_POLICY])
    assert _findings(no_policies) == []


def test_the_benchmark_jobs_policies_admit_what_its_pod_calls_and_without_dns_they_do_not(reports):
    # `blueprint benchmark` applies two NetworkPolicies and a Job beside the stack's objects (its default deny).
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(ROOT)
        result = CliRunner().invoke(app, ["benchmark", BENCHMARKED, "--dry-run"])
    assert result.exit_code == 0, result.output
    objects = list(yaml.safe_load_all(result.stdout))
    report = reports[BENCHMARKED]
    stack = [r.inputs for r in report.resources if r.type.startswith("kubernetes:")]
    cidr = report.platform.network.planned_service_cidr
    [job] = [o for o in objects if o["kind"] == "Job"]
    assert [c.service.id for c in pod_calls(job["spec"]["template"]["spec"], cidr)] == [CLUSTER_DNS, CLUSTER_DNS]
    assert unreached_calls([*stack, *objects], cidr) == []
    without_dns = copy.deepcopy(objects)
    egress = without_dns[0]["spec"]["egress"]
    egress[:] = [r for r in egress if "kube-dns" not in str(r)]
    missed = unreached_calls([*stack, *without_dns], cidr)
    assert {(u.workload["kind"], u.call.where) for u in missed} == {("Job", "172.20.0.10:53/UDP"),
                                                                    ("Job", "172.20.0.10:53/TCP")}


def test_the_pods_that_mount_a_token_are_exactly_those_that_call_the_api_server(reports):
    # The inventory: every other pod (serving, weights sync, edge weights) is hardened with no token mounted.
    mounting, calling = set(), set()
    for report in reports.values():
        for workload in (r for r in report.resources if r.type in (DEPLOYMENT, "kubernetes:batch/v1:Job")):
            spec = pod_spec(workload)
            name = (report.stack, workload.inputs["metadata"]["name"])
            if spec.get("automountServiceAccountToken", True) is not False:
                mounting.add(name)
            if any(c.service.id == KUBERNETES_API for c in pod_calls(spec, None)):
                calling.add(name)
    assert calling and mounting == calling
    assert all(workload.endswith("-router") for _, workload in calling)


def test_every_service_a_process_calls_is_a_catalogued_cluster_service():
    known = {s.id for s in load_cluster_network().cluster_services}
    calls = {c.service for facts in load_process_catalog().values() for c in facts.calls}
    assert calls and calls <= known
