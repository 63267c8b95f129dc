"""Deployability, proven offline: what a real `pulumi up` needs that Pulumi's mock engine never checks.

The mock engine accepts any resource the SDK signatures accept. These checks read what the program registered (with
each resource's dependencies) and the catalog's facts about the add-ons (`blueprints/catalog/addons.yaml`: the CRDs
each installs, the objects its webhooks guard, its per-node DaemonSets, its Pod Security level), and report:

- `addon-installed`: every custom resource's CRD, and every controller an object needs (a LoadBalancer Service's
  load balancer controller, a CPU HPA's metrics-server, a GPU pod's device plugin), is installed by a Helm release
  the object depends on (transitively) in this stack, or by the platform the service lands on, or is declared in
  an existing cluster's `servingblueprints:clusterAddons`;
- `webhook-ready`: an object guarded by a webhook of an add-on this stack installs depends on that add-on's release;
- `schedulable`: every workload's pods match a NodePool or node group (node selector, taints) and fit its nodes'
  allocatable resources after the DaemonSets every node runs;
- `node-pool-arch`: every instance type a NodePool allows has an architecture its `kubernetes.io/arch` requirement
  admits and its node class's AMI alias resolves;
- `node-pool-limits`: a NodePool's limits hold the nodes (their capacity, as Karpenter counts) the autoscaler's maximum
  replicas plus the rollout surge need;
- `pod-security`: every pod is admitted by its namespace's Pod Security level (kubernetes.io Pod Security Standards);
- `prometheus-address`: a KEDA Prometheus trigger queries the Prometheus the platform (or cluster) runs;
- `kubernetes-upgrade` (with a baseline, `check_kubernetes_upgrade`): a platform's EKS cluster neither goes back a
  Kubernetes version nor skips a minor one (EKS cannot do either).

Each finding names the resource and the fix; any finding makes `blueprint preview` exit 1.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from kubernetes.utils.quantity import parse_quantity

from blueprints import defaults
from blueprints.catalog import InstanceType, load_catalog
from blueprints.catalog.addons import KUBERNETES_VERSION, PlatformCatalog, load_platform_catalog
from blueprints.edge import EDGE_NODE, OwnedNodeShape
from blueprints.platform import NODE_ARCH, kubernetes_upgrade_problem, planned_outputs
from blueprints.requirements_platform import CpuArch
from blueprints.preview import DeployabilityFinding, PreviewReport, RegisteredResource
from blueprints.stackconfig import CLUSTER_ADDONS_KEY, PROJECT, cluster_addons_of, stack_config_path
from blueprints.weights import usable_disk_gib
from blueprints.yamlio import load_yaml

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
#: Pod Security Standards (kubernetes.io/docs/concepts/security/pod-security-standards): capabilities baseline
#: allows to add, volume types restricted allows, and the levels from least to most strict.
BASELINE_CAPABILITIES = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                         "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}
RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                      "projected", "secret"}
LEVELS = ("privileged", "baseline", "restricted")


def _get(obj: Any, *path: str) -> Any:
    for key in path:
        obj = obj.get(key) if isinstance(obj, Mapping) else None
    return obj


def _items(value: Any) -> list:
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


def _name(record: RegisteredResource) -> str:
    name = _get(record.inputs, "metadata", "name") or record.name
    return f"{record.type.rsplit(':', 1)[-1]} '{name}'"


@dataclass
class _Graph:
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
class _Context:
    report: PreviewReport
    pcat: PlatformCatalog
    graph: _Graph
    releases: dict[str, RegisteredResource]       # in-stack add-on id -> its (main) release
    crd_releases: dict[str, RegisteredResource]   # in-stack add-on id -> its CRD chart's release
    external: dict[str, str]                      # add-on id -> where it comes from (the platform / clusterAddons)
    where: str                                    # what to change for a missing add-on; `{addon}` names it
    config: dict[str, Any]                        # the stack config's `config:` map

    def fix(self, addon_id: str) -> str:
        """Where to add a missing add-on, for a finding's message."""
        return self.where.replace("{addon}", addon_id)

    def provides(self, record: RegisteredResource, addon_id: str) -> bool:
        """The add-on is in place before `record`: external, or an in-stack release `record` depends on."""
        if addon_id in self.external:
            return True
        closure = self.graph.closure(record)
        return any(r.urn in closure for r in (self.releases.get(addon_id), self.crd_releases.get(addon_id)) if r)


def _context(report: PreviewReport, stacks_dir: Path) -> _Context:
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
    config = (load_yaml(path.read_text(encoding="utf-8")) or {}).get("config") or {} if path.exists() else {}
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
    return _Context(report=report, pcat=pcat, graph=_Graph(report.resources), releases=releases,
                    crd_releases=crd_releases, external=external, where=where, config=config)


# --- add-ons, CRDs, webhooks ---------------------------------------------------------------------------------------


def _pod_spec(record: RegisteredResource) -> Mapping[str, Any] | None:
    path = POD_TEMPLATES.get(record.type)
    if path is None:
        return None
    template = _get(record.inputs, *path) if path else record.inputs
    spec = _get(template, "spec")
    return spec if isinstance(spec, Mapping) else None


