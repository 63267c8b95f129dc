"""VllmService: the vLLM OpenAI-compatible server as a Kubernetes Deployment on GPU nodes."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from blueprints.core import defaults
from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.placement import engine_resources
from blueprints.contracts.weights import streams_weights
from blueprints.contracts.sections import VllmEngine
from components.access import api_key_env
from components.cluster import GPU_TOLERATION
from components.workload import Endpoint, serving_objects
from components.labels import (
    ANNOTATION_POD_START_S,
    ANNOTATION_TENSOR_PARALLEL,
    ANNOTATION_WEIGHTS_GIB,
    recommended_labels,
    selector_labels,
)
from components.options import child_options
from components.router import VllmRouter, VllmRouterArgs
from components.lora_adapters import adapters_mount, adapters_volume, fetch_adapters_container
from blueprints.engines import container_name, files_dir, probe_paths, server_command, server_env, server_files
from components.rollout import container_lifecycle, deployment_rollout, pod_rollout
from components.weights_delivery import (
    MODELS_MOUNT,
    StoreDelivery,
    WeightsDelivery,
    gi,
    region_env,
)

#: Well-known node label set by the kubelet on every node (kubernetes.io/docs/reference/labels-annotations-taints).
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"


@dataclass
class VllmServiceArgs:
    """Inputs of `VllmService`.

    Args:
        blueprint: the planned stack (archetype `vllm-gpu`).
        weights: how pods get the weights (`components.weights_delivery.StoreDelivery` of the model store).
        endpoint: the API-key Secret, the VPC's CIDRs and the load balancer's subnets (`components.workload.Endpoint`).
        namespace: where the objects go. Defaults to the blueprint's namespace.
        expose: a LoadBalancer Service (AWS Load Balancer Controller NLB per `network.exposure`, idle timeout above the
            longest stream); otherwise ClusterIP only. Defaults to True.
        node_selector: where the pods run (`components.serving.placement`). Defaults to the planned instance type.
        router_node_selector: where the router's pods run, when the blueprint plans one (`components.router`).
    """

    blueprint: Blueprint
    weights: WeightsDelivery
    endpoint: Endpoint
    namespace: pulumi.Input[str] | None = None
    expose: bool = True
    node_selector: dict[str, str] | None = None
    router_node_selector: dict[str, str] | None = None


class VllmService(pulumi.ComponentResource):
    """vLLM on GPU nodes behind the authenticating proxy: ServiceAccount, Deployment, Services and NetworkPolicy.

    The pod streams its safetensors from the model store with the Run:ai Model Streamer (`--load-format
    runai_streamer`), or copies other formats from S3 in an init container, both with the pod's IAM identity (no
    static keys) and an explicit region; mounts a memory-backed /dev/shm sized by tensor parallel for NCCL; requests exactly
    `tensor_parallel_size` GPUs; tolerates the GPU taint and selects the planned instance type; and its startup
    probe and progress deadline follow the blueprint's startup budget. vLLM also checks the key itself on `/v1/*`
    (`VLLM_API_KEY` from the Secret), behind the proxy that guards every path.

    Outputs: `service_name`, `deployment_name`, `endpoint` (the URL clients use, ending in `/v1`: the load balancer's,
    or in-cluster without `expose`; `ServingObjects.endpoint`).
    """

    def __init__(self, name: str, args: VllmServiceArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("servingblueprints:index:VllmService", name, None, opts)
        bp = args.blueprint
        if not isinstance(bp.engine, VllmEngine):
            raise ValueError(f"VllmService needs a vllm-gpu blueprint, got archetype {bp.archetype.value}")
        namespace = args.namespace or bp.platform.namespace
        labels = recommended_labels(name=bp.engine.kind, instance=bp.stack, component="server",
                                    version=bp.engine.image.rsplit(":", 1)[-1])
        child = child_options(self, opts)
        # An engine configured partly by a file (TensorRT-LLM's options file) reads it from a ConfigMap.
        files = server_files(bp.engine)
        self.options = k8s.core.v1.ConfigMap(
            f"{name}-engine-options", metadata={"name": f"{bp.workload_name}-engine-options", "namespace": namespace,
                                                "labels": labels},
            data=files, opts=child) if files else None
        options_name = self.options.metadata.name if self.options is not None else None
        objects = serving_objects(
            name, bp, labels=labels, namespace=namespace, opts=child, expose=args.expose, endpoint=args.endpoint,
            deployment_spec=lambda account: _deployment_spec(
                bp, labels, args.weights, account, args.endpoint.api_key_secret,
                args.node_selector or {INSTANCE_TYPE_LABEL: bp.compute.instance_type}, options_name),
            metrics_port=bp.engine.port, metrics_target="http")  # every engine serves its metrics on its API port
        self.service_account, self.deployment = objects.service_account, objects.deployment
        self.disruption_budget, self.service = objects.disruption_budget, objects.service
        self.metrics_service, self.network_policy = objects.metrics_service, objects.network_policy
        self.selector = selector_labels(labels)
        self.metrics_port_name = "metrics"
        self.service_name = self.service.metadata.name
        self.deployment_name = self.deployment.metadata.name
        # Prompt reuse over several replicas: the prefix/session-aware router fronts the engine pods.
        self.router = VllmRouter(f"{name}-router", VllmRouterArgs(
            blueprint=bp, namespace=namespace, endpoint=args.endpoint, engine_selector=self.selector,
            node_selector=args.router_node_selector), opts=child) if bp.router is not None else None
        self.endpoint = objects.endpoint(bp, namespace, expose=args.expose)
        self.register_outputs({"service_name": self.service_name, "deployment_name": self.deployment_name,
                               "endpoint": self.endpoint})


def _deployment_spec(bp: Blueprint, labels: dict[str, str], weights: WeightsDelivery,
                     service_account: pulumi.Input[str], api_key_secret: pulumi.Input[str],
                     node_selector: dict[str, str], options: pulumi.Input[str] | None = None) -> dict:
    engine: VllmEngine = bp.engine  # type: ignore[assignment]
    model = bp.model
    c = bp.compute
    startup = bp.startup
    resources = engine_resources(bp)
    # Startup probe (period 10 s) covers download (or streaming) + load + warm-up twice over: generous, never short.
    startup_failures = math.ceil(2 * startup.pod_start_s / 10)
    # The weights stream from the model store (no per-start copy, no models volume) when the format allows it; the
    # init container copies them otherwise (`blueprints.contracts.weights.streams_weights`).
    streamed = streams_weights(bp)
    if streamed and not isinstance(weights, StoreDelivery):
        raise ValueError(f"{bp.stack}: streamed weights need the stack's model store (StoreDelivery)")
    uri = weights.model_uri(model) if streamed else None  # type: ignore[union-attr]
    # LoRA adapters are copied onto local disk even when the weights stream: vLLM reads adapters from a local path.
    lora = engine.lora is not None
    if lora and not isinstance(weights, StoreDelivery):
        raise ValueError(f"{bp.stack}: LoRA adapters are copied from the stack's model store (StoreDelivery)")
    adapter_inits = [fetch_adapters_container(bp, weights.bucket_name)] if lora else []  # type: ignore[union-attr]
    command, args = server_command(engine, model.name, uri)
    probes = probe_paths(engine)
    return {
        "replicas": max(1, bp.autoscaling.min_replicas),
        "selector": {"matchLabels": selector_labels(labels)},
        # Covers a cold start on a new GPU node: provisioning, image pull, download and load (+50 %).
        **deployment_rollout(bp),
        "template": {
            "metadata": {"labels": labels, "annotations": {
                ANNOTATION_WEIGHTS_GIB: f"{model.weights_gib:g}",
                ANNOTATION_POD_START_S: str(startup.pod_start_s),
                ANNOTATION_TENSOR_PARALLEL: str(engine.tensor_parallel_size)}},
            "spec": {
                "serviceAccountName": service_account,
                "nodeSelector": node_selector,
                "tolerations": [GPU_TOLERATION],
                **pod_rollout(bp, selector_labels(labels)),
                "initContainers": [*([] if streamed else weights.init_containers(bp, [model])), *adapter_inits],
                "containers": [{
                    "name": container_name(engine),
                    "image": engine.image,
                    "command": command,
                    "args": args,
                    # With streaming the streamer's S3 client finds the pod's credentials (EKS Pod Identity) through
                    # the AWS SDK default chain and needs the region set explicitly.
                    "env": [*server_env(engine, lambda name: api_key_env(api_key_secret, name)),
                            *(region_env(bp.region) if streamed else [])],
                    "lifecycle": container_lifecycle(bp),
                    "ports": [{"name": "http", "containerPort": engine.port, "protocol": "TCP"}],
                    "resources": {"requests": resources, "limits": resources},
                    "startupProbe": {"httpGet": {"path": probes["startup"], "port": "http"}, "periodSeconds": 10,
                                     "failureThreshold": startup_failures, "timeoutSeconds": 5},
                    "readinessProbe": {"httpGet": {"path": probes["readiness"], "port": "http"}, "periodSeconds": 5,
                                       "failureThreshold": 3, "timeoutSeconds": 5},
                    "livenessProbe": {"httpGet": {"path": probes["liveness"], "port": "http"}, "periodSeconds": 15,
                                      "failureThreshold": 4, "timeoutSeconds": 10},
                    "volumeMounts": [*([] if streamed else [{"name": "models", "mountPath": MODELS_MOUNT,
                                                             "readOnly": True}]),
                                     *([adapters_mount()] if lora else []),
                                     *([{"name": "engine-options", "mountPath": files_dir(engine),
                                         "readOnly": True}] if options is not None else []),
                                     {"name": "dshm", "mountPath": "/dev/shm"}],
                }],
                "volumes": [
                    *([] if streamed else weights.volumes(bp, [model])),
                    *([adapters_volume(bp)] if lora else []),
                    *([{"name": "engine-options", "configMap": {"name": options}}] if options is not None else []),
                    # NCCL needs more than the 64 MB default /dev/shm with tensor parallel.
                    {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": gi(engine.shm_size_gib)}},
                ],
            },
        },
    }
