"""What the cloud refuses and what the deploy needs: subnets chosen by zone ID outside the zones EKS refuses
(`eks-zones`), and every config key the program requires besides the stack config (`blueprints.contracts.
deploy_inputs`): the program requires exactly those, the preview names each missing one, the workflows and README set
each one."""

from __future__ import annotations

import shutil

import dataclasses
import json
import os
import subprocess
from pathlib import Path

import pulumi
import pytest
import yaml

from blueprints.catalog.huggingface import gated
from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.deploy_inputs import HF_TOKEN_KEY, KUBECONFIG_KEY, deploy_inputs
from blueprints.contracts.stackconfig import ROLES_ANYWHERE_CA_KEY, read_config, read_stack_settings
from blueprints.requirements.platform_file import ALERT_RECEIVER_SECRET_KEY
from blueprints.review.deployability.checks import check_deployability
from blueprints.review.preview import engine_config, platform_stand_in, run_under_mocks
from blueprints.review.preview import PreviewReport
from tests.conftest import ROOT
from tests.bundled import bundled_review
from tests.kept_apart import review

STACKS = ROOT / "stacks"
BUNDLED = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in STACKS.glob("Pulumi.*.yaml"))
#: A bundled stack of each kind, by what the program reads and what it needs set: a platform (its alert receiver), a
#: vLLM service on a planned platform (a gated model's token), one whose weights need none, a Triton service, a
#: SageMaker endpoint (nothing), an edge service (kubeconfig and CA bundle), a service on an existing cluster
#: (kubeconfig). The others, more of the same kinds (other environments, platforms and services), run in
#: `make test-slow`.
REPRESENTATIVE = ["platform-prod-us-east-1", "chat-assistant-prod", "regulated-assistant-prod",
                  "rag-assistant-retrieval-prod", "prototype-summarizer-pilot", "edge-classifier-prod",
                  "support-sentiment-prod"]
assert set(REPRESENTATIVE) <= set(BUNDLED), set(REPRESENTATIVE) - set(BUNDLED)


def _required_by_the_program(stack: str) -> set[str]:
    """The config keys the program fails without: run it with none of the deploy inputs, adding each key it names."""
    import runpy

    path = STACKS / f"Pulumi.{stack}.yaml"
    subject, entries = read_stack_settings(path)
    config, secrets, stood_in = engine_config(entries, subject)
    for item in stood_in:
        config.pop(item.key)
    stand_in = platform_stand_in(subject, STACKS) if isinstance(subject, Blueprint) else None
    references = {stand_in[0].stack: stand_in[1]} if stand_in else {}
    required: set[str] = set()
    while True:
        try:
            run_under_mocks(lambda: runpy.run_path(str(ROOT / "__main__.py"), run_name="__main__"), stack=stack,
                            config=config, secret_keys=secrets, stack_references=references)
            return required
        except pulumi.ConfigMissingError as exc:
            assert exc.key not in required
            required.add(exc.key)
            config[exc.key] = "placeholder"


@pytest.mark.parametrize("stack", [s if s in REPRESENTATIVE else pytest.param(s, marks=pytest.mark.slow)
                                   for s in BUNDLED])
def test_the_program_requires_exactly_the_deploy_inputs_the_preview_names(stack):
    subject = read_config(STACKS / f"Pulumi.{stack}.yaml")
    named = {i.key for i in deploy_inputs(subject)}
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(ROOT)
        assert _required_by_the_program(stack) == named


def test_each_kind_of_deploy_input_comes_from_the_stack_that_needs_it():
    inputs = {stack: {i.key: i for i in deploy_inputs(read_config(STACKS / f"Pulumi.{stack}.yaml"))}
              for stack in BUNDLED}
    assert set(inputs["platform-prod-us-east-1"]) == {ALERT_RECEIVER_SECRET_KEY}
    assert set(inputs["chat-assistant-prod"]) == {HF_TOKEN_KEY}  # Llama: gated
    assert set(inputs["edge-classifier-prod"]) == {KUBECONFIG_KEY, ROLES_ANYWHERE_CA_KEY}
    assert inputs["edge-classifier-prod"][ROLES_ANYWHERE_CA_KEY].secret is False
    assert inputs["support-sentiment-prod"][KUBECONFIG_KEY].source_name == "KUBECONFIG_SUPPORT_SENTIMENT_PROD"
    assert inputs["prototype-summarizer-pilot"] == {}  # SageMaker runs no sync Job
    assert inputs["search-relevance-prod"] == {}  # s3:// weights


def test_gated_hugging_face_repositories_are_in_the_catalog():
    assert gated("hf://meta-llama/Llama-3.1-8B-Instruct").access == "manual"
    assert gated("hf://mistralai/Mistral-7B-Instruct-v0.3").access == "auto"
    assert gated("hf://Qwen/Qwen2.5-7B-Instruct") is None
    assert gated("s3://bucket/meta-llama/") is None


def test_the_preview_names_every_missing_input_with_the_command_that_sets_it():
    report = bundled_review("chat-assistant-prod")
    assert [i.key for i in report.deploy_inputs] == [HF_TOKEN_KEY]
    [warning] = [w for w in report.warnings if w.startswith("set before `pulumi up`")]
    assert "pulumi config set --secret servingblueprints:hfToken <value> --stack chat-assistant-prod" in warning
    assert "meta-llama/Llama-3.1-8B-Instruct" in warning
    assert report.to_json()["deploy_inputs"][0]["key"] == HF_TOKEN_KEY
    assert report.clean  # a deploy input is set at deploy time: the review itself passes