def _containers(spec: Mapping[str, Any], *keys: str) -> list[Mapping[str, Any]]:
    return [c for key in keys or ("initContainers", "containers") for c in _items(spec.get(key))
            if isinstance(c, Mapping)]


def needed_addons(record: RegisteredResource, pcat: PlatformCatalog) -> list[tuple[str, str]]:
    """(add-on id, why) for everything `record` needs installed first; an id of `?` when no catalogued add-on
    installs its CRD, `?class` when none serves an Ingress's class; `a|b` when any one of those add-ons will do (a
    LoadBalancer Service off AWS: metallb)."""
    needs: list[tuple[str, str]] = []
    crd = crd_of(record)
    if crd is not None:
        owner = pcat.crd_owner(crd)
        needs.append((owner.id if owner else "?", f"its CRD {crd}"))
    if record.type == RELEASE:
        addon = next((a for a in pcat.helm.values() if a.release == record.inputs.get("name")), None)
        if addon is not None:
            needs += [(n, f"add-on {n} (chart {addon.chart} needs it)") for n in addon.needs]
            needs += [(pcat.crd_owner(c).id, f"the CRD {c} its chart renders")  # type: ignore[union-attr]
                      for c in addon.needs_crds]
    if record.type in ("kubernetes:core/v1:Service",) and _get(record.inputs, "spec", "type") == "LoadBalancer":
        annotations = _get(record.inputs, "metadata", "annotations") or {}
        if any(str(k).startswith("service.beta.kubernetes.io/aws-load-balancer-") for k in annotations):
            needs.append(("aws-load-balancer-controller", "a LoadBalancer Service becomes an NLB through it"))
        else:
            options = "|".join(a.id for a in pcat.load_balancers() if not a.aws_only)
            needs.append((options, "a LoadBalancer Service without a cloud load balancer gets its address from it"))
    if record.type == "kubernetes:networking.k8s.io/v1:Ingress":
        cls = _get(record.inputs, "spec", "ingressClassName")
        if cls is None:  # the cluster's default IngressClass: any ingress controller
            needs.append(("|".join(a.id for a in pcat.ingress_controllers()), "an Ingress needs an ingress controller"))
        else:
            controller = next((a for a in pcat.ingress_controllers() if a.ingress_class == cls), None)
            needs.append((controller.id if controller else "?class",
                          f"it serves IngressClass {cls!r}" if controller else f"IngressClass {cls!r}"))
    if record.type in HPA_TYPES and any(_get(m, "type") == "Resource"
                                        for m in _items(_get(record.inputs, "spec", "metrics"))):
        needs.append(("metrics-server", "an HPA on CPU or memory reads the resource metrics API"))
    if record.type == SCALED_OBJECT and any(_get(t, "type") in ("cpu", "memory")
                                            for t in _items(_get(record.inputs, "spec", "triggers"))):
        needs.append(("metrics-server", "a cpu/memory trigger reads the resource metrics API"))
    spec = _pod_spec(record)
    if spec is not None and any(_get(c, "resources", "limits", GPU) for c in _containers(spec)):
        needs.append(("nvidia-device-plugin", "its pods request nvidia.com/gpu"))
    return needs


def _check_addons(ctx: _Context) -> list[DeployabilityFinding]:
    findings = []
    for record in ctx.report.resources:
        if record.read:
            continue
        for addon_id, why in needed_addons(record, ctx.pcat):
            if "|" in addon_id:  # any one of these implementations
                options = addon_id.split("|")
                if any(o in ctx.external or o in ctx.releases for o in options):
                    continue
                addon_id = options[0]
            if addon_id == "?":
                findings.append(DeployabilityFinding(
                    "addon-installed", record.urn, f"{_name(record)}: no add-on in blueprints/catalog/addons.yaml "
                    f"installs {why.removeprefix('its CRD ')}, so `pulumi up` fails with \"no matches for kind\"; "
                    "install its CRD first and add the add-on to the catalog"))
            elif addon_id == "?class":
                findings.append(DeployabilityFinding(
                    "addon-installed", record.urn, f"{_name(record)}: no add-on in blueprints/catalog/addons.yaml "
                    f"serves {why}, so no controller ever routes it; use the class of a declared ingress controller "
                    "(exposure.ingress_class_name) or add the controller to the catalog"))
            elif addon_id in ctx.releases or addon_id in ctx.crd_releases:
                if not ctx.provides(record, addon_id):
                    release = ctx.releases.get(addon_id) or ctx.crd_releases[addon_id]
                    findings.append(DeployabilityFinding(
                        "addon-installed", record.urn, f"{_name(record)} needs {why}, installed by release "
                        f"{release.inputs.get('name')!r} in this stack, but does not depend on it: it may be created "
                        f"first and fail; add depends_on=[that release]"))
            elif addon_id not in ctx.external:
                findings.append(DeployabilityFinding(
                    "addon-installed", record.urn, f"{_name(record)} needs add-on {addon_id} ({why}), which is "
                    f"not installed: add it to {ctx.fix(addon_id)}"))
    return findings


