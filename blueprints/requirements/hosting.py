"""Where and how a service runs: the `hardware` section (accelerators, instance families, CPU architecture, an
edge cluster's owned nodes), `operations` (managed or self-hosted, which cluster, its declared add-ons and Kubernetes
version, IAM Roles Anywhere on an edge cluster) and `compliance`. Every section is closed.
"""

from __future__ import annotations

import difflib
import re
from enum import Enum
from typing import Annotated, Any, get_args

from pydantic import AfterValidator, ConfigDict, Field, model_validator

from blueprints.catalog.engines import EngineName
from blueprints.core import bounds
from blueprints.core.errors import FieldProblem, describe_pattern, raise_problems
from blueprints.requirements.fields import (
    ACM_PCA_ARN, CERTIFICATE_CN, CatalogNames, DNS_1123_SUBDOMAIN, Region, Section, UNIQUE, UNIQUE_ITEMS, given,
    is_const, when,
)


#: Every engine the catalog knows, vLLM first (blueprints/catalog/engines.yaml).
ALL_ENGINES: tuple[str, ...] = get_args(EngineName)


class Accelerator(str, Enum):
    NVIDIA_GPU = "nvidia-gpu"
    CPU = "cpu"


class CpuArch(str, Enum):
    X86_64 = "x86_64"
    ARM64 = "arm64"


class OperationsPreference(str, Enum):
    MANAGED = "managed"
    SELF_HOSTED = "self-hosted"
    ANY = "any"


class Platform(str, Enum):
    """Where self-hosted archetypes run: the shared platform's EKS cluster, an existing (EKS or other) cluster whose
    add-ons are declared, or an edge cluster of owned nodes (no AWS load balancers, Pod Identity or EC2 prices)."""

    EKS = "eks"
    EXISTING_CLUSTER = "existing-cluster"
    EDGE_CLUSTER = "edge-cluster"


#: An instance family: the prefix of a type name (`g6e` of `g6e.12xlarge`).
INSTANCE_FAMILY = r"^[a-z][a-z0-9-]*$"


