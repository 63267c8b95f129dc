"""Service quotas: what each stack needs at full scale, the plan saying so, and `blueprint preflight` reading them
through the Service Quotas API (stubbed: tests never call AWS)."""

from __future__ import annotations

import json

import boto3
import pytest
from botocore.stub import Stubber
from typer.testing import CliRunner

from blueprints.cli import app
from blueprints.plan.quota import check_quotas, ec2_group, quota_needs
from blueprints.contracts.stackconfig import read_config
from tests.conftest import ROOT

runner = CliRunner()
#: A GPU service on G instances (g6e.xlarge, on demand) in us-east-1, beside other G-instance stacks of the account.
G_STACK = "partner-api-prod"


def stack(name: str):
    return read_config(ROOT / "stacks" / f"Pulumi.{name}.yaml")


@pytest.mark.parametrize(("instance_type", "on_demand", "spot"), [
    ("g6e.xlarge", "L-DB2E81BA", "L-3819A6DF"), ("g4dn.12xlarge", "L-DB2E81BA", "L-3819A6DF"),
    ("p4de.24xlarge", "L-417A185B", "L-7212CCBC"), ("p5.48xlarge", "L-417A185B", "L-C4BD4855"),
    ("c7g.4xlarge", "L-1216C47A", "L-34B43A08"), ("m7i.xlarge", "L-1216C47A", "L-34B43A08"),
    ("g7e.48xlarge", "L-DB2E81BA", "L-3819A6DF"), ("p6-b200.48xlarge", "L-417A185B", "L-C4BD4855"),
    ("p6-b300.48xlarge", "L-417A185B", "L-C4BD4855"),
])
def test_each_family_counts_against_its_vcpu_quota_group(instance_type, on_demand, spot):
    group = ec2_group(instance_type)
    assert (group.on_demand, group.spot) == (on_demand, spot)


def test_a_gpu_service_needs_its_node_pools_vcpus_at_full_scale():
    bp = stack(G_STACK)
    [need] = quota_needs(bp)
    assert (need.service_code, need.quota_code, need.region) == ("ec2", "L-DB2E81BA", "us-east-1")
    assert bp.compute.instance_type == "g6e.xlarge" and bp.compute.replicas_per_node == 1
    assert bp.node_pool_max_nodes == bp.autoscaling.max_replicas + 1  # max replicas + 1 surge, a node each
    assert need.needed == bp.node_pool_max_nodes * 4  # g6e.xlarge has 4 vCPUs
    [spot] = quota_needs(stack("chat-assistant-dev"))
    assert spot.quota_code == "L-3819A6DF"  # dev runs on spot


def test_sagemaker_counts_instances_twice_for_a_blue_green_update_and_platforms_their_system_nodes():
    pilot = stack("prototype-summarizer-pilot")
    [need] = quota_needs(pilot)
    assert (need.service_code, need.quota_code, need.needed, need.unit) == (
        "sagemaker", "L-F8D7F460", 2.0 * pilot.autoscaling.max_replicas, "instances")
    [system] = quota_needs(stack("platform-prod-us-east-1"))
    assert (system.quota_code, system.needed) == ("L-1216C47A", 12.0)  # 3 x m7i.xlarge at the group's max size
    assert quota_needs(stack("support-sentiment-prod")) == []  # an existing cluster's nodes are not ours
    assert quota_needs(stack("edge-classifier-prod")) == []  # an edge cluster's nodes are owned


def _g_stack_vcpus() -> int:
    bp = stack(G_STACK)
    return bp.node_pool_max_nodes * bp.compute.vcpus_per_node


def test_the_plan_states_the_quotas_it_needs():
    assert stack(G_STACK).rationale[-1].startswith(
        "needs service quotas in us-east-1 (fresh accounts start at 0 for G and P instances): ec2 L-DB2E81BA "
        f"(Running On-Demand G and VT instances) >= {_g_stack_vcpus()} vCPUs")


def _client(responses: list[tuple[str, dict, dict | None]]):
    client = boto3.client("service-quotas", region_name="us-east-1", aws_access_key_id="test",
                          aws_secret_access_key="test")
    stubber = Stubber(client)
    for method, params, response in responses:
        if response is None:
            stubber.add_client_error(method, service_error_code="NoSuchResourceException", expected_params=params)
        else:
            stubber.add_response(method, response, params)
    stubber.activate()
    return client


