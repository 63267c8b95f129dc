"""Infeasible requirements fail with the reason and the nearest feasible alternative; never a silent bad plan."""

from __future__ import annotations

import re

import pytest

from blueprints.core.errors import RequirementsError, SizingError
from blueprints.requirements.service import load_requirements
from tests.conftest import GUARDRAIL_ENGINES, example_data, plan_env, requirements_with


def test_a_70b_model_on_24gb_gpus_with_long_context_names_the_context_precision_and_family_fixes():
    req = requirements_with("regulated-assistant", model={"max_context_tokens": 131072},
                            hardware={"allowed_instance_families": ["g5", "g6"]})
    with pytest.raises(SizingError) as exc:
        plan_env(req, "prod")
    msg = str(exc.value)
    assert msg.startswith("llama-3-1-70b needs 132 GiB of weights at bf16 plus KV cache for max_context_tokens=131072, "
                          "but the largest allowed node (g6.48xlarge, 8x NVIDIA L4) has 180 GiB of GPU memory")
    assert "lower max_context_tokens from 131072 to <= " in msg
    assert "set model.precision: fp8 (68 GiB of weights)" in msg  # embeddings stay 16-bit in FP8 checkpoints
    # the cheapest node that holds it: 4x RTX PRO 6000 (4 x 95.6 GiB) below p4d.24xlarge's $21.958/h
    assert "add 'g7e' to hardware.allowed_instance_families (g7e.24xlarge fits at $16.5722/h)" in msg


def test_a_70b_model_on_single_gpu_24gb_families_suggests_a_larger_family():
    req = requirements_with("regulated-assistant", hardware={"allowed_instance_families": ["g4dn"]})
    with pytest.raises(SizingError, match=r"largest allowed node \(g4dn.12xlarge, 4x NVIDIA T4\) has 60 GiB.*"
                                          r"set model.precision: int4.*add 'g7e'"):
        plan_env(req, "prod")


def test_an_itl_target_below_the_bandwidth_floor_says_it_is_physically_impossible():
    req = requirements_with("regulated-assistant", slo={"itl_p95_ms": 3})
    with pytest.raises(SizingError) as exc:
        plan_env(req, "prod")
    msg = str(exc.value)
    assert "no allowed GPU option serves llama-3-1-70b within the SLO" in msg
    assert ("against slo.itl_p95_ms=3; physically, reading 132 GiB of weights per token at the full 38,400 GB/s of "
            "8x NVIDIA H200 141GB takes 3.7 ms") in msg
    assert "raise slo.itl_p95_ms to >= " in msg


def test_an_itl_target_above_the_floor_but_below_the_model_names_how_far_to_relax():
    # 2 ms is above the bandwidth floor of 8x H100 (0.6 ms) but below what a step takes with its overheads and
    # tensor-parallel all-reduces (2.5 ms measured at TP8, more at a production plan's margin): the message names the
    # reachable figure and the whole milliseconds that reach it, without the physics clause.
    req = requirements_with(slo={"itl_p95_ms": 2}, budget={"max_monthly_usd": None})  # families: g5, g6, g6e, p5
    with pytest.raises(SizingError, match=r"the lowest ITL any allowed option reaches, with one request and nothing "
                                          r"else running, is (\d+\.\d) ms \(p5\.48xlarge, tensor_parallel_size=\d\) "
                                          r"against slo.itl_p95_ms=2: raise slo.itl_p95_ms to >= (\d+), lower "
                                          r"model.precision") as exc:
        plan_env(req, "prod")
    assert "physically" not in str(exc.value)
    reached, raise_to = re.search(r"is (\d+\.\d) ms .* to >= (\d+),", str(exc.value)).groups()
    assert 2 < float(reached) <= int(raise_to) < float(reached) + 1.05  # the figure rounded up (it is printed to 0.1)


def test_a_ttft_target_out_of_reach_names_the_lowest_reachable_ttft():
    with pytest.raises(SizingError, match=r"the lowest TTFT of a mean-length prompt on an idle replica is \d+ ms .* "
                                          r"slo.ttft_p95_ms=5: raise slo.ttft_p95_ms to >= \d+"):
        plan_env(requirements_with(slo={"ttft_p95_ms": 5}), "prod")


