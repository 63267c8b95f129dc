"""The requirements schema: strict, with messages that name the file, the field and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pydantic import ValidationError

from blueprints.core.errors import RequirementsError, problem_lines
from blueprints.requirements.service import Requirements, load_requirements
from blueprints.requirements.model import Precision
from tests.conftest import CHAT_EXAMPLE, example_data


def problems_of(data: dict) -> list[tuple[str, str, str | None]]:
    """(field path, message, cross-field rule) of each problem `Requirements` finds in `data`."""
    with pytest.raises(ValidationError) as exc:
        Requirements.model_validate(data)
    return problem_lines(exc.value, data=data)


def write(tmp_path: Path, data) -> Path:
    path = tmp_path / "svc.yaml"
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return path


def test_bundled_example_loads_with_its_values():
    req = load_requirements(CHAT_EXAMPLE)
    assert req.service == "chat-assistant"
    assert req.model.id == "llama-3.1-8b"
    assert req.model.precision is Precision.BF16
    assert req.traffic.peak_requests_per_s == 20
    assert req.slo.itl_p95_ms == 50
    assert set(req.environments) == {"dev", "prod"}
    assert req.is_production("prod") and not req.is_production("dev")


def test_misspelt_field_is_an_error_naming_file_and_path(tmp_path):
    data = example_data()
    data["traffic"]["peak_request_per_s"] = 3
    path = write(tmp_path, data)
    with pytest.raises(RequirementsError) as exc:
        load_requirements(path)
    assert str(path) in str(exc.value)
    assert "traffic.peak_request_per_s: unknown field" in str(exc.value)


def test_wrong_type_names_the_field_and_the_value(tmp_path):
    data = example_data()
    data["slo"]["itl_p95_ms"] = "fast"
    with pytest.raises(RequirementsError, match=r"slo\.itl_p95_ms: expected a number or null, got a string 'fast'"):
        load_requirements(write(tmp_path, data))


def test_negative_traffic_is_rejected(tmp_path):
    data = example_data()
    data["traffic"]["peak_requests_per_s"] = -1
    with pytest.raises(RequirementsError, match=r"traffic\.peak_requests_per_s: Input should be greater than or equal "
                       r"to 0\.001 \(got -1\): a peak is 0\.001-100,000 requests/s"):
        load_requirements(write(tmp_path, data))


def test_missing_required_section_is_named(tmp_path):
    data = example_data()
    del data["environments"]
    with pytest.raises(RequirementsError, match=r"environments: missing: add `environments` \(environment name -> "
                       r"settings\)"):
        load_requirements(write(tmp_path, data))


def test_malformed_yaml_reports_line(tmp_path):
    with pytest.raises(RequirementsError, match=r"not valid YAML at line 2"):
        load_requirements(write(tmp_path, "service: x\n  model: [unclosed\n"))


def test_top_level_list_is_rejected(tmp_path):
    with pytest.raises(RequirementsError, match="expected a mapping"):
        load_requirements(write(tmp_path, "- a\n- b\n"))


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(RequirementsError, match="cannot read requirements file"):
        load_requirements(tmp_path / "nope.yaml")


def test_region_outside_compliance_list_is_rejected():
    data = example_data()
    data["environments"]["prod"]["region"] = "eu-west-1"
    [(where, message, rule)] = problems_of(data)
    assert where == "environments.prod.region" and rule == "region-allowed"
    assert message.startswith("'eu-west-1' is not in compliance.regions_allowed ['us-east-1', 'us-west-2']")


def test_spot_in_production_is_rejected():
    data = example_data()
    data["environments"]["prod"]["spot"] = True
    with pytest.raises(ValueError, match="spot capacity is not allowed in production"):
        Requirements.model_validate(data)


def test_production_scale_to_zero_is_rejected():
    data = example_data()
    data["environments"]["prod"]["min_replicas"] = 0
    with pytest.raises(ValueError, match="production never scales to zero"):
        Requirements.model_validate(data)


def test_model_and_models_are_exclusive():
    data = example_data()
    data["models"] = [dict(data["model"], traffic=data["traffic"])]
    with pytest.raises(ValueError, match="exactly one of `model`"):
        Requirements.model_validate(data)


def test_explicit_architecture_needs_name_and_task():
    data = example_data()
    data["model"] = {"architecture": {"params_b": 3, "layers": 28, "hidden_size": 3072, "attention_heads": 24,
                                      "kv_heads": 8, "head_dim": 128}, "weights_uri": "s3://my-models/x/"}
    with pytest.raises(ValueError, match="also needs `name` and `task`"):
        Requirements.model_validate(data)


def test_service_must_be_a_dns_label():
    data = example_data()
    data["service"] = "Chat_Assistant"
    with pytest.raises(ValueError, match="service"):
        Requirements.model_validate(data)


def test_instance_types_are_not_families():
    data = example_data()
    data["hardware"]["allowed_instance_families"] = ["g6e.xlarge"]
    with pytest.raises(ValueError, match="families are prefixes"):
        Requirements.model_validate(data)


def test_an_unquoted_yaml_boolean_gets_a_hint_to_quote_it(tmp_path):
    data = example_data()
    data["environments"] = {False: {"region": "us-east-1"}}  # what `no:` becomes in YAML 1.1
    with pytest.raises(RequirementsError, match="quote the value"):
        load_requirements(write(tmp_path, data))
