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
from blueprints.review.deployability.nodes import (
    NodeSource, node_class_alias, node_daemonsets, node_sources, pod_requests,
)
from blueprints.contracts.allocatable import allocatable


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
            per_node = min([int(have[k] / v) for k, v in want.items() if k in have and v > 0],
                           default=defaults.MAX_PODS_PER_NODE)
            pods = peak + _surge(record, peak)
            need = math.ceil(pods / per_node) if per_node > 0 else math.inf
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


def _pool_usage(ctx: CheckContext, pool: NodeSource, want: Mapping[str, Decimal],
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
                           daemonsets=node_daemonsets(ctx, gpu_node=inst.gpu_count > 0))
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
            usage = _pool_usage(ctx, pool, want, pods)
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
