"""Policies on credentials: no static AWS keys anywhere, no credential-like env vars as literal values."""

from __future__ import annotations

import base64

from pulumi.runtime import proto
from pulumi_policy import EnforcementLevel, ResourceValidationPolicy
from pulumi_policy.policy import _PolicyAnalyzerServicer
from google.protobuf import struct_pb2

from test_policy_support import gpu_deployment, main_container, resource_violations

DEPLOYMENT = "kubernetes:apps/v1:Deployment"
SECRET = "kubernetes:core/v1:Secret"
FAKE_KEY_ID = "AKIA" + "IOSFODNN7EXAMPLE"  # AWS's documentation example key id


def with_env(*env: dict) -> dict:
    d = gpu_deployment()
    main_container(d)["env"] = list(env)
    return d


def test_region_environment_variables_are_not_credentials():
    d = with_env({"name": "AWS_REGION", "value": "us-east-1"})
    assert resource_violations("no-static-aws-credentials", DEPLOYMENT, d) == []


def test_an_aws_secret_key_environment_variable_is_flagged_even_from_a_secret_ref():
    d = with_env({"name": "AWS_SECRET_ACCESS_KEY",
                  "valueFrom": {"secretKeyRef": {"name": "aws", "key": "secret"}}})
    assert resource_violations("no-static-aws-credentials", DEPLOYMENT, d, name="vllm") == [
        "container 'vllm' of Deployment 'vllm' sets 'AWS_SECRET_ACCESS_KEY', a static AWS credential; use the pod's "
        "IAM identity (EKS Pod Identity or IRSA) instead of access keys"]


def test_an_access_key_id_value_under_any_name_is_flagged():
    d = with_env({"name": "S3_LOGIN", "value": FAKE_KEY_ID})
    assert resource_violations("no-static-aws-credentials", DEPLOYMENT, d, name="vllm") == [
        "container 'vllm' of Deployment 'vllm' sets 'S3_LOGIN' to an AWS access key id, a static AWS credential; "
        "use the pod's IAM identity (EKS Pod Identity or IRSA) instead of access keys"]


def test_a_secret_holding_aws_keys_is_flagged_when_its_data_is_visible():
    encoded = base64.b64encode(FAKE_KEY_ID.encode()).decode()
    assert resource_violations("no-static-aws-credentials", SECRET, {"data": {"key-id": encoded}}, name="s3") == [
        "Secret 's3' holds 'key-id', a static AWS credential; use the pod's IAM identity (EKS Pod Identity or IRSA) "
        "instead of access keys"]
    assert resource_violations("no-static-aws-credentials", SECRET, {"data": {"key-id": "aGVsbG8="}}) == []


def test_a_secret_masked_by_the_offline_preview_is_not_judged():
    assert resource_violations("no-static-aws-credentials", SECRET, {"stringData": "[secret]"}) == []


def test_an_aws_provider_configured_with_access_keys_is_flagged():
    assert resource_violations("no-static-aws-credentials", "pulumi:providers:aws",
                               {"region": "us-east-1", "accessKey": FAKE_KEY_ID, "secretKey": "x"}, name="p") == [
        "aws provider 'p' is configured with an access key (aws:accessKey/aws:secretKey); use an IAM role (environment "
        "credentials, SSO or OIDC) for the deployment instead"]
    assert resource_violations("no-static-aws-credentials", "pulumi:providers:aws", {"region": "us-east-1"}) == []


def test_a_token_taken_from_a_secret_ref_passes():
    d = with_env({"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}})
    assert resource_violations("no-plaintext-secrets", DEPLOYMENT, d) == []


def test_a_token_given_as_a_literal_value_is_flagged():
    d = with_env({"name": "HF_TOKEN", "value": "hf_abc"})
    assert resource_violations("no-plaintext-secrets", DEPLOYMENT, d, name="vllm") == [
        "container 'vllm' of Deployment 'vllm' sets 'HF_TOKEN' as a literal value, readable by anyone who can read "
        "the Deployment; store it in a Kubernetes Secret (from a Pulumi secret) and use env.valueFrom.secretKeyRef"]


def test_a_pulumi_secret_placed_in_an_env_literal_is_still_plain_text_in_the_pod_spec():
    d = with_env({"name": "DB_PASSWORD", "value": "[secret]"})
    assert len(resource_violations("no-plaintext-secrets", DEPLOYMENT, d)) == 1


def test_crossguard_python_validations_see_secret_values_unmarked():
    """Why Secret data is not judged by its secretness: pulumi-policy's Analyze drops the engine's secret mark."""
    seen = []
    policy = ResourceValidationPolicy("probe", "records props", lambda args, report: seen.append(dict(args.props)))
    servicer = _PolicyAnalyzerServicer("pack", "0.0.1", [policy], EnforcementLevel.MANDATORY)
    props = struct_pb2.Struct()
    props.update({"stringData": {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270",
                                 "value": {"token": "literal"}}})
    servicer.Analyze(proto.AnalyzeRequest(type=SECRET, urn="urn:x", name="s", properties=props), None)
    assert [dict(p["stringData"]) for p in seen] == [{"token": "literal"}]
