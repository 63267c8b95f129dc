"""Stack configs: lossless, deterministic round trip; all-or-nothing writes; hand edits validated with clear errors."""

from __future__ import annotations

from tests.conftest import PLAN_DATE

import re
from pathlib import Path

import pytest
import yaml

from blueprints.core.errors import StackConfigError
from blueprints.contracts.stackconfig import BLUEPRINT_KEY, read_stack_config, render_stack_config, write_stack_configs
from tests.conftest import plan_env, requirements_with


def test_round_trip_is_lossless(tmp_path, chat_prod):
    [path] = write_stack_configs([chat_prod], tmp_path, source="req.yaml")
    assert path == tmp_path / "Pulumi.chat-assistant-prod.yaml"
    assert read_stack_config(path) == chat_prod


def test_same_requirements_give_byte_identical_files(tmp_path):
    first = tmp_path / "a"
    second = tmp_path / "b"
    req = requirements_with()
    from blueprints.catalog import load_catalog
    from blueprints.plan.planner import plan

    write_stack_configs(plan(req, load_catalog(), as_of=PLAN_DATE), first, source="req.yaml")
    write_stack_configs(plan(requirements_with(), load_catalog(), as_of=PLAN_DATE), second, source="req.yaml")
    names = sorted(p.name for p in first.iterdir())
    assert names == ["Pulumi.chat-assistant-dev.yaml", "Pulumi.chat-assistant-prod.yaml"]
    for name in names:
        assert (first / name).read_bytes() == (second / name).read_bytes()


def test_file_uses_namespaced_keys_and_region(chat_prod):
    data = yaml.safe_load(render_stack_config(chat_prod, source="x.yaml"))
    assert set(data["config"]) == {"aws:region", BLUEPRINT_KEY}
    assert data["config"]["aws:region"] == "us-east-1"
    assert data["config"][BLUEPRINT_KEY]["archetype"] == "vllm-gpu"


def _edit(tmp_path: Path, bp, mutate) -> Path:
    [path] = write_stack_configs([bp], tmp_path, source="req.yaml")
    data = yaml.safe_load(path.read_text())
    mutate(data["config"])
    path.write_text(yaml.safe_dump(data))
    return path


def test_hand_edit_with_wrong_type_names_the_field(tmp_path, chat_prod):
    path = _edit(tmp_path, chat_prod,
                 lambda c: c[BLUEPRINT_KEY]["engine"].__setitem__("tensor_parallel_size", "two"))
    with pytest.raises(StackConfigError) as exc:
        read_stack_config(path)
    assert str(path) in str(exc.value)
    # The exact field: the engine's union tag (`vllm`) is no part of the path a user edits.
    assert "servingblueprints:blueprint.engine.tensor_parallel_size: expected a whole number, got a string 'two'" \
        in str(exc.value)


def test_hand_edit_with_unknown_field_is_rejected(tmp_path, chat_prod):
    path = _edit(tmp_path, chat_prod, lambda c: c[BLUEPRINT_KEY]["compute"].__setitem__("gpus", 4))
    with pytest.raises(StackConfigError, match=r"compute\.gpus: unknown field"):
        read_stack_config(path)


def test_tensor_parallel_that_does_not_divide_the_node_is_rejected(tmp_path, chat_prod):
    path = _edit(tmp_path, chat_prod, lambda c: c[BLUEPRINT_KEY]["compute"].__setitem__("gpus_per_replica", 3))
    compute = chat_prod.compute
    assert compute.gpus_per_node % 3  # the premise: 3 does not divide the planned node's GPUs
    with pytest.raises(StackConfigError, match=re.escape(f"gpus_per_replica=3 must divide the {compute.gpus_per_node} "
                                                         f"GPUs of {compute.instance_type}")):
        read_stack_config(path)


def test_production_scaled_to_zero_by_hand_is_rejected(tmp_path, chat_prod):
    path = _edit(tmp_path, chat_prod, lambda c: c[BLUEPRINT_KEY]["autoscaling"].__setitem__("min_replicas", 0))
    with pytest.raises(StackConfigError, match="production stack never scales to zero"):
        read_stack_config(path)


def test_region_mismatch_between_keys_is_rejected(tmp_path, chat_prod):
    path = _edit(tmp_path, chat_prod, lambda c: c.__setitem__("aws:region", "eu-west-1"))
    with pytest.raises(StackConfigError, match="aws:region is 'eu-west-1' but the blueprint's region is 'us-east-1'"):
        read_stack_config(path)


def test_file_without_blueprint_key_is_rejected(tmp_path):
    path = tmp_path / "Pulumi.x-dev.yaml"
    path.write_text("config:\n  aws:region: us-east-1\n")
    with pytest.raises(StackConfigError, match="regenerate it with `blueprint plan`"):
        read_stack_config(path)


def test_missing_file_says_to_plan_first(tmp_path):
    with pytest.raises(StackConfigError, match="run `blueprint plan` first"):
        read_stack_config(tmp_path / "Pulumi.none.yaml")


def test_unwritable_directory_writes_nothing(tmp_path, chat_prod):
    blocker = tmp_path / "stacks"
    blocker.write_text("a file where the folder should be")
    with pytest.raises(StackConfigError, match="cannot write stack configs"):
        write_stack_configs([chat_prod], blocker, source="req.yaml")
    assert blocker.read_text() == "a file where the folder should be"


def test_dev_and_prod_are_planned_separately():
    req = requirements_with()
    dev, prod = plan_env(req, "dev"), plan_env(req, "prod")
    assert dev.compute.capacity_type.value == "spot" and prod.compute.capacity_type.value == "on-demand"
    assert dev.autoscaling.min_replicas == 0 and prod.autoscaling.min_replicas >= 2  # scale to zero / availability
    assert dev.predictions.cost_is_estimate and not prod.predictions.cost_is_estimate
    assert dev.storage.retain_on_delete is False and prod.storage.retain_on_delete is True


def test_replanning_keeps_secrets_and_other_settings(tmp_path, chat_prod):
    [path] = write_stack_configs([chat_prod], tmp_path, source="req.yaml")
    data = yaml.safe_load(path.read_text())
    data["encryptionsalt"] = "v1:abc:def"
    data["config"]["servingblueprints:kubeconfig"] = {"secure": "v1:ciphertext"}
    data["config"]["aws:region"] = "eu-west-1"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    write_stack_configs([chat_prod], tmp_path, source="req.yaml")
    again = yaml.safe_load(path.read_text())
    assert again["encryptionsalt"] == "v1:abc:def"
    assert again["config"]["servingblueprints:kubeconfig"] == {"secure": "v1:ciphertext"}
    assert again["config"]["aws:region"] == "us-east-1"
    assert read_stack_config(path) == chat_prod


def test_unreadable_existing_file_is_not_overwritten(tmp_path, chat_prod):
    path = tmp_path / "Pulumi.chat-assistant-prod.yaml"
    path.write_text("config: [unclosed\n")
    with pytest.raises(StackConfigError, match="fix or delete it before re-planning"):
        write_stack_configs([chat_prod], tmp_path, source="req.yaml")
    assert path.read_text() == "config: [unclosed\n"
