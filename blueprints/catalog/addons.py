"""Platform catalog: cluster add-ons (what each installs, provides and needs) and EKS Kubernetes versions.

Facts about the real charts and EKS live in `addons.yaml` and `kubernetes.yaml` beside this module, each with its
source. `load_platform_catalog()` reads them once per process; the planner (platform plans, version choice), the
components (chart, version, release name, namespace) and the offline deployability checks all read these records.
"""

from __future__ import annotations

import datetime as dt
from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from blueprints.catalog.files import read_catalog_file
from blueprints.core.errors import CatalogError

SCHEMA_VERSION = 1
#: `group/Kind` of a custom resource, e.g. `monitoring.coreos.com/ServiceMonitor`.
CRD_REF = r"^[a-z0-9.\-]+\.[a-z]+/[A-Z][A-Za-z0-9]*$"
#: `apiVersion/Kind` an admission webhook guards, e.g. `v1/Service`, `keda.sh/v1alpha1/ScaledObject`.
OBJECT_REF = r"^([a-z0-9.\-]+/)?v[0-9a-z]+/[A-Z][A-Za-z0-9]*$"
KUBERNETES_VERSION = r"^1\.\d{2}$"


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class DaemonSetRequests(_Record):
    """Per-node requests of an add-on's DaemonSet: what every node (or every GPU node) gives up before workloads."""

    name: str
    cpu_m: int = Field(ge=0, description="CPU request per node, millicores")
    memory_mi: int = Field(ge=0, description="memory request per node, MiB")
    gpu_nodes_only: bool = False


class HelmAddon(_Record):
    """A Helm chart the platform installs as `helm.v3.Release` named `release` in `namespace`."""

    id: str = Field(pattern=r"^[a-z0-9-]+$")
    description: str
    chart: str
    repository: str = Field(pattern=r"^(https://|oci://)")
    crd_chart: str | None = Field(default=None, description="installed first as its own release; the main chart "
                                  "then skips its CRDs (Karpenter: the main chart's crds/ are never upgraded)")
    versions: list[str] = Field(min_length=1, description="known chart versions; the first is the default")
    release: str = Field(pattern=r"^[a-z0-9-]+$", description="explicit Helm release name (no random suffix)")
    namespace: str
    needs: list[str] = Field(default_factory=list, description="add-on ids this one needs installed first")
    crds: list[str] = Field(default_factory=list)
    needs_crds: list[str] = Field(default_factory=list)
    webhooks: list[str] = Field(default_factory=list)
    kubernetes_max: str | None = Field(default=None, pattern=KUBERNETES_VERSION)
    pod_security: str = Field(pattern=r"^(privileged|baseline|restricted)$")
    daemonset: DaemonSetRequests | None = None
    endpoints: dict[str, str] = Field(default_factory=dict, description="in-cluster addresses its chart serves, "
                                      "name -> host:port (names as its docs use them)")
    aws_only: bool = Field(default=False, description="works only on AWS (EKS, EC2 nodes or load balancers): never "
                           "declared for an edge cluster")
    load_balancer: bool = Field(default=False, description="implements Services of type LoadBalancer")
    ingress_class: str | None = Field(default=None, description="the IngressClass it serves (Ingress "
                                      "`spec.ingressClassName`) at its chart's defaults")
    source_range_annotation: str | None = Field(default=None, description="the Ingress annotation with which it "
                                                "admits only listed client CIDRs (none: it cannot on a plain Ingress)")
    backend_h2c_app_protocol: str | None = Field(default=None, description="the Service port appProtocol with "
                                                 "which its proxy speaks HTTP/2 cleartext to a backend (else HTTP/1.1)")
    placement: dict[str, list[str]] = Field(default_factory=dict, description="its chart's pods that are no per-node "
                                            "DaemonSet -> the values paths (dotted) that set their nodeSelector, the "
                                            "first set one applying (the chart's `default` chain)")
    images: list[str] = Field(default_factory=list, description="`<registry>/<repository>` of every image its pods "
                              "run at the pinned chart version and the values the platform sets (tags follow the "
                              "chart)")
    hidden_on_eks: list[str] = Field(default_factory=list, description="its chart's values keys of components it "
                                     "scrapes by default that EKS does not expose (each `<key>.enabled: false` there)")
    source: str

    @property
    def default_version(self) -> str:
        return self.versions[0]


class EksAddon(_Record):
    """An EKS managed add-on (`aws.eks.Addon`) at the default version EKS picks for the cluster version."""

    id: str
    before_nodes: bool = Field(description="created before any node group (networking and identity agents)")
    pod_security: str = Field(pattern=r"^(privileged|baseline|restricted)$")
    daemonset: DaemonSetRequests | None = None
    placement: dict[str, list[str]] = Field(default_factory=dict, description="its pods that are no per-node "
                                            "DaemonSet -> the configuration values paths (dotted) that set their "
                                            "nodeSelector (`aws eks describe-addon-configuration`)")
    source: str


