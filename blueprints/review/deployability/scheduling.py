"""The scheduling checks of `blueprint preview` (`blueprints.review.deployability.checks`): `schedulable` (every workload's
pods match a node source and fit its nodes), `node-pool-arch` (a NodePool launches only what its architecture and AMI
admit), `node-pool-limits` (its limits hold the autoscaler's maximum plus the surge) and `owned-nodes` (an edge
cluster's nodes do), over the nodes of `blueprints.review.deployability.nodes`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from kubernetes.utils.quantity import parse_quantity

from blueprints.core import defaults
from blueprints.catalog import load_catalog
from blueprints.requirements.platform_file import NODE_ARCH
from blueprints.requirements.hosting import CpuArch
from blueprints.review.preview import DeployabilityFinding, RegisteredResource
from blueprints.review.deployability.context import (
    ARCH_LABEL, CheckContext, GPU, HPA_TYPES, INSTANCE_TYPE_LABEL, NODE_POOL, POOL_LABEL, SCALED_OBJECT, named, get_in,
    list_of, pod_spec,
)
from blueprints.contracts.placement import allocatable, replicas_per_node
from blueprints.review.deployability.nodes import (
    NodeSource, manifest_placement, node_class_alias, node_daemonsets, node_sources, pod_requests,
)


def check_node_pool_arch(ctx: CheckContext) -> list[DeployabilityFinding]:
    """Every instance type a NodePool allows has an architecture its `kubernetes.io/arch` requirement admits and its
    node class's AMI alias resolves (Karpenter launches nothing it cannot match: the pods stay Pending)."""
    findings = []
    for r in ctx.report.resources:
        if r.type != NODE_POOL:
            continue
        template = get_in(r.inputs, "spec", "template") or {}
        wanted = {req["key"]: set(req.get("values", [])) for req in list_of(get_in(template, "spec", "requirements"))
                  if req.get("operator") == "In"}
        alias = node_class_alias(get_in(template, "spec", "nodeClassRef", "name"), ctx)
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
                                                     f"'{get_in(r.inputs, 'metadata', 'name')}' {problem}"))
    return findings


def _tolerates(spec: Mapping[str, Any], taint: Mapping[str, str]) -> bool:
    if taint.get("effect") == "PreferNoSchedule":
        return True
    for tol in list_of(spec.get("tolerations")):
        if tol.get("effect") not in (None, "", taint.get("effect")):
            continue
        if tol.get("operator") == "Exists" and tol.get("key") in (None, "", taint.get("key")):
            return True
        if tol.get("key") == taint.get("key") and tol.get("value") == taint.get("value"):
            return True
    return False


def _fmt(resource: str, value: Decimal) -> str:
    if resource == "cpu":
        return f"{float(value):g} CPU"
    if resource in ("memory", "ephemeral-storage"):
        return f"{float(value) / 2**30:.1f} GiB {resource}"
    return f"{value} {resource}"


def check_scheduling(ctx: CheckContext) -> list[DeployabilityFinding]:
    findings = []
    sources = node_sources(ctx)
    if not sources:
        return []  # an existing cluster: its nodes are not ours to know
    for record in ctx.report.resources:
        spec = pod_spec(record)
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
                "schedulable", record.urn, f"{named(record)}: its pods stay Pending: {why}; select a node pool's "
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
                                   daemonsets=node_daemonsets(ctx, gpu_node=shape.gpu_count > 0))
                short = [f"{_fmt(k, v)} > {_fmt(k, have.get(k, Decimal(0)))}" for k, v in want.items()
                         if k in have and v > have[k]]
                fits.append((source, itype, short))
        if fits and not any(not short for _, _, short in fits):
            detail = "; ".join(f"{s.name} {t}: {', '.join(short)}" for s, t, short in fits)
            findings.append(DeployabilityFinding(
                "schedulable", record.urn, f"{named(record)}: its pods request more than a node can give after "
                f"kube-reserved, the per-node DaemonSets and, for disk, the kubelet's 10 % eviction threshold, the OS "
                f"and images ({detail}); lower the requests, use a larger instance type or a larger node volume"))
    return findings


def _ephemeral(source: NodeSource, instance_type: str) -> float | None:
    """A node's ephemeral storage, GiB; None when unknown (an edge cluster's owned nodes)."""
    return None if source.owned is not None else source.ephemeral_gib.get(instance_type, 0.0)


