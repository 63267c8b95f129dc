"""The sections of a `Blueprint` (`blueprints.contracts.blueprint`): models, compute, engines, storage, network,
the compliance record, startup budget, autoscaling, SLO targets, predictions, pipeline and alerting.
"""

from __future__ import annotations

import datetime as dt
from enum import Enum
from zoneinfo import ZoneInfo
from typing import Annotated, Literal, Union
from pydantic import Field, model_validator
from blueprints.core import bounds
from blueprints.catalog import Architecture, Task
from blueprints.core.errors import FieldProblem, describe_pattern, raise_problems
from blueprints.requirements.model import (
    DailyShape, ModelFormat, Precision, Quantization, WeeklyShape, run_minutes,
)
from blueprints.requirements.hosting import Accelerator, Compliance, CpuArch, KubernetesVersion, Platform
from blueprints.requirements.exposure import Exposure, ExposureScope, ExposureVia
from blueprints.requirements.overrides import OverridableField
from blueprints.requirements.fields import (
    ACM_PCA_ARN, CERTIFICATE_CN, DNS_1123_LABEL, DNS_1123_SUBDOMAIN, KMS_KEY_ARN, MAX_WEIGHTS_URI_CHARS, SHA256_HEX,
    WEIGHTS_URI,
)
from blueprints.core.jsontypes import ClosedModel, absent_when_none, absent_when_off
from blueprints.contracts.lora import LoraEngine


#: Bumped when a field changes meaning; the program refuses configs of another version.
#: 3: `compliance` (the requirements' compliance, recorded) and `network.exposure`.
BLUEPRINT_SCHEMA_VERSION = 3


#: `autoscaling.metric` of a stack without an autoscaler: a fixed replica count (an edge cluster that declares no
#: metrics-server for a CPU HPA, nor KEDA with Prometheus).
FIXED_REPLICAS = "fixed"
#: `autoscaling.metric` of a batch on its cron schedule (`BatchPlan.keda_cron`): KEDA's cron scaler, whose metric is
#: `desiredReplicas` during the run and 0 outside it, against a target of 1 per replica (AverageValue), so the HPA
#: asks for exactly `desiredReplicas` (KEDA 2.20.2 pkg/scalers/cron_scaler.go L111-121, L137-148; catalog
#: addons.yaml keda `cron_scaler`). Its `autoscaling.target` is that 1.
CRON_SCHEDULE = "cron"
CRON_TARGET_PER_REPLICA = 1.0


#: A TCP port a container or Service listens on.
Port = Annotated[int, Field(ge=1, le=65535)]


#: Most tags one stack config sets: AWS allows 50 per resource, and the model store adds its compliance tag.
MAX_TAGS = 40


#: An ECR image URI, `<account>.dkr.ecr.<region>.amazonaws.com[.cn]/<repository>:<tag>` (or `@<digest>`): SageMaker
#: pulls serving containers from ECR only (CreateModel, ContainerDefinition.Image).
ECR_IMAGE = describe_pattern(
    r"^(?P<account>[0-9]{12})\.dkr\.ecr\.(?P<region>[a-z]{2}(-gov)?-[a-z]+-[0-9])\.amazonaws\.com(\.cn)?/"
    r"(?P<repo>[a-z0-9][a-z0-9._/-]{0,255})[:@][A-Za-z0-9_.:-]{1,128}$",
    "an ECR image URI, <account>.dkr.ecr.<region>.amazonaws.com/<repository>:<tag> (SageMaker pulls from ECR only)")


#: A pinned container image reference: `[registry/]repository:tag` or `@sha256:digest`.
IMAGE_REF = describe_pattern(r"^[a-z0-9][a-z0-9._/:-]{0,254}(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}|@sha256:[a-f0-9]{64})$",
                             "a pinned image, [registry/]repository:tag or @sha256:digest")


class Archetype(str, Enum):
    """The four ways this project serves a model."""

    SAGEMAKER_ENDPOINT = "sagemaker-endpoint"
    VLLM_GPU = "vllm-gpu"
    TRITON_MULTI_MODEL = "triton-multi-model"
    ONNX_CPU = "onnx-cpu"


class CapacityType(str, Enum):
    ON_DEMAND = "on-demand"
    SPOT = "spot"


class ModelTraffic(ClosedModel):
    """This environment's load on one model, as planned (the fleet simulation replays it)."""

    peak_requests_per_s: float = Field(ge=bounds.MIN_PEAK_REQUESTS_PER_S, le=bounds.MAX_PEAK_REQUESTS_PER_S,
                                       description="this environment's peak arrival rate, requests/s")
    pattern: Literal["steady", "bursty", "spiky"] = Field(description="shape of the load over a day")
    daily: DailyShape | None = Field(default=None, exclude_if=absent_when_none, description="a diurnal day "
                                     "(requirements traffic.daily; absent: the pattern's canned wave)")
    weekly: WeeklyShape | None = Field(default=None, exclude_if=absent_when_none, description="a weekly shape "
                                       "(requirements traffic.weekly; absent: every day is the planned day)")
    mean_input_tokens: int = Field(ge=1, le=bounds.MAX_TOKENS, description="mean prompt length, tokens")
    mean_output_tokens: int = Field(ge=1, le=bounds.MAX_TOKENS, description="mean generated length, tokens "
                                    "(generative)")
    input_tokens_p95: int | None = Field(default=None, ge=1, le=bounds.MAX_TOKENS, description="95th-percentile "
                                         "prompt length, tokens (none: twice the mean)")
    output_tokens_p95: int | None = Field(default=None, ge=1, le=bounds.MAX_TOKENS, description="95th-percentile "
                                          "generated length, tokens (none: twice the mean)")
    shared_prefix_tokens: int | None = Field(default=None, exclude_if=absent_when_none,
                                             ge=1, le=bounds.MAX_TOKENS, description="tokens every "
                                             "prompt shares (requirements traffic.shared_prefix_tokens; absent: none)")
    session_turns: int | None = Field(default=None, exclude_if=absent_when_none,
                                      ge=2, le=200, description="turns per conversation that resends "
                                      "its history (requirements traffic.sessions.turns; absent: single-turn)")
    api: Literal["chat", "completions"] = Field(default="chat", description="the OpenAI API clients call "
                                                "(requirements traffic.api): the chat endpoint renders the chat "
                                                "template, which the capacity model counts in every TTFT")


class ServedModel(ClosedModel):
    """A model as the program needs it: where the weights come from and how big they are."""

    name: str = Field(pattern=DNS_1123_LABEL, description="served model name; also the weights prefix")
    catalog_id: str | None = Field(description="catalog id, or none for an explicit architecture")
    task: Task
    format: ModelFormat
    precision: Precision
    quantization: Quantization | None = Field(default=None, description="how a quantised checkpoint was quantised "
                                              "(none: the method `precision` implies)")
    source_uri: str = Field(pattern=WEIGHTS_URI, max_length=MAX_WEIGHTS_URI_CHARS, description="where the weights "
                            "come from: s3://bucket/prefix/, hf://org/name, or (edge clusters) an https:// URL of the "
                            "file")
    sha256: str | None = Field(default=None, pattern=SHA256_HEX, description="https:// sources: the file's SHA-256, "
                               "checked after the download")
    source_kms_key_arn: str | None = Field(default=None, pattern=KMS_KEY_ARN, description="the customer-managed key "
                                           "an s3:// source is encrypted with: its copy into the model store may "
                                           "decrypt with it (none: SSE-S3 or the AWS-managed key)")
    params_b: float = Field(ge=bounds.MIN_PARAMS_B, le=bounds.MAX_PARAMS_B, description="total parameters, billions")
    weights_gib: float = Field(ge=bounds.MIN_WEIGHTS_GIB, le=bounds.MAX_WEIGHTS_GIB, description="weights on disk "
                               "and in memory at `precision`, GiB, rounded up to 0.01")
    max_context_tokens: int = Field(ge=1, le=bounds.MAX_TOKENS)
    architecture: Architecture | None = Field(default=None, description="the shape of a model outside the catalog "
                                              "(none: the catalog's, by `catalog_id`)")
    traffic: ModelTraffic | None = Field(default=None, description="this environment's planned load on the model")


