"""The step-time and memory physics of one replica (blueprints/capacity/physics.py): what each term adds."""

from __future__ import annotations

import pytest

from blueprints.core import defaults
from blueprints.capacity.physics import kernel_family, replica_model
from blueprints.contracts.memory import kv_bytes_per_token, weights_gib
from blueprints.catalog import Interconnect
from blueprints.requirements.model import Precision, Quantization


def _model(catalog, model="llama-3.1-8b", gpu="h100", **kw):
    kw.setdefault("precision", Precision.BF16)
    kw.setdefault("tensor_parallel_size", 1)
    return replica_model(catalog.model(model).architecture, catalog.gpu(gpu), **kw)


def test_a_moe_decode_step_reads_only_the_experts_its_tokens_route_to(catalog):
    mixtral = _model(catalog, "mixtral-8x7b", "h200")
    assert mixtral.distinct_experts(1) == pytest.approx(2)  # top-2 of 8
    assert mixtral.distinct_experts(4) == pytest.approx(8 * (1 - 0.75**4))  # ~5.5
    assert mixtral.distinct_experts(64) == pytest.approx(8, abs=0.01)
    arch = catalog.model("mixtral-8x7b").architecture
    dense_equivalent = replica_model(arch.model_copy(update={"experts": None, "experts_per_token": None,
                                                             "shared_params_b": None}),
                                     catalog.gpu("h200"), precision=Precision.BF16, tensor_parallel_size=1)
    # batch 1 streams ~12.9 of the 46.7 B parameters; a large batch touches every expert.
    assert mixtral.gpu_s(1, 500) < 0.35 * dense_equivalent.gpu_s(1, 500)
    assert mixtral.gpu_s(64, 64 * 500) == pytest.approx(dense_equivalent.gpu_s(64, 64 * 500), rel=0.05)


def test_moe_prefill_runs_its_expert_gemms_below_dense_efficiency(catalog):
    arch = catalog.model("mixtral-8x7b").architecture
    moe = _model(catalog, "mixtral-8x7b", "h100", tensor_parallel_size=2)
    dense = replica_model(arch.model_copy(update={"experts": None, "experts_per_token": None, "shared_params_b": None,
                                                  "params_b": arch.active_b}),
                          catalog.gpu("h100"), precision=Precision.BF16, tensor_parallel_size=2)
    ratio = moe.gpu_s(0, 0, 4096, 4096**2 / 2) / dense.gpu_s(0, 0, 4096, 4096**2 / 2)
    assert 1.4 < ratio < 1.8  # experts are 11.3 of the 12.9 B active parameters, at MOE_GEMM_EFFICIENCY


def test_4_bit_awq_decodes_faster_than_16_bit_but_short_of_the_byte_ratio(catalog):
    bf16 = _model(catalog, "qwen2.5-7b", "a100-80gb")
    awq = _model(catalog, "qwen2.5-7b", "a100-80gb", precision=Precision.INT4, quantization=Quantization.AWQ)
    gptq = _model(catalog, "qwen2.5-7b", "a100-80gb", precision=Precision.INT4, quantization=Quantization.GPTQ)
    speedup = bf16.gpu_s(1, 100) / awq.gpu_s(1, 100)
    assert 1.8 < speedup < 3.56 * defaults.WEIGHT_BANDWIDTH_FACTOR["awq"]  # 2 / 0.5625 bytes, at the kernel's factor
    assert gptq.gpu_s(1, 100) > 1.3 * awq.gpu_s(1, 100)  # GPTQ 4-bit kernels are slower (Qwen2.5-72B GPTQ-Int4)


def test_quantised_checkpoints_keep_their_embeddings_at_16_bit(catalog):
    arch = catalog.model("llama-3.1-8b").architecture  # 2 x 128256 x 4096 = 1.05 B embedding parameters
    emb = 2 * 128256 * 4096
    expected = ((arch.params_b * 1e9 - emb) * 0.5625 + emb * 2) / 1024**3
    assert weights_gib(arch, Precision.INT4) == pytest.approx(expected)
    assert weights_gib(arch, Precision.BF16) == pytest.approx(arch.params_b * 1e9 * 2 / 1024**3)