def test_a_stack_file_that_sets_an_input_needs_no_placeholder(tmp_path):
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    for name in ("platform-prod-us-east-1", "chat-assistant-prod"):
        (stacks / f"Pulumi.{name}.yaml").write_text((STACKS / f"Pulumi.{name}.yaml").read_text())
    shutil.copytree(STACKS / "requirements", stacks / "requirements")  # what the stacks are judged against
    path = stacks / "Pulumi.chat-assistant-prod.yaml"
    data = yaml.safe_load(path.read_text())
    data["config"][HF_TOKEN_KEY] = {"secure": "v1:AAAA"}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    assert review("chat-assistant-prod", stacks).deploy_inputs == []


def test_the_workflows_set_every_deploy_input_before_pulumi_runs():
    for name, job in (("deploy.yml", "up-platforms"), ("pull-request.yml", "pulumi-preview")):
        steps = yaml.safe_load((ROOT / ".github" / "workflows" / name).read_text())["jobs"][job]["steps"]
        runs = [i for i, s in enumerate(steps) if ".ci/set-stack-config" in s.get("run", "")]
        pulumi_steps = [i for i, s in enumerate(steps) if s.get("with", {}).get("command") in ("up", "preview")]
        assert runs and pulumi_steps and runs[0] < pulumi_steps[0], name
        assert steps[runs[0]]["env"]["CONFIG"] == "${{ toJSON(matrix.config) }}"
    page = (ROOT / "docs" / "how-to" / "first-deploy.md").read_text()
    first_deploy = page[page.index("# First real deploy"):]
    for key in (ALERT_RECEIVER_SECRET_KEY, HF_TOKEN_KEY):
        assert f"pulumi config set --secret {key}" in first_deploy, key


def _fake_pulumi(folder: Path) -> Path:
    """A `pulumi` on PATH that records its arguments and stdin."""
    script = folder / "pulumi"
    script.write_text('#!/usr/bin/env bash\necho "$* <- $(cat -)" >> "$(dirname "$0")/calls.log"\n')
    script.chmod(0o755)
    return folder / "calls.log"


def _set_config(folder: Path, config: list[dict], secrets: dict, variables: dict) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{folder}:{os.environ['PATH']}", "CONFIG": json.dumps(config),
           "SECRETS": json.dumps(secrets), "VARIABLES": json.dumps(variables)}
    return subprocess.run([str(ROOT / ".ci" / "set-stack-config"), "org/edge-prod"], env=env, capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=60)


def test_set_stack_config_sets_each_key_from_its_secret_or_variable_and_fails_naming_a_missing_one(tmp_path):
    calls = _fake_pulumi(tmp_path)
    config = [{"key": KUBECONFIG_KEY, "secret": True, "from": "KUBECONFIG_EDGE_PROD"},
              {"key": ROLES_ANYWHERE_CA_KEY, "secret": False, "from": "ROLES_ANYWHERE_CA_BUNDLE_EDGE_PROD"}]
    done = _set_config(tmp_path, config, {"KUBECONFIG_EDGE_PROD": "apiVersion: v1"},
                       {"ROLES_ANYWHERE_CA_BUNDLE_EDGE_PROD": "-----BEGIN CERTIFICATE-----"})
    assert done.returncode == 0, done.stderr
    lines = calls.read_text().splitlines()
    assert lines[0].startswith("stack select --create org/edge-prod")
    assert f"config set --secret {KUBECONFIG_KEY} --stack org/edge-prod <- apiVersion: v1" in lines
    assert f"config set {ROLES_ANYWHERE_CA_KEY} --stack org/edge-prod <- -----BEGIN CERTIFICATE-----" in lines
    missing = _set_config(tmp_path, config, {}, {})
    assert missing.returncode != 0 and "needs servingblueprints:kubeconfig" in missing.stderr
    assert "secret KUBECONFIG_EDGE_PROD" in missing.stderr


def test_subnets_avoid_the_zones_eks_refuses_and_are_placed_by_zone_id():
    report = bundled_review("platform-prod-us-east-1")
    subnets = [r for r in report.resources if r.type == "aws:ec2/subnet:Subnet"]
    zones = {r.inputs["availabilityZoneId"] for r in subnets}
    assert "use1-az3" not in zones and len(zones) == 3  # the mock maps this account's us-east-1a to use1-az3
    assert _zone_findings(report) == []
    refused = dataclasses.replace(subnets[0], inputs={**subnets[0].inputs, "availabilityZoneId": "use1-az3"})
    by_name = dataclasses.replace(subnets[1], inputs={k: v for k, v in subnets[1].inputs.items()
                                                      if k != "availabilityZoneId"} | {"availabilityZone": "us-east-1a"})
    edited = dataclasses.replace(report, resources=[refused if r.urn == refused.urn else by_name if r.urn == by_name.urn
                                                    else r for r in report.resources])
    messages = _zone_findings(edited)
    assert len(messages) == 2
    assert any("use1-az3" in m and "refuses cluster subnets" in m for m in messages)
    assert any("'us-east-1a'" in m and "availabilityZoneId" in m for m in messages)


def _zone_findings(report: PreviewReport) -> list[str]:
    return [f.message for f in check_deployability(report, stacks_dir=STACKS) if f.check == "eks-zones"]