class Compute(ClosedModel):
    """Nodes and replicas. A replica is one full copy of the model."""

    accelerator: Accelerator
    instance_type: str | None = Field(max_length=40, description="EC2 type (`g6e.xlarge`) or SageMaker type "
                                      "(`ml.g5.xlarge`) of the catalog, the fields below its figures; none on an edge "
                                      "cluster's owned nodes")
    gpu: str | None = Field(max_length=20, description="GPU short name, none on CPU")
    gpus_per_node: int = Field(ge=0, le=bounds.MAX_GPUS_PER_NODE)
    gpus_per_replica: int = Field(ge=0, le=bounds.MAX_GPUS_PER_NODE, description="GPUs one replica uses (= "
                                  "tensor_parallel_size for vLLM)")
    vcpus_per_node: int = Field(ge=1, le=bounds.MAX_VCPUS_PER_NODE)
    memory_gib_per_node: float = Field(gt=0, le=bounds.MAX_MEMORY_GIB_PER_NODE)
    cpu_per_replica: float = Field(ge=bounds.MIN_CPU_PER_REPLICA, le=bounds.MAX_VCPUS_PER_NODE,
                                   description="CPU cores requested (= limit) per replica")
    memory_gib_per_replica: float = Field(gt=0, le=bounds.MAX_MEMORY_GIB_PER_NODE, description="host memory "
                                          "requested (= limit) per replica, GiB")
    ephemeral_storage_gib_per_replica: float = Field(gt=0, le=bounds.MAX_WEIGHTS_GIB, description="local disk for "
                                                     "weights + scratch, GiB")
    replicas: int = Field(ge=1, le=bounds.MAX_REPLICAS, description="replicas needed at this environment's peak load")
    capacity_type: CapacityType = CapacityType.ON_DEMAND
    cpu_arch: CpuArch = CpuArch.X86_64
    owned_nodes: int | None = Field(default=None, ge=1, le=1000, description="edge cluster only: the owned nodes "
                                    "(of vcpus_per_node x memory_gib_per_node) the service may use")

    @property
    def node_type(self) -> str:
        """The EC2/SageMaker instance type, or `edge node` on an edge cluster."""
        return self.instance_type or "edge node"

    @model_validator(mode="after")
    def _gpu_shape(self) -> Compute:
        problems = []
        if (self.instance_type is None) == (self.owned_nodes is None):
            problems.append(FieldProblem("instance_type", "give exactly one of instance_type (EC2 or SageMaker "
                                         "capacity) and owned_nodes (an edge cluster's nodes)"))
        if self.owned_nodes is not None and self.accelerator is not Accelerator.CPU:
            problems.append(FieldProblem("accelerator", "an edge cluster's owned nodes are CPU nodes: accelerator cpu"))
        if self.owned_nodes is not None and self.capacity_type is CapacityType.SPOT:
            problems.append(FieldProblem("capacity_type", "an edge cluster's owned nodes are not spot capacity: "
                                         "capacity_type on-demand"))
        if self.cpu_per_replica > self.vcpus_per_node:
            problems.append(FieldProblem("cpu_per_replica", f"cpu_per_replica={self.cpu_per_replica:g} exceeds the "
                                         f"{self.vcpus_per_node} vCPUs of {self.node_type}: the pod can never be "
                                         "scheduled"))
        if self.memory_gib_per_replica > self.memory_gib_per_node:
            problems.append(FieldProblem("memory_gib_per_replica", f"memory_gib_per_replica="
                                         f"{self.memory_gib_per_replica:g} exceeds the {self.memory_gib_per_node:g} "
                                         f"GiB of {self.node_type}"))
        if self.accelerator is Accelerator.NVIDIA_GPU:
            if self.gpu is None:
                problems.append(FieldProblem("gpu", "GPU compute needs `gpu`"))
            if self.gpus_per_replica < 1:
                problems.append(FieldProblem("gpus_per_replica", "GPU compute needs gpus_per_replica >= 1"))
            elif self.gpus_per_node < self.gpus_per_replica or self.gpus_per_node % self.gpus_per_replica:
                problems.append(FieldProblem("gpus_per_replica", f"gpus_per_replica={self.gpus_per_replica} must "
                                             f"divide the {self.gpus_per_node} GPUs of {self.instance_type}"))
        else:
            problems += [FieldProblem(f, f"CPU compute has no GPUs: set {f} to {'0' if f != 'gpu' else 'null'}")
                         for f in ("gpu", "gpus_per_replica") if getattr(self, f)]
        raise_problems(problems)
        return self

    @property
    def replicas_per_node(self) -> int:
        if self.gpus_per_replica:
            return self.gpus_per_node // self.gpus_per_replica
        return max(1, int(self.vcpus_per_node // self.cpu_per_replica))


class VllmEngine(ClosedModel):
    """A self-hosted LLM server's settings (vLLM, SGLang or TensorRT-LLM: `kind`, the engines.yaml name); each field
    maps to one documented flag of that engine (`blueprints.engines` renders them; field names are vLLM's)."""

    kind: Literal["vllm", "sglang", "tensorrt-llm"] = Field(default="vllm", description="the serving engine "
                                                            "(blueprints/catalog/engines.yaml)")
    image: str = Field(pattern=IMAGE_REF, description="pinned image of the engine, e.g. vllm/vllm-openai:v0.24.0")
    tensor_parallel_size: int = Field(ge=1, le=bounds.MAX_GPUS_PER_NODE, description="--tensor-parallel-size")
    gpu_memory_utilization: float = Field(ge=0.1, le=0.98, description="--gpu-memory-utilization")
    max_model_len: int = Field(ge=bounds.MIN_CONTEXT_TOKENS, le=bounds.MAX_TOKENS, description="--max-model-len, "
                               "tokens; within the model's context and the KV cache")
    max_num_seqs: int = Field(ge=1, le=bounds.MAX_NUM_SEQS, description="--max-num-seqs, concurrent sequences per "
                              "replica; as many mean-length requests as the KV cache holds at most")
    max_num_batched_tokens: int | None = Field(default=None, ge=1, le=1_048_576,
                                               description="--max-num-batched-tokens, tokens one engine step computes "
                                               "at most (chunked prefill); vLLM's default for the GPU when unset")
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = Field(description="--dtype")
    quantization: Literal["fp8", "awq", "awq_marlin", "gptq", "gptq_marlin", "compressed-tensors",
                          "bitsandbytes"] | None = Field(description="--quantization")
    kv_cache_dtype: Literal["auto", "fp8"] = Field(description="--kv-cache-dtype")
    shm_size_gib: float = Field(gt=0, le=bounds.MAX_MEMORY_GIB_PER_NODE, description="memory-backed /dev/shm for "
                                "NCCL, GiB; grows with tensor parallel")
    port: Port = 8000
    lora: LoraEngine | None = Field(default=None, exclude_if=absent_when_none,
                                    description="LoRA adapters served beside the model "
                                    "(blueprints/contracts/lora.py); absent without adapters")
    enable_prefix_caching: bool = Field(default=False, exclude_if=absent_when_off,
                                        description="--enable-prefix-caching, explicit where the "
                                        "requirements declare prompt reuse (vLLM 0.24.0 defaults it on: "
                                        "config/cache.py:92; absent: the image's default)")

    @model_validator(mode="after")
    def _batched_tokens_hold_the_batch(self) -> VllmEngine:
        if self.max_num_batched_tokens is not None and self.max_num_batched_tokens < self.max_num_seqs:
            raise ValueError(f"max_num_batched_tokens={self.max_num_batched_tokens} is below max_num_seqs="
                             f"{self.max_num_seqs}; vLLM refuses to start (each running sequence needs a token a step): "
                             "raise max_num_batched_tokens or lower max_num_seqs")
        return self


class TritonModelConfig(ClosedModel):
    """One model's `config.pbtxt` in the Triton model repository."""

    name: str = Field(pattern=DNS_1123_LABEL)
    backend: Literal["onnxruntime", "tensorrt", "pytorch", "python"]
    max_batch_size: int = Field(ge=0, le=bounds.INT32_MAX)
    max_queue_delay_microseconds: int = Field(ge=0, le=bounds.MAX_LATENCY_MS * 1000)
    instance_kind: Literal["KIND_GPU", "KIND_CPU"]
    instance_count: int = Field(ge=1, le=64)

    @model_validator(mode="after")
    def _no_delay_without_a_batch(self) -> TritonModelConfig:
        if self.max_batch_size <= 1 and self.max_queue_delay_microseconds > 0:
            raise ValueError(f"{self.name}: max_queue_delay_microseconds={self.max_queue_delay_microseconds} with "
                             f"max_batch_size={self.max_batch_size}: the dynamic batcher would hold each request for a "
                             "batch that cannot form; set the delay to 0 (re-plan with `blueprint plan`)")
        return self


class TritonEngine(ClosedModel):
    kind: Literal["triton"] = "triton"
    image: str = Field(pattern=IMAGE_REF, description="pinned image, e.g. nvcr.io/nvidia/tritonserver:25.10-py3")
    models: list[TritonModelConfig] = Field(min_length=1, max_length=bounds.MAX_MODELS, description="one per served "
                                            "model, by name")
    http_port: Port = 8000
    grpc_port: Port = 8001
    metrics_port: Port = 8002


class OnnxRuntimeEngine(ClosedModel):
    kind: Literal["onnxruntime"] = "onnxruntime"
    image: str = Field(pattern=IMAGE_REF, description="pinned ONNX Runtime server image; overridable")
    intra_op_threads: int = Field(ge=1, le=bounds.MAX_VCPUS_PER_NODE, description="= the whole cores of the "
                                  "container CPU limit, never 0 (one per host core)")
    inter_op_threads: int = Field(default=1, ge=1, le=bounds.MAX_VCPUS_PER_NODE)
    port: Port = 8001


class SageMakerEngine(ClosedModel):
    kind: Literal["sagemaker"] = "sagemaker"
    image: str = Field(pattern=ECR_IMAGE, description="the region's pinned serving container image URI (ECR)")
    initial_instance_count: int = Field(ge=1, le=bounds.MAX_REPLICAS)
    container_startup_health_check_timeout_s: int = Field(ge=60, le=3600)
    model_data_download_timeout_s: int = Field(ge=60, le=3600)
    volume_size_gib: int = Field(ge=1, le=512)
    tensor_parallel_degree: int | None = Field(default=None, ge=1, le=bounds.MAX_GPUS_PER_NODE, description="LMI OPTION_TENSOR_PARALLEL_DEGREE "
                                               "(text generation only; none for other models)")
    max_model_len: int | None = Field(default=None, ge=bounds.MIN_CONTEXT_TOKENS, le=bounds.MAX_TOKENS,
                                      description="LMI OPTION_MAX_MODEL_LEN, tokens "
                                      "(text generation only)")
    max_rolling_batch_size: int | None = Field(default=None, ge=1, le=bounds.MAX_NUM_SEQS, description="LMI OPTION_MAX_ROLLING_BATCH_SIZE: "
                                               "concurrent sequences per instance (text generation only)")


Engine = Annotated[Union[VllmEngine, TritonEngine, OnnxRuntimeEngine, SageMakerEngine], Field(discriminator="kind")]


ENGINE_FOR_ARCHETYPE = {
    Archetype.VLLM_GPU: VllmEngine,
    Archetype.TRITON_MULTI_MODEL: TritonEngine,
    Archetype.ONNX_CPU: OnnxRuntimeEngine,
    Archetype.SAGEMAKER_ENDPOINT: SageMakerEngine,
}


class Storage(ClosedModel):
    """The per-stack model store: an S3 bucket the serving identity may read under `models/`."""

    customer_managed_kms: bool = Field(description="SSE-KMS with a customer-managed key (rotation on)")
    retain_on_delete: bool = Field(description="keep the bucket when the stack is destroyed")
    noncurrent_version_expiry_days: int = Field(default=30, ge=1, le=3650)


class Network(ClosedModel):
    """How the service is reached. `private_only` is derived from `compliance.private_only`; `exposure` from the
    requirements' `exposure` section (the same schema, validated the same way)."""

    private_only: bool
    load_balancer_idle_timeout_s: int = Field(ge=60, le=4000, description="above the longest streamed response")
    exposure: Exposure = Field(description="who can reach the endpoint: internal (VPC) or public (TLS, source CIDRs)")
    exposed_by: str | None = Field(default=None, pattern=r"^[a-z0-9-]+$", description="the add-on implementing the "
                                   "exposure (aws-load-balancer-controller, metallb, ingress-nginx, traefik); none "
                                   "for a NodePort or a SageMaker endpoint (blueprints.requirements.cluster_exposure)")

    @model_validator(mode="after")
    def _private_is_internal(self) -> Network:
        if self.private_only and self.exposure.scope is ExposureScope.PUBLIC:
            raise ValueError("network.exposure.scope public contradicts network.private_only: re-plan with "
                             "`blueprint plan` instead of editing the stack config")
        if self.exposed_by is not None:
            from blueprints.catalog.addons import load_platform_catalog

            addon = load_platform_catalog().helm.get(self.exposed_by)
            via = self.exposure.via or ExposureVia.LOAD_BALANCER  # unset: a load balancer, as before edge clusters
            fits = addon is not None and ((via is ExposureVia.LOAD_BALANCER and addon.load_balancer)
                                          or (via is ExposureVia.INGRESS and addon.ingress_class is not None))
            if not fits:
                raise ValueError(f"network.exposed_by {self.exposed_by!r} does not implement exposure.via "
                                 f"{via.value if via else None}: re-plan with `blueprint plan`")
        elif self.exposure.via in (ExposureVia.LOAD_BALANCER, ExposureVia.INGRESS):
            raise ValueError(f"network.exposure.via {self.exposure.via.value} needs network.exposed_by (the add-on "
                             "implementing it): re-plan with `blueprint plan`")
        return self

    @property
    def aws_load_balancer(self) -> bool:
        """The Service is an NLB of the AWS Load Balancer Controller (annotations, ACM TLS, subnets); so is a stack
        config written before `exposure.via` existed (no via, no exposed_by)."""
        if self.exposed_by is None:
            return self.exposure.via is None
        return self.exposed_by == "aws-load-balancer-controller"


class ComplianceRecord(Compliance):
    """The requirements' compliance as planned, recorded in the stack config beside the settings derived from it
    (`network`, `storage`, `production`, `region`, the platform). The policy pack checks the derived settings against
    this record, so a hand edit that weakens a stack below its own requirements fails the review; a change of the
    record itself is listed first in the baseline diff."""

    production: bool = Field(description="the environment is production (no scale to zero, no spot, data retained)")

    def to_tag(self) -> str:
        """The record as one AWS tag value (also a Kubernetes annotation value): `key=value` pairs separated by
        spaces, regions joined by `/` (tag values allow letters, digits, spaces and `_ . : / = + - @`)."""
        return encode_flags({"audit_logging": self.audit_logging, "customer_managed_kms": self.customer_managed_kms,
                             "private_only": self.private_only, "production": self.production,
                             "regions_allowed": "/".join(self.regions_allowed)})


#: The tag on every service stack's model store bucket that records its compliance (`ComplianceRecord.to_tag`).
COMPLIANCE_TAG = "servingblueprints:compliance"


#: Namespace annotation recording the platform's compliance settings as its StackReference reports them.
PLATFORM_COMPLIANCE_ANNOTATION = "servingblueprints.io/platform-compliance"


#: Namespace label recording the stack's derived `network.private_only`.
PRIVATE_ONLY_LABEL = "servingblueprints.io/private-only"


#: Namespace annotation carrying the stack's compliance record (`ComplianceRecord.to_tag`) where it keeps no model
#: store bucket to tag (an edge cluster).
COMPLIANCE_ANNOTATION = "servingblueprints.io/compliance"


#: Annotations of a Service or Ingress exposed without an AWS load balancer (a NodePort, MetalLB, an Ingress): the
#: planned `exposure.scope`, and the kubernetes.io/tls Secret that terminates TLS (at the Ingress, or mounted into
#: the authenticating proxy). The policy pack judges such endpoints by them.
EXPOSURE_SCOPE_ANNOTATION = "servingblueprints.io/exposure-scope"


TLS_SECRET_ANNOTATION = "servingblueprints.io/tls-secret"


def encode_flags(values: dict[str, bool | str]) -> str:
    """`{"a": True, "b": "x"}` -> `a=true b=x` (sorted keys)."""
    return " ".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in sorted(values.items()))


def decode_flags(text: str) -> dict[str, bool | str]:
    """The inverse of `encode_flags`: `true`/`false` become booleans; a malformed pair is skipped."""
    out: dict[str, bool | str] = {}
    for pair in text.split():
        key, sep, value = pair.partition("=")
        if sep:
            out[key] = {"true": True, "false": False}.get(value, value)
    return out


class PlatformSpec(ClosedModel):
    """Where the stack runs: a shared platform's EKS cluster, an existing cluster, or SageMaker.

    `stack` names the platform stack this service lands on (`platform-<env>-<region>`): its cluster for `eks`, its
    VPC for a private SageMaker endpoint; none for an existing cluster or a SageMaker endpoint outside a VPC.
    """

    kind: Platform | Literal["sagemaker"]
    kubernetes_version: KubernetesVersion
    namespace: str = Field(pattern=DNS_1123_LABEL, max_length=63, description="the service's own namespace")
    stack: str | None = Field(default=None, pattern=r"^platform-[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=100)
    zones: int | None = Field(default=None, ge=1, le=6, description="availability zones the platform's subnets "
                              "span (its NodePools can launch nodes there); none off a platform")

    @model_validator(mode="after")
    def _platform_stack(self) -> PlatformSpec:
        if self.kind == "eks" and self.stack is None:
            raise ValueError("kind eks lands on a shared platform: set `stack` (platform-<env>-<region>)")
        if self.kind in ("existing-cluster", "edge-cluster") and self.stack is not None:
            raise ValueError(f"an {self.kind} is not a platform stack: remove `stack`")
        return self


class StartupBudget(ClosedModel):
    """Cold start of one replica, from an empty node to ready (`blueprints/catalog/startup.yaml` through
    `blueprints.plan.startup`). Used by probes, deadlines, cooldowns, the warm floor and the fleet simulation."""

    node_provisioning_s: int = Field(ge=0, le=bounds.MAX_STARTUP_PART_S, description="0 only on an edge cluster, "
                                     "whose owned nodes are always there")
    image_pull_s: int = Field(ge=0, le=bounds.MAX_STARTUP_PART_S, description="0 only on SageMaker, which pulls its "
                              "image before the timers start")
    weights_download_s: int = Field(ge=1, le=bounds.MAX_STARTUP_PART_S, description="the weights read: streamed "
                                    "from the model store to the GPUs (vLLM, safetensors) or copied to node-local disk")
    model_load_s: int = Field(ge=1, le=bounds.MAX_STARTUP_PART_S, description="engine start after that: the load "
                              "from disk when copied, warm-up (compile, CUDA graphs)")

    @property
    def total_s(self) -> int:
        return self.node_provisioning_s + self.image_pull_s + self.weights_download_s + self.model_load_s

    @property
    def pod_start_s(self) -> int:
        """Time from container start to ready (no node provisioning, no image pull)."""
        return self.weights_download_s + self.model_load_s


class Autoscaling(ClosedModel):
    min_replicas: int = Field(ge=0, le=bounds.MAX_REPLICAS)
    max_replicas: int = Field(ge=1, le=bounds.MAX_REPLICAS)
    metric: str = Field(pattern=r"^[a-zA-Z_:][a-zA-Z0-9_:]*$", max_length=200,
                        description="the signal scaled on (a row of blueprints/catalog/signals.py), e.g. "
                        "vllm:num_requests_running")
    target: float = Field(gt=0, le=1e9, description="per-replica target of `metric`, in the unit the signals table "
                          "gives (rounded by `blueprints.catalog.signals.planned_target`)")
    cooldown_s: int = Field(ge=0, le=86_400, description="scale-in delay; longer than the cold start")
    cold_start_s: int | None = Field(default=None, ge=0, le=86_400, description="scale to zero only: how long the "
                                     "first request after an idle period waits (a replica's cold start on a new "
                                     "node, held by the KEDA HTTP interceptor)")
    interceptor_concurrency_target: int | None = Field(default=None, ge=1, le=100_000, description="scale to zero "
                                                       "only: in-flight requests per replica the KEDA HTTP add-on "
                                                       "scales on (InterceptorRoute concurrency targetValue)")

    @property
    def autoscaled(self) -> bool:
        """An autoscaler (KEDA's ScaledObject or an HPA) owns the workload's replica count (`metric` is not
        `FIXED_REPLICAS`): the Deployment's `spec.replicas` is the autoscaler's after creation."""
        return self.metric != FIXED_REPLICAS

    @model_validator(mode="after")
    def _bounds(self) -> Autoscaling:
        if self.min_replicas > self.max_replicas:
            raise ValueError(f"min_replicas ({self.min_replicas}) must be <= max_replicas ({self.max_replicas})")
        if self.metric == FIXED_REPLICAS and self.min_replicas != self.max_replicas:
            raise ValueError(f"metric {FIXED_REPLICAS} (no autoscaler) runs a fixed replica count: min_replicas "
                             f"({self.min_replicas}) must equal max_replicas ({self.max_replicas})")
        if self.metric == "cpu" and not float(self.target).is_integer():
            raise ValueError(f"target={self.target:g}: a CPU utilisation target is a whole percent (the HPA's "
                             "averageUtilization is an integer); re-plan with `blueprint plan`")
        return self


#: A latency target or prediction, ms.
LatencyMs = Annotated[float, Field(ge=bounds.MIN_LATENCY_MS, le=bounds.MAX_LATENCY_MS)]


#: A predicted latency, ms: a prediction may be longer than any target (a request's whole generation).
PredictedMs = Annotated[float, Field(ge=0, le=bounds.MAX_LATENCY_MS * 100)]


#: USD, finite and at most `bounds.MAX_COST_USD`.
Usd = Annotated[float, Field(ge=0, le=bounds.MAX_COST_USD)]


class SloTargets(ClosedModel):
    ttft_p95_ms: LatencyMs | None = None
    itl_p95_ms: LatencyMs | None = None
    ttft_p99_ms: LatencyMs | None = None
    itl_p99_ms: LatencyMs | None = None
    latency_p95_ms: LatencyMs | None = None
    latency_p99_ms: LatencyMs | None = None
    availability_pct: float = Field(ge=90, lt=100)
    attainment_pct: float = Field(ge=50, le=100, description="share of the simulated day's minutes within every "
                                  "latency target (p95, and an LLM's p99 where set) the warm floor is planned for, % "
                                  "(requirements slo.attainment_pct or the environment's default)")
    longest_violation_minutes: int | None = Field(default=None, ge=0, le=1440, description="the longest run of "
                                                  "minutes over a target the warm floor is planned for")


class CostLine(ClosedModel):
    item: str = Field(max_length=200)
    quantity: float = Field(ge=0, le=bounds.MAX_REPLICAS * 10)
    usd_per_hour: Usd = Field(description="per unit")
    monthly_usd: Usd

    def unit_monthly_usd(self, hours_per_month: float) -> float:
        """One unit's monthly price as this line states it, USD/month: `monthly_usd / quantity`, so that `quantity`
        units cost exactly `monthly_usd` (`usd_per_hour` is stored rounded to 4 decimals, `monthly_usd` priced before
        that rounding: up to $0.04 per unit a month apart); `usd_per_hour x hours_per_month` for a line of no units."""
        return self.monthly_usd / self.quantity if self.quantity else self.usd_per_hour * hours_per_month


class ModelLatency(ClosedModel):
    """One model's predicted request latency on a non-generative archetype (Triton, ONNX Runtime, SageMaker's
    Triton), and how many of its requests one replica computes at once: what a compound service's end-to-end
    latency is composed from (`blueprints.plan.compound.latency`)."""

    name: str = Field(pattern=DNS_1123_LABEL, max_length=40, description="served model name")
    latency_p95_ms: float = Field(gt=0, le=1e7, description="one request's p95 at this environment's peak, ms")
    batch_ms: float = Field(gt=0, le=1e7, description="one batch's compute time (one request's on CPU), ms: what "
                            "each further round of batches adds when one caller sends more requests than a replica "
                            "computes at once")
    concurrent_requests: int = Field(ge=1, le=1_000_000, description="requests of this model one replica computes "
                                     "at once: max_batch_size x instances per replica on GPU, 1 on CPU")


class CapacityCorrection(ClosedModel):
    """The calibration the capacity model was corrected with for this replica (`stacks/calibration/`, written by
    `blueprint calibrate`): its factors, so the review and the fleet simulation replay the same model, and where
    they come from."""

    step_time: float = Field(ge=0.2, le=5.0, description="factor on every step's kernel time")
    ttft_floor: float = Field(ge=0.2, le=10.0, description="factor on the frontend's latency and serial work")
    calibration: str = Field(max_length=500, description="the calibration file, relative to the project root")
    summary: str = Field(max_length=600, description="e.g. `calibrated on 2026-12-03 runs of chat-assistant-prod: "
                         "capacity per replica 1,050 -> 560 tok/s`")
    accepted_shift: str | None = Field(default=None, exclude_if=absent_when_none, max_length=300,
                                       description="the calibration moved a production stack's capacity beyond its "
                                       "band and was accepted with --accept-shift (the review shows it first)")


class Interval(ClosedModel):
    """Where a predicted figure's measured value lies when the capacity model is off by its band: [low, high]."""

    low: float = Field(ge=0, le=1e12)
    high: float = Field(ge=0, le=1e12)

    @model_validator(mode="after")
    def _ordered(self) -> "Interval":
        if self.low > self.high:
            raise ValueError(f"low {self.low} is above high {self.high}")
        return self


class PredictionBand(ClosedModel):
    """The cross-validated band of an LLM plan's predictions (`blueprints.capacity.uncertainty`): each figure's
    [low, high] at the p75 |error| of the published points its step source times (or of its calibration's residual)."""

    ttft_p95_ms: Interval
    itl_p95_ms: Interval
    requests_per_s_capacity: Interval


class CapacityMargin(ClosedModel):
    """A production plan without a calibration of its replica is sized at its band's pessimistic edge: every step's
    kernel time and the TTFT floor scaled by these factors (the fleet simulation replays them). `central_plan`: what
    the same search plans on the central estimate, which a calibration (`blueprint calibrate`) that confirms it brings
    the plan down to."""

    step_time: float = Field(ge=1.0, le=10.0, description="factor on every step's kernel time")
    ttft_floor: float = Field(ge=1.0, le=10.0, description="factor on the frontend's latency and serial work")
    central_plan: str = Field(max_length=200, description="the central estimate's plan, e.g. `6x g6e.xlarge (6 "
                              "replicas, tensor_parallel_size=1)`")
    central_monthly_usd: Usd = Field(description="its serving nodes (or instances), USD/month")


class UnitPrices(ClosedModel):
    """What one fleet costs per unit of the planned traffic, USD (tokens: generative models only, else None)."""

    usd_per_1k_requests: Usd
    usd_per_million_input_tokens: Usd | None = Field(default=None, description="the prompts' share of the cost "
                                                     "(`Predictions.prefill_time_share`) per 1M prompt tokens")
    usd_per_million_output_tokens: Usd | None = Field(default=None, description="the rest of the cost per 1M "
                                                      "generated tokens")
    usd_per_million_tokens: Usd | None = Field(default=None, description="the whole cost per 1M prompt and "
                                               "generated tokens")


class UnitCosts(ClosedModel):
    """Unit costs of the planned traffic (`blueprints.plan.unit_costs`): the simulated day's traffic pattern, priced
    with the expected (autoscaled) fleet and, beside it, the fleet provisioned for the peak all month.

    The cost of a generative model splits between its prompt and generated tokens by `Predictions.prefill_time_share`."""

    requests_per_month: float = Field(gt=0, le=1e12, description="the planned day's requests x days per month")
    million_input_tokens_per_month: float | None = Field(default=None, gt=0, le=1e12)
    million_output_tokens_per_month: float | None = Field(default=None, gt=0, le=1e12)
    expected: UnitPrices = Field(description="priced with expected_monthly_cost_usd")
    provisioned: UnitPrices = Field(description="priced with monthly_cost_usd (the peak's fleet all month)")


class KedaCron(ClosedModel):
    """A KEDA `cron` trigger's metadata (KEDA 2.20.2 pkg/scalers/cron_scaler.go L30-36: `start`, `end`, `timezone`,
    `desiredReplicas`, all required; blueprints/catalog/addons.yaml keda `cron_scaler`): `desiredReplicas` replicas
    from `start` until `end` (five-field cron expressions in `timezone`), the ScaledObject's minimum outside."""

    start: str = Field(pattern=r"^[0-9]{1,2} [0-9]{1,2} \* \* \*$", description="minute hour * * * (daily)")
    end: str = Field(pattern=r"^[0-9]{1,2} [0-9]{1,2} \* \* \*$", description="minute hour * * * (daily); never "
                     "`start` (cron_scaler.go L48-50 refuses it)")
    timezone: str = Field(max_length=64, description="IANA time zone (Go's time.LoadLocation, cron_scaler.go L124)")
    desired_replicas: int = Field(ge=1, le=bounds.MAX_REPLICAS, description="desiredReplicas (0 is refused, "
                                  "cron_scaler.go L52-54)")

    @model_validator(mode="after")
    def _start_not_end(self) -> KedaCron:
        if self.start == self.end:
            raise ValueError(f"start and end are both {self.start!r}: KEDA's cron scaler refuses equal schedules "
                             "(cron_scaler.go L48-50); re-plan with `blueprint plan`")
        return self

    @classmethod
    def daily(cls, *, start_hour: int, run_hours: float, timezone: str, replicas: int) -> KedaCron | None:
        """The trigger holding `replicas` from `start_hour`:00 for `run_hours` (rounded up to the minute) in
        `timezone`; None when that is the whole day (KEDA refuses equal start and end: always on instead)."""
        minutes = run_minutes(run_hours)
        if minutes >= 24 * 60:
            return None
        end = (start_hour * 60 + minutes) % (24 * 60)
        return cls(start=f"0 {start_hour} * * *", end=f"{end % 60} {end // 60} * * *", timezone=timezone,
                   desired_replicas=replicas)

    def active_at(self, moment: dt.datetime) -> bool:
        """Whether the trigger holds `desired_replicas` at `moment` (timezone-aware): from `start` to `end` in
        `timezone`, across midnight when `end` is earlier. KEDA 2.20.2's cron scaler is active exactly when the next
        `end` comes before the next `start` (pkg/scalers/cron_scaler.go L123-151: the metric is desiredReplicas then,
        else 0), which for daily schedules is this interval, except in a repeated hour (the fall-back change):
        robfig/cron v3.0.1 `SpecSchedule.Next` walks real time, so once the first occurrence of `start` or `end` has
        passed the next is its second, and KEDA starts or ends the run at that second occurrence, which this
        wall-clock judgement does not model (an hour a year; `blueprints.requirements.model.shortest_run`)."""
        local = moment.astimezone(ZoneInfo(self.timezone))
        now = local.hour * 60 + local.minute
        start, end = (int(m) + 60 * int(h) for m, h in (self.start.split()[:2], self.end.split()[:2]))
        return start <= now < end if start < end else now >= start or now < end


#: `autoscaling.metric` of a SageMaker asynchronous endpoint: queued and in-process requests per instance
#: (AWS/SageMaker, EndpointName, Average), a customized target-tracking metric (it publishes no
#: InvocationsPerInstance: awsdocs amazon-sagemaker-developer-guide doc_source/async-inference-autoscale.md,
#: async-inference-monitor.md; blueprints/catalog/metrics.yaml).
BACKLOG_PER_INSTANCE = "ApproximateBacklogSizePerInstance"
#: The most requests one asynchronous instance takes at once (`AsyncInferenceClientConfig`
#: `MaxConcurrentInvocationsPerInstance` 1-1000: botocore 1.44.8 sagemaker 2017-07-24 service-2.json).
MAX_CONCURRENT_INVOCATIONS_PER_INSTANCE = 1000


class AsyncInference(ClosedModel):
    """A batch served by a SageMaker asynchronous endpoint (`BatchPlan.async_inference`): the day's requests queue
    at the endpoint (`InvokeEndpointAsync`, inputs and outputs in S3), which scales from zero on its queue
    (`ApproximateBacklogSizePerInstance` per instance against `backlog_target`; `HasBacklogWithoutCapacity` starts
    the planned instances from zero) and back to zero when it is empty."""

    max_concurrent_invocations_per_instance: int = Field(ge=1, le=MAX_CONCURRENT_INVOCATIONS_PER_INSTANCE,
                                                         description="requests SageMaker sends one instance at once: "
                                                         "its planned batch (max_rolling_batch_size)")
    backlog_target: float = Field(gt=0, le=1e6, description="target tracking's ApproximateBacklogSizePerInstance: "
                                  "while the queue holds more per instance, it adds instances up to the planned ones")
    output_prefix: str = Field(pattern=r"^async/[a-z0-9-]{1,100}/$", description="where results land in the stack's "
                               "model store: <prefix>out/, failures <prefix>failed/ (SSE-KMS with the store's key)")
    instance_hours_per_day: float = Field(gt=0, le=24 * bounds.MAX_REPLICAS, description="instance-hours a day: "
                                          "each instance's cold start, its share of the run and the scale-in lag "
                                          "(what the expected monthly cost counts)")


class BatchPlan(ClosedModel):
    """A batch service's daily run (requirements `traffic.batch`, `blueprints.plan.batch`) and its replay
    (`blueprints.simulate.batch`): the fleet runs from the window's start until the deadline, none outside it: on
    GPU nodes under a KEDA cron schedule (`keda_cron`), or as a SageMaker asynchronous endpoint that scales from zero
    on its queue (`async_inference`)."""

    requests_per_day: float = Field(gt=0, le=bounds.MAX_BATCH_REQUESTS_PER_DAY * bounds.MAX_TRAFFIC_SCALE,
                                    description="this environment's requests a day (x traffic_scale)")
    deadline_hours: float = Field(gt=0, le=24)
    window_start_hour: int = Field(ge=0, le=23, description="local time in `timezone`")
    window_hours: int = Field(ge=1, le=24)
    timezone: str = Field(max_length=64)
    run_hours: float = Field(gt=0, le=24, description="hours a day the fleet runs: from the window's start to the "
                             "deadline (what the expected monthly cost counts; on SageMaker the hours its queue is "
                             "served within, the cost counting `async_inference.instance_hours_per_day`)")
    replicas: int = Field(ge=1, le=bounds.MAX_REPLICAS, description="replicas during the run")
    requests_per_s_per_replica: float = Field(gt=0, le=1e9, description="one replica's throughput with its batch "
                                              "full (a closed loop at max_num_seqs, the queue never empty)")
    start_s: float = Field(ge=0, le=86_400, description="the fleet's cold start at the window's start, s")
    request_latency_s: float = Field(ge=0, le=86_400, description="one request's latency at that operating point "
                                     "(p95), s")
    completion_hours: float = Field(ge=0, le=1e4, description="simulated: the day's work done, hours after the "
                                    "window's start")
    monthly_cost_usd: Usd = Field(description="the fleet's nodes for run_hours a day (on SageMaker its instances' "
                                  "hours), plus the stack's fixed items")
    keda_cron: KedaCron | None = Field(default=None, description="the ScaledObject's cron trigger; none when the "
                                       "run lasts the whole day (always on) or on SageMaker")
    async_inference: AsyncInference | None = Field(default=None, description="SageMaker asynchronous inference "
                                                   "(sagemaker-endpoint); none on GPU nodes")

    @model_validator(mode="after")
    def _one_schedule(self) -> BatchPlan:
        if self.async_inference is not None and self.keda_cron is not None:
            raise ValueError("keda_cron and async_inference both set: an asynchronous endpoint scales on its queue, "
                             "not a cron schedule; re-plan with `blueprint plan`")
        return self

    def scaling(self, autoscaling: Autoscaling) -> Autoscaling:
        """`autoscaling` as this run deploys it, the one source of a batch stack's `autoscaling` section (written by
        the planner, checked by `blueprints.contracts.consistency`): bounds `min_replicas`-`max_replicas`; on a cron
        schedule the cron scaler's metric and target (`CRON_SCHEDULE`, its ScaledObject's one trigger), all day the
        engine's signal it keeps (pinned, min = max)."""
        update: dict = {"min_replicas": self.min_replicas, "max_replicas": self.max_replicas}
        if self.keda_cron is not None:
            update.update(metric=CRON_SCHEDULE, target=CRON_TARGET_PER_REPLICA)
        elif self.async_inference is not None:
            update.update(metric=BACKLOG_PER_INSTANCE, target=self.async_inference.backlog_target)
        return autoscaling.model_copy(update=update)

    @property
    def min_replicas(self) -> int:
        """The autoscaler's minimum: 0 on a cron schedule or an asynchronous endpoint (none outside the run), else
        the planned replicas (always on). What the stack config's `autoscaling.min_replicas` states
        (`blueprints.contracts.consistency`)."""
        return 0 if self.keda_cron is not None or self.async_inference is not None else self.replicas

    @property
    def max_replicas(self) -> int:
        """The autoscaler's maximum: the planned replicas (a batch runs no more)."""
        return self.replicas

    def replicas_at(self, moment: dt.datetime) -> int:
        """Replicas the schedule holds at `moment` (timezone-aware): `replicas` during the run, 0 outside it."""
        return self.replicas if self.keda_cron is None or self.keda_cron.active_at(moment) else 0

    def schedule(self) -> str:
        """The schedule in words: `KEDA cron '0 22 * * *' to '0 4 * * *' Europe/Berlin`, `SageMaker asynchronous
        inference ...` or `always on`."""
        c, a = self.keda_cron, self.async_inference
        if a is not None:
            return (f"SageMaker asynchronous inference, from zero on its queue, {a.instance_hours_per_day:,.1f} "
                    "instance-hours a day")
        return f"KEDA cron {c.start!r} to {c.end!r} {c.timezone}" if c is not None else "always on"


class EngineOption(ClosedModel):
    """One serving engine's cheapest option for this stack: a row of the plan's engine table
    (`blueprints.plan.engines`). Costs are peak-provisioned (the engine's nodes for the peak plus the stack's fixed
    items), per 1M tokens over the planned traffic, so every row is priced alike."""

    engine: Literal["vllm", "sglang", "tensorrt-llm"]
    planned: bool = Field(description="the engine this stack config deploys")
    instance_type: str | None = Field(default=None, max_length=40)
    tensor_parallel_size: int | None = Field(default=None, ge=1, le=bounds.MAX_GPUS_PER_NODE)
    kv_cache_dtype: Literal["auto", "fp8"] | None = None
    replicas: int | None = Field(default=None, ge=1, le=bounds.MAX_REPLICAS)
    monthly_cost_usd: Usd | None = None
    usd_per_million_tokens: Usd | None = None
    ttft_p95_ms: PredictedMs | None = None
    itl_p95_ms: PredictedMs | None = None
    step_times: Literal["measured", "roofline"] | None = Field(default=None, description="what its step times rest "
                                                               "on: the engine's measured kernel tables or the roofline")
    verdict: str = Field(min_length=1, max_length=400, description="planned and why, or why it lost")


class Predictions(ClosedModel):
    """What the capacity model predicts at this environment's peak (`capacity_source` says what it rests on;
    `capacity_correction`, only when a calibration applies, what corrected it; `uncertainty`, for LLMs, how far off it
    may be, and `capacity_margin` the margin a production plan was sized with)."""

    ttft_p95_ms: PredictedMs | None = None
    itl_p95_ms: PredictedMs | None = None
    ttft_p99_ms: PredictedMs | None = Field(default=None, description="TTFT p99 at peak, ms: predicted when the SLO "
                                            "sets slo.ttft_p99_ms")
    itl_p99_ms: PredictedMs | None = Field(default=None, description="ITL p99 at peak, ms: predicted when the SLO "
                                           "sets slo.itl_p99_ms")
    latency_p95_ms: PredictedMs | None = Field(default=None, description="request latency p95, ms (for LLMs: a mean "
                                               "request, TTFT + output tokens x ITL)")
    output_tokens_per_s: float | None = Field(default=None, ge=0, le=1e12, description="all replicas at peak, "
                                              "tokens/s")
    requests_per_s_capacity: float = Field(gt=0, le=1e12, description="all planned replicas, requests/s")
    concurrency_per_replica: int = Field(ge=1, le=bounds.INT32_MAX)
    monthly_cost_usd: Usd = Field(description="the sum of `cost_lines`, USD/month; 0 only on an edge cluster's owned "
                                  "nodes given no cost")
    cost_lines: list[CostLine] = Field(min_length=1, max_length=20, description="the serving nodes (or SageMaker "
                                       "instances) first, then the stack's fixed items")
    cost_is_estimate: bool = Field(description="true when spot prices (estimated) are used")
    prefill_time_share: float | None = Field(default=None, ge=0, le=1, description="generative models: the share "
                                             "of a replica's busy time prefill takes at the planned concurrency "
                                             "(`blueprints.capacity.analytic.prefill_time_share`)")
    unit_costs: UnitCosts | None = Field(default=None, description="cost per 1k requests and per 1M tokens of the "
                                         "planned traffic (set with the fleet simulation)")
    platform_monthly_cost_usd: Usd | None = Field(default=None, description="the shared platform's own "
                                                  "monthly cost (reported, not part of monthly_cost_usd)")
    expected_monthly_cost_usd: Usd | None = Field(default=None, description="the fleet simulation's monthly "
                                                    "cost of the autoscaled fleet over a typical day of the traffic "
                                                    "pattern (`monthly_cost_usd` is the peak-provisioned cost, never "
                                                    "below it)")
    max_monthly_cost_usd: Usd | None = Field(default=None, description="the most the autoscaler can run, USD/month: "
                                             "max_replicas' nodes (placed as the scheduler places them) plus the "
                                             "fixed items; budget.max_monthly_usd is checked against it")
    slo_attainment: float | None = Field(default=None, ge=0, le=1, description="the fleet simulation's share of "
                                         "minutes within every latency target: p95, and an LLM's p99 where set (0-1)")
    models: list[ModelLatency] | None = Field(default=None, description="non-generative archetypes: each model's "
                                              "own predicted latency (latency_p95_ms above is the slowest's)")
    capacity_source: str | None = Field(default=None, max_length=500, description="LLMs: what the predicted step "
                                        "times rest on (measured vLLM kernel data for the GPU, or the roofline and "
                                        "why) and their expected error against published measurements")
    capacity_correction: CapacityCorrection | None = Field(default=None, exclude_if=absent_when_none,
                                                           description="LLMs: the calibration "
                                                           "applied (absent when none matches the replica)")
    uncertainty: PredictionBand | None = Field(default=None, exclude_if=absent_when_none, description="LLMs: the "
                                               "band of ttft_p95_ms, itl_p95_ms and requests_per_s_capacity")
    uncertainty_source: str | None = Field(default=None, exclude_if=absent_when_none, max_length=600,
                                           description="LLMs: what the band rests on (regime, GPU, capacity source, "
                                           "calibrated or not)")
    capacity_margin: CapacityMargin | None = Field(default=None, exclude_if=absent_when_none, description="LLMs in "
                                                   "production without a calibration: the margin sized with")
    engines: list[EngineOption] | None = Field(default=None, exclude_if=absent_when_none, max_length=3,
                                               description="self-hosted LLMs: each engine's cheapest option (the "
                                               "engine table), the planned one marked")


class PipelinePart(str, Enum):
    """A part of a compound service: its stack is `<service>-<part>-<environment>`, one archetype each."""

    GENERATOR = "generator"
    RETRIEVAL = "retrieval"


class PipelineStage(ClosedModel):
    """One model's share of a compound service's end-to-end p95 (`blueprints.plan.compound.latency` composes them)."""

    part: PipelinePart
    model: str = Field(pattern=DNS_1123_LABEL, max_length=40, description="served model name")
    measure: Literal["ttft", "latency"] = Field(description="what of the model's latency the pipeline waits for: "
                                                "`ttft` the generator's first token (streamed answers), `latency` "
                                                "a whole request")
    calls_per_request: int = Field(ge=1, le=100_000, description="requests one end-to-end request sends this model "
                                   "(its peak rate over the generator's, rounded up; a reranker scoring 20 passages: "
                                   "20), sent together")
    rounds: int = Field(ge=1, le=100_000, description="batches those calls take one after another on one replica: "
                        "calls / requests a replica computes at once, rounded up")
    latency_p95_ms: float = Field(gt=0, le=1e7, description="one call's predicted p95, ms")
    stage_p95_ms: float = Field(gt=0, le=1e8, description="this stage's share: one call's p95 plus a batch time per "
                                "further round, ms")


class Pipeline(ClosedModel):
    """A compound service's end-to-end view, recorded identically in each part's stack config: the stages, their
    composed p95 (a sum of p95s: conservative, see `blueprints.plan.compound.latency`) and the budget it was planned against."""

    service: str = Field(pattern=DNS_1123_LABEL, max_length=40, description="the compound service (its requirements "
                         "file's `service`)")
    part: PipelinePart = Field(description="the part this stack serves")
    stacks: list[str] = Field(min_length=2, max_length=2, description="every part's stack in this environment, "
                              "generator first")
    latency_p95_budget_ms: float | None = Field(default=None, gt=0, le=600_000, description="slo."
                                                "pipeline_latency_p95_ms, ms (none: reported, not checked)")
    latency_p95_ms: float = Field(gt=0, le=1e8, description="the stages' composed p95, ms")
    stages: list[PipelineStage] = Field(min_length=2, max_length=64)

    @model_validator(mode="after")
    def _composed(self) -> Pipeline:
        parts = {s.part for s in self.stages}
        if parts != set(PipelinePart):
            raise ValueError("a pipeline has stages of both parts (generator and retrieval); re-plan with "
                             "`blueprint plan`")
        total = sum(s.stage_p95_ms for s in self.stages)
        if abs(total - self.latency_p95_ms) > 0.05 * len(self.stages):
            raise ValueError(f"latency_p95_ms={self.latency_p95_ms:g} is not the sum of its stages ({total:g}); "
                             "re-plan with `blueprint plan` instead of editing the stack config")
        if self.latency_p95_budget_ms is not None and self.latency_p95_ms > self.latency_p95_budget_ms + 0.05:
            raise ValueError(f"latency_p95_ms={self.latency_p95_ms:g} misses latency_p95_budget_ms="
                             f"{self.latency_p95_budget_ms:g}: re-plan with `blueprint plan` instead of editing the "
                             "stack config")
        return self


class RolesAnywhereSpec(ClosedModel):
    """How an edge cluster's pods read their `s3://` sources: IAM Roles Anywhere (a trust anchor on your CA, a
    profile, a role that may only read the sources' prefixes), with the certificate of a Secret you provide."""

    acm_pca_arn: str | None = Field(default=None, pattern=ACM_PCA_ARN, description="the trust anchor's ACM Private CA; "
                                    "none: the PEM bundle "
                                   "in config key servingblueprints:rolesAnywhereCaBundle")
    certificate_secret: str = Field(pattern=DNS_1123_SUBDOMAIN, max_length=253, description="kubernetes.io/tls Secret "
                                    "in the service's namespace (tls.crt, tls.key)")
    certificate_common_name: str = Field(min_length=1, max_length=64, pattern=CERTIFICATE_CN, description="the "
                                         "certificate subject's CN the "
                                         "role trusts")
    session_duration_s: int = Field(ge=900, le=43_200, description="credentials' lifetime, s")


class AppliedOverride(ClosedModel):
    """An `overrides:` entry of the requirements as applied to this stack: the setting, its value, what the plan
    had derived, and why (`blueprints.plan.overrides`)."""

    field: OverridableField
    value: float = Field(ge=0, le=bounds.INT32_MAX)
    planned: float | None = Field(default=None, ge=0, le=bounds.INT32_MAX, description="the value the plan derived "
                                  "(none: unset)")
    reason: str = Field(min_length=10, max_length=300, pattern=r"^[^\x00-\x1f\x7f]+$")


class Alerting(ClosedModel):
    """Where this stack's alerts go: the platform's Alertmanager receiver (Kubernetes), or an SNS topic (SageMaker)."""

    receiver: Literal["slack", "pagerduty", "webhook"] | None = Field(
        default=None, description="the Alertmanager receiver of the platform this stack lands on; none: alerts "
        "reach nobody")
    sns_topic_arn: str | None = Field(default=None, pattern=r"^arn:aws(-cn|-us-gov)?:sns:[a-z0-9-]+:[0-9]{12}:"
                                      r"[A-Za-z0-9_-]{1,256}$", description="SageMaker: the topic its alarms notify")


#: Most finalists `blueprint pilot` deploys at once (`--finalists`): each is a GPU stack billed while it runs.
MAX_PILOT_FINALISTS = 5
#: Bounds of a pilot's lifetime, hours (`--hours`): at least a benchmark sweep, at most a week.
PILOT_HOURS_RANGE = (1, 168)
#: The AWS tag (on every tagged resource, through the stack's tags) saying when a pilot stack is to be destroyed:
#: `YYYY-MM-DDTHH:MMZ`, UTC.
PILOT_EXPIRES_TAG = "servingblueprints.io/expires"
#: Format of `PilotRecord.expires` in that tag.
PILOT_EXPIRES_FORMAT = "%Y-%m-%dT%H:%MZ"


class PilotRecord(ClosedModel):
    """A pilot stack (`blueprint pilot`, `blueprints.plan.pilot`): finalist `candidate` of `finalists`, deployed on its
    environment's platform to be benchmarked, stack `<service>-pilot-<candidate>`, until `expires`."""

    candidate: int = Field(ge=1, le=MAX_PILOT_FINALISTS, description="its rank among the finalists, 1 = cheapest")
    finalists: int = Field(ge=1, le=MAX_PILOT_FINALISTS, description="how many finalists the pilot deploys")
    hours: int = Field(ge=PILOT_HOURS_RANGE[0], le=PILOT_HOURS_RANGE[1], description="its planned lifetime, h")
    expires: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}Z$", description="when to destroy it, UTC "
                         "(`PILOT_EXPIRES_FORMAT`); also the stack's `PILOT_EXPIRES_TAG` tag")

    @model_validator(mode="after")
    def _within(self) -> PilotRecord:
        if self.candidate > self.finalists:
            raise ValueError(f"candidate {self.candidate} is beyond the {self.finalists} finalists")
        return self