def test_kernel_families_follow_the_quantization_method():
    assert kernel_family(Precision.BF16, None) == "none"
    assert kernel_family(Precision.INT4, None) == "awq"  # what int4 always meant
    assert kernel_family(Precision.INT4, Quantization.GPTQ) == "gptq-int4"
    assert kernel_family(Precision.INT8, None) == "gptq-int8"
    assert kernel_family(Precision.FP8, None) == "fp8"
    assert kernel_family(Precision.INT8, Quantization.W8A8) == "w8a8"


def test_tensor_parallel_all_reduces_cost_more_on_pcie_than_on_nvlink(catalog):
    arch = catalog.model("llama-3.1-70b").architecture
    pcie = catalog.gpu("l40s")
    nvlink = pcie.model_copy(update={"interconnect": Interconnect.NVLINK, "interconnect_gb_per_s": 450})
    on_pcie = replica_model(arch, pcie, precision=Precision.BF16, tensor_parallel_size=4)
    on_nvlink = replica_model(arch, nvlink, precision=Precision.BF16, tensor_parallel_size=4)
    assert on_pcie.gpu_s(1, 1000) > on_nvlink.gpu_s(1, 1000) + 5e-3  # 160 all-reduces of higher latency
    # Prefill all-reduces carry every token's activations: 2048 tokens x 8192 x 2 bytes over 32 vs 450 GB/s.
    assert on_pcie.gpu_s(0, 0, 2048, 2048**2 / 2) > 1.3 * on_nvlink.gpu_s(0, 0, 2048, 2048**2 / 2)
    single = replica_model(catalog.model("llama-3.1-8b").architecture, pcie, precision=Precision.BF16,
                           tensor_parallel_size=1)
    assert single.allreduce_fixed_s == 0 and single.allreduce_s_per_token == 0


def test_the_a10g_prefills_at_its_measured_efficiency_not_the_default(catalog):
    a10g = catalog.gpu("a10g")
    default = a10g.model_copy(update={"prefill_mfu": None})
    arch = catalog.model("llama-3.1-8b").architecture
    measured = replica_model(arch, a10g, precision=Precision.BF16, tensor_parallel_size=1)
    datasheet = replica_model(arch, default, precision=Precision.BF16, tensor_parallel_size=1)
    prompt = (0, 0, 478, 478**2 / 2)
    assert datasheet.gpu_s(*prompt) / measured.gpu_s(*prompt) == pytest.approx(0.74 / defaults.MFU, rel=0.05)


def test_per_sequence_host_time_grows_with_the_batch_past_the_gpu_step(catalog):
    model = _model(catalog, precision=Precision.FP16)
    assert model.step_s(1, 300) == pytest.approx(model.gpu_s(1, 300))  # the GPU is the bottleneck at batch 1
    assert model.step_s(64, 64 * 300) > 2 * model.gpu_s(64, 64 * 300)  # 64 x 0.7 ms of host work a step
    assert model.step_s(128, 128 * 300) > 1.9 * model.step_s(64, 64 * 300)


def test_an_fp8_kv_cache_halves_the_bytes_held_and_read(catalog):
    arch = catalog.model("llama-3.1-8b").architecture
    assert kv_bytes_per_token(arch) == 131072 and kv_bytes_per_token(arch, kv_cache_fp8=True) == 65536
    auto = _model(catalog, gpu="l40s")
    fp8 = _model(catalog, gpu="l40s", kv_cache_fp8=True)
    assert fp8.kv_cache_tokens == pytest.approx(2 * auto.kv_cache_tokens, abs=1)
    assert fp8.kv_read_s_per_token == pytest.approx(auto.kv_read_s_per_token / 2)


def test_estimate_llm_counts_what_an_fp8_kv_cache_holds_without_a_sequence_cap(catalog):
    from blueprints.capacity.sizing import estimate_llm

    arch, gpu = catalog.model("llama-3.1-8b").architecture, catalog.gpu("l40s")
    kw = dict(precision=Precision.BF16, tensor_parallel_size=1, concurrency=1, input_tokens=128, output_tokens=128)
    auto, fp8 = estimate_llm(arch, gpu, **kw), estimate_llm(arch, gpu, kv_cache_fp8=True, **kw)
    assert fp8.max_concurrency >= 1.8 * auto.max_concurrency > 1000
    assert estimate_llm(arch, gpu, kv_cache_fp8=True, max_num_seqs=256, **kw).max_concurrency == 256
