"""The shared platform's typed contracts: what a platform team decides (`platform.yaml`), the planned platform stack
config (`PlatformConfig`, config key `servingblueprints:platform`) and the outputs services read (`PlatformOutputs`).

One platform per environment and region (stack `platform-<env>-<region>`) runs the VPC, one EKS cluster and the
add-ons every service needs; service stacks land on it and read its outputs through a StackReference. The planner
writes `PlatformConfig` (`blueprints.platform_plan`); the program builds it (`components.platform.Platform`) and
exports `PlatformOutputs`; services and the offline preview read that same model.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from blueprints import bounds
from blueprints.catalog.addons import KUBERNETES_VERSION
from blueprints.errors import RequirementsError, format_validation_error, read_text_file
from blueprints.jsontypes import check_json_types
from blueprints.requirements_platform import CpuArch, KubernetesVersion
from blueprints.requirements_fields import DNS_1123_LABEL, TAG_VALUE, Region
from blueprints.yamlio import load_yaml

#: Bumped when a field changes meaning; the program refuses platform configs of another version.
PLATFORM_SCHEMA_VERSION = 1
#: Service name reserved for platform stacks (`platform-<env>-<region>`).
PLATFORM_SERVICE = "platform"
#: The optional platform team's file beside the services' requirements files.
PLATFORM_FILE = "platform.yaml"
#: An IAM role ARN (commercial, China and GovCloud partitions), for access entries.
IAM_ROLE_ARN = r"^arn:aws(-cn|-us-gov)?:iam::[0-9]{12}:role/[A-Za-z0-9_+=,.@/-]+$"
#: A label for a self-hosted GitHub Actions runner.
RUNNER_LABEL = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,99}$"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _json_types(cls, data: Any) -> Any:
        return check_json_types(cls, data)


#: `kubernetes.io/arch` node label values of each CPU architecture (the Go GOARCH names the kubelet reports).
NODE_ARCH = {CpuArch.X86_64: "amd64", CpuArch.ARM64: "arm64"}
#: A platform name derived from its environment and region: `<env>-<region>` (`prod-us-east-1`).
DERIVED_NAME = re.compile(r"([a-z0-9-]+?)-([a-z]{2}(?:-gov)?-[a-z]+-\d)")


def system_node_labels(arch: CpuArch) -> dict[str, str]:
    """Labels every system node carries: the pool label the node group sets, and the well-known labels the kubelet
    sets (kubernetes.io/docs/reference/labels-annotations-taints), the architecture that of its instance type."""
    return {"servingblueprints.io/pool": "system", "kubernetes.io/arch": NODE_ARCH[arch], "kubernetes.io/os": "linux"}


def platform_stack_name(platform: str) -> str:
    """The Pulumi stack of a platform: `platform-<name>` (`<name>` defaults to `<env>-<region>`)."""
    return f"{PLATFORM_SERVICE}-{platform}"


def region_of_name(name: str) -> str | None:
    """The region a platform name ends in (`prod-us-east-1` -> `us-east-1`), or None for a name without one."""
    match = DERIVED_NAME.fullmatch(name)
    return match.group(2) if match else None


def platform_name_problem(name: str) -> str | None:
    """Why `name` cannot name a platform (it is not a stack name: `platform-` is added to it), or None."""
    if name.startswith(f"{PLATFORM_SERVICE}-"):
        return (f"{name!r} is a stack name; name the platform without the {PLATFORM_SERVICE}- prefix "
                f"({name.removeprefix(PLATFORM_SERVICE + '-')!r} is stack {name})")
    return None


def cpu_instance_problem(instance_type: str) -> tuple[str | None, CpuArch | None]:
    """(why `instance_type` cannot run the system nodes, or None; its architecture when catalogued): it must be a
    CPU EC2 type of the catalog (controllers need no GPU)."""
    from blueprints.catalog import load_catalog
    from blueprints.errors import CatalogError

    catalog = load_catalog()
    try:
        inst = catalog.instance(instance_type)
    except CatalogError:
        cpu = sorted(i.instance_type for i in catalog.ec2.values() if not i.gpu_count)
        close = difflib.get_close_matches(instance_type, cpu, n=1)
        return (f"unknown instance type {instance_type!r}" + (f"; did you mean {close[0]}?" if close else "")
                + f" CPU types in the catalog: {', '.join(cpu)}"), None
    if instance_type.startswith("ml."):
        return f"{instance_type} is a SageMaker hosting type; the system nodes are EC2, e.g. m7i.xlarge", None
    if inst.gpu_count:
        return f"{instance_type} has GPUs; controllers run on a CPU type such as m7i.xlarge", None
    return None, CpuArch(inst.cpu_arch)


# --- platform.yaml: what a platform team decides -----------------------------------------------------------------


class ExistingVpc(_Frozen):
    """A VPC a platform (or a private SageMaker service) uses instead of creating one.

    Example: `{"vpc_id": "vpc-0abc", "private_subnet_ids": ["subnet-1", "subnet-2"], "public_subnet_ids": [...]}`.
    Private subnets need outbound access (NAT or VPC endpoints).
    """

    vpc_id: str = Field(pattern=r"^vpc-[0-9a-f]{8,17}$")
    private_subnet_ids: list[Annotated[str, Field(pattern=r"^subnet-[0-9a-f]{8,17}$")]] = Field(
        min_length=2, max_length=16, description="in >= 2 availability zones")
    public_subnet_ids: list[Annotated[str, Field(pattern=r"^subnet-[0-9a-f]{8,17}$")]] = Field(
        default_factory=list, max_length=16, description="for internet-facing load balancers")

    @model_validator(mode="after")
    def _distinct(self) -> ExistingVpc:
        ids = [*self.private_subnet_ids, *self.public_subnet_ids]
        if len(ids) != len(set(ids)):
            raise ValueError("a subnet id is listed twice (private and public subnets are distinct)")
        return self


class SpotPolicy(str, Enum):
    ALLOWED = "allowed"
    FORBIDDEN = "forbidden"


class SystemNodesSpec(_Frozen):
    """The managed node group that runs the platform's controllers (Karpenter, KEDA, Prometheus, ...)."""

    instance_type: str = Field(default="m7i.xlarge", max_length=40, description="an EC2 CPU type in the catalog "
                               "(x86_64 or Graviton arm64; the node group's AMI type follows its architecture)")
    count: int = Field(default=2, ge=2, le=10, description="nodes; >= 2 so controllers survive a node loss")

    @field_validator("instance_type")
    @classmethod
    def _catalogued_cpu_type(cls, value: str) -> str:
        problem, _ = cpu_instance_problem(value)
        if problem:
            raise ValueError(problem)
        return value


