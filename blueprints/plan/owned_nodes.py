"""Edge clusters (`operations.platform: edge-cluster`): owned nodes of one known shape, no cloud load balancer, no EKS
Pod Identity, no EC2 prices.

- `edge_problems`: what an edge-cluster requirements file may not ask for (checked where the file is loaded, so a bad
  value exits 2 naming the field and the fix);
- `OwnedNodeShape` / `owned_node_shape`: the declared node shape as the sizing search sees a node type: its vCPUs,
  memory and architecture, its ONNX Runtime throughput per vCPU, and its monthly cost (owned hardware, or $0);
- `edge_capacity_problem`: the nodes cannot carry the peak (with the rollout's extra replica), naming the shortfall.

Pure: no Pulumi, network or clock.
"""

from __future__ import annotations

import math

from pydantic import Field

from blueprints.core import defaults
from blueprints.core.errors import Fix
from blueprints.catalog import InstanceType
from blueprints.requirements.hosting import EdgeNodes

#: What the plan and the report call an edge cluster's node type (it has no EC2 instance type).
EDGE_NODE = "edge node"


class OwnedNodeShape(InstanceType):
    """An edge cluster's owned node as the sizing search sees a node type (`blueprints.plan.options.nongen`): no EC2
    type, no GPU, the operator's monthly cost per node (or $0), and ONNX Runtime's throughput per vCPU on it."""

    usd_per_hour: float = Field(ge=0, description="the owned node's monthly cost / hours per month; 0 when not given")
    gflops_per_vcpu: float = Field(gt=0, description="effective FP32 GFLOP/s per vCPU of ONNX Runtime on the node")
    count: int = Field(ge=1, description="nodes the service may use")

    @property
    def family(self) -> str:
        return "edge"

    def describe(self) -> str:
        """`3 owned arm64 nodes of 16 vCPU / 32 GiB`."""
        return (f"{self.count} owned {self.cpu_arch} node(s) of {self.vcpus} vCPU / {self.memory_gib:g} GiB")


def owned_node_shape(nodes: EdgeNodes, *, hours_per_month: float) -> OwnedNodeShape:
    """The declared edge node shape, priced at `monthly_usd_per_node` (or $0) per month."""
    return OwnedNodeShape(
        instance_type=EDGE_NODE, gpu=None, gpu_count=0, vcpus=nodes.vcpus, memory_gib=nodes.memory_gib,
        cpu_arch=nodes.cpu_arch.value, usd_per_hour=(nodes.monthly_usd_per_node or 0.0) / hours_per_month,
        gflops_per_vcpu=nodes.gflops_per_vcpu or defaults.EDGE_CPU_GFLOPS_PER_VCPU[nodes.cpu_arch.value],
        count=nodes.count)


def edge_capacity_problem(*, env: str, nodes: OwnedNodeShape, replicas: int, per_node: int, cpu: int) -> str | None:
    """The shortfall when `nodes.count` nodes of `per_node` replicas cannot hold the peak's `replicas`; None when they
    can.

    Example: 5 replicas at 2 per node need 3 nodes; with 2 nodes the message asks for 1 more, in the words of
    `edge_count_fix`.
    """
    need = edge_nodes_needed(replicas, per_node)
    if need <= nodes.count:
        return None
    return (f"environments.{env}: the peak needs {replicas} replica(s) of {cpu} vCPU ({per_node} per node) within "
            f"the SLO, {need} node(s) of {nodes.vcpus} vCPU / {nodes.memory_gib:g} GiB, but "
            f"hardware.edge_nodes.count is {nodes.count}: add {need - nodes.count} node(s) "
            f"({edge_count_fix(need).text}), lower "
            f"environments.{env}.traffic_scale or traffic.peak_requests_per_s, or relax slo.latency_p95_ms")


def edge_nodes_needed(replicas: int, per_node: int) -> int:
    """Owned nodes that hold `replicas` at `per_node` replicas a node (ceil)."""
    return math.ceil(replicas / per_node)


def edge_count_fix(nodes: int) -> Fix:
    """The fix "raise hardware.edge_nodes.count to >= <nodes>"."""
    return Fix("hardware.edge_nodes.count", nodes, f"raise hardware.edge_nodes.count to >= {nodes}")
