"""Guardrails for GPU serving stacks: each rule a pure function, run by CrossGuard and by the offline preview.

A rule sees resources as `Res` records (type, name, URN, parent, props in engine camelCase, the provider's props) and
returns messages that say what is wrong, on which resource, and how to fix it. `RULES` lists them with their name,
enforcement level and config schema; `POLICIES` wraps each one as a `ResourceValidationPolicy` or
`StackValidationPolicy` for the CrossGuard pack (`policies/__main__.py`), and `policies.offline.evaluate` runs the very
same functions over an offline `PreviewReport`.

Values the engine does not know yet (`pulumi preview` before a dependency exists) arrive as `UNKNOWN`; a check that
needs such a value skips it (the rule runs again with known values at `pulumi up`). Missing values mean the
provider's or Kubernetes' default and are judged as such (e.g. a missing `endpointPublicAccess` is public).
"""

from __future__ import annotations

import base64
import binascii
import datetime
import importlib
import inspect
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Final

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    PolicyResource,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy import proxy as policy_proxy

from blueprints.catalog import has_instance_storage, load_catalog

# ---------------------------------------------------------------------------------------------------------------------
# The resource view every rule reads
# ---------------------------------------------------------------------------------------------------------------------


class _Unknown:
    """A value the engine does not know during `pulumi preview`."""

    def __repr__(self) -> str:
        return "<unknown during preview>"


#: Marker for a property whose value is not known yet (computed from another resource during `pulumi preview`).
UNKNOWN: Final = _Unknown()

_UNKNOWN_SENTINELS = frozenset({
    policy_proxy.UNKNOWN_BOOLEAN_VALUE, policy_proxy.UNKNOWN_NUMBER_VALUE, policy_proxy.UNKNOWN_STRING_VALUE,
    policy_proxy.UNKNOWN_ARRAY_VALUE, policy_proxy.UNKNOWN_ASSET_VALUE, policy_proxy.UNKNOWN_ARCHIVE_VALUE,
    policy_proxy.UNKNOWN_OBJECT_VALUE})


@dataclass(frozen=True)
class Res:
    """One resource as the rules see it.

    Args:
        type: type token, e.g. `aws:eks/nodeGroup:NodeGroup`, `kubernetes:apps/v1:Deployment`.
        name: logical name.
        props: inputs (resource policies) or outputs (stack policies) in engine camelCase; unknowns are `UNKNOWN`.
        urn: the resource URN. Defaults to the name (offline records always have one).
        parent: the parent's identifier (URN under CrossGuard, logical name offline); None at the stack root.
        provider: the props of the resource's provider (e.g. `region`, `defaultTags`), None when not known.
    """

    type: str
    name: str
    props: Mapping[str, Any]
    urn: str = ""
    parent: str | None = None
    provider: Mapping[str, Any] | None = None

    @property
    def id(self) -> str:
        return self.urn or self.name

    @property
    def label(self) -> str:
        """`Kind 'name'` for messages, e.g. `NodeGroup 'gpu'`, `aws provider 'eu'`."""
        kind = self.type.rsplit(":", 1)[-1]
        if self.type.startswith("pulumi:providers:"):
            kind += " provider"
        return f"{kind} '{self.name}'"


#: A stack rule's finding: the resource it is about (None: the stack as a whole) and the message.
Finding = tuple[Res | None, str]


def plain(value: Any) -> Any:
    """CrossGuard props (proxies that raise on unknowns) as plain dicts/lists, unknown sentinels as `UNKNOWN`."""
    if isinstance(value, (policy_proxy._DictProxy, policy_proxy._ListProxy)):  # noqa: SLF001 - as serialize does
        value = value["__target"]
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, str) and value in _UNKNOWN_SENTINELS:
        return UNKNOWN
    return value


def get(obj: Any, *path: str | int) -> Any:
    """`obj[path[0]][path[1]]...`; None when a step is missing, `UNKNOWN` when a step is unknown."""
    for key in path:
        if obj is UNKNOWN:
            return UNKNOWN
        if isinstance(key, int):
            obj = obj[key] if isinstance(obj, list) and -len(obj) <= key < len(obj) else None
        else:
            obj = obj.get(key) if isinstance(obj, Mapping) else None
        if obj is None:
            return None
    return obj


def _items(value: Any) -> list[Any]:
    """A list property as a list (missing or unknown: empty)."""
    return list(value) if isinstance(value, list) else []


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


# ---------------------------------------------------------------------------------------------------------------------
# Shared readers: pod templates, quantities, instance types
# ---------------------------------------------------------------------------------------------------------------------

#: Where each workload type keeps its pod template (metadata + spec).
POD_TEMPLATE_PATHS: Final[dict[str, tuple[str, ...]]] = {
    "kubernetes:core/v1:Pod": (),
    "kubernetes:apps/v1:Deployment": ("spec", "template"),
    "kubernetes:apps/v1:StatefulSet": ("spec", "template"),
    "kubernetes:apps/v1:DaemonSet": ("spec", "template"),
    "kubernetes:apps/v1:ReplicaSet": ("spec", "template"),
    "kubernetes:batch/v1:Job": ("spec", "template"),
    "kubernetes:batch/v1:CronJob": ("spec", "jobTemplate", "spec", "template"),
}

GPU_RESOURCE: Final = "nvidia.com/gpu"
GPU_TAINT_KEY: Final = "nvidia.com/gpu"
#: Pod annotations written by components/labels.py (kept literal: the pack does not import Pulumi components).
ANNOTATION_POD_START_S: Final = "servingblueprints.io/pod-start-s"
ANNOTATION_TENSOR_PARALLEL: Final = "servingblueprints.io/tensor-parallel-size"
INSTANCE_TYPE_LABELS: Final = ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type")
#: Node labels that only GPU nodes carry (NVIDIA GPU feature discovery, EKS, Karpenter).
GPU_NODE_LABELS: Final = ("nvidia.com/gpu.present", "nvidia.com/gpu.product", "nvidia.com/gpu.count",
                          "k8s.amazonaws.com/accelerator", "karpenter.k8s.aws/instance-gpu-count",
                          "karpenter.k8s.aws/instance-gpu-name")
