"""TensorRT-LLM (`trtllm-serve`, PyTorch backend, no engine build): its arguments from the catalog's flags
(engines.yaml `tensorrt-llm`)."""

from __future__ import annotations

import pulumi

from blueprints.catalog.engines import EngineFacts
from blueprints.contracts.sections import VllmEngine
from blueprints.contracts.weights import MODELS_MOUNT


def args(engine: VllmEngine, facts: EngineFacts, model_name: str,
         model: pulumi.Input[str] | None = None) -> list[pulumi.Input[str]]:
    """The server's arguments: the local model path first (positional), every planned limit under trtllm-serve's
    own flag name, the listen address every interface (its default is loopback) and the port."""
    if model is not None:
        raise ValueError("trtllm-serve reads the weights from local disk here (engines.yaml features.weights)")
    if engine.lora is not None:
        raise ValueError("LoRA adapters are planned on vLLM only (engines.yaml features.lora)")
    f = facts.flag
    out: list[pulumi.Input[str]] = [f"{MODELS_MOUNT}/{model_name}"]
    for setting, value in (("backend", None), ("served_model_name", model_name),
                           ("tensor_parallel_size", engine.tensor_parallel_size),
                           ("gpu_memory_utilization", engine.gpu_memory_utilization),
                           ("max_model_len", engine.max_model_len), ("max_num_seqs", engine.max_num_seqs),
                           ("max_num_batched_tokens", engine.max_num_batched_tokens)):
        s = facts.settings.get(setting)
        if s is None or s.flag is None or (value is None and setting != "backend"):
            continue
        out.append(f"{s.flag}={value if value is not None else facts.value(setting, 'pytorch')}")
    out += [f"{facts.host.flag}={facts.host.value}", f"{f('port')}={engine.port}"]
    return out
