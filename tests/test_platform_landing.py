"""A service stack against the platform stack it lands on, as the preview, the program and CI read them: the
StackReference override, landing consistency, the platform stack config CI needs, the Kubernetes upgrade against the
base branch, stack-config keys that do not belong, and the platform's plan.md. Bad input exits 2 naming the file,
the field and the fix; a deployability finding exits 1 naming the check."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from blueprints.contracts.blueprint import Blueprint
from blueprints.cli import app
from blueprints.core.errors import BlueprintError, StackConfigError
from blueprints.contracts.platform import PlatformConfig, PlatformKind
from blueprints.review.preview import landing_problems, mock_outputs, run_preview
from blueprints.review.stack import environment_guardrails
from blueprints.contracts.stackconfig import (
    BLUEPRINT_KEY, CLUSTER_ADDONS_KEY, PLATFORM_KEY, read_config, read_platform_config, read_stack_config,
    render_stack_config,
)
from blueprints.review.stacks import list_stacks
from tests.conftest import ROOT, requirements_with

STACKS = ROOT / "stacks"
PLATFORM = "platform-prod-us-east-1"
CHAT = "chat-assistant-prod"
EDGE = "edge-classifier-prod"
runner = CliRunner()


@pytest.fixture()
def project(tmp_path, monkeypatch) -> Path:
    """A copy of the project (program, Pulumi.yaml, stack configs, policy configs) as the working directory."""
    shutil.copy(ROOT / "__main__.py", tmp_path / "__main__.py")
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    shutil.copytree(STACKS, tmp_path / "stacks")  # with the requirements each stack is judged against
    shutil.copytree(ROOT / "policies" / "config", tmp_path / "policies" / "config")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def edit(project: Path, stack: str, change) -> Path:
    path = project / "stacks" / f"Pulumi.{stack}.yaml"
    data = yaml.safe_load(path.read_text())
    change(data["config"])
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def exits(args: list[str], code: int, *messages: str) -> str:
    result = runner.invoke(app, args)
    output = " ".join(result.output.split())
    assert result.exit_code == code, output
    assert "Traceback" not in output
    for message in messages:
        assert message in output, output
    return output


def chat() -> Blueprint:
    return read_stack_config(STACKS / f"Pulumi.{CHAT}.yaml")


def platform() -> PlatformConfig:
    return read_platform_config(STACKS / f"Pulumi.{PLATFORM}.yaml")


# --- servingblueprints:platformStack --------------------------------------------------------------------------------


def test_a_platform_stack_override_naming_another_stack_exits_2_naming_the_key_and_fix(project):
    path = edit(project, CHAT, lambda c: c.__setitem__("servingblueprints:platformStack",
                                                       "acme/servingblueprints/platform-dev-us-west-2"))
    exits(["preview", CHAT], 2, f"{path.relative_to(project)}: servingblueprints:platformStack: names stack "
          f"'platform-dev-us-west-2' but {CHAT} was planned for platform {PLATFORM}",
          f"point it at <org>/<project>/{PLATFORM}")


@pytest.mark.parametrize("value", ["acme/platform-prod-us-east-1", "acme//platform-prod-us-east-1"])
def test_a_platform_stack_override_that_is_not_org_project_stack_is_refused(project, value):
    edit(project, CHAT, lambda c: c.__setitem__("servingblueprints:platformStack", value))
    exits(["preview", CHAT], 2, f"servingblueprints:platformStack: '{value}' is not <org>/<project>/<stack>")


def test_a_stack_reference_the_preview_cannot_stand_in_for_exits_2_not_a_traceback(project):
    program = project / "other.py"
    program.write_text("import pulumi\npulumi.StackReference('acme/servingblueprints/platform-elsewhere')\n")
    with pytest.raises(StackConfigError, match=r"stack reference 'acme/servingblueprints/platform-elsewhere': no "
                                               r"such stack \(the offline preview knows platform-prod-us-east-1\)"):
        run_preview(CHAT, stacks_dir=project / "stacks", program=program)


# --- landing consistency: the service against its platform's stack config ------------------------------------------


def test_the_bundled_services_land_on_their_platforms_as_planned():
    for path in sorted(STACKS.glob("Pulumi.*.yaml")):
        subject = read_config(path)
        if isinstance(subject, Blueprint) and subject.platform.stack:
            assert landing_problems(subject, read_platform_config(STACKS / f"Pulumi.{subject.platform.stack}.yaml")) \
                == [], path.name


@pytest.mark.parametrize(("change", "problem"), [
    ({"region": "us-west-2"}, "the platform is in us-west-2 but the service in us-east-1"),
    ({"kind": PlatformKind.NETWORK}, "the service runs on EKS but the platform is network-only (no cluster)"),
    ({"kubernetes_version": "1.34"}, "the service records Kubernetes 1.35 but the platform runs 1.34"),
    ({"services": ["search-relevance-prod"]}, "the platform's services (search-relevance-prod) do not list "
                                              "chat-assistant-prod"),
])
def test_a_service_that_does_not_land_on_its_platform_as_planned_is_named(change, problem):
    assert landing_problems(chat(), platform().model_copy(update=change)) == [problem]


def test_a_spot_service_on_a_platform_that_allows_no_spot_is_named():
    dev = read_stack_config(STACKS / "Pulumi.chat-assistant-dev.yaml")
    dev_platform = read_platform_config(STACKS / "Pulumi.platform-dev-us-west-2.yaml")
    assert dev.compute.capacity_type.value == "spot" and dev_platform.spot_allowed
    assert landing_problems(dev, dev_platform.model_copy(update={"spot_allowed": False})) == [
        "the service runs on spot capacity but the platform's spot_allowed is false"]


def test_an_eks_service_on_a_network_only_platform_exits_2_naming_both_files(project):
    def network_only(config: dict) -> None:
        config[PLATFORM_KEY].update(kind="network", addons=[], node_classes=[])

    platform_path = edit(project, PLATFORM, network_only)
    service_path = project / "stacks" / f"Pulumi.{CHAT}.yaml"
    exits(["preview", CHAT], 2, f"{service_path} and {platform_path}: "
          f"{CHAT} does not land on {PLATFORM} as planned: the service runs on EKS but the platform is network-only",
          "re-plan the service")


def test_a_service_recording_another_kubernetes_version_than_its_platform_exits_2(project):
    edit(project, CHAT, lambda c: c[BLUEPRINT_KEY]["platform"].__setitem__("kubernetes_version", "1.34"))
    exits(["preview", CHAT], 2, "the service records Kubernetes 1.34 but the platform runs 1.35")


# --- what CI lists and what a stack config may hold -----------------------------------------------------------------


def test_blueprint_stacks_refuses_a_service_whose_platform_config_is_missing(project):
    (project / "stacks" / f"Pulumi.{PLATFORM}.yaml").unlink()
    with pytest.raises(StackConfigError, match=rf"{CHAT} lands on platform {PLATFORM}, whose stack config "
                                               rf".*Pulumi.{PLATFORM}.yaml is missing; plan it first"):
        list_stacks(project / "stacks")
    exits(["stacks", "--json"], 2, f"lands on platform {PLATFORM}, whose stack config")


def test_cluster_addons_on_a_service_of_a_platform_are_refused(project):
    path = edit(project, CHAT, lambda c: c.__setitem__(CLUSTER_ADDONS_KEY, ["keda"]))
    with pytest.raises(StackConfigError) as exc:
        read_config(path)
    assert str(exc.value) == (f"{path}: {CLUSTER_ADDONS_KEY} declares an existing cluster's add-ons, but this stack "
                              f"runs on platform {PLATFORM}, which installs its add-ons; remove {CLUSTER_ADDONS_KEY}")


def test_a_stale_cluster_addons_key_is_dropped_when_the_requirements_drop_it():
    edge = read_stack_config(STACKS / f"Pulumi.{EDGE}.yaml")
    existing = yaml.safe_load((STACKS / f"Pulumi.{EDGE}.yaml").read_text())
    assert existing["config"][CLUSTER_ADDONS_KEY]  # the bundled edge cluster declares its add-ons
    existing["config"]["servingblueprints:hfToken"] = {"secure": "v1:abc"}  # set by hand: kept
    text = render_stack_config(edge, source="edge.yaml", existing=existing, cluster_addons=None)
    config = yaml.safe_load(text)["config"]
    assert CLUSTER_ADDONS_KEY not in config and config["servingblueprints:hfToken"] == {"secure": "v1:abc"}
    kept = render_stack_config(edge, source="edge.yaml", existing=existing, cluster_addons=["keda"])
    assert yaml.safe_load(kept)["config"][CLUSTER_ADDONS_KEY] == ["keda"]


def test_a_policy_folder_without_a_config_for_an_environment_is_refused(tmp_path):
    (tmp_path / "prod.json").write_text((ROOT / "policies" / "config" / "prod.json").read_text())
    req = requirements_with()  # dev (falls back to dev.json, absent here) and prod
    with pytest.raises(BlueprintError) as exc:
        environment_guardrails(req, tmp_path)
    assert str(exc.value).startswith(f"{tmp_path}: no policy config for environment 'dev': neither dev.json nor its "
                                     "fallback dev.json (non-production) exists")
    assert "or plan without guardrails with --no-policy" in str(exc.value)
    (tmp_path / "dev.json").write_text((ROOT / "policies" / "config" / "dev.json").read_text())
    assert set(environment_guardrails(req, tmp_path)) == {"dev", "prod"}


# --- the Kubernetes upgrade against the base branch -----------------------------------------------------------------


def test_a_platform_preview_that_skips_a_minor_version_against_its_baseline_exits_1(project):
    base = project / "base"
    exits(["preview", PLATFORM, "--out", str(base)], 0)
    report = json.loads((base / "plan.json").read_text())
    [cluster] = [r for r in report["resources"] if r["type"] == "aws:eks/cluster:Cluster"]
    assert cluster["inputs"]["version"] == "1.35"
    cluster["inputs"]["version"] = "1.33"  # what the base branch's cluster runs
    (base / "plan.json").write_text(json.dumps(report))
    exits(["preview", PLATFORM, "--baseline", str(base / "plan.json")], 1, "kubernetes-upgrade",
          "Kubernetes 1.33 -> 1.35 skips a minor version: EKS upgrades one minor version at a time; set "
          "kubernetes_version: \"1.34\" in platform.yaml")
    cluster["inputs"]["version"] = "1.34"  # one minor version up: fine
    (base / "plan.json").write_text(json.dumps(report))
    exits(["preview", PLATFORM, "--baseline", str(base / "plan.json")], 0)


# --- plan.md of a platform, the mock engine ------------------------------------------------------------------------


def test_a_platforms_plan_md_lists_what_it_runs_with_versions_and_draws_it(project):
    out = project / "out"
    exits(["preview", PLATFORM, "--out", str(out)], 0)
    text = (out / "plan.md").read_text()
    assert "| setting " in text and "|    |    |" not in text  # the Plan table has a header
    assert "| EKS cluster  | platform-prod-us-east-1, public API endpoint" in text
    assert "| Kubernetes 1.35 " in text
    for addon in platform().addons:
        assert f"chart {addon.id if addon.id != 'keda-http-add-on' else 'keda-add-ons-http'})" in text
        assert f"| {addon.version} " in text
    assert "AL2023_x86_64_STANDARD" in text
    assert "flowchart TB" in text and "karpenter-crd<br/>karpenter-crd 1.14.1" in text
    assert "p_platform_prod_us_east_1_addons_karpenter_crd --> p_platform_prod_us_east_1_addons_karpenter" in text


def test_a_mocked_iam_policy_has_a_global_iam_arn():
    policy_id, state = mock_outputs("aws:iam/policy:Policy", "lbc-policy", {"name": "AWSLoadBalancerController"},
                                    region="eu-west-1")
    assert state["arn"] == policy_id == "arn:aws:iam::123456789012:policy/AWSLoadBalancerController"


# --- what `blueprint plan` and `blueprint schema` write ------------------------------------------------------------


def test_planning_a_service_from_anywhere_rewrites_its_platforms_committed_bytes_header_and_all(tmp_path,
                                                                                                  monkeypatch):
    monkeypatch.chdir(tmp_path)  # `make demo` runs from the project; CI and people elsewhere
    exits(["plan", str(ROOT / "stacks" / "requirements" / "chat-assistant.yaml"), "--as-of", "2026-12-01",
           "--out-dir", str(tmp_path)], 0)
    for name in ("Pulumi.platform-prod-us-east-1.yaml", "Pulumi.platform-dev-us-west-2.yaml"):
        written = (tmp_path / name).read_text()
        assert written.startswith("# Generated by `blueprint plan` from every requirements file in stacks/requirements")
        assert written == (STACKS / name).read_text(), name


def test_blueprint_schema_platform_prints_the_platform_files_schema():
    result = runner.invoke(app, ["schema", "--platform"])
    assert result.exit_code == 0, result.output
    schema = json.loads(result.output)
    assert schema["title"] == "serving blueprints platform file (platform.yaml)"
    assert {"kubernetes_version", "system_nodes", "addon_versions", "spot", "access", "alerting", "platforms"} <= \
        set(schema["properties"])
    assert schema["additionalProperties"] is False


def test_the_program_itself_refuses_a_platform_stack_override_naming_another_platform(chat_prod):
    from tests.blueprint_builders import run_program

    # A real `pulumi up` never reaches the mock engine's stand-in: the program checks the override itself.
    with pytest.raises(StackConfigError, match=r"servingblueprints:platformStack: names stack "
                                               r"'platform-dev-us-west-2' but chat-assistant-prod was planned for "
                                               r"platform platform-prod-us-east-1"):
        run_program(chat_prod, extra_config={"servingblueprints:platformStack": "acme/infra/platform-dev-us-west-2"})
