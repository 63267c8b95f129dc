"""The `gpu-quota` policy per account and Region (issue 22 item 5): `maxGpus` holds every stack of one policy config in
one Region together, so the plan sizes a stack within what the account's other stacks leave, a compound service's
parts count together, and `blueprint preflight` checks the same sum."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from blueprints.catalog import load_catalog
from blueprints.cli import app
from blueprints.contracts.stackconfig import read_config
from blueprints.core.errors import SizingError
from blueprints.plan.guardrails import Guardrails, SearchLimits
from blueprints.plan.quota import gpus_at_full_scale
from blueprints.requirements.service import load_requirements
from blueprints.review.account import with_account_gpus
from blueprints.review.stack import environment_guardrails
from blueprints.workspace import plan_requirements_file
from tests.conftest import ROOT
from tests.plan_preview import PLAN_DATE

runner = CliRunner()
STACKS, POLICIES = ROOT / "stacks", ROOT / "policies" / "config"


def _project(tmp_path: Path, *, dev_max_gpus: int | None = None) -> tuple[Path, Path]:
    """A copy of the bundled stacks and policy configs; dev's maxGpus set when given."""
    stacks, policies = tmp_path / "stacks", tmp_path / "policies" / "config"
    shutil.copytree(STACKS, stacks)
    shutil.copytree(POLICIES, policies)
    if dev_max_gpus is not None:
        dev = json.loads((policies / "dev.json").read_text())
        dev["gpu-quota"]["maxGpus"] = dev_max_gpus
        (policies / "dev.json").write_text(json.dumps(dev))
    return stacks, policies


def _max_gpus(policies: Path, env: str) -> int:
    return json.loads((policies / f"{env}.json").read_text())["gpu-quota"]["maxGpus"]


def _gpus(stack: str) -> int:
    return gpus_at_full_scale(read_config(STACKS / f"Pulumi.{stack}.yaml"))


def test_a_stacks_gpus_are_its_node_pool_limit_and_none_for_sagemaker_or_owned_edge_nodes():
    chat = read_config(STACKS / "Pulumi.chat-assistant-prod.yaml")
    per_node = load_catalog().instance(chat.compute.instance_type).gpu_count  # p5.4xlarge: 1 H100
    # One replica a node: the autoscaler's maximum plus the rollout surge, each node's GPUs.
    assert _gpus("chat-assistant-prod") == chat.node_pool_max_nodes * per_node \
        == (chat.autoscaling.max_replicas + 1) * per_node
    regulated = read_config(STACKS / "Pulumi.regulated-assistant-prod.yaml")
    assert regulated.compute.gpus_per_replica == 8  # a replica fills a node
    assert _gpus("regulated-assistant-prod") == (regulated.autoscaling.max_replicas + 1) * 8  # p4de.24xlarge: 8 A100s
    assert _gpus("prototype-summarizer-pilot") == 0  # SageMaker counts against its own quotas
    assert _gpus("edge-classifier-dev") == 0  # owned edge nodes have no instance type (was an AttributeError)
    assert _gpus("support-sentiment-prod") == 0  # c7g: no GPUs


def test_the_account_s_other_stacks_in_the_region_are_counted_not_its_own_nor_other_regions_or_accounts():
    req = load_requirements(STACKS / "requirements" / "chat-assistant.yaml")
    limits = with_account_gpus(req, environment_guardrails(req, POLICIES), STACKS, policy_dir=POLICIES)
    dev, prod = limits["dev"], limits["prod"]
    assert (dev.max_gpus, dev.gpus_in_use) == (_max_gpus(POLICIES, "dev"),
                                               _gpus("rag-assistant-generator-dev") + _gpus("rag-assistant-retrieval-dev"))
    assert dev.gpus_in_use_by == ("rag-assistant-generator-dev: 3", "rag-assistant-retrieval-dev: 3")
    # us-east-1 under prod.json: not regulated-assistant-prod (eu-central-1), not its own chat-assistant-prod.
    assert [s.split(":")[0] for s in prod.gpus_in_use_by] == [
        "partner-api-prod", "rag-assistant-generator-prod", "rag-assistant-retrieval-prod", "search-relevance-prod"]
    # 22: partner-api 3, rag-assistant's generator 10 (its budget caps the autoscaler at 9, plus the surge),
    # rag-assistant's retrieval 4, search-relevance 5: each stack's NodePool limit in GPUs.
    assert prod.gpus_in_use == sum(_gpus(s.split(":")[0]) for s in prod.gpus_in_use_by) == 22


