"""Capacity model for LLM serving on vLLM: memory fit, KV cache, and roofline latency.

Pure functions of catalog records; no I/O. Formulas from ../shared/reference/sizing-facts.md:
- weights bytes = params x bytes/param; KV bytes/token = 2 x layers x kv_heads x head_dim x bytes/element.
- A decode step is the slower of streaming the weights at MBU x bandwidth (+ KV reads at paged-attention
  efficiency) and its FLOPs at MFU x dense TFLOPS, plus host-side time per running sequence. Prefill of arriving requests joins decode steps (chunked prefill), so its FLOPs are amortised into
  the step: memory-bound decode and compute-bound prefill overlap instead of adding.
- TTFT = server overhead + the step that carries the new request's prefill.
"""

from __future__ import annotations

from dataclasses import dataclass

from blueprints import defaults
from blueprints.catalog import Architecture, Gpu
from blueprints.requirements import Precision

GIB = 1024**3


def weights_gib(arch: Architecture, precision: Precision) -> float:
    """Weight memory at `precision`, GiB (params x bytes/param)."""
    return arch.params_b * 1e9 * precision.bytes_per_param / GIB


def kv_bytes_per_token(arch: Architecture, *, kv_cache_fp8: bool = False, precision: Precision = Precision.BF16) -> int:
    """KV cache bytes per token across all layers: 2 (K,V) x layers x kv_heads x head_dim x bytes/element.

    Elements are 16-bit unless the KV cache is FP8 (1 byte) or the model is served at FP32 (4 bytes).
    Example: Llama-3.1-8B at BF16 -> 131072 (128 KiB).
    """
    element = 1 if kv_cache_fp8 else (4 if precision is Precision.FP32 else 2)
    return 2 * arch.layers * arch.kv_heads * arch.head_dim * element


def compute_tflops(gpu: Gpu, precision: Precision) -> float:
    """Dense TFLOPS a GPU gives this precision: FP8 tensor cores when both sides have them, else 16-bit.

    INT8/INT4 here are weight-only schemes (AWQ/GPTQ) that compute in 16-bit.
    """
    if precision is Precision.FP8 and gpu.tflops_fp8:
        return gpu.tflops_fp8
    return gpu.tflops_16bit


def mbu(precision: Precision, tensor_parallel_size: int) -> float:
    """Memory-bandwidth utilisation in decode (see `defaults.MBU_*` for the sources)."""
    if tensor_parallel_size >= 2 or precision.bytes_per_param < 2:
        return defaults.MBU_PARALLEL_OR_QUANTISED
    return defaults.MBU_SINGLE_GPU_16BIT


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


@dataclass(frozen=True)
class LlmEstimate:
    """Prediction for one replica (`tensor_parallel_size` GPUs) at a fixed concurrency.

    Attributes:
        fits: weights plus one `max_model_len` sequence of KV cache fit in the usable memory.
        weights_gib: weight memory, GiB (whole model, all ranks).
        kv_cache_tokens: tokens of KV cache the replica holds after weights and overhead.
        max_concurrency: sequences of mean length (input + output) that fit at once, capped by max_num_seqs.
        ttft_ms: time to first token at this concurrency, ms (model value, not p95).
        itl_ms: inter-token latency at this concurrency, ms (model value, not p95).
        output_tokens_per_s: generated tokens/s of the replica at this concurrency, TTFT included.
        requests_per_s: completed requests/s at this concurrency (Little's law).
    """

    fits: bool
    weights_gib: float
    kv_cache_tokens: int
    max_concurrency: int
    ttft_ms: float
    itl_ms: float
    output_tokens_per_s: float
    requests_per_s: float

    def holds(self, concurrency: int) -> bool:
        """The replica fits in memory and keeps `concurrency` sequences of mean length without preemption."""
        return self.fits and concurrency <= self.max_concurrency


