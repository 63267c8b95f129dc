"""The resource view every rule reads, and the readers rules share (pod templates, quantities, instance types).

A rule sees resources as `Res` records (type, name, URN, parent, props in engine camelCase, the provider's props).
Values the engine does not know yet (`pulumi preview` before a dependency exists) arrive as `UNKNOWN`; a check that
needs such a value skips it (the rule runs again with known values at `pulumi up`). Missing values mean the
provider's or Kubernetes' default and are judged as such (e.g. a missing `endpointPublicAccess` is public).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from pulumi_policy import proxy as policy_proxy

from blueprints.catalog import load_catalog



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


def items(value: Any) -> list[Any]:
    """A list property as a list (missing or unknown: empty)."""
    return list(value) if isinstance(value, list) else []


def mapping(value: Any) -> Mapping[str, Any]:
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
        containers = [c for key in ("initContainers", "containers") for c in items(self.spec.get(key))]
        return any(self.spec.get(k) is UNKNOWN or any(get(c, k) is UNKNOWN for c in containers) for k in keys)

    def containers(self) -> list[Mapping[str, Any]]:
        """Init containers, then containers (each a camelCase container spec)."""
        return [c for key in ("initContainers", "containers") for c in items(self.spec.get(key))
                if isinstance(c, Mapping)]


def pod_template(res: Res) -> PodTemplate | None:
    """The pod template of a Pod/Deployment/StatefulSet/DaemonSet/ReplicaSet/Job/CronJob; None for other types."""
    path = POD_TEMPLATE_PATHS.get(res.type)
    if path is None:
        return None
    template = get(res.props, *path) if path else res.props
    return PodTemplate(annotations=mapping(get(template, "metadata", "annotations")),
                       spec=mapping(get(template, "spec")))


def container_label(res: Res, container: Mapping[str, Any]) -> str:
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


def as_int(value: Any) -> int | None:
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
    for req in items(get(res.props, "spec", "template", "spec", "requirements")):
        if get(req, "key") == key and get(req, "operator") == "In":
            return [v for v in items(get(req, "values")) if isinstance(v, str)]
    return None


def instance_types(res: Res) -> list[str]:
    """The known instance types a node group, Karpenter NodePool or SageMaker endpoint configuration runs on."""
    if res.type == NODE_GROUP:
        found = items(res.props.get("instanceTypes"))
    elif res.type == NODE_POOL:
        found = node_pool_requirement(res, INSTANCE_TYPE_LABELS[0]) or []
    elif res.type == "aws:sagemaker/endpointConfiguration:EndpointConfiguration":
        found = [get(v, "instanceType") for v in items(res.props.get("productionVariants"))]
    else:
        found = []
    return [t for t in found if isinstance(t, str)]


def node_pool_gpu_limit(res: Res) -> int | None:
    """A NodePool's `limits['nvidia.com/gpu']` (None when unset or unknown)."""
    return as_int(get(res.props, "spec", "limits", GPU_RESOURCE))


def gpu_container_limit(container: Mapping[str, Any]) -> int | None:
    return as_int(get(container, "resources", "limits", GPU_RESOURCE))


def requests_gpus(pod: PodTemplate) -> bool:
    return any((as_int(get(c, "resources", key, GPU_RESOURCE)) or 0) > 0
               for c in pod.containers() for key in ("limits", "requests"))


def is_gpu_node_label(key: str, value: Any) -> bool:
    if key in GPU_NODE_LABELS:
        return True
    return key in INSTANCE_TYPE_LABELS and isinstance(value, str) and (gpus_per_instance(value) or 0) > 0


def targets_gpu_nodes(pod: PodTemplate) -> bool:
    """nodeSelector or required node affinity selects GPU nodes (GPU instance types or GPU node labels)."""
    if any(is_gpu_node_label(k, v) for k, v in mapping(pod.spec.get("nodeSelector")).items()):
        return True
    terms = items(get(pod.spec, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution",
                       "nodeSelectorTerms"))
    for term in terms:
        for expr in items(get(term, "matchExpressions")):
            key, operator = get(expr, "key"), get(expr, "operator")
            if operator == "Exists" and key in GPU_NODE_LABELS:
                return True
            if operator == "In" and any(is_gpu_node_label(key, v) for v in items(get(expr, "values"))):
                return True
    return False


def tolerates_gpu_taint(pod: PodTemplate) -> bool:
    for tol in items(pod.spec.get("tolerations")):
        key, operator, effect = get(tol, "key"), get(tol, "operator"), get(tol, "effect")
        if UNKNOWN in (key, operator, effect):
            return True  # judged at `pulumi up`
        if effect not in (None, "", "NoSchedule"):
            continue
        if (key in (None, "") and operator == "Exists") or key == GPU_TAINT_KEY:
            return True
    return False




def env_vars(pod: PodTemplate) -> Iterator[tuple[Mapping[str, Any], Mapping[str, Any]]]:
    """(container, env entry) of every container's environment."""
    for c in pod.containers():
        for e in items(c.get("env")):
            if isinstance(e, Mapping):
                yield c, e


def pod_templates(resources) -> list[tuple[Res, PodTemplate]]:
    """Every workload with a pod template, and its template."""
    return [(r, pod) for r in resources if (pod := pod_template(r)) is not None]
