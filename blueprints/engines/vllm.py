"""vLLM 0.24.0 (`vllm serve`): its arguments, each a documented engine flag of the pinned release."""

from __future__ import annotations

import json

import pulumi

from blueprints.catalog.engines import EngineFacts
from blueprints.catalog.startup import load_startup_catalog
from blueprints.contracts.lora import lora_args
from blueprints.contracts.sections import VllmEngine
from blueprints.contracts.weights import MODELS_MOUNT


def streamer_args() -> list[str]:
    """The Run:ai Model Streamer flags of the pinned v0.24.0: `--load-format=runai_streamer` (vllm/config/load.py:46,
    CLI vllm/engine/arg_utils.py:886) and `--model-loader-extra-config` (arg_utils.py:900) with the keys its loader
    accepts, positive integers (model_loader/runai_streamer_loader.py:34-65): reader threads and the CPU buffer per
    rank, from `blueprints/catalog/startup.yaml` weights.streamer."""
    streamer = load_startup_catalog().weights.streamer
    extra = {"concurrency": streamer.concurrency, "memory_limit": streamer.memory_limit_bytes}
    return ["--load-format=runai_streamer", f"--model-loader-extra-config={json.dumps(extra, sort_keys=True)}"]


def args(engine: VllmEngine, facts: EngineFacts, model_name: str,
         model: pulumi.Input[str] | None = None) -> list[pulumi.Input[str]]:
    """The `vllm serve` arguments: each one a documented engine flag of the pinned v0.24.0 (vllm/engine/arg_utils.py
    EngineArgs fields: served_model_name :420, dtype :439, kv_cache_dtype :440, max_model_len :442,
    tensor_parallel_size :470, gpu_memory_utilization :523, max_num_batched_tokens :525, max_num_seqs :529,
    quantization :540; entrypoints/openai/cli_args.py: port :230, disable_fastapi_docs :291); the LoRA flags of
    `engine.lora` last (`blueprints.contracts.lora.lora_args`, sources in blueprints/catalog/lora.yaml).

    Args:
        engine: the planned engine settings.
        facts: vLLM's catalog entry (the flags are the literals below, read at the pinned version).
        model_name: the served model name.
        model: an `s3://` store prefix the weights stream from (`streamer_args` follow); the local copy under
            `MODELS_MOUNT` when omitted.
    """
    args: list[pulumi.Input[str]] = [
        model if model is not None else f"{MODELS_MOUNT}/{model_name}",
        f"--served-model-name={model_name}",
        f"--tensor-parallel-size={engine.tensor_parallel_size}",
        f"--gpu-memory-utilization={engine.gpu_memory_utilization}",
        f"--max-model-len={engine.max_model_len}",
        f"--max-num-seqs={engine.max_num_seqs}",
        f"--dtype={engine.dtype}",
        f"--kv-cache-dtype={engine.kv_cache_dtype}",
        f"--port={engine.port}",
        # No /docs, /redoc, /openapi.json (cli_args.py `--disable-fastapi-docs`); the proxy would not pass them anyway.
        "--disable-fastapi-docs",
    ]
    if engine.max_num_batched_tokens is not None:
        args.append(f"--max-num-batched-tokens={engine.max_num_batched_tokens}")
    if engine.quantization:
        args.append(f"--quantization={engine.quantization}")
    if model is not None:
        args += streamer_args()
    if engine.enable_prefix_caching:  # explicit although 0.24.0 defaults it on (arg_utils.py:1158, config/cache.py:92)
        args.append("--enable-prefix-caching")
    if engine.lora is not None:
        args += lora_args(engine.lora)
    return args
