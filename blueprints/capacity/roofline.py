"""The roofline step time: GPU kernel time of one vLLM engine step from bandwidth and FLOPs, for the GPUs, weight
formats and model shapes the measured tables (`blueprints.capacity.measured`) do not cover.

Pure functions of catalog records; no I/O. One step's kernel time is

    kernel = max(weight and KV reads, FLOPs) + tensor-parallel all-reduces

- Weight reads: every non-expert weight once per step, at MBU x the kernel family's bandwidth factor (16-bit, AWQ,
  GPTQ 4/8-bit, FP8, W8A8); the embedding table is looked up, not streamed, and stays 16-bit (as does an untied
  lm_head) in quantised checkpoints. A mixture-of-experts layer reads only the experts its tokens route to: with
  T tokens each picking k of E experts, E x (1 - (1 - k/E)^T) distinct experts on average.
- KV reads: each decoding sequence's context at KV_READ_BANDWIDTH_EFFICIENCY of bandwidth.
- FLOPs: 2 x active parameters per token (expert GEMMs at MOE_GEMM_EFFICIENCY, weight-only kernels at
  QUANTIZED_PREFILL_FACTOR), the lm_head for sampled tokens, and attention 4 x layers x heads x head_dim per
  (query, context) token pair, at the GPU's prefill MFU x dense tensor TFLOPS (FP8 tensor cores for FP8 weights).
- All-reduces: 2 per layer, each 2 x log2(TP) link latencies plus its activations over the NVLink or PCIe link.
The engine's own per-step time is added by `blueprints.capacity.physics.ReplicaModel`. Sources of every constant:
`blueprints.core.defaults` (capacity model section) and `catalog/gpus.yaml`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from blueprints.core import defaults
from blueprints.catalog import Architecture, Gpu
from blueprints.contracts.memory import _embedding_bytes_per_param, kv_bytes_per_token
from blueprints.requirements.model import DEFAULT_QUANTIZATION, Precision, Quantization


def kernel_family(precision: Precision, quantization: Quantization | None) -> str:
    """The `defaults.WEIGHT_BANDWIDTH_FACTOR` key of these weights: `none` (16/32-bit), `awq`, `gptq-int4`,
    `gptq-int8`, `fp8` or `w8a8`."""
    method = quantization or DEFAULT_QUANTIZATION.get(precision)
    if method is None:
        return "none"
    if method is Quantization.GPTQ:
        return "gptq-int4" if precision is Precision.INT4 else "gptq-int8"
    return method.value


def compute_tflops(gpu: Gpu, precision: Precision) -> float:
    """Dense TFLOPS a GPU gives this precision: FP8 tensor cores when both sides have them, else 16-bit.

    INT8/INT4 here are weight-only schemes (AWQ/GPTQ) that compute in 16-bit.
    """
    if precision is Precision.FP8 and gpu.tflops_fp8:
        return gpu.tflops_fp8
    return gpu.tflops_16bit


@dataclass(frozen=True)
class RooflineSteps:
    """Per-step coefficients of one replica's roofline (seconds, whole replica). Build with `roofline_steps()`."""

    dense_read_s: float
    expert_read_s: float
    experts: int
    experts_per_token: int
    kv_read_s_per_token: float
    dense_flop_s_per_token: float
    expert_flop_s_per_token: float
    lm_head_s_per_sample: float
    attention_s_per_pair: float
    allreduce_fixed_s: float
    allreduce_s_per_token: float

    def distinct_experts(self, tokens: int) -> float:
        """Expected distinct experts a layer reads when `tokens` tokens each pick `experts_per_token` of `experts`
        (uniform routing): E x (1 - (1 - k/E)^T)."""
        if not self.experts or tokens <= 0:
            return 0.0
        return self.experts * (1.0 - (1.0 - self.experts_per_token / self.experts) ** tokens)

    def kernel_s(self, decode: int, decode_context: float, prefill: int = 0, prefill_pairs: float = 0.0) -> float:
        """GPU kernel time of one step, s (arguments as `blueprints.capacity.physics.ReplicaModel.step_s`)."""
        tokens = decode + prefill
        memory = (self.dense_read_s + self.expert_read_s * self.distinct_experts(tokens)
                  + decode_context * self.kv_read_s_per_token)
        samples = decode + (1 if prefill else 0)
        compute = (tokens * (self.dense_flop_s_per_token + self.expert_flop_s_per_token)
                   + samples * self.lm_head_s_per_sample
                   + (decode_context + prefill_pairs) * self.attention_s_per_pair)
        allreduce = self.allreduce_fixed_s + tokens * self.allreduce_s_per_token if self.allreduce_fixed_s else 0.0
        return max(memory, compute) + allreduce