def _family_name(value: str) -> str:
    """`value` if it is an instance family of the catalog; ValueError naming the known families otherwise (a family
    the catalog lacks has no price, GPU or quota group to plan with, and would only surface later as a policy
    mismatch)."""
    if not re.fullmatch(INSTANCE_FAMILY[1:-1], value):
        raise ValueError(f"families are prefixes like `g6e` or `p5`, not instance types: {value!r}")
    known = _catalog_families()
    if value not in known:
        close = difflib.get_close_matches(value, known, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise ValueError(f"instance family {value!r} is not in the catalog{hint}; use one of the known families: "
                         f"{', '.join(known)} (blueprints/catalog/instances.yaml)")
    return value


def _catalog_families() -> tuple[str, ...]:
    """The instance families of the catalog (blueprints/catalog/instances.yaml), read when first needed."""
    from blueprints.catalog import load_catalog

    return load_catalog().families


class _FamilySchema:
    def __get_pydantic_json_schema__(self, core_schema: Any, handler: Any) -> dict:
        return {**handler(core_schema), "pattern": INSTANCE_FAMILY}


class EdgeNodes(Section):
    """The nodes an edge cluster gives this service: owned, all of one shape, CPU only (nothing to launch or price as
    EC2). The planner sizes replicas, vCPUs and ONNX Runtime threads per replica and replicas per node against this
    shape and refuses, naming the shortfall, when `count` nodes cannot carry the peak within the SLO."""

    count: int = Field(ge=1, le=bounds.MAX_REPLICAS, description="nodes the service may use (its replicas, plus one for a rolling "
                       "update, must fit on them)")
    vcpus: int = Field(ge=1, le=1024, description="vCPUs (hardware threads) per node")
    memory_gib: float = Field(gt=0, le=24_576, description="memory per node, GiB")
    cpu_arch: CpuArch = Field(description="the nodes' CPU architecture: x86_64 or arm64 (every image the service "
                              "runs must be built for it)")
    monthly_usd_per_node: float | None = Field(
        default=None, ge=0, le=1_000_000, description="what one node costs a month (amortised hardware, power, "
        "support), USD; the plan shows it as an owned-hardware line, never an EC2 price. Default: none (owned, $0)")
    gflops_per_vcpu: float | None = Field(
        default=None, gt=0, le=2000, description="effective FP32 GFLOP/s per vCPU of ONNX Runtime on these nodes (as "
        "measured); default: defaults.EDGE_CPU_GFLOPS_PER_VCPU for cpu_arch [assumption]")


class Hardware(Section):
    accelerators: Annotated[list[Accelerator], UNIQUE, UNIQUE_ITEMS] = Field(
        default=[Accelerator.NVIDIA_GPU, Accelerator.CPU], min_length=1, max_length=2,
        description="kinds of compute allowed")
    allowed_instance_families: Annotated[list[Annotated[str, Field(max_length=20), AfterValidator(_family_name),
                                                        _FamilySchema(), CatalogNames(_catalog_families)]],
                                         UNIQUE, UNIQUE_ITEMS] = Field(
        default=[], max_length=50, description="EC2 families allowed, e.g. [g6e, p5]; empty allows every family in "
        "the catalog")
    cpu_arch: CpuArch | None = Field(default=None, description="restrict CPU nodes to one architecture")
    edge_nodes: EdgeNodes | None = Field(default=None, description="operations.platform edge-cluster only: the owned "
                                         "nodes the service runs on")


def _platform_catalog():
    from blueprints.catalog.addons import load_platform_catalog

    return load_platform_catalog()


def _known_addon(value: str) -> str:
    known = _platform_catalog().helm
    if value not in known:
        raise ValueError(f"unknown add-on {value!r}; known: {', '.join(sorted(known))}")
    return value


def _known_version(value: str) -> str:
    known = _platform_catalog().versions
    if value not in known:
        raise ValueError(f"unknown Kubernetes version {value!r}; EKS versions in the catalog: {', '.join(known)}")
    return value


#: An add-on id of the platform catalog (blueprints/catalog/addons.yaml).
AddonId = Annotated[str, AfterValidator(_known_addon), CatalogNames(lambda: _platform_catalog().helm)]


#: An EKS Kubernetes version of the platform catalog (blueprints/catalog/kubernetes.yaml), e.g. `1.35`.
KubernetesVersion = Annotated[str, Field(pattern=describe_pattern(r"^1\.[0-9]{2}$", "a Kubernetes version such as "
                                                                  "1.35")), AfterValidator(_known_version),
                              CatalogNames(lambda: _platform_catalog().versions)]


class RolesAnywhere(Section):
    """IAM Roles Anywhere for an edge cluster's `s3://` sources: the stack creates a trust anchor (your CA), a profile
    and a role that may only read the models' source prefixes; each pod presents the certificate of a Secret you
    provide, through the AWS signing helper. No static keys."""

    acm_pca_arn: str | None = Field(default=None, pattern=ACM_PCA_ARN, description="the trust anchor's source: the ACM "
                                    "Private CA that issued the pods' certificate. Default: your own CA's PEM "
                                    "bundle in the stack config key servingblueprints:rolesAnywhereCaBundle")
    certificate_secret: str | None = Field(default=None, pattern=DNS_1123_SUBDOMAIN, max_length=253, description="the "
                                           "kubernetes.io/tls Secret (tls.crt, tls.key) in the service's namespace "
                                           "holding the pods' certificate; default `<service>-roles-anywhere`")
    certificate_common_name: str | None = Field(default=None, min_length=1, max_length=64, pattern=CERTIFICATE_CN,
                                                description="the certificate subject's CN the role trusts (IAM "
                                                "condition aws:PrincipalTag/x509Subject/CN); default the stack name "
                                                "`<service>-<environment>`")
    session_duration_s: int = Field(default=3600, ge=900, le=43_200, description="lifetime of the credentials a "
                                    "session vends, s (Roles Anywhere profile durationSeconds: 900-43200)")


class Operations(Section):
    model_config = ConfigDict(json_schema_extra={"allOf": [  # cluster-addons-existing-cluster
        when(given({"cluster_addons": "array"}),
             {"required": ["platform"], "properties": {"platform": {"enum": ["existing-cluster", "edge-cluster"]}}}),
        # roles-anywhere-edge-only
        when(given({"roles_anywhere": "object"}), is_const("platform", "edge-cluster"))]})
    preference: OperationsPreference = Field(default=OperationsPreference.ANY)
    platform: Platform = Field(default=Platform.EKS, description="where self-hosted archetypes run")
    kubernetes_version: KubernetesVersion | None = Field(
        default=None, description="Kubernetes version. On EKS the shared platform sets it "
        "(stacks/requirements/platform.yaml); a value here must match it. On an existing cluster: that cluster's "
        "version (default: the newest EKS version in standard support on the plan date)")

    cluster_addons: Annotated[list[AddonId], UNIQUE, UNIQUE_ITEMS] | None = Field(
        default=None, max_length=20, description="existing-cluster and edge-cluster: the add-ons that cluster already "
        "runs (catalog ids: karpenter, aws-load-balancer-controller, keda, keda-http-add-on, kube-prometheus-stack, "
        "metrics-server, nvidia-device-plugin, dcgm-exporter, ingress-nginx, traefik, metallb); written to the stack "
        "config as servingblueprints:clusterAddons and checked by `blueprint preview`. On an existing cluster "
        "`blueprint plan` refuses a plan needing one it does not list (blueprints.plan.cluster_addons). On an edge "
        "cluster they "
        "decide the scaling (a CPU HPA with metrics-server, else a fixed replica count), the monitoring objects "
        "(only with kube-prometheus-stack) and the exposure (an Ingress, a NodePort, or a LoadBalancer with "
        "metallb); default there: none")
    roles_anywhere: RolesAnywhere | None = Field(
        default=None, description="edge-cluster only: how pods read `s3://` sources (IAM Roles Anywhere); default "
        "settings when omitted")
    engines: Annotated[list[EngineName], UNIQUE, UNIQUE_ITEMS] = Field(
        default_factory=lambda: list(ALL_ENGINES), min_length=1, max_length=len(ALL_ENGINES),
        description="the LLM serving engines the self-hosted search may choose from (vllm, sglang, tensorrt-llm; "
        "blueprints/catalog/engines.yaml); each is sized with its own measured step tables and the cheapest that "
        "meets the SLO is planned, vLLM kept unless another is cheaper by more than engine_switch_threshold_pct. "
        "Default: all three. Hugging Face TGI is not offered: it is in maintenance mode upstream")
    engine_switch_threshold_pct: float = Field(
        default=10.0, ge=0, le=100, description="how much cheaper (percent of the monthly cost) another engine must "
        "be than vLLM's best option to be planned instead: the operational-simplicity premium of the default engine")

    @model_validator(mode="after")
    def _addons_only_on_existing_clusters(self) -> Operations:
        problems = []
        if self.cluster_addons is not None and self.platform is Platform.EKS:
            problems.append(FieldProblem("cluster_addons", "cluster_addons describes an existing or edge cluster "
                                         "(platform: existing-cluster or edge-cluster); on eks the shared platform "
                                         "installs the add-ons", rule="cluster-addons-existing-cluster"))
        if self.roles_anywhere is not None and self.platform is not Platform.EDGE_CLUSTER:
            problems.append(FieldProblem("roles_anywhere", "roles_anywhere gives an edge cluster's pods AWS "
                                         "credentials; on eks and existing EKS clusters pods use EKS Pod Identity: "
                                         "remove it or set platform: edge-cluster", rule="roles-anywhere-edge-only"))
        if self.platform is Platform.EDGE_CLUSTER:
            aws_only = [a for a in self.cluster_addons or [] if _platform_catalog().helm[a].aws_only]
            if aws_only:
                problems.append(FieldProblem("cluster_addons", f"{aws_only} run only on AWS (EKS, EC2 load balancers "
                                             "and nodes); an edge cluster cannot run them: remove them (metallb "
                                             "implements LoadBalancer Services on an edge cluster)",
                                             rule="edge-addons-not-aws-only"))
        raise_problems(problems)
        return self

    @property
    def declared_addons(self) -> list[str] | None:
        """The add-ons the cluster is declared to run: `cluster_addons`, none on an edge cluster that declares
        nothing; None when unknown (an existing cluster that declares nothing: the preview names what is missing)."""
        if self.cluster_addons is None and self.platform is Platform.EDGE_CLUSTER:
            return []
        return self.cluster_addons


class Compliance(Section):
    regions_allowed: Annotated[list[Region], UNIQUE, UNIQUE_ITEMS] = Field(
        default=[], max_length=20, description="AWS regions data may live in; empty allows any")
    private_only: bool = Field(default=False, description="no public endpoints or load balancers")
    customer_managed_kms: bool = Field(default=False, description="encrypt with a customer-managed KMS key")
    audit_logging: bool = Field(default=True, description="control-plane and access audit logs on")
