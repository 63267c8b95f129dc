"""What a model takes in GPU memory: its weights at a precision, its KV cache per token, the KV cache tokens a
replica holds, and whether tensor parallelism can shard it. Pure functions of catalog records: stack configs are
checked with them and the capacity model builds on them.
"""

from __future__ import annotations

from dataclasses import dataclass

from blueprints.core import defaults
from blueprints.catalog.lora import load_lora_catalog
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


def engine_memory_share(engine: str, flag: float, gpu: Gpu, *, weights_gib_per_gpu: float) -> float:
    """The share of each GPU's memory (vLLM's `gpu_memory_utilization` sense) an engine's memory flag value gives
    weights and KV cache: the value itself for vLLM and SGLang (`--mem-fraction-static`), (weights + flag x the
    rest) / memory for TensorRT-LLM's `--kv_cache_free_gpu_memory_fraction` (the KV cache's share of what the weights
    leave). `engine`: an engines.yaml name."""
    if engine != "tensorrt-llm":
        return flag
    free = max(0.0, gpu.memory_gib - weights_gib_per_gpu)
    return round(min(0.98, (weights_gib_per_gpu + flag * free) / gpu.memory_gib), 3)


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


@dataclass(frozen=True)
class LoraSlots:
    """The GPU slots vLLM allocates for LoRA adapters: `--max-loras` slots of `--max-lora-rank` each."""

    max_loras: int
    max_lora_rank: int


def lora_elements_per_rank(arch: Architecture, tensor_parallel_size: int) -> int:
    """Elements of ONE LoRA slot per unit of rank on one GPU (so bytes = this x rank x dtype bytes).

    vLLM 0.24.0 wraps every supported linear module (lora/model_manager.py:395-470) and gives each, per slot,
    `lora_a` of (rank x input) and `lora_b` of (output x rank) per slice (lora/layers/base_linear.py:100-150,
    column_parallel_linear.py:207-246): column-parallel layers keep the whole input and shard the output by TP,
    row-parallel layers shard the input and keep the whole output (`fully_sharded_loras` off). Per decoder layer
    (h hidden, q = heads x head_dim, kv = kv_heads x head_dim, I intermediate): qkv_proj 3h + (q + 2kv)/TP, o_proj
    q/TP + h, gate_up_proj 2h + 2I/TP, down_proj I/TP + h; plus lm_head (logits_processor.py:93-110: h + vocab)
    and embed_tokens (vocal_parallel_embedding.py: vocab + h) when `vocab_size` is known, counted whole (an upper
    bound). Example: Llama-3.1-8B at TP 1: 81,920 per layer x 32 + 2 x 132,352 = 2,886,144.

    Raises:
        ValueError: the architecture has no `intermediate_size` or is a mixture of experts (its expert LoRA layout
            is not counted here).
    """
    if arch.intermediate_size is None or arch.experts:
        raise ValueError("LoRA slot memory needs a dense architecture with intermediate_size")
    tp, h = tensor_parallel_size, arch.hidden_size
    q, kv, inter = arch.attention_heads * arch.head_dim, arch.kv_heads * arch.head_dim, arch.intermediate_size
    per_layer = (3 * h + (q + 2 * kv) // tp) + (q // tp + h) + (2 * h + 2 * inter // tp) + (inter // tp + h)
    vocab = 2 * (h + arch.vocab_size) if arch.vocab_size else 0
    return arch.layers * per_layer + vocab


def lora_bytes_per_gpu(arch: Architecture, slots: LoraSlots, *, precision: Precision, tensor_parallel_size: int) -> float:
    """GPU memory LoRA takes on each GPU of a replica, bytes: the slot buffers (`max_loras` x `max_lora_rank` x
    `lora_elements_per_rank` x the LoRA dtype, "auto" = the model's 16-bit dtype, 4 bytes at FP32; config/lora.py:46,
    128-131) plus the CUDA graphs captured again with adapters (`lora.yaml` cuda_graph_extra_gib_per_gpu).

    Example: Llama-3.1-8B, TP 1, 2 slots of rank 16 at BF16: 2 x 16 x 2,886,144 x 2 = 184.7 MB + 0.76 GiB."""
    element = 4 if precision is Precision.FP32 else 2
    buffers = slots.max_loras * slots.max_lora_rank * lora_elements_per_rank(arch, tensor_parallel_size) * element
    return buffers + load_lora_catalog().cuda_graph_extra_gib_per_gpu * GIB


def kv_cache_tokens(arch: Architecture, gpu: Gpu, *, precision: Precision, tensor_parallel_size: int,
                    kv_cache_fp8: bool = False, gpu_memory_utilization: float = defaults.GPU_MEMORY_UTILIZATION,
                    lora: LoraSlots | None = None) -> int:
    """Tokens of KV cache one replica holds: its GPUs' memory x utilisation, less the per-GPU activation overhead,
    the LoRA slots (`lora_bytes_per_gpu`, when adapters are served) and the weights, over the KV bytes per token (0
    when the weights do not fit)."""
    per_gpu_gib = gpu.memory_gib * gpu_memory_utilization - defaults.ACTIVATION_OVERHEAD_GIB_PER_GPU
    if lora is not None:
        per_gpu_gib -= lora_bytes_per_gpu(arch, lora, precision=precision,
                                          tensor_parallel_size=tensor_parallel_size) / GIB
    usable_gib = tensor_parallel_size * per_gpu_gib
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
