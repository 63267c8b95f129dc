"""The stack policy that Karpenter NodePools at their GPU limit (and node groups at maxSize) can host the
autoscaler's maximum GPU replicas."""

from __future__ import annotations

from test_policy_support import gpu_deployment, main_container, policy_resource, stack_violations, urn

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
SCALED_OBJECT = "kubernetes:keda.sh/v1alpha1:ScaledObject"
HPA = "kubernetes:autoscaling/v2:HorizontalPodAutoscaler"


def node_group(instance_type: str = "g6e.xlarge", max_size: int = 10):
    return policy_resource(NODE_GROUP, {"instanceTypes": [instance_type], "capacityType": "ON_DEMAND",
                                        "scalingConfig": {"minSize": 1, "desiredSize": 2, "maxSize": max_size}},
                           name="gpu")


def scaled_object(max_replicas: int):
    return policy_resource(SCALED_OBJECT, {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
                                           "metadata": {"name": "vllm", "namespace": "serving"},
                                           "spec": {"scaleTargetRef": {"name": "chat-assistant-vllm"},
                                                    "minReplicaCount": 2, "maxReplicaCount": max_replicas}},
                           name="scaler")


def hpa(max_replicas: int):
    return policy_resource(HPA, {"metadata": {"name": "vllm", "namespace": "serving"},
                                 "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                                             "name": "chat-assistant-vllm"},
                                          "minReplicas": 2, "maxReplicas": max_replicas}}, name="hpa")


def deployment(gpus: str = "1", instance_type: str = "g6e.xlarge"):
    d = gpu_deployment(nodeSelector={"node.kubernetes.io/instance-type": instance_type})
    main_container(d)["resources"] = {"limits": {"nvidia.com/gpu": gpus}, "requests": {"nvidia.com/gpu": gpus}}
    return policy_resource(DEPLOYMENT, d, name="vllm")


def test_node_groups_that_reach_the_keda_maximum_pass():
    assert stack_violations("node-capacity-covers-autoscaler",
                            [node_group(max_size=10), deployment(), scaled_object(10)]) == []


def test_a_keda_maximum_beyond_the_node_groups_is_flagged_on_the_scaler():
    resources = [node_group(max_size=8), deployment(), scaled_object(10)]
    assert stack_violations("node-capacity-covers-autoscaler", resources) == [(urn(SCALED_OBJECT, "scaler"),
        "ScaledObject 'scaler' may scale Deployment 'vllm' to 10 replicas of 1 GPU(s) but its nodes hold 8 "
        "(gpu (8 x g6e.xlarge)); raise the NodePool's GPU limit (or scalingConfig.maxSize) or lower the autoscaler's "
        "max")]


def test_replicas_per_node_follow_gpus_per_node_over_gpus_per_replica():
    # g6e.12xlarge has 4 GPUs: 3 nodes x 2 replicas of 2 GPUs = 6 replicas.
    assert stack_violations("node-capacity-covers-autoscaler",
                            [node_group("g6e.12xlarge", 3), deployment("2", "g6e.12xlarge"), hpa(6)]) == []
    assert [m for _, m in stack_violations("node-capacity-covers-autoscaler",
                                           [node_group("g6e.12xlarge", 3), deployment("2", "g6e.12xlarge"),
                                            hpa(7)])] == [
        "HorizontalPodAutoscaler 'hpa' may scale Deployment 'vllm' to 7 replicas of 2 GPU(s) but its nodes hold "
        "6 (gpu (3 x g6e.12xlarge)); raise the NodePool's GPU limit (or scalingConfig.maxSize) or lower the "
        "autoscaler's max"]


def test_a_node_group_of_another_instance_type_than_the_pod_selects_does_not_count():
    assert [m for _, m in stack_violations("node-capacity-covers-autoscaler",
                                           [node_group("g6.xlarge", 20), deployment(), scaled_object(2)])] == [
        "ScaledObject 'scaler' may scale Deployment 'vllm' to 2 replicas of 1 GPU(s) but its nodes hold 0 "
        "(no node group with 1+ GPUs of type g6e.xlarge); raise the NodePool's GPU limit (or scalingConfig.maxSize) "
        "or lower the autoscaler's max"]


def test_a_stack_without_an_autoscaler_passes():
    assert stack_violations("node-capacity-covers-autoscaler", [node_group(max_size=1), deployment()]) == []


def test_a_stack_without_node_groups_passes_because_the_nodes_are_managed_elsewhere():
    assert stack_violations("node-capacity-covers-autoscaler", [deployment(), scaled_object(50)]) == []


NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"


def node_pool(instance_type: str = "g6e.xlarge", gpu_limit: int | None = 11, pool: str = "chat-assistant"):
    spec = {"template": {"metadata": {"labels": {"servingblueprints.io/pool": pool, "nvidia.com/gpu.present": "true"}},
                         "spec": {"requirements": [
                             {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [instance_type]},
                             {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}],
                             "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "gpu"}}}}
    if gpu_limit is not None:
        spec["limits"] = {"nvidia.com/gpu": gpu_limit}
    return policy_resource(NODE_POOL, {"metadata": {"name": pool}, "spec": spec}, name=pool)


def pool_deployment(gpus: str = "1", instance_type: str = "g6e.xlarge", pool: str = "chat-assistant"):
    d = gpu_deployment(nodeSelector={"node.kubernetes.io/instance-type": instance_type,
                                     "servingblueprints.io/pool": pool, "kubernetes.io/arch": "amd64"})
    main_container(d)["resources"] = {"limits": {"nvidia.com/gpu": gpus}, "requests": {"nvidia.com/gpu": gpus}}
    return policy_resource(DEPLOYMENT, d, name="vllm")


def test_a_node_pool_whose_gpu_limit_holds_the_keda_maximum_passes():
    assert stack_violations("node-capacity-covers-autoscaler",
                            [node_pool(gpu_limit=10), pool_deployment(), scaled_object(10)]) == []


def test_a_node_pool_gpu_limit_below_the_keda_maximum_is_flagged():
    assert [m for _, m in stack_violations("node-capacity-covers-autoscaler",
                                           [node_pool(gpu_limit=8), pool_deployment(), scaled_object(10)])] == [
        "ScaledObject 'scaler' may scale Deployment 'vllm' to 10 replicas of 1 GPU(s) but its nodes hold 8 "
        "(chat-assistant (limit 8 GPUs of g6e.xlarge)); raise the NodePool's GPU limit (or scalingConfig.maxSize) or "
        "lower the autoscaler's max"]


def test_a_node_pool_limit_counts_whole_nodes_of_replicas():
    # g6e.12xlarge: 4 GPUs, 2 replicas of 2 GPUs per node; a limit of 10 GPUs is 2 whole nodes = 4 replicas.
    violations = stack_violations("node-capacity-covers-autoscaler",
                                  [node_pool("g6e.12xlarge", 10), pool_deployment("2", "g6e.12xlarge"), hpa(5)])
    assert [m.split(" but ")[1][:14] for _, m in violations] == ["its nodes hold"]
    assert "hold 4 " in violations[0][1]


def test_another_services_node_pool_does_not_count():
    assert [m for _, m in stack_violations("node-capacity-covers-autoscaler",
                                           [node_pool(pool="other"), pool_deployment(), scaled_object(2)])] == [
        "ScaledObject 'scaler' may scale Deployment 'vllm' to 2 replicas of 1 GPU(s) but its nodes hold 0 (no node "
        "group with 1+ GPUs of type g6e.xlarge); raise the NodePool's GPU limit (or scalingConfig.maxSize) or lower "
        "the autoscaler's max"]
