"""SGLang (`python3 -m sglang.launch_server`): its arguments from the catalog's flags (engines.yaml `sglang`)."""

from __future__ import annotations

import pulumi

from blueprints.catalog.engines import EngineFacts
from blueprints.contracts.sections import VllmEngine
from blueprints.contracts.weights import MODELS_MOUNT
from blueprints.engines.checks import local_weights_only


def args(engine: VllmEngine, facts: EngineFacts, model_name: str,
         model: pulumi.Input[str] | None = None) -> list[pulumi.Input[str]]:
    """The server's arguments: the local model path, every planned limit under SGLang's own flag name, the listen
    address every interface (its default is loopback: the kubelet's probes target the pod IP), Prometheus metrics
    on, and the API key from the environment (`$(VAR)`: the kubelet expands it from the container's env)."""
    local_weights_only(engine, facts, model)
    f = facts.flag
    out: list[pulumi.Input[str]] = [
        f"{facts.model_flag}={MODELS_MOUNT}/{model_name}",
        f"{f('served_model_name')}={model_name}",
        f"{f('tensor_parallel_size')}={engine.tensor_parallel_size}",
        f"{f('gpu_memory_utilization')}={engine.gpu_memory_utilization}",
        f"{f('max_model_len')}={engine.max_model_len}",
        f"{f('max_num_seqs')}={engine.max_num_seqs}",
        f"{f('dtype')}={facts.value('dtype', engine.dtype)}",
        f"{f('kv_cache_dtype')}={facts.value('kv_cache_dtype', engine.kv_cache_dtype)}",
        f"{facts.host.flag}={facts.host.value}",
        f"{f('port')}={engine.port}",
    ]
    if engine.max_num_batched_tokens is not None:
        out.append(f"{f('max_num_batched_tokens')}={engine.max_num_batched_tokens}")
    if engine.quantization:
        out.append(f"{f('quantization')}={facts.value('quantization', engine.quantization)}")
    if facts.metrics.enable_flag:
        out.append(facts.metrics.enable_flag)
    if facts.api_key is not None and facts.api_key.flag and facts.api_key.env:
        out.append(f"{facts.api_key.flag}=$({facts.api_key.env})")
    return out
