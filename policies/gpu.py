"""GPU rules: allowed instance families, GPU quota, GPU limits and taints, /dev/shm for tensor parallel, startup
budgets, node capacity for the autoscaler, no spot capacity."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from blueprints.catalog.engines import engine_of_image
from policies.resources import (
    ANNOTATION_POD_START_S,
    ANNOTATION_TENSOR_PARALLEL,
    CAPACITY_TYPE_LABEL,
    GPU_RESOURCE,
    GPU_TAINT_KEY,
    INSTANCE_TYPE_LABELS,
    NODE_GROUP,
    NODE_POOL,
    POD_TEMPLATE_PATHS,
    UNKNOWN,
    Finding,
    Res,
    as_int,
    container_label,
    get,
    gpu_container_limit,
    gpus_per_instance,
    instance_family,
    instance_types,
    items,
    mapping,
    node_pool_gpu_limit,
    node_pool_requirement,
    pod_template,
    quantity_gib,
    requests_gpus,
    targets_gpu_nodes,
    tolerates_gpu_taint,
)

def check_instance_types_allowed(res: Res, config: Mapping[str, Any]) -> list[str]:
    """Node group / SageMaker instance types must be in `allowedInstanceFamilies` or `allowedInstanceTypes`."""
    families = set(config.get("allowedInstanceFamilies", []))
    exact = set(config.get("allowedInstanceTypes", []))
    return [f"{res.label} uses instance type {t!r} (family {instance_family(t)!r}), which this environment does not "
            f"allow; use a family in {sorted(families)}"
            + (f" or a type in {sorted(exact)}" if exact else "")
            + " or add it to allowedInstanceFamilies in the policy config"
            for t in instance_types(res) if instance_family(t) not in families and t not in exact]


def check_engines_allowed(res: Res, config: Mapping[str, Any]) -> list[str]:
    """A container running an LLM serving engine's image (blueprints/catalog/engines.yaml) runs one of
    `allowedEngines`."""
    allowed = set(config.get("allowedEngines", []))
    pod = pod_template(res)
    if pod is None:
        return []
    found = []
    for container in pod.containers():
        engine = engine_of_image(str(container.get("image", "")))
        if engine is not None and engine.name not in allowed:
            found.append(f"{container_label(res, container)} runs {engine.display} ({engine.image}), which this "
                         f"environment does not allow; plan one of {sorted(allowed)} (operations.engines) or add "
                         f"{engine.name} to allowedEngines in the policy config")
    return found


def check_gpu_quota(resources: Sequence[Res], config: Mapping[str, Any]) -> list[Finding]:
    """The stack's GPUs at full scale stay within `maxGpus`: node groups' scalingConfig.maxSize x GPUs per instance
    plus Karpenter NodePools' `limits['nvidia.com/gpu']` (a GPU NodePool without that limit is unbounded)."""
    cap = int(config["maxGpus"])
    total, parts = 0, []
    findings: list[Finding] = []
    for res in resources:
        if res.type == NODE_POOL:
            if get(res.props, "spec") is UNKNOWN or get(res.props, "spec", "limits") is UNKNOWN:
                continue  # judged at `pulumi up`
            types = instance_types(res)
            limit = node_pool_gpu_limit(res)
            if limit is not None:
                total += limit
                parts.append(f"{res.name}: limits nvidia.com/gpu {limit}")
            elif any((gpus_per_instance(t) or 0) > 0 for t in types) or not types:
                findings.append((res, f"{res.label} may launch GPU instances but sets no limits['{GPU_RESOURCE}'], "
                                      "so it can grow without bound; set spec.limits['nvidia.com/gpu'] to the GPUs "
                                      "the service may reach (autoscaler max plus the rollout surge)"))
            continue
        if res.type != NODE_GROUP:
            continue
        max_size = as_int(get(res.props, "scalingConfig", "maxSize"))
        types = instance_types(res)
        if max_size is None or not types:
            continue  # unknown until `pulumi up`, or the instance type lives in a launch template
        counts = {t: gpus_per_instance(t) for t in types}
        uncounted = sorted(t for t, n in counts.items() if n is None)
        if uncounted:
            findings.append((res, f"{res.label}: cannot count the GPUs of {', '.join(uncounted)} (not in "
                                  "blueprints/catalog/instances.yaml); add the instance type to the catalog"))
            continue
        largest = max(types, key=lambda t: counts[t] or 0)  # the group may launch its largest type every time
        if counts[largest]:
            total += max_size * (counts[largest] or 0)
            parts.append(f"{res.name}: {max_size} x {largest}")
    if total > cap:
        findings.append((None, f"the stack can scale to {total} GPUs ({'; '.join(parts)}) but this environment "
                               f"allows {cap}; lower the NodePool's GPU limit (or scalingConfig.maxSize), use "
                               "smaller instance types, or raise maxGpus in the policy config"))
    return findings


