"""The step-time and memory physics of one replica (blueprints/capacity/physics.py, roofline.py): what each term adds.
The roofline's own terms are tested on `roofline_steps` (the GPUs, kernels and shapes the measured tables lack);
the replica's step source, its engine overheads and the calibration correction on `replica_model`."""

from __future__ import annotations

import pytest

from blueprints.core import defaults
from blueprints.capacity.physics import Correction, engine_profile, replica_model
from blueprints.capacity.roofline import kernel_family, roofline_steps
from blueprints.contracts.memory import kv_bytes_per_token, weights_gib
from blueprints.catalog import Interconnect
from blueprints.requirements.model import Precision, Quantization


def _model(catalog, model="llama-3.1-8b", gpu="h100", **kw):
    kw.setdefault("precision", Precision.BF16)
    kw.setdefault("tensor_parallel_size", 1)
    return roofline_steps(catalog.model(model).architecture, catalog.gpu(gpu), **kw)


def test_a_moe_decode_step_reads_only_the_experts_its_tokens_route_to(catalog):
    mixtral = _model(catalog, "mixtral-8x7b", "h200")
    assert mixtral.distinct_experts(1) == pytest.approx(2)  # top-2 of 8
    assert mixtral.distinct_experts(4) == pytest.approx(8 * (1 - 0.75**4))  # ~5.5
    assert mixtral.distinct_experts(64) == pytest.approx(8, abs=0.01)
    arch = catalog.model("mixtral-8x7b").architecture
    dense_equivalent = roofline_steps(arch.model_copy(update={"experts": None, "experts_per_token": None,
                                                              "shared_params_b": None}),
                                      catalog.gpu("h200"), precision=Precision.BF16, tensor_parallel_size=1)
    # batch 1 streams ~12.9 of the 46.7 B parameters; a large batch touches every expert.
    assert mixtral.kernel_s(1, 500) < 0.35 * dense_equivalent.kernel_s(1, 500)
    assert mixtral.kernel_s(64, 64 * 500) == pytest.approx(dense_equivalent.kernel_s(64, 64 * 500), rel=0.05)


def test_moe_prefill_runs_its_expert_gemms_below_dense_efficiency(catalog):
    arch = catalog.model("mixtral-8x7b").architecture
    moe = _model(catalog, "mixtral-8x7b", "h100", tensor_parallel_size=2)
    dense = roofline_steps(arch.model_copy(update={"experts": None, "experts_per_token": None, "shared_params_b": None,
                                                   "params_b": arch.active_b}),
                           catalog.gpu("h100"), precision=Precision.BF16, tensor_parallel_size=2)
    ratio = moe.kernel_s(0, 0, 4096, 4096**2 / 2) / dense.kernel_s(0, 0, 4096, 4096**2 / 2)
    assert 1.4 < ratio < 1.8  # experts are 11.3 of the 12.9 B active parameters, at MOE_GEMM_EFFICIENCY


def test_4_bit_awq_decodes_faster_than_16_bit_but_short_of_the_byte_ratio(catalog):
    bf16 = _model(catalog, "qwen2.5-7b", "a100-80gb")
    awq = _model(catalog, "qwen2.5-7b", "a100-80gb", precision=Precision.INT4, quantization=Quantization.AWQ)
    gptq = _model(catalog, "qwen2.5-7b", "a100-80gb", precision=Precision.INT4, quantization=Quantization.GPTQ)
    speedup = bf16.kernel_s(1, 100) / awq.kernel_s(1, 100)
    assert 1.8 < speedup < 3.56 * defaults.WEIGHT_BANDWIDTH_FACTOR["awq"]  # 2 / 0.5625 bytes, at the kernel's factor
    assert gptq.kernel_s(1, 100) > 1.3 * awq.kernel_s(1, 100)  # GPTQ 4-bit kernels are slower (Qwen2.5-72B GPTQ-Int4)


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
    on_pcie = roofline_steps(arch, pcie, precision=Precision.BF16, tensor_parallel_size=4)
    on_nvlink = roofline_steps(arch, nvlink, precision=Precision.BF16, tensor_parallel_size=4)
    assert on_pcie.kernel_s(1, 1000) > on_nvlink.kernel_s(1, 1000) + 5e-3  # 160 all-reduces of higher latency
    # Prefill all-reduces carry every token's activations: 2048 tokens x 8192 x 2 bytes, 160 times, over 32 vs 450 GB/s
    # (x 2 log2(4) / 4 of the bytes per rank): ~0.16 s more.
    assert on_pcie.kernel_s(0, 0, 2048, 2048**2 / 2) - on_nvlink.kernel_s(0, 0, 2048, 2048**2 / 2) > 0.15
    single = roofline_steps(catalog.model("llama-3.1-8b").architecture, pcie, precision=Precision.BF16,
                            tensor_parallel_size=1)
    assert single.allreduce_fixed_s == 0 and single.allreduce_s_per_token == 0


def test_the_a10g_prefills_at_its_measured_efficiency_not_the_default(catalog):
    a10g = catalog.gpu("a10g")
    default = a10g.model_copy(update={"prefill_mfu": None})
    arch = catalog.model("llama-3.1-8b").architecture
    measured = roofline_steps(arch, a10g, precision=Precision.BF16, tensor_parallel_size=1)
    datasheet = roofline_steps(arch, default, precision=Precision.BF16, tensor_parallel_size=1)
    prompt = (0, 0, 478, 478**2 / 2)
    assert datasheet.kernel_s(*prompt) / measured.kernel_s(*prompt) == pytest.approx(a10g.prefill_mfu / defaults.MFU,
                                                                                      rel=0.05)


