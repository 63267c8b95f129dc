"""Today's GPUs in the catalog (B200, B300, RTX PRO 6000 Server Edition: p6-b200, p6-b300, g7e), planned on their
measured vLLM tables, and an instance family the catalog lacks refused where the requirements name it."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml
from typer.testing import CliRunner

from blueprints.cli import app
from blueprints.contracts.stackconfig import read_config
from blueprints.core import defaults
from blueprints.capacity.measured import covered_gpus
from tests.conftest import ROOT, example_data

runner = CliRunner()


def _project(tmp_path, monkeypatch, requirements: dict):
    """A project holding one requirements file (prod only: the dev policy allows no P family) and the bundled
    policy configs, as the working directory."""
    shutil.copytree(ROOT / "policies" / "config", tmp_path / "policies" / "config")
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    folder = tmp_path / "stacks" / "requirements"
    folder.mkdir(parents=True)
    (folder / "chat.yaml").write_text(yaml.safe_dump(requirements))
    (folder / "platform.yaml").write_text("alerting: {receiver: slack}\nplatforms:\n  prod-us-east-1: "
                                          "{audit_logging: true}\n")
    monkeypatch.chdir(tmp_path)


def _chat(families: list[str]) -> dict:
    data = example_data()
    data["hardware"]["allowed_instance_families"] = families
    data["budget"]["max_monthly_usd"] = 400_000
    data["environments"] = {"prod": data["environments"]["prod"]}
    return data


@pytest.mark.parametrize("family", ["x9z", "p6e-gb200", "g7"])
def test_a_family_the_catalog_lacks_is_refused_naming_the_field_and_the_known_families(tmp_path, monkeypatch,
                                                                                        catalog, family):
    _project(tmp_path, monkeypatch, _chat([family]))
    result = runner.invoke(app, ["plan", "stacks/requirements/chat.yaml"])
    assert result.exit_code == 2, result.output
    out = " ".join(result.output.split())
    assert "stacks/requirements/chat.yaml" in out
    assert f"hardware.allowed_instance_families[0]: instance family {family!r} is not in the catalog" in out
    assert f"use one of the known families: {', '.join(catalog.families)}" in out
    assert "p6-b200" in catalog.families and "g7e" in catalog.families
    assert "Traceback" not in result.output and not (tmp_path / "stacks" / "Pulumi.chat-prod.yaml").exists()


def test_a_p6_b200_plan_runs_on_b200s_timed_by_their_measured_vllm_tables(tmp_path, monkeypatch):
    data = _chat(["p6-b200"])
    # The family's one size, on the B200's measured tables whatever the traffic: 1 request/s, not the bundled 20,
    # simulates the fewest replicas (about half the plan's CPU).
    data["traffic"]["peak_requests_per_s"] = 1
    _project(tmp_path, monkeypatch, data)
    result = runner.invoke(app, ["plan", "stacks/requirements/chat.yaml", "--as-of", "2026-12-01"])
    assert result.exit_code == 0, result.output
    bp = read_config(tmp_path / "stacks" / "Pulumi.chat-assistant-prod.yaml")
    assert bp.compute.instance_type == "p6-b200.48xlarge"
    assert bp.predictions.capacity_source.startswith(
        "measured vLLM 0.24.0 kernel data (AIConfigurator 0.12.0, b200_sxm) for NVIDIA B200 180GB")


def test_every_new_gpu_with_tables_takes_the_measured_source():
    assert {"b200", "b300", "rtx-pro-6000"} <= set(covered_gpus())
    assert {"b200", "b300", "rtx-pro-6000"} <= set(defaults.MEASURED_STEP_GPUS)
    assert set(defaults.MEASURED_STEP_GPUS) <= set(covered_gpus())


def test_the_rtx_pro_6000_keeps_its_measured_all_reduce_and_the_l40s_its_scaled_one():
    """The library measured the RTX PRO 6000 on a node with GPU peer-to-peer (g7e has it), the L40S on one without:
    only the L40S tables scale the two-GPU all-reduce (tools/step_tables/refresh.py PCIE_GPUS)."""
    tables = ROOT / "blueprints" / "catalog" / "step_tables"
    for engine in ("vllm", "sglang", "tensorrt-llm"):
        source = {g: json.loads((tables / engine / f"{g}.json").read_text())["source"]
                  for g in ("rtx-pro-6000", "l40s")}
        assert "all-reduce beyond two GPUs scaled" in source["l40s"]
        assert "all-reduce" not in source["rtx-pro-6000"] and "rtx_pro_6000_server" in source["rtx-pro-6000"]
