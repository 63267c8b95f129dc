"""The nodes a pod may land on, as the scheduling checks see them (`blueprints.review.deployability.scheduling`):
NodePools, managed node groups, an edge cluster's owned nodes and the platform's system nodes with their labels,
taints, instance types and ephemeral storage; the DaemonSets every node runs, what a pod asks (its effective
requests) and the placement its manifest states, for the one placement model (`blueprints.contracts.placement`:
allocatable, replicas per node, nodes).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from kubernetes.utils.quantity import parse_quantity

from blueprints.core import defaults
from blueprints.catalog import InstanceType, load_catalog
from blueprints.contracts.placement import (
    DO_NOT_SCHEDULE, HOSTNAME_KEY, ZONE_KEY, Placement, Spread, daemonset_reserves, node_ephemeral_gib,
)
from blueprints.plan.owned_nodes import EDGE_NODE, OwnedNodeShape
from blueprints.requirements.platform_file import NODE_ARCH
from blueprints.contracts.platform import planned_outputs
from blueprints.review.preview import RegisteredResource
from blueprints.contracts.weights import usable_disk_gib
from blueprints.review.deployability.context import (
    ARCH_LABEL, CheckContext, INSTANCE_TYPE_LABEL, NODE_CLASS, NODE_GROUP, NODE_POOL, POOL_LABEL, containers_of,
    get_in, list_of,
)


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


def node_class_alias(name: str | None, ctx: CheckContext) -> str | None:
    """The `amiSelectorTerms` alias of a node class, in this stack or on the platform."""
    for r in ctx.report.resources:
        if r.type == NODE_CLASS and get_in(r.inputs, "metadata", "name") == name:
            terms = list_of(get_in(r.inputs, "spec", "amiSelectorTerms"))
            return next((t.get("alias") for t in terms if t.get("alias")), None)
    platform = ctx.report.platform
    return next((nc.ami_alias for nc in (platform.node_classes if platform else []) if nc.name == name), None)


def _node_class_storage(name: str | None, ctx: CheckContext) -> tuple[bool, int] | None:
    """(instance-store RAID0, root volume GiB) of a node class, in this stack or on the platform."""
    for r in ctx.report.resources:
        if r.type == NODE_CLASS and get_in(r.inputs, "metadata", "name") == name:
            size = parse_quantity(get_in(r.inputs, "spec", "blockDeviceMappings")[0]["ebs"]["volumeSize"])
            return get_in(r.inputs, "spec", "instanceStorePolicy") == "RAID0", int(size / 2**30)
    platform = ctx.report.platform
    for nc in platform.node_classes if platform else []:
        if nc.name == name:
            return nc.instance_store_raid0, nc.root_volume_gib
    return None


def node_sources(ctx: CheckContext) -> list[NodeSource]:
    sources = []
    for r in ctx.report.resources:
        if r.type == NODE_POOL:
            template = get_in(r.inputs, "spec", "template") or {}
            labels = {k: {v} for k, v in (get_in(template, "metadata", "labels") or {}).items()}
            for req in list_of(get_in(template, "spec", "requirements")):
                if req.get("operator") == "In":
                    labels.setdefault(req["key"], set()).update(req.get("values", []))
            types = sorted(labels.get(INSTANCE_TYPE_LABEL, set()))
            storage = _node_class_storage(get_in(template, "spec", "nodeClassRef", "name"), ctx)
            sources.append(NodeSource(
                name=f"NodePool '{get_in(r.inputs, 'metadata', 'name')}'", labels=labels,
                taints=list_of(get_in(template, "spec", "taints")), instance_types=types,
                ephemeral_gib={t: _ephemeral_gib(t, storage) for t in types}, limits=get_in(r.inputs, "spec", "limits"),
                record=r))
        elif r.type == NODE_GROUP:
            types = list(r.inputs.get("instanceTypes") or [])
            labels = {k: {v} for k, v in (r.inputs.get("labels") or {}).items()}
            labels[INSTANCE_TYPE_LABEL] = set(types)
            taints = [{"key": t.get("key"), "value": t.get("value"), "effect": _effect(t.get("effect"))}
                      for t in list_of(r.inputs.get("taints"))]
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
    """Ephemeral storage pods can request on one node of a node class ((instance-store RAID0, root GiB)), GiB
    (`blueprints.contracts.placement.node_ephemeral_gib`); 0 when the class is unknown."""
    if storage is None:
        return 0.0
    raid0, root = storage
    return node_ephemeral_gib(instance_type, instance_store_raid0=raid0, root_volume_gib=root)


def pod_requests(spec: Mapping[str, Any]) -> dict[str, Decimal]:
    """A pod's effective requests, per resource, as the scheduler computes them (kubernetes.io/docs/concepts/workloads/
    pods/sidecar-containers, "Resource sharing within containers"): the larger of the app containers' sum plus every
    sidecar (an init container with `restartPolicy: Always`), and each other init container plus the sidecars started
    before it. A container's limit stands in for an unset request, as the API server defaults it."""

    def of(container: Mapping[str, Any]) -> dict[str, Decimal]:
        res = {**(get_in(container, "resources", "limits") or {}), **(get_in(container, "resources", "requests") or {})}
        return {k: parse_quantity(v) for k, v in res.items() if v is not None}

    def add(into: dict[str, Decimal], more: dict[str, Decimal]) -> dict[str, Decimal]:
        return {k: into.get(k, Decimal(0)) + more.get(k, Decimal(0)) for k in {*into, *more}}

    sidecars: dict[str, Decimal] = {}
    init_peak: dict[str, Decimal] = {}
    for c in containers_of(spec, "initContainers"):
        if c.get("restartPolicy") == "Always":
            sidecars = add(sidecars, of(c))
        else:
            running = add(sidecars, of(c))
            init_peak = {k: max(init_peak.get(k, Decimal(0)), running.get(k, Decimal(0))) for k in {*init_peak, *running}}
    total = dict(sidecars)
    for c in containers_of(spec, "containers"):
        total = add(total, of(c))
    return {k: max(total.get(k, Decimal(0)), init_peak.get(k, Decimal(0))) for k in {*total, *init_peak}}


