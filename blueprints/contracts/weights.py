"""Weights on disk: the local volume a model needs, and which files of a Hugging Face repository a server loads.

Shared by the planner (system-node scratch space for sync Jobs, node disk checks) and the components (emptyDir size
limits, the sync Job's download filters), so both size the same thing the same way.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING

from blueprints.catalog.engines import engine_facts
from blueprints.core import defaults
from blueprints.contracts.sections import Archetype
from blueprints.requirements.model import ModelFormat

if TYPE_CHECKING:
    from blueprints.contracts.blueprint import Blueprint


#: Files a Hugging Face download keeps: safetensors weights and their index, configs, tokenizer and chat template
#: files. Meta's repositories also ship `original/*.pth` (a second full copy of the weights, for Meta's own code):
#: vLLM loads safetensors, so that folder is never downloaded (Llama-3.1-8B: ~16 GB more).
#: Passed as one `--include`/`--exclude` per pattern (`components.weights_sync.hf_download_command`): the image's
#: huggingface_hub is 1.21.0 (blueprints/catalog/processes.yaml `tools`), whose `hf download` options take one value
#: each (cli/download.py L79-90) and match them as `snapshot_download` allow/ignore patterns (fnmatch). vLLM loads
#: `*.safetensors` when present (vllm/model_executor/model_loader/default_loader.py, `_prepare_weights`).
HF_INCLUDE_PATTERNS = ("*.safetensors", "*.safetensors.index.json", "*.json", "*.model", "*.tiktoken", "*.txt",
                       "*.jinja")
HF_EXCLUDE_PATTERNS = ("original/*",)


#: Where a server container finds the weights copied to local disk (the models volume's mount).
MODELS_MOUNT = "/models"


def streams_format(archetype: Archetype, model_format: ModelFormat, engine: str = "vllm") -> bool:
    """Whether the engine streams this format from the model store (vLLM's Run:ai Model Streamer reads safetensors
    only: vllm 0.24.0 runai_streamer_loader.py:79-108 lists `*.safetensors`; engines.yaml `features.weights`
    says which engines stream at all); otherwise an init container copies the weights to node-local disk first."""
    return (archetype is Archetype.VLLM_GPU and model_format is ModelFormat.SAFETENSORS
            and engine_facts(engine).features.weights.s3_streaming)


def streams_weights(bp: Blueprint) -> bool:
    """Whether `bp`'s pods stream their weights from the stack's model store (`streams_format`, and a model store:
    an edge cluster has none). The planner's startup model and the component decide it alike here."""
    engine = getattr(bp.engine, "kind", "vllm")
    return bp.storage is not None and all(streams_format(bp.archetype, m.format, engine) for m in bp.models)


def weights_volume_gib(weights_gib: Iterable[float]) -> float:
    """Local disk for models' weights, GiB: +10 % and 2 GiB for tokenizer/config files and filesystem overhead."""
    return sum(weights_gib) * 1.1 + 2


def sync_job_ephemeral_gib(weights_gib: float, *, from_hugging_face: bool) -> int:
    """Ephemeral storage a weights sync Job requests for one model, whole GiB (rounded up, as its Kubernetes quantity
    says): a Hugging Face download holds the model on local disk (`weights_volume_gib`), an `s3://` copy is
    server-side and writes only its logs (`defaults.S3_SYNC_EPHEMERAL_GIB`). The Job's request
    (`components.weights_sync`) and the system nodes' disk (`blueprints.plan.platforms.sync_scratch_gib`) both read it.

    Example: 68.18 GiB from hf:// -> 77 GiB (76.998 rounded up; a system disk sized for 76.998 GiB left the Job's
    77Gi request Pending)."""
    if not from_hugging_face:
        return math.ceil(defaults.S3_SYNC_EPHEMERAL_GIB)
    return math.ceil(weights_volume_gib([weights_gib]) - 1e-9)


