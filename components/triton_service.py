"""Triton Inference Server: a model repository in S3 with generated `config.pbtxt`s, and the server Deployment.

`config.pbtxt` is rendered from Triton's own protobuf schema (`tritonclient.grpc.model_config_pb2.ModelConfig`)
with `google.protobuf.text_format`: a field name Triton does not know fails here, not at server start.
The repository is the model store's `models/` prefix: `models/<name>/config.pbtxt` beside the weights in
`models/<name>/<version>/` (Triton's repository layout, docs.nvidia.com/deeplearning/triton-inference-server/
user-guide/docs/user_guide/model_repository.html).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.observability import TRITON_SUMMARY_FLAG
from blueprints.contracts.placement import GPU_RESOURCE, engine_resources
from blueprints.contracts.sections import OnnxRuntimeEngine, TritonEngine, TritonModelConfig
from blueprints.requirements.hosting import Accelerator
from blueprints.core import defaults
from components.access import api_key_env
from components.cluster import GPU_TOLERATION
from components.workload import Endpoint, serving_objects
from components.labels import (
    ANNOTATION_POD_START_S,
    ANNOTATION_WEIGHTS_GIB,
    recommended_labels,
    selector_labels,
)
from components.options import child_options
from components.rollout import container_lifecycle, deployment_rollout, pod_rollout
from components.weights_delivery import MODELS_MOUNT, WeightsDelivery, gi
from components.weights_storage import MODELS_PREFIX

#: Well-known node labels (kubernetes.io/docs/reference/labels-annotations-taints).
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
ARCH_LABEL = "kubernetes.io/arch"
ARCH_VALUE = {"x86_64": "amd64", "arm64": "arm64"}
#: Triton's documented minimum shared memory (`--shm-size=1g`, Triton "Running the server"); the python backend
#: and CUDA IPC use /dev/shm, whose container default is 64 MB.
TRITON_SHM_GIB = 1.0
HEALTH_READY = "/v2/health/ready"
HEALTH_LIVE = "/v2/health/live"


def model_config(model: TritonModelConfig, *, parameters: dict[str, str] | None = None) -> model_config_pb2.ModelConfig:
    """Triton's `ModelConfig` for one model: backend, max_batch_size, dynamic_batching, instance_group, parameters.

    `dynamic_batching` is set only when the model batches (`max_batch_size > 0`); inputs and outputs are left to
    Triton's auto-complete (onnxruntime, tensorrt); `parameters` become string model parameters (e.g. the ONNX
    Runtime backend's `intra_op_thread_count`).
    """
    cfg = model_config_pb2.ModelConfig(name=model.name, backend=model.backend, max_batch_size=model.max_batch_size)
    if model.max_batch_size > 0:
        cfg.dynamic_batching.max_queue_delay_microseconds = model.max_queue_delay_microseconds
    group = cfg.instance_group.add()
    group.kind = model_config_pb2.ModelInstanceGroup.Kind.Value(model.instance_kind)
    group.count = model.instance_count
    for key, value in sorted((parameters or {}).items()):
        cfg.parameters[key].string_value = value
    return cfg


def config_pbtxt(model: TritonModelConfig, *, parameters: dict[str, str] | None = None) -> str:
    """The `config.pbtxt` text of one model (protobuf text format)."""
    return text_format.MessageToString(model_config(model, parameters=parameters))


def onnx_model_config(bp: Blueprint) -> TritonModelConfig:
    """The single model of an onnx-cpu blueprint as a Triton onnxruntime-backend model on CPU."""
    return TritonModelConfig(name=bp.model.name, backend="onnxruntime", max_batch_size=0,
                             max_queue_delay_microseconds=0, instance_kind="KIND_CPU", instance_count=1)


def onnx_thread_parameters(engine: OnnxRuntimeEngine) -> dict[str, str]:
    """ONNX Runtime backend thread pools (github.com/triton-inference-server/onnxruntime_backend, "Model Config
    Options": `intra_op_thread_count`, `inter_op_thread_count`)."""
    return {"intra_op_thread_count": str(engine.intra_op_threads),
            "inter_op_thread_count": str(engine.inter_op_threads)}


def repository_configs(bp: Blueprint) -> dict[str, str]:
    """`{model name: config.pbtxt}` for a triton-multi-model or onnx-cpu blueprint."""
    if isinstance(bp.engine, TritonEngine):  # one per served model, by name (blueprints.contracts.consistency)
        return {m.name: config_pbtxt(m) for m in bp.engine.models}
    if isinstance(bp.engine, OnnxRuntimeEngine):
        return {bp.model.name: config_pbtxt(onnx_model_config(bp), parameters=onnx_thread_parameters(bp.engine))}
    raise ValueError(f"archetype {bp.archetype.value} has no Triton model repository")


@dataclass
class TritonModelRepositoryArgs:
    """Inputs of `TritonModelRepository`.

    Args:
        blueprint: a triton-multi-model or onnx-cpu blueprint.
        bucket_name: the model store bucket.
        tags: AWS tags for every object.
    """

    blueprint: Blueprint
    bucket_name: pulumi.Input[str]
    tags: dict[str, str]


class TritonModelRepository(pulumi.ComponentResource):
    """One `models/<name>/config.pbtxt` object per model in the model store (encrypted by the bucket's default).

    Outputs: `repository_uri` (`s3://<bucket>/models`).
    """

    def __init__(self, name: str, args: TritonModelRepositoryArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("servingblueprints:index:TritonModelRepository", name, None, opts)
        self.configs = repository_configs(args.blueprint)
        self.objects = [
            aws.s3.BucketObjectv2(f"{name}-{model}-config", bucket=args.bucket_name,
                                  key=f"{MODELS_PREFIX}/{model}/config.pbtxt", content=text,
                                  content_type="text/plain", tags=args.tags, opts=pulumi.ResourceOptions(parent=self))
            for model, text in self.configs.items()]
        self.repository_uri = pulumi.Output.concat("s3://", args.bucket_name, f"/{MODELS_PREFIX}")
        self.register_outputs({"repository_uri": self.repository_uri})


@dataclass
class TritonServiceArgs:
    """Inputs of `TritonService`.

    Args:
        blueprint: a triton-multi-model blueprint.
        weights: how pods get the repository (`StoreDelivery` of the model store's `models/` prefix, written by
            `TritonModelRepository`, or an edge cluster's `EdgeDelivery`).
        endpoint: the API-key Secret, the VPC's CIDRs and the load balancer's subnets (`components.workload.Endpoint`).
        namespace: where the objects go. Defaults to the blueprint's namespace.
        expose: a LoadBalancer Service on the proxy (HTTP and gRPC); otherwise ClusterIP only. Defaults to True.
        node_selector: where the pods run (`components.serving.placement`). Defaults to the CPU architecture and the
            planned instance type.
    """

    blueprint: Blueprint
    weights: WeightsDelivery
    endpoint: Endpoint
    namespace: pulumi.Input[str] | None = None
    expose: bool = True
    node_selector: dict[str, str] | None = None


#: Every Triton API but `health` (restricted_features.h, v2.62.0: health, metadata, inference, shared-memory,
#: model-config, model-repository, statistics, trace, logging); an API may be in one group only.
RESTRICTED_APIS = ("metadata", "inference", "shared-memory", "model-config", "model-repository", "statistics",
                   "trace", "logging")
#: The environment variable the key reaches the arguments through (`$(API_KEY)`: Kubernetes expands it in `args`).
API_KEY_ENV = "API_KEY"


def restricted_api_args(*, grpc: bool) -> list[str]:
    """`--http-restricted-api` (and `--grpc-restricted-protocol`) for every API but health, keyed on
    `defaults.TRITON_RESTRICTED_HEADER` = the API key (BETA flags of the pinned Triton 25.10 = 2.62.0)."""
    rule = f"{','.join(RESTRICTED_APIS)}:{defaults.TRITON_RESTRICTED_HEADER}=$({API_KEY_ENV})"
    return [f"--http-restricted-api={rule}", *([f"--grpc-restricted-protocol={rule}"] if grpc else [])]


def triton_args(engine: TritonEngine) -> list[str]:
    """`tritonserver` arguments: the local repository (copied by the init container), the three ports, latency
    summaries (the p95 the SLO alert reads), no model control (every model in the repository loads at start;
    load/unload requests fail), restricted APIs."""
    return [f"--model-repository={MODELS_MOUNT}", f"--http-port={engine.http_port}",
            f"--grpc-port={engine.grpc_port}", f"--metrics-port={engine.metrics_port}", TRITON_SUMMARY_FLAG,
            "--model-control-mode=none", *restricted_api_args(grpc=True)]


def default_node_selector(bp: Blueprint) -> dict[str, str]:
    """The CPU architecture and the planned instance type, if any (when no placement is given)."""
    selector = {ARCH_LABEL: ARCH_VALUE[bp.compute.cpu_arch.value]}
    if bp.compute.instance_type is not None:
        selector[INSTANCE_TYPE_LABEL] = bp.compute.instance_type
    return selector


def tolerations(bp: Blueprint) -> list[dict]:
    """GPU pods tolerate the GPU taint; CPU pods tolerate nothing."""
    return [GPU_TOLERATION] if bp.compute.accelerator is Accelerator.NVIDIA_GPU else []


def server_resources(bp: Blueprint, *, gpu: bool) -> dict[str, str]:
    """Requests == limits: CPU, memory and ephemeral storage (at least the weights' size) per replica, and GPUs."""
    res = engine_resources(bp)
    assert (GPU_RESOURCE in res) == gpu, "the plan's GPUs per replica decide the GPU request"
    return res


class TritonService(pulumi.ComponentResource):
    """Triton on GPU or CPU nodes (per the plan) behind the authenticating proxy, serving a local copy of its model
    repository: the init container copies `models/<name>/` (config.pbtxt and weights) from S3 with the pod's identity
    and an explicit region (Triton's bundled AWS SDK predates EKS Pod Identity, so Triton never reads S3 itself).
    Ports http, grpc and metrics; startup/readiness probes on `/v2/health/ready`, liveness on `/v2/health/live`;
    startup budget from the blueprint.

    Attributes for monitoring: `selector` (Service labels) and `metrics_port_name` (`metrics`, on a ClusterIP
    Service only). Outputs: `service_name`, `deployment_name`, `endpoint` (the URL clients use, ending in `/v2`;
    `ServingObjects.endpoint`).
    """

    def __init__(self, name: str, args: TritonServiceArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("servingblueprints:index:TritonService", name, None, opts)
        bp = args.blueprint
        if not isinstance(bp.engine, TritonEngine):
            raise ValueError(f"TritonService needs a triton-multi-model blueprint, got archetype {bp.archetype.value}")
        engine = bp.engine
        repository_configs(bp)  # validates engine.models against the served models
        namespace = args.namespace or bp.platform.namespace
        labels = recommended_labels(name="triton", instance=bp.stack, component="server",
                                    version=engine.image.rsplit(":", 1)[-1])
        child = child_options(self, opts)
        objects = serving_objects(
            name, bp, labels=labels, namespace=namespace, opts=child, expose=args.expose, endpoint=args.endpoint,
            deployment_spec=lambda account: self._spec(bp, engine, labels, args, account,
                                                       args.node_selector or default_node_selector(bp)),
            metrics_port=engine.metrics_port, metrics_target="metrics")
        self.service_account, self.deployment = objects.service_account, objects.deployment
        self.disruption_budget, self.service = objects.disruption_budget, objects.service
        self.metrics_service, self.network_policy = objects.metrics_service, objects.network_policy
        self.selector = selector_labels(labels)
        self.metrics_port_name = "metrics"
        self.service_name = self.service.metadata.name
        self.deployment_name = self.deployment.metadata.name
        self.endpoint = objects.endpoint(bp, namespace, expose=args.expose)
        self.register_outputs({"service_name": self.service_name, "deployment_name": self.deployment_name,
                               "endpoint": self.endpoint})

    def _spec(self, bp: Blueprint, engine: TritonEngine, labels: dict[str, str], args: TritonServiceArgs,
              account: pulumi.Input[str], selector: dict[str, str]) -> dict:
        gpu = bp.compute.accelerator is Accelerator.NVIDIA_GPU  # no KIND_GPU model on CPU (blueprints.contracts.consistency)
        resources = server_resources(bp, gpu=gpu)
        startup = bp.startup
        weights_gib = sum(m.weights_gib for m in bp.models)
        return {
            "replicas": max(1, bp.autoscaling.min_replicas),
            "selector": {"matchLabels": selector_labels(labels)},
            **deployment_rollout(bp),
            "template": {
                "metadata": {"labels": labels, "annotations": {ANNOTATION_WEIGHTS_GIB: f"{weights_gib:g}",
                                                               ANNOTATION_POD_START_S: str(startup.pod_start_s)}},
                "spec": {
                    "serviceAccountName": account,
                    "nodeSelector": selector,
                    **pod_rollout(bp, selector_labels(labels)),
                    "tolerations": tolerations(bp),
                    "initContainers": args.weights.init_containers(bp, list(bp.models)),
                    "containers": [{
                        "name": "triton",
                        "image": engine.image,
                        "command": ["tritonserver"],
                        "lifecycle": container_lifecycle(bp),
                        "args": triton_args(engine),
                        "env": [api_key_env(args.endpoint.api_key_secret, API_KEY_ENV)],
                        "ports": [{"name": "http", "containerPort": engine.http_port, "protocol": "TCP"},
                                  {"name": "grpc", "containerPort": engine.grpc_port, "protocol": "TCP"},
                                  {"name": "metrics", "containerPort": engine.metrics_port, "protocol": "TCP"}],
                        "resources": {"requests": resources, "limits": resources},
                        "startupProbe": {"httpGet": {"path": HEALTH_READY, "port": "http"}, "periodSeconds": 10,
                                         "failureThreshold": math.ceil(2 * startup.pod_start_s / 10),
                                         "timeoutSeconds": 5},
                        "readinessProbe": {"httpGet": {"path": HEALTH_READY, "port": "http"}, "periodSeconds": 5,
                                           "failureThreshold": 3, "timeoutSeconds": 5},
                        "livenessProbe": {"httpGet": {"path": HEALTH_LIVE, "port": "http"}, "periodSeconds": 15,
                                          "failureThreshold": 4, "timeoutSeconds": 10},
                        "volumeMounts": [{"name": "models", "mountPath": MODELS_MOUNT, "readOnly": True},
                                         {"name": "dshm", "mountPath": "/dev/shm"}],
                    }],
                    "volumes": [*args.weights.volumes(bp, list(bp.models)),
                                {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": gi(TRITON_SHM_GIB)}}],
                },
            },
        }
