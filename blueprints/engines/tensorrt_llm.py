"""TensorRT-LLM (`trtllm-serve serve`, PyTorch backend: the default since 1.0, no engine build): its arguments and
options file from the catalog's facts (engines.yaml `tensorrt-llm`)."""

from __future__ import annotations

import pulumi
import yaml

from blueprints.catalog.engines import EngineFacts
from blueprints.contracts.sections import VllmEngine
from blueprints.contracts.weights import MODELS_MOUNT
from blueprints.engines.checks import local_weights_only

#: Where the options file (`--extra_llm_api_options`) is mounted in the server container.
OPTIONS_DIR = "/etc/trtllm"
OPTIONS_FILE = "extra-llm-api-options.yaml"


def args(engine: VllmEngine, facts: EngineFacts, model_name: str,
         model: pulumi.Input[str] | None = None) -> list[pulumi.Input[str]]:
    """The server's arguments: the local model path first (positional), every planned limit under trtllm-serve's
    own flag name, chunked prefill on (off by default; the capacity model plans it, as vLLM V1 runs it), the
    options file (`options_file`), the listen address every interface (its default is loopback) and the port."""
    local_weights_only(engine, facts, model)
    f = facts.flag
    out: list[pulumi.Input[str]] = [
        f"{MODELS_MOUNT}/{model_name}",
        f"{f('served_model_name')}={model_name}",
        f"{f('tensor_parallel_size')}={engine.tensor_parallel_size}",
        f"{f('gpu_memory_utilization')}={engine.gpu_memory_utilization}",
        f"{f('max_model_len')}={engine.max_model_len}",
        f"{f('max_num_seqs')}={engine.max_num_seqs}",
    ]
    if engine.max_num_batched_tokens is not None:
        out.append(f"{f('max_num_batched_tokens')}={engine.max_num_batched_tokens}")
    out += [f("chunked_prefill"), f"{facts.extra_flag('options_file')}={OPTIONS_DIR}/{OPTIONS_FILE}",
            f"{facts.host.flag}={facts.host.value}", f"{f('port')}={engine.port}"]
    return out


def options_file(engine: VllmEngine, facts: EngineFacts) -> dict[str, str]:
    """`{file name: YAML}` of the options file: the settings trtllm-serve takes no flag for (LlmArgs field names:
    `dtype`, `kv_cache_config.dtype`, `kv_cache_config.enable_block_reuse`) and the metrics switches
    (`metrics.enable_config`: Prometheus text at /prometheus/metrics and the iteration gauges KEDA scales on)."""
    options: dict = {"dtype": facts.value("dtype", engine.dtype),
                     "kv_cache_config": {"dtype": facts.value("kv_cache_dtype", engine.kv_cache_dtype),
                                         "enable_block_reuse": True},
                     **(facts.metrics.enable_config or {})}
    return {OPTIONS_FILE: yaml.safe_dump(options, sort_keys=True)}
