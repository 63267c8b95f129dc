"""`platform.yaml`, what a platform team decides for every platform (Kubernetes version, system nodes, add-on
versions, spot policy, access, alert receivers, existing VPCs, custom platforms), and the names platforms derive.
"""

from __future__ import annotations

import difflib
import json
import re
from enum import Enum
from pathlib import Path
from typing import Annotated, Literal
import yaml
from pydantic import AfterValidator, Field, JsonValue, ValidationError, field_validator, model_validator
from blueprints.catalog.addons import KUBERNETES_VERSION
from blueprints.core.errors import RequirementsError, describe_pattern, format_validation_error, read_text_file
from blueprints.requirements.hosting import CpuArch
from blueprints.requirements.exposure import OPEN_INTERNET, Cidr, ipv4_cidr
from blueprints.requirements.fields import DNS_1123_LABEL, TAG_VALUE, UNIQUE, UNIQUE_ITEMS, Region
from blueprints.core.yamlio import load_yaml
from blueprints.core.jsontypes import ClosedModel


#: Bumped when a field changes meaning; the program refuses platform configs of another version.
PLATFORM_SCHEMA_VERSION = 1


#: Service name reserved for platform stacks (`platform-<env>-<region>`).
PLATFORM_SERVICE = "platform"


#: The optional platform team's file beside the services' requirements files.
PLATFORM_FILE = "platform.yaml"


#: An IAM role ARN (commercial, China and GovCloud partitions), for access entries.
IAM_ROLE_ARN = describe_pattern(r"^arn:aws(-cn|-us-gov)?:iam::[0-9]{12}:role/[A-Za-z0-9_+=,.@/-]+$", "an IAM role "
                                "ARN such as arn:aws:iam::123456789012:role/platform-admins")

#: An existing VPC's and subnet's ids (EC2: 8 or 17 hex digits after the prefix).
VPC_ID = describe_pattern(r"^vpc-[0-9a-f]{8,17}$", "a VPC id such as vpc-0abc12345def67890 (vpc- and 8-17 lowercase "
                          "hex digits)")
SUBNET_ID = describe_pattern(r"^subnet-[0-9a-f]{8,17}$", "a subnet id such as subnet-0abc12345def67890 (subnet- and "
                             "8-17 lowercase hex digits)")


#: A label for a self-hosted GitHub Actions runner.
RUNNER_LABEL = describe_pattern(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,99}$", "a runner label: up to 100 letters, digits "
                                "and _.-, starting with a letter or digit")


#: `kubernetes.io/arch` node label values of each CPU architecture (the Go GOARCH names the kubelet reports).
NODE_ARCH = {CpuArch.X86_64: "amd64", CpuArch.ARM64: "arm64"}


#: A provider setting's config key, `<provider>:<name>` (`aws:profile`, `kubernetes:context`); the provider's
#: namespace, never the project's (`servingblueprints:*` keys are the plan's and the program's).
PROVIDER_SETTING_KEY = describe_pattern(r"^[a-z][a-z0-9-]{0,39}:[A-Za-z][A-Za-z0-9_]{0,63}$", "a provider config "
                                        "key `<provider>:<name>` such as aws:profile or kubernetes:context")
#: Provider settings the plan writes itself (`blueprints.contracts.stackconfig.PLANNED_PROVIDER_KEYS`).
PLANNED_PROVIDER_SETTINGS = ("aws:region",)
#: Names of provider settings that carry credentials: never declared in plain text in a repository file.
CREDENTIAL_SETTING = re.compile(r"(?i)(secret|token|password|accesskey|kubeconfig|credential)")
#: Most characters of one declared provider setting's value, as JSON.
MAX_PROVIDER_SETTING_CHARS = 2000


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
    from blueprints.core.errors import CatalogError

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


class ExistingVpc(ClosedModel):
    """A VPC a platform (or a private SageMaker service) uses instead of creating one.

    Example: `{"vpc_id": "vpc-0abc", "private_subnet_ids": ["subnet-1", "subnet-2"], "public_subnet_ids": [...]}`.
    Private subnets need outbound access (NAT or VPC endpoints).
    """

    vpc_id: str = Field(pattern=VPC_ID, description="the existing VPC's id")
    private_subnet_ids: list[Annotated[str, Field(pattern=SUBNET_ID)]] = Field(
        min_length=2, max_length=16, description="the private subnets' ids, in >= 2 availability zones")
    public_subnet_ids: list[Annotated[str, Field(pattern=SUBNET_ID)]] = Field(
        default_factory=list, max_length=16, description="the public subnets' ids, for internet-facing load "
        "balancers")
    internet_egress: bool = Field(default=True, description="its private subnets reach the internet (a NAT gateway "
                                  "or a proxy route), so nodes pull images from public registries and the runner "
                                  "fetches Helm charts; false: only AWS APIs through the VPC endpoints, and only the "
                                  "region's private ECR, so an EKS platform there is refused naming every image and "
                                  "chart that would not pull")

    @model_validator(mode="after")
    def _distinct(self) -> ExistingVpc:
        ids = [*self.private_subnet_ids, *self.public_subnet_ids]
        if len(ids) != len(set(ids)):
            raise ValueError("a subnet id is listed twice (private and public subnets are distinct)")
        return self