def _check_webhooks(ctx: _Context) -> list[DeployabilityFinding]:
    findings = []
    for addon_id, release in ctx.releases.items():
        guarded = {type_token(*ref.rsplit("/", 1)) for ref in ctx.pcat.helm[addon_id].webhooks}
        for record in ctx.report.resources:
            if record.type in guarded and release.urn not in ctx.graph.closure(record):
                findings.append(DeployabilityFinding(
                    "webhook-ready", record.urn, f"{_name(record)} is admitted by {addon_id}'s webhook, installed "
                    f"by release {release.inputs.get('name')!r} in this stack, but does not depend on it: created "
                    "before the webhook serves, it is rejected; add depends_on=[that release]"))
    return findings


# --- scheduling ----------------------------------------------------------------------------------------------------


@dataclass
class NodeSource:
    """Nodes a pod may land on: a Karpenter NodePool or a managed node group."""

    name: str
    labels: dict[str, set[str]]
    taints: list[dict[str, str]]
    instance_types: list[str]
    ephemeral_gib: dict[str, float]
    limits: dict[str, Any] | None = None
    record: RegisteredResource | None = None
    #: An edge cluster's owned nodes: their shape (not a catalog type) and how many there are.
    owned: OwnedNodeShape | None = None

    def shape(self, instance_type: str) -> InstanceType | None:
        """The node shape of one of its instance types (None when the catalog does not know it)."""
        return self.owned if self.owned is not None else load_catalog().ec2.get(instance_type)

    def selects(self, selector: Mapping[str, str]) -> bool:
        return all(value in self.labels.get(key, set()) for key, value in selector.items())


def _node_class_alias(name: str | None, ctx: _Context) -> str | None:
    """The `amiSelectorTerms` alias of a node class, in this stack or on the platform."""
    for r in ctx.report.resources:
        if r.type == NODE_CLASS and _get(r.inputs, "metadata", "name") == name:
            return next((t.get("alias") for t in _items(_get(r.inputs, "spec", "amiSelectorTerms")) if t.get("alias")),
                        None)
    platform = ctx.report.platform
    return next((nc.ami_alias for nc in (platform.node_classes if platform else []) if nc.name == name), None)


def _check_node_pool_arch(ctx: _Context) -> list[DeployabilityFinding]:
    """Every instance type a NodePool allows has an architecture its `kubernetes.io/arch` requirement admits and its
    node class's AMI alias resolves (Karpenter launches nothing it cannot match: the pods stay Pending)."""
    findings = []
    for r in ctx.report.resources:
        if r.type != NODE_POOL:
            continue
        template = _get(r.inputs, "spec", "template") or {}
        wanted = {req["key"]: set(req.get("values", [])) for req in _items(_get(template, "spec", "requirements"))
                  if req.get("operator") == "In"}
        alias = _node_class_alias(_get(template, "spec", "nodeClassRef", "name"), ctx)
        family = alias.split("@")[0] if alias else None
        for itype in sorted(wanted.get(INSTANCE_TYPE_LABEL, set())):
            inst = load_catalog().ec2.get(itype)
            if inst is None:
                continue
            arch = NODE_ARCH[CpuArch(inst.cpu_arch)]
            problem = None
            if ARCH_LABEL in wanted and arch not in wanted[ARCH_LABEL]:
                problem = (f"requires {ARCH_LABEL} In {sorted(wanted[ARCH_LABEL])} but {itype} is {arch}: Karpenter can "
                           f"never launch it; require {arch} (the instance type's architecture)")
            elif family in defaults.AMI_ALIAS_ARCHES and inst.cpu_arch not in defaults.AMI_ALIAS_ARCHES[family]:
                problem = (f"launches {itype} ({inst.cpu_arch}) with AMI alias {alias}, which has no {inst.cpu_arch} "
                           "AMI; use a node class whose alias resolves one")
            if problem:
                findings.append(DeployabilityFinding("node-pool-arch", r.urn, f"NodePool "
                                                     f"'{_get(r.inputs, 'metadata', 'name')}' {problem}"))
    return findings


def _node_class_storage(name: str | None, ctx: _Context) -> tuple[bool, int] | None:
    """(instance-store RAID0, root volume GiB) of a node class, in this stack or on the platform."""
    for r in ctx.report.resources:
        if r.type == NODE_CLASS and _get(r.inputs, "metadata", "name") == name:
            size = parse_quantity(_get(r.inputs, "spec", "blockDeviceMappings")[0]["ebs"]["volumeSize"])
            return _get(r.inputs, "spec", "instanceStorePolicy") == "RAID0", int(size / 2**30)
    platform = ctx.report.platform
    for nc in platform.node_classes if platform else []:
        if nc.name == name:
            return nc.instance_store_raid0, nc.root_volume_gib
    return None


