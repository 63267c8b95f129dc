"""Platform: one environment's shared infrastructure in one region: the VPC, the EKS cluster with its add-ons, and
the outputs every service on it reads (`blueprints.contracts.platform.PlatformOutputs`).

A network-only platform (every service on it is a private SageMaker endpoint) builds only the VPC.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from blueprints.catalog.addons import load_platform_catalog
from blueprints.contracts.platform import PlatformConfig, PlatformKind, PlatformOutputs
from blueprints.requirements.platform_file import system_node_labels
from components.addons import ClusterAddons, ClusterAddonsArgs
from components.cluster import EksCluster, EksClusterArgs
from blueprints.core import defaults
from components.network import Network, NetworkArgs


@dataclass
class PlatformArgs:
    """Inputs of `Platform`: the planned platform config (`servingblueprints:platform`) and, when it names an
    Alertmanager receiver, the receiver's URL or routing key (a Pulumi secret)."""

    config: PlatformConfig
    alert_receiver_url: pulumi.Input[str] | None = None


class Platform(pulumi.ComponentResource):
    """VPC (new, or the platform team's existing one), EKS with its system nodes and EKS add-ons, and the Helm
    add-ons (Karpenter, load balancer controller, KEDA, Prometheus stack, metrics-server, NVIDIA plugins).

    Like pulumi-eks, it builds the Kubernetes provider of the cluster it creates and exposes it (`provider`) as an
    escape hatch; everything else takes providers through opts.

    Outputs: every field of `PlatformOutputs` (`outputs()`), the kubeconfig as a secret.

    Example:
        platform = Platform("platform-prod-us-east-1", PlatformArgs(config=cfg))
        for key, value in platform.outputs().items():
            pulumi.export(key, value)
    """

    def __init__(self, name: str, args: PlatformArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("servingblueprints:index:Platform", name, None, opts)
        cfg = args.config
        self.config = cfg
        child = pulumi.ResourceOptions(parent=self)
        self.network = Network(f"{name}-network", NetworkArgs(
            region=cfg.region, tags=cfg.tags, interface_endpoints=list(cfg.network.interface_endpoints),
            nat_per_az=cfg.network.nat_per_az, existing=cfg.network.existing_vpc, az_count=cfg.network.az_count,
            cidr_block=cfg.network.vpc_cidr or defaults.VPC_CIDR,
            cluster_name=cfg.cluster_name if cfg.kind is PlatformKind.EKS else None,
            excluded_zone_ids=list(load_platform_catalog().eks_refused_zone_ids.get(cfg.region, ()))
            if cfg.kind is PlatformKind.EKS else []), opts=child)
        self.cluster: EksCluster | None = None
        self.provider: k8s.Provider | None = None
        self.addons: ClusterAddons | None = None
        if cfg.kind is PlatformKind.EKS:
            self.cluster = EksCluster(f"{name}-cluster", EksClusterArgs(
                platform=cfg, subnet_ids=self.network.private_subnet_ids,
                security_group_ids=[self.network.workload_security_group_id], vpc_id=self.network.vpc_id,
                # The runner that deploys a private platform lives in its VPC (platform.yaml runner_label).
                runner_cidr=self.network.vpc_cidr, egress=self.network.egress), opts=child)
            self.provider = k8s.Provider(f"{name}-k8s", kubeconfig=self.cluster.kubeconfig,
                                         enable_server_side_apply=True, opts=child)
            self.addons = ClusterAddons(f"{name}-addons", ClusterAddonsArgs(
                platform=cfg, cluster_name=self.cluster.cluster_name, cluster_ready=self.cluster.ready,
                vpc_id=self.network.vpc_id, subnet_ids=self.network.private_subnet_ids,
                node_security_group_id=self.cluster.cluster_security_group_id,
                alert_receiver_url=args.alert_receiver_url),
                opts=pulumi.ResourceOptions(parent=self, providers=[self.provider]))
        self.register_outputs(self.outputs())

    def outputs(self) -> dict[str, pulumi.Input]:
        """The `PlatformOutputs` fields as stack outputs (one per field; `kubeconfig` secret)."""
        cfg = self.config
        eks = self.cluster is not None
        values: dict[str, pulumi.Input] = {
            "platform": cfg.stack, "region": cfg.region, "kubernetes_version": cfg.kubernetes_version,
            "vpc_id": self.network.vpc_id, "vpc_cidr": self.network.vpc_cidr,
            "private_subnet_ids": self.network.private_subnet_ids, "public_subnet_ids": self.network.public_subnet_ids,
            "workload_security_group_id": self.network.workload_security_group_id,
            "cluster_name": self.cluster.cluster_name if eks else None,
            "kubeconfig": self.cluster.kubeconfig if eks else None,
            "cluster_security_group_id": self.cluster.cluster_security_group_id if eks else None,
            "service_cidr": self.cluster.service_cidr if eks else None,
            "node_classes": {nc.name: nc.name for nc in cfg.node_classes},
            "prometheus_url": self.addons.prometheus_url if self.addons else None,
            "addons": {a.id: a.version for a in cfg.addons},
            "system_node_labels": system_node_labels(cfg.system_nodes.cpu_arch) if eks else {},
            "system_node_instance_type": cfg.system_nodes.instance_type if eks else None,
            # Read back from the cluster resource itself, so services record what the cluster really has.
            "audit_logging": self.cluster.eks.enabled_cluster_log_types.apply(lambda t: "audit" in (t or []))
            if eks else None,
            "private_endpoint": self.cluster.eks.vpc_config.apply(lambda v: v.endpoint_public_access is False)
            if eks else None,
            "secrets_kms": self.cluster.eks.encryption_config.apply(lambda e: e is not None) if eks else None,
        }
        missing = set(PlatformOutputs.model_fields) - set(values)
        assert not missing, f"Platform.outputs lacks {missing}"  # the contract and the exports move together
        return values