def test_the_search_counts_the_account_s_gpus_and_the_hint_asks_for_the_total():
    inst = load_catalog().instance("g6e.xlarge")
    limits = SearchLimits(guardrails=Guardrails(source="policies/config/dev.json", max_gpus=8, gpus_in_use=6,
                                                gpus_in_use_by=("a-dev: 6",)), zones=3)
    assert limits.breach(inst, replicas=1, per_node=1, managed=False) is None  # 1 + surge 1 = 2, with 6: 8
    breach = limits.breach(inst, replicas=2, per_node=1, managed=False)
    assert breach is not None and breach.needed == 9 and breach.constraint == "gpu-quota"
    assert "needs 3 GPUs with the rollout surge (9 with the account's others)" in breach.why
    assert "of which the account's other stacks in the Region reach 6 (a-dev: 6)" in breach.why
    assert limits.need("gpu-quota", inst, replicas=2, per_node=1) == 9
    assert limits.autoscaling_cap(per_node=1, gpus_per_node=1) == 1  # 2 GPUs left: 1 replica + the surge
    alone = SearchLimits(guardrails=Guardrails(source="x", max_gpus=8), zones=3)
    assert alone.autoscaling_cap(per_node=1, gpus_per_node=1) == 7


def test_a_tight_dev_account_caps_chat_assistant_dev_at_what_the_rag_stacks_leave(tmp_path):
    stacks, policies = _project(tmp_path, dev_max_gpus=8)
    free = plan_requirements_file(stacks / "requirements" / "chat-assistant.yaml", as_of=PLAN_DATE,
                                  policy_dir=POLICIES, stacks_dir=stacks, environments=["dev"]).blueprints[0]
    [chat] = plan_requirements_file(stacks / "requirements" / "chat-assistant.yaml", as_of=PLAN_DATE,
                                    policy_dir=policies, stacks_dir=stacks, environments=["dev"]).blueprints
    assert free.autoscaling.max_replicas > 1  # the bundled dev account has room
    assert chat.autoscaling.max_replicas == 1 and gpus_at_full_scale(chat) == 2
    assert gpus_at_full_scale(chat) + _gpus("rag-assistant-generator-dev") + _gpus("rag-assistant-retrieval-dev") == 8
    assert any(f"maxGpus=8 ({policies / 'dev.json'}, gpu-quota), of which the account's other stacks in the Region "
               "reach 6 (rag-assistant-generator-dev: 3, rag-assistant-retrieval-dev: 3)" in r for r in chat.rationale)


def test_a_plan_within_the_quota_names_no_other_stack_however_many_gpus_they_hold(tmp_path):
    """With room, the plan is the one made as if alone: the account's other stacks appear in no line of it, so
    adding or resizing them rewrites none of its stack configs."""
    stacks, roomy = _project(tmp_path, dev_max_gpus=10)
    alone = tmp_path / "alone"
    shutil.copytree(stacks, alone)
    for name in ("rag-assistant-generator-dev", "rag-assistant-retrieval-dev"):
        (alone / f"Pulumi.{name}.yaml").unlink()
    [shared] = plan_requirements_file(stacks / "requirements" / "chat-assistant.yaml", as_of=PLAN_DATE,
                                      policy_dir=roomy, stacks_dir=stacks, environments=["dev"]).blueprints
    [single] = plan_requirements_file(alone / "requirements" / "chat-assistant.yaml", as_of=PLAN_DATE,
                                      policy_dir=roomy, stacks_dir=alone, environments=["dev"]).blueprints
    assert gpus_at_full_scale(shared) + 6 <= 10
    assert shared.rationale == single.rationale and shared.autoscaling == single.autoscaling
    assert not [r for r in shared.rationale if "rag-assistant" in r]


def test_a_plan_the_account_has_no_room_for_is_refused_with_a_proven_total(tmp_path):
    stacks, policies = _project(tmp_path, dev_max_gpus=7)
    with pytest.raises(SizingError) as err:
        plan_requirements_file(stacks / "requirements" / "chat-assistant.yaml", as_of=PLAN_DATE, policy_dir=policies,
                               stacks_dir=stacks, environments=["dev"])
    message = str(err.value)
    assert "(8 with the account's others)" in message  # 1 replica + surge = 2 GPUs, with the rag stacks' 6
    assert "raise maxGpus in" in message and "to >= 8" in message


def test_a_compound_service_s_parts_count_together(tmp_path):
    """Each rag part fits alone (3 GPUs + chat-assistant-dev's <= 6 - 3); both together do not."""
    chat = _gpus("chat-assistant-dev")
    stacks, policies = _project(tmp_path, dev_max_gpus=chat + 5)
    with pytest.raises(SizingError) as err:
        plan_requirements_file(stacks / "requirements" / "rag-assistant.yaml", as_of=PLAN_DATE, policy_dir=policies,
                               stacks_dir=stacks, environments=["dev"])
    message = str(err.value)
    assert ("the parts need 3 (rag-assistant-generator-dev) + 3 (rag-assistant-retrieval-dev) GPUs with the rollout "
            f"surge and the account's other stacks in the Region {chat} (chat-assistant-dev: {chat}): {chat + 6}, "
            f"above maxGpus={chat + 5}") in message
    assert f"to >= {chat + 6}" in message


