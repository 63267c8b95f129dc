"""Plans stay inside the policy pack they will be checked against: allowed families and the GPU quota."""

from __future__ import annotations

from tests.conftest import PLAN_DATE, write_stacks

import shutil

import pytest
from typer.testing import CliRunner

from blueprints.catalog import load_catalog
from blueprints.core.errors import RequirementsError, SizingError
from blueprints.plan.guardrails import Guardrails
from blueprints.plan.planner import plan
from blueprints.review.stack import environment_guardrails, review_stack
from tests.conftest import GUARDRAIL_ENGINES, ROOT, requirements_with

NO_BUDGET = {"max_monthly_usd": 1_000_000}
PROD = Guardrails(source="prod.json", allowed_instance_families=("g5", "g6", "g6e", "p5", "m7i"), max_gpus=64)


@pytest.mark.parametrize("engines", GUARDRAIL_ENGINES)
def test_without_own_families_the_plan_uses_only_the_environments(engines):
    req = requirements_with(hardware={"allowed_instance_families": []}, model={"precision": "int4"},
                            operations={"engines": engines})
    unrestricted = plan(req, load_catalog(), as_of=PLAN_DATE, environments=["prod"])[0]
    family = unrestricted.compute.instance_type.split(".")[0]
    others = tuple(f for f in ("g5", "g6", "g6e", "p5", "m7i") if f != family)  # the cheapest family ruled out
    limits = Guardrails(source="prod.json", allowed_instance_families=others, max_gpus=64)
    [bp] = plan(req, load_catalog(), as_of=PLAN_DATE, environments=["prod"], guardrails={"prod": limits})
    assert bp.compute.instance_type.split(".")[0] in limits.allowed_instance_families


def test_families_with_nothing_in_common_are_an_error():
    req = requirements_with(hardware={"allowed_instance_families": ["p4d"]})
    with pytest.raises(RequirementsError, match=r"environments.prod: .* have no family in common"):
        plan(req, load_catalog(), as_of=PLAN_DATE, environments=["prod"], guardrails={"prod": PROD})


@pytest.mark.parametrize("engines", GUARDRAIL_ENGINES)
def test_autoscaling_max_is_capped_to_the_gpu_quota(engines):
    req = requirements_with(environments={"prod": {"region": "us-east-1", "traffic_scale": 5}}, budget=NO_BUDGET,
                            operations={"engines": engines})
    [free] = plan(req, load_catalog(), as_of=PLAN_DATE, environments=["prod"])
    limits = Guardrails(source="prod.json", allowed_instance_families=None, max_gpus=free.compute.replicas + 4)
    [bp] = plan(req, load_catalog(), as_of=PLAN_DATE, environments=["prod"], guardrails={"prod": limits})
    assert free.node_pool_max_nodes * free.compute.gpus_per_node > limits.max_gpus
    assert bp.node_pool_max_nodes * bp.compute.gpus_per_node <= limits.max_gpus
    assert bp.autoscaling.max_replicas >= bp.compute.replicas
    assert any("capped" in line and "maxGpus" in line for line in bp.rationale)


@pytest.mark.parametrize("engines", GUARDRAIL_ENGINES)
def test_a_peak_beyond_the_gpu_quota_is_an_error_naming_the_file(engines):
    req = requirements_with(environments={"prod": {"region": "us-east-1", "traffic_scale": 10}}, budget=NO_BUDGET,
                            operations={"engines": engines})
    with pytest.raises(SizingError, match=r"no option meeting the SLO stays within gpu-quota: the cheapest, .* needs "
                                          r"\d+ GPUs with the rollout surge, above maxGpus=8 \(prod.json, gpu-quota\); .*"
                                          r"raise maxGpus in prod.json to >= \d+"):
        plan(req, load_catalog(), as_of=PLAN_DATE, environments=["prod"],
             guardrails={"prod": Guardrails(source="prod.json", allowed_instance_families=None, max_gpus=8)})


@pytest.mark.parametrize("engines", GUARDRAIL_ENGINES)
@pytest.mark.parametrize("changes", [
    {"hardware": {"allowed_instance_families": []}, "model": {"precision": "int4"}},
    {"environments": {"prod": {"region": "us-east-1", "traffic_scale": 10}}, "budget": NO_BUDGET},
])
def test_what_plan_writes_passes_the_policy_pack_it_is_checked_against(tmp_path, changes, engines):
    req = requirements_with(**changes, operations={"engines": engines})
    limits = environment_guardrails(req, ROOT / "policies" / "config")
    blueprints = plan(req, load_catalog(), as_of=PLAN_DATE, environments=["prod"], guardrails=limits)
    write_stacks(blueprints, tmp_path)
    report = review_stack("chat-assistant-prod", stacks_dir=tmp_path, program=ROOT / "__main__.py",
                          policy_config=ROOT / "policies" / "config" / "prod.json")
    assert report.mandatory_violations == []


def test_the_cli_plans_within_the_policy_folder(tmp_path, monkeypatch):
    from blueprints.cli import app

    shutil.copytree(ROOT / "policies" / "config", tmp_path / "policies" / "config")
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")  # the project root the policy folder is found from
    folder = tmp_path / "stacks" / "requirements"
    folder.mkdir(parents=True)
    (folder / "req.yaml").write_text((ROOT / "stacks" / "requirements" / "chat-assistant.yaml").read_text()
                                     .replace("  allowed_instance_families: [g5, g6, g6e, p5]\n", "")
                                     .replace("precision: bf16", "precision: int4"))
    (folder / "platform.yaml").write_text("alerting: {receiver: slack}\nplatforms:\n  dev-us-west-2: "
                                          "{audit_logging: true}\n  prod-us-east-1: {audit_logging: true}\n")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["plan", "stacks/requirements/req.yaml", "--env", "prod"])
    assert result.exit_code == 0, result.output
    assert "g4dn" not in result.output


def test_guardrail_sources_are_relative_to_the_project_so_plans_do_not_depend_on_the_checkout(tmp_path):
    """A plan quotes the policy config it respected; an absolute path would make every checkout re-plan differently."""
    copy = tmp_path / "elsewhere"
    shutil.copytree(ROOT / "policies", copy / "policies")
    shutil.copy(ROOT / "Pulumi.yaml", copy / "Pulumi.yaml")
    req = requirements_with("regulated-assistant")
    here = environment_guardrails(req, ROOT / "policies" / "config")
    there = environment_guardrails(req, copy / "policies" / "config")
    assert {env: g.source for env, g in here.items()} == {env: g.source for env, g in there.items()}
    assert here["staging"].source == "policies/config/staging.json"
