"""The `blueprint` CLI: success paths print and write; user errors exit 2 with a message and no traceback."""

from __future__ import annotations

import json
import shutil

import jsonschema
import pytest
import yaml
from typer.testing import CliRunner

from blueprints.cli import app
from tests.conftest import CHAT_EXAMPLE, ROOT, example_data

runner = CliRunner()


@pytest.fixture()
def project(tmp_path, monkeypatch):
    """A copy of the project layout (program + example) in a temp dir, as the working directory."""
    shutil.copy(ROOT / "__main__.py", tmp_path / "__main__.py")
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    (tmp_path / "stacks" / "requirements").mkdir(parents=True)
    shutil.copy(CHAT_EXAMPLE, tmp_path / "stacks" / "requirements" / "chat-assistant.yaml")
    shutil.copytree(ROOT / "policies" / "config", tmp_path / "policies" / "config")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_plan_writes_one_stack_config_per_environment(project):
    result = runner.invoke(app, ["plan", "stacks/requirements/chat-assistant.yaml"])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (project / "stacks").glob("Pulumi.*.yaml")) == [
        "Pulumi.chat-assistant-dev.yaml", "Pulumi.chat-assistant-prod.yaml", "Pulumi.platform-dev-us-west-2.yaml",
        "Pulumi.platform-prod-us-east-1.yaml"]
    assert "vllm-gpu" in result.output and "chat-assistant-prod" in result.output
    assert "platform-prod-us-east-1  shared platform (eks)" in result.output


def test_plan_twice_gives_byte_identical_files(project):
    runner.invoke(app, ["plan", "stacks/requirements/chat-assistant.yaml"])
    first = (project / "stacks" / "Pulumi.chat-assistant-prod.yaml").read_bytes()
    runner.invoke(app, ["plan", "stacks/requirements/chat-assistant.yaml"])
    assert (project / "stacks" / "Pulumi.chat-assistant-prod.yaml").read_bytes() == first


def test_plan_one_environment_as_json(project):
    result = runner.invoke(app, ["plan", "stacks/requirements/chat-assistant.yaml", "--env", "prod", "--json",
                                 "--out-dir", "out"])
    assert result.exit_code == 0, result.output
    [platform, entry] = json.loads(result.output)
    assert platform["stack"] == "platform-prod-us-east-1" and platform["platform"]["kind"] == "eks"
    assert entry["stack"] == "chat-assistant-prod"
    assert entry["blueprint"]["archetype"] == "vllm-gpu"
    assert (project / "out" / "Pulumi.chat-assistant-prod.yaml").exists()
    assert not (project / "out" / "Pulumi.chat-assistant-dev.yaml").exists()


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda d: d["traffic"].update(peak_rps=3), "traffic.peak_rps: unknown field"),
    (lambda d: d["traffic"].update(peak_requests_per_s=-2), "traffic.peak_requests_per_s: Input should be greater than or equal to 0.001"),
    (lambda d: d["model"].update(id="llama-3.1-8"), "unknown model id 'llama-3.1-8'; did you mean llama-3.1-8b"),
    (lambda d: d["slo"].update(itl_p95_ms="fast"), "slo.itl_p95_ms"),
    (lambda d: d.pop("owner"), "owner: Field required"),
])
def test_bad_requirements_exit_2_with_message_and_write_nothing(project, mutate, message):
    data = example_data()
    data["service"] = "chat-draft"  # a draft planned from elsewhere may not redeclare a service of the project
    mutate(data)
    path = project / "drafts" / "bad.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(data))
    result = runner.invoke(app, ["plan", str(path)])
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output
    assert list((project / "stacks").glob("Pulumi.*.yaml")) == []


def test_malformed_yaml_exits_2(project):
    path = project / "broken.yaml"
    path.write_text("service: [x\n")
    result = runner.invoke(app, ["plan", str(path)])
    assert result.exit_code == 2 and "RequirementsError" in result.output and "not valid YAML" in result.output


def test_unknown_environment_exits_2(project):
    result = runner.invoke(app, ["plan", "stacks/requirements/chat-assistant.yaml", "--env", "qa"])
    assert result.exit_code == 2 and "--env qa: not in the requirements' environments (dev, prod)" in result.output


def test_preview_lists_resources_after_plan(project):
    runner.invoke(app, ["plan", "stacks/requirements/chat-assistant.yaml"])
    result = runner.invoke(app, ["preview", "chat-assistant-prod", "--json", "--out", "review"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["archetype"] == "vllm-gpu"
    assert any(r["type"] == "aws:s3/bucket:Bucket" for r in data["resources"])
    written = sorted(p.name for p in (project / "review" / "manifests").iterdir())
    assert any("deployment" in name for name in written)
    assert json.loads((project / "review" / "plan.json").read_text())["stack"] == "chat-assistant-prod"


def test_preview_terminal_view_names_the_deployment(project):
    runner.invoke(app, ["plan", "stacks/requirements/chat-assistant.yaml"])
    result = runner.invoke(app, ["preview", "chat-assistant-prod"])
    assert result.exit_code == 0, result.output
    assert "kubernetes:apps/v1:Deployment" in result.output
    assert "all valid" in result.output


def test_preview_of_hand_broken_stack_exits_2(project):
    runner.invoke(app, ["plan", "stacks/requirements/chat-assistant.yaml"])
    path = project / "stacks" / "Pulumi.chat-assistant-prod.yaml"
    path.write_text(path.read_text().replace("tensor_parallel_size: 1", "tensor_parallel_size: -1"))
    result = runner.invoke(app, ["preview", "chat-assistant-prod"])
    assert result.exit_code == 2
    assert "StackConfigError" in result.output and "tensor_parallel_size" in result.output


def test_preview_of_unknown_stack_exits_2(project):
    result = runner.invoke(app, ["preview", "nope-prod"])
    assert result.exit_code == 2 and "no such stack config" in result.output


def test_schema_validates_the_bundled_example_and_rejects_typos():
    result = runner.invoke(app, ["schema"])
    assert result.exit_code == 0
    schema = json.loads(result.stdout)
    example = yaml.safe_load(CHAT_EXAMPLE.read_text())
    jsonschema.validate(example, schema)
    example["traffic"]["peak_rps"] = 1
    with pytest.raises(jsonschema.ValidationError, match="peak_rps"):
        jsonschema.validate(example, schema)


def test_help_explains_commands():
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("plan", "preview", "schema"):
        assert command in result.output