def check_gpu_limits(res: Res, config: Mapping[str, Any]) -> list[str]:
    """Containers requesting nvidia.com/gpu set an equal limit; tensor-parallel pods limit >= TP GPUs."""
    pod = pod_template(res)
    if pod is None:
        return []
    found = []
    for c in pod.containers():
        requested = get(c, "resources", "requests", GPU_RESOURCE)
        limit = get(c, "resources", "limits", GPU_RESOURCE)
        if UNKNOWN in (requested, limit) or requested is None or as_int(requested) == as_int(limit):
            continue
        found.append(f"{container_label(res, c)} requests {requested} {GPU_RESOURCE} but its limit is "
                     f"{limit if limit is not None else 'unset'}; set resources.limits['{GPU_RESOURCE}'] equal to "
                     "the request (extended resources are not overcommitted)")
    tp = as_int(pod.annotations.get(ANNOTATION_TENSOR_PARALLEL))
    if pod.unknown("containers", "resources") or any(
            get(c, "resources", "limits", GPU_RESOURCE) is UNKNOWN for c in pod.containers()):
        return found
    if tp and not any((gpu_container_limit(c) or 0) >= tp for c in pod.containers()):
        found.append(f"{res.label} runs tensor_parallel_size={tp} ({ANNOTATION_TENSOR_PARALLEL}) but no container "
                     f"sets resources.limits['{GPU_RESOURCE}'] >= {tp}; set the model server's GPU limit to the "
                     "tensor-parallel degree")
    return found


def check_gpu_taint_tolerated(res: Res, config: Mapping[str, Any]) -> list[str]:
    """Pods that request GPUs or select GPU nodes tolerate the nvidia.com/gpu taint."""
    pod = pod_template(res)
    if pod is None or pod.unknown("tolerations") or not (requests_gpus(pod) or targets_gpu_nodes(pod)):
        return []
    if tolerates_gpu_taint(pod):
        return []
    return [f"{res.label} requests GPUs or selects GPU nodes but does not tolerate the '{GPU_TAINT_KEY}' taint, so "
            "it stays Pending; add tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]"]


_SHM_ENV = re.compile(r"shm[-_]?size", re.IGNORECASE)


def check_tensor_parallel_shm(res: Res, config: Mapping[str, Any]) -> list[str]:
    """TP > 1 mounts a memory-backed emptyDir at /dev/shm of >= TP x `shmGibPerRank` GiB; no "shm-size" env vars."""
    pod = pod_template(res)
    if pod is None:
        return []
    found = [f"{container_label(res, c)} sets environment variable {e.get('name')!r}, which does not resize "
             "/dev/shm (the container runtime ignores it); mount an emptyDir with medium: Memory at /dev/shm instead"
             for c in pod.containers() for e in items(c.get("env"))
             if isinstance(e.get("name"), str) and _SHM_ENV.search(e["name"])]
    tp = as_int(pod.annotations.get(ANNOTATION_TENSOR_PARALLEL))
    if not tp or tp <= 1 or pod.unknown("containers", "volumes", "volumeMounts"):
        return found
    need_gib = tp * float(config["shmGibPerRank"])
    volumes = {get(v, "name"): mapping(get(v, "emptyDir")) for v in items(pod.spec.get("volumes"))}
    mounted = {get(m, "name") for c in items(pod.spec.get("containers")) for m in items(get(c, "volumeMounts"))
               if get(m, "mountPath") == "/dev/shm"}
    shm = [volumes[n] for n in mounted if n in volumes and volumes[n].get("medium") == "Memory"]
    fix = (f"mount an emptyDir {{medium: Memory, sizeLimit: {math.ceil(need_gib)}Gi}} at /dev/shm "
           f"({config['shmGibPerRank']:g} GiB per tensor-parallel rank)")
    if not shm:
        found.append(f"{res.label} runs tensor_parallel_size={tp} without a memory-backed /dev/shm (NCCL fails on "
                     f"the 64 MiB default); {fix}")
        return found
    size = shm[0].get("sizeLimit")
    size_gib = quantity_gib(size)
    if size is not None and size is not UNKNOWN and (size_gib is None or size_gib < need_gib):
        found.append(f"{res.label} runs tensor_parallel_size={tp} with /dev/shm sizeLimit {size}, below "
                     f"{need_gib:g} GiB; {fix}")
    return found


