"""Policies on GPU capacity: allowed instance types, the per-stack GPU cap, spot capacity."""

from __future__ import annotations

from test_policy_support import policy_resource, resource_violations, stack_violations, urn

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
ENDPOINT_CONFIG = "aws:sagemaker/endpointConfiguration:EndpointConfiguration"
DEV = {"allowedInstanceFamilies": ["g5", "g6", "g6e", "m7i"]}


def node_group(instance_type: str = "g6e.xlarge", *, max_size: int = 4, capacity_type: str = "ON_DEMAND") -> dict:
    return {"clusterName": "chat", "instanceTypes": [instance_type], "capacityType": capacity_type,
            "scalingConfig": {"minSize": 1, "desiredSize": 1, "maxSize": max_size}}


def test_a_node_group_of_an_allowed_family_passes():
    assert resource_violations("instance-types-allowed", NODE_GROUP, node_group("g6e.xlarge"), config=DEV) == []


def test_a_node_group_of_a_family_the_environment_does_not_allow_is_named_with_the_fix():
    assert resource_violations("instance-types-allowed", NODE_GROUP, node_group("p5.48xlarge"), name="gpu",
                               config=DEV) == [
        "NodeGroup 'gpu' uses instance type 'p5.48xlarge' (family 'p5'), which this environment does not allow; use "
        "a family in ['g5', 'g6', 'g6e', 'm7i'] or add it to allowedInstanceFamilies in the policy config"]


def test_an_exactly_allowed_instance_type_passes_outside_the_allowed_families():
    config = {**DEV, "allowedInstanceTypes": ["p5.4xlarge"]}
    assert resource_violations("instance-types-allowed", NODE_GROUP, node_group("p5.4xlarge"), config=config) == []


def test_sagemaker_production_variants_are_checked_by_family_without_the_ml_prefix():
    variants = lambda t: {"productionVariants": [{"variantName": "main", "instanceType": t,  # noqa: E731
                                                  "initialInstanceCount": 1}]}
    assert resource_violations("instance-types-allowed", ENDPOINT_CONFIG, variants("ml.g5.xlarge"), config=DEV) == []
    assert resource_violations("instance-types-allowed", ENDPOINT_CONFIG, variants("ml.p4d.24xlarge"), name="ep",
                               config=DEV) == [
        "EndpointConfiguration 'ep' uses instance type 'ml.p4d.24xlarge' (family 'p4d'), which this environment does "
        "not allow; use a family in ['g5', 'g6', 'g6e', 'm7i'] or add it to allowedInstanceFamilies in the policy "
        "config"]


def test_gpus_at_full_scale_within_the_cap_pass():
    groups = [policy_resource(NODE_GROUP, node_group("g6e.12xlarge", max_size=2), name="gpu"),  # 8 GPUs
              policy_resource(NODE_GROUP, node_group("m7i.xlarge", max_size=10), name="system")]  # none
    assert stack_violations("gpu-quota", groups, {"maxGpus": 8}) == []


def test_gpus_at_full_scale_above_the_cap_fail_the_stack_with_the_arithmetic():
    groups = [policy_resource(NODE_GROUP, node_group("g6e.12xlarge", max_size=3), name="gpu")]  # 12 GPUs
    assert stack_violations("gpu-quota", groups, {"maxGpus": 8}) == [(None,
        "the stack can scale to 12 GPUs (gpu: 3 x g6e.12xlarge) but this environment allows 8; lower the NodePool's "
        "GPU limit (or scalingConfig.maxSize), use smaller instance types, or raise maxGpus in the policy config")]


def test_an_instance_type_missing_from_the_catalog_cannot_be_counted_and_is_reported():
    groups = [policy_resource(NODE_GROUP, node_group("g7.xlarge"), name="gpu")]
    assert stack_violations("gpu-quota", groups, {"maxGpus": 8}) == [(urn(NODE_GROUP, "gpu"),
        "NodeGroup 'gpu': cannot count the GPUs of g7.xlarge (not in blueprints/catalog/instances.yaml); add the "
        "instance type to the catalog")]


def test_the_gpu_cap_defaults_to_64_without_config():
    groups = [policy_resource(NODE_GROUP, node_group("p5.48xlarge", max_size=9), name="gpu")]  # 72 GPUs
    assert [m for _, m in stack_violations("gpu-quota", groups)][0].startswith(
        "the stack can scale to 72 GPUs (gpu: 9 x p5.48xlarge) but this environment allows 64")


def test_an_on_demand_node_group_passes_the_spot_rule():
    assert resource_violations("no-spot-capacity", NODE_GROUP, node_group()) == []


def test_a_spot_node_group_is_flagged():
    assert resource_violations("no-spot-capacity", NODE_GROUP, node_group(capacity_type="SPOT"), name="gpu") == [
        "NodeGroup 'gpu' uses capacityType SPOT, which can be reclaimed with two minutes' notice mid-request; set "
        "capacityType: ON_DEMAND (or lower this policy's enforcementLevel for non-production environments)"]


NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"


def node_pool(instance_type: str, gpu_limit: int | None, capacity: str = "on-demand"):
    spec = {"template": {"spec": {"requirements": [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [instance_type]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": [capacity]}]}}}
    if gpu_limit is not None:
        spec["limits"] = {"nvidia.com/gpu": gpu_limit}
    return policy_resource(NODE_POOL, {"metadata": {"name": "chat"}, "spec": spec}, name="chat")


def test_node_pool_gpu_limits_count_towards_the_quota():
    assert stack_violations("gpu-quota", [node_pool("g6e.12xlarge", 8)], {"maxGpus": 8}) == []
    assert stack_violations("gpu-quota", [node_pool("g6e.12xlarge", 12)], {"maxGpus": 8}) == [(None,
        "the stack can scale to 12 GPUs (chat: limits nvidia.com/gpu 12) but this environment allows 8; lower the "
        "NodePool's GPU limit (or scalingConfig.maxSize), use smaller instance types, or raise maxGpus in the policy "
        "config")]


def test_a_gpu_node_pool_without_a_gpu_limit_is_unbounded_and_fails():
    [(res, message)] = stack_violations("gpu-quota", [node_pool("g6e.xlarge", None)], {"maxGpus": 64})
    assert res == urn(NODE_POOL, "chat") and "sets no limits['nvidia.com/gpu']" in message


def test_node_pool_instance_types_are_judged_against_the_allowed_families():
    assert resource_violations("instance-types-allowed", NODE_POOL, node_pool("g6e.xlarge", 4).props,
                               config=DEV) == []
    assert resource_violations("instance-types-allowed", NODE_POOL, node_pool("p5.48xlarge", 8).props, name="chat",
                               config=DEV) == [
        "NodePool 'chat' uses instance type 'p5.48xlarge' (family 'p5'), which this environment does not allow; use "
        "a family in ['g5', 'g6', 'g6e', 'm7i'] or add it to allowedInstanceFamilies in the policy config"]


def test_a_spot_node_pool_breaks_no_spot_capacity():
    assert resource_violations("no-spot-capacity", NODE_POOL, node_pool("g6e.xlarge", 4).props) == []
    [message] = resource_violations("no-spot-capacity", NODE_POOL, node_pool("g6e.xlarge", 4, "spot").props,
                                    name="chat")
    assert message.startswith("NodePool 'chat' allows karpenter.sh/capacity-type spot")