def test_a_region_outside_compliance_is_refused_when_the_file_is_loaded(tmp_path):
    import yaml

    data = example_data("regulated-assistant")
    data["environments"]["prod"]["region"] = "us-east-1"
    path = tmp_path / "svc.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(RequirementsError, match=r"environments.prod.region: 'us-east-1' is not in "
                                                r"compliance.regions_allowed \['eu-central-1', 'eu-west-1'\]; pick an "
                                                "allowed region or widen the list"):
        load_requirements(path)


def test_families_matching_nothing_list_the_families_to_allow():
    with pytest.raises(SizingError, match=r"no GPU instance type in the catalog matches "
                                          r"hardware.allowed_instance_families=\['c7i'\]; allow one of \['g4dn'"):
        plan_env(requirements_with(hardware={"allowed_instance_families": ["c7i"]}), "prod")


def test_an_encoder_latency_target_out_of_reach_names_the_fastest_option():
    with pytest.raises(SizingError, match=r"no allowed CPU option serves ticket-sentiment within a p95 request latency "
                                          r"of 5 ms .* raise slo.latency_p95_ms to >= \d+"):
        plan_env(requirements_with("support-sentiment", slo={"latency_p95_ms": 5}), "prod")


def test_cpu_hardware_that_matches_nothing_says_to_widen_it():
    with pytest.raises(SizingError, match=r"no CPU instance type in the catalog matches hardware .*widen hardware"):
        plan_env(requirements_with("support-sentiment", hardware={"allowed_instance_families": ["c7i"]}), "prod")


@pytest.mark.parametrize("engines", GUARDRAIL_ENGINES)
def test_max_replicas_is_a_constraint_of_the_search_and_names_the_needed_count_when_it_binds(engines):
    # On L40S nodes, whose larger instances hold larger (tensor-parallel) replicas. (Unrestricted, 80 requests/s of
    # chat plan p5.4xlarge, and at the production margin no H100 replica of any degree serves more of them.)
    # max_replicas constrains each engine's candidates alike: vLLM alone in every run, every engine in the slow run.
    busy = {"dev": {"region": "us-west-2"}, "prod": {"region": "us-east-1", "traffic_scale": 4}}
    l40s = {"allowed_instance_families": ["g6e"]}
    ops = {"engines": engines}
    free = plan_env(requirements_with(environments=busy, budget={"max_monthly_usd": None}, hardware=l40s,
                                      operations=ops), "prod")
    need = free.compute.replicas
    assert need > 2
    capped = {**busy, "prod": {**busy["prod"], "max_replicas": need - 1}}
    bp = plan_env(requirements_with(environments=capped, budget={"max_monthly_usd": None}, hardware=l40s,
                                    operations=ops), "prod")
    assert bp.compute.replicas <= need - 1 == bp.autoscaling.max_replicas  # fewer, larger replicas
    assert bp.compute.gpus_per_replica > free.compute.gpus_per_replica
    assert bp.predictions.monthly_cost_usd >= free.predictions.monthly_cost_usd
    # Below the availability floor (2 replicas in production at 99.9 %) no option can comply.
    floor = {**busy, "prod": {**busy["prod"], "max_replicas": 1}}
    with pytest.raises(SizingError, match=r"environments.prod: no option meeting the SLO stays within max_replicas: "
                                          r"the cheapest, .* needs \d+ replicas at peak, above max_replicas=1; the least "
                                          r"any option meeting the SLO needs is \d+ .*; raise "
                                          r"environments.prod.max_replicas to >= \d+"):
        plan_env(requirements_with(environments=floor, budget={"max_monthly_usd": None}, hardware=l40s,
                                   operations=ops), "prod")


def test_a_non_streamed_llm_too_slow_for_sagemakers_60_s_limit_says_to_stream():
    req = requirements_with("prototype-summarizer", traffic={"mean_output_tokens": 4000, "mean_input_tokens": 1000},
                            slo={"itl_p95_ms": None, "ttft_p95_ms": None}, hardware={"allowed_instance_families": ["g6"]},
                            budget={"max_monthly_usd": None})
    with pytest.raises(SizingError, match="SageMaker's 60 s invocation limit; set traffic.streaming: true"):
        plan_env(req, "pilot")


def test_a_tensorflow_model_on_triton_is_told_which_formats_triton_serves():
    data = example_data("search-relevance")
    data["models"][0]["format"] = "tensorflow"
    from blueprints.requirements.service import Requirements

    with pytest.raises(RequirementsError, match=r"models\[0\] \(embedder\).format=tensorflow: Triton on GPU serves "
                                                r"\['onnx', 'tensorrt'"):
        plan_env(Requirements.model_validate(data), "prod")