#: Kubernetes' probe defaults: initialDelaySeconds 0, periodSeconds 10, failureThreshold 3 (core/v1 Probe API).
_PROBE_DEFAULTS: Final = {"initialDelaySeconds": 0, "periodSeconds": 10, "failureThreshold": 3}


def _probe_budget_s(probe: Mapping[str, Any]) -> int | None:
    """initialDelaySeconds + periodSeconds x failureThreshold with Kubernetes' defaults; None if not known yet."""
    values = {k: as_int(probe[k]) if probe.get(k) is not None else d for k, d in _PROBE_DEFAULTS.items()}
    delay, period, failures = values["initialDelaySeconds"], values["periodSeconds"], values["failureThreshold"]
    if delay is None or period is None or failures is None:
        return None
    return delay + period * failures


def check_startup_probe_budget(res: Res, config: Mapping[str, Any]) -> list[str]:
    """The startup probe (or the liveness probe without one) waits at least the pod-start-s annotation."""
    pod = pod_template(res)
    start_s = as_int(pod.annotations.get(ANNOTATION_POD_START_S)) if pod else None
    if pod is None or start_s is None:
        return []
    found = []
    for c in items(pod.spec.get("containers")):
        probe_key = "startupProbe" if get(c, "startupProbe") else "livenessProbe"
        probe = get(c, probe_key)
        budget = _probe_budget_s(probe) if isinstance(probe, Mapping) else None
        if budget is not None and budget < start_s:
            default_period_s = _PROBE_DEFAULTS["periodSeconds"]
            period_s = (as_int(get(probe, "periodSeconds")) or default_period_s) if probe_key == "startupProbe" \
                else default_period_s
            failures = math.ceil(start_s / period_s)
            fix = (f"raise startupProbe.failureThreshold to at least {failures}" if probe_key == "startupProbe" else
                   f"add a startupProbe with periodSeconds {period_s} and failureThreshold >= {failures}")
            found.append(f"{container_label(res, c)}: {probe_key} gives up after {budget} s (initialDelaySeconds + "
                         f"periodSeconds x failureThreshold) but the model needs {start_s} s to download and load "
                         f"({ANNOTATION_POD_START_S}); {fix}")
    return found


_AUTOSCALERS: Final = {"kubernetes:keda.sh/v1alpha1:ScaledObject": ("spec", "maxReplicaCount"),
                       "kubernetes:autoscaling/v2:HorizontalPodAutoscaler": ("spec", "maxReplicas"),
                       "kubernetes:autoscaling/v1:HorizontalPodAutoscaler": ("spec", "maxReplicas")}