def fetch_memory_gib(weights_gib: Iterable[float]) -> float:
    """Memory of a weights copy step (an init container copying models to local disk), GiB: 1 GiB plus 1 GiB per
    32 GiB of weights, at most 4 GiB.

    `aws s3 sync` keeps up to 10 concurrent 8 MiB parts per file in memory; dirty page cache of the written files is
    charged to the container's cgroup, so large models get more room before the kernel throttles or OOM-kills.
    """
    return min(4.0, 1 + math.ceil(sum(weights_gib) / 32))


def weights_reason(bp: Blueprint) -> str:
    """Where each model's weights come from and what the servers read, in plain words (the plan's rationale).

    Every self-hosted replica and SageMaker endpoint reads the stack's model store (`models/<name>/`, SSE-KMS),
    never the source: a sync Job (Kubernetes) or a one-off server-side copy (SageMaker, `s3://` sources) copies each
    source into it. SageMaker runs no sync Job, so an `hf://` source is uploaded to the store by hand.
    """
    key = "a customer-managed key" if bp.storage.customer_managed_kms else "the AWS-managed aws/s3 key"
    moves = ", ".join(f"{m.source_uri} -> models/{m.name}/" for m in bp.models)
    keys = "".join(f"; it decrypts {m.source_uri} with {m.source_kms_key_arn}" for m in bp.models
                   if m.source_kms_key_arn)
    if bp.archetype is not Archetype.SAGEMAKER_ENDPOINT:
        how, reader = f"copied into the model store by a sync Job per model on the system nodes{keys}", "each replica"
    elif bp.model.source_uri.startswith("s3://"):
        how = ("copied into the model store at deploy by a one-off server-side copy (a Lambda function whose role "
               f"reads only the source prefix and writes only that store prefix{keys})")
        reader = "the endpoint"
    else:
        how = "not copied by the stack (SageMaker runs no sync Job): upload it to the store before the endpoint is created"
        reader = "the endpoint"
    return f"weights: {moves}, {how}; {reader} reads the store (SSE-KMS with {key}), never the source"


def with_weights_reason(bp: Blueprint) -> Blueprint:
    """`bp` with `weights_reason` appended to its rationale (an edge cluster's plan has no model store: its rationale
    already says how each pod reads its source, `blueprints.plan.edge.edge_reasons`)."""
    if bp.storage is None:
        return bp
    return bp.model_copy(update={"rationale": [*bp.rationale, weights_reason(bp)]})


def replica_ephemeral_gib(weights_gib: Iterable[float], *, streamed: bool = False, adapters_gib: int = 0) -> int:
    """Ephemeral storage one serving replica requests, GiB (rounded up): its models' weights +10 % (none when they
    are streamed, `streams_format`), `defaults.REPLICA_SCRATCH_GIB` of scratch (logs, compile caches, the engine's
    own files, the config and tokenizer files a streamed model pulls) and its LoRA adapters' local volume
    (`blueprints.contracts.lora.adapters_volume_gib`, copied even when the weights stream)."""
    return math.ceil((0 if streamed else sum(weights_gib) * 1.1) + defaults.REPLICA_SCRATCH_GIB) + adapters_gib


def usable_disk_gib(disk_gib: float, *, reserve_gib: float) -> float:
    """What pods' ephemeral-storage requests can use of a node's kubelet filesystem of `disk_gib` GiB: the kubelet's
    hard eviction threshold (`nodefs.available<10%`) and kube-reserved ephemeral storage are kept free, and
    `reserve_gib` (the OS, pulled images: they share the filesystem but no pod requests them) is already used."""
    return max(0.0, disk_gib * (1 - defaults.EVICTION_NODEFS_FRACTION) - defaults.KUBE_RESERVED_EPHEMERAL_GIB
               - reserve_gib)


def disk_for_gib(pods_gib: float, *, reserve_gib: float) -> int:
    """The smallest filesystem, whole GiB, whose `usable_disk_gib` holds `pods_gib` of ephemeral requests."""
    return math.ceil((pods_gib + defaults.KUBE_RESERVED_EPHEMERAL_GIB + reserve_gib)
                     / (1 - defaults.EVICTION_NODEFS_FRACTION) - 1e-9)