def test_the_pinned_engine_adds_its_fitted_host_time_per_sequence_in_series_with_the_gpu(catalog):
    arch, gpu = catalog.model("llama-3.1-8b").architecture, catalog.gpu("h100")
    model = replica_model(arch, gpu, precision=Precision.BF16, tensor_parallel_size=1)
    e = model.engine
    assert e.name == defaults.PINNED_ENGINE and e.host_s_per_sequence == 0 and e.step_s_per_sequence > 0
    # A decode step of 256 sequences: the kernels, the fixed overhead and 256 x the per-sequence host time, added.
    step_256 = model.step_s(256, 256 * 330)
    assert step_256 == pytest.approx(e.step_overhead_s + 256 * e.step_s_per_sequence + model.steps.kernel_s(256,
                                                                                                           256 * 330))
    # The host time grows with the batch: at 1,024 sequences it is a large share of the step (published H100 runs
    # of ~1,000 sequences show TPOTs of ~100-230 ms where the kernels alone take ~40-70 ms).
    assert 1024 * e.step_s_per_sequence > 0.3 * model.step_s(1024, 1024 * 330)


def test_an_older_engine_profile_keeps_the_host_work_its_points_show(catalog):
    arch, gpu = catalog.model("llama-3.1-8b").architecture, catalog.gpu("h100")
    v060 = replica_model(arch, gpu, precision=Precision.BF16, tensor_parallel_size=1,
                         engine=engine_profile("vllm-0.6.0"))
    host = v060.engine.host_s_per_sequence
    assert host > 0 and v060.step_s(512, 512 * 330) == pytest.approx(512 * host)  # host-bound at a large batch
    assert v060.step_s(1, 330) > 1 * host  # the GPU step at batch 1


def test_a_correction_scales_the_kernels_and_the_ttft_floor_and_nothing_else(catalog):
    arch, gpu = catalog.model("llama-3.1-8b").architecture, catalog.gpu("h100")
    plain = replica_model(arch, gpu, precision=Precision.BF16, tensor_parallel_size=1)
    corrected = replica_model(arch, gpu, precision=Precision.BF16, tensor_parallel_size=1,
                              correction=Correction(step_time=1.2, ttft_floor=2.0))
    host = plain.engine.step_overhead_s + 64 * plain.engine.step_s_per_sequence
    assert corrected.step_s(64, 64 * 500) - host == pytest.approx(1.2 * (plain.step_s(64, 64 * 500) - host))
    assert corrected.frontend_s(1000) == pytest.approx(tuple(2 * x for x in plain.frontend_s(1000)))
    assert corrected.kv_cache_tokens == plain.kv_cache_tokens


def test_the_ttft_floor_grows_with_the_prompt_and_the_chat_template_not_with_the_layers(catalog):
    gpu = catalog.gpu("h100")
    small, large = (replica_model(catalog.model(m).architecture, gpu, precision=Precision.BF16,
                                  tensor_parallel_size=tp) for m, tp in (("llama-3.1-8b", 1), ("llama-3.1-70b", 4)))
    assert sum(small.frontend_s(8000)) > sum(small.frontend_s(100))  # tokenisation of a longer prompt
    # Published TTFTs at one client put a 72B's floor (2 x H100, 128 tokens: 35-41 ms) below an 8B's on the chat
    # endpoint: no per-layer term.
    assert large.frontend_s(100) == small.frontend_s(100)
    raw = replica_model(catalog.model("llama-3.1-8b").architecture, gpu, precision=Precision.BF16,
                        tensor_parallel_size=1, chat=False)
    chat_ms = defaults.ENGINE_PROFILES[defaults.PINNED_ENGINE]["frontend_chat_serial_ms"]
    assert chat_ms > 0 and sum(small.frontend_s(100)) - sum(raw.frontend_s(100)) == pytest.approx(chat_ms / 1e3)


def test_an_fp8_kv_cache_halves_the_bytes_held_and_read(catalog):
    arch = catalog.model("llama-3.1-8b").architecture
    assert kv_bytes_per_token(arch) == 131072 and kv_bytes_per_token(arch, kv_cache_fp8=True) == 65536
    gpu = catalog.gpu("l40s")
    auto, fp8 = (replica_model(arch, gpu, precision=Precision.BF16, tensor_parallel_size=1, kv_cache_fp8=kv)
                 for kv in (False, True))
    assert fp8.kv_cache_tokens == pytest.approx(2 * auto.kv_cache_tokens, abs=1)
    assert _model(catalog, gpu="l40s", kv_cache_fp8=True).kv_read_s_per_token == pytest.approx(
        _model(catalog, gpu="l40s").kv_read_s_per_token / 2)


def test_estimate_llm_counts_what_an_fp8_kv_cache_holds_without_a_sequence_cap(catalog):
    from blueprints.capacity.sizing import estimate_llm

    arch, gpu = catalog.model("llama-3.1-8b").architecture, catalog.gpu("l40s")
    kw = dict(precision=Precision.BF16, tensor_parallel_size=1, concurrency=1, input_tokens=128, output_tokens=128)
    auto, fp8 = estimate_llm(arch, gpu, **kw), estimate_llm(arch, gpu, kv_cache_fp8=True, **kw)
    assert fp8.max_concurrency >= 1.8 * auto.max_concurrency > 1000
    assert estimate_llm(arch, gpu, kv_cache_fp8=True, max_num_seqs=256, **kw).max_concurrency == 256