INTERNAL_LB_ANNOTATIONS: Final = {"service.beta.kubernetes.io/aws-load-balancer-scheme": "internal",
                                  "service.beta.kubernetes.io/aws-load-balancer-internal": "true"}


@dataclass(frozen=True)
class PodTemplate:
    """The pod a workload runs: its annotations and spec."""

    annotations: Mapping[str, Any]
    spec: Mapping[str, Any]

    def unknown(self, *keys: str) -> bool:
        """Whether any of these pod spec fields (or a container's field of that name) is unknown yet."""
        containers = [c for key in ("initContainers", "containers") for c in _items(self.spec.get(key))]
        return any(self.spec.get(k) is UNKNOWN or any(get(c, k) is UNKNOWN for c in containers) for k in keys)

    def containers(self) -> list[Mapping[str, Any]]:
        """Init containers, then containers (each a camelCase container spec)."""
        return [c for key in ("initContainers", "containers") for c in _items(self.spec.get(key))
                if isinstance(c, Mapping)]


def pod_template(res: Res) -> PodTemplate | None:
    """The pod template of a Pod/Deployment/StatefulSet/DaemonSet/ReplicaSet/Job/CronJob; None for other types."""
    path = POD_TEMPLATE_PATHS.get(res.type)
    if path is None:
        return None
    template = get(res.props, *path) if path else res.props
    return PodTemplate(annotations=_mapping(get(template, "metadata", "annotations")),
                       spec=_mapping(get(template, "spec")))


def _container_label(res: Res, container: Mapping[str, Any]) -> str:
    return f"container '{container.get('name', '?')}' of {res.label}"


_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|k|M|G|T|P)?$")
_BYTES_PER_UNIT: Final = {None: 1, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50,
                          "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15}


def quantity_gib(value: Any) -> float | None:
    """A Kubernetes memory quantity (`2Gi`, `512Mi`, `1G`, bytes) in GiB; None when absent, unknown or unparsable."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value / 2**30
    match = _QUANTITY.match(value) if isinstance(value, str) else None
    return float(match.group(1)) * _BYTES_PER_UNIT[match.group(2)] / 2**30 if match else None


def _int(value: Any) -> int | None:
    """An integer from an int, integral float or numeric string; None otherwise (missing, unknown, text)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)) and math.isfinite(value):
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def instance_family(instance_type: str) -> str:
    """`g6e` for `g6e.12xlarge` and `ml.g6e.12xlarge` (the same rule as `InstanceType.family`)."""
    return instance_type.removeprefix("ml.").split(".")[0]


def gpus_per_instance(instance_type: str) -> int | None:
    """GPUs of an EC2 or SageMaker instance type from blueprints/catalog/instances.yaml; None if not catalogued."""
    catalog = load_catalog()
    row = (catalog.sagemaker if instance_type.startswith("ml.") else catalog.ec2).get(instance_type)
    return row.gpu_count if row else None


NODE_GROUP: Final = "aws:eks/nodeGroup:NodeGroup"
#: Karpenter NodePools (karpenter.sh/v1): where each service's nodes come from on a shared platform.
NODE_POOL: Final = "kubernetes:karpenter.sh/v1:NodePool"
CAPACITY_TYPE_LABEL: Final = "karpenter.sh/capacity-type"


def node_pool_requirement(res: Res, key: str) -> list[str] | None:
    """The `In` values a NodePool's template requires for a node label; None when it does not constrain it (or the
    spec is not known yet)."""
    for req in _items(get(res.props, "spec", "template", "spec", "requirements")):
        if get(req, "key") == key and get(req, "operator") == "In":
            return [v for v in _items(get(req, "values")) if isinstance(v, str)]
    return None


def instance_types(res: Res) -> list[str]:
    """The known instance types a node group, Karpenter NodePool or SageMaker endpoint configuration runs on."""
    if res.type == NODE_GROUP:
        found = _items(res.props.get("instanceTypes"))
    elif res.type == NODE_POOL:
        found = node_pool_requirement(res, INSTANCE_TYPE_LABELS[0]) or []
    elif res.type == "aws:sagemaker/endpointConfiguration:EndpointConfiguration":
        found = [get(v, "instanceType") for v in _items(res.props.get("productionVariants"))]
    else:
        found = []
    return [t for t in found if isinstance(t, str)]


def node_pool_gpu_limit(res: Res) -> int | None:
    """A NodePool's `limits['nvidia.com/gpu']` (None when unset or unknown)."""
    return _int(get(res.props, "spec", "limits", GPU_RESOURCE))


def _gpu_container_limit(container: Mapping[str, Any]) -> int | None:
    return _int(get(container, "resources", "limits", GPU_RESOURCE))


def _requests_gpus(pod: PodTemplate) -> bool:
    return any((_int(get(c, "resources", key, GPU_RESOURCE)) or 0) > 0
               for c in pod.containers() for key in ("limits", "requests"))


def _is_gpu_node_label(key: str, value: Any) -> bool:
    if key in GPU_NODE_LABELS:
        return True
    return key in INSTANCE_TYPE_LABELS and isinstance(value, str) and (gpus_per_instance(value) or 0) > 0


def _targets_gpu_nodes(pod: PodTemplate) -> bool:
    """nodeSelector or required node affinity selects GPU nodes (GPU instance types or GPU node labels)."""
    if any(_is_gpu_node_label(k, v) for k, v in _mapping(pod.spec.get("nodeSelector")).items()):
        return True
    terms = _items(get(pod.spec, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution",
                       "nodeSelectorTerms"))
    for term in terms:
        for expr in _items(get(term, "matchExpressions")):
            key, operator = get(expr, "key"), get(expr, "operator")
            if operator == "Exists" and key in GPU_NODE_LABELS:
                return True
            if operator == "In" and any(_is_gpu_node_label(key, v) for v in _items(get(expr, "values"))):
                return True
    return False


