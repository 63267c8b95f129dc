"""The PR and deploy workflows: valid GitHub Actions files, and the stack selection they rely on."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from blueprints.stacks import StackRef, affected_stacks, list_stacks
from tests.conftest import ROOT

WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
STACKS = [StackRef("chat-dev", "chat", "dev", False), StackRef("chat-prod", "chat", "prod", True),
          StackRef("search-prod", "search", "prod", True)]


def test_workflows_validate_against_the_github_workflow_schema():
    checker = shutil.which("check-jsonschema") or str(Path(sys.executable).parent / "check-jsonschema")
    result = subprocess.run([checker, "--builtin-schema", "vendor.github-workflows", *map(str, WORKFLOWS)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert len(WORKFLOWS) == 2


def test_pr_workflow_previews_offline_and_with_the_policy_pack():
    wf = yaml.safe_load((ROOT / ".github" / "workflows" / "pull-request.yml").read_text())
    steps = wf["jobs"]["pulumi-preview"]["steps"]
    pulumi_step = next(s for s in steps if s.get("uses", "").startswith("pulumi/actions@"))
    assert pulumi_step["with"]["command"] == "preview"
    assert pulumi_step["with"]["policyPacks"] == "policies"
    offline = "\n".join(s.get("run", "") for s in wf["jobs"]["offline-preview"]["steps"])
    assert "blueprint preview" in offline and "--baseline" in offline
    assert "make test" in wf["jobs"]["test"]["steps"][-1]["run"]


def test_production_deploys_behind_the_production_environment():
    wf = yaml.safe_load((ROOT / ".github" / "workflows" / "deploy.yml").read_text())
    assert wf["jobs"]["up-prod"]["environment"] == "production"
    assert "up-nonprod" in wf["jobs"]["up-prod"]["needs"]


@pytest.mark.parametrize(("changed", "expected"), [
    (["README.md", "tests/test_cli.py"], []),
    (["stacks/Pulumi.chat-prod.yaml"], ["chat-prod"]),
    (["stacks/requirements/chat.yaml"], ["chat-dev", "chat-prod"]),
    (["stacks/requirements/search.yaml", "docs/x.md"], ["search-prod"]),
    (["components/vllm_service.py"], ["chat-dev", "chat-prod", "search-prod"]),
    (["policies/rules.py"], ["chat-dev", "chat-prod", "search-prod"]),
])
def test_affected_stacks_follow_the_changed_files(changed, expected):
    assert [s.stack for s in affected_stacks(changed, STACKS)] == expected


def test_listed_stacks_carry_their_policy_config(tmp_path, chat_prod):
    from blueprints.stackconfig import write_stack_configs

    write_stack_configs([chat_prod], tmp_path, source="req.yaml")
    [ref] = list_stacks(tmp_path, policy_dir=tmp_path / "none")
    assert (ref.stack, ref.environment, ref.production) == ("chat-assistant-prod", "prod", True)
    assert ref.policy_config.endswith("none/prod.json")