def _node_sources(ctx: _Context) -> list[NodeSource]:
    sources = []
    for r in ctx.report.resources:
        if r.type == NODE_POOL:
            template = _get(r.inputs, "spec", "template") or {}
            labels = {k: {v} for k, v in (_get(template, "metadata", "labels") or {}).items()}
            for req in _items(_get(template, "spec", "requirements")):
                if req.get("operator") == "In":
                    labels.setdefault(req["key"], set()).update(req.get("values", []))
            types = sorted(labels.get(INSTANCE_TYPE_LABEL, set()))
            storage = _node_class_storage(_get(template, "spec", "nodeClassRef", "name"), ctx)
            sources.append(NodeSource(
                name=f"NodePool '{_get(r.inputs, 'metadata', 'name')}'", labels=labels,
                taints=_items(_get(template, "spec", "taints")), instance_types=types,
                ephemeral_gib={t: _ephemeral_gib(t, storage) for t in types}, limits=_get(r.inputs, "spec", "limits"),
                record=r))
        elif r.type == NODE_GROUP:
            types = list(r.inputs.get("instanceTypes") or [])
            labels = {k: {v} for k, v in (r.inputs.get("labels") or {}).items()}
            labels[INSTANCE_TYPE_LABEL] = set(types)
            taints = [{"key": t.get("key"), "value": t.get("value"), "effect": _effect(t.get("effect"))}
                      for t in _items(r.inputs.get("taints"))]
            reserve = defaults.SYSTEM_NODE_RESERVE_GIB if labels.get(POOL_LABEL) == {"system"} else \
                defaults.SERVING_NODE_ROOT_RESERVE_GIB
            usable = usable_disk_gib(float(r.inputs.get("diskSize") or 20), reserve_gib=reserve)
            sources.append(NodeSource(name=f"node group '{r.name}'", labels=labels, taints=taints,
                                      instance_types=types, ephemeral_gib={t: usable for t in types}))
    if not ctx.report.is_platform and ctx.report.blueprint.compute.owned_nodes is not None:
        c = ctx.report.blueprint.compute
        owned = OwnedNodeShape(instance_type=EDGE_NODE, gpu=None, gpu_count=0, vcpus=c.vcpus_per_node,
                               memory_gib=c.memory_gib_per_node, cpu_arch=c.cpu_arch.value, usd_per_hour=0.0,
                               gflops_per_vcpu=1.0, count=c.owned_nodes)
        sources.append(NodeSource(name=f"the edge cluster's {owned.describe()} (hardware.edge_nodes)",
                                  labels={ARCH_LABEL: {NODE_ARCH[c.cpu_arch]}}, taints=[],
                                  instance_types=[EDGE_NODE], ephemeral_gib={}, owned=owned))
    platform = ctx.report.platform
    if platform is not None and platform.kind.value == "eks":
        system = platform.system_nodes
        sources.append(NodeSource(
            name=f"{platform.stack}'s system node group",
            labels={**{k: {v} for k, v in planned_outputs(platform).system_node_labels.items()},
                    INSTANCE_TYPE_LABEL: {system.instance_type}},
            taints=[], instance_types=[system.instance_type],
            ephemeral_gib={system.instance_type: usable_disk_gib(system.disk_gib,
                                                                 reserve_gib=defaults.SYSTEM_NODE_RESERVE_GIB)}))
    return sources


def _effect(aws_effect: str | None) -> str:
    return {"NO_SCHEDULE": "NoSchedule", "NO_EXECUTE": "NoExecute", "PREFER_NO_SCHEDULE": "PreferNoSchedule"}.get(
        aws_effect or "", aws_effect or "")


def _ephemeral_gib(instance_type: str, storage: tuple[bool, int] | None) -> float:
    """Ephemeral storage pods can request on one node of a node class ((instance-store RAID0, root GiB)), GiB: its
    kubelet filesystem (the instance-store array, else the root volume) less the eviction threshold, kube-reserved,
    the serving image and, on the root volume, the OS (`blueprints.weights.usable_disk_gib`)."""
    if storage is None:
        return 0.0
    raid0, root = storage
    if raid0 and instance_type in defaults.INSTANCE_STORE_GB:
        return usable_disk_gib(defaults.INSTANCE_STORE_GB[instance_type] * 1e9 / 2**30,
                               reserve_gib=defaults.SERVING_NODE_RESERVE_GIB)
    return usable_disk_gib(root, reserve_gib=defaults.SERVING_NODE_ROOT_RESERVE_GIB)


def _tolerates(spec: Mapping[str, Any], taint: Mapping[str, str]) -> bool:
    if taint.get("effect") == "PreferNoSchedule":
        return True
    for tol in _items(spec.get("tolerations")):
        if tol.get("effect") not in (None, "", taint.get("effect")):
            continue
        if tol.get("operator") == "Exists" and tol.get("key") in (None, "", taint.get("key")):
            return True
        if tol.get("key") == taint.get("key") and tol.get("value") == taint.get("value"):
            return True
    return False


