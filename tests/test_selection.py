"""Archetype selection: each archetype is chosen for the requirements it is meant for, with reasons in words."""

from __future__ import annotations

from tests.conftest import PLAN_DATE

import math

import pytest

from blueprints.contracts.sections import Archetype
from blueprints.core.errors import RequirementsError, SizingError
from blueprints.plan.options.search import resolve_models
from blueprints.requirements.hosting import Accelerator
from blueprints.plan.selection import reference_environment, select_archetype
from tests.conftest import example_data, requirements_with


def select(req, catalog):
    return select_archetype(req, resolve_models(req, catalog), catalog)


@pytest.mark.parametrize(("example", "archetype"), [
    ("chat-assistant", Archetype.VLLM_GPU),
    ("regulated-assistant", Archetype.VLLM_GPU),
    ("prototype-summarizer", Archetype.SAGEMAKER_ENDPOINT),
    ("search-relevance", Archetype.TRITON_MULTI_MODEL),
    ("support-sentiment", Archetype.ONNX_CPU),
])
def test_each_bundled_example_gets_its_intended_archetype(catalog, example, archetype):
    assert select(requirements_with(example), catalog).archetype is archetype


def test_a_self_hosted_llm_goes_to_vllm_and_says_why(catalog):
    sel = select(requirements_with(), catalog)
    assert sel.archetype is Archetype.VLLM_GPU
    assert sel.reasons[0].startswith("llama-3-1-8b is a generative model: served token by token by vLLM")
    assert sel.reasons[1] == "operations.preference=self-hosted: self-hosted on eks"


def test_managed_preference_sends_an_llm_to_a_sagemaker_endpoint(catalog):
    sel = select(requirements_with(operations={"preference": "managed"}), catalog)
    assert sel.archetype is Archetype.SAGEMAKER_ENDPOINT
    assert any("operations.preference=managed" in r for r in sel.reasons)


SMALL_LOAD = {"traffic": {"peak_requests_per_s": 0.2}, "slo": {"availability_pct": 99.5}}


def _small_load_plans() -> tuple[float, float]:
    """The prod plans of the small chat load self-hosted and on SageMaker (each the archetype's cheapest option: its
    nodes and load balancer, or its endpoint instances): their monthly costs, which selection compares. Today 1x
    g6e.xlarge + NLB = $1,375/month against 1x ml.g6e.2xlarge = $2,044/month."""
    from tests.conftest import plan_env

    hosted = plan_env(requirements_with(operations={"preference": "self-hosted"}, **SMALL_LOAD), "prod")
    managed = plan_env(requirements_with(operations={"preference": "managed"}, **SMALL_LOAD), "prod")
    assert (hosted.archetype, managed.archetype) == (Archetype.VLLM_GPU, Archetype.SAGEMAKER_ENDPOINT)
    return hosted.predictions.monthly_cost_usd, managed.predictions.monthly_cost_usd


def test_small_llm_load_with_any_preference_goes_managed_when_sagemaker_is_within_the_tolerance(catalog):
    # Within a 10 % tolerance it would go managed; further apart a shared platform makes self-hosting win.
    hosted, managed = _small_load_plans()
    assert managed > hosted * 1.10
    req = requirements_with(operations={"preference": "any"}, **SMALL_LOAD)
    sel = select(req, catalog)
    assert sel.archetype is Archetype.VLLM_GPU
    assert sel.reasons[1] == (f"operations.preference=any: in prod self-hosting costs ${hosted:,.0f}/month (its own "
                              f"nodes; the shared platform apart) vs SageMaker ${managed:,.0f}/month, more than 10% "
                              "apart")


def test_a_managed_option_over_budget_is_not_chosen(catalog):
    hosted, managed = _small_load_plans()
    budget = math.floor((hosted + managed) / 2)  # pays for self-hosting, not for SageMaker
    assert hosted < budget < managed
    req = requirements_with(operations={"preference": "any"}, budget={"max_monthly_usd": budget}, **SMALL_LOAD)
    sel = select(req, catalog)
    assert sel.archetype is Archetype.VLLM_GPU
    assert sel.reasons[1] == (f"operations.preference=any: in prod self-hosting costs ${hosted:,.0f}/month (its own "
                              f"nodes; the shared platform apart) vs SageMaker ${managed:,.0f}/month, over "
                              f"budget.max_monthly_usd={budget}")


def test_large_llm_load_with_any_preference_stays_self_hosted_on_cost(catalog):
    req = requirements_with(operations={"preference": "any"}, traffic={"peak_requests_per_s": 40})
    sel = select(req, catalog)
    assert sel.archetype is Archetype.VLLM_GPU
    assert "self-hosting costs $" in sel.reasons[1] and "SageMaker $" in sel.reasons[1]


def test_several_models_go_to_triton_on_gpu(catalog):
    sel = select(requirements_with("search-relevance"), catalog)
    assert sel.archetype is Archetype.TRITON_MULTI_MODEL and sel.accelerator is Accelerator.NVIDIA_GPU
    assert sel.reasons[0].startswith("3 models in one estate: embedder (embedding), reranker (reranking)")