class SpotPolicy(str, Enum):
    ALLOWED = "allowed"
    FORBIDDEN = "forbidden"


class SystemNodesSpec(ClosedModel):
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


#: An AWS account id.
ACCOUNT_ID = r"^[0-9]{12}$"


class AccessSpec(ClosedModel):
    """Who may administer the clusters (EKS access entries, API authentication mode), and the account they run in:
    every role is the platforms' account's unless `other_account_ids` names its account (a cross-account admin is a
    decision, not a typo)."""

    account_id: str | None = Field(default=None, pattern=ACCOUNT_ID, description="the AWS account the platforms are "
                                   "deployed in (checked against the deploying identity at `pulumi up`); required "
                                   "with any role")
    admin_role_arns: list[Annotated[str, Field(pattern=IAM_ROLE_ARN)]] = Field(
        default_factory=list, max_length=20, description="IAM roles given cluster admin (AmazonEKSClusterAdminPolicy)")
    deployer_role_arn: str | None = Field(default=None, pattern=IAM_ROLE_ARN,
                                          description="the CI role that runs `pulumi up` for service stacks")
    other_account_ids: list[Annotated[str, Field(pattern=ACCOUNT_ID)]] = Field(
        default_factory=list, max_length=10, description="other accounts whose roles may be admins or the deployer")

    @model_validator(mode="after")
    def _roles_in_the_account(self) -> AccessSpec:
        roles = [*self.admin_role_arns, *([self.deployer_role_arn] if self.deployer_role_arn else [])]
        if roles and self.account_id is None:
            raise ValueError("access.account_id is required with admin or deployer roles: give the account the "
                             "platforms are deployed in, so a role of another account is not given cluster admin "
                             "by a typo")
        allowed = {self.account_id, *self.other_account_ids}
        foreign = [arn for arn in roles if arn.split(":")[4] not in allowed]
        if foreign:
            raise ValueError(f"{foreign[0]} is in account {foreign[0].split(':')[4]}, not the platforms' account "
                             f"{self.account_id}; use a role of that account, or name the other account in "
                             "access.other_account_ids if cluster admin across accounts is meant")
        return self


class ReceiverKind(str, Enum):
    """Alertmanager receivers a platform can page through; the URL (or PagerDuty routing key) is a secret."""

    SLACK = "slack"
    PAGERDUTY = "pagerduty"
    WEBHOOK = "webhook"


#: The platform stack's secret config key holding the receiver's URL (Slack incoming webhook, webhook endpoint) or
#: PagerDuty Events API v2 routing key: `pulumi config set --secret servingblueprints:alertReceiverUrl ...`.
ALERT_RECEIVER_SECRET_KEY = "servingblueprints:alertReceiverUrl"


SNS_TOPIC_ARN = r"^arn:aws(-cn|-us-gov)?:sns:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]{1,256}$"


class AlertingSpec(ClosedModel):
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


#: A new VPC's IPv4 CIDR: /16 to /20 (pods take VPC addresses: a /20 still gives three zones a /22 each).
VPC_CIDR = describe_pattern(
    r"^((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])/(1[6-9]|20)$",
    "an IPv4 CIDR of /16 to /20 such as 10.0.0.0/16 (no leading zeros)")
#: A new VPC's address space, with its host bits zero (`ipaddress` refuses 10.30.5.0/16 when the subnets are cut).
VpcCidr = Annotated[str, Field(max_length=18, pattern=VPC_CIDR), AfterValidator(ipv4_cidr)]


def _service_cidr(value: str) -> str:
    from blueprints.catalog.cluster_network import service_cidr_problem

    problem = service_cidr_problem(value)
    if problem:
        raise ValueError(problem)
    return value


#: A cluster's Kubernetes Service CIDR (EKS serviceIpv4Cidr): an RFC 1918 network of /12 to /24
#: (`blueprints/catalog/cluster_network.yaml`).
SERVICE_CIDR = describe_pattern(
    r"^((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])/(1[2-9]|2[0-4])$",
    "an IPv4 CIDR of /12 to /24 such as 172.20.0.0/16 (no leading zeros)")