def test_preflight_checks_the_account_s_gpus_against_max_gpus(tmp_path, monkeypatch):
    monkeypatch.setattr("blueprints.cli._service_quotas_client_factory", lambda: None)
    result = runner.invoke(app, ["preflight", "chat-assistant-dev", "--stacks-dir", str(STACKS), "--json"])
    assert result.exit_code == 0, result.output
    [gpu] = [r for r in json.loads(result.stdout) if r["service_code"] == "policy"]
    chat, total = _gpus("chat-assistant-dev"), _gpus("chat-assistant-dev") + 6
    assert (gpu["quota_code"], gpu["region"], gpu["needed"], gpu["value"], gpu["ok"]) == (
        "gpu-quota", "us-west-2", float(total), float(_max_gpus(POLICIES, "dev")), True)
    assert f"chat-assistant-dev {chat}, rag-assistant-generator-dev 3, rag-assistant-retrieval-dev 3" in gpu["why"]

    stacks, _ = _project(tmp_path, dev_max_gpus=total - 1)
    monkeypatch.chdir(tmp_path)  # policies/config of the working directory
    result = runner.invoke(app, ["preflight", "rag-assistant-dev", "--stacks-dir", str(stacks), "--offline"])
    assert result.exit_code == 1, result.output
    assert (f"too high policy gpu-quota in us-west-2: {total} GPUs of maxGpus {total - 1}"
            in " ".join(result.output.split()))


def _ec2(zones: list[str], offered: list[str], *, subnets: dict[str, str] | None = None):
    """A stubbed EC2 client: the Region's zones (or an existing VPC's subnets -> zone IDs) and the type's offerings."""
    import boto3
    from botocore.stub import ANY, Stubber

    client = boto3.client("ec2", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(client)
    if subnets is not None:
        stub.add_response("describe_subnets", {"Subnets": [{"SubnetId": s, "AvailabilityZoneId": z}
                                                           for s, z in subnets.items()]}, {"SubnetIds": ANY})
    else:
        stub.add_response("describe_availability_zones",
                          {"AvailabilityZones": [{"ZoneId": z, "State": "available"} for z in zones]},
                          {"Filters": [{"Name": "state", "Values": ["available"]}]})
    stub.add_response("describe_instance_type_offerings",
                      {"InstanceTypeOfferings": [{"Location": z, "LocationType": "availability-zone-id"}
                                                 for z in offered]},
                      {"LocationType": "availability-zone-id", "Filters": ANY})
    stub.activate()
    return client


def _preflight_with(monkeypatch, stack: str, ec2) -> object:
    import boto3
    from botocore.stub import Stubber

    quotas = boto3.client("service-quotas", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(quotas)
    for _ in range(4):
        stub.add_response("get_service_quota", {"Quota": {"Value": 10000.0}})
    stub.activate()
    monkeypatch.setattr("blueprints.cli._service_quotas_client_factory", lambda: (lambda region: quotas))
    monkeypatch.setattr("blueprints.cli._ec2_client_factory", lambda: (lambda region: ec2))
    return runner.invoke(app, ["preflight", stack, "--stacks-dir", str(STACKS)])


def test_preflight_refuses_a_zone_spread_its_platform_s_zones_cannot_hold(monkeypatch):
    """regulated-assistant-prod spreads over >= 2 zones (minDomains 2); its existing VPC's subnets are in three zones,
    and p4de.24xlarge is offered in one of them: replicas would stay Pending."""
    bp = read_config(STACKS / "Pulumi.regulated-assistant-prod.yaml")
    platform = read_config(STACKS / f"Pulumi.{bp.platform.stack}.yaml")
    subnets = dict(zip(platform.network.existing_vpc.private_subnet_ids, ["euc1-az1", "euc1-az2", "euc1-az3"]))
    result = _preflight_with(monkeypatch, "regulated-assistant-prod",
                             _ec2([], ["euc1-az2", "euc1-az9"], subnets=subnets))
    assert result.exit_code == 1, result.output
    text = " ".join(result.output.split())
    assert ("too few zones regulated-assistant-prod: p4de.24xlarge is offered in 1 of its platform's zones (euc1-az2 "
            "of euc1-az1, euc1-az2, euc1-az3), needs 2") in text
    assert "--location-type availability-zone-id --filters Name=instance-type,Values=p4de.24xlarge" in text


def test_preflight_takes_a_new_vpc_s_zones_as_pulumi_up_does_and_passes_when_they_offer_the_type(monkeypatch):
    """A new VPC takes the first az_count available zone IDs in ID order, none EKS refuses (use1-az3)."""
    ec2 = _ec2(["use1-az6", "use1-az1", "use1-az3", "use1-az2", "use1-az4"], ["use1-az1", "use1-az2"])
    result = _preflight_with(monkeypatch, "chat-assistant-prod", ec2)
    assert result.exit_code == 0, result.output
    planned = read_config(STACKS / "Pulumi.chat-assistant-prod.yaml").compute.instance_type
    assert (f"ok chat-assistant-prod: {planned} is offered in 2 of its platform's zones (use1-az1, use1-az2 of "
            "use1-az1, use1-az2, use1-az4), needs 2") in " ".join(result.output.split())
