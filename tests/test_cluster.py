"""Cluster: EKS control plane, system and workload node pools, Pod Identity agent, device plugin, kubeconfig."""

from __future__ import annotations

import json

import pytest

from blueprints.manifests import validate_manifest
from blueprints.preview import run_under_mocks
from components.cluster import Cluster, ClusterArgs, GpuDevicePlugin, GpuDevicePluginArgs, node_pool_bounds
from tests.blueprint_builders import derive, manifests, onnx_blueprint, run_program
from tests.conftest import vllm_blueprint


def run_cluster(bp):
    def body():
        cluster = Cluster(bp.stack, ClusterArgs(blueprint=bp, subnet_ids=["subnet-1", "subnet-2"]))
        return {"kubeconfig": cluster.kubeconfig, "name": cluster.cluster_name}
    return run_under_mocks(body, stack=bp.stack, config={"aws:region": bp.region})


@pytest.fixture(scope="module")
def prod_run(chat_prod):
    return run_cluster(chat_prod)


def gpu_pool(run):
    [pool] = [r for r in run.of_type("aws:eks/nodeGroup:NodeGroup") if r.name.endswith("-gpu-nodes")]
    return pool.inputs


def test_gpu_pool_uses_the_nvidia_ami_the_planned_instance_type_and_the_gpu_taint(prod_run, chat_prod):
    pool = gpu_pool(prod_run)
    assert pool["amiType"] == "AL2023_x86_64_NVIDIA"
    assert pool["instanceTypes"] == [chat_prod.compute.instance_type]
    assert pool["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}]
    assert pool["labels"]["nvidia.com/gpu.present"] == "true"
    assert pool["capacityType"] == "ON_DEMAND"


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_gpu_pool_max_nodes_times_gpus_covers_max_replicas_times_gpus_per_replica(tp, chat_prod):
    bp = vllm_blueprint(tp, base=chat_prod)
    scaling = gpu_pool(run_cluster(bp))["scalingConfig"]
    assert scaling["maxSize"] * bp.compute.gpus_per_node >= bp.autoscaling.max_replicas * bp.compute.gpus_per_replica
    assert scaling["minSize"] <= scaling["desiredSize"] <= scaling["maxSize"]
    bounds = node_pool_bounds(bp)
    assert (scaling["minSize"], scaling["maxSize"]) == (bounds.min_nodes, bounds.max_nodes)


def test_spot_capacity_type_reaches_the_node_group(chat_prod):
    dev = derive(chat_prod, production=False, compute={"capacity_type": "spot"})
    assert gpu_pool(run_cluster(dev))["capacityType"] == "SPOT"


def test_private_only_gives_a_private_api_endpoint(chat_prod):
    vpc = run_cluster(derive(chat_prod, network={"private_only": True})).one("aws:eks/cluster:Cluster")
    assert vpc.inputs["vpcConfig"]["endpointPublicAccess"] is False
    assert vpc.inputs["vpcConfig"]["endpointPrivateAccess"] is True


def test_public_endpoint_only_without_private_only(prod_run, chat_prod):
    assert chat_prod.network.private_only is False
    assert prod_run.one("aws:eks/cluster:Cluster").inputs["vpcConfig"]["endpointPublicAccess"] is True


def test_audit_logging_enables_the_control_plane_logs(prod_run, chat_prod):
    assert chat_prod.platform.audit_logging
    logs = prod_run.one("aws:eks/cluster:Cluster").inputs["enabledClusterLogTypes"]
    assert {"api", "audit", "authenticator"} <= set(logs)


def test_without_audit_logging_no_log_types_are_set(chat_prod):
    bp = derive(chat_prod, platform={"audit_logging": False})
    assert "enabledClusterLogTypes" not in run_cluster(bp).one("aws:eks/cluster:Cluster").inputs


def test_customer_managed_kms_encrypts_kubernetes_secrets_with_a_rotating_key(chat_prod):
    run = run_cluster(derive(chat_prod, storage={"customer_managed_kms": True}))
    key = run.one("aws:kms/key:Key")
    assert key.inputs["enableKeyRotation"] is True
    enc = run.one("aws:eks/cluster:Cluster").inputs["encryptionConfig"]
    assert enc["resources"] == ["secrets"] and enc["provider"]["keyArn"].startswith("arn:aws:kms:")


def test_without_customer_managed_kms_no_key_is_created(prod_run):
    assert prod_run.of_type("aws:kms/key:Key") == []
    assert "encryptionConfig" not in prod_run.one("aws:eks/cluster:Cluster").inputs


def test_cluster_uses_access_entries_and_the_planned_kubernetes_version(prod_run, chat_prod):
    cluster = prod_run.one("aws:eks/cluster:Cluster").inputs
    assert cluster["accessConfig"]["authenticationMode"] == "API"
    assert cluster["version"] == chat_prod.platform.kubernetes_version


def test_pod_identity_agent_addon_is_installed(prod_run):
    addon = prod_run.one("aws:eks/addon:Addon")
    assert addon.inputs["addonName"] == "eks-pod-identity-agent"


def test_kubeconfig_authenticates_with_aws_eks_get_token_and_no_static_keys(prod_run, chat_prod):
    kubeconfig = json.loads(prod_run.outputs["kubeconfig"])
    user = kubeconfig["users"][0]["user"]["exec"]
    assert user["command"] == "aws" and user["args"][:2] == ["eks", "get-token"]
    assert chat_prod.region in user["args"]
    assert kubeconfig["clusters"][0]["cluster"]["server"].startswith("https://")
    assert "AWS_SECRET_ACCESS_KEY" not in json.dumps(kubeconfig)


def test_cpu_pools_use_the_standard_ami_of_their_architecture_and_no_taint(chat_prod):
    for arch, ami in (("x86_64", "AL2023_x86_64_STANDARD"), ("arm64", "AL2023_ARM_64_STANDARD")):
        run = run_cluster(onnx_blueprint(chat_prod, arch=arch))
        [pool] = [r for r in run.of_type("aws:eks/nodeGroup:NodeGroup") if r.name.endswith("-cpu-nodes")]
        assert pool.inputs["amiType"] == ami
        assert "taints" not in pool.inputs


def test_every_aws_child_is_parented_and_tagged(prod_run, chat_prod):
    for r in prod_run.records:
        if r.type == "servingblueprints:index:Cluster":
            continue
        assert r.parent == chat_prod.stack, r.name
        assert r.name.startswith(f"{chat_prod.stack}-")
    taggable = {"aws:eks/cluster:Cluster", "aws:eks/nodeGroup:NodeGroup", "aws:iam/role:Role",
                "aws:eks/addon:Addon"}
    for r in prod_run.records:
        if r.type in taggable:
            assert chat_prod.tags.items() <= r.inputs["tags"].items(), r.name


def test_device_plugin_tolerates_the_gpu_taint_runs_unprivileged_and_validates(chat_prod):
    run = run_under_mocks(lambda: GpuDevicePlugin("nv", GpuDevicePluginArgs(instance=chat_prod.stack)) and None,
                          stack=chat_prod.stack)
    [ds] = manifests(run)
    assert validate_manifest(ds) == []
    pod = ds["spec"]["template"]["spec"]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    ctr = pod["containers"][0]
    assert ctr["image"].startswith("nvcr.io/nvidia/k8s-device-plugin:v")
    assert ctr["securityContext"]["privileged"] is False
    assert ctr["securityContext"]["allowPrivilegeEscalation"] is False


def test_program_builds_eks_network_cluster_provider_and_device_plugin_for_a_gpu_blueprint(chat_prod):
    run = run_program(chat_prod)
    provider = run.one("pulumi:providers:kubernetes")
    assert provider.inputs["kubeconfig"] == "[secret]"
    assert run.one("servingblueprints:index:Cluster").name == chat_prod.stack
    assert run.one("servingblueprints:index:GpuDevicePlugin")
    assert run.outputs["cluster_name"].startswith(f"{chat_prod.stack}-eks")
    assert run.outputs["dashboards"]["eks"].endswith(run.outputs["cluster_name"])


def test_existing_cluster_uses_the_kubeconfig_secret_and_creates_no_aws_cluster(chat_prod):
    bp = derive(chat_prod, platform={"kind": "existing-cluster"})
    run = run_program(bp, extra_config={"servingblueprints:kubeconfig": "apiVersion: v1\nkind: Config\n"},
                      secret_keys=["servingblueprints:kubeconfig"])
    assert run.of_type("aws:eks/cluster:Cluster") == [] and run.of_type("aws:ec2/vpc:Vpc") == []
    assert run.one("pulumi:providers:kubernetes").inputs["kubeconfig"] == "[secret]"
    assert run.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation") == []


def test_existing_cluster_with_a_cluster_name_binds_the_serving_account_with_pod_identity(chat_prod):
    bp = derive(chat_prod, platform={"kind": "existing-cluster"})
    run = run_program(bp, extra_config={"servingblueprints:kubeconfig": "apiVersion: v1",
                                        "servingblueprints:clusterName": "edge-1"},
                      secret_keys=["servingblueprints:kubeconfig"])
    assocs = {r.inputs["serviceAccount"]: r.inputs for r in
              run.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")}
    assert assocs["chat-assistant-vllm"]["clusterName"] == "edge-1"
