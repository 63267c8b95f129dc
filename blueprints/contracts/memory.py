"""What a model takes in GPU memory: its weights at a precision, its KV cache per token, the KV cache tokens a
replica holds, and whether tensor parallelism can shard it. Pure functions of catalog records: stack configs are
checked with them and the capacity model builds on them.
"""

from __future__ import annotations

from blueprints.core import defaults
from blueprints.catalog import Architecture, Gpu
from blueprints.requirements.model import Precision


GIB = 1024**3


def _embedding_bytes_per_param(precision: Precision) -> float:
    """Embeddings and lm_head stay at the checkpoint's 16-bit dtype in quantised checkpoints (FP32 stays FP32)."""
    return precision.bytes_per_param if precision.bytes_per_param >= 2 else 2.0


def weights_bytes(arch: Architecture, precision: Precision) -> float:
    """Weight memory at `precision`, bytes: quantised linear layers plus 16-bit embeddings (when `vocab_size` is
    known; otherwise every parameter at `precision`)."""
    emb = arch.embedding_params_b * 1e9
    return (arch.params_b * 1e9 - emb) * precision.bytes_per_param + emb * _embedding_bytes_per_param(precision)


def weights_gib(arch: Architecture, precision: Precision) -> float:
    """Weight memory at `precision`, GiB (see `weights_bytes`)."""
    return weights_bytes(arch, precision) / GIB


def kv_bytes_per_token(arch: Architecture, *, kv_cache_fp8: bool = False, precision: Precision = Precision.BF16) -> int:
    """KV cache bytes per token across all layers: 2 (K,V) x layers x kv_heads x head_dim x bytes/element.

    Elements are 16-bit unless the KV cache is FP8 (1 byte) or the model is served at FP32 (4 bytes).
    Example: Llama-3.1-8B at BF16 -> 131072 (128 KiB); with an FP8 KV cache -> 65536.
    """
    element = 1 if kv_cache_fp8 else (4 if precision is Precision.FP32 else 2)
    return 2 * arch.layers * arch.kv_heads * arch.head_dim * element


def kv_cache_tokens(arch: Architecture, gpu: Gpu, *, precision: Precision, tensor_parallel_size: int,
                    kv_cache_fp8: bool = False, gpu_memory_utilization: float = defaults.GPU_MEMORY_UTILIZATION) -> int:
    """Tokens of KV cache one replica holds: its GPUs' memory x utilisation, less the per-GPU activation overhead and
    the weights, over the KV bytes per token (0 when the weights do not fit)."""
    usable_gib = tensor_parallel_size * (gpu.memory_gib * gpu_memory_utilization - defaults.ACTIVATION_OVERHEAD_GIB_PER_GPU)
    kv = kv_bytes_per_token(arch, kv_cache_fp8=kv_cache_fp8, precision=precision)
    return max(0, int((usable_gib - weights_gib(arch, precision)) * GIB // kv))


def tensor_parallel_problems(arch: Architecture, tensor_parallel_size: int) -> list[str]:
    """Why vLLM cannot shard this model `tensor_parallel_size` ways (empty when it can).

    vLLM splits attention heads evenly across ranks (`num_attention_heads % tensor_parallel_size == 0`,
    vllm/config.py `verify_with_parallel_config`), and NCCL all-reduce within one node is planned for powers of two.
    """
    tp = tensor_parallel_size
    problems = []
    if tp < 1 or tp & (tp - 1):
        problems.append(f"tensor_parallel_size={tp} must be a power of two (1, 2, 4, 8)")
    elif arch.attention_heads % tp:
        problems.append(f"tensor_parallel_size={tp} must divide the model's {arch.attention_heads} attention heads")
    return problems
