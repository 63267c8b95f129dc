"""Versioned catalog data (GPUs, instance types and prices, model architectures) loaded into typed records.

The YAML files beside this module are the only place outside numbers enter the planner; each carries its source
and the date it was checked. `load_catalog()` reads them once per process. Beside the records: the add-on, IAM,
image, metric and replacement catalogs, the units of measure (`units`) and the table of scaling signals and alerts
(`signals`).

May import `blueprints.core` only.
"""

from __future__ import annotations

import difflib
from enum import Enum
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from blueprints.core import bounds
from blueprints.catalog.files import read_catalog_file
from blueprints.core.errors import CatalogError, FieldProblem, raise_problems
from blueprints.core.jsontypes import absent_when_none, check_json_types

SCHEMA_VERSION = 1


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _json_types(cls, data: Any) -> Any:
        return check_json_types(cls, data)


class Task(str, Enum):
    """What a model does; decides between token-by-token (generative, vLLM) and one-call serving (Triton, ONNX
    Runtime, SageMaker's Triton), and how a measured latency scales between GPUs."""

    TEXT_GENERATION = "text-generation"
    EMBEDDING = "embedding"
    RERANKING = "reranking"
    CLASSIFICATION = "classification"
    VISION = "vision"
    #: Audio in, text out (Whisper): one call per 30-second window; an audio encoder, then a text decoder.
    SPEECH_RECOGNITION = "speech-recognition"
    OTHER = "other"

    @property
    def generative(self) -> bool:
        """Served by vLLM: text generation."""
        return self is Task.TEXT_GENERATION

    @property
    def autoregressive(self) -> bool:
        """Decodes token by token, so its latency is bound by reading the decoder's weights each step (memory
        bandwidth), not by TFLOPS: text generation and speech recognition."""
        return self in (Task.TEXT_GENERATION, Task.SPEECH_RECOGNITION)


class Interconnect(str, Enum):
    """How the GPUs of one node exchange tensor-parallel all-reduces."""

    NVLINK = "nvlink"
    PCIE = "pcie"


class Gpu(_Record):
    """One GPU model's physical limits (per GPU) and the efficiencies the capacity model uses for it."""

    name: str = Field(description="short name used on the command line, e.g. `l40s`")
    model: str = Field(description="vendor name")
    memory_gib: float = Field(gt=0, description="usable device memory per GPU, GiB")
    bandwidth_gb_per_s: float = Field(gt=0, description="memory bandwidth per GPU, 1e9 bytes/s")
    tflops_16bit: float = Field(gt=0, description="dense FP16/BF16 tensor TFLOPS per GPU")
    tflops_fp8: float | None = Field(default=None, gt=0, description="dense FP8 tensor TFLOPS; none if unsupported")
    supports_bf16: bool
    compute_capability: float = Field(ge=5.0, le=12.0, description="CUDA compute capability, e.g. 8.9 (Ada)")
    interconnect: Interconnect = Field(description="GPU-to-GPU link inside one node (tensor-parallel all-reduce)")
    interconnect_gb_per_s: float = Field(gt=0, description="GPU-to-GPU bandwidth per direction, 1e9 bytes/s")
    prefill_mfu: float | None = Field(default=None, gt=0, le=1, description="fraction of the dense tensor TFLOPS "
                                      "prefill reaches on this GPU; defaults to `defaults.MFU`. Set where a measured "
                                      "figure says the datasheet misleads, with its source in gpus.yaml")

    @property
    def supports_fp8(self) -> bool:
        """FP8 tensor cores (compute capability >= 8.9: Ada, Hopper): FP8 weights run W8A8 and vLLM's FP8 KV cache is
        planned. Source: vLLM docs, features/quantization/fp8 ("FP8 computation is supported on NVIDIA GPUs with
        compute capability >= 8.9")."""
        return self.compute_capability >= 8.9

    @property
    def supports_marlin(self) -> bool:
        """vLLM's Marlin kernels for 4/8-bit weight-only checkpoints (awq_marlin, gptq_marlin) need compute
        capability >= 8.0 (Ampere); vLLM picks them automatically unless `--quantization awq|gptq` forces the older
        kernels (vllm/model_executor/layers/quantization/awq_marlin.py, `is_awq_marlin_compatible`)."""
        return self.compute_capability >= 8.0


