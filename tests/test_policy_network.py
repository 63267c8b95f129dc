"""Policies on exposure and placement: private endpoints, SageMaker KMS, allowed regions, EKS audit logs."""

from __future__ import annotations

from test_policy_support import UNKNOWN_STRING, aws_provider, resource_violations

SERVICE = "kubernetes:core/v1:Service"
CLUSTER = "aws:eks/cluster:Cluster"
MODEL = "aws:sagemaker/model:Model"
ENDPOINT_CONFIG = "aws:sagemaker/endpointConfiguration:EndpointConfiguration"
BUCKET = "aws:s3/bucket:Bucket"
PRIVATE = {"privateOnly": True}


def load_balancer(scheme: str) -> dict:
    annotations = {"service.beta.kubernetes.io/aws-load-balancer-scheme": scheme}
    return {"metadata": {"name": "vllm", "annotations": annotations},
            "spec": {"type": "LoadBalancer", "ports": [{"port": 8000}]}}


def test_an_internal_load_balancer_passes_in_a_private_environment():
    assert resource_violations("private-endpoints", SERVICE, load_balancer("internal"), config=PRIVATE) == []


def test_an_internet_facing_load_balancer_is_flagged_in_a_private_environment():
    assert resource_violations("private-endpoints", SERVICE, load_balancer("internet-facing"), name="vllm",
                               config=PRIVATE) == [
        "Service 'vllm' is a LoadBalancer without an internal scheme, so AWS gives it a public address; add the "
        "annotation service.beta.kubernetes.io/aws-load-balancer-scheme: internal (or use ClusterIP)"]


def test_an_internet_facing_load_balancer_passes_where_the_environment_is_not_private_only():
    assert resource_violations("private-endpoints", SERVICE, load_balancer("internet-facing"),
                               config={"privateOnly": False}) == []


def test_private_only_is_the_default_without_config():
    assert len(resource_violations("private-endpoints", SERVICE, load_balancer("internet-facing"))) == 1


def test_an_eks_cluster_with_a_private_api_endpoint_passes():
    props = {"vpcConfig": {"endpointPublicAccess": False, "endpointPrivateAccess": True, "subnetIds": ["a", "b"]}}
    assert resource_violations("private-endpoints", CLUSTER, props, config=PRIVATE) == []


def test_an_eks_cluster_with_a_public_api_endpoint_is_flagged():
    props = {"vpcConfig": {"endpointPublicAccess": True, "endpointPrivateAccess": True, "subnetIds": ["a", "b"]}}
    assert resource_violations("private-endpoints", CLUSTER, props, name="chat", config=PRIVATE) == [
        "Cluster 'chat' exposes its Kubernetes API on the internet (vpcConfig.endpointPublicAccess is true); set "
        "vpcConfig.endpointPublicAccess: false and endpointPrivateAccess: true"]


def test_an_eks_cluster_that_leaves_endpoint_public_access_unset_gets_the_public_default():
    assert resource_violations("private-endpoints", CLUSTER, {"vpcConfig": {"subnetIds": ["a"]}}, name="chat",
                               config=PRIVATE) == [
        "Cluster 'chat' exposes its Kubernetes API on the internet (vpcConfig.endpointPublicAccess is unset, which "
        "defaults to true); set vpcConfig.endpointPublicAccess: false and endpointPrivateAccess: true"]


def test_a_sagemaker_model_in_a_vpc_passes_and_one_without_vpc_config_is_flagged():
    model = {"executionRoleArn": "arn:aws:iam::123456789012:role/sm", "primaryContainer": {"image": "x:1"},
             "vpcConfig": {"subnets": ["subnet-1"], "securityGroupIds": ["sg-1"]}}
    assert resource_violations("private-endpoints", MODEL, model, config=PRIVATE) == []
    del model["vpcConfig"]
    assert resource_violations("private-endpoints", MODEL, model, name="llm", config=PRIVATE) == [
        "Model 'llm' has no vpcConfig, so its containers reach the internet; set vpcConfig with private subnets and "
        "security groups"]