class AccessSpec(_Frozen):
    """Who may administer the clusters (EKS access entries, API authentication mode)."""

    admin_role_arns: list[Annotated[str, Field(pattern=IAM_ROLE_ARN)]] = Field(
        default_factory=list, max_length=20, description="IAM roles given cluster admin (AmazonEKSClusterAdminPolicy)")
    deployer_role_arn: str | None = Field(default=None, pattern=IAM_ROLE_ARN,
                                          description="the CI role that runs `pulumi up` for service stacks")


class ReceiverKind(str, Enum):
    """Alertmanager receivers a platform can page through; the URL (or PagerDuty routing key) is a secret."""

    SLACK = "slack"
    PAGERDUTY = "pagerduty"
    WEBHOOK = "webhook"


#: The platform stack's secret config key holding the receiver's URL (Slack incoming webhook, webhook endpoint) or
#: PagerDuty Events API v2 routing key: `pulumi config set --secret servingblueprints:alertReceiverUrl ...`.
ALERT_RECEIVER_SECRET_KEY = "servingblueprints:alertReceiverUrl"
SNS_TOPIC_ARN = r"^arn:aws(-cn|-us-gov)?:sns:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]{1,256}$"


class AlertingSpec(_Frozen):
    """Where alerts go (`alerting` in platform.yaml, or per platform).

    Example: `{"receiver": "slack", "slack_channel": "#ml-serving-alerts", "sns_topic_arns": {"us-east-1":
    "arn:aws:sns:us-east-1:123456789012:ml-serving-alerts"}}`.
    """

    receiver: ReceiverKind | None = Field(default=None, description="the platforms' Alertmanager receiver; its URL "
                                          f"is the secret config key {ALERT_RECEIVER_SECRET_KEY} of each platform "
                                          "stack. Omitted: no receiver (plans say alerts reach nobody)")
    slack_channel: str | None = Field(default=None, pattern=r"^#[a-z0-9_.-]{1,80}$",
                                      description="Slack only: the channel (an incoming webhook posts to its own)")
    sns_topic_arns: dict[Region, Annotated[str, Field(pattern=SNS_TOPIC_ARN)]] = Field(
        default_factory=dict, max_length=40, description="region -> SNS topic the SageMaker endpoints' CloudWatch "
        "alarms notify there")

    @model_validator(mode="after")
    def _consistent(self) -> AlertingSpec:
        if self.slack_channel is not None and self.receiver is not ReceiverKind.SLACK:
            raise ValueError("slack_channel is for receiver: slack only")
        for region, arn in self.sns_topic_arns.items():
            if arn.split(":")[3] != region:
                raise ValueError(f"sns_topic_arns.{region}: {arn} is in region {arn.split(':')[3]}; CloudWatch "
                                 "alarms notify topics of their own region")
        return self


