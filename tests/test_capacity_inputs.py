"""New capacity inputs are bounded and validated where they enter: traffic length percentiles, the quantisation
method, and mixture-of-experts / vocabulary fields of an architecture. Files written before them keep their
meaning."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from blueprints.catalog import Architecture
from blueprints.core.errors import RequirementsError
from blueprints.requirements.service import Requirements, load_requirements, requirements_json_schema
from blueprints.requirements.model import Quantization
from tests.conftest import CHAT_EXAMPLE, example_data, plan_env, requirements_with

DENSE = {"params_b": 8.03, "layers": 32, "hidden_size": 4096, "attention_heads": 32, "kv_heads": 8, "head_dim": 128}


def _load(tmp_path, data) -> Requirements:
    import yaml

    path = tmp_path / "req.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_requirements(path)


def test_length_percentiles_are_optional_and_old_files_plan_as_before():
    req = load_requirements(CHAT_EXAMPLE)
    assert req.traffic.input_tokens_p95 is None and req.traffic.output_tokens_p95 is None
    assert req.model.quantization is None and req.model.quantization_method is None


def test_a_p95_below_its_mean_names_the_field_and_the_fix(tmp_path):
    data = example_data()
    data["traffic"]["input_tokens_p95"] = 800  # mean 1200
    with pytest.raises(RequirementsError, match=r"(?s)req.yaml: .*traffic.input_tokens_p95: input_tokens_p95=800 is "
                                                r"below mean_input_tokens=1200.*raise input_tokens_p95 to >= 1200"):
        _load(tmp_path, data)


def test_a_p95_beyond_what_the_length_model_can_express_is_refused(tmp_path):
    data = example_data()
    data["traffic"]["output_tokens_p95"] = 2000  # mean 300: 6.7x
    with pytest.raises(RequirementsError, match=r"output_tokens_p95=2000 is more than 3.5x mean_output_tokens=300; .*"
                                                r"lower output_tokens_p95 to <= 1050"):
        _load(tmp_path, data)


@pytest.mark.parametrize("value", [0, -5, 2_000_000])
def test_a_p95_outside_its_bounds_is_refused(tmp_path, value):
    data = example_data()
    data["traffic"]["input_tokens_p95"] = value
    with pytest.raises(RequirementsError, match="input_tokens_p95"):
        _load(tmp_path, data)


def test_p95_lengths_must_fit_the_context_together(tmp_path):
    data = example_data()
    data["traffic"].update(input_tokens_p95=4000, output_tokens_p95=1000)
    data["model"]["max_context_tokens"] = 4096
    with pytest.raises(RequirementsError, match=r"model.max_context_tokens: a p95 request \(input_tokens_p95 \+ "
                                                r"output_tokens_p95.* = 5000\) exceeds max_context_tokens=4096.*raise "
                                                r"max_context_tokens"):
        _load(tmp_path, data)


def test_p95_lengths_on_a_non_generative_model_are_an_error(tmp_path):
    data = example_data("edge-classifier")
    data["traffic"]["input_tokens_p95"] = 300
    with pytest.raises(RequirementsError, match=r"traffic.input_tokens_p95: input_tokens_p95 applies to text "
                                                r"generation; ticket-sentiment is a classification model"):
        _load(tmp_path, data)


def test_longer_p95_prompts_cost_at_least_as_much():
    # What the search minimises: the nodes at the planned peak. (The plan's monthly_cost_usd is at max_replicas, whose
    # headroom over the peak differs between a fleet of many small replicas and one of few large ones.)
    from blueprints.catalog import load_catalog
    from blueprints.plan.options.llm import llm_option_on, llm_search
    from blueprints.plan.options.search import resolve_models

    catalog = load_catalog()
    base, long = requirements_with(), requirements_with(traffic={"input_tokens_p95": 4000})
    found = {}
    for name, req in (("base", base), ("long", long)):
        [model] = resolve_models(req, catalog)
        found[name] = (req, model, llm_search(req, "prod", model, catalog).best)
    assert found["long"][2].monthly_node_usd_per_hour >= found["base"][2].monthly_node_usd_per_hour
    # On the base plan's hardware the longer prompts need at least as many replicas.
    chosen = found["base"][2]
    on = {name: llm_option_on(req, "prod", model, catalog, instance_type=chosen.instance.instance_type,
                              tensor_parallel_size=chosen.tensor_parallel_size,
                              kv_cache_fp8=chosen.kv_cache_dtype == "fp8", managed=False)
          for name, (req, model, _) in found.items()}
    assert on["long"][0].replicas >= on["base"][0].replicas


def test_a_quantization_method_must_match_the_precision(tmp_path):
    data = example_data()
    data["model"]["quantization"] = "awq"  # precision bf16
    with pytest.raises(RequirementsError, match=r"model.quantization: quantization `awq` comes with precision int4, "
                                                r"not `bf16`; set precision to int4 or drop quantization"):
        _load(tmp_path, data)
    data["model"]["quantization"] = "awq4"
    with pytest.raises(RequirementsError, match=r"model.quantization: Input should be 'awq', 'gptq', 'fp8' or 'w8a8'"):
        _load(tmp_path, data)


def test_a_quantization_method_is_implied_by_the_precision_when_omitted():
    assert requirements_with(model={"precision": "int4"}).model.quantization_method is Quantization.AWQ
    assert requirements_with(model={"precision": "int8"}).model.quantization_method is Quantization.GPTQ
    explicit = requirements_with(model={"precision": "int4", "quantization": "gptq"})
    assert explicit.model.quantization_method is Quantization.GPTQ


def test_moe_fields_come_together_and_agree_with_the_active_parameters():
    mixtral = {**DENSE, "params_b": 46.7, "experts": 8, "experts_per_token": 2, "shared_params_b": 1.61}
    assert Architecture.model_validate(mixtral).active_b == pytest.approx(12.88, abs=0.01)
    with pytest.raises(ValidationError, match="gives `experts`, `experts_per_token` and `shared_params_b` together"):
        Architecture.model_validate({**DENSE, "experts": 8})
    with pytest.raises(ValidationError, match="experts_per_token=9 exceeds experts=8"):
        Architecture.model_validate({**mixtral, "experts_per_token": 9})
    with pytest.raises(ValidationError, match="shared_params_b=50.0 must be below params_b=46.7"):
        Architecture.model_validate({**mixtral, "shared_params_b": 50})
    with pytest.raises(ValidationError, match="active_params_b=30.0 disagrees with the MoE fields, which give 12.88"):
        Architecture.model_validate({**mixtral, "active_params_b": 30.0})


def test_a_vocabulary_larger_than_the_model_is_a_units_mistake():
    with pytest.raises(ValidationError, match=r"vocab_size=128256 x hidden_size=4096 x 2 \(untied\) is more than "
                                              r"params_b=0.5 billion; check the units"):
        Architecture.model_validate({**DENSE, "params_b": 0.5, "vocab_size": 128256})


def test_the_json_schema_describes_the_new_fields():
    schema = requirements_json_schema()
    traffic = schema["$defs"]["Traffic"]["properties"]
    assert "input_tokens_p95" in traffic and "output_tokens_p95" in traffic
    assert "quantization" in schema["$defs"]["ModelSpec"]["properties"]
    assert {"experts", "experts_per_token", "shared_params_b", "vocab_size"} <= set(
        schema["$defs"]["Architecture"]["properties"])