def pod_requests(spec: Mapping[str, Any]) -> dict[str, Decimal]:
    """A pod's effective requests, per resource, as the scheduler computes them (kubernetes.io/docs/concepts/workloads/
    pods/sidecar-containers, "Resource sharing within containers"): the larger of the app containers' sum plus every
    sidecar (an init container with `restartPolicy: Always`), and each other init container plus the sidecars started
    before it. A container's limit stands in for an unset request, as the API server defaults it."""

    def of(container: Mapping[str, Any]) -> dict[str, Decimal]:
        res = {**(_get(container, "resources", "limits") or {}), **(_get(container, "resources", "requests") or {})}
        return {k: parse_quantity(v) for k, v in res.items() if v is not None}

    def add(into: dict[str, Decimal], more: dict[str, Decimal]) -> dict[str, Decimal]:
        return {k: into.get(k, Decimal(0)) + more.get(k, Decimal(0)) for k in {*into, *more}}

    sidecars: dict[str, Decimal] = {}
    init_peak: dict[str, Decimal] = {}
    for c in _containers(spec, "initContainers"):
        if c.get("restartPolicy") == "Always":
            sidecars = add(sidecars, of(c))
        else:
            running = add(sidecars, of(c))
            init_peak = {k: max(init_peak.get(k, Decimal(0)), running.get(k, Decimal(0))) for k in {*init_peak, *running}}
    total = dict(sidecars)
    for c in _containers(spec, "containers"):
        total = add(total, of(c))
    return {k: max(total.get(k, Decimal(0)), init_peak.get(k, Decimal(0))) for k in {*total, *init_peak}}


def allocatable(instance_type: str | InstanceType, *, ephemeral_gib: float | None,
                daemonsets: Iterable[tuple[int, int]]) -> dict[str, Decimal]:
    """What pods can request on one node of `instance_type` (a catalog name, or a shape such as an edge cluster's
    owned node): capacity minus the hypervisor's share, kube-reserved, the eviction threshold and the per-node
    DaemonSets ((cpu_m, memory_mi) each), as Karpenter and the EKS AMI compute it (`defaults.VM_MEMORY_OVERHEAD_FRACTION`,
    `KUBE_RESERVED_*`; on an owned node the same formula errs on the safe side). Ephemeral storage is left out when
    unknown (None)."""
    inst = load_catalog().instance(instance_type) if isinstance(instance_type, str) else instance_type
    cores = inst.vcpus
    fractions = [*defaults.KUBE_RESERVED_CPU_FRACTIONS, *[defaults.KUBE_RESERVED_CPU_REST_FRACTION] * max(0, cores - 4)]
    reserved_cpu_m = sum(fractions[:cores]) * 1000
    ds = list(daemonsets)
    cpu_m = cores * 1000 - reserved_cpu_m - sum(c for c, _ in ds)
    memory_mi = (inst.memory_gib * 1024 * (1 - defaults.VM_MEMORY_OVERHEAD_FRACTION)
                 - defaults.KUBE_RESERVED_MEMORY_MIB_PER_POD * defaults.MAX_PODS_PER_NODE
                 - defaults.KUBE_RESERVED_MEMORY_BASE_MIB - defaults.EVICTION_MEMORY_MIB - sum(m for _, m in ds))
    have = {"cpu": Decimal(str(round(cpu_m))) / 1000, "memory": Decimal(str(round(memory_mi))) * 2**20,
            GPU: Decimal(inst.gpu_count)}
    if ephemeral_gib is not None:
        have["ephemeral-storage"] = Decimal(str(round(ephemeral_gib, 3))) * 2**30
    return have


def _daemonsets(ctx: _Context, *, gpu_node: bool) -> list[tuple[int, int]]:
    """(cpu_m, memory_mi) of every DaemonSet on a node: the EKS add-ons (not on an edge cluster) and the Helm
    add-ons of the platform or the cluster's declaration."""
    installed = set(ctx.releases) | {a for a in ctx.external if a in ctx.pcat.helm}
    if ctx.report.is_platform:
        installed |= {a.id for a in ctx.report.subject.addons}
    edge = not ctx.report.is_platform and ctx.report.blueprint.compute.owned_nodes is not None
    found = [] if edge else [a.daemonset for a in ctx.pcat.eks.values() if a.daemonset]
    found += [ctx.pcat.helm[a].daemonset for a in installed if ctx.pcat.helm[a].daemonset]
    return [(d.cpu_m, d.memory_mi) for d in found if d and (gpu_node or not d.gpu_nodes_only)]


def _fmt(resource: str, value: Decimal) -> str:
    if resource == "cpu":
        return f"{float(value):g} CPU"
    if resource in ("memory", "ephemeral-storage"):
        return f"{float(value) / 2**30:.1f} GiB {resource}"
    return f"{value} {resource}"


