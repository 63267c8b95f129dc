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

from blueprints import defaults
from blueprints.catalog import InstanceType
from blueprints.errors import FieldProblem
from blueprints.requirements import Requirements
from blueprints.requirements_model import ModelFormat
from blueprints.requirements_platform import Accelerator, EdgeNodes, OperationsPreference, Platform

#: The file a Triton backend loads from a model's version folder (Triton model repository docs, "Model Files"):
#: onnxruntime `model.onnx`, pytorch `model.pt`: the formats an `https://` source (one file) can be.
MODEL_FILE = {ModelFormat.ONNX: "model.onnx", ModelFormat.TORCHSCRIPT: "model.pt", ModelFormat.PYTORCH: "model.pt"}
#: What the plan and the report call an edge cluster's node type (it has no EC2 instance type).
EDGE_NODE = "edge node"


class OwnedNodeShape(InstanceType):
    """An edge cluster's owned node as the sizing search sees a node type (`blueprints.options_nongen`): no EC2
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


def edge_problems(req: Requirements) -> list[FieldProblem]:
    """What an edge-cluster requirements file may not ask for, and edge-only settings elsewhere; each names its
    field, the fix and the rule (`blueprints.input_rules`). Empty when consistent."""
    edge = req.operations.platform is Platform.EDGE_CLUSTER
    nodes = req.hardware.edge_nodes
    sources = [((*where, "weights_uri"), spec.weights_uri) for spec, _, where, _ in req.model_entries()]
    one_file = [((*where, "format"), spec.format) for spec, _, where, _ in req.model_entries()
                if spec.weights_uri.startswith("https://") and spec.format not in MODEL_FILE]
    rule = "edge-cluster-settings"
    if not edge:
        problems = []
        if nodes is not None:
            problems.append(FieldProblem(("hardware", "edge_nodes"), "edge_nodes describes an edge cluster's owned "
                                         "nodes; set operations.platform: edge-cluster, or remove it", rule=rule))
        problems += [FieldProblem(at, f"an https:// source is for edge clusters (the pod downloads it directly); on "
                                  f"{req.operations.platform.value} use an s3:// or hf:// source, copied into the "
                                  "stack's model store", rule=rule) for at, uri in sources if uri.startswith("https://")]
        return problems
    problems = []
    if nodes is None:
        problems.append(FieldProblem(("hardware", "edge_nodes"), "operations.platform edge-cluster needs "
                                     "hardware.edge_nodes: the owned nodes the service may use (count, vcpus, "
                                     "memory_gib, cpu_arch; optional monthly_usd_per_node)", rule=rule))
    if Accelerator.CPU not in req.hardware.accelerators:
        problems.append(FieldProblem(("hardware", "accelerators"), f"{[a.value for a in req.hardware.accelerators]}: "
                                     "an edge cluster's hardware.edge_nodes are CPU nodes (no GPU to schedule on); "
                                     "add cpu, or serve GPU models on operations.platform eks or existing-cluster",
                                     rule=rule))
    if nodes is not None and req.hardware.cpu_arch is not None and req.hardware.cpu_arch != nodes.cpu_arch:
        problems.append(FieldProblem(("hardware", "cpu_arch"), f"{req.hardware.cpu_arch.value} contradicts "
                                     f"hardware.edge_nodes.cpu_arch {nodes.cpu_arch.value}: the nodes are what they "
                                     "are; remove hardware.cpu_arch", rule=rule))
    if req.hardware.allowed_instance_families:
        problems.append(FieldProblem(("hardware", "allowed_instance_families"), "restricts EC2 types; an edge cluster "
                                     "runs on its owned hardware.edge_nodes: remove it", rule=rule))
    if req.operations.preference is OperationsPreference.MANAGED:
        problems.append(FieldProblem(("operations", "preference"), "managed (a SageMaker endpoint) contradicts "
                                     "operations.platform edge-cluster (self-hosted on owned nodes): set preference "
                                     "self-hosted or any", rule=rule))
    if req.compliance.customer_managed_kms:
        problems.append(FieldProblem(("compliance", "customer_managed_kms"), "encrypts the stack's model store, which "
                                     "an edge-cluster stack does not keep (its pods read the source directly): "
                                     "encrypt the source bucket with your key (and let the Roles Anywhere role "
                                     "kms:Decrypt it), then remove the flag", rule=rule))
    problems += [FieldProblem(("environments", env, "spot"), "an edge cluster's nodes are owned, not EC2 capacity; "
                              "remove spot", rule=rule) for env, spec in req.environments.items() if spec.spot]
    problems += [FieldProblem(at, "an edge cluster has no model store for the weights sync Job of an hf:// source; "
                              "give an s3:// source (read with IAM Roles Anywhere) or an https:// URL of the file "
                              "with sha256", rule=rule) for at, uri in sources if uri.startswith("hf://")]
    problems += [FieldProblem(at, f"{fmt.value}: an https:// source is one file, which Triton loads for formats "
                              f"{sorted(f.value for f in MODEL_FILE)}; export the model to one of them or give an "
                              "s3:// prefix", rule=rule) for at, fmt in one_file]
    if req.exposure.tls_certificate_arn:
        problems.append(FieldProblem(("exposure", "tls_certificate_arn"), "an ACM certificate for an AWS load "
                                     "balancer, which an edge cluster has none of: give exposure.tls_secret_name (a "
                                     "kubernetes.io/tls Secret you create in the service's namespace)", rule=rule))
    # The credential helper runs as a native sidecar (Kubernetes >= defaults.NATIVE_SIDECAR_MIN_KUBERNETES): every
    # version operations.kubernetes_version accepts is newer (tests/test_edge_requirements.py).
    uses_helper = any(uri.startswith("s3://") for _, uri in sources)
    if req.operations.roles_anywhere is not None and not uses_helper:
        problems.append(FieldProblem(("operations", "roles_anywhere"), "reads s3:// sources, and no model here has "
                                     "one: remove it", rule=rule))
    return problems


def edge_capacity_problem(*, env: str, nodes: OwnedNodeShape, replicas: int, per_node: int, cpu: int) -> str | None:
    """The shortfall when `nodes.count` nodes of `per_node` replicas cannot hold the peak's `replicas`; None when they
    can.

    Example: 5 replicas at 2 per node need 3 nodes; with 2 nodes the message asks for 1 more.
    """
    need = math.ceil(replicas / per_node)
    if need <= nodes.count:
        return None
    return (f"environments.{env}: the peak needs {replicas} replica(s) of {cpu} vCPU ({per_node} per node) within "
            f"the SLO, {need} node(s) of {nodes.vcpus} vCPU / {nodes.memory_gib:g} GiB, but "
            f"hardware.edge_nodes.count is {nodes.count}: add {need - nodes.count} node(s) (raise count), lower "
            f"environments.{env}.traffic_scale or traffic.peak_requests_per_s, or relax slo.latency_p95_ms")
