"""The capacity model against the three published measurements of sizing-facts.md (within +-25 %)."""

from __future__ import annotations

import pytest

from blueprints.requirements import Precision
from blueprints.sizing import estimate_llm

TOLERANCE = 0.25


def within(predicted: float, published: float) -> bool:
    return abs(predicted - published) / published <= TOLERANCE


def run(catalog, model: str, gpu: str, precision: Precision, *, tp: int, concurrency: int, inp: int, out: int):
    return estimate_llm(catalog.model(model).architecture, catalog.gpu(gpu), precision=precision,
                        tensor_parallel_size=tp, concurrency=concurrency, input_tokens=inp, output_tokens=out)


def test_point_1_llama_8b_bf16_on_one_a100_40gb_streams_about_75_tokens_per_s(catalog):
    est = run(catalog, "llama-3.1-8b", "a100-40gb", Precision.BF16, tp=1, concurrency=1, inp=1024, out=128)
    assert within(est.output_tokens_per_s, 75.0), est.output_tokens_per_s
    assert within(est.itl_ms, 13.3), est.itl_ms


def test_point_1_throughput_rises_about_6_6x_by_concurrency_8_at_near_flat_latency(catalog):
    one = run(catalog, "llama-3.1-8b", "a100-40gb", Precision.BF16, tp=1, concurrency=1, inp=1024, out=128)
    eight = run(catalog, "llama-3.1-8b", "a100-40gb", Precision.BF16, tp=1, concurrency=8, inp=1024, out=128)
    assert within(eight.output_tokens_per_s / one.output_tokens_per_s, 6.6)
    assert eight.itl_ms < 1.3 * one.itl_ms


def test_point_2_llama_8b_fp16_on_one_h100_at_concurrency_1(catalog):
    # "short chat prompts": 128 in / 128 out.
    est = run(catalog, "llama-3.1-8b", "h100", Precision.FP16, tp=1, concurrency=1, inp=128, out=128)
    assert within(est.itl_ms, 6.5), est.itl_ms
    assert within(est.ttft_ms, 14.0), est.ttft_ms
    assert within(est.output_tokens_per_s, 122.0), est.output_tokens_per_s


def test_point_2_llama_8b_fp16_on_one_h100_at_concurrency_16(catalog):
    est = run(catalog, "llama-3.1-8b", "h100", Precision.FP16, tp=1, concurrency=16, inp=128, out=128)
    assert within(est.itl_ms, 10.9), est.itl_ms
    assert within(est.output_tokens_per_s, 1384.0), est.output_tokens_per_s


def test_point_3_llama_70b_fp8_on_two_h100_with_5000_tokens_in(catalog):
    est = run(catalog, "llama-3.1-70b", "h100", Precision.FP8, tp=2, concurrency=1, inp=5000, out=500)
    assert within(est.ttft_ms, 407.0), est.ttft_ms
    assert within(est.itl_ms, 18.6), est.itl_ms
    assert est.fits


@pytest.mark.parametrize("gpu", ["a100-40gb", "h100", "l40s"])
def test_itl_never_beats_the_bandwidth_floor(catalog, gpu):
    arch = catalog.model("llama-3.1-8b").architecture
    g = catalog.gpu(gpu)
    est = estimate_llm(arch, g, precision=Precision.BF16, tensor_parallel_size=1, concurrency=1, input_tokens=128,
                       output_tokens=128)
    floor_ms = arch.params_b * 1e9 * 2 / (g.bandwidth_gb_per_s * 1e9) * 1e3
    assert est.itl_ms > floor_ms


def test_planner_never_shards_a_model_over_a_degree_that_does_not_divide_its_heads(catalog):
    from blueprints.options import tp_degrees
    from blueprints.sizing import tensor_parallel_problems

    qwen = catalog.model("qwen2.5-7b").architecture  # 28 attention heads
    assert tp_degrees(8, qwen, managed=False) == [1, 2, 4]
    assert tp_degrees(8, qwen, managed=True) == []
    assert tensor_parallel_problems(qwen, 4) == []