def _check_scheduling(ctx: _Context) -> list[DeployabilityFinding]:
    findings = []
    sources = _node_sources(ctx)
    if not sources:
        return []  # an existing cluster: its nodes are not ours to know
    for record in ctx.report.resources:
        spec = _pod_spec(record)
        if spec is None or record.type == "kubernetes:apps/v1:DaemonSet":
            continue
        selector = spec.get("nodeSelector") or {}
        matching = [s for s in sources if s.selects(selector)]
        placeable = [s for s in matching if all(_tolerates(spec, t) for t in s.taints
                                                if t.get("effect") in ("NoSchedule", "NoExecute"))]
        if not placeable:
            why = ("no NodePool or node group carries its nodeSelector " + repr(dict(selector)) if not matching else
                   f"{', '.join(s.name for s in matching)} taint(s) it does not tolerate: "
                   f"{[t.get('key') for s in matching for t in s.taints]}")
            findings.append(DeployabilityFinding(
                "schedulable", record.urn, f"{_name(record)}: its pods stay Pending: {why}; select a node pool's "
                "labels and tolerate its taints"))
            continue
        want = pod_requests(spec)
        fits = []
        for source in placeable:
            for itype in source.instance_types:
                shape = source.shape(itype)
                if shape is None:
                    continue
                have = allocatable(shape, ephemeral_gib=_ephemeral(source, itype),
                                   daemonsets=_daemonsets(ctx, gpu_node=shape.gpu_count > 0))
                short = [f"{_fmt(k, v)} > {_fmt(k, have.get(k, Decimal(0)))}" for k, v in want.items()
                         if k in have and v > have[k]]
                fits.append((source, itype, short))
        if fits and not any(not short for _, _, short in fits):
            detail = "; ".join(f"{s.name} {t}: {', '.join(short)}" for s, t, short in fits)
            findings.append(DeployabilityFinding(
                "schedulable", record.urn, f"{_name(record)}: its pods request more than a node can give after "
                f"kube-reserved, the per-node DaemonSets and, for disk, the kubelet's 10 % eviction threshold, the OS "
                f"and images ({detail}); lower the requests, use a larger instance type or a larger node volume"))
    return findings


def _ephemeral(source: NodeSource, instance_type: str) -> float | None:
    """A node's ephemeral storage, GiB; None when unknown (an edge cluster's owned nodes)."""
    return None if source.owned is not None else source.ephemeral_gib.get(instance_type, 0.0)


def _check_owned_nodes(ctx: _Context) -> list[DeployabilityFinding]:
    """An edge cluster's declared nodes hold the autoscaler's maximum replicas plus the rollout surge (its nodes
    cannot grow)."""
    findings = []
    owned = [s for s in _node_sources(ctx) if s.owned is not None]
    for record in ctx.report.resources:
        spec = _pod_spec(record)
        if record.type != "kubernetes:apps/v1:Deployment" or spec is None:
            continue
        peak = _scaler_max(ctx, record)
        want = pod_requests(spec)
        for source in (s for s in owned if s.selects(spec.get("nodeSelector") or {})):
            if peak is None:
                continue
            have = allocatable(source.owned, ephemeral_gib=None, daemonsets=_daemonsets(ctx, gpu_node=False))
            per_node = min([int(have[k] / v) for k, v in want.items() if k in have and v > 0],
                           default=defaults.MAX_PODS_PER_NODE)
            pods = peak + _surge(record, peak)
            need = math.ceil(pods / per_node) if per_node > 0 else math.inf
            if need > source.owned.count:
                findings.append(DeployabilityFinding(
                    "owned-nodes", record.urn, f"{_name(record)} may run {peak} replicas plus {pods - peak} surge, "
                    f"{per_node} per node after kube-reserved and the declared add-ons' DaemonSets, {need} node(s), "
                    f"but {source.name} counts {source.owned.count}: rollouts and scale-out stay Pending; add nodes "
                    "(hardware.edge_nodes.count) or lower the autoscaler's maximum (re-plan)"))
    return findings


def _scaler_max(ctx: _Context, workload: RegisteredResource) -> int | None:
    name = _get(workload.inputs, "metadata", "name")
    for r in ctx.report.resources:
        if r.type == SCALED_OBJECT and _get(r.inputs, "spec", "scaleTargetRef", "name") == name:
            return int(_get(r.inputs, "spec", "maxReplicaCount") or 100)
        if r.type in HPA_TYPES and _get(r.inputs, "spec", "scaleTargetRef", "name") == name:
            return int(_get(r.inputs, "spec", "maxReplicas"))
    replicas = _get(workload.inputs, "spec", "replicas")
    return int(replicas) if replicas is not None else None


def _surge(workload: RegisteredResource, replicas: int) -> int:
    surge = _get(workload.inputs, "spec", "strategy", "rollingUpdate", "maxSurge")
    if surge is None:
        return max(1, math.ceil(replicas * 0.25))  # Kubernetes' default maxSurge is 25 %
    if isinstance(surge, str) and surge.endswith("%"):
        return math.ceil(replicas * int(surge[:-1]) / 100)
    return int(surge)