def test_an_estate_without_gpus_runs_triton_on_cpu(catalog):
    req = requirements_with("search-relevance", hardware={"accelerators": ["cpu"], "allowed_instance_families": []})
    sel = select(req, catalog)
    assert sel.archetype is Archetype.TRITON_MULTI_MODEL and sel.accelerator is Accelerator.CPU


def test_no_gpu_sends_a_single_classifier_to_onnx_cpu(catalog):
    sel = select(requirements_with("support-sentiment"), catalog)
    assert sel.archetype is Archetype.ONNX_CPU and sel.accelerator is Accelerator.CPU
    assert "hardware.accelerators excludes nvidia-gpu" in sel.reasons[0]


def test_a_small_onnx_classifier_picks_cpu_when_it_is_cheaper_than_a_gpu(catalog):
    req = requirements_with("support-sentiment", hardware={"accelerators": ["nvidia-gpu", "cpu"], "cpu_arch": None},
                            traffic={"peak_requests_per_s": 5})
    sel = select(req, catalog)
    assert sel.archetype is Archetype.ONNX_CPU
    assert "ONNX Runtime on CPU costs $" in sel.reasons[1] and "Triton on GPU $" in sel.reasons[1]


def test_a_heavy_encoder_load_picks_the_gpu_when_cpu_costs_more(catalog):
    data = example_data("support-sentiment")
    data["model"] = {**data["model"], "id": "bge-large-en-v1.5", "name": "embedder"}
    data["traffic"] = {"peak_requests_per_s": 300, "mean_input_tokens": 256}
    data["hardware"] = {"accelerators": ["nvidia-gpu", "cpu"]}
    data["budget"] = {}
    from blueprints.requirements.service import Requirements

    sel = select(Requirements.model_validate(data), catalog)
    assert sel.archetype is Archetype.TRITON_MULTI_MODEL and sel.accelerator is Accelerator.NVIDIA_GPU


def test_a_non_onnx_model_without_gpus_is_told_to_export_to_onnx(catalog):
    data = example_data("support-sentiment")
    data["model"]["format"] = "safetensors"
    from blueprints.requirements.service import Requirements

    with pytest.raises(RequirementsError, match=r"model.format=safetensors: .* set model.format: onnx"):
        select(Requirements.model_validate(data), catalog)


def test_text_generation_without_gpus_is_refused(catalog):
    with pytest.raises(SizingError, match="hardware.accelerators excludes nvidia-gpu.*add nvidia-gpu"):
        select(requirements_with(hardware={"accelerators": ["cpu"], "allowed_instance_families": []}), catalog)


def test_one_estate_never_selects_an_llm_beside_its_models(catalog):
    """One archetype per stack: `plan` splits such a file into a compound service's parts first
    (tests/test_compound_services.py); selection itself refuses to put an LLM in a Triton estate."""
    data = example_data("search-relevance")
    data["models"].append({"id": "llama-3.1-8b", "weights_uri": "s3://search-models/llama/",
                           "traffic": {"peak_requests_per_s": 1}})
    from blueprints.requirements.service import Requirements

    with pytest.raises(RequirementsError, match=r"\['llama-3-1-8b'\] generate text .* compound service"):
        select(Requirements.model_validate(data), catalog)


def test_managed_preference_for_an_estate_is_an_explicit_contradiction(catalog):
    with pytest.raises(RequirementsError, match="operations.preference=managed: a SageMaker endpoint here serves one"):
        select(requirements_with("search-relevance", operations={"preference": "managed"}), catalog)


def test_managed_preference_in_a_region_without_a_sagemaker_image_names_the_allowed_regions(catalog):
    data = example_data("prototype-summarizer")
    data["compliance"]["regions_allowed"] = ["ap-east-1"]
    data["environments"]["pilot"]["region"] = "ap-east-1"
    from blueprints.requirements.service import Requirements

    with pytest.raises(SizingError, match=r"no SageMaker lmi image for region\(s\) \['ap-east-1'\]; pick a region"):
        select(Requirements.model_validate(data), catalog)


def test_any_preference_in_a_region_without_sagemaker_stays_self_hosted(catalog):
    data = example_data()
    data["operations"]["preference"] = "any"
    data["compliance"]["regions_allowed"] = ["ap-east-1"]
    for env in data["environments"].values():
        env["region"] = "ap-east-1"
    from blueprints.requirements.service import Requirements

    sel = select(Requirements.model_validate(data), catalog)
    assert sel.archetype is Archetype.VLLM_GPU
    assert "no SageMaker LMI image for region(s) ['ap-east-1']" in sel.reasons[1]


def test_costs_are_compared_on_the_busiest_production_environment():
    assert reference_environment(requirements_with()) == "prod"
    assert reference_environment(requirements_with("prototype-summarizer")) == "pilot"


def test_selection_reasons_open_every_blueprints_rationale(catalog):
    from blueprints.plan.planner import plan

    req = requirements_with("search-relevance")
    sel = select(req, catalog)
    for bp in plan(req, catalog, as_of=PLAN_DATE):
        assert bp.rationale[: len(sel.reasons)] == list(sel.reasons)
