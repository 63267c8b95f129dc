"""What every deployability check reads (`blueprints.review.deployability.checks`): the registered resources' dependency graph,
the add-ons installed in the stack, by its platform or declared for its cluster, the stack config, and the helpers
that read Kubernetes objects (resource type tokens, pod specs and their containers, the name a finding gives).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from blueprints.catalog.addons import PlatformCatalog, load_platform_catalog
from blueprints.review.preview import PreviewReport, RegisteredResource
from blueprints.contracts.stackconfig import (
    CLUSTER_ADDONS_KEY, cluster_addons_of, stack_config_entries, stack_config_path,
)
from blueprints.core.yamlio import load_yaml
from blueprints.core.errors import StackConfigError, read_text_file



RELEASE = "kubernetes:helm.sh/v3:Release"


NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"


NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"


NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"


NAMESPACE = "kubernetes:core/v1:Namespace"


SCALED_OBJECT = "kubernetes:keda.sh/v1alpha1:ScaledObject"


HPA_TYPES = ("kubernetes:autoscaling/v2:HorizontalPodAutoscaler", "kubernetes:autoscaling/v1:HorizontalPodAutoscaler")


#: Where each workload type keeps its pod template.
POD_TEMPLATES: dict[str, tuple[str, ...]] = {
    "kubernetes:apps/v1:Deployment": ("spec", "template"),
    "kubernetes:apps/v1:StatefulSet": ("spec", "template"),
    "kubernetes:apps/v1:DaemonSet": ("spec", "template"),
    "kubernetes:batch/v1:Job": ("spec", "template"),
    "kubernetes:core/v1:Pod": (),
}


#: API groups built into Kubernetes (no CRD needed).
BUILT_IN_GROUPS = {"core", "apps", "batch", "policy", "autoscaling", "networking.k8s.io", "rbac.authorization.k8s.io",
                   "storage.k8s.io", "apiextensions.k8s.io", "admissionregistration.k8s.io", "coordination.k8s.io",
                   "scheduling.k8s.io", "node.k8s.io", "discovery.k8s.io", "certificates.k8s.io",
                   "flowcontrol.apiserver.k8s.io", "apiregistration.k8s.io", "helm.sh", "yaml", "kustomize"}


GPU = "nvidia.com/gpu"


POOL_LABEL = "servingblueprints.io/pool"


INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"


ARCH_LABEL = "kubernetes.io/arch"


def get_in(obj: Any, *path: str) -> Any:
    for key in path:
        obj = obj.get(key) if isinstance(obj, Mapping) else None
    return obj


def list_of(value: Any) -> list:
    return list(value) if isinstance(value, list) else []


def type_token(api_version: str, kind: str) -> str:
    """`v1`, `Service` -> `kubernetes:core/v1:Service`; `keda.sh/v1alpha1`, `ScaledObject` ->
    `kubernetes:keda.sh/v1alpha1:ScaledObject`."""
    return f"kubernetes:{api_version if '/' in api_version else 'core/' + api_version}:{kind}"


def crd_of(record: RegisteredResource) -> str | None:
    """`group/Kind` of a custom resource (a kind no built-in API group serves), else None."""
    if not record.type.startswith("kubernetes:") or record.type.startswith("kubernetes:helm.sh/"):
        return None
    group_version, kind = record.type.removeprefix("kubernetes:").rsplit(":", 1)
    group = group_version.split("/")[0]
    return None if group in BUILT_IN_GROUPS else f"{group}/{kind}"


def named(record: RegisteredResource) -> str:
    """A resource as a finding names it: its kind and name, e.g. `Deployment 'chat-assistant'`."""
    name = get_in(record.inputs, "metadata", "name") or record.name
    return f"{record.type.rsplit(':', 1)[-1]} '{name}'"


@dataclass
class DependencyGraph:
    """Who depends on whom: a resource's dependencies, inputs and provider, transitively."""

    records: list[RegisteredResource]
    by_urn: dict[str, RegisteredResource] = field(init=False)

    def __post_init__(self) -> None:
        self.by_urn = {r.urn: r for r in self.records}

    def closure(self, record: RegisteredResource) -> set[str]:
        seen: set[str] = set()
        todo = [record]
        while todo:
            current = todo.pop()
            edges = list(current.dependencies) + ([current.provider.rsplit("::", 1)[0]] if current.provider else [])
            for urn in edges:
                if urn not in seen:
                    seen.add(urn)
                    if urn in self.by_urn:
                        todo.append(self.by_urn[urn])
        return seen


