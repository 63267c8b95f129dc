"""Sizing non-generative models: compute per request, Triton dynamic batching, CPU replicas, SageMaker timers."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from blueprints.core import defaults
from blueprints.contracts.sections import Archetype
from blueprints.core.errors import problem_lines
from blueprints.plan.options.search import resolve_models
from blueprints.plan.options.nongen import request_work
from blueprints.requirements.service import Requirements
from blueprints.capacity.sizing import cpu_request_ms, encoder_gflops_per_request, gpu_batch_ms
from blueprints.plan.builders.sagemaker import sagemaker_timer_floors
from tests.conftest import example_data, plan_env, requirements_with


def test_encoder_compute_is_two_flops_per_dense_parameter_per_token_plus_attention(catalog):
    arch = catalog.model("bge-large-en-v1.5").architecture
    dense = 12 * 24 * 1024**2  # 302 M: the non-embedding parameters
    assert encoder_gflops_per_request(arch, tokens=256) == pytest.approx(
        (2 * dense * 256 + 4 * 24 * 1024 * 256**2) / 1e9)
    assert encoder_gflops_per_request(arch, tokens=256) == pytest.approx(161.1, abs=0.1)


def test_a_large_vocabulary_reranker_does_not_count_its_embedding_table_as_compute(catalog):
    arch = catalog.model("bge-reranker-large").architecture  # 560 M params, ~250 M of them embeddings
    assert encoder_gflops_per_request(arch, tokens=100) < 2 * 0.4e9 * 100 / 1e9


def test_a_vision_model_uses_the_catalogs_flops_per_image(catalog):
    data = example_data("support-sentiment")
    data["model"] = {"id": "resnet-50", "format": "onnx", "weights_uri": "s3://edge-models/resnet/"}
    req = Requirements.model_validate(data)
    assert request_work(resolve_models(req, catalog)[0], catalog).gflops == 8.2


def test_a_measured_cpu_latency_replaces_the_flops_estimate(catalog):
    req = requirements_with("support-sentiment", model={"measured_latency_ms": 21.0, "measured_instance_type": "c7g.xlarge"})
    # (21 ms - 1 ms overhead) x 4 vCPUs x 40 GFLOP/s per vCPU = 3.2 GFLOP
    assert request_work(resolve_models(req, catalog)[0], catalog).gflops == pytest.approx(3.2)
    bp = plan_env(req, "prod")
    assert bp.rationale[3].startswith("ticket-sentiment: 3.2 GFLOP per request (measured latency)")


def test_a_measured_gpu_latency_round_trips_through_the_gpu_model(catalog):
    req = requirements_with("support-sentiment", model={"measured_latency_ms": 12.0, "measured_instance_type": "g5.xlarge"})
    model = resolve_models(req, catalog)[0]
    work = request_work(model, catalog)
    assert gpu_batch_ms(work, batch_size=1, gpu=catalog.gpu("a10g"), precision=model.spec.precision) == \
        pytest.approx(12.0)


def test_measured_latency_needs_its_instance_type():
    data = example_data("support-sentiment")
    data["model"]["measured_latency_ms"] = 10
    with pytest.raises(ValueError, match="give `measured_latency_ms` and `measured_instance_type` together"):
        Requirements.model_validate(data)


def test_triton_batching_fits_every_models_latency_budget():
    bp = plan_env(requirements_with("search-relevance"), "prod")
    assert bp.archetype is Archetype.TRITON_MULTI_MODEL
    assert [m.name for m in bp.engine.models] == ["embedder", "reranker", "sentiment"]
    for cfg in bp.engine.models:
        assert cfg.instance_kind == "KIND_GPU" and cfg.instance_count == defaults.TRITON_GPU_INSTANCES
        assert cfg.backend == "onnxruntime"
        assert 1 <= cfg.max_batch_size <= defaults.TRITON_MAX_BATCH_SIZE_CAP
        assert 0 < cfg.max_queue_delay_microseconds < 100_000
    assert bp.predictions.latency_p95_ms <= 100


def test_a_tighter_latency_budget_gives_smaller_batches_and_shorter_queue_delays():
    loose = plan_env(requirements_with("search-relevance"), "prod").engine.models
    tight = plan_env(requirements_with("search-relevance", slo={"latency_p95_ms": 40}), "prod").engine.models
    for a, b in zip(loose, tight):
        assert b.max_batch_size <= a.max_batch_size
        assert b.max_queue_delay_microseconds <= a.max_queue_delay_microseconds
    assert sum(b.max_batch_size for b in tight) < sum(a.max_batch_size for a in loose)


def test_triton_replicas_cover_each_models_peak_at_the_target_utilisation():
    req = requirements_with("search-relevance")
    bp = plan_env(req, "prod")
    assert bp.compute.gpus_per_replica == 1 and bp.compute.replicas >= 2  # 99.9 % availability floor
    # capacity at the estate's mix of requests, all replicas, must exceed the total peak over utilisation
    total_peak = sum(m.traffic.peak_requests_per_s for m in req.models)
    assert bp.predictions.requests_per_s_capacity * defaults.TARGET_UTILIZATION["bursty"] >= total_peak


def test_more_traffic_means_more_triton_replicas():
    data = example_data("search-relevance")
    for m in data["models"]:
        m["traffic"]["peak_requests_per_s"] *= 10
    data["budget"] = {}
    busy = plan_env(Requirements.model_validate(data), "prod")
    assert busy.compute.replicas > plan_env(requirements_with("search-relevance"), "prod").compute.replicas


def test_onnx_runtime_threads_equal_the_cpu_limit():
    bp = plan_env(requirements_with("support-sentiment"), "prod")
    assert bp.archetype is Archetype.ONNX_CPU
    assert bp.compute.accelerator.value == "cpu" and bp.compute.gpus_per_replica == 0
    assert bp.engine.intra_op_threads == bp.compute.cpu_per_replica == 12  # 3/4 of a c7g.4xlarge
    assert bp.compute.cpu_arch.value == "arm64" and bp.compute.instance_type.startswith("c7g.")


def test_cpu_replicas_meet_the_latency_target_by_the_cpu_model(catalog):
    bp = plan_env(requirements_with("support-sentiment"), "prod")
    inst = catalog.instance(bp.compute.instance_type)
    per_request = cpu_request_ms(8.3, vcpus=int(bp.compute.cpu_per_replica), gflops_per_vcpu=catalog.cpu_gflops(inst))
    assert bp.predictions.latency_p95_ms == pytest.approx(2 * per_request, rel=0.02)
    assert bp.predictions.latency_p95_ms <= 80


@pytest.mark.parametrize("example", ["support-sentiment", "search-relevance"])
def test_the_node_pools_replicas_per_node_all_fit_in_the_allocatable_cpu(example):
    req = requirements_with(example, hardware={"accelerators": ["cpu"], "allowed_instance_families": [],
                                               "cpu_arch": None}, slo={"latency_p95_ms": 400},
                            budget={"max_monthly_usd": None})
    c = plan_env(req, "prod").compute
    assert c.accelerator.value == "cpu"
    assert c.replicas_per_node * c.cpu_per_replica <= c.vcpus_per_node * defaults.NODE_ALLOCATABLE_CPU_FRACTION


def test_cpu_nodes_are_priced_for_the_same_packing_the_node_pool_uses():
    req = requirements_with("support-sentiment", traffic={"peak_requests_per_s": 300}, budget={"max_monthly_usd": None})
    bp = plan_env(req, "prod")
    assert bp.predictions.cost_lines[0].quantity == math.ceil(bp.compute.replicas / bp.compute.replicas_per_node)


def test_the_onnx_autoscaler_targets_cpu_utilisation_and_outlasts_cold_start():
    bp = plan_env(requirements_with("support-sentiment"), "prod")
    assert bp.autoscaling.metric == "cpu" and bp.autoscaling.target == 80
    assert bp.autoscaling.cooldown_s > bp.startup.total_s


def test_a_managed_single_encoder_runs_in_sagemakers_triton_container():
    data = example_data("support-sentiment")
    data["hardware"] = {"accelerators": ["nvidia-gpu"]}
    data["operations"] = {"preference": "managed"}
    data["compliance"]["regions_allowed"] = ["eu-west-1"]
    bp = plan_env(Requirements.model_validate(data), "prod")
    assert bp.archetype is Archetype.SAGEMAKER_ENDPOINT
    assert bp.engine.image == "802834080501.dkr.ecr.eu-west-1.amazonaws.com/sagemaker-tritonserver:24.09-py3"
    assert bp.engine.tensor_parallel_degree is None and bp.engine.max_rolling_batch_size is None
    assert bp.compute.instance_type.startswith("ml.")
    assert bp.autoscaling.metric == "SageMakerVariantInvocationsPerInstance"


def test_sagemaker_llm_timers_and_volume_follow_one_startup_budget():
    bp = plan_env(requirements_with("prototype-summarizer"), "pilot")
    s, e = bp.startup, bp.engine
    # The longer of 2x the predicted start and the copy at the slowest rate planned for (tests/test_startup_timers.py).
    health_floor, download_floor = sagemaker_timer_floors(bp.model.weights_gib)
    assert e.container_startup_health_check_timeout_s == max(60, math.ceil(2 * s.pod_start_s), health_floor)
    assert e.model_data_download_timeout_s == max(60, math.ceil(2 * s.weights_download_s), download_floor)
    assert e.volume_size_gib == math.ceil(bp.model.weights_gib * 1.5 + 20)
    assert e.image.endswith("/djl-inference:0.35.0-lmi17.0.0-cu128")
    assert e.tensor_parallel_degree == bp.compute.gpus_per_node
    assert e.max_model_len == 8192 and e.max_rolling_batch_size == bp.predictions.concurrency_per_replica


def test_a_70b_model_on_sagemaker_gets_longer_timers_than_a_7b_model():
    small = plan_env(requirements_with("prototype-summarizer"), "pilot").engine
    data = example_data("prototype-summarizer")
    data["model"] = {**data["model"], "id": "llama-3.1-70b"}
    data["budget"] = {}
    big = plan_env(Requirements.model_validate(data), "pilot")
    assert big.engine.container_startup_health_check_timeout_s > 4 * small.container_startup_health_check_timeout_s
    assert big.engine.tensor_parallel_degree >= 4
    assert big.engine.volume_size_gib > 200


def test_sagemaker_autoscaling_target_is_an_instances_share_of_the_planned_peak_per_minute():
    bp = plan_env(requirements_with("prototype-summarizer"), "pilot")
    per_instance = bp.model.traffic.peak_requests_per_s / bp.compute.replicas
    assert bp.autoscaling.target == pytest.approx(per_instance * 60, abs=0.1)
    assert bp.autoscaling.target <= bp.predictions.requests_per_s_capacity / bp.compute.replicas * 60


def test_a_vision_model_outside_the_catalog_needs_a_measured_latency(catalog):
    data = example_data("support-sentiment")
    data["model"] = {"name": "detector", "task": "vision", "format": "onnx", "weights_uri": "s3://edge-models/det/",
                     "architecture": {"params_b": 0.03, "layers": 50, "hidden_size": 2048, "attention_heads": 1,
                                      "kv_heads": 1, "head_dim": 1}}
    with pytest.raises(ValidationError) as exc:
        Requirements.model_validate(data)
    [(where, message, rule)] = problem_lines(exc.value, data=data)
    assert (where, rule) == ("model.measured_latency_ms", "vision-needs-measurement")
    assert "detector is a vision model without a FLOPs figure" in message and "set measured_latency_ms" in message


def test_a_sagemaker_endpoint_never_scales_to_zero_and_says_so():
    req = requirements_with("prototype-summarizer", environments={"pilot": {"region": "us-east-1", "min_replicas": 0}})
    bp = plan_env(req, "pilot")
    assert bp.autoscaling.min_replicas == 1
    assert ("environments.pilot.min_replicas=0 raised to 1: a SageMaker real-time endpoint keeps one instance"
            in bp.rationale)


def test_a_managed_endpoint_in_a_spot_environment_plans_on_demand_prices_not_an_estimate():
    """Found by the planner's property test: a SageMaker endpoint of a non-generative model in an environment asking
    for spot crashed the plan (its predictions called the on-demand endpoint's cost a spot estimate)."""
    req = Requirements.model_validate({
        "service": "embedder", "owner": "search", "cost_center": "cc-1",
        "model": {"id": "bge-large-en-v1.5", "format": "onnx", "precision": "fp32",
                  "weights_uri": "s3://bucket-name/m/"},
        "traffic": {"peak_requests_per_s": 1, "mean_input_tokens": 16, "pattern": "steady"},
        "slo": {"latency_p95_ms": 200}, "operations": {"preference": "managed"},
        "environments": {"dev": {"region": "us-east-1", "spot": True}, "prod": {"region": "us-east-1"}}})
    bp = plan_env(req, "dev")
    assert bp.archetype is Archetype.SAGEMAKER_ENDPOINT
    assert bp.compute.capacity_type.value == "on-demand" and bp.predictions.cost_is_estimate is False
