"""What one node gives pods, and what a serving pod asks of it: one rule for the planner and the preview.

The planner keeps only replica shapes whose pods fit a node of their instance type (`serving_pod_fits`,
`blueprints.plan.options.nongen`); the preview's `schedulable` check (`blueprints.review.deployability.scheduling`)
fails a workload whose pods do not, with the same `allocatable` formula. A plan the planner writes therefore never
has pods its own preview finds too big for their node (issue 23, class 7: a Triton pod asking 6.1 GiB of a
c7g.xlarge's 5.8 GiB).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from decimal import Decimal

from blueprints.catalog import InstanceType, load_catalog
from blueprints.catalog.addons import load_platform_catalog
from blueprints.core import defaults

GPU = "nvidia.com/gpu"
#: Requests (== limits) of the authenticating proxy (Envoy) in front of every self-hosted server
#: (`components.access.proxy_container`), millicores and MiB.
PROXY_CPU_M = 100
PROXY_MEMORY_MI = 128


def allocatable(instance_type: str | InstanceType, *, ephemeral_gib: float | None,
                daemonsets: Iterable[tuple[int, int]]) -> dict[str, Decimal]:
    """What pods can request on one node of `instance_type` (a catalog name, or a shape such as an edge cluster's
    owned node): capacity minus the hypervisor's share, kube-reserved, the eviction threshold and the per-node
    DaemonSets ((cpu_m, memory_mi) each), as Karpenter and the EKS AMI compute it (`defaults.VM_MEMORY_OVERHEAD_FRACTION`,
    `KUBE_RESERVED_*`; on an owned node the same formula errs on the safe side). Ephemeral storage is left out when
    unknown (None). Keys: `cpu` (cores), `memory` and `ephemeral-storage` (bytes), `nvidia.com/gpu`."""
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


def every_daemonset(*, gpu_node: bool, eks: bool = True) -> list[tuple[int, int]]:
    """(cpu_m, memory_mi) of every catalogued DaemonSet that may run on a node (every Helm add-on with one and, on
    EKS, every EKS add-on; the GPU-only ones on a GPU node): the most a node gives up, whichever add-ons its
    platform installs or its cluster declares."""
    pcat = load_platform_catalog()
    found = [a.daemonset for a in [*(pcat.eks.values() if eks else []), *pcat.helm.values()] if a.daemonset]
    return [(d.cpu_m, d.memory_mi) for d in found if gpu_node or not d.gpu_nodes_only]


def serving_pod_requests(*, cpu: float, memory_gib: float) -> tuple[Decimal, Decimal]:
    """(cores, bytes) a self-hosted serving pod requests with a server of `cpu` cores and `memory_gib` GiB: the
    server's memory in whole GiB as the program writes it (rounded up) plus the authenticating proxy."""
    return (Decimal(str(cpu)) + Decimal(PROXY_CPU_M) / 1000,
            Decimal(math.ceil(memory_gib - 1e-9)) * 2**30 + Decimal(PROXY_MEMORY_MI) * 2**20)


def serving_pod_fits(instance_type: str | InstanceType, *, per_node: int, cpu: float, memory_gib: float,
                     eks: bool = True) -> bool:
    """`per_node` serving pods (`serving_pod_requests`) fit one node of `instance_type` (an EC2 type on EKS, or an
    edge cluster's owned node shape with `eks=False`) beside every DaemonSet that may run there (`every_daemonset`),
    CPU and memory as `allocatable` counts them."""
    inst = load_catalog().instance(instance_type) if isinstance(instance_type, str) else instance_type
    have = allocatable(inst, ephemeral_gib=None, daemonsets=every_daemonset(gpu_node=inst.gpu_count > 0, eks=eks))
    want_cpu, want_memory = serving_pod_requests(cpu=cpu, memory_gib=memory_gib)
    return per_node * want_cpu <= have["cpu"] and per_node * want_memory <= have["memory"]
