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

from typing import Any, Callable, Iterable

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from blueprints import bounds
from blueprints.catalog import Architecture, Task, known_region, load_catalog
from blueprints.errors import (
    CatalogError,
    FieldProblem,
    describe_pattern,
    RequirementsError,
    field_path,
    format_validation_error,
    raise_problems,
    read_text_file,
)
from blueprints.jsontypes import check_json_types
from blueprints.yamlio import load_yaml

DNS_1123_LABEL = describe_pattern(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "a DNS-1123 label: lowercase letters, digits "
                                  "and `-`, starting and ending with a letter or digit")
#: AWS region names such as `us-east-1`, `eu-central-1`, `ap-southeast-2`.
AWS_REGION = describe_pattern(r"^[a-z]{2}(-gov)?-[a-z]+-[0-9]$", "an AWS region name such as us-east-1")


class CatalogNames:
    """Annotation metadata: the JSON Schema of a field lists the names a catalog knows (`enum`), read when the schema
    is generated, not at import. Pair it with an `AfterValidator` that checks the same names.

    Example: `Annotated[str, AfterValidator(known_model_id), CatalogNames(lambda: load_catalog().models)]`.
    """

    def __init__(self, names: Callable[[], Iterable[str]]) -> None:
        self.names = names

    def __get_pydantic_json_schema__(self, core_schema: Any, handler: Any) -> dict:
        schema = handler(core_schema)
        schema["enum"] = sorted(self.names())
        return schema


def _unique(value: list) -> list:
    if len(set(value)) != len(value):
        repeated = sorted({str(v) for v in value if value.count(v) > 1})
        raise ValueError(f"lists {', '.join(repeated)} more than once; give each once")
    return value


class _UniqueItems:
    """Annotation metadata: the JSON Schema says `uniqueItems`, as `_unique` checks."""

    def __get_pydantic_json_schema__(self, core_schema: Any, handler: Any) -> dict:
        schema = handler(core_schema)
        schema["uniqueItems"] = True
        return schema


#: Annotation metadata for a list whose items are distinct: the loader checks it (`UNIQUE`), the schema states it
#: (`UNIQUE_ITEMS`). Example: `Annotated[list[Region], UNIQUE, UNIQUE_ITEMS]`.
UNIQUE = AfterValidator(_unique)
UNIQUE_ITEMS = _UniqueItems()

#: An AWS region in the catalog (`blueprints.catalog.known_region`).
Region = Annotated[str, Field(pattern=AWS_REGION), AfterValidator(known_region),
                   CatalogNames(lambda: load_catalog().aws_regions)]


def _catalog_lookup(lookup: Callable[[str], object]) -> Callable[[str], str]:
    def check(value: str) -> str:
        try:
            lookup(value)
        except CatalogError as exc:
            raise ValueError(str(exc)) from None
        return value
    return check


#: A model id of the catalog (blueprints/catalog/models.yaml).
ModelId = Annotated[str, AfterValidator(_catalog_lookup(lambda v: load_catalog().model(v))),
                    CatalogNames(lambda: load_catalog().models)]
#: An EC2 or SageMaker instance type of the catalog (blueprints/catalog/instances.yaml).
InstanceTypeName = Annotated[str, AfterValidator(_catalog_lookup(lambda v: load_catalog().instance(v))),
                             CatalogNames(lambda: [*load_catalog().ec2, *load_catalog().sagemaker])]
#: A Hugging Face repository id, `namespace/name`: letters, digits and `_`, joined by single `-` or `.` (no `--`, no
#: `..`, never starting or ending with either); huggingface_hub `validate_repo_id` (utils/_validators.py) allows at
#: most 96 characters for the name.
HF_REPO = r"[A-Za-z0-9_]+([.-][A-Za-z0-9_]+)*/[A-Za-z0-9_]+([.-][A-Za-z0-9_]+)*"
#: One segment of an S3 key prefix: S3's safe characters (0-9 a-z A-Z ! - _ . * ' ( ); Amazon S3 user guide, "Object key
#: naming guidelines"), not starting with `.` (no `.` or `..` segments; with `/`-joined segments, no `//`).
S3_SEGMENT = r"[A-Za-z0-9!_'()*-][A-Za-z0-9!_.'()*-]*"
#: One segment of an https URL path: RFC 3986 path characters, not starting with `.` (no `.` or `..` segment).
URL_SEGMENT = r"[A-Za-z0-9_~%!$&'()*+,;=:@-][A-Za-z0-9_.~%!$&'()*+,;=:@-]*"
#: Where weights come from: `s3://bucket/prefix/` (a bucket name: 3-63 lowercase letters, digits, `.` and `-`),
#: `hf://org/name`, or (edge clusters) an `https://` URL of one file.
WEIGHTS_URI = describe_pattern(
    rf"^(s3://[a-z0-9][a-z0-9.\-]{{1,61}}[a-z0-9]/({S3_SEGMENT}(/{S3_SEGMENT})*/?)?|hf://{HF_REPO}"
    rf"|https://[a-z0-9]([-a-z0-9.]{{0,251}}[a-z0-9])?(:[0-9]{{1,5}})?(/{URL_SEGMENT})+)$",
    "`s3://bucket/prefix/` (S3's safe characters; no empty, `.` or `..` segment), `hf://org/name` (letters, "
    "digits, `_`, and single `-` or `.` between them) or an `https://host/path` URL of one file (no `.` or `..` "
    "segment)")
#: Longest weights URI: an S3 key is at most 1,024 bytes (S3 user guide, "Naming Amazon S3 objects").
MAX_WEIGHTS_URI_CHARS = 1100
#: An ACM certificate ARN (commercial, China and GovCloud partitions): `arn:aws:acm:<region>:<account>:certificate/<id>`
#: (AWS General Reference, "Amazon Resource Names", ACM resource type `certificate/<certificate-id>`).
ACM_CERTIFICATE_ARN = describe_pattern(
    r"^arn:aws(-cn|-us-gov)?:acm:([a-z]{2}(-gov)?-[a-z]+-[0-9]):[0-9]{12}:certificate/[0-9a-f-]{36}$",
    "an ACM certificate ARN, arn:aws:acm:<region>:<account>:certificate/<id>")