class PlatformOverride(_Frozen):
    """Settings of one named platform (`platforms.<name>` in platform.yaml)."""

    environment: str | None = Field(default=None, pattern=DNS_1123_LABEL, max_length=20,
                                    description="its environment (policy config); required for a custom name")
    region: Region | None = Field(default=None, description="its region; required for a custom name")
    existing_vpc: ExistingVpc | None = Field(default=None, description="use this VPC instead of creating one")
    private_endpoint: bool | None = Field(default=None, description="EKS API private only; default: private when "
                                          "any service on it is private_only. false refuses private services")
    runner_label: str | None = Field(default=None, pattern=RUNNER_LABEL,
                                     description="self-hosted GitHub Actions runner (inside `existing_vpc`) that "
                                     "deploys a private platform and its services")
    alerting: AlertingSpec | None = Field(default=None, description="this platform's receiver, instead of the "
                                          "file's `alerting`")


class PlatformRequirements(_Frozen):
    """`stacks/requirements/platform.yaml`: what the platform team decides for every platform. Every field is
    optional; the file itself is optional."""

    owner: str = Field(default="platform", pattern=TAG_VALUE, max_length=256, description="tag: owning team")
    cost_center: str = Field(default="shared", pattern=TAG_VALUE, max_length=256, description="tag: cost center")
    kubernetes_version: str | None = Field(default=None, pattern=KUBERNETES_VERSION,
                                           description="EKS version; default: the newest version in standard "
                                           "support on the plan date that every pinned add-on supports")
    system_nodes: SystemNodesSpec = Field(default_factory=SystemNodesSpec)
    addon_versions: dict[Annotated[str, Field(pattern=r"^[a-z0-9-]+$", max_length=40)],
                         Annotated[str, Field(max_length=40)]] = Field(
        default_factory=dict, description="add-on id -> a chart version the catalog knows (default: its first)")
    spot: SpotPolicy = Field(default=SpotPolicy.ALLOWED, description="whether non-production services may use spot")
    access: AccessSpec = Field(default_factory=AccessSpec)
    alerting: AlertingSpec = Field(default_factory=AlertingSpec, description="where alerts go")
    platforms: dict[Annotated[str, Field(pattern=DNS_1123_LABEL, max_length=40)], PlatformOverride] = Field(
        default_factory=dict, max_length=50, description="per platform (`<env>-<region>` or a custom name)")

    @field_validator("platforms")
    @classmethod
    def _custom_names_say_where(cls, value: dict[str, PlatformOverride]) -> dict[str, PlatformOverride]:
        vpcs: dict[str, tuple[str, str]] = {}
        for name, spec in value.items():
            problem = platform_name_problem(name)
            if problem:
                raise ValueError(f"platforms.{name}: {problem}")
            derived = DERIVED_NAME.fullmatch(name)
            if (spec.environment is None or spec.region is None) and derived is None:
                raise ValueError(f"platforms.{name}: a name other than <env>-<region> needs `environment` and "
                                 "`region`")
            region = spec.region or (derived.group(2) if derived else None)
            if derived is not None and spec.region is not None and spec.region != derived.group(2):
                raise ValueError(f"platforms.{name}.region is {spec.region} but the name ends in region "
                                 f"{derived.group(2)}; a platform named <env>-<region> is in that region: fix "
                                 "`region` or rename the platform")
            if spec.existing_vpc is not None and region is not None:
                seen = vpcs.setdefault(spec.existing_vpc.vpc_id, (name, region))
                if seen[1] != region:
                    raise ValueError(f"platforms.{name}.existing_vpc.vpc_id {spec.existing_vpc.vpc_id} is also "
                                     f"platforms.{seen[0]}'s VPC, in {seen[1]}; a VPC lives in one region: give the "
                                     f"{region} platform a VPC of {region}")
        return value


def platform_json_schema() -> dict:
    """platform.yaml's schema as JSON Schema (draft 2020-12), for editors and `blueprint schema --platform`."""
    schema = PlatformRequirements.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "serving blueprints platform file (platform.yaml)"
    return schema


def load_platform_requirements(path: Path) -> PlatformRequirements:
    """Read `platform.yaml`; the defaults when the file does not exist.

    Raises:
        RequirementsError: not YAML, not a mapping, or breaks the schema; the message names the file and field.
    """
    if not path.exists():
        return PlatformRequirements()
    text = read_text_file(path, RequirementsError, "platform file")
    try:
        data = load_yaml(text)
    except yaml.YAMLError as exc:
        raise RequirementsError(f"{path}: not valid YAML: {getattr(exc, 'problem', exc)}") from None
    if data is None:
        return PlatformRequirements()
    if not isinstance(data, dict):
        raise RequirementsError(f"{path}: expected a mapping (owner, kubernetes_version, platforms, ...), got "
                                f"{type(data).__name__}")
    try:
        return PlatformRequirements.model_validate(data)
    except ValidationError as exc:
        raise RequirementsError(format_validation_error(exc, source=path, data=data)) from None