@dataclass
class CheckContext:
    report: PreviewReport
    pcat: PlatformCatalog
    graph: DependencyGraph
    releases: dict[str, RegisteredResource]       # in-stack add-on id -> its (main) release
    crd_releases: dict[str, RegisteredResource]   # in-stack add-on id -> its CRD chart's release
    external: dict[str, str]                      # add-on id -> where it comes from (the platform / clusterAddons)
    where: str                                    # what to change for a missing add-on; `{addon}` names it
    config: dict[str, Any]                        # the stack config's `config:` map, as the Pulumi CLI reads it

    def fix(self, addon_id: str) -> str:
        """Where to add a missing add-on, for a finding's message."""
        return self.where.replace("{addon}", addon_id)

    def provides(self, record: RegisteredResource, addon_id: str) -> bool:
        """The add-on is in place before `record`: external, or an in-stack release `record` depends on."""
        if addon_id in self.external:
            return True
        closure = self.graph.closure(record)
        return any(r.urn in closure for r in (self.releases.get(addon_id), self.crd_releases.get(addon_id)) if r)


def check_context(report: PreviewReport, stacks_dir: Path) -> CheckContext:
    pcat = load_platform_catalog()
    by_release = {a.release: a.id for a in pcat.helm.values()}
    by_crd_release = {f"{a.release}-crd": a.id for a in pcat.helm.values() if a.crd_chart}
    releases, crd_releases = {}, {}
    for r in report.resources:
        if r.type == RELEASE:
            name = r.inputs.get("name")
            if name in by_release:
                releases[by_release[name]] = r
            elif name in by_crd_release:
                crd_releases[by_crd_release[name]] = r
    path = stack_config_path(stacks_dir, report.stack)
    text = read_text_file(path, StackConfigError, "stack config") if path.exists() else ""
    config = {key: entry.value for key, entry in stack_config_entries(load_yaml(text), path, text).items()}
    external: dict[str, str] = {}
    where = "this stack"
    if report.platform is not None:
        external = {a.id: f"platform {report.platform.stack}" for a in report.platform.addons}
        where = (f"the platform {report.platform.stack}: re-plan it (`blueprint plan` of any service on it installs "
                 "the add-ons its services need; platform.yaml's addon_versions.{addon} only pins that add-on's chart "
                 "version)")
    elif not report.is_platform and report.blueprint.platform.kind in ("existing-cluster", "edge-cluster"):
        declared = cluster_addons_of(path) if path.exists() else None
        external = {a: CLUSTER_ADDONS_KEY for a in declared or []}
        where = (f"{CLUSTER_ADDONS_KEY} in {path} (declare what the existing cluster runs, e.g. with "
                 "operations.cluster_addons in the requirements, after installing it)")
    return CheckContext(report=report, pcat=pcat, graph=DependencyGraph(report.resources), releases=releases,
                    crd_releases=crd_releases, external=external, where=where, config=config)


def pod_spec(record: RegisteredResource) -> Mapping[str, Any] | None:
    path = POD_TEMPLATES.get(record.type)
    if path is None:
        return None
    template = get_in(record.inputs, *path) if path else record.inputs
    spec = get_in(template, "spec")
    return spec if isinstance(spec, Mapping) else None


def containers_of(spec: Mapping[str, Any], *keys: str) -> list[Mapping[str, Any]]:
    return [c for key in keys or ("initContainers", "containers") for c in list_of(spec.get(key))
            if isinstance(c, Mapping)]
