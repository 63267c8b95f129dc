"""Project paths: the policy folder resolves from the project root (the folder holding Pulumi.yaml, found from the
requirements file, else the working directory), a missing one is an error unless --no-policy, and
`blueprint stacks --changed` maps requirements files to stacks by the service they declare."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml
from typer.testing import CliRunner

from blueprints.cli import app
from blueprints.contracts.stackconfig import read_stack_config
from tests.conftest import CHAT_EXAMPLE, ROOT

runner = CliRunner()


@pytest.fixture()
def project(tmp_path):
    """A project whose prod policy allows only g6e GPUs (and m7i system nodes), and a requirements file named
    `my-chat.yaml` declaring service `chat`, with no family restriction of its own (the guardrails test sets the
    policy's family itself, from the unrestricted plan)."""
    root = tmp_path / "project"
    (root / "stacks" / "requirements").mkdir(parents=True)
    shutil.copy(ROOT / "Pulumi.yaml", root / "Pulumi.yaml")
    shutil.copytree(ROOT / "policies" / "config", root / "policies" / "config")
    prod = json.loads((root / "policies" / "config" / "prod.json").read_text())
    prod["instance-types-allowed"]["allowedInstanceFamilies"] = ["g6e", "m7i"]
    (root / "policies" / "config" / "prod.json").write_text(json.dumps(prod))
    data = yaml.safe_load(CHAT_EXAMPLE.read_text())
    data["service"] = "chat"
    data["hardware"]["allowed_instance_families"] = []
    data["environments"] = {"prod": data["environments"]["prod"]}
    (root / "stacks" / "requirements" / "my-chat.yaml").write_text(yaml.safe_dump(data))
    (root / "stacks" / "requirements" / "platform.yaml").write_text(
        "alerting: {receiver: slack}\nplatforms:\n  prod-us-east-1: {audit_logging: true}\n")
    return root


def family_of(stack_file) -> str:
    return read_stack_config(stack_file).compute.instance_type.split(".")[0]


def test_planned_from_another_directory_the_projects_guardrails_still_apply(project, tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    requirements = str(project / "stacks" / "requirements" / "my-chat.yaml")
    # Without the policy: the cheapest family, into --out-dir (relative to the working directory).
    result = runner.invoke(app, ["plan", requirements, "--as-of", "2026-12-01", "--no-policy", "--out-dir", "free"])
    assert result.exit_code == 0, result.output
    free = elsewhere / "free" / "Pulumi.chat-prod.yaml"
    # The project's prod policy allows only a family that also serves the model but is not the cheapest (and the
    # system nodes'): the guardrail decides. (The runner-up may be a larger type of the cheapest family.)
    cheapest = family_of(free)
    other = next(f for f in ("g6e", "p5") if f != cheapest)
    policy = project / "policies" / "config" / "prod.json"
    prod = json.loads(policy.read_text())
    prod["instance-types-allowed"]["allowedInstanceFamilies"] = [other, "m7i"]
    policy.write_text(json.dumps(prod))
    in_cwd = {f: f.read_bytes() for f in elsewhere.rglob("*") if f.is_file()}
    result = runner.invoke(app, ["plan", requirements, "--as-of", "2026-12-01"])
    assert result.exit_code == 0, result.output
    written = project / "stacks" / "Pulumi.chat-prod.yaml"  # the project's stack folder, not the working directory
    assert {f: f.read_bytes() for f in elsewhere.rglob("*") if f.is_file()} == in_cwd  # nothing written there
    assert family_of(written) == other


def test_a_requirements_file_outside_the_project_is_refused_naming_the_requirements_folder(project, tmp_path,
                                                                                           monkeypatch):
    """Planned from outside, it would land on the project's platforms until the next plan of another service, which
    reads the folder only, dropped it again."""
    outside = tmp_path / "chat.yaml"
    shutil.copy(project / "stacks" / "requirements" / "my-chat.yaml", outside)
    (project / "stacks" / "requirements" / "my-chat.yaml").unlink()
    monkeypatch.chdir(project)
    result = runner.invoke(app, ["plan", str(outside), "--as-of", "2026-12-01"])
    assert result.exit_code == 2, result.output
    assert "a requirements file lives in the requirements folder stacks/requirements" in result.output
    assert list((project / "stacks").glob("Pulumi.*.yaml")) == []


def test_a_missing_policy_folder_is_an_error_naming_the_fix_unless_no_policy(project, monkeypatch):
    shutil.rmtree(project / "policies")
    monkeypatch.chdir(project)
    result = runner.invoke(app, ["plan", "stacks/requirements/my-chat.yaml", "--as-of", "2026-12-01"])
    assert result.exit_code == 2
    assert "no policy config folder" in result.output and "--no-policy" in result.output
    assert "Traceback" not in result.output
    assert not list((project / "stacks").glob("Pulumi.*.yaml"))  # nothing written
    result = runner.invoke(app, ["plan", "stacks/requirements/my-chat.yaml", "--as-of", "2026-12-01", "--no-policy"])
    assert result.exit_code == 0, result.output


def test_stacks_changed_maps_a_requirements_file_to_the_stacks_of_the_service_it_declares(project, monkeypatch):
    monkeypatch.chdir(project)
    assert runner.invoke(app, ["plan", "stacks/requirements/my-chat.yaml", "--as-of", "2026-12-01"]).exit_code == 0
    (project / "changed.txt").write_text("stacks/requirements/my-chat.yaml\nREADME.md\n")
    result = runner.invoke(app, ["stacks", "--changed", "changed.txt", "--json"])
    assert result.exit_code == 0, result.output
    assert [r["stack"] for r in json.loads(result.output)] == ["platform-prod-us-east-1", "chat-prod"]