def node_daemonsets(ctx: CheckContext, *, gpu_node: bool) -> list[tuple[int, int]]:
    """(cpu_m, memory_mi) of every DaemonSet on a node (`blueprints.contracts.placement.daemonset_reserves`): the EKS
    add-ons (not on an edge cluster) and the Helm add-ons of this stack, the platform or the cluster's declaration."""
    installed = set(ctx.releases) | {a for a in ctx.external if a in ctx.pcat.helm}
    if ctx.report.is_platform:
        installed |= {a.id for a in ctx.report.subject.addons}
    edge = not ctx.report.is_platform and ctx.report.blueprint.compute.owned_nodes is not None
    return daemonset_reserves(ctx.pcat, installed, gpu_node=gpu_node, eks_addons=not edge)


def manifest_placement(spec: Mapping[str, Any], *, per_node: int, zones: int) -> Placement:
    """A pod spec's placement as its manifest states it: `per_node` replicas to a node, the node pool over `zones`
    zones, and the topology spread constraints it carries (zone and hostname keys; others do not change the count)."""
    spreads = []
    for c in list_of(spec.get("topologySpreadConstraints")):
        key = c.get("topologyKey")
        if key in (ZONE_KEY, HOSTNAME_KEY):
            domains = c.get("minDomains")
            spreads.append(Spread(key, int(c.get("maxSkew") or 1), strict=c.get("whenUnsatisfiable") == DO_NOT_SCHEDULE,
                                  min_domains=int(domains) if domains is not None else None))
    return Placement(per_node=max(1, per_node), zones=max(1, zones), spreads=tuple(spreads))
