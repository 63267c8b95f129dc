"""Cluster: an EKS cluster with a system node group and the blueprint's GPU/CPU node pool; the NVIDIA device plugin.

`Cluster` creates only AWS resources (the cluster, IAM roles, node groups, the EKS Pod Identity agent add-on) and
exposes a `kubeconfig` Output; the program builds the Kubernetes provider from it and passes it (through opts) to
`GpuDevicePlugin` and the serving components. Components never build providers.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from blueprints import defaults
from blueprints.blueprint import Blueprint
from blueprints.requirements import Accelerator
from components.labels import recommended_labels, selector_labels
from components.rollout import node_pool_max_nodes

#: Taint on GPU node pools; every pod placed there must tolerate it (EKS GPU AMI / NVIDIA convention).
GPU_TAINT_KEY = "nvidia.com/gpu"
#: Node label telling the NVIDIA device plugin (and its chart's default affinity) that the node has GPUs.
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
#: Node label naming the pool a node belongs to: `system` or `workload`.
POOL_LABEL = "servingblueprints.io/pool"
#: Toleration of the GPU taint, for every pod that must run on GPU nodes.
GPU_TOLERATION = {"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}

_EKS_POLICY = "arn:aws:iam::aws:policy/"


@dataclass(frozen=True)
class NodePoolBounds:
    """Node counts of the workload pool: `max_nodes` x GPUs per node covers max replicas x GPUs per replica."""

    min_nodes: int
    desired_nodes: int
    max_nodes: int


def node_pool_bounds(bp: Blueprint) -> NodePoolBounds:
    """Min/desired/max nodes for the blueprint's workload pool.

    Replicas per node come from the compute plan (GPUs per node // GPUs per replica on GPU; vCPUs // CPU per replica
    otherwise); max nodes hold `autoscaling.max_replicas` plus the rolling update's surge replica
    (`components.rollout.node_pool_max_nodes`), desired nodes the Deployment's starting replicas.
    """
    per_node = bp.compute.replicas_per_node
    start_replicas = max(1, bp.autoscaling.min_replicas)
    max_nodes = max(1, node_pool_max_nodes(bp))  # max replicas + the rolling update's surge replica
    min_nodes = math.ceil(bp.autoscaling.min_replicas / per_node)
    desired = min(max_nodes, max(min_nodes, math.ceil(start_replicas / per_node)))
    return NodePoolBounds(min_nodes=min_nodes, desired_nodes=desired, max_nodes=max_nodes)


@dataclass
class ClusterArgs:
    """Inputs of `Cluster`.

    Args:
        blueprint: the planned stack (`platform.kind == eks`): version, node pool shape, privacy, logging, tags.
        subnet_ids: private subnets (>= 2 zones) for the control plane ENIs and the node groups.
        security_group_ids: extra security groups for the control plane ENIs (e.g. the network's workload group).
        weights_sync_scratch_gib: scratch disk the weights sync Job needs on a system node, GiB. Defaults to 0.
    """

    blueprint: Blueprint
    subnet_ids: pulumi.Input[list[str]]
    security_group_ids: list[pulumi.Input[str]] | None = None
    weights_sync_scratch_gib: float = 0.0


def _trust(service: str, *, tag_session: bool = False) -> str:
    actions = ["sts:AssumeRole", "sts:TagSession"] if tag_session else ["sts:AssumeRole"]
    return json.dumps({"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"Service": service}, "Action": actions}]}, sort_keys=True)


class Cluster(pulumi.ComponentResource):
    """EKS: control plane, a system node group, the workload (GPU or CPU) node pool and the Pod Identity agent.

    Secure by default: private API endpoint when `network.private_only`; control-plane logs (api, audit,
    authenticator, controllerManager, scheduler) when `platform.audit_logging`; Kubernetes secrets envelope-encrypted
    with a customer-managed KMS key (rotation on) when `storage.customer_managed_kms`; access entries (API
    authentication mode) instead of the aws-auth ConfigMap.

    Outputs: `cluster_name`, `endpoint`, `kubeconfig` (secret JSON; authenticates with `aws eks get-token`).

    Example:
        cluster = Cluster("chat-prod", ClusterArgs(blueprint=bp, subnet_ids=net.private_subnet_ids))
        provider = k8s.Provider("chat-prod-k8s", kubeconfig=cluster.kubeconfig)
    """

    def __init__(self, name: str, args: ClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("servingblueprints:index:Cluster", name, None, opts)
        bp = args.blueprint
        if bp.platform.kind != "eks":
            raise ValueError(f"Cluster builds EKS; blueprint platform.kind is {bp.platform.kind!r}")
        child = pulumi.ResourceOptions(parent=self)
        tags = bp.tags
        self.cluster_role = aws.iam.Role(f"{name}-cluster-role", assume_role_policy=_trust("eks.amazonaws.com",
                                                                                          tag_session=True),
                                         tags=tags, opts=child)
        cluster_policy = aws.iam.RolePolicyAttachment(f"{name}-cluster-policy", role=self.cluster_role.name,
                                                      policy_arn=f"{_EKS_POLICY}AmazonEKSClusterPolicy", opts=child)
        self.secrets_key = None
        encryption = None
        if bp.storage.customer_managed_kms:
            self.secrets_key = aws.kms.Key(f"{name}-secrets-key", description=f"EKS secrets of {name}",
                                           enable_key_rotation=True, deletion_window_in_days=30, tags=tags, opts=child)
            encryption = {"provider": {"key_arn": self.secrets_key.arn}, "resources": ["secrets"]}
        self.eks = aws.eks.Cluster(
            f"{name}-eks",
            version=bp.platform.kubernetes_version,
            role_arn=self.cluster_role.arn,
            vpc_config={"subnet_ids": args.subnet_ids, "security_group_ids": args.security_group_ids or None,
                        "endpoint_private_access": True, "endpoint_public_access": not bp.network.private_only},
            access_config={"authentication_mode": "API", "bootstrap_cluster_creator_admin_permissions": True},
            enabled_cluster_log_types=list(defaults.EKS_CONTROL_PLANE_LOG_TYPES) if bp.platform.audit_logging else None,
            encryption_config=encryption,
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[cluster_policy]))
        self.node_role = aws.iam.Role(f"{name}-node-role", assume_role_policy=_trust("ec2.amazonaws.com"), tags=tags,
                                      opts=child)
        attachments = [aws.iam.RolePolicyAttachment(f"{name}-node-{suffix}", role=self.node_role.name,
                                                    policy_arn=f"{_EKS_POLICY}{policy}", opts=child)
                       for suffix, policy in (("worker", "AmazonEKSWorkerNodePolicy"),
                                              ("cni", "AmazonEKS_CNI_Policy"),
                                              ("ecr", "AmazonEC2ContainerRegistryReadOnly"))]
        node_opts = pulumi.ResourceOptions(parent=self, depends_on=attachments,
                                           ignore_changes=["scalingConfig.desiredSize"])
        self.system_nodes = aws.eks.NodeGroup(
            f"{name}-system-nodes",
            cluster_name=self.eks.name, node_role_arn=self.node_role.arn, subnet_ids=args.subnet_ids,
            ami_type=defaults.EKS_AMI_TYPE[("cpu", "x86_64")],
            instance_types=[defaults.SYSTEM_NODE_INSTANCE_TYPE], capacity_type="ON_DEMAND",
            disk_size=math.ceil(defaults.SYSTEM_NODE_DISK_GIB + args.weights_sync_scratch_gib),
            scaling_config={"min_size": defaults.SYSTEM_NODE_COUNT, "desired_size": defaults.SYSTEM_NODE_COUNT,
                            "max_size": defaults.SYSTEM_NODE_COUNT + 1},
            update_config={"max_unavailable": 1},
            labels={POOL_LABEL: "system"}, tags=tags, opts=node_opts)
        self.workload_nodes = self._workload_pool(name, bp, args, node_opts)
        self.pod_identity_agent = aws.eks.Addon(
            f"{name}-pod-identity-agent", cluster_name=self.eks.name, addon_name="eks-pod-identity-agent",
            resolve_conflicts_on_create="OVERWRITE", resolve_conflicts_on_update="OVERWRITE", tags=tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.system_nodes]))
        self.cluster_name = self.eks.name
        self.endpoint = self.eks.endpoint
        self.kubeconfig = pulumi.Output.secret(pulumi.Output.all(
            self.eks.name, self.eks.endpoint, self.eks.certificate_authority.data).apply(
                lambda parts: kubeconfig_json(parts[0], parts[1], parts[2], region=bp.region)))
        self.register_outputs({"cluster_name": self.cluster_name, "endpoint": self.endpoint,
                               "kubeconfig": self.kubeconfig})

    def _workload_pool(self, name: str, bp: Blueprint, args: ClusterArgs,
                       opts: pulumi.ResourceOptions) -> aws.eks.NodeGroup:
        c = bp.compute
        gpu = c.accelerator is Accelerator.NVIDIA_GPU
        bounds = node_pool_bounds(bp)
        labels = {POOL_LABEL: "workload"}
        taints = None
        if gpu:
            labels[GPU_PRESENT_LABEL] = "true"
            taints = [{"key": GPU_TAINT_KEY, "value": "true", "effect": "NO_SCHEDULE"}]
        disk_gib = defaults.WORKLOAD_NODE_BASE_DISK_GIB + c.ephemeral_storage_gib_per_replica * c.replicas_per_node
        return aws.eks.NodeGroup(
            f"{name}-{'gpu' if gpu else 'cpu'}-nodes",
            cluster_name=self.eks.name, node_role_arn=self.node_role.arn, subnet_ids=args.subnet_ids,
            ami_type=defaults.EKS_AMI_TYPE[(c.accelerator.value, c.cpu_arch.value)],
            instance_types=[c.instance_type],
            capacity_type="SPOT" if c.capacity_type.value == "spot" else "ON_DEMAND",
            disk_size=math.ceil(disk_gib),
            scaling_config={"min_size": bounds.min_nodes, "desired_size": bounds.desired_nodes,
                            "max_size": bounds.max_nodes},
            update_config={"max_unavailable": 1},
            labels=labels, taints=taints, tags=bp.tags, opts=opts)


def kubeconfig_json(cluster_name: str, endpoint: str, ca_data: str, *, region: str) -> str:
    """A kubeconfig (JSON) for the cluster that authenticates with `aws eks get-token` (no static credentials)."""
    user = f"aws-{cluster_name}"
    return json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": cluster_name,
        "clusters": [{"name": cluster_name, "cluster": {"server": endpoint, "certificate-authority-data": ca_data}}],
        "contexts": [{"name": cluster_name, "context": {"cluster": cluster_name, "user": user}}],
        "users": [{"name": user, "user": {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1", "command": "aws",
            "args": ["eks", "get-token", "--cluster-name", cluster_name, "--region", region, "--output", "json"],
            "interactiveMode": "Never"}}}],
    }, sort_keys=True)


@dataclass
class GpuDevicePluginArgs:
    """Inputs of `GpuDevicePlugin`.

    Args:
        instance: the stack name, for the recommended labels.
        namespace: where the DaemonSet runs. Defaults to `kube-system`.
    """

    instance: str
    namespace: str = "kube-system"


class GpuDevicePlugin(pulumi.ComponentResource):
    """The NVIDIA device plugin DaemonSet (NVIDIA's static manifest, pinned image) on nodes labelled GPU-present.

    It tolerates the GPU taint (it must run on GPU nodes), runs unprivileged with no privilege escalation and all
    capabilities dropped (as upstream's static manifest), and only mounts the kubelet's device-plugin socket folder.
    Pass the cluster's Kubernetes provider through `opts`.

    Outputs: `daemonset_name`.
    """

    def __init__(self, name: str, args: GpuDevicePluginArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("servingblueprints:index:GpuDevicePlugin", name, None, opts)
        tag = defaults.NVIDIA_DEVICE_PLUGIN_IMAGE.rsplit(":", 1)[-1]
        labels = recommended_labels(name="nvidia-device-plugin", instance=args.instance, component="device-plugin",
                                    version=tag)
        self.daemonset = k8s.apps.v1.DaemonSet(
            f"{name}-daemonset",
            metadata={"name": "nvidia-device-plugin", "namespace": args.namespace, "labels": labels},
            spec={
                "selector": {"match_labels": selector_labels(labels)},
                "update_strategy": {"type": "RollingUpdate"},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "priority_class_name": "system-node-critical",
                        "node_selector": {GPU_PRESENT_LABEL: "true"},
                        "tolerations": [GPU_TOLERATION],
                        "containers": [{
                            "name": "nvidia-device-plugin",
                            "image": defaults.NVIDIA_DEVICE_PLUGIN_IMAGE,
                            "env": [{"name": "FAIL_ON_INIT_ERROR", "value": "false"}],
                            "resources": {"requests": {"cpu": "50m", "memory": "64Mi"},
                                          "limits": {"cpu": "200m", "memory": "128Mi"}},
                            "security_context": {"allow_privilege_escalation": False, "privileged": False,
                                                 "capabilities": {"drop": ["ALL"]}},
                            "volume_mounts": [{"name": "device-plugin",
                                               "mount_path": "/var/lib/kubelet/device-plugins"}],
                        }],
                        "volumes": [{"name": "device-plugin",
                                     "host_path": {"path": "/var/lib/kubelet/device-plugins"}}],
                    },
                },
            },
            opts=pulumi.ResourceOptions(parent=self))
        self.daemonset_name = self.daemonset.metadata.name
        self.register_outputs({"daemonset_name": self.daemonset_name})