#: A SHA-256 digest, lowercase hex.
SHA256_HEX = describe_pattern(r"^[0-9a-f]{64}$", "a SHA-256 digest: 64 lowercase hex digits")
#: A Kubernetes object name (DNS-1123 subdomain): a Secret, an IngressClass.
DNS_1123_SUBDOMAIN = describe_pattern(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
                                      "a Kubernetes object name: lowercase letters, digits, `-` and `.`")
#: An ACM Private CA ARN: `arn:aws:acm-pca:<region>:<account>:certificate-authority/<id>` (AWS General Reference,
#: "Amazon Resource Names", ACM Private CA resource type `certificate-authority/<id>`).
#: A certificate subject's CN as the role's condition (aws:PrincipalTag/x509Subject/CN) compares it: one line of
#: word characters, dots, @, *, : and -.
CERTIFICATE_CN = describe_pattern(r"^[\w.@*:-]+$", "a certificate CN: one line of letters, digits and . @ * : -")
ACM_PCA_ARN = describe_pattern(
    r"^arn:aws(-cn|-us-gov)?:acm-pca:[a-z]{2}(-gov)?-[a-z]+-[0-9]:[0-9]{12}:certificate-authority/[0-9a-f-]{36}$",
    "an ACM Private CA ARN, arn:aws:acm-pca:<region>:<account>:certificate-authority/<id>")
#: A KMS key ARN (AWS KMS Developer Guide, "Key identifiers": `arn:aws:kms:<region>:<account>:key/<key id>`, the id a
#: UUID or a multi-Region `mrk-` id). IAM grants use of a key only by its key ARN: "You cannot use a key id, alias name,
#: or alias ARN to identify a KMS key in an IAM policy statement" (KMS Developer Guide, cmks-in-iam-policies).
KMS_KEY_ARN = describe_pattern(
    r"^arn:aws(-cn|-us-gov)?:kms:[a-z]{2}(-gov)?-[a-z]+-[0-9]:[0-9]{12}:key/"
    r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|mrk-[0-9a-f]{32})$",
    "a KMS key ARN, arn:aws:kms:<region>:<account>:key/<key id> (not an alias)")
#: A DNS host name (RFC 1123): dot-separated labels of letters, digits and hyphens, at most 253 characters.
HOSTNAME = describe_pattern(r"^([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)+$",
                            "a lowercase DNS name with at least two labels, e.g. api.example.com")
#: The open internet, as an IPv4 CIDR.
OPEN_INTERNET = "0.0.0.0/0"
#: At most this many source CIDRs: the load balancer controller writes one security-group rule per CIDR and port,
#: and a security group holds 60 inbound rules by default (Amazon VPC quotas, "Inbound or outbound rules per security
#: group").
MAX_ALLOWED_CIDRS = 20
#: Tag values: AWS allows up to 256 letters, digits, spaces and `_ . : / = + - @` (AWS General Reference, "Tagging
#: best practices", tag restrictions); `=` is left out because the load balancer's tags travel in one Kubernetes
#: annotation, `key=value` pairs joined by commas (AWS Load Balancer Controller,
#: `service.beta.kubernetes.io/aws-load-balancer-additional-resource-tags`). Starts and ends with a non-space.
TAG_VALUE = describe_pattern(r"^[A-Za-z0-9_.:/+\-@]([A-Za-z0-9_ .:/+\-@]*[A-Za-z0-9_.:/+\-@])?$",
                             "a tag value: letters, digits, spaces and _ . : / + - @ (no `=`, no line breaks), "
                             "not starting or ending with a space")


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_enum_values=False, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _json_types(cls, data: Any) -> Any:
        return check_json_types(cls, data)


# --- Cross-field rules the JSON Schema states too (each beside the validator that enforces it) --------------------


def absent_or_null(*fields: str) -> dict:
    """JSON Schema: none of `fields` has a value (each absent or null)."""
    return {"properties": {f: {"type": "null"} for f in fields}}


def given(types: dict[str, str]) -> dict:
    """JSON Schema: each field present with a value of the JSON type given."""
    return {"required": list(types), "properties": {f: {"type": t} for f, t in types.items()}}


def when(condition: dict, then: dict) -> dict:
    """JSON Schema: `if` the object matches `condition`, `then` it matches `then`."""
    return {"if": condition, "then": then}


def is_const(field: str, value: object) -> dict:
    """JSON Schema: `field` is present and equals `value`."""
    return {"required": [field], "properties": {field: {"const": value}}}


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

    peak_requests_per_s: float = Field(ge=bounds.MIN_PEAK_REQUESTS_PER_S, le=bounds.MAX_PEAK_REQUESTS_PER_S,
                                       description="peak arrival rate in production, requests/s (0.001-100,000)")
    mean_input_tokens: int = Field(default=512, ge=1, le=bounds.MAX_TOKENS, description="mean prompt length, tokens")
    mean_output_tokens: int = Field(default=256, ge=1, le=bounds.MAX_TOKENS,
                                    description="mean generated length, tokens (generative models)")
    streaming: bool = Field(default=True, description="responses are streamed token by token")
    pattern: TrafficPattern = Field(default=TrafficPattern.STEADY, description="how arrivals bunch around the peak "
                                    "rate: steady = Poisson; bursty, spiky = rate bursts of seconds (see "
                                    "defaults.ARRIVAL_BURSTS)")
    input_tokens_p95: int | None = Field(default=None, ge=1, le=bounds.MAX_TOKENS, description="95th-percentile prompt "
                                         "length, tokens (>= mean_input_tokens, <= 3.5x it); the capacity model "
                                         "draws prompt lengths from a lognormal with this mean and p95. Default: "
                                         "defaults.TOKENS_P95_TO_MEAN x the mean")
    output_tokens_p95: int | None = Field(default=None, ge=1, le=bounds.MAX_TOKENS, description="95th-percentile generated "
                                          "length, tokens (>= mean_output_tokens, <= 3.5x it); as input_tokens_p95")

    @model_validator(mode="after")
    def _p95_around_mean(self) -> Traffic:
        problems = []
        for field, mean_field in (("input_tokens_p95", "mean_input_tokens"), ("output_tokens_p95", "mean_output_tokens")):
            p95, mean = getattr(self, field), getattr(self, mean_field)
            if p95 is None:
                continue
            if p95 < mean:
                problems.append(FieldProblem(field, f"{field}={p95} is below {mean_field}={mean}: a 95th percentile is "
                                             f"at least the mean of lengths this skewed; raise {field} to >= {mean} "
                                             f"or lower {mean_field}", rule="p95-around-mean"))
            elif p95 > MAX_TOKENS_P95_TO_MEAN * mean:
                problems.append(FieldProblem(field, f"{field}={p95} is more than {MAX_TOKENS_P95_TO_MEAN:g}x "
                                             f"{mean_field}={mean}; the length model cannot put the p95 that far above "
                                             f"the mean; lower {field} to <= {int(MAX_TOKENS_P95_TO_MEAN * mean)} or "
                                             "check both figures", rule="p95-around-mean"))
        raise_problems(problems)
        return self