class InstanceType(_Record):
    """One EC2 or SageMaker hosting instance type with its on-demand price."""

    instance_type: str
    gpu: str | None = Field(description="GPU short name, or none for CPU-only types")
    gpu_count: int = Field(ge=0)
    vcpus: int = Field(ge=1)
    memory_gib: float = Field(gt=0, description="host RAM, GiB")
    cpu_arch: str = Field(pattern="^(x86_64|arm64)$")
    usd_per_hour: float = Field(gt=0, description="on-demand, us-east-1, Linux")

    @property
    def family(self) -> str:
        """The family prefix: `g6e` for `g6e.12xlarge`, `g5` for `ml.g5.xlarge`."""
        return self.instance_type.removeprefix("ml.").split(".")[0]


class Architecture(_Record):
    """Transformer shape, as in the model's config.json.

    Mixture-of-experts models add `experts` (config.json `num_local_experts`), `experts_per_token`
    (`num_experts_per_tok`) and `shared_params_b` (everything outside the routed experts: attention, embeddings,
    norms, router, shared experts); all three or none. `vocab_size` and `tie_word_embeddings` let the capacity model
    keep the embedding table out of the bytes a decode step reads and at 16-bit in quantised checkpoints; without
    them every parameter counts as a weight of the model's precision that each step reads.

    Example:
        Mixtral-8x7B: `{params_b: 46.7, layers: 32, hidden_size: 4096, attention_heads: 32, kv_heads: 8,
        head_dim: 128, experts: 8, experts_per_token: 2, shared_params_b: 1.61}`
    """

    # architecture-shape, as far as a JSON Schema states it: the MoE fields all or none.
    model_config = ConfigDict(json_schema_extra={"anyOf": [
        {"properties": {f: {"type": "null"} for f in ("experts", "experts_per_token", "shared_params_b")}},
        {"required": ["experts", "experts_per_token", "shared_params_b"],
         "properties": {"experts": {"type": "integer"}, "experts_per_token": {"type": "integer"},
                        "shared_params_b": {"type": "number"}}}]})

    params_b: float = Field(ge=bounds.MIN_PARAMS_B, le=bounds.MAX_PARAMS_B, description="total parameters, billions")
    active_params_b: float | None = Field(default=None, ge=bounds.MIN_PARAMS_B, le=bounds.MAX_PARAMS_B,
                                          description="parameters active per token (MoE); "
                                          "defaults to params_b, or to the MoE fields' shared + k/E of the experts")
    layers: int = Field(ge=1, le=1000)
    hidden_size: int = Field(ge=1, le=131_072)
    attention_heads: int = Field(ge=1, le=1024)
    kv_heads: int = Field(ge=1, le=1024, description="key/value heads (grouped-query attention)")
    head_dim: int = Field(ge=1, le=1024)
    vocab_size: int | None = Field(default=None, ge=1, le=2_000_000, description="config.json `vocab_size`")
    tie_word_embeddings: bool = Field(default=False, description="config.json `tie_word_embeddings`: the output "
                                      "projection reuses the embedding table")
    experts: int | None = Field(default=None, ge=2, le=1024, description="MoE: routed experts per MoE layer")
    experts_per_token: int | None = Field(default=None, ge=1, le=64, description="MoE: routed experts each token "
                                          "uses per layer")
    shared_params_b: float | None = Field(default=None, ge=bounds.MIN_PARAMS_B, le=bounds.MAX_PARAMS_B,
                                          description="MoE: parameters outside the routed "
                                          "experts (attention, embeddings, norms, router, shared experts), billions")
    intermediate_size: int | None = Field(default=None, exclude_if=absent_when_none,
                                          ge=1, le=1_048_576, description="config.json "
                                          "`intermediate_size`: the MLP's inner width (dense models); LoRA adapters "
                                          "need it to count their GPU slots (blueprints.contracts.memory)")

    @model_validator(mode="after")
    def _consistent(self) -> Architecture:
        rule = "architecture-shape"
        moe = (self.experts, self.experts_per_token, self.shared_params_b)
        if any(v is not None for v in moe) and any(v is None for v in moe):
            missing = [f for f, v in zip(("experts", "experts_per_token", "shared_params_b"), moe) if v is None]
            raise_problems([FieldProblem(f, "a mixture-of-experts model gives `experts`, `experts_per_token` and "
                                         "`shared_params_b` together (config.json num_local_experts, "
                                         "num_experts_per_tok, and the parameters outside the experts)", rule=rule)
                            for f in missing])
        problems = []
        if self.experts is not None:
            if self.experts_per_token > self.experts:  # type: ignore[operator]
                problems.append(FieldProblem("experts_per_token", f"experts_per_token={self.experts_per_token} "
                                             f"exceeds experts={self.experts}", rule=rule))
            if self.shared_params_b >= self.params_b:  # type: ignore[operator]
                problems.append(FieldProblem("shared_params_b", f"shared_params_b={self.shared_params_b} must be "
                                             f"below params_b={self.params_b} (the routed experts hold the rest)",
                                             rule=rule))
            derived = self.moe_active_b
            if not problems and self.active_params_b is not None and \
                    abs(self.active_params_b - derived) > 0.05 * derived:
                problems.append(FieldProblem("active_params_b", f"active_params_b={self.active_params_b} disagrees "
                                             f"with the MoE fields, which give {derived:.2f} (shared + "
                                             "experts_per_token/experts of the rest); fix either", rule=rule))
        if self.active_params_b is not None and self.active_params_b > self.params_b:
            problems.append(FieldProblem("active_params_b", f"active_params_b={self.active_params_b} exceeds "
                                         f"params_b={self.params_b}", rule=rule))
        if self.vocab_size is not None and self.embedding_params_b >= self.params_b:
            problems.append(FieldProblem("vocab_size", f"vocab_size={self.vocab_size} x hidden_size="
                                         f"{self.hidden_size} {'' if self.tie_word_embeddings else 'x 2 (untied) '}is "
                                         f"more than params_b={self.params_b} billion; check the units (params_b is "
                                         "in billions)", rule=rule))
        raise_problems(problems)
        return self

    @property
    def moe_active_b(self) -> float:
        """Active parameters per token from the MoE fields (shared + k/E of the routed experts), billions."""
        shared = self.shared_params_b or 0.0
        return shared + (self.params_b - shared) * (self.experts_per_token or 1) / (self.experts or 1)

    @property
    def active_b(self) -> float:
        """Parameters each token multiplies through, billions (all of them for a dense model)."""
        if self.active_params_b is not None:
            return self.active_params_b
        return self.moe_active_b if self.experts else self.params_b

    @property
    def embedding_params_b(self) -> float:
        """Embedding table plus an untied output projection, billions (0 when `vocab_size` is not given)."""
        if self.vocab_size is None:
            return 0.0
        return self.vocab_size * self.hidden_size * (1 if self.tie_word_embeddings else 2) / 1e9


