"""Stable plans: re-planning over an existing stack config keeps its hardware while it stays feasible and within
`--switch-threshold` % of the cheapest option, and the rationale says which and why."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from blueprints.contracts.sections import Archetype
from blueprints.catalog import load_catalog
from blueprints.cli import app
from blueprints.plan.guardrails import Guardrails
from blueprints.plan.options.search import resolve_models
from blueprints.plan.options.nongen import search_nongen_options
from blueprints.plan.planner import plan
from blueprints.plan.stability import Hardware, hardware_of
from blueprints.contracts.stackconfig import read_stack_config
from tests.conftest import EXAMPLES, PLAN_DATE, ROOT, platforms_for, requirements_with

runner = CliRunner()
REGULATED = "stacks/requirements/regulated-assistant.yaml"


@pytest.fixture()
def project(tmp_path, monkeypatch):
    """The project layout with the regulated assistant (70B, prod on a private platform) and platform.yaml's EU
    platforms."""
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    (tmp_path / "stacks" / "requirements").mkdir(parents=True)
    shutil.copy(EXAMPLES / "regulated-assistant.yaml", tmp_path / "stacks" / "requirements")
    platform = yaml.safe_load((EXAMPLES / "platform.yaml").read_text())
    platform["platforms"] = {k: v for k, v in platform["platforms"].items() if "-eu-" in k}  # the EU ones it lands on
    (tmp_path / "stacks" / "requirements" / "platform.yaml").write_text(yaml.safe_dump(platform))
    shutil.copytree(ROOT / "policies" / "config", tmp_path / "policies" / "config")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def set_peak(project, rps: float, requirements: str = REGULATED, **hardware) -> None:
    path = project / requirements
    data = yaml.safe_load(path.read_text())
    data["traffic"]["peak_requests_per_s"] = rps
    data["budget"]["max_monthly_usd"] = None
    data["hardware"].update(hardware)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def plan_prod(*args: str, requirements: str = REGULATED):
    result = runner.invoke(app, ["plan", requirements, "--env", "prod", "--as-of", "2026-12-01", *args])
    assert result.exit_code == 0, result.output
    out = next((a for a in zip(args, args[1:]) if a[0] == "--out-dir"), (None, "stacks"))[1]
    name = Path(requirements).stem
    return read_stack_config(Path(out) / f"Pulumi.{name}-prod.yaml")


def hardware(bp) -> tuple:
    return bp.compute.instance_type, bp.engine.tensor_parallel_size, bp.engine.kv_cache_dtype


def test_re_planning_a_near_tie_keeps_the_hardware_and_the_rationale_says_so(project):
    set_peak(project, 4)  # 2x p5.48xlarge
    before = plan_prod()
    set_peak(project, 3)  # less traffic: afresh, another instance type (4x p4de.24xlarge) is a little cheaper
    fresh = plan_prod("--out-dir", "fresh")
    assert hardware(fresh) != hardware(before)
    kept = plan_prod()
    assert hardware(kept) == hardware(before)
    # The stability rule compares the planned peaks (the simulation may raise a stated peak afterwards).
    kept_usd, fresh_usd = kept.planned_monthly_usd, fresh.planned_monthly_usd
    above = (kept_usd / fresh_usd - 1) * 100
    assert 0 <= above <= 5
    assert kept.rationale[2] == (
        f"kept {before.compute.instance_type} (tensor_parallel_size={before.engine.tensor_parallel_size}) from the "
        f"existing stack config: within {above:.1f} % of the cheapest, {fresh.compute.instance_type} "
        f"(tensor_parallel_size={fresh.engine.tensor_parallel_size}) (${kept_usd:,.0f} vs "
        f"${fresh_usd:,.0f}/month); --switch-threshold 5")
    # A threshold below the difference switches, and says what it saves and that the node pool is replaced.
    switched = plan_prod("--switch-threshold", f"{above / 2:.2f}")
    assert hardware(switched) == hardware(fresh)
    assert switched.rationale[2].startswith(f"switched from {before.compute.instance_type} (tensor_parallel_size=")
    assert f"would cost {above:.1f} % more" in switched.rationale[2]
    assert switched.rationale[2].endswith("; the node pool is replaced")


def test_hardware_beyond_the_threshold_or_no_longer_allowed_is_switched_naming_why(catalog):
    # chat-assistant on L40S nodes only (the bundled requirements plan p5.4xlarge), where a dearer node of the same
    # GPU exists
    req = requirements_with(budget={"max_monthly_usd": None}, hardware={"allowed_instance_families": ["g6e"]})
    cheapest = plan(req, catalog, as_of=PLAN_DATE, environments=["prod"], platforms=platforms_for(req))[0]
    assert cheapest.compute.instance_type == "g6e.xlarge"
    # The same GPU and KV-cache dtype on a larger, dearer node.
    dear = Hardware(Archetype.VLLM_GPU, "g6e.2xlarge", 1, cheapest.engine.kv_cache_dtype)
    kept = plan(req, catalog, as_of=PLAN_DATE, environments=["prod"], platforms=platforms_for(req),
                existing={"chat-assistant-prod": dear}, switch_threshold_pct=100)[0]
    assert kept.compute.instance_type == dear.instance_type  # kept at a 100 % tolerance...
    above = (kept.predictions.monthly_cost_usd / cheapest.predictions.monthly_cost_usd - 1) * 100
    assert 5 < above <= 100  # ...and switched at the default 5 %
    [bp] = plan(req, catalog, as_of=PLAN_DATE, environments=["prod"], platforms=platforms_for(req),
                existing={"chat-assistant-prod": dear})
    assert bp.compute.instance_type == cheapest.compute.instance_type
    assert f"the existing hardware would cost {above:.1f} % more" in bp.rationale[2]
    req = requirements_with(budget={"max_monthly_usd": None})  # the bundled families: g5, g6, g6e, p5
    g6e_only_not = Guardrails(source="prod.json", allowed_instance_families=("g5", "g6", "p5", "m7i"))
    previous = Hardware(Archetype.VLLM_GPU, "g6e.xlarge", 1, "auto")
    [bp] = plan(req, catalog, as_of=PLAN_DATE, environments=["prod"], platforms=platforms_for(req),
                guardrails={"prod": g6e_only_not}, existing={"chat-assistant-prod": previous})
    assert bp.compute.instance_type.split(".")[0] != "g6e"
    assert bp.rationale[2].startswith("switched from g6e.xlarge (tensor_parallel_size=1) (the existing stack "
                                      "config) to ")
    assert "g6e.xlarge is no longer allowed" in bp.rationale[2]


def test_the_cheapest_hardware_itself_adds_no_sentence_and_the_plan_stays_a_pure_function():
    req = requirements_with()
    fresh = plan(req, load_catalog(), as_of=PLAN_DATE, platforms=platforms_for(req))
    same = {bp.stack: hardware_of(bp.model_dump(mode="json")) for bp in fresh}
    again = plan(req, load_catalog(), as_of=PLAN_DATE, platforms=platforms_for(req), existing=same)
    assert again == fresh == plan(req, load_catalog(), as_of=PLAN_DATE, platforms=platforms_for(req), existing=same)


def test_a_non_generative_replica_shape_is_kept_within_the_threshold(catalog):
    req = requirements_with("support-sentiment", hardware={"allowed_instance_families": ["c7g", "c7i", "m7i"],
                                                         "cpu_arch": None})
    model = resolve_models(req, catalog)
    options = search_nongen_options(req, "prod", model, catalog, accelerator=req.hardware.accelerators[0])
    best = options[0]
    other = next(o for o in options if o.nodes * o.node_usd_per_hour > best.nodes * best.node_usd_per_hour)
    previous = Hardware(Archetype.ONNX_CPU, other.instance.instance_type, cpu_per_replica=other.cpu_per_replica)
    existing = {"support-sentiment-prod": previous}
    kept = plan(req, catalog, as_of=PLAN_DATE, environments=["prod"], existing=existing, switch_threshold_pct=100)[0]
    assert (kept.compute.instance_type, kept.compute.cpu_per_replica) == (other.instance.instance_type,
                                                                          other.cpu_per_replica)
    assert kept.rationale[2].startswith(f"kept {previous.describe()} from the existing stack config: within ")
    switched = plan(req, catalog, as_of=PLAN_DATE, environments=["prod"], existing=existing, switch_threshold_pct=0)[0]
    assert switched.compute.instance_type == best.instance.instance_type
    assert switched.rationale[2].startswith(f"switched from {previous.describe()}")


def test_a_stack_config_recording_no_readable_hardware_plans_afresh():
    assert hardware_of({"archetype": "vllm-gpu", "compute": {"instance_type": "g6e.xlarge"}}) is None
    assert hardware_of("not a blueprint") is None
    recorded = {"archetype": "vllm-gpu", "compute": {"instance_type": "g6e.xlarge", "gpus_per_replica": 1,
                                                     "cpu_per_replica": 3},
                "engine": {"tensor_parallel_size": 1, "kv_cache_dtype": "fp8"}}
    assert hardware_of(recorded) == Hardware(Archetype.VLLM_GPU, "g6e.xlarge", 1, "fp8")


@pytest.mark.parametrize("value", ["-1", "101", "five"])
def test_the_switch_threshold_is_a_percentage_from_0_to_100(project, value):
    result = runner.invoke(app, ["plan", REGULATED, "--switch-threshold", value])
    assert result.exit_code == 2
    assert "--switch-threshold" in result.output


def test_plan_help_documents_the_switch_threshold():
    result = runner.invoke(app, ["plan", "--help"], terminal_width=200)
    assert "--switch-threshold PCT" in result.output
    assert "keeps its hardware" in result.output and "0<=x<=100" in result.output


def test_the_planner_refuses_a_switch_threshold_outside_0_to_100():
    from blueprints.core.errors import RequirementsError

    with pytest.raises(RequirementsError, match="--switch-threshold 150: a percentage from 0 to 100"):
        plan(requirements_with(), load_catalog(), as_of=PLAN_DATE, switch_threshold_pct=150)