def roofline_steps(arch: Architecture, gpu: Gpu, *, precision: Precision, tensor_parallel_size: int,
                   quantization: Quantization | None = None, kv_cache_fp8: bool = False) -> RooflineSteps:
    """The roofline coefficients of one replica (`tensor_parallel_size` GPUs) of `arch` at `precision` on `gpu`."""
    tp = tensor_parallel_size
    family = kernel_family(precision, quantization)
    bandwidth = tp * gpu.bandwidth_gb_per_s * 1e9  # bytes/s, whole replica (ranks read their shards in parallel)
    mbu16 = defaults.MBU_SINGLE_GPU_16BIT
    mbu_q = mbu16 * defaults.WEIGHT_BANDWIDTH_FACTOR[family]
    bpp = precision.bytes_per_param
    emb_bpp = _embedding_bytes_per_param(precision)

    params = arch.params_b * 1e9
    lm_head = arch.vocab_size * arch.hidden_size if arch.vocab_size else 0.0  # untied or tied: streamed once a step
    embedding_only = arch.embedding_params_b * 1e9 - lm_head  # the untied input table: looked up, not streamed
    if arch.experts:
        shared = arch.shared_params_b * 1e9  # type: ignore[operator]
        expert_params = (params - shared) / arch.experts  # one expert, all layers
    else:
        shared, expert_params = params, 0.0
    dense_linear = shared - embedding_only - lm_head
    dense_read_s = dense_linear * bpp / (bandwidth * mbu_q) + lm_head * emb_bpp / (bandwidth * mbu16)
    expert_read_s = expert_params * bpp / (bandwidth * mbu_q)

    mfu = gpu.prefill_mfu or defaults.MFU
    fp8_native = precision is Precision.FP8 and gpu.supports_fp8
    prefill_factor = 1.0 if fp8_native else defaults.QUANTIZED_PREFILL_FACTOR[family]
    flops = tp * compute_tflops(gpu, precision) * 1e12 * mfu  # FLOP/s, whole replica
    linear_flops = flops * prefill_factor
    active_experts = expert_params * (arch.experts_per_token or 0)
    kv_tok = kv_bytes_per_token(arch, kv_cache_fp8=kv_cache_fp8, precision=precision)

    if tp > 1:
        hops = 2 * math.log2(tp)
        per_layer = defaults.ALLREDUCES_PER_LAYER * arch.layers
        link = gpu.interconnect_gb_per_s * 1e9
        hop_us = defaults.ALLREDUCE_HOP_US["nvlink"] * (defaults.ALLREDUCE_PCIE_OVER_NVLINK
                                                        if gpu.interconnect.value == "pcie" else 1.0)
        allreduce_fixed_s = per_layer * hops * hop_us / 1e6
        allreduce_s_per_token = per_layer * (hops / tp) * arch.hidden_size * 2 / link  # 16-bit activations
    else:
        allreduce_fixed_s = allreduce_s_per_token = 0.0
    return RooflineSteps(
        dense_read_s=dense_read_s,
        expert_read_s=expert_read_s,
        experts=arch.experts or 0,
        experts_per_token=arch.experts_per_token or 0,
        kv_read_s_per_token=kv_tok / (bandwidth * defaults.KV_READ_BANDWIDTH_EFFICIENCY),
        dense_flop_s_per_token=2 * dense_linear / linear_flops,
        expert_flop_s_per_token=2 * active_experts / (linear_flops * defaults.MOE_GEMM_EFFICIENCY),
        lm_head_s_per_sample=2 * lm_head / flops,
        attention_s_per_pair=4 * arch.layers * arch.attention_heads * arch.head_dim / flops,
        allreduce_fixed_s=allreduce_fixed_s,
        allreduce_s_per_token=allreduce_s_per_token,
    )