class CatalogModel(_Record):
    """A known model: its task, architecture and where the figures come from."""

    id: str
    task: Task
    source: str
    architecture: Architecture
    max_context_tokens: int = Field(ge=1)
    gflops_per_request: float | None = Field(default=None, gt=0, description="for non-token models (vision) and "
                                             "Whisper's audio encoder (one 30 s window): compute per request, GFLOP")
    decoder_params_b: float | None = Field(default=None, gt=0, description="encoder-decoder models (speech "
                                           "recognition): parameters one decode step reads (decoder layers and the "
                                           "token embedding), billions")

    @model_validator(mode="after")
    def _decoder_within_model(self) -> CatalogModel:
        if self.decoder_params_b is not None and self.decoder_params_b >= self.architecture.params_b:
            raise ValueError(f"{self.id}: decoder_params_b={self.decoder_params_b} must be below params_b="
                             f"{self.architecture.params_b} (the encoder holds the rest)")
        return self


class SageMakerImage(_Record):
    """A SageMaker serving container: one repository:tag, published in each listed region's ECR registry."""

    engine: str = Field(pattern="^(lmi|triton)$", description="`lmi` (LLMs, vLLM inside) or `triton` (other models)")
    repository: str
    tag: str = Field(pattern=r"^[\w][\w.\-]{0,127}$", description="pinned version tag, never `latest`")
    source: str
    registry_accounts: dict[str, str] = Field(min_length=1, description="region -> 12-digit ECR registry account")

    def uri(self, region: str) -> str:
        """The image URI in `region` (the caller checks `region in registry_accounts`)."""
        return f"{self.registry_accounts[region]}.dkr.ecr.{region}.amazonaws.com/{self.repository}:{self.tag}"


