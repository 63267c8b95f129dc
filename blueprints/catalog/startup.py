"""The startup model's data (`startup.yaml`, every number with its source): node launch, image pull per method,
weights read by the Run:ai Model Streamer or copied, and engine start per model size.

`load_startup_catalog()` reads it once per process. `blueprints.plan.startup` turns it into a replica's cold start;
the components read the streamer settings and the node classes' pull method from it (one place).
"""

from __future__ import annotations

from functools import lru_cache

from pydantic import BaseModel, ConfigDict, Field

from blueprints.catalog.files import read_catalog_file
from blueprints.core.errors import CatalogError

SCHEMA_VERSION = 1
#: Engine kinds with an image size (`image_pull.image_gb`).
ENGINE_KINDS = ("vllm", "sglang", "tensorrt-llm", "triton", "onnxruntime", "sagemaker")


class _Closed(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class NodeLaunch(_Closed):
    """From a pending pod to a node that takes it, s."""

    registration_s: int = Field(ge=1, le=1800, description="Karpenter: pod seen -> instance -> node registered")
    gpu_device_plugin_s: int = Field(ge=0, le=1800, description="GPU nodes: until nvidia.com/gpu is registered")
    large_gpu_node_extra_s: int = Field(ge=0, le=1800, description="extra boot of nodes with many GPUs")
    large_gpu_node_min_gpus: int = Field(ge=2, le=64, description="GPUs per node from which the extra applies")
    sagemaker_instance_s: int = Field(ge=1, le=3600, description="a SageMaker endpoint's instance launch")


class ImagePull(_Closed):
    """Image pull rates per method, MB/s (1e6 bytes), and each engine's compressed image size, GB (1e9 bytes)."""

    soci_parallel_mb_per_s: float = Field(gt=0, le=10_000, description="SOCI parallel pull/unpack (GPU nodes)")
    containerd_mb_per_s: float = Field(gt=0, le=10_000, description="containerd's default pull (CPU nodes)")
    image_gb: dict[str, float] = Field(description="engine kind -> compressed image size, GB")


class Streamer(_Closed):
    """Run:ai Model Streamer settings vLLM gets (`--model-loader-extra-config`) and its measured S3 rate."""

    concurrency: int = Field(ge=1, le=256, description="reader threads (RUNAI_STREAMER_CONCURRENCY)")
    gib_per_s: float = Field(gt=0, le=100, description="S3 -> GPU rate of one reading process at `concurrency`")
    memory_limit_bytes: int = Field(ge=1, le=1 << 40, description="CPU buffer per reading process "
                                    "(RUNAI_STREAMER_MEMORY_LIMIT)")

    @property
    def memory_limit_gib(self) -> float:
        return self.memory_limit_bytes / 1024**3


class Weights(_Closed):
    """How weights reach the GPU: streamed from the store, or copied to disk then loaded, GiB/s."""

    streamer: Streamer
    s3_copy_gib_per_s: float = Field(gt=0, le=100, description="`aws s3 sync` from the store to node-local disk")
    disk_load_gib_per_s: float = Field(gt=0, le=100, description="engine load from node-local disk")


class EngineStart(_Closed):
    """Engine start beside the weights (process start, profiling, compile, CUDA graphs), s."""

    vllm_base_s: float = Field(ge=0, le=3600, description="the engine core's init (profile, compile, capture)")
    vllm_s_per_b_params: float = Field(ge=0, le=100, description="per billion parameters")
    vllm_process_start_s: float = Field(ge=0, le=3600, description="`vllm serve` imports, API server, config, "
                                        "tokenizer, before the engine initialises the GPU")
    vllm_cold_compile_s: float = Field(ge=0, le=3600, description="the first torch.compile into empty caches, "
                                       "beyond a warm start (every new pod: its caches are on an emptyDir)")
    other_s: int = Field(ge=0, le=3600, description="Triton, ONNX Runtime")


class StartupCatalog(_Closed):
    """The whole `startup.yaml`."""

    schema_version: int
    node_launch: NodeLaunch
    image_pull: ImagePull
    weights: Weights
    engine_start: EngineStart


@lru_cache(maxsize=1)
def load_startup_catalog() -> StartupCatalog:
    """The startup model's data from `startup.yaml`.

    Raises:
        CatalogError: the file is malformed, has another schema version, or lacks an engine kind's image size.
    """
    data = read_catalog_file("startup.yaml", StartupCatalog, schema_version=SCHEMA_VERSION)
    sizes = data.image_pull.image_gb
    if sorted(sizes) != sorted(ENGINE_KINDS) or any(not 0 <= gb <= 100 for gb in sizes.values()):
        raise CatalogError(f"startup.yaml: image_pull.image_gb must give 0-100 GB for exactly {list(ENGINE_KINDS)}, "
                           f"got {sizes}")
    return data