def test_a_sagemaker_endpoint_configuration_with_a_kms_key_passes_and_one_without_is_flagged():
    config = {"kmsKeyArn": "arn:aws:kms:us-east-1:123456789012:key/1",
              "productionVariants": [{"variantName": "main", "instanceType": "ml.inf2.xlarge"}]}
    assert resource_violations("sagemaker-endpoint-kms", ENDPOINT_CONFIG, config) == []
    del config["kmsKeyArn"]
    assert resource_violations("sagemaker-endpoint-kms", ENDPOINT_CONFIG, config, name="ep") == [
        "EndpointConfiguration 'ep' has no kmsKeyArn, so the ML storage volumes attached to the endpoint instances "
        "are not encrypted with your key; set kmsKeyArn to a KMS key ARN"]


def test_instance_types_with_local_nvme_need_no_storage_key():
    config = {"productionVariants": [{"variantName": "main", "instanceType": "ml.g5.2xlarge"}]}
    assert resource_violations("sagemaker-endpoint-kms", ENDPOINT_CONFIG, config) == []
    config["productionVariants"].append({"variantName": "canary", "instanceType": "ml.inf2.xlarge"})
    assert len(resource_violations("sagemaker-endpoint-kms", ENDPOINT_CONFIG, config)) == 1


def test_a_kms_key_still_unknown_during_preview_is_not_flagged():
    assert resource_violations("sagemaker-endpoint-kms", ENDPOINT_CONFIG, {"kmsKeyArn": UNKNOWN_STRING}) == []


REGION_MESSAGE = ("Bucket 'weights' is in region 'eu-central-1', outside the allowed ['us-east-1', 'us-west-2']; set "
                  "`aws:region` (or the resource's region) to an allowed region, or add it to allowedRegions in the "
                  "policy config")


def test_a_resource_whose_provider_is_in_an_allowed_region_passes():
    assert resource_violations("region-allowed", BUCKET, {}, provider=aws_provider("us-west-2")) == []


def test_a_resource_whose_provider_is_in_another_region_is_flagged():
    assert resource_violations("region-allowed", BUCKET, {}, name="weights",
                               provider=aws_provider("eu-central-1")) == [REGION_MESSAGE]


def test_a_resource_region_input_overrides_the_provider_region():
    assert resource_violations("region-allowed", BUCKET, {"region": "eu-central-1"}, name="weights",
                               provider=aws_provider("us-east-1")) == [REGION_MESSAGE]


def test_an_explicit_aws_provider_in_another_region_is_flagged():
    assert resource_violations("region-allowed", "pulumi:providers:aws", {"region": "eu-central-1"},
                               name="eu") == [REGION_MESSAGE.replace("Bucket 'weights'", "aws provider 'eu'")]


def test_the_allowed_regions_come_from_the_policy_config():
    assert resource_violations("region-allowed", BUCKET, {}, provider=aws_provider("eu-central-1"),
                               config={"allowedRegions": ["eu-central-1"]}) == []


def test_an_eks_cluster_with_audit_logs_passes_and_one_without_is_flagged():
    props = {"enabledClusterLogTypes": ["api", "audit", "authenticator"]}
    assert resource_violations("cluster-audit-logs", CLUSTER, props) == []
    props["enabledClusterLogTypes"] = ["api", "authenticator"]
    assert resource_violations("cluster-audit-logs", CLUSTER, props, name="chat") == [
        "Cluster 'chat' does not send Kubernetes audit logs to CloudWatch; add \"audit\" (and \"authenticator\") to "
        "enabledClusterLogTypes"]


def test_audit_logs_are_not_required_when_the_config_says_so():
    assert resource_violations("cluster-audit-logs", CLUSTER, {}, config={"auditLoggingRequired": False}) == []