class _GpuFile(_Record):
    schema_version: int
    source: str
    gpus: list[Gpu]


class _InstanceFile(_Record):
    schema_version: int
    hours_per_month: float = Field(gt=0)
    price_region: str = Field(description="the AWS region the prices are quoted for")
    ec2_source: str
    sagemaker_source: str
    spot_price_factor: float = Field(gt=0, le=1)
    eks_control_plane_usd_per_hour: float = Field(ge=0)
    aws_regions: list[str] = Field(min_length=1)
    nat_gateway_usd_per_hour: float = Field(ge=0)
    interface_endpoint_usd_per_hour_per_az: float = Field(ge=0)
    network_load_balancer_usd_per_hour: float = Field(ge=0)
    kms_key_usd_per_month: float = Field(ge=0)
    ec2: list[InstanceType]
    sagemaker: list[InstanceType]
    cpu_gflops_source: str
    cpu_gflops_per_vcpu: dict[str, float] = Field(description="CPU family -> effective FP32 GFLOP/s per vCPU")
    sagemaker_images: list[SageMakerImage]


class _ModelFile(_Record):
    schema_version: int
    models: list[CatalogModel]


class Catalog(BaseModel):
    """All catalogs, indexed by name. Build with `load_catalog()`."""

    model_config = ConfigDict(frozen=True)

    gpus: dict[str, Gpu]
    ec2: dict[str, InstanceType]
    sagemaker: dict[str, InstanceType]
    models: dict[str, CatalogModel]
    hours_per_month: float
    price_region: str
    spot_price_factor: float
    eks_control_plane_usd_per_hour: float
    aws_regions: tuple[str, ...]
    nat_gateway_usd_per_hour: float
    interface_endpoint_usd_per_hour_per_az: float
    network_load_balancer_usd_per_hour: float
    kms_key_usd_per_month: float
    ec2_source: str
    sagemaker_source: str
    gpu_source: str
    cpu_gflops_per_vcpu: dict[str, float]
    cpu_gflops_source: str
    sagemaker_images: dict[str, SageMakerImage]

    def gpu(self, name: str) -> Gpu:
        """Return the GPU called `name` (e.g. `l40s`). Raises `CatalogError` with close matches if unknown."""
        return _lookup(self.gpus, name, "GPU")

    def model(self, model_id: str) -> CatalogModel:
        """Return the catalog model `model_id`. Raises `CatalogError` with close matches if unknown."""
        return _lookup(self.models, model_id, "model id")

    def instance(self, instance_type: str) -> InstanceType:
        """Return an EC2 (`g6e.xlarge`) or SageMaker (`ml.g5.xlarge`) instance type. Raises `CatalogError`."""
        table = self.sagemaker if instance_type.startswith("ml.") else self.ec2
        return _lookup(table, instance_type, "instance type")

    @property
    def families(self) -> tuple[str, ...]:
        """The instance families of every EC2 and SageMaker type in the catalog (`g6e`, `p6-b200`, `m7i`), sorted."""
        return tuple(sorted({i.family for i in (*self.ec2.values(), *self.sagemaker.values())}))

    def cpu_gflops(self, instance: InstanceType) -> float:
        """Effective FP32 GFLOP/s per vCPU of a CPU instance's family. Raises `CatalogError` if not catalogued."""
        return _lookup(self.cpu_gflops_per_vcpu, instance.family, "CPU family (cpu_gflops_per_vcpu)")

    def sagemaker_image(self, engine: str) -> SageMakerImage:
        """The SageMaker serving image for `engine` (`lmi` or `triton`). Raises `CatalogError` if unknown."""
        return _lookup(self.sagemaker_images, engine, "SageMaker image engine")