def check_owned_nodes(ctx: CheckContext) -> list[DeployabilityFinding]:
    """An edge cluster's declared nodes hold the autoscaler's maximum replicas plus the rollout surge (its nodes
    cannot grow)."""
    findings = []
    owned = [s for s in node_sources(ctx) if s.owned is not None]
    for record in ctx.report.resources:
        spec = pod_spec(record)
        if record.type != "kubernetes:apps/v1:Deployment" or spec is None:
            continue
        peak = _scaler_max(ctx, record)
        want = pod_requests(spec)
        for source in (s for s in owned if s.selects(spec.get("nodeSelector") or {})):
            if peak is None:
                continue
            have = allocatable(source.owned, ephemeral_gib=None, daemonsets=node_daemonsets(ctx, gpu_node=False))
            per_node = replicas_per_node(want, have)
            pods = peak + _surge(record, peak)
            need = manifest_placement(spec, per_node=per_node, zones=1).nodes(pods) if per_node > 0 else math.inf
            if need > source.owned.count:
                findings.append(DeployabilityFinding(
                    "owned-nodes", record.urn, f"{named(record)} may run {peak} replicas plus {pods - peak} surge, "
                    f"{per_node} per node after kube-reserved and the declared add-ons' DaemonSets, {need} node(s), "
                    f"but {source.name} counts {source.owned.count}: rollouts and scale-out stay Pending; add nodes "
                    "(hardware.edge_nodes.count) or lower the autoscaler's maximum (re-plan)"))
    return findings


def _scaler_max(ctx: CheckContext, workload: RegisteredResource) -> int | None:
    name = get_in(workload.inputs, "metadata", "name")
    for r in ctx.report.resources:
        if r.type == SCALED_OBJECT and get_in(r.inputs, "spec", "scaleTargetRef", "name") == name:
            return int(get_in(r.inputs, "spec", "maxReplicaCount") or 100)
        if r.type in HPA_TYPES and get_in(r.inputs, "spec", "scaleTargetRef", "name") == name:
            return int(get_in(r.inputs, "spec", "maxReplicas"))
    replicas = get_in(workload.inputs, "spec", "replicas")
    return int(replicas) if replicas is not None else None


def _surge(workload: RegisteredResource, replicas: int) -> int:
    surge = get_in(workload.inputs, "spec", "strategy", "rollingUpdate", "maxSurge")
    if surge is None:
        return max(1, math.ceil(replicas * 0.25))  # Kubernetes' default maxSurge is 25 %
    if isinstance(surge, str) and surge.endswith("%"):
        return math.ceil(replicas * int(surge[:-1]) / 100)
    return int(surge)


def zones_of_pools(ctx: CheckContext) -> int:
    """The zones a service's node pools launch into: its platform's (the blueprint's record without one)."""
    platform = ctx.report.platform
    if platform is not None and platform.kind.value == "eks":
        return platform.network.az_count
    return 1 if ctx.report.is_platform else ctx.report.blueprint.platform.zones or 1


def pool_nodes(ctx: CheckContext, pool: NodeSource, spec: Mapping[str, Any],
               pods: int) -> tuple[str, int, int, str] | None:
    """The nodes `pods` pods of `spec` take on `pool` as the scheduler places them (`blueprints.contracts.placement`:
    replicas per node from the pods' requests and a node's allocatable after the DaemonSets, the topology spread the
    manifest carries, the pool's zones): (description, nodes, replicas per node, instance type) on the pool's
    instance type needing the fewest; None when no catalogued instance type of the pool fits one pod."""
    want = pod_requests(spec)
    best = None
    for itype in pool.instance_types:
        inst = load_catalog().ec2.get(itype)
        if inst is None:
            continue
        have = allocatable(itype, ephemeral_gib=pool.ephemeral_gib.get(itype, 0.0),
                           daemonsets=node_daemonsets(ctx, gpu_node=inst.gpu_count > 0))
        per_node = replicas_per_node(want, have)
        if per_node < 1:
            continue
        placement = manifest_placement(spec, per_node=per_node, zones=zones_of_pools(ctx))
        nodes = placement.nodes(pods)
        if best is None or nodes < best[1]:
            where = f" over {placement.zone_domains} zones" if placement.zone_domains > 1 else ""
            best = (f"on {nodes} {itype} node(s){where}, {placement.per_new_node} per node", nodes, per_node, itype)
    return best


def _pool_usage(ctx: CheckContext, pool: NodeSource, spec: Mapping[str, Any],
                pods: int) -> tuple[str, dict[str, Decimal]] | None:
    """How `pods` pods of `spec` count against `pool`'s limits: Karpenter sums the capacity of the nodes it launches,
    not the pods' requests, so (a description of the nodes, the capacity they add up to) (`pool_nodes`)."""
    found = pool_nodes(ctx, pool, spec, pods)
    if found is None:
        return None
    where, nodes, _, itype = found
    inst = load_catalog().ec2[itype]
    capacity = {"cpu": Decimal(inst.vcpus), "memory": Decimal(str(inst.memory_gib)) * 2**30,
                "ephemeral-storage": Decimal(str(round(pool.ephemeral_gib.get(itype, 0.0), 3))) * 2**30,
                GPU: Decimal(inst.gpu_count)}
    return where, {k: v * nodes for k, v in capacity.items()}


