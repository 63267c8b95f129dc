"""Karpenter on a shared platform: its AWS side (controller and node roles, interruption queue and rules), the
platform's EC2NodeClasses, and each service's NodePool.

Facts from aws/karpenter-provider-aws v1.14.1: the getting-started CloudFormation template (controller policy,
node role policies, SQS queue and EventBridge rules; `blueprints/catalog/iam.yaml`), the EC2NodeClass and NodePool
v1 CRD schemas, and the chart's values (service account `karpenter` for release `karpenter`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import yaml

from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.sections import CapacityType
from blueprints.catalog.iam import policy_document
from blueprints.contracts.platform import NodeClass, PlatformConfig
from blueprints.requirements.hosting import Accelerator, CpuArch
from components.naming import EVENT_RULE, EVENT_TARGET, INSTANCE_PROFILE, ROLE, fit
from components.cluster import GPU_PRESENT_LABEL, GPU_TAINT_KEY, POOL_LABEL, node_role, trust_policy

#: The controller's ServiceAccount for release `karpenter` (chart `serviceAccount.name` defaults to the fullname).
SERVICE_ACCOUNT = "karpenter"
NAMESPACE = "kube-system"
#: EC2 events Karpenter handles through its interruption queue (cloudformation.yaml, the five EventBridge rules).
INTERRUPTION_EVENTS = (("health", "aws.health", "AWS Health Event"),
                       ("spot", "aws.ec2", "EC2 Spot Instance Interruption Warning"),
                       ("rebalance", "aws.ec2", "EC2 Instance Rebalance Recommendation"),
                       ("state-change", "aws.ec2", "EC2 Instance State-change Notification"),
                       ("capacity-reservation", "aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning"))
#: Well-known node labels Karpenter sets (v1.14 scheduling.md).
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
CAPACITY_TYPE_LABEL = "karpenter.sh/capacity-type"
ARCH_LABEL = "kubernetes.io/arch"
NODE_ARCH = {CpuArch.X86_64: "amd64", CpuArch.ARM64: "arm64"}
#: Extra permission when the platform allows spot: EC2 creates the Spot service-linked role on the first spot launch
#: if the caller may (otherwise launches fail with ServiceLinkedRoleCreationNotPermitted; KP getting-started step06).
SPOT_SERVICE_LINKED_ROLE = {
    "Sid": "AllowSpotServiceLinkedRoleCreation", "Effect": "Allow", "Action": "iam:CreateServiceLinkedRole",
    "Resource": "*", "Condition": {"StringEquals": {"iam:AWSServiceName": "spot.amazonaws.com"}}}


@dataclass
class KarpenterAws:
    """The AWS resources Karpenter needs; `ready` is what its Helm release must wait for."""

    controller_role: aws.iam.Role
    node_role: aws.iam.Role
    #: The node role's instance profile EC2NodeClasses name (`spec.instanceProfile`): IAM has no VPC endpoint, so
    #: Karpenter must never create instance profiles itself ([KP] getting-started "Private Clusters").
    instance_profile: aws.iam.InstanceProfile
    queue: aws.sqs.Queue
    ready: list[pulumi.Resource]


def karpenter_aws(name: str, cfg: PlatformConfig, cluster_name: pulumi.Input[str],
                  opts: pulumi.ResourceOptions) -> KarpenterAws:
    """Controller role (inline policy: merged it outgrows the 6,144-character managed-policy limit), its Pod
    Identity association, the node role with its instance profile and EC2_LINUX access entry, and the interruption
    queue with its rules."""
    tags = cfg.tags
    node, attachments = node_role(name, "node-role", tags, opts)
    profile = aws.iam.InstanceProfile(fit(name, "node-profile", INSTANCE_PROFILE), role=node.name, tags=tags,
                                      opts=opts)
    node_entry = aws.eks.AccessEntry(f"{name}-node-access", cluster_name=cluster_name, principal_arn=node.arn,
                                     type="EC2_LINUX", tags=tags, opts=opts)
    queue = aws.sqs.Queue(f"{name}-interruptions", name=cfg.cluster_name, message_retention_seconds=300,
                          sqs_managed_sse_enabled=True, tags=tags, opts=opts)
    aws.sqs.QueuePolicy(f"{name}-interruptions-policy", queue_url=queue.url, policy=queue.arn.apply(
        lambda arn: json.dumps({"Version": "2012-10-17", "Id": "EC2InterruptionPolicy", "Statement": [
            {"Effect": "Allow", "Principal": {"Service": ["events.amazonaws.com", "sqs.amazonaws.com"]},
             "Action": "sqs:SendMessage", "Resource": arn},
            {"Sid": "DenyHTTP", "Effect": "Deny", "Action": "sqs:*", "Resource": arn, "Principal": "*",
             "Condition": {"Bool": {"aws:SecureTransport": "false"}}}]}, sort_keys=True)), opts=opts)
    rules = []
    for suffix, source, detail in INTERRUPTION_EVENTS:
        rule = aws.cloudwatch.EventRule(fit(name, suffix, EVENT_RULE), event_pattern=json.dumps(
            {"source": [source], "detail-type": [detail]}), tags=tags, opts=opts)
        rules.append(aws.cloudwatch.EventTarget(fit(name, suffix, EVENT_TARGET), rule=rule.name, arn=queue.arn,
                                                opts=opts))
    identity = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=opts.parent))
    partition = aws.get_partition_output(opts=pulumi.InvokeOutputOptions(parent=opts.parent))
    controller = aws.iam.Role(fit(name, "controller-role", ROLE), assume_role_policy=trust_policy(
        "pods.eks.amazonaws.com", tag_session=True), tags=tags, opts=opts)
    extra = [SPOT_SERVICE_LINKED_ROLE] if cfg.spot_allowed else []
    document = pulumi.Output.all(partition.partition, identity.account_id, node.arn, queue.arn).apply(
        lambda v: policy_document("karpenter-controller", {
            "Partition": v[0], "Region": cfg.region, "AccountId": v[1], "ClusterName": cfg.cluster_name,
            "NodeRoleArn": v[2], "InterruptionQueueArn": v[3]}, extra=extra))
    policy = aws.iam.RolePolicy(f"{name}-controller-policy", role=controller.id, policy=document, opts=opts)
    association = aws.eks.PodIdentityAssociation(
        f"{name}-controller-identity", cluster_name=cluster_name, namespace=NAMESPACE,
        service_account=SERVICE_ACCOUNT, role_arn=controller.arn, tags=tags, opts=opts)
    return KarpenterAws(controller_role=controller, node_role=node, instance_profile=profile, queue=queue,
                        ready=[*attachments, profile, node_entry, policy, association, *rules])


#: nodeadm NodeConfig turning on SOCI parallel pull/unpack on AL2023 (awslabs/amazon-eks-ami nodeadm doc "Enabling
#: Fast Image Pull (experimental)"; aws-samples/karpenter-blueprints soci-snapshotter README; awslabs/ai-on-eks GPU
#: EC2NodeClass template). nodeadm merges it with Karpenter's generated configuration, and with `instanceStorePolicy:
#: RAID0` it puts SOCI's directory on the NVMe RAID with containerd's.
FAST_IMAGE_PULL_NODE_CONFIG = {"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig",
                               "spec": {"featureGates": {"FastImagePull": True}}}


def fast_image_pull_user_data() -> str:
    """The EC2NodeClass `userData`: `FAST_IMAGE_PULL_NODE_CONFIG` as YAML (AL2023 takes a bare NodeConfig)."""
    return yaml.safe_dump(FAST_IMAGE_PULL_NODE_CONFIG, sort_keys=False)


def ec2_node_class_spec(node_class: NodeClass, *, instance_profile: pulumi.Input[str],
                        subnet_ids: pulumi.Input[list[str]], security_group_id: pulumi.Input[str],
                        tags: dict[str, str]) -> pulumi.Output[dict]:
    """An EC2NodeClass (karpenter.k8s.aws/v1) spec: the pinned AL2023 alias (NVIDIA AMI on GPU types), the node role's
    instance profile (`spec.instanceProfile`, never `spec.role`: IAM has no VPC endpoint),
    the platform's private subnets and the cluster security group by id, an encrypted gp3 root volume, IMDSv2 with
    hop limit 1 (pods cannot reach IMDS), and on GPU nodes kubelet/containerd on the instance-store NVMe (RAID0) and
    SOCI parallel image pull (`fast_image_pull`)."""

    def spec(values: list) -> dict:
        subnets, security_group, profile = values
        body: dict = {
            "amiSelectorTerms": [{"alias": node_class.ami_alias}],
            "instanceProfile": profile,
            "subnetSelectorTerms": [{"id": s} for s in subnets],
            "securityGroupSelectorTerms": [{"id": security_group}],
            "blockDeviceMappings": [{"deviceName": "/dev/xvda", "rootVolume": True, "ebs": {
                "volumeSize": f"{node_class.root_volume_gib}Gi", "volumeType": "gp3", "encrypted": True,
                "deleteOnTermination": True}}],
            "metadataOptions": {"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled",
                                "httpPutResponseHopLimit": 1, "httpTokens": "required"},
            "tags": tags,
        }
        if node_class.instance_store_raid0:
            body["instanceStorePolicy"] = "RAID0"
        if node_class.fast_image_pull:
            body["userData"] = fast_image_pull_user_data()
        return body

    return pulumi.Output.all(pulumi.Output.from_input(subnet_ids), security_group_id, instance_profile).apply(spec)


def node_pool_name(bp: Blueprint) -> str:
    """A service's NodePool (cluster-scoped): named after the service, unique on its platform; a pilot's after its
    stack (`<service>-pilot-<k>`), beside the environment's own pool."""
    return bp.stack if bp.pilot is not None else bp.service