# --- the planned platform stack config ---------------------------------------------------------------------------


class PlatformKind(str, Enum):
    EKS = "eks"
    #: Only the VPC: every service on it is a private SageMaker endpoint.
    NETWORK = "network"


class PlatformNetwork(_Frozen):
    existing_vpc: ExistingVpc | None
    az_count: int = Field(ge=2, le=6, description="zones a new VPC spans")
    nat_per_az: bool = Field(description="one NAT gateway per zone (production) or one shared")
    private_endpoint: bool = Field(description="the EKS API has no public endpoint")
    interface_endpoints: list[str] = Field(description="AWS services reached through interface VPC endpoints")


class SystemNodes(_Frozen):
    """The platform's managed node group for controllers and weights sync Jobs."""

    instance_type: str = Field(max_length=40, description="a CPU EC2 type of the catalog")
    cpu_arch: CpuArch = Field(description="its architecture (the catalog's): picks the node group's AMI type")
    count: int = Field(ge=2, le=10, description="nodes; >= 2 so controllers survive a node loss")
    disk_gib: int = Field(ge=20, le=16384, description="root volume, GiB: OS, images and the sync Jobs' scratch")


class AddonRelease(_Frozen):
    """An add-on the platform installs, at a catalog version."""

    id: str = Field(pattern=r"^[a-z0-9-]+$")
    version: str


class NodeClass(_Frozen):
    """A Karpenter EC2NodeClass services reference from their NodePools."""

    name: str = Field(pattern=DNS_1123_LABEL)
    ami_alias: str = Field(pattern=r"^(al2023|bottlerocket)@(latest|v[\w.]+)$",
                           description="amiSelectorTerms alias; the al2023 alias resolves the NVIDIA AMI on GPU types")
    root_volume_gib: int = Field(ge=20, le=16384)
    instance_store_raid0: bool = Field(description="kubelet and containerd on the instance-store NVMe (RAID0)")


class PlatformAlerting(_Frozen):
    """The platform's Alertmanager receiver: its kind (the URL is the secret config key
    `ALERT_RECEIVER_SECRET_KEY`), or none."""

    receiver: ReceiverKind | None = None
    slack_channel: str | None = Field(default=None, pattern=r"^#[a-z0-9_.-]{1,80}$")


class CostItem(_Frozen):
    item: str
    quantity: float = Field(ge=0, le=1000)
    usd_per_hour: float = Field(ge=0, le=bounds.MAX_COST_USD, description="per unit")
    monthly_usd: float = Field(ge=0, le=bounds.MAX_COST_USD)


class PlatformConfig(_Frozen):
    """Everything the program needs to build one platform stack, and why it looks the way it does."""

    schema_version: Literal[1] = PLATFORM_SCHEMA_VERSION
    name: str = Field(pattern=DNS_1123_LABEL, description="`<env>-<region>` or a custom name")
    environment: str = Field(pattern=DNS_1123_LABEL)
    production: bool
    region: Region
    kind: PlatformKind
    kubernetes_version: KubernetesVersion
    audit_logging: bool
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
    tags: dict[str, str]
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
        if self.kind is PlatformKind.EKS and self.network.private_endpoint and (
                self.network.existing_vpc is None or self.runner_label is None):
            raise ValueError("a private EKS endpoint is reachable only from inside its VPC: give network.existing_vpc "
                             "(where the deploy runner lives) and runner_label (that self-hosted runner's label)")
        return self


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


class PlatformOutputs(_Frozen):
    """What a platform stack exports and services read (`pulumi.StackReference`), one stack output per field.

    `kubeconfig` is a secret output. Network-only platforms export no cluster fields (None).
    """

    platform: str = Field(description="the platform stack's name")
    region: Region
    kubernetes_version: str
    vpc_id: str
    vpc_cidr: str
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
        vpc_id=vpc.vpc_id if vpc else f"vpc-{digest[:17]}", vpc_cidr="10.0.0.0/16",
        private_subnet_ids=list(vpc.private_subnet_ids) if vpc else [f"subnet-{digest[i:i + 17]}" for i in range(zones)],
        public_subnet_ids=list(vpc.public_subnet_ids) if vpc else [f"subnet-{digest[i + 20:i + 37]}"
                                                                     for i in range(zones)],
        workload_security_group_id=f"sg-{digest[40:57]}",
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