def _pool_usage(ctx: _Context, pool: NodeSource, want: Mapping[str, Decimal],
                pods: int) -> tuple[str, dict[str, Decimal]] | None:
    """How `pods` pods requesting `want` count against `pool`'s limits: Karpenter sums the capacity of the nodes it
    launches, not the pods' requests, so (a description of the nodes, the capacity they add up to) on the instance
    type needing the fewest; None when no catalogued instance type of the pool fits one pod."""
    best = None
    for itype in pool.instance_types:
        inst = load_catalog().ec2.get(itype)
        if inst is None:
            continue
        have = allocatable(itype, ephemeral_gib=pool.ephemeral_gib.get(itype, 0.0),
                           daemonsets=_daemonsets(ctx, gpu_node=inst.gpu_count > 0))
        per_node = min([int(have[k] / v) for k, v in want.items() if k in have and v > 0],
                       default=defaults.MAX_PODS_PER_NODE)
        per_node = min(per_node, defaults.MAX_PODS_PER_NODE)
        if per_node < 1:
            continue
        nodes = math.ceil(pods / per_node)
        capacity = {"cpu": Decimal(inst.vcpus), "memory": Decimal(str(inst.memory_gib)) * 2**30,
                    "ephemeral-storage": Decimal(str(round(pool.ephemeral_gib.get(itype, 0.0), 3))) * 2**30,
                    GPU: Decimal(inst.gpu_count)}
        usage = {k: v * nodes for k, v in capacity.items()}
        if best is None or nodes < best[0]:
            best = (nodes, f"on {nodes} {itype} node(s), {per_node} per node", usage)
    return (best[1], best[2]) if best else None


def _check_node_pool_limits(ctx: _Context) -> list[DeployabilityFinding]:
    findings = []
    pools = [s for s in _node_sources(ctx) if s.record is not None and s.limits]
    for record in ctx.report.resources:
        spec = _pod_spec(record)
        if record.type != "kubernetes:apps/v1:Deployment" or spec is None:
            continue
        selector = spec.get("nodeSelector") or {}
        want = pod_requests(spec)
        peak = _scaler_max(ctx, record)
        for pool in (p for p in pools if p.selects(selector) and POOL_LABEL in selector):
            if peak is None:
                continue
            pods = peak + _surge(record, peak)
            usage = _pool_usage(ctx, pool, want, pods)
            for resource, limit in pool.limits.items():  # type: ignore[union-attr]
                if usage is not None and resource in usage[1]:
                    where, need = usage[0], usage[1][resource]
                else:  # a resource nodes do not report as capacity: the pods' requests
                    where, need = "", want.get(resource, Decimal(0)) * pods
                if need > parse_quantity(limit):
                    findings.append(DeployabilityFinding(
                        "node-pool-limits", pool.record.urn if pool.record else record.urn,  # type: ignore[union-attr]
                        f"{pool.name} limits {resource} to {limit} but {_name(record)} may run {peak} replicas plus "
                        f"{pods - peak} surge{' ' + where if where else ''}, {_fmt(resource, need)} in all: "
                        "scale-out and rollouts stall with Pending pods; raise the NodePool's limits (or lower the "
                        "autoscaler's maximum)"))
    return findings


# --- Pod Security ----------------------------------------------------------------------------------------------------


def pod_security_violations(spec: Mapping[str, Any], level: str) -> list[str]:
    """What the Pod Security Standards' `level` (baseline or restricted) rejects in a pod spec (empty: admitted)."""
    if level == "privileged":
        return []
    found = []
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(key):
            found.append(f"{key}: true")
    for volume in _items(spec.get("volumes")):
        if "hostPath" in volume:
            found.append(f"hostPath volume {volume.get('name')!r}")
        elif level == "restricted" and not (set(volume) - {"name"}) <= RESTRICTED_VOLUMES:
            found.append(f"volume {volume.get('name')!r} of type {sorted(set(volume) - {'name'})}")
    # The pod-level fields are checked on their own: a container's value does not excuse a bad pod-level one
    # (pod-security-admission policy/check_runAsUser.go, check_runAsNonRoot.go, check_seccompProfile_*.go).
    pod_sc = spec.get("securityContext") or {}
    pod_seccomp = _get(pod_sc, "seccompProfile", "type")
    if pod_seccomp == "Unconfined":
        found.append("pod runs seccomp Unconfined")
    if level == "restricted":
        if pod_sc.get("runAsNonRoot") is False:
            found.append("pod sets runAsNonRoot: false")
        if pod_sc.get("runAsUser") == 0:
            found.append("pod runs as UID 0")
    for c in _containers(spec):
        sc = c.get("securityContext") or {}
        name = c.get("name", "?")
        if sc.get("privileged"):
            found.append(f"container {name!r} is privileged")
        added = set(_get(sc, "capabilities", "add") or [])
        allowed_add = {"NET_BIND_SERVICE"} if level == "restricted" else BASELINE_CAPABILITIES
        if added - allowed_add:
            found.append(f"container {name!r} adds capabilities {sorted(added - allowed_add)}")
        if any(p.get("hostPort") for p in _items(c.get("ports"))):
            found.append(f"container {name!r} uses a hostPort")
        own_seccomp = _get(sc, "seccompProfile", "type")
        if own_seccomp == "Unconfined":
            found.append(f"container {name!r} runs seccomp Unconfined")
        if level != "restricted":
            continue
        if sc.get("allowPrivilegeEscalation") is not False:
            found.append(f"container {name!r} does not set allowPrivilegeEscalation: false")
        non_root = sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot"))
        if non_root is not True:
            found.append(f"container {name!r} does not set runAsNonRoot: true")
        if sc.get("runAsUser") == 0:
            found.append(f"container {name!r} runs as UID 0")
        seccomp = own_seccomp or pod_seccomp
        if seccomp not in ("RuntimeDefault", "Localhost"):
            found.append(f"container {name!r} has no seccompProfile RuntimeDefault")
        if "ALL" not in (_get(sc, "capabilities", "drop") or []):
            found.append(f"container {name!r} does not drop ALL capabilities")
    return found


