"""Weights on disk: the local volume a model needs, and which files of a Hugging Face repository a server loads.

Shared by the planner (system-node scratch space for sync Jobs, node disk checks) and the components (emptyDir size
limits, the sync Job's download filters), so both size the same thing the same way.
"""

from __future__ import annotations

from collections.abc import Iterable

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