def _node_pool_replicas(pool: Res, selector: Mapping[str, Any], gpus_per_replica: int) -> tuple[int, str] | None:
    """Replicas of `gpus_per_replica` GPUs a NodePool holds at its GPU limit, for pods whose nodeSelector it
    satisfies; None when it does not match or is not known yet."""
    labels = get(pool.props, "spec", "template", "metadata", "labels")
    if get(pool.props, "spec") is UNKNOWN or not isinstance(labels, Mapping):
        return None
    offered = {k: {v} for k, v in labels.items()}  # node labels: the template's, and the In-requirements' values
    for req in items(get(pool.props, "spec", "template", "spec", "requirements")):
        if get(req, "operator") == "In":
            offered.setdefault(get(req, "key"), set()).update(v for v in items(get(req, "values")))
    if any(k not in INSTANCE_TYPE_LABELS and v not in offered.get(k, set()) for k, v in selector.items()):
        return None
    types = instance_types(pool)
    wanted = next((v for k, v in selector.items() if k in INSTANCE_TYPE_LABELS), None)
    types = [t for t in types if wanted in (None, t)]
    limit = node_pool_gpu_limit(pool)
    if not types or limit is None:
        return None
    per_node = gpus_per_instance(types[0]) or 0
    if not per_node:
        return 0, f"{pool.name} (no GPUs)"
    return (limit // per_node) * (per_node // gpus_per_replica), f"{pool.name} (limit {limit} GPUs of {types[0]})"


def check_node_capacity(resources: Sequence[Res], config: Mapping[str, Any]) -> list[Finding]:
    """Node groups (at their maxSize) or Karpenter NodePools (at their GPU limit) that can host a GPU workload
    reach its autoscaler's max replicas."""
    workloads = {(get(r.props, "metadata", "namespace"), get(r.props, "metadata", "name")): r
                 for r in resources if r.type in POD_TEMPLATE_PATHS}
    node_groups = [r for r in resources if r.type == NODE_GROUP]
    pools = [r for r in resources if r.type == NODE_POOL]
    if not node_groups and not pools:
        return []  # nodes managed outside this stack
    if any(get(g.props, "scalingConfig", "maxSize") is UNKNOWN for g in node_groups):
        return []  # sizes known only at `pulumi up`
    findings: list[Finding] = []
    for scaler in (r for r in resources if r.type in _AUTOSCALERS):
        max_replicas = as_int(get(scaler.props, *_AUTOSCALERS[scaler.type]))
        target = workloads.get((get(scaler.props, "metadata", "namespace"),
                                get(scaler.props, "spec", "scaleTargetRef", "name")))
        pod = pod_template(target) if target is not None else None
        if target is None or pod is None or max_replicas is None:
            continue
        gpus_per_replica = max((gpu_container_limit(c) or 0 for c in pod.containers()), default=0)
        if not gpus_per_replica:
            continue  # not a GPU workload
        selected = next((v for k, v in mapping(pod.spec.get("nodeSelector")).items() if k in INSTANCE_TYPE_LABELS),
                        None)
        reachable, groups = 0, []
        for pool in pools:
            held = _node_pool_replicas(pool, mapping(pod.spec.get("nodeSelector")), gpus_per_replica)
            if held is not None:
                reachable += held[0]
                groups.append(held[1])
        for group in node_groups:
            max_size = as_int(get(group.props, "scalingConfig", "maxSize"))
            for itype in instance_types(group):
                per_node = (gpus_per_instance(itype) or 0) // gpus_per_replica
                if max_size and per_node and selected in (None, itype):
                    reachable += max_size * per_node
                    groups.append(f"{group.name} ({max_size} x {itype})")
                    break
        if reachable < max_replicas:
            where = ", ".join(groups) or (f"no node group with {gpus_per_replica}+ GPUs"
                                          + (f" of type {selected}" if selected else ""))
            findings.append((scaler, f"{scaler.label} may scale {target.label} to {max_replicas} replicas of "
                                     f"{gpus_per_replica} GPU(s) but its nodes hold {reachable} ({where}); raise "
                                     "the NodePool's GPU limit (or scalingConfig.maxSize) or lower the autoscaler's "
                                     "max"))
    return findings


def check_no_spot(res: Res, config: Mapping[str, Any]) -> list[str]:
    """Node groups do not use SPOT capacity; Karpenter NodePools do not allow `karpenter.sh/capacity-type: spot`."""
    fix = "(or lower this policy's enforcementLevel for non-production environments)"
    if res.type == NODE_GROUP and res.props.get("capacityType") == "SPOT":
        return [f"{res.label} uses capacityType SPOT, which can be reclaimed with two minutes' notice mid-request; "
                f"set capacityType: ON_DEMAND {fix}"]
    if res.type == NODE_POOL and "spot" in (node_pool_requirement(res, CAPACITY_TYPE_LABEL) or []):
        return [f"{res.label} allows {CAPACITY_TYPE_LABEL} spot, which can be reclaimed with two minutes' notice "
                f"mid-request; require [on-demand] {fix}"]
    return []