ServiceCidr = Annotated[str, Field(max_length=18, pattern=SERVICE_CIDR), AfterValidator(ipv4_cidr),
                        AfterValidator(_service_cidr)]


#: Days CloudWatch Logs keeps a log group's events: the values PutRetentionPolicy accepts (CloudWatch Logs API
#: Reference, PutRetentionPolicy, `retentionInDays`).
LogRetentionDays = Literal[1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922,
                          3288, 3653]


class PlatformOverride(ClosedModel):
    """Settings of one named platform (`platforms.<name>` in platform.yaml).

    The posture (API endpoint access, secrets key, audit logs, VPC) is the platform team's: a service's plan never
    changes it. A service whose compliance the posture does not meet is refused when it is planned (set the posture
    here, or give such services a dedicated platform). `strictest_service_wins: true` opts a platform into taking the
    strictest compliance of the services landing on it as well.
    """

    environment: str | None = Field(default=None, pattern=DNS_1123_LABEL, max_length=20,
                                    description="its environment (policy config); required for a custom name")
    region: Region | None = Field(default=None, description="its region; required for a custom name")
    existing_vpc: ExistingVpc | None = Field(default=None, description="use this VPC instead of creating one")
    vpc_cidr: VpcCidr | None = Field(default=None, description="a new VPC's IPv4 CIDR, "
                                 "/16 to /20; give platforms whose networks are peered distinct ones. Default "
                                 "10.0.0.0/16")
    service_cidr: ServiceCidr | None = Field(default=None, description="the cluster's Kubernetes Service CIDR "
                                             "(EKS serviceIpv4Cidr), where every ClusterIP lies: /12 to /24, RFC "
                                             "1918, outside the VPC and peered_cidrs. Create-only: set it before the "
                                             "cluster exists (a change replaces the cluster). Default: what EKS "
                                             "chooses, 172.20.0.0/16 for a VPC in 10.0.0.0/8, else 10.100.0.0/16")
    peered_cidrs: Annotated[list[Cidr], UNIQUE, UNIQUE_ITEMS] = Field(
        default=[], max_length=40, description="networks routed to this platform's VPC (VPC peering, Transit "
        "Gateway, VPN, on-premises; another platform's vpc_cidr when their VPCs are peered): the Service CIDR must "
        "not overlap them, or pods could not reach them")
    private_endpoint: bool | None = Field(default=None, description="the EKS API is reachable only inside the VPC "
                                          "(needs existing_vpc and runner_label). Default false (public)")
    public_access_cidrs: Annotated[list[Cidr], UNIQUE, UNIQUE_ITEMS] = Field(
        default=[], max_length=40, description="who may reach a public EKS API endpoint (EKS "
        "vpcConfig.publicAccessCidrs). Default 0.0.0.0/0, which GitHub-hosted runners need")
    secrets_kms: bool | None = Field(default=None, description="Kubernetes secrets envelope-encrypted with a "
                                     "customer-managed KMS key. Default false")
    audit_logging: bool | None = Field(default=None, description="control-plane audit logs to CloudWatch. Default: "
                                       "what the environment's policy config requires (cluster-audit-logs)")
    audit_log_retention_days: LogRetentionDays | None = Field(default=None, description="days CloudWatch keeps the "
                                                              "control-plane logs (a value CloudWatch accepts). "
                                                              "Default: never expire")
    strictest_service_wins: bool = Field(default=False, description="opt in: the posture also takes the strictest "
                                         "compliance of the services landing here (private_only, "
                                         "customer_managed_kms, audit_logging), so a service's plan can change it")
    runner_label: str | None = Field(default=None, pattern=RUNNER_LABEL,
                                     description="self-hosted GitHub Actions runner (inside `existing_vpc`) that "
                                     "deploys a private platform and its services")
    alerting: AlertingSpec | None = Field(default=None, description="this platform's receiver, instead of the "
                                          "file's `alerting`")

    @model_validator(mode="after")
    def _posture_consistent(self) -> PlatformOverride:
        if self.vpc_cidr is not None and self.existing_vpc is not None:
            raise ValueError("vpc_cidr is a new VPC's address space; an existing_vpc keeps its own: remove one")
        if self.public_access_cidrs and self.private_endpoint:
            raise ValueError("public_access_cidrs restrict a public API endpoint; private_endpoint: true has none")
        if OPEN_INTERNET in self.public_access_cidrs and len(self.public_access_cidrs) > 1:
            raise ValueError(f"public_access_cidrs lists {OPEN_INTERNET} beside narrower ranges; list either the "
                             "open internet or your ranges")
        if self.audit_log_retention_days is not None and self.audit_logging is False:
            raise ValueError("audit_log_retention_days keeps audit logs, but audit_logging is false")
        problem = self.peered_cidrs_problem() or self.service_cidr_problem()
        if problem:
            raise ValueError(problem)
        return self

    def peered_cidrs_problem(self) -> str | None:
        """Why `peered_cidrs` cannot be networks routed to this VPC: one wider than /8 (0.0.0.0/0 is every address:
        no Service CIDR fits beside it) or one overlapping the platform's own new VPC (its own addresses are not a
        peer's); None when they can."""
        import ipaddress

        from blueprints.core import defaults

        own = ipaddress.ip_network(self.vpc_cidr or defaults.VPC_CIDR) if self.existing_vpc is None else None
        for cidr in self.peered_cidrs:
            net = ipaddress.ip_network(cidr)
            if net.prefixlen < 8:
                return (f"peered_cidrs {cidr} is wider than /8: a peered network is a routed range such as "
                        "10.40.0.0/16, not every address; list the networks peered with this VPC")
            if own is not None and net.overlaps(own):
                return (f"peered_cidrs {cidr} overlaps the platform's own VPC {own}: peered networks are other "
                        "networks (a VPC peering cannot join overlapping ranges); remove it or give its range")
        return None

    def service_cidr_problem(self) -> str | None:
        """Why the platform's Service CIDR (`service_cidr`, or EKS's default for a new VPC) overlaps its VPC or a
        peered network, naming both ranges and the field; None when it does not. An existing VPC's CIDR blocks are
        read from AWS at deploy time (EKS refuses an overlap then)."""
        from blueprints.catalog.cluster_network import eks_default_service_cidr, overlapping
        from blueprints.core import defaults

        vpc = [] if self.existing_vpc is not None else [self.vpc_cidr or defaults.VPC_CIDR]
        if self.service_cidr is None and not vpc:
            return None
        cidr = self.service_cidr or eks_default_service_cidr(vpc)
        what = (f"service_cidr {cidr}" if self.service_cidr else
                f"the default service_cidr {cidr} (what EKS chooses for VPC {vpc[0]})")
        for field, ranges in (("vpc_cidr", vpc), ("peered_cidrs", self.peered_cidrs)):
            hit = overlapping(cidr, ranges)
            if hit:
                return (f"{what} overlaps {field} {hit[0]}: ClusterIPs would shadow those addresses for every pod; "
                        f"set service_cidr to an RFC 1918 /12-/24 range outside {', '.join([*vpc, *self.peered_cidrs])}")
        return None