def _tolerates_gpu_taint(pod: PodTemplate) -> bool:
    for tol in _items(pod.spec.get("tolerations")):
        key, operator, effect = get(tol, "key"), get(tol, "operator"), get(tol, "effect")
        if UNKNOWN in (key, operator, effect):
            return True  # judged at `pulumi up`
        if effect not in (None, "", "NoSchedule"):
            continue
        if (key in (None, "") and operator == "Exists") or key == GPU_TAINT_KEY:
            return True
    return False


# ---------------------------------------------------------------------------------------------------------------------
# GPU rules
# ---------------------------------------------------------------------------------------------------------------------


def check_instance_types_allowed(res: Res, config: Mapping[str, Any]) -> list[str]:
    """Node group / SageMaker instance types must be in `allowedInstanceFamilies` or `allowedInstanceTypes`."""
    families = set(config.get("allowedInstanceFamilies", []))
    exact = set(config.get("allowedInstanceTypes", []))
    return [f"{res.label} uses instance type {t!r} (family {instance_family(t)!r}), which this environment does not "
            f"allow; use a family in {sorted(families)}"
            + (f" or a type in {sorted(exact)}" if exact else "")
            + " or add it to allowedInstanceFamilies in the policy config"
            for t in instance_types(res) if instance_family(t) not in families and t not in exact]


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
        max_size = _int(get(res.props, "scalingConfig", "maxSize"))
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
        if UNKNOWN in (requested, limit) or requested is None or _int(requested) == _int(limit):
            continue
        found.append(f"{_container_label(res, c)} requests {requested} {GPU_RESOURCE} but its limit is "
                     f"{limit if limit is not None else 'unset'}; set resources.limits['{GPU_RESOURCE}'] equal to "
                     "the request (extended resources are not overcommitted)")
    tp = _int(pod.annotations.get(ANNOTATION_TENSOR_PARALLEL))
    if pod.unknown("containers", "resources") or any(
            get(c, "resources", "limits", GPU_RESOURCE) is UNKNOWN for c in pod.containers()):
        return found
    if tp and not any((_gpu_container_limit(c) or 0) >= tp for c in pod.containers()):
        found.append(f"{res.label} runs tensor_parallel_size={tp} ({ANNOTATION_TENSOR_PARALLEL}) but no container "
                     f"sets resources.limits['{GPU_RESOURCE}'] >= {tp}; set the model server's GPU limit to the "
                     "tensor-parallel degree")
    return found


def check_gpu_taint_tolerated(res: Res, config: Mapping[str, Any]) -> list[str]:
    """Pods that request GPUs or select GPU nodes tolerate the nvidia.com/gpu taint."""
    pod = pod_template(res)
    if pod is None or pod.unknown("tolerations") or not (_requests_gpus(pod) or _targets_gpu_nodes(pod)):
        return []
    if _tolerates_gpu_taint(pod):
        return []
    return [f"{res.label} requests GPUs or selects GPU nodes but does not tolerate the '{GPU_TAINT_KEY}' taint, so "
            "it stays Pending; add tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]"]


_SHM_ENV = re.compile(r"shm[-_]?size", re.IGNORECASE)