def check_node_pool_limits(ctx: CheckContext) -> list[DeployabilityFinding]:
    findings = []
    pools = [s for s in node_sources(ctx) if s.record is not None and s.limits]
    for record in ctx.report.resources:
        spec = pod_spec(record)
        if record.type != "kubernetes:apps/v1:Deployment" or spec is None:
            continue
        selector = spec.get("nodeSelector") or {}
        want = pod_requests(spec)
        peak = _scaler_max(ctx, record)
        for pool in (p for p in pools if p.selects(selector) and POOL_LABEL in selector):
            if peak is None:
                continue
            pods = peak + _surge(record, peak)
            usage = _pool_usage(ctx, pool, spec, pods)
            for resource, limit in pool.limits.items():  # type: ignore[union-attr]
                if usage is not None and resource in usage[1]:
                    where, need = usage[0], usage[1][resource]
                else:  # a resource nodes do not report as capacity: the pods' requests
                    where, need = "", want.get(resource, Decimal(0)) * pods
                if need > parse_quantity(limit):
                    findings.append(DeployabilityFinding(
                        "node-pool-limits", pool.record.urn if pool.record else record.urn,  # type: ignore[union-attr]
                        f"{pool.name} limits {resource} to {limit} but {named(record)} may run {peak} replicas plus "
                        f"{pods - peak} surge{' ' + where if where else ''}, {_fmt(resource, need)} in all: "
                        "scale-out and rollouts stall with Pending pods; raise the NodePool's limits (or lower the "
                        "autoscaler's maximum)"))
    return findings


def check_billed_nodes(ctx: CheckContext) -> list[DeployabilityFinding]:
    """The plan bills at least the nodes the serving pods take at the planned peak replicas, placed as the manifests
    say (`pool_nodes`: requests against allocatable after the DaemonSets, topology spread over the pool's zones), and
    that placement can schedule them all (a strict zone spread's minDomains within the pool's zones)."""
    if ctx.report.is_platform or ctx.report.blueprint.archetype.value == "sagemaker-endpoint":
        return []
    bp = ctx.report.blueprint
    billed = bp.predictions.cost_lines[0].quantity if bp.predictions.cost_lines else 0
    findings = []
    pools = [s for s in node_sources(ctx) if s.record is not None or s.owned is not None]
    for record in ctx.report.resources:
        spec = pod_spec(record)
        if record.type != "kubernetes:apps/v1:Deployment" or spec is None:
            continue
        selector = spec.get("nodeSelector") or {}
        for pool in (p for p in pools if p.selects(selector) and (POOL_LABEL in selector or p.owned is not None)):
            found = _owned_nodes(ctx, pool, spec, bp.compute.replicas) if pool.owned is not None else \
                pool_nodes(ctx, pool, spec, bp.compute.replicas)
            if found is None:
                continue  # no instance type fits one pod: `schedulable` says so
            where, nodes, per_node, _ = found
            placement = manifest_placement(spec, per_node=per_node, zones=1 if pool.owned else zones_of_pools(ctx))
            problem = placement.unsatisfiable()
            if problem:
                findings.append(DeployabilityFinding(
                    "schedulable", record.urn, f"{named(record)} on {pool.name}: {problem}; the platform needs more "
                    "zones that offer the instance type, or the availability target its spread follows must drop"))
            if billed + 1e-9 < nodes:
                findings.append(DeployabilityFinding(
                    "billed-nodes", record.urn, f"{named(record)}: its {bp.compute.replicas} planned replica(s) take "
                    f"{nodes} node(s) {where} as the scheduler places them, but the plan bills {billed:g} "
                    f"({bp.predictions.cost_lines[0].item}): its cost understates what AWS bills; re-plan "
                    "(`blueprint plan`) instead of editing the stack config"))
    return findings


def _owned_nodes(ctx: CheckContext, pool: NodeSource, spec: Mapping[str, Any],
                 pods: int) -> tuple[str, int, int, str] | None:
    """`pool_nodes` on an edge cluster's owned nodes (their shape, no zones)."""
    have = allocatable(pool.owned, ephemeral_gib=None, daemonsets=node_daemonsets(ctx, gpu_node=False))
    per_node = replicas_per_node(pod_requests(spec), have)
    if per_node < 1:
        return None
    nodes = manifest_placement(spec, per_node=per_node, zones=1).nodes(pods)
    return f"on {nodes} owned node(s), {per_node} per node", nodes, per_node, pool.instance_types[0]
