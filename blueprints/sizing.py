"""Capacity model: LLM serving on vLLM (memory, step time, the queue-aware replica simulation) and non-generative
models (Triton, ONNX Runtime, SageMaker).

The LLM model lives in `blueprints.capacity` (physics, scheduler simulation, analytic screen, calibration); this
module keeps the names the rest of the planner imports, and the one-pass models of non-generative serving.
"""

from __future__ import annotations

from blueprints import defaults
from blueprints.capacity.analytic import LlmEstimate, estimate_closed_loop
from blueprints.capacity.physics import (
    EngineProfile,
    compute_tflops,
    kv_bytes_per_token,
    replica_model,
    tensor_parallel_problems,
    weights_gib,
)
from blueprints.catalog import Architecture, Gpu
from blueprints.requirements import Precision, Quantization

__all__ = ["LlmEstimate", "compute_tflops", "estimate_llm", "kv_bytes_per_token", "tensor_parallel_problems",
           "weights_gib", "encoder_gflops_per_request", "gpu_batch_ms", "cpu_request_ms", "gflops_from_gpu_latency",
           "gflops_from_cpu_latency"]

GIB = 1024**3


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
    max_num_seqs: int | None = None,
    quantization: Quantization | None = None,
    max_num_batched_tokens: int | None = None,
    engine: EngineProfile | None = None,
) -> LlmEstimate:
    """Mean-value prediction of memory fit, KV capacity, TTFT, ITL and throughput of one vLLM replica in a closed
    loop at `concurrency` (`blueprints.capacity.analytic`; the simulation gives distributions).

    Args:
        arch: model shape (catalog or explicit).
        gpu: GPU record.
        precision: weight precision.
        tensor_parallel_size: GPUs per replica.
        concurrency: sequences in flight (>= 1).
        input_tokens, output_tokens: mean per request, tokens.
        max_model_len: longest sequence that must fit, tokens. Defaults to input + output.
        kv_cache_fp8: FP8 KV cache (`--kv-cache-dtype fp8`).
        gpu_memory_utilization: fraction of each GPU's memory vLLM may use.
        max_num_seqs: cap on running sequences (and on `max_concurrency`). Defaults to none: `max_concurrency` is
            then what the KV cache holds, as in `blueprint estimate`.
        quantization: quantisation method; defaults to the one `precision` implies.
        max_num_batched_tokens: step token budget; vLLM's default for the GPU when omitted.
        engine: engine profile; the pinned vLLM when omitted.

    Returns:
        An `LlmEstimate`. Latency is computed even when it does not fit (for what-if comparisons).
    """
    model = replica_model(arch, gpu, precision=precision, tensor_parallel_size=tensor_parallel_size,
                          quantization=quantization, kv_cache_fp8=kv_cache_fp8,
                          gpu_memory_utilization=gpu_memory_utilization, engine=engine)
    return estimate_closed_loop(model, gpu, concurrency=concurrency, input_tokens=input_tokens,
                                output_tokens=output_tokens, max_model_len=max_model_len, max_num_seqs=max_num_seqs,
                                max_num_batched_tokens=max_num_batched_tokens)


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