def check_tensor_parallel_shm(res: Res, config: Mapping[str, Any]) -> list[str]:
    """TP > 1 mounts a memory-backed emptyDir at /dev/shm of >= TP x `shmGibPerRank` GiB; no "shm-size" env vars."""
    pod = pod_template(res)
    if pod is None:
        return []
    found = [f"{_container_label(res, c)} sets environment variable {e.get('name')!r}, which does not resize "
             "/dev/shm (the container runtime ignores it); mount an emptyDir with medium: Memory at /dev/shm instead"
             for c in pod.containers() for e in _items(c.get("env"))
             if isinstance(e.get("name"), str) and _SHM_ENV.search(e["name"])]
    tp = _int(pod.annotations.get(ANNOTATION_TENSOR_PARALLEL))
    if not tp or tp <= 1 or pod.unknown("containers", "volumes", "volumeMounts"):
        return found
    need_gib = tp * float(config["shmGibPerRank"])
    volumes = {get(v, "name"): _mapping(get(v, "emptyDir")) for v in _items(pod.spec.get("volumes"))}
    mounted = {get(m, "name") for c in _items(pod.spec.get("containers")) for m in _items(get(c, "volumeMounts"))
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
    values = {k: _int(probe[k]) if probe.get(k) is not None else d for k, d in _PROBE_DEFAULTS.items()}
    delay, period, failures = values["initialDelaySeconds"], values["periodSeconds"], values["failureThreshold"]
    if delay is None or period is None or failures is None:
        return None
    return delay + period * failures


def check_startup_probe_budget(res: Res, config: Mapping[str, Any]) -> list[str]:
    """The startup probe (or the liveness probe without one) waits at least the pod-start-s annotation."""
    pod = pod_template(res)
    start_s = _int(pod.annotations.get(ANNOTATION_POD_START_S)) if pod else None
    if pod is None or start_s is None:
        return []
    found = []
    for c in _items(pod.spec.get("containers")):
        probe_key = "startupProbe" if get(c, "startupProbe") else "livenessProbe"
        probe = get(c, probe_key)
        budget = _probe_budget_s(probe) if isinstance(probe, Mapping) else None
        if budget is not None and budget < start_s:
            default_period_s = _PROBE_DEFAULTS["periodSeconds"]
            period_s = (_int(get(probe, "periodSeconds")) or default_period_s) if probe_key == "startupProbe" \
                else default_period_s
            failures = math.ceil(start_s / period_s)
            fix = (f"raise startupProbe.failureThreshold to at least {failures}" if probe_key == "startupProbe" else
                   f"add a startupProbe with periodSeconds {period_s} and failureThreshold >= {failures}")
            found.append(f"{_container_label(res, c)}: {probe_key} gives up after {budget} s (initialDelaySeconds + "
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
    for req in _items(get(pool.props, "spec", "template", "spec", "requirements")):
        if get(req, "operator") == "In":
            offered.setdefault(get(req, "key"), set()).update(v for v in _items(get(req, "values")))
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
        max_replicas = _int(get(scaler.props, *_AUTOSCALERS[scaler.type]))
        target = workloads.get((get(scaler.props, "metadata", "namespace"),
                                get(scaler.props, "spec", "scaleTargetRef", "name")))
        pod = pod_template(target) if target is not None else None
        if target is None or pod is None or max_replicas is None:
            continue
        gpus_per_replica = max((_gpu_container_limit(c) or 0 for c in pod.containers()), default=0)
        if not gpus_per_replica:
            continue  # not a GPU workload
        selected = next((v for k, v in _mapping(pod.spec.get("nodeSelector")).items() if k in INSTANCE_TYPE_LABELS),
                        None)
        reachable, groups = 0, []
        for pool in pools:
            held = _node_pool_replicas(pool, _mapping(pod.spec.get("nodeSelector")), gpus_per_replica)
            if held is not None:
                reachable += held[0]
                groups.append(held[1])
        for group in node_groups:
            max_size = _int(get(group.props, "scalingConfig", "maxSize"))
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


# ---------------------------------------------------------------------------------------------------------------------
# Compliance rules
# ---------------------------------------------------------------------------------------------------------------------

BUCKET = "aws:s3/bucket:Bucket"


def _bucket_settings(resources: Sequence[Res], setting_type: str) -> dict[str | None, list[Res]]:
    """Bucket id -> the `setting_type` resources that apply to it (by the `bucket` reference, else as siblings).

    A setting matches a bucket when its `bucket` input equals the bucket's `bucket`/`id` output; when that reference
    cannot be resolved (offline records carry inputs only, `pulumi preview` has unknowns), a setting matches the one
    bucket under the same parent component. Settings whose unknown reference matches no bucket are listed under
    None: they may belong to any bucket until `pulumi up` knows the names.
    """
    buckets = [r for r in resources if r.type == BUCKET]
    by_ref = {ref: b for b in buckets for ref in (b.props.get("bucket"), b.props.get("id")) if isinstance(ref, str)}
    siblings: dict[str | None, list[Res]] = {}
    for b in buckets:
        siblings.setdefault(b.parent, []).append(b)
    found: dict[str | None, list[Res]] = {b.id: [] for b in buckets} | {None: []}
    for setting in (r for r in resources if r.type == setting_type):
        ref = setting.props.get("bucket")
        bucket = by_ref.get(ref) if isinstance(ref, str) else None
        if bucket is None and setting.parent is not None and len(siblings.get(setting.parent, [])) == 1:
            bucket = siblings[setting.parent][0]
        if bucket is not None:
            found[bucket.id].append(setting)
        elif ref is UNKNOWN:
            found[None].append(setting)
    return found


def _bucket_check(setting_type: str, satisfied: Callable[[Mapping[str, Any]], bool | None], problem: str,
                  fix: str) -> Callable[[Sequence[Res], Mapping[str, Any]], list[Finding]]:
    """A stack check: every bucket has a `setting_type` resource for which `satisfied(props)` is not False."""
    kind = setting_type.rsplit(":", 1)[-1]

    def check(resources: Sequence[Res], config: Mapping[str, Any]) -> list[Finding]:
        findings: list[Finding] = []
        settings = _bucket_settings(resources, setting_type)
        for bucket in (r for r in resources if r.type == BUCKET):
            verdicts = [satisfied(s.props) for s in settings[bucket.id]]
            if not verdicts and settings[None]:
                continue  # a setting with a still-unknown bucket reference may be this bucket's
            if not verdicts:
                findings.append((bucket, f"{bucket.label} has no {kind}: {problem}; {fix}"))
            elif not any(v is not False for v in verdicts):
                findings.append((bucket, f"{bucket.label}: its {kind} does not comply: {problem}; {fix}"))
        return findings

    return check


def _sse_is_kms(props: Mapping[str, Any]) -> bool | None:
    algorithms = [get(r, "applyServerSideEncryptionByDefault", "sseAlgorithm") for r in _items(props.get("rules"))]
    if UNKNOWN in algorithms or props.get("rules") is UNKNOWN:
        return None
    return any(a in ("aws:kms", "aws:kms:dsse") for a in algorithms)


def _versioning_enabled(props: Mapping[str, Any]) -> bool | None:
    status = get(props, "versioningConfiguration", "status")
    return None if status is UNKNOWN else status == "Enabled"


_PUBLIC_ACCESS_FLAGS: Final = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")


def _public_access_blocked(props: Mapping[str, Any]) -> bool | None:
    flags = [props.get(k) for k in _PUBLIC_ACCESS_FLAGS]
    return None if UNKNOWN in flags else all(f is True for f in flags)


check_bucket_encrypted = _bucket_check(
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration", _sse_is_kms,
    "objects are not encrypted with KMS",
    "add a BucketServerSideEncryptionConfiguration with sseAlgorithm aws:kms (components.WeightsStorage does)")
check_bucket_versioned = _bucket_check(
    "aws:s3/bucketVersioning:BucketVersioning", _versioning_enabled,
    "overwritten or deleted weights cannot be recovered",
    "add a BucketVersioning with versioningConfiguration.status Enabled")
check_bucket_public_access_blocked = _bucket_check(
    "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock", _public_access_blocked,
    "a bucket policy or ACL could make the weights public",
    f"add a BucketPublicAccessBlock with {', '.join(_PUBLIC_ACCESS_FLAGS)} all true")


def check_private_endpoints(res: Res, config: Mapping[str, Any]) -> list[str]:
    """When `privateOnly`: no internet-facing LoadBalancer Service, no public EKS API, SageMaker models in a VPC."""
    if not config["privateOnly"]:
        return []
    props = res.props
    if res.type == "kubernetes:core/v1:Service" and get(props, "spec", "type") == "LoadBalancer":
        annotations = get(props, "metadata", "annotations")
        if annotations is UNKNOWN or UNKNOWN in _mapping(annotations).values():
            return []  # judged at `pulumi up`
        if any(_mapping(annotations).get(k) == v for k, v in INTERNAL_LB_ANNOTATIONS.items()):
            return []
        return [f"{res.label} is a LoadBalancer without an internal scheme, so AWS gives it a public address; add "
                "the annotation service.beta.kubernetes.io/aws-load-balancer-scheme: internal (or use ClusterIP)"]
    if res.type == "aws:eks/cluster:Cluster":
        public = get(props, "vpcConfig", "endpointPublicAccess")
        if public is None or public is True:  # EKS default: public
            return [f"{res.label} exposes its Kubernetes API on the internet (vpcConfig.endpointPublicAccess is "
                    f"{'unset, which defaults to true' if public is None else 'true'}); set "
                    "vpcConfig.endpointPublicAccess: false and endpointPrivateAccess: true"]
    if res.type == "aws:sagemaker/model:Model" and props.get("vpcConfig") is None:
        return [f"{res.label} has no vpcConfig, so its containers reach the internet; set vpcConfig with private "
                "subnets and security groups"]
    return []


def check_sagemaker_kms(res: Res, config: Mapping[str, Any]) -> list[str]:
    """SageMaker endpoint configurations encrypt the instances' storage volumes with a KMS key, except on instance
    types with local NVMe storage (`blueprints.catalog.has_instance_storage`): they have no EBS volume, SageMaker
    rejects a storage key for them, and their instance store is encrypted by the hardware."""
    if res.type != "aws:sagemaker/endpointConfiguration:EndpointConfiguration" or res.props.get("kmsKeyArn"):
        return []
    variants = res.props.get("productionVariants")
    types = [get(v, "instanceType") for v in variants] if isinstance(variants, list) else []
    if types and all(isinstance(t, str) and has_instance_storage(t) for t in types):
        return []
    return [f"{res.label} has no kmsKeyArn, so the ML storage volumes attached to the endpoint instances are not "
            "encrypted with your key; set kmsKeyArn to a KMS key ARN"]


def resource_region(res: Res) -> str | None:
    """The AWS region a resource lives in: its own `region` input (pulumi-aws 7) or else its provider's `region`."""
    own = res.props.get("region")
    if own is UNKNOWN:
        return None
    if isinstance(own, str):
        return own
    region = get(res.provider or {}, "region")
    return region if isinstance(region, str) else None


def check_region_allowed(res: Res, config: Mapping[str, Any]) -> list[str]:
    """AWS resources and AWS providers are in `allowedRegions`."""
    if res.type == "pulumi:providers:aws":
        region = res.props.get("region")
        region = region if isinstance(region, str) else None
    elif res.type.startswith("aws:"):
        region = resource_region(res)
    else:
        return []
    allowed = list(config["allowedRegions"])
    if region is None or region in allowed:
        return []
    return [f"{res.label} is in region {region!r}, outside the allowed {allowed}; set `aws:region` (or the "
            "resource's region) to an allowed region, or add it to allowedRegions in the policy config"]


_AWS_KEY_ENV_NAMES: Final = frozenset({"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"})
_AWS_ACCESS_KEY_ID = re.compile(r"\b(AKIA|ASIA)[A-Z0-9]{16}\b")


def _env_vars(pod: PodTemplate) -> Iterator[tuple[Mapping[str, Any], Mapping[str, Any]]]:
    for c in pod.containers():
        for e in _items(c.get("env")):
            if isinstance(e, Mapping):
                yield c, e


def _secret_entries(props: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """A Secret's visible (key, decoded value) pairs. Offline, the SDK-marked data is one opaque placeholder."""
    for key, value in _mapping(props.get("stringData")).items():
        yield key, value if isinstance(value, str) else ""
    for key, value in _mapping(props.get("data")).items():
        yield key, _b64_text(value) if isinstance(value, str) else ""


def _b64_text(value: str) -> str:
    try:
        return base64.b64decode(value, validate=True).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        return value


def check_no_static_aws_credentials(res: Res, config: Mapping[str, Any]) -> list[str]:
    """No AWS access keys in pod env (by name or by AKIA/ASIA value), in Secrets, or in an AWS provider."""
    fix = "use the pod's IAM identity (EKS Pod Identity or IRSA) instead of access keys"
    pod = pod_template(res)
    if pod is not None:
        return [f"{_container_label(res, c)} sets {e.get('name')!r}"
                + (" to an AWS access key id" if e.get("name") not in _AWS_KEY_ENV_NAMES else "")
                + f", a static AWS credential; {fix}"
                for c, e in _env_vars(pod)
                if e.get("name") in _AWS_KEY_ENV_NAMES
                or (isinstance(e.get("value"), str) and _AWS_ACCESS_KEY_ID.search(e["value"]))]
    if res.type == "kubernetes:core/v1:Secret":
        return [f"{res.label} holds {key!r}, a static AWS credential; {fix}"
                for key, value in _secret_entries(res.props)
                if key.upper() in _AWS_KEY_ENV_NAMES or _AWS_ACCESS_KEY_ID.search(value)]
    if res.type == "pulumi:providers:aws" and (res.props.get("accessKey") or res.props.get("secretKey")):
        return [f"{res.label} is configured with an access key (aws:accessKey/aws:secretKey); use an IAM role "
                "(environment credentials, SSO or OIDC) for the deployment instead"]
    return []


_SECRET_ENV_NAME = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|PRIVATE_?KEY|CREDENTIAL)", re.IGNORECASE)


def check_no_plaintext_secrets(res: Res, config: Mapping[str, Any]) -> list[str]:
    """Pod env vars named like credentials take their value from a Secret (valueFrom), never a literal `value`."""
    pod = pod_template(res)
    if pod is None:
        return []
    return [f"{_container_label(res, c)} sets {e['name']!r} as a literal value, readable by anyone who can read the "
            f"{res.label.split(' ')[0]}; store it in a Kubernetes Secret (from a Pulumi secret) and use "
            "env.valueFrom.secretKeyRef"
            for c, e in _env_vars(pod)
            if isinstance(e.get("name"), str) and e["name"] not in _AWS_KEY_ENV_NAMES
            and _SECRET_ENV_NAME.search(e["name"]) and e.get("value") not in (None, "", UNKNOWN)]


def image_tag_problem(image: str) -> str | None:
    """Why an image reference is not pinned (`latest` or no tag), or None when it has a version tag or a digest."""
    if "@sha256:" in image:
        return None
    last = image.rsplit("/", 1)[-1]
    if ":" not in last:
        return "has no tag (pulls :latest)"
    if last.rsplit(":", 1)[1] == "latest":
        return "uses the mutable tag :latest"
    return None


def check_images_pinned(res: Res, config: Mapping[str, Any]) -> list[str]:
    """Container images (pods and SageMaker models) carry a version tag or digest, never `latest` or nothing."""
    pod = pod_template(res)
    if pod is not None:
        images = [(_container_label(res, c), c.get("image")) for c in pod.containers()]
    elif res.type == "aws:sagemaker/model:Model":
        containers = [res.props.get("primaryContainer")] + _items(res.props.get("containers"))
        images = [(f"a container of {res.label}", get(c, "image")) for c in containers if c]
    else:
        return []
    return [f"{where}: image {image!r} {problem}; pin a version tag (e.g. vllm/vllm-openai:v0.11.0) or a digest"
            for where, image in images if isinstance(image, str) and (problem := image_tag_problem(image))]


@cache
def accepts_tags(type_token: str) -> bool:
    """Whether a pulumi-aws resource type takes a `tags` input (read from the installed pulumi-aws SDK)."""
    _, module_path, class_name = type_token.split(":")
    module_name = module_path.split("/")[0]
    for candidate in ("pulumi_aws" if module_name == "index" else f"pulumi_aws.{module_name}",
                      f"pulumi_aws.{module_name}_"):  # Python keywords get a trailing underscore (lambda_)
        try:
            cls = getattr(importlib.import_module(candidate), class_name, None)
        except ImportError:
            continue
        if cls is not None:
            return "tags" in inspect.signature(cls._internal_init).parameters
    return False


def check_required_tags(res: Res, config: Mapping[str, Any]) -> list[str]:
    """Taggable AWS resources carry every tag in `requiredTags` (their own tags plus the provider's defaultTags)."""
    if not res.type.startswith("aws:") or not accepts_tags(res.type):
        return []
    tags = res.props.get("tags")
    if tags is UNKNOWN:
        return []
    present = {**_mapping(get(res.provider or {}, "defaultTags", "tags")), **_mapping(tags)}
    missing = [t for t in config["requiredTags"] if not present.get(t)]
    if not missing:
        return []
    return [f"{res.label} lacks the tag(s) {', '.join(missing)} needed for cost allocation and ownership; pass the "
            "blueprint's tags (service, environment, owner, cost-center) to every taggable resource"]


def check_audit_logs(res: Res, config: Mapping[str, Any]) -> list[str]:
    """When `auditLoggingRequired`: EKS clusters ship control-plane audit logs (enabledClusterLogTypes has audit)."""
    if res.type != "aws:eks/cluster:Cluster" or not config["auditLoggingRequired"]:
        return []
    log_types = res.props.get("enabledClusterLogTypes")
    if log_types is UNKNOWN or "audit" in _items(log_types):
        return []
    return [f"{res.label} does not send Kubernetes audit logs to CloudWatch; add \"audit\" (and \"authenticator\") to "
            "enabledClusterLogTypes"]


def _eks_version_phase(res: Res, config: Mapping[str, Any]) -> tuple[str, Any] | None:
    """(version, its catalog record or None) of an EKS cluster, and the date it is judged on (`asOf`, default
    today: the day the pack runs)."""
    if res.type != "aws:eks/cluster:Cluster":
        return None
    version = res.props.get("version")
    if not isinstance(version, str):
        return None  # unset: EKS picks its default (a supported version); unknown: judged at `pulumi up`
    from blueprints.catalog.addons import load_platform_catalog

    return version, load_platform_catalog().versions.get(version)


def _as_of(config: Mapping[str, Any]) -> datetime.date:
    value = config.get("asOf")
    return datetime.date.fromisoformat(value) if value else datetime.date.today()


def check_kubernetes_version_supported(res: Res, config: Mapping[str, Any]) -> list[str]:
    """EKS clusters run a Kubernetes version EKS still supports (standard or extended support) on `asOf`."""
    found = _eks_version_phase(res, config)
    if found is None:
        return []
    version, record = found
    if record is None:
        return [f"{res.label} runs Kubernetes {version}, which is not in blueprints/catalog/kubernetes.yaml; use a "
                "catalogued EKS version"]
    on = _as_of(config)
    if record.phase(on) == "unsupported":
        return [f"{res.label} runs Kubernetes {version}, out of EKS extended support since {record.end_of_extended} "
                f"(judged on {on}): EKS upgrades it automatically; plan the upgrade (kubernetes_version in "
                "platform.yaml, or re-plan for the default)"]
    return []


def check_kubernetes_version_extended(res: Res, config: Mapping[str, Any]) -> list[str]:
    """EKS clusters in extended support are flagged: the control plane costs six times the standard price."""
    found = _eks_version_phase(res, config)
    if found is None or found[1] is None:
        return []
    version, record = found
    on = _as_of(config)
    if record.phase(on) != "extended":
        return []
    return [f"{res.label} runs Kubernetes {version}, in EKS extended support since {record.end_of_standard} (until "
            f"{record.end_of_extended}, judged on {on}): the control plane costs $0.60/hour instead of $0.10; upgrade"]


def check_no_privileged_containers(res: Res, config: Mapping[str, Any]) -> list[str]:
    """Containers are not privileged and set securityContext.allowPrivilegeEscalation: false."""
    pod = pod_template(res)
    if pod is None:
        return []
    found = []
    for c in pod.containers():
        privileged = get(c, "securityContext", "privileged")
        escalation = get(c, "securityContext", "allowPrivilegeEscalation")
        if privileged is True:
            found.append(f"{_container_label(res, c)} is privileged (full access to the node); remove "
                         "securityContext.privileged (the NVIDIA device plugin hands out GPUs without it)")
        if escalation is not False and escalation is not UNKNOWN:
            found.append(f"{_container_label(res, c)} allows privilege escalation "
                         f"(allowPrivilegeEscalation is {'unset' if escalation is None else escalation}); set "
                         "securityContext.allowPrivilegeEscalation: false")
    return found


# ---------------------------------------------------------------------------------------------------------------------
# The rule table, and the CrossGuard policies built from it
# ---------------------------------------------------------------------------------------------------------------------

ResourceCheck = Callable[[Res, Mapping[str, Any]], list[str]]
StackCheck = Callable[[Sequence[Res], Mapping[str, Any]], list[Finding]]

_STRING_LIST: Final = {"type": "array", "items": {"type": "string", "minLength": 1}, "uniqueItems": True}
_AS_OF: Final = {"type": "string", "pattern": "^([0-9]{4}-[0-9]{2}-[0-9]{2})?$", "default": "",
                 "description": "judge support on this date (YYYY-MM-DD) instead of the day the pack runs (empty)"}


@dataclass(frozen=True)
class Rule:
    """One guardrail: its policy name, why/how-to-fix description, default level, config schema and check.

    `config` maps each config key to its JSON schema (with a `default`); exactly one of `resource_check` and
    `stack_check` is set.
    """

    name: str
    description: str
    enforcement_level: EnforcementLevel
    resource_check: ResourceCheck | None = None
    stack_check: StackCheck | None = None
    config: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def with_defaults(self, config: Mapping[str, Any] | None) -> dict[str, Any]:
        """The policy config with each key's schema default filled in (`enforcementLevel` dropped)."""
        given = {k: v for k, v in (config or {}).items() if k != "enforcementLevel"}
        return {**{k: s["default"] for k, s in self.config.items() if "default" in s}, **given}

    def findings(self, resources: Sequence[Res], config: Mapping[str, Any]) -> list[Finding]:
        """Run the check over `resources` (each one for a resource check): (resource or None, message) pairs."""
        if self.resource_check is not None:
            return [(res, message) for res in resources for message in self.resource_check(res, config)]
        assert self.stack_check is not None, f"rule {self.name} has no check"
        return self.stack_check(resources, config)

    def config_json_schema(self) -> dict[str, Any]:
        """The JSON schema of this policy's entry in a policy-config file (config keys plus `enforcementLevel`)."""
        return {"type": "object", "additionalProperties": False,
                "properties": {"enforcementLevel": {"enum": [e.value for e in EnforcementLevel]}, **self.config}}


MANDATORY = EnforcementLevel.MANDATORY

RULES: Final[tuple[Rule, ...]] = (
    Rule("instance-types-allowed",
         "Node groups, Karpenter NodePools and SageMaker endpoints use only instance families this environment "
         "allows, so a typo or an oversized GPU type cannot reach the bill. Fix: pick an allowed type, or extend "
         "allowedInstanceFamilies.",
         MANDATORY, resource_check=check_instance_types_allowed,
         config={"allowedInstanceFamilies": {**_STRING_LIST, "description": "families such as g6e, p5, m7i",
                                             "default": ["g5", "g6", "g6e", "p4d", "p4de", "p5", "p5en",
                                                         "c7i", "c7g", "m7i"]},
                 "allowedInstanceTypes": {**_STRING_LIST, "description": "exact types allowed besides the families",
                                          "default": []}}),
    Rule("gpu-quota",
         "The stack's GPUs at full scale (NodePool limits['nvidia.com/gpu'], node group scalingConfig.maxSize x GPUs "
         "per instance) stay within the environment's cap, so the account's GPU quota and budget hold. Fix: lower "
         "the limit or raise maxGpus.",
         MANDATORY, stack_check=check_gpu_quota,
         config={"maxGpus": {"type": "integer", "minimum": 0, "description": "GPUs per stack at full scale",
                             "default": 64}}),
    Rule("gpu-limits-set",
         "GPU containers set resources.limits['nvidia.com/gpu'] (equal to any request, and at least the "
         "tensor-parallel degree), or the scheduler cannot place them on GPUs. Fix: set the limit.",
         MANDATORY, resource_check=check_gpu_limits),
    Rule("gpu-taint-tolerated",
         "Pods that request GPUs or are pinned to GPU nodes tolerate the nvidia.com/gpu taint, or they stay Pending. "
         "Fix: add the toleration {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}.",
         MANDATORY, resource_check=check_gpu_taint_tolerated),
    Rule("tensor-parallel-shm",
         "Tensor parallel > 1 needs a memory-backed /dev/shm (NCCL fails on the 64 MiB default), and an "
         "environment variable named like shm-size does not resize it. Fix: mount an emptyDir with medium Memory at "
         "/dev/shm sized shmGibPerRank x tensor_parallel_size.",
         MANDATORY, resource_check=check_tensor_parallel_shm,
         config={"shmGibPerRank": {"type": "number", "exclusiveMinimum": 0,
                                   "description": "GiB of /dev/shm per tensor-parallel rank", "default": 1}}),
    Rule("startup-probe-budget",
         "The startup probe waits at least the model's download-and-load time (pod annotation "
         "servingblueprints.io/pod-start-s), or the kubelet kills the pod in a restart loop. Fix: raise "
         "startupProbe.failureThreshold.",
         MANDATORY, resource_check=check_startup_probe_budget),
    Rule("node-capacity-covers-autoscaler",
         "NodePools at their GPU limit (node groups at maxSize) fit the autoscaler's maximum replicas (KEDA "
         "maxReplicaCount / HPA maxReplicas) of each GPU workload, or scale-out stalls with Pending pods. Fix: raise "
         "the NodePool's limit.",
         MANDATORY, stack_check=check_node_capacity),
    Rule("no-spot-capacity",
         "Node groups and NodePools run on on-demand capacity: spot GPUs are reclaimed mid-request. Fix: "
         "capacityType ON_DEMAND / capacity-type [on-demand]; non-production environments lower this policy's "
         "enforcementLevel.",
         MANDATORY, resource_check=check_no_spot),
    Rule("bucket-encrypted-kms",
         "S3 buckets encrypt objects with KMS (auditable key use, revocable access). Fix: add a "
         "BucketServerSideEncryptionConfiguration with sseAlgorithm aws:kms.",
         MANDATORY, stack_check=check_bucket_encrypted),
    Rule("bucket-versioned",
         "S3 buckets are versioned, so overwritten or deleted model weights can be restored. Fix: add a "
         "BucketVersioning with status Enabled.",
         MANDATORY, stack_check=check_bucket_versioned),
    Rule("bucket-public-access-blocked",
         "S3 buckets block every form of public access. Fix: add a BucketPublicAccessBlock with all four flags true.",
         MANDATORY, stack_check=check_bucket_public_access_blocked),
    Rule("private-endpoints",
         "In a private-only environment nothing is reachable from the internet: no internet-facing LoadBalancer "
         "Service, no public EKS API endpoint, SageMaker models in a VPC. Fix: internal load balancer scheme, "
         "endpointPublicAccess false, Model vpcConfig.",
         MANDATORY, resource_check=check_private_endpoints,
         config={"privateOnly": {"type": "boolean", "description": "the environment is private-only",
                                 "default": True}}),
    Rule("sagemaker-endpoint-kms",
         "SageMaker endpoint configurations encrypt the instances' storage with a KMS key. Fix: set kmsKeyArn.",
         MANDATORY, resource_check=check_sagemaker_kms),
    Rule("region-allowed",
         "AWS resources live only in allowed regions (data residency). The region is the resource's own region "
         "input, else its provider's (from `aws:region`). Fix: set aws:region to an allowed region.",
         MANDATORY, resource_check=check_region_allowed,
         config={"allowedRegions": {**_STRING_LIST, "minItems": 1, "description": "AWS regions, e.g. us-east-1",
                                    "default": ["us-east-1", "us-west-2"]}}),
    Rule("no-static-aws-credentials",
         "No static AWS access keys in pod specs, Kubernetes Secrets or the AWS provider: keys leak and never expire. "
         "Fix: give pods an IAM identity (EKS Pod Identity / IRSA).",
         MANDATORY, resource_check=check_no_static_aws_credentials),
    Rule("no-plaintext-secrets",
         "Pod environment variables named like credentials (token, password, secret, API key) come from a Secret "
         "via valueFrom, never a literal value in the pod spec. Fix: a Kubernetes Secret built from a Pulumi secret "
         "and env.valueFrom.secretKeyRef.",
         MANDATORY, resource_check=check_no_plaintext_secrets),
    Rule("images-pinned",
         "Container images carry a version tag or digest, never `latest` or no tag, so every replica and rollback "
         "runs the same code. Fix: pin a version tag.",
         MANDATORY, resource_check=check_images_pinned),
    Rule("required-tags",
         "Taggable AWS resources carry the cost-allocation and ownership tags. Fix: pass the blueprint's tags to "
         "every taggable resource (or the provider's defaultTags).",
         MANDATORY, resource_check=check_required_tags,
         config={"requiredTags": {**_STRING_LIST, "description": "tag keys every taggable AWS resource carries",
                                  "default": ["service", "environment", "owner", "cost-center"]}}),
    Rule("cluster-audit-logs",
         "EKS clusters send control-plane audit logs to CloudWatch when audit logging is required. Fix: add audit to "
         "enabledClusterLogTypes.",
         MANDATORY, resource_check=check_audit_logs,
         config={"auditLoggingRequired": {"type": "boolean", "description": "audit logs are required",
                                          "default": True}}),
    Rule("kubernetes-version-supported",
         "EKS clusters run a Kubernetes version EKS still supports on the day the pack runs (or `asOf`): past "
         "extended support EKS upgrades the cluster by itself. Fix: upgrade (kubernetes_version in platform.yaml).",
         MANDATORY, resource_check=check_kubernetes_version_supported,
         config={"asOf": _AS_OF}),
    Rule("kubernetes-version-extended-support",
         "EKS clusters in extended support are flagged: the control plane costs $0.60/hour instead of $0.10. Fix: "
         "upgrade to a version in standard support.",
         EnforcementLevel.ADVISORY, resource_check=check_kubernetes_version_extended,
         config={"asOf": _AS_OF}),
    Rule("no-privileged-containers",
         "Containers are not privileged and cannot escalate privileges: a compromised model server must not own the "
         "GPU node. Fix: securityContext {privileged: false, allowPrivilegeEscalation: false}.",
         MANDATORY, resource_check=check_no_privileged_containers),
)

RULES_BY_NAME: Final = {r.name: r for r in RULES}


def _crossguard_res(type_: str, name: str, urn: str, props: Mapping[str, Any], parent: str | None,
                    provider: Any) -> Res:
    return Res(type=type_, name=name, urn=urn, props=plain(props), parent=parent,
               provider=plain(provider.props) if provider is not None else None)


def res_from_args(args: ResourceValidationArgs) -> Res:
    """A CrossGuard resource-validation request as a `Res` (parent URN from the options)."""
    return _crossguard_res(args.resource_type, args.name, args.urn, args.props, args.opts.parent, args.provider)


def res_from_policy_resource(resource: PolicyResource) -> Res:
    """A CrossGuard stack resource as a `Res` (parent URN from the parent resource, else the options)."""
    parent = resource.parent.urn if resource.parent is not None else resource.opts.parent
    return _crossguard_res(resource.resource_type, resource.name, resource.urn, resource.props, parent,
                           resource.provider)


def _policy(rule: Rule) -> ResourceValidationPolicy | StackValidationPolicy:
    schema = PolicyConfigSchema(properties={k: dict(v) for k, v in rule.config.items()}) if rule.config else None
    if rule.resource_check is not None:

        def validate_resource(args: ResourceValidationArgs, report: ReportViolation) -> None:
            for _, message in rule.findings([res_from_args(args)], rule.with_defaults(args.get_config())):
                report(message, None)  # CrossGuard attaches the resource's URN

        return ResourceValidationPolicy(rule.name, rule.description, validate_resource, rule.enforcement_level,
                                        schema)

    def validate_stack(args: StackValidationArgs, report: ReportViolation) -> None:
        resources = [res_from_policy_resource(r) for r in args.resources]
        for res, message in rule.findings(resources, rule.with_defaults(args.get_config())):
            report(message, res.urn if res is not None else None)

    return StackValidationPolicy(rule.name, rule.description, validate_stack, rule.enforcement_level, schema)


#: The CrossGuard policies, one per rule, in `RULES` order.
POLICIES: Final = [_policy(rule) for rule in RULES]
