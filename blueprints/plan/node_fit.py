"""Whether the replicas a plan packs on a node fit it: the pod's requests (`blueprints.contracts.placement
.serving_pod_requests`, what the program renders) against one node's allocatable after kube-reserved and every
DaemonSet that runs there (`allocatable`, `daemonset_reserves`), the very code the deployability checks run over the
rendered manifests. The plan bills `compute.replicas_per_node` replicas to a node; this proves a node holds them.

Pure.
"""

from __future__ import annotations

from blueprints.catalog import load_catalog
from blueprints.catalog.addons import load_platform_catalog
from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.placement import (
    allocatable, daemonset_reserves, node_ephemeral_gib, replicas_per_node, serving_pod_requests,
)
from blueprints.contracts.platform import PlatformConfig
from blueprints.contracts.sections import Archetype
from blueprints.plan.owned_nodes import EDGE_NODE, OwnedNodeShape
from blueprints.requirements.hosting import Accelerator


def node_fit_problem(bp: Blueprint, platform: PlatformConfig | None, *, cluster_addons: list[str]) -> str | None:
    """Why a node cannot hold the replicas the plan packs on it (naming the requests, the allocatable and the
    DaemonSets), or None when it can, or when its nodes are not ours to know (SageMaker, an existing cluster).

    Args:
        bp: the planned service.
        platform: the platform it lands on (its node classes and add-ons), None off a platform.
        cluster_addons: the add-ons an edge cluster declares (its DaemonSets).
    """
    c = bp.compute
    if bp.archetype is Archetype.SAGEMAKER_ENDPOINT or bp.platform.kind == "existing-cluster":
        return None
    gpu = c.accelerator is Accelerator.NVIDIA_GPU
    pcat = load_platform_catalog()
    if c.owned_nodes is not None:
        shape = OwnedNodeShape(instance_type=EDGE_NODE, gpu=None, gpu_count=0, vcpus=c.vcpus_per_node,
                               memory_gib=c.memory_gib_per_node, cpu_arch=c.cpu_arch.value, usd_per_hour=0.0,
                               gflops_per_vcpu=1.0, count=c.owned_nodes)
        have = allocatable(shape, ephemeral_gib=None,
                           daemonsets=daemonset_reserves(pcat, cluster_addons, gpu_node=False, eks_addons=False))
        where = "an owned node"
    else:
        if platform is None:
            return None
        node_class = next((n for n in platform.node_classes if n.name == ("gpu" if gpu else "cpu")), None)
        ephemeral = None if node_class is None else node_ephemeral_gib(
            c.instance_type, instance_store_raid0=node_class.instance_store_raid0,  # type: ignore[arg-type]
            root_volume_gib=node_class.root_volume_gib)
        have = allocatable(load_catalog().instance(c.instance_type),  # type: ignore[arg-type]
                           ephemeral_gib=ephemeral,
                           daemonsets=daemonset_reserves(pcat, [a.id for a in platform.addons], gpu_node=gpu,
                                                         eks_addons=True))
        where = f"a {c.instance_type} node of {platform.stack}"
    want = serving_pod_requests(bp)
    fits = replicas_per_node(want, have)
    if fits >= c.replicas_per_node:
        return None
    over = [k for k, v in sorted(have.items()) if k in want and want[k] * c.replicas_per_node > v]
    short = ", ".join(f"{_amount(k, want[k] * c.replicas_per_node)} > {_amount(k, have[k])}" for k in over)
    fix = ("give the nodes more " + " and ".join(EDGE_FIELDS.get(k, k) for k in over) if c.owned_nodes is not None
           else "lower the replicas' requests or choose another instance type")
    return (f"the plan packs {c.replicas_per_node} replica(s) on {where}, but after kube-reserved and the per-node "
            f"DaemonSets it holds {fits} ({short}): {fix}")


#: The field of `hardware.edge_nodes` that gives an owned node more of a resource.
EDGE_FIELDS = {"cpu": "vCPUs (hardware.edge_nodes.vcpus)", "memory": "memory (hardware.edge_nodes.memory_gib)"}


def _amount(resource: str, value) -> str:
    if resource == "cpu":
        return f"{float(value):g} CPU"
    if resource in ("memory", "ephemeral-storage"):
        return f"{float(value) / 2**30:.2f} GiB {resource}"
    return f"{value} {resource}"