def _namespace_levels(ctx: _Context) -> dict[str, str]:
    levels = {}
    for r in ctx.report.resources:
        if r.type == NAMESPACE:
            labels = _get(r.inputs, "metadata", "labels") or {}
            levels[_get(r.inputs, "metadata", "name")] = labels.get("pod-security.kubernetes.io/enforce",
                                                                    "privileged")
    return levels


def _check_pod_security(ctx: _Context) -> list[DeployabilityFinding]:
    findings = []
    levels = _namespace_levels(ctx)
    for record in ctx.report.resources:
        spec = _pod_spec(record)
        namespace = _get(record.inputs, "metadata", "namespace")
        level = levels.get(namespace, "privileged")
        if spec is None or level == "privileged":
            continue
        problems = pod_security_violations(spec, level)
        if problems:
            findings.append(DeployabilityFinding(
                "pod-security", record.urn, f"{_name(record)}: namespace {namespace!r} enforces Pod Security "
                f"{level!r}, which rejects its pods ({'; '.join(problems)}); fix the pod's securityContext or lower "
                "the namespace's level with a reason"))
    return findings


# --- KEDA's Prometheus ---------------------------------------------------------------------------------------------


def expected_prometheus(ctx: _Context) -> str | None:
    """The Prometheus server a KEDA trigger must query: the platform's, or the existing cluster's declared one."""
    if ctx.report.platform is not None:
        return planned_outputs(ctx.report.platform).prometheus_url
    declared = ctx.config.get(f"{PROJECT}:prometheusUrl")
    if declared:
        return declared
    if "kube-prometheus-stack" in ctx.external:
        return defaults.PROMETHEUS_URL
    return None


def _check_prometheus(ctx: _Context) -> list[DeployabilityFinding]:
    findings = []
    expected = expected_prometheus(ctx)
    for record in ctx.report.resources:
        if record.type != SCALED_OBJECT:
            continue
        for trigger in _items(_get(record.inputs, "spec", "triggers")):
            if trigger.get("type") != "prometheus":
                continue
            address = _get(trigger, "metadata", "serverAddress")
            if expected is None:
                findings.append(DeployabilityFinding(
                    "prometheus-address", record.urn, f"{_name(record)} queries Prometheus at {address}, but no "
                    f"Prometheus is installed or declared: add kube-prometheus-stack to {ctx.fix('kube-prometheus-stack')}, or set "
                    f"{PROJECT}:prometheusUrl"))
            elif address != expected:
                findings.append(DeployabilityFinding(
                    "prometheus-address", record.urn, f"{_name(record)} queries Prometheus at {address}, but the "
                    f"installed Prometheus serves {expected}: KEDA would read nothing and never scale; use that "
                    "address"))
    return findings


CHECKS = (_check_addons, _check_webhooks, _check_scheduling, _check_node_pool_arch, _check_node_pool_limits,
          _check_owned_nodes, _check_pod_security, _check_prometheus)


def check_deployability(report: PreviewReport, *, stacks_dir: Path = Path("stacks")) -> list[DeployabilityFinding]:
    """Every deployability finding of an offline preview (see the module docstring), in check order.

    Args:
        report: the offline preview (its records, the platform it lands on).
        stacks_dir: where the stack configs are (an existing cluster's `clusterAddons` is read from its file).
    """
    ctx = _context(report, stacks_dir)
    return [finding for check in CHECKS for finding in check(ctx)]


EKS_CLUSTER = "aws:eks/cluster:Cluster"


def check_kubernetes_upgrade(report: PreviewReport, baseline: Mapping[str, Any]) -> list[DeployabilityFinding]:
    """A platform's EKS cluster against the base branch's report (`plan.json`): its Kubernetes version may stay or go
    up one minor version, as EKS upgrades (`blueprints.platform.kubernetes_upgrade_problem`); a finding per cluster
    that would go down or skip a version, naming the fix."""
    before = {r.get("name"): (r.get("inputs") or {}).get("version") for r in baseline.get("resources", [])
              if isinstance(r, Mapping) and r.get("type") == EKS_CLUSTER}
    findings = []
    for r in report.resources:
        old, new = before.get(r.name), r.inputs.get("version")
        if r.type == EKS_CLUSTER and all(isinstance(v, str) and re.fullmatch(KUBERNETES_VERSION, v) for v in (old, new)):
            problem = kubernetes_upgrade_problem(old, new)
            if problem:
                findings.append(DeployabilityFinding("kubernetes-upgrade", r.urn, f"{_name(r)} (base branch: "
                                                     f"Kubernetes {old}): {problem}"))
    return findings