def _model_spec_rules(schema: dict) -> None:
    """The ModelSpec rules a JSON Schema states: model-id-or-architecture, measured-latency-pair,
    quantization-precision (task-of-catalog-model is listed, not stated: ten `if`/`then`s over the catalog's ids make
    the schema too slow for generators and editors alike)."""
    schema["allOf"] = [
        {"anyOf": [given({"id": "string"}), given({"architecture": "object", "name": "string", "task": "string"})]},
        {"anyOf": [absent_or_null("measured_latency_ms", "measured_instance_type"),
                   given({"measured_latency_ms": "number", "measured_instance_type": "string"})]},
        *[when(is_const("quantization", q.value),
               {"required": ["precision"], "properties": {"precision": {"enum": [p.value for p in q.precisions]}}})
          for q in Quantization],
    ]


class ModelSpec(_Section):
    """One model to serve: a catalog `id`, or an explicit `architecture` (then `name` is required)."""

    model_config = ConfigDict(json_schema_extra=_model_spec_rules)

    id: ModelId | None = Field(default=None,
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
    weights_uri: str = Field(pattern=WEIGHTS_URI, max_length=MAX_WEIGHTS_URI_CHARS,
                             description="`s3://bucket/prefix/` or `hf://org/name`; on an edge cluster also an "
                             "`https://` URL of the model file (then `sha256` is required)")
    sha256: str | None = Field(default=None, pattern=SHA256_HEX, description="`https://` sources only: the SHA-256 "
                               "of the file (64 lowercase hex digits); the download is refused when it differs")
    weights_kms_key_arn: str | None = Field(
        default=None, pattern=KMS_KEY_ARN, description="`s3://` sources encrypted with a customer-managed KMS key: "
        "its key ARN (not an alias), so the copy into the stack's model store may decrypt them. Default: none (SSE-S3 "
        "or the AWS-managed key of the source's own account)")
    max_context_tokens: int | None = Field(default=None, ge=bounds.MIN_CONTEXT_TOKENS, le=bounds.MAX_TOKENS,
                                           description="longest prompt + output to serve; defaults to min(model "
                                           "limit, 8192) for text generation")
    traffic: Traffic | None = Field(default=None, description="this model's own load (multi-model estates, `models:`)")
    measured_latency_ms: float | None = Field(
        default=None, ge=bounds.MIN_LATENCY_MS, le=bounds.MAX_LATENCY_MS, description="non-generative models: latency of ONE request (batch 1, mean input) you "
        "measured on `measured_instance_type` using all its GPU / vCPUs, ms. When set, sizing derives the compute per "
        "request from it instead of the catalog's FLOPs estimate")
    measured_instance_type: InstanceTypeName | None = Field(
        default=None, description="the EC2 type `measured_latency_ms` was measured on, e.g. `c7i.xlarge`, `g5.xlarge`")

    @model_validator(mode="after")
    def _id_or_architecture(self) -> ModelSpec:
        problems = []
        if self.id is None and self.architecture is None:
            problems.append(FieldProblem("id", "give a catalog `id` or an explicit `architecture`",
                                         rule="model-id-or-architecture"))
        elif self.id is None:
            problems += [FieldProblem(f, "a model given by `architecture` also needs `name` and `task`",
                                      rule="model-id-or-architecture") for f in ("name", "task")
                         if getattr(self, f) is None]
        if self.quantization is not None and self.precision not in self.quantization.precisions:
            allowed = ", ".join(p.value for p in self.quantization.precisions)
            problems.append(FieldProblem("quantization", f"quantization `{self.quantization.value}` comes with "
                                         f"precision {allowed}, not `{self.precision.value}`; set precision to "
                                         f"{allowed} or drop quantization", rule="quantization-precision"))
        https = self.weights_uri.startswith("https://")
        if https and self.sha256 is None:
            problems.append(FieldProblem("sha256", "an https:// weights_uri needs `sha256` (the file's SHA-256, e.g. "
                                         "from `sha256sum model.onnx`): without it a changed or tampered file would "
                                         "be served", rule="https-needs-sha256"))
        if self.sha256 is not None and not https:
            problems.append(FieldProblem("sha256", "`sha256` checks an https:// download; s3:// and hf:// sources are "
                                         "read with an identity, not a checksum: remove it", rule="https-needs-sha256"))
        if self.weights_kms_key_arn is not None and not self.weights_uri.startswith("s3://"):
            problems.append(FieldProblem("weights_kms_key_arn", "weights_kms_key_arn applies to an s3:// weights_uri: "
                                         "remove it", rule="source-key-s3-only"))
        if (self.measured_latency_ms is None) != (self.measured_instance_type is None):
            missing = "measured_instance_type" if self.measured_instance_type is None else "measured_latency_ms"
            problems.append(FieldProblem(missing, "give `measured_latency_ms` and `measured_instance_type` together "
                                         "(the latency is only meaningful on the hardware it was measured on)",
                                         rule="measured-latency-pair"))
        if self.id is not None and self.task is not None and self.task is not load_catalog().model(self.id).task:
            problems.append(FieldProblem("task", f"{self.id} is a {load_catalog().model(self.id).task.value} model "
                                         f"in the catalog, not {self.task.value}; drop `task` or give an "
                                         "`architecture` and `name` for another model", rule="task-of-catalog-model"))
        raise_problems(problems)
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

    ttft_p95_ms: float | None = Field(default=None, ge=bounds.MIN_LATENCY_MS, le=bounds.MAX_LATENCY_MS,
                                      description="time to first token, p95, ms")
    itl_p95_ms: float | None = Field(default=None, ge=bounds.MIN_LATENCY_MS, le=bounds.MAX_LATENCY_MS,
                                     description="inter-token latency, p95, ms")
    latency_p95_ms: float | None = Field(default=None, ge=bounds.MIN_LATENCY_MS, le=bounds.MAX_LATENCY_MS,
                                         description="request latency p95, ms (non-generative)")
    latency_p99_ms: float | None = Field(default=None, ge=bounds.MIN_LATENCY_MS, le=bounds.MAX_LATENCY_MS,
                                         description="request latency p99, ms (non-generative)")
    availability_pct: float = Field(default=99.5, ge=90, lt=100, description="monthly availability target, %")
    pipeline_latency_p95_ms: float | None = Field(
        default=None, gt=0, le=MAX_PIPELINE_LATENCY_MS, description="compound services only (a generator and "
        "retrieval models in `models:`): end-to-end p95 budget, ms, from the request to the answer's first token "
        "(streamed) or its last (not streamed), composed from the parts' p95s (blueprints/pipeline.py); the plan "
        "tightens the parts' own targets to meet it or refuses")

    @model_validator(mode="after")
    def _p99_not_below_p95(self) -> Slo:
        if self.latency_p95_ms and self.latency_p99_ms and self.latency_p99_ms < self.latency_p95_ms:
            raise FieldProblem("latency_p99_ms", f"latency_p99_ms ({self.latency_p99_ms:g}) must be >= latency_p95_ms "
                               f"({self.latency_p95_ms:g})", rule="latency-p99-not-below-p95")
        return self


#: An instance family: the prefix of a type name (`g6e` of `g6e.12xlarge`).
INSTANCE_FAMILY = r"^[a-z][a-z0-9-]*$"


def _family_name(value: str) -> str:
    if not re.fullmatch(INSTANCE_FAMILY[1:-1], value):
        raise ValueError(f"families are prefixes like `g6e` or `p5`, not instance types: {value!r}")
    return value


class _FamilySchema:
    def __get_pydantic_json_schema__(self, core_schema: Any, handler: Any) -> dict:
        return {**handler(core_schema), "pattern": INSTANCE_FAMILY}


class EdgeNodes(_Section):
    """The nodes an edge cluster gives this service: owned, all of one shape, CPU only (nothing to launch or price as
    EC2). The planner sizes replicas, vCPUs and ONNX Runtime threads per replica and replicas per node against this
    shape and refuses, naming the shortfall, when `count` nodes cannot carry the peak within the SLO."""

    count: int = Field(ge=1, le=bounds.MAX_REPLICAS, description="nodes the service may use (its replicas, plus one for a rolling "
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
    accelerators: Annotated[list[Accelerator], UNIQUE, UNIQUE_ITEMS] = Field(
        default=[Accelerator.NVIDIA_GPU, Accelerator.CPU], min_length=1, max_length=2,
        description="kinds of compute allowed")
    allowed_instance_families: Annotated[list[Annotated[str, Field(max_length=20), AfterValidator(_family_name),
                                                        _FamilySchema()]], UNIQUE, UNIQUE_ITEMS] = Field(
        default=[], max_length=50, description="EC2 families allowed, e.g. [g6e, p5]; empty allows every family in "
        "the catalog")
    cpu_arch: CpuArch | None = Field(default=None, description="restrict CPU nodes to one architecture")
    edge_nodes: EdgeNodes | None = Field(default=None, description="operations.platform edge-cluster only: the owned "
                                         "nodes the service runs on")


def _platform_catalog():
    from blueprints.catalog.addons import load_platform_catalog

    return load_platform_catalog()


def _known_addon(value: str) -> str:
    known = _platform_catalog().helm
    if value not in known:
        raise ValueError(f"unknown add-on {value!r}; known: {', '.join(sorted(known))}")
    return value


def _known_version(value: str) -> str:
    known = _platform_catalog().versions
    if value not in known:
        raise ValueError(f"unknown Kubernetes version {value!r}; EKS versions in the catalog: {', '.join(known)}")
    return value


#: An add-on id of the platform catalog (blueprints/catalog/addons.yaml).
AddonId = Annotated[str, AfterValidator(_known_addon), CatalogNames(lambda: _platform_catalog().helm)]
#: An EKS Kubernetes version of the platform catalog (blueprints/catalog/kubernetes.yaml), e.g. `1.35`.
KubernetesVersion = Annotated[str, Field(pattern=describe_pattern(r"^1\.[0-9]{2}$", "a Kubernetes version such as "
                                                                  "1.35")), AfterValidator(_known_version),
                              CatalogNames(lambda: _platform_catalog().versions)]


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
    certificate_common_name: str | None = Field(default=None, min_length=1, max_length=64, pattern=CERTIFICATE_CN,
                                                description="the certificate subject's CN the role trusts (IAM "
                                                "condition aws:PrincipalTag/x509Subject/CN); default the stack name "
                                                "`<service>-<environment>`")
    session_duration_s: int = Field(default=3600, ge=900, le=43_200, description="lifetime of the credentials a "
                                    "session vends, s (Roles Anywhere profile durationSeconds: 900-43200)")


class Operations(_Section):
    model_config = ConfigDict(json_schema_extra={"allOf": [  # cluster-addons-existing-cluster
        when(given({"cluster_addons": "array"}),
             {"required": ["platform"], "properties": {"platform": {"enum": ["existing-cluster", "edge-cluster"]}}}),
        # roles-anywhere-edge-only
        when(given({"roles_anywhere": "object"}), is_const("platform", "edge-cluster"))]})
    preference: OperationsPreference = Field(default=OperationsPreference.ANY)
    platform: Platform = Field(default=Platform.EKS, description="where self-hosted archetypes run")
    kubernetes_version: KubernetesVersion | None = Field(
        default=None, description="Kubernetes version. On EKS the shared platform sets it "
        "(stacks/requirements/platform.yaml); a value here must match it. On an existing cluster: that cluster's "
        "version (default: the newest EKS version in standard support on the plan date)")

    cluster_addons: Annotated[list[AddonId], UNIQUE, UNIQUE_ITEMS] | None = Field(
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

    @model_validator(mode="after")
    def _addons_only_on_existing_clusters(self) -> Operations:
        problems = []
        if self.cluster_addons is not None and self.platform is Platform.EKS:
            problems.append(FieldProblem("cluster_addons", "cluster_addons describes an existing or edge cluster "
                                         "(platform: existing-cluster or edge-cluster); on eks the shared platform "
                                         "installs the add-ons", rule="cluster-addons-existing-cluster"))
        if self.roles_anywhere is not None and self.platform is not Platform.EDGE_CLUSTER:
            problems.append(FieldProblem("roles_anywhere", "roles_anywhere gives an edge cluster's pods AWS "
                                         "credentials; on eks and existing EKS clusters pods use EKS Pod Identity: "
                                         "remove it or set platform: edge-cluster", rule="roles-anywhere-edge-only"))
        if self.platform is Platform.EDGE_CLUSTER:
            aws_only = [a for a in self.cluster_addons or [] if _platform_catalog().helm[a].aws_only]
            if aws_only:
                problems.append(FieldProblem("cluster_addons", f"{aws_only} run only on AWS (EKS, EC2 load balancers "
                                             "and nodes); an edge cluster cannot run them: remove them (metallb "
                                             "implements LoadBalancer Services on an edge cluster)",
                                             rule="edge-addons-not-aws-only"))
        raise_problems(problems)
        return self

    @property
    def declared_addons(self) -> list[str] | None:
        """The add-ons the cluster is declared to run: `cluster_addons`, none on an edge cluster that declares
        nothing; None when unknown (an existing cluster that declares nothing: the preview names what is missing)."""
        if self.cluster_addons is None and self.platform is Platform.EDGE_CLUSTER:
            return []
        return self.cluster_addons


class Compliance(_Section):
    regions_allowed: Annotated[list[Region], UNIQUE, UNIQUE_ITEMS] = Field(
        default=[], max_length=20, description="AWS regions data may live in; empty allows any")
    private_only: bool = Field(default=False, description="no public endpoints or load balancers")
    customer_managed_kms: bool = Field(default=False, description="encrypt with a customer-managed KMS key")
    audit_logging: bool = Field(default=True, description="control-plane and access audit logs on")



class ExposureScope(str, Enum):
    INTERNAL = "internal"
    PUBLIC = "public"


_OCTET = r"(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
#: An IPv4 CIDR as written: four decimal octets without leading zeros and a prefix length 0-32.
IPV4_CIDR = describe_pattern(rf"^{_OCTET}(\.{_OCTET}){{3}}/(3[0-2]|[12]?[0-9])$",
                             "an IPv4 CIDR such as 203.0.113.0/24 (no leading zeros)")


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
        raise FieldProblem((), f"{value!r} is not an IPv4 network with its host bits zero, e.g. 203.0.113.0/24 "
                           f"({exc})", rule="cidr-network-address") from None
    return network.with_prefixlen


Cidr = Annotated[str, Field(max_length=18, pattern=IPV4_CIDR), AfterValidator(ipv4_cidr)]


class Exposure(_Section):
    """Who can reach the serving endpoint (self-hosted archetypes; SageMaker endpoints are IAM-authorised).

    `internal` (default): an internal Network Load Balancer, reachable from the VPC and networks peered or connected
    with it. `public`: an internet-facing one, which needs a TLS certificate and the client CIDRs allowed to connect.
    """

    model_config = ConfigDict(json_schema_extra={"allOf": [
        when(is_const("scope", "public"),  # public-needs-tls-and-cidrs
             {"required": ["allowed_cidrs"], "properties": {"allowed_cidrs": {"minItems": 1}},
              "anyOf": [given({"tls_certificate_arn": "string"}), given({"tls_secret_name": "string"})]}),
        when({"required": ["allowed_cidrs"], "properties": {"allowed_cidrs": {"contains": {"const": OPEN_INTERNET}}}},
             is_const("acknowledge_open_internet", True)),  # open-internet-acknowledged
    ]})

    scope: ExposureScope = Field(default=ExposureScope.INTERNAL, description="internal (default) or public")
    allowed_cidrs: Annotated[list[Cidr], UNIQUE, UNIQUE_ITEMS] = Field(
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
        problems = []
        if OPEN_INTERNET in self.allowed_cidrs and not self.acknowledge_open_internet:
            problems.append(FieldProblem("acknowledge_open_internet", f"allowed_cidrs contains {OPEN_INTERNET} (the "
                                         "whole internet); list your clients' CIDRs instead, or set "
                                         "acknowledge_open_internet: true if that is really meant",
                                         rule="open-internet-acknowledged"))
        if self.tls_certificate_arn and self.tls_secret_name:
            problems.append(FieldProblem("tls_secret_name", "give one of tls_certificate_arn (an NLB terminates TLS) "
                                         "and tls_secret_name (an Ingress or the pod's proxy terminates TLS), not "
                                         "both", rule="one-tls-source"))
        if self.scope is ExposureScope.PUBLIC:
            problems += [FieldProblem(f, f"scope public needs {what}: an internet-facing endpoint is served only over "
                                      "TLS (an ACM certificate ARN on an NLB, a Kubernetes TLS Secret elsewhere) and "
                                      "only to the client CIDRs you list; add it or use scope: internal",
                                      rule="public-needs-tls-and-cidrs")
                         for f, what, ok in (("tls_certificate_arn", "tls_certificate_arn or tls_secret_name",
                                              self.tls), ("allowed_cidrs", "allowed_cidrs", self.allowed_cidrs))
                         if not ok]
        problems += [FieldProblem(f, f"{f} configures exposure via {via.value}, but via is "
                                  f"{self.via.value if self.via else 'unset'}; set `via` or remove it",
                                  rule="exposure-settings-match-via")
                     for f, via in (("node_port", ExposureVia.NODE_PORT), ("ingress_class_name", ExposureVia.INGRESS),
                                    ("ingress_namespace", ExposureVia.INGRESS))
                     if getattr(self, f) is not None and self.via is not via]
        if self.via is ExposureVia.INGRESS and self.tls_secret_name and not self.hostname:
            problems.append(FieldProblem("hostname", "via ingress with tls_secret_name needs `hostname`: the Ingress "
                                         "serves its certificate for that host (TLS SNI); add the name your "
                                         "certificate is issued for", rule="exposure-settings-match-via"))
        if self.via is ExposureVia.INGRESS and self.tls_certificate_arn:
            problems.append(FieldProblem("tls_certificate_arn", "tls_certificate_arn is for the NLB of via "
                                         "load-balancer; an Ingress terminates TLS with tls_secret_name",
                                         rule="exposure-settings-match-via"))
        raise_problems(problems)
        return self

    @property
    def certificate_region(self) -> str | None:
        """The region of `tls_certificate_arn` (ACM certificates are regional)."""
        match = re.match(ACM_CERTIFICATE_ARN, self.tls_certificate_arn or "")
        return match.group(2) if match else None


class Budget(_Section):
    max_monthly_usd: float | None = Field(default=None, ge=bounds.MIN_BUDGET_USD, le=bounds.MAX_BUDGET_USD,
                                          description="ceiling per environment, USD/month")


#: JSON Schema: an environment that neither uses spot nor scales to zero (production-on-demand, production-always-on).
ALWAYS_ON_DEMAND = {"properties": {"spot": {"not": {"const": True}}, "min_replicas": {"not": {"const": 0}}}}


class Environment(_Section):
    """One deployment target; becomes the stack `<service>-<name>`."""

    model_config = ConfigDict(json_schema_extra={"allOf": [when(is_const("production", True), ALWAYS_ON_DEMAND)]})

    region: Region = Field(description="AWS region, e.g. `us-east-1`")
    traffic_scale: float = Field(default=1.0, ge=bounds.MIN_TRAFFIC_SCALE, le=bounds.MAX_TRAFFIC_SCALE,
                                 description="fraction of peak traffic this env sees (0.001-10)")
    spot: bool = Field(default=False, description="use spot capacity (never allowed in production)")
    min_replicas: int | None = Field(default=None, ge=0, le=bounds.MAX_REPLICAS,
                                     description="floor; 0 allows scale to zero (not in production)")
    max_replicas: int | None = Field(default=None, ge=1, le=bounds.MAX_REPLICAS,
                                     description="ceiling; defaults to twice the peak replicas (at most 1,000)")
    production: bool | None = Field(default=None, description="defaults to true for names starting with `prod`")
    platform: str | None = Field(default=None, pattern=DNS_1123_LABEL, max_length=40,
                                 description="the shared platform this environment lands on (EKS, private SageMaker); "
                                 "defaults to `<environment>-<region>`, stack platform-<that>")

    @model_validator(mode="after")
    def _min_le_max(self) -> Environment:
        if self.min_replicas is not None and self.max_replicas is not None and self.min_replicas > self.max_replicas:
            raise FieldProblem("min_replicas", f"min_replicas ({self.min_replicas}) must be <= max_replicas "
                               f"({self.max_replicas})", rule="min-replicas-not-above-max")
        return self


#: The service name platform stacks use (`platform-<env>-<region>`); no service may take it.
RESERVED_SERVICE = "platform"


def _not_reserved(value: str) -> str:
    if value == RESERVED_SERVICE:
        raise ValueError(f"{value!r} is reserved for platform stacks (platform-<env>-<region>); rename the service")
    return value


class _NotReserved:
    def __get_pydantic_json_schema__(self, core_schema: Any, handler: Any) -> dict:
        return {**handler(core_schema), "not": {"const": RESERVED_SERVICE}}


#: A name for a dict key of `environments` (stack `<service>-<name>`).
EnvironmentName = Annotated[str, Field(pattern=DNS_1123_LABEL, max_length=20)]


def context_tokens(spec: ModelSpec) -> tuple[int, int]:
    """(the context a model is served with, the model's own limit), tokens: `max_context_tokens`, else the smaller of
    the catalog's limit and `defaults.DEFAULT_MAX_MODEL_LEN`; a model outside the catalog is limited by what is
    asked for (the default when nothing is)."""
    from blueprints.defaults import DEFAULT_MAX_MODEL_LEN

    record = load_catalog().models.get(spec.id) if spec.id else None
    limit = record.max_context_tokens if record else (spec.max_context_tokens or DEFAULT_MAX_MODEL_LEN)
    return spec.max_context_tokens or min(limit, DEFAULT_MAX_MODEL_LEN), limit


class Requirements(_Section):
    """A service's requirements: what to serve, at what load and latency, under which rules, where.

    Rules across fields that a JSON Schema cannot state are listed in `blueprints.input_rules`; each error names the
    field and carries the rule's id.
    """

    model_config = ConfigDict(json_schema_extra=lambda schema: _requirements_rules(schema))

    service: Annotated[str, AfterValidator(_not_reserved), _NotReserved()] = Field(
        pattern=DNS_1123_LABEL, max_length=40, description="DNS-1123 name of the service (not `platform`)")
    owner: str = Field(pattern=TAG_VALUE, max_length=256, description="owning team, tagged on every resource (a tag "
                       "value: up to 256 letters, digits, spaces and _.:/+-@)")
    cost_center: str = Field(pattern=TAG_VALUE, max_length=256, description="cost center, tagged on every resource "
                             "(a tag value)")
    model: ModelSpec | None = Field(default=None, description="the model (single-model services)")
    models: list[ModelSpec] | None = Field(default=None, min_length=1, max_length=bounds.MAX_MODELS,
                                           description="several models, each with traffic")
    traffic: Traffic | None = Field(default=None, description="load for `model`")
    slo: Slo = Field(default_factory=Slo)
    hardware: Hardware = Field(default_factory=Hardware)
    operations: Operations = Field(default_factory=Operations)
    compliance: Compliance = Field(default_factory=Compliance)
    exposure: Exposure = Field(default_factory=Exposure, description="who can reach the endpoint (internal by default)")
    budget: Budget = Field(default_factory=Budget)
    environments: dict[EnvironmentName, Environment] = Field(
        min_length=1, max_length=bounds.MAX_ENVIRONMENTS, description="environment name -> settings")

    @model_validator(mode="after")
    def _consistent(self) -> Requirements:
        raise_problems(self._model_problems() or [*self._catalog_problems(), *self._environment_problems(),
                                                  *self._cluster_problems()])
        return self

    def _model_problems(self) -> list[FieldProblem]:
        if (self.model is None) == (self.models is None):
            return [FieldProblem("model" if self.model is None else "models", "give exactly one of `model` (one model) "
                                 "or `models` (a list)", rule="model-or-models")]
        if self.models is not None and self.traffic is not None:
            return [FieldProblem("traffic", "top-level `traffic` goes with `model`; with `models`, give each entry its "
                                 "own `traffic`", rule="model-or-models")]
        if self.model is not None and self.traffic is None and self.model.traffic is None:
            return [FieldProblem("traffic", "`traffic` is required with `model` (top level or model.traffic)",
                                 rule="model-traffic")]
        problems = [FieldProblem(("models", i, "traffic"), "each entry of `models` needs its own `traffic`",
                                 rule="model-traffic") for i, m in enumerate(self.models or []) if m.traffic is None]
        names = [m.served_name for m in self.models or []]
        problems += [FieldProblem(("models", i, "name"), f"model name {name!r} is used by another entry too; served "
                                  "names are unique (set `name`)", rule="unique-model-names")
                     for i, name in enumerate(names) if names.count(name) > 1]
        return problems

    def _catalog_problems(self) -> list[FieldProblem]:
        """Each model against the catalog: its context limit and the requests its context must hold."""
        problems = []
        for spec, traffic, where, traffic_at in self.model_entries():
            record = load_catalog().models.get(spec.id) if spec.id else None
            task = spec.task or (record.task if record else None)
            wanted, limit = context_tokens(spec)
            if wanted > limit:
                problems.append(FieldProblem((*where, "max_context_tokens"), f"max_context_tokens={wanted} exceeds "
                                             f"{spec.id}'s limit of {limit} tokens; lower it to <= {limit}",
                                             rule="context-within-model"))
                continue
            given_p95 = [f for f in ("input_tokens_p95", "output_tokens_p95") if getattr(traffic, f) is not None]
            no_flops = record is None or spec.architecture is not None or record.gflops_per_request is None
            if task in (Task.VISION, Task.SPEECH_RECOGNITION) and no_flops and spec.measured_latency_ms is None:
                problems.append(FieldProblem((*where, "measured_latency_ms"), f"{spec.served_name} is a {task.value} "
                                             "model without a FLOPs figure in the catalog; set measured_latency_ms and "
                                             "measured_instance_type", rule="vision-needs-measurement"))
            if task is not None and task.autoregressive and not task.generative \
                    and traffic.mean_output_tokens > wanted:
                problems.append(FieldProblem((*traffic_at, "mean_output_tokens"), f"{traffic.mean_output_tokens} "
                                             f"exceeds the decoder's max_context_tokens={wanted}: a {task.value} "
                                             f"request (one 30 s window) decodes at most {wanted} tokens; set it to "
                                             "the tokens one window transcribes (e.g. 120)",
                                             rule="context-holds-requests"))
            if task is not None and not task.generative:
                problems += [FieldProblem((*traffic_at, f), f"{f} applies to text generation; "
                                          f"{spec.served_name} is a {task.value} model: remove it",
                                          rule="p95-lengths-text-generation") for f in given_p95]
                continue
            mean = traffic.mean_input_tokens + traffic.mean_output_tokens
            p95 = (traffic.input_tokens_p95 or traffic.mean_input_tokens) + \
                (traffic.output_tokens_p95 or traffic.mean_output_tokens)
            if mean > wanted:
                problems.append(FieldProblem((*where, "max_context_tokens"), f"the mean request (mean_input_tokens + "
                                             f"mean_output_tokens = {mean}) exceeds max_context_tokens={wanted}, so "
                                             f"it would be rejected; raise max_context_tokens (<= {limit}) or shorten "
                                             "requests", rule="context-holds-requests"))
            elif given_p95 and p95 > wanted:
                problems.append(FieldProblem((*where, "max_context_tokens"), f"a p95 request (input_tokens_p95 + "
                                             f"output_tokens_p95, or the mean where no p95 is given = {p95}) exceeds "
                                             f"max_context_tokens={wanted}, so one request in twenty would not fit; "
                                             f"raise max_context_tokens (<= {limit}) or lower the p95s",
                                             rule="context-holds-requests"))
        return problems

    def _environment_problems(self) -> list[FieldProblem]:
        problems = []
        allowed = set(self.compliance.regions_allowed)
        cert_region = self.exposure.certificate_region
        public = self.exposure.scope is ExposureScope.PUBLIC
        if self.compliance.private_only and public:
            problems.append(FieldProblem(("exposure", "scope"), "exposure.scope public contradicts "
                                         "compliance.private_only: a private-only service has no internet-facing "
                                         "endpoint; use exposure.scope: internal (or drop private_only)",
                                         rule="private-not-public"))
        for env, spec in self.environments.items():
            at = ("environments", env)
            if allowed and spec.region not in allowed:
                problems.append(FieldProblem((*at, "region"), f"{spec.region!r} is not in compliance.regions_allowed "
                                             f"{sorted(allowed)}; pick an allowed region or widen the list",
                                             rule="region-allowed"))
            if cert_region is not None and spec.region != cert_region:
                problems.append(FieldProblem((*at, "region"), f"exposure.tls_certificate_arn is an ACM certificate in "
                                             f"{cert_region} but this environment is in {spec.region}: ACM "
                                             "certificates are regional and a load balancer uses one of its own "
                                             f"region; request (or import) the certificate in {spec.region}, or give "
                                             "that environment its own requirements file", rule="certificate-region"))
            if self.is_production(env) and spec.spot:
                problems.append(FieldProblem((*at, "spot"), "spot capacity is not allowed in production; set spot: "
                                             "false", rule="production-on-demand"))
            if self.is_production(env) and spec.min_replicas == 0:
                problems.append(FieldProblem((*at, "min_replicas"), "production never scales to zero; set "
                                             "min_replicas >= 1", rule="production-always-on"))
            elif public and spec.min_replicas == 0:
                problems.append(FieldProblem((*at, "min_replicas"), "min_replicas 0 with exposure.scope public: a "
                                             "service that scales to zero has no load balancer (clients reach it "
                                             "through the in-cluster KEDA interceptor); set min_replicas >= 1 or use "
                                             "exposure.scope: internal", rule="public-always-on"))
            for spec_m, traffic, _, _ in self.model_entries():
                peak = traffic.peak_requests_per_s * spec.traffic_scale
                if not bounds.MIN_PEAK_REQUESTS_PER_S <= peak <= bounds.MAX_PEAK_REQUESTS_PER_S:
                    problems.append(FieldProblem((*at, "traffic_scale"), f"{spec_m.served_name}'s peak here is "
                                                 f"{traffic.peak_requests_per_s:g} x {spec.traffic_scale:g} = {peak:g} "
                                                 f"requests/s, outside {bounds.MIN_PEAK_REQUESTS_PER_S:g}-"
                                                 f"{bounds.MAX_PEAK_REQUESTS_PER_S:,g}; change traffic_scale or "
                                                 "the peak", rule="environment-peak-rate"))
                    break
        return problems

    def is_production(self, env: str) -> bool:
        flag = self.environments[env].production
        return flag if flag is not None else env.startswith("prod")

    def served_models(self) -> list[tuple[ModelSpec, Traffic]]:
        """Each model with its traffic (the top-level `traffic` for a single `model`)."""
        return [(spec, traffic) for spec, traffic, _, _ in self.model_entries()]

    def _cluster_problems(self) -> list[FieldProblem]:
        """The edge-cluster settings (`blueprints.edge.edge_problems`) and the exposure against the cluster's declared
        add-ons (`blueprints.cluster_exposure.resolve_exposure`)."""
        from blueprints.cluster_exposure import ExposureProblem, resolve_exposure
        from blueprints.edge import edge_problems

        problems = edge_problems(self)
        if self.operations.preference is not OperationsPreference.MANAGED:
            try:
                resolve_exposure(self.operations, self.exposure)
            except ExposureProblem as exc:
                problems.append(FieldProblem(exc.field, str(exc), rule="exposure-implemented"))
        return problems

    def model_entries(self) -> list[tuple[ModelSpec, Traffic, tuple, tuple]]:
        """Each model with its traffic and where both are in the file: (spec, traffic, the model's location, the
        traffic's location), locations as field paths (`("models", 1)`, `("models", 1, "traffic")`)."""
        if self.model is not None:
            traffic_at = ("model", "traffic") if self.model.traffic is not None else ("traffic",)
            return [(self.model, self.model.traffic or self.traffic, ("model",), traffic_at)]  # type: ignore[list-item]
        return [(m, m.traffic, ("models", i), ("models", i, "traffic"))  # type: ignore[misc]
                for i, m in enumerate(self.models or [])]

    def model_path(self, index: int) -> str:
        """The field path of the `index`-th served model as messages name it: `model`, or `models[1] (reranker)`."""
        if self.model is not None:
            return "model"
        return field_path(("models", index), {"models": [{"name": m.served_name} for m in self.models or []]})


def _requirements_rules(schema: dict) -> None:
    """The Requirements rules a JSON Schema states: model-or-models, model-traffic, private-not-public,
    production-on-demand and production-always-on for environments named `prod...`, public-always-on."""
    # Exactly one of the two: they exclude each other (`anyOf` states it as well as `oneOf`, and generators handle it
    # in a fraction of the time).
    schema["anyOf"] = [
        {"required": ["model"], "properties": {"model": {"type": "object"}, "models": {"type": "null"}},
         "anyOf": [given({"traffic": "object"}), {"properties": {"model": given({"traffic": "object"})}}]},
        {"required": ["models"], "properties": {"models": {"type": "array", "items": given({"traffic": "object"})},
                                                 "model": {"type": "null"}, "traffic": {"type": "null"}}},
    ]
    schema["allOf"] = [
        when({"required": ["compliance"], "properties": {"compliance": is_const("private_only", True)}},
             {"properties": {"exposure": {"properties": {"scope": {"not": {"const": "public"}}}}}}),
        {"properties": {"environments": {"patternProperties": {  # a name starting with prod is production by default
            "^prod": when({"not": {"properties": {"production": {"const": False}}, "required": ["production"]}},
                          ALWAYS_ON_DEMAND)}}}},
        when({"required": ["exposure"], "properties": {"exposure": is_const("scope", "public")}},
             {"properties": {"environments": {"patternProperties": {
                 "": {"properties": {"min_replicas": {"not": {"const": 0}}}}}}}}),
    ]


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
        raise RequirementsError(format_validation_error(exc, source=path, data=data)) from None


def requirements_json_schema() -> dict:
    """The requirements schema as JSON Schema (draft 2020-12), for editors and `blueprint schema`.

    It accepts what `load_requirements` accepts, except the rules it cannot state, which it lists under
    `x-cross-field-rules` (`blueprints.input_rules`): a document valid against it plans, or fails naming one of them.
    Catalog names (model ids, instance types, regions, add-ons, Kubernetes versions) are `enum`s of this version's
    catalog. Patterns are ECMA-262 as editors apply them: `$` ends the value (no trailing newline).
    """
    from blueprints.input_rules import CROSS_FIELD_RULES

    schema = Requirements.model_json_schema()
    _close_pattern_properties(schema)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "serving blueprints requirements file"
    schema["description"] = (f"{Requirements.__doc__.split(chr(10))[0]} Besides this schema, a file follows the "
                             "cross-field rules in x-cross-field-rules (checked by `blueprint plan`, which names the "
                             "field and the rule).")
    schema["x-cross-field-rules"] = dict(CROSS_FIELD_RULES)
    return schema


def _close_pattern_properties(node: object) -> None:
    """A mapping whose keys must match a pattern (`environments`) accepts no other key: pydantic writes
    `patternProperties` without `additionalProperties: false`, which lets any other name through."""
    if isinstance(node, dict):
        patterns = node.get("patternProperties")
        if patterns and node.get("type") == "object" and "additionalProperties" not in node:  # not the rules' parts
            node["additionalProperties"] = False
            if len(patterns) == 1:  # the key pattern holds for every name, also beside the rules' patterns
                node.setdefault("propertyNames", {})["pattern"] = next(iter(patterns))
        for value in node.values():
            _close_pattern_properties(value)
    elif isinstance(node, list):
        for value in node:
            _close_pattern_properties(value)
