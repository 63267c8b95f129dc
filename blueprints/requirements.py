"""The requirements file schema (`stacks/requirements/<service>.yaml`) and its loader.

Every section is closed (`extra="forbid"`): a misspelt key is an error, never silently ignored.
`blueprint schema` prints this schema as JSON Schema for editors.
"""

from __future__ import annotations

import ipaddress
import re
from enum import Enum
from pathlib import Path
from typing import Annotated

import yaml

from blueprints.yamlio import load_yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from blueprints.catalog import Architecture, Task, known_region
from blueprints.errors import RequirementsError, format_validation_error, read_text_file

DNS_1123_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
#: AWS region names such as `us-east-1`, `eu-central-1`, `ap-southeast-2`.
AWS_REGION = r"^[a-z]{2}(-gov)?-[a-z]+-\d$"
#: An AWS region in the catalog (`blueprints.catalog.known_region`).
Region = Annotated[str, Field(pattern=AWS_REGION), AfterValidator(known_region)]
#: Where weights come from: `s3://bucket/prefix/`, `hf://org/name`, or (edge clusters) an `https://` URL of one file.
WEIGHTS_URI = (r"^(s3://[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9](/.*)?|hf://[\w.\-]+/[\w.\-]+"
               r"|https://[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?(:[0-9]{1,5})?/[\w.~%!$&'()*+,;=:@/\-]+)$")
#: A SHA-256 digest, lowercase hex.
SHA256_HEX = r"^[0-9a-f]{64}$"
#: A Kubernetes object name (DNS-1123 subdomain): a Secret, an IngressClass.
DNS_1123_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
#: An ACM Private CA ARN: `arn:aws:acm-pca:<region>:<account>:certificate-authority/<id>` (AWS General Reference,
#: "Amazon Resource Names", ACM Private CA resource type `certificate-authority/<id>`).
ACM_PCA_ARN = r"^arn:aws(-cn|-us-gov)?:acm-pca:[a-z]{2}(-gov)?-[a-z]+-\d:[0-9]{12}:certificate-authority/[0-9a-f-]{36}$"
#: An ACM certificate ARN (commercial, China and GovCloud partitions): `arn:aws:acm:<region>:<account>:certificate/<id>`
#: (AWS General Reference, "Amazon Resource Names", ACM resource type `certificate/<certificate-id>`).
ACM_CERTIFICATE_ARN = r"^arn:aws(-cn|-us-gov)?:acm:([a-z]{2}(-gov)?-[a-z]+-\d):[0-9]{12}:certificate/[0-9a-f-]{36}$"
#: A KMS key ARN (AWS KMS Developer Guide, "Key identifiers": `arn:aws:kms:<region>:<account>:key/<key id>`, the id a
#: UUID or a multi-Region `mrk-` id). IAM grants use of a key only by its key ARN: "You cannot use a key id, alias name,
#: or alias ARN to identify a KMS key in an IAM policy statement" (KMS Developer Guide, cmks-in-iam-policies).
KMS_KEY_ARN = (r"^arn:aws(-cn|-us-gov)?:kms:[a-z]{2}(-gov)?-[a-z]+-\d:[0-9]{12}:key/"
               r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|mrk-[0-9a-f]{32})$")
#: A DNS host name (RFC 1123): dot-separated labels of letters, digits and hyphens, at most 253 characters.
HOSTNAME = r"^([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)+$"
#: The open internet, as an IPv4 CIDR.
OPEN_INTERNET = "0.0.0.0/0"
#: At most this many source CIDRs: the load balancer controller writes one security-group rule per CIDR and port,
#: and a security group holds 60 inbound rules by default (Amazon VPC quotas, "Inbound or outbound rules per security
#: group").
MAX_ALLOWED_CIDRS = 20
#: AWS tag values: up to 256 letters, digits, spaces and _ . : / = + - @, starting and ending with a non-space.
TAG_VALUE = r"^[\w.:/=+\-@]([\w .:/=+\-@]*[\w.:/=+\-@])?$"


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_enum_values=False, allow_inf_nan=False)


class ModelFormat(str, Enum):
    SAFETENSORS = "safetensors"
    ONNX = "onnx"
    TENSORRT = "tensorrt"
    TORCHSCRIPT = "torchscript"
    PYTORCH = "pytorch"
    TENSORFLOW = "tensorflow"
    GGUF = "gguf"