class PlatformRequirements(ClosedModel):
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
    provider_settings: dict[Annotated[str, Field(pattern=PROVIDER_SETTING_KEY, max_length=104)], JsonValue] = Field(
        default_factory=dict, max_length=20, description="provider config keys (`aws:profile`, `kubernetes:context`) "
        "every stack config may hold, each with the only value allowed; any other provider setting in a stack config "
        "is refused by the preview (`aws:region` is the plan's; credentials never go here)")

    @field_validator("provider_settings")
    @classmethod
    def _reviewable_provider_settings(cls, value: dict[str, JsonValue]) -> dict[str, JsonValue]:
        for key, setting in value.items():
            if key.split(":", 1)[0] == "servingblueprints":
                raise ValueError(f"provider_settings.{key}: the project's own keys are the plan's and the program's; "
                                 "declare provider settings only (aws:*, kubernetes:*)")
            if key in PLANNED_PROVIDER_SETTINGS:
                raise ValueError(f"provider_settings.{key}: the plan writes {key} (the platform's region); remove it")
            if CREDENTIAL_SETTING.search(key.split(":", 1)[1]):
                raise ValueError(f"provider_settings.{key}: carries credentials, which never go in a repository file "
                                 "in plain text; deploy with a role (access.deployer_role_arn) instead")
            if isinstance(setting, dict) and set(setting) == {"secure"}:
                raise ValueError(f"provider_settings.{key}: a `secure:` value cannot be reviewed; declare plain values")
            if len(json.dumps(setting)) > MAX_PROVIDER_SETTING_CHARS:
                raise ValueError(f"provider_settings.{key}: longer than {MAX_PROVIDER_SETTING_CHARS} characters as "
                                 "JSON")
        return value

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
        raise RequirementsError(format_validation_error(exc, source=path, data=data,
                                                        model=PlatformRequirements)) from None
