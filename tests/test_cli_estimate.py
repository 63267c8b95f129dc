"""`blueprint estimate`: the what-if calculator behind the sizing, as JSON or a table; bad input exits 2."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from blueprints.capacity.physics import replica_model
from blueprints.cli import app
from blueprints.requirements.model import Precision
from tests.conftest import CHAT_EXAMPLE, example_data

runner = CliRunner()
KEYS = {"fits", "weights_gib", "kv_cache_tokens", "max_concurrency", "capacity_source", "regime", "ttft_ms",
        "itl_ms", "tpot_ms", "output_tokens_per_s", "requests_per_s", "uncertainty"}
ARRIVAL_KEYS = {"ttft_p50_ms", "ttft_p95_ms", "itl_p50_ms", "itl_p95_ms", "e2e_p95_ms"}
POINT_3 = ["estimate", "--model", "llama-3.1-70b", "--precision", "fp8", "--gpu", "h100", "--tensor-parallel", "2",
           "--concurrency", "1", "--input-tokens", "5000", "--output-tokens", "500"]
QWEN_32B = {"params_b": 32.76, "layers": 64, "hidden_size": 5120, "attention_heads": 40, "kv_heads": 8,
            "head_dim": 128, "vocab_size": 152064}


def _json(args: list[str]) -> dict:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_json_output_has_exactly_the_documented_keys_and_the_capacity_models_values(catalog):
    data = _json(POINT_3)
    assert set(data) == KEYS
    arch = catalog.model("llama-3.1-70b").architecture
    model = replica_model(arch, catalog.gpu("h100"), precision=Precision.FP8, tensor_parallel_size=2, chat=False)
    assert data["fits"] is True
    assert data["weights_gib"] == round(model.weights_gib, 2) == pytest.approx(67.71)  # 16-bit embeddings
    assert data["kv_cache_tokens"] == model.kv_cache_tokens
    assert data["max_concurrency"] == model.kv_cache_tokens // 5500
    assert data["capacity_source"] == model.source.describe() and data["capacity_source"].startswith("measured vLLM")
    # One request alone: the frontend, its prefill in 8192-token chunks, then one decode step per token.
    prefill_ms = sum(model.frontend_s(5000)) * 1e3 + model.step_s(0, 0.0, 5000, 5000**2 / 2) * 1e3
    assert data["ttft_ms"] == pytest.approx(prefill_ms, rel=0.02)
    assert data["itl_ms"] == pytest.approx(model.step_s(1, 5250) * 1e3, rel=0.02)


def test_table_output_names_each_figure():
    result = runner.invoke(app, POINT_3)
    assert result.exit_code == 0
    assert [line.split()[0] for line in result.stdout.splitlines()] == [
        "fits", "weights_gib", "kv_cache_tokens", "max_concurrency", "capacity_source", "regime", "ttft_ms", "itl_ms",
        "tpot_ms", "output_tokens_per_s", "requests_per_s", "uncertainty", "ttft_ms", "itl_ms", "tpot_ms",
        "output_tokens_per_s", "requests_per_s"]
    assert "  ttft_ms            " in result.stdout  # the band's rows, indented under `uncertainty`


def test_closed_loop_latency_grows_with_concurrency():
    args = ["estimate", "--model", "llama-3.1-8b", "--precision", "fp16", "--gpu", "h100", "--input-tokens", "200",
            "--output-tokens", "200"]
    one, many = _json([*args, "--concurrency", "1"]), _json([*args, "--concurrency", "64"])
    assert many["itl_ms"] > 1.2 * one["itl_ms"] and many["ttft_ms"] > one["ttft_ms"]
    assert many["output_tokens_per_s"] > 30 * one["output_tokens_per_s"]  # no per-sequence host cap on V1


def test_an_8b_model_on_one_a100_saturates_above_3000_tokens_per_s_with_short_requests():
    data = _json(["estimate", "--model", "llama-3.1-8b", "--gpu", "a100-80gb", "--input-tokens", "230",
                  "--output-tokens", "200", "--concurrency", "256"])
    assert data["output_tokens_per_s"] >= 3000  # was 1,441 with the 0.7 ms per-sequence host term


def test_a_70b_model_does_not_fit_one_24gb_gpu_and_names_the_smallest_degree_that_would():
    data = _json(["estimate", "--model", "llama-3.1-70b", "--gpu", "a10g"])
    assert data["fits"] is False and data["kv_cache_tokens"] == 0 and data["max_concurrency"] == 0
    assert data["min_tensor_parallel"] == 8  # 132 GiB of weights: 8x 22.5 GiB A10G (g5.48xlarge)
    assert _json(["estimate", "--model", "llama-3.1-70b", "--gpu", "l40s"])["min_tensor_parallel"] == 4


def test_no_degree_within_one_node_is_null():
    data = _json(["estimate", "--model", "llama-3.1-70b", "--gpu", "t4"])  # 4x 15 GiB at most
    assert data["fits"] is False and data["min_tensor_parallel"] is None


def test_concurrency_beyond_the_kv_cache_queues_and_still_fits():
    args = ["estimate", "--model", "llama-3.1-8b", "--gpu", "a10g", "--input-tokens", "2000", "--output-tokens", "500"]
    held = _json(args)["max_concurrency"]
    assert held < 16
    big = _json([*args, "--concurrency", "16"])  # more clients than the KV cache holds: they wait, as on vLLM
    assert big["fits"] is True and big["max_concurrency"] == held and "min_tensor_parallel" not in big
    assert big["ttft_ms"] > _json([*args, "--concurrency", str(held)])["ttft_ms"]


def test_one_request_at_max_model_len_that_does_not_fit_is_the_only_misfit():
    args = ["estimate", "--model", "llama-3.1-8b", "--gpu", "l4", "--input-tokens", "8000", "--output-tokens", "1000"]
    assert _json(args)["fits"] is True
    data = _json([*args, "--max-model-len", "131072"])
    assert data["fits"] is False and data["ttft_ms"] is None and data["min_tensor_parallel"] == 2


def test_max_num_seqs_caps_max_concurrency():
    args = ["estimate", "--model", "llama-3.1-8b", "--gpu", "h100"]
    assert _json(args)["max_concurrency"] > 64
    assert _json([*args, "--max-num-seqs", "64"])["max_concurrency"] == 64


def test_an_fp8_kv_cache_on_l40s_holds_about_twice_the_sequences_of_a_16_bit_one():
    args = ["estimate", "--model", "llama-3.1-8b", "--gpu", "l40s", "--input-tokens", "1200", "--output-tokens", "300"]
    auto, fp8 = _json(args), _json([*args, "--kv-cache-dtype", "fp8"])
    assert fp8["kv_cache_tokens"] == pytest.approx(2 * auto["kv_cache_tokens"], abs=1)
    assert fp8["max_concurrency"] >= 1.8 * auto["max_concurrency"]


def test_an_fp8_kv_cache_on_a_gpu_without_fp8_exits_2_naming_the_flag():
    result = runner.invoke(app, ["estimate", "--model", "llama-3.1-8b", "--gpu", "a10g", "--kv-cache-dtype", "fp8"])
    assert result.exit_code == 2
    assert "--kv-cache-dtype fp8: NVIDIA A10G has no FP8 support" in result.stderr and "use auto" in result.stderr


def test_max_model_len_must_hold_a_request_and_stay_within_the_context():
    args = ["estimate", "--model", "llama-3.1-8b", "--gpu", "l40s", "--input-tokens", "1000", "--output-tokens", "200"]
    assert _json([*args, "--max-model-len", "32768"])["fits"] is True
    short = runner.invoke(app, [*args, "--max-model-len", "1000"])
    assert short.exit_code == 2 and "--max-model-len 1000 must hold one mean request" in short.stderr
    long = runner.invoke(app, [*args, "--max-model-len", "200000"])
    assert long.exit_code == 2 and "within the model's context (131072 tokens)" in long.stderr


def test_a_longer_max_model_len_that_does_not_fit_is_reported_not_refused():
    data = _json(["estimate", "--model", "llama-3.1-70b", "--gpu", "h100", "--tensor-parallel", "2",
                  "--max-model-len", "131072"])
    assert data["fits"] is False and data["min_tensor_parallel"] == 4


def test_arrival_rate_adds_queue_aware_percentiles_that_grow_with_the_rate():
    base = ["estimate", "--model", "llama-3.1-8b", "--gpu", "l40s", "--input-tokens", "1000", "--output-tokens", "200"]
    light, heavy = _json([*base, "--arrival-rate", "0.5"]), _json([*base, "--arrival-rate", "4"])
    assert ARRIVAL_KEYS <= set(light) and set(light) - KEYS == ARRIVAL_KEYS
    for data in (light, heavy):
        assert data["ttft_p95_ms"] >= data["ttft_p50_ms"] and data["itl_p95_ms"] >= data["itl_p50_ms"]
        assert data["e2e_p95_ms"] > data["ttft_p95_ms"]
    assert heavy["ttft_p95_ms"] > light["ttft_p95_ms"]
    assert heavy["itl_p50_ms"] > light["itl_p50_ms"] and heavy["itl_p95_ms"] > light["itl_p95_ms"]


def test_with_a_plans_engine_settings_the_estimate_gives_the_plans_p95s():
    # regulated-assistant prod: Llama-3.1-70B, tensor parallel, tuned --max-num-batched-tokens (issue 21: without the
    # flag a plan's 46 ms ITL p95 estimated as 79 ms).
    from blueprints.contracts.stackconfig import read_stack_config
    from tests.conftest import ROOT

    bp = read_stack_config(ROOT / "stacks" / "Pulumi.regulated-assistant-prod.yaml")
    e = bp.engine
    rate = bp.model.traffic.peak_requests_per_s / bp.compute.replicas
    data = _json(["estimate", "--requirements", str(ROOT / "stacks" / "requirements" / "regulated-assistant.yaml"),
                  "--gpu", bp.compute.gpu, "--tensor-parallel", str(e.tensor_parallel_size),
                  "--kv-cache-dtype", e.kv_cache_dtype, "--max-num-seqs", str(e.max_num_seqs),
                  "--max-num-batched-tokens", str(e.max_num_batched_tokens), "--max-model-len", str(e.max_model_len),
                  "--arrival-rate", str(rate)])
    assert data["ttft_p95_ms"] == pytest.approx(bp.predictions.ttft_p95_ms, abs=0.1)
    assert data["itl_p95_ms"] == pytest.approx(bp.predictions.itl_p95_ms, abs=0.01)


def test_a_token_budget_below_the_sequences_exits_2_naming_both():
    result = runner.invoke(app, ["estimate", "--model", "llama-3.1-8b", "--gpu", "l40s", "--max-num-seqs", "128",
                                 "--max-num-batched-tokens", "64"])
    assert result.exit_code == 2
    assert "--max-num-batched-tokens 64 is below max_num_seqs 128" in result.stderr


def test_an_arrival_rate_beyond_the_replica_warns_that_it_is_overloaded():
    result = runner.invoke(app, ["estimate", "--model", "llama-3.1-8b", "--gpu", "l4", "--arrival-rate", "50",
                                 "--json"])
    assert result.exit_code == 0
    assert "more than this replica can serve" in result.stderr


@pytest.mark.parametrize("rate", ["0", "-1", "5000"])
def test_an_arrival_rate_outside_its_bounds_exits_2(rate):
    result = runner.invoke(app, ["estimate", "--model", "llama-3.1-8b", "--gpu", "l40s", "--arrival-rate", rate])
    assert result.exit_code == 2 and "--arrival-rate" in result.output


def test_requirements_give_the_model_context_and_traffic():
    data = _json(["estimate", "--requirements", str(CHAT_EXAMPLE), "--gpu", "l40s", "--concurrency", "8"])
    flags = _json(["estimate", "--model", "llama-3.1-8b", "--gpu", "l40s", "--concurrency", "8", "--input-tokens",
                   "1200", "--output-tokens", "300", "--max-model-len", "8192", "--endpoint", "chat"])
    # chat-assistant: llama-3.1-8b bf16, 1200 in / 300 out, max_context_tokens 8192, traffic.api chat
    assert data == flags


def test_requirements_with_a_model_given_only_by_its_architecture(tmp_path):
    data = example_data()
    data["model"] = {"name": "qwen-32b", "task": "text-generation", "architecture": QWEN_32B, "precision": "int4",
                     "quantization": "awq", "weights_uri": "s3://bucket-name/qwen/", "max_context_tokens": 8192}
    path = tmp_path / "req.yaml"
    path.write_text(yaml.safe_dump(data))
    out = _json(["estimate", "--requirements", str(path), "--gpu", "a100-80gb", "--arrival-rate", "1"])
    assert out["fits"] is True and ARRIVAL_KEYS <= set(out)
    assert 16 < out["weights_gib"] < 20  # 4-bit linear layers, 16-bit embeddings


def test_architecture_file_estimates_a_model_outside_the_catalog(tmp_path):
    path = tmp_path / "arch.yaml"
    path.write_text(yaml.safe_dump(QWEN_32B))
    data = _json(["estimate", "--architecture", str(path), "--gpu", "a100-80gb", "--precision", "bf16",
                  "--tensor-parallel", "2"])
    assert data["fits"] is True and data["weights_gib"] == pytest.approx(61.0, abs=0.5)


def test_a_bad_architecture_file_exits_2_naming_the_file_and_field(tmp_path):
    path = tmp_path / "arch.yaml"
    path.write_text(yaml.safe_dump({**QWEN_32B, "layers": 0}))
    result = runner.invoke(app, ["estimate", "--architecture", str(path), "--gpu", "a100-80gb"])
    assert result.exit_code == 2
    assert f"{path}" in result.stderr and "layers" in result.stderr and "Traceback" not in result.output


def test_model_requirements_and_architecture_are_mutually_exclusive(tmp_path):
    result = runner.invoke(app, ["estimate", "--model", "llama-3.1-8b", "--requirements", str(CHAT_EXAMPLE),
                                 "--gpu", "l40s"])
    assert result.exit_code == 2 and "give exactly one of --model, --requirements or --architecture" in result.stderr
    none = runner.invoke(app, ["estimate", "--gpu", "l40s"])
    assert none.exit_code == 2 and "(got none)" in none.stderr


def test_a_quantization_that_does_not_match_the_precision_exits_2():
    result = runner.invoke(app, ["estimate", "--model", "llama-3.1-8b", "--gpu", "l40s", "--precision", "bf16",
                                 "--quantization", "awq"])
    assert result.exit_code == 2 and "--quantization awq comes with --precision int4" in result.stderr


def test_gptq_4_bit_decodes_slower_than_awq_4_bit():
    args = ["estimate", "--model", "qwen2.5-72b", "--gpu", "a100-80gb", "--precision", "int4"]
    awq, gptq = _json([*args, "--quantization", "awq"]), _json([*args, "--quantization", "gptq"])
    assert gptq["itl_ms"] > 1.4 * awq["itl_ms"]


def test_every_catalog_gpu_name_is_accepted(catalog):
    for name in ("t4", "a10g", "l4", "l40s", "a100-40gb", "a100-80gb", "h100", "h200"):
        result = runner.invoke(app, ["estimate", "--model", "llama-3.1-8b", "--gpu", name, "--json"])
        assert result.exit_code == 0, name


def test_an_unknown_gpu_exits_2_with_close_matches_and_the_known_names():
    result = runner.invoke(app, ["estimate", "--model", "llama-3.1-8b", "--gpu", "h10"])
    assert result.exit_code == 2
    assert "CatalogError: unknown GPU 'h10'; did you mean h100? Known: a100-40gb" in result.stderr
    assert "Traceback" not in result.output


def test_an_unknown_model_exits_2_naming_the_model():
    result = runner.invoke(app, ["estimate", "--model", "llama-9", "--gpu", "h100"])
    assert result.exit_code == 2
    assert "CatalogError: unknown model id 'llama-9'" in result.stderr


def test_an_unknown_precision_exits_2_listing_the_choices():
    result = runner.invoke(app, ["estimate", "--model", "llama-3.1-8b", "--gpu", "h100", "--precision", "fp9"])
    assert result.exit_code == 2
    assert "'fp9' is not one of" in result.stderr and "'int4'" in result.stderr


def test_a_zero_concurrency_exits_2():
    result = runner.invoke(app, ["estimate", "--model", "llama-3.1-8b", "--gpu", "h100", "--concurrency", "0"])
    assert result.exit_code == 2


def test_latency_figures_are_null_when_the_replica_does_not_fit():
    data = _json(["estimate", "--model", "llama-3.1-70b", "--gpu", "l4"])
    assert data["fits"] is False
    assert data["ttft_ms"] is None and data["itl_ms"] is None and data["output_tokens_per_s"] is None
    assert data["weights_gib"] > 100


@pytest.mark.parametrize(("tp", "message"), [
    ("3", "tensor_parallel_size=3 must be a power of two"),
    ("16", "tensor_parallel_size=16 must divide the model's 28 attention heads"),
])
def test_a_tensor_parallel_degree_vllm_cannot_use_exits_2(tp, message):
    result = runner.invoke(app, ["estimate", "--model", "qwen2.5-7b", "--gpu", "h100", "--tensor-parallel", tp])
    assert result.exit_code == 2 and message in result.output


def test_version_is_printed():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.startswith("blueprint (servingblueprints) ")


@pytest.mark.parametrize(("flag", "value"), [("--max-num-seqs", "0"), ("--concurrency", "5000"),
                                             ("--tensor-parallel", "0"), ("--input-tokens", "0"),
                                             ("--max-model-len", "0"), ("--output-tokens", "2000000")])
def test_numeric_flags_outside_their_bounds_exit_2_naming_the_flag(flag, value):
    result = runner.invoke(app, ["estimate", "--model", "llama-3.1-8b", "--gpu", "l40s", flag, value])
    assert result.exit_code == 2 and flag in result.output


def test_a_requirements_file_with_several_models_exits_2(tmp_path):
    result = runner.invoke(app, ["estimate", "--requirements", "stacks/requirements/search-relevance.yaml",
                                 "--gpu", "l40s"])
    assert result.exit_code == 2
    assert "estimate takes a requirements file with one `model`; this one lists `models`" in result.stderr


def test_a_non_generative_requirements_model_exits_2():
    result = runner.invoke(app, ["estimate", "--requirements", "stacks/requirements/support-sentiment.yaml",
                                 "--gpu", "l40s"])
    assert result.exit_code == 2 and "estimate models text generation (vLLM) only" in result.stderr


BURST = ["estimate", "--model", "qwen3-8b", "--gpu", "h100", "--input-tokens", "230", "--output-tokens", "200"]


def test_a_burst_is_the_benchmarks_experiment_every_request_measured_over_the_makespan(catalog):
    from blueprints.capacity.runs import burst, scheduler_config
    from blueprints.capacity.workload import LengthModel

    data = _json([*BURST, "--burst", "500"])
    assert data["regime"] == "burst" and set(data) == KEYS | {"makespan_s"}
    model = replica_model(catalog.model("qwen3-8b").architecture, catalog.gpu("h100"), precision=Precision.BF16,
                          tensor_parallel_size=1, chat=False)
    run = burst(model, scheduler_config(model, catalog.gpu("h100"), max_model_len=430), count=500,
                inputs=LengthModel(230, 230), outputs=LengthModel(200, 200), max_model_len=430)
    assert run.measured == 500
    assert data["makespan_s"] == pytest.approx(run.duration_s, rel=1e-3)
    assert data["output_tokens_per_s"] == pytest.approx(500 * 200 / run.duration_s, rel=1e-3)
    assert data["requests_per_s"] == pytest.approx(500 / run.duration_s, rel=1e-3)
    # Every prompt arrives at once: the mean TTFT includes the queue behind the others' prefill.
    assert data["ttft_ms"] > 5 * _json([*BURST, "--concurrency", "1"])["ttft_ms"]


def test_a_capped_burst_queues_in_the_client_so_each_request_waits_less_and_the_run_lasts_longer():
    free, capped = _json([*BURST, "--burst", "400"]), _json([*BURST, "--burst", "400", "--max-concurrency", "16"])
    assert capped["ttft_ms"] < free["ttft_ms"] and capped["makespan_s"] > free["makespan_s"]
    assert capped["output_tokens_per_s"] < free["output_tokens_per_s"]


def test_a_benchmark_open_loop_measures_every_request_at_the_given_lengths():
    data = _json([*BURST, "--arrival-rate", "5", "--num-prompts", "300"])
    assert data["regime"] == "open-loop" and ARRIVAL_KEYS <= set(data)
    # Poisson arrivals at 5/s for 300 requests: about 5 completed per second over the run.
    assert 4.0 < data["requests_per_s"] < 6.0
    assert data["output_tokens_per_s"] == pytest.approx(data["requests_per_s"] * 200, rel=1e-3)


@pytest.mark.parametrize("args, says", [
    (["--burst", "0"], "--burst"),
    (["--burst", "100001"], "--burst"),
    (["--burst", "10", "--max-concurrency", "11"], "--max-concurrency 11 is above --burst 10"),
    (["--max-concurrency", "4"], "--max-concurrency 4 caps a burst"),
    (["--burst", "10", "--concurrency", "4"], "one experiment at a time"),
    (["--arrival-rate", "1", "--concurrency", "4"], "one experiment at a time"),
    (["--num-prompts", "10"], "--num-prompts 10 sets an open loop"),
], ids=["zero", "over-100k", "cap-above-burst", "cap-without-burst", "burst-and-closed", "open-and-closed",
        "prompts-without-rate"])
def test_bad_experiment_flags_exit_2_naming_the_flag(args, says):
    result = runner.invoke(app, [*BURST, *args])
    assert result.exit_code == 2 and says in result.output and "Traceback" not in result.output


def test_every_prediction_carries_its_step_sources_band_and_the_roofline_warns(catalog):
    from blueprints.capacity.uncertainty import band_for, interval

    measured = _json([*POINT_3])
    band = band_for("measured")
    assert measured["uncertainty"]["ttft_ms"] == [round(v, 2) for v in interval(measured["ttft_ms"], band.ttft)]
    assert measured["uncertainty"]["itl_ms"] == [round(v, 2) for v in interval(measured["itl_ms"], band.itl)]
    assert measured["uncertainty"]["output_tokens_per_s"] == [
        round(v, 2) for v in interval(measured["output_tokens_per_s"], band.throughput)]
    assert "e2e_p95_ms" not in measured["uncertainty"]  # no family: TTFT and token gaps mixed
    a10g = ["estimate", "--model", "llama-3.1-8b", "--gpu", "a10g", "--concurrency", "4"]
    roofline = _json(a10g)
    low, high = roofline["uncertainty"]["itl_ms"]
    assert roofline["capacity_source"].startswith("roofline")
    assert (high - low) / roofline["itl_ms"] > (measured["uncertainty"]["itl_ms"][1]
                                                - measured["uncertainty"]["itl_ms"][0]) / measured["itl_ms"]
    result = runner.invoke(app, a10g)
    assert result.exit_code == 0 and "warning: roofline, NVIDIA A10G" in result.stderr
    assert "warning" not in runner.invoke(app, POINT_3).stderr