class Precision(str, Enum):
    FP32 = "fp32"
    FP16 = "fp16"
    BF16 = "bf16"
    FP8 = "fp8"
    INT8 = "int8"
    INT4 = "int4"

    @property
    def bytes_per_param(self) -> float:
        """Bytes per weight; INT4 includes group-wise scales (~0.56). Source: sizing-facts.md, Formulas."""
        return {"fp32": 4.0, "fp16": 2.0, "bf16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5625}[self.value]


class Quantization(str, Enum):
    """How a checkpoint's weights were quantised: the kernel family vLLM runs, which sets the decode bandwidth a
    quantised model reaches (4-bit AWQ and GPTQ kernels differ; see `defaults.WEIGHT_BANDWIDTH_FACTOR`)."""

    AWQ = "awq"
    GPTQ = "gptq"
    FP8 = "fp8"
    W8A8 = "w8a8"

    @property
    def precisions(self) -> tuple[Precision, ...]:
        """The weight precisions a checkpoint of this method comes in."""
        return {"awq": (Precision.INT4,), "gptq": (Precision.INT4, Precision.INT8), "fp8": (Precision.FP8,),
                "w8a8": (Precision.INT8,)}[self.value]


#: The method a quantised precision implies when `model.quantization` is not given (what the planner always assumed:
#: INT4 -> AWQ, INT8 -> GPTQ, FP8 -> FP8), so requirement files written before the field existed keep their meaning.
DEFAULT_QUANTIZATION = {Precision.INT4: Quantization.AWQ, Precision.INT8: Quantization.GPTQ,
                        Precision.FP8: Quantization.FP8}

#: Largest p95 / mean of a token-length distribution: lengths are drawn from a lognormal matched to the mean and
#: p95, and a lognormal's p95 is at most exp(1.645^2 / 2) = 3.87x its mean (blueprints/capacity/workload.py).
MAX_TOKENS_P95_TO_MEAN = 3.5


class TrafficPattern(str, Enum):
    STEADY = "steady"
    BURSTY = "bursty"
    SPIKY = "spiky"


class Accelerator(str, Enum):
    NVIDIA_GPU = "nvidia-gpu"
    CPU = "cpu"


class CpuArch(str, Enum):
    X86_64 = "x86_64"
    ARM64 = "arm64"


class OperationsPreference(str, Enum):
    MANAGED = "managed"
    SELF_HOSTED = "self-hosted"
    ANY = "any"


class Platform(str, Enum):
    """Where self-hosted archetypes run: the shared platform's EKS cluster, an existing (EKS or other) cluster whose
    add-ons are declared, or an edge cluster of owned nodes (no AWS load balancers, Pod Identity or EC2 prices)."""

    EKS = "eks"
    EXISTING_CLUSTER = "existing-cluster"
    EDGE_CLUSTER = "edge-cluster"


class Traffic(_Section):
    """Load at peak, per model. Token counts are per request."""

    peak_requests_per_s: float = Field(gt=0, description="peak arrival rate in production, requests/s")
    mean_input_tokens: int = Field(default=512, ge=1, description="mean prompt length, tokens")
    mean_output_tokens: int = Field(default=256, ge=1, description="mean generated length, tokens (generative models)")
    streaming: bool = Field(default=True, description="responses are streamed token by token")
    pattern: TrafficPattern = Field(default=TrafficPattern.STEADY, description="how arrivals bunch around the peak "
                                    "rate: steady = Poisson; bursty, spiky = rate bursts of seconds (see "
                                    "defaults.ARRIVAL_BURSTS)")
    input_tokens_p95: int | None = Field(default=None, ge=1, le=1_048_576, description="95th-percentile prompt "
                                         "length, tokens (>= mean_input_tokens, <= 3.5x it); the capacity model "
                                         "draws prompt lengths from a lognormal with this mean and p95. Default: "
                                         "defaults.TOKENS_P95_TO_MEAN x the mean")
    output_tokens_p95: int | None = Field(default=None, ge=1, le=1_048_576, description="95th-percentile generated "
                                          "length, tokens (>= mean_output_tokens, <= 3.5x it); as input_tokens_p95")

    @model_validator(mode="after")
    def _p95_around_mean(self) -> Traffic:
        for field, mean_field in (("input_tokens_p95", "mean_input_tokens"), ("output_tokens_p95", "mean_output_tokens")):
            p95, mean = getattr(self, field), getattr(self, mean_field)
            if p95 is None:
                continue
            if p95 < mean:
                raise ValueError(f"{field}={p95} is below {mean_field}={mean}: a 95th percentile is at least the "
                                 f"mean of lengths this skewed; raise {field} to >= {mean} or lower {mean_field}")
            if p95 > MAX_TOKENS_P95_TO_MEAN * mean:
                raise ValueError(f"{field}={p95} is more than {MAX_TOKENS_P95_TO_MEAN:g}x {mean_field}={mean}; the "
                                 f"length model cannot put the p95 that far above the mean; lower {field} to <= "
                                 f"{int(MAX_TOKENS_P95_TO_MEAN * mean)} or check both figures")
        return self


class ModelSpec(_Section):
    """One model to serve: a catalog `id`, or an explicit `architecture` (then `name` is required)."""

    id: str | None = Field(default=None,
                           description="catalog id, e.g. `llama-3.1-8b` (see blueprints/catalog/models.yaml)")
    name: str | None = Field(default=None, pattern=DNS_1123_LABEL, max_length=40,
                             description="served model name; defaults to `id`")
    architecture: Architecture | None = Field(default=None, description="explicit shape for a model not in the catalog")
    task: Task | None = Field(default=None, description="defaults to the catalog's task for `id`")
    format: ModelFormat = Field(default=ModelFormat.SAFETENSORS, description="on-disk weights format")
    precision: Precision = Field(default=Precision.BF16, description="precision the weights are served at")
    quantization: Quantization | None = Field(
        default=None, description="how a quantised checkpoint was made: `awq` (int4), `gptq` (int4 or int8), `fp8`, "
        "`w8a8` (int8 weights and activations). Default: the one `precision` implies (int4 -> awq, int8 -> gptq, "
        "fp8 -> fp8); none for 16/32-bit")
    weights_uri: str = Field(pattern=WEIGHTS_URI, max_length=2048,
                             description="`s3://bucket/prefix/` or `hf://org/name`; on an edge cluster also an "
                             "`https://` URL of the model file (then `sha256` is required)")
    sha256: str | None = Field(default=None, pattern=SHA256_HEX, description="`https://` sources only: the SHA-256 "
                               "of the file (64 lowercase hex digits); the download is refused when it differs")
    weights_kms_key_arn: str | None = Field(
        default=None, pattern=KMS_KEY_ARN, description="`s3://` sources encrypted with a customer-managed KMS key: "
        "its key ARN (not an alias), so the copy into the stack's model store may decrypt them. Default: none (SSE-S3 "
        "or the AWS-managed key of the source's own account)")
    max_context_tokens: int | None = Field(default=None, ge=64, description="longest prompt + output to serve; "
                                           "defaults to min(model limit, 8192) for text generation")
    traffic: Traffic | None = Field(default=None, description="this model's own load (multi-model estates, `models:`)")
    measured_latency_ms: float | None = Field(
        default=None, gt=0, description="non-generative models: latency of ONE request (batch 1, mean input) you "
        "measured on `measured_instance_type` using all its GPU / vCPUs, ms. When set, sizing derives the compute per "
        "request from it instead of the catalog's FLOPs estimate")
    measured_instance_type: str | None = Field(
        default=None, description="the EC2 type `measured_latency_ms` was measured on, e.g. `c7i.xlarge`, `g5.xlarge`")

    @model_validator(mode="after")
    def _id_or_architecture(self) -> ModelSpec:
        if self.id is None and self.architecture is None:
            raise ValueError("give a catalog `id` or an explicit `architecture`")
        if self.id is None and (self.name is None or self.task is None):
            raise ValueError("a model given by `architecture` also needs `name` and `task`")
        if self.quantization is not None and self.precision not in self.quantization.precisions:
            allowed = ", ".join(p.value for p in self.quantization.precisions)
            raise ValueError(f"quantization `{self.quantization.value}` comes with precision {allowed}, not "
                             f"`{self.precision.value}`; set model.precision to {allowed} or drop model.quantization")
        https = self.weights_uri.startswith("https://")
        if https and self.sha256 is None:
            raise ValueError("an https:// weights_uri needs `sha256` (the file's SHA-256, e.g. from `sha256sum "
                             "model.onnx`): without it a changed or tampered file would be served")
        if self.sha256 is not None and not https:
            raise ValueError("`sha256` checks an https:// download; s3:// and hf:// sources are read with an "
                             "identity, not a checksum: remove it")
        if self.weights_kms_key_arn is not None and not self.weights_uri.startswith("s3://"):
            raise ValueError(f"weights_kms_key_arn applies to an s3:// weights_uri, not {self.weights_uri}; remove it")
        if (self.measured_latency_ms is None) != (self.measured_instance_type is None):
            raise ValueError("give `measured_latency_ms` and `measured_instance_type` together (the latency is only "
                             "meaningful on the hardware it was measured on)")
        return self

    @property
    def served_name(self) -> str:
        return self.name or _dns_label(self.id or "model")

    @property
    def quantization_method(self) -> Quantization | None:
        """`quantization`, or the method `precision` implies (None for 16/32-bit weights)."""
        return self.quantization or DEFAULT_QUANTIZATION.get(self.precision)


def _dns_label(text: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:40]


#: Longest end-to-end budget a compound service may set, ms: 10 minutes, well past any interactive answer
#: (a SageMaker real-time invocation stops at 60 s) [assumption: a bound against typos, not a platform limit].
MAX_PIPELINE_LATENCY_MS = 600_000


class Slo(_Section):
    """Latency and availability targets. Generative models use TTFT/ITL; others use request latency."""

    ttft_p95_ms: float | None = Field(default=None, gt=0, description="time to first token, p95, ms")
    itl_p95_ms: float | None = Field(default=None, gt=0, description="inter-token latency, p95, ms")
    latency_p95_ms: float | None = Field(default=None, gt=0, description="request latency p95, ms (non-generative)")
    latency_p99_ms: float | None = Field(default=None, gt=0, description="request latency p99, ms (non-generative)")
    availability_pct: float = Field(default=99.5, ge=90, lt=100, description="monthly availability target, %")
    pipeline_latency_p95_ms: float | None = Field(
        default=None, gt=0, le=MAX_PIPELINE_LATENCY_MS, description="compound services only (a generator and "
        "retrieval models in `models:`): end-to-end p95 budget, ms, from the request to the answer's first token "
        "(streamed) or its last (not streamed), composed from the parts' p95s (blueprints/pipeline.py); the plan "
        "tightens the parts' own targets to meet it or refuses")

    @model_validator(mode="after")
    def _p99_not_below_p95(self) -> Slo:
        if self.latency_p95_ms and self.latency_p99_ms and self.latency_p99_ms < self.latency_p95_ms:
            raise ValueError(f"latency_p99_ms ({self.latency_p99_ms}) must be >= latency_p95_ms ({self.latency_p95_ms})")
        return self


class EdgeNodes(_Section):
    """The nodes an edge cluster gives this service: owned, all of one shape, CPU only (nothing to launch or price as
    EC2). The planner sizes replicas, vCPUs and ONNX Runtime threads per replica and replicas per node against this
    shape and refuses, naming the shortfall, when `count` nodes cannot carry the peak within the SLO."""

    count: int = Field(ge=1, le=1000, description="nodes the service may use (its replicas, plus one for a rolling "
                       "update, must fit on them)")
    vcpus: int = Field(ge=1, le=1024, description="vCPUs (hardware threads) per node")
    memory_gib: float = Field(gt=0, le=24_576, description="memory per node, GiB")
    cpu_arch: CpuArch = Field(description="the nodes' CPU architecture: x86_64 or arm64 (every image the service "
                              "runs must be built for it)")
    monthly_usd_per_node: float | None = Field(
        default=None, ge=0, le=1_000_000, description="what one node costs a month (amortised hardware, power, "
        "support), USD; the plan shows it as an owned-hardware line, never an EC2 price. Default: none (owned, $0)")
    gflops_per_vcpu: float | None = Field(
        default=None, gt=0, le=2000, description="effective FP32 GFLOP/s per vCPU of ONNX Runtime on these nodes (as "
        "measured); default: defaults.EDGE_CPU_GFLOPS_PER_VCPU for cpu_arch [assumption]")


class Hardware(_Section):
    accelerators: list[Accelerator] = Field(default=[Accelerator.NVIDIA_GPU, Accelerator.CPU], min_length=1,
                                            description="kinds of compute allowed")
    allowed_instance_families: list[str] = Field(default=[], description="EC2 families allowed, e.g. [g6e, p5]; "
                                                 "empty allows every family in the catalog")
    cpu_arch: CpuArch | None = Field(default=None, description="restrict CPU nodes to one architecture")
    edge_nodes: EdgeNodes | None = Field(default=None, description="operations.platform edge-cluster only: the owned "
                                         "nodes the service runs on")

    @field_validator("allowed_instance_families")
    @classmethod
    def _family_names(cls, value: list[str]) -> list[str]:
        bad = [f for f in value if not re.fullmatch(r"[a-z][a-z0-9-]*", f) or "." in f]
        if bad:
            raise ValueError(f"families are prefixes like `g6e` or `p5`, not instance types: {bad}")
        return value


class RolesAnywhere(_Section):
    """IAM Roles Anywhere for an edge cluster's `s3://` sources: the stack creates a trust anchor (your CA), a profile
    and a role that may only read the models' source prefixes; each pod presents the certificate of a Secret you
    provide, through the AWS signing helper. No static keys."""

    acm_pca_arn: str | None = Field(default=None, pattern=ACM_PCA_ARN, description="the trust anchor's source: the ACM "
                                    "Private CA that issued the pods' certificate. Default: your own CA's PEM "
                                    "bundle in the stack config key servingblueprints:rolesAnywhereCaBundle")
    certificate_secret: str | None = Field(default=None, pattern=DNS_1123_SUBDOMAIN, max_length=253, description="the "
                                           "kubernetes.io/tls Secret (tls.crt, tls.key) in the service's namespace "
                                           "holding the pods' certificate; default `<service>-roles-anywhere`")
    certificate_common_name: str | None = Field(default=None, min_length=1, max_length=64, pattern=r"^[\w.@*:-]+$",
                                                description="the certificate subject's CN the role trusts (IAM "
                                                "condition aws:PrincipalTag/x509Subject/CN); default the stack name "
                                                "`<service>-<environment>`")
    session_duration_s: int = Field(default=3600, ge=900, le=43_200, description="lifetime of the credentials a "
                                    "session vends, s (Roles Anywhere profile durationSeconds: 900-43200)")


class Operations(_Section):
    preference: OperationsPreference = Field(default=OperationsPreference.ANY)
    platform: Platform = Field(default=Platform.EKS, description="where self-hosted archetypes run")
    kubernetes_version: str | None = Field(
        default=None, pattern=r"^1\.\d{2}$", description="Kubernetes version. On EKS the shared platform sets it "
        "(stacks/requirements/platform.yaml); a value here must match it. On an existing cluster: that cluster's "
        "version (default: the newest EKS version in standard support on the plan date)")

    cluster_addons: list[str] | None = Field(
        default=None, max_length=20, description="existing-cluster and edge-cluster: the add-ons that cluster already "
        "runs (catalog ids: karpenter, aws-load-balancer-controller, keda, keda-http-add-on, kube-prometheus-stack, "
        "metrics-server, nvidia-device-plugin, dcgm-exporter, ingress-nginx, traefik, metallb); written to the stack "
        "config as servingblueprints:clusterAddons and checked by `blueprint preview`. On an edge cluster they "
        "decide the scaling (a CPU HPA with metrics-server, else a fixed replica count), the monitoring objects "
        "(only with kube-prometheus-stack) and the exposure (an Ingress, a NodePort, or a LoadBalancer with "
        "metallb); default there: none")
    roles_anywhere: RolesAnywhere | None = Field(
        default=None, description="edge-cluster only: how pods read `s3://` sources (IAM Roles Anywhere); default "
        "settings when omitted")

    @field_validator("cluster_addons")
    @classmethod
    def _known_addons(cls, value: list[str] | None) -> list[str] | None:
        if value is not None:
            from blueprints.catalog.addons import load_platform_catalog

            known = load_platform_catalog().helm
            unknown = [a for a in value if a not in known]
            if unknown:
                raise ValueError(f"unknown add-on(s) {unknown}; known: {', '.join(sorted(known))}")
            if len(set(value)) != len(value):
                raise ValueError("an add-on is listed twice")
        return value

    @model_validator(mode="after")
    def _addons_only_on_existing_clusters(self) -> Operations:
        if self.cluster_addons is not None and self.platform is Platform.EKS:
            raise ValueError("cluster_addons describes an existing or edge cluster (platform: existing-cluster or "
                             "edge-cluster); on eks the shared platform installs the add-ons")
        if self.roles_anywhere is not None and self.platform is not Platform.EDGE_CLUSTER:
            raise ValueError("roles_anywhere gives an edge cluster's pods AWS credentials; on eks and existing EKS "
                             "clusters pods use EKS Pod Identity: remove it or set platform: edge-cluster")
        if self.platform is Platform.EDGE_CLUSTER:
            from blueprints.catalog.addons import load_platform_catalog

            aws_only = [a for a in self.cluster_addons or [] if load_platform_catalog().helm[a].aws_only]
            if aws_only:
                raise ValueError(f"cluster_addons {aws_only} run only on AWS (EKS, EC2 load balancers and nodes); an "
                                 "edge cluster cannot run them: remove them (metallb implements LoadBalancer "
                                 "Services on an edge cluster)")
        return self

    @property
    def declared_addons(self) -> list[str] | None:
        """The add-ons the cluster is declared to run: `cluster_addons`, none on an edge cluster that declares
        nothing; None when unknown (an existing cluster that declares nothing: the preview names what is missing)."""
        if self.cluster_addons is None and self.platform is Platform.EDGE_CLUSTER:
            return []
        return self.cluster_addons

    @field_validator("kubernetes_version")
    @classmethod
    def _known_version(cls, value: str | None) -> str | None:
        if value is not None:
            from blueprints.catalog.addons import load_platform_catalog

            known = load_platform_catalog().versions
            if value not in known:
                raise ValueError(f"unknown Kubernetes version {value!r}; EKS versions in the catalog: "
                                 f"{', '.join(known)}")
        return value


class Compliance(_Section):
    regions_allowed: list[Region] = Field(
        default=[], max_length=20, description="AWS regions data may live in; empty allows any")
    private_only: bool = Field(default=False, description="no public endpoints or load balancers")
    customer_managed_kms: bool = Field(default=False, description="encrypt with a customer-managed KMS key")
    audit_logging: bool = Field(default=True, description="control-plane and access audit logs on")

    @field_validator("regions_allowed")
    @classmethod
    def _unique_regions(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("a region is listed twice")
        return value


class ExposureScope(str, Enum):
    INTERNAL = "internal"
    PUBLIC = "public"


class ExposureVia(str, Enum):
    """How clients reach the serving Service: a Service of type LoadBalancer (an NLB through the AWS Load Balancer
    Controller, or MetalLB on an edge cluster), an Ingress of the cluster's ingress controller, or a NodePort on
    every node. The serving Service itself is ClusterIP behind an Ingress."""

    LOAD_BALANCER = "load-balancer"
    INGRESS = "ingress"
    NODE_PORT = "node-port"


#: The NodePort range of a default kube-apiserver (`--service-node-port-range` 30000-32767).
NODE_PORT_RANGE = (30000, 32767)


def ipv4_cidr(value: str) -> str:
    """An IPv4 network in CIDR notation with no host bits set (`10.0.0.0/8`, not `10.0.0.1/8`)."""
    try:
        network = ipaddress.IPv4Network(value, strict=True)
    except ValueError as exc:
        raise ValueError(f"{value!r} is not an IPv4 CIDR with its host bits zero, e.g. 203.0.113.0/24 ({exc})") from None
    if "/" not in value:
        raise ValueError(f"{value!r} has no prefix length; write it as {network.with_prefixlen}")
    return network.with_prefixlen


Cidr = Annotated[str, Field(max_length=18), AfterValidator(ipv4_cidr)]


class Exposure(_Section):
    """Who can reach the serving endpoint (self-hosted archetypes; SageMaker endpoints are IAM-authorised).

    `internal` (default): an internal Network Load Balancer, reachable from the VPC and networks peered or connected
    with it. `public`: an internet-facing one, which needs a TLS certificate and the client CIDRs allowed to connect.
    """

    scope: ExposureScope = Field(default=ExposureScope.INTERNAL, description="internal (default) or public")
    allowed_cidrs: list[Cidr] = Field(
        default=[], max_length=MAX_ALLOWED_CIDRS, description="IPv4 CIDRs allowed to connect (the load balancer's "
        "source ranges); required for public, where 0.0.0.0/0 also needs acknowledge_open_internet. Internal default: "
        "the VPC's CIDR")
    acknowledge_open_internet: bool = Field(default=False, description="confirm that 0.0.0.0/0 in allowed_cidrs is "
                                            "meant: the whole internet may try the API key")
    tls_certificate_arn: str | None = Field(
        default=None, pattern=ACM_CERTIFICATE_ARN, description="ACM certificate ARN in the environments' region; "
        "required for public: the load balancer's listener terminates TLS with it")
    hostname: str | None = Field(default=None, pattern=HOSTNAME, max_length=253, description="the DNS name clients use (its record "
                                 "points at the load balancer; managed outside this stack); default: the load "
                                 "balancer's own DNS name")
    via: ExposureVia | None = Field(default=None, description="load-balancer, ingress or node-port. Default: "
                                    "load-balancer on eks and existing clusters; on an edge cluster an Ingress when "
                                    "operations.cluster_addons declares an ingress controller, else a NodePort")
    ingress_class_name: str | None = Field(default=None, pattern=DNS_1123_SUBDOMAIN, max_length=253, description="via "
                                           "ingress: the IngressClass; default: the one of the declared controller "
                                           "(ingress-nginx: nginx, traefik: traefik)")
    ingress_namespace: str | None = Field(default=None, pattern=DNS_1123_LABEL, max_length=63, description="via "
                                          "ingress: the namespace the ingress controller's pods run in (the "
                                          "NetworkPolicy admits it to the proxy); default: the catalog's (k3s runs "
                                          "traefik in kube-system)")
    node_port: int | None = Field(default=None, ge=NODE_PORT_RANGE[0], le=NODE_PORT_RANGE[1], description="via "
                                  "node-port: the port on every node (30000-32767); default: one Kubernetes assigns")
    tls_secret_name: str | None = Field(default=None, pattern=DNS_1123_SUBDOMAIN, max_length=253, description="a "
                                        "kubernetes.io/tls Secret you provide in the service's namespace (tls.crt, "
                                        "tls.key): the Ingress terminates TLS with it, or (node-port, metallb) the "
                                        "authenticating proxy does. For clusters without AWS load balancers; on "
                                        "an NLB use tls_certificate_arn")

    @property
    def tls(self) -> bool:
        """Clients connect over TLS (an ACM certificate on an NLB, or a Kubernetes TLS Secret)."""
        return bool(self.tls_certificate_arn or self.tls_secret_name)

    @model_validator(mode="after")
    def _public_needs_tls_and_ranges(self) -> Exposure:
        if len(set(self.allowed_cidrs)) != len(self.allowed_cidrs):
            raise ValueError("allowed_cidrs lists a CIDR twice")
        if OPEN_INTERNET in self.allowed_cidrs and not self.acknowledge_open_internet:
            raise ValueError(f"allowed_cidrs contains {OPEN_INTERNET} (the whole internet); list your clients' CIDRs "
                             "instead, or set acknowledge_open_internet: true if that is really meant")
        if self.tls_certificate_arn and self.tls_secret_name:
            raise ValueError("give one of tls_certificate_arn (an NLB terminates TLS) and tls_secret_name (an Ingress "
                             "or the pod's proxy terminates TLS), not both")
        if self.scope is ExposureScope.PUBLIC:
            missing = [f for f, ok in (("tls_certificate_arn or tls_secret_name", self.tls),
                                       ("allowed_cidrs", self.allowed_cidrs)) if not ok]
            if missing:
                raise ValueError(f"scope public needs {' and '.join(missing)}: an internet-facing endpoint is served "
                                 "only over TLS (an ACM certificate ARN on an NLB, a Kubernetes TLS Secret "
                                 "elsewhere) and only to the client CIDRs you list; add them or use scope: internal")
        misplaced = [f for f, via in (("node_port", ExposureVia.NODE_PORT), ("ingress_class_name", ExposureVia.INGRESS),
                                      ("ingress_namespace", ExposureVia.INGRESS))
                     if getattr(self, f) is not None and self.via is not via]
        if misplaced:
            raise ValueError(f"{', '.join(misplaced)} set without the exposure they configure (via: "
                             f"{'node-port' if misplaced[0] == 'node_port' else 'ingress'}); set `via` or remove them")
        if self.via is ExposureVia.INGRESS and self.tls_secret_name and not self.hostname:
            raise ValueError("via ingress with tls_secret_name needs `hostname`: the Ingress serves its certificate "
                             "for that host (TLS SNI); add the name your certificate is issued for")
        if self.via is ExposureVia.INGRESS and self.tls_certificate_arn:
            raise ValueError("tls_certificate_arn is for the NLB of via load-balancer; an Ingress terminates TLS with "
                             "tls_secret_name")
        return self

    @property
    def certificate_region(self) -> str | None:
        """The region of `tls_certificate_arn` (ACM certificates are regional)."""
        match = re.match(ACM_CERTIFICATE_ARN, self.tls_certificate_arn or "")
        return match.group(2) if match else None


class Budget(_Section):
    max_monthly_usd: float | None = Field(default=None, gt=0, description="ceiling per environment, USD/month")


class Environment(_Section):
    """One deployment target; becomes the stack `<service>-<name>`."""

    region: Region = Field(description="AWS region, e.g. `us-east-1`")
    traffic_scale: float = Field(default=1.0, gt=0, le=10, description="fraction of peak traffic this env sees")
    spot: bool = Field(default=False, description="use spot capacity (never allowed in production)")
    min_replicas: int | None = Field(default=None, ge=0, description="floor; 0 allows scale to zero (not in production)")
    max_replicas: int | None = Field(default=None, ge=1, description="ceiling; defaults to twice the peak replicas")
    production: bool | None = Field(default=None, description="defaults to true for names starting with `prod`")
    platform: str | None = Field(default=None, pattern=DNS_1123_LABEL, max_length=40,
                                 description="the shared platform this environment lands on (EKS, private SageMaker); "
                                 "defaults to `<environment>-<region>`, stack platform-<that>")

    @model_validator(mode="after")
    def _min_le_max(self) -> Environment:
        if self.min_replicas is not None and self.max_replicas is not None and self.min_replicas > self.max_replicas:
            raise ValueError(f"min_replicas ({self.min_replicas}) must be <= max_replicas ({self.max_replicas})")
        return self


class Requirements(_Section):
    """A service's requirements: what to serve, at what load and latency, under which rules, where."""

    service: str = Field(pattern=DNS_1123_LABEL, max_length=40, description="DNS-1123 name of the service")
    owner: str = Field(pattern=TAG_VALUE, max_length=256, description="owning team, tagged on every resource (AWS tag value: up to "
                       "256 letters, digits, spaces and _.:/=+-@)")
    cost_center: str = Field(pattern=TAG_VALUE, max_length=256, description="cost center, tagged on every resource (AWS tag value)")
    model: ModelSpec | None = Field(default=None, description="the model (single-model services)")
    models: list[ModelSpec] | None = Field(default=None, min_length=1, description="several models, each with traffic")
    traffic: Traffic | None = Field(default=None, description="load for `model`")
    slo: Slo = Field(default_factory=Slo)
    hardware: Hardware = Field(default_factory=Hardware)
    operations: Operations = Field(default_factory=Operations)
    compliance: Compliance = Field(default_factory=Compliance)
    exposure: Exposure = Field(default_factory=Exposure, description="who can reach the endpoint (internal by default)")
    budget: Budget = Field(default_factory=Budget)
    environments: dict[Annotated[str, Field(pattern=DNS_1123_LABEL, max_length=20)], Environment] = Field(
        min_length=1, description="environment name -> settings")

    @model_validator(mode="after")
    def _consistent(self) -> Requirements:
        if (self.model is None) == (self.models is None):
            raise ValueError("give exactly one of `model` (one model) or `models` (a list)")
        if self.models is not None and self.traffic is not None:
            raise ValueError("top-level `traffic` goes with `model`; with `models`, give each entry its own `traffic`")
        if self.model is not None and self.traffic is None and self.model.traffic is None:
            raise ValueError("`traffic` is required with `model`")
        if self.models is not None:
            missing = [m.served_name for m in self.models if m.traffic is None]
            if missing:
                raise ValueError(f"each entry of `models` needs its own `traffic`; missing for {missing}")
            names = [m.served_name for m in self.models]
            dupes = sorted({n for n in names if names.count(n) > 1})
            if dupes:
                raise ValueError(f"model names must be unique; repeated: {dupes}")
        allowed = set(self.compliance.regions_allowed)
        if allowed:
            for env, spec in self.environments.items():
                if spec.region not in allowed:
                    raise ValueError(f"environments.{env}.region {spec.region!r} is not in compliance.regions_allowed "
                                     f"{sorted(allowed)}; pick an allowed region or widen the list")
        if self.compliance.private_only and self.exposure.scope is ExposureScope.PUBLIC:
            raise ValueError("exposure.scope public contradicts compliance.private_only: a private-only service has no "
                             "internet-facing endpoint; use exposure.scope: internal (or drop private_only)")
        cert_region = self.exposure.certificate_region
        for env, spec in self.environments.items():
            if cert_region is not None and spec.region != cert_region:
                raise ValueError(f"exposure.tls_certificate_arn is an ACM certificate in {cert_region} but "
                                 f"environments.{env}.region is {spec.region}: ACM certificates are regional and a "
                                 f"load balancer uses one of its own region; request (or import) the certificate in "
                                 f"{spec.region}, or give that environment its own requirements file")
        for env, spec in self.environments.items():
            if self.is_production(env) and spec.spot:
                raise ValueError(f"environments.{env}: spot capacity is not allowed in production; set spot: false")
            if self.is_production(env) and spec.min_replicas == 0:
                raise ValueError(f"environments.{env}: production never scales to zero; set min_replicas >= 1")
            if self.exposure.scope is ExposureScope.PUBLIC and spec.min_replicas == 0:
                raise ValueError(f"environments.{env}.min_replicas 0 with exposure.scope public: a service that scales "
                                 "to zero has no load balancer (clients reach it through the in-cluster KEDA "
                                 "interceptor); set min_replicas >= 1 or use exposure.scope: internal")
        from blueprints.cluster_exposure import ExposureProblem, resolve_exposure
        from blueprints.edge import edge_problems

        problems = edge_problems(self)
        if self.operations.preference is not OperationsPreference.MANAGED:
            try:
                resolve_exposure(self.operations, self.exposure)
            except ExposureProblem as exc:
                problems.append(str(exc))
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def is_production(self, env: str) -> bool:
        flag = self.environments[env].production
        return flag if flag is not None else env.startswith("prod")

    def served_models(self) -> list[tuple[ModelSpec, Traffic]]:
        """Each model with its traffic (the top-level `traffic` for a single `model`)."""
        if self.model is not None:
            return [(self.model, self.model.traffic or self.traffic)]  # type: ignore[list-item]
        return [(m, m.traffic) for m in self.models or []]  # type: ignore[misc]


def load_requirements(path: Path) -> Requirements:
    """Read and validate a requirements file.

    Args:
        path: a YAML file in the shape of `Requirements`.

    Returns:
        The validated `Requirements`.

    Raises:
        RequirementsError: the file is missing, is not YAML, is not a mapping, or breaks the schema; the message
            names the file and each bad field.
    """
    text = read_text_file(path, RequirementsError, "requirements file")
    try:
        data = load_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise RequirementsError(f"{path}: not valid YAML{where}: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(data, dict):
        raise RequirementsError(f"{path}: expected a mapping with `service`, `model`, `traffic`, ... at the top level, "
                                f"got {type(data).__name__}")
    try:
        return Requirements.model_validate(data)
    except ValidationError as exc:
        raise RequirementsError(format_validation_error(exc, source=path)) from None


def requirements_json_schema() -> dict:
    """The requirements schema as JSON Schema (draft 2020-12), for editors and `blueprint schema`."""
    schema = Requirements.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "serving blueprints requirements file"
    return schema