class KubernetesVersion(_Record):
    """One EKS Kubernetes version and its support window (dates unknown until AWS publishes them)."""

    version: str = Field(pattern=KUBERNETES_VERSION)
    released: dt.date | None
    end_of_standard: dt.date | None
    end_of_extended: dt.date | None

    def phase(self, on: dt.date) -> str:
        """`standard`, `extended`, `unsupported` or `unknown` (end dates not published) on a date."""
        if self.end_of_standard is None or self.end_of_extended is None:
            return "unknown"
        if on <= self.end_of_standard:
            return "standard"
        return "extended" if on <= self.end_of_extended else "unsupported"


class WorkloadFeature(_Record):
    """A Kubernetes API field the service workloads use, and the first version where it works by default."""

    id: str = Field(pattern=r"^[a-z0-9-]+$")
    field: str = Field(description="where it appears in a pod spec, e.g. containers[].lifecycle.preStop.sleep")
    min_version: str = Field(pattern=KUBERNETES_VERSION)
    used_when: Literal["always", "strict-zone-spread"] = Field(description="every self-hosted workload, or only "
                                                               "those spread strictly over zones")
    source: str


class _AddonFile(_Record):
    schema_version: int
    helm: list[HelmAddon]
    eks: list[EksAddon]


class _KubernetesFile(_Record):
    schema_version: int
    source: str
    standard_usd_per_hour: float = Field(ge=0)
    extended_usd_per_hour: float = Field(ge=0)
    warn_days_before_end: int = Field(ge=0)
    versions: list[KubernetesVersion] = Field(min_length=1)
    eks_refused_zone_ids: dict[str, list[str]] = Field(default_factory=dict)
    workload_features: list[WorkloadFeature] = Field(default_factory=list)


class PlatformCatalog(BaseModel):
    """Add-ons by id and EKS versions by name. Build with `load_platform_catalog()`."""

    model_config = ConfigDict(frozen=True)

    helm: dict[str, HelmAddon]
    eks: dict[str, EksAddon]
    versions: dict[str, KubernetesVersion]
    kubernetes_source: str
    standard_usd_per_hour: float
    extended_usd_per_hour: float
    warn_days_before_end: int
    workload_features: tuple[WorkloadFeature, ...] = ()
    #: Region -> Availability Zone IDs where EKS refuses cluster subnets (kubernetes.yaml, EKS network requirements).
    eks_refused_zone_ids: dict[str, tuple[str, ...]] = {}

    def addon(self, addon_id: str) -> HelmAddon:
        """The Helm add-on `addon_id`. Raises `CatalogError` listing the known ids."""
        try:
            return self.helm[addon_id]
        except KeyError:
            raise CatalogError(f"unknown add-on {addon_id!r}; known: {', '.join(sorted(self.helm))}") from None

    def version(self, version: str) -> KubernetesVersion:
        """The EKS Kubernetes version `version`. Raises `CatalogError` listing the known ones."""
        try:
            return self.versions[version]
        except KeyError:
            raise CatalogError(f"unknown Kubernetes version {version!r}; EKS versions in the catalog: "
                               f"{', '.join(self.versions)}") from None

    def load_balancers(self) -> list[HelmAddon]:
        """The add-ons that implement Services of type LoadBalancer."""
        return [a for a in self.helm.values() if a.load_balancer]

    def ingress_controllers(self) -> list[HelmAddon]:
        """The add-ons that serve an IngressClass."""
        return [a for a in self.helm.values() if a.ingress_class]

    def crd_owner(self, crd: str) -> HelmAddon | None:
        """The add-on whose chart installs `crd` (`group/Kind`), or None."""
        return next((a for a in self.helm.values() if crd in a.crds), None)

    def control_plane_usd_per_hour(self, version: str, on: dt.date) -> float:
        """The EKS control plane's hourly price for `version` on a date: the extended-support price once standard
        support has ended, else the standard price."""
        return self.extended_usd_per_hour if self.version(version).phase(on) in ("extended", "unsupported") \
            else self.standard_usd_per_hour


def _read(name: str, model: type[BaseModel]):
    return read_catalog_file(name, model, schema_version=SCHEMA_VERSION)


@lru_cache(maxsize=1)
def load_platform_catalog() -> PlatformCatalog:
    """Load and cross-check `addons.yaml` and `kubernetes.yaml`.

    Raises:
        CatalogError: a file is malformed, or an add-on needs an unknown add-on or a CRD no add-on installs.
    """
    addons = _read("addons.yaml", _AddonFile)
    kube = _read("kubernetes.yaml", _KubernetesFile)
    helm = {a.id: a for a in addons.helm}
    installed = {crd for a in addons.helm for crd in a.crds}
    for a in addons.helm:
        unknown = [n for n in a.needs if n not in helm]
        missing = [c for c in a.needs_crds if c not in installed]
        if unknown or missing:
            raise CatalogError(f"addons.yaml: {a.id} needs unknown add-on(s) {unknown} or CRD(s) {missing}")
    return PlatformCatalog(
        helm=helm, eks={a.id: a for a in addons.eks}, versions={v.version: v for v in kube.versions},
        kubernetes_source=kube.source, standard_usd_per_hour=kube.standard_usd_per_hour,
        extended_usd_per_hour=kube.extended_usd_per_hour, warn_days_before_end=kube.warn_days_before_end,
        workload_features=tuple(kube.workload_features),
        eks_refused_zone_ids={region: tuple(ids) for region, ids in kube.eks_refused_zone_ids.items()})