def test_an_applied_quota_is_compared_and_a_never_changed_one_falls_back_to_the_aws_default():
    needs = quota_needs(stack(G_STACK)) + quota_needs(stack("platform-prod-us-east-1"))
    client = _client([
        ("get_service_quota", {"ServiceCode": "ec2", "QuotaCode": "L-DB2E81BA"},
         {"Quota": {"QuotaCode": "L-DB2E81BA", "Value": float(_g_stack_vcpus() - 4)}}),
        ("get_service_quota", {"ServiceCode": "ec2", "QuotaCode": "L-1216C47A"}, None),
        ("get_aws_default_service_quota", {"ServiceCode": "ec2", "QuotaCode": "L-1216C47A"},
         {"Quota": {"QuotaCode": "L-1216C47A", "Value": 5.0}}),
    ])
    gpu, standard = check_quotas(needs, lambda region: client)
    assert (gpu.value, gpu.source, gpu.ok) == (_g_stack_vcpus() - 4, "applied", False)  # one node short
    assert (standard.value, standard.source, standard.ok) == (5.0, "AWS default", False)


def _account_vcpus(quota_code: str, region: str, policy: str = "prod.json") -> tuple[float, list[str]]:
    """Every bundled stack of the account (`policies/config/<policy>`) in `region`: the vCPUs of `quota_code` they need
    together at full scale, and those stacks."""
    from blueprints.review.stack import policy_config_for

    total, stacks = 0.0, []
    for path in sorted((ROOT / "stacks").glob("Pulumi.*.yaml")):
        subject = read_config(path)
        if policy_config_for(subject.environment, production=subject.production).name != policy:
            continue
        for need in quota_needs(subject):
            if (need.quota_code, need.region) == (quota_code, region):
                total += need.needed
                stacks.append(subject.stack)
    return total, stacks


def test_preflight_without_credentials_prints_what_to_check_and_how_to_request_it(monkeypatch):
    """The request asks for what every stack of the account needs in the Region, not partner-api-prod's share."""
    monkeypatch.setattr("blueprints.cli._service_quotas_client_factory", lambda: None)
    result = runner.invoke(app, ["preflight", G_STACK, "--stacks-dir", str(ROOT / "stacks")])
    assert result.exit_code == 0, result.output
    total, stacks = _account_vcpus("L-DB2E81BA", "us-east-1")
    assert total > _g_stack_vcpus() and len(stacks) > 1  # the premise: G instances beside it in us-east-1
    assert ("aws service-quotas request-service-quota-increase --service-code ec2 --quota-code L-DB2E81BA "
            f"--desired-value {total:g} --region us-east-1") in result.output
    assert f"{_g_stack_vcpus():g} for {G_STACK}, {total:g} with every stack of the account" in result.output


def test_preflight_fails_a_quota_that_holds_the_stack_but_not_the_stacks_beside_it(monkeypatch):
    total, stacks = _account_vcpus("L-DB2E81BA", "us-east-1")
    client = _client([("get_service_quota", {"ServiceCode": "ec2", "QuotaCode": "L-DB2E81BA"},
                       {"Quota": {"QuotaCode": "L-DB2E81BA", "Value": float(_g_stack_vcpus())}})])
    monkeypatch.setattr("blueprints.cli._service_quotas_client_factory", lambda: (lambda region: client))
    result = runner.invoke(app, ["preflight", G_STACK, "--stacks-dir", str(ROOT / "stacks"), "--json"])
    assert result.exit_code == 1
    [row] = [r for r in json.loads(result.stdout) if r["service_code"] == "ec2"]
    assert (row["stack_needed"], row["needed"], row["ok"]) == (_g_stack_vcpus(), total, False)
    assert row["stacks"] == stacks and row["account"].endswith("policies/config/prod.json")


def test_preflight_exits_1_naming_a_quota_below_the_need(monkeypatch):
    client = _client([("get_service_quota", {"ServiceCode": "ec2", "QuotaCode": "L-DB2E81BA"},
                       {"Quota": {"QuotaCode": "L-DB2E81BA", "Value": 8.0}})])
    monkeypatch.setattr("blueprints.cli._service_quotas_client_factory", lambda: (lambda region: client))
    result = runner.invoke(app, ["preflight", G_STACK, "--stacks-dir", str(ROOT / "stacks"), "--json"])
    assert result.exit_code == 1
    [row] = [r for r in json.loads(result.stdout) if r["service_code"] == "ec2"]
    assert (row["quota_code"], row["value"], row["stack_needed"], row["ok"]) == ("L-DB2E81BA", 8.0, _g_stack_vcpus(),
                                                                                False)


def test_preflight_of_an_unknown_stack_exits_2():
    result = runner.invoke(app, ["preflight", "nope-prod", "--offline", "--stacks-dir", str(ROOT / "stacks")])
    assert result.exit_code == 2 and "nope-prod" in result.output
