"""The PR and deploy workflows: valid GitHub Actions files, and the stack selection they rely on."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from blueprints.review.stacks import StackRef, affected_stacks, list_stacks
from tests.conftest import ROOT

WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
STACKS = [StackRef("platform-dev-us-west-2", "platform", "dev", False, kind="platform"),
          StackRef("platform-prod-us-east-1", "platform", "prod", True, kind="platform"),
          StackRef("chat-dev", "chat", "dev", False, platform="platform-dev-us-west-2"),
          StackRef("chat-prod", "chat", "prod", True, platform="platform-prod-us-east-1"),
          StackRef("search-prod", "search", "prod", True, platform="platform-prod-us-east-1")]
ALL = [s.stack for s in STACKS]


def test_workflows_validate_against_the_github_workflow_schema():
    checker = shutil.which("check-jsonschema") or str(Path(sys.executable).parent / "check-jsonschema")
    result = subprocess.run([checker, "--builtin-schema", "vendor.github-workflows", *map(str, WORKFLOWS)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert len(WORKFLOWS) == 2


def test_pr_workflow_previews_offline_and_with_the_policy_pack():
    wf = yaml.safe_load((ROOT / ".github" / "workflows" / "pull-request.yml").read_text())
    steps = wf["jobs"]["pulumi-preview"]["steps"]
    pulumi_step = next(s for s in steps if s.get("uses", "").startswith("pulumi/actions@") and "with" in s)
    assert pulumi_step["with"]["command"] == "preview"
    assert pulumi_step["with"]["policyPacks"] == "policies"
    offline = "\n".join(s.get("run", "") for s in wf["jobs"]["offline-preview"]["steps"])
    assert "blueprint preview" in offline and "--baseline" in offline
    # the test job runs what CI runs on a clean machine: the suite, its slow part, then the capacity fit's check
    assert wf["jobs"]["test"]["steps"][-1]["run"] == ".ci/run"
    commands = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.startswith("make ")]
    assert commands == ["make test", "make test-slow", "make fit-check"]


def test_production_deploys_behind_the_production_environment():
    wf = yaml.safe_load((ROOT / ".github" / "workflows" / "deploy.yml").read_text())
    assert wf["jobs"]["up-prod"]["environment"] == "production"
    assert "up-nonprod" in wf["jobs"]["up-prod"]["needs"]


def test_platforms_deploy_before_services_and_are_destroyed_after_them():
    jobs = yaml.safe_load((ROOT / ".github" / "workflows" / "deploy.yml").read_text())["jobs"]
    assert "up-platforms" in jobs["up-nonprod"]["needs"] and "up-platforms" in jobs["up-prod"]["needs"]
    assert "destroy-services" in jobs["destroy-platforms"]["needs"]
    assert "destroy-platforms" in jobs["up-platforms"]["needs"]
    assert "kind == \"platform\"" in jobs["stacks"]["steps"][-2]["run"]
    destroy = next(s for s in jobs["destroy-services"]["steps"] if s.get("uses", "").startswith("pulumi/actions@"))
    assert destroy["with"]["command"] == "destroy"


def test_every_job_touching_a_cluster_runs_where_its_stack_says():
    """A private platform's API is reachable only from its VPC: those jobs take `runs-on` from the stack list."""
    for name in ("deploy.yml", "pull-request.yml"):
        jobs = yaml.safe_load((ROOT / ".github" / "workflows" / name).read_text())["jobs"]
        for job_name, job in jobs.items():
            if any(s.get("uses", "").startswith("pulumi/actions@") for s in job.get("steps", [])):
                assert job["runs-on"] == "${{ matrix.runs_on }}", (name, job_name)


@pytest.mark.parametrize(("changed", "expected"), [
    (["README.md", "tests/test_cli.py"], []),
    (["stacks/Pulumi.chat-prod.yaml"], ["chat-prod"]),
    # A platform the change touches brings every service on it (its posture or add-ons may no longer fit them).
    (["stacks/requirements/chat.yaml"], ALL),
    (["stacks/requirements/search.yaml", "docs/x.md"], ["platform-prod-us-east-1", "chat-prod", "search-prod"]),
    (["stacks/requirements/platform.yaml"], ALL),
    (["stacks/Pulumi.platform-prod-us-east-1.yaml"], ["platform-prod-us-east-1", "chat-prod", "search-prod"]),
    (["components/vllm_service.py"], ALL),
    (["policies/rules.py"], ALL),
])
def test_affected_stacks_follow_the_changed_files_in_deploy_order(changed, expected):
    assert [s.stack for s in affected_stacks(changed, STACKS)] == expected


def test_a_requirements_file_maps_to_stacks_by_the_service_it_declares_not_its_name(tmp_path):
    (tmp_path / "stacks" / "requirements").mkdir(parents=True)
    (tmp_path / "stacks" / "requirements" / "my-chat.yaml").write_text("service: chat\nowner: x\n")
    found = affected_stacks(["stacks/requirements/my-chat.yaml"], STACKS, root=tmp_path)
    assert [s.stack for s in found] == ALL


def test_services_on_a_private_platform_run_on_its_self_hosted_runner():
    refs = {r.stack: r for r in list_stacks(ROOT / "stacks", policy_dir=ROOT / "policies" / "config")}
    assert [r.kind for r in refs.values()][:5] == ["platform"] * 5  # platforms first
    assert refs["platform-prod-eu-central-1"].runs_on == ["self-hosted", "servingblueprints-eu-central-1"]
    assert refs["regulated-assistant-prod"].runs_on == ["self-hosted", "servingblueprints-eu-central-1"]
    assert refs["regulated-assistant-prod"].platform == "platform-prod-eu-central-1"
    assert refs["chat-assistant-prod"].runs_on == ["ubuntu-latest"]


def test_listed_stacks_carry_their_policy_config(tmp_path, chat_prod):
    from tests.conftest import write_stacks

    write_stacks([chat_prod], tmp_path)  # with its platform: CI refuses a service whose platform has no stack config
    refs = {r.stack: r for r in list_stacks(tmp_path, policy_dir=tmp_path / "none")}
    assert list(refs) == ["platform-prod-us-east-1", "chat-assistant-prod"]  # deploy order
    ref = refs["chat-assistant-prod"]
    assert (ref.stack, ref.environment, ref.production) == ("chat-assistant-prod", "prod", True)
    assert ref.policy_config.endswith("none/prod.json")
