"""OnnxRuntimeService: an ONNX model on CPU nodes (x86_64 or arm64 pool, or an existing edge cluster).

The default server (`defaults.ONNXRUNTIME_IMAGE`, overridable with the blueprint's `engine.image`) is Triton
with its ONNX Runtime backend, reading a local repository: an init container copies `models/<name>/` (the weights in
`1/model.onnx` and the generated `config.pbtxt`) from S3 with the pod's identity. ONNX Runtime's thread pools are
pinned to the CPU limit in two places: the backend's `intra_op_thread_count` model parameter (in `config.pbtxt`,
see `components.triton_service.onnx_thread_parameters`) and `OMP_NUM_THREADS`; otherwise ONNX Runtime starts one
thread per host core and a pod limited to 4 cores on a 64-core node thrashes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pulumi

from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.observability import TRITON_SUMMARY_FLAG
from blueprints.contracts.sections import OnnxRuntimeEngine
from components.workload import Endpoint, serving_objects
from components.labels import (
    ANNOTATION_POD_START_S,
    ANNOTATION_WEIGHTS_GIB,
    recommended_labels,
    selector_labels,
)
from components.options import child_options
from components.rollout import container_lifecycle, deployment_rollout, pod_rollout
from components.access import api_key_env
from components.triton_service import (
    API_KEY_ENV,
    HEALTH_LIVE,
    HEALTH_READY,
    default_node_selector,
    restricted_api_args,
    server_resources,
)
from components.weights_delivery import MODELS_MOUNT, WeightsDelivery

#: Triton's default Prometheus metrics port (`--metrics-port`, Triton metrics docs).
METRICS_PORT = 8002


@dataclass
class OnnxRuntimeServiceArgs:
    """Inputs of `OnnxRuntimeService`.

    Args:
        blueprint: an onnx-cpu blueprint.
        weights: how pods get `models/<name>/` (`StoreDelivery` of the model store, or an edge cluster's
            `EdgeDelivery`).
        namespace: where the objects go. Defaults to the blueprint's namespace.
        node_selector: where the pods run (`components.serving.placement`; on an existing or edge cluster only the
            CPU architecture). Defaults to the CPU architecture and the planned instance type.
        endpoint: the API-key Secret, the VPC's CIDRs and the load balancer's subnets (`components.workload.Endpoint`).
        expose: a LoadBalancer Service on the proxy; otherwise ClusterIP only. Defaults to True.
    """

    blueprint: Blueprint
    weights: WeightsDelivery
    endpoint: Endpoint
    namespace: pulumi.Input[str] | None = None
    node_selector: dict[str, str] | None = None
    expose: bool = True


def onnx_args(engine: OnnxRuntimeEngine) -> list[str]:
    """`tritonserver` arguments of the ONNX Runtime server: the local repository, HTTP and metrics only (no gRPC),
    latency summaries (the p95 the SLO alert reads), no model control (the one model loads at start), every API but health restricted to the key."""
    return [f"--model-repository={MODELS_MOUNT}", f"--http-port={engine.port}", "--allow-grpc=false",
            "--allow-metrics=true", f"--metrics-port={METRICS_PORT}", TRITON_SUMMARY_FLAG, "--model-control-mode=none",
            *restricted_api_args(grpc=False)]


class OnnxRuntimeService(pulumi.ComponentResource):
    """ONNX Runtime on CPU: ServiceAccount, Deployment (requests == limits; threads == CPU limit) and Service.

    Attributes for monitoring: `selector` and `metrics_port_name` (`metrics`, on a ClusterIP Service only).
    Outputs: `service_name`, `deployment_name`, `endpoint` (the URL clients use, ending in `/v2`: KServe v2
    protocol; `ServingObjects.endpoint`).
    """

    def __init__(self, name: str, args: OnnxRuntimeServiceArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("servingblueprints:index:OnnxRuntimeService", name, None, opts)
        bp = args.blueprint
        if not isinstance(bp.engine, OnnxRuntimeEngine):
            raise ValueError(f"OnnxRuntimeService needs an onnx-cpu blueprint, got archetype {bp.archetype.value}")
        # intra_op_threads equals the CPU limit's whole cores: the blueprint is refused otherwise
        # (blueprints.contracts.consistency, exit 2 naming engine.intra_op_threads).
        engine = bp.engine
        namespace = args.namespace or bp.platform.namespace
        labels = recommended_labels(name="onnxruntime", instance=bp.stack, component="server",
                                    version=engine.image.rsplit(":", 1)[-1])
        child = child_options(self, opts)
        objects = serving_objects(
            name, bp, labels=labels, namespace=namespace, opts=child, expose=args.expose, endpoint=args.endpoint,
            deployment_spec=lambda account: self._spec(bp, engine, labels, args, account),
            metrics_port=METRICS_PORT, metrics_target="metrics")
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

    def _spec(self, bp: Blueprint, engine: OnnxRuntimeEngine, labels: dict[str, str],
              args: OnnxRuntimeServiceArgs, account: pulumi.Input[str]) -> dict:
        resources = server_resources(bp, gpu=False)
        selector = args.node_selector or default_node_selector(bp)
        startup = bp.startup
        threads = str(engine.intra_op_threads)
        return {
            "replicas": max(1, bp.autoscaling.min_replicas),
            "selector": {"matchLabels": selector_labels(labels)},
            **deployment_rollout(bp),
            "template": {
                "metadata": {"labels": labels, "annotations": {ANNOTATION_WEIGHTS_GIB: f"{bp.model.weights_gib:g}",
                                                               ANNOTATION_POD_START_S: str(startup.pod_start_s)}},
                "spec": {
                    "serviceAccountName": account,
                    "nodeSelector": selector,
                    **pod_rollout(bp, selector_labels(labels)),
                    "initContainers": args.weights.init_containers(bp, [bp.model]),
                    "containers": [{
                        "name": "onnxruntime",
                        "image": engine.image,
                        "command": ["tritonserver"],
                        "lifecycle": container_lifecycle(bp),
                        "args": onnx_args(engine),
                        "env": [api_key_env(args.endpoint.api_key_secret, API_KEY_ENV),
                                {"name": "OMP_NUM_THREADS", "value": threads}],
                        "ports": [{"name": "http", "containerPort": engine.port, "protocol": "TCP"},
                                  {"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"}],
                        "resources": {"requests": resources, "limits": resources},
                        "startupProbe": {"httpGet": {"path": HEALTH_READY, "port": "http"}, "periodSeconds": 10,
                                         "failureThreshold": math.ceil(2 * startup.pod_start_s / 10),
                                         "timeoutSeconds": 5},
                        "readinessProbe": {"httpGet": {"path": HEALTH_READY, "port": "http"}, "periodSeconds": 5,
                                           "failureThreshold": 3, "timeoutSeconds": 5},
                        "livenessProbe": {"httpGet": {"path": HEALTH_LIVE, "port": "http"}, "periodSeconds": 15,
                                          "failureThreshold": 4, "timeoutSeconds": 10},
                        "volumeMounts": [{"name": "models", "mountPath": MODELS_MOUNT, "readOnly": True}],
                    }],
                    "volumes": args.weights.volumes(bp, [bp.model]),
                },
            },
        }
