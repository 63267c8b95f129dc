"""The stack against its own recorded requirements: a hand edit that weakens a stack below them fails the preview
(exit 1) naming the `compliance-*` rule; the bundled stacks pass; the baseline diff lists compliance changes first."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from blueprints.contracts.sections import COMPLIANCE_TAG, PLATFORM_COMPLIANCE_ANNOTATION, ComplianceRecord, decode_flags
from blueprints.cli import app
from test_policy_support import policy_resource, stack_violations

ROOT = Path(__file__).resolve().parents[1]
STACK = "regulated-assistant-prod"


def preview(stacks: Path, *extra: str):
    return CliRunner().invoke(app, ["preview", STACK, "--stacks-dir", str(stacks), "--program",
                                    str(ROOT / "__main__.py"), *extra])


def edited(tmp_path: Path, stack: str, edit) -> Path:
    for f in (ROOT / "stacks").glob("Pulumi.*.yaml"):
        shutil.copy(f, tmp_path)
    shutil.copytree(ROOT / "stacks" / "requirements", tmp_path / "requirements", dirs_exist_ok=True)
    path = tmp_path / f"Pulumi.{stack}.yaml"
    data = yaml.safe_load(path.read_text())
    config = data["config"]
    edit(config.get("servingblueprints:blueprint") or config["servingblueprints:platform"])
    path.write_text(yaml.safe_dump(data))
    return tmp_path


@pytest.mark.parametrize("edit, field", [
    (lambda bp: bp["network"].update(private_only=False), "network.private_only"),
    (lambda bp: (bp["storage"].update(customer_managed_kms=False), bp["compliance"].update(customer_managed_kms=False)),
     "storage.customer_managed_kms"),
    (lambda bp: (bp.update(production=False), bp["compliance"].update(production=False),
                 bp["autoscaling"].update(min_replicas=0)), "production"),
], ids=["private_only-false", "no-customer-managed-key", "production-scales-to-zero"])
def test_a_hand_edit_below_the_stacks_requirements_exits_2_naming_the_field(tmp_path, edit, field):
    """Judged against the requirements file it was planned from, not its own record: an edit of both still fails."""
    result = preview(edited(tmp_path, STACK, edit))
    assert result.exit_code == 2, result.output
    output = " ".join(result.output.split())
    assert f"servingblueprints:blueprint.{field}: is False but" in output and "regulated-assistant.yaml" in output


def test_the_compliance_rules_take_their_floor_from_the_policy_config_not_the_record():
    scaler = policy_resource("kubernetes:keda.sh/v1alpha1:ScaledObject", {"spec": {"minReplicaCount": 0}}, name="s")
    weakened = bucket(production=False)  # the record says non-production
    assert stack_violations("compliance-production", [weakened, scaler]) == []
    found = stack_violations("compliance-production", [weakened, scaler], {"production": True})
    assert [m.split(" may")[0] for _, m in found] == ["ScaledObject 's'"]


def test_a_service_requiring_audit_logs_on_a_platform_without_them_fails(tmp_path):
    stacks = edited(tmp_path, "platform-prod-eu-central-1",
                    lambda cfg: cfg.update(audit_logging=False, audit_log_retention_days=None))
    result = preview(stacks)
    assert result.exit_code == 1
    assert "mandatory compliance-audit-logging on regulated-assistant-prod-namespace" in result.output
    assert "its platform reports audit_logging=false" in result.output


def test_the_bundled_regulated_stack_records_its_requirements_and_passes(tmp_path):
    result = preview(ROOT / "stacks", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["compliance"] == {"regions_allowed": ["eu-central-1", "eu-west-1"], "private_only": True,
                                  "customer_managed_kms": True, "audit_logging": True, "production": True}
    [bucket] = [r for r in data["resources"] if r["type"] == "aws:s3/bucket:Bucket"]
    assert decode_flags(bucket["inputs"]["tags"][COMPLIANCE_TAG]) == {
        "audit_logging": True, "customer_managed_kms": True, "private_only": True, "production": True,
        "regions_allowed": "eu-central-1/eu-west-1"}
    [namespace] = [m for m in data["manifests"] if m["kind"] == "Namespace"]
    assert decode_flags(namespace["metadata"]["annotations"][PLATFORM_COMPLIANCE_ANNOTATION]) == {
        "audit_logging": True, "private_endpoint": True, "secrets_kms": True}


def test_the_baseline_diff_lists_a_compliance_change_first(tmp_path):
    base_dir = tmp_path / "base"
    assert preview(ROOT / "stacks", "--out", str(base_dir)).exit_code == 0
    (tmp_path / "head").mkdir()
    # A stricter record (a weaker one is refused before any report: its requirements say otherwise).
    head = edited(tmp_path / "head", STACK, lambda bp: bp["compliance"].update(regions_allowed=["eu-central-1"]))
    result = preview(head, "--baseline", str(base_dir / "plan.json"), "--out", str(tmp_path / "out"))
    lines = result.output.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("[compliance changed]"))
    assert lines[first:first + 1] == ["[compliance changed] regions_allowed[1]: 'eu-west-1' -> None"]
    assert lines[first + 1].startswith("Against baseline")
    markdown = (tmp_path / "out" / "plan.md").read_text()
    assert markdown.index("**Compliance changed**") < markdown.index("Monthly cost:")
    assert json.loads((tmp_path / "out" / "plan.json").read_text())["diff"]["compliance"][0] == {
        "path": "regions_allowed[1]", "before": "eu-west-1", "after": None}


def record(**changes) -> dict:
    values = {"regions_allowed": ["eu-central-1"], "private_only": True, "customer_managed_kms": True,
              "audit_logging": True, "production": True, **changes}
    return {"tags": {COMPLIANCE_TAG: ComplianceRecord(**values).to_tag()}}


def bucket(**changes):
    return policy_resource("aws:s3/bucket:Bucket", record(**changes), name="weights-bucket")


def test_a_record_that_does_not_require_a_setting_makes_its_rule_pass():
    scaler = policy_resource("kubernetes:keda.sh/v1alpha1:ScaledObject", {"spec": {"minReplicaCount": 0}}, name="s")
    assert stack_violations("compliance-production", [bucket(production=False), scaler]) == []
    assert [m.split(" may")[0] for _, m in stack_violations("compliance-production", [bucket(), scaler])] == [
        "ScaledObject 's'"]


def test_a_stack_without_a_record_is_not_judged_by_the_compliance_rules():
    scaler = policy_resource("kubernetes:keda.sh/v1alpha1:ScaledObject", {"spec": {}}, name="s")
    assert stack_violations("compliance-production", [scaler]) == []


def test_production_forbids_spot_node_pools_and_a_keda_default_of_zero():
    pool = policy_resource("kubernetes:karpenter.sh/v1:NodePool", {"spec": {"template": {"spec": {"requirements": [
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]}]}}}}, name="gpu")
    scaler = policy_resource("kubernetes:keda.sh/v1alpha1:ScaledObject", {"spec": {"maxReplicaCount": 4}}, name="s")
    found = [m.split(" may")[0] for _, m in stack_violations("compliance-production", [bucket(), pool, scaler])]
    assert sorted(found) == ["NodePool 'gpu'", "ScaledObject 's'"]


def test_production_lets_a_sagemaker_target_reach_zero_only_on_an_asynchronous_endpoint():
    """A real-time variant at zero refuses requests; an asynchronous endpoint queues them (its configuration's
    asyncInferenceConfig), so its scalable target may reach zero in production."""
    target = policy_resource("aws:appautoscaling/target:Target", {
        "minCapacity": 0, "maxCapacity": 4, "resourceId": "endpoint/batch-prod/variant/primary"}, name="t")
    endpoint = policy_resource("aws:sagemaker/endpoint:Endpoint", {"name": "batch-prod", "endpointConfigName": "c1"},
                               name="e")

    def config(name, **extra):
        return policy_resource("aws:sagemaker/endpointConfiguration:EndpointConfiguration",
                               {"name": name, "productionVariants": [{"variantName": "primary"}], **extra},
                               name=f"config-{name}")
    queued = {"asyncInferenceConfig": {"outputConfig": {"s3OutputPath": "s3://store/async/batch-prod/out/"}}}
    flagged = [m.split(" may")[0] for _, m in stack_violations("compliance-production", [bucket(), target, endpoint,
                                                                                           config("c1")])]
    assert flagged == ["Target 't'"]
    assert stack_violations("compliance-production", [bucket(), target, endpoint, config("c1", **queued)]) == []
    # The configuration the endpoint names decides, not another one in the stack.
    assert [m.split(" may")[0] for _, m in stack_violations("compliance-production", [
        bucket(), target, endpoint, config("c1"), config("c2", **queued)])] == ["Target 't'"]
    # A target of another endpoint is not exempted by this one's queue.
    other = policy_resource("aws:appautoscaling/target:Target", {
        "minCapacity": 0, "resourceId": "endpoint/other/variant/primary"}, name="o")
    assert [m.split(" may")[0] for _, m in stack_violations("compliance-production", [
        bucket(), other, endpoint, config("c1", **queued)])] == ["Target 'o'"]


def test_regions_outside_the_records_list_are_flagged_whatever_the_policy_config():
    from test_policy_support import aws_provider

    role = policy_resource("aws:iam/role:Role", {}, name="r", provider=aws_provider("us-east-1"))
    found = stack_violations("compliance-regions", [bucket(), role])
    assert [m.split(" is in")[0] for _, m in found] == ["Role 'r'"]
    assert stack_violations("compliance-regions", [bucket(regions_allowed=[]), role]) == []


def test_private_only_flags_an_internet_facing_load_balancer_and_a_public_platform_api():
    svc = policy_resource("kubernetes:core/v1:Service", {"metadata": {"annotations": {
        "service.beta.kubernetes.io/aws-load-balancer-scheme": "internet-facing"}}, "spec": {"type": "LoadBalancer"}},
        name="vllm")
    ns = policy_resource("kubernetes:core/v1:Namespace", {"metadata": {"annotations": {
        PLATFORM_COMPLIANCE_ANNOTATION: "audit_logging=true private_endpoint=false secrets_kms=true"}}}, name="ns")
    found = [m.split(" ")[0:2] for _, m in stack_violations("compliance-private-only", [bucket(), svc, ns])]
    assert found == [["Service", "'vllm'"], ["Namespace", "'ns':"]]
    assert stack_violations("compliance-private-only", [bucket(private_only=False), svc, ns]) == []


def test_an_edge_stack_records_its_compliance_on_its_namespace_and_a_hand_edit_below_it_fails(tmp_path):
    """An edge cluster's stack keeps no model store bucket to tag: its namespace carries the record instead."""
    from blueprints.contracts.sections import COMPLIANCE_ANNOTATION

    edge = "edge-classifier-prod"
    result = CliRunner().invoke(app, ["preview", edge, "--stacks-dir", str(ROOT / "stacks"), "--program",
                                      str(ROOT / "__main__.py"), "--json"])
    assert result.exit_code == 0, result.output
    [namespace] = [m for m in json.loads(result.stdout)["manifests"] if m["kind"] == "Namespace"]
    record = decode_flags(namespace["metadata"]["annotations"][COMPLIANCE_ANNOTATION])
    assert record["production"] is True and record["regions_allowed"] == "eu-west-1"
    # a record requiring private_only beside a stack that is not: the namespace's label gives it away
    stacks = edited(tmp_path, edge, lambda bp: bp["compliance"].update(private_only=True))
    result = CliRunner().invoke(app, ["preview", edge, "--stacks-dir", str(stacks), "--program",
                                      str(ROOT / "__main__.py")])
    assert result.exit_code == 1, result.output
    assert "mandatory compliance-private-only on edge-classifier-prod-namespace" in result.output
