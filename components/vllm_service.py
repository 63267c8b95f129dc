"""VllmService: the vLLM OpenAI-compatible server as a Kubernetes Deployment on GPU nodes."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from blueprints import defaults
from blueprints.blueprint import Blueprint, VllmEngine
from components.labels import (
    ANNOTATION_POD_START_S,
    ANNOTATION_TENSOR_PARALLEL,
    ANNOTATION_WEIGHTS_GIB,
    recommended_labels,
    selector_labels,
)
from components.weights_storage import MODELS_PREFIX

#: Taint on GPU node pools; every pod placed there must tolerate it (EKS GPU AMI / NVIDIA convention).
GPU_TAINT_KEY = "nvidia.com/gpu"
#: Well-known node label set by the kubelet on every node (kubernetes.io/docs/reference/labels-annotations-taints).
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
MODELS_MOUNT = "/models"


@dataclass
class VllmServiceArgs:
    """Inputs of `VllmService`.

    Args:
        blueprint: the planned stack (archetype `vllm-gpu`).
        bucket_name: the model store bucket holding `models/<name>/`.
        service_account_annotations: e.g. IRSA's `eks.amazonaws.com/role-arn`; empty with EKS Pod Identity.
        namespace: where the objects go. Defaults to the blueprint's namespace.
    """

    blueprint: Blueprint
    bucket_name: pulumi.Input[str]
    service_account_annotations: dict[str, pulumi.Input[str]] | None = None
    namespace: pulumi.Input[str] | None = None


def vllm_args(engine: VllmEngine, model_name: str) -> list[str]:
    """The `vllm serve` arguments: each one a documented engine flag (vllm/engine/arg_utils.py)."""
    args = [
        f"{MODELS_MOUNT}/{model_name}",
        f"--served-model-name={model_name}",
        f"--tensor-parallel-size={engine.tensor_parallel_size}",
        f"--gpu-memory-utilization={engine.gpu_memory_utilization}",
        f"--max-model-len={engine.max_model_len}",
        f"--max-num-seqs={engine.max_num_seqs}",
        f"--dtype={engine.dtype}",
        f"--kv-cache-dtype={engine.kv_cache_dtype}",
        f"--port={engine.port}",
    ]
    if engine.quantization:
        args.append(f"--quantization={engine.quantization}")
    return args


def _gi(value: float) -> str:
    return f"{math.ceil(value)}Gi"


class VllmService(pulumi.ComponentResource):
    """vLLM on GPU nodes: ServiceAccount, Deployment and ClusterIP Service.

    The pod copies its model from S3 in an init container using the pod's IAM identity (no static keys), with an
    explicit region; mounts a memory-backed /dev/shm sized by tensor parallel for NCCL; requests exactly
    `tensor_parallel_size` GPUs; tolerates the GPU taint and selects the planned instance type; and its startup
    probe and progress deadline follow the blueprint's startup budget.

    Outputs: `service_name`, `deployment_name`, `endpoint` (in-cluster URL).
    """

    def __init__(self, name: str, args: VllmServiceArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("servingblueprints:index:VllmService", name, None, opts)
        bp = args.blueprint
        if not isinstance(bp.engine, VllmEngine):
            raise ValueError(f"VllmService needs a vllm-gpu blueprint, got archetype {bp.archetype.value}")
        namespace = args.namespace or bp.platform.namespace
        labels = recommended_labels(name="vllm", instance=bp.stack, component="server",
                                    version=bp.engine.image.rsplit(":", 1)[-1])
        child = pulumi.ResourceOptions(parent=self)
        self.service_account = k8s.core.v1.ServiceAccount(
            f"{name}-sa",
            metadata={"name": f"{bp.service}-vllm", "namespace": namespace, "labels": labels,
                      "annotations": args.service_account_annotations or {}},
            automount_service_account_token=True,
            opts=child)
        self.deployment = k8s.apps.v1.Deployment(
            f"{name}-deployment",
            metadata={"name": f"{bp.service}-vllm", "namespace": namespace, "labels": labels},
            spec=_deployment_spec(bp, labels, args.bucket_name, self.service_account.metadata.name),
            opts=child)
        self.service = k8s.core.v1.Service(
            f"{name}-service",
            metadata={"name": f"{bp.service}-vllm", "namespace": namespace, "labels": labels},
            spec={"type": "ClusterIP", "selector": selector_labels(labels),
                  "ports": [{"name": "http", "port": bp.engine.port, "target_port": "http", "protocol": "TCP"}]},
            opts=child)
        self.service_name = self.service.metadata.name
        self.deployment_name = self.deployment.metadata.name
        self.endpoint = pulumi.Output.concat("http://", self.service.metadata.name, ".", namespace,
                                             f".svc.cluster.local:{bp.engine.port}/v1")
        self.register_outputs({"service_name": self.service_name, "deployment_name": self.deployment_name,
                               "endpoint": self.endpoint})


def _deployment_spec(bp: Blueprint, labels: dict[str, str], bucket_name: pulumi.Input[str],
                     service_account: pulumi.Input[str]) -> dict:
    engine: VllmEngine = bp.engine  # type: ignore[assignment]
    model = bp.model
    c = bp.compute
    startup = bp.startup
    weights_volume_gib = model.weights_gib * 1.1 + 2
    resources = {
        "nvidia.com/gpu": str(c.gpus_per_replica),
        "cpu": str(c.cpu_per_replica),
        "memory": _gi(c.memory_gib_per_replica),
        "ephemeral-storage": _gi(c.ephemeral_storage_gib_per_replica),
    }
    # Startup probe (period 10 s) covers download + load + warm-up twice over; the init container does the download,
    # so this is generous, never short.
    startup_failures = math.ceil(2 * startup.pod_start_s / 10)
    no_escalation = {"allowPrivilegeEscalation": False, "privileged": False,
                     "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}
    return {
        "replicas": max(1, bp.autoscaling.min_replicas),
        "selector": {"match_labels": selector_labels(labels)},
        # Covers a cold start on a new GPU node: provisioning, image pull, download and load (+50 %).
        "progress_deadline_seconds": math.ceil(startup.total_s * 1.5),
        "strategy": {"type": "RollingUpdate", "rolling_update": {"max_surge": 1, "max_unavailable": 0}},
        "template": {
            "metadata": {"labels": labels, "annotations": {
                ANNOTATION_WEIGHTS_GIB: f"{model.weights_gib:g}",
                ANNOTATION_POD_START_S: str(startup.pod_start_s),
                ANNOTATION_TENSOR_PARALLEL: str(engine.tensor_parallel_size)}},
            "spec": {
                "service_account_name": service_account,
                "node_selector": {INSTANCE_TYPE_LABEL: c.instance_type},
                "tolerations": [{"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}],
                "termination_grace_period_seconds": min(bp.network.load_balancer_idle_timeout_s, 900),
                "init_containers": [{
                    "name": "fetch-weights",
                    "image": defaults.AWS_CLI_IMAGE,
                    "command": ["aws", "s3", "sync"],
                    "args": [pulumi.Output.concat("s3://", bucket_name, f"/{MODELS_PREFIX}/{model.name}/"),
                             f"{MODELS_MOUNT}/{model.name}", "--no-progress", "--only-show-errors"],
                    # Explicit region: a bucket in another region fails without it.
                    "env": [{"name": "AWS_REGION", "value": bp.region},
                            {"name": "AWS_DEFAULT_REGION", "value": bp.region}],
                    "resources": {"requests": {"cpu": "1", "memory": "1Gi", "ephemeral-storage": "1Gi"},
                                  "limits": {"cpu": "1", "memory": "1Gi", "ephemeral-storage": "1Gi"}},
                    "volume_mounts": [{"name": "models", "mount_path": MODELS_MOUNT}],
                    "security_context": no_escalation,
                }],
                "containers": [{
                    "name": "vllm",
                    "image": engine.image,
                    "command": ["vllm", "serve"],
                    "args": vllm_args(engine, model.name),
                    "ports": [{"name": "http", "container_port": engine.port, "protocol": "TCP"}],
                    "resources": {"requests": resources, "limits": resources},
                    "startup_probe": {"http_get": {"path": "/health", "port": "http"}, "period_seconds": 10,
                                      "failure_threshold": startup_failures, "timeout_seconds": 5},
                    "readiness_probe": {"http_get": {"path": "/health", "port": "http"}, "period_seconds": 5,
                                        "failure_threshold": 3, "timeout_seconds": 5},
                    "liveness_probe": {"http_get": {"path": "/health", "port": "http"}, "period_seconds": 15,
                                       "failure_threshold": 4, "timeout_seconds": 10},
                    "volume_mounts": [{"name": "models", "mount_path": MODELS_MOUNT, "read_only": True},
                                      {"name": "dshm", "mount_path": "/dev/shm"}],
                    "security_context": no_escalation,
                }],
                "volumes": [
                    {"name": "models", "empty_dir": {"size_limit": _gi(weights_volume_gib)}},
                    # NCCL needs more than the 64 MB default /dev/shm with tensor parallel.
                    {"name": "dshm", "empty_dir": {"medium": "Memory", "size_limit": _gi(engine.shm_size_gib)}},
                ],
            },
        },
    }
