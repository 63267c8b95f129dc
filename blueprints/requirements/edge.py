"""What an edge-cluster requirements file (`operations.platform: edge-cluster`) may not ask for, checked where
the file is loaded so a bad value exits 2 naming the field and the fix.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from blueprints.core.errors import FieldProblem
from blueprints.requirements.hosting import Accelerator, OperationsPreference, Platform
from blueprints.requirements.model import MODEL_FILE

if TYPE_CHECKING:
    from blueprints.requirements.service import Requirements


def edge_problems(req: Requirements) -> list[FieldProblem]:
    """What an edge-cluster requirements file may not ask for, and edge-only settings elsewhere; each names its
    field, the fix and the rule (`blueprints.requirements.rules`). Empty when consistent."""
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
