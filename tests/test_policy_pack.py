"""The policy pack as a whole: config files vs schemas, one way through (CrossGuard and offline), the example clean."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import grpc
import jsonschema
import pytest
import yaml
from google.protobuf import empty_pb2, struct_pb2
from pulumi.runtime import proto
from pulumi.runtime.proto import analyzer_pb2_grpc
from pulumi_policy import PolicyResource, StackValidationPolicy

from blueprints.review.preview import RegisteredResource, run_preview
from blueprints.review.policy_pack import CONFIG_DIR, evaluate, evaluate_preview, load_policy_config
from policies.rules import POLICIES, RULES, RULES_BY_NAME
from tests.bundled import bundled_preview
from test_policy_support import (
    UNKNOWN_STRING,
    aws_provider,
    gpu_deployment,
    main_container,
    policy_resource,
    resource_violations,
    stack_violations,
)

ROOT = Path(__file__).resolve().parent.parent
POLICY_DIR = ROOT / "policies"
ENVIRONMENTS = ["dev", "staging", "prod"]


def test_there_is_one_crossguard_policy_per_rule_with_its_name_level_and_description():
    assert [(p.name, p.enforcement_level, p.description) for p in POLICIES] == [
        (r.name, r.enforcement_level, r.description) for r in RULES]
    assert all("Fix:" in r.description for r in RULES)


def test_every_configurable_policy_has_a_config_schema_with_described_defaults():
    for rule, policy in zip(RULES, POLICIES, strict=True):
        if rule.config:
            assert policy.config_schema is not None and policy.config_schema.properties == rule.config
            assert all("default" in s and "description" in s for s in rule.config.values()), rule.name
        else:
            assert policy.config_schema is None


@pytest.mark.parametrize("environment", ENVIRONMENTS)
def test_each_environment_config_file_validates_against_the_policies_config_schemas(environment):
    config = json.loads((CONFIG_DIR / f"{environment}.json").read_text())
    assert set(config) <= set(RULES_BY_NAME), f"unknown policy names: {set(config) - set(RULES_BY_NAME)}"
    for name, entry in config.items():
        jsonschema.validate(entry, RULES_BY_NAME[name].config_json_schema())


def test_a_config_entry_with_a_misspelt_key_fails_schema_validation():
    with pytest.raises(jsonschema.ValidationError, match="maxGPUs"):
        jsonschema.validate({"maxGPUs": 8}, RULES_BY_NAME["gpu-quota"].config_json_schema())


def test_an_unknown_environment_names_the_known_configs():
    with pytest.raises(FileNotFoundError, match=r"known: \['dev', 'prod', 'staging'\]"):
        load_policy_config("qa")


def test_the_pack_runs_the_python_runtime_and_its_entry_point_only_builds_the_policy_pack():
    assert yaml.safe_load((POLICY_DIR / "PulumiPolicy.yaml").read_text())["runtime"]["name"] == "python"
    module = ast.parse((POLICY_DIR / "__main__.py").read_text())
    calls = [s for s in module.body if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)]
    assert [c.value.func.id for c in calls] == ["PolicyPack"]  # type: ignore[attr-defined]
    assert all(isinstance(s, (ast.Import, ast.ImportFrom)) for s in module.body[1:] if s not in calls)


def test_the_pack_boots_as_pulumi_runs_it_and_serves_every_policy_over_grpc():
    """`__main__.py` in a child process (never imported here): it prints its port and blocks serving the analyzer."""
    pack = subprocess.Popen([sys.executable, "__main__.py"], cwd=POLICY_DIR, stdout=subprocess.PIPE)
    try:
        stub = analyzer_pb2_grpc.AnalyzerStub(grpc.insecure_channel(f"127.0.0.1:{int(pack.stdout.readline())}"))
        info = stub.GetAnalyzerInfo(empty_pb2.Empty(), timeout=30)
        deployment = gpu_deployment()
        main_container(deployment)["image"] = "vllm/vllm-openai:latest"
        props = struct_pb2.Struct()
        props.update(deployment)
        analyzed = stub.Analyze(proto.AnalyzeRequest(type="kubernetes:apps/v1:Deployment", urn="urn:d", name="d",
                                                     properties=props), timeout=30)
    finally:
        pack.terminate()
        pack.wait(timeout=10)
    assert (info.name, info.supportsConfig) == ("servingblueprints-guardrails", True)
    assert [p.name for p in info.policies] == [r.name for r in RULES]
    assert [(d.policyName, d.enforcementLevel) for d in analyzed.diagnostics] == [("images-pinned", proto.MANDATORY)]
    assert analyzed.diagnostics[0].message.endswith(
        "container 'vllm' of Deployment 'd': image 'vllm/vllm-openai:latest' uses the mutable tag :latest; pin a "
        "version tag (e.g. vllm/vllm-openai:v0.11.0) or a digest")


@pytest.fixture(scope="module")
def chat_prod_report():
    return bundled_preview("chat-assistant-prod")


def test_the_bundled_chat_assistant_prod_preview_passes_every_policy_offline(chat_prod_report):
    assert evaluate_preview(chat_prod_report, load_policy_config("prod")) == []


def test_a_stack_config_edited_to_break_a_rule_makes_the_offline_preview_name_that_rule(tmp_path):
    data = yaml.safe_load((ROOT / "stacks" / "Pulumi.chat-assistant-prod.yaml").read_text())
    data["config"]["servingblueprints:blueprint"]["engine"]["image"] = "vllm/vllm-openai:latest"
    (tmp_path / "Pulumi.chat-assistant-prod.yaml").write_text(yaml.safe_dump(data))
    shutil.copy(ROOT / "stacks" / "Pulumi.platform-prod-us-east-1.yaml", tmp_path)
    report = run_preview("chat-assistant-prod", stacks_dir=tmp_path, program=ROOT / "__main__.py")
    verdicts = evaluate_preview(report, load_policy_config("prod"))
    assert {(v.policy, v.level) for v in verdicts} == {("images-pinned", "mandatory")}
    assert all("'vllm/vllm-openai:latest' uses the mutable tag :latest" in v.message for v in verdicts)


def record(resource_type: str, name: str, inputs: dict, parent: str | None = None) -> RegisteredResource:
    return RegisteredResource(urn=f"urn:{resource_type}::{name}", type=resource_type, name=name, parent=parent,
                              custom=True, inputs=inputs)


def test_offline_evaluation_reports_the_same_messages_as_crossguard():
    d = gpu_deployment(tolerations=[])
    main_container(d)["image"] = "vllm/vllm-openai"
    records = [record("kubernetes:apps/v1:Deployment", "vllm", d), record("aws:s3/bucket:Bucket", "b", {})]
    offline = {(v.policy, v.message) for v in evaluate(records, {}, aws_region="eu-west-1")}
    crossguard = {(name, m) for name in ("gpu-taint-tolerated", "images-pinned")
                  for m in resource_violations(name, "kubernetes:apps/v1:Deployment", d, name="vllm")}
    crossguard |= {(name, m) for name in ("region-allowed", "required-tags")
                   for m in resource_violations(name, "aws:s3/bucket:Bucket", {}, name="b",
                                                provider=aws_provider("eu-west-1"))}
    crossguard |= {(name, m) for name in ("bucket-encrypted-kms", "bucket-versioned", "bucket-public-access-blocked")
                   for _, m in stack_violations(name, [policy_resource("aws:s3/bucket:Bucket", {}, name="b")])}
    crossguard |= {("workloads-have-network-policy", m) for _, m in stack_violations(
        "workloads-have-network-policy", [policy_resource("kubernetes:apps/v1:Deployment", d, name="vllm")])}
    assert offline == crossguard
    assert len(offline) == 8


def test_offline_evaluation_applies_the_configured_levels():
    records = [record("aws:eks/nodeGroup:NodeGroup", "gpu", {"capacityType": "SPOT", "tags": {}})]
    config = {"no-spot-capacity": {"enforcementLevel": "advisory"}, "required-tags": {"enforcementLevel": "disabled"}}
    assert [(v.policy, v.level, v.resource) for v in evaluate(records, config, aws_region="us-east-1")] == [
        ("no-spot-capacity", "advisory", "urn:aws:eks/nodeGroup:NodeGroup::gpu")]


def test_stack_findings_without_a_resource_name_the_stack_offline():
    group = {"instanceTypes": ["p5.48xlarge"], "scalingConfig": {"maxSize": 2}, "tags": {}}
    verdicts = evaluate([record("aws:eks/nodeGroup:NodeGroup", "gpu", group)], {"gpu-quota": {"maxGpus": 8}},
                        aws_region="us-east-1", stack="chat-assistant-dev")
    assert [(v.policy, v.resource) for v in verdicts if v.policy == "gpu-quota"] == [
        ("gpu-quota", "chat-assistant-dev")]


UNKNOWN_PROPS = {
    "aws:eks/nodeGroup:NodeGroup": {"instanceTypes": UNKNOWN_STRING, "capacityType": UNKNOWN_STRING,
                                    "scalingConfig": {"maxSize": UNKNOWN_STRING}, "tags": UNKNOWN_STRING},
    "aws:eks/cluster:Cluster": {"vpcConfig": {"endpointPublicAccess": UNKNOWN_STRING},
                                "enabledClusterLogTypes": UNKNOWN_STRING, "tags": UNKNOWN_STRING},
    "aws:s3/bucket:Bucket": {"bucket": UNKNOWN_STRING, "tags": UNKNOWN_STRING, "region": UNKNOWN_STRING},
    "aws:s3/bucketVersioning:BucketVersioning": {"bucket": UNKNOWN_STRING,
                                                 "versioningConfiguration": UNKNOWN_STRING},
    "kubernetes:core/v1:Service": {"metadata": {"annotations": UNKNOWN_STRING},
                                   "spec": {"type": "LoadBalancer"}},
    "kubernetes:apps/v1:Deployment": {"metadata": {"name": UNKNOWN_STRING, "namespace": "serving"}, "spec": {"template": {
        "metadata": {"annotations": {"servingblueprints.io/tensor-parallel-size": "2",
                                     "servingblueprints.io/pod-start-s": UNKNOWN_STRING}},
        "spec": {"nodeSelector": {"node.kubernetes.io/instance-type": "g6e.12xlarge"},
                 "containers": [{"name": "c", "image": UNKNOWN_STRING, "env": UNKNOWN_STRING,
                                 "securityContext": {"allowPrivilegeEscalation": UNKNOWN_STRING,
                                                     "runAsNonRoot": UNKNOWN_STRING, "capabilities": UNKNOWN_STRING},
                                 "resources": {"limits": {"nvidia.com/gpu": UNKNOWN_STRING}}}],
                 "tolerations": UNKNOWN_STRING, "volumes": UNKNOWN_STRING}}}},
    "kubernetes:keda.sh/v1alpha1:ScaledObject": {"spec": {"maxReplicaCount": UNKNOWN_STRING,
                                                          "scaleTargetRef": {"name": UNKNOWN_STRING}}},
}


def test_values_unknown_during_preview_neither_crash_a_policy_nor_count_as_violations():
    for resource_type, props in UNKNOWN_PROPS.items():
        for policy in POLICIES:
            if not isinstance(policy, StackValidationPolicy):
                assert resource_violations(policy.name, resource_type, props, config={"privateOnly": True}) == [], \
                    (policy.name, resource_type)
    resources: list[PolicyResource] = [policy_resource(t, p, name=t.rsplit(":", 1)[-1])
                                       for t, p in UNKNOWN_PROPS.items()]
    stack_policies = [p.name for p in POLICIES if isinstance(p, StackValidationPolicy)]
    found = {name: [m.split(":")[0] for _, m in stack_violations(name, resources)] for name in stack_policies}
    assert found == {name: [] for name in stack_policies} | {  # these resources are absent: real findings
        "bucket-encrypted-kms": ["Bucket 'Bucket' has no BucketServerSideEncryptionConfiguration"],
        "bucket-public-access-blocked": ["Bucket 'Bucket' has no BucketPublicAccessBlock"],
        "workloads-have-network-policy": ["Deployment 'Deployment'"]}