def estimate_llm(
    arch: Architecture,
    gpu: Gpu,
    *,
    precision: Precision,
    tensor_parallel_size: int,
    concurrency: int,
    input_tokens: int,
    output_tokens: int,
    max_model_len: int | None = None,
    kv_cache_fp8: bool = False,
    gpu_memory_utilization: float = defaults.GPU_MEMORY_UTILIZATION,
    max_num_seqs: int = defaults.MAX_NUM_SEQS_CAP,
) -> LlmEstimate:
    """Predict memory fit, KV capacity, TTFT, ITL and throughput of one vLLM replica.

    Args:
        arch: model shape (catalog or explicit).
        gpu: GPU record.
        precision: weight precision.
        tensor_parallel_size: GPUs per replica.
        concurrency: sequences decoding at once (>= 1).
        input_tokens, output_tokens: mean per request, tokens.
        max_model_len: longest sequence that must fit, tokens. Defaults to input + output.
        kv_cache_fp8: FP8 KV cache (`--kv-cache-dtype fp8`).
        gpu_memory_utilization: fraction of each GPU's memory vLLM may use.
        max_num_seqs: cap on concurrent sequences.

    Returns:
        An `LlmEstimate`. Latency is computed even when it does not fit (for what-if comparisons).
    """
    tp = tensor_parallel_size
    w_gib = weights_gib(arch, precision)
    kv_tok = kv_bytes_per_token(arch, kv_cache_fp8=kv_cache_fp8, precision=precision)
    usable_gib = tp * (gpu.memory_gib * gpu_memory_utilization - defaults.ACTIVATION_OVERHEAD_GIB_PER_GPU)
    kv_tokens = max(0, int((usable_gib - w_gib) * GIB // kv_tok))
    need_len = max_model_len or (input_tokens + output_tokens)
    fits = kv_tokens >= need_len
    max_conc = min(max_num_seqs, kv_tokens // (input_tokens + output_tokens))

    raw_bandwidth = tp * gpu.bandwidth_gb_per_s * 1e9  # bytes/s, whole replica
    weight_bandwidth = raw_bandwidth * mbu(precision, tp)
    kv_bandwidth = raw_bandwidth * defaults.KV_READ_BANDWIDTH_EFFICIENCY
    flops = tp * compute_tflops(gpu, precision) * 1e12 * defaults.MFU  # FLOP/s, whole replica
    weight_bytes = arch.params_b * 1e9 * precision.bytes_per_param
    context_bytes = (input_tokens + output_tokens / 2) * kv_tok  # KV one running sequence reads per step
    active = arch.active_b * 1e9

    def step_s(running: int, prefill_tokens: float) -> float:
        memory = weight_bytes / weight_bandwidth + running * context_bytes / kv_bandwidth
        attention = 2 * arch.layers * arch.hidden_size * prefill_tokens * input_tokens  # causal QK^T and AV
        compute = (2 * active * (running + prefill_tokens) + attention) / flops
        return max(memory, compute) + running * defaults.PER_SEQUENCE_STEP_MS / 1e3

    # Each request's prefill is spread over its output_tokens decode steps (chunked prefill).
    itl_s = step_s(concurrency, concurrency * input_tokens / output_tokens)
    ttft_s = defaults.SERVER_OVERHEAD_MS / 1e3 + step_s(concurrency - 1, input_tokens)
    request_s = ttft_s + output_tokens * itl_s
    return LlmEstimate(
        fits=fits,
        weights_gib=round(w_gib, 2),
        kv_cache_tokens=kv_tokens,
        max_concurrency=max_conc,
        ttft_ms=round(ttft_s * 1e3, 2),
        itl_ms=round(itl_s * 1e3, 2),
        output_tokens_per_s=round(concurrency * output_tokens / request_s, 3),
        requests_per_s=round(concurrency / request_s, 3),
    )


# --- Non-generative models (Triton, ONNX Runtime, SageMaker) ---------------------------------------------------------
# One forward pass per request. Compute per request is either the catalog's FLOPs (2 x non-embedding params x tokens
# plus attention for encoders; `gflops_per_request` for vision) or derived from a measured latency. A GPU runs batches
# at ENCODER_MFU x dense TFLOPS, never faster than streaming the weights once; a CPU runs one request at a time with
# intra-op threads = its vCPUs at the catalog's effective GFLOP/s per vCPU.


def encoder_gflops_per_request(arch: Architecture, *, tokens: int) -> float:
    """Forward-pass compute of one request of `tokens` tokens through a transformer encoder, GFLOP.

    2 x non-embedding params x tokens (matmuls) + 4 x layers x hidden x tokens^2 (QK^T and AV). Non-embedding params
    are min(params, 12 x layers x hidden^2) (Kaplan et al. 2020, "Scaling Laws", N ~= 12 n_layer d_model^2): the
    embedding table of a 250k-vocabulary reranker is looked up, not multiplied.
    Example: bge-large-en-v1.5 at 256 tokens -> 2 x 0.302e9 x 256 + 4 x 24 x 1024 x 256^2 = ~161 GFLOP.
    """
    dense = min(arch.params_b * 1e9, 12 * arch.layers * arch.hidden_size**2)
    return (2 * dense * tokens + 4 * arch.layers * arch.hidden_size * tokens**2) / 1e9


def gpu_batch_ms(gflops_per_request: float, *, batch_size: int, weights_gib: float, gpu: Gpu,
                 precision: Precision) -> float:
    """Time for one GPU to run a batch of `batch_size` requests, ms: server overhead + the slower of the batch's FLOPs
    at `ENCODER_MFU` x dense TFLOPS and one read of the weights at the single-GPU MBU."""
    compute_s = batch_size * gflops_per_request * 1e9 / (compute_tflops(gpu, precision) * 1e12 * defaults.ENCODER_MFU)
    memory_s = weights_gib * GIB / (gpu.bandwidth_gb_per_s * 1e9 * defaults.MBU_SINGLE_GPU_16BIT)
    return defaults.TRITON_REQUEST_OVERHEAD_MS + max(compute_s, memory_s) * 1e3


def cpu_request_ms(gflops_per_request: float, *, vcpus: int, gflops_per_vcpu: float) -> float:
    """Time for ONNX Runtime with `vcpus` intra-op threads to run one request, ms (overhead + FLOPs / throughput)."""
    return defaults.ONNXRUNTIME_REQUEST_OVERHEAD_MS + gflops_per_request / (vcpus * gflops_per_vcpu) * 1e3


def gflops_from_gpu_latency(latency_ms: float, *, weights_gib: float, gpu: Gpu, precision: Precision) -> float:
    """Invert `gpu_batch_ms` at batch 1: the compute per request a measured GPU latency implies, GFLOP.

    A latency at or below the overhead + weight-read floor means the pass is memory bound; the compute is then the
    most that hides under that floor.
    """
    floor_ms = gpu_batch_ms(0.0, batch_size=1, weights_gib=weights_gib, gpu=gpu, precision=precision)
    busy_ms = max(latency_ms, floor_ms) - defaults.TRITON_REQUEST_OVERHEAD_MS
    return busy_ms / 1e3 * compute_tflops(gpu, precision) * 1e3 * defaults.ENCODER_MFU


def gflops_from_cpu_latency(latency_ms: float, *, vcpus: int, gflops_per_vcpu: float) -> float:
    """Invert `cpu_request_ms`: the compute per request a measured CPU latency implies, GFLOP (>= 0.001)."""
    busy_ms = max(latency_ms - defaults.ONNXRUNTIME_REQUEST_OVERHEAD_MS, 0.001)
    return busy_ms / 1e3 * vcpus * gflops_per_vcpu