def node_pool_labels(bp: Blueprint) -> dict[str, str]:
    """Labels every node of the service's pool carries (and its pods select): the pool, and on GPU pools the label
    the NVIDIA device plugin's default affinity needs (`nvidia.com/gpu.present`)."""
    labels = {POOL_LABEL: node_pool_name(bp)}
    if bp.compute.accelerator is Accelerator.NVIDIA_GPU:
        labels[GPU_PRESENT_LABEL] = "true"
    return labels


def node_pool_spec(bp: Blueprint, *, node_class: str) -> dict:
    """The service's NodePool (karpenter.sh/v1) spec: exactly the plan's instance type, capacity type and
    architecture; the GPU taint on GPU pools; `limits` holding the autoscaler's max replicas plus the rollout surge
    (`Blueprint.node_pool_max_nodes`); consolidation only of empty nodes, and only after the autoscaler's cooldown
    (a node never goes while a replica loads or serves)."""
    c = bp.compute
    gpu = c.accelerator is Accelerator.NVIDIA_GPU
    max_nodes = bp.node_pool_max_nodes
    limits = ({"nvidia.com/gpu": max_nodes * c.gpus_per_node} if gpu else
              {"cpu": max_nodes * c.vcpus_per_node, "memory": f"{math.ceil(max_nodes * c.memory_gib_per_node)}Gi"})
    capacity = "spot" if c.capacity_type is CapacityType.SPOT else "on-demand"
    return {
        "template": {
            "metadata": {"labels": node_pool_labels(bp)},
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": node_class},
                "requirements": [
                    {"key": INSTANCE_TYPE_LABEL, "operator": "In", "values": [c.instance_type]},
                    {"key": CAPACITY_TYPE_LABEL, "operator": "In", "values": [capacity]},
                    {"key": ARCH_LABEL, "operator": "In", "values": [NODE_ARCH[c.cpu_arch]]},
                    {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                ],
                "taints": [{"key": GPU_TAINT_KEY, "value": "true", "effect": "NoSchedule"}] if gpu else [],
                "expireAfter": "720h",
            },
        },
        "limits": limits,
        "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": f"{bp.autoscaling.cooldown_s}s",
                       "budgets": [{"nodes": "1"}]},
    }
