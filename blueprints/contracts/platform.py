"""The shared platform's typed contracts: what a platform team decides (`platform.yaml`), the planned platform stack
config (`PlatformConfig`, config key `servingblueprints:platform`) and the outputs services read (`PlatformOutputs`).

One platform per environment and region (stack `platform-<env>-<region>`) runs the VPC, one EKS cluster and the
add-ons every service needs; service stacks land on it and read its outputs through a StackReference. The planner
writes `PlatformConfig` (`blueprints.plan.platforms`); the program builds it (`components.platform.Platform`) and
exports `PlatformOutputs`; services and the offline preview read that same model.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, ClassVar, Literal

from pydantic import Field, model_validator

from blueprints.catalog.cluster_network import eks_default_service_cidr, overlapping
from blueprints.core import bounds, defaults
from blueprints.requirements.hosting import CpuArch, KubernetesVersion
from blueprints.requirements.fields import DNS_1123_LABEL, Region
from blueprints.core.jsontypes import ClosedModel
from blueprints.requirements.exposure import OPEN_INTERNET, Cidr
from blueprints.requirements.fields import TAG_VALUE
from blueprints.requirements.platform_file import (
    PLATFORM_SCHEMA_VERSION, RUNNER_LABEL, AccessSpec, ExistingVpc, LogRetentionDays, ReceiverKind, ServiceCidr, VpcCidr,
    cpu_instance_problem, platform_stack_name, region_of_name, system_node_labels,
)


# --- platform.yaml: what a platform team decides -----------------------------------------------------------------


# --- the planned platform stack config ---------------------------------------------------------------------------


class PlatformKind(str, Enum):
    EKS = "eks"
    #: Only the VPC: every service on it is a private SageMaker endpoint.
    NETWORK = "network"


class PlatformNetwork(ClosedModel):
    existing_vpc: ExistingVpc | None
    vpc_cidr: VpcCidr | None = Field(default=None, description="a new VPC's IPv4 "
                                 "CIDR (none: an existing VPC; a config without it: 10.0.0.0/16)")
    service_cidr: ServiceCidr | None = Field(default=None, description="the cluster's Service CIDR, set as EKS "
                                             "serviceIpv4Cidr (create-only): platform.yaml's service_cidr, else for "
                                             "a new VPC the one EKS would choose for it (the same value, so a "
                                             "cluster created without one is kept); none: an existing VPC without "
                                             "platform.yaml's service_cidr, where EKS chooses by the VPC's CIDR "
                                             "blocks and the platform exports its choice")
    az_count: int = Field(ge=2, le=6, description="zones a new VPC spans")
    nat_per_az: bool = Field(description="one NAT gateway per zone (production) or one shared")
    private_endpoint: bool = Field(description="the EKS API has no public endpoint")
    public_access_cidrs: list[Cidr] = Field(default=[OPEN_INTERNET], max_length=40, description="who may reach the "
                                            "public EKS API endpoint (none when private)")
    interface_endpoints: list[str] = Field(description="AWS services reached through interface VPC endpoints")

    @model_validator(mode="after")
    def _one_address_space(self) -> PlatformNetwork:
        if self.vpc_cidr is not None and self.existing_vpc is not None:
            raise ValueError("vpc_cidr is a new VPC's; an existing_vpc keeps its own address space: re-plan it")
        if self.private_endpoint and self.public_access_cidrs:
            raise ValueError("public_access_cidrs is for a public API endpoint; a private one has none: re-plan it")
        if self.service_cidr is not None and self.vpc_cidr is not None and overlapping(self.service_cidr,
                                                                                         [self.vpc_cidr]):
            raise ValueError(f"service_cidr {self.service_cidr} overlaps vpc_cidr {self.vpc_cidr}: set "
                             "platform.yaml's service_cidr outside the VPC and re-plan it")
        return self

    @property
    def planned_service_cidr(self) -> str:
        """The Service CIDR the cluster will have: `service_cidr`, else the one EKS chooses for the VPC (an existing
        VPC's stands in as `defaults.VPC_CIDR` offline; at deploy time the cluster reports its own)."""
        return self.service_cidr or eks_default_service_cidr([self.vpc_cidr or defaults.VPC_CIDR])


class SystemNodes(ClosedModel):
    """The platform's managed node group for controllers and weights sync Jobs."""

    instance_type: str = Field(max_length=40, description="a CPU EC2 type of the catalog")
    cpu_arch: CpuArch = Field(description="its architecture (the catalog's): picks the node group's AMI type")
    count: int = Field(ge=2, le=10, description="nodes; >= 2 so controllers survive a node loss")
    disk_gib: int = Field(ge=20, le=16384, description="root volume, GiB: OS, images and the sync Jobs' scratch")


class AddonRelease(ClosedModel):
    """An add-on the platform installs, at a catalog version."""

    id: str = Field(pattern=r"^[a-z0-9-]+$")
    version: str


class NodeClass(ClosedModel):
    """A Karpenter EC2NodeClass services reference from their NodePools."""

    name: str = Field(pattern=DNS_1123_LABEL)
    ami_alias: str = Field(pattern=r"^(al2023|bottlerocket)@v[0-9][0-9.]*$",
                           description="amiSelectorTerms alias pinned to an AMI version (never `@latest`: a new AMI "
                           "would roll every node unreviewed); the al2023 alias resolves the NVIDIA AMI on GPU types")
    root_volume_gib: int = Field(ge=20, le=16384)
    instance_store_raid0: bool = Field(description="kubelet and containerd on the instance-store NVMe (RAID0)")
    fast_image_pull: bool = Field(description="SOCI parallel pull/unpack through the nodeadm `FastImagePull` "
                                  "feature gate in the node class's userData (AL2023 only; the startup model's "
                                  "image pull rate, blueprints/catalog/startup.yaml)")

    @model_validator(mode="after")
    def _fast_image_pull_on_al2023(self) -> NodeClass:
        if self.fast_image_pull and not self.ami_alias.startswith("al2023@"):
            raise ValueError(f"fast_image_pull is a nodeadm (AL2023) feature gate; ami_alias {self.ami_alias!r} is "
                             "not AL2023: set fast_image_pull: false or an al2023@ alias")
        return self


class PlatformAlerting(ClosedModel):
    """The platform's Alertmanager receiver: its kind (the URL is the secret config key
    `ALERT_RECEIVER_SECRET_KEY`), or none."""

    receiver: ReceiverKind | None = None
    slack_channel: str | None = Field(default=None, pattern=r"^#[a-z0-9_.-]{1,80}$")


class CostItem(ClosedModel):
    item: str
    quantity: float = Field(ge=0, le=1000)
    usd_per_hour: float = Field(ge=0, le=bounds.MAX_COST_USD, description="per unit")
    monthly_usd: float = Field(ge=0, le=bounds.MAX_COST_USD)


#: Pulumi type tokens of the platform resources whose create-only inputs `PlatformConfig.create_only_inputs` lists.
EKS_CLUSTER_TYPE, VPC_TYPE = "aws:eks/cluster:Cluster", "aws:ec2/vpc:Vpc"


@dataclass(frozen=True)
class CreateOnlyInput:
    """A create-only input of a platform resource: its Pulumi type, its input path as the engine sees it (camelCase),
    the platform config fields it is derived from, and its value."""

    type: str
    path: str
    fields: tuple[str, ...]
    value: object


class PlatformConfig(ClosedModel):
    """Everything the program needs to build one platform stack, and why it looks the way it does."""

    schema_version: Literal[1] = PLATFORM_SCHEMA_VERSION
    name: str = Field(pattern=DNS_1123_LABEL, description="`<env>-<region>` or a custom name")
    environment: str = Field(pattern=DNS_1123_LABEL)
    production: bool
    region: Region
    kind: PlatformKind
    kubernetes_version: KubernetesVersion
    audit_logging: bool
    audit_log_retention_days: LogRetentionDays | None = Field(default=None, description="days CloudWatch keeps the "
                                                              "control-plane logs (none: never expire)")
    secrets_kms: bool = Field(description="Kubernetes secrets envelope-encrypted with a customer-managed KMS key")
    network: PlatformNetwork
    system_nodes: SystemNodes
    addons: list[AddonRelease]
    node_classes: list[NodeClass]
    spot_allowed: bool
    access: AccessSpec
    runner_label: str | None = Field(default=None, pattern=RUNNER_LABEL)
    alerting: PlatformAlerting = Field(default_factory=PlatformAlerting)
    services: list[str] = Field(description="service stacks that land on this platform")
    tags: dict[Annotated[str, Field(pattern=TAG_VALUE, max_length=128)],
               Annotated[str, Field(pattern=TAG_VALUE, max_length=256)]] = Field(
        max_length=40, description="AWS tags of every platform resource (tag keys and values: no control characters)")
    cost_lines: list[CostItem]
    monthly_cost_usd: float = Field(ge=0, le=bounds.MAX_COST_USD)
    rationale: list[str] = Field(min_length=1)
    warnings: list[str] = Field(default_factory=list)

    @property
    def stack(self) -> str:
        return platform_stack_name(self.name)

    @property
    def cluster_name(self) -> str:
        """The EKS cluster's name: the platform stack's name (deterministic, so services can name it)."""
        return self.stack

    def addon_version(self, addon_id: str) -> str | None:
        return next((a.version for a in self.addons if a.id == addon_id), None)

    @property
    def creator_admin_bootstrap(self) -> bool:
        """The EKS cluster's `access_config.bootstrap_cluster_creator_admin_permissions`: the identity creating the
        cluster gets an admin access entry unless a deployer role has its own (both at once collide on one
        principal). Create-only: a change replaces the cluster (`create_only_inputs`)."""
        return self.access.deployer_role_arn is None

    def create_only_inputs(self) -> list[CreateOnlyInput]:
        """Every resource input the program derives from this config that AWS cannot update in place: a change
        replaces the resource (the rule of `blueprints/catalog/replacements.yaml` matching its type and path, which
        the review names; `blueprints.review.changes.platform_replacements`)."""
        inputs = []
        if self.kind is PlatformKind.EKS:
            inputs += [CreateOnlyInput(EKS_CLUSTER_TYPE, "name", ("name",), self.cluster_name),
                       CreateOnlyInput(EKS_CLUSTER_TYPE, "accessConfig.bootstrapClusterCreatorAdminPermissions",
                                       ("access.deployer_role_arn",), self.creator_admin_bootstrap)]
            if self.network.service_cidr is not None:
                inputs.append(CreateOnlyInput(EKS_CLUSTER_TYPE, "kubernetesNetworkConfig.serviceIpv4Cidr",
                                              ("network.service_cidr",), self.network.service_cidr))
        if self.network.existing_vpc is None:
            inputs.append(CreateOnlyInput(VPC_TYPE, "cidrBlock", ("network.vpc_cidr",),
                                          self.network.vpc_cidr or defaults.VPC_CIDR))
        return inputs

    @model_validator(mode="after")
    def _consistent(self) -> PlatformConfig:
        ids = [a.id for a in self.addons]
        if len(ids) != len(set(ids)):
            raise ValueError(f"addons lists an add-on twice: {ids}")
        if self.kind is PlatformKind.NETWORK and (self.addons or self.node_classes):
            raise ValueError("a network-only platform installs no add-ons and no node classes")
        problems = addon_problems([(a.id, a.version) for a in self.addons])
        if self.node_classes and "karpenter" not in ids:
            problems.append("node_classes are Karpenter EC2NodeClasses: add-on karpenter must be installed")
        problems += addon_kubernetes_problems(ids, self.kubernetes_version)
        name_region = region_of_name(self.name)
        if name_region is not None and name_region != self.region:
            problems.append(f"name {self.name} ends in region {name_region} but region is {self.region}: a platform "
                            "named <env>-<region> is in that region; re-plan it")
        problem, arch = cpu_instance_problem(self.system_nodes.instance_type)
        if problem:
            problems.append(f"system_nodes.instance_type: {problem}")
        elif arch is not self.system_nodes.cpu_arch:
            problems.append(f"system_nodes.cpu_arch is {self.system_nodes.cpu_arch.value} but "
                            f"{self.system_nodes.instance_type} is {arch.value}; re-plan it")
        if problems:
            raise ValueError("; ".join(problems))
        if self.production and self.kind is PlatformKind.EKS and self.alerting.receiver is None:
            raise ValueError("alerting.receiver: a production platform pages someone (the chart's default receiver "
                             "is 'null'): set alerting.receiver in platform.yaml and re-plan")
        if self.audit_log_retention_days is not None and not self.audit_logging:
            raise ValueError("audit_log_retention_days keeps audit logs, but audit_logging is false: re-plan it")
        if self.kind is PlatformKind.EKS and self.network.private_endpoint and (
                self.network.existing_vpc is None or self.runner_label is None):
            raise ValueError("a private EKS endpoint is reachable only from inside its VPC: give network.existing_vpc "
                             "(where the deploy runner lives) and runner_label (that self-hosted runner's label)")
        return self


def vpc_zone_ids(available: list[str] | tuple[str, ...], excluded: list[str] | tuple[str, ...] | set[str],
                 az_count: int) -> list[str]:
    """The zone IDs a new VPC's subnets go to: the Region's available zone IDs in ID order, without the ones EKS
    refuses (`excluded`), the first `az_count` of them. The one rule `components/network.py` builds with and
    `blueprint preflight` reads back (`blueprints.review.zones`)."""
    return sorted(z for z in available if z not in excluded)[:az_count]


def addon_kubernetes_problems(addon_ids: list[str], version: str) -> list[str]:
    """The add-ons among `addon_ids` that do not support Kubernetes `version` (newer than their catalogued
    `kubernetes_max`), each with the key to change."""
    from blueprints.catalog.addons import load_platform_catalog

    pcat = load_platform_catalog()
    return [f"kubernetes_version {version} is newer than add-on {a} supports (<= {pcat.helm[a].kubernetes_max}); "
            "set platform.yaml's kubernetes_version to a supported version"
            for a in addon_ids if a in pcat.helm and pcat.helm[a].kubernetes_max
            and kubernetes_minor(version) > kubernetes_minor(pcat.helm[a].kubernetes_max)]


def kubernetes_minor(version: str) -> tuple[int, int]:
    """`"1.35"` -> `(1, 35)`, for ordering versions."""
    major, minor = version.split(".")
    return int(major), int(minor)


def kubernetes_upgrade_problem(current: str, planned: str) -> str | None:
    """Why a cluster running `current` cannot be moved to `planned` in one `pulumi up`, or None: EKS never
    downgrades a control plane and upgrades it one minor version at a time (docs.aws.amazon.com/eks/latest/
    userguide/update-cluster.html)."""
    before, after = kubernetes_minor(current), kubernetes_minor(planned)
    if after < before:
        return (f"Kubernetes {planned} is older than the {current} the cluster runs: EKS cannot downgrade a cluster; "
                f"keep kubernetes_version {current!r} in platform.yaml (or destroy the platform stack and its "
                "services to recreate it)")
    if after[0] == before[0] and after[1] > before[1] + 1:
        step = f"{before[0]}.{before[1] + 1}"
        return (f"Kubernetes {current} -> {planned} skips a minor version: EKS upgrades one minor version at a time; "
                f"set kubernetes_version: \"{step}\" in platform.yaml, deploy it, then the next")
    return None


def addon_problems(addons: list[tuple[str, str]]) -> list[str]:
    """What is wrong with a set of (add-on id, chart version): unknown ids or versions (with the known ones), and
    add-ons whose needs (another add-on, or the CRDs their charts render) are missing from the set."""
    from blueprints.catalog.addons import load_platform_catalog

    pcat = load_platform_catalog()
    ids = {a for a, _ in addons}
    problems = []
    for addon_id, version in addons:
        if addon_id not in pcat.helm:
            problems.append(f"unknown add-on {addon_id!r}; known: {', '.join(sorted(pcat.helm))}")
            continue
        addon = pcat.helm[addon_id]
        if version not in addon.versions:
            problems.append(f"add-on {addon_id}: unknown chart version {version!r}; the catalog knows "
                            f"{', '.join(addon.versions)}")
        needed = [*addon.needs, *(o.id for c in addon.needs_crds if (o := pcat.crd_owner(c)) is not None)]
        missing = sorted(set(needed) - ids)
        if missing:
            problems.append(f"add-on {addon_id} needs {', '.join(missing)} installed too")
    return problems


# --- the outputs contract ----------------------------------------------------------------------------------------


class PlatformOutputs(ClosedModel):
    """What a platform stack exports and services read (`pulumi.StackReference`), one stack output per field.

    `kubeconfig` is a secret output. Network-only platforms export no cluster fields (None).
    """

    platform: str = Field(description="the platform stack's name")
    region: Region
    kubernetes_version: str
    vpc_id: str
    vpc_cidr: str
    service_cidr: str | None = Field(default=None, description="the cluster's Kubernetes Service CIDR (every "
                                     "ClusterIP, the API server's the first address), as EKS reports it; services' "
                                     "NetworkPolicies admit the API server's ClusterIP from it")
    private_subnet_ids: list[str]
    public_subnet_ids: list[str]
    workload_security_group_id: str
    cluster_name: str | None = None
    kubeconfig: str | None = Field(default=None, description="secret; authenticates with `aws eks get-token`")
    cluster_security_group_id: str | None = None
    node_classes: dict[str, str] = Field(default_factory=dict, description="`gpu`/`cpu` -> EC2NodeClass name")
    prometheus_url: str | None = None
    addons: dict[str, str] = Field(default_factory=dict, description="installed add-on id -> chart version")
    system_node_labels: dict[str, str] = Field(default_factory=dict)
    system_node_instance_type: str | None = None
    audit_logging: bool | None = Field(default=None, description="the cluster sends Kubernetes audit logs to "
                                       "CloudWatch (from its enabled log types)")
    private_endpoint: bool | None = Field(default=None, description="the cluster's API has no public endpoint")
    secrets_kms: bool | None = Field(default=None, description="Kubernetes secrets are envelope-encrypted with a "
                                     "customer-managed KMS key")

    #: The compliance settings a service records beside its own (namespace annotation, `components.serving`).
    COMPLIANCE_FIELDS: ClassVar[tuple[str, ...]] = ("audit_logging", "private_endpoint", "secrets_kms")
    #: Stack outputs holding secrets.
    SECRET_FIELDS: ClassVar[tuple[str, ...]] = ("kubeconfig",)


def prometheus_service_url(release: str, namespace: str) -> str:
    """kube-prometheus-stack's Prometheus Service: `<fullname>-prometheus.<namespace>.svc:9090`, where fullname is the
    release name when it contains `kube-prometheus-stack`, truncated to 26 characters ([KPS] templates/_helpers.tpl
    L14-24, templates/prometheus/service.yaml); otherwise `<release>-kube-prometheus-stack`."""
    fullname = release if "kube-prometheus-stack" in release else f"{release}-kube-prometheus-stack"
    return f"http://{fullname[:26].rstrip('-')}-prometheus.{namespace}.svc:9090"


def planned_outputs(config: PlatformConfig) -> PlatformOutputs:
    """The outputs a platform will export, with stand-in ids (hashed from its name), for the offline preview of the
    services on it. The same fields the real platform exports; ids and the kubeconfig are placeholders."""
    digest = hashlib.sha256(config.stack.encode()).hexdigest()
    zones = config.network.az_count
    vpc = config.network.existing_vpc
    return PlatformOutputs(
        platform=config.stack, region=config.region, kubernetes_version=config.kubernetes_version,
        # An existing VPC's CIDR is read from AWS at deploy time; offline it is a stand-in.
        vpc_id=vpc.vpc_id if vpc else f"vpc-{digest[:17]}", vpc_cidr=config.network.vpc_cidr or defaults.VPC_CIDR,
        private_subnet_ids=list(vpc.private_subnet_ids) if vpc else [f"subnet-{digest[i:i + 17]}" for i in range(zones)],
        public_subnet_ids=list(vpc.public_subnet_ids) if vpc else [f"subnet-{digest[i + 20:i + 37]}"
                                                                     for i in range(zones)],
        workload_security_group_id=f"sg-{digest[40:57]}",
        service_cidr=config.network.planned_service_cidr if config.kind is PlatformKind.EKS else None,
        cluster_name=config.cluster_name if config.kind is PlatformKind.EKS else None,
        kubeconfig="[planned kubeconfig]" if config.kind is PlatformKind.EKS else None,
        cluster_security_group_id=f"sg-{digest[20:37]}" if config.kind is PlatformKind.EKS else None,
        node_classes={nc.name: nc.name for nc in config.node_classes},
        prometheus_url=_planned_prometheus_url(config),
        addons={a.id: a.version for a in config.addons},
        system_node_labels=system_node_labels(config.system_nodes.cpu_arch) if config.kind is PlatformKind.EKS
        else {},
        system_node_instance_type=config.system_nodes.instance_type if config.kind is PlatformKind.EKS else None,
        audit_logging=config.audit_logging if config.kind is PlatformKind.EKS else None,
        private_endpoint=config.network.private_endpoint if config.kind is PlatformKind.EKS else None,
        secrets_kms=config.secrets_kms if config.kind is PlatformKind.EKS else None,
    )


def _planned_prometheus_url(config: PlatformConfig) -> str | None:
    from blueprints.catalog.addons import load_platform_catalog

    if config.addon_version("kube-prometheus-stack") is None:
        return None
    addon = load_platform_catalog().addon("kube-prometheus-stack")
    return prometheus_service_url(addon.release, addon.namespace)
