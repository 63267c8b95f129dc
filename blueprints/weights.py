"""Weights on disk: the local volume a model needs, and which files of a Hugging Face repository a server loads.

Shared by the planner (system-node scratch space for sync Jobs, node disk checks) and the components (emptyDir size
limits, the sync Job's download filters), so both size the same thing the same way.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from blueprints import defaults

#: Files a Hugging Face download keeps: safetensors weights and their index, configs, tokenizer and chat template
#: files. Meta's repositories also ship `original/*.pth` (a second full copy of the weights, for Meta's own code):
#: vLLM loads safetensors, so that folder is never downloaded (Llama-3.1-8B: ~16 GB more).
#: Source: `hf download --help` (huggingface_hub >= 0.34: `--include`/`--exclude` glob patterns); vLLM loads
#: `*.safetensors` when present (vllm/model_executor/model_loader/default_loader.py, `_prepare_weights`).
HF_INCLUDE_PATTERNS = ("*.safetensors", "*.safetensors.index.json", "*.json", "*.model", "*.tiktoken", "*.txt",
                       "*.jinja")
HF_EXCLUDE_PATTERNS = ("original/*",)


def weights_volume_gib(weights_gib: Iterable[float]) -> float:
    """Local disk for models' weights, GiB: +10 % and 2 GiB for tokenizer/config files and filesystem overhead."""
    return sum(weights_gib) * 1.1 + 2


def replica_ephemeral_gib(weights_gib: Iterable[float]) -> int:
    """Ephemeral storage one serving replica requests, GiB (rounded up): its models' weights +10 % and
    `defaults.REPLICA_SCRATCH_GIB` of scratch (logs, compile caches, the engine's own files)."""
    return math.ceil(sum(weights_gib) * 1.1 + defaults.REPLICA_SCRATCH_GIB)


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