#: SageMaker instance families with local NVMe instance storage: SageMaker rejects VolumeSizeInGB for them, and a storage
#: KmsKeyArn is pointless there (no EBS volume). Rule of the SageMaker Python SDK's `volume_size_supported`
#: (sagemaker/utils.py: any family containing "d", plus g5, g6 and trn1, aws/sagemaker-python-sdk#4828); p5 and trn2
#: added here as they also ship local NVMe. [assumption] checked 2026-11.
NO_EBS_FAMILY_PREFIXES = ("g5", "g6", "p5", "trn1", "trn2")


def has_instance_storage(instance_type: str) -> bool:
    """True for SageMaker instance types with local NVMe storage (encrypted by the hardware; no EBS volume) (`ml.g5.xlarge` -> family `g5`)."""
    family = instance_type.removeprefix("ml.").split(".")[0]
    return "d" in family or family.startswith(NO_EBS_FAMILY_PREFIXES)


def _lookup(table: dict, key: str, what: str):
    try:
        return table[key]
    except KeyError:
        close = difflib.get_close_matches(key, table, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else "."
        raise CatalogError(f"unknown {what} {key!r}{hint} Known: {', '.join(sorted(table))}.") from None


def _read(name: str, model: type[BaseModel]):
    return read_catalog_file(name, model, schema_version=SCHEMA_VERSION)


@lru_cache(maxsize=1)
def load_catalog() -> Catalog:
    """Load and cross-check the bundled catalogs.

    Returns:
        The `Catalog`, cached for the process.

    Raises:
        CatalogError: a file is malformed, or an instance names a GPU that `gpus.yaml` lacks.
    """
    gpus = _read("gpus.yaml", _GpuFile)
    inst = _read("instances.yaml", _InstanceFile)
    models = _read("models.yaml", _ModelFile)
    gpu_names = {g.name for g in gpus.gpus}
    for row in inst.ec2 + inst.sagemaker:
        if row.gpu is not None and row.gpu not in gpu_names:
            raise CatalogError(f"instances.yaml: {row.instance_type} names unknown GPU {row.gpu!r}")
        if (row.gpu is None) != (row.gpu_count == 0):
            raise CatalogError(f"instances.yaml: {row.instance_type} must set gpu and gpu_count together")
        if row.gpu is None and row.family not in inst.cpu_gflops_per_vcpu:
            raise CatalogError(f"instances.yaml: CPU type {row.instance_type} needs its family in cpu_gflops_per_vcpu")
    return Catalog(
        gpus={g.name: g for g in gpus.gpus},
        ec2={i.instance_type: i for i in inst.ec2},
        sagemaker={i.instance_type: i for i in inst.sagemaker},
        models={m.id: m for m in models.models},
        hours_per_month=inst.hours_per_month,
        price_region=inst.price_region,
        spot_price_factor=inst.spot_price_factor,
        eks_control_plane_usd_per_hour=inst.eks_control_plane_usd_per_hour,
        aws_regions=tuple(inst.aws_regions),
        nat_gateway_usd_per_hour=inst.nat_gateway_usd_per_hour,
        interface_endpoint_usd_per_hour_per_az=inst.interface_endpoint_usd_per_hour_per_az,
        network_load_balancer_usd_per_hour=inst.network_load_balancer_usd_per_hour,
        kms_key_usd_per_month=inst.kms_key_usd_per_month,
        ec2_source=inst.ec2_source,
        sagemaker_source=inst.sagemaker_source,
        gpu_source=gpus.source,
        cpu_gflops_per_vcpu=inst.cpu_gflops_per_vcpu,
        cpu_gflops_source=inst.cpu_gflops_source,
        sagemaker_images={i.engine: i for i in inst.sagemaker_images},
    )


def known_region(region: str) -> str:
    """`region` if it is an AWS region in the catalog; ValueError with close matches otherwise (a pydantic
    validator: the message lands on the field)."""
    regions = load_catalog().aws_regions
    if region not in regions:
        close = difflib.get_close_matches(region, regions, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(regions)}"
        raise ValueError(f"unknown AWS region {region!r}{hint}")
    return region
