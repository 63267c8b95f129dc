"""EksCluster: a shared platform's EKS control plane, its system node groups (one per zone) and the EKS managed add-ons.

Only AWS resources: the cluster (API authentication mode, access entries), its IAM roles, the networking and identity
add-ons created before any node (vpc-cni with network policy enforcement, the EKS Pod Identity agent), the system
node group for controllers, then kube-proxy, CoreDNS and the EBS CSI driver. The platform builds the Kubernetes
provider from `kubeconfig` and installs the Helm add-ons (`components.addons`). Serving nodes come from Karpenter
NodePools of each service, never from node groups here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from blueprints.core import defaults
from blueprints.contracts.platform import PlatformConfig
from components.naming import NODE_GROUP, ROLE, fit

#: Taint on GPU nodes; every pod placed there must tolerate it (EKS GPU AMI / NVIDIA convention).
GPU_TAINT_KEY = "nvidia.com/gpu"
#: Node label telling the NVIDIA device plugin (its chart's default affinity) that the node has GPUs.
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
#: Node label naming the pool a node belongs to: `system`, or the service whose NodePool launched it.
POOL_LABEL = "servingblueprints.io/pool"
SYSTEM_POOL = "system"
#: The nodeSelector of every controller that runs on the system node group.
SYSTEM_NODES = {POOL_LABEL: SYSTEM_POOL}
#: Toleration of the GPU taint, for every pod that must run on GPU nodes.
GPU_TOLERATION = {"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}
#: EKS cluster access policy for administrators and the deploying role (docs.aws.amazon.com/eks/latest/userguide/
#: access-policy-permissions.html).
CLUSTER_ADMIN_POLICY = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
#: Managed policies of a node role (Karpenter getting-started cloudformation.yaml, KarpenterNodeRole).
NODE_ROLE_POLICIES = ("AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy", "AmazonEC2ContainerRegistryPullOnly",
                      "AmazonSSMManagedInstanceCore")
#: The EBS CSI driver's controller ServiceAccount and AWS managed policy (EKS user guide, storage/ebs-csi.adoc).
EBS_CSI_SERVICE_ACCOUNT = "ebs-csi-controller-sa"
EBS_CSI_POLICY = "arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy"

_AWS_POLICY = "arn:aws:iam::aws:policy/"


def trust_policy(service: str, *, tag_session: bool = False) -> str:
    """An assume-role policy for an AWS service principal (`eks.amazonaws.com`, `pods.eks.amazonaws.com`, ...)."""
    actions = ["sts:AssumeRole", "sts:TagSession"] if tag_session else ["sts:AssumeRole"]
    return json.dumps({"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"Service": service}, "Action": actions}]}, sort_keys=True)


def node_role(name: str, suffix: str, tags: dict[str, str],
              opts: pulumi.ResourceOptions) -> tuple[aws.iam.Role, list]:
    """An EC2 node role `<name>-<suffix>` (fitted, `components.naming.fit`) with the four managed policies nodes
    need; (role, attachments)."""
    role = aws.iam.Role(fit(name, suffix, ROLE), assume_role_policy=trust_policy("ec2.amazonaws.com"), tags=tags,
                        opts=opts)
    attachments = [aws.iam.RolePolicyAttachment(f"{name}-{suffix}-{policy.lower().replace('_', '-')}", role=role.name,
                                                policy_arn=f"{_AWS_POLICY}{policy}", opts=opts)
                   for policy in NODE_ROLE_POLICIES]
    return role, attachments


@dataclass
class EksClusterArgs:
    """Inputs of `EksCluster`.

    Args:
        platform: the planned platform (kind `eks`): version, privacy, logging, keys, system nodes, access.
        subnet_ids: private subnets (>= 2 zones) for the control plane ENIs and the system nodes.
        security_group_ids: extra security groups for the control plane ENIs.
        vpc_id: the VPC (the private API's security group is created in it).
        runner_cidr: where the deploy runner connects from (a private platform's runner lives in its VPC: the VPC's
            CIDR). With a private API endpoint, the control plane admits HTTPS (443) from it: its own security group
            admits only itself (EKS user guide, clusters/cluster-endpoint.adoc "private access"). Defaults to none.
        egress: what the VPC's egress rests on (`Network.egress`): the cluster depends on it, and so, through the
            cluster, its nodes, add-ons and every Kubernetes object on it: `pulumi destroy` keeps egress until they
            are gone (Karpenter's node-class finalizer terminates instances through the EC2 API).
    """

    platform: PlatformConfig
    subnet_ids: pulumi.Input[list[str]]
    security_group_ids: list[pulumi.Input[str]] | None = None
    vpc_id: pulumi.Input[str] | None = None
    runner_cidr: pulumi.Input[str] | None = None
    egress: list[pulumi.Resource] | None = None


class EksCluster(pulumi.ComponentResource):
    """EKS: control plane, EKS add-ons, the system node group and access entries.

    Secure by default: private API endpoint when the platform is private; control-plane logs (api, audit,
    authenticator, controllerManager, scheduler) with audit logging; Kubernetes secrets envelope-encrypted with a
    customer-managed KMS key (rotation on) when any service on the platform asks for one; API authentication mode
    with access entries (no aws-auth ConfigMap); the cluster named after the platform stack, so services can name it.

    Outputs: `cluster_name`, `endpoint`, `kubeconfig` (secret JSON; authenticates with `aws eks get-token`),
    `cluster_security_group_id`, `service_cidr`.

    Example:
        cluster = EksCluster("platform-prod-us-east-1", EksClusterArgs(platform=cfg, subnet_ids=net.private_subnet_ids))
    """

    def __init__(self, name: str, args: EksClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("servingblueprints:index:EksCluster", name, None, opts)
        cfg = args.platform
        child = pulumi.ResourceOptions(parent=self)
        tags = cfg.tags
        self.cluster_role = aws.iam.Role(fit(name, "cluster-role", ROLE), assume_role_policy=trust_policy(
            "eks.amazonaws.com", tag_session=True), tags=tags, opts=child)
        cluster_policy = aws.iam.RolePolicyAttachment(f"{name}-cluster-policy", role=self.cluster_role.name,
                                                      policy_arn=f"{_AWS_POLICY}AmazonEKSClusterPolicy", opts=child)
        self.secrets_key = None
        encryption = None
        if cfg.secrets_kms:
            self.secrets_key = aws.kms.Key(f"{name}-secrets-key", description=f"EKS secrets of {cfg.cluster_name}",
                                           enable_key_rotation=True, deletion_window_in_days=30, tags=tags, opts=child)
            encryption = {"provider": {"key_arn": self.secrets_key.arn}, "resources": ["secrets"]}
        # EKS writes control-plane logs to /aws/eks/<cluster>/cluster and creates that log group without expiry
        # when it is absent (EKS user guide, control-plane-logs): created first, the group keeps platform.yaml's
        # retention.
        depends = [cluster_policy, *(args.egress or [])]
        self.log_group = None
        if cfg.audit_logging:
            self.log_group = aws.cloudwatch.LogGroup(
                f"{name}-control-plane-logs", name=f"/aws/eks/{cfg.cluster_name}/cluster",
                retention_in_days=cfg.audit_log_retention_days or 0, tags=tags, opts=child)
            depends.append(self.log_group)
        # The deployer role (CI) is the creator: with an explicit deployer, its access entry is ours, not the
        # creator bootstrap's (both at once would collide on the same principal): `cfg.creator_admin_bootstrap`.
        groups = list(args.security_group_ids or [])
        self.api_security_group = None
        if cfg.network.private_endpoint:
            self.api_security_group = self._private_api_access(name, args, child)
            groups.append(self.api_security_group.id)
        self.eks = aws.eks.Cluster(
            f"{name}-eks",
            name=cfg.cluster_name,
            version=cfg.kubernetes_version,
            role_arn=self.cluster_role.arn,
            vpc_config={"subnet_ids": args.subnet_ids, "security_group_ids": groups or None,
                        "endpoint_private_access": True, "endpoint_public_access": not cfg.network.private_endpoint,
                        "public_access_cidrs": cfg.network.public_access_cidrs or None},
            access_config={"authentication_mode": "API",
                           "bootstrap_cluster_creator_admin_permissions": cfg.creator_admin_bootstrap},
            # The Service CIDR (create-only) where the plan fixes it: platform.yaml's, or for a new VPC the one EKS
            # would choose, which a cluster created without it already reports (Computed: no replacement).
            kubernetes_network_config={"service_ipv4_cidr": cfg.network.service_cidr}
            if cfg.network.service_cidr else None,
            # Add-ons are ours (vpc-cni with network policy before any node); EKS must not pre-install its defaults.
            bootstrap_self_managed_addons=False,
            enabled_cluster_log_types=list(defaults.EKS_CONTROL_PLANE_LOG_TYPES) if cfg.audit_logging else None,
            upgrade_policy={"support_type": defaults.EKS_SUPPORT_TYPE},
            encryption_config=encryption,
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=depends))
        self.access_entries = self._access_entries(name, cfg, child)
        on_cluster = pulumi.ResourceOptions(parent=self)
        self.vpc_cni = aws.eks.Addon(
            f"{name}-vpc-cni", cluster_name=self.eks.name, addon_name="vpc-cni",
            # Network policy enforcement for every service's NetworkPolicy (vpc-cni >= 1.14).
            configuration_values=json.dumps({"enableNetworkPolicy": "true"}),
            resolve_conflicts_on_create="OVERWRITE", resolve_conflicts_on_update="OVERWRITE", tags=tags, opts=on_cluster)
        self.pod_identity_agent = aws.eks.Addon(
            f"{name}-pod-identity-agent", cluster_name=self.eks.name, addon_name="eks-pod-identity-agent",
            resolve_conflicts_on_create="OVERWRITE", resolve_conflicts_on_update="OVERWRITE", tags=tags, opts=on_cluster)
        self.system_node_role, attachments = node_role(name, "system-node-role", tags, child)
        # One node group per private subnet (zone) that holds a system node, each never below one node: Prometheus's
        # EBS volume is bound in the zone of the node it first lands on (WaitForFirstConsumer) and can only attach
        # there, and a group spanning zones may replace that node in another zone (eksctl user guide, autoscaling:
        # "If your workloads are zone-specific you'll need to create separate nodegroups for each zone").
        subnets = pulumi.Output.from_input(args.subnet_ids)
        self.system_nodes = [aws.eks.NodeGroup(
            fit(name, f"system-nodes-{i}", NODE_GROUP),
            cluster_name=self.eks.name, node_role_arn=self.system_node_role.arn,
            subnet_ids=subnets.apply(lambda ids, i=i: [ids[i]]),
            # AL2023 standard AMI of the instance type's architecture (Graviton: AL2023_ARM_64_STANDARD).
            ami_type=defaults.EKS_AMI_TYPE[("cpu", cfg.system_nodes.cpu_arch.value)],
            instance_types=[cfg.system_nodes.instance_type], capacity_type="ON_DEMAND",
            disk_size=cfg.system_nodes.disk_gib,
            scaling_config={"min_size": count, "desired_size": count, "max_size": count + 1},
            update_config={"max_unavailable": 1},
            labels={POOL_LABEL: SYSTEM_POOL}, tags=tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*attachments, self.vpc_cni, self.pod_identity_agent],
                                        ignore_changes=["scalingConfig.desiredSize"]))
            for i, count in enumerate(system_group_sizes(cfg.system_nodes.count, cfg.network.az_count))]
        after_nodes = pulumi.ResourceOptions(parent=self, depends_on=self.system_nodes)
        self.kube_proxy = aws.eks.Addon(
            f"{name}-kube-proxy", cluster_name=self.eks.name, addon_name="kube-proxy",
            resolve_conflicts_on_create="OVERWRITE", resolve_conflicts_on_update="OVERWRITE", tags=tags,
            opts=after_nodes)
        # Controllers on the system nodes (a replica on a service's node would keep Karpenter from removing it): the
        # add-ons' configuration values paths are in blueprints/catalog/addons.yaml `placement`.
        self.coredns = aws.eks.Addon(
            f"{name}-coredns", cluster_name=self.eks.name, addon_name="coredns",
            configuration_values=json.dumps({"nodeSelector": SYSTEM_NODES}),
            resolve_conflicts_on_create="OVERWRITE", resolve_conflicts_on_update="OVERWRITE", tags=tags,
            opts=after_nodes)
        self.ebs_csi_role = aws.iam.Role(fit(name, "ebs-csi-role", ROLE), assume_role_policy=trust_policy(
            "pods.eks.amazonaws.com", tag_session=True), tags=tags, opts=child)
        ebs_policy = aws.iam.RolePolicyAttachment(f"{name}-ebs-csi-policy", role=self.ebs_csi_role.name,
                                                  policy_arn=EBS_CSI_POLICY, opts=child)
        self.ebs_csi = aws.eks.Addon(
            f"{name}-ebs-csi", cluster_name=self.eks.name, addon_name="aws-ebs-csi-driver",
            configuration_values=json.dumps({"controller": {"nodeSelector": SYSTEM_NODES}}),
            pod_identity_associations=[{"role_arn": self.ebs_csi_role.arn,
                                        "service_account": EBS_CSI_SERVICE_ACCOUNT}],
            resolve_conflicts_on_create="OVERWRITE", resolve_conflicts_on_update="OVERWRITE", tags=tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*self.system_nodes, ebs_policy]))
        self.cluster_name = self.eks.name
        self.endpoint = self.eks.endpoint
        self.cluster_security_group_id = self.eks.vpc_config.cluster_security_group_id
        #: The Service CIDR as EKS reports it (its own choice when the plan sets none: an existing VPC's).
        self.service_cidr = self.eks.kubernetes_network_config.apply(lambda c: c.service_ipv4_cidr if c else None)
        self.kubeconfig = pulumi.Output.secret(pulumi.Output.all(
            self.eks.name, self.eks.endpoint, self.eks.certificate_authority.data).apply(
                lambda parts: kubeconfig_json(parts[0], parts[1], parts[2], region=cfg.region)))
        #: What every Kubernetes object of the platform waits for: nodes, DNS, kube-proxy, storage and access.
        self.ready: list[pulumi.Resource] = [*self.system_nodes, self.kube_proxy, self.coredns, self.ebs_csi,
                                             *self.access_entries]
        self.register_outputs({"cluster_name": self.cluster_name, "endpoint": self.endpoint,
                               "kubeconfig": self.kubeconfig,
                               "cluster_security_group_id": self.cluster_security_group_id,
                               "service_cidr": self.service_cidr})

    def _private_api_access(self, name: str, args: EksClusterArgs,
                            opts: pulumi.ResourceOptions) -> aws.ec2.SecurityGroup:
        """A security group on the control plane's ENIs admitting HTTPS from the runner's network: with the public
        endpoint off, `pulumi up` reaches the Kubernetes API only through it (EKS user guide clusters/
        cluster-endpoint.adoc L228-251: the control plane security group must allow 443 from the connected network)."""
        if args.vpc_id is None or args.runner_cidr is None:
            raise ValueError(f"EksClusterArgs for {args.platform.stack}: a private API endpoint needs vpc_id and "
                             "runner_cidr (where the deploy runner connects from)")
        group = aws.ec2.SecurityGroup(f"{name}-api-sg", vpc_id=args.vpc_id,
                                      description="EKS private API endpoint: HTTPS from the deploy runner's network",
                                      tags={**args.platform.tags, "Name": f"{name}-api"}, opts=opts)
        aws.vpc.SecurityGroupIngressRule(f"{name}-api-https", security_group_id=group.id, cidr_ipv4=args.runner_cidr,
                                         ip_protocol="tcp", from_port=443, to_port=443,
                                         description="Kubernetes API from the deploy runner's network",
                                         tags=args.platform.tags, opts=opts)
        return group

    def _access_entries(self, name: str, cfg: PlatformConfig, opts: pulumi.ResourceOptions) -> list[pulumi.Resource]:
        """Cluster admin for the platform's admin roles and its deployer role (EKS access entries)."""
        principals = [*cfg.access.admin_role_arns]
        if cfg.access.deployer_role_arn and cfg.access.deployer_role_arn not in principals:
            principals.append(cfg.access.deployer_role_arn)
        created: list[pulumi.Resource] = []
        account = aws.get_caller_identity_output().account_id if principals else None
        for i, arn in enumerate(principals):
            # The roles were checked against platform.yaml's account_id; the deploying identity must be in it.
            checked = account.apply(lambda deploying, arn=arn: deploying_account_checked(deploying, cfg, arn))
            entry = aws.eks.AccessEntry(f"{name}-access-{i}", cluster_name=self.eks.name, principal_arn=checked,
                                        type="STANDARD", tags=cfg.tags, opts=opts)
            created += [entry, aws.eks.AccessPolicyAssociation(
                f"{name}-access-{i}-admin", cluster_name=self.eks.name, principal_arn=arn,
                policy_arn=CLUSTER_ADMIN_POLICY, access_scope={"type": "cluster"},
                opts=pulumi.ResourceOptions(parent=self, depends_on=[entry]))]
        return created


def system_group_sizes(count: int, zones: int) -> list[int]:
    """The system nodes per zone-pinned node group: `count` nodes over the first min(count, zones) private subnets,
    as evenly as they go (2 nodes, 3 zones -> [1, 1]; 4 nodes, 3 zones -> [2, 1, 1]), so every group keeps >= 1."""
    groups = min(count, zones)
    return [count // groups + (1 if i < count % groups else 0) for i in range(groups)]


def deploying_account_checked(deploying: str, cfg: PlatformConfig, arn: str) -> str:
    """`arn` when the identity running `pulumi up` is in the platforms' account (platform.yaml `access.account_id`),
    whose roles (or `other_account_ids`') the plan admitted.

    Raises:
        pulumi.RunError: the deploying account is another one; the message names both and the fix.
    """
    if cfg.access.account_id is not None and deploying != cfg.access.account_id:
        raise pulumi.RunError(f"platform {cfg.stack} is deployed from account {deploying}, but platform.yaml's "
                                   f"access.account_id is {cfg.access.account_id}: its admin and deployer roles were "
                                   "admitted for that account; deploy with that account's credentials or fix "
                                   "access.account_id")
    return arn


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
